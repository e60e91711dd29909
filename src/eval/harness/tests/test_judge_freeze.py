"""The judge's copy of the kernel's outputs at "done": what it compares, and the check that the
kernel's process wrote nothing into the slots afterwards."""

from __future__ import annotations

import pytest
import torch

from kforge_harness.judge import Frozen
from kforge_harness.protocol import KernelFailure


def test_slots_untouched_after_done_pass() -> None:
    slot = torch.randn(64)
    Frozen([slot.clone()], [(slot, slot.clone())]).check_unchanged()


def test_a_write_after_done_is_a_crash_even_of_one_nan_payload() -> None:
    slot = torch.full((64,), float("nan"))
    frozen = Frozen([slot.clone()], [(slot, slot.clone())])
    frozen.check_unchanged()  # NaN equals itself byte for byte
    slot.view(torch.int32)[5] += 1  # another NaN: the same as a float comparison sees it
    with pytest.raises(KernelFailure) as failure:
        frozen.check_unchanged()
    assert failure.value.category == "crash" and "after it reported its forward done" in failure.value.summary
