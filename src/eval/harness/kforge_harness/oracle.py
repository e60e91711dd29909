"""The float64 oracle and the honest float32 error (the `oracle` tolerance rule, compare.py).

A kernel on a float32 task is held to what honest float32 arithmetic achieves on the very
inputs of the comparison, no tighter and no looser:

- the *oracle*: the reference model run again in float64 (its parameters, buffers and
  floating inputs widened exactly; factories without a dtype make float64), on the same
  inputs. It stands for the exact result;
- the *honest error*: how far honest float32 evaluations of the reference land from the
  oracle. Two are measured: the reference itself (PyTorch's own summation orders, often
  trees), and its *sequential twin* (the same forward with every sum, mean, cumulative sum
  and matrix product accumulated block by block in order, TWIN_BLOCK terms at a time: the
  order a plain loop, a K-loop GEMM or a carried scan uses). Their errors per element are
  smoothed into a scale (`OutputScale`): a single element's error is one sample (it can be
  0 by luck), so the scale is the mean square error modelled as a product of per-axis
  factors (rows, columns, channels, positions along a scan each get their own level, from
  at least MIN_AVERAGED elements each), plus the output's relative error level times its
  magnitude. The larger of the two orders' scales is the honest error s;
  An element's honest error is never below the rounding of its exact value to the output's
  dtype (half a unit in the last place);
- the rule: |kernel - oracle| <= FACTOR * s per element (and the dtype's smallest normal
  where the exact value is 0). The *error ratio* |kernel - oracle| / s, at its worst
  element, is the kernel's error as a multiple of the honest error: the margin, against
  the limit FACTOR.

FACTOR is set between what honest reorderings and reduced precision do, measured with a
float64 oracle on the signed-input trial (kforge's, which puts outputs near zero): on
float32 outputs a fully sequential float32 sum or GEMM K-loop lands at up to 15x (55x for a
fully sequential scan over 32768 elements, the worst honest case found), blocked, split-K,
tree, parallel-scan and 3xTF32 orders at up to 10x; TF32 inputs at 500x (a 32768-term sum)
to 3700x (GEMMs), bfloat16 and float16 inputs or accumulators at 3000x to 3e5x: FACTOR 128.
A float16 or bfloat16 task's reference accumulates in float32 and rounds its outputs, so its
honest error is about that rounding: float32 accumulation lands at 2x, float16 or bfloat16
accumulation at 30-46x, float8 inputs at 38-900x: FACTOR 16 there. docs/eval-result.md has
the table.

The oracle is computed for the first comparison of each input family (the task's own
draws, the signed draws) and its scale kept: later comparisons of that family (the other
trials, checked timed runs, the re-check, the compile baseline's check) compare the kernel
with the float32 reference under that scale, which differs from comparing with the oracle
by the reference's own error (a few s, next to FACTOR * s). Where there can be no oracle
(a float64 task, an operator without a float64 path, not enough memory, a forward that
raises), the output is compared under the dtype rule and the result says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Literal, Optional, Sequence, Tuple, Union

from .dispatch_modes import no_dynamo
from .tensors import flatten_outputs, tree_map

if TYPE_CHECKING:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from .wire import OracleRecord

# A dtype as torch has it, or its name.
DtypeLike = Union["torch.dtype", str]

# The honest error may be exceeded this many times, per output dtype (the module's docstring).
FACTOR = {"float32": 128.0, "complex64": 128.0, "float16": 16.0, "bfloat16": 16.0, "complex32": 16.0}
# A per-axis factor is estimated only where each of its entries averages this many elements.
MIN_AVERAGED = 64
# The modelled scale never falls below this share of the output's overall RMS honest error.
LOCAL_FLOOR = 0.01
# The sequential twin adds TWIN_BLOCK terms at a time, in order; at most TWIN_MAX_STEPS
# steps per reduction (longer ones take larger blocks).
TWIN_BLOCK = 8
TWIN_MAX_STEPS = 2048
# Elements per chunk of the oracle's passes (float64 temporaries, several per chunk).
CHUNK = 1 << 22
# Unit roundoff (half a unit in the last place at 1) of the dtypes the rule covers.
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8,
                 "complex64": 2.0 ** -24, "complex32": 2.0 ** -11}
# The smallest positive normal of each: the floor of an exactly-zero element.
TINY = {"float32": 1.1754943508222875e-38, "float16": 6.103515625e-05, "bfloat16": 1.1754943508222875e-38,
        "complex64": 1.1754943508222875e-38, "complex32": 6.103515625e-05}

RULE_TEXT = ("|kernel - float64 oracle| <= FACTOR x the error honest arithmetic makes on these inputs (the "
             "larger of the reference's and its sequential twin's, smoothed per axis, at least the rounding of the "
             "exact value); FACTOR %s" % ", ".join("%s %g" % (d, FACTOR[d]) for d in ("float32", "float16",
                                                                                     "bfloat16")))
TWIN_TEXT = ("the reference with sums, means, cumulative sums and matrix products accumulated %d terms at a "
             "time in order (at most %d steps per reduction)" % (TWIN_BLOCK, TWIN_MAX_STEPS))


def dtype_name(dtype: DtypeLike) -> str:
    return str(dtype).replace("torch.", "")


def covers(dtype: DtypeLike) -> bool:
    """Whether outputs of this dtype are judged against the oracle (float64 ones have no
    wider oracle; integer and bool ones are compared exactly)."""
    return dtype_name(dtype) in UNIT_ROUNDOFF


# -- the float64 forward -----------------------------------------------------------------


def _wide(dtype: torch.dtype) -> Optional[torch.dtype]:
    import torch

    if dtype.is_complex:
        return torch.complex128
    if dtype.is_floating_point:
        return torch.float64
    return None


def widen(tree: Any) -> Any:
    """A copy of a tree with its floating tensors in float64 (complex in complex128) and its
    other tensors cloned: inputs the float64 forward may change in place."""
    import torch

    def one(v: object) -> object:
        if isinstance(v, torch.Tensor):
            wide = _wide(v.dtype)
            return v.detach().to(wide) if wide is not None else v.detach().clone()
        return v
    return tree_map(one, tree)


class _Widened:
    """The model's floating parameters and buffers in float64 while inside; on exit each is
    put back in its own dtype (exactly: every float32, float16 and bfloat16 value is a
    float64 value) and the buffers get back the values they had (a forward may update
    running statistics)."""

    def __init__(self, model: object) -> None:
        self.model = model
        # (the module's store, the name, the tensor, its dtype, a copy of a buffer's values)
        self.saved: List[Tuple[Dict[str, Any], str, torch.Tensor, torch.dtype, Optional[torch.Tensor]]] = []

    def __enter__(self) -> _Widened:
        import torch

        if not isinstance(self.model, torch.nn.Module):
            return self
        for module in self.model.modules():
            for store in (module._parameters, module._buffers):
                for name, t in store.items():
                    if t is None or _wide(t.dtype) is None:
                        continue
                    self.saved.append((store, name, t, t.dtype, t.detach().clone() if store is module._buffers
                                       else None))
        seen: set[int] = set()
        for store, name, t, dtype, _ in self.saved:
            if id(t) in seen:
                continue  # a tied parameter: widened once
            seen.add(id(t))
            t.data = t.data.to(_wide(dtype))
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        restored: set[int] = set()
        for store, name, t, dtype, copy in self.saved:
            if id(t) not in restored:
                restored.add(id(t))
                t.data = copy if copy is not None else t.data.to(dtype)
        return False


class NarrowedError(RuntimeError):
    """The float64 forward computed something below float64: the reference casts to a
    narrower dtype itself, so its float64 run is no oracle."""


def _narrowing_watch() -> TorchDispatchMode:
    """A TorchDispatchMode that raises NarrowedError at the first operator that turns
    float64 (or complex128) operands into a narrower floating result."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    wide = (torch.float64, torch.complex128)

    # TorchDispatchMode's __init_subclass__ and __init__ are not annotated.
    class Watch(TorchDispatchMode):  # type: ignore[no-untyped-call]
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return no_dynamo()

        def __torch_dispatch__(self, func: Any, types: object, args: Tuple[Any, ...] = (),
                               kwargs: Optional[Dict[str, Any]] = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            operands = [t for _, t in flatten_outputs([list(args), kwargs]) if isinstance(t, torch.Tensor)]
            if any(t.dtype in wide for t in operands):
                for _, t in flatten_outputs(out):
                    if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) \
                            and t.dtype not in wide:
                        raise NarrowedError("the reference casts to %s itself (%s)"
                                            % (dtype_name(t.dtype), func._overloadpacket))
            return out

    return Watch()  # type: ignore[no-untyped-call]


