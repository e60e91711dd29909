"""Nested inputs and outputs: mapping over trees of tensors, flattening them with paths,
and describing them in JSON (what a worker may say about its outputs).

A tree is nested lists, tuples and dicts of anything (tensors, scalars, other objects): its
type is `Any`, since a task's inputs and a model's outputs may be any of these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

if TYPE_CHECKING:
    import torch

SCALAR_TYPES = (int, float, bool, str, type(None))


def tree_map(fn: Callable[[Any], Any], value: Any, leaf: Optional[Callable[[Any], bool]] = None) -> Any:
    """Applies fn to every leaf of nested lists, tuples and dicts. `leaf(v)` may declare
    a dict to be a leaf (descriptors are dicts)."""
    if leaf is not None and leaf(value):
        return fn(value)
    if isinstance(value, (list, tuple)):
        mapped = [tree_map(fn, v, leaf) for v in value]
        return mapped if isinstance(value, list) else tuple(mapped)
    if isinstance(value, dict):
        return {k: tree_map(fn, v, leaf) for k, v in value.items()}
    return fn(value)


def tree_map_pairs(fn: Callable[[Any, Any], object], a: Any, b: Any) -> None:
    """Calls fn(x, y) on each pair of leaves of two trees of the same structure (a's)."""
    if isinstance(a, (list, tuple)):
        for x, y in zip(a, b):
            tree_map_pairs(fn, x, y)
    elif isinstance(a, dict):
        for k in a:
            tree_map_pairs(fn, a[k], b[k])
    else:
        fn(a, b)


def to_device(value: Any, device: str | torch.device) -> Any:
    import torch

    return tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, value)


def clone_tree(value: Any) -> Any:
    import torch

    return tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, value)


def signed_like(value: Any) -> Any:
    """Standard-normal values for floating tensors; integer and bool inputs unchanged."""
    import torch

    def convert(v: object) -> object:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return torch.randn(v.shape, dtype=v.dtype, device=v.device)
        return v

    return tree_map(convert, value)


def flatten_outputs(value: Any, path: str = "out") -> list[tuple[str, Any]]:
    if isinstance(value, (list, tuple)):
        items: list[tuple[str, Any]] = []
        for i, v in enumerate(value):
            items.extend(flatten_outputs(v, "%s[%d]" % (path, i)))
        return items or [(path, value)]
    if isinstance(value, dict):
        items = []
        for k in sorted(value, key=str):
            items.extend(flatten_outputs(value[k], "%s[%r]" % (path, k)))
        return items or [(path, value)]
    return [(path, value)]


def storage_key(t: torch.Tensor) -> tuple[str, int]:
    """What every tensor on one storage shares (its device and address); a tensor without a
    storage of its own (a wrapper subclass) is its own key."""
    try:
        return (t.device.type, t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return ("tensor", id(t))


def storage_bytes(t: torch.Tensor) -> int:
    """Bytes of the storage behind `t` (its own elements' where it has none)."""
    try:
        return t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return t.numel() * t.element_size()


def model_tensors(model: object) -> list[torch.Tensor]:
    """A torch module's parameters and buffers; none for anything else."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return []
    return list(model.parameters()) + list(model.buffers())


def structure(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return "%s of %d" % (type(value).__name__, len(value))
    if isinstance(value, dict):
        return "dict with keys %s" % sorted(map(str, value))
    return type(value).__name__


def describe_shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


# -- JSON descriptions ---------------------------------------------------------------------
# {"tensor": {"shape": [...], "dtype": "float32"}} | {"value": scalar} | {"list": [...]} |
# {"tuple": [...]} | {"dict": [[key, desc], ...]} | {"object": "TypeName"}

MAX_DESCRIPTION_NODES = 10000
MAX_DESCRIPTION_DEPTH = 100  # far beyond any honest output; well within the judge's stack

# A description (JSON, as above).
Description = Dict[str, Any]


def describe(value: object) -> Description:
    """What a tree of outputs is, without its data (sent by the worker)."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": {"shape": [int(s) for s in value.shape], "dtype": str(value.dtype).replace("torch.", "")}}
    if isinstance(value, SCALAR_TYPES):
        return {"value": value}
    if isinstance(value, list):
        return {"list": [describe(v) for v in value]}
    if isinstance(value, tuple):
        return {"tuple": [describe(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, (str, int)) for k in value):
        return {"dict": [[k, describe(v)] for k, v in value.items()]}
    return {"object": type(value).__name__}


class Placeholder:
    """A leaf of a rebuilt description: a tensor whose data is in a buffer, or an object
    the worker could not send. Compared by shape and dtype before any data is read."""

    def __init__(self, kind: str, shape: Optional[tuple[int, ...]] = None, dtype: Optional[str] = None,
                 name: Optional[str] = None) -> None:
        self.kind, self.shape, self.dtype, self.name = kind, shape, dtype, name


def rebuild(desc: object, budget: Optional[list[int]] = None, depth: int = 0) -> Any:
    """The tree a description stands for, with Placeholder leaves; validates it (the worker
    is untrusted): raises ValueError, and nothing else, on anything malformed, too large or
    too deeply nested."""
    budget = budget if budget is not None else [MAX_DESCRIPTION_NODES]
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DESCRIPTION_DEPTH or not isinstance(desc, dict) or len(desc) != 1:
        raise ValueError("malformed output description")
    (kind, body), = desc.items()
    if kind == "tensor":
        if not isinstance(body, dict):
            raise ValueError("malformed tensor description")
        shape, dtype = body.get("shape"), body.get("dtype")
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)
                and isinstance(dtype, str) and len(dtype) < 32):
            raise ValueError("malformed tensor description")
        return Placeholder("tensor", tuple(shape), dtype)
    if kind == "value":
        if not isinstance(body, SCALAR_TYPES) or (isinstance(body, str) and len(body) > 10000):
            raise ValueError("malformed scalar")
        return body
    if kind in ("list", "tuple"):
        if not isinstance(body, list):
            raise ValueError("malformed sequence")
        items = [rebuild(d, budget, depth + 1) for d in body]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2
                                                 and isinstance(p[0], (str, int)) for p in body):
            raise ValueError("malformed dict")
        return {k: rebuild(d, budget, depth + 1) for k, d in body}
    if kind == "object":
        return Placeholder("object", name=str(body)[:100])
    raise ValueError("unknown description kind %r" % kind)
