"""Static checks of a candidate's source: pure AST, nothing of the candidate runs here.

A fast first filter in front of the sandbox and the dynamic audit, never the only line. It
refuses what no kernel needs -- threads, processes, signals, files, sockets, native code,
frame and object introspection, code built at run time, patching of imported modules --
however the source spells it, as far as a pure AST can resolve the spelling:

- Names resolve to what they were imported as: `import x as y`, `from x import y as z`,
  `__import__("x")`, `getattr(obj, "literal")` and plain assignments (`name = expr`, and
  `obj.attr = expr` under the name "obj.attr") anywhere in the file. Flow-insensitive: a name
  that is ever an alias of `os` counts as `os` everywhere. `torch.serialization.os.fork` counts
  as `os.fork`; `type(x)` and `x.__class__` resolve to a class, so patching them is patching.
- A module, or a timer such as torch.cuda.Event, may only be used through its attributes or
  aliased by a plain `name = ...`: passed as an argument, stored in a container or an
  attribute, or returned, it would reach code the resolution cannot follow.
- Attribute names that reach frames, globals or the class graph (`f_back`, `__globals__`,
  `__subclasses__`, ...) are refused on any object, and so is any string constant, or constant
  expression such as "__glo" + "bals__", that spells one.
- getattr/setattr/delattr/hasattr with a computed name on a module (anything imported) are
  refused; `__import__` and `import_module` take only a literal module name.

Decisions:
- open() and every other way to read or write files (io.open, os.open, pathlib, shutil,
  linecache, torch.load, numpy.load, ...) is refused: a kernel gets everything through
  forward's arguments, and file reads are how /proc/<pid>/environ or /proc/<pid>/mem leak.
- os.environ may be read (get, [], in, items, os.getenv): kernels now and then read a tuning
  knob, the sandbox hands the worker a scrubbed environment, and
  tests/fixtures/kernels/relu_print_env.py relies on it. Writes are refused: they would steer
  triton or the harness for the rest of the process.
- os and sys are allow-lists (os.path, os.environ reads, os.getpid, os.cpu_count, sys.maxsize,
  sys.stdout, ...): the rest of them is process, file or interpreter control.
- setattr/delattr are allowed on `self` (nn.Module code registers parameters that way); on
  another object that does not resolve to a module or class, setattr is a warning and delattr
  an error. getattr with a computed name on such an object is a warning.
- torch.library may register Triton kernels as new ops (triton_op, wrap_triton, custom_op);
  Library/impl, which override existing (aten) ops, are refused with torch.overrides and
  dispatch modes.
- Star imports only from math, typing and triton.language; no imports inside class bodies.
"""

import ast
import builtins
import re

_PROCESS = "signals, threads and processes are not allowed"
_INTROSPECT = "frame and object introspection is not allowed (it reaches the harness and the reference)"
_NATIVE = "native code and raw memory access are not allowed"
_NET = "network access is not allowed"
_CODE = "code loaded or built at run time is not allowed (no check could see it)"
_FILES = ("kernels never read or write files: everything comes through forward's arguments "
          "(and files under /proc leak secrets)")
_HARNESS = "the harness is off limits to the kernel"
_DISPATCH = "overriding torch's operator dispatch is not allowed (it changes what torch computes for everyone)"

