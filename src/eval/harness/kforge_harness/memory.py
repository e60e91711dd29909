"""How much device memory an evaluation needs, whether it fits, and how much it used.

The plan (docs/eval-result.md, "Memory"): the judge lends the kernel one input buffer per
input tensor (I bytes in all) and one slot per output (O), and keeps a private copy of one
draw of the inputs (I), of the reference's outputs (O) and, once the worker says "done", of
the kernel's outputs taken from the slots (O: what it compares, which the worker can no
longer change); the worker holds the kernel's own outputs (O). The reference's scratch
beyond its inputs and outputs (R, measured on the first forward) is needed by the reference
and, as an estimate, by the kernel. Both processes keep an L2 flush buffer. The kernel's
process builds its own model after the plan is checked (W, the reference model's
parameters and buffers as an estimate), and timed, both timing processes move a model of up
to RELOCATE_LIMIT_BYTES to fresh memory a few times and keep the old copies (M each, see
relocation_bytes). So an evaluation peaks at about

    2 I + 4 O + 2 R + 2 flush + W

(timed: 4 I + 6 O + 2 R + 2 flush + W + 2 M) plus the CUDA contexts and the judge's own
reference model, which are already in use when the plan is checked. A task whose
plan does not fit in the memory that is free when the judge starts gets an `oom` verdict
naming these figures before any kernel runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, MutableMapping, Optional, TypedDict

if TYPE_CHECKING:
    import torch

GIB = float(1 << 30)

# worker.op_relocate moves a model of up to this size to fresh memory between rounds of
# timed runs (docs/benchmarks.md, round 4), each time behind a spacer of up to
# RELOCATE_SPACER_BYTES, and keeps the old copies alive (a kernel may hold raw pointers to
# them); a larger model stays where it was loaded.
RELOCATE_LIMIT_BYTES = 64 << 20
RELOCATE_SPACER_BYTES = 4096 * 512


def tensor_bytes(tree: Any) -> int:
    """Bytes of the tensors of a nested structure (views of one storage count once each)."""
    import torch

    from .tensors import flatten_outputs

    return sum(v.numel() * v.element_size() for _, v in flatten_outputs(tree) if isinstance(v, torch.Tensor))


def storages_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the storages behind `tensors`, each storage once (tied weights, views of one
    flat weight buffer)."""
    from .tensors import storage_bytes, storage_key

    return sum({storage_key(t): storage_bytes(t) for t in tensors}.values())


def model_bytes(model: object) -> int:
    """Bytes of a model's parameters and buffers, each storage once; 0 for a model that is
    not a torch module."""
    from .tensors import model_tensors

    return storages_bytes(model_tensors(model))


def relocation_bytes(weights_bytes: int) -> int:
    """What worker.op_relocate leaves behind in one timing process over an evaluation: the
    old copies of a model of `weights_bytes` and their spacers, once per move."""
    from .timed import PLACEMENTS

    if weights_bytes > RELOCATE_LIMIT_BYTES:
        return 0
    return (PLACEMENTS - 1) * (weights_bytes + RELOCATE_SPACER_BYTES)


def plan_bytes(inputs_bytes: int, outputs_bytes: int, reference_scratch_bytes: int, flush_bytes: int, timed: bool = False,
               weights_bytes: int = 0) -> int:
    """Peak bytes of an evaluation beyond what was in use when the judge started. Timed (a
    GPU), the reference's own process holds its lent inputs and slots, its outputs and its
    scratch beside the kernel's, and the judge a draw to rotate and one staged per run:
    4 inputs and 6 outputs; else 2 and 4. The kernel's process builds a model of about
    `weights_bytes`, and timed, both processes keep the copies their relocations leave."""
    if timed:
        return (4 * inputs_bytes + 6 * outputs_bytes + 2 * reference_scratch_bytes + 2 * flush_bytes
                + weights_bytes + 2 * relocation_bytes(weights_bytes))
    return 2 * inputs_bytes + 4 * outputs_bytes + 2 * reference_scratch_bytes + 2 * flush_bytes + weights_bytes


def gib(n: float) -> str:
    return "%.1f GiB" % (n / GIB) if n >= GIB / 10 else "%.0f MiB" % (n / float(1 << 20))


