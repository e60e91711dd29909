"""The judge's compile baseline (judge.compile_baseline.compile_baseline) with a stand-in for its
measurement: a cached record is read, a measured one cached, and whatever goes wrong while
measuring (the compiled process, the reference's, memory, a bug) costs the baseline only,
never the evaluation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import pytest

from kforge_harness import baselines
from kforge_harness.judge import CompileUnavailable
from kforge_harness.judge.compile_baseline import compile_baseline
from kforge_harness.judge.reference import Second
from kforge_harness.judge.timing_phase import Baselines
from kforge_harness.cachekeeper import Keeper
from kforge_harness.protocol import HarnessError, KernelFailure, TaskFailure

from jobs import JOB, job, judged


INPUTS = [["in[0]", [4, 4], "torch.float32"]]  # the inputs' signature, as the key reads them


def stand_in(tmp_path: Path) -> Any:
    """A run whose store is the server's keeper (judgeproc.Remote forwards to one)."""
    changes = dict(compile_mode="default", baseline_cache=True, baseline_cache_dir=str(tmp_path),
                   compile_baseline=True, baseline="best")
    store = Keeper(str(tmp_path), "the task's source", {"torch": "2.x"}, dict(JOB, **changes))
    return judged(job(device="cpu", **changes), store=store, device={"name": "a GPU", "uuid": "GPU-0"})


def measured(run: Any, measure: Callable[..., dict[str, Any]],
             base_of: Callable[[], Any] = lambda: None) -> dict[str, Any]:
    """The compile baseline's record, measured by `measure(first, mode)` or cached."""
    record = compile_baseline(run, Second(None), INPUTS, base_of, measure)
    assert record is not None, "a job that may measure has a record, never a deferral"
    return record


MEASURED = baselines.figures("default", 3.0, {"median_ms": 2.0}, {"median_ms": 1.0}, (1.9, 2.1))


def test_a_measured_baseline_is_cached_and_read_back(tmp_path: Path) -> None:
    calls: list[tuple[Any, ...]] = []

    def measure(*args: Any) -> dict[str, Any]:
        calls.append(args)
        return dict(MEASURED)

    drawn: list[int] = []

    def base_of() -> str:
        drawn.append(1)
        return "inputs"

    record = measured(stand_in(tmp_path), measure, base_of)
    assert record["speedup_over_eager"] == 2.0 and record["cached"] is False
    assert calls[0][0] == "inputs"
    again = stand_in(tmp_path)
    cached = measured(again, measure, base_of)
    assert cached["cached"] is True and len(calls) == 1
    assert len(drawn) == 1, "a cached baseline draws no inputs"
    timing: dict[str, Any] = {"score": 1.5, "score_low": 1.4, "score_high": 1.6}
    Baselines(compiled=cached).apply(again, timing)
    assert timing["baseline"] == "compile" and timing["score_vs_compile"] == pytest.approx(0.75)


@pytest.mark.parametrize("failure, says", [
    (CompileUnavailable("its process: it ended without answering"), "it ended without answering"),
    (KernelFailure("crash", "the compiled reference crashed"), "the compiled reference crashed"),
    (HarnessError("the reference's timing process: it stopped listening"), "stopped listening"),
    (TaskFailure("timing the reference in its own process failed: boom"), "failed: boom"),
    # An unexpected exception says which harness line it came from (the innermost frame of
    # the package: here the call to the stand-in).
    (RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB"),
     "RuntimeError at judge/compile_baseline.py:"),
    (ValueError("a window of 41 forwards over 3 input sets"), ": a window of 41 forwards"),
])
def test_any_failure_costs_the_baseline_only(tmp_path: Path, failure: Exception, says: str) -> None:
    def measure(*args: Any) -> dict[str, Any]:
        raise failure

    run = stand_in(tmp_path)
    record = measured(run, measure)  # does not raise
    assert record["error"] and says in record["error"]
    timing: dict[str, Any] = {"score": 1.5, "score_low": 1.4, "score_high": 1.6}
    Baselines(compiled=record).apply(run, timing)
    assert timing["baseline"] == "eager" and "score_vs_compile" not in timing
    assert any("no torch.compile baseline" in n for n in run.result["notes"])


def cache_only(tmp_path: Path) -> Any:
    """stand_in's run for a job that takes a cached compile figure only (a one-shot
    `kforge eval` on a GPU, which measures it after the verdict)."""
    run = stand_in(tmp_path)
    run.spec = dataclasses.replace(run.spec, compile_source=baselines.CACHE_ONLY)
    return run


def test_a_cache_only_job_measures_nothing_and_defers_the_figure(tmp_path: Path) -> None:
    calls: list[tuple[Any, ...]] = []

    def measure(*args: Any) -> dict[str, Any]:
        calls.append(args)
        return dict(MEASURED)

    closed: list[bool] = []

    class Process(Second):
        def close(self) -> None:
            closed.append(True)

    run = cache_only(tmp_path)
    assert compile_baseline(run, Process(None), INPUTS, lambda: None, measure) is None
    assert calls == [] and closed == [True], "nothing measured, the compiled process let go"
    timing: dict[str, Any] = {"score": 1.5, "score_low": 1.4, "score_high": 1.6}
    Baselines(compiled=None).apply(run, timing)
    assert timing["compile"] is None and timing["compile_deferred"] == baselines.PENDING
    assert timing["baseline"] == "eager" and "after this verdict" in timing["baseline_reason"]
    assert "score_vs_compile" not in timing and run.result["notes"] == []
    # Once measured (and cached) by a task check, the same job finds it, as any job does.
    measured(stand_in(tmp_path), measure)
    again = cache_only(tmp_path)
    record = compile_baseline(again, Second(None), INPUTS, lambda: None, measure)
    assert record is not None and record["cached"] is True and len(calls) == 1
    timing = {"score": 1.5, "score_low": 1.4, "score_high": 1.6}
    Baselines(compiled=record).apply(again, timing)
    assert "compile_deferred" not in timing and timing["score_vs_compile"] == pytest.approx(0.75)


def test_a_job_that_may_measure_never_defers(tmp_path: Path) -> None:
    run = stand_in(tmp_path)
    assert run.spec.compile_source == baselines.CACHE_OR_MEASURE
    timing: dict[str, Any] = {"score": 1.5}
    Baselines(compiled=None).apply(run, timing)
    assert "compile_deferred" not in timing and timing["baseline_reason"].endswith("no torch.compile figures")
