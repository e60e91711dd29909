"""The audit's chunked tensor arithmetic: every full-size pass walks its tensors
`audit_vocab.CHUNK_ELEMENTS` elements at a time in logical order (_ranges, _flat, _put), plus the
small helpers on storages, byte spans and values that the audit's parts share."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    import torch
    Key = Tuple[torch.device, int]  # a storage: its device and data pointer
    Same = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # per element: the same value?
    # (finite, NaN, +inf, -inf counts), [sum, sum |x|, sum x^2, sum x^3, sum |x|^3], min, max
    Moments = Tuple[Tuple[int, ...], List[float], float, float]

from . import audit_vocab as vocab
from .audit_vocab import ATEN, MOMENT_RTOL, TIGHT_RTOL, TRITON, UNSEEN


def _tensors(value: Any, out: List[torch.Tensor]) -> List[torch.Tensor]:
    import torch
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple, dict)):
        for v in (value.values() if isinstance(value, dict) else value):
            _tensors(v, out)
    elif isinstance(getattr(value, "base", None), torch.Tensor):  # a Triton TensorDescriptor
        out.append(value.base)
    return out


def _close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Per element of the flattened tensors: b within tolerance of a (NaN matches NaN)."""
    import torch
    a, b = a.reshape(-1), b.reshape(-1)
    if a.is_complex() or b.is_complex() or not (a.is_floating_point() or b.is_floating_point()):
        return a == b
    dtype = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
    return torch.isclose(b.to(dtype), a.to(dtype), rtol=rtol, atol=atol, equal_nan=True)


# --- Bounded memory: every full-size pass below walks its tensors CHUNK_ELEMENTS elements at a time,
# in logical (row-major) order, so that the tensors of one launch, whatever their shapes and strides,
# line up element by element as they did when whole tensors were flattened.

def _ranges(n: int, step: int) -> Iterator[Tuple[int, int]]:
    for a in range(0, n, step):
        yield a, min(n, a + step)


def _pieces(shape: Tuple[int, ...], a: int, b: int) -> List[Tuple[Any, ...]]:
    """Index tuples whose views cover the logical elements [a, b) of a tensor of this shape, in order:
    a partial row, a slab of whole rows, a partial row, recursively (each view holds <= b - a elements)."""
    if len(shape) <= 1:
        return [()] if not shape else [(slice(a, b),)]
    row = math.prod(shape[1:])
    first, last = a // row, (b - 1) // row
    if first == last:
        return [(first,) + p for p in _pieces(shape[1:], a - first * row, b - first * row)]
    out, lo, hi = [], first, last + 1
    if a > first * row:
        out += [(first,) + p for p in _pieces(shape[1:], a - first * row, row)]
        lo += 1
    tail = []
    if b < (last + 1) * row:
        tail = [(last,) + p for p in _pieces(shape[1:], 0, b - last * row)]
        hi -= 1
    if lo < hi:
        out.append((slice(lo, hi),))
    return out + tail


def _flat(x: torch.Tensor, a: int, b: int, lead: Optional[int] = None) -> torch.Tensor:
    """The logical elements [a, b) of x's first `lead` dims (default all) as one contiguous tensor of
    shape (b - a,) + x.shape[lead:]: a view where x's layout allows, else a copy of that range only."""
    import torch
    lead = x.dim() if lead is None else lead
    inner = tuple(x.shape[lead:])
    try:
        return x.view((-1,) + inner)[a:b]
    except RuntimeError:  # not viewable as flat (transposed, expanded, sliced): piece by piece
        parts = [x[idx].reshape((-1,) + inner) for idx in _pieces(tuple(x.shape[:lead]), a, b)]
        return parts[0].contiguous() if len(parts) == 1 else torch.cat(parts)


