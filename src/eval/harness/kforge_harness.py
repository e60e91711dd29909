"""kforge evaluation harness.

Embedded in the kforge binary and written to its cache dir. Run as

    python kforge_harness.py serve        long-lived server, JSON lines on stdin/stdout
    python kforge_harness.py child JOB    one evaluation in a fresh process (spawn executor)
    python kforge_harness.py profile JOB  one forward under Nsight Compute

The server imports torch and triton once and never initializes CUDA itself: every
evaluation runs in a child (forked where possible) with its own process group, a temp
dir, an environment without secrets and a deadline enforced here by SIGKILL. Generated
code is untrusted: anything it does -- crash, hang, poison the CUDA context, print to
stdout -- stays in that child.

Protocol (one JSON object per line):
  -> {"op": "eval", "id": ID, "job": {...}}       <- {"event": "progress", "id", "phase"}...
                                                   <- {"event": "result", "id", "result": {...}}
  -> {"op": "cancel", "id": ID}                    (kills the running child; result status "cancelled")
  -> {"op": "static_check", "id", "source", "reject_torch_ops"}  <- {"event": "static", "id", "report"}
  -> {"op": "device_info", "id"}                   <- {"event": "device_info", "id", "info"}
  -> {"op": "ncu_check", "id"}                     <- {"event": "ncu_check", "id", "info"}
  -> {"op": "shutdown"}
On start the server says {"event": "hello", ...} with versions, or {"event": "hello",
"ok": false, "error": ...} when torch or triton cannot be imported.
"""

import ast
import hashlib
import importlib.util
import json
import math
import os
import platform
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

PROTOCOL = 1
LOG_LIMIT = 1 << 20  # bytes of child output kept in a result
MESSAGE_LINES = 150  # lines of cleaned error text, as the repair prompt wants them
HOST_SLACK_MS = 0.1  # launch + synchronize overhead tolerated between host and event time

SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def is_secret_env(name):
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def scrub_environment(env):
    for name in list(env):
        if is_secret_env(name):
            del env[name]


# ---------------------------------------------------------------------------
# Static checks (pure AST: nothing of the candidate runs here)
# ---------------------------------------------------------------------------

PATCH_ROOTS = {"torch", "triton", "time", "timeit", "builtins", "sys", "os", "numpy", "np", "gc"}
PROCESS_MODULES = {"threading", "_thread", "multiprocessing", "subprocess", "concurrent", "asyncio", "pty"}
PROCESS_CALLS = re.compile(r"^os\.(fork|forkpty|system|popen|spawn\w*|exec\w*|posix_spawn\w*)$")
MOCK_MODULES = {"unittest.mock", "mock"}
# torch functions that allocate, describe or reshape tensors without computing on them.
TORCH_NON_COMPUTE = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "tensor", "as_tensor", "from_numpy", "arange", "device", "dtype", "Size",
    "is_tensor", "is_floating_point", "numel", "get_default_dtype", "manual_seed",
    "no_grad", "inference_mode", "float32", "float16", "bfloat16", "float64", "int32", "int64",
    "bool", "int8", "uint8", "finfo", "iinfo", "broadcast_shapes",
}
TENSOR_NON_COMPUTE_METHODS = {
    "contiguous", "view", "view_as", "reshape", "permute", "transpose", "t", "unsqueeze", "squeeze",
    "expand", "expand_as", "flatten", "unflatten", "size", "stride", "dim", "numel", "data_ptr",
    "to", "cuda", "cpu", "float", "half", "bfloat16", "double", "int", "long", "bool", "type",
    "is_contiguous", "element_size", "new_empty", "new_zeros", "new_ones", "new_full", "item",
    "tolist", "storage_offset", "get_device", "chunk", "split", "unbind", "narrow", "select",
    "detach", "requires_grad_", "numpy", "empty_like", "as_strided", "movedim", "view_as_real",
}
TENSOR_COMPUTE_METHODS = {
    "sum", "mean", "max", "min", "amax", "amin", "prod", "exp", "log", "sqrt", "rsqrt", "pow",
    "matmul", "mm", "bmm", "addmm", "relu", "sigmoid", "tanh", "softmax", "log_softmax", "norm",
    "var", "std", "cumsum", "cumprod", "argmax", "argmin", "topk", "sort", "clamp", "clip",
    "abs", "neg", "mul", "add", "sub", "div", "mul_", "add_", "sub_", "div_", "addcmul", "lerp",
    "where", "masked_fill", "gather", "scatter", "scatter_add", "index_select", "einsum", "logsumexp",
    "sin", "cos", "erf", "gelu", "silu", "dot", "outer", "baddbmm", "conv2d", "linear",
}
NN_COMPUTE_MODULES = re.compile(
    r"^(Linear|Bilinear|Conv\w*|ConvTranspose\w*|\w*Norm\w*|ReLU\w*|GELU|SiLU|Mish|Sigmoid|Tanh|"
    r"Softmax\w*|LogSoftmax|Dropout\w*|GRU\w*|LSTM\w*|RNN\w*|MultiheadAttention|Transformer\w*|"
    r"Embedding\w*|\w*Pool\w*|Hard\w*|LeakyReLU|ELU|SELU|CELU|Softplus|Softsign|Threshold|"
    r"Upsample\w*|PixelShuffle|Flatten|Identity|Sequential)$"
)


