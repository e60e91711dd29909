"""Where a launch's written values come from (relabel, in audit.py's docstring's order): a source
all of them fit, a permutation of a suspect source (moments), element by element, and the zeros of a
tracked result."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Set, cast

if TYPE_CHECKING:
    import torch
    from .audit_chunks import Key, Moments
    from .audit_labels import Frozen
    from .audit_shadow import _Shadow

from . import audit_vocab as vocab
from .audit_vocab import LIBRARY, TRITON, UNSEEN
from .audit_chunks import _chunk_cost, _differs, _flat, _pad, _positions, _ranges, _same_moments, _storage_key, _suspect, _tight
from .audit_shadow import _Source
from .audit_digests import _Digests


class _Matching(_Digests):
    """Attribution of one launch's writes into one argument."""

    def storage_source(self, key: Key, st: torch.UntypedStorage, offset: int) -> Optional[_Source]:
        """A storage read flat from byte `offset`, in the float dtype PyTorch last wrote it as (float32
        where unknown), as a source; None where the offset is not aligned to that dtype."""
        import torch
        shadow = self.shadows.get(key)
        if shadow is not None and key not in self.inventory and shadow.storage() is not st:
            shadow = None
        dtype = (shadow.value_dtype if shadow is not None else None) or torch.float32
        size = dtype.itemsize
        if offset % size or st.nbytes() - offset < size:
            return None
        view = torch.empty(0, dtype=dtype, device=st.device).set_(st, offset // size,
                                                                   ((st.nbytes() - offset) // size,), (1,))
        return _Source(view, view, shadow.writers if shadow is not None else {})

    def tracked(self, exclude: Set[Key]) -> List[_Source]:
        """The other live storages that may hold aten or unseen labels, as sources read flat from their
        first element (what a copy over several launches would have come from)."""
        out = []
        for key, shadow in list(self.shadows.items()):
            if key in exclude or not shadow.suspect or shadow.value_dtype is None:
                continue
            st = shadow.storage()
            if st is not None:
                source = self.storage_source(key, st, 0)
                if source is not None:
                    out.append(source)
        return out

    def relabel(self, name: str, i: int, args: List[torch.Tensor], values: List[torch.Tensor], sources: List[int],
                writers: List[Dict[str, str]], frozen: Frozen, raw: Sequence[_Source] = (), opaque: bool = False) -> int:
        """Labels what the launch wrote into argument i (changed); returns the elements credited to Triton.

        Sources, in order: t's own values before the launch, the other arguments' (of any size: position
        k against position k), storages reached through raw pointers. Pass 1 finds the first source
        within tolerance of which ALL the changed elements lie (a copy, a nudge: its labels). Failing
        that, the permutation check (moments) looks for a suspect source of t's size whose values t now
        holds rearranged (its labels, in its order). Failing that, pass 2 goes element by element: a
        changed element within tolerance of a source's value at its position keeps that source's aten or
        unseen label; then one that holds the value (TIGHT_RTOL) of a tracked storage with aten or unseen
        labels at its position keeps that; the rest is Triton's (unseen where the launch holds an opaque
        pointer). Every library label of t then becomes Triton's (the epilogue rule). Chunked: no
        full-size mask is kept."""
        t, before = args[i], values[i]
        shadow = self.shadow(t, True)
        step = shadow.step(t)
        cands = ([_Source(t, before, writers[i], own=True)]
                 + [_Source(args[j], values[j], writers[j]) for j in sources] + list(raw))
        cost = _chunk_cost(step, max(x.element_size() for x in [t] + [s.values for s in cands]))
        exclude = {_storage_key(x) for x in args} | {s.key for s in raw}
        job = _Attribution(self, t, before, cands, frozen, exclude, opaque)
        winner = job.whole_source(step, cost)
        for a, b in _ranges(t.numel(), step):
            with self.temp(cost):
                now, old = _flat(t, a, b), _flat(before, a, b).to(t.device)
                changed = _differs(old, now)
                any_changed = bool(changed.any())
                new = self.read(t, a, b, frozen)  # t's labels before the launch
                if any_changed and winner is not None:  # a copy / nudge / rearrangement of one source
                    if not winner.own:
                        new = job.labels_of(winner, new, a, b).where(changed, new)
                elif any_changed:
                    new = job.by_element(new, changed, now, old, a, b)
                # The epilogue rule: what a launch writes over a library result (cuBLAS, cuDNN) is its own,
                # and so is the rest of an argument it wrote in place (values it left as they were).
                library = new == LIBRARY
                if bool(library.any()):
                    new = new.masked_fill(library, TRITON)
                    job.credited += int(library.sum())
                elif not any_changed:
                    continue
                shadow.write(t, a, b, new)
        credited = job.credited
        best = max(job.tracked or [], key=lambda src: job.matched.get(id(src), 0), default=None)
        if best is not None and 0 < job.open_nonzero <= 2 * job.matched.get(id(best), 0):
            # A tracked result explains most of the values the launch wrote: its zeros are copied too
            # (zeros alone are nobody's copy: an honest ReLU's zeros coincide with any other ReLU's).
            credited -= self.zeros_from(t, before, best, frozen, step, cost)
        if winner is not None:
            shadow.writers.update(writers[i] if winner.own else winner.writers)
            if credited:
                shadow.writers["triton"] = name
        else:
            new_writers = {"triton": name}
            for src in job.used:
                new_writers.update({k: v for k, v in src.writers.items() if k != "triton"})
            shadow.writers.update(new_writers)
        return credited

    def zeros_from(self, t: torch.Tensor, before: torch.Tensor, src: _Source, frozen: Frozen, step: int,
                   cost: int) -> int:
        """The changed elements of t now Triton's that are zero where src is zero take src's (suspect)
        labels; returns how many."""
        device, shadow, taken = t.device, cast("_Shadow", self.shadow(t, False)), 0
        for a, b in _ranges(min(t.numel(), src.m), step):
            with self.temp(cost):
                now = _flat(t, a, b)
                changed = _differs(_flat(before, a, b).to(device), now)
                new = shadow.read(t, a, b)
                labels = self.read(src.like, a, b, frozen).to(device)
                theirs = self.value_view(_flat(src.values, a, b).to(device), src.like)
                kept = (changed & (new == TRITON) & _suspect(labels) & (self.value_view(now, t) == 0)
                        & (theirs.reshape(-1) == 0))
                if bool(kept.any()):
                    shadow.write(t, a, b, labels.where(kept, new))
                    taken += int(kept.sum())
        return taken

    def permutation(self, t: torch.Tensor, before: Optional[torch.Tensor], pool: List[_Source],
                    frozen: Optional[Frozen]) -> Optional[_Source]:
        """A source of t's size that may hold aten or unseen labels and whose values t now holds
        rearranged (a transpose, a permutation), told by their moments (_same_moments); None if none.
        Runs only when no source holds all the changed values at their positions."""
        n, device = t.numel(), t.device
        if n < 2 or not self.value_view(_flat(t, 0, 1), t).is_floating_point():
            return None
        pool = [s for s in pool if s.m == n and self.suspect_source(s, frozen)]
        if not pool:
            return None
        mine = self.moments(lambda a, b: self.value_view(_flat(t, a, b), t), n)
        if mine is None:
            return None
        for src in pool:
            if src.own:
                theirs = self.moments(lambda a, b: self.value_view(_flat(cast("torch.Tensor", before), a, b).to(device), t), n)
            else:
                def read(a: int, b: int, s: _Source = src) -> torch.Tensor:
                    return self.value_view(_flat(s.values, a, b).to(device), s.like)
                theirs = self.moments(read, n)
            if theirs is not None and _same_moments(mine, theirs):
                return src
        return None

    def moments(self, read: Callable[[int, int], torch.Tensor], n: int) -> Optional[Moments]:
        """((finite, NaN, +inf, -inf counts), [sum, sum |x|, sum x^2, sum x^3, sum |x|^3], min, max) of
        the values read(a, b) gives for [a, b) in [0, n), in float64, chunk by chunk; None if not floats."""
        import torch
        counts, sums, lo, hi = [0, 0, 0, 0], [0.0] * 5, math.inf, -math.inf
        for a, b in _ranges(n, vocab.CHUNK_ELEMENTS):
            with self.temp(_chunk_cost(b - a, 8)):
                v = read(a, b)
                if not v.is_floating_point():
                    return None
                v = v.reshape(-1).to(torch.float64)
                finite = torch.isfinite(v)
                counts[1] += int(torch.isnan(v).sum())
                counts[2] += int((v == math.inf).sum())
                counts[3] += int((v == -math.inf).sum())
                v = v[finite]
                counts[0] += v.numel()
                if v.numel():
                    mag, sq = v.abs(), v * v
                    for k, x in enumerate((v, mag, sq, sq * v, sq * mag)):
                        sums[k] += float(x.sum())
                    lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
        return tuple(counts), sums, lo, hi


class _Attribution:
    """One relabel(): what a launch wrote into one argument t, against the sources it may have come
    from (cands: t's own values before the launch first), and what the element-by-element pass found:
    the sources used, the tracked storages (looked up once, when first needed) and the open non-zero
    values each of them matched, the elements credited to Triton."""

    def __init__(self, audit: _Matching, t: torch.Tensor, before: torch.Tensor, cands: List[_Source], frozen: Frozen,
                 exclude: Set[Key], opaque: bool) -> None:
        self.audit, self.t, self.before, self.cands = audit, t, before, cands
        self.frozen, self.exclude, self.opaque = frozen, exclude, opaque
        self.tracked: Optional[List[_Source]] = None  # the audit's other suspect storages (audit.tracked), once looked up
        self.used: List[_Source] = []
        self.open_nonzero, self.matched = 0, cast(Dict[int, int], {})  # tracked storages: the open non-zero values each one holds
        self.credited = 0

    def previous(self, src: _Source, old: torch.Tensor, a: int, b: int) -> Optional[torch.Tensor]:
        """The source's values at t's positions [a, b) (fewer past its end; None if none), read as the
        values last written into its storage."""
        if src.own:
            return self.audit.value_view(old, self.t)
        e = min(b, src.m)
        return self.audit.value_view(_flat(src.values, a, e).to(self.t.device), src.like) if e > a else None

    def labels_of(self, src: _Source, own: Optional[torch.Tensor], a: int, b: int) -> torch.Tensor:
        """The source's labels at t's positions [a, b) (own: t's, for t's own values)."""
        if src.own:
            return cast("torch.Tensor", own)  # given for t's own source
        e = min(b, src.m)
        device = self.t.device
        return _pad(self.audit.read(src.like, a, e, self.frozen).to(device) if e > a else None, b - a).to(device)

    def tracked_sources(self) -> List[_Source]:
        if self.tracked is None:
            self.tracked = self.audit.tracked(self.exclude)
        return self.tracked

    def whole_source(self, step: int, cost: int) -> Optional[_Source]:
        """Pass 1: the first source within tolerance of which all the changed elements lie, else a
        suspect source whose values t holds rearranged (permutation); None if neither."""
        audit, t, before = self.audit, self.t, self.before
        fits = [True] * len(self.cands)
        for a, b in _ranges(t.numel(), step):
            with audit.temp(cost):
                now, old = _flat(t, a, b), _flat(before, a, b).to(t.device)
                unchanged = ~_differs(old, now)
                value_now = audit.value_view(now, t)
                for k, src in enumerate(self.cands):
                    if fits[k]:
                        fits[k] = bool((_positions(self.previous(src, old, a, b), value_now, audit.close)
                                        | unchanged).all())
            if not any(fits):
                break
        winner = next((src for src, fit in zip(self.cands, fits) if fit), None)
        if winner is None:
            winner = audit.permutation(t, before, self.cands + self.tracked_sources(), self.frozen)
        return winner

    def by_element(self, new: torch.Tensor, changed: torch.Tensor, now: torch.Tensor, old: torch.Tensor, a: int,
                   b: int) -> torch.Tensor:
        """Pass 2 over the chunk [a, b): the new labels of its changed elements (new: t's labels before
        the launch), each kept from the handed source, then the tracked storage, it matches; the rest is
        Triton's (unseen where the launch holds an opaque pointer)."""
        own, open_ = new, changed
        value_now = self.audit.value_view(now, self.t)
        for src in self.cands:  # what the launch was handed, at the evaluation's tolerance
            labels = self.labels_of(src, own, a, b)
            kept = open_ & _suspect(labels)
            if bool(kept.any()):
                kept &= _positions(self.previous(src, old, a, b), value_now, self.audit.close)
                if bool(kept.any()):
                    new, open_ = labels.where(kept, new), open_ & ~kept
                    self.used.append(src)
        if bool(open_.any()):
            # what PyTorch computed elsewhere, the same values at the same positions: the
            # unmasking of a result masked by an earlier launch, a copy through pointers
            tracked = self.tracked_sources()
            if tracked:
                self.open_nonzero += int((open_ & (value_now != 0)).sum())
            for src in tracked:
                labels = self.labels_of(src, None, a, b)
                kept = open_ & _suspect(labels)
                if bool(kept.any()):
                    kept &= _positions(self.previous(src, old, a, b), value_now, _tight)
                    if bool(kept.any()):
                        new, open_ = labels.where(kept, new), open_ & ~kept
                        self.matched[id(src)] = self.matched.get(id(src), 0) + int(kept.sum())
                        self.used.append(src)
        new = new.masked_fill(open_, UNSEEN if self.opaque else TRITON)
        if not self.opaque:
            self.credited += int(open_.sum())
        return new
