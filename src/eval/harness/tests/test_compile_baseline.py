"""The judge's compile baseline (judge.Evaluation.compile_baseline) with a stand-in for its
measurement: a cached record is read, a measured one cached, and whatever goes wrong while
measuring (the compiled process, the reference's, memory, a bug) costs the baseline only,
never the evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from kforge_harness import baselines, judge
from kforge_harness.cachekeeper import Keeper
from kforge_harness.protocol import HarnessError, KernelFailure, TaskFailure

from jobs import JOB, job


def stand_in(tmp_path: Path, measure: Callable[..., Any]) -> Any:
    """An Evaluation with only what compile_baseline reads (`Any`: its attributes are set here)."""
    e: Any = judge.Evaluation.__new__(judge.Evaluation)
    changes = dict(compile_mode="default", baseline_cache=True, baseline_cache_dir=str(tmp_path),
                   compile_baseline=True, baseline="best")
    e.spec = job(**changes)
    e.settings = e.spec.settings
    e.result = {"notes": [], "device": {"name": "a GPU", "uuid": "GPU-0"}}
    e.gpu = False
    e.gate = None
    e.compiled = None
    e.compiled_side = e.compiled_lender = e.compiled_process = None
    # The server's keeper, as the judge's store (judgeproc.Remote forwards to one).
    e.store = Keeper(str(tmp_path), "the task's source", {"torch": "2.x"}, dict(JOB, **changes))
    e.input_signature = lambda shapes: [["in[0]", [4, 4], "torch.float32"]]
    e.progress = lambda text: None
    e.measure_compiled = measure
    return e


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

    e = stand_in(tmp_path, measure)
    e.compile_baseline(None, base_of, None, None)
    assert e.compiled["speedup_over_eager"] == 2.0 and e.compiled["cached"] is False
    assert calls[0][1] == "inputs"
    again = stand_in(tmp_path, measure)
    again.compile_baseline(None, base_of, None, None)
    assert again.compiled["cached"] is True and len(calls) == 1
    assert len(drawn) == 1, "a cached baseline draws no inputs"
    timing: dict[str, Any] = {"score": 1.5, "score_low": 1.4, "score_high": 1.6}
    again.against_compile(timing)
    assert timing["baseline"] == "compile" and timing["score_vs_compile"] == pytest.approx(0.75)


@pytest.mark.parametrize("failure, says", [
    (judge.CompileUnavailable("its process: it ended without answering"), "it ended without answering"),
    (KernelFailure("crash", "the compiled reference crashed"), "the compiled reference crashed"),
    (HarnessError("the reference's timing process: it stopped listening"), "stopped listening"),
    (TaskFailure("timing the reference in its own process failed: boom"), "failed: boom"),
    # An unexpected exception says which harness line it came from (the innermost frame of
    # the package: here the call to the stand-in).
    (RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB"),
     "RuntimeError at judge.py:"),
    (ValueError("a window of 41 forwards over 3 input sets"), ": a window of 41 forwards"),
])
def test_any_failure_costs_the_baseline_only(tmp_path: Path, failure: Exception, says: str) -> None:
    def measure(*args: Any) -> None:
        raise failure

    e = stand_in(tmp_path, measure)
    e.compile_baseline(None, lambda: None, None, None)  # does not raise
    assert e.compiled["error"] and says in e.compiled["error"]
    timing: dict[str, Any] = {"score": 1.5, "score_low": 1.4, "score_high": 1.6}
    e.against_compile(timing)
    assert timing["baseline"] == "eager" and "score_vs_compile" not in timing
    assert any("no torch.compile baseline" in n for n in e.result["notes"])