# Module (or dotted name) prefix -> (rule, why). Anything below a prefix is refused with it.
FORBIDDEN = {}
for _names, _rule, _why in [
    ("threading _thread multiprocessing subprocess concurrent asyncio pty _posixsubprocess "
     "_interpreters _xxsubinterpreters", "threads", "threads and processes are not allowed"),
    ("signal _signal posix nt resource atexit fcntl termios", "process", _PROCESS),
    ("gc inspect traceback tracemalloc pdb bdb trace cProfile profile sys.monitoring "
     "logging.currentframe", "introspection", _INTROSPECT),
    ("torch.overrides torch.utils._python_dispatch", "dispatch", _DISPATCH),
    ("builtins", "introspection", "builtins is off limits (it holds eval, open and __import__, and a patch of it "
     "changes every module)"),
    ("__main__ kforge_harness kforge_task", "introspection", _HARNESS),
    ("ctypes _ctypes cffi mmap faulthandler _testcapi _testinternalcapi torch.utils.cpp_extension "
     "torch.ops.load_library torch.classes.load_library torch.cuda.jiterator triton.runtime.build "
     "numpy.ctypeslib", "native", _NATIVE),
    ("socket _socket ssl http urllib urllib3 requests httpx aiohttp ftplib smtplib socketserver "
     "xmlrpc websocket websockets", "network", _NET),
    ("pickle _pickle cPickle marshal shelve dill cloudpickle copyreg importlib imp runpy code codeop "
     "zipimport pkgutil", "dynamic_code", _CODE),
    ("pathlib shutil tempfile glob fileinput linecache tokenize io.open io.open_code io.FileIO "
     "codecs.open torch.load torch.save torch.from_file numpy.load numpy.save numpy.savez "
     "numpy.savez_compressed numpy.fromfile numpy.loadtxt numpy.savetxt numpy.genfromtxt numpy.memmap",
     "files", _FILES),
    ("operator.attrgetter operator.methodcaller", "computed_name",
     "computed attribute access is not allowed (use plain attribute access)"),
    ("unittest.mock mock", "patching", "patching is not allowed"),
]:
    FORBIDDEN.update(dict.fromkeys(_names.split(), (_rule, _why)))

# Module names that count as that module wherever they appear in a chain: torch.serialization.os
# is os. Only names that are never anything but the module (not `signal`, `trace`: torch has
# torch.signal and torch.jit.trace).
REROOT = {"os", "sys", "builtins", "gc", "ctypes", "subprocess", "inspect", "importlib", "threading",
          "multiprocessing", "pickle", "marshal", "posix", "_thread", "socket", "shutil"}

OS_ALLOWED = {"environ", "getenv", "path", "sep", "linesep", "pathsep", "curdir", "pardir", "extsep",
              "altsep", "devnull", "name", "cpu_count", "getpid", "fspath", "PathLike"}
OS_PROCESS = re.compile(r"^(fork\w*|kill\w*|system|popen|exec\w*|spawn\w*|posix_spawn\w*|_exit|abort|"
                        r"set\w*id|setpgrp|unshare|setns|wait\w*|pidfd\w*|register_at_fork|sched_\w+|"
                        r"nice|chroot|chdir|fchdir|plock)$")
ENVIRON_READS = {"get", "items", "keys", "values", "copy", "__contains__", "__getitem__", "__iter__", "__len__"}
SYS_ALLOWED = {"maxsize", "float_info", "int_info", "hash_info", "version", "version_info", "hexversion",
               "implementation", "byteorder", "platform", "stdout", "stderr", "maxunicode",
               "float_repr_style", "getsizeof", "getrecursionlimit", "getdefaultencoding"}

# Builtins (resolved as "@.name") refused by name.
BANNED_BUILTINS = {
    "eval": _CODE, "exec": _CODE, "compile": _CODE, "__import__": _CODE,
    "globals": "reaching namespaces by name is not allowed (frame and module introspection)",
    "locals": "reaching namespaces by name is not allowed (frame and module introspection)",
    "vars": "reaching namespaces by name is not allowed (frame and module introspection)",
    "breakpoint": "debuggers are not allowed", "open": _FILES,
    "exit": "ending the process is not allowed", "quit": "ending the process is not allowed",
}
BUILTIN_NAMES = set(dir(builtins))
# Attributes that reach frames, code, globals or the class graph, refused on any object.
BANNED_ATTRS = {
    "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next",
    "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "__traceback__", "__globals__",
    "__closure__", "__code__", "__subclasses__", "__mro__", "mro", "__bases__", "__base__",
    "__builtins__", "__self__", "__getattribute__", "__setattr__", "__delattr__", "__reduce__",
    "__reduce_ex__", "__loader__", "__spec__", "__import__", "__dict__",
    "_getframe", "_current_frames", "settrace", "setprofile", "addaudithook", "get_objects",
    "get_referrers", "get_referents",
}
BANNED_NAMES = {"__loader__", "__spec__"}  # __builtins__ resolves to the module builtins
# Strings that spell one of these (getattr(x, n) with n built elsewhere) are refused too.
BANNED_STRINGS = BANNED_ATTRS - {"mro", "__dict__"}
_FORMAT_REACH = re.compile(r"\{[^{}]*[.\[](%s)\b[^{}]*\}" % "|".join(sorted(BANNED_STRINGS)))
# Timers and the objects a patch would aim at: like modules, usable only through attributes.
PROTECTED = {"torch.cuda.Event", "torch.cuda.synchronize", "torch.cuda.current_stream", "time.time",
             "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
             "time.monotonic_ns", "time.process_time", "timeit.default_timer", "torch.Tensor",
             "torch.nn.Module", "os.environ"}