def _put(x: torch.Tensor, a: int, b: int, values: Union[torch.Tensor, int], lead: Optional[int] = None) -> None:
    """Writes values (shape (b - a,) + x.shape[lead:], or a number) into the logical elements [a, b)
    of x's first `lead` dims, in place."""
    lead = x.dim() if lead is None else lead
    inner = tuple(x.shape[lead:])
    try:
        pieces = [(x.view((-1,) + inner)[a:b], 0)]
    except RuntimeError:
        pieces, at = [], 0
        for idx in _pieces(tuple(x.shape[:lead]), a, b):
            pieces.append((x[idx], at))
            at += x[idx].numel() // max(math.prod(inner), 1)
    for view, at in pieces:
        if isinstance(values, int):
            view.fill_(values)
        else:
            n = view.numel() // max(math.prod(inner), 1)
            view.copy_(values[at:at + n].reshape(view.shape))


def _differs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per element of two flat tensors of one dtype: do their bytes differ? Compared as integers of the
    element's width (a view, no [numel, element size] byte matrix)."""
    import torch
    size = a.element_size()
    width = min(size, 8)
    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
    ne = a.contiguous().view(as_int).view(-1, size // width) != b.contiguous().view(as_int).view(-1, size // width)
    return ne.any(1) if size > width else ne.view(-1)


def _suspect(labels: torch.Tensor) -> torch.Tensor:
    """Per label: a PyTorch compute label that a Triton copy must not launder (aten), or unseen."""
    return (labels == ATEN) | (labels == UNSEEN)


def _chunk_cost(n: int, element_size: int) -> int:
    """Device bytes one chunk step of n elements may hold at once, as the accounting charges it: a
    generous bound (a copy of the chunk of each of three operands, isclose's promoted copies and
    temporaries, about six at the promoted width, and 32 bytes of byte masks, labels and int64 cell
    indices); a fp32 ReLU on the CPU measured about 13 bytes an element against these 68."""
    return n * (3 * element_size + 6 * max(element_size, 4) + 32)


def _extent(t: torch.Tensor) -> Tuple[int, int]:
    """Byte range [lo, hi) of t's storage that t's elements cover (numel > 0)."""
    size = t.element_size()
    lo = t.storage_offset() * size
    return int(lo), int(lo + (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))) * size)


def _storage_key(t: torch.Tensor) -> Key:
    return t.device, t.untyped_storage().data_ptr()


SNAPSHOT_ALIGN = 16  # bytes: the largest element size; a snapshot starting there holds any view typed


def _device_free_bytes(device: torch.device) -> Optional[int]:
    """Bytes the device can still give torch (free memory plus torch's cached, unused blocks); None
    where unknown (CPU: the snapshots then stay on the device, which is the host)."""
    import torch
    if device.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def _is_oom(exc: BaseException) -> bool:
    import torch
    text = str(exc).lower()
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text or "not enough memory" in text


def _raw(storage: torch.UntypedStorage, lo: int, hi: int) -> torch.Tensor:
    """The bytes [lo, hi) of a storage as a flat uint8 view."""
    import torch
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage, lo, (hi - lo,), (1,))


def _word_span(lo: int, hi: int, nbytes: int) -> Tuple[int, int]:
    """[lo, hi) widened to whole 4-byte words (digests sum words), within the storage's nbytes."""
    return lo // 4 * 4, min(-(-hi // 4) * 4, nbytes)


