"""A job as kforge sends it, for tests that need the judge's typed job (wire.Job)."""

from __future__ import annotations

from typing import Any, Optional

from kforge_harness import wire
from kforge_harness.wire import ResultRecord

# A job as kforge sends it with the default [eval] settings (eval::protocol::Job).
JOB = {
    "task_path": "/tmp/task.py", "kernel_path": "/tmp/kernel.py", "device": "cuda:0", "timing": True,
    "baseline_cache_dir": None, "profile": False, "reference_only": False, "kernelbench_protocol": False,
    "kernelbench_rounds": 1, "compile_source": "cache_or_measure",
    "trials": 5, "signed_trial": True, "post_timing_check": True, "timing_trials": 300, "min_timing_trials": 20,
    "timing_precision": 0.01, "between_evaluations": 0.015, "timing_budget_s": 10.0, "warmup": 3, "flush_l2": True,
    "timeout_s": 300.0, "input_draw_limit_s": 20.0, "seed": 42, "reject_torch_ops": False,
    "suspicious_speedup": 10.0, "tolerance": "dtype", "precision": "strict", "static_checks": True,
    "require_sandbox": True, "baseline_cache": False, "compile_baseline": True, "compile_mode": "default",
    "baseline": "best", "executor": "fork", "shape_check": True, "start_ahead": False,
}


def job(**changes: Any) -> wire.Job:
    """JOB with `changes`, parsed as the server parses a job."""
    parsed: wire.Job = wire.Job.parse(dict(JOB, **changes))
    return parsed


def judged(spec: Optional[wire.Job] = None, store: Any = None, **result: Any) -> Any:
    """A judge's Run (kforge_harness.judge.context.Run) of `spec` (JOB by default) whose result
    so far is `result` (notes, flags and the records the phases write): what a phase reads of
    its evaluation, without a task, a device or a kernel's process."""
    from kforge_harness.judge.context import Run

    spec = spec or job()
    # A plain dict: a phase under test may write a key the result declares or not.
    record: Any = dict({"notes": [], "flags": [], "memory": {}}, **result)
    return Run(job={"timing_trials": spec.settings.timing_trials, "task_file": "/tmp/task.py"}, spec=spec,
               result=record, progress=lambda text: None, store=store)
