"""compiled.py: the launched kernels' compiled code, read on the CPU by compiling each launch up
to TTIR for a CUDA target in a fresh process (issue 34, item 8)."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from types import ModuleType
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # the worker's CPU setting, before triton

import torch  # noqa: E402
import triton  # noqa: E402,F401

from kforge_harness import compiled, precision  # noqa: E402

KERNEL = '''"""A kernel whose dot precision and half path the host picks at run time."""
import torch
import triton
import triton.language as tl

LOW = tl.float16
SCALE = tl.constexpr(2.0)


def pick(k):
    return "tf32" if k >= 16 else "ieee"


@triton.jit
def helper(x):
    return x.to(LOW)


@triton.autotune(configs=[triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def gemm(a_ptr, c_ptr, n, BLOCK: tl.constexpr, PRECISION: tl.constexpr = "ieee", HALF: tl.constexpr = False):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    if HALF:
        a = helper(a).to(tl.float32)
    c = tl.dot(a, a, input_precision=PRECISION) * SCALE
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], c)
'''


def load(source: str) -> tuple[ModuleType, str]:
    path = os.path.join(tempfile.mkdtemp(prefix="compiled-"), "kernel.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("kforge_compiled_kernel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kforge_compiled_kernel"] = module
    spec.loader.exec_module(module)
    return module, os.path.dirname(path)


def test_the_jit_functions_alone_keep_their_lines() -> None:
    text = compiled.jit_module(KERNEL)
    original, alone = KERNEL.splitlines(), text.splitlines()
    assert len(alone) == len(original)
    for n, line in enumerate(alone):
        assert not line or line == original[n] or line.strip() in ("@triton.jit", "import triton"), (n, line)
    assert "def pick" not in text and "autotune" not in text and "import torch" not in text
    assert "LOW = tl.float16" in text and "SCALE = tl.constexpr(2.0)" in text and "def helper" in text


def launched(half: bool) -> tuple[compiled.Launches, str]:
    """The keys of one launch of the kernel (through autotune) under the audit's note."""
    module: Any
    module, workdir = load(KERNEL)
    launches = compiled.Launches()
    import triton.runtime.interpreter as interpreter

    original = interpreter.InterpretedFunction.run

    def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(fn, *args, **kwargs)
        launches.note(fn, args, kwargs, result)
        return result

    interpreter.InterpretedFunction.run = run
    try:
        a, c = torch.randn(32, 32), torch.empty(32, 32)
        module.gemm[(1,)](a, c, 32, PRECISION=module.pick(32), HALF=half)
    finally:
        interpreter.InterpretedFunction.run = original
    return launches, workdir


def test_a_launch_is_noted_with_its_types_and_constexprs() -> None:
    launches, _ = launched(False)
    (key,) = launches.keys.values()
    assert key["kernel"] == "gemm"
    assert key["signature"] == {"a_ptr": "*fp32", "c_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr",
                                "PRECISION": "constexpr", "HALF": "constexpr"}
    assert key["constexprs"] == {"BLOCK": 32, "PRECISION": "tf32", "HALF": False}, "autotune's choice included"


def test_what_ran_is_read_from_the_code_compiled_on_the_cpu() -> None:
    for half in (False, True):
        launches, workdir = launched(half)
        reading = compiled.read(launches, KERNEL, workdir, gpu=False)
        assert not reading["errors"], reading
        found, how = precision.with_compiled([], reading)
        assert how["read"] == "compiled", how
        kinds = {(f["category"], f["line"]) for f in found}
        assert (precision.TF32_DOT, 26) in kinds, found
        assert ((precision.LOW_PRECISION_CAST, 16) in kinds) == half, found  # the helper's line


def test_a_kernel_that_does_not_compile_alone_falls_back_with_a_reason() -> None:
    source = KERNEL.replace("SCALE = tl.constexpr(2.0)", "SCALE = tl.constexpr(pick(3) and 2.0)")  # a constant that needs a host function
    launches, workdir = launched(False)
    reading = compiled.read(launches, source, workdir, gpu=False)
    found, how = precision.with_compiled([], reading)
    assert how["read"] == "source" and "SCALE" in how["why"], how


def test_only_constants_reach_the_compilers_process() -> None:
    """A module constant that calls something beyond the kept names and a few builtins stays
    out: the compiler's process runs the kernel's jit functions and constants, nothing else."""
    text = compiled.jit_module(KERNEL + "\nHOST = __import__('os').getpid()\nN = max(2, 3)\n")
    assert "HOST" not in text and "N = max(2, 3)" in text


def test_a_gpu_launch_without_its_compiled_kernel_is_said() -> None:
    launches = compiled.Launches()
    launches.keys["k"] = {"kernel": "gemm", "signature": {}, "constexprs": {}}
    reading = compiled.read(launches, KERNEL, tempfile.mkdtemp(), gpu=True)
    assert reading["kernels"] == [{"kernel": "gemm", "ttir": None, "ptx": None,
                                   "error": "its launch returned no compiled kernel"}]
    assert precision.with_compiled([], reading)[1]["read"] == "source"


def test_a_reading_started_early_gives_what_a_fresh_one_gives() -> None:
    """The worker starts the CPU's reading after an audited forward (compiled.start) and the
    judge collects it later: the same findings as a reading made on the spot."""
    launches, workdir = launched(False)
    pending = compiled.start(launches, KERNEL, workdir, gpu=False)
    assert pending is not None and pending.keys == frozenset(launches.keys)
    assert compiled.start(launches, KERNEL, workdir, gpu=False, pending=pending) is pending, "same launches: kept"
    early = compiled.read(launches, KERNEL, workdir, gpu=False, pending=pending)
    assert pending.process.returncode == 0, "its answer was collected"
    fresh = compiled.read(launches, KERNEL, workdir, gpu=False)
    assert not early["errors"] and early["kernels"] == fresh["kernels"], (early, fresh)


def test_an_early_reading_of_other_launches_is_replaced() -> None:
    """Launches noted after the reading started (another trial's sizes): it is cancelled and
    the reading covers every launch, never the stale set alone."""
    first, workdir = launched(False)
    pending = compiled.start(first, KERNEL, workdir, gpu=False)
    assert pending is not None
    both, _ = launched(True)
    for text, key in first.keys.items():
        both.keys[text] = key
    assert len(both.keys) == 2
    reading = compiled.read(both, KERNEL, workdir, gpu=False, pending=pending)
    assert pending.process.returncode is not None and pending.process.returncode != 0, "the stale one was killed"
    found, how = precision.with_compiled([], reading)
    assert how["read"] == "compiled", how
    assert (precision.LOW_PRECISION_CAST, 16) in {(f["category"], f["line"]) for f in found}, found


def test_nothing_is_started_on_a_gpu_or_without_launches() -> None:
    launches, workdir = launched(False)
    assert compiled.start(launches, KERNEL, workdir, gpu=True) is None
    assert compiled.start(compiled.Launches(), KERNEL, workdir, gpu=False) is None
