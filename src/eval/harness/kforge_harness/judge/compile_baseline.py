"""The compile baseline's measurement (baselines.py has its figures and its score): the
reference under torch.compile against the eager reference, cached per task, inputs, device,
versions, timing method, precision policy and mode, else compiled and timed now in its own
process, interleaved with the eager reference in its. Whatever goes wrong costs the baseline
only, never the evaluation."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from .. import baselines
from ..compare import DEFAULT_MODE, compare_outputs
from ..loading import copy_into
from ..protocol import KernelFailure
from ..timed import calibrate
from .context import Run, input_signature
from .inputs import draw_cost, refresher
from .links import CompiledLink, CompiledSide, CompileUnavailable
from .oracles import Oracles
from .outputs import kernel_outputs
from .reference import Reference, Second, baseline_lost, keeping_calibration, reference_job, time_beside
from .task import Setup

Measure = Callable[[Any, str], dict[str, Any]]


def compile_phase(run: Run, setup: Setup, reference: Reference, oracles: Oracles, flush: Any,
                  base_of: Callable[[], Any]) -> Any:
    """The compile baseline's record, its phase marked apart; None where it is not asked
    for, or deferred (`compile_baseline`). `base_of()` gives inputs for the calibration,
    called only when it is measured."""
    if not (run.timing and run.settings.compile_baseline):
        return None
    run.meter.enter("compile baseline")

    def measure(first: Any, mode: str) -> dict[str, Any]:
        return measure_compiled(run, setup, reference, oracles, flush, first, mode)

    record = compile_baseline(run, reference.compiled, input_signature(setup.input_shapes), base_of, measure)
    run.clock.mark("compile_baseline")
    return record


def compile_baseline(run: Run, second: Second, inputs: list[list[Any]], base_of: Callable[[], Any],
                     measure: Measure) -> Optional[dict[str, Any]]:
    """The record, cached or measured by `measure(first, mode)` (then cached); None where
    the job takes a cached figure only (`compile_source`) and none is cached: deferred (the
    timing then says so, timing_phase.Baselines). The compiled process (`second`) is gone
    when it returns. `inputs`: the inputs' signature, all the key reads of them."""
    mode = run.settings.compile_mode or "default"
    device = run.result["device"]
    _, cached = run.store.compile_baseline(device, inputs, mode)
    if cached is not None and run.settings.baseline_cache:
        second.close()
        return dict(cached, cached=True)
    if run.spec.compile_source == baselines.CACHE_ONLY:
        second.close()
        return None
    run.progress("timing the reference under torch.compile (mode %s)" % mode)
    started = time.perf_counter()
    try:
        record = measure(base_of(), mode)
    except Exception as e:  # noqa: BLE001 -- a baseline never decides a verdict
        # Whatever went wrong (the compiled process, the reference's beside it, memory
        # the judge could not get for the comparison) costs the compile baseline only:
        # the task's and the kernel's own figures are measured before it.
        record = baselines.unavailable(mode, baseline_lost(run, e)[:500], time.perf_counter() - started)
    finally:
        second.close()
    if run.settings.baseline_cache:
        run.store.keep_compile_baseline(device, inputs, mode, record)
    return dict(record, cached=False)


def measure_compiled(run: Run, setup: Setup, reference: Reference, oracles: Oracles, flush: Any, first: Any,
                     mode: str) -> dict[str, Any]:
    """Starts the compiled reference, compiles it on one forward (timed apart: the
    compile time), compares that forward's outputs with the eager reference's, then
    times both interleaved (timed.py)."""
    proc = reference.compiled.process
    if proc is None:
        raise CompileUnavailable("its process was not started")
    # Its outputs are checked against eager's under the task's rule: the oracle's scale
    # of the task's own draws, measured on `first` (kept for the trials' comparisons).
    oracles.measure_on("random", "the compile baseline's check", first)
    # One refresher for both sides, begun anew: the reference's timing left its last
    # draw in the one it had, and each draw is the task's inputs' size.
    reference.side.refresh = refresher(run, setup, reference.base)
    if run.gpu:
        import torch

        # What the judge's allocator holds unused goes back first: the compiled side's
        # buffers and its draws are each the task's size.
        torch.cuda.empty_cache()
    proc.serve(reference_job(run))
    source = baselines.compiled_source(run.job["task_source"], mode)
    side, reference.compiled.lender = reference.start_model(proc, "the compiled reference", source, setup,
                                                            CompiledLink, CompiledSide)
    reference.compiled.side = side
    with keeping_calibration(reference.side):
        return time_compiled(run, setup, oracles, reference.side, side, flush, first, mode)


def time_compiled(run: Run, setup: Setup, oracles: Oracles, ref: Any, side: Any, flush: Any, first: Any,
                  mode: str) -> dict[str, Any]:
    """measure_compiled's work, once both processes are ready."""
    calibrate([(ref, lambda base=first: copy_into(ref.inputs, base)),
               (side, lambda base=first: copy_into(side.inputs, base))], flush, run.progress)
    side.refresh = ref.refresh
    # The judge keeps no copy: the run's values go into the compiled side's buffers and,
    # before that side runs (a task may write its inputs in place), into the reference's,
    # whose own process then computes the eager outputs to compare with. The judge's
    # memory already holds the task's inputs, and large tasks have room for no more.
    write, _ = side.refresh(0, False, side.input_sets(1))

    def write_both() -> None:
        write()
        copy_into(ref.inputs, side.inputs)

    started = time.perf_counter()
    run_ = side.run("timed", -1000, write_both, flush, None, gated=False)
    compile_s = time.perf_counter() - started
    try:
        # Read in place, not frozen: the compiled process runs the task's own code (as
        # trusted as the reference's) and is idle once it answered.
        outputs = kernel_outputs(run_.done, side.slots)
        eager = ref.run("timed", -1001, lambda: None, flush, None, gated=False)
    except KernelFailure as e:
        raise CompileUnavailable(e.summary)
    ref_out = kernel_outputs(eager.done, ref.slots)
    settings = run.settings
    passed, _, reason, _ = compare_outputs(ref_out, outputs, settings.atol, settings.rtol,
                                           settings.tolerance or DEFAULT_MODE, run.policy, oracles.reused("random"))
    if not passed:
        raise CompileUnavailable("under torch.compile the task computes another result (%s)" % reason)
    del ref_out, outputs
    eager_figures, compiled, interval = time_beside(run, ref, side, flush, draw_cost(setup))
    record: dict[str, Any] = baselines.figures(mode, compile_s, eager_figures, compiled, interval)
    return record
