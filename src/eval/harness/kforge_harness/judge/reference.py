"""The reference side of a timed evaluation: the trusted processes that time the task's own
model (refprocess.py: the reference's, and those of the compile and defaults baselines),
forked before the judge's CUDA context exists, and what is lent to them. A context manager:
every process is reaped and every loan freed when the evaluation ends, however it ends."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from .. import cachekeeper, knobs, launchpath, messages, peaks, protocol, timing
from ..compare import audit_tolerance
from ..exchange import Lender
from ..loading import copy_into
from ..memory import is_out_of_memory
from ..protocol import HarnessError, KernelFailure, TaskFailure
from ..refprocess import ALIAS, ReferenceProcess
from ..timed import Side, time_runs
from .align import align
from .context import Run, release_gate, where_raised
from .links import CompiledLink, CompileUnavailable, ReferenceLink
from .task import Setup


def draw_context(run: Run, link: Any, who: str) -> None:
    """Has a timing process draw its CUDA context (launchpath.py) while the GPU is quiet:
    before the process gets buffers and before any kernel is imported. `who` names its
    record in the timing's environment."""
    if knobs.on("KFORGE_DIAG_NO_CONTEXT_DRAW"):
        return
    if run.draws is None:
        info = run.result.get("device") or {}
        floor = cachekeeper.Floor(run.store, "%s %s" % (info.get("name"), info.get("uuid")),
                                  peaks.driver_version(info))
        run.draws = launchpath.Draws(floor)
    request = run.draws.request()
    run.draws.take(who, request, link.call(request, "drawn"))


def reference_job(run: Run, precision: Optional[str] = None) -> dict[str, Any]:
    """The job of a reference's process (refprocess.py), served by worker.py; `precision`
    the policy it runs under (the evaluation's by default)."""
    workdir = tempfile.mkdtemp(prefix="reference-", dir=os.path.dirname(run.job["task_file"]))
    atol, rtol = audit_tolerance(run.job)
    return {"device": run.device, "workdir": workdir, "limits": {}, "atol": atol,
            "rtol": rtol, "precision": precision or run.policy}


class Second:
    """A second reference's process (the compiled reference, the reference under PyTorch's
    defaults): forked early, served only when its figures are measured; `side` and `lender`
    once started."""

    def __init__(self, process: Optional[ReferenceProcess]) -> None:
        self.process = process
        self.side: Any = None
        self.lender: Any = None

    def close(self) -> None:
        """Ends the process (reaped: its CUDA context and buffers are gone before the
        kernel's are planned) and frees what was lent to it."""
        if self.side is not None:
            try:
                self.side.link.call(messages.Exit(op="exit"), "bye")
            except (CompileUnavailable, KernelFailure, TaskFailure, HarnessError):
                pass
            self.side = None
        if self.lender is not None:
            self.lender.close()
            self.lender = None
        if self.process is not None:
            self.process.close()
            self.process = None


