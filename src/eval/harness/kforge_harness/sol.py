"""Speed of light: the least time the task's forward can take on a device, from its work.

The work is counted on the reference's forward, in the judge (trusted), by `WorkCounter`: the
FLOPs of every operator `torch.utils.flop_counter` has a formula for (matmuls, convolutions,
attention), bucketed by the operands' dtype and by family (matmul or convolution: they run
under different TF32 switches); the arithmetic of elementwise operators, reductions and
normalizations (`elementwise`: one FLOP per output element of an arithmetic operator, per
input element of a reduction, a few per element of a fused normalization, by the tables
below) and of transcendental ones (`transcendental`: exp, log, erf, tanh, sigmoid, GELU,
softmax...: one per element); and the least bytes the forward has to move: the inputs,
parameters and buffers it reads, and the outputs it writes, each storage once. The counts do
not depend on the device, so they are recorded on the CPU too.

Every approximation errs low (the bound must never exceed what an honest kernel can reach):
operators outside the tables add no FLOPs (data movement: copies, views, concatenation,
indexing), a view reads nothing, an indexing operator reads no more of what it indexes than
it returns, an input, parameter or buffer is counted only for the largest part of it an
operator read, an output that is an input returned as it is costs no write.

The bound (`bound`): the larger of the compute time and the memory time, against the
device's measured peaks (peaks.py), for the precision the policy accepts:
- a GEMM or convolution of a dtype at the fastest math that keeps that dtype's accuracy:
  float32 under `strict` at the faster of the CUDA cores (`fp32`) and 3xTF32 on tensor cores
  (three TF32 products: a third of the `tf32` peak) or bfloat16x6 (a sixth of `bf16`'s);
  float32 at `tf32` under `tf32` (and convolutions under `pytorch`, cuDNN's default); half
  types at their own peak;
- elementwise and transcendental FLOPs at twice the `fp32` peak (an FMA counts two FLOPs in
  that peak, an add or an exp one; packed half math at most doubles it): the CUDA cores,
  which a kernel may keep busy beside tensor-core GEMMs, so the compute time is the larger of
  the GEMMs' and the elementwise work's, never their sum;
- the bytes certain to cross DRAM in a timed run: with the L2 flush before each run the
  inputs, parameters and buffers are read from DRAM, while outputs up to the L2's size may
  stay there when the window closes; without the flush whatever fits in L2 may stay.
A kernel whose median beats the bound is `faster_than_light`: no percentage above 100% is
shown without that flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, TypedDict

from .dispatch_modes import no_dynamo
from .tensors import flatten_outputs, model_tensors, storage_bytes, storage_key

if TYPE_CHECKING:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

# What every tensor on one storage shares (tensors.storage_key).
StorageKey = Tuple[str, int]
# (peak name, products per FLOP): one way to run a GEMM or convolution.
Scheme = Tuple[str, int]


class FlopEntry(TypedDict):
    """One line of WorkCounts' "flops": the FLOPs of one dtype and family."""

    dtype: str
    family: str
    flops: int


class WorkCounts(TypedDict, total=False):
    """The forward's work (WorkCounter.counts); "uncounted" only where a formula failed."""

    flops: List[FlopEntry]
    total_flops: int
    bytes: Dict[str, int]
    total_bytes: int
    method: str
    uncounted: List[str]


class Bound(TypedDict):
    """The lower bound on a forward's time (bound)."""

    bound_ms: float
    compute_ms: float
    memory_ms: float
    gemm_ms: float
    elementwise_ms: float
    limit: str
    bytes: int
    math: Dict[str, str]
    peaks_used: Dict[str, float]
    unbounded_dtypes: List[str]
    memory_only: bool


# result["speed_of_light"] (figures, cpu_figures).
SpeedOfLight = Dict[str, Any]

