"""The task phase: the task loaded, its reference built and run once on the first draw, the
evaluation's footprint planned (a task that does not fit is refused, `oom`, before any kernel
runs). Returns a frozen `Setup` and the first draw, which the caller drops once the timing
processes are calibrated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .. import precision, sol
from ..device import l2_flush_bytes
from ..loading import InputSource, build_reference, load_task, reference_forward, task_init_inputs
from ..memory import does_not_fit, footprint, gib, inputs_do_not_fit, is_out_of_memory, model_bytes, tensor_bytes
from .context import Run, floating_dtypes, shapes_of, task_does_not_fit


@dataclass(frozen=True)
class Setup:
    """What the task phase established, read by every later phase: the task module, where
    its inputs are drawn (`source`), its init inputs, the reference model, the shapes of its
    inputs and outputs (meta tensors: the plan of every buffer), the floating dtypes of its
    tensors, its counted work (sol.py; {"error": ...} where not counted), the host time of
    its first draw and the precision settings the reference runs under."""

    task: Any
    source: InputSource
    init_inputs: Any
    ref: Any
    input_shapes: Any
    output_shapes: Any
    task_dtypes: list[str]
    work: dict[str, Any]
    first_draw_ms: float
    reference_settings: Any

    def counted_work(self) -> Optional[dict[str, Any]]:
        """The counted work, None where counting failed."""
        return self.work if self.work and "error" not in self.work else None


class FirstDraw:
    """The task's first draw, which calibrations and the second references' checks use:
    held here until the phase that no longer needs it lets it go (`release`), so that no
    caller's variable keeps it alive (a large task's draw is more than the judge can keep
    twice)."""

    def __init__(self, values: Any) -> None:
        self.values = values

    def get(self) -> Any:
        return self.values

    def release(self) -> None:
        self.values = None


def load(run: Run) -> tuple[Setup, Any]:
    """The task phase (see the module's docstring). Returns (setup, the first draw)."""
    run.meter.enter("startup")
    run.progress("loading task")
    task = load_task(run.job["task_file"])
    source = InputSource(task, run.device, run.settings.input_draw_limit_s)
    init_inputs = task_init_inputs(task, run.result)
    # The policy's precision settings before the reference exists (precision.py).
    reference_settings = precision.apply_policy(run.policy)
    ref = build_reference(task, init_inputs, run.seed, run.device)
    first, first_out, work = first_forward(run, source, init_inputs, ref)
    first_draw_ms = float(source.draw_ms or 0.0)
    setup = Setup(task=task, source=source, init_inputs=init_inputs, ref=ref, input_shapes=shapes_of(first),
                  output_shapes=shapes_of(first_out), task_dtypes=floating_dtypes(first, first_out), work=work,
                  first_draw_ms=first_draw_ms, reference_settings=reference_settings)
    # Only the shapes of the first draw and outputs are needed from here on (every trial
    # draws again): the outputs go back to the device before any buffer is lent.
    del first_out
    return setup, first


def counted_forward(run: Run, ref: Any, inputs: Any) -> tuple[Any, dict[str, Any]]:
    """The reference's forward on `inputs` and its work, counted on the way (sol.py).
    Counting never costs the task its check: a forward the counter disturbs runs again
    without it, and the work is then unknown, with the reason."""
    try:
        out, counts = sol.count_forward(ref, inputs, lambda: reference_forward(ref, inputs, run.device))
        return out, dict(counts)
    except Exception as e:  # noqa: BLE001
        if is_out_of_memory(e):
            raise
        work = {"error": "counting the reference's work failed: %s: %s" % (type(e).__name__, str(e)[:300])}
    return reference_forward(ref, inputs, run.device), work


def plan_before_drawing(run: Run, source: InputSource, init_inputs: Any, ref: Any, flush_bytes: int,
                        where: str, free: int, total: int) -> None:
    """Refuses (`oom`) a task whose inputs and outputs, sized from their shapes before any
    draw, cannot fit in `free` of `total` bytes."""
    inputs_bytes, outputs_bytes = source.meta_sizes(init_inputs, free)
    weights_bytes = model_bytes(ref)  # the kernel's model, estimated by the reference's
    if inputs_bytes is not None and outputs_bytes is not None:
        early = footprint(inputs_bytes, outputs_bytes, 0, flush_bytes, free, total, run.timing, weights_bytes)
        reason = does_not_fit(early, where)
        if reason:
            run.result["footprint"] = early
            raise task_does_not_fit(reason, footprint=early)
    elif inputs_bytes:
        reason = inputs_do_not_fit(inputs_bytes, free, total, "%s %s" % (gib(total), where))
        if reason:
            raise task_does_not_fit(reason, inputs_bytes=inputs_bytes, free_bytes=int(free), total_bytes=int(total))


def first_forward(run: Run, source: InputSource, init_inputs: Any, ref: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The first draw and the reference's outputs on it; measures the evaluation's
    footprint and refuses (`oom`) a task whose plan does not fit, before any kernel
    runs. Returns (inputs, reference outputs, the reference's counted work)."""
    import torch

    result = run.result
    run.meter.enter("reference")
    free, total = run.meter.state()
    flush_bytes = l2_flush_bytes(run.job, result) if run.timing else 0
    where = "%s device" % result["device"].get("name", "GPU") if run.gpu else "host"
    plan_before_drawing(run, source, init_inputs, ref, flush_bytes, where, free, total)
    weights_bytes = model_bytes(ref)
    run.progress("drawing inputs")
    first = source.draw(run.seed + 1)
    run.meter.sample()
    run.progress("reference forward")
    before = 0
    if run.gpu:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    first_out, work = counted_forward(run, ref, first)
    inputs_bytes, outputs_bytes = tensor_bytes(first), tensor_bytes(first_out)
    scratch = 0
    if run.gpu:
        scratch = max(0, torch.cuda.max_memory_allocated() - before - outputs_bytes)
    run.meter.sample()
    record = footprint(inputs_bytes, outputs_bytes, scratch, flush_bytes, free, total, run.timing, weights_bytes)
    result["footprint"] = record
    reason = does_not_fit(record, where)
    if reason:
        raise task_does_not_fit(reason, footprint=record)
    return first, first_out, work
