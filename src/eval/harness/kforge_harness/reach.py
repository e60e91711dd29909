"""What a kernel module may reach: an allowlist of modules, for the static check (static.py).

A kernel needs torch, triton, a few of numpy's modules and a small part of the standard
library. Everything else is refused by name, whatever it does, because the modules that
hurt are the ones that call getattr, eval, exec, compile or import for their caller with a
name given at run time (torch.fx builds Python code from a graph whose call targets are
strings; torch.jit.CompilationUnit compiles a string and looks names up in the caller's
frame; torch.compile, torch.export and torch.package generate, load or unpickle code;
pickle, copyreg and marshal rebuild objects by name), or that start processes and threads
(DataLoader's workers and pin-memory thread), and a denylist only refuses the ones somebody
thought of. Inside an allowed module, the rules of static.py (files, frames, private names,
...) still apply.

- An import of a standard-library module outside STDLIB_ALLOWED is refused; so is one of an
  installed package other than torch, triton, numpy and typing_extensions. A module that is
  installed nowhere is left to the import, whose failure the kernel should see.
- Inside torch, triton and numpy, a dotted name is refused unless the module it lies in (the
  longest prefix that is a module of the installed package) is at or below one of
  LIBRARY_ALLOWED, and its first attribute there is not one of TOP_REFUSED.
"""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Tuple

Hit = Tuple[str, str, str]  # (rule, subject, why)
RULE = "reach"

STDLIB_ALLOWED: FrozenSet[str] = frozenset(
    "__future__ abc array ast base64 binascii bisect calendar cmath collections contextlib contextvars copy "
    "dataclasses datetime decimal difflib enum fractions functools graphlib hashlib heapq hmac io itertools json "
    "keyword logging math numbers operator os pprint random re secrets statistics string struct sys textwrap "
    "time timeit types typing unicodedata warnings zlib".split())
THIRD_PARTY_ALLOWED: FrozenSet[str] = frozenset({"torch", "triton", "numpy", "typing_extensions"})

# Modules of the libraries a kernel may use, each with everything below it (static.py's rules
# still refuse parts of them: torch.cuda.jiterator, triton.runtime.build, numpy.load, ...).
LIBRARY_ALLOWED: FrozenSet[str] = frozenset((
    # torch: tensors, modules, functional, devices, precision switches, autograd, op registration
    "torch.nn torch.cuda torch.backends torch.autograd torch.amp torch.cpu torch.fft torch.linalg torch.special "
    "torch.random torch.types torch.library torch.testing torch.utils.checkpoint torch.distributions "
    "torch.sparse torch.nested torch.masked torch.version torch.torch_version torch.functional torch.func "
    "torch.accelerator torch.xpu torch.mps torch.signal torch.storage torch.return_types torch.optim "
    "torch.quasirandom torch.foreach "
    # triton: the language, jit/autotune/heuristics, the runtime's driver queries, testing helpers
    "triton.language triton.runtime triton.testing triton.errors triton.experimental "
    "triton.tools.tensor_descriptor triton.tools.ragged_tma triton.tools.mxfp "
    # numpy: arrays and their math on the host
    "numpy.random numpy.linalg numpy.fft numpy.typing numpy.dtypes numpy.exceptions numpy.polynomial numpy.ma "
    "numpy.strings numpy.char numpy.rec numpy.matlib numpy.matrixlib numpy.version").split())
# Below an allowed module, subtrees that are doors of their own.
LIBRARY_SUBTREES_REFUSED: Dict[str, str] = {
    "torch.nn.parallel": "DataParallel runs the model in threads",
    "torch.autograd.profiler": "the profiler records frames and writes traces to files",
    "torch.cuda.nccl": "collective communication is not for a single kernel",
    "torch.cuda.comm": "collective communication is not for a single kernel",
}
# Names right on a library that are doors although the library is allowed.
TOP_REFUSED: Dict[str, str] = {
    "torch.compile": "torch.compile generates Python and Triton code at run time and runs it (and a kernel "
                     "compiled by it is PyTorch's, not the kernel's)",
    "torch.cond": "torch.cond traces its branches with torch.compile's machinery",
    "torch.while_loop": "torch.while_loop traces its body with torch.compile's machinery",
    "triton.knobs": "triton.knobs holds launch hooks and compiler switches for the whole process",
    "triton.AsyncCompileMode": "asynchronous compilation runs code in threads",
    "numpy.info": "numpy.info reads source files and imports by name",
}
# Exceptions to the above: queries that reach nothing.
LIBRARY_NAMES_OK: FrozenSet[str] = frozenset({
    "torch.jit.is_scripting", "torch.jit.is_tracing", "torch.compiler.is_compiling",
    "torch.compiler.is_dynamo_compiling", "torch.utils.checkpoint"})
