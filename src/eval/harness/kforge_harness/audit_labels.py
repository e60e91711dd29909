"""Provenance labels: each storage's _Shadow, read and written chunk by chunk, and an output's
shares of them (its record entry)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Dict, Literal, Optional, Union, overload

if TYPE_CHECKING:
    import torch
    from .audit_chunks import Key
    from .audit_shadow import _Source

    Frozen = Dict[Key, Optional[_Shadow]]  # labels as they were before a launch

from . import audit_vocab as vocab
from .audit_vocab import ALLOC, LABELS, MAX_NAME, UNSEEN
from .audit_chunks import _chunk_cost, _flat, _ranges, _storage_key
from .audit_shadow import _Shadow
from .audit_state import _AuditState


class _Labels(_AuditState):
    """The labels of what the forward wrote, per element."""

    @overload
    def shadow(self, t: torch.Tensor, create: Literal[True], fresh: bool = False) -> _Shadow: ...

    @overload
    def shadow(self, t: torch.Tensor, create: bool, fresh: bool = False) -> Optional[_Shadow]: ...

    def shadow(self, t: torch.Tensor, create: bool, fresh: bool = False) -> Optional[_Shadow]:
        """t's storage's labels (made for it when `create`, new when `fresh`), else None."""
        import torch
        st = t.untyped_storage()
        key = _storage_key(t)
        shadow = self.shadows.get(key)
        if shadow is not None and (fresh or shadow.nbytes != st.nbytes()
                                   or (key not in self.inventory and shadow.storage() is not st)):
            del self.shadows[key]  # a new storage, possibly at a recycled address
            self.drop(shadow.labels.nbytes)
            shadow = None
        if shadow is None and (create or fresh):
            cell = t.element_size()
            label = ALLOC if fresh else self.default_label(key)
            labels = torch.full((-(-st.nbytes() // cell),), label, dtype=torch.uint8, device=t.device)
            self.hold(labels.nbytes)
            shadow = self.shadows[key] = _Shadow(
                labels, cell, st.nbytes(), ref=weakref.ref(st), suspect=label == UNSEEN,
                value_dtype=t.dtype if label == UNSEEN and t.is_floating_point() else None)
        return shadow

    def read(self, t: torch.Tensor, a: int, b: int, frozen: Optional[Frozen] = None) -> torch.Tensor:
        """Labels of t's logical elements [a, b); frozen: storage key -> its labels before the launch
        being attributed (None: it had none, i.e. its default label)."""
        import torch
        key = _storage_key(t)
        shadow = frozen[key] if frozen and key in frozen else self.shadow(t, False)
        if shadow is None:
            return torch.full((b - a,), self.default_label(key), dtype=torch.uint8, device=t.device)
        return shadow.read(t, a, b)

    def suspect_source(self, src: _Source, frozen: Optional[Frozen]) -> bool:
        """May the source hold aten or unseen labels (as they were before the launch)?"""
        shadow = frozen[src.key] if frozen and src.key in frozen else self.shadow(src.like, False)
        return shadow.suspect if shadow is not None else self.default_label(src.key) == UNSEEN

    def writers(self, t: torch.Tensor) -> Dict[str, str]:
        shadow = self.shadow(t, False)
        return dict(shadow.writers) if shadow else {}

    def set_labels(self, t: torch.Tensor, labels: Union[torch.Tensor, int], writers: Dict[str, str]) -> None:
        """labels: a label, or a tensor of t's numel (taken in logical order) or broadcastable to t."""
        shadow = self.shadow(t, True)
        if not isinstance(labels, int) and labels.numel() != t.numel():
            labels = labels.expand(t.shape)
        for a, b in _ranges(t.numel(), shadow.step(t)):
            with self.temp(_chunk_cost(b - a, 1)):
                shadow.write(t, a, b, labels if isinstance(labels, int) else _flat(labels, a, b).to(t.device))
        shadow.writers.update(writers)
        if t.is_floating_point():
            shadow.value_dtype = t.dtype

    def value_view(self, x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """x (a chunk of argument `like`) as the values last written into like's storage: an integer
        view of the same width over a float result (`y.view(torch.int32)`) is read as those floats, so
        that adding 1 to the bits (one ulp) is a nudge of PyTorch's values, not Triton's work."""
        shadow = self.shadow(like, False)
        dtype = shadow.value_dtype if shadow is not None else None
        if dtype is not None and not (x.is_floating_point() or x.is_complex()) and x.element_size() == dtype.itemsize:
            return x.view(dtype)
        return x

    def labels_full(self, t: torch.Tensor) -> torch.Tensor:
        """All of t's labels as one tensor of t's shape (for data-movement ops rerun on labels); the
        caller accounts for it."""
        import torch
        out = torch.empty(t.shape, dtype=torch.uint8, device=t.device)
        flat = out.view(-1)
        for a, b in _ranges(t.numel(), vocab.CHUNK_ELEMENTS):
            flat[a:b] = self.read(t, a, b)
        return out

    def copy_labels(self, source: torch.Tensor, t: torch.Tensor, writers: Dict[str, str]) -> None:
        """t takes source's labels element by element (logical order; a broadcast source expanded)."""
        if source.numel() != t.numel():
            source = source.expand(t.shape)
        if _storage_key(source) == _storage_key(t):  # reading while writing one storage: read it all first
            with self.temp(2 * t.numel()):
                self.set_labels(t, self.labels_full(source), writers)
            return
        shadow = self.shadow(t, True)
        for a, b in _ranges(t.numel(), shadow.step(t)):
            with self.temp(_chunk_cost(b - a, 1)):
                shadow.write(t, a, b, self.read(source, a, b).to(t.device))  # _to_copy: across devices
        shadow.writers.update(writers)
        if t.is_floating_point():
            shadow.value_dtype = t.dtype

    def output_entry(self, path: str, t: torch.Tensor, seed: int = 0) -> Dict[str, Any]:
        import torch
        from .digest import tensor_digest
        counts = torch.zeros(len(LABELS), dtype=torch.int64, device=t.device)
        for a, b in _ranges(t.numel(), vocab.CHUNK_ELEMENTS):  # counted on the device, chunk by chunk
            with self.temp(2 * (b - a)):
                labels = self.read(t, a, b)
                # one comparison a label, not bincount: on a GPU its atomics on six counters
                # serialize (0.2 s an output of 1.5G elements on an H200, against ~6 ms)
                counts += torch.stack([(labels == k).sum() for k in range(len(LABELS))])
        tally = counts.tolist()
        return {"path": path[:MAX_NAME], "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                "numel": t.numel(), "shares": {k: c / max(t.numel(), 1) for k, c in zip(LABELS, tally)},
                "writers": {k: str(v)[:MAX_NAME] for k, v in self.writers(t).items()},
                "digest": tensor_digest(t, seed)}
