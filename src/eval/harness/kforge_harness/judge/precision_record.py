"""The result's `precision` record (docs/eval-result.md), rewritten as the evaluation learns
what the kernel computes in: its source's findings, what its process had in force once
imported, what its launched kernels' compiled code computes in."""

from __future__ import annotations

from typing import Any, Optional

from .. import messages, oracle, precision
from ..compare import DEFAULT_MODE, tolerance_for
from ..protocol import KernelFailure
from .context import Run
from .oracles import honest_rule


class PrecisionView:
    """What is known of both sides' precision; `describe()` writes the record."""

    def __init__(self, run: Run, task_dtypes: list[str], reference_settings: Any) -> None:
        self.run = run
        self.task_dtypes = task_dtypes
        self.reference_settings = reference_settings
        self.kernel_settings: Any = None
        self.source_math: Optional[list[Any]] = None  # the kernel source's findings (the server's scan)
        self.compiled_reading: Any = None  # what the launched kernels' compiled code computes in (compiled.py)

    def describe(self) -> None:
        """The record: the policy, the tolerance per task dtype, what the kernel computes in
        (its source's findings, then what its process had in force once imported) as it
        applies to the task's dtypes, and the settings the reference ran under."""
        run = self.run
        settings, policy = run.settings, run.policy
        if self.source_math is None:
            self.source_math = [f for f in (run.result.get("precision") or {}).get("kernel_math", [])
                                if not f.get("dynamic") and not f.get("compiled")]
        found = self.source_math + precision.dynamic_findings(policy, self.kernel_settings)
        found, reading = precision.with_compiled(found, self.compiled_reading)
        mode = settings.tolerance or DEFAULT_MODE
        table = {d: list(tolerance_for(d, settings.atol, settings.rtol, mode, policy)) for d in self.task_dtypes}
        record = precision.summarize(policy, found, self.task_dtypes, table)
        if honest_rule(settings):
            # The table stays the fallback's (an output without an oracle).
            record["rule"] = "oracle"
            record["factor"] = {d: oracle.FACTOR[d] for d in self.task_dtypes if oracle.covers(d)}
        record["reference_settings"] = self.reference_settings
        record["kernel_settings"] = self.kernel_settings
        record["reading"] = reading
        run.result["precision"] = record

    def read_compiled(self) -> None:
        """What the audited forwards' launches compute in, from their compiled code (the
        worker's compiled.read; on the CPU compiled up to TTIR for a CUDA target), into the
        precision record; on the CPU a kernel whose math the policy refuses there is refused
        (refuse_blind_precision)."""
        self.read_launches()
        if not self.run.gpu:
            refuse_blind_precision(self.run)

    def read_launches(self) -> None:
        """The worker's reading of the audited launches' compiled code, into the record."""
        self.run.progress("reading the compiled kernels")
        reading: messages.PrecisionReading = self.run.link.call(messages.Precision(op="precision"), "precision")
        self.compiled_reading = reading.get("reading")
        self.describe()
        specs = self.compiled_reading.get("launchers") if isinstance(self.compiled_reading, dict) else None
        if self.run.gpu and specs and self.run.store is not None:
            # For the worker of a later candidate to build ahead (launchers.py); the server
            # keeps only specs it finds valid.
            self.run.store.keep_launchers(self.run.device, specs)

    def read_compiled_of_a_mismatch(self) -> None:
        """The compiled reading for a kernel that gave wrong values: its precision record (and
        so its repair's precision hint) then says what the launched kernels computed in, also
        where the source cannot (a precision chosen at run time). Best effort: the mismatch is
        the verdict whatever this finds."""
        from ..errors import first_line

        try:
            self.read_launches()
        except Exception as e:  # noqa: BLE001 -- the verdict stands; the source's reading stays
            self.run.note("the compiled kernels of this mismatch were not read: %s" % first_line(str(e)))


def refuse_blind_precision(run: Run) -> None:
    """Issue 36, item 7: Triton's interpreter computes tl.dot in float32 whatever its input
    precision, and PyTorch's CPU matmuls never use TF32, so a kernel the policy would refuse on
    a GPU for TF32 math passes every trial here. Its CPU verdict is not `correct` but a
    `mismatch` that says so, with what was seen, so that the pipeline repairs it before a GPU
    runs it."""
    policy = run.policy
    record = run.result.get("precision") or {}
    blind = [c for c in record.get("reduced") or [] if c in precision.CPU_BLIND]
    if not blind:
        return
    seen = [f["text"] for f in record.get("kernel_math") or [] if f.get("category") in blind]
    summary = "would fail under %s on a GPU: %s" % (policy, "; ".join(seen[:3]) + ("; ..." if len(seen) > 3 else ""))
    message = ("%s. On the CPU the trials cannot show it (Triton's interpreter computes tl.dot in float32 "
               "whatever input_precision says, and PyTorch's CPU matmuls never use TF32); on a GPU the %s "
               "policy holds float32 outputs to float32's tolerance. Pass input_precision=\"ieee\" (or "
               "\"tf32x3\") to tl.dot, and leave TF32 off." % (summary, policy))
    raise KernelFailure("mismatch", summary, message, {"precision": blind, "would_fail_on": "gpu", "kernel_math": seen})