MATMUL, CONVOLUTION = "matmul", "convolution"
ELEMENTWISE, TRANSCENDENTAL = "elementwise", "transcendental"
# Elementwise arithmetic: FLOPs per output element (1 unless listed).
ELEMENTWISE_OPS = {
    "aten.add": 1, "aten.sub": 1, "aten.rsub": 1, "aten.mul": 1, "aten.div": 1, "aten.neg": 1, "aten.abs": 1,
    "aten.relu": 1, "aten.leaky_relu": 1, "aten.hardtanh": 1, "aten.clamp": 1, "aten.clamp_min": 1,
    "aten.clamp_max": 1, "aten.maximum": 1, "aten.minimum": 1, "aten.where": 1, "aten.sign": 1, "aten.floor": 1,
    "aten.ceil": 1, "aten.round": 1, "aten.trunc": 1, "aten.remainder": 1, "aten.fmod": 1, "aten.addcmul": 2,
    "aten.addcdiv": 2, "aten.lerp": 2, "aten.hardsigmoid": 2, "aten.hardswish": 3, "aten.threshold": 1,
    "aten.square": 1, "aten.eq": 1, "aten.ne": 1, "aten.lt": 1, "aten.le": 1, "aten.gt": 1, "aten.ge": 1,
    "aten.masked_fill": 1, "aten.reciprocal": 1, "aten.relu6": 1, "aten.glu": 1, "aten.prelu": 1,
    "aten._prelu_kernel": 1,
}
# Reductions and fused normalizations: FLOPs per element of their (first) input.
REDUCTION_OPS = {
    "aten.sum": 1, "aten.mean": 1, "aten.amax": 1, "aten.amin": 1, "aten.max": 1, "aten.min": 1, "aten.prod": 1,
    "aten.var": 2, "aten.std": 2, "aten.var_mean": 2, "aten.std_mean": 2, "aten.linalg_vector_norm": 2,
    "aten.norm": 2, "aten.argmax": 1, "aten.argmin": 1, "aten.cumsum": 1, "aten.cumprod": 1,
    "aten.native_layer_norm": 5, "aten.native_batch_norm": 4, "aten._native_batch_norm_legit": 4,
    "aten._native_batch_norm_legit_no_training": 2, "aten.native_group_norm": 5, "aten._softmax": 3,
    "aten._log_softmax": 3, "aten.logsumexp": 2, "aten.avg_pool2d": 1, "aten.avg_pool3d": 1,
    "aten.avg_pool1d": 1, "aten.max_pool2d_with_indices": 1, "aten.max_pool3d_with_indices": 1,
    "aten._adaptive_avg_pool2d": 1, "aten._adaptive_avg_pool3d": 1, "aten.adaptive_max_pool2d": 1,
    "aten.mse_loss": 3, "aten.smooth_l1_loss": 4, "aten.huber_loss": 4, "aten.nll_loss_forward": 1,
    "aten.binary_cross_entropy": 4, "aten.kl_div": 3, "aten.rms_norm": 3, "aten._fused_rms_norm": 3,
}
# Transcendental functions: per output element (per input element for softmax-like ones).
TRANSCENDENTAL_OPS = frozenset({
    "aten.exp", "aten.exp2", "aten.expm1", "aten.log", "aten.log2", "aten.log10", "aten.log1p", "aten.erf",
    "aten.erfc", "aten.erfinv", "aten.tanh", "aten.sigmoid", "aten.sin", "aten.cos", "aten.tan", "aten.asin",
    "aten.acos", "aten.atan", "aten.atan2", "aten.sinh", "aten.cosh", "aten.asinh", "aten.acosh", "aten.atanh",
    "aten.pow", "aten.sqrt", "aten.rsqrt", "aten.gelu", "aten.silu", "aten.mish", "aten.softplus", "aten.elu",
    "aten.selu", "aten.celu", "aten.logit", "aten.log_sigmoid_forward", "aten._softmax", "aten._log_softmax",
    "aten.logsumexp", "aten.lgamma", "aten.digamma", "aten.binary_cross_entropy", "aten.kl_div",
})
MEMORY, COMPUTE = "memory", "compute"
# Operators that read only the rows or elements their indices pick from their first argument
# (an embedding table, a gathered tensor): it counts for no more than what they return.
PARTIAL_READERS = frozenset({"aten.embedding", "aten._embedding_bag", "aten._embedding_bag_forward_only",
                             "aten.embedding_bag", "aten.index_select", "aten.gather", "aten.index",
                             "aten._unsafe_index", "aten.take", "aten.masked_select"})
# Peaks the micro-benchmark measures (peaks.py), by name.
PEAK_NAMES = ("fp32", "tf32", "fp16", "bf16")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _family(packet: object) -> str:
    return CONVOLUTION if "conv" in str(packet) else MATMUL


