"""Content digests of tensors, computed on the tensor's own device, that two processes agree on.

The judge and the worker both run torch on the same device type, so integer arithmetic on that
device gives both the same number for the same bytes. A digest is two independent weighted sums of
the tensor's bytes read as 32-bit words, modulo the prime 2^31 - 1, with weights that depend on a
word's position and a seed: a changed, moved or swapped word changes it (a chance collision is about
one in 2^62). It is not a cryptographic hash: a process that knows the seed can forge one, which is
why it only ties values together inside one evaluation (the values the audit saw are the values the
judge compared) and never stands in for the judge's own comparison.

Everything is chunked: the temporaries of one step are a few int64 tensors of CHUNK_WORDS words,
and no full-size copy of the tensor is made for a contiguous one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

PRIME = (1 << 31) - 1
CHUNK_WORDS = 1 << 22
_MULTIPLIERS = (1103515245, 69069)


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's logical contents (row-major) as a flat uint8 tensor: a view for a contiguous
    tensor, else one contiguous copy."""
    import torch

    flat = t.detach().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    return flat.contiguous().view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8,
                                                                                 device=t.device)


def weights(first: int, n: int, seed: int, device: torch.device) -> list[torch.Tensor]:
    """Weights of words first..first+n-1 for both sums: two int64 tensors in [0, PRIME)."""
    import torch

    index = torch.arange(first, first + n, dtype=torch.int64, device=device)
    out = []
    for k, mult in enumerate(_MULTIPLIERS):
        salt = (seed * (2 * k + 3) + k) % PRIME
        w = ((index + salt) % PRIME * mult) % PRIME
        out.append((w * w + salt) % PRIME)  # squared: no linear relation between positions
    return out


def words_digest(raw: torch.Tensor, seed: int, first_word: int = 0) -> tuple[int, int]:
    """(a, b): the two sums over a flat uint8 tensor whose first word has index first_word (the
    last word zero-padded). Sums over pieces that start on word boundaries add up (mod PRIME) to
    the sum over the whole, whatever the chunking."""
    import torch

    n = raw.numel()
    whole = n - n % 4
    if raw.storage_offset() % 4:
        raw = raw.clone()  # int32 views need 4-byte alignment
    parts = [(raw[:whole].view(torch.int32), first_word)]
    if whole < n:
        tail = torch.zeros(4, dtype=torch.uint8, device=raw.device)
        tail[:n - whole] = raw[whole:]
        parts.append((tail.view(torch.int32), first_word + whole // 4))
    total = [0, 0]
    for words, first in parts:
        for a in range(0, words.numel(), CHUNK_WORDS):
            chunk = words[a:a + CHUNK_WORDS].to(torch.int64) + (1 << 31)  # [0, 2^32)
            chunk %= PRIME
            for k, w in enumerate(weights(first + a, chunk.numel(), seed, raw.device)):
                # each product < 2^62; each term < 2^31, so a chunk's sum stays far below 2^63
                total[k] = (total[k] + int(((chunk * w) % PRIME).sum())) % PRIME
    return total[0], total[1]


def tensor_digest(t: torch.Tensor, seed: int) -> str:
    """A hex digest of a tensor's dtype, shape and contents."""
    import zlib

    a, b = words_digest(raw_bytes(t), seed)
    header = zlib.crc32(("%s%s" % (str(t.dtype), list(t.shape))).encode())
    return "%08x%08x%08x" % (a, b, header)


SAME_BYTES_STEP = 1 << 26


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors of one dtype and shape hold the same bytes in logical order (NaN
    payloads included), compared a slice at a time: no full-size temporary."""
    x, y = raw_bytes(a), raw_bytes(b)
    if x.numel() != y.numel():
        return False
    return all(bool((x[i:i + SAME_BYTES_STEP] == y[i:i + SAME_BYTES_STEP]).all())
               for i in range(0, x.numel(), SAME_BYTES_STEP))