class Footprint(TypedDict):
    """The result's `footprint`: the plan's figures (docs/eval-result.md, "Memory")."""

    inputs_bytes: int
    outputs_bytes: int
    reference_scratch_bytes: int
    flush_bytes: int
    weights_bytes: int
    relocation_bytes: int
    planned_peak_bytes: int
    free_bytes: int
    total_bytes: int


def footprint(inputs_bytes: int, outputs_bytes: int, reference_scratch_bytes: int, flush_bytes: int, free_bytes: int,
              total_bytes: int, timed: bool = False, weights_bytes: int = 0) -> Footprint:
    """The record of the plan for the result (bytes throughout)."""
    peak = plan_bytes(inputs_bytes, outputs_bytes, reference_scratch_bytes, flush_bytes, timed, weights_bytes)
    return {"inputs_bytes": int(inputs_bytes), "outputs_bytes": int(outputs_bytes),
            "reference_scratch_bytes": int(reference_scratch_bytes), "flush_bytes": int(flush_bytes),
            "weights_bytes": int(weights_bytes),
            "relocation_bytes": int(2 * relocation_bytes(weights_bytes)) if timed else 0,
            "planned_peak_bytes": int(peak),
            "free_bytes": int(free_bytes), "total_bytes": int(total_bytes)}


def does_not_fit(record: Footprint, where: str) -> Optional[str]:
    """A one-line reason when the plan exceeds the free memory, else None."""
    if record["planned_peak_bytes"] <= record["free_bytes"]:
        return None
    weights = ""
    if record.get("weights_bytes"):
        weights = ", the kernel's model %s" % gib(record["weights_bytes"])
    return ("the evaluation needs about %s of %s memory (inputs %s, outputs %s, reference scratch %s%s; the "
            "judge and the kernel each hold copies) but %s of %s are free"
            % (gib(record["planned_peak_bytes"]), where, gib(record["inputs_bytes"]), gib(record["outputs_bytes"]),
               gib(record["reference_scratch_bytes"]), weights, gib(record["free_bytes"]),
               gib(record["total_bytes"])))


def inputs_do_not_fit(inputs_bytes: int, free_bytes: int, total_bytes: int, where: str) -> Optional[str]:
    """Before the first draw (its size found on the meta device): a one-line reason when
    even the two copies of the inputs every evaluation holds do not fit, else None."""
    if 2 * inputs_bytes <= free_bytes:
        return None
    return ("get_inputs() makes %s of inputs and an evaluation holds at least two copies (%s) but %s of %s "
            "memory are free" % (gib(inputs_bytes), gib(2 * inputs_bytes), gib(free_bytes), where))


def out_of_memory_reason(what: str, error: BaseException, free_bytes: int, total_bytes: int) -> str:
    """One line for an allocation that failed: what was being done and the device's state."""
    from .errors import first_line

    return "%s ran out of memory (%s free of %s): %s" % (
        what, gib(free_bytes), gib(total_bytes), first_line(str(error))[:300])


def is_out_of_memory(error: BaseException) -> bool:
    import torch

    from .errors import OOM_PATTERNS
    from .exchange import DriverOutOfMemory

    if isinstance(error, (torch.cuda.OutOfMemoryError, DriverOutOfMemory, MemoryError)):
        return True
    text = str(error)
    return any(p in text for p in OOM_PATTERNS)  # the kernel's failures are classified by the same words


def host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory, from /proc/meminfo; (0, 0) when unreadable."""
    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                parts = rest.split()
                if parts:
                    fields[name] = int(parts[0]) * 1024
    except (OSError, ValueError):
        return 0, 0
    return fields.get("MemAvailable", 0), fields.get("MemTotal", 0)


class Meter:
    """Peak device memory in use per phase, sampled at the judge's steps: device-wide
    (total - free), so it counts the kernel's process, lent buffers and CUDA contexts too.
    Both processes keep freed memory in their caching allocators, so a sample after a step
    sees what that step reserved."""

    def __init__(self, device: str, record: MutableMapping[str, int]) -> None:
        self.gpu = device != "cpu"
        self.record = record
        self.phase: Optional[str] = None

    def state(self) -> tuple[int, int]:
        """(free, total) bytes of the device (the host on the CPU)."""
        if not self.gpu:
            return host_memory()
        import torch

        return torch.cuda.mem_get_info()

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.sample()

    def sample(self) -> None:
        if self.phase is None or not self.gpu:
            return
        free, total = self.state()
        used = int(total - free)
        if used > self.record.get(self.phase, 0):
            self.record[self.phase] = used
