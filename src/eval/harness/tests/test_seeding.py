"""seed_everything (loading.py): the same draws as torch.manual_seed, and once CUDA is up without
seeding devices the process never uses (their lazy seeding formats a stack trace per call)."""

from __future__ import annotations

import random
from typing import Any, List

import pytest
import torch

from kforge_harness.loading import seed_everything


def draws() -> List[Any]:
    return [random.random(), torch.rand(3).tolist(), torch.randint(0, 1000, (2,)).tolist()]


def test_before_cuda_it_is_torchs_own_seeding() -> None:
    seed_everything(7)
    ours = draws()
    random.seed(7)
    torch.manual_seed(7)
    assert ours == draws()


def test_once_cuda_is_up_the_cpu_and_cuda_generators_are_seeded_and_nothing_else(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seeded: List[int] = []

    def unused_device(seed: int) -> None:
        raise AssertionError("a device this process never uses was seeded")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded.append)
    monkeypatch.setattr(torch.xpu, "manual_seed_all", unused_device)
    monkeypatch.setattr(torch.mtia, "manual_seed_all", unused_device)
    seed_everything(11)
    ours = draws()
    assert seeded == [11]
    monkeypatch.undo()
    random.seed(11)
    torch.manual_seed(11)
    assert ours == draws()
