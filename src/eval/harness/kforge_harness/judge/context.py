"""What every phase of one evaluation reads: the job as kforge sent it, the result being
built, where it runs and the phase clock (`Run`), and the small helpers the phases share."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import precision, timing
from ..memory import Meter, gib, out_of_memory_reason
from ..protocol import KernelFailure
from ..tensors import flatten_outputs, tree_map
from ..wire import EvalSettings, Job, ResultRecord

Progress = Callable[[str], None]


class PhaseClock:
    """Seconds spent in each phase of an evaluation, into result["phases_s"]."""

    def __init__(self, result: Any) -> None:
        self.phases = result.setdefault("phases_s", {})
        self.last = time.time()

    def mark(self, name: str) -> None:
        now = time.time()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.last = now

    def skip(self) -> None:
        """The time since the last mark is no phase's (a judge started ahead, waiting)."""
        self.last = time.time()


@dataclass
class Run:
    """One evaluation's surroundings. `job` is the server's record of it (the sources, the
    task file, what kforge sent); `spec` what kforge sent, read typed (wire.Job), never by
    key; `result` the result so far; `store` what later evaluations reuse (the reference's
    timing, the baselines, the launch-path floor) and the device's peaks, kept by the server
    (cachekeeper.py); `link` the channel to the kernel's process (None for a task check);
    `gate` the host gate of timed windows once opened; `draws` the context draws (launchpath);
    `handover` where a judge started ahead of its request waits for the kernel (judgeproc.py's
    Handover: `wait(run)`), None for one started with it."""

    job: dict[str, Any]
    spec: Job
    result: ResultRecord
    progress: Progress
    store: Any
    link: Any = None
    gate: Any = None
    draws: Any = None
    handover: Any = None
    meter: Meter = field(init=False)
    clock: PhaseClock = field(init=False)

    def __post_init__(self) -> None:
        self.meter = Meter(self.device, self.result["memory"])
        self.clock = PhaseClock(self.result)

    @property
    def settings(self) -> EvalSettings:
        return self.spec.settings

    @property
    def device(self) -> str:
        return self.spec.device

    @property
    def gpu(self) -> bool:
        return self.device != "cpu"

    @property
    def seed(self) -> int:
        return int(self.settings.seed)

    @property
    def policy(self) -> str:
        return self.settings.precision or precision.DEFAULT_POLICY

    @property
    def timing(self) -> bool:
        """Whether this evaluation times (a GPU job that asks for timing)."""
        return self.gpu and bool(self.spec.timing)

    def phase(self) -> str:
        return str(self.result.get("phase") or "start-up")

    def note(self, text: str) -> None:
        self.result["notes"].append(text)

    def kernel_loaded(self) -> bool:
        return self.link is not None and bool(self.link.kernel_loaded)

    def out_of_memory(self, error: BaseException) -> KernelFailure:
        """The `oom` verdict for an allocation of the judge's that failed: before the kernel
        was loaded the task itself does not fit; after, the kernel's process holds memory
        the plan did not leave it."""
        free, total = self.meter.state()
        phase = self.phase()
        loaded = self.kernel_loaded()
        what = ("the evaluation (during %s, with the kernel's process holding memory)" % phase if loaded
                else "the task (during %s, before any kernel ran)" % phase)
        summary = out_of_memory_reason(what, error, free, total)
        plan = self.result.get("footprint")
        if plan:
            summary += "; planned peak %s (inputs %s, outputs %s)" % (
                gib(plan["planned_peak_bytes"]), gib(plan["inputs_bytes"]), gib(plan["outputs_bytes"]))
        return KernelFailure("oom", summary, details={"footprint": plan, "phase": phase, "kernel_loaded": loaded,
                                                      "free_bytes": int(free), "total_bytes": int(total)})


def where_raised(exc: BaseException) -> str:
    """" at judge/kernel.py:123": the harness line an unexpected exception came from, for a
    message that must say more than its type (the innermost frame of this package)."""
    import traceback

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.abspath(f.filename).startswith(here + os.sep)]
    if not frames:
        return ""
    return " at %s:%d" % (os.path.relpath(os.path.abspath(frames[-1].filename), here), frames[-1].lineno or 0)


def task_does_not_fit(reason: str, **details: Any) -> KernelFailure:
    """The `oom` verdict for a task whose plan or inputs do not fit, before any kernel ran."""
    return KernelFailure("oom", "the task does not fit: " + reason, details=dict(details, kernel_loaded=False))


def between_evaluations(settings: EvalSettings) -> float:
    return max(settings.between_evaluations, 0.0)


def interval_method(settings: EvalSettings) -> str:
    """The score interval's method in words (Timing.interval_method)."""
    method = ("bootstrap, %d resamples of both models' timed runs and the null runs, 95%% percentile interval"
              % timing.BOOTSTRAP_RESAMPLES)
    between = between_evaluations(settings)
    if between:
        method += (", combined in quadrature with +-%g%% for what changes between evaluations of one kernel "
                   "(between_evaluations; the runs' own interval is runs_score_low/high)" % (100 * between))
    return method


def shapes_of(tree: Any) -> Any:
    """The tree with each tensor replaced by a meta tensor of its shape and dtype (what the
    lender needs to allocate alike)."""
    import torch

    return tree_map(lambda v: torch.empty(v.shape, dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor)
                    else v, tree)


def floating_dtypes(*trees: Any) -> list[str]:
    """The floating and complex dtypes of a task's tensors (inputs, outputs), by name."""
    import torch

    found = set()
    for tree in trees:
        for _, v in flatten_outputs(tree):
            if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()):
                found.add(str(v.dtype).replace("torch.", ""))
    return sorted(found)


def input_signature(base: Any) -> list[list[Any]]:
    """The inputs as the cached figures' keys read them (timing.baseline_key): each
    tensor's path, shape and dtype; the server computes the keys (cachekeeper.py)."""
    import torch

    return [[p, list(v.shape), str(v.dtype)] for p, v in flatten_outputs(base, "in")
            if isinstance(v, torch.Tensor)]


def release_gate(run: Run) -> None:
    """Lets go of a stream held at the gate (it would hang the judge's teardown)."""
    if run.gate is not None and run.gate.held:
        run.gate.release()

