"""The run-time guard: a PEP 578 audit hook the worker installs right before it imports the
kernel, so that what the static filter cannot see (a library that calls getattr, exec or
compile for its caller, a name built at run time) still cannot reach the process's own
machinery, in which the harness keeps the audit's record and the key that seals its
messages (seal.py).

While the kernel's code runs (a frame of its file is on the stack), the hook refuses the
events CPython raises for the ways in: frames (sys._getframe, a traceback's tb_frame, a
generator's gi_frame), the garbage collector's object lists, code built or swapped at run
time (compile, exec, code.__new__, function.__new__, marshal, pickle's class lookups, a
function's __code__ or __defaults__ replaced), tracing and profiling, more audit hooks,
and ctypes; and, whoever asks, opening a process's memory (/proc/<pid>/mem).

Libraries raise some of these events for their own use while the kernel's code is on the
stack. Those call sites are allowed, by file and function (ALLOWED): Triton reads its
kernels' code objects and source and builds its interpreter's functions and its launcher's
binder with exec, dataclasses and namedtuple build methods with exec, typing and logging
look at their caller's module, importlib loads a module of the Python installation. None of
them hands what it got to its caller (logging's frame lookup is allowed only from logging's
own findCaller). So is the body of a module of the installation while it is being imported:
it is the library's own code, whoever caused the import.

Signal handlers are called with the interrupted frame, and installing one raises no event:
the guard takes signal.signal (and _signal.signal) out of the process instead.

A refusal ends the process: `refused(text)` (the worker sends a sealed failure to the judge)
and then os._exit(STATUS), so no `except` in the kernel can swallow it. The hook keeps every
function and table it uses in its own closure and in the defaults of the functions it calls:
patching a module changes none of it, and no module refers to the hook.

Not seen here (CPython raises no event for them): attribute access (__globals__,
__closure__, a module's or class's dict), assignments to modules and classes, threads, and
raw memory through numpy's array interface or the Triton interpreter's pointers. The static
filter refuses every spelling of those it knows; docs/security.md says what remains.
"""

from __future__ import annotations

import os
import sys
from types import FrameType, ModuleType
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple

# A root a site may lie in: (name, directory) (roots).
Roots = Tuple[Tuple[str, str], ...]

STATUS = 86  # the worker's exit status after a refusal

