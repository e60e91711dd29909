"""Sealed messages: what the worker says after the kernel is imported carries a MAC under a key
the judge gave it for this evaluation, so that bytes the kernel writes on the channel itself
(any descriptor is one os.write away) are not taken as the worker's.

The judge draws the key (new_key) and sends it in its "load" request; the worker builds a
signer from it before it imports the kernel and keeps the signer only in its own instance (no
module refers to it: reaching it takes the worker's frames or the garbage collector's lists,
which the run-time guard refuses, guard.py). Each sealed message is the message's bytes and
a MAC over them and their sequence number, so a message can be neither forged nor replayed,
dropped or reordered: the judge's Opener counts too.

The MAC says that the harness's code sent the message; what the message says is only as
honest as that code, which runs in the kernel's process (docs/security.md).
"""

from __future__ import annotations

import hashlib
import secrets
import struct
from typing import Callable

KEY_BYTES = 32
MAC_BYTES = 32


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def _mac(key: bytes, sequence: int, data: bytes, blake2b: type[hashlib.blake2b] = hashlib.blake2b,
         pack: Callable[..., bytes] = struct.pack) -> bytes:
    return blake2b(pack(">Q", sequence) + data, key=key, digest_size=MAC_BYTES).digest()


def signer(key: bytes) -> Callable[[bytes], bytes]:
    """A function that seals a message's bytes (appends their MAC), counting messages. It keeps
    the key, and the functions it uses, in its own closure."""
    if len(key) != KEY_BYTES:
        raise ValueError("a seal key has %d bytes" % KEY_BYTES)
    count = [0]

    def seal(data: bytes, key: bytes = key, mac: Callable[[bytes, int, bytes], bytes] = _mac) -> bytes:
        sealed = data + mac(key, count[0], data)
        count[0] += 1
        return sealed

    return seal


class Opener:
    """The judge's side: checks and strips each sealed message's MAC, in sequence."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.count = 0

    def open(self, sealed: bytes) -> bytes:
        """The message's bytes; ValueError when the MAC is missing or wrong (forged, replayed,
        out of order)."""
        data, mac = sealed[:-MAC_BYTES], sealed[-MAC_BYTES:]
        if len(sealed) <= MAC_BYTES or not secrets.compare_digest(mac, _mac(self.key, self.count, data)):
            raise ValueError("a message the harness did not seal (message %d after the kernel was imported): "
                             "something else in the kernel's process wrote on the channel" % (self.count + 1))
        self.count += 1
        return data
