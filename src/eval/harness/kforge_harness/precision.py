"""Precision: the policy the person chose (`[eval] precision`), applied to both sides, and
what a kernel computes in.

Policies (POLICIES):
- `strict` (default): the task's own dtype. The judge's reference and the reference's timing
  process run with TF32 off for matmuls and cuDNN convolutions and
  `float32_matmul_precision = "highest"`: a float32 task's reference is float32 throughout,
  and a kernel must match it within float32's tolerance (compare.py).
- `tf32`: TF32 on for matmuls and convolutions on both sides
  (`float32_matmul_precision = "high"`); float32 outputs get TF32's tolerance. Every figure
  compares TF32 with TF32.
- `pytorch`: PyTorch's own defaults (TF32 off for matmuls, on for cuDNN convolutions),
  KernelBench's setting; tolerances as `strict`. With `tolerance = "kernelbench"` the
  verdicts are KernelBench's, convolution tasks included.

What a kernel computes in is read from its source (`scan`, a pure AST pass): `tl.dot` and
`@` in Triton code and their `input_precision` / `allow_tf32`, casts to half types, half
accumulators, TF32 switched on through torch.backends or float32_matmul_precision, autocast.
The judge adds what the kernel's process really had in force once it was imported
(`dynamic_findings`), and what applies to the task's dtypes (`summarize`).
"""

from __future__ import annotations

import ast
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, TypedDict, Union

from .static import dotted


class _FindingFields(TypedDict):
    category: str  # one of CATEGORIES
    line: Optional[int]  # in the kernel's file
    text: str
    where: str  # "kernel NAME", "module" or "process"
    lowers: bool  # math below float32 on float32 operands (LOWERING)
    dynamic: bool  # seen in the kernel's process (dynamic_findings), not in its code


class Finding(_FindingFields, total=False):
    """What a kernel computes in, at one place (`finding`)."""

    compiled: bool  # read from the compiled code (ttir_findings, ptx_findings)


# A kernel's function definition (what the scan reads the Triton code of).
FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]

POLICIES = ("strict", "tf32", "pytorch")
DEFAULT_POLICY = "strict"

# torch settings per policy: (matmul allow_tf32, cudnn allow_tf32, float32_matmul_precision).
SETTINGS = {
    "strict": (False, False, "highest"),
    "tf32": (True, True, "high"),
    "pytorch": (False, True, "highest"),
}

# Finding categories. LOWERING: math below float32 on float32 operands.
TF32_DOT = "tf32_dot"
TF32X3_DOT = "tf32x3_dot"
IEEE_DOT = "ieee_dot"
DOT_UNKNOWN = "dot_precision_unknown"
LOW_PRECISION_CAST = "low_precision_cast"
LOW_PRECISION_ACCUMULATOR = "low_precision_accumulator"
TF32_ENABLED = "tf32_enabled"
AUTOCAST = "autocast"
LOWERING = (TF32_DOT, LOW_PRECISION_CAST, LOW_PRECISION_ACCUMULATOR, TF32_ENABLED, AUTOCAST)
CATEGORIES = (TF32_DOT, TF32X3_DOT, IEEE_DOT, DOT_UNKNOWN, LOW_PRECISION_CAST, LOW_PRECISION_ACCUMULATOR,
              TF32_ENABLED, AUTOCAST)
# What the CPU's trials cannot show: the interpreter computes tl.dot in float32 whatever its input
# precision, and PyTorch's CPU matmuls never use TF32 (half casts and accumulators are real there).
CPU_BLIND = (TF32_DOT, TF32_ENABLED)

HALF_NAMES = {"float16", "half", "bfloat16", "float8e4nv", "float8e5", "float8e4b15", "float8e4b8", "float8e5b16",
              "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}
HALF_METHODS = {"half": "float16", "bfloat16": "bfloat16"}
# tl.dot(input, other, acc, input_precision, allow_tf32, max_num_imprecise_acc, out_dtype)
DOT_PRECISION_POSITION, DOT_ALLOW_TF32_POSITION, DOT_OUT_DTYPE_POSITION = 3, 4, 6
F32_DEFAULT_ENV = "TRITON_F32_DEFAULT"


def apply_policy(policy: Optional[str]) -> Dict[str, Any]:
    """Sets this process's torch precision settings for the policy; returns them."""
    import torch

    matmul, cudnn, matmul_precision = SETTINGS[policy if policy is not None and policy in SETTINGS else DEFAULT_POLICY]
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn
    torch.set_float32_matmul_precision(matmul_precision)
    return settings()


def settings() -> Dict[str, Any]:
    """The torch precision settings in force in this process."""
    import torch

    return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32), "cudnn": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