def dotted(node):
    """'torch.cuda.Event' for an Attribute/Name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def decorator_is_jit(dec):
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = dotted(target) or ""
    return name.split(".")[-1] == "jit"


class StaticReport:
    def __init__(self):
        self.errors = []
        self.warnings = []
        self.jit_kernels = []
        self.launches = []

    def error(self, rule, message, line=None):
        self.errors.append({"rule": rule, "message": message, "line": line})

    def warn(self, rule, message, line=None):
        self.warnings.append({"rule": rule, "message": message, "line": line})

    def as_dict(self):
        return {
            "errors": self.errors,
            "warnings": self.warnings,
            "jit_kernels": self.jit_kernels,
            "launches": self.launches,
        }


def static_check(source, reject_torch_ops=False):
    """Returns (category or None, report dict, syntax detail or None)."""
    report = StaticReport()
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        line_text = (e.text or "").rstrip("\n")
        detail = {"line": e.lineno, "col": e.offset, "text": line_text}
        report.error("syntax", "SyntaxError: %s (line %s)" % (e.msg, e.lineno), e.lineno)
        return "syntax", report.as_dict(), detail
    except (RecursionError, MemoryError, ValueError) as e:
        report.error("unparseable", "the kernel source could not be analysed: %s" % type(e).__name__)
        return "static_check", report.as_dict(), None

    try:
        _static_rules(tree, report, reject_torch_ops)
    except RecursionError:
        report.error("unparseable", "the kernel source is nested too deeply to analyse")
    return ("static_check" if report.errors else None), report.as_dict(), None


def _static_rules(tree, report, reject_torch_ops):
    top_classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, node)

    # @triton.jit kernels, by decorator or by `name = triton.jit(fn)`.
    jit = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(decorator_is_jit(d) for d in node.decorator_list):
                jit.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if (dotted(node.value.func) or "").split(".")[-1] == "jit":
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        jit.add(t.id)
    report.jit_kernels = sorted(jit)

    def is_launch(call):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Subscript):
            return False
        name = dotted(call.func.value) or ""
        return name.split(".")[-1] in jit

    launches = [n for n in ast.walk(tree) if is_launch(n)]
    report.launches = sorted({(dotted(n.func.value) or "?") for n in launches})
    launching_functions = {
        name for name, fn in functions.items() if name not in jit and any(is_launch(n) for n in ast.walk(fn))
    }

    if "ModelNew" not in top_classes:
        report.error("no_modelnew", "the kernel must define `class ModelNew` at module level")
    if not jit:
        report.error("no_triton", "no @triton.jit kernel is defined: the work must run in Triton")
    elif not launches:
        report.error("no_launch", "no @triton.jit kernel is launched (expected `kernel[grid](...)`)")

    modelnew = top_classes.get("ModelNew")
    modelnew_nodes = set(id(n) for n in ast.walk(modelnew)) if modelnew else set()

    # Aliases of modules whose attributes must not be patched (import torch.cuda as tc).
    patch_roots = set(PATCH_ROOTS)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in PATCH_ROOTS and alias.asname:
                    patch_roots.add(alias.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in PATCH_ROOTS:
                for alias in node.names:
                    patch_roots.add(alias.asname or alias.name)

    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        # Threads and processes: timing and isolation assume one thread of work.
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name.split(".")[0] in PROCESS_MODULES:
                    report.error("threads", "imports %s: threads and processes are not allowed" % name, line)
                if name in MOCK_MODULES or name.split(".")[0] == "mock":
                    report.error("patching", "imports %s: patching is not allowed" % name, line)
        elif isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            if PROCESS_CALLS.match(name):
                report.error("threads", "calls %s: threads and processes are not allowed" % name, line)
            if name in ("setattr", "delattr") and node.args:
                target = dotted(node.args[0]) or ""
                if target.split(".")[0] in patch_roots:
                    report.error("patching", "%s on %s: patching torch, triton or timers is not allowed" % (name, target), line)
            if name in ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.Stream"):
                report.warn("side_stream", "uses a side CUDA stream (%s): timing is cross-checked against host time" % name, line)
            if name.split(".")[-1] == "suppress" and ("contextlib" in name or name == "suppress"):
                report.error("fallback", "contextlib.suppress hides kernel failures", line)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute):
                        name = dotted(sub) or ""
                        if name.split(".")[0] in patch_roots:
                            report.error("patching", "assigns %s: patching torch, triton or timers is not allowed" % name, line)
                            break
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))) and node.handlers:
            inside_modelnew = id(node) in modelnew_nodes
            guarded = any(
                is_launch(n)
                or (isinstance(n, ast.Call) and (dotted(n.func) or "").split(".")[-1] in launching_functions)
                for stmt in node.body
                for n in ast.walk(stmt)
            )
            if guarded or inside_modelnew:
                report.error(
                    "fallback",
                    "try/except around kernel code: a fallback hides kernel failures (remove the try/except)",
                    line,
                )

    if modelnew is not None:
        _torch_op_rules(modelnew, functions, report, reject_torch_ops)


def _torch_op_rules(modelnew, functions, report, reject):
    methods = {n.name: n for n in modelnew.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    forward = methods.get("forward")
    if forward is None:
        report.error("no_forward", "ModelNew has no forward method")
        return
    compute_modules = set()
    init = methods.get("__init__")
    if init is not None:
        for node in ast.walk(init):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                ctor = (dotted(node.value.func) or "").split(".")[-1]
                if NN_COMPUTE_MODULES.match(ctor):
                    for t in node.targets:
                        name = dotted(t) or ""
                        if name.startswith("self."):
                            compute_modules.add(name[5:])

    # forward plus the methods and module-level helpers it calls (one level deep).
    bodies = [forward]
    for node in ast.walk(forward):
        if isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            if name.startswith("self.") and name[5:] in methods:
                bodies.append(methods[name[5:]])
            elif name in functions and name not in report.jit_kernels:
                bodies.append(functions[name])

    found = []
    seen = set()
    for body in bodies:
        for node in ast.walk(body):
            if id(node) in seen:
                continue
            seen.add(id(node))
            line = getattr(node, "lineno", None)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                found.append(("@ (matmul)", line))
            if not isinstance(node, ast.Call):
                continue
            name = dotted(node.func) or ""
            parts = name.split(".")
            if parts[0] == "torch" and len(parts) >= 2:
                op = parts[-1]
                if parts[1] == "cuda" or op in TORCH_NON_COMPUTE or op[:1].isupper():
                    continue
                found.append((name, line))
            elif parts[0] in ("F", "functional") and len(parts) == 2:
                found.append((name, line))
            elif name.startswith("self.") and len(parts) == 2 and parts[1] in compute_modules:
                found.append((name + " (a torch.nn module)", line))
            elif isinstance(node.func, ast.Attribute) and len(parts) != 1:
                method = node.func.attr
                if method in TENSOR_COMPUTE_METHODS and parts[0] not in ("tl", "triton", "math", "self"):
                    found.append(("." + method + "()", line))
    for op, line in found:
        message = "PyTorch compute op %s in forward (line %s): part of the work may not run in Triton" % (op, line)
        if reject:
            report.error("torch_op", message, line)
        else:
            report.warn("torch_op", message, line)


# ---------------------------------------------------------------------------
# Error text
# ---------------------------------------------------------------------------

INVOKED_WITH = re.compile(r"Invoked with:.*", re.S)
TENSOR_DUMP = re.compile(r"tensor\(\[.*?\]\)?(, device='[^']*')?(, dtype=[\w.]+)?\)?", re.S)


def clean_text(text, max_lines=MESSAGE_LINES):
    """The tail of an error text without pybind argument dumps or tensor reprs."""
    cleaned = []
    skipping = False
    for line in text.splitlines():
        if "Invoked with:" in line:
            cleaned.append(line.split("Invoked with:")[0] + "Invoked with: <arguments elided>")
            skipping = True
            continue
        if skipping:
            if line.strip() == "" or line.startswith(("Traceback", "The above", "During handling")):
                skipping = False
            else:
                continue
        cleaned.append(line)
    joined = TENSOR_DUMP.sub("tensor(...)", "\n".join(cleaned))
    lines = joined.splitlines()
    if len(lines) > max_lines:
        lines = ["... (%d earlier lines omitted)" % (len(lines) - max_lines)] + lines[-max_lines:]
    return "\n".join(lines)


def tail_bytes(text, limit=LOG_LIMIT):
    if len(text) <= limit:
        return text
    return "... (%d earlier characters omitted)\n" % (len(text) - limit) + text[-limit:]


# ---------------------------------------------------------------------------
# Classification of exceptions raised by candidate code
# ---------------------------------------------------------------------------

CUDA_ERROR_PATTERNS = (
    "CUDA error", "illegal memory access", "device-side assert", "illegal instruction",
    "misaligned address", "unspecified launch failure", "cudaError", "CUDA driver error",
    "an illegal", "CUBLAS_STATUS", "CUDNN_STATUS", "hipError",
)
OOM_PATTERNS = ("out of memory", "can't allocate memory", "CUDA_ERROR_OUT_OF_MEMORY", "Tried to allocate")
COMPILE_TYPES = {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct", "MLIRCompilationError"}
INTERPRETED_COMPILE_TYPES = (AttributeError, NameError, TypeError, ValueError, AssertionError, NotImplementedError, ImportError)


class KernelFailure(Exception):
    """A classified failure of the candidate: ends the evaluation with a category."""

    def __init__(self, category, summary, message="", details=None):
        super().__init__(summary)
        self.category = category
        self.summary = summary
        self.message = message or summary
        self.details = details or {}


class TaskFailure(Exception):
    """The task file itself is unusable: not the kernel's fault."""