# Events refused while the kernel's code runs, unless raised by an ALLOWED site. ("ctypes." events
# are refused by prefix.)
INTEGRITY: FrozenSet[str] = frozenset({
    "sys._getframe", "sys._current_frames", "sys._current_exceptions", "object.__getattr__",
    "object.__setattr__", "object.__delattr__", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys.settrace", "sys.setprofile", "sys.addaudithook", "cpython._PySys_ClearAuditHooks", "sys.excepthook",
    "sys.unraisablehook", "code.__new__", "function.__new__", "marshal.loads", "marshal.load", "pickle.find_class",
    "exec", "compile", "builtins.breakpoint", "cpython.run_command", "cpython.run_file", "cpython.run_module",
    "cpython.run_stdin", "cpython.run_interactivehook", "cpython.run_startup", "sys.monitoring.register_callback",
})
# object.__getattr__ / __setattr__ / __delattr__ are raised for these names among others (a class's
# __doc__ or __module__): only these reach or change code and frames.
SENSITIVE_ATTRIBUTES: FrozenSet[str] = frozenset({
    "__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__", "__bases__", "__class__",
    "__dict__", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals", "f_globals"})
READ_ONLY_OK: FrozenSet[str] = frozenset({"__defaults__", "__kwdefaults__"})  # values, read by inspect.signature

Site = Tuple[str, str]  # ("site:triton/runtime/jit.py", "__init__"): a file below a root, and a function
IMPORT_EXEC: Site = ("<frozen importlib._bootstrap>", "_call_with_frames_removed")
_TRITON_INTERPRETER: Site = ("site:triton/runtime/interpreter.py", "_compile_and_exec")
_TRITON_BINDER: Site = ("site:triton/runtime/jit.py", "create_function_from_signature")
_DATACLASS: Site = ("stdlib:dataclasses.py", "_create_fn")
_NAMEDTUPLE: Site = ("stdlib:collections/__init__.py", "namedtuple")
ALLOWED: Dict[str, FrozenSet[Site]] = {
    "object.__getattr__": frozenset({
        ("stdlib:inspect.py", "_signature_from_function"), ("stdlib:inspect.py", "getfile"),
        ("stdlib:inspect.py", "findsource"), ("stdlib:inspect.py", "unwrap"), ("site:triton/runtime/jit.py", "__init__"),
        ("site:triton/runtime/jit.py", "get_capture_scope"), ("stdlib:inspect.py", "getclosurevars"),
        # Triton's launch on a GPU names the kernel's file and first line (its co_filename, no code)
        ("site:triton/runtime/jit.py", "get_jit_fn_file_line"),
        # torch.library.triton_op finds the kernels its function launches by their code's names
        ("site:torch/_library/triton.py", "find_triton_kernels"),
        ("site:torch/_library/triton.py", "resolve_names_to_kernels"), ("site:torch/_library/triton.py", "build_namespace")}),
    "exec": frozenset({IMPORT_EXEC, _TRITON_INTERPRETER, _TRITON_BINDER, _DATACLASS, _NAMEDTUPLE}),
    "compile": frozenset({IMPORT_EXEC, _TRITON_INTERPRETER, _TRITON_BINDER, _DATACLASS, _NAMEDTUPLE,
                          ("stdlib:ast.py", "parse"), ("stdlib:typing.py", "__init__")}),
    "marshal.loads": frozenset({("<frozen importlib._bootstrap_external>", "_compile_bytecode")}),
    "sys._getframe": frozenset({_NAMEDTUPLE, ("stdlib:typing.py", "_caller"), ("stdlib:enum.py", "_make_class_unpicklable"),
                                ("site:typing_extensions.py", "_has_generic_or_protocol_as_origin"),
                                ("site:typing_extensions.py", "_caller"), ("stdlib:logging/__init__.py", "<lambda>"),
                                # torch.library notes where an operator was registered (a file and line)
                                ("site:torch/library.py", "__init__"), ("site:torch/library.py", "_register_fake"),
                                ("site:torch/_library/utils.py", "get_source"),
                                # file names and lines of the stack (FrameSummary: no frame, no locals),
                                # as torch.library takes them on a GPU when an operator is registered
                                ("stdlib:traceback.py", "extract_stack")}),
    "object.__setattr__": frozenset({_NAMEDTUPLE, ("stdlib:typing.py", "__new__")}),  # NamedTuple's __bases__
    "ctypes": frozenset({("site:triton/backends/nvidia/driver.py", "*"), ("site:torch/cuda/__init__.py", "*")}),
}
# Sites allowed only when called from this function (logging.currentframe returns the frame it gets).
ONLY_FROM: Dict[Site, str] = {("stdlib:logging/__init__.py", "<lambda>"): "findCaller"}
# What each event would give the kernel, for the refusal's message.
WHAT: Dict[str, str] = {
    "sys._getframe": "a frame: the harness's locals are one f_back away",
    "sys._current_frames": "every thread's frame",
    "object.__getattr__": "a frame or a code object",
    "object.__setattr__": "a function's code or defaults replaced",
    "object.__delattr__": "a function's code or defaults removed",
    "gc.get_objects": "every object of the process",
    "gc.get_referrers": "the objects that refer to another",
    "gc.get_referents": "the objects another refers to",
    "exec": "code built at run time, run",
    "compile": "code compiled at run time",
    "ctypes": "native code and raw memory",
}
IMPORTING = frozenset({"<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"})
_PASS_THROUGH = ("stdlib:ctypes/",)  # a ctypes event's site is the first frame outside ctypes itself


def roots() -> Tuple[Tuple[str, str], ...]:
    """(name, directory) of the code a site may lie in: "stdlib" (the standard library) and
    "site" (the directories torch, triton and numpy are installed in). Read before the kernel
    exists."""
    found = [("stdlib", os.path.dirname(os.__file__) + "/")]
    for name in ("torch", "triton", "numpy"):
        module = sys.modules.get(name)
        file: Optional[str] = getattr(module, "__file__", None) if module is not None else None
        if file:
            found.append(("site", os.path.dirname(os.path.dirname(file)) + "/"))
    return tuple(dict.fromkeys(found))


def trusted_roots() -> Tuple[str, ...]:
    """Directories of the Python installation (its standard library and site-packages) and of the
    harness, read-only in the sandbox; with the paths they are reached by."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.__file__), here)
    found = {os.path.abspath(p) + "/" for p in paths} | {os.path.realpath(p) + "/" for p in paths}
    for module in ("torch", "triton", "numpy"):
        loaded = sys.modules.get(module)
        file: Optional[str] = getattr(loaded, "__file__", None) if loaded is not None else None
        if file:
            found.add(os.path.dirname(os.path.dirname(os.path.abspath(file))) + "/")
    return tuple(sorted(found))


def site_of(filename: str, known: Roots) -> str:
    """"site:triton/runtime/jit.py" for a file below a root; the file name itself otherwise."""
    for name, root in known:
        if filename.startswith(root):
            return name + ":" + filename[len(root):]
    return filename


def memory_file(path: object, realpath: Callable[[str], str] = os.path.realpath) -> bool:
    """path names a process's memory: /proc/<pid>/mem (or a task's), its pagemap, /dev/mem."""
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    if not isinstance(path, str):
        return False  # a descriptor: opened before, by name
    real = realpath(path)
    parts = real.strip("/").split("/")
    return (len(parts) >= 3 and parts[0] == "proc" and parts[-1] in ("mem", "pagemap")) or \
        real in ("/dev/mem", "/dev/kmem", "/dev/port")


def kernel_line(raiser: Optional[FrameType], kernel_file: str, trusted: Tuple[str, ...],
                importing: FrozenSet[str] = IMPORTING,
                startswith: Callable[..., bool] = str.startswith) -> Optional[int]:
    """The line of the kernel's code the stack above `raiser` runs, or None: none is there, or a
    module of the installation is being imported in between (its body, not the kernel, raised the
    event). The kernel's code is its file's, and that of any other file outside the installation
    and the harness (one the kernel wrote and imported); code built from a string (`<string>`:
    a namedtuple's or a dataclass's methods) is neither."""
    frame = raiser
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if name == kernel_file or (startswith(name, "/") and not startswith(name, trusted)):
            return frame.f_lineno
        back = frame.f_back
        if code.co_name == "<module>" and back is not None and back.f_code.co_filename in importing and \
                startswith(code.co_filename, trusted):
            return None
        frame = back
    return None


def requester(raiser: FrameType, known: Roots, pass_through: Tuple[str, ...] = _PASS_THROUGH,
              site: Callable[[str, Roots], str] = site_of,
              startswith: Callable[..., bool] = str.startswith) -> FrameType:
    """The frame that asked for the event: the raiser, or for code inside a pass-through module
    (ctypes' own Python), the first frame outside it."""
    frame: Optional[FrameType] = raiser
    while frame is not None and startswith(site(frame.f_code.co_filename, known), pass_through):
        frame = frame.f_back
    return frame if frame is not None else raiser


def permitted(event: str, args: Tuple[Any, ...], frame: FrameType, known: Roots, trusted: Tuple[str, ...],
              allowed: Mapping[str, FrozenSet[Site]] = ALLOWED, only_from: Mapping[Site, str] = ONLY_FROM,
              sensitive: FrozenSet[str] = SENSITIVE_ATTRIBUTES, read_ok: FrozenSet[str] = READ_ONLY_OK,
              site: Callable[[str, Roots], str] = site_of, startswith: Callable[..., bool] = str.startswith) -> bool:
    """Whether the event, raised while the kernel runs, is a library's own use (see ALLOWED)."""
    if event.startswith("object.") and len(args) > 1:
        name = args[1]
        if name not in sensitive or (event == "object.__getattr__" and name in read_ok):
            return True
    where = (site(frame.f_code.co_filename, known), frame.f_code.co_name)
    table: FrozenSet[Site] = allowed.get("ctypes" if startswith(event, "ctypes.") else event, frozenset())
    if where not in table and (where[0], "*") not in table:
        return False
    if where in only_from:
        back = frame.f_back
        return back is not None and back.f_code.co_name == only_from[where]
    if where == IMPORT_EXEC:  # the module importlib compiles or runs must come from the installation
        source = args[1] if event == "compile" and len(args) > 1 else getattr(args[0] if args else None,
                                                                              "co_filename", "")
        return isinstance(source, str) and startswith(source, trusted)
    return True


def install(kernel_file: str, refused: Callable[[str], None], trace: Optional[Callable[[str], None]] = None) -> None:
    """Installs the guard for the kernel at `kernel_file`, once per process (audit hooks cannot be
    removed). `refused(text)` runs once on a refusal, before the process exits with STATUS;
    `trace(line)`, when given, is told every event it would refuse instead (development only)."""
    hook = _hook(kernel_file, refused, trace, roots(), trusted_roots())
    _remove_signal_handlers()
    sys.addaudithook(hook)


def to_log(line: str) -> None:
    """A traced event into the process's log (stderr: the evaluation's log), once per site."""
    if line.split(" line=")[0] not in _traced:
        _traced.add(line.split(" line=")[0])
        os.write(2, ("kforge guard trace: %s\n" % line).encode("utf-8", "replace"))


_traced: set[str] = set()


def _remove_signal_handlers() -> None:
    """A signal handler is called with the interrupted frame, and installing one raises no audit
    event: the function that installs them goes (the process keeps the handlers it has)."""
    import signal

    import _signal  # type: ignore[import-not-found]  # no stubs: the C half of signal

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError("signal handlers cannot be installed in the kernel's process")

    module: Any  # the two modules' `signal` functions are replaced
    for module in (signal, _signal):
        module.signal = refused


def _hook(kernel_file: str, refused: Callable[[str], None], trace: Optional[Callable[[str], None]], known: Roots,
          trusted: Tuple[str, ...]) -> Callable[[str, Tuple[Any, ...]], None]:
    getframe, exit_now, write, realpath, text = sys._getframe, os._exit, os.write, os.path.realpath, str
    integrity, what, is_memory, running, asker, allow, site = INTEGRITY, dict(WHAT), memory_file, kernel_line, \
        requester, permitted, site_of
    busy = [False]

    def guard(event: str, args: Tuple[Any, ...]) -> None:
        if busy[0] or not (event in integrity or event == "open" or event[:7] == "ctypes."):
            return
        busy[0] = True
        try:
            if event == "open":
                if args and is_memory(args[0], realpath):
                    stop("open %s, the process's memory" % (args[0],), None)
                return
            raiser = getframe(1)
            line = running(raiser, kernel_file, trusted)
            frame = asker(raiser, known)
            if line is None or allow(event, args, frame, known, trusted):
                return
            where = "%s:%s" % (site(frame.f_code.co_filename, known), frame.f_code.co_name)
            if trace is not None:
                trace("%s %s line=%s %s" % (event, where, line, text(args)[:100]))
                return
            kind = "ctypes" if event[:7] == "ctypes." else event
            stop("%s (%s), asked by %s" % (event, what.get(kind, "the process's own machinery"), where), line)
        finally:
            busy[0] = False

    def stop(about: str, line: Optional[int]) -> None:
        message = "the run-time guard refused %s%s" % (about, "" if line is None else
                                                       " while line %d of the kernel ran" % line)
        try:
            refused(message)
        finally:
            write(2, ("kforge guard: %s\n" % message).encode("utf-8", "replace"))
            exit_now(STATUS)

    return guard


# Modules whose functions and classes the harness relies on in the kernel's process: its own, and
# the parts of torch and triton the audit hooks into (WATCHED_CLASSES: their methods too).
# (Not torch itself: importing torch._dynamo, as torch.library does, wraps torch.manual_seed.)
WATCHED_MODULES: Tuple[str, ...] = ("torch.utils._python_dispatch", "triton.runtime.jit", "triton.runtime.interpreter")
WATCHED_CLASSES: Tuple[str, ...] = ("torch.Tensor", "triton.runtime.jit.JITFunction",
                                    "triton.runtime.interpreter.InterpretedFunction")


def _watched(module_names: Tuple[str, ...], class_names: Tuple[str, ...],
             modules: Mapping[str, Optional[ModuleType]] = sys.modules) -> List[Tuple[str, Mapping[str, Any]]]:
    """[(label, namespace dict)] of the harness's modules and classes, and the watched ones."""
    found: List[Tuple[str, Mapping[str, Any]]] = []
    for name, module in sorted(modules.items()):
        if module is None:
            continue
        if name == "kforge_harness" or name.startswith("kforge_harness.") or name in module_names:
            found.append((name, vars(module)))
            if name.startswith("kforge_harness"):
                found += [("%s.%s" % (name, k), vars(v)) for k, v in vars(module).items()
                          if isinstance(v, type) and v.__module__ == name]
    for dotted in class_names:
        module_name, _, cls = dotted.rpartition(".")
        module = modules.get(module_name)
        value = getattr(module, cls, None) if module is not None else None
        if isinstance(value, type):
            found.append((dotted, vars(value)))
    return found


def snapshot(module_names: Tuple[str, ...] = WATCHED_MODULES,
             class_names: Tuple[str, ...] = WATCHED_CLASSES) -> Callable[[], List[str]]:
    """Takes note of the functions, classes and modules the harness's modules and classes (and the
    watched ones of torch and triton) hold, before the kernel is imported; returns a function that
    lists the names whose object was since replaced or removed (names added later, by lazy
    imports, are not compared). It holds what it compares in its own closure."""
    kinds = (type, type(sys), type(snapshot), type(len), classmethod, staticmethod, property)
    taken = [(label, namespace, {k: v for k, v in list(namespace.items()) if isinstance(v, kinds)})
             for label, namespace in _watched(module_names, class_names)]

    def changed(taken: List[Tuple[str, Mapping[str, Any], Dict[str, Any]]] = taken, missing: object = object()) -> List[str]:
        return ["%s.%s" % (label, key) for label, namespace, values in taken
                for key, value in values.items() if namespace.get(key, missing) is not value]

    return changed