def finding(category: str, line: Optional[int], text: str, where: str) -> Finding:
    return {"category": category, "line": line, "text": text, "where": where,
            "lowers": category in LOWERING, "dynamic": False}


# -- the static scan ----------------------------------------------------------------------


def scan(source: str) -> List[Finding]:
    """Findings about the math of a kernel's source, in source order; [] where it does not
    parse (the static check reports that)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return _Scan(tree).run()


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name: str = dotted(target) or ""
    return name.split(".")[-1] in ("jit", "autotune", "heuristics")


def _dtype_leaf(node: ast.expr) -> Optional[str]:
    """`float16` for tl.float16 / torch.float16 / "float16" / torch.half, else None."""
    name: str
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value
    else:
        name = (dotted(node) or "").split(".")[-1]
    if name == "half":
        return "float16"
    return name if name in HALF_NAMES else None


class _Scan:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.constants: Dict[str, Any] = {}  # module-level NAME = "string"
        self.aliases: Dict[str, Optional[str]] = {}  # module-level NAME = tl.float16: NAME -> "float16"
        self.launch_values: Dict[str, Set[Any]] = {}  # keyword name -> set of constant values at launch sites
        self.launch_dynamic: Set[str] = set()  # keyword names some call passes a value computed at run time
        self.findings: List[Finding] = []
        self.f32_default: Any = None

    def run(self) -> List[Finding]:
        node: ast.AST
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.constants[target.id] = node.value.value
            elif isinstance(node, ast.Assign) and _dtype_leaf(node.value):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.aliases[target.id] = _dtype_leaf(node.value)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg and isinstance(kw.value, ast.Constant):
                        self.launch_values.setdefault(kw.arg, set()).add(kw.value.value)
                    elif kw.arg:
                        self.launch_dynamic.add(kw.arg)
            self.environment(node)
        jit: Set[FunctionNode] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    _is_jit(d) for d in node.decorator_list):
                jit.add(node)
                self.kernel(node)
        self.host(jit)
        self.findings.sort(key=lambda f: f["line"] or 0)
        return self.findings

    def environment(self, node: ast.AST) -> None:
        """os.environ["TRITON_F32_DEFAULT"] = "ieee": the default of every tl.dot."""
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and dotted(target.value) in ("os.environ", "environ") \
                        and isinstance(target.slice, ast.Constant) and target.slice.value == F32_DEFAULT_ENV:
                    self.f32_default = node.value.value

    # -- Triton code

    def kernel(self, fn: FunctionNode) -> None:
        defaults: Dict[str, Any] = {}
        args = fn.args.args
        default: Optional[ast.expr]
        for arg, default in zip(args[len(args) - len(fn.args.defaults):], fn.args.defaults):
            if isinstance(default, ast.Constant):
                defaults[arg.arg] = default.value
        for arg, default in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
            if isinstance(default, ast.Constant):
                defaults[arg.arg] = default.value
        where = "kernel %s" % fn.name
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                self.add(TF32_DOT, node, "`@` in %s runs tl.dot at its default precision: TF32 on float32 operands"
                         % where, where)
            elif isinstance(node, ast.Call):
                name: str = dotted(node.func) or ""
                # (a * b).to(...): a method of an expression, which has no dotted name
                leaf = node.func.attr if isinstance(node.func, ast.Attribute) else name.split(".")[-1]
                if leaf == "dot":
                    self.dot(node, defaults, where)
                elif leaf in ("to", "cast"):
                    target: Optional[ast.expr] = node.args[1] if leaf == "cast" and len(node.args) > 1 else (
                        node.args[0] if leaf == "to" and node.args else None)
                    for kw in node.keywords:
                        if kw.arg == "dtype":
                            target = kw.value
                    half = self.dtype_of(target) if target is not None else None
                    if half:
                        self.add(LOW_PRECISION_CAST, node, "%s casts to %s in %s" % (
                            ast.unparse(node.func), half, where), where)
                elif leaf in ("zeros", "full") and name.startswith(("tl.", "triton.language.")):
                    for kw in node.keywords:
                        if kw.arg == "dtype" and self.dtype_of(kw.value):
                            self.add(LOW_PRECISION_ACCUMULATOR, node, "%s allocates a %s tile in %s (an accumulator "
                                     "there sums in %s)" % (name, self.dtype_of(kw.value), where,
                                                            self.dtype_of(kw.value)), where)

    def dtype_of(self, node: ast.expr) -> Optional[str]:
        """The half type a dtype expression names (tl.float16, "float16", an alias of one)."""
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return self.aliases[node.id]
        return _dtype_leaf(node)

    def resolve(self, node: ast.expr, defaults: Mapping[str, Any]) -> Tuple[Any, bool]:
        """A constant's value: literal, module constant, parameter default, or the one
        constant value every launch site passes for that parameter (unknown when some call
        passes it a value computed at run time). (value, known)."""
        if isinstance(node, ast.Constant):
            return node.value, True
        if isinstance(node, ast.Name) and node.id in self.launch_dynamic:
            return None, False
        if isinstance(node, ast.Name):
            if node.id in self.constants:
                return self.constants[node.id], True
            launched = self.launch_values.get(node.id, set())
            if len(launched) == 1:
                return next(iter(launched)), True
            if not launched and node.id in defaults:
                return defaults[node.id], True
        return None, False

    def dot(self, node: ast.Call, defaults: Mapping[str, Any], where: str) -> None:
        precision: Optional[ast.expr] = None
        allow: Optional[ast.expr] = None
        out_dtype: Optional[ast.expr] = None
        if len(node.args) > DOT_PRECISION_POSITION:
            precision = node.args[DOT_PRECISION_POSITION]
        if len(node.args) > DOT_ALLOW_TF32_POSITION:
            allow = node.args[DOT_ALLOW_TF32_POSITION]
        if len(node.args) > DOT_OUT_DTYPE_POSITION:
            out_dtype = node.args[DOT_OUT_DTYPE_POSITION]
        for kw in node.keywords:
            if kw.arg == "input_precision":
                precision = kw.value
            elif kw.arg == "allow_tf32":
                allow = kw.value
            elif kw.arg == "out_dtype":
                out_dtype = kw.value
        call = "tl.dot at line %d of %s" % (node.lineno, where.split(" ", 1)[1])
        if out_dtype is not None and self.dtype_of(out_dtype):
            self.add(LOW_PRECISION_ACCUMULATOR, node, "%s accumulates in %s (out_dtype)" % (
                call, self.dtype_of(out_dtype)), where)
        if precision is not None and not (isinstance(precision, ast.Constant) and precision.value is None):
            value, known = self.resolve(precision, defaults)
            if not known or not isinstance(value, str):
                self.add(DOT_UNKNOWN, node, "%s passes input_precision=%s, which kforge cannot read statically"
                         % (call, ast.unparse(precision)), where)
                return
            self.dot_precision(node, value.lower(), "input_precision=%r" % value, call, where)
            return
        if allow is not None and not (isinstance(allow, ast.Constant) and allow.value is None):
            value, known = self.resolve(allow, defaults)
            if not known or not isinstance(value, bool):
                self.add(DOT_UNKNOWN, node, "%s passes allow_tf32=%s, which kforge cannot read statically"
                         % (call, ast.unparse(allow)), where)
                return
            self.dot_precision(node, "tf32" if value else "ieee", "allow_tf32=%s" % value, call, where)
            return
        default = str(self.f32_default).lower() if self.f32_default else "tf32"
        how = ("without input_precision, under %s=%r" % (F32_DEFAULT_ENV, self.f32_default) if self.f32_default
               else "without input_precision")
        self.dot_precision(node, default, how, call, where)

    def dot_precision(self, node: ast.AST, value: str, how: str, call: str, where: str) -> None:
        if value == "ieee":
            self.add(IEEE_DOT, node, "%s computes in full float32 (%s)" % (call, how), where)
        elif value == "tf32x3":
            self.add(TF32X3_DOT, node, "%s computes in TF32x3, close to float32 (%s)" % (call, how), where)
        elif value in ("tf32", "bf16x3", "bf16x6", "bf16", "fp16"):
            self.add(TF32_DOT, node, "%s computes in %s on float32 operands (%s)" % (
                call, value.upper() if value == "tf32" else value, how), where)
        else:
            self.add(DOT_UNKNOWN, node, "%s uses input precision %r (%s)" % (call, value, how), where)

    # -- host code

    def host(self, jit: Iterable[FunctionNode]) -> None:
        inside: Set[int] = set()
        for fn in jit:
            inside.update(id(n) for n in ast.walk(fn))
        for node in ast.walk(self.tree):
            if id(node) in inside:
                continue
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True:
                for target in node.targets:
                    name = dotted(target) or ""
                    if name.endswith(("matmul.allow_tf32", "cudnn.allow_tf32")):
                        what = "matmuls" if "matmul" in name else "cuDNN convolutions"
                        self.add(TF32_ENABLED, node, "%s = True switches TF32 on for PyTorch's %s" % (name, what),
                                 "module")
                    if name.endswith("allow_fp16_reduced_precision_reduction") or \
                            name.endswith("allow_bf16_reduced_precision_reduction"):
                        self.add(TF32_ENABLED, node, "%s = True lets PyTorch's matmuls reduce in half precision"
                                 % name, "module")
            if not isinstance(node, ast.Call):
                continue
            name = dotted(node.func) or ""
            leaf = name.split(".")[-1]
            if leaf == "set_float32_matmul_precision" and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value in ("high", "medium"):
                self.add(TF32_ENABLED, node, "torch.set_float32_matmul_precision(%r) lets PyTorch's float32 "
                         "matmuls use TF32%s" % (node.args[0].value, " or bfloat16" if node.args[0].value == "medium"
                                                 else ""), "module")
            elif leaf == "autocast":
                self.add(AUTOCAST, node, "%s runs PyTorch ops in reduced precision" % name, "module")
            elif leaf in HALF_METHODS and isinstance(node.func, ast.Attribute) and not node.args \
                    and name not in ("torch.half", "torch.bfloat16"):
                self.add(LOW_PRECISION_CAST, node, "%s casts to %s" % (ast.unparse(node.func), HALF_METHODS[leaf]),
                         "module")
            elif leaf in ("to", "type") and isinstance(node.func, ast.Attribute):
                targets = list(node.args) + [kw.value for kw in node.keywords if kw.arg == "dtype"]
                half = next((_dtype_leaf(t) for t in targets if _dtype_leaf(t) and not isinstance(t, ast.Constant)),
                            None)
                if half:
                    self.add(LOW_PRECISION_CAST, node, "%s casts to %s" % (ast.unparse(node.func), half), "module")

    def add(self, category: str, node: ast.AST, text: str, where: str) -> None:
        """A finding at the node's line; the text names the line (a tl.dot's names it
        already)."""
        line = getattr(node, "lineno", None)
        if not text.startswith("tl.dot at line"):
            text = "%s (line %s)" % (text, line)
        self.findings.append(finding(category, line, text, where))


# -- what the judge saw ----------------------------------------------------------------------


def dynamic_findings(policy: Optional[str], kernel_settings: object) -> List[Finding]:
    """Findings from the settings in force in the kernel's process once it was imported and
    built: TF32 switched on where the policy had it off."""
    if not isinstance(kernel_settings, dict):
        return []
    matmul, cudnn, matmul_precision = SETTINGS.get(policy or DEFAULT_POLICY, SETTINGS[DEFAULT_POLICY])
    found: List[str] = []
    if kernel_settings.get("matmul") and not matmul:
        found.append("torch.backends.cuda.matmul.allow_tf32 was on")
    if kernel_settings.get("cudnn") and not cudnn:
        found.append("torch.backends.cudnn.allow_tf32 was on")
    precision = kernel_settings.get("float32_matmul_precision")
    if precision in ("high", "medium") and matmul_precision == "highest":
        found.append("float32_matmul_precision was %r" % precision)
    if not found:
        return []
    f = finding(TF32_ENABLED, None, "in the kernel's process after its import, %s (policy %s sets it off)" % (
        " and ".join(found), policy), "process")
    f["dynamic"] = True
    return [f]


def summarize(policy: Optional[str], findings: Sequence[Mapping[str, Any]], task_dtypes: Sequence[str],
              tolerance: object) -> Dict[str, Any]:
    """The result's `precision` record: the policy, the findings, which of them lower the
    precision of this task's math (those on float32 or float64 data), and one sentence."""
    wide = any(d in ("float32", "float64", "complex64", "complex128") for d in task_dtypes)
    reduced = sorted({f["category"] for f in findings if f["lowers"]}) if wide else []
    if policy == "tf32":
        reduced = [c for c in reduced if c != TF32_DOT and c != TF32_ENABLED]
    dots = [f for f in findings if f["category"] in (TF32_DOT, TF32X3_DOT, IEEE_DOT)]
    parts: List[str] = []
    if reduced:
        lowering = [f for f in findings if f["category"] in reduced]
        parts.append("the kernel computes in lower precision than the task's %s: %s" % (
            "/".join(d for d in task_dtypes if d.startswith(("float", "complex"))) or "float32",
            "; ".join(f["text"] for f in lowering[:3]) + ("; ..." if len(lowering) > 3 else "")))
    elif dots and wide:
        kinds = sorted({f["category"] for f in dots})
        words = {TF32_DOT: "TF32", TF32X3_DOT: "TF32x3", IEEE_DOT: "full float32"}
        parts.append("the kernel's GEMMs compute in %s" % " and ".join(words[k] for k in kinds))
    return {"policy": policy, "task_dtypes": list(task_dtypes), "tolerance": tolerance, "kernel_math": findings,
            "reduced": reduced, "statement": "; ".join(parts)}


