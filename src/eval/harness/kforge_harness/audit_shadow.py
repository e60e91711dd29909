"""Per-storage bookkeeping of the audit: _Shadow (a label byte per element of a storage),
_Snapshot (a launch's arguments' bytes from before it) and _Source (values a launch may have copied)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

if TYPE_CHECKING:
    import torch
    from .audit_chunks import Key

from . import audit_vocab as vocab
from .audit_vocab import ATEN, LABELS, UNSEEN
from .audit_chunks import SNAPSHOT_ALIGN, _extent, _flat, _pieces, _put, _storage_key, _suspect


class _Shadow:
    """Provenance labels of one storage: one uint8 label per `cell` bytes, cell being the element size
    the storage was first seen with (a fp32 tensor costs a quarter of its bytes in labels).

    A view of another element size e maps onto the cells by byte ranges:
    - e a multiple of cell (a byte buffer viewed as float): each element covers e // cell cells; it is
      written whole, and read as the merge of its cells (below).
    - e smaller than cell (`out.view(torch.int16)`, `.view(torch.uint8)`): the k = cell // e elements
      that share a cell share its label; a label is kept per containing element, no finer. Writes then
      MERGE into the cell, and the merge leans away from Triton: Triton lowest, PyTorch higher, unseen
      highest (the label numbers are that order), so a cell is Triton's only if every part of it is. Why: labels decide whether PyTorch
      computed an output; a Triton kernel that rewrites one byte of each element of PyTorch's result
      (`y.view(torch.uint8)[::4]`) computed nothing the evaluation would see, and must not turn those
      elements into Triton's. The part a write does not cover keeps the cell's old label, which takes
      part in the merge: so a write that covers a cell only partly never makes it more Triton's than
      it was. Where a view covers its cells whole (last dim contiguous, rows aligned to cells: what
      `.view(smaller dtype)` of a float tensor gives) and a write sees all of a cell's parts at once,
      the merge is over those parts alone: an honest kernel writing every byte of a fresh output through
      such a view gets the cells it changed in full; one whose written bytes happen to equal the
      0xFF sentinel (a NaN-looking half) leaves that cell "never written". Coarse labels thus cost
      honest byte-view writers at most some Triton share, never a PyTorch result some Triton credit.
    """

    def __init__(self, labels: torch.Tensor, cell: int, nbytes: int, writers: Optional[Dict[str, str]] = None,
                 value_dtype: Optional[torch.dtype] = None, ref: Optional[Callable[[], Any]] = None,
                 suspect: bool = False) -> None:
        self.labels, self.cell, self.nbytes, self.writers = labels, cell, nbytes, dict(writers or {})
        # The floating dtype PyTorch last wrote this storage as: a Triton launch that changes it
        # through an integer view of the same width is judged on those values (see value_view).
        self.value_dtype = value_dtype
        self.ref = ref              # weak reference to the storage: dead once it is freed
        self.suspect = suspect      # may hold aten or unseen labels (never cleared: a hint, not a fact)

    def copy(self) -> _Shadow:
        return _Shadow(self.labels.clone(), self.cell, self.nbytes, self.writers, self.value_dtype, self.ref,
                       self.suspect)

    def storage(self) -> Optional[torch.UntypedStorage]:
        """The storage, or None once it has been freed."""
        return self.ref() if self.ref is not None else None

    def mark(self, lo: int, hi: int, label: int) -> None:
        """Sets the label of every cell that the storage's bytes [lo, hi) touch."""
        self.labels[lo // self.cell:-(-hi // self.cell)] = label
        self.suspect |= label in (ATEN, UNSEEN)

    def layout(self, t: torch.Tensor) -> Tuple[str, Any, Any]:
        """("grid", view of shape t.shape + (r,), r cells per element) or ("cells", k, whole) for views
        of elements smaller than a cell: k elements a cell; whole: each row covers whole cells."""
        size, cell = t.element_size(), self.cell
        if size % cell == 0:
            r = size // cell
            grid = self.labels.as_strided(tuple(t.shape) + (r,), [s * r for s in t.stride()] + [1],
                                          t.storage_offset() * r)
            return "grid", grid, r
        if cell % size:
            raise ValueError("element size %d does not divide cell size %d" % (size, cell))
        k = cell // size
        whole = (t.dim() > 0 and t.stride(-1) == 1 and t.shape[-1] % k == 0 and t.storage_offset() % k == 0
                 and all(s % k == 0 for s in t.stride()[:-1]))
        return "cells", k, whole

    def step(self, t: torch.Tensor) -> int:
        """The chunk step for writes into t: a whole number of cells when elements share cells."""
        kind, k, whole = self.layout(t)
        return vocab.CHUNK_ELEMENTS if kind == "grid" or not whole else -(-vocab.CHUNK_ELEMENTS // k) * k

    @staticmethod
    def _cells(t: torch.Tensor, a: int, b: int, k: int) -> torch.Tensor:
        """Cell index of each of t's logical elements [a, b) (int64)."""
        import torch
        parts = []
        for idx in _pieces(tuple(t.shape), a, b):
            v = t[idx]
            offsets = torch.tensor(v.storage_offset(), dtype=torch.int64, device=t.device)
            for n, s in zip(v.shape, v.stride()):
                offsets = offsets.unsqueeze(-1) + torch.arange(n, device=t.device) * s
            parts.append(offsets.reshape(-1))
        return (parts[0] if len(parts) == 1 else torch.cat(parts)) // k

    def read(self, t: torch.Tensor, a: int, b: int) -> torch.Tensor:
        """Labels of t's logical elements [a, b) (a new uint8 tensor)."""
        kind, grid_or_k, r_or_whole = self.layout(t)
        if kind == "cells":
            return self.labels[self._cells(t, a, b, grid_or_k)]
        cells = _flat(grid_or_k, a, b, t.dim())
        if r_or_whole == 1:
            return cells[:, 0].clone()
        return cells.amax(1)  # an element spanning cells: their merge (the most suspect)

    def write(self, t: torch.Tensor, a: int, b: int, values: Union[torch.Tensor, int]) -> None:
        """Sets the labels of t's logical elements [a, b) to values (uint8 tensor of b - a, or a label)."""
        import torch
        kind, grid_or_k, r_or_whole = self.layout(t)
        if not self.suspect:
            self.suspect = values in (ATEN, UNSEEN) if isinstance(values, int) else bool(_suspect(values).any())
        if kind == "grid":
            values = values if isinstance(values, int) else values.unsqueeze(1).expand(-1, r_or_whole)
            _put(grid_or_k, a, b, values, t.dim())
            return
        k = grid_or_k
        cells = self._cells(t, a, b, k)
        if isinstance(values, int):
            values = torch.full((b - a,), values, dtype=torch.uint8, device=t.device)
        if not (r_or_whole and a % k == 0 and b % k == 0):  # parts of cells: their old label takes part
            values = torch.maximum(values, self.labels[cells])
        for label in range(len(LABELS)):  # ascending: each cell ends with the highest label written into it
            self.labels[cells[values == label]] = label


class _Snapshot:
    """The bytes of one launch's tensor arguments before it ran, one copy per storage byte range that
    the arguments cover (two views of one storage share it): on the device, or staged in host memory."""

    def __init__(self, args: List[torch.Tensor]) -> None:
        self.args = args             # the launch's tensor arguments (numel > 0, each once)
        self.before: List[Optional[torch.Tensor]] = [None] * len(args)
        # [tensor or None, device bytes accounted, argument indexes, lo, hi, storage]: bytes [lo, hi)
        self.buffers: List[List[Any]] = []

    @staticmethod
    def intervals(args: List[torch.Tensor]) -> List[List[Any]]:
        """Per storage, the merged, 16-byte-aligned byte ranges covered: [(lo, hi, storage, indexes)]."""
        by_storage: Dict[Key, List[Tuple[int, int, int]]] = {}
        for i, t in enumerate(args):
            lo, hi = _extent(t)
            by_storage.setdefault(_storage_key(t), []).append((lo, hi, i))
        out: List[List[Any]] = []
        for spans in by_storage.values():
            storage = args[spans[0][2]].untyped_storage()
            spans.sort()
            current: Optional[List[Any]] = None
            for lo, hi, i in spans:
                lo = lo // SNAPSHOT_ALIGN * SNAPSHOT_ALIGN
                hi = min(-(-hi // SNAPSHOT_ALIGN) * SNAPSHOT_ALIGN, storage.nbytes())
                if current and lo <= current[1]:
                    current[1] = max(current[1], hi)
                    current[3].append(i)
                else:
                    current = [lo, hi, storage, [i]]
                    out.append(current)
        return out


class _Source:
    """What a launch's written values may have come from, read in logical order from position 0: t's own
    values before the launch (own), another argument's (its values before the launch), or a storage the
    launch reached through a raw pointer or that the audit tracks (a flat view of it from the pointed
    element, in the float dtype PyTorch last wrote it as)."""

    __slots__ = ("like", "values", "m", "writers", "own", "key")

    def __init__(self, like: torch.Tensor, values: torch.Tensor, writers: Optional[Dict[str, str]],
                 own: bool = False) -> None:
        self.like, self.values, self.m, self.own = like, values, like.numel(), own
        self.writers, self.key = dict(writers or {}), _storage_key(like)