class WorkCounter:
    """Counts a forward's FLOPs and the bytes it reads from `sources` (inputs, parameters,
    buffers: {storage key: kind}) while it runs; use `with counter.mode():`."""

    def __init__(self, inputs: Any, model: object) -> None:
        import torch

        self.flops: dict[tuple[str, str], int] = {}  # (dtype, family) -> FLOPs
        self.reads: dict[StorageKey, tuple[str, int]] = {}  # storage key -> (kind, bytes read at most once)
        self.sources: dict[StorageKey, tuple[str, int]] = {}  # storage key -> (kind, storage bytes)
        for _, t in flatten_outputs(inputs):
            if isinstance(t, torch.Tensor):
                self.sources.setdefault(storage_key(t), ("inputs", storage_bytes(t)))
        for t in model_tensors(model):
            self.sources.setdefault(storage_key(t), ("parameters", storage_bytes(t)))
        self.errors: list[str] = []

    def mode(self) -> TorchDispatchMode:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import flop_registry

        counter = self

        # TorchDispatchMode's __init_subclass__ and __init__ are not annotated.
        class Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return no_dynamo()

            def __torch_dispatch__(self, func: Any, types: object, args: tuple[Any, ...] = (),
                                   kwargs: Optional[dict[str, Any]] = None) -> Any:
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

        return Mode()  # type: ignore[no-untyped-call]

    def record(self, func: Any, packet: object, formula: Optional[Callable[..., Any]], args: tuple[Any, ...],
               kwargs: dict[str, Any], out: Any) -> None:
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
        if not tensors:
            return
        if formula is None:
            self.record_arithmetic(str(packet), tensors, out)
            return
        try:
            flops = int(formula(*args, **kwargs, out_val=out))
        except Exception as e:  # noqa: BLE001 -- a formula that cannot count leaves the bound lower, never wrong
            self.errors.append("%s: %s: %s" % (packet, type(e).__name__, e))
            return
        self.add((_dtype_name(tensors[0].dtype), _family(packet)), flops)

    def add(self, key: tuple[str, str], flops: int) -> None:
        if flops:
            self.flops[key] = self.flops.get(key, 0) + flops

    def record_arithmetic(self, name: str, tensors: list[torch.Tensor], out: Any) -> None:
        """The elementwise and transcendental FLOPs of an operator without a formula, by the
        tables (none for operators outside them: data movement)."""
        import torch

        floating = [t for t in tensors if t.is_floating_point()]
        if not floating:
            return
        dtype = _dtype_name(floating[0].dtype)
        produced = max((o.numel() for _, o in flatten_outputs(out) if isinstance(o, torch.Tensor)), default=0)
        read = floating[0].numel()
        if name in REDUCTION_OPS:
            self.add((dtype, ELEMENTWISE), REDUCTION_OPS[name] * read)
        elif name in ELEMENTWISE_OPS:
            self.add((dtype, ELEMENTWISE), ELEMENTWISE_OPS[name] * produced)
        if name in TRANSCENDENTAL_OPS:
            self.add((dtype, TRANSCENDENTAL), read if name in REDUCTION_OPS else produced)

    def counts(self, outputs: Any) -> WorkCounts:
        """The forward's work: {"flops": [{"dtype", "family", "flops"}], "total_flops",
        "bytes": {"inputs", "parameters", "outputs"}, "total_bytes", "method"}."""
        import torch

        read = {"inputs": 0, "parameters": 0}
        for kind, size in self.reads.values():
            read[kind] += size
        written: dict[StorageKey, int] = {}
        for _, t in flatten_outputs(outputs):
            if isinstance(t, torch.Tensor):
                key = storage_key(t)
                if key in self.sources:
                    continue  # an input (or parameter) returned as it is: nothing to write
                written[key] = max(written.get(key, 0), _tensor_bytes(t))
        moved = dict(read, outputs=sum(written.values()))
        flops: list[FlopEntry] = [{"dtype": d, "family": f, "flops": n} for (d, f), n in sorted(self.flops.items()) if n]
        out: WorkCounts = {"flops": flops, "total_flops": sum(e["flops"] for e in flops), "bytes": moved,
               "total_bytes": sum(moved.values()),
               "method": "torch.utils.flop_counter formulas per operator and dtype (matmul, convolution); "
                         "elementwise, reduction and transcendental operators by kforge's tables (per element); "
                         "bytes: inputs, parameters and buffers read, outputs written, each storage once"}
        if self.errors:
            out["uncounted"] = self.errors[:10]
        return out


