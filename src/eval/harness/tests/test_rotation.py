"""Rotated inputs: the values of a draw with every position moved, for tasks whose draw is too
slow to repeat per timed forward."""

from __future__ import annotations

import random
from typing import Any

import torch

from kforge_harness.loading import rotate_into


def test_rotation_keeps_the_values_and_moves_every_position() -> None:
    source: list[Any] = [torch.arange(1000, dtype=torch.float32).reshape(10, 100), torch.tensor([7.0]), 3]
    buffers: list[Any] = [torch.zeros(10, 100), torch.zeros(1), 3]
    rotate_into(buffers, source, random.Random(5))
    assert torch.equal(buffers[0].flatten().sort().values, source[0].flatten())
    assert not torch.equal(buffers[0], source[0]), "a rotation by at least one position"
    offset = int(buffers[0].flatten()[0].item())
    assert torch.equal(buffers[0].flatten(), torch.roll(source[0].flatten(), -offset))
    assert buffers[1].item() == 7.0, "a single value is copied as is"


def test_rotation_into_a_strided_buffer() -> None:
    source = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    target = torch.zeros(4, 3).t()
    rotate_into(target, source, random.Random(1))
    assert torch.equal(target.reshape(-1).sort().values, source.reshape(-1))
    assert not torch.equal(target, source)
