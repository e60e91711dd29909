"""The audit's state and its own accounting: what it holds, the device bytes its bookkeeping
holds (hold, drop, temp: `bookkeeping_peak_bytes`), the errors that make it incomplete, and the default
label of a storage without labels."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Set

if TYPE_CHECKING:
    import torch
    from .audit_chunks import Key
    from .audit_shadow import _Shadow

from .audit_vocab import INPUT, MAX_ERRORS, MAX_NAME, UNSEEN
from .audit_chunks import _close


class _AuditState:
    """What one audited forward keeps; the layers above it (labels, digests, matching, aten ops,
    launches: audit.py's _Audit) add what they do with it."""

    def __init__(self, atol: float, rtol: float, seed: int = 0) -> None:
        self.atol, self.rtol, self.paused = atol, rtol, False
        self.shadows: Dict[Key, _Shadow] = {}    # (device, storage data_ptr) -> _Shadow
        self.inventory: Dict[Key, torch.UntypedStorage] = {}  # (device, storage data_ptr) -> storage: those from before the forward (held)
        self.records: Dict[Key, List[Any]] = {}    # (device, storage data_ptr) -> [weakref to it, nbytes, [digest per chunk]]
        self.weights: Dict[torch.device, torch.Tensor] = {}    # device -> the digest weights of a chunk's words (chunk_weights)
        self.seed = (int(seed) * 2654435761 + 97) % ((1 << 31) - 1)  # of the change digests
        self.checked: Set[Key] = set()  # storages checked for unseen writes at the end
        self.ops: Dict[str, List[Any]] = {}        # op name -> [count, kind]
        self.launches: Dict[str, List[int]] = {}   # kernel name -> [count, elements credited to Triton]
        self.compiled_names: Set[str] = set()
        self.errors: List[str] = []
        self.held = self.peak = 0  # device bytes the bookkeeping holds now / held at most
        self.staged = False        # some launch staged its snapshots in host memory

    def error(self, where: str, exc: BaseException) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(("%s: %s: %s" % (where, type(exc).__name__, exc))[:MAX_NAME])

    def close(self, prev: torch.Tensor, now: torch.Tensor) -> torch.Tensor:
        return _close(prev, now, self.atol, self.rtol)

    def hold(self, nbytes: int) -> None:
        self.held += nbytes
        self.peak = max(self.peak, self.held)

    def drop(self, nbytes: int) -> None:
        self.held -= nbytes

    @contextlib.contextmanager
    def temp(self, nbytes: int) -> Iterator[None]:
        """nbytes of temporaries held for the duration of the block."""
        self.hold(nbytes)
        try:
            yield
        finally:
            self.drop(nbytes)

    def default_label(self, key: Key) -> int:
        """The label of a storage without a shadow: input if it existed before the forward, else unseen
        (made where the audit could not see: numpy, another thread, disabled dispatch...)."""
        return INPUT if key in self.inventory else UNSEEN