def _tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def count_forward(model: object, inputs: Any, forward: Callable[[], Any]) -> tuple[Any, WorkCounts]:
    """Runs `forward()` (the reference on `inputs`) under a WorkCounter; returns (outputs,
    counts)."""
    counter = WorkCounter(inputs, model)
    with counter.mode():
        out = forward()
    return out, counter.counts(out)


# -- the bound -----------------------------------------------------------------------------

# The float32-accurate ways to run a float32 GEMM, as (peak, products per FLOP): the CUDA
# cores, 3xTF32 and bfloat16x6 on tensor cores (split operands, three or six products).
FLOAT32_SCHEMES = (("fp32", 1), ("tf32", 3), ("bf16", 6))
# Elementwise and transcendental FLOPs run at this multiple of the `fp32` peak (see above).
ELEMENTWISE_SPEEDUP = 2.0


def schemes_for(dtype: str, family: str, policy: Optional[str]) -> tuple[Scheme, ...]:
    """The (peak, products per FLOP) a GEMM or convolution of `dtype` may run at under the
    precision policy (precision.py): what keeps the dtype's accuracy, or TF32 where the policy
    accepts TF32 (`tf32`; convolutions under `pytorch`, cuDNN's default). Empty: no peak is
    measured for the dtype (its FLOPs are left out of the bound)."""
    if dtype in ("float16", "bfloat16"):
        return (("fp16" if dtype == "float16" else "bf16", 1),)
    if dtype == "float32":
        if policy == "tf32" or (policy == "pytorch" and family == CONVOLUTION):
            return (("tf32", 1),)
        return FLOAT32_SCHEMES
    return ()


def peak_for(dtype: str, family: str, policy: Optional[str]) -> Optional[str]:
    """The name of the fastest scheme's peak in the table (kept for callers that name one)."""
    schemes = schemes_for(dtype, family, policy)
    return schemes[0][0] if schemes else None


def _fastest(entry: Mapping[str, Any], matmul: Mapping[str, float],
             policy: Optional[str]) -> Optional[tuple[float, str]]:
    """(seconds, scheme name) of a GEMM/convolution entry at its fastest accepted scheme, or
    None without a measured peak."""
    best: Optional[tuple[float, str]] = None
    for name, products in schemes_for(entry["dtype"], entry["family"], policy):
        peak = matmul.get(name)
        if not peak or peak <= 0:
            continue
        seconds: float = entry["flops"] * products / peak
        if best is None or seconds < best[0]:
            best = (seconds, name if products == 1 else "%dx%s" % (products, name))
    return best


def dram_bytes(counts: Mapping[str, Any], l2_bytes: Optional[int], flush_l2: bool) -> int:
    """The bytes certain to cross DRAM in a timed run: with the flush, the inputs and
    parameters (evicted before each run) and the outputs beyond what L2 can hold when the
    window closes; without it, whatever exceeds L2."""
    moved: Mapping[str, int] = counts.get("bytes") or {}
    reads = moved.get("inputs", 0) + moved.get("parameters", 0)
    outputs = moved.get("outputs", 0)
    l2 = int(l2_bytes or 0)
    if flush_l2:
        return reads + max(0, outputs - l2)
    return max(0, reads + outputs - l2)