def exception_text(exc):
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def first_line(text, limit=300):
    line = next((l for l in text.strip().splitlines() if l.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def classify(exc, stage, ctx):
    """Maps an exception from candidate code to a KernelFailure."""
    chain = []
    e = exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = exception_text(exc)
    message = clean_text(text)
    names = [type(x).__name__ for x in chain]
    joined = "\n".join("%s: %s" % (type(x).__name__, x) for x in chain)
    summary = "%s: %s" % (type(exc).__name__, first_line(str(exc)) or "(no message)")

    if isinstance(exc, SyntaxError):
        return KernelFailure("syntax", summary, message, {"line": exc.lineno, "col": exc.offset})
    for x in chain:
        if type(x).__name__ == "OutOfResources":
            details = {
                "resource": getattr(x, "name", None),
                "required": getattr(x, "required", None),
                "limit": getattr(x, "limit", None),
            }
            m = re.search(r"out of resource: (\w[\w ]*?), Required: (\d+), Hardware limit: (\d+)", str(x))
            if m:
                details = {"resource": m.group(1), "required": int(m.group(2)), "limit": int(m.group(3))}
            summary = "out of resources: %s requires %s, the limit is %s" % (
                details["resource"], details["required"], details["limit"])
            return KernelFailure("out_of_resources", summary, message, details)
    for x in chain:
        if type(x).__name__ in COMPILE_TYPES:
            details = {}
            m = re.search(r"at (\d+):(\d+):", str(x))
            if m:
                details = {"kernel_line": int(m.group(1)), "col": int(m.group(2))}
            location = kernel_frame(x, ctx)
            if location:
                details.update(location)
            where = " (%s line %s)" % (details.get("function", "kernel"), details["line"]) if "line" in details else ""
            return KernelFailure("compile", "Triton compile error%s: %s" % (where, compile_reason(x)), message, details)
    if any("OutOfMemoryError" == n for n in names) or any(p in joined for p in OOM_PATTERNS):
        m = re.search(r"Tried to allocate ([\d.]+ \w+)|allocate (\d+) bytes", joined)
        details = {"requested": (m.group(1) or m.group(2) + " bytes")} if m else {}
        return KernelFailure("oom", summary, message, details)
    if any(n in ("AcceleratorError", "CudaError") for n in names) or any(p in joined for p in CUDA_ERROR_PATTERNS):
        return KernelFailure("cuda_error", summary, message)
    if ctx.get("interpret"):
        # Under the interpreter a jit body runs as Python: what fails to compile on a GPU
        # raises from inside the kernel's own frame (wrapped in an InterpreterError).
        for x in chain:
            location = kernel_frame(x, ctx) if isinstance(x, INTERPRETED_COMPILE_TYPES) else None
            if location:
                summary = "Triton compile error (%s line %s, interpreter): %s: %s" % (
                    location["function"], location["line"], type(x).__name__, first_line(str(x)))
                return KernelFailure("compile", summary, message, location)
    if stage == "import":
        return KernelFailure("import", summary, message)
    return KernelFailure("runtime", summary, message)


def compile_reason(exc):
    lines = [l for l in str(exc).strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


def kernel_frame(exc, ctx):
    """The innermost traceback frame inside a @triton.jit function of the kernel file."""
    kernel_file = ctx.get("kernel_file")
    jit = set(ctx.get("jit_kernels") or ())
    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        code = frame.f_code
        if kernel_file and os.path.abspath(code.co_filename) == kernel_file and code.co_name in jit:
            found = {"file": "kernel.py", "line": lineno, "function": code.co_name}
    return found


# ---------------------------------------------------------------------------
# Loading task and kernel
# ---------------------------------------------------------------------------

def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def load_task(path):
    try:
        module = load_module(path, "kforge_task")
    except SyntaxError as e:
        raise TaskFailure("the task file has a syntax error at line %s: %s" % (e.lineno, e.msg))
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 -- any failure of the task's import is reported
        raise TaskFailure("importing the task file raised %s: %s" % (type(e).__name__, first_line(str(e))))
    import torch

    missing = []
    model = getattr(module, "Model", None)
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        missing.append("a `class Model(nn.Module)`")
    if not callable(getattr(module, "get_inputs", None)):
        missing.append("a `get_inputs()` function")
    if missing:
        raise TaskFailure("the task file does not define %s (KernelBench format)" % " and ".join(missing))
    return module


# ---------------------------------------------------------------------------
# Tensors, comparison
# ---------------------------------------------------------------------------

def tree_map(fn, value):
    if isinstance(value, (list, tuple)):
        mapped = [tree_map(fn, v) for v in value]
        return type(value)(mapped) if isinstance(value, list) else tuple(mapped)
    if isinstance(value, dict):
        return {k: tree_map(fn, v) for k, v in value.items()}
    return fn(value)


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


def structure(value):
    if isinstance(value, (list, tuple)):
        return "%s of %d" % (type(value).__name__, len(value))
    if isinstance(value, dict):
        return "dict with keys %s" % sorted(map(str, value))
    return type(value).__name__


def describe_shape(t):
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def compare_outputs(ref_out, new_out, atol, rtol):
    """Returns (passed, per-output reports, reason of the first failure or None)."""
    import torch

    ref_items = flatten_outputs(ref_out)
    new_items = flatten_outputs(new_out)
    if [p for p, _ in ref_items] != [p for p, _ in new_items]:
        reason = "output structure differs: the kernel returned %s, the reference %s" % (
            structure(new_out), structure(ref_out))
        return False, [], reason
    reports = []
    first_failure = None
    for (path, r), (_, n) in zip(ref_items, new_items):
        report = {"output": path, "passed": True}
        reason = None
        if isinstance(r, torch.Tensor):
            report.update({"shape": list(r.shape), "dtype": str(r.dtype).replace("torch.", "")})
            if not isinstance(n, torch.Tensor):
                reason = "%s: the kernel returned %s, the reference a tensor" % (path, type(n).__name__)
            elif tuple(n.shape) != tuple(r.shape):
                reason = "%s: shape %s, the reference %s" % (path, describe_shape(n), describe_shape(r))
            elif n.dtype != r.dtype:
                reason = "%s: dtype %s, the reference %s" % (path, str(n.dtype).replace("torch.", ""), report["dtype"])
            else:
                reason = compare_tensor(path, r, n, atol, rtol, report)
        elif isinstance(r, (int, float, bool)) and not isinstance(n, torch.Tensor):
            if isinstance(n, (int, float, bool)) and (
                (r == n) or (isinstance(r, float) and math.isclose(n, r, rel_tol=rtol, abs_tol=atol))
            ):
                pass
            else:
                reason = "%s: %r, the reference %r" % (path, n, r)
        elif r is None:
            if n is not None:
                reason = "%s: the kernel returned %s, the reference None" % (path, type(n).__name__)
        else:
            if type(n) is not type(r) or n != r:
                reason = "%s: the kernel returned %r, the reference %r" % (path, n, r)
        if reason:
            report["passed"] = False
            report["reason"] = reason
            first_failure = first_failure or reason
        reports.append(report)
    return first_failure is None, reports, first_failure


def within_tolerance_fast(r, n, atol, rtol, report):
    """The common case in a few passes and the outputs' own precision (float32 for half
    types): everything finite and within tolerance. Fills the report's error statistics
    and returns True; returns False (report untouched) when the full check must decide."""
    import torch

    work = torch.float64 if r.dtype == torch.float64 else torch.float32
    rw, nw = r.to(work), n.to(work)
    if not (bool(torch.isfinite(rw).all()) and bool(torch.isfinite(nw).all())):
        return False
    abs_err = (nw - rw).abs()
    abs_ref = rw.abs()
    if not bool((abs_err <= atol + rtol * abs_ref).all()):
        return False
    numel = r.numel()
    rel = torch.where(abs_ref >= atol, abs_err / abs_ref.clamp_min(1e-30), torch.zeros_like(abs_err))
    report["max_abs_err"] = float(abs_err.max()) if numel else 0.0
    report["max_rel_err"] = float(rel.max()) if numel else 0.0
    report["max_abs_ref"] = float(abs_ref.max()) if numel else 0.0
    report["numel"] = numel
    report["bad_elements"] = 0
    return True


def compare_tensor(path, r, n, atol, rtol, report):
    import torch

    # Compared where the reference lives (float64 on a GPU is fast; copying large
    # outputs to the host was most of a trial's time).
    r = r.detach()
    n = n.detach().to(r.device)
    if r.is_complex():
        r, n = torch.view_as_real(r), torch.view_as_real(n)
    if not r.is_floating_point():
        diff = (n != r)
        bad = int(diff.sum())
        report["bad_elements"] = bad
        report["numel"] = r.numel()
        if bad:
            index = tuple(int(i) for i in diff.nonzero()[0])
            return "%s: %d of %d elements differ (integer output must match exactly; first at %s: %s vs %s)" % (
                path, bad, r.numel(), list(index), n[index].item(), r[index].item())
        return None
    if within_tolerance_fast(r, n, atol, rtol, report):
        return None
    # Something is off: the full analysis in float64 (NaN/Inf placement, counts, first
    # bad element). It is also the authority on borderline elements.
    r64, n64 = r.double(), n.double()
    ref_finite = torch.isfinite(r64)
    new_finite = torch.isfinite(n64)
    both = ref_finite & new_finite
    abs_err = (n64 - r64).abs()
    abs_err = torch.where(both, abs_err, torch.zeros_like(abs_err))
    # Relative error only where the reference is larger than atol: near zero it explodes
    # without meaning anything (atol governs there).
    rel_err = torch.where(r64.abs() >= atol, abs_err / r64.abs().clamp_min(1e-30), torch.zeros_like(abs_err))
    report["max_abs_err"] = float(abs_err.max()) if abs_err.numel() else 0.0
    report["max_rel_err"] = float(torch.where(both, rel_err, torch.zeros_like(rel_err)).max()) if rel_err.numel() else 0.0
    report["max_abs_ref"] = float(torch.where(ref_finite, r64.abs(), torch.zeros_like(r64)).max()) if r64.numel() else 0.0
    report["numel"] = r.numel()
    nonfinite_bad = ref_finite & ~new_finite
    if bool(nonfinite_bad.any()):
        count = int(nonfinite_bad.sum())
        report["bad_elements"] = count
        return "%s: %d elements are NaN/Inf where the reference is finite" % (path, count)
    # Where the reference is NaN or +-Inf, the kernel must agree exactly.
    special_bad = ~ref_finite & ~((torch.isnan(r64) & torch.isnan(n64)) | (r64 == n64))
    if bool(special_bad.any()):
        count = int(special_bad.sum())
        report["bad_elements"] = count
        return "%s: %d elements differ where the reference is NaN/Inf" % (path, count)
    within = abs_err <= (atol + rtol * r64.abs())
    bad = both & ~within
    count = int(bad.sum())
    report["bad_elements"] = count
    if count:
        index = tuple(int(i) for i in bad.nonzero()[0])
        return ("%s: %d of %d elements outside tolerance (atol %g, rtol %g); max abs err %.3g, max rel err %.3g; "
                "first at %s: %.6g vs reference %.6g") % (
            path, count, r.numel(), atol, rtol, report["max_abs_err"], report["max_rel_err"],
            list(index), n64[index].item(), r64[index].item())
    return None


# ---------------------------------------------------------------------------
# Parameter alignment
# ---------------------------------------------------------------------------

def align_parameters(ref, new):
    """Copies reference parameters and buffers into the kernel model: by name and shape,
    then, for what is left, by shape in registration order. Reports what was aligned."""
    import torch

    ref_state = list(ref.state_dict().items())
    new_state = new.state_dict()
    report = {"by_name": [], "by_shape": [], "unmatched_reference": [], "unmatched_kernel": []}
    used = set()
    leftovers = []
    with torch.no_grad():
        for name, value in ref_state:
            target = new_state.get(name)
            if target is not None and tuple(target.shape) == tuple(value.shape) and target.dtype == value.dtype:
                target.copy_(value)
                used.add(name)
                report["by_name"].append(name)
            else:
                leftovers.append((name, value))
        remaining = [(n, t) for n, t in new_state.items() if n not in used]
        for name, value in leftovers:
            match = next(
                (i for i, (_, t) in enumerate(remaining)
                 if tuple(t.shape) == tuple(value.shape) and t.dtype == value.dtype),
                None,
            )
            if match is None:
                report["unmatched_reference"].append(name)
                continue
            new_name, target = remaining.pop(match)
            target.copy_(value)
            report["by_shape"].append([name, new_name])
        report["unmatched_kernel"] = [n for n, _ in remaining]
    return report


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------

def stats(values):
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    median = ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])
    mean = sum(ordered) / n
    var = sum((v - mean) ** 2 for v in ordered) / (n - 1) if n > 1 else 0.0
    return {"median_ms": median, "mean_ms": mean, "min_ms": ordered[0], "max_ms": ordered[-1],
            "std_ms": math.sqrt(var), "runs": n}


def time_model(model, inputs, job, flush_buffer, progress, label):
    import torch

    with torch.no_grad():
        for _ in range(max(1, job["warmup"])):
            model(*inputs)
        torch.cuda.synchronize()
        start = time.perf_counter()
        model(*inputs)
        torch.cuda.synchronize()
        estimate = max(time.perf_counter() - start, 1e-6)
        wanted = int(job["timing_budget_s"] / estimate)
        runs = max(job["min_timing_trials"], min(job["timing_trials"], wanted))
        progress("timing %s: %d runs" % (label, runs))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        for i in range(runs):
            if flush_buffer is not None:
                flush_buffer.zero_()  # outside the timed region: L2 starts cold for every run
            starts[i].record()
            model(*inputs)
            ends[i].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        # The same work timed by the host around a device-wide synchronize: work hidden on
        # a side stream shows up here and not in the events above.
        host = []
        for _ in range(min(runs, 20)):
            if flush_buffer is not None:
                flush_buffer.zero_()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(*inputs)
            torch.cuda.synchronize()
            host.append((time.perf_counter() - t0) * 1e3)
    result = stats(times)
    result["requested_runs"] = job["timing_trials"]
    result["budget_limited"] = runs < job["timing_trials"]
    result["host_median_ms"] = stats(host)["median_ms"]
    return result


def baseline_key(task_source, device_info, versions, inputs, job):
    import torch

    signature = []
    for path, v in flatten_outputs(inputs, "in"):
        if isinstance(v, torch.Tensor):
            signature.append([path, list(v.shape), str(v.dtype)])
    material = json.dumps({
        "task": hashlib.sha256(task_source.encode()).hexdigest(),
        "gpu": device_info.get("name"),
        "torch": versions.get("torch"),
        "inputs": signature,
        "timing": [job["warmup"], job["timing_trials"], job["min_timing_trials"], job["timing_budget_s"],
                   job["flush_l2"]],
        "harness": PROTOCOL,
    }, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def read_baseline(cache_dir, key):
    if not cache_dir:
        return None
    try:
        with open(os.path.join(cache_dir, key + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_baseline(cache_dir, key, timing):
    if not cache_dir:
        return
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = os.path.join(cache_dir, "%s.%d.tmp" % (key, os.getpid()))
        with open(tmp, "w") as f:
            json.dump(timing, f)
        os.replace(tmp, os.path.join(cache_dir, key + ".json"))
    except OSError:
        pass  # a cache that cannot be written only costs time next run


# ---------------------------------------------------------------------------
# One evaluation (runs in the child)
# ---------------------------------------------------------------------------

def seed_everything(seed):
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % (2 ** 32))
    except ImportError:
        pass


def device_description(device):
    import torch

    if device == "cpu":
        return {"kind": "cpu", "name": platform.processor() or platform.machine(), "interpreter": True}
    props = torch.cuda.get_device_properties(device)
    return {
        "kind": "cuda",
        "name": props.name,
        "capability": "%d.%d" % (props.major, props.minor),
        "memory_bytes": props.total_memory,
        "multiprocessors": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "interpreter": False,
    }


def versions():
    import torch
    import triton

    return {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__}


class PhaseClock:
    """Seconds spent in each phase of an evaluation, into result["phases_s"]."""

    def __init__(self, result):
        self.phases = result.setdefault("phases_s", {})
        self.last = time.time()

    def mark(self, name):
        now = time.time()
        self.phases[name] = now - self.last
        self.last = now


def task_init_inputs(task, result):
    """Constructor arguments from the task (none when it has no get_init_inputs)."""
    if not hasattr(task, "get_init_inputs"):
        result["notes"].append("the task has no get_init_inputs(); constructors get no arguments")
        return []
    try:
        return task.get_init_inputs()
    except Exception as e:  # noqa: BLE001
        raise TaskFailure("the task's get_init_inputs() raised %s: %s" % (type(e).__name__, first_line(str(e))))


def build_reference(task, init_inputs, seed, device):
    try:
        seed_everything(seed)
        return task.Model(*init_inputs).to(device)
    except Exception as e:  # noqa: BLE001
        raise TaskFailure("building the reference Model raised %s: %s" % (type(e).__name__, first_line(str(e))))


def task_inputs(task, seed, device):
    """The task's inputs drawn under `seed`, on the device."""
    seed_everything(seed)
    try:
        return to_device(list(task.get_inputs()), device)
    except Exception as e:  # noqa: BLE001
        raise TaskFailure("the task's get_inputs() raised %s: %s" % (type(e).__name__, first_line(str(e))))


def reference_forward(ref, inputs, device):
    import torch

    try:
        with torch.no_grad():
            out = ref(*inputs)
        sync(device)
        return out
    except Exception as e:  # noqa: BLE001
        raise TaskFailure("the reference Model failed on the task's inputs: %s: %s" % (
            type(e).__name__, first_line(str(e))))


def evaluate(job, progress):
    """Runs one evaluation. Returns the result dict; raises KernelFailure/TaskFailure."""
    import torch

    result = job["_result"]
    device = job["device"]
    interpret = device == "cpu"
    ctx = {"interpret": interpret, "kernel_file": os.path.abspath(job["kernel_file"]),
           "jit_kernels": result["static"].get("jit_kernels", [])}
    # Triton's own `tl` helpers are jit functions decorated when triton is imported, so the
    # interpreter must be on for the whole server: CPU and GPU jobs use different servers.
    server_interprets = os.environ.get("TRITON_INTERPRET") == "1"
    if interpret != server_interprets:
        raise HarnessError("a %s job reached a server %s TRITON_INTERPRET=1" % (
            device, "started with" if server_interprets else "started without"))
    if not interpret:
        if not torch.cuda.is_available():
            raise HarnessError("CUDA is not available in the evaluation process (device %s)" % device)
        torch.cuda.set_device(device)
    result["device"] = device_description(device)
    clock = PhaseClock(result)
    clock.mark("startup")

    progress("loading task")
    task = load_task(job["task_file"])
    if job.get("reference_only"):
        return evaluate_reference(job, task, result, progress, device)
    progress("loading kernel")
    try:
        kernel = load_module(job["kernel_file"], "kforge_kernel")
    except BaseException as e:  # noqa: BLE001 -- everything the candidate raises is classified
        if isinstance(e, KeyboardInterrupt):
            raise
        if isinstance(e, SystemExit):
            raise KernelFailure("import", "the kernel called sys.exit(%s) while being imported" % (e.code,))
        raise classify(e, "import", ctx)
    model_new_cls = getattr(kernel, "ModelNew", None)
    if not isinstance(model_new_cls, type):
        raise KernelFailure("static_check", "the kernel module has no class ModelNew after import")

    init_inputs = task_init_inputs(task, result)

    clock.mark("load")
    progress("building models")
    seed = job["seed"]
    ref = build_reference(task, init_inputs, seed, device)
    try:
        seed_everything(seed)
        new = model_new_cls(*init_inputs)
        if isinstance(new, torch.nn.Module):
            new = new.to(device)
    except Exception as e:  # noqa: BLE001
        raise classify(e, "build", ctx)
    if isinstance(new, torch.nn.Module):
        result["alignment"] = align_parameters(ref, new)

    def inputs_for(trial_seed):
        return task_inputs(task, trial_seed, device)

    def run_reference(inputs):
        return reference_forward(ref, inputs, device)

    def run_kernel(inputs):
        try:
            with torch.no_grad():
                out = new(*inputs)
            sync(device)
            return out
        except Exception as e:  # noqa: BLE001
            raise classify(e, "forward", ctx)

    def check(kind, index, inputs, kernel_inputs=None):
        ref_out = run_reference(clone_tree(inputs))
        new_out = run_kernel(kernel_inputs if kernel_inputs is not None else clone_tree(inputs))
        passed, outputs, reason = compare_outputs(ref_out, new_out, job["atol"], job["rtol"])
        record = {"kind": kind, "index": index, "passed": passed, "outputs": outputs}
        result["trials"].append(record)
        if not passed:
            label = {"random": "trial %d" % (index + 1), "signed": "signed-input trial",
                     "post_timing": "re-check after timing (fresh values in the timing buffers)"}[kind]
            raise KernelFailure("mismatch", "%s: %s" % (label, reason), "%s: %s" % (label, reason),
                                {"trial": index, "kind": kind, "reason": reason, "outputs": outputs})
        return ref_out

    clock.mark("build")
    for t in range(job["trials"]):
        progress("correctness trial %d/%d" % (t + 1, job["trials"]))
        check("random", t, inputs_for(seed + 1 + t))

    if job["signed_trial"]:
        progress("signed-input trial")
        base = inputs_for(seed + 1000)
        seed_everything(seed + 1001)
        signed = signed_like(base)
        ref_out = run_reference(clone_tree(signed))
        finite = all(
            bool(torch.isfinite(v).all()) for _, v in flatten_outputs(ref_out)
            if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex())
        )
        if finite:
            check("signed", job["trials"], signed)
        else:
            result["notes"].append("signed-input trial skipped: the reference is not finite on signed inputs")

    clock.mark("correctness")
    timing_inputs = inputs_for(seed + 2000)
    kernel_buffers = clone_tree(timing_inputs)
    if job["timing"] and not interpret:
        progress("timing")
        result["timing"] = measure(job, task, ref, new, timing_inputs, kernel_buffers, result, progress, device)
    else:
        # No meaningful timing, but the candidate still runs repeatedly on the same
        # buffers, so the re-check below means the same thing as after timing.
        progress("repeated runs on the same buffers")
        for _ in range(max(2, job["warmup"])):
            run_kernel(kernel_buffers)

    clock.mark("timing")
    if job["post_timing_check"]:
        progress("re-check after timing")
        fresh = inputs_for(seed + 3000)
        for (_, buf), (_, value) in zip(flatten_outputs(kernel_buffers, "in"), flatten_outputs(fresh, "in")):
            if isinstance(buf, torch.Tensor):
                with torch.no_grad():
                    buf.copy_(value)
        check("post_timing", job["trials"] + 1, fresh, kernel_inputs=kernel_buffers)

    clock.mark("recheck")
    weak = sorted({o["output"] for t in result["trials"] for o in t["outputs"]
                   if o.get("max_abs_ref") is not None and o["max_abs_ref"] < job["atol"]})
    if weak:
        result["flags"].append("weak_reference")
        result["notes"].append(
            "reference output %s never exceeds atol in magnitude: a kernel returning zeros would pass it"
            % ", ".join(weak))
    result["correct"] = True
    result["status"] = "correct"
    return result


def evaluate_reference(job, task, result, progress, device):
    """Checks the task alone: builds Model, runs forward on its inputs, and (on a GPU)
    times it. What `kforge run` shows when no LLM is configured yet."""
    import torch

    ref = build_reference(task, task_init_inputs(task, result), job["seed"], device)
    inputs = task_inputs(task, job["seed"] + 1, device)
    progress("reference forward")
    out = reference_forward(ref, inputs, device)
    outputs = []
    for path, value in flatten_outputs(out):
        if isinstance(value, torch.Tensor):
            outputs.append({"output": path, "passed": True, "shape": list(value.shape),
                            "dtype": str(value.dtype).replace("torch.", "")})
    result["trials"].append({"kind": "reference", "index": 0, "passed": True, "outputs": outputs})
    if job["timing"] and device != "cpu":
        progress("timing reference")
        flush = l2_flush_buffer(job, result, device)
        key, reference = reference_timing(job, ref, inputs, result, flush, progress)
        result["timing"] = {"meaningful": True, "reference": reference, "kernel": {}, "score": None,
                            "baseline_key": key, "flush_l2_bytes": flush.numel() if flush is not None else 0}
    result["correct"] = True
    result["status"] = "correct"
    result["notes"].append("reference check only: no kernel was evaluated")
    return result


def sync(device):
    import torch

    if device != "cpu":
        torch.cuda.synchronize()


def l2_flush_buffer(job, result, device):
    """A buffer larger than L2 (at least 256 MB), zeroed before each timed run."""
    import torch

    if not job["flush_l2"]:
        return None
    l2 = result["device"].get("l2_bytes") or 0
    return torch.empty(max(256 << 20, 2 * l2), dtype=torch.int8, device=device)


def reference_timing(job, ref, inputs, result, flush, progress):
    """(baseline key, reference timing): from the baseline cache when it has it, else
    measured now (on a copy of the inputs) and cached."""
    key = baseline_key(job["task_source"], result["device"], result["versions"], inputs, job)
    reference = read_baseline(job.get("baseline_cache_dir"), key) if job["baseline_cache"] else None
    if reference is not None:
        reference["cached"] = True
        return key, reference
    try:
        reference = time_model(ref, clone_tree(inputs), job, flush, progress, "reference")
    except Exception as e:  # noqa: BLE001
        raise TaskFailure("timing the reference failed: %s: %s" % (type(e).__name__, first_line(str(e))))
    if job["baseline_cache"]:
        write_baseline(job.get("baseline_cache_dir"), key, reference)
    reference["cached"] = False
    return key, reference


def measure(job, task, ref, new, timing_inputs, kernel_buffers, result, progress, device):
    flush = l2_flush_buffer(job, result, device)
    key, reference = reference_timing(job, ref, timing_inputs, result, flush, progress)
    try:
        kernel = time_model(new, kernel_buffers, job, flush, progress, "kernel")
    except Exception as e:  # noqa: BLE001
        raise classify(e, "forward", {"interpret": False})
    timing = {"meaningful": True, "reference": reference, "kernel": kernel, "baseline_key": key,
              "flush_l2_bytes": flush.numel() if flush is not None else 0}
    timing["score"] = reference["median_ms"] / kernel["median_ms"] if kernel["median_ms"] > 0 else None
    gap = kernel["host_median_ms"] - kernel["median_ms"]
    if gap > HOST_SLACK_MS and kernel["host_median_ms"] > job["host_time_ratio"] * kernel["median_ms"]:
        result["flags"].append("host_time_disagrees")
        # Events missed part of the work: the only honest figure left is the ratio of
        # host-synchronized times, measured the same way for both.
        timing["event_score"] = timing["score"]
        if reference.get("host_median_ms") and kernel["host_median_ms"] > 0:
            timing["score"] = reference["host_median_ms"] / kernel["host_median_ms"]
        result["notes"].append(
            "host-synchronized time %.3f ms vs event time %.3f ms: work may run outside the timed stream; "
            "the score uses host-synchronized times (%.2fx instead of %.2fx)"
            % (kernel["host_median_ms"], kernel["median_ms"], timing["score"] or 0.0, timing["event_score"] or 0.0))
    if timing["score"] is not None and timing["score"] > job["suspicious_speedup"]:
        result["flags"].append("suspicious_speedup")
        result["notes"].append("speedup %.1fx is above %gx: check the kernel does all of the work"
                               % (timing["score"], job["suspicious_speedup"]))
    return timing


class HarnessError(Exception):
    pass


def new_result(job):
    return {
        "schema": 1,
        "id": job.get("id"),
        "status": "failed",
        "correct": False,
        "category": None,
        "summary": "",
        "message": "",
        "details": {},
        "log": "",
        "device": {"kind": "cpu" if job.get("device") == "cpu" else "cuda"},
        "versions": {},
        "static": {"errors": [], "warnings": [], "jit_kernels": [], "launches": []},
        "alignment": None,
        "trials": [],
        "timing": None,
        "flags": [],
        "notes": [],
        "profile": None,
        "phase": None,
        "duration_s": 0.0,
        "child_s": 0.0,
    }


def fail(result, category, summary, message="", details=None):
    result.update({"status": "failed", "correct": False, "category": category, "summary": summary,
                   "message": message or summary, "details": details or {}})
    return result


def child_main(job, result_fd):
    """Body of the evaluation child: fork or spawn lands here. Never returns."""
    status = 0
    writer = os.fdopen(result_fd, "w", buffering=1)
    started = time.time()
    result = job["_result"]

    def progress(phase):
        result["phase"] = phase
        try:
            writer.write(json.dumps({"progress": phase}) + "\n")
        except OSError:
            pass

    try:
        result["versions"] = versions()
        evaluate(job, progress)
    except KernelFailure as f:
        fail(result, f.category, f.summary, f.message, f.details)
    except TaskFailure as f:
        fail(result, "task", str(f))
    except HarnessError as e:
        fail(result, "harness", str(e))
    except SystemExit as e:
        fail(result, "runtime", "the kernel called sys.exit(%s)" % (e.code,))
    except BaseException as e:  # noqa: BLE001 -- a harness bug must still produce a result
        fail(result, "harness", "harness error: %s: %s" % (type(e).__name__, first_line(str(e))),
             clean_text(exception_text(e)))
    result["child_s"] = time.time() - started
    try:
        writer.write(json.dumps({"result": result}, default=str) + "\n")
        writer.flush()
    except BaseException:  # noqa: BLE001
        status = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def prepare_child(workdir, log_path):
    """Process hygiene for an evaluation child: own session, temp dir, no secrets, output
    captured in a log file instead of the protocol stream."""
    scrub_environment(os.environ)
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = workdir
    os.chdir(workdir)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------

class Server:
    def __init__(self, proto):
        self.proto = proto
        self.pending = []
        self.buffer = b""
        self.stdin_open = True
        self.selector = selectors.DefaultSelector()
        self.selector.register(0, selectors.EVENT_READ, "stdin")

    def send(self, obj):
        self.proto.write(json.dumps(obj, default=str) + "\n")
        self.proto.flush()

    def read_stdin(self):
        try:
            chunk = os.read(0, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            self.stdin_open = False
            self.selector.unregister(0)
            return
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line.strip():
                try:
                    self.pending.append(json.loads(line))
                except ValueError:
                    self.send({"event": "error", "error": "malformed request line"})

    def next_request(self):
        while not self.pending and self.stdin_open:
            for key, _ in self.selector.select():
                if key.data == "stdin":
                    self.read_stdin()
        return self.pending.pop(0) if self.pending else None

    def loop(self):
        while True:
            request = self.next_request()
            if request is None:
                return
            op = request.get("op")
            rid = request.get("id")
            try:
                if op == "eval":
                    self.send({"event": "result", "id": rid, "result": self.run_eval(rid, request.get("job") or {})})
                elif op == "static_check":
                    category, report, _ = static_check(request.get("source", ""), request.get("reject_torch_ops", False))
                    self.send({"event": "static", "id": rid, "category": category, "report": report})
                elif op == "device_info":
                    self.send({"event": "device_info", "id": rid, "info": self.device_info()})
                elif op == "ncu_check":
                    self.send({"event": "ncu_check", "id": rid, "info": ncu_check()})
                elif op == "cancel":
                    pass  # nothing running: a late cancel is harmless
                elif op == "shutdown":
                    return
                else:
                    self.send({"event": "error", "id": rid, "error": "unknown op %r" % op})
            except Exception as e:  # noqa: BLE001 -- the server must outlive any request
                self.send({"event": "error", "id": rid, "error": "%s: %s" % (type(e).__name__, e),
                           "traceback": traceback.format_exc()})

    # -- evaluation ---------------------------------------------------------

    def run_eval(self, rid, job):
        started = time.time()
        job = dict(job)
        job["id"] = rid
        result = new_result(job)
        result["versions"] = versions()  # imported already; no CUDA involved
        try:
            kernel_source = open(job["kernel_path"], encoding="utf-8", errors="replace").read()
            task_source = open(job["task_path"], encoding="utf-8", errors="replace").read()
        except OSError as e:
            return fail(result, "harness", "cannot read input file: %s" % e)
        if job.get("reference_only"):
            category, report, syntax = None, result["static"], None
        else:
            category, report, syntax = static_check(kernel_source, job.get("reject_torch_ops", False))
        result["static"] = report
        if category:
            if category == "syntax":
                summary = report["errors"][0]["message"]
                message = summary
                if syntax and syntax.get("text"):
                    caret = " " * max((syntax.get("col") or 1) - 1, 0) + "^"
                    message = "%s\n    %s\n    %s" % (summary, syntax["text"], caret)
                fail(result, "syntax", summary, message, syntax)
            else:
                summary = "; ".join(e["message"] for e in report["errors"])
                fail(result, "static_check", summary, "\n".join(
                    "line %s: %s" % (e["line"], e["message"]) if e["line"] else e["message"]
                    for e in report["errors"]), {"errors": report["errors"]})
            result["duration_s"] = time.time() - started
            return result

        workdir = tempfile.mkdtemp(prefix="kforge-eval-")
        try:
            # Triton reads kernels from source files: the child imports copies that live in
            # its own temp dir, so the originals cannot be changed under it.
            kernel_file = os.path.join(workdir, "kernel.py")
            task_file = os.path.join(workdir, "task.py")
            shutil.copyfile(job["kernel_path"], kernel_file)
            shutil.copyfile(job["task_path"], task_file)
            job.update({"kernel_file": kernel_file, "task_file": task_file, "task_source": task_source})
            job["_result"] = result
            outcome = self.run_child(rid, job, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        outcome["duration_s"] = time.time() - started
        if outcome.get("correct") and job.get("profile") and job.get("device") != "cpu":
            outcome["profile"] = self.run_profile(job)
        return outcome

    def run_child(self, rid, job, workdir):
        log_path = os.path.join(workdir, "output.log")
        read_fd, write_fd = os.pipe()
        use_fork = hasattr(os, "fork") and job.get("executor", "fork") == "fork"
        result = job["_result"]
        if use_fork:
            pid = os.fork()
            if pid == 0:  # child
                try:
                    os.close(read_fd)
                    os.setsid()
                    self.proto.close()
                    prepare_child(workdir, log_path)
                    child_main(job, write_fd)
                finally:
                    os._exit(71)
            process = None
        else:
            job_path = os.path.join(workdir, "job.json")
            with open(job_path, "w") as f:
                json.dump(dict(job, result_fd=write_fd), f, default=str)
            env = dict(os.environ)
            scrub_environment(env)
            log = open(log_path, "ab")
            process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "child", job_path],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=workdir, env=env,
                pass_fds=(write_fd,), start_new_session=True,
            )
            log.close()
            pid = process.pid
        os.close(write_fd)
        self.send({"event": "started", "id": rid, "pid": pid, "executor": "fork" if use_fork else "spawn"})

        deadline = time.time() + float(job.get("timeout_s", 300))
        self.selector.register(read_fd, selectors.EVENT_READ, "child")
        data = b""
        final = None
        ended_by = None  # "timeout" | "cancelled" | "shutdown"
        child_open = True
        try:
            while child_open:
                remaining = deadline - time.time()
                if remaining <= 0:
                    ended_by = "timeout"
                    break
                for key, _ in self.selector.select(timeout=min(remaining, 1.0)):
                    if key.data == "stdin":
                        self.read_stdin()
                        if not self.stdin_open:
                            ended_by = "shutdown"
                        for req in list(self.pending):
                            if req.get("op") == "cancel" and req.get("id") == rid:
                                self.pending.remove(req)
                                ended_by = "cancelled"
                    else:
                        chunk = os.read(read_fd, 1 << 16)
                        if not chunk:
                            child_open = False
                            continue
                        data += chunk
                        while b"\n" in data:
                            line, data = data.split(b"\n", 1)
                            try:
                                message = json.loads(line)
                            except ValueError:
                                continue
                            if "progress" in message:
                                result["phase"] = message["progress"]
                                self.send({"event": "progress", "id": rid, "phase": message["progress"]})
                            elif "result" in message:
                                final = message["result"]
                if ended_by:
                    break
        finally:
            self.selector.unregister(read_fd)
            os.close(read_fd)
        if ended_by:
            kill_group(pid)
        status = reap(pid, process)
        kill_group(pid)  # anything the child left behind in its session
        log = read_log(log_path)

        if ended_by == "shutdown":
            sys.exit(0)
        if ended_by == "cancelled":
            out = fail(result, "cancelled", "evaluation cancelled")
            out["status"] = "cancelled"
        elif ended_by == "timeout":
            out = fail(result, "timeout", "timed out after %gs (during %s)" % (
                float(job.get("timeout_s", 300)), result.get("phase") or "start-up"),
                "the evaluation did not finish within %gs; last phase: %s\n%s" % (
                    float(job.get("timeout_s", 300)), result.get("phase") or "start-up",
                    clean_text(log, 40)))
        elif final is not None:
            out = final
        else:
            out = fail(result, "crash", describe_exit(status, result.get("phase")),
                       "%s\n%s" % (describe_exit(status, result.get("phase")), clean_text(log)))
            out["details"] = exit_details(status)
        out["log"] = tail_bytes(((out.get("log") or "") + log))
        if out.get("category") not in (None, "syntax", "static_check") and out.get("message"):
            out["log"] = tail_bytes(out["log"] + "\n" + out["message"])
        return out

    def device_info(self):
        """Runs in a forked child: the server must never initialize CUDA."""
        read_fd, write_fd = os.pipe()
        pid = os.fork() if hasattr(os, "fork") else None
        if pid == 0:
            try:
                os.close(read_fd)
                info = {}
                try:
                    import torch

                    info["cuda_available"] = torch.cuda.is_available()
                    info["devices"] = [device_description(i) for i in range(torch.cuda.device_count())] \
                        if info["cuda_available"] else []
                    info["cuda_version"] = torch.version.cuda
                except Exception as e:  # noqa: BLE001
                    info["error"] = "%s: %s" % (type(e).__name__, e)
                os.write(write_fd, json.dumps(info).encode())
            finally:
                os._exit(0)
        os.close(write_fd)
        if pid is None:
            os.close(read_fd)
            return {"error": "os.fork is unavailable on this platform"}
        chunks = []
        deadline = time.time() + 120
        sel = selectors.DefaultSelector()
        sel.register(read_fd, selectors.EVENT_READ)
        while time.time() < deadline:
            if sel.select(timeout=1.0):
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        sel.close()
        os.close(read_fd)
        kill_group(pid, own_group=False)
        status = reap(pid, None)
        try:
            return json.loads(b"".join(chunks) or b"{}") or {"error": describe_exit(status, "device query")}
        except ValueError:
            return {"error": describe_exit(status, "device query")}

    def run_profile(self, job):
        return run_ncu(job)


def kill_group(pid, own_group=True):
    try:
        if own_group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def reap(pid, process):
    if process is not None:
        return process.wait()
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def exit_details(status):
    if status is None:
        return {}
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "signal %d" % -status
        return {"signal": name, "signal_number": -status}
    return {"exit_code": status}


def describe_exit(status, phase):
    where = " during %s" % phase if phase else ""
    if status is None:
        return "the evaluation process vanished%s" % where
    if status < 0:
        name = exit_details(status)["signal"]
        meaning = {"SIGSEGV": "segmentation fault", "SIGKILL": "killed", "SIGABRT": "aborted",
                   "SIGBUS": "bus error", "SIGFPE": "floating-point exception", "SIGILL": "illegal instruction"}
        return "the evaluation process died from %s (%s)%s" % (name, meaning.get(name, "signal"), where)
    return "the evaluation process exited with code %d without a result%s" % (status, where)


def read_log(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - LOG_LIMIT))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------
# Nsight Compute
# ---------------------------------------------------------------------------

NCU_METRICS = [
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_dynamic",
    "launch__shared_mem_per_block_static",
    "launch__grid_size",
    "launch__block_size",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
]
NCU_PERMISSION_FIX = ("GPU performance counters are not permitted for this user: run as root, or load the "
                      "driver with NVreg_RestrictProfilingToAdminUsers=0 (see NVIDIA's ERR_NVGPUCTRPERM page)")


def find_ncu():
    explicit = os.environ.get("KFORGE_NCU")
    if explicit:
        return explicit if os.path.exists(explicit) else None
    found = shutil.which("ncu")
    if found:
        return found
    for base in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute"):
        if os.path.isfile(base):
            return base
        if os.path.isdir(base):
            for root, _, files in os.walk(base):
                if "ncu" in files:
                    return os.path.join(root, "ncu")
    return None


def ncu_check():
    ncu = find_ncu()
    if not ncu:
        return {"found": False, "message": "ncu (Nsight Compute) not found on PATH; install Nsight Compute or set KFORGE_NCU"}
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60)
        version = (out.stdout.strip().splitlines() or ["?"])[-1]
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"found": True, "path": ncu, "message": "ncu --version failed: %s" % e}
    probe = ("import torch; x = torch.ones(1024, device='cuda'); torch.cuda.synchronize(); "
             "y = x * 2; torch.cuda.synchronize()")
    try:
        run = subprocess.run([ncu, "--metrics", "gpu__time_duration.sum", "--launch-count", "1",
                              sys.executable, "-c", probe], capture_output=True, text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"found": True, "path": ncu, "version": version, "permitted": None,
                "message": "the permission probe did not finish: %s" % e}
    text = run.stdout + run.stderr
    if "ERR_NVGPUCTRPERM" in text:
        return {"found": True, "path": ncu, "version": version, "permitted": False, "message": NCU_PERMISSION_FIX}
    permitted = "gpu__time_duration.sum" in text
    return {"found": True, "path": ncu, "version": version, "permitted": permitted,
            "message": "" if permitted else "ncu ran but reported no metric: " + first_line(clean_text(text, 5))}


