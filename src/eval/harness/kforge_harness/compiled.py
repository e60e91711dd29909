"""What the launched Triton kernels compute in, read from their compiled code (precision.py
reads the source too, and prefers this where it is there).

Worker side. The audit notes every launch of its forwards (`Launches.note`): the kernel, the
types of its arguments and the values of its constexprs, as the launch had them (autotune's
and heuristics' choices included). On a GPU the launch returns the compiled kernel, whose
TTIR and PTX are kept. Under the CPU interpreter nothing is compiled, so `read` has a fresh
Python process (no TRITON_INTERPRET: the interpreter's own state gets in the compiler's way)
compile each noted launch up to TTIR for a fixed CUDA target, GPUTarget("cuda", 90, 32); that
needs no GPU. The process imports only the kernel's @triton.jit functions, its imports of
triton and math and its module constants (`jit_module`), at their own lines, so the TTIR's
locations are the kernel file's.

What goes to the judge are the lines of the TTIR (and PTX) that matter (`relevant`): the judge
parses them itself (precision.compiled_findings). They come from the kernel's process, like
the audit's record: docs/security.md says what that means.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from typing import IO, Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple, TypedDict, Union

from . import launchers


class LaunchKey(TypedDict):
    """A launch as the reading keys it (launch_key): the kernel, its arguments' Triton types
    ("constexpr" for constexprs) and the constexprs' values as JSON."""

    kernel: str
    signature: Dict[str, str]
    constexprs: Dict[str, Any]


# One kernel's compiled code as read: {"kernel", "ttir", "ptx"} (and "error" in a reading).
KernelCode = Dict[str, Optional[str]]
# The reading the worker sends the judge (read, compile_main): {"kernels": [KernelCode],
# "errors": [str], "compiled_for"}.
Reading = Dict[str, Any]

MAX_KEYS = 16  # distinct launches read per evaluation
MAX_TEXT = 256 * 1024  # characters of one kernel's relevant lines sent to the judge
COMPILE_TIMEOUT_S = 120.0
TARGET = ("cuda", 90, 32)  # the CPU's reading compiles for an H100/H200's architecture
# TTIR: dots, casts, loops (their carried types), reductions' combine steps in half types, and the
# locations; PTX: the tensor-core instructions and conversions.
_RELEVANT = re.compile(r"tt\.dot|truncf|fp_to_fp|scf\.for|^\s*#loc|\"tt\.reduce\"|arith\.addf .*: b?f16 |"
                       r"mma|cvt\.rn\.(f16|bf16)|\.tf32")
_KEEP_IMPORTS = ("triton", "math")
# What a module constant kept for the compiler may call besides what is kept before it.
_CONSTANT_BUILTINS = ("int", "float", "bool", "str", "min", "max", "abs", "round", "len", "range", "tuple", "list",
                      "dict", "pow", "sum", "True", "False", "None")


def _constexpr_names(fn: Callable[..., Any]) -> List[str]:
    """Parameters of the Python function annotated tl.constexpr (or "tl.constexpr")."""
    import inspect

    names: List[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        note = param.annotation
        if "constexpr" in (note if isinstance(note, str) else getattr(note, "__name__", "")):
            names.append(name)
    return names


def _plain(value: object) -> object:
    """A constexpr's value as JSON (a Triton dtype by its name)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"dtype": str(value)} if hasattr(value, "primitive_bitwidth") else {"repr": repr(value)[:200]}


def launch_key(fn: object, args: Sequence[object], kwargs: Mapping[str, object]) -> Optional[LaunchKey]:
    """{"kernel", "signature", "constexprs"} of a launch of `fn` (a JITFunction or the
    interpreter's InterpretedFunction) with these arguments, or None."""
    import inspect

    from triton.runtime.jit import mangle_type

    py = getattr(fn, "fn", None)
    if py is None:
        return None
    params = inspect.signature(py).parameters
    bound = inspect.signature(py).bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params})
    bound.apply_defaults()
    constexprs = set(_constexpr_names(py))
    signature: Dict[str, str] = {}
    values: Dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if name in constexprs or value is None:
            signature[name] = "constexpr"
            values[name] = _plain(value.value if hasattr(value, "value") and not hasattr(value, "dtype") else value)
        else:
            signature[name] = mangle_type(value)
    return {"kernel": py.__name__, "signature": signature, "constexprs": values}


class Launches:
    """The launches of the audited forwards: their keys (distinct, at most MAX_KEYS) and, on a
    GPU, the compiled kernels' TTIR and PTX."""

    def __init__(self) -> None:
        self.keys: Dict[str, LaunchKey] = {}
        self.code: Dict[str, KernelCode] = {}
        self.errors: List[str] = []
        self.launchers: List[Dict[str, Any]] = []  # launchers.spec_of each compiled kernel (a GPU's)

    def note(self, fn: object, args: Sequence[object], kwargs: Mapping[str, object], result: object) -> None:
        """Bookkeeping only: never raises."""
        try:
            key = launch_key(fn, args, kwargs)
            if key is None:
                return
            text = json.dumps(key, sort_keys=True, default=str)
            if text not in self.keys and len(self.keys) < MAX_KEYS:
                self.keys[text] = key
            spec = launchers.spec_of(result)
            if spec is not None:
                self.launchers = launchers.merged(self.launchers, [spec])
            asm = getattr(result, "asm", None)
            if isinstance(asm, dict) and text in self.keys and text not in self.code:
                self.code[text] = {"kernel": key["kernel"], "ttir": relevant(asm.get("ttir")),
                                   "ptx": relevant(asm.get("ptx"))}
        except Exception as e:  # noqa: BLE001 -- a launch the reading cannot describe: said so
            if len(self.errors) < 4:
                self.errors.append("%s: %s" % (type(e).__name__, str(e)[:200]))


