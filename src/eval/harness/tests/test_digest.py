"""Digests the judge and the worker must agree on, and that see every change."""

from __future__ import annotations

import time

import torch

from kforge_harness.digest import CHUNK_WORDS, raw_bytes, tensor_digest, words_digest


def test_equal_contents_give_equal_digests_whatever_the_layout() -> None:
    x = torch.randn(64, 33)
    assert tensor_digest(x, 7) == tensor_digest(x.clone(), 7)
    assert tensor_digest(x.t().contiguous().t(), 7) == tensor_digest(x, 7)  # same logical values


def test_one_changed_bit_moved_or_swapped_words_change_the_digest() -> None:
    x = torch.randn(1000)
    base = tensor_digest(x, 3)
    y = x.clone()
    y.view(torch.int32)[500] ^= 1
    assert tensor_digest(y, 3) != base
    z = x.clone()
    z[[10, 20]] = z[[20, 10]]
    assert tensor_digest(z, 3) != base
    assert tensor_digest(x.roll(1), 3) != base


def test_dtype_shape_and_seed_are_part_of_it() -> None:
    x = torch.zeros(16)
    assert tensor_digest(x, 1) != tensor_digest(x.view(4, 4), 1)
    assert tensor_digest(x, 1) != tensor_digest(x.view(torch.int32), 1)
    assert tensor_digest(torch.randn(16), 1) != tensor_digest(torch.randn(16), 2)


def test_pieces_add_up_to_the_whole_and_odd_sizes_and_offsets_work() -> None:
    raw = raw_bytes(torch.randn(3 * CHUNK_WORDS // 2 + 3))  # more than a chunk, not whole words
    a, b = words_digest(raw, 9)
    cut = 4 * (CHUNK_WORDS // 3)
    p = words_digest(raw[:cut], 9)
    q = words_digest(raw[cut:], 9, first_word=cut // 4)
    assert ((p[0] + q[0]) % (2 ** 31 - 1), (p[1] + q[1]) % (2 ** 31 - 1)) == (a, b)
    odd = torch.arange(11, dtype=torch.uint8)[1:]  # storage offset 1: not word-aligned
    assert words_digest(odd, 1) == words_digest(odd.clone(), 1)


def test_bool_and_empty_tensors() -> None:
    assert tensor_digest(torch.tensor([True, False]), 1) != tensor_digest(torch.tensor([False, True]), 1)
    assert tensor_digest(torch.empty(0, 3), 1) == tensor_digest(torch.empty(0, 3), 1)


def test_same_bytes_sees_nan_payloads_and_one_changed_byte() -> None:
    from kforge_harness.digest import same_bytes

    x = torch.full((100,), float("nan"))
    assert same_bytes(x, x.clone())  # NaN != NaN as floats, equal as bytes
    y = x.clone()
    y.view(torch.uint8)[7] ^= 1
    assert not same_bytes(x, y)


def reference_digest(data: bytes, seed: int, first_word: int = 0) -> tuple[int, int]:
    """digest.py's docstring in Python integers, one word at a time: what the float64 products
    must equal exactly."""
    from kforge_harness.digest import BLOCK_WORDS, PRIME, TABLE_SEED, block_factor, weights

    data = data + bytes(-len(data) % 4)
    total = [0, 0]
    for w in range(len(data) // 4):
        lo = int.from_bytes(data[4 * w:4 * w + 2], "little", signed=True)
        hi = int.from_bytes(data[4 * w + 2:4 * w + 4], "little", signed=True)
        i = first_word + w
        for k, a in enumerate(weights(i % BLOCK_WORDS, 1, TABLE_SEED, torch.device("cpu"))):
            total[k] = (total[k] + (lo + 65536 * hi) * int(a) * block_factor(i // BLOCK_WORDS, seed, k)) % PRIME
    return total[0], total[1]


def test_the_products_are_the_word_by_word_sums_exactly() -> None:
    from kforge_harness.digest import BLOCK_WORDS

    g = torch.Generator().manual_seed(5)
    extremes = torch.tensor([-2 ** 31, 2 ** 31 - 1, -1, 0, 32767, -32768, 65535], dtype=torch.int32)
    raw = torch.cat([extremes.view(torch.uint8), torch.randint(0, 256, (4 * 997 + 3,), generator=g,
                                                                dtype=torch.uint8)])
    for first in (0, 5, BLOCK_WORDS - 3, 3 * BLOCK_WORDS + 11):  # block boundaries crossed, factors > 1
        assert words_digest(raw, 13, first) == reference_digest(bytes(raw.tolist()), 13, first), first


def test_a_block_s_worst_case_sum_stays_exact() -> None:
    # every half at -2^15 (the largest magnitude) over a whole block and more: the largest sums a
    # float64 product must hold exactly. Pieces that add up show a rounding the whole would hide.
    from kforge_harness.digest import BLOCK_WORDS, PRIME

    worst = torch.full((2 * BLOCK_WORDS + 6,), -32768, dtype=torch.int16).view(torch.uint8)
    whole = words_digest(worst, 4)
    halves = [words_digest(worst[:4 * 1000], 4), words_digest(worst[4 * 1000:], 4, 1000)]
    assert whole == tuple((x + y) % PRIME for x, y in zip(*halves))
    ones = torch.full((BLOCK_WORDS,), 1, dtype=torch.int32).view(torch.uint8)
    assert words_digest(ones, 2) == words_digest(ones.clone(), 2)
    assert words_digest(ones, 2) != words_digest(torch.zeros_like(ones), 2)


def test_a_change_in_a_late_block_and_a_swap_of_blocks_show() -> None:
    from kforge_harness.digest import BLOCK_WORDS

    x = torch.randn(3 * BLOCK_WORDS)
    base = tensor_digest(x, 8)
    y = x.clone()
    y.view(torch.int32)[2 * BLOCK_WORDS + 17] ^= 1 << 30
    assert tensor_digest(y, 8) != base
    z = torch.cat([x[BLOCK_WORDS:2 * BLOCK_WORDS], x[:BLOCK_WORDS], x[2 * BLOCK_WORDS:]])
    assert tensor_digest(z, 8) != base  # the same words in each block's positions, blocks swapped


def test_a_forked_child_digests_after_its_parent_did() -> None:
    # the worker and the judge are forked: a digest there must not wait on threads its parent
    # started (MKL's products did: the child hung), and must give the parent's numbers
    import os

    x = raw_bytes(torch.randn(300_000))
    parent = words_digest(x, 6)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        os._exit(0 if words_digest(x, 6) == parent else 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child's digest hung")
