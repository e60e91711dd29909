"""Nested inputs and outputs: mapping over trees of tensors, flattening them with paths,
and describing them in JSON (what a worker may say about its outputs)."""

SCALAR_TYPES = (int, float, bool, str, type(None))


def tree_map(fn, value, leaf=None):
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


def tree_map_pairs(fn, a, b):
    """Calls fn(x, y) on each pair of leaves of two trees of the same structure (a's)."""
    if isinstance(a, (list, tuple)):
        for x, y in zip(a, b):
            tree_map_pairs(fn, x, y)
    elif isinstance(a, dict):
        for k in a:
            tree_map_pairs(fn, a[k], b[k])
    else:
        fn(a, b)


def to_device(value, device):
    import torch

    return tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, value)


def clone_tree(value):
    import torch

    return tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, value)


def signed_like(value):
    """Standard-normal values for floating tensors; integer and bool inputs unchanged."""
    import torch

    def convert(v):
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return torch.randn(v.shape, dtype=v.dtype, device=v.device)
        return v

    return tree_map(convert, value)


def flatten_outputs(value, path="out"):
    if isinstance(value, (list, tuple)):
        items = []
        for i, v in enumerate(value):
            items.extend(flatten_outputs(v, "%s[%d]" % (path, i)))
        return items or [(path, value)]
    if isinstance(value, dict):
        items = []
        for k in sorted(value, key=str):
            items.extend(flatten_outputs(value[k], "%s[%r]" % (path, k)))
        return items or [(path, value)]
    return [(path, value)]


def storage_key(t):
    """What every tensor on one storage shares (its device and address); a tensor without a
    storage of its own (a wrapper subclass) is its own key."""
    try:
        return (t.device.type, t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return ("tensor", id(t))


def storage_bytes(t):
    """Bytes of the storage behind `t` (its own elements' where it has none)."""
    try:
        return t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return t.numel() * t.element_size()


def model_tensors(model):
    """A torch module's parameters and buffers; none for anything else."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return []
    return list(model.parameters()) + list(model.buffers())


def structure(value):
    if isinstance(value, (list, tuple)):
        return "%s of %d" % (type(value).__name__, len(value))
    if isinstance(value, dict):
        return "dict with keys %s" % sorted(map(str, value))
    return type(value).__name__


def describe_shape(t):
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


# -- JSON descriptions ---------------------------------------------------------------------
# {"tensor": {"shape": [...], "dtype": "float32"}} | {"value": scalar} | {"list": [...]} |
# {"tuple": [...]} | {"dict": [[key, desc], ...]} | {"object": "TypeName"}

MAX_DESCRIPTION_NODES = 10000


def describe(value):
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

    def __init__(self, kind, shape=None, dtype=None, name=None):
        self.kind, self.shape, self.dtype, self.name = kind, shape, dtype, name


def rebuild(desc, budget=None):
    """The tree a description stands for, with Placeholder leaves; validates it (the worker
    is untrusted): raises ValueError on anything malformed or too large."""
    budget = budget if budget is not None else [MAX_DESCRIPTION_NODES]
    budget[0] -= 1
    if budget[0] < 0 or not isinstance(desc, dict) or len(desc) != 1:
        raise ValueError("malformed output description")
    (kind, body), = desc.items()
    if kind == "tensor":
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
        items = [rebuild(d, budget) for d in body]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2 for p in body):
            raise ValueError("malformed dict")
        return {k: rebuild(d, budget) for k, d in body}
    if kind == "object":
        return Placeholder("object", name=str(body)[:100])
    raise ValueError("unknown description kind %r" % kind)