KNOWN_MODULES = {"os", "os.path", "sys", "time", "timeit", "gc", "builtins", "math", "torch", "torch.cuda",
                 "torch.backends", "torch.nn", "torch.nn.functional", "torch.cuda.amp", "torch.autograd",
                 "torch.utils", "torch.testing", "torch.serialization", "triton", "triton.language",
                 "triton.runtime", "triton.compiler", "triton.testing", "numpy"}
STAR_IMPORT_OK = {"math", "triton.language", "typing"}
# torch.library registers Triton kernels as new ops (legitimate); Library/impl would override aten.
TORCH_LIBRARY_OK = {"triton_op", "wrap_triton", "custom_op", "register_fake", "register_autograd"}
ATTR_FUNCS = ("getattr", "hasattr", "setattr", "delattr")
CLASS = "<class>"  # what type(x) and x.__class__ resolve to: a patch of it patches e.g. torch.cuda.Event
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
        entry = {"rule": rule, "message": message, "line": line}
        if entry not in self.errors:
            self.errors.append(entry)

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
    report.errors.sort(key=lambda e: e["line"] or 0)
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

    _security_rules(tree, report)

    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            if name in ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.Stream"):
                report.warn("side_stream", "uses a side CUDA stream (%s): timing is cross-checked against host time" % name, line)
            if name.split(".")[-1] == "suppress" and ("contextlib" in name or name == "suppress"):
                report.error("fallback", "contextlib.suppress hides kernel failures", line)
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


# ---------------------------------------------------------------- forbidden names, by any spelling

def fold(node, depth=0):
    """The value of a constant string expression ("fo" + "rk", "".join([...]), "krof"[::-1],
    chr(102), f"{'fo'}rk", ...), else None. Nothing of the candidate runs: only these operations
    on constants are evaluated, none of which can grow a value much past the limit it is cut at
    (no %-formatting or str.format: a width of 10**9 would be one)."""
    value = _fold(node, depth)
    return None if isinstance(value, (str, bytes, list, tuple)) and len(value) > 4096 else value