# -- what the compiled kernels compute in (compiled.py reads them in the kernel's process) --------

_LOC_FILE = re.compile(r'^#(loc\d*) = loc\("([^"]*)":(\d+):\d+\)')
_LOC_NAMED = re.compile(r'^#(loc\d*) = loc\("[^"]*"\(#(loc\d*)\)\)')
_LOC_CALLSITE = re.compile(r'^#(loc\d*) = loc\(callsite\(#(loc\d*) at #(loc\d*)\)\)')
_OP_LOC = re.compile(r'loc\(#(loc\d*)\)\s*$')
_ELEMENT = re.compile(r"tensor<(?:[^<>]*?x)?([a-zA-Z]\w*)>|\b(f16|bf16|f32|f64|f8\w*)\b")
_KERNEL_FILES = ("kernel.py", "kernel_jit.py")  # the kernel file, and its jit functions alone (compiled.py)
_HALF_TYPES = {"f16": "float16", "bf16": "bfloat16"}


def _half(mlir_type: str) -> Optional[str]:
    """float16 / bfloat16 / float8 for an MLIR element type below float32, else None."""
    if mlir_type in _HALF_TYPES:
        return _HALF_TYPES[mlir_type]
    return "float8" if mlir_type.lower().startswith("f8") else None


def _elements(text: str) -> List[str]:
    return [a or b for a, b in _ELEMENT.findall(text)]


