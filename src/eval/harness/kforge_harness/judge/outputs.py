"""The kernel's outputs as the judge reads them: from its own slots where they fit
(`kernel_outputs`), copied into the judge's memory at "done" (`freeze`, `Frozen`)."""

from __future__ import annotations

from typing import Any, Optional

from ..protocol import KernelFailure
from ..tensors import Placeholder, flatten_outputs, rebuild, tree_map


def kernel_outputs(done: dict[str, Any], slots: Any) -> Any:
    """The kernel's outputs as the judge sees them: tensors read from the judge's own slots
    where the worker's description says they fit, metadata-only stand-ins where not (shape
    and dtype are then what the comparison reports)."""
    import torch

    try:
        tree = rebuild(done.get("outputs"))
    except ValueError as e:
        raise KernelFailure("crash", "the kernel's process described its outputs malformedly: %s" % e)
    by_path = dict(flatten_outputs(slots))

    def resolve(path: str, value: Any) -> Any:
        if isinstance(value, Placeholder):
            slot = by_path.get(path)
            if value.kind == "tensor":
                if done.get("copied") and isinstance(slot, torch.Tensor) and tuple(slot.shape) == value.shape \
                        and str(slot.dtype).replace("torch.", "") == value.dtype:
                    return slot
                if value.shape is None or value.dtype is None:
                    return UnsupportedOutput(value.dtype)
                try:
                    return torch.empty(value.shape, dtype=getattr(torch, value.dtype), device="meta")
                except (AttributeError, TypeError, RuntimeError):
                    return UnsupportedOutput(value.dtype)
            return UnsupportedOutput(value.name)
        return value

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, (list, tuple)):
            items = [walk(v, "%s[%d]" % (path, i)) for i, v in enumerate(value)]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {k: walk(v, "%s[%r]" % (path, k)) for k, v in value.items()}
        return resolve(path, value)

    return walk(tree, "out")


class Frozen:
    """The kernel's outputs copied out of the slots at "done" (values), and the (slot, copy)
    pairs to check that the slots were not written afterwards."""

    def __init__(self, values: Any, pairs: list[tuple[Any, Any]]) -> None:
        self.values = values
        self.pairs = pairs

    def check_unchanged(self) -> None:
        from ..digest import same_bytes

        for slot, frozen in self.pairs:
            if not same_bytes(slot, frozen):
                raise KernelFailure("crash", "the kernel's process wrote its outputs after it reported its forward "
                                    "done (a thread or process it left running): the judge compares what was "
                                    "there at \"done\"", details={"late_write": True})


class UnsupportedOutput:
    def __init__(self, name: Optional[str]) -> None:
        self.name = name

    def __repr__(self) -> str:
        return "an object of type %s" % self.name


def freeze(done: Any, slots: Any, taken: Optional[list[tuple[Any, Any]]] = None) -> Frozen:
    """The kernel's outputs as the judge compares them: a copy of each slot, into the
    judge's own memory, which the worker cannot write (a thread it left running can still
    write the slots): taken now, or the [(slot, copy)] pairs `taken` earlier (a timed
    run's snapshot at its close), of `slots`. Returns a tree of frozen values (stand-ins
    where the outputs did not fit the slots) and the pairs."""
    import torch

    earlier = {id(slot): copy for slot, copy in taken or ()}
    pairs: list[tuple[Any, Any]] = []

    def copy(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.device.type != "meta":
            frozen = earlier[id(v)] if taken is not None else v.clone()
            pairs.append((v, frozen))
            return frozen
        return v

    return Frozen(tree_map(copy, kernel_outputs(done, slots)), pairs)
