"""Triton launches: their arguments snapshotted (on the device, or staged in host memory), what
they changed found byte for byte and attributed, raw-pointer arguments resolved, and the digests sealed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, cast

if TYPE_CHECKING:
    import torch
    from .audit_chunks import Key
    from .audit_digests import Digest
    from .audit_labels import Frozen
    from .audit_shadow import _Source

    Pointers = Tuple[List[_Source], bool]  # storages reached through raw pointers, and whether one is opaque

from . import audit_vocab as vocab
from .audit_vocab import HOST_COPY_BYTES, POINTER_FLOOR, SNAPSHOT_MARGIN_BYTES, SNAPSHOT_MARGIN_FRACTION, UNSEEN
from .audit_chunks import _chunk_cost, _chunks_of, _device_free_bytes, _differs, _flat, _ints, _is_oom, _patch, _ranges, _raw, _storage_key, _tensors
from .audit_shadow import _Snapshot
from .audit_ops import _Ops


def _host_buffer(nbytes: int) -> torch.Tensor:
    import torch
    try:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)  # pinned: fast copies back
    except RuntimeError:  # no CUDA, or no pinned memory left: pageable memory
        return torch.empty(nbytes, dtype=torch.uint8)


class _Launches(_Ops):
    """What a Triton launch writes, labelled."""

    def on_launch(self, name: str, args: Sequence[Any], kwargs: Dict[str, Any], run: Callable[[], Any]) -> Any:
        snapshot = pointers = verified = None
        try:
            seen, tensors = set(), []
            for t in _tensors((args, {k: v for k, v in kwargs.items() if k != "grid"}), []):
                if id(t) not in seen and t.numel() > 0:
                    seen.add(id(t))
                    tensors.append(t.detach())
            self.track(tensors)
            pointers = self.pointers(args, kwargs, tensors)
            verified = self.verify(tensors + [source.like for source in pointers[0]])
            snapshot = self.snapshot(tensors)
        except Exception as exc:  # noqa: BLE001 -- recorded: the audit is then incomplete
            self.error("launch %s" % name, exc)
        try:
            result = run()
            stats = self.launches.setdefault(name, [0, 0])
            stats[0] += 1
            if getattr(result, "name", None):  # the compiled kernel's name, as the GPU profiler shows it
                self.compiled_names.add(str(result.name))
            if snapshot is not None:
                try:
                    stats[1] += self.attribute(name, snapshot, pointers, verified)
                except Exception as exc:  # noqa: BLE001 -- recorded: the audit is then incomplete
                    self.error("launch %s" % name, exc)
            return result
        finally:
            if snapshot is not None:
                self.release(snapshot, range(len(snapshot.buffers)))

    def track(self, tensors: List[torch.Tensor]) -> None:
        """Arguments on storages the audit does not know (made where it could not see) get unseen labels
        and a record: what the launch and later work do with them is followed from here on."""
        for t in tensors:
            key, st = _storage_key(t), t.untyped_storage()
            if key not in self.inventory and self.record_of(key, st) is None:
                self.shadow(t, True)
                self.record(key, st)

    def live_storages(self) -> Tuple[List[Tuple[int, int, Key, torch.UntypedStorage]], List[Tuple[int, int]]]:
        """[(lo, hi, key, storage)] of the storages the audit knows that are alive, and [(lo, hi)] of the
        tracked ones freed since."""
        live, dead = [], []
        for key, st in self.inventory.items():
            live.append((key[1], key[1] + st.nbytes(), key, st))
        for key, shadow in self.shadows.items():
            alive = shadow.storage()
            if alive is None:
                dead.append((key[1], key[1] + shadow.nbytes))
            elif key not in self.inventory:
                live.append((key[1], key[1] + alive.nbytes(), key, alive))
        return live, dead

    def pointers(self, args: Sequence[Any], kwargs: Dict[str, Any], tensors: List[torch.Tensor]) -> Pointers:
        """The launch's integer arguments that point into storages the audit knows, other than its tensor
        arguments' (raw pointers: [_Source]), and whether one is opaque (see POINTER_FLOOR)."""
        ints = [v for v in _ints((args, {k: v for k, v in kwargs.items() if k != "grid"}), []) if v >= 4096]
        if not ints:
            return [], False
        keys = {_storage_key(t) for t in tensors}
        live, dead = self.live_storages()
        sources, taken, opaque = [], set(), False
        for v in ints:
            hit = next((x for x in live if x[0] <= v < x[1]), None)
            if hit is None:
                opaque = opaque or v >= POINTER_FLOOR or any(lo <= v < hi for lo, hi in dead)
            elif hit[2] not in keys and (hit[2], v) not in taken:
                taken.add((hit[2], v))
                source = self.storage_source(hit[2], hit[3], v - hit[0])
                if source is not None:
                    sources.append(source)
        return sources, opaque

    def snapshot(self, args: List[torch.Tensor]) -> _Snapshot:
        """Copies the launch's arguments' bytes: on the device when it has room for them beside a
        margin, else (or when the device copy runs out of memory) in host memory, pinned if possible."""
        import torch
        snap = _Snapshot(args)
        intervals = _Snapshot.intervals(args)
        need = sum(hi - lo for lo, hi, _, _ in intervals)
        device = args[0].device if args else torch.device("cpu")
        free = _device_free_bytes(device)
        widest = max((t.element_size() for t in args), default=1)
        room = free is None or (need + need * SNAPSHOT_MARGIN_FRACTION + SNAPSHOT_MARGIN_BYTES
                                + _chunk_cost(vocab.CHUNK_ELEMENTS, widest) <= free)
        if room:
            try:
                self.fill(snap, intervals, host=False)
                return snap
            except Exception as exc:  # noqa: BLE001 -- only an OOM sends the copies to the host
                self.release(snap, range(len(snap.buffers)))
                if not _is_oom(exc):
                    raise
                snap = _Snapshot(args)
        self.fill(snap, intervals, host=True)
        return snap

    def fill(self, snap: _Snapshot, intervals: List[List[Any]], host: bool) -> None:
        import torch
        self.staged |= host
        for lo, hi, storage, indexes in intervals:
            device = snap.args[indexes[0]].device
            raw = torch.empty(0, dtype=torch.uint8, device=device).set_(storage, lo, (hi - lo,), (1,))
            if host:
                buffer = _host_buffer(hi - lo)
                for a, b in _ranges(hi - lo, HOST_COPY_BYTES):  # in steps: no one transfer of it all
                    buffer[a:b].copy_(raw[a:b])
                accounted = 0
            else:
                buffer = torch.empty(hi - lo, dtype=torch.uint8, device=device)
                buffer.copy_(raw)
                accounted = buffer.nbytes
                self.hold(accounted)
            snap.buffers.append([buffer, accounted, indexes, lo, hi, storage])
            for i in indexes:
                t = snap.args[i]
                view = torch.empty(0, dtype=t.dtype, device=buffer.device)
                snap.before[i] = view.set_(buffer.untyped_storage(), (t.storage_offset() * t.element_size() - lo)
                                           // t.element_size(), t.shape, t.stride())

    def release(self, snap: _Snapshot, buffers: Iterable[int]) -> None:
        for j in buffers:
            entry = snap.buffers[j]
            if entry[0] is not None:
                for i in entry[2]:
                    snap.before[i] = None
                entry[0] = None
                self.drop(entry[1])

    def changed(self, t: torch.Tensor, before: torch.Tensor) -> bool:
        """Did the launch change any byte of t?"""
        for a, b in _ranges(t.numel(), vocab.CHUNK_ELEMENTS):
            with self.temp(_chunk_cost(b - a, t.element_size())):
                if bool(_differs(_flat(before, a, b).to(t.device), _flat(t, a, b)).any()):
                    return True
        return False

    def attribute(self, name: str, snap: _Snapshot, pointers: Optional[Pointers] = None,
                  verified: Optional[Dict[Tuple[Key, int], Digest]] = None) -> int:
        """Labels what the launch wrote; returns the elements credited to Triton."""
        args = snap.args
        writers = [self.writers(t) for t in args]
        before = [cast("torch.Tensor", b) for b in snap.before]  # all taken: none released yet
        changed = [self.changed(t, before[i]) for i, t in enumerate(args)]
        # An unchanged argument holds exactly its bytes from before the launch: read it in place, and
        # let its snapshot go before the comparisons' temporaries come.
        values = [before[i] if changed[i] else t for i, t in enumerate(args)]
        del before  # the unchanged arguments' snapshots must be freeable by the release below
        self.release(snap, [j for j, entry in enumerate(snap.buffers) if not any(changed[i] for i in entry[2])])
        sources = {i: [j for j in range(len(args)) if j != i] for i in range(len(args)) if changed[i]}
        raw, opaque = pointers or ([], False)
        written = {_storage_key(args[i]) for i in sources}
        raw = [s for s in raw if s.key not in written]  # a storage the launch wrote: its values are gone
        frozen, frozen_bytes = self.freeze(args, sources)
        try:
            credited = sum(self.relabel(name, i, args, values, sources[i], writers, frozen, raw, opaque)
                           for i in sources)
        finally:
            self.drop(frozen_bytes)
        self.seal(snap, changed, verified or {})
        return credited

    def freeze(self, args: List[torch.Tensor], sources: Dict[int, List[int]]) -> Tuple[Frozen, int]:
        """Copies of the labels, as before the launch, of the storages that it writes and whose labels
        another argument's attribution reads (as a source, or two written views of one storage): the
        attribution of one argument must not see another's new labels (a copy of PyTorch's result
        would take Triton's label from the argument it was copied out of)."""
        from collections import Counter
        written = Counter(_storage_key(args[i]) for i in sources)
        read = {_storage_key(args[j]) for i in sources for j in sources[i]}
        frozen, nbytes = {}, 0
        for key, writers in written.items():
            if key in read or writers > 1:
                shadow = self.shadow(args[next(i for i in sources if _storage_key(args[i]) == key)], False)
                frozen[key] = shadow.copy() if shadow is not None else None
                if shadow is not None:
                    nbytes += shadow.labels.nbytes
                    self.hold(shadow.labels.nbytes)
        return frozen, nbytes

    def seal(self, snap: _Snapshot, changed: List[bool], verified: Dict[Tuple[Key, int], Digest]) -> None:
        """After a launch's attribution, per storage byte range of its arguments that it changed: the
        digests follow what it wrote there; and bytes it changed there outside its arguments' elements
        (a strided view's gaps, alignment padding), which nothing attributes, become unseen."""
        import torch
        for buffer, _, indexes, lo, hi, storage in snap.buffers:
            moved = [i for i in indexes if changed[i]]
            if buffer is None or not moved:
                continue
            t, key = snap.args[moved[0]], _storage_key(snap.args[moved[0]])
            pieces = _chunks_of(lo, hi)
            if all((key, c) in verified and a == c * vocab.DIGEST_CHUNK_BYTES
                   and b == min(storage.nbytes(), (c + 1) * vocab.DIGEST_CHUNK_BYTES) for c, a, b in pieces):
                before = [(c, a, b, verified[(key, c)]) for c, a, b in pieces]  # as verify found them just before
            else:
                before = self.digests(storage, [(lo, hi)], lambda a, b: buffer[a - lo:b - lo])
            for i in moved:  # the bytes expected now: the snapshot with the arguments' new values in place
                _patch(snap.before[i], snap.args[i])
            now = _raw(storage, lo, hi)
            for a, b in _ranges(hi - lo, vocab.CHUNK_ELEMENTS):
                with self.temp(_chunk_cost(b - a, 1)):
                    stray = (buffer[a:b].to(t.device) != now[a:b]).nonzero().view(-1)
                    if stray.numel():
                        shadow = self.shadow(t, True)
                        shadow.labels[torch.unique((stray + lo + a) // shadow.cell)] = UNSEEN
                        shadow.suspect = True
            self.update(key, storage, before)
