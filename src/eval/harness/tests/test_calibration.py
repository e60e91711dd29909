"""How long the judge calibrates each process's null windows (timed.calibrate)."""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

import pytest
import torch

from kforge_harness import timed
from kforge_harness.window import Run, WindowClock


def fake_run(window_ms: float) -> Run:
    return Run(window_ms, window_ms / 2, 0.01, {}, None)


class FakeClock(WindowClock):
    def __init__(self) -> None:
        self.gate = None

    def gating(self) -> bool:
        return False


class FakeSide(timed.Side):
    """A process whose null windows are `center` ms give or take `jitter` ms."""

    def __init__(self, center: float, jitter: float, seed: int) -> None:
        self.center, self.jitter = center, jitter
        self.rng = random.Random(seed)
        self.clock = FakeClock()
        self.slots = []
        self.armed_s = timed.ARMED_FLOOR_S
        self.null = None
        self.calls = 0

    def run(self, mode: str, run: int, write_inputs: Callable[[], object], flush: Optional[torch.Tensor],
            armed_within_s: Optional[float], snapshot: Optional[Callable[[], Any]] = None, gated: bool = True,
            forwards: int = 1) -> Run:
        self.calls += 1
        return fake_run(self.center + self.rng.uniform(-self.jitter, self.jitter))


def calibrate(monkeypatch: pytest.MonkeyPatch, *sides: FakeSide) -> None:
    monkeypatch.setattr(timed, "fill_time", lambda slots, gate, forwards=1: 0.0)
    monkeypatch.setattr(timed, "warm_nulls", lambda side, write, flush: None)
    timed.calibrate([(side, lambda: None) for side in sides], None, lambda phase: None)


def null_of(side: FakeSide) -> dict[str, Any]:
    null: Optional[dict[str, Any]] = side.null
    assert null is not None
    return null


def test_a_steady_window_is_known_after_the_minimum_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 GiB of inputs written in every window: ~1.37 ms, steady to a microsecond.
    ref, kernel = FakeSide(1.37, 0.0005, 1), FakeSide(1.37, 0.0005, 2)
    calibrate(monkeypatch, ref, kernel)
    assert null_of(ref)["runs"] == null_of(kernel)["runs"] == timed.CALIBRATION_MIN_RUNS
    assert abs(null_of(ref)["overhead_ms"] - 1.37) < 0.001


def test_a_jittery_short_window_takes_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 50 us window that moves by +-10 us is never known to a quarter of a microsecond.
    ref, kernel = FakeSide(0.05, 0.0005, 3), FakeSide(0.05, 0.01, 4)
    calibrate(monkeypatch, ref, kernel)
    assert null_of(ref)["runs"] == null_of(kernel)["runs"] == timed.CALIBRATION_RUNS


def test_known_within_the_larger_of_the_absolute_and_the_relative_allowance() -> None:
    steady = [0.05 + 0.00001 * (i % 3) for i in range(15)]
    assert timed.null_known(steady)
    # +-2 us is within 0.1% of a 4 ms window, not of a 0.2 ms one.
    assert timed.null_known([4.0 + 0.002 * (-1) ** i for i in range(15)])
    assert not timed.null_known([0.2 + 0.002 * (-1) ** i for i in range(15)])
