"""KernelBench's reference-timing protocol: the pure rules (trial count, discard, statistics)
and, with CUDA replaced by a recorder, the order of the steps in each trial."""

from __future__ import annotations

import statistics
from typing import Literal

import pytest
import torch

from kforge_harness import kbprotocol


def test_one_extra_trial_runs_to_be_discarded() -> None:
    assert kbprotocol.total_trials() == 101
    assert kbprotocol.total_trials(10, 0) == 10
    with pytest.raises(ValueError):
        kbprotocol.total_trials(0, 1)
    with pytest.raises(ValueError):
        kbprotocol.total_trials(10, -1)


def test_the_first_trial_is_discarded_and_only_the_first() -> None:
    assert kbprotocol.kept_trials([9.0, 1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]
    assert kbprotocol.kept_trials([9.0, 1.0, 2.0], discard_first=0) == [9.0, 1.0, 2.0]
    assert kbprotocol.kept_trials([9.0, 8.0, 2.0], discard_first=2) == [2.0]


def test_statistics_are_kernelbenchs_with_the_population_std() -> None:
    times = [1.0, 2.0, 4.0, 7.0]
    stats = kbprotocol.timing_stats(times)
    assert stats["mean_ms"] == 3.5
    assert stats["min_ms"] == 1.0 and stats["max_ms"] == 7.0
    assert stats["median_ms"] == 3.0
    assert stats["runs"] == 4
    # numpy's np.std (ddof=0), not the sample std kforge's own timing reports.
    assert stats["std_ms"] == pytest.approx(statistics.pstdev(times))
    assert stats["std_ms"] != pytest.approx(statistics.stdev(times))
    assert kbprotocol.timing_stats([3.0, 1.0, 2.0])["median_ms"] == 2.0
    with pytest.raises(ValueError):
        kbprotocol.timing_stats([])


def test_statistics_agree_with_numpy_when_it_is_there() -> None:
    numpy = pytest.importorskip("numpy")
    times = [0.0612, 0.0598, 0.0605, 0.0701, 0.0600, 0.0599]
    stats = kbprotocol.timing_stats(times)
    assert stats["mean_ms"] == pytest.approx(float(numpy.mean(times)))
    assert stats["std_ms"] == pytest.approx(float(numpy.std(times)))
    assert stats["median_ms"] == pytest.approx(float(numpy.median(times)))


class Recorder:
    """Stands in for CUDA: every call is appended to `calls`; event i reports i + 1 ms."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.events = 0

    def event(self, enable_timing: bool = False) -> object:
        recorder = self
        recorder.events += 1
        number = recorder.events

        class Event:
            def record(self) -> None:
                recorder.calls.append("record%d" % number)

            def elapsed_time(self, end: object) -> float:
                # Start events are odd-numbered: trial k (from 0) reports k + 1 ms.
                return float((number + 1) // 2)

        self.calls.append("event")
        return Event()

    def empty(self, shape: tuple[int, ...], dtype: object = None, device: object = None) -> object:
        recorder = self

        class Dummy:
            def fill_(self, value: int) -> None:
                recorder.calls.append("thrash %s %s fill %s" % (tuple(shape), dtype, value))

        return Dummy()


def test_each_trial_thrashes_l2_between_the_event_creation_and_the_start_event(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = Recorder()

    class DeviceScope:
        def __init__(self, device: object) -> None:
            rec.calls.append("device %s" % device)

        def __enter__(self) -> DeviceScope:
            return self

        def __exit__(self, *exc: object) -> Literal[False]:
            return False

    monkeypatch.setattr(torch.cuda, "device", DeviceScope)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: rec.calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: rec.calls.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "Event", rec.event)
    monkeypatch.setattr(torch, "empty", rec.empty)
    inputs = [object(), object()]

    def model(*args: object) -> str:
        assert args == tuple(inputs), "every trial gets the same inputs"
        assert not torch.is_grad_enabled(), "the model runs under no_grad"
        rec.calls.append("forward")
        return "out"

    stats = kbprotocol.time_model(model, inputs, "cuda:0", num_warmup=2, num_trials=3)
    thrash = "thrash (32, 1024, 1024) torch.int64 fill 42"
    warmup = ["forward", "sync"] * 2
    def trial(n: int) -> list[str]:
        return ["sync", "event", "event", thrash, "record%d" % (2 * n - 1), "forward",  # noqa: E731
                       "record%d" % (2 * n), "sync"]
    expected = ["device cuda:0", "sync"] + warmup + ["empty_cache"] + trial(1) + trial(2) + trial(3) + trial(4)
    assert rec.calls == expected
    # Trial times 1, 2, 3, 4 ms; the first is discarded.
    assert stats["runs"] == 3
    assert (stats["min_ms"], stats["median_ms"], stats["max_ms"], stats["mean_ms"]) == (2.0, 3.0, 4.0, 3.0)
    assert stats["warmup"] == 2 and stats["discarded"] == 1
    assert stats["l2_thrash_bytes"] == 256 * 1024 * 1024


def test_rounds_start_with_kforge_and_alternate() -> None:
    assert kbprotocol.round_orders(1) == [kbprotocol.KFORGE_FIRST]
    assert kbprotocol.round_orders(4) == [kbprotocol.KFORGE_FIRST, kbprotocol.KERNELBENCH_FIRST,
                                          kbprotocol.KFORGE_FIRST, kbprotocol.KERNELBENCH_FIRST]


def test_rounds_need_at_least_one() -> None:
    with pytest.raises(ValueError):
        kbprotocol.round_orders(0)
