"""The start of every job: the device set up, the task phase run, the device's peaks and
the L2 flush buffer (timed jobs), the kernel's process greeted, and the reference's timing
process started behind the host gate (timed jobs)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .. import knobs
from ..device import device_description, l2_flush_buffer
from ..protocol import HarnessError
from ..window import GateUnavailable, HostGate
from . import task
from .context import Run
from .inputs import draws_fresh, refresher
from .precision_record import PrecisionView
from .reference import Reference
from .task import FirstDraw, Setup


@dataclass(frozen=True)
class Started:
    """What `start` hands on: the task's setup, the precision record being kept, and the
    device's measured peaks (None where not timed)."""

    setup: Setup
    precision: PrecisionView
    peaks: Any


def open_gate(run: Run) -> None:
    """The gate that keeps host latency out of timed windows (window.py); without one the
    windows include the worker's host time, and the result says so."""
    if knobs.on("KFORGE_DIAG_NO_GATE"):
        run.gate = None
        run.note("timed windows are not gated: diagnostic switch KFORGE_DIAG_NO_GATE")
        return
    try:
        run.gate = HostGate()
    except GateUnavailable as e:
        run.gate = None
        run.note("timed windows are not gated (%s): each includes its process's host latency, so figures are "
                 "noisier and short forwards look slower" % e)


def set_up_device(run: Run) -> None:
    """The device the job names, in a server whose Triton mode matches it."""
    import torch

    server_interprets = os.environ.get("TRITON_INTERPRET") == "1"
    if run.gpu == server_interprets:
        raise HarnessError("a %s job reached a server %s TRITON_INTERPRET=1" % (
            run.device, "started with" if server_interprets else "started without"))
    if run.gpu:
        if not torch.cuda.is_available():
            raise HarnessError("CUDA is not available in the judge (device %s)" % run.device)
        torch.cuda.set_device(run.device)
    run.result["device"] = device_description(run.device)


def start(run: Run, reference: Reference) -> tuple[Started, FirstDraw, Any]:
    """The start (see the module). Returns what it established, the task's first draw and
    the L2 flush buffer (None where not timed): both for the caller to drop when done."""
    clock = run.clock
    set_up_device(run)
    clock.mark("cuda_init")
    setup, first = task.load(run)
    view = PrecisionView(run, setup.task_dtypes, setup.reference_settings)
    view.describe()
    clock.mark("task")  # the task loaded, its reference built and run once
    peaks = None
    if run.timing:
        # The device's measured peaks (peaks.py), from the server: cached per device, else
        # measured now, in a process of the server's where no task's code runs.
        run.progress("device peaks")
        peaks = run.store.peaks()
        clock.mark("peaks")
    flush = l2_flush_buffer(run.job, run.result, run.device) if run.timing else None
    if run.link is not None:
        # The worker starts (its CUDA context included) while the judge loads the task and
        # draws; it is idle, with no kernel imported, from its hello until it is attached.
        run.progress("starting the kernel's process")
        run.link.receive("hello")
    clock.mark("startup")
    if run.timing:
        open_gate(run)
        run.progress("starting the reference's timing process")
        reference.start(setup)
        # Slow draws are rotated per timed run: `first` is what both sides rotate.
        reference.base = None if draws_fresh(setup) else first
        reference.side.refresh = refresher(run, setup, reference.base)
    clock.mark("reference_process")
    return Started(setup, view, peaks), FirstDraw(first), flush
