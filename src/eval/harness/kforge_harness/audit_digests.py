"""Content digests of the storages the audit knows: recorded, moved by the writes it saw, and
verified before work reads a storage (a chunk that differs was written unseen: its labels become
unseen)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, cast

if TYPE_CHECKING:
    import torch
    from .audit_chunks import Key

    Digest = Tuple[int, int]  # digest.words_digest's two sums
    Piece = Tuple[int, int, int, Digest]  # (chunk, a, b, the digest of the bytes [a, b))
    Read = Callable[[int, int], torch.Tensor]  # read(a, b): the bytes [a, b) as uint8

from .digest import PRIME as _PRIME
from . import audit_vocab as vocab
from .audit_vocab import CPU_DIGEST_BYTES, DIGEST_BYTE_COST, UNSEEN
from .audit_chunks import _chunks_of, _digest_step, _extent, _merge_spans, _ranges, _raw, _storage_key
from .audit_labels import _Labels


class _Digests(_Labels):
    """Per storage, one digest.words_digest per DIGEST_CHUNK_BYTES chunk (audit.py's docstring)."""

    def digest_pieces(self, read: Read, lo: int, hi: int, device: torch.device) -> List[Piece]:
        """[(chunk, a, b, digest)] of a storage's bytes [lo, hi) (lo a multiple of 4) cut at chunk
        boundaries, read(a, b) giving the bytes [a, b). Each digest is digest.words_digest's of its piece,
        its words indexed from its chunk's start (segment_digests), computed for many pieces at once:
        one pass and one device sync per step (_digest_step(), or CPU_DIGEST_BYTES on the CPU)."""
        step = _digest_step() if device.type != "cpu" else min(_digest_step(), CPU_DIGEST_BYTES)
        pieces, out, i = _chunks_of(lo, hi), [], 0
        while i < len(pieces):
            j, size = i + 1, pieces[i][2] - pieces[i][1]
            while j < len(pieces) and size + pieces[j][2] - pieces[j][1] <= step:
                size += pieces[j][2] - pieces[j][1]
                j += 1
            if size <= step:  # whole pieces in one pass
                a, b = pieces[i][1], pieces[j - 1][2]
                sums = self.segment_digests(read(a, b), a, [p[1] - a for p in pieces[i:j]] + [b - a], device)
                out += [(c, pa, pb, d) for (c, pa, pb), d in zip(pieces[i:j], sums)]
            else:  # one piece larger than a step: its steps' digests add up
                c, a, b = pieces[i]
                x = y = 0
                for p, q in _ranges(b - a, step):
                    ((dx, dy),) = self.segment_digests(read(a + p, a + q), a + p, [0, q - p], device)
                    x, y = (x + dx) % _PRIME, (y + dy) % _PRIME
                out.append((c, a, b, (x, y)))
            i = j
        return out

    def segment_digests(self, raw: torch.Tensor, first: int, cuts: List[int], device: torch.device) -> List[Digest]:
        """words_digest(raw[cuts[k]:cuts[k + 1]], seed, w_k) for each k in one pass, w_k being the word
        offset of that piece within its digest chunk (pieces never cross a chunk boundary, and every
        piece but the first starts one): raw is a flat uint8 tensor starting at byte `first` of its
        storage (a multiple of 4), the cuts are byte offsets into it, multiples of 4 but the last (a
        storage's end). Chunk-relative word indexes let every chunk share one table of weights
        (chunk_weights): several chunks are one (chunks x words) product. A change, move or swap of
        words inside a chunk still changes its digest, and each chunk is compared with its own record."""
        import torch
        from .digest import as_words, block_factor, combine, row_sums
        n = raw.numel()
        with self.temp(DIGEST_BYTE_COST * (n + 4) + (4 * vocab.DIGEST_CHUNK_BYTES if len(cuts) > 2 else 0)):
            words = as_words(raw.to(device))
            offset, count = first % vocab.DIGEST_CHUNK_BYTES // 4, words.numel()
            if len(cuts) == 2:  # one piece: the weights from its offset
                table = self.chunk_weights(offset + count, device)[2 * offset:2 * (offset + count)]
                sums = row_sums(words.view(1, -1), table)
            else:  # whole chunks as rows (zeros before the first piece's offset and after the last piece)
                row = vocab.DIGEST_CHUNK_BYTES // 4
                if offset or count % row:  # whole chunks need no padded copy
                    words = torch.cat([words.new_zeros(offset), words, words.new_zeros(-(offset + count) % row)])
                words = words.view(-1, row)
                sums = row_sums(words, self.chunk_weights(row, device))
            f0, f1 = (block_factor(0, self.seed, k) for k in range(2))  # chunk-relative: block 0
            return [(f0 * x % _PRIME, f1 * y % _PRIME) for x, y in map(combine, sums.tolist())]

    def chunk_weights(self, n: int, device: torch.device) -> torch.Tensor:
        """digest.block_table of a digest chunk's first n words: kept per device (grown as needed up
        to a chunk's words) and held (at most DIGEST_WEIGHT_BYTES)."""
        from .digest import block_table
        cached = self.weights.get(device)
        if cached is None or cached.shape[0] < 2 * n:
            table = block_table(device, n)
            if cached is not None:
                self.drop(cached.numel() * 8)
            cached = self.weights[device] = table
            self.hold(table.numel() * 8)
        return cached

    def digests(self, storage: torch.UntypedStorage, spans: List[Tuple[int, int]], read: Read) -> List[Piece]:
        """[(chunk, a, b, digest)] of the byte spans (word-aligned) cut at chunk boundaries, the bytes of
        [a, b) being read(a, b)."""
        return [piece for lo, hi in spans for piece in self.digest_pieces(read, lo, hi, storage.device)]

    def record(self, key: Key, storage: torch.UntypedStorage) -> None:
        """Digests all of a storage's bytes, chunk by chunk: its contents as the audit saw them last."""
        nbytes = storage.nbytes()
        raw = _raw(storage, 0, nbytes)
        pieces = self.digest_pieces(lambda a, b: raw[a:b], 0, nbytes, storage.device)
        self.records[key] = [weakref.ref(storage), nbytes, [d for _, _, _, d in pieces]]

    def record_of(self, key: Key, storage: torch.UntypedStorage) -> Optional[List[Any]]:
        """The record of this very storage (not of a freed one whose address it took), or None."""
        rec = self.records.get(key)
        if rec is None or rec[1] != storage.nbytes() or (key not in self.inventory and rec[0]() is not storage):
            return None
        return rec

    def update(self, key: Key, storage: torch.UntypedStorage, before: List[Piece]) -> None:
        """After a write the audit saw: each chunk's digest moves by what the write changed (the digest of
        the written span after it, minus before it: `before` from digests()), so that a write it did not
        see elsewhere in the chunk still shows. A storage without a record is recorded whole."""
        rec = self.record_of(key, storage)
        if rec is None:
            self.record(key, storage)
            return
        raw = _raw(storage, 0, storage.nbytes())
        spans = _merge_spans([(a, b) for _, a, b, _ in before])
        after = {(c, a, b): d for c, a, b, d in self.digests(storage, spans, lambda a, b: raw[a:b])}
        for c, a, b, (p0, q0) in before:
            p1, q1 = after[(c, a, b)]
            p, q = rec[2][c]
            rec[2][c] = ((p - p0 + p1) % _PRIME, (q - q0 + q1) % _PRIME)

    def verify(self, tensors: List[torch.Tensor]) -> Dict[Tuple[Key, int], Digest]:
        """Before work reads these tensors (a launch, a copy, a library op) and at the end for the outputs:
        the digest chunks of their storages whose bytes differ from the audit's last record of them were
        written by something it did not see; their labels become unseen, and the record takes the bytes
        as they are (so that what is read from them now carries that label, and a copy of it too).
        Returns the digests it computed: {(storage key, chunk): digest}."""
        touched: Dict[Key, Tuple[torch.Tensor, torch.UntypedStorage, Set[int]]] = {}
        for t in tensors:
            if t.numel() == 0:
                continue
            key, st = _storage_key(t), t.untyped_storage()
            if self.record_of(key, st) is not None:
                lo, hi = _extent(t)
                touched.setdefault(key, (t, st, set()))[2].update(range(lo // vocab.DIGEST_CHUNK_BYTES,
                                                                        -(-hi // vocab.DIGEST_CHUNK_BYTES)))
        computed = {}
        for key, (t, st, chunks) in touched.items():
            rec, raw, nbytes = cast(List[Any], self.record_of(key, st)), _raw(st, 0, st.nbytes()), st.nbytes()
            spans = _merge_spans([(c * vocab.DIGEST_CHUNK_BYTES, min(nbytes, (c + 1) * vocab.DIGEST_CHUNK_BYTES)) for c in chunks])
            for c, a, b, now in self.digests(st, spans, lambda a, b: raw[a:b]):
                computed[(key, c)] = now
                if now != rec[2][c]:
                    self.shadow(t, True).mark(a, b, UNSEEN)
                    rec[2][c] = now
        return computed

    def unseen_writes(self, t: torch.Tensor) -> None:
        """At the end of the forward, for an output: verify(), and a storage with labels but no record (its
        recording failed) vouches for nothing."""
        key, st = _storage_key(t), t.untyped_storage()
        if key in self.checked or t.numel() == 0:
            return
        self.checked.add(key)
        if self.record_of(key, st) is None:
            shadow = self.shadow(t, False)
            if shadow is not None:
                shadow.mark(0, shadow.nbytes, UNSEEN)
            return  # no labels either: read as the default label (unseen, or input if inventoried)
        self.verify([t])
