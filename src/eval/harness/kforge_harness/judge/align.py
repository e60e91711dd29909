"""The reference's parameters into a loaded model's (by alignment.py's plan), through memory
lent for the purpose: the kernel's model, and each trusted timing process's."""

from __future__ import annotations

from typing import Any

from .. import messages
from ..alignment import plan_alignment
from ..device import sync
from ..protocol import KernelFailure
from .context import Run


def align(run: Run, ref: Any, loaded: Any, link: Any, lender: Any, report: bool = True) -> None:
    """Sets the parameters `loaded` (the process's "loaded" answer) describes from `ref`'s
    state; `report`: the alignment goes into the result (the kernel's, not a timing
    process's)."""
    import torch

    if not (loaded.get("module") and isinstance(ref, torch.nn.Module)):
        return
    state = loaded.get("state")
    if not isinstance(state, list) or len(state) > 100000:
        raise KernelFailure("crash", "the kernel's process described its parameters malformedly")
    ref_state = ref.state_dict()
    plan, alignment = plan_alignment(
        [(n, list(t.shape), str(t.dtype).replace("torch.", "")) for n, t in ref_state.items()], state)
    if report:
        run.result["alignment"] = alignment
    if not plan:
        return
    shapes = [(ref_state[r].shape, ref_state[r].dtype) for r, _ in plan]
    buffers, descriptors, fds = lender.lend(shapes)
    with torch.no_grad():
        for buffer, (ref_name, _) in zip(buffers, plan):
            buffer.copy_(ref_state[ref_name])
    sync(run.device)
    assign = [[new, desc] for (_, new), desc in zip(plan, descriptors)]
    link.call(messages.Params(op="params", assign=assign), "params_set", fds)