# Why the well-known doors are refused (a name not listed gets the general reason).
DOORS: Dict[str, str] = {
    "torch.fx": "torch.fx builds Python code from a graph whose call targets are names given at run time and runs "
                "it: getattr and import for its caller",
    "torch.jit": "torch.jit compiles code given as a string at run time (CompilationUnit) and looks names up in its "
                 "caller's frame",
    "torch.compiler": "torch.compiler drives torch.compile, which generates and runs code at run time",
    "torch.export": "torch.export traces through torch.compile's machinery and loads programs from files",
    "torch.package": "torch.package imports code and unpickles objects from archives",
    "torch.hub": "torch.hub downloads and imports code",
    "torch.onnx": "torch.onnx traces models and writes files",
    "torch.utils": "of torch.utils only torch.utils.checkpoint is allowed: the rest loads extensions, writes files or "
                   "starts processes (torch.utils.data's DataLoader starts worker processes and a pin-memory thread)",
    "torch.distributed": "torch.distributed starts processes and opens network connections",
    "torch.multiprocessing": "torch.multiprocessing starts processes",
    "torch.profiler": "the profiler records frames and writes traces to files",
    "torch.ao": "torch.ao's quantization traces models with torch.fx",
    "torch.quantization": "torch.quantization traces models with torch.fx",
    "torch.serialization": "torch.serialization unpickles objects and reads files",
    "triton.compiler": "triton.compiler compiles code given at run time, outside the kernel's @triton.jit functions",
    "triton.backends": "triton.backends builds and loads native code with the system compiler",
    "triton.tools": "triton.tools compiles, links and disassembles outside the kernel's @triton.jit functions",
    "triton.profiler": "the profiler writes traces to files",
    "numpy.lib": "numpy.lib reads and writes files and builds arrays over raw memory (stride_tricks)",
    "numpy.core": "numpy.core is numpy's internals (raw memory, ctypes)",
    "numpy.ctypeslib": "numpy.ctypeslib reaches native code",
    "numpy.testing": "numpy.testing builds and imports extension modules",
}
_STDLIB_WHY = ("kernels may import only torch, triton, numpy, typing_extensions and these standard modules: %s"
               % ", ".join(sorted(STDLIB_ALLOWED - {"__future__"})))


def library_refusal(parts: Iterable[str], is_module: Callable[[str], bool]) -> Optional[Hit]:
    """(rule, subject, why) when the dotted name `parts` (rooted at torch, triton or numpy) lies
    outside what a kernel may use, else None. `is_module(name)`: name is a module of the
    installed library (from its files)."""
    parts = list(parts)
    if under(".".join(parts), LIBRARY_NAMES_OK):
        return None
    top = ".".join(parts[:2])
    if top in TOP_REFUSED:
        return RULE, top, TOP_REFUSED[top]
    module = _module_part(parts, is_module)
    if module == parts[0]:
        return None  # a name right on the library: torch.relu, triton.cdiv, numpy.asarray
    for refused, why in LIBRARY_SUBTREES_REFUSED.items():
        if under(module, (refused,)):
            return RULE, refused, why
    if under(module, LIBRARY_ALLOWED):
        return None
    door = next((d for d in sorted(DOORS, key=len, reverse=True) if under(module, (d,))), None)
    subject = door or module
    return RULE, subject, DOORS.get(subject) or _library_why(subject)


def under(name: str, prefixes: Iterable[str]) -> bool:
    """name is one of prefixes or lies below one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _module_part(parts: List[str], is_module: Callable[[str], bool]) -> str:
    """The longest prefix of parts that is a module of the library (at least its root)."""
    for n in range(len(parts), 1, -1):
        prefix = ".".join(parts[:n])
        if is_module(prefix):
            return prefix
    return parts[0]


def _library_why(subject: str) -> str:
    root = subject.split(".")[0]
    allowed = sorted(m for m in LIBRARY_ALLOWED if m.startswith(root + "."))
    return "%s is not among the modules a kernel may use (of %s: %s itself, %s)" % (
        subject, root, root, ", ".join(allowed))


def import_refusal(name: str, stdlib: FrozenSet[str], installed: Callable[[str], bool]) -> Optional[Hit]:
    """(rule, subject, why) when importing the module `name` is refused: a standard module outside
    STDLIB_ALLOWED, or an installed package other than THIRD_PARTY_ALLOWED. None for allowed
    modules and for modules installed nowhere (the import fails, as the kernel should see)."""
    root = name.split(".")[0]
    if root in STDLIB_ALLOWED or root in THIRD_PARTY_ALLOWED:
        return None
    if root in stdlib:
        return RULE, root, "%s is not among the standard modules a kernel may use: %s" % (root, _STDLIB_WHY)
    if installed(root):
        return RULE, root, "%s is installed here but is not a module a kernel may use: %s" % (root, _STDLIB_WHY)
    return None