def run_ncu(job):
    """Profiles one forward of ModelNew in a fresh process under ncu."""
    ncu = find_ncu()
    if not ncu:
        return {"available": False, "reason": "ncu (Nsight Compute) not found on PATH; install it or set KFORGE_NCU"}
    workdir = tempfile.mkdtemp(prefix="kforge-ncu-")
    try:
        kernel_file = os.path.join(workdir, "kernel.py")
        task_file = os.path.join(workdir, "task.py")
        shutil.copyfile(job["kernel_path"], kernel_file)
        shutil.copyfile(job["task_path"], task_file)
        job_path = os.path.join(workdir, "profile.json")
        with open(job_path, "w") as f:
            json.dump({"task_file": task_file, "kernel_file": kernel_file, "seed": job["seed"],
                       "device": job["device"]}, f)
        report = os.path.join(workdir, "ncu.csv")
        env = dict(os.environ)
        scrub_environment(env)
        command = [ncu, "--csv", "--page", "raw", "--profile-from-start", "off", "--target-processes", "all",
                   "--metrics", ",".join(NCU_METRICS), "--log-file", report,
                   sys.executable, os.path.abspath(__file__), "profile", job_path]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=float(job.get("profile_timeout_s", 300)),
                                 cwd=workdir, env=env)
        except subprocess.TimeoutExpired:
            return {"available": False, "reason": "Nsight Compute did not finish in time"}
        text = read_log(report)
        if "ERR_NVGPUCTRPERM" in text + run.stdout + run.stderr:
            return {"available": False, "reason": NCU_PERMISSION_FIX}
        kernels = parse_ncu_csv(text)
        if not kernels:
            return {"available": False, "reason": "Nsight Compute reported no kernel: " +
                    first_line(clean_text(text + run.stderr, 10))}
        return {"available": True, "tool": "ncu", "kernels": kernels}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def parse_ncu_csv(text):
    import csv
    import io

    lines = [l for l in text.splitlines() if l.startswith('"')]
    if len(lines) < 2:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    kernels = []
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        record = dict(zip(header, row))
        if record.get("ID", "").strip() == "" or not record.get("ID", "0").strip().isdigit():
            continue  # the units row
        metrics = {}
        for name in NCU_METRICS:
            raw = record.get(name, "").replace(",", "")
            try:
                metrics[name] = float(raw)
            except ValueError:
                if raw:
                    metrics[name] = raw
        kernels.append({"name": record.get("Kernel Name", "?"), "metrics": metrics})
    return kernels