def _fold(node, depth):
    if depth > 100:
        return None
    sub = lambda n: fold(n, depth + 1)  # noqa: E731
    if isinstance(node, ast.Constant):
        v = node.value
        return v if isinstance(v, (str, bytes, int)) and not isinstance(v, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = sub(node.operand)
        return (-value if isinstance(node.op, ast.USub) else value) if isinstance(value, int) else None
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [sub(e) for e in node.elts]
        return None if any(i is None for i in items) else (list if isinstance(node, ast.List) else tuple)(items)
    try:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            terms = [node.right]  # "a" + "b" + ... nests to the left: walked in a loop, not recursed
            while isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Add):
                node = node.left
                terms.append(node.right)
            values = [sub(t) for t in [node.left] + terms[::-1]]
            if any(v is None for v in values) or len({type(v) for v in values}) != 1 or \
                    sum(len(v) if isinstance(v, (str, bytes, list, tuple)) else 0 for v in values) > 4096:
                return None
            first = values[0]
            if isinstance(first, int):
                return sum(values)
            return first[:0].join(values) if isinstance(first, (str, bytes)) else sum(values, type(first)())
        if isinstance(node, ast.BinOp):
            left, right = sub(node.left), sub(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Mult) and isinstance(right, int) and len(str(left)) * right <= 4096:
                return left * right
            return None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    if v.format_spec is not None or v.conversion != -1:
                        return None
                    v = v.value
                part = sub(v)
                if part is None:
                    return None
                parts.append(str(part))
            return "".join(parts)
        if isinstance(node, ast.Subscript):
            value, s = sub(node.value), node.slice
            if not isinstance(value, (str, bytes, list, tuple)):
                return None
            if isinstance(s, ast.Slice):
                bounds = [None if b is None else sub(b) for b in (s.lower, s.upper, s.step)]
                if any(b is None and e is not None for b, e in zip(bounds, (s.lower, s.upper, s.step))):
                    return None
                return value[slice(*bounds)]
            index = sub(s)
            return value[index] if isinstance(index, int) else None
        if isinstance(node, ast.Call) and not node.keywords:
            f = node.func
            if isinstance(f, ast.Name) and f.id == "map" and len(node.args) == 2 and isinstance(node.args[0], ast.Name):
                # map(chr, [...]): the first argument is a function, not a constant.
                seq = sub(node.args[1])
                return [chr(c) for c in seq] if node.args[0].id == "chr" and isinstance(seq, (list, tuple)) else None
            args = [sub(a) for a in node.args]
            if any(a is None for a in args):
                return None
            if isinstance(f, ast.Name) and f.id in ("chr", "str", "reversed", "list", "tuple", "sorted", "bytes"):
                if f.id == "chr" and args and isinstance(args[0], int):
                    return chr(args[0])
                if f.id != "chr" and len(args) == 1 and isinstance(args[0], (str, bytes, list, tuple)):
                    return {"str": str, "reversed": lambda v: list(reversed(v)), "list": list, "tuple": tuple,
                            "sorted": sorted, "bytes": bytes}[f.id](args[0])
                return None
            if isinstance(f, ast.Attribute):
                if isinstance(f.value, ast.Name) and f.value.id == "bytes" and f.attr == "fromhex":
                    return bytes.fromhex(*args)
                obj = sub(f.value)
                if isinstance(obj, (str, bytes)) and f.attr in (
                        "join", "replace", "lower", "upper", "strip", "lstrip", "rstrip", "decode", "encode",
                        "capitalize", "title", "swapcase", "removeprefix", "removesuffix", "casefold"):
                    return getattr(obj, f.attr)(*args)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError, AttributeError):
        return None
    return None


def _forbidden_rooted(parts):
    for n in range(1, len(parts) + 1):
        prefix = ".".join(parts[:n])
        if prefix in FORBIDDEN:
            rule, why = FORBIDDEN[prefix]
            return rule, ".".join(parts), why
    root, attr = parts[0], (parts[1] if len(parts) > 1 else None)
    if root != "@" and any(p in BANNED_ATTRS for p in parts[1:]):
        return "introspection", ".".join(parts), _INTROSPECT
    if root == "@" and attr in BANNED_BUILTINS:
        rule = {"open": "files", "exit": "process", "quit": "process"}.get(attr, "dynamic_code")
        if attr in ("globals", "locals", "vars", "breakpoint"):
            rule = "introspection"
        return rule, attr, BANNED_BUILTINS[attr]
    if root == "os" and attr == "environ" and len(parts) > 2 and parts[2] not in ENVIRON_READS:
        return "environment", "os.environ." + parts[2], "writing the environment is not allowed (reads are)"
    if root == "os" and attr is not None and attr not in OS_ALLOWED:
        if OS_PROCESS.match(attr):
            return "process", "os." + attr, _PROCESS
        if attr in ("putenv", "unsetenv"):
            return "environment", "os." + attr, "writing the environment is not allowed (reads are)"
        return "files", "os." + attr, ("kernels never touch files, descriptors or the process (of os only "
                                       "os.environ reads, os.getenv, os.path and os.cpu_count are allowed)")
    if root == "sys" and attr is not None and attr not in SYS_ALLOWED:
        if attr == "exit":
            return "process", "sys.exit", "ending the process is not allowed"
        return "introspection", "sys." + attr, ("frame and interpreter introspection (frames, tracing, audit "
                                                "hooks, sys.modules, sys.path) is not allowed")
    if root == "torch" and attr == "library" and len(parts) > 2 and parts[2] not in TORCH_LIBRARY_OK:
        return "dispatch", ".".join(parts), _DISPATCH + " (of torch.library only %s are allowed)" % ", ".join(
            sorted(TORCH_LIBRARY_OK))
    if root == "torch" and any(p.startswith(("register_module_", "_global_")) for p in parts):
        return "introspection", ".".join(parts), "global module hooks see every module's inputs and outputs"
    return None


