"""The audit's state and its own accounting: what it holds, the device bytes its bookkeeping
holds (hold, drop, temp: `bookkeeping_peak_bytes`), the errors that make it incomplete, and the default
label of a storage without labels."""

from __future__ import annotations

import contextlib

from .audit_vocab import INPUT, MAX_ERRORS, MAX_NAME, UNSEEN
from .audit_chunks import _close


class _AuditState:
    """What one audited forward keeps; the layers above it (labels, digests, matching, aten ops,
    launches: audit.py's _Audit) add what they do with it."""

    def __init__(self, atol, rtol, seed=0):
        self.atol, self.rtol, self.paused = atol, rtol, False
        self.shadows = {}    # (device, storage data_ptr) -> _Shadow
        self.inventory = {}  # (device, storage data_ptr) -> storage: those from before the forward (held)
        self.records = {}    # (device, storage data_ptr) -> [weakref to it, nbytes, [digest per chunk]]
        self.weights = {}    # device -> the digest weights of a chunk's words (chunk_weights)
        self.seed = (int(seed) * 2654435761 + 97) % ((1 << 31) - 1)  # of the change digests
        self.checked = set()  # storages checked for unseen writes at the end
        self.ops = {}        # op name -> [count, kind]
        self.launches = {}   # kernel name -> [count, elements credited to Triton]
        self.compiled_names, self.errors = set(), []
        self.held = self.peak = 0  # device bytes the bookkeeping holds now / held at most
        self.staged = False        # some launch staged its snapshots in host memory

    def error(self, where, exc):
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(("%s: %s: %s" % (where, type(exc).__name__, exc))[:MAX_NAME])

    def close(self, prev, now):
        return _close(prev, now, self.atol, self.rtol)

    def hold(self, nbytes):
        self.held += nbytes
        self.peak = max(self.peak, self.held)

    def drop(self, nbytes):
        self.held -= nbytes

    @contextlib.contextmanager
    def temp(self, nbytes):
        """nbytes of temporaries held for the duration of the block."""
        self.hold(nbytes)
        try:
            yield
        finally:
            self.drop(nbytes)

    def default_label(self, key):
        """The label of a storage without a shadow: input if it existed before the forward, else unseen
        (made where the audit could not see: numpy, another thread, disabled dispatch...)."""
        return INPUT if key in self.inventory else UNSEEN