def float64_forward(model: Callable[..., Any], inputs: Sequence[Any]) -> Any:
    """The reference's forward in float64 on a widened copy of `inputs` (no grad, float64
    default dtype). Raises whatever the forward raises, and NarrowedError where it computes
    below float64 (a cast to float32 in the task's code)."""
    import torch

    wide = widen(inputs)
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        with _Widened(model), torch.no_grad(), _narrowing_watch():
            return model(*wide)
    finally:
        torch.set_default_dtype(previous)


# -- the sequential twin --------------------------------------------------------------------


def _accumulator(dtype: torch.dtype) -> torch.dtype:
    import torch

    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _block(length: int) -> int:
    return max(TWIN_BLOCK, -(-length // TWIN_MAX_STEPS))


def _ordered_sum_last(x: torch.Tensor) -> torch.Tensor:
    """The sum over the last dim, TWIN_BLOCK-term blocks added in order, in the
    accumulator's dtype."""
    acc_dtype = _accumulator(x.dtype)
    length = x.shape[-1]
    if length == 0:
        return x.new_zeros(x.shape[:-1], dtype=acc_dtype)
    step = _block(length)
    acc = x[..., :step].sum(-1, dtype=acc_dtype)
    for start in range(step, length, step):
        acc.add_(x[..., start:start + step].sum(-1, dtype=acc_dtype))
    return acc


def ordered_sum(x: torch.Tensor, dims: Optional[Sequence[int]] = None, keepdim: bool = False,
                dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """torch.sum(x, dims, keepdim, dtype=dtype) accumulated in order (`_ordered_sum_last`)."""
    if dtype is not None:
        x = x.to(dtype)
    if x.dim() == 0:
        return x.clone()
    summed = sorted({d % x.dim() for d in dims}) if dims else list(range(x.dim()))
    kept = [d for d in range(x.dim()) if d not in summed]
    moved = x.permute(kept + summed)
    moved = moved.reshape([x.shape[d] for d in kept] + [math.prod(x.shape[d] for d in summed)])
    out = _ordered_sum_last(moved).to(x.dtype)
    if keepdim:
        for d in summed:
            out = out.unsqueeze(d)
    return out


def ordered_cumsum(x: torch.Tensor, dim: int, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """torch.cumsum(x, dim) as a blocked scan with a carried total, blocks in order."""
    import torch

    if dtype is not None:
        x = x.to(dtype)
    if x.dim() == 0:
        return x.clone()
    moved = x.movedim(dim, -1)
    length = moved.shape[-1]
    step = _block(length)
    acc_dtype = _accumulator(x.dtype)
    out = torch.empty(moved.shape, dtype=acc_dtype, device=x.device)
    carry: Optional[torch.Tensor] = None
    for start in range(0, length, step):
        part = moved[..., start:start + step].to(acc_dtype).cumsum(-1)
        if carry is not None:
            part.add_(carry)
        out[..., start:start + step] = part
        carry = part[..., -1:]
    return out.to(x.dtype).movedim(-1, dim)


def ordered_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b (2-D or batched 3-D) with the inner dimension taken TWIN_BLOCK at a time, the
    partial products added in order in the accumulator's dtype."""
    acc_dtype = _accumulator(a.dtype)
    length = a.shape[-1]
    step = _block(length)
    acc: Optional[torch.Tensor] = None
    for start in range(0, max(length, 1), step):
        part = (a[..., start:start + step].to(acc_dtype) @ b[..., start:start + step, :].to(acc_dtype))
        if acc is None:
            acc = part
        else:
            acc.add_(part)
    assert acc is not None  # at least one step
    return acc


def _scaled(acc: torch.Tensor, bias: torch.Tensor, beta: float, alpha: float) -> torch.Tensor:
    out = acc if alpha == 1 else acc.mul_(alpha)
    if beta != 0:
        out = out.add_(bias if beta == 1 else bias * beta)
    return out


def _twin_op(func: object, args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
    """The ordered version of a reduction operator, or NotImplemented for any other."""
    import torch

    aten = torch.ops.aten
    if func is aten.sum.default:
        return ordered_sum(args[0], None, False, kwargs.get("dtype"))
    if func is aten.sum.dim_IntList:
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        return ordered_sum(args[0], args[1], keepdim, kwargs.get("dtype"))
    if func in (aten.mean.default, aten.mean.dim):
        x = args[0]
        dims = (args[1] if len(args) > 1 else kwargs.get("dim")) if func is aten.mean.dim else None
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        dtype = kwargs.get("dtype")
        total = ordered_sum(x, dims, keepdim, dtype)
        count = math.prod(x.shape[d % x.dim()] for d in dims) if dims else x.numel()
        return total / count if count else total * float("nan")
    if func is aten.cumsum.default:
        return ordered_cumsum(args[0], args[1], kwargs.get("dtype"))
    if func in (aten.mm.default, aten.bmm.default):
        return ordered_matmul(args[0], args[1]).to(args[0].dtype)
    if func in (aten.addmm.default, aten.baddbmm.default):
        bias, a, b = args[:3]
        acc = ordered_matmul(a, b)
        return _scaled(acc, bias.to(acc.dtype), kwargs.get("beta", 1), kwargs.get("alpha", 1)).to(a.dtype)
    return NotImplemented


def twin_mode() -> TorchDispatchMode:
    """A TorchDispatchMode running sums, means, cumulative sums and matrix products of
    floating tensors in order (the sequential twin); every other operator as it is."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Twin(TorchDispatchMode):  # type: ignore[no-untyped-call]
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return no_dynamo()

        def __torch_dispatch__(self, func: Any, types: object, args: Tuple[Any, ...] = (),
                               kwargs: Optional[Dict[str, Any]] = None) -> Any:
            kwargs = kwargs or {}
            first = args[0] if args else None
            if getattr(first, "is_floating_point", lambda: False)():
                out = _twin_op(func, args, kwargs)
                if out is not NotImplemented:
                    return out
            return func(*args, **kwargs)

    return Twin()  # type: ignore[no-untyped-call]


def twin_forward(model: Callable[..., Any], inputs: Sequence[Any]) -> Any:
    """The reference's forward in float32 with its reductions in order, on a copy of
    `inputs`."""
    import torch

    from .tensors import clone_tree

    copy = clone_tree(inputs)
    with torch.no_grad(), twin_mode():
        return model(*copy)


# -- the honest scale ---------------------------------------------------------------------


def _dim_indices(offsets: torch.Tensor, shape: Sequence[int], dim: int) -> torch.Tensor:
    """The index along `dim` of each logical (row-major) flat offset."""
    stride = math.prod(shape[dim + 1:])
    return (offsets // stride) % shape[dim]


@dataclass
class _Moments:
    """Running sums of one error source over an output: per used axis, the summed squared
    error and the count of finite elements per index; and the totals."""

    axes: List[int]
    per_axis: List[torch.Tensor]  # per axis: summed squared error per index
    counts: List[torch.Tensor]  # per axis: finite elements per index
    total: float = 0.0
    count: float = 0  # of finite elements (a float: it is summed on the device)
    magnitude: float = 0.0  # summed squared |oracle|


@dataclass
class ErrorModel:
    """One float32 order's error over an output, smoothed: its mean square error, a factor
    per smoothed axis and index (that index's mean square error over the whole's), and its
    relative level (mean square error over mean square magnitude)."""

    order: str
    mean_square: float
    factors: List[torch.Tensor]
    relative: float

    def square(self, offsets: torch.Tensor, target: torch.Tensor, shape: Sequence[int],
               axes: Sequence[int]) -> torch.Tensor:
        import torch

        square = torch.full(target.shape, self.mean_square, dtype=torch.float64, device=target.device)
        for axis, factor in zip(axes, self.factors):
            square.mul_(factor[_dim_indices(offsets, shape, axis)])
        square.clamp_min_((LOCAL_FLOOR ** 2) * self.mean_square)
        return square.add_(target.square().mul_(self.relative))


@dataclass
class OutputScale:
    """The honest error of one output, smoothed (see the module's docstring): a function of
    the element's position and of its magnitude, the larger of the orders' models."""

    path: str
    dtype: str
    shape: Tuple[int, ...]
    axes: List[int]  # the axes with their own factor
    models: List[ErrorModel]
    source: str  # which evaluation set the scale ("random trial 1")

    @property
    def unit(self) -> float:
        return UNIT_ROUNDOFF[self.dtype]

    @property
    def factor(self) -> float:
        return FACTOR[self.dtype]

    def rms(self) -> float:
        """The overall RMS honest error (the larger order's)."""
        return math.sqrt(max(m.mean_square for m in self.models))

    def at(self, offsets: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The honest error s of the elements at these flat offsets (float64), whose exact
        values are `target` (float64): the orders' modelled error, at least the rounding of
        the exact value to the output's dtype (and its smallest normal at 0)."""
        import torch

        square: Optional[torch.Tensor] = None
        for model in self.models:
            one = model.square(offsets, target, self.shape, self.axes)
            square = one if square is None else torch.maximum(square, one)
        assert square is not None  # a scale has at least one model (_scale_from)
        rounding = target.abs().mul_(self.unit).clamp_min_(TINY[self.dtype] / self.factor)
        return torch.maximum(square.sqrt_(), rounding)

    def describe(self) -> Dict[str, Any]:
        return {"honest_rms": self.rms(), "smoothed_axes": list(self.axes), "source": self.source,
                "orders": {m.order: math.sqrt(m.mean_square) for m in self.models}}


def _axes(shape: Sequence[int]) -> List[int]:
    numel = math.prod(shape)
    return [d for d, size in enumerate(shape) if size > 1 and numel // size >= MIN_AVERAGED]


def _chunks(*tensors: torch.Tensor) -> Iterator[Tuple[int, List[torch.Tensor]]]:
    """(the flat offset of the piece's first element, pieces of at most CHUNK elements)."""
    from .compare import _chunks as chunks

    for offset, *pieces in chunks(*tensors):
        n = pieces[0].numel()
        for start in range(0, n, CHUNK):
            stop = min(n, start + CHUNK)
            yield offset + start, [p[start:stop] for p in pieces]


def _add_axis_sums(out: torch.Tensor, values: torch.Tensor, start: int, shape: Sequence[int], axis: int) -> None:
    """Adds to `out` (one entry per index along `axis`) the sums of a flat piece's values by
    their index along `axis`; the piece's elements are the logical (row-major) offsets
    start..start+len. Never by one scatter of every element: on the GPU an index_add_ of a
    piece whose elements share a handful of indices (the leading axis of a large output)
    serializes on those few addresses (22 s of a 6 GiB ReLU's correctness trials on an H200).
    The piece, padded with zeros to whole blocks, is summed as a view: `stride` consecutive
    elements share one index, and a whole period (stride x size) folds onto the axis."""
    import torch

    size = shape[axis]
    stride = math.prod(shape[axis + 1:])
    period = stride * size
    length = values.numel()
    if length == 0:
        return
    if period <= length:
        out += _padded(values, start % period, period).view(-1, size, stride).sum(dim=(0, 2))
    elif stride <= length:
        front = start % stride
        blocks = _padded(values, front, stride).view(-1, stride).sum(dim=1)
        first = (start - front) // stride
        # Fewer blocks than a period holds plus two: each index at most twice.
        out.index_add_(0, (torch.arange(blocks.numel(), device=values.device) + first) % size, blocks)
    else:
        # Within one block, or across one boundary into the next.
        cut = stride - start % stride
        out[(start // stride) % size] += values[:cut].sum()
        if cut < length:
            out[((start + cut) // stride) % size] += values[cut:].sum()


def _padded(values: torch.Tensor, front: int, unit: int) -> torch.Tensor:
    """`values` after `front` zeros, followed by zeros to a multiple of `unit` elements."""
    total = -(-(front + values.numel()) // unit) * unit
    padded = values.new_zeros(total)
    padded[front:front + values.numel()] = values
    return padded


def _moments(shape: Tuple[int, ...], oracle: torch.Tensor, approx: torch.Tensor,
             device: torch.device) -> _Moments:
    """The squared-error moments of `approx` (a float32 evaluation) against the oracle."""
    import torch

    axes = _axes(shape)
    m = _Moments(axes, [torch.zeros(shape[a], dtype=torch.float64, device=device) for a in axes],
                 [torch.zeros(shape[a], dtype=torch.float64, device=device) for a in axes])
    total = torch.zeros((), dtype=torch.float64, device=device)
    count = torch.zeros((), dtype=torch.float64, device=device)
    magnitude = torch.zeros((), dtype=torch.float64, device=device)
    for start, (exact, value) in _chunks(oracle, approx):
        exact = exact.to(device=device, dtype=torch.float64)
        value = value.to(device=device, dtype=torch.float64)
        finite = torch.isfinite(exact) & torch.isfinite(value)
        square = (value - exact).square_().masked_fill_(~finite, 0.0)
        weight = finite.to(torch.float64)
        total += square.sum()
        count += weight.sum()
        magnitude += exact.masked_fill(~finite, 0.0).square_().sum()
        for i, axis in enumerate(axes):
            _add_axis_sums(m.per_axis[i], square, start, shape, axis)
            _add_axis_sums(m.counts[i], weight, start, shape, axis)
    m.total, m.count, m.magnitude = (float(v) for v in torch.stack([total, count, magnitude]).tolist())
    return m


def _scale_from(path: str, dtype: str, shape: Sequence[int], moments: Dict[str, _Moments],
                source: str) -> Optional[OutputScale]:
    """The honest scale of one output from each order's moments."""
    import torch

    models: List[ErrorModel] = []
    axes = _axes(shape)
    for order, m in moments.items():
        if not m.count:
            continue
        mean_square = m.total / m.count
        relative = m.total / m.magnitude if m.magnitude > 0 else 0.0
        factors: List[torch.Tensor] = []
        for per, counts in zip(m.per_axis, m.counts):
            level = torch.where(counts > 0, per / counts.clamp_min(1.0), torch.full_like(per, mean_square))
            factors.append(level / mean_square if mean_square > 0 else torch.ones_like(level))
        models.append(ErrorModel(order, mean_square, factors, relative))
    if not models:
        return None
    return OutputScale(path, dtype, tuple(shape), axes, models, source)


@dataclass
class Oracle:
    """What the comparisons of one input family are judged with: per output path, the
    exact values (None when the scale is reused from an earlier comparison: the float32
    reference is then the target) and the honest scale; or why an output has none."""

    family: str
    scales: Dict[str, OutputScale] = field(default_factory=dict)
    targets: Dict[str, torch.Tensor] = field(default_factory=dict)
    unavailable: Dict[str, str] = field(default_factory=dict)
    reason: Optional[str] = None  # why there is no oracle at all
    twin_error: Optional[str] = None  # why the sequential twin did not run
    seconds: float = 0.0  # the float64 and twin forwards' time

    def reused(self) -> Oracle:
        """The same scales for a later comparison of the family, without exact values."""
        return Oracle(self.family, dict(self.scales), {}, dict(self.unavailable), self.reason, self.twin_error, 0.0)

    def why_not(self, path: str) -> Optional[str]:
        if path in self.scales:
            return None
        return self.unavailable.get(path) or self.reason or "no float64 oracle for this output"

    def record(self) -> OracleRecord:
        """The result's description of the oracle (tolerance.oracle)."""
        from .wire import OracleRecord

        return OracleRecord({"kind": "float64", "rule": RULE_TEXT,
                             "factor": {d: FACTOR[d] for d in ("float32", "float16", "bfloat16")},
                             "twin": TWIN_TEXT if self.twin_error is None else None, "twin_error": self.twin_error,
                             "reason": self.reason, "seconds": None})


def build(family: str, source: str, ref_out: Any, exact_out: Any, twin_out: Any,
          twin_error: Optional[str] = None) -> Oracle:
    """The oracle of one comparison: the reference's float32 outputs, its float64 outputs
    and its sequential twin's (None where it did not run)."""
    import torch

    oracle = Oracle(family, twin_error=twin_error)
    exact = dict(flatten_outputs(exact_out))
    twin = dict(flatten_outputs(twin_out)) if twin_out is not None else {}
    for path, r in flatten_outputs(ref_out):
        if not isinstance(r, torch.Tensor) or not (r.is_floating_point() or r.is_complex()):
            continue
        if not covers(r.dtype):
            oracle.unavailable[path] = ("a %s output: there is no wider oracle" % dtype_name(r.dtype)
                                        if dtype_name(r.dtype) in ("float64", "complex128")
                                        else "no honest-error rule for %s" % dtype_name(r.dtype))
            continue
        x = exact.get(path)
        if isinstance(x, torch.Tensor) and x.dtype not in (torch.float64, torch.complex128):
            oracle.unavailable[path] = "the float64 forward returned %s here" % dtype_name(x.dtype)
            continue
        if not isinstance(x, torch.Tensor) or tuple(x.shape) != tuple(r.shape) or x.is_complex() != r.is_complex():
            oracle.unavailable[path] = "the float64 forward returned %s here, not a tensor of shape %s" % (
                "a tensor of shape %s" % list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__,
                list(r.shape))
            continue
        real: Callable[[torch.Tensor], torch.Tensor] = (lambda t: torch.view_as_real(t)) if r.is_complex() else (lambda t: t)
        shape = tuple(real(r).shape)
        moments = {"reference": _moments(shape, real(x.detach()), real(r.detach()), r.device)}
        t = twin.get(path)
        if isinstance(t, torch.Tensor) and tuple(t.shape) == tuple(r.shape) and t.dtype == r.dtype:
            moments["sequential twin"] = _moments(shape, real(x.detach()), real(t.detach()), r.device)
        scale = _scale_from(path, dtype_name(r.dtype), shape, moments, source)
        if scale is None:
            oracle.unavailable[path] = "no finite element to measure the honest error on"
            continue
        oracle.scales[path] = scale
        oracle.targets[path] = x.detach()
    return oracle


def unavailable(family: str, reason: str) -> Oracle:
    return Oracle(family, reason=reason)


# -- the judge's use ------------------------------------------------------------------------


@dataclass
class Pending:
    """The float64 and sequential-twin outputs of one comparison's inputs, waiting for the
    float32 reference's outputs (`finish`); or why there are none."""

    family: str
    source: str
    exact: object = None
    twin: object = None
    twin_error: Optional[str] = None
    reason: Optional[str] = None
    seconds: float = 0.0


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0][:300] if text else "")


def _release(device: object) -> None:
    if device != "cpu":
        import torch

        torch.cuda.empty_cache()


def prepare(family: str, source: str, model: Callable[..., Any], inputs: Sequence[Any], device: object,
            room: Optional[Tuple[int, int]] = None) -> Pending:
    """Runs the reference in float64 and its sequential twin on (copies of) `inputs`, before
    the float32 reference runs on them (which may change them in place). `room`: (bytes the
    two forwards need at most, bytes free): an oracle that would not fit is not attempted.
    Never raises for the task: a forward that fails leaves the reason."""
    import time

    from .memory import gib, is_out_of_memory

    began = time.perf_counter()
    pending = Pending(family, source)
    if room is not None and room[0] > room[1]:
        pending.reason = ("the float64 oracle would need about %s beside the evaluation and %s is free"
                          % (gib(room[0]), gib(room[1])))
        return pending
    try:
        pending.exact = float64_forward(model, inputs)
    except Exception as e:  # noqa: BLE001 -- no oracle only means the dtype rule
        pending.exact = None
        _release(device)
        if isinstance(e, NarrowedError):
            pending.reason = "no float64 oracle: %s" % e
        elif is_out_of_memory(e):
            pending.reason = "the float64 oracle ran out of memory"
        else:
            pending.reason = "the reference has no float64 path (%s)" % _first_line(e)
        pending.seconds = time.perf_counter() - began
        return pending
    try:
        pending.twin = twin_forward(model, inputs)
    except Exception as e:  # noqa: BLE001 -- the reference's own order stands alone
        pending.twin = None
        _release(device)
        pending.twin_error = ("it ran out of memory" if is_out_of_memory(e) else _first_line(e))
    if device != "cpu":
        import torch

        torch.cuda.synchronize()
    pending.seconds = time.perf_counter() - began
    return pending


def finish(pending: Pending, ref_out: Any) -> Oracle:
    """The oracle of a comparison from its pending forwards and the float32 reference's
    outputs on the same inputs (the exact and twin outputs are dropped here)."""
    if pending.reason is not None:
        oracle = unavailable(pending.family, pending.reason)
    else:
        try:
            oracle = build(pending.family, pending.source, ref_out, pending.exact, pending.twin, pending.twin_error)
        except Exception as e:  # noqa: BLE001
            from .memory import is_out_of_memory

            pending.exact = pending.twin = None
            oracle = unavailable(pending.family, "measuring the honest error failed (%s)" % (
                "out of memory" if is_out_of_memory(e) else _first_line(e)))
    oracle.seconds = pending.seconds
    pending.exact = pending.twin = None
    return oracle


def room_needed(footprint: Optional[Dict[str, Any]]) -> int:
    """Bytes the float64 forward and the twin need at their peak beyond what the evaluation
    holds, from its memory plan: the widened inputs, outputs, scratch and model, and the
    twin's copy of the inputs and its outputs (the float64 outputs are kept meanwhile)."""
    if not footprint:
        return 0
    inputs = int(footprint.get("inputs_bytes") or 0)
    outputs = int(footprint.get("outputs_bytes") or 0)
    scratch = int(footprint.get("reference_scratch_bytes") or 0)
    weights = int(footprint.get("weights_bytes") or 0)
    widened = 2 * inputs + 2 * outputs + 2 * scratch + weights
    twin = 2 * outputs + inputs + 2 * outputs + scratch  # the float64 outputs kept, a copy, outputs, partials
    return max(widened, twin)