class _Locations:
    """The TTIR's #loc table: an operation's line in the kernel's file (an inlined helper's own
    line where it is the kernel's, else the line that called it)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.table: Dict[str, Tuple[str, ...]] = {}
        for line in lines:
            for pattern in (_LOC_FILE, _LOC_NAMED, _LOC_CALLSITE):
                m = pattern.match(line.strip())
                if m:
                    self.table[m.group(1)] = m.groups()[1:] if pattern is not _LOC_FILE else (m.group(2), m.group(3))
                    break

    def line(self, loc: str, depth: int = 0) -> Optional[int]:
        entry = self.table.get(loc)
        if entry is None or depth > 50:
            return None
        if len(entry) == 2 and entry[1].isdigit():  # a file and a line
            return int(entry[1]) if entry[0].rsplit("/", 1)[-1] in _KERNEL_FILES else None
        if len(entry) == 1:  # a named location
            return self.line(entry[0], depth + 1)
        return self.line(entry[0], depth + 1) or self.line(entry[1], depth + 1)  # callee, else caller

    def of(self, op_line: str) -> Optional[int]:
        m = _OP_LOC.search(op_line)
        return self.line(m.group(1)) if m else None


def _dot_finding(kernel: str, text: str, line: Optional[int]) -> Finding:
    """The finding a tt.dot line makes."""
    types = _elements(text.split(" : ", 1)[-1])
    found = re.search(r"inputPrecision = (\w+)", text)
    precision = found.group(1) if found else "ieee"
    call = "tl.dot at line %s of kernel %s" % (line if line is not None else "?", kernel)
    where = "kernel %s" % kernel
    a, result = (types[0], types[-1]) if types else ("f32", "f32")
    if _half(result):
        return finding(LOW_PRECISION_ACCUMULATOR, line, "%s accumulates in %s (compiled)" % (call, _half(result)),
                       where)
    if _half(a):
        return finding(LOW_PRECISION_CAST, line, "%s multiplies %s operands (compiled)" % (call, _half(a)), where)
    if precision == "ieee":
        return finding(IEEE_DOT, line, "%s computes in full float32 (compiled)" % call, where)
    if precision == "tf32x3":
        return finding(TF32X3_DOT, line, "%s computes in TF32x3, close to float32 (compiled)" % call, where)
    name = precision.upper() if precision == "tf32" else precision
    return finding(TF32_DOT, line, "%s computes in %s on float32 operands (compiled)" % (call, name), where)


def _ttir_finding(kernel: str, text: str, line: Optional[int]) -> Optional[Finding]:
    """The finding one relevant TTIR line makes, or None."""
    where = "kernel %s" % kernel
    at = "line %s of kernel %s" % (line if line is not None else "?", kernel)
    if "tt.dot" in text:
        return _dot_finding(kernel, text, line)
    if "truncf" in text or "fp_to_fp" in text:
        target = _half((_elements(text.rsplit(" to ", 1)[-1]) or ["f32"])[0])
        return finding(LOW_PRECISION_CAST, line, "a cast to %s at %s (compiled)" % (target, at), where) \
            if target else None
    if "scf.for" in text:
        carried = [_half(t) for t in _elements(text.split("->", 1)[-1])] if "->" in text else []
        half = next((h for h in carried if h), None)
        return finding(LOW_PRECISION_ACCUMULATOR, line, "a loop at %s carries a %s value from one iteration to the "
                       "next (an accumulator in %s, compiled)" % (at, half, half), where) if half else None
    if "arith.addf" in text:
        half = _half((_elements(text.split(" : ", 1)[-1]) or ["f32"])[0])
        return finding(LOW_PRECISION_ACCUMULATOR, line, "a sum at %s adds in %s (compiled)" % (at, half), where) \
            if half else None
    return None


def ttir_findings(kernel: str, text: Optional[str]) -> List[Finding]:
    """Findings about one launched kernel from the relevant lines of its TTIR (compiled.relevant)."""
    lines = (text or "").splitlines()
    locations = _Locations(lines)
    found: List[Finding] = []
    seen: Set[Tuple[str, Optional[int], str]] = set()
    for op in lines:
        if op.strip().startswith("#loc"):
            continue
        line = locations.of(op)
        f = _ttir_finding(kernel, op, line)
        if f is not None and (f["category"], f["line"], f["text"]) not in seen:
            seen.add((f["category"], f["line"], f["text"]))
            f["compiled"] = True
            found.append(f)
    return found


def ptx_findings(kernel: str, text: Optional[str]) -> List[Finding]:
    """Findings from a kernel's PTX alone (where its TTIR is missing): its tensor-core
    instructions' operand types and its conversions to half types."""
    where = "kernel %s" % kernel
    found: List[Finding] = []
    if re.search(r"mma\S*\.tf32", text or ""):
        found.append(finding(TF32_DOT, None, "kernel %s multiplies on tensor cores in TF32 (PTX)" % kernel, where))
    if re.search(r"mma\S*\.(f16|bf16)\.(f16|bf16)", text or "") or re.search(r"cvt\.rn\.(bf16|f16)", text or ""):
        found.append(finding(LOW_PRECISION_CAST, None, "kernel %s converts to a half type (PTX)" % kernel, where))
    for f in found:
        f["compiled"] = True
    return found