def _merge_spans(spans: Iterable[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out: List[List[int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def _chunks_of(lo: int, hi: int) -> List[Tuple[int, int, int]]:
    """The byte range [lo, hi) cut at digest-chunk boundaries: [(chunk index, a, b)]."""
    out = []
    while lo < hi:
        c = lo // vocab.DIGEST_CHUNK_BYTES
        b = min(hi, (c + 1) * vocab.DIGEST_CHUNK_BYTES)
        out.append((c, lo, b))
        lo = b
    return out


def _digest_step() -> int:
    """Bytes digested in one pass (many chunks at once: one device sync): temporaries of
    DIGEST_BYTE_COST a byte stay within a chunk step's cost (_chunk_cost) for any CHUNK_ELEMENTS of
    2048 or more (48 MiB on the default)."""
    return max(4096, 3 * vocab.CHUNK_ELEMENTS // 4 * 4)


def _positions(prev: Optional[torch.Tensor], now: torch.Tensor, same: Same) -> torch.Tensor:
    """Per element of now (flat): same(prev, now) at the same position. prev may be shorter (a smaller
    source: positions past its end never match) or None (nothing there)."""
    import torch
    if prev is not None and prev.numel() == now.numel():
        return same(prev, now)
    out = torch.zeros(now.numel(), dtype=torch.bool, device=now.device)
    if prev is not None and prev.numel():
        out[:prev.numel()] = same(prev, now[:prev.numel()])
    return out


def _tight(prev: torch.Tensor, now: torch.Tensor) -> torch.Tensor:
    """Per element of two flat tensors: now holds prev's value (relative TIGHT_RTOL, NaN never) and is not
    an exact zero (zeros are everywhere: a ReLU's zeros are nobody's copy)."""
    import torch
    a, b = prev.reshape(-1), now.reshape(-1)
    if not (a.is_floating_point() or b.is_floating_point()):
        return (a == b) & (b != 0)
    dtype = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
    a, b = a.to(dtype), b.to(dtype)
    return torch.isclose(b, a, rtol=TIGHT_RTOL, atol=0.0) & (b != 0)


def _pad(labels: Optional[torch.Tensor], n: int) -> torch.Tensor:
    """Labels of the first positions (or None), padded with Triton's to n (positions a source lacks)."""
    import torch
    if labels is not None and labels.numel() == n:
        return labels
    out = torch.full((n,), TRITON, dtype=torch.uint8, device=labels.device if labels is not None else "cpu")
    if labels is not None:
        out[:labels.numel()] = labels
    return out


def _ints(value: Any, out: List[int]) -> List[int]:
    """The integer arguments of a launch (raw pointers among them), nested in tuples, lists and dicts."""
    import numbers
    if not isinstance(value, bool) and isinstance(value, numbers.Integral):
        out.append(int(value))
    elif isinstance(value, (list, tuple)):
        for v in value:
            _ints(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _ints(v, out)
    return out


def _same_moments(x: Moments, y: Moments) -> bool:
    """x, y: moments (_Audit.moments) of two sets of values. The same multiset, as far as the counts,
    sum, sum of squares, sum of cubes, min and max tell within MOMENT_RTOL of the absolute moments; and
    not a constant (all values equal: any constant output would match it)."""
    (cx, sx, lx, hx), (cy, sy, ly, hy) = x, y
    if cx != cy or cx[0] < 2 or not (lx < hx and ly < hy):
        return False

    def near(p: float, q: float, scale: float) -> bool:
        return abs(p - q) <= MOMENT_RTOL * scale

    extreme = max(abs(lx), abs(hx), abs(ly), abs(hy))
    return (near(sx[0], sy[0], max(sx[1], sy[1])) and near(sx[1], sy[1], max(sx[1], sy[1]))
            and near(sx[2], sy[2], max(sx[2], sy[2])) and near(sx[3], sy[3], max(sx[4], sy[4]))
            and near(sx[4], sy[4], max(sx[4], sy[4])) and near(lx, ly, extreme) and near(hx, hy, extreme))


def _patch(dst: torch.Tensor, src: torch.Tensor) -> None:
    """dst.copy_(src) for two views of one layout; an expanded (stride 0) dimension is written once."""
    for d in range(src.dim()):
        if src.stride(d) == 0 and src.shape[d] > 1:
            dst, src = dst.narrow(d, 0, 1), src.narrow(d, 0, 1)
    dst.copy_(src)


def _written(func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> List[torch.Tensor]:
    """The tensors an aten op writes in place (schema `(a!)`, and `_copy_from`'s destination)."""
    out: List[torch.Tensor] = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            _tensors(args[i] if i < len(args) else kwargs.get(arg.name), out)
    if func.overloadpacket.__name__.startswith("_copy_from") and len(args) > 1:
        _tensors(args[1], out)
    return out
