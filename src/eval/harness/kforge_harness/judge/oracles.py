"""The float64 oracles of one evaluation (oracle.py, compare.py's `oracle` rule): one per
input family ("random": the task's get_inputs(), "signed"), measured on the first comparison
of each, and the seconds they took."""

from __future__ import annotations

from typing import Any, Callable, Optional

from .. import oracle
from ..compare import DEFAULT_MODE, compare_outputs
from ..loading import reference_forward
from ..memory import is_out_of_memory
from ..tensors import clone_tree
from ..wire import EvalSettings, OracleRecord
from .context import Run


def honest_rule(settings: EvalSettings) -> bool:
    """Whether comparisons use the `oracle` rule (the default, without explicit atol/rtol)."""
    return (settings.tolerance or DEFAULT_MODE) == "oracle" and settings.atol is None and settings.rtol is None


# The share of the device's free memory (the host's on the CPU) an oracle's pending outputs
# may take while they are held through the kernel's forward (Oracles.beside_forward).
BESIDE_FORWARD_SHARE = 0.1


class Oracles:
    """The family -> oracle.Oracle map, the families a trial measured, and the time taken."""

    def __init__(self, run: Run, ref: Any) -> None:
        self.run = run
        self.ref = ref
        self.measured: dict[str, Any] = {}
        self.trials: set[str] = set()  # the families whose oracle a trial measured
        self.seconds = 0.0

    def honest(self) -> bool:
        return honest_rule(self.run.settings)

    def due(self, family: str) -> bool:
        """Whether this comparison measures its own oracle: the first of its family in the
        trials (a compile baseline's check may have measured one on another draw before)."""
        return self.honest() and family not in self.trials

    def prepare(self, family: str, label: str, inputs: Any) -> Any:
        """The float64 and sequential-twin forwards on `inputs`, before the reference runs
        on them; only where the memory the plan leaves has room for them."""
        run = self.run
        free, _ = run.meter.state()
        if run.gpu:
            import torch

            free += torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        room = (oracle.room_needed(run.result.get("footprint")), int(free * 0.9))
        run.progress("float64 oracle (%s)" % label)
        return oracle.prepare(family, label, self.ref, inputs, run.device, room)

    def beside_forward(self, pending: Any) -> bool:
        """Whether the oracle of `pending` is measured while the kernel's forward runs: its
        float64 and twin outputs stay held through that forward (otherwise they are dropped
        before it), so only where they are a small share of the memory free now."""
        from ..memory import tensor_bytes

        held = tensor_bytes(pending.exact) + tensor_bytes(pending.twin)
        free, _ = self.run.meter.state()
        return held <= BESIDE_FORWARD_SHARE * free

    def of(self, family: str, pending: Any, ref_out: Any) -> Any:
        """The oracle a comparison is judged with: its own (from `pending`), which becomes
        its family's, or its family's measured earlier (None: the dtype rule)."""
        if pending is None:
            return self.reused(family)
        measured = oracle.finish(pending, ref_out)
        self.seconds += measured.seconds
        self.trials.add(family)
        if measured.reason is not None and family in self.measured:
            return self.reused(family)  # the family's earlier oracle still stands
        self.measured[family] = measured
        return measured

    def reused(self, family: str) -> Optional[Any]:
        """The family's oracle scales without exact values (None: there is none)."""
        known = self.measured.get(family)
        return known.reused() if known is not None else None

    def measure_on(self, family: str, label: str, inputs: Any) -> None:
        """Measures the family's oracle on `inputs` alone (the float32 reference runs on a
        copy): where a comparison needs one before any trial (the compile baseline's)."""
        if not self.honest() or family in self.measured:
            return
        pending = self.prepare(family, label, inputs)
        ref_out = reference_forward(self.ref, clone_tree(inputs), self.run.device)
        measured = oracle.finish(pending, ref_out)
        self.seconds += measured.seconds
        self.measured[family] = measured

    def task_tolerance(self, draw: Callable[[], Any]) -> None:
        """A task check's statement of the rule in numbers (the prompts state it): per
        floating output, the honest error and the largest deviation allowed on one draw of
        the task's own inputs, with the reference's own error ratio against its float64
        oracle, on `draw()`. Never fails the task check: without an oracle the reason is recorded."""
        run = self.run
        if not self.honest():
            return
        run.progress("float64 oracle of the task's outputs")
        inputs = draw()
        pending = self.prepare("random", "the task check", inputs)
        ref_out = reference_forward(self.ref, inputs, run.device)
        del inputs
        measured = oracle.finish(pending, ref_out)
        self.seconds += measured.seconds
        try:
            _, _, _, tolerance = compare_outputs(ref_out, ref_out, None, None, "oracle", run.policy, measured)
        except Exception as e:  # noqa: BLE001 -- the figures are information: the task stands
            if is_out_of_memory(e):
                run.note("the task's tolerance figures were not measured: out of memory")
                return
            raise
        tolerance["oracle"] = OracleRecord(dict(tolerance["oracle"] or measured.record(), seconds=self.seconds))
        run.result["tolerance"] = tolerance
