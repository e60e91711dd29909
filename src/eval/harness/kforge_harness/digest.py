"""Content digests of tensors, computed on the tensor's own device, that two processes agree on.

The judge and the worker both run torch on the same device type, so exact arithmetic on that
device gives both the same number for the same bytes. A digest is two independent weighted sums of
the tensor's 32-bit words, modulo the prime 2^31 - 1, with weights that depend on a word's position
and a seed: a changed, moved or swapped word changes it (a chance collision is about one in 2^62).
It is not a cryptographic hash: a process that knows the seed can forge one, which is why it only
ties values together inside one evaluation (the values the audit saw are the values the judge
compared) and never stands in for the judge's own comparison.

The sums, exactly (`reference_digest` in the tests spells them out in Python integers): word i
(counted from the tensor's start, plus `first_word`) is read as y = lo + 65536 * hi, lo and hi
its low and high 16-bit halves as signed integers (a bijection of the 32-bit words), and weighs
A_k(i mod BLOCK_WORDS) * B_k(i div BLOCK_WORDS, seed): A_k is one fixed table of a block's
positions (built once per process and device: a fresh seed costs nothing), B_k a factor per block
drawn from the seed, never 0 (so a digest chunk of the audit, BLOCK_WORDS words, is a block with
chunk-relative indexes, block 0). Sum k is sum(y * weight) mod PRIME.

Why this shape: the sums are one float64 matrix product per pass, the halves (|lo|, |hi| < 2^15)
against a block's weights split in 16-bit halves: every product is below 2^31 and a block's sum
of 2^19 of them below 2^50, so float64 holds each exactly whatever order the product sums in, on
any device. Int64 arithmetic with a modulo per word read and wrote ~140 bytes a word (a 6 GiB
digest: ~200 ms on an H200, scripts/gpu/digest_check.py); the product reads ~36 (50-70 ms).

Everything is chunked: the temporaries of one step are float64 halves of CHUNK_WORDS words, and
no full-size copy of the tensor is made for a contiguous one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Tuple

if TYPE_CHECKING:
    import torch

PRIME = (1 << 31) - 1
CHUNK_WORDS = 1 << 22
BLOCK_WORDS = 1 << 18  # the audit's digest chunk (audit_vocab.DIGEST_CHUNK_BYTES) in words
_MULTIPLIERS = (1103515245, 69069)
_BLOCK_MULTIPLIERS = (48271, 16807)
TABLE_SEED = 0x6B66  # A_k's: fixed, so one table serves every seed
_HALF = 1 << 16
CPU_GRAIN_HALVES = 1 << 12  # x 4 columns: half torch's parallel grain (32k elements)
CPU_TABLE_WORDS = 1 << 13  # half_table's passes on the CPU: 16k halves, half the grain


def weights(first: int, n: int, seed: int, device: torch.device) -> list[torch.Tensor]:
    """Weights of positions first..first+n-1 for both sums, drawn from `seed`: two int64 tensors in
    [0, PRIME). A_k is weights(.., TABLE_SEED, ..)."""
    import torch

    index = torch.arange(first, first + n, dtype=torch.int64, device=device)
    out = []
    for k, mult in enumerate(_MULTIPLIERS):
        salt = (seed * (2 * k + 3) + k) % PRIME
        w = ((index + salt) % PRIME * mult) % PRIME
        out.append((w * w + salt) % PRIME)  # squared: no linear relation between positions
    return out


def block_factor(block: int, seed: int, k: int) -> int:
    """B_k(block, seed): in [1, PRIME) (never 0: a block's change always shows)."""
    salt = (seed * (2 * k + 5) + 7 * k + 1) % PRIME
    w = (block + salt) % PRIME * _BLOCK_MULTIPLIERS[k] % PRIME
    return 1 + (w * w + salt) % (PRIME - 1)


def half_table(first: int, n: int, device: torch.device) -> torch.Tensor:
    """(2n, 4) float64: the weights of the int16 halves of block positions first..first+n-1 (low
    half then high, interleaved as the halves lie in memory), split in 16-bit halves: columns
    (sum 0 high, sum 0 low, sum 1 high, sum 1 low). A high half weighs 65536 * A_k mod PRIME.
    On the CPU built in passes below torch's parallel grain (row_sums says why)."""
    import torch

    out = torch.empty(2 * n, 4, dtype=torch.float64, device=device)
    step = n if device.type != "cpu" else CPU_TABLE_WORDS
    for a in range(0, n, step):
        b = min(n, a + step)
        for k, w in enumerate(weights(first + a, b - a, TABLE_SEED, device)):
            halves = torch.stack([w, (w * _HALF) % PRIME], 1).reshape(-1)
            out[2 * a:2 * b, 2 * k] = halves // _HALF
            out[2 * a:2 * b, 2 * k + 1] = halves % _HALF
    return out


_TABLES: Dict[str, torch.Tensor] = {}


def block_table(device: torch.device, n: int = BLOCK_WORDS) -> torch.Tensor:
    """half_table of at least the first n block positions (grown by doubling, at most a block),
    kept for the device: (2m, 4) float64, m <= BLOCK_WORDS."""
    key = str(device)
    table = _TABLES.get(key)
    if table is None or table.shape[0] < 2 * n:
        have = 0 if table is None else table.shape[0] // 2
        m = min(BLOCK_WORDS, max(n, 1024, 2 * have))
        import torch
        parts = [] if table is None else [table]
        parts.append(half_table(have, m - have, device))
        table = _TABLES[key] = torch.cat(parts) if len(parts) > 1 else parts[0]
    return table


def cached_tables() -> List[torch.Tensor]:
    """The tables block_table keeps: the harness's own, which an audit's inventory leaves out
    (else every forward would digest them, 16 MiB each: ~0.3 s a forward on the CPU)."""
    return list(_TABLES.values())


def row_sums(words: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """(rows, 4) float64, exact: each row of `words` ((rows, n) int32, n <= BLOCK_WORDS) against
    the table's first 2n rows (half_table's columns). combine() makes them the two sums."""
    import torch

    halves = words.contiguous().view(torch.int16)
    weights_ = table[:halves.shape[1]]
    if halves.device.type != "cpu":
        return halves.to(torch.float64) @ weights_
    # On the CPU, no BLAS and no pass above torch's parallel grain: MKL's and OpenMP's threads do
    # not survive a fork (a forked worker or judge whose parent multiplied hangs in the product)
    out = torch.zeros(halves.shape[0], 4, dtype=torch.float64)
    for r in range(halves.shape[0]):
        for a in range(0, halves.shape[1], CPU_GRAIN_HALVES):
            part = halves[r, a:a + CPU_GRAIN_HALVES].to(torch.float64)
            out[r] += (part[:, None] * weights_[a:a + CPU_GRAIN_HALVES]).sum(0)
    return out


def combine(row: List[float]) -> Tuple[int, int]:
    """A row of row_sums as the two sums (integers, not reduced)."""
    return (int(row[0]) * _HALF + int(row[1]), int(row[2]) * _HALF + int(row[3]))


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's logical contents (row-major) as a flat uint8 tensor: a view for a contiguous
    tensor, else one contiguous copy."""
    import torch

    flat = t.detach().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    return flat.contiguous().view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8,
                                                                                 device=t.device)


def as_words(raw: torch.Tensor) -> torch.Tensor:
    """A flat uint8 tensor as int32 words, the last zero-padded (a copy only where it is not
    word-aligned or whole)."""
    import torch

    n = raw.numel()
    if n % 4 or raw.storage_offset() % 4:  # int32 views need 4-byte alignment
        raw = torch.cat([raw, torch.zeros(-n % 4, dtype=torch.uint8, device=raw.device)])
    return raw.view(torch.int32)


def words_digest(raw: torch.Tensor, seed: int, first_word: int = 0) -> tuple[int, int]:
    """(a, b): the two sums over a flat uint8 tensor whose first word has index first_word (the
    last word zero-padded). Sums over pieces that start on word boundaries add up (mod PRIME) to
    the sum over the whole, whatever the chunking."""
    words = as_words(raw)
    table = block_table(raw.device, min(BLOCK_WORDS, first_word % BLOCK_WORDS + words.numel()))
    pieces: List[Tuple[int, torch.Tensor]] = []  # (first block, its row sums)
    lead = first_word % BLOCK_WORDS
    at = 0
    if lead and words.numel():  # a partial first block: its positions' rows of the table
        at = min(words.numel(), BLOCK_WORDS - lead)
        part = table[2 * lead:2 * (lead + at)]
        pieces.append((first_word // BLOCK_WORDS, row_sums(words[:at].view(1, -1), part)))
    step = max(1, CHUNK_WORDS // BLOCK_WORDS) * BLOCK_WORDS
    while at < words.numel():
        whole = min(words.numel() - at, step) // BLOCK_WORDS * BLOCK_WORDS
        count = whole or words.numel() - at  # whole blocks, else the last partial one
        rows = words[at:at + count].view(-1, min(count, BLOCK_WORDS))
        pieces.append(((first_word + at) // BLOCK_WORDS, row_sums(rows, table)))
        at += count
    total = [0, 0]
    for block, sums in pieces:
        for r, row in enumerate(sums.tolist()):
            for k, s in enumerate(combine(row)):
                total[k] = (total[k] + block_factor(block + r, seed, k) * s) % PRIME
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