def profile_main(job_path):
    """One warmed-up forward of ModelNew between cudaProfilerStart/Stop."""
    import torch

    with open(job_path) as f:
        job = json.load(f)
    scrub_environment(os.environ)
    task = load_task(job["task_file"])
    kernel = load_module(job["kernel_file"], "kforge_kernel")
    device = job["device"]
    seed_everything(job["seed"])
    init = task.get_init_inputs() if hasattr(task, "get_init_inputs") else []
    model = kernel.ModelNew(*init).to(device)
    seed_everything(job["seed"] + 2000)
    inputs = to_device(list(task.get_inputs()), device)
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------

def serve():
    # The protocol gets a private copy of stdout; fd 1 becomes stderr so stray prints from
    # imports can never corrupt the JSON stream.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    scrub_environment(os.environ)
    started = time.time()
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except BaseException as e:  # noqa: BLE001
        proto.write(json.dumps({"event": "hello", "ok": False, "protocol": PROTOCOL,
                                "python": platform.python_version(), "executable": sys.executable,
                                "error": "%s: %s" % (type(e).__name__, e)}) + "\n")
        proto.flush()
        return 3
    hello = {"event": "hello", "ok": True, "protocol": PROTOCOL, "pid": os.getpid(),
             "executable": sys.executable, "import_s": time.time() - started,
             "interpret": os.environ.get("TRITON_INTERPRET") == "1", "fork": hasattr(os, "fork")}
    hello.update(versions())
    proto.write(json.dumps(hello) + "\n")
    proto.flush()
    Server(proto).loop()
    return 0


def spawned_child(job_path):
    with open(job_path) as f:
        job = json.load(f)
    workdir = os.path.dirname(job_path)
    scrub_environment(os.environ)
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = workdir
    child_main(job, int(job["result_fd"]))


def main(argv):
    if len(argv) >= 2 and argv[1] == "serve":
        return serve()
    if len(argv) >= 3 and argv[1] == "child":
        spawned_child(argv[2])
        return 0
    if len(argv) >= 3 and argv[1] == "profile":
        profile_main(argv[2])
        return 0
    if len(argv) >= 3 and argv[1] == "static-check":
        with open(argv[2]) as f:
            category, report, _ = static_check(f.read(), "--reject-torch-ops" in argv)
        print(json.dumps({"category": category, "report": report}, indent=2))
        return 1 if category else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
