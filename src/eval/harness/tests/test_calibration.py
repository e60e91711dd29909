"""How long the judge calibrates each process's null windows (timed.calibrate)."""

import random

from kforge_harness import timed


class FakeRun:
    def __init__(self, window_ms):
        self.window_ms = window_ms
        self.tail_ms = window_ms / 2
        self.queue_ms = 0.01


class FakeClock:
    gate = None

    def gating(self):
        return False


class FakeSide:
    """A process whose null windows are `center` ms give or take `jitter` ms."""

    def __init__(self, center, jitter, seed):
        self.center, self.jitter = center, jitter
        self.rng = random.Random(seed)
        self.clock = FakeClock()
        self.slots = []
        self.armed_s = timed.ARMED_FLOOR_S
        self.calls = 0

    def run(self, mode, run, write, flush, armed_within_s, snapshot=None, gated=True, forwards=1):
        self.calls += 1
        return FakeRun(self.center + self.rng.uniform(-self.jitter, self.jitter))


def calibrate(monkeypatch, *sides):
    monkeypatch.setattr(timed, "fill_time", lambda slots, gate, forwards=1: 0.0)
    monkeypatch.setattr(timed, "warm_nulls", lambda side, write, flush: None)
    timed.calibrate([(side, lambda: None) for side in sides], None, lambda phase: None)


def test_a_steady_window_is_known_after_the_minimum_runs(monkeypatch):
    # 1 GiB of inputs written in every window: ~1.37 ms, steady to a microsecond.
    ref, kernel = FakeSide(1.37, 0.0005, 1), FakeSide(1.37, 0.0005, 2)
    calibrate(monkeypatch, ref, kernel)
    assert ref.null["runs"] == kernel.null["runs"] == timed.CALIBRATION_MIN_RUNS
    assert abs(ref.null["overhead_ms"] - 1.37) < 0.001


def test_a_jittery_short_window_takes_every_run(monkeypatch):
    # A 50 us window that moves by +-10 us is never known to a quarter of a microsecond.
    ref, kernel = FakeSide(0.05, 0.0005, 3), FakeSide(0.05, 0.01, 4)
    calibrate(monkeypatch, ref, kernel)
    assert ref.null["runs"] == kernel.null["runs"] == timed.CALIBRATION_RUNS


def test_known_within_the_larger_of_the_absolute_and_the_relative_allowance():
    steady = [0.05 + 0.00001 * (i % 3) for i in range(15)]
    assert timed.null_known(steady)
    # +-2 us is within 0.1% of a 4 ms window, not of a 0.2 ms one.
    assert timed.null_known([4.0 + 0.002 * (-1) ** i for i in range(15)])
    assert not timed.null_known([0.2 + 0.002 * (-1) ** i for i in range(15)])
