"""Digests the judge and the worker must agree on, and that see every change."""

from __future__ import annotations

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
