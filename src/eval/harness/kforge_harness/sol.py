"""Speed of light: the least time the task's forward can take on a device, from its work.

The work is counted on the reference's forward, in the judge (trusted), by `WorkCounter`: the
FLOPs of every operator `torch.utils.flop_counter` has a formula for (matmuls, convolutions,
attention; everything else counts 0), bucketed by the operands' dtype and by family (matmul
or convolution: they run under different TF32 switches), and the least bytes the forward has
to move: the inputs, parameters and buffers it reads, and the outputs it writes, each storage
once. The counts do not depend on the device, so they are recorded on the CPU too.

Every approximation errs low (the bound must never exceed what an honest kernel can reach):
operators without a formula add no FLOPs, a view reads nothing, an indexing operator reads
no more of what it indexes than it returns, an input, parameter or
buffer is counted only for the largest part of it an operator read, an output that is an
input returned as it is costs no write.

The bound (`bound`) against the device's measured peaks (peaks.py): the larger of the compute
time (the FLOPs of each math at its peak, summed) and the memory time (the bytes at the
measured DRAM bandwidth). `faster_than_light` decides the flag against a stricter bound still.
"""

from .tensors import flatten_outputs, model_tensors, storage_bytes, storage_key

# The flag's margin: a kernel is faster than light only when even the upper end of its
# median's 95% interval is below this share of the strict bound. Peaks measured by cuBLAS
# and a device copy sit within ~10% of what a hand-written kernel reaches, so an honest
# kernel near the limit stays clear of it.
FTL_MARGIN = 0.8

MATMUL, CONVOLUTION = "matmul", "convolution"
MEMORY, COMPUTE = "memory", "compute"
# Operators that read only the rows or elements their indices pick from their first argument
# (an embedding table, a gathered tensor): it counts for no more than what they return.
PARTIAL_READERS = frozenset({"aten.embedding", "aten._embedding_bag", "aten._embedding_bag_forward_only",
                             "aten.embedding_bag", "aten.index_select", "aten.gather", "aten.index",
                             "aten._unsafe_index", "aten.take", "aten.masked_select"})
# Peaks the micro-benchmark measures (peaks.py), by name.
PEAK_NAMES = ("fp32", "tf32", "fp16", "bf16")


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _family(packet):
    return CONVOLUTION if "conv" in str(packet) else MATMUL


class WorkCounter:
    """Counts a forward's FLOPs and the bytes it reads from `sources` (inputs, parameters,
    buffers: {storage key: kind}) while it runs; use `with counter.mode():`."""

    def __init__(self, inputs, model):
        import torch

        self.flops = {}  # (dtype, family) -> FLOPs
        self.reads = {}  # storage key -> (kind, bytes read at most once)
        self.sources = {}  # storage key -> (kind, storage bytes)
        for _, t in flatten_outputs(inputs):
            if isinstance(t, torch.Tensor):
                self.sources.setdefault(storage_key(t), ("inputs", storage_bytes(t)))
        for t in model_tensors(model):
            self.sources.setdefault(storage_key(t), ("parameters", storage_bytes(t)))
        self.errors = []

    def mode(self):
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import flop_registry

        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                packet = func._overloadpacket
                if packet not in flop_registry:
                    # A composite operator counts as the operators it is made of (as
                    # FlopCounterMode does): a formula may exist for those.
                    with self:
                        r = func.decompose(*args, **kwargs)
                    if r is not NotImplemented:
                        return r
                out = func(*args, **kwargs)
                counter.record(func, packet, flop_registry.get(packet), args, kwargs, out)
                return out

        return Mode()

    def record(self, func, packet, formula, args, kwargs, out):
        import torch

        tensors = [t for _, t in flatten_outputs([list(args), kwargs]) if isinstance(t, torch.Tensor)]
        if not getattr(func, "is_view", False):
            # What an indexing operator reads of its first argument: at most what it returns.
            picked = sum(_tensor_bytes(o) for _, o in flatten_outputs(out) if isinstance(o, torch.Tensor)) \
                if str(packet) in PARTIAL_READERS else None
            for i, t in enumerate(tensors):
                key = storage_key(t)
                source = self.sources.get(key)
                if source is not None:
                    kind, size = source
                    seen = self.reads.get(key, (kind, 0))[1]
                    read = _tensor_bytes(t) if picked is None or i else min(_tensor_bytes(t), picked)
                    self.reads[key] = (kind, min(size, max(seen, read)))
        if formula is None or not tensors:
            return
        try:
            flops = int(formula(*args, **kwargs, out_val=out))
        except Exception as e:  # noqa: BLE001 -- a formula that cannot count leaves the bound lower, never wrong
            self.errors.append("%s: %s: %s" % (packet, type(e).__name__, e))
            return
        key = (_dtype_name(tensors[0].dtype), _family(packet))
        self.flops[key] = self.flops.get(key, 0) + flops

    def counts(self, outputs):
        """The forward's work: {"flops": [{"dtype", "family", "flops"}], "total_flops",
        "bytes": {"inputs", "parameters", "outputs"}, "total_bytes", "method"}."""
        import torch

        read = {"inputs": 0, "parameters": 0}
        for kind, size in self.reads.values():
            read[kind] += size
        written = {}
        for _, t in flatten_outputs(outputs):
            if isinstance(t, torch.Tensor):
                key = storage_key(t)
                if key in self.sources:
                    continue  # an input (or parameter) returned as it is: nothing to write
                written[key] = max(written.get(key, 0), _tensor_bytes(t))
        moved = dict(read, outputs=sum(written.values()))
        flops = [{"dtype": d, "family": f, "flops": n} for (d, f), n in sorted(self.flops.items()) if n]
        out = {"flops": flops, "total_flops": sum(e["flops"] for e in flops), "bytes": moved,
               "total_bytes": sum(moved.values()),
               "method": "torch.utils.flop_counter formulas per operator and dtype; bytes: inputs, parameters "
                         "and buffers read, outputs written, each storage once"}
        if self.errors:
            out["uncounted"] = self.errors[:10]
        return out


