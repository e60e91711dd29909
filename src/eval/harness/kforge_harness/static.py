"""Static checks of a candidate's source: pure AST, nothing of the candidate runs here.

A fast first filter in front of the dynamic audit, never the only line."""

import ast
import re


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
