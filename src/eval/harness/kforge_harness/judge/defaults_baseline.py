"""The defaults baseline's measurement (defaults.py has its figures and its score): the
reference under PyTorch's default settings, where the policy's settings differ from them for
the task's work; cached per task, inputs, device and versions, else timed now in its own
process, interleaved with the policy's reference, before any kernel is imported."""

from __future__ import annotations

from typing import Any, Callable, Optional

from .. import defaults
from ..loading import copy_into
from ..refprocess import ALIAS
from ..timed import calibrate
from .context import Run, input_signature
from .inputs import draw_cost, refresher
from .links import CompiledLink, CompiledSide
from .reference import Reference, baseline_lost, keeping_calibration, reference_job, time_beside
from .task import Setup


def defaults_phase(run: Run, setup: Setup, reference: Reference, flush: Any,
                   base_of: Callable[[], Any]) -> Optional[dict[str, Any]]:
    """The defaults baseline's record, its phase marked apart; None where it is not
    measured (not timed, or the task's work not affected)."""
    if reference.defaults.process is None or not run.timing:
        return None
    applies, why = defaults.applies(run.policy, setup.counted_work())
    if not applies:
        reference.defaults.close()
        return None
    run.meter.enter("defaults baseline")
    device, inputs = run.result["device"], input_signature(setup.input_shapes)
    _, cached = run.store.defaults_baseline(device, inputs)
    if cached is not None and run.settings.baseline_cache:
        reference.defaults.close()
        run.clock.mark("defaults_baseline")
        return dict(cached, cached=True)
    run.progress("timing the reference under PyTorch's defaults (%s)" % why)
    try:
        record = measure_defaults(run, setup, reference, flush, base_of(), why)
    except Exception as e:  # noqa: BLE001 -- a baseline never decides a verdict
        record = defaults.unavailable(run.policy, baseline_lost(run, e)[:500])
    finally:
        reference.defaults.close()
    if run.settings.baseline_cache:
        run.store.keep_defaults_baseline(device, inputs, record)
    run.clock.mark("defaults_baseline")
    return dict(record, cached=False)


def measure_defaults(run: Run, setup: Setup, reference: Reference, flush: Any, first: Any,
                     why: str) -> dict[str, Any]:
    """The reference under PyTorch's defaults in its own process, timed interleaved with
    the policy's reference (timed.py), as the compile baseline is."""
    proc = reference.defaults.process
    assert proc is not None
    reference.side.refresh = refresher(run, setup, reference.base)
    if run.gpu:
        import torch

        torch.cuda.empty_cache()
    proc.serve(reference_job(run, defaults.DEFAULTS))
    side, reference.defaults.lender = reference.start_model(
        proc, "the reference under PyTorch's defaults", run.job["task_source"] + ALIAS, setup,
        CompiledLink, CompiledSide, who="defaults")
    reference.defaults.side = side
    ref = reference.side
    with keeping_calibration(ref):
        calibrate([(ref, lambda base=first: copy_into(ref.inputs, base)),
                   (side, lambda base=first: copy_into(side.inputs, base))], flush, run.progress)
        side.refresh = ref.refresh
        figures, other, interval = time_beside(run, ref, side, flush, draw_cost(setup))
        record: dict[str, Any] = defaults.figures(run.policy, why, figures, other, interval)
        return record
