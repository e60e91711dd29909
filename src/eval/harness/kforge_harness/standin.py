"""The stand-in forward of the timing calibration: what the worker does in a timed run with
the kernel's own work taken out. It runs before the kernel is imported (so the kernel
cannot change it) and makes the calibrated exchange cost include the host work every timed
run has around the kernel: a module call, fresh output tensors like the task's, one Triton
launch, the copy into the judge's slots and the description of the outputs. Without it a
kernel shorter than that host work (a 0.05 ms softmax) looked slower on the judge's clock
than its events said, and was flagged host_time_disagrees although honest."""

import triton
import triton.language as tl

from .tensors import tree_map


@triton.jit
def _touch(ptr, n):
    # One program that reads and writes back the first element: a real launch, no work.
    offs = tl.arange(0, 1)
    mask = offs < n
    tl.store(ptr + offs, tl.load(ptr + offs, mask=mask), mask=mask)


class StandIn:
    """Called like the kernel's model: returns outputs shaped like the judge's slots."""

    def __init__(self, slots):
        self.slots = slots

    def __call__(self, *inputs):
        import torch

        out = tree_map(lambda s: torch.empty_like(s) if isinstance(s, torch.Tensor) else s, self.slots)
        first = next((t for t in _tensors(out) if t.numel() > 0 and t.is_cuda), None)
        if first is not None:
            _touch[(1,)](first.view(-1), first.numel())
        return out


def _tensors(value):
    import torch

    found = []
    tree_map(lambda v: found.append(v) if isinstance(v, torch.Tensor) else None, value)
    return found
