"""aten ops seen through the dispatch mode: their kinds counted, their written storages' labels set
(alloc, moved from their sources, aten or library) and digests followed."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    import torch
    from .audit_chunks import Key
    from .audit_digests import Piece

    Before = Dict[Key, Tuple[torch.UntypedStorage, int, List[Piece]]]  # what an op may write, digested before it

from .audit_vocab import ALLOC, ATEN, LABELS, LIBRARY, META_OPS, MOVE_OPS, SENTINEL_OPS, op_kind
from .audit_chunks import _chunk_cost, _close, _extent, _flat, _merge_spans, _pad, _positions, _ranges, _raw, _storage_key, _suspect, _tensors, _word_span, _written
from .audit_shadow import _Source
from .audit_match import _Matching


class _Ops(_Matching):
    """What an aten op writes, labelled."""

    def before_op(self, func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> Before:
        """Before an aten op that writes in place into storages the audit has digests of: the digests of
        the bytes it may write ({key: (storage, nbytes, digests)}), for update() after it."""
        name = func.overloadpacket.__name__
        if name in META_OPS:
            return {}
        if op_kind(name) in ("copy", "library"):  # they pass their sources' labels on, or launder them
            self.verify(_tensors((args, kwargs), []))
        spans: Dict[Key, Tuple[torch.UntypedStorage, List[Tuple[int, int]]]] = {}
        for t in _written(func, args, kwargs):
            if t.numel() > 0:
                key, st = _storage_key(t), t.untyped_storage()
                if self.record_of(key, st) is not None:
                    spans.setdefault(key, (st, []))[1].append(_word_span(*_extent(t), st.nbytes()))
        return {key: (st, st.nbytes(), self.digests(st, _merge_spans(s), functools.partial(_raw, st)))
                for key, (st, s) in spans.items()}

    def follow(self, tensors: List[torch.Tensor], before: Optional[Before]) -> None:
        """After an aten op wrote into these tensors: their storages' digests follow the write (fresh
        storages, and ones without a record, are digested whole)."""
        storages: Dict[Key, torch.UntypedStorage] = {}
        for t in tensors:
            if t.numel() > 0:
                storages.setdefault(_storage_key(t), t.untyped_storage())
        for key, st in storages.items():
            pre = (before or {}).get(key)
            if pre is not None and pre[0] is st and pre[1] == st.nbytes():
                self.update(key, st, pre[2])
            else:
                self.record(key, st)

    def on_op(self, func: Any, args: Sequence[Any], kwargs: Dict[str, Any], out: Any,
              before: Optional[Before] = None) -> None:
        """Called from the dispatch mode after the op ran (the mode is off meanwhile); before: what
        before_op returned for it."""
        import torch
        name, schema = func.overloadpacket.__name__, func._schema
        written = _written(func, args, kwargs)
        in_ptrs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs), [])}
        fresh = []
        for ret, value in zip(schema.returns, out if len(schema.returns) > 1 else (out,)):
            if ret.alias_info is None:  # views (annotated returns) share their input's storage
                fresh += [t for t in _tensors(value, []) if t.untyped_storage().data_ptr() not in in_ptrs]
        kind = op_kind(name) if written or fresh else "view"
        self.ops.setdefault(name, [0, kind])[0] += 1
        if kind == "view":
            return
        fresh = [t for t in fresh if t.numel() > 0]
        for t in fresh:
            self.shadow(t, True, fresh=True)
        targets = fresh + [t for t in written if t.numel() > 0]
        if kind == "alloc":
            for t in targets:
                self.set_labels(t, ALLOC, {})
            for t in fresh if name in SENTINEL_OPS else ():
                raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
                raw.fill_(1 if t.dtype == torch.bool else 0xFF)
        elif kind == "copy" and not (name.startswith("index_put") and (args[3:4] or [kwargs.get("accumulate")])[0]):
            # the source's labels, moved as the op moved the data (rerun on labels, never into `out`)
            rest = {k: v for k, v in kwargs.items() if k != "out"}
            if name.startswith("_copy_from"):
                sources, targets = [args[0]], [args[1]]
            else:
                sources = [args[1]] if name in ("copy_", "copy") else _tensors(args[0], [])
            writers = {}
            for s in sources:
                writers.update(self.writers(s))
            if name in ("cat", "stack") or name in MOVE_OPS or name.startswith("index_put"):
                # rerun on whole label tensors: one byte per element of the operands and of the result
                operands = sources + ([args[2]] if name.startswith("index_put") else [])
                with self.temp(sum(s.numel() for s in operands) + sum(t.numel() for t in targets)):
                    if name in ("cat", "stack"):
                        moved = func.overloadpacket([self.labels_full(s) for s in args[0]], *args[1:], **rest)
                    elif name in MOVE_OPS:
                        moved = func.overloadpacket(self.labels_full(args[0]), *args[1:], **rest)
                    else:  # out[mask] = values: values' labels where they land
                        sources = [args[0], args[2]]
                        writers.update(self.writers(args[2]))
                        moved = torch.index_put(self.labels_full(args[0]), args[1], self.labels_full(args[2]))
                    for t in targets:
                        self.set_labels(t, moved, writers)
            else:  # element for element (copy_, clone, _to_copy...): label chunks, no whole copy
                for t in targets:
                    self.copy_labels(sources[0], t, writers)
        else:  # compute (an accumulating index_put included)
            label = LIBRARY if kind == "library" else ATEN
            for t in targets:
                self.set_labels(t, label, {LABELS[label]: name})
            if kind == "library":
                inputs = [s for s in _tensors((args, kwargs), []) if all(s is not t for t in targets)]
                for t in targets:
                    self.library_copies(t, inputs)
        self.follow(fresh + written + targets, before)

    def library_copies(self, t: torch.Tensor, inputs: List[torch.Tensor]) -> None:
        """A library result that holds the values of an input with aten or unseen labels (a GEMM with an
        identity or permutation matrix) computed nothing: those elements keep the input's labels, else the
        epilogue rule (a Triton write over a library result is Triton's) would launder PyTorch's work
        through a GEMM. Whole-result permutations by moments, else element by element at the same
        position within the evaluation's rtol (no atol: tiny honest outputs are not near-zero inputs'
        copies; exact zeros match exact zeros). Runs only for inputs that may hold such labels."""
        if t.numel() == 0 or not t.is_floating_point():
            return
        cands = [_Source(s, s, self.writers(s)) for s in inputs if s.numel() > 0 and s.is_floating_point()]
        cands = [c for c in cands if self.suspect_source(c, None)]
        if not cands:
            return
        device, n = t.device, t.numel()
        shadow = self.shadow(t, True)
        winner = self.permutation(t, None, cands, None)
        used = set()
        for a, b in _ranges(n, shadow.step(t)):
            with self.temp(_chunk_cost(b - a, max(x.values.element_size() for x in cands))):
                new, now = shadow.read(t, a, b), _flat(t, a, b)
                for src in [winner] if winner is not None else cands:
                    e = min(b, src.m)
                    if e <= a:
                        continue
                    labels = _pad(self.read(src.like, a, e).to(device), b - a)
                    kept = _suspect(labels) & (new == LIBRARY)
                    if winner is None and bool(kept.any()):  # relative only: near-zero values are no copy
                        kept &= _positions(_flat(src.values, a, e).to(device), now,
                                           lambda p, q: _close(p, q, 0.0, self.rtol))
                    if bool(kept.any()):
                        new = labels.where(kept, new)
                        used.add(id(src))
                shadow.write(t, a, b, new)
        for src in cands:
            if id(src) in used:
                shadow.writers.update({k: v for k, v in src.writers.items() if k != "triton"})