def with_compiled(found: List[Finding], reading: object) -> Tuple[List[Finding], Dict[str, Any]]:
    """(findings, how): where every launched kernel's compiled code was read, the source's findings
    about Triton code (and about jit functions that never ran) give way to the compiled code's;
    otherwise the source's stay, and `how` says why. reading: the worker's answer (compiled.read)."""
    if not isinstance(reading, dict):
        return found, {"read": "source", "why": "the compiled kernels were not read"}
    kernels = [k for k in reading.get("kernels") or [] if isinstance(k, dict)]
    problems = [str(e) for e in reading.get("errors") or []]
    problems += ["%s: %s" % (k.get("kernel"), k.get("error")) for k in kernels if k.get("error")]
    problems += ["%s: no code" % k.get("kernel") for k in kernels if not (k.get("ttir") or k.get("ptx"))
                 and not k.get("error")]
    if not kernels or problems:
        why = "; ".join(problems) if problems else "no Triton launch was read"
        return found, {"read": "source", "why": why[:500]}
    compiled: List[Finding] = []
    for k in kernels:
        name = str(k.get("kernel"))[:200]
        compiled += ttir_findings(name, k["ttir"]) if k.get("ttir") else ptx_findings(name, k.get("ptx"))
    kept = [f for f in found if not str(f.get("where", "")).startswith("kernel ")]
    how: Dict[str, Any] = {"read": "compiled", "for": reading.get("compiled_for"),
           "kernels": sorted({str(k.get("kernel"))[:200] for k in kernels})}
    return kept + compiled, how