def relevant(text: object) -> Optional[str]:
    """The lines of a TTIR or PTX text the precision reading needs, capped."""
    if not isinstance(text, str):
        return None
    lines = [line for line in text.splitlines() if _RELEVANT.search(line)]
    return "\n".join(lines)[:MAX_TEXT]


class Pending:
    """A reading on the CPU started as soon as the launches are known (after an audited
    forward), while the judge goes on with its trials: the compiler's process imports Triton
    and compiles beside them, and `read` collects its answer if the launches are still the
    ones it was given (issue 38: 0.4-0.8 s of every CPU candidate's verdict otherwise)."""

    def __init__(self, process: "subprocess.Popen[str]", keys: FrozenSet[str]) -> None:
        self.process = process
        self.keys = keys

    def cancel(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()

    def collect(self, timeout: float) -> Tuple[Optional[str], Optional[str], Optional[str]]:
        """(stdout, stderr, why it gave nothing)."""
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.cancel()
            return None, None, "the compiler's process: timed out after %.0f s" % timeout
        return out, err, None


def _compiler_command(launches: Launches, source: str, workdir: str) -> Tuple[List[str], str, Dict[str, str]]:
    """(argv, the request on its stdin, env) of the compiler's process for the launches noted."""
    module = os.path.join(workdir, "kernel_jit.py")
    with open(module, "w", encoding="utf-8") as f:
        f.write(jit_module(source))
    request: Dict[str, Any] = {"module": module, "launches": list(launches.keys.values()), "target": TARGET}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [sys.executable, "-m", "kforge_harness", "ttir"], json.dumps(request), env


def _spawn(launches: Launches, source: str, workdir: str) -> Union[Pending, str]:
    """The compiler's process started on the launches noted so far, or why it could not start."""
    try:
        argv, request, env = _compiler_command(launches, source, workdir)
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env, cwd=workdir)
    except (OSError, ValueError) as e:
        return "the compiler's process: %s: %s" % (type(e).__name__, str(e)[:200])
    stdin, process.stdin = process.stdin, None  # written here: `communicate` later only reads
    try:
        assert stdin is not None
        stdin.write(request)  # a few KiB at most (MAX_KEYS launches): within a pipe's buffer
        stdin.close()
    except OSError:
        pass  # the process ended already: its answer (or its stderr) says why
    return Pending(process, frozenset(launches.keys))


def _current(launches: Launches, source: str, workdir: str, pending: Optional[Pending]) -> Union[Pending, str]:
    """`pending` where it reads the launches noted so far, else (cancelled) a new reading of them."""
    if pending is not None:
        if pending.keys == frozenset(launches.keys):
            return pending
        pending.cancel()
    return _spawn(launches, source, workdir)


def start(launches: Launches, source: str, workdir: str, gpu: bool,
          pending: Optional[Pending] = None) -> Optional[Pending]:
    """The CPU's reading of the launches noted so far, started now (`pending` kept where it
    reads the same launches, else cancelled); None where there is nothing to compile (a GPU's
    launches carry their code) or the process cannot start (`read` then says why)."""
    if gpu or launches.code or not launches.keys:
        return pending
    current = _current(launches, source, workdir, pending)
    return current if isinstance(current, Pending) else None


def read(launches: Launches, source: str, workdir: str, gpu: bool, pending: Optional[Pending] = None) -> Reading:
    """{"kernels": [{"kernel", "ttir", "ptx", "error"}], "errors": [...]}: on a GPU the
    launched kernels' own code (and "launchers": their launcher specs, launchers.py); on the
    CPU each launch compiled up to TTIR in a fresh process (`pending`'s, started early by
    `start`, where it read these same launches)."""
    if gpu or launches.code:
        if pending is not None:
            pending.cancel()
        kernels: List[KernelCode] = [dict(launches.code[k], error=None) if k in launches.code else
                   {"kernel": key["kernel"], "ttir": None, "ptx": None, "error": "its launch returned no compiled kernel"}
                   for k, key in launches.keys.items()]
        return {"kernels": kernels, "errors": launches.errors, "compiled_for": "the GPU it ran on",
                "launchers": list(launches.launchers)}
    if not launches.keys:
        if pending is not None:
            pending.cancel()
        return {"kernels": [], "errors": launches.errors, "compiled_for": None}
    current = _current(launches, source, workdir, pending)
    if isinstance(current, str):
        launches.errors.append(current)
        return _answer(launches, None, None)
    stdout, stderr, failed = current.collect(COMPILE_TIMEOUT_S)
    if failed:
        launches.errors.append(failed)
    return _answer(launches, stdout, stderr)


