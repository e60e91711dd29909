"""Lent memory on the CPU: anonymous memory files passed as descriptors, never a path."""

from __future__ import annotations

import os

import torch

from kforge_harness.exchange import Borrower, Lender


def test_a_lend_is_one_memory_file_both_sides_see() -> None:
    lender = Lender("memfd", "cpu")
    tree = [torch.empty(3, 5), {"k": torch.empty(7, dtype=torch.int64)}, 4, torch.empty(0)]
    tensors, descriptors, fds = lender.like(tree)
    assert len(fds) == 1 and descriptors[2] == {"value": 4}
    assert all("path" not in d for d in (descriptors[0], descriptors[1]["k"]))
    link = os.readlink("/proc/self/fd/%d" % fds[0])
    assert link.startswith("/memfd:"), link  # no name in any directory
    borrower = Borrower("cpu")
    attached = borrower.attach_tree(descriptors, borrower.map_fds([os.dup(fds[0])]))
    os.close(fds[0])
    tensors[0].copy_(torch.arange(15.0).view(3, 5))
    assert torch.equal(attached[0], tensors[0])  # the judge writes, the worker sees
    attached[1]["k"].fill_(9)
    assert tensors[1]["k"].tolist() == [9] * 7  # and back
    assert attached[2] == 4 and attached[3].numel() == 0
    lender.close()


def test_buffers_of_one_lend_do_not_overlap_and_keep_their_alignment() -> None:
    lender = Lender("memfd", "cpu")
    tensors, descriptors, fds = lender.lend([((3,), torch.uint8), ((2,), torch.complex128), ((5,), torch.float16)])
    offsets = [d["offset"] for d in descriptors]
    assert offsets == sorted(offsets) and all(o % 64 == 0 for o in offsets)
    for t in tensors:
        t.view(torch.uint8).fill_(0xAB)
    assert tensors[1].view(torch.uint8).tolist() == [0xAB] * 32
    for fd in fds:
        os.close(fd)


def test_a_descriptor_that_points_outside_its_memory_file_is_refused() -> None:
    import pytest

    lender = Lender("memfd", "cpu")
    _, descriptors, fds = lender.lend([((4,), torch.float32)])
    borrower = Borrower("cpu")
    mappings = borrower.map_fds(fds)
    bad = dict(descriptors[0], offset=len(mappings[0]))
    with pytest.raises(ValueError):
        borrower.attach(bad, mappings)
