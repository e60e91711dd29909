"""The timing records (wire.Timing, TimingStats, CompileFigures) as the judge builds them:
a key none of them declares is refused where it is written, and the judge's own timing,
built by the timing phase (judge.timing_phase.measure) from a stand-in measurement, holds only
declared keys of their declared types. The CPU path never times (Run.timing is the GPU's), so a
real CPU evaluation has no timing to check; the measurement is a stand-in here instead."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Callable, FrozenSet, Mapping, MutableMapping, Sequence, TypeVar

import pytest
import torch

from kforge_harness import baselines, defaults, timed, wire
from kforge_harness.judge import timing_phase
from kforge_harness.judge.reference import Reference

from jobs import job, judged

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound=MutableMapping[str, Any])


def check_declared(record_class: type[DataclassInstance], record: Mapping[str, Any]) -> None:
    """Every key of `record` is a field or a passed-through key of `record_class`, and
    every field present has its declared JSON type once on the wire."""
    record = json.loads(json.dumps(record))
    allowed = {f.name: f for f in dataclasses.fields(record_class)}
    passed_through: FrozenSet[str] = getattr(record_class, "PASSED_THROUGH", frozenset())
    for key, value in record.items():
        assert key in allowed or key in passed_through, "%s.%s is not declared" % (record_class.__name__, key)
        if key in allowed:
            expected, nullable, absent = wire.field_type(record_class, allowed[key])
            assert wire.fits(value, expected, nullable, absent), "%s.%s is %s, declared %s" % (
                record_class.__name__, key, wire.json_type(value), expected)


def test_no_field_is_declared_and_passed_through_at_once() -> None:
    for record_class in (wire.Timing, wire.TimingStats, wire.CompileFigures):
        fields = {f.name for f in dataclasses.fields(record_class)}
        assert not fields & record_class.PASSED_THROUGH, record_class.__name__


@pytest.mark.parametrize("record, key", [
    (wire.TimingRecord, "scroe"),
    (wire.TimingStatsRecord, "median"),
    (wire.CompileFiguresRecord, "speedup"),
])
def test_an_undeclared_timing_key_is_refused_where_it_is_written(record: type[wire.Record], key: str) -> None:
    built = record()
    with pytest.raises(KeyError, match="%r is not a field of" % key):
        built[key] = 1.0
    with pytest.raises(KeyError, match="%r is not a field of" % key):
        built.update({key: 1.0})
    with pytest.raises(KeyError, match="%r is not a field of" % key):
        record({key: 1.0})
    assert built == {}


def test_passed_through_keys_are_taken_and_reach_the_wire() -> None:
    figures = wire.TimingStatsRecord({"median_ms": 0.5, "host_queue_ms": 0.01})
    timing = wire.TimingRecord({"score": 2.0, "runs_score_low": 1.9, "reference": figures})
    assert json.loads(json.dumps(timing)) == {"score": 2.0, "runs_score_low": 1.9,
                                              "reference": {"median_ms": 0.5, "host_queue_ms": 0.01}}


def test_the_compile_baseline_records_are_declared() -> None:
    measured = baselines.figures("default", 3.0, {"median_ms": 2.0}, {"median_ms": 1.0, "runs": 30}, (1.9, 2.1))
    assert isinstance(measured, wire.CompileFiguresRecord)
    check_declared(wire.CompileFigures, measured)
    check_declared(wire.CompileFigures, baselines.unavailable("default", "did not compile", 12.0))


class Clock:
    timeouts = 0

    def mark(self, name: str) -> None:
        pass


class Meter:
    def sample(self) -> None:
        pass


def outcome(windows_ms: Sequence[float], forwards: int = 1) -> timed.Outcome:
    out = timed.Outcome(forwards)
    out.windows = list(windows_ms)
    out.queues = [0.02] * len(windows_ms)
    out.reported = [w - 0.05 for w in windows_ms]
    out.checked = [3, 7]
    out.precision_reached = True
    return out


def stand_in_measure(monkeypatch: pytest.MonkeyPatch) -> Callable[[torch.Tensor], wire.TimingRecord]:
    """The timing phase (judge.timing_phase.measure) on stand-in windows: 40 runs of the
    reference at about 1.1 ms a window, of the kernel at about 0.6 ms, nulls at 0.1 ms.
    Returns measure(flush)."""
    ref_out = outcome([1.1 + 0.001 * (i % 7) for i in range(40)])
    kernel_out = outcome([0.6 + 0.001 * (i % 5) for i in range(40)])
    nulls = [0.1 + 0.0005 * (i % 3) for i in range(40)]
    monkeypatch.setattr(timing_phase, "time_runs", lambda *args, **kwargs: (nulls, ref_out, kernel_out))
    monkeypatch.setattr(timing_phase, "gpu_clocks", lambda device: None)
    monkeypatch.setattr(timing_phase, "environment", lambda run, tf32, before: {"timing_method": "stand-in"})
    run = judged(job(compile_baseline=True, baseline="best"), device={"name": "stand-in"})
    run.clock, run.meter = Clock(), Meter()
    null = {"overhead_ms": 0.1, "queue_ms": 0.01, "floor_ms": 0.09, "spread_ms": 0.01, "runs": 40}
    reference = Reference.none(run)
    reference.side = type("Side", (), {"null": dict(null), "clock": Clock()})()
    monkeypatch.setattr(reference, "let_go", lambda: None)  # no process to tell
    kernel_side = type("Side", (), {"null": dict(null), "clock": Clock()})()
    seconds = timing_phase.Baselines(
        compiled=dict(baselines.figures("default", 3.0, {"median_ms": 1.0}, {"median_ms": 0.8}, (1.2, 1.3)),
                      cached=False),
        defaults=dict(defaults.figures("strict", "float32 convolutions", {"median_ms": 1.0}, {"median_ms": 0.4},
                                       (2.4, 2.6)), cached=False))
    return lambda flush: timing_phase.measure(run, reference, kernel_side, flush, None, lambda: 0.0, seconds)


def test_the_judges_timing_holds_only_declared_keys_of_their_types(monkeypatch: pytest.MonkeyPatch) -> None:
    timing = stand_in_measure(monkeypatch)(torch.zeros(16))
    assert isinstance(timing, wire.TimingRecord)
    assert timing["score"] is not None and timing["compile"] is not None  # every part was built
    check_declared(wire.Timing, timing)
    for side in ("reference", "kernel"):
        assert isinstance(timing[side], wire.TimingStatsRecord)
        check_declared(wire.TimingStats, timing[side])
    check_declared(wire.CompileFigures, timing["compile"])
    check_declared(wire.DefaultsFigures, timing["defaults"])
    assert timing["score_vs_defaults"] < timing["score"]
    # What kforge reads of it is there: the Rust side's fields, not left to their defaults.
    declared = {f.name for f in dataclasses.fields(wire.TimingStats)} - {"cached"}
    assert declared <= set(timing["kernel"])


def test_a_key_added_to_the_judges_timing_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    measure = stand_in_measure(monkeypatch)
    original = baselines.against_compile

    def misspelt(timing_result: T, compiled: Mapping[str, Any] | None, choice: str) -> T:
        timing_result["score_vs_compiled"] = 1.0
        return original(timing_result, compiled, choice)

    monkeypatch.setattr(baselines, "against_compile", misspelt)
    with pytest.raises(KeyError, match="'score_vs_compiled' is not a field of a timing"):
        measure(torch.zeros(16))