def forbidden(q):
    """(rule, subject, why) when the dotted name q is refused, else None."""
    parts = q.split(".")
    for i, part in enumerate(parts):
        if i == 0 or part in REROOT:
            hit = _forbidden_rooted(parts[i:])
            if hit:
                return hit
    return None


def show(q):
    return q[2:] if q.startswith("@.") else q


class Names:
    """Resolution of names and attribute chains to dotted names of what was imported ("os.fork",
    "torch.cuda.Event") or of builtins ("@.open"), through imports and plain assignments."""

    def __init__(self, tree):
        self.parent = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.bindings = {}
        self.modules = set(KNOWN_MODULES)
        self.annotations = set()
        aliases = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    self.modules.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                    self.bind(a.asname or parts[0], a.name if a.asname else parts[0])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.bind(a.asname or a.name, node.module + "." + a.name)
            elif self.is_alias(node):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                aliases.append(([t.id for t in targets], node.value))
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and dotted(node.targets[0]):
                # self.cls = type(x): attribute targets are bound by their dotted name ("self.cls"). A
                # module or timer stored this way is refused as a value use; this follows the rest.
                aliases.append(([dotted(node.targets[0])], node.value))
            annotations = [getattr(node, "returns", None), getattr(node, "annotation", None)]
            for a in annotations:
                if a is not None:
                    self.annotations.update(id(n) for n in ast.walk(a))
        for _ in range(4):  # `a = os; b = a; c = b.path`: a few rounds reach a fixed point in practice
            for targets, value in aliases:
                for q in self.qual(value):
                    for t in targets:
                        self.bind(t, q)

    def bind(self, name, q):
        quals = self.bindings.setdefault(name, set())
        if len(quals) < 16 and q.count(".") < 12:
            quals.add(q)

    def is_alias(self, node):
        """`name = expr` (or `a = b = expr`, `name: T = expr`) outside a class body."""
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            return False
        return all(isinstance(t, ast.Name) for t in targets) and not isinstance(self.parent.get(node), ast.ClassDef)

    def qual(self, node):
        if isinstance(node, ast.Name):
            quals = set(self.bindings.get(node.id, ()))
            if node.id in BUILTIN_NAMES:
                quals.add("@." + node.id)
            if node.id == "__builtins__":
                quals.add("builtins")
            return quals
        if isinstance(node, ast.Attribute):
            if node.attr == "__class__":
                return {CLASS}
            quals = {q + "." + node.attr for q in self.qual(node.value) if not q.startswith("@.")}
            return quals | self.bindings.get(dotted(node), set())
        if isinstance(node, ast.Call) and node.args:
            func = self.qual(node.func)
            if "@.type" in func and len(node.args) == 1:
                return {CLASS}
            name = fold(node.args[1]) if len(node.args) > 1 else None
            if "@.getattr" in func and isinstance(name, str):  # a computed name is refused elsewhere
                return {q + "." + name for q in self.resolved(node.args[0])}
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                if "@.__import__" in func:
                    fromlist = len(node.args) > 3 or any(k.arg == "fromlist" for k in node.keywords)
                    return {first.value if fromlist else first.value.split(".")[0]}
                if any(q.endswith("import_module") for q in func):
                    return {first.value}
        return set()

    def resolved(self, node):
        """The dotted names of imported things (or CLASS) node may be; builtins left out."""
        return {q for q in self.qual(node) if not q.startswith("@.")}

    def is_module(self, q):
        parts = q.split(".")
        return any(".".join(parts[i:]) in self.modules for i, p in enumerate(parts) if i == 0 or p in REROOT)


def _is_self(node):
    return (dotted(node) or "").split(".")[0] == "self"