class Reference:
    """The reference's timing process and the second references' (see the module)."""

    def __init__(self, run: Run, process: Optional[ReferenceProcess], compiled: Second, defaults: Second) -> None:
        self.run = run
        self.process = process
        self.compiled = compiled
        self.defaults = defaults
        self.side: Any = None
        self.lender: Any = None
        self.tf32: Any = None  # the reference process's TF32 settings, for the timing's environment
        self.base: Any = None  # what the sides rotate when draws are slow (else None: fresh draws)

    @classmethod
    def fork(cls, run: Run, compiled: bool, defaults: bool) -> Reference:
        """Before this process's CUDA context exists (see refprocess.py): the reference's
        process, serving at once (it starts its own context while the judge loads the task),
        and the second references' where asked for, waiting without a CUDA context until
        served."""
        process = ReferenceProcess.fork()
        process.serve(reference_job(run))
        return cls(run, process, Second(ReferenceProcess.fork() if compiled else None),
                   Second(ReferenceProcess.fork() if defaults else None))

    @classmethod
    def none(cls, run: Run) -> Reference:
        """No process: an evaluation that does not time."""
        return cls(run, None, Second(None), Second(None))

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.compiled.close()
        self.defaults.close()
        self.close()

    def start(self, setup: Setup) -> Any:
        """The reference's process ready to time: buffers lent, the task's Model loaded as
        its kernel with the judge's parameters (its null runs come with the kernel's)."""
        if self.process is None:
            raise HarnessError("the reference's timing process was not started")
        self.side, self.lender = self.start_model(self.process, "the reference", self.run.job["task_source"] + ALIAS,
                                                  setup, ReferenceLink, Side)
        return self.side

    def start_model(self, proc: ReferenceProcess, name: str, source: str, setup: Setup, link_class: type,
                    side_class: type, who: Optional[str] = None) -> tuple[Any, Lender]:
        """A trusted model process (refprocess.py) ready to time: buffers lent, `source`'s
        ModelNew loaded with the judge's parameters. `who` names its context draw (by
        default `reference` or `compiled`). Returns (side, lender)."""
        run = self.run
        link = link_class(proc.sock, lambda: run.result.get("phase") or "reference timing")
        link.receive("hello")
        draw_context(run, link, who or ("reference" if link_class is ReferenceLink else "compiled"))
        lender = Lender("cuda_ipc", run.device)
        (inputs, slots), (input_desc, slot_desc), fds = lender.like([setup.input_shapes, setup.output_shapes])
        link.call(messages.Attach(op="attach", inputs=input_desc, outputs=slot_desc), "attached", fds)
        side = side_class(name, link, inputs, slots, run.gate, lender, True)
        link.call(side.clock.request(), "clock_set")
        init_buffers, init_desc, fds = lender.like(setup.init_inputs)
        copy_into(init_buffers, setup.init_inputs)
        loaded: messages.Loaded = link.call(
            messages.Load(op="load", init_inputs=init_desc, seed=run.seed, source=source), "loaded", fds)
        if link_class is ReferenceLink:
            self.tf32 = loaded.get("tf32")
        align(run, setup.ref, loaded, link, lender, report=False)
        return side, lender

    def time_alone(self, flush: Any, draw_ms: Callable[[], float]) -> Any:
        """The reference's timed runs alone, beside null runs of its process."""
        run = self.run
        try:
            nulls, out, _ = time_runs(self.side, None, flush, run.job, run.progress, draw_ms=draw_ms)
        except (KernelFailure, TaskFailure, HarnessError):
            raise
        except Exception as e:  # noqa: BLE001
            if is_out_of_memory(e):
                raise
            raise protocol.TaskFailure("timing the reference failed: %s: %s" % (type(e).__name__, e))
        run.meter.sample()
        return out.figures(timing.quantile(nulls, 0.5), 0.0, self.side.null, run.job)

    def let_go(self) -> None:
        """The reference's process told to exit (its "bye") and the buffers lent to it freed,
        without waiting for it to end: it tears its CUDA context down while the judge
        re-checks the kernel, and close() reaps it."""
        if self.side is not None:
            try:
                self.side.link.call(messages.Exit(op="exit"), "bye")
            except (KernelFailure, TaskFailure, HarnessError):
                pass
            self.side = None
        if self.lender is not None:
            self.lender.close()
            self.lender = None

    def close(self) -> None:
        self.let_go()
        if self.process is not None:
            self.process.close()
            self.process = None


@contextmanager
def keeping_calibration(side: Any) -> Iterator[None]:
    """The reference side's calibration, arming and gate count restored after a second
    reference's measurement beside it: they stay those of the measurement they belong to (an
    evaluation's figures are computed after it)."""
    kept = (side.null, side.armed_s, side.clock.timeouts, side.clock.in_a_row)
    try:
        yield
    finally:
        side.null, side.armed_s, side.clock.timeouts, side.clock.in_a_row = kept


def baseline_lost(run: Run, error: BaseException) -> str:
    """Why a second reference (compiled, or under PyTorch's defaults) has no figures,
    after its measurement raised: the gate let go and the memory returned first."""
    release_gate(run)
    if run.gpu and is_out_of_memory(error):
        import torch

        torch.cuda.empty_cache()
    if isinstance(error, KernelFailure):
        return error.summary
    if isinstance(error, (CompileUnavailable, HarnessError, TaskFailure)):
        return str(error)
    return "%s%s: %s" % (type(error).__name__, where_raised(error), error)


def time_beside(run: Run, ref: Any, side: Any, flush: Any, draw_ms: Callable[[], float]) -> tuple[Any, Any, Any]:
    """A second reference's side timed interleaved with the reference's (timed.py): the
    reference's figures, the side's (less the offset of its process's null window) and the
    score's bootstrap interval."""
    nulls, ref_out, side_out = time_runs(ref, side, flush, run.job, run.progress, draw_ms=draw_ms)
    run.meter.sample()
    null_ms = timing.quantile(nulls, 0.5)
    offset = side.null["overhead_ms"] - ref.null["overhead_ms"]
    return (ref_out.figures(null_ms, 0.0, ref.null, run.job), side_out.figures(null_ms, offset, side.null, run.job),
            timing.bootstrap_score(ref_out.windows, side_out.windows, nulls, offset, seed=run.seed))
