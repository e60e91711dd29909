"""Triton's launchers, built ahead: the C glue Triton (3.x before its generic launcher) compiles
with gcc for each kernel signature the first time a kernel of that signature launches in a
process: ~0.25 s of a fresh worker's first forward on an H200 (docs/benchmarks.md). A session's
candidates mostly share their signatures (the same pointers and sizes, other code), so the
worker started ahead for the next candidate builds the launchers of the last candidates'
kernels in its rehearsal (rehearsal.py), and the kernel's first launch finds them in this
process's own Triton cache.

Where a spec comes from: the audited launches of an earlier candidate (compiled.Launches), told
by its worker, passed on by its judge and kept by the server for the task and device
(cachekeeper.Keeper). Every one of those processes ran untrusted code, so a spec is data
only, checked here against Triton's own vocabulary of argument types before anything is made
of it: the launcher is the one Triton's `make_launcher` writes for those types, built by this
process before its kernel is known, in its own cache. No byte of a spec reaches the C source
(Triton maps each type to a C type through its fixed tables), and nothing a kernel planted in
its own cache reaches another worker: each worker's cache is its own.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

# At most this many specs are kept and built (the most recent first), each of at most MAX_ARGS.
MAX_SPECS = 4
MAX_ARGS = 64
# Triton's argument types: pointers (`*`, `*k` for const) to, or scalars of, these; constexprs.
_SCALAR = r"(i1|i8|i16|i32|i64|u1|u8|u16|u32|u64|fp8e4nv|fp8e5|fp8e4b15|fp8e4b8|fp8e5b16|fp16|bf16|fp32|f32|fp64)"
_TYPE = re.compile(r"\A(\*k?%s|%s|constexpr)\Z" % (_SCALAR, _SCALAR))
Spec = Dict[str, Any]


def valid_type(value: Any, depth: int = 0) -> bool:
    """A Triton argument type: a name of the vocabulary, or a tuple argument's list of them."""
    if isinstance(value, str):
        return bool(_TYPE.match(value))
    return isinstance(value, list) and depth < 2 and 0 < len(value) <= MAX_ARGS and \
        all(valid_type(v, depth + 1) for v in value)


def valid(spec: Any) -> bool:
    """{"signature": [type, ...]}: nothing else, within the limits."""
    if not isinstance(spec, dict) or set(spec) != {"signature"}:
        return False
    signature = spec["signature"]
    return isinstance(signature, list) and len(signature) <= MAX_ARGS and all(valid_type(t) for t in signature)


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def spec_of(compiled_kernel: Any) -> Optional[Spec]:
    """The spec of a compiled kernel's launcher (its source's signature, as Triton's
    CudaLauncher reads it), or None: not a GPU compile, a tensor descriptor among its
    arguments (their launcher depends on more than the types), or a type outside the vocabulary."""
    source = getattr(compiled_kernel, "src", None)
    signature = getattr(source, "signature", None)
    if not isinstance(signature, dict):
        return None
    if getattr(getattr(compiled_kernel, "metadata", None), "tensordesc_meta", None):
        return None
    spec = {"signature": [_plain(t) for t in signature.values()]}
    return spec if valid(spec) else None


def merged(newer: List[Any], older: List[Any]) -> List[Spec]:
    """The valid specs of `newer` then `older`, each once, at most MAX_SPECS."""
    out: List[Spec] = []
    for spec in list(newer) + list(older):
        if valid(spec) and spec not in out:
            out.append(spec)
    return out[:MAX_SPECS]


def build(specs: List[Any]) -> Dict[str, Any]:
    """Builds each valid spec's launcher as Triton's CudaLauncher would (same source, same
    cache entry), where this Triton compiles launchers at all. Returns {"built", "error"};
    never raises."""
    built = 0
    try:
        from triton.backends.nvidia import driver
    except Exception as e:  # noqa: BLE001 -- no NVIDIA backend: nothing to build
        return {"built": 0, "error": "%s: %s" % (type(e).__name__, str(e)[:200])}
    make = getattr(driver, "make_launcher", None)
    compile_module = getattr(driver, "compile_module_from_src", None)
    if make is None or compile_module is None:
        return {"built": 0, "error": None}  # a generic launcher: nothing is compiled per signature
    try:
        for spec in merged(specs, []):
            signature = {i: tuple(t) if isinstance(t, list) else t for i, t in enumerate(spec["signature"])}
            source = make({}, signature, None)
            compile_module(src=source, name="__triton_launcher", library_dirs=driver.library_dirs(),
                           include_dirs=driver.include_dirs, libraries=driver.libraries)
            built += 1
    except Exception as e:  # noqa: BLE001 -- a launcher not built is built at the kernel's launch
        return {"built": built, "error": "%s: %s" % (type(e).__name__, str(e)[:200])}
    return {"built": built, "error": None}


class Kept:
    """The server's specs per task and device (the most recent first), for this server's life."""

    def __init__(self) -> None:
        self.specs: Dict[str, List[Spec]] = {}

    def get(self, key: str) -> List[Spec]:
        return list(self.specs.get(key, []))

    def keep(self, key: str, specs: Any) -> None:
        if not isinstance(specs, list) or len(specs) > MAX_SPECS or not all(valid(s) for s in specs):
            raise ValueError("launcher specs are a list of at most %d {\"signature\": [type, ...]}" % MAX_SPECS)
        self.specs[key] = merged(specs, self.specs.get(key, []))