def _answer(launches: Launches, stdout: Optional[str], stderr: Optional[str]) -> Reading:
    """The reading from the compiler's process's output (its last line, JSON), or why none."""
    answer: Any = None
    if stdout and stdout.strip():
        try:
            answer = json.loads(stdout.strip().splitlines()[-1])
        except ValueError as e:
            launches.errors.append("the compiler's process: %s: %s" % (type(e).__name__, str(e)[:200]))
    if not isinstance(answer, dict):
        why = ((stderr or "").strip().splitlines() or ["no answer"])[-1][:300] if stdout is not None else "no answer"
        return {"kernels": [], "errors": launches.errors + ["the compiler's process failed: %s" % why],
                "compiled_for": None}
    answer["errors"] = launches.errors + list(answer.get("errors") or [])
    answer["compiled_for"] = "CUDA sm_%d (compiled on the CPU up to TTIR)" % TARGET[1]
    return answer


# -- the kernel's @triton.jit functions alone --------------------------------------------------


def _is_jit_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    parts: List[str] = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    return bool(parts) and parts[0] == "jit"


def _names_loaded(node: ast.AST) -> Set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _kept_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(a.name.split(".")[0] in _KEEP_IMPORTS for a in node.names)
    return isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in _KEEP_IMPORTS


def jit_module(source: str) -> str:
    """The kernel's source with only its imports of triton and math, its module constants (names
    bound to expressions of what is kept before them and a few builtins) and its @triton.jit
    functions (other decorators dropped), every kept line where it was: the rest is blank lines."""
    tree = ast.parse(source)
    lines = source.splitlines()
    keep = [""] * len(lines)
    defined = set(_CONSTANT_BUILTINS)
    for node in tree.body:
        first, last = node.lineno - 1, node.end_lineno
        if isinstance(node, (ast.Import, ast.ImportFrom)) and _kept_import(node):
            keep[first:last] = lines[first:last]
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) for t in targets) and _names_loaded(node.value) <= defined:
                keep[first:last] = lines[first:last]
                defined |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.FunctionDef) and any(_is_jit_decorator(d) for d in node.decorator_list):
            start = node.decorator_list[0].lineno - 1
            keep[start:last] = lines[start:last]
            for dec in node.decorator_list:
                for n in range(dec.lineno - 1, dec.end_lineno or dec.lineno):
                    keep[n] = ""
            keep[node.decorator_list[-1].lineno - 1] = " " * node.col_offset + "@triton.jit"
            defined.add(node.name)
    # `triton` for the decorators, on the first free line (a docstring's or an import of torch's)
    free = next((i for i, line in enumerate(keep) if not line), None)
    if free is not None:
        keep[free] = "import triton"
    return "\n".join(keep) + "\n"


# -- the compiler's process ---------------------------------------------------------------------


def compile_main(stream_in: IO[str], stream_out: IO[str]) -> int:
    """`python -m kforge_harness ttir`: compiles each launch of the request to TTIR; prints
    {"kernels": [{"kernel", "ttir", "error"}], "errors": []} as one JSON line."""
    request = json.loads(stream_in.read())
    kernels: List[KernelCode] = []
    errors: List[str] = []
    module: Any
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("kforge_kernel_jit", request["module"])
        assert spec is not None and spec.loader is not None, request["module"]
        module = importlib.util.module_from_spec(spec)
        sys.modules["kforge_kernel_jit"] = module
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 -- said in the answer: the judge falls back to the source
        errors.append("the kernel's jit functions alone do not import: %s: %s" % (type(e).__name__, str(e)[:300]))
        module = None
    for launch in request["launches"] if module is not None else ():
        entry = {"kernel": launch["kernel"], "ttir": None, "ptx": None, "error": None}
        try:
            entry["ttir"] = relevant(_ttir(getattr(module, launch["kernel"]), launch, tuple(request["target"])))
        except Exception as e:  # noqa: BLE001
            entry["error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[-1][:300] if str(e).strip()
                                         else "")
        kernels.append(entry)
    stream_out.write(json.dumps({"kernels": kernels, "errors": errors}) + "\n")
    return 0


def _constexpr_value(value: object) -> object:
    import triton.language as tl

    if isinstance(value, dict) and "dtype" in value:
        return tl.dtype(value["dtype"])
    return value


def _ttir(fn: object, launch: Mapping[str, Any], target: Tuple[str, int, int]) -> str:
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    gpu = GPUTarget(*target)
    backend = CUDABackend(gpu)
    constexprs = {k: _constexpr_value(v) for k, v in launch["constexprs"].items()}
    src = ASTSource(fn, launch["signature"], constexprs=constexprs)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(gpu, options, backend.get_codegen_implementation(options), backend.get_module_map(), context)
    stages: Dict[str, Callable[..., Any]] = {}
    backend.add_stages(stages, options, src.language)
    return str(stages["ttir"](module, {}))