def bound(counts: Mapping[str, Any], peaks: Optional[Mapping[str, Any]], policy: Optional[str],
          l2_bytes: Optional[int] = 0, flush_l2: bool = True) -> Optional[Bound]:
    """The lower bound on the forward's time: {"bound_ms", "compute_ms", "memory_ms",
    "gemm_ms", "elementwise_ms", "limit", "bytes", "math" (per dtype and family: the scheme
    counted), "peaks_used", "unbounded_dtypes", "memory_only"}, or None where `peaks` lacks
    the bandwidth."""
    bandwidth: Optional[float] = (peaks or {}).get("dram_bytes_per_s")
    matmul: Mapping[str, float] = (peaks or {}).get("matmul_flops_per_s") or {}
    if not bandwidth or bandwidth <= 0:
        return None
    used: dict[str, float] = {}
    math: dict[str, str] = {}
    unbounded: list[str] = []
    gemm_s, elementwise_s = 0.0, 0.0
    cuda_cores = ELEMENTWISE_SPEEDUP * (matmul.get("fp32") or 0.0)
    for entry in counts.get("flops") or []:
        if entry["family"] in (ELEMENTWISE, TRANSCENDENTAL):
            if cuda_cores <= 0:
                unbounded.append(entry["dtype"])
                continue
            elementwise_s += entry["flops"] / cuda_cores
            used["fp32"] = matmul["fp32"]
            continue
        fastest = _fastest(entry, matmul, policy)
        if fastest is None:
            unbounded.append(entry["dtype"])
            continue
        gemm_s += fastest[0]
        math["%s %s" % (entry["dtype"], entry["family"])] = fastest[1]
        peak = fastest[1].split("x")[-1]
        used[peak] = matmul[peak]
    # Tensor-core GEMMs and CUDA-core arithmetic can overlap: the larger, not the sum.
    compute_s = max(gemm_s, elementwise_s)
    dram = dram_bytes(counts, l2_bytes, flush_l2)
    memory_s = dram / bandwidth
    return {"bound_ms": 1e3 * max(compute_s, memory_s), "compute_ms": 1e3 * compute_s, "memory_ms": 1e3 * memory_s,
            "gemm_ms": 1e3 * gemm_s, "elementwise_ms": 1e3 * elementwise_s,
            "limit": COMPUTE if compute_s > memory_s else MEMORY, "bytes": dram, "math": math,
            "peaks_used": used, "unbounded_dtypes": sorted(set(unbounded)),
            "memory_only": not (counts.get("flops") or [])}


def percent_of(bound_ms: Optional[float], median_ms: Optional[float]) -> Optional[float]:
    """How close a median is to the bound, in percent (100: at the speed of light)."""
    if not bound_ms or not median_ms or median_ms <= 0:
        return None
    return 100.0 * bound_ms / median_ms


def faster_than_light(bound_ms: Optional[float], kernel_figures: Optional[Mapping[str, Any]]) -> bool:
    """Whether the kernel's median beats the bound (its percentage of the speed of light is
    above 100)."""
    if not bound_ms or not kernel_figures:
        return False
    median = kernel_figures.get("median_ms")
    return bool(median and 0 < median < bound_ms)


def figures(counts: Mapping[str, Any], peaks: Optional[Mapping[str, Any]], policy: Optional[str],
            device_info: Optional[Mapping[str, Any]], flush_l2: bool, reference: Optional[Mapping[str, Any]] = None,
            kernel: Optional[Mapping[str, Any]] = None) -> SpeedOfLight:
    """The result's `speed_of_light` on a GPU: the counts, the bound against the peaks, each
    side's percentage and the flag's decision. `reference`/`kernel`: timing figures
    (median_ms, ci_high_ms)."""
    out: SpeedOfLight = {"counts": counts, "peaks": peaks, "bound_ms": None, "limit": None, "reference_pct": None,
                         "kernel_pct": None, "faster_than_light": False, "reason": None}
    found = bound(counts, peaks, policy, (device_info or {}).get("l2_bytes"), flush_l2)
    if found is None:
        out["reason"] = (peaks or {}).get("error") or "the device's peaks are not known"
        return out
    out.update(bound_ms=found["bound_ms"], compute_ms=found["compute_ms"], memory_ms=found["memory_ms"],
               gemm_ms=found["gemm_ms"], elementwise_ms=found["elementwise_ms"], limit=found["limit"],
               strict_bound_ms=found["bound_ms"], unbounded_dtypes=found["unbounded_dtypes"], math=found["math"],
               dram_bytes=found["bytes"], memory_only=found["memory_only"], policy=policy)
    if reference:
        out["reference_pct"] = percent_of(found["bound_ms"], reference.get("median_ms"))
    if kernel:
        out["kernel_pct"] = percent_of(found["bound_ms"], kernel.get("median_ms"))
        out["faster_than_light"] = faster_than_light(found["bound_ms"], kernel)
    return out


def cpu_figures(counts: Mapping[str, Any]) -> SpeedOfLight:
    """The result's `speed_of_light` without a GPU: the counts only."""
    return {"counts": counts, "peaks": None, "bound_ms": None, "limit": None, "reference_pct": None,
            "kernel_pct": None, "faster_than_light": False,
            "reason": "no GPU: the work is counted, the bound needs a device's measured peaks"}
