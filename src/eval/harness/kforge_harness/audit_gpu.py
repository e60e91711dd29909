"""The GPU time split of one plain forward (gpu_time), and the dispatch-mode helpers the audit's
mode shares with it (custom_implementation; no_dynamo is dispatch_modes.py's)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .audit_vocab import GPU_CLASSES, MAX_KERNELS, MAX_NAME, op_kind
from .dispatch_modes import no_dynamo


# Namespaces of PyTorch's own operators; an operator of any other one was registered by the kernel.
BUILTIN_NAMESPACES = frozenset({"aten", "prims", "_c10d_functional", "c10d_functional", "_c10d", "c10d", "profiler",
                                "_quantized", "quantized", "rngprims", "debugprims", "fbgemm", "_test"})


def custom_implementation(func: Any) -> Optional[Callable[..., Any]]:
    """The Python implementation of an operator the kernel registered with torch.library
    (triton_op, custom_op), to run inside the dispatch mode instead of the operator: its
    own PyTorch ops and Triton launches are then audited like the rest of the forward,
    where the operator as a whole would be one opaque PyTorch op. None for PyTorch's own
    operators and for operators without a Python implementation."""
    namespace = getattr(func, "namespace", "aten")
    if namespace in BUILTIN_NAMESPACES:
        return None
    try:
        from torch._library.custom_ops import OPDEFS
    except ImportError:
        return None
    definition = OPDEFS.get(func._schema.name)
    return getattr(definition, "_init_fn", None)


def gpu_time(model: Callable[..., Any], inputs: Sequence[Any], triton_names: Iterable[str]) -> Dict[str, Any]:
    """GPU time per kernel class over one plain forward (the judge gives it fresh inputs, so
    a memoizing kernel cannot answer it from a cache), or why it could not be measured.

    CUDA events bracket every Triton launch and every PyTorch operator on the current
    stream: no profiler (CUPTI took ~6 s to start in every fresh worker, twelve times the
    whole evaluation's overhead budget), and the same classes as the profiler's kernel names
    would give. Work put on another stream is not seen here; the judge's clock catches it."""
    try:
        import torch
        import triton.runtime.jit as jit
        from torch.utils._python_dispatch import TorchDispatchMode

        spans: List[Tuple[str, str, Any, Any]] = []  # (name, class, start event, end event)

        def bracket(name: str, cls: str, call: Callable[[], Any]) -> Any:
            # torch.cuda.Event and TorchDispatchMode's __init_subclass__ and __init__ are unannotated
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            try:
                return call()
            finally:
                end.record()
                if len(spans) < 100000:
                    spans.append((name, cls, start, end))

        class Timer(TorchDispatchMode):  # type: ignore[no-untyped-call]
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return no_dynamo()

            def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (),
                                   kwargs: Optional[Dict[str, Any]] = None) -> Any:
                implementation = custom_implementation(func)
                if implementation is not None:
                    with self:
                        return implementation(*args, **(kwargs or {}))
                name = func.overloadpacket.__name__
                kind = op_kind(name)
                if kind in ("alloc", "view"):
                    return func(*args, **(kwargs or {}))
                cls = {"library": "library", "copy": "copy"}.get(kind, "aten")
                return bracket(name, cls, lambda: func(*args, **(kwargs or {})))

        original = jit.JITFunction.run

        def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("warmup"):
                return original(fn, *args, **kwargs)
            name = str(getattr(getattr(fn, "fn", None), "__name__", "triton"))[:MAX_NAME]
            return bracket(name, "triton", lambda: original(fn, *args, **kwargs))

        own = "run" in jit.JITFunction.__dict__
        torch.cuda.synchronize()
        jit.JITFunction.run = run
        try:
            with torch.no_grad(), Timer():  # type: ignore[no-untyped-call]
                model(*inputs)
        finally:
            if own:
                jit.JITFunction.run = original
            else:
                del jit.JITFunction.run
        torch.cuda.synchronize()
        kernels: Dict[Tuple[str, str], List[Any]] = {}
        for name, cls, start, end in spans:
            entry = kernels.setdefault((name, cls), [0.0, 0])
            entry[0] += 1000.0 * start.elapsed_time(end)
            entry[1] += 1
        total = sum(us for us, _ in kernels.values())
        if not total > 0:
            return {"measured": False, "reason": "no GPU work was recorded on the current stream"}
        shares, listed = dict.fromkeys(GPU_CLASSES, 0.0), []
        for (name, cls), (us, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0]):
            shares[cls] += us / total
            listed.append({"name": name[:MAX_NAME], "class": cls, "us": us, "count": count})
        return {"measured": True, "total_us": total, "shares": shares, "kernels": listed[:MAX_KERNELS]}
    except Exception as exc:  # noqa: BLE001 -- the GPU split is optional: say why it is missing
        return {"measured": False, "reason": ("%s: %s" % (type(exc).__name__, exc))[:MAX_NAME]}
