"""What every TorchDispatchMode of the harness shares (the worker's audit and GPU timer, the
judge's work counter, the oracle's narrowing watch and sequential twin).

`torch.utils._python_dispatch.TorchDispatchMode.__init_subclass__` wraps a subclass's
`__torch_dispatch__` in `torch._disable_dynamo` unless the class's `_should_skip_dynamo`
says False; that wrapper's first call imports torch._dynamo and inductor: 1.3-3.3 s on the
CPU and 3-6 s in a fresh GPU process, paid by every judge and worker forked for an
evaluation (they are forked from zygotes that never import dynamo, see zygote.py). Nothing
is compiled under the harness's modes, so none of them needs the wrapper."""

from __future__ import annotations


def no_dynamo() -> bool:
    """The `_should_skip_dynamo` of every dispatch mode of the harness: False (the override
    TorchDispatchMode._should_skip_dynamo documents)."""
    return False
