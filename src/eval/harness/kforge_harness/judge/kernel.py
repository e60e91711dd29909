"""The kernel phase: buffers lent to the kernel's process, the wait of a judge started
ahead for its kernel, (timed) both sides calibrated, the kernel loaded under its guard with
the reference's parameters, its trials run and audited, its compiled code read. Returns
what was checked (`Checked`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from .. import knobs, messages
from ..exchange import Lender
from ..loading import copy_into
from ..protocol import KernelFailure
from ..timed import Side, calibrate
from .align import align
from .checks import Checker
from .context import Run
from .inputs import refresher
from .oracles import Oracles
from .precision_record import PrecisionView
from .reference import Reference
from .rehearsal import rehearse
from .task import FirstDraw, Setup


@dataclass(frozen=True)
class Checked:
    """What the kernel phase established: its checker (the lent buffers and every audited
    forward's record) and, timed, the kernel's timing side."""

    checker: Checker
    side: Optional[Side]


def guard_mode(run: Run) -> Union[bool, str]:
    """The worker's run-time guard (guard.py): on with the static checks; "trace" under the
    diagnostic switch KFORGE_DIAG_GUARD_TRACE, which refuses nothing and says so."""
    if not run.settings.static_checks:
        return False
    if knobs.on("KFORGE_DIAG_GUARD_TRACE"):
        run.note("the run-time guard only traced what it would refuse (diagnostic switch KFORGE_DIAG_GUARD_TRACE): "
                 "this verdict is not one to trust")
        return "trace"
    return True


def attach(run: Run, setup: Setup, lender: Lender) -> tuple[Any, Any]:
    """The kernel's buffers, lent and attached in its process: (inputs, output slots)."""
    link = run.link
    run.meter.enter("buffers")
    (inputs, slots), (input_desc, slot_desc), fds = lender.like([setup.input_shapes, setup.output_shapes])
    run.meter.sample()
    link.call(messages.Attach(op="attach", inputs=input_desc, outputs=slot_desc), "attached", fds)
    run.meter.sample()
    run.clock.mark("buffers")
    return inputs, slots


def calibrate_sides(run: Run, setup: Setup, reference: Reference, lender: Lender, first: FirstDraw, flush: Any,
                    inputs: Any, slots: Any) -> Optional[Side]:
    """Timed: the kernel's timing side, calibrated beside the reference's (on the first
    draw), before the kernel is imported. None where not timed."""
    if not run.timing:
        return None
    link = run.link
    side = Side("the kernel", link, inputs, slots, run.gate, lender, False)
    link.call(side.clock.request(), "clock_set")
    side.refresh = refresher(run, setup, reference.base)
    staged = setup.source.draw(run.seed + 2000)
    ref_side = reference.side
    calibrate([(ref_side, lambda base=first.values: copy_into(ref_side.inputs, base)),
               (side, lambda base=staged: copy_into(inputs, base))], flush, run.progress)
    del staged
    return side


def await_kernel(run: Run, view: PrecisionView) -> None:
    """A judge started ahead of its request (ahead.py) waits here for the kernel, with
    everything before it done: the task, the reference's process, both contexts, the lent
    buffers. Its null windows are calibrated after the wait (the GPU's clocks move while it
    idles), still before the kernel is imported. The kernel's source findings arrive with it."""
    if run.handover is None:
        return
    run.handover.wait(run)
    view.source_math = None  # the server's reading of the kernel's source came with it
    view.describe()


def load(run: Run, setup: Setup, lender: Lender, view: PrecisionView) -> None:
    """The kernel imported in its process (its init inputs lent), then given the
    reference's parameters."""
    link = run.link
    run.progress("loading kernel")
    init_buffers, init_desc, fds = lender.like(setup.init_inputs)
    copy_into(init_buffers, setup.init_inputs)
    link.kernel_loaded = True  # from here on the worker runs the kernel's code
    # The key that seals the worker's messages and the run-time guard (guard.py, which goes
    # with the static checks) are set up before the kernel's first line runs.
    loaded: messages.Loaded = link.call(
        messages.Load(op="load", init_inputs=init_desc, seed=run.seed, source=run.job["kernel_source"],
                      seal=link.seal(), guard=guard_mode(run),
                      jit_kernels=list(run.result["static"].get("jit_kernels") or [])), "loaded", fds)
    view.kernel_settings = loaded.get("tf32")
    view.describe()
    run.clock.mark("load")
    run.progress("building models")
    align(run, setup.ref, loaded, link, lender)
    run.clock.mark("build")


def check(run: Run, checker: Checker, view: PrecisionView) -> None:
    """The trials, the audit and the compiled code's reading."""
    run.meter.enter("correctness")
    try:
        checker.correctness()
    except KernelFailure as failure:
        if failure.category == "mismatch":
            view.read_compiled_of_a_mismatch()
        raise
    run.clock.mark("correctness")
    run.meter.enter("audit")
    checker.audit()
    run.clock.mark("audit_gpu_time" if run.gpu else "audit")
    view.read_compiled()
    run.clock.mark("precision")


def kernel_phase(run: Run, setup: Setup, reference: Reference, oracles: Oracles, view: PrecisionView,
                 lender: Lender, first: FirstDraw, flush: Any) -> Checked:
    """The kernel phase (see the module)."""
    inputs, slots = attach(run, setup, lender)
    if run.handover is not None:
        rehearse(run, setup)
        run.clock.mark("rehearsal")
    await_kernel(run, view)
    side = calibrate_sides(run, setup, reference, lender, first, flush, inputs, slots)
    first.release()
    run.clock.mark("calibration")
    load(run, setup, lender, view)
    checker = Checker(run, setup, oracles, inputs, slots)
    check(run, checker, view)
    return Checked(checker, side)