def _patched(base):
    """What a patch of something resolved to `base` hits, and why that is refused."""
    q = sorted(base)[0]
    if q.startswith(CLASS):
        return "a class reached through type() or __class__", "patching classes of objects is not allowed"
    return q, "patching imported modules (torch, triton, timers) is not allowed"


def _src(node, limit=60):
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _security_rules(tree, report):
    names = Names(tree)

    def refuse(rule, what, why, line):
        report.error(rule, "%s (line %s): %s" % (what, line, why), line)

    seen = set()

    def check_name(q, how, line, node=None):
        hit = forbidden(q)
        if not hit:
            return
        rule, subject, why = hit
        # One error per name and line: `gc.get_objects` is not also reported as `gc`.
        if any(l == line and (s == subject or s.startswith(subject + ".") or subject.startswith(s + "."))
               for s, l in seen):
            return
        seen.add((subject, line))
        written = _src(node) if node is not None else show(q)
        refuse(rule, "%s %s" % (how, subject) + ("" if written == subject else " (written %s)" % written), why, line)

    def value_use_allowed(node):
        parent = names.parent.get(node)
        if (isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node) or \
                (isinstance(parent, ast.Call) and parent.func is node) or id(node) in names.annotations:
            return True
        if isinstance(parent, (ast.Compare, ast.Expr)) or (isinstance(parent, ast.ClassDef) and node in parent.bases):
            return True
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is node and names.is_alias(parent):
            return True
        call = names.parent.get(parent) if isinstance(parent, ast.Tuple) else parent
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
                call.func.id in ("isinstance", "issubclass"):
            return True
        # getattr(os, ...) and friends: the object of an attribute function is checked by that rule.
        return isinstance(parent, ast.Call) and parent.args[:1] == [node] and \
            any(show(q) in ATTR_FUNCS for q in names.qual(parent.func))

    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)

        # --- imports, by statement
        if isinstance(node, ast.Import):
            for a in node.names:
                check_name(a.name, "imports", line)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                refuse("imports", "relative import from %s%s" % ("." * node.level, module),
                       "the kernel is a single file", line)
            else:
                for a in node.names:
                    if a.name != "*":
                        check_name(module + "." + a.name, "imports", line)
                    elif forbidden(module):
                        check_name(module, "imports", line)
                    elif module not in STAR_IMPORT_OK:
                        refuse("imports", "from %s import *" % module,
                               "star imports hide which names are used (import them by name)", line)

        if isinstance(node, (ast.Import, ast.ImportFrom)) and isinstance(names.parent.get(node), ast.ClassDef):
            refuse("imports", "import in the body of class %s" % names.parent[node].name,
                   "it makes the module a class attribute, out of reach of the checks", line)

        # --- attributes that reach frames, globals, code and the class graph, on any object
        if isinstance(node, ast.Attribute) and node.attr in BANNED_ATTRS:
            if not (node.attr == "__dict__" and isinstance(node.value, ast.Name) and node.value.id == "self"):
                full = sorted(show(q) for q in names.resolved(node))
                for q in full:  # reported here, not again by the names check below
                    seen.add((q, line))
                if full:
                    what = "uses " + full[0] + ("" if _src(node) == full[0] else " (written %s)" % _src(node))
                else:
                    what = "uses .%s on %s" % (node.attr, _src(node.value))
                refuse("introspection", what, _INTROSPECT, line)
        if isinstance(node, ast.Name) and node.id in BANNED_NAMES:
            refuse("introspection", "uses %s" % node.id, _INTROSPECT, line)

        if isinstance(node, ast.Call):  # before the names: `__import__("gc")` is reported as an import
            _check_call(node, names, refuse, check_name, report, line)

        # --- what names and attribute chains resolve to
        loads = isinstance(getattr(node, "ctx", ast.Load()), ast.Load)
        if isinstance(node, (ast.Name, ast.Attribute, ast.Call)) and loads:
            quals = names.qual(node)
            parent = names.parent.get(node)
            called_import = isinstance(parent, ast.Call) and parent.func is node and "@.__import__" in quals
            for q in sorted(quals):
                if not (called_import and q == "@.__import__"):  # the call was checked above
                    check_name(q, "uses", line, node)
            if not value_use_allowed(node):
                for q in sorted(quals):
                    if not q.startswith("@.") and (names.is_module(q) or any(
                            q == p or q.startswith(p + ".") for p in PROTECTED)):
                        refuse("module_value", "uses %s as a value" % q,
                               "modules and timers may only be used through their attributes (passed "
                               "around, what is done with them cannot be checked)", line)
                        break

        # --- assignments to attributes and items of imported things
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            verb = "deletes" if isinstance(node.ctx, ast.Del) else "assigns"
            base = names.resolved(node.value)
            target = _src(node)
            full = sorted(q + "." + node.attr for q in base) if isinstance(node, ast.Attribute) else sorted(base)
            shown = target if not full or full[0] == target else "%s (%s)" % (target, full[0])
            if any(q.endswith("os.environ") for q in (full if isinstance(node, ast.Attribute) else base)):
                refuse("environment", "%s %s" % (verb, shown),
                       "writing the environment is not allowed (reads are)", line)
            elif base:
                hit, why = _patched(base)
                refuse("patching", "%s %s" % (verb, shown if hit == sorted(base)[0] else "%s (%s)" % (target, hit)),
                       why, line)

        # --- strings that spell a banned attribute: getattr(x, n) with n built somewhere else
        parent = names.parent.get(node)
        attr_name = isinstance(parent, ast.Call) and parent.args[1:2] == [node] and \
            any(show(q) in ATTR_FUNCS for q in names.qual(parent.func))  # checked by _check_call
        if isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)) and \
                not isinstance(parent, (ast.BinOp, ast.JoinedStr)) and not attr_name:
            text = fold(node)
            if isinstance(text, bytes):
                text = text.decode("latin-1")
            if isinstance(text, str) and (text in BANNED_STRINGS or _FORMAT_REACH.search(text)):
                refuse("introspection", "the string %r names an introspection attribute" % text[:60],
                       _INTROSPECT, line)