def _tensor_bytes(t):
    return t.numel() * t.element_size()


def count_forward(model, inputs, forward):
    """Runs `forward()` (the reference on `inputs`) under a WorkCounter; returns (outputs,
    counts)."""
    counter = WorkCounter(inputs, model)
    with counter.mode():
        out = forward()
    return out, counter.counts(out)


# -- the bound -----------------------------------------------------------------------------


def peak_for(dtype, family, policy, fastest=False):
    """The peak (PEAK_NAMES) that FLOPs of this dtype and family run at under the precision
    policy (precision.py): float32 at TF32's peak where the policy lets TF32 in (`tf32`; and
    convolutions under `pytorch`, cuDNN's default), or always with `fastest` (the flag's
    bound: a kernel is never flagged for its choice of math, the precision check judges
    that). None: no peak is measured for the dtype (its FLOPs are left out of the bound)."""
    if dtype in ("float16", "bfloat16"):
        return "fp16" if dtype == "float16" else "bf16"
    if dtype == "float32":
        if fastest or policy == "tf32" or (policy == "pytorch" and family == CONVOLUTION):
            return "tf32"
        return "fp32"
    return None


def bound(counts, peaks, policy, strict=None):
    """The lower bound on the forward's time: {"bound_ms", "compute_ms", "memory_ms",
    "limit", "peaks_used", "unbounded_dtypes"}, or None where `peaks` lacks what it needs.
    `strict` (the flag's bound): {"l2_bytes", "flush_l2"}: float32 at its fastest peak and
    only the bytes certain to cross DRAM (inputs, which are refreshed and evicted from L2
    before each timed run when the flush is on, and what of the parameters and outputs
    cannot stay in L2)."""
    bandwidth = (peaks or {}).get("dram_bytes_per_s")
    matmul = (peaks or {}).get("matmul_flops_per_s") or {}
    if not bandwidth or bandwidth <= 0:
        return None
    compute_s, used, unbounded = 0.0, {}, []
    for entry in counts.get("flops") or []:
        name = peak_for(entry["dtype"], entry["family"], policy, fastest=strict is not None)
        peak = matmul.get(name) if name else None
        if not peak or peak <= 0:
            unbounded.append(entry["dtype"])
            continue
        used[name] = peak
        compute_s += entry["flops"] / peak
    moved = counts.get("bytes") or {}
    if strict is None:
        dram = counts.get("total_bytes") or 0
    else:
        inputs = moved.get("inputs", 0)
        rest = moved.get("parameters", 0) + moved.get("outputs", 0)
        if not strict.get("flush_l2"):
            inputs, rest = 0, rest + inputs
        dram = inputs + max(0, rest - int(strict.get("l2_bytes") or 0))
    memory_s = dram / bandwidth
    return {"bound_ms": 1e3 * max(compute_s, memory_s), "compute_ms": 1e3 * compute_s, "memory_ms": 1e3 * memory_s,
            "limit": COMPUTE if compute_s > memory_s else MEMORY, "bytes": dram, "peaks_used": used,
            "unbounded_dtypes": sorted(set(unbounded))}


def percent_of(bound_ms, median_ms):
    """How close a median is to the bound, in percent (100: at the speed of light)."""
    if not bound_ms or not median_ms or median_ms <= 0:
        return None
    return 100.0 * bound_ms / median_ms


def faster_than_light(strict_bound_ms, kernel_figures):
    """Whether the kernel's timing says it beats the strict bound: even the upper end of
    its median's interval (the median where there is none) is below FTL_MARGIN of it."""
    if not strict_bound_ms or not kernel_figures:
        return False
    high = kernel_figures.get("ci_high_ms") or kernel_figures.get("median_ms")
    return bool(high and high > 0 and high < FTL_MARGIN * strict_bound_ms)


def figures(counts, peaks, policy, device_info, flush_l2, reference=None, kernel=None):
    """The result's `speed_of_light` on a GPU: the counts, the bound against the peaks, each
    side's percentage and the flag's decision. `reference`/`kernel`: timing figures
    (median_ms, ci_high_ms)."""
    out = {"counts": counts, "peaks": peaks, "bound_ms": None, "limit": None, "reference_pct": None,
           "kernel_pct": None, "faster_than_light": False, "reason": None}
    full = bound(counts, peaks, policy)
    if full is None:
        out["reason"] = (peaks or {}).get("error") or "the device's peaks are not known"
        return out
    strict = bound(counts, peaks, policy, strict={"l2_bytes": (device_info or {}).get("l2_bytes"),
                                                  "flush_l2": flush_l2})
    out.update(bound_ms=full["bound_ms"], compute_ms=full["compute_ms"], memory_ms=full["memory_ms"],
               limit=full["limit"], strict_bound_ms=strict["bound_ms"], unbounded_dtypes=full["unbounded_dtypes"])
    if reference:
        out["reference_pct"] = percent_of(full["bound_ms"], reference.get("median_ms"))
    if kernel:
        out["kernel_pct"] = percent_of(full["bound_ms"], kernel.get("median_ms"))
        out["faster_than_light"] = faster_than_light(strict["bound_ms"], kernel)
    return out


def cpu_figures(counts):
    """The result's `speed_of_light` without a GPU: the counts only."""
    return {"counts": counts, "peaks": None, "bound_ms": None, "limit": None, "reference_pct": None,
            "kernel_pct": None, "faster_than_light": False,
            "reason": "no GPU: the work is counted, the bound needs a device's measured peaks"}