def _check_call(node, names, refuse, check_name, report, line):
    func = {show(q) for q in names.qual(node.func)}
    args = node.args
    if "__import__" in func or any(q.endswith("importlib.import_module") for q in func):
        first = args[0] if args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            check_name(first.value, "imports", line)
        else:
            computed = fold(first) if first is not None else None
            refuse("dynamic_code", "%s(%s)" % (_src(node.func), _src(first) if first is not None else ""),
                   "module names must be literal strings" + (" (this one is %r)" % computed if computed else ""), line)
    kind = next((k for k in ATTR_FUNCS if k in func), None)
    if kind is None or len(args) < 2 or any(isinstance(a, ast.Starred) for a in args[:2]):
        return
    obj, attr = args[0], args[1]
    literal = isinstance(attr, ast.Constant) and isinstance(attr.value, str)
    name = fold(attr)
    call = "%s(%s, %s)" % (kind, _src(obj), _src(attr))
    base = names.resolved(obj)
    if isinstance(name, str) and name in BANNED_ATTRS and not (name == "__dict__" and _is_self(obj)) and not base:
        refuse("introspection", "%s reaches .%s" % (call, name), _INTROSPECT, line)
    modules = sorted(q for q in base if q != CLASS)
    if base and kind in ("setattr", "delattr"):
        hit, why = _patched(base)
        refuse("patching", "%s on %s" % (call, hit), why, line)
    elif modules and not literal:
        refuse("computed_name", "%s on %s" % (call, modules[0]), "a computed attribute name on a module is not allowed"
               + (" (this one is %r)" % name if isinstance(name, str) else ""), line)
    elif modules and kind == "hasattr":
        for q in modules:
            check_name(q + "." + attr.value, "uses", line)
    elif kind in ("setattr", "delattr") and not _is_self(obj):
        if kind == "delattr":
            refuse("patching", call, "delattr is only allowed on self", line)
        else:
            report.warn("setattr", "%s (line %s): setattr on an object other than self is not checked statically"
                        % (call, line), line)
    elif not literal and name is None and not _is_self(obj) and not modules:
        report.warn("computed_name", "%s (line %s): a computed attribute name is not checked statically"
                    % (call, line), line)


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
