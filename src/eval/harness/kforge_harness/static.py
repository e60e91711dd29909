"""Static checks of a candidate's source: pure AST, nothing of the candidate runs here.

A fast first filter in front of the sandbox and the dynamic audit, never the only line. It
refuses what no kernel needs -- threads, processes, signals, files, sockets, native code and raw
memory, frame and object introspection, code loaded or built at run time, patching of imported
modules -- however the source spells it, and where it cannot resolve a spelling, it refuses the
spelling ("resolves or refuses"):

- Names resolve to what they were imported as: `import x as y`, `from x import y as z`,
  `__import__("x")`, `getattr(obj, "literal")` and plain assignments (`name = expr`, and
  `obj.attr = expr` under the name "obj.attr") anywhere in the file. Flow-insensitive: a name
  that is ever an alias of `os` counts as `os` everywhere. `torch.serialization.os.fork` counts
  as `os.fork` (and `torch.storage.np.load` as `numpy.load`); `type(x)` and `x.__class__`
  resolve to a class, so patching them is patching.
- Names bound only to constants (`NAME = "__glo" + "bals__"`, `for n in ("a", "b")`) resolve to
  their values, and constant expressions fold: +, *, f-strings, "".join, slicing, reversed,
  chr and generators of chr, %-formatting and str.format without widths, bytes.decode, rot13,
  base64, int.to_bytes, ast.literal_eval.
- Importers by name (__import__, importlib.import_module, torch._utils._import_dotted_name,
  torch.ops.import_module, torch.set_default_tensor_type, pydoc.locate, pkgutil.resolve_name,
  numpy's add_newdoc): a literal name is resolved and checked like an import, any other argument
  is refused. A string that names a refused module ("os", "ctypes", "os.system") may not be
  passed to any other call either: that is how an importer this check does not know reaches it.
- A module, or a timer such as torch.cuda.Event, may only be used through its attributes or
  aliased by a plain `name = ...`: passed as an argument, stored in a container or an
  attribute, or returned, it would reach code the resolution cannot follow. Submodules of torch,
  numpy and triton are known from the installed packages' files (nothing is imported), and a
  standard library module at the end of a chain through them is a module too.
- Attribute names that reach frames, globals or the class graph (`f_back`, `__globals__`,
  `__subclasses__`, `__func__`, `__wrapped__`, ...) are refused on any object, and so is any
  string constant, or constant expression, that spells one. So are, on any object however it
  was reached, the names torch, numpy and the standard library keep files, raw memory and
  loaders under (open, FileIO, fdopen, from_file, tofile, ctypes, data_as, __array_interface__,
  get_type_hints, ForwardRef, ...), and the names of os, sys and subprocess functions and of
  modules on an object the check cannot resolve (a parameter, a call's result, an item):
  `m = f("o" + x); m.system(...)` is refused, not passed.
- Private internals (a name starting with _) of the standard library, torch, numpy and triton:
  refused, but for a private function right on torch (torch._scaled_mm), in torch.nn.init and
  torch.nn.functional, under torch.ops, and torch._inductor.runtime.triton_helpers. A private
  name on an object the check cannot resolve is refused unless the kernel defines it itself.
- getattr/setattr/delattr/hasattr with a name built at run time are refused on everything but
  `self` and chains `self.a.b` of the kernel's own objects (each assigned only a constructor's
  result or a constant). `self` is that only where it is the first parameter of a plain method
  of one of the file's classes that is never called on its class or reached by name (the
  method could then be called with a function as self), and is never rebound. getattr and its
  kin may only be called, not passed around (functools.reduce(getattr, ...)).
- String annotations are code to typing.get_type_hints and torch.library.custom_op: they may
  only be type expressions (names, attributes, subscripts, |), checked like the rest.

Decisions:
- open() and every other way to read or write files (io.open, os.open, pathlib, shutil,
  linecache, torch.load, numpy.load, Storage.from_file, ...) is refused: a kernel gets
  everything through forward's arguments, and file reads are how /proc/<pid>/environ or
  /proc/<pid>/mem leak. sys.stdout and sys.stderr may be written to (print(file=sys.stderr)).
- os.environ may be read (get, [], in, items, os.getenv): kernels now and then read a tuning
  knob, the sandbox hands the worker a scrubbed environment, and
  tests/fixtures/kernels/relu_print_env.py relies on it. Writes are refused: they would steer
  triton or the harness for the rest of the process.
- os and sys are allow-lists (os.path, os.environ reads, os.getpid, os.cpu_count, sys.maxsize,
  sys.stdout, ...): the rest of them is process, file or interpreter control.
- setattr/delattr are allowed on `self` (nn.Module code registers parameters that way); with a
  literal name on another object that does not resolve to a module or class, setattr is a
  warning and delattr an error.
- torch.library may register Triton kernels as new ops (triton_op, wrap_triton, custom_op);
  Library/impl, which override existing (aten) ops, are refused with torch.overrides and
  dispatch modes.
- Star imports only from math, typing and triton.language; no imports inside class bodies.
- Packages installed beside torch that evaluate strings or touch files by name (sympy, jinja2,
  fsspec, pip, pytest, ...) are refused by name; other unknown imports are not (a missing
  module is an import failure the kernel should see).

What it cannot see, the dynamic layers must hold on their own: a function of torch's public
API that imports, opens or executes by name and is not listed here; a torch submodule or object
reached under a name the check does not know as a module; values an object's attributes take
at run time (self-chains are trusted from their assignments).
"""

from __future__ import annotations

import ast
import base64
import binascii
import builtins
import codecs
import importlib.machinery
import os
import re
import string
import sys
from typing import Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union, cast

from . import reach

Entry = Dict[str, Any]  # a report's error or warning: {"rule", "message", "line"}
Refuse = Callable[[str, str, str, Optional[int]], None]  # refuse(rule, what, why, line)

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
    ("signal _signal posix nt resource atexit fcntl termios tty pty webbrowser platform uuid pipes mailcap venv "
     "ensurepip syslog curses getpass cgi wsgiref _multiprocessing _posixshmem pip psutil _distutils_hack "
     "torch.utils.collect_env triton.tools.build_extern triton.tools.compile triton.tools.disasm "
     "triton.tools.link triton.testing.nvsmi triton.testing.set_gpu_clock "
     "triton.testing.cuda_memcheck", "process", _PROCESS),
    ("gc inspect traceback tracemalloc _tracemalloc pdb bdb trace cProfile profile _lsprof pstats sys.monitoring "
     "dis logging.currentframe", "introspection", _INTROSPECT),
    ("torch.overrides torch.utils._python_dispatch", "dispatch", _DISPATCH),
    ("builtins", "introspection", "builtins is off limits (it holds eval, open and __import__, and a patch of it "
     "changes every module)"),
    ("__main__ kforge_harness kforge_task", "introspection", _HARNESS),
    ("ctypes _ctypes cffi mmap faulthandler _testcapi _testinternalcapi torch.utils.cpp_extension "
     "torch.ops.load_library torch.classes.load_library torch.cuda.jiterator triton.runtime.build "
     "numpy.ctypeslib numpy.lib.stride_tricks numpy.f2py numpy.distutils numpy.testing.extbuild distutils "
     "setuptools cuda nvidia pycuda cupy numba llvmlite _testbuffer _testmultiphase", "native", _NATIVE),
    ("socket _socket ssl http urllib urllib3 requests httpx aiohttp ftplib smtplib socketserver poplib imaplib "
     "nntplib telnetlib smtpd xmlrpc websocket websockets", "network", _NET),
    ("pickle _pickle cPickle marshal shelve dill cloudpickle copyreg importlib imp runpy code codeop "
     "zipimport pkgutil pydoc site sitecustomize usercustomize annotationlib timeit.timeit timeit.repeat "
     "timeit.Timer timeit.main torch.utils.benchmark torch.package torch.hub string.Formatter logging.config "
     "types.CodeType types.FunctionType types.LambdaType typing.get_type_hints typing.ForwardRef "
     "typing.evaluate_forward_ref numpy.testing.runstring numpy.lib.utils numpy.lookfor triton.compile "
     "triton.compiler.compile doctest unittest py_compile compileall modulefinder pyclbr _imp _frozen_importlib "
     "_frozen_importlib_external "
     # installed beside torch or common: sympy.sympify and pandas.eval are eval, jinja2 templates run
     # code, pytest and torchgen load and write code, yaml.unsafe_load and joblib unpickle
     "sympy isympy mpmath jinja2 numexpr pandas yaml joblib IPython pytest _pytest pluggy pygments torchgen",
     "dynamic_code", _CODE),
    ("pathlib shutil tempfile glob fileinput linecache tokenize _io io.open io.open_code io.FileIO "
     "codecs.open codecs.EncodedFile gzip bz2 lzma zipfile tarfile sqlite3 dbm configparser netrc mimetypes "
     "filecmp logging.FileHandler logging.handlers logging.basicConfig torch.load torch.save torch.from_file "
     "torch.serialization.load torch.serialization.save torch.jit.load torch.jit.save torch.export.load "
     "torch.export.save torch.cuda.gds torch.cuda.tunable torch.utils.data.datapipes torch.utils.tensorboard "
     "triton.runtime.cache numpy.load numpy.save numpy.savez numpy.savez_compressed numpy.fromfile numpy.loadtxt "
     "numpy.savetxt numpy.genfromtxt numpy.fromregex numpy.memmap numpy.DataSource numpy.lib.format "
     "numpy.lib.npyio readline gettext xml zipapp imghdr sndhdr networkx fsspec filelock iniconfig h5py PIL cv2 "
     "imageio matplotlib scipy.io", "files", _FILES),
    ("operator.attrgetter operator.methodcaller", "computed_name",
     "computed attribute access is not allowed (use plain attribute access)"),
    ("unittest.mock mock", "patching", "patching is not allowed"),
]:
    FORBIDDEN.update(dict.fromkeys(_names.split(), (_rule, _why)))

# Attribute names refused on any object, however it was reached (a module, a parameter, a call's
# result, an item of a container): torch's, numpy's and the standard library's ways to files, raw
# memory and code loaded by name go by these names, and no kernel needs one of them.
NAMED = {}
for _names, _rule, _why in [
    ("open open_code fdopen FileIO from_file fromfile tofile memmap open_memmap loadtxt savetxt genfromtxt "
     "fromregex DataSource PyTorchFileReader PyTorchFileWriter _open_file _open_zipfile_reader "
     "_open_zipfile_writer _write_file _set_from_file _new_with_file _new_shared_filename_cpu "
     "_new_using_filename_cpu _share_filename_cpu_ _new_shared_fd_cpu _new_using_fd_cpu _share_fd_cpu_ "
     "_get_shared_fd download_url_to_file load_state_dict_from_url urlopen urlretrieve GdsFile "
     "export_chrome_trace export_stacks export_memory_timeline export_memory_timeline_html "
     "export_memory_timeline_raw tensorboard_trace_handler read_text read_bytes write_text write_bytes "
     # ndarray.dump pickles to a file; warn_explicit, showwarning and formatwarning read a line of any file
     # (linecache) into the log
     "dump warn_explicit showwarning formatwarning",
     "files", _FILES),
    ("ctypes _ctypes ctypeslib data_as from_address _as_parameter_ pythonapi cdll CDLL PyDLL pydll dlopen "
     "load_library load_inline load_binary _create_jit_fn cudart CUDAPluggableAllocator change_current_allocator "
     "caching_allocator_delete _new_with_weak_ptr _set_cdata _cdata _swap_data_ptr_ _shared_incref "
     "_shared_decref string_at memmove memset addressof __array_interface__ __array_struct__ "
     "_load_global_deps _preload_cuda_deps _preload_cuda_lib", "native", _NATIVE),
    ("get_type_hints ForwardRef _eval_type _evaluate evaluate_forward_ref get_annotations __annotations__ "
     "__annotate__ find_spec module_from_spec spec_from_file_location spec_from_loader load_module exec_module "
     "find_loader get_loader import_submodule get_field CodeType FunctionType LambdaType codeobj runstring "
     "_import_device_backends _register_device_module", "dynamic_code", _CODE),
    ("attrgetter methodcaller", "computed_name", "computed attribute access is not allowed (use plain attribute "
     "access)"),
]:
    NAMED.update(dict.fromkeys(_names.split(), (_rule, _why)))

# Functions that import a module or look an object up by its dotted name ("os", "os.system",
# "os:system"). With a literal name the target is resolved and checked like an import; with any
# other argument the call is refused. The first set is recognised on any object, `locate` only
# where it resolves to an imported function (pydoc.locate).
IMPORTERS = {"__import__", "import_module", "_import_dotted_name", "resolve_name", "_resolve_name",
             "set_default_tensor_type", "add_newdoc", "_makenamedict"}
IMPORTERS_RESOLVED = IMPORTERS | {"locate"}

# Names of process, file and interpreter functions of os, sys, subprocess and ctypes. On an object
# this check cannot resolve (a parameter, a call's result, an item of a container) they mean that the
# object is such a module, reached some way the check does not follow: refused. OPAQUE_ATTRS adds
# the names refused on the result of a call the check cannot resolve (`m = f("o" + x); m.modules`).
ANY_RECEIVER = set(
    "fork forkpty kill killpg system popen execv execve execl execle execlp execlpe execvp execvpe spawnv "
    "spawnve spawnl spawnle spawnlp spawnlpe spawnvp spawnvpe posix_spawn posix_spawnp _exit setsid setuid "
    "setgid setpgid setpgrp unshare setns putenv unsetenv environ environb Popen check_output check_call "
    "getoutput getstatusoutput listdir scandir unlink rmdir readlink symlink chmod chown makedirs".split())
OPAQUE_ATTRS = ANY_RECEIVER | {"modules", "exec", "loads", "getcwd", "stdin", "path_hooks", "meta_path"}
OPAQUE = "<call>"  # what the result of a call the check cannot resolve resolves to
# Private names (a leading _) of the standard library and of torch, numpy and triton: their
# internals hold importers, file readers and code loaders (torch._utils._import_dotted_name,
# torch.fx.graph_module._exec_with_source, numpy.core._internal._ctypes) that no list could
# name. Refused, except a private function right on torch (torch._scaled_mm, torch._assert), in
# torch.nn.init / torch.nn.functional, under torch.ops, and these prefixes.
LIBRARIES = {"torch", "numpy", "triton"}
PRIVATE_FINAL_OK = ("torch", "torch.nn.init", "torch.nn.functional")
PRIVATE_OK = ("torch.ops", "torch._inductor.runtime.triton_helpers", "torch._C._cuda_getCurrentRawStream")
# Private names that are public API (namedtuple's) on objects the check cannot resolve.
PRIVATE_PUBLIC = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}
_PRIVATE = ("private internals (a name starting with _) of the standard library, torch, numpy and triton "
            "are not allowed: they hold importers, file readers and code loaders that no check follows")

# Module names that count as that module wherever they appear in a chain: torch.serialization.os
# is os. Only names that are never anything but the module (not `signal`, `trace`: torch has
# torch.signal and torch.jit.trace).
REROOT = {"os", "sys", "builtins", "gc", "ctypes", "subprocess", "inspect", "importlib", "threading",
          "multiprocessing", "pickle", "marshal", "posix", "_thread", "socket", "shutil", "io", "_io",
          "codecs", "pydoc", "pkgutil", "runpy", "tempfile", "pathlib", "linecache", "zipfile", "tarfile",
          "gzip", "site", "copyreg", "_ctypes", "mmap", "faulthandler", "_posixsubprocess", "tokenize", "dis",
          "logging"}
# Other names torch's and numpy's public modules keep modules under (torch.storage.np is numpy,
# torch.utils.data.dataloader.python_multiprocessing is multiprocessing): rerooted like REROOT.
MODULE_ALIASES = {"np": "numpy", "mp": "multiprocessing", "python_multiprocessing": "multiprocessing",
                  "reducer": "multiprocessing.reduction", "reduction": "multiprocessing.reduction",
                  "copymodule": "copy", "container_abcs": "collections.abc"}
# Standard library modules at the end of a chain through torch, numpy or triton
# (torch.cuda.random, torch.fx.graph_module.warnings) are modules, used only through attributes;
# these names are also functions there (torch.select, numpy.copy, numpy.array, torch.jit.trace).
STDLIB_MODULES = set(getattr(sys, "stdlib_module_names", ())) - {"copy", "select", "array", "trace", "code",
                                                                 "operator", "token", "stat", "this", "string"}
# Module names as attributes of an object the check cannot resolve (m.os.write, m.sys.modules):
# the object is a module passed around some way the check does not follow.
MODULE_ATTRS = REROOT - {"io", "logging", "site", "dis", "tokenize"}
# Strings naming one of these modules may not be passed to a call (an importer the check does not
# know would reach them). Names that are also common words (code, trace, profile, signal, ...) are
# left out.
MODULE_STRINGS = REROOT | {"posix", "nt", "_posixsubprocess", "cffi", "_socket", "_pickle", "__main__",
                           "kforge_harness", "kforge_task", "_testcapi", "_testinternalcapi", "_signal", "_imp",
                           "zipimport", "annotationlib", "tracemalloc", "_interpreters", "_xxsubinterpreters"}
MODULE_STRINGS -= {"io", "site", "logging", "dis", "nt"}

OS_ALLOWED = {"environ", "getenv", "path", "sep", "linesep", "pathsep", "curdir", "pardir", "extsep",
              "altsep", "devnull", "name", "cpu_count", "getpid", "fspath", "PathLike"}
OS_PROCESS = re.compile(r"^(fork\w*|kill\w*|system|popen|exec\w*|spawn\w*|posix_spawn\w*|_exit|abort|"
                        r"set\w*id|setpgrp|unshare|setns|wait\w*|pidfd\w*|register_at_fork|sched_\w+|"
                        r"nice|chroot|chdir|fchdir|plock)$")
ENVIRON_READS = {"get", "items", "keys", "values", "copy", "__contains__", "__getitem__", "__iter__", "__len__"}
SYS_ALLOWED = {"maxsize", "float_info", "int_info", "hash_info", "version", "version_info", "hexversion",
               "implementation", "byteorder", "platform", "stdout", "stderr", "maxunicode",
               "float_repr_style", "getsizeof", "getrecursionlimit", "getdefaultencoding"}
# sys.stdout and sys.stderr: printing only (their .buffer.raw is a FileIO, whose class opens files).
STREAM_ALLOWED = {"write", "flush", "writelines", "isatty", "encoding"}

# Builtins (resolved as "@.name") refused by name.
BANNED_BUILTINS = {
    "eval": _CODE, "exec": _CODE, "compile": _CODE, "__import__": _CODE,
    "globals": "reaching namespaces by name is not allowed (frame and module introspection)",
    "locals": "reaching namespaces by name is not allowed (frame and module introspection)",
    "vars": "reaching namespaces by name is not allowed (frame and module introspection)",
    "breakpoint": "debuggers are not allowed", "open": _FILES,
    "exit": "ending the process is not allowed", "quit": "ending the process is not allowed",
    "help": _CODE + " (help() imports modules by name)", "license": _FILES,
    "input": "reading the worker's standard input is not allowed",
}
_BUILTIN_RULES = {"open": "files", "license": "files", "input": "files", "exit": "process", "quit": "process",
                  "globals": "introspection", "locals": "introspection", "vars": "introspection",
                  "breakpoint": "introspection"}
BUILTIN_NAMES = set(dir(builtins))
# Attributes that reach frames, code, globals or the class graph, refused on any object.
BANNED_ATTRS = {
    "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next",
    "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "__traceback__", "__globals__",
    "__closure__", "__code__", "__subclasses__", "__mro__", "mro", "__bases__", "__base__",
    "__builtins__", "__self__", "__getattribute__", "__setattr__", "__delattr__", "__reduce__",
    "__reduce_ex__", "__loader__", "__spec__", "__import__", "__dict__", "__func__", "__wrapped__",
    "__getattr__", "_getframe", "_current_frames", "settrace", "setprofile", "addaudithook", "get_objects",
    "get_referrers", "get_referents",
}
BANNED_NAMES = {"__loader__", "__spec__"}  # __builtins__ resolves to the module builtins
# Strings that spell one of these (getattr(x, n) with n built elsewhere) are refused too.
BANNED_STRINGS = (BANNED_ATTRS - {"mro", "__dict__"}) | {n for n in NAMED if n.startswith("_")} | {
    "from_file", "fromfile", "tofile", "ctypeslib", "data_as", "pythonapi", "get_type_hints", "ForwardRef",
    "CodeType", "attrgetter", "methodcaller", "_import_dotted_name", "import_module"}
_FORMAT_REACH = re.compile(r"\{[^{}]*[.\[](%s)\b[^{}]*\}" % "|".join(sorted(BANNED_STRINGS)))
# Timers and the objects a patch would aim at: like modules, usable only through attributes.
PROTECTED = {"torch.cuda.Event", "torch.cuda.synchronize", "torch.cuda.current_stream", "time.time",
             "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
             "time.monotonic_ns", "time.process_time", "timeit.default_timer", "torch.Tensor",
             "torch.nn.Module", "os.environ", "sys.stdout", "sys.stderr"}
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


def dotted(node: Optional[ast.AST]) -> Optional[str]:
    """'torch.cuda.Event' for an Attribute/Name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


# torch.library's wrappers of a @triton.jit kernel for a launch inside a triton_op:
# `wrap_triton(kernel)[grid](...)` launches `kernel` (capture_triton is its older name).
LAUNCH_WRAPPERS = {"wrap_triton", "capture_triton"}


def launched(node: ast.expr) -> ast.expr:
    """The kernel a launch's subscripted expression names: `kernel` in `kernel[grid]` and in
    `wrap_triton(kernel)[grid]`."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and \
            (dotted(node.func) or "").split(".")[-1] in LAUNCH_WRAPPERS:
        return node.args[0]
    return node


def decorator_is_jit(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = dotted(target) or ""
    return name.split(".")[-1] == "jit"


class StaticReport:
    def __init__(self) -> None:
        self.errors: List[Entry] = []
        self.warnings: List[Entry] = []
        self.jit_kernels: List[str] = []
        self.launches: List[str] = []

    def error(self, rule: str, message: str, line: Optional[int] = None) -> None:
        entry = {"rule": rule, "message": message, "line": line}
        if entry not in self.errors:
            self.errors.append(entry)

    def warn(self, rule: str, message: str, line: Optional[int] = None) -> None:
        self.warnings.append({"rule": rule, "message": message, "line": line})

    def as_dict(self) -> Dict[str, Any]:
        return {
            "errors": self.errors,
            "warnings": self.warnings,
            "jit_kernels": self.jit_kernels,
            "launches": self.launches,
        }


def static_check(source: str, reject_torch_ops: bool = False) -> Tuple[Optional[str], Dict[str, Any], Optional[Dict[str, Any]]]:
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


_TRY_NODES: Tuple[type, ...] = (ast.Try, getattr(ast, "TryStar", ast.Try))  # try/except and try/except*


def _static_rules(tree: ast.Module, report: StaticReport, reject_torch_ops: bool) -> None:
    """The rule families in their order: the kernels and launches found (and the structure they
    must have), the security rules, fallbacks and side streams, PyTorch compute in forward."""
    top_classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions: Dict[str, Function] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, node)
    jit = _jit_kernels(tree)
    report.jit_kernels = sorted(jit)
    launches: List[Any] = [n for n in ast.walk(tree) if _is_launch(n, jit)]  # calls of a subscript
    report.launches = sorted({(dotted(launched(n.func.value)) or "?") for n in launches})
    _structure_rules(report, "ModelNew" in top_classes, bool(jit), bool(launches))
    modelnew = top_classes.get("ModelNew")
    _security_rules(tree, report)
    _fallback_rules(tree, report, jit, functions, modelnew)
    if modelnew is not None:
        _torch_op_rules(modelnew, functions, report, reject_torch_ops)


def _jit_kernels(tree: ast.Module) -> Set[str]:
    """@triton.jit kernels, by decorator or by `name = triton.jit(fn)`."""
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
    return jit


def _is_launch(call: ast.AST, jit: Set[str]) -> bool:
    """`kernel[grid](...)` (or `wrap_triton(kernel)[grid](...)`) of one of the jit kernels."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Subscript):
        return False
    name = dotted(launched(call.func.value)) or ""
    return name.split(".")[-1] in jit


def _structure_rules(report: StaticReport, has_modelnew: bool, has_jit: bool, has_launch: bool) -> None:
    """A module-level ModelNew, a @triton.jit kernel, and a launch of one."""
    if not has_modelnew:
        report.error("no_modelnew", "the kernel must define `class ModelNew` at module level")
    if not has_jit:
        report.error("no_triton", "no @triton.jit kernel is defined: the work must run in Triton")
    elif not has_launch:
        report.error("no_launch", "no @triton.jit kernel is launched (expected `kernel[grid](...)`)")


def _fallback_rules(tree: ast.Module, report: StaticReport, jit: Set[str], functions: Dict[str, Function],
                    modelnew: Optional[ast.ClassDef]) -> None:
    """try/except around kernel code (a launch, a call of a function that launches, anything in
    ModelNew) and contextlib.suppress hide kernel failures; side CUDA streams are a warning."""
    launching_functions = {
        name for name, fn in functions.items() if name not in jit and any(_is_launch(n, jit) for n in ast.walk(fn))
    }
    modelnew_nodes = set(id(n) for n in ast.walk(modelnew)) if modelnew else set()
    node: Any  # every kind of node, narrowed where it matters
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            if name in ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.Stream"):
                report.warn("side_stream", "uses a side CUDA stream (%s): timing is cross-checked against host time" % name, line)
            if name.split(".")[-1] == "suppress" and ("contextlib" in name or name == "suppress"):
                report.error("fallback", "contextlib.suppress hides kernel failures", line)
        elif isinstance(node, _TRY_NODES) and cast(Any, node).handlers:
            inside_modelnew = id(node) in modelnew_nodes
            guarded = any(
                _is_launch(n, jit)
                or (isinstance(n, ast.Call) and (dotted(n.func) or "").split(".")[-1] in launching_functions)
                for stmt in cast(Any, node).body
                for n in ast.walk(stmt)
            )
            if guarded or inside_modelnew:
                report.error(
                    "fallback",
                    "try/except around kernel code: a fallback hides kernel failures (remove the try/except)",
                    line,
                )


# ---------------------------------------------------------------- forbidden names, by any spelling

_LIMIT = 4096  # longest string (or sequence) a fold builds
_FOLD_ERRORS = (TypeError, ValueError, IndexError, KeyError, LookupError, OverflowError, AttributeError,
                SyntaxError, binascii.Error)
# Codecs a fold may apply: looking up any other name would import a module in this process.
_CODECS = {"utf-8", "utf8", "ascii", "latin-1", "latin1", "iso-8859-1", "utf-16", "utf-32", "rot13", "rot_13",
           "hex", "base64", "unicode_escape", "raw_unicode_escape"}
_STR_METHODS = {"join", "replace", "lower", "upper", "strip", "lstrip", "rstrip", "decode", "encode", "capitalize",
                "title", "swapcase", "removeprefix", "removesuffix", "casefold", "__add__", "translate", "format",
                "maketrans"}
_DECODERS: Dict[str, Callable[..., Any]] = {"base64.b64decode": base64.b64decode, "base64.b32decode": base64.b32decode,
             "base64.b16decode": base64.b16decode, "base64.a85decode": base64.a85decode,
             "base64.b85decode": base64.b85decode, "base64.urlsafe_b64decode": base64.urlsafe_b64decode,
             "binascii.unhexlify": binascii.unhexlify, "binascii.a2b_hex": binascii.a2b_hex,
             "operator.add": lambda a, b: a + b, "operator.concat": lambda a, b: a + b}
_PERCENT_OK = re.compile(r"(?:[^%]|%[%sdrxXo])*", re.S)


def fold(node: ast.AST, env: Optional[Dict[str, Any]] = None, depth: int = 0) -> Any:
    """The value of a constant string expression ("fo" + "rk", "".join([...]), "krof"[::-1],
    chr(102), f"{'fo'}rk", "{}{}".format(...), "%s" % ..., bytes.decode, rot13, a name bound only
    to constants (env), ...), else None. Nothing of the candidate runs: only these operations on
    constants are evaluated, none of which can grow a value much past the limit it is cut at
    (formats take no widths, codecs only the listed ones)."""
    value = _fold(node, env or {}, depth)
    return None if isinstance(value, (str, bytes, list, tuple)) and len(value) > _LIMIT else value


def _fold_format(fmt: str, args: Sequence[Any], kwargs: Dict[Any, Any]) -> Optional[str]:
    for _, field, spec, conversion in string.Formatter().parse(fmt):
        if field is not None and (spec or conversion or not re.fullmatch(r"\d*|[A-Za-z_]\w*", field)):
            return None  # widths, conversions, attribute and item lookups are not folded
    if any(not isinstance(a, (str, int)) for a in list(args) + list(kwargs.values())):
        return None
    return fmt.format(*args, **kwargs)


def _fold(node: Any, env: Dict[str, Any], depth: int) -> Any:
    if depth > 100:
        return None
    def sub(n: ast.AST, e: Dict[str, Any] = env) -> Any:
        return fold(n, e, depth + 1)

    if isinstance(node, ast.Constant):
        v = node.value
        return v if isinstance(v, (str, bytes, int)) and not isinstance(v, bool) else None
    if isinstance(node, ast.Name):
        return env.get(node.id)
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
                    sum(len(v) if isinstance(v, (str, bytes, list, tuple)) else 0 for v in values) > _LIMIT:
                return None
            first = values[0]
            if isinstance(first, int):
                return sum(values)
            return first[:0].join(values) if isinstance(first, (str, bytes)) else sum(values, type(first)())
        if isinstance(node, ast.BinOp):
            left, right = sub(node.left), sub(node.right)
            if left is None or right is None:
                return None
            if isinstance(node.op, ast.Mult) and isinstance(right, int) and len(str(left)) * right <= _LIMIT:
                return left * right
            if isinstance(node.op, ast.Mod) and isinstance(left, str) and _PERCENT_OK.fullmatch(left):
                return left % (tuple(right) if isinstance(right, list) else right)
            return None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for piece in node.values:
                if isinstance(piece, ast.FormattedValue):
                    if piece.format_spec is not None or piece.conversion != -1:
                        return None
                    piece = piece.value
                part = sub(piece)
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
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and len(node.generators) == 1:
            gen = node.generators[0]
            seq = sub(gen.iter)
            if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name) or \
                    not isinstance(seq, (str, bytes, list, tuple)):
                return None
            items = [sub(node.elt, dict(env, **{gen.target.id: item})) for item in seq]
            return None if any(i is None for i in items) else items
        if isinstance(node, ast.Call):
            return _fold_call(node, env, sub)
    except _FOLD_ERRORS:
        return None
    return None


def _fold_call(node: ast.Call, env: Dict[str, Any], sub: Callable[..., Any]) -> Any:
    f = node.func
    if isinstance(f, ast.Name) and f.id == "map" and len(node.args) == 2 and isinstance(node.args[0], ast.Name):
        # map(chr, [...]): the first argument is a function, not a constant.
        seq = sub(node.args[1])
        return [chr(c) for c in seq] if node.args[0].id == "chr" and isinstance(seq, (list, tuple)) else None
    args = [sub(a) for a in node.args]
    kwargs = {k.arg: sub(k.value) for k in node.keywords}
    if any(a is None for a in args) or any(k is None or v is None for k, v in kwargs.items()):
        return None
    name = dotted(f) or ""
    if isinstance(f, ast.Attribute) and f.attr == "format" and not isinstance(f.value, ast.Name):
        fmt = sub(f.value)
        return _fold_format(fmt, args, kwargs) if isinstance(fmt, str) else None
    if kwargs:
        return None
    # a codec's name is looked up, and maybe imported, by this process: only the listed ones
    if isinstance(f, ast.Name) and f.id in ("str", "bytes", "bytearray"):
        codec = args[1:2]
    elif isinstance(f, ast.Attribute) and f.attr in ("decode", "encode"):
        codec = args[1:2] if isinstance(f.value, ast.Name) and f.value.id in ("str", "bytes", "codecs") else args[:1]
    else:
        codec = []
    if any(not isinstance(a, str) or a.lower() not in _CODECS for a in codec):
        return None
    if isinstance(f, ast.Name) and f.id in ("chr", "str", "reversed", "list", "tuple", "sorted", "bytes",
                                            "bytearray", "int"):
        if f.id == "chr" and args and isinstance(args[0], int):
            return chr(args[0])
        if f.id in ("str", "bytes") and len(args) == 2 and isinstance(args[1], str) and args[1].lower() in _CODECS:
            return str(*args) if f.id == "str" else bytes(*args)
        if f.id == "int" and len(args) == 2 and isinstance(args[0], str) and len(args[0]) <= 64:
            return int(*args)
        if f.id not in ("chr", "int") and len(args) == 1 and isinstance(args[0], (str, bytes, list, tuple)):
            convert: Dict[str, Callable[[Any], Any]] = {
                "str": str, "reversed": lambda v: list(reversed(v)), "list": list, "tuple": tuple, "sorted": sorted,
                "bytes": bytes, "bytearray": bytes}
            return convert[f.id](args[0])
        return None
    if name in ("codecs.decode", "codecs.encode") and len(args) == 2 and args[1] in ("rot13", "rot_13") and \
            isinstance(args[0], str):
        return codecs.decode(args[0], "rot13")
    if name in _DECODERS and all(isinstance(a, (str, bytes)) for a in args) and len(args) in (1, 2):
        return _DECODERS[name](*args)
    if name == "ast.literal_eval" and len(args) == 1 and isinstance(args[0], str):
        value = ast.literal_eval(args[0])
        return value if isinstance(value, (str, bytes, int, tuple, list)) and not isinstance(value, bool) else None
    if not isinstance(f, ast.Attribute):
        return None
    if name == "bytes.fromhex":
        return bytes.fromhex(*args)
    if isinstance(f.value, ast.Name) and f.value.id in ("str", "bytes") and f.attr in _STR_METHODS - {"format"} and \
            args:
        return getattr(str if f.value.id == "str" else bytes, f.attr)(*args)  # str.join("", [...])
    obj = sub(f.value)
    if isinstance(obj, (str, bytes)) and f.attr in _STR_METHODS - {"format", "maketrans"}:
        if f.attr == "translate" and not (len(args) == 1 and isinstance(args[0], dict)):
            return None
        return getattr(obj, f.attr)(*args)
    if isinstance(obj, int) and f.attr == "to_bytes" and len(args) == 2 and isinstance(args[0], int) and \
            0 <= args[0] <= _LIMIT and args[1] in ("big", "little"):
        return obj.to_bytes(*args)
    return None


def _private(p: str) -> bool:
    return p.startswith("_") and not (p.startswith("__") and p.endswith("__"))


def _private_hit(parts: List[str]) -> Optional[str]:
    """The dotted name up to the private name that refuses parts, else None."""
    if parts[0].startswith(("@", "<")) or len(parts) < 2:
        return None
    joined = ".".join(parts)
    if any(joined == p or joined.startswith(p + ".") for p in PRIVATE_OK):
        return None
    for i, p in enumerate(parts[1:], 1):
        if _private(p):
            if i == len(parts) - 1 and ".".join(parts[:i]) in PRIVATE_FINAL_OK:
                return None
            return ".".join(parts[:i + 1])
    return None


def _forbidden_rooted(parts: List[str]) -> Optional[reach.Hit]:
    for n in range(1, len(parts) + 1):
        prefix = ".".join(parts[:n])
        if prefix in FORBIDDEN:
            rule, why = FORBIDDEN[prefix]
            return rule, ".".join(parts), why
    root, attr = parts[0], (parts[1] if len(parts) > 1 else None)
    if root == OPAQUE:
        return None  # a call's result: checked attribute by attribute (check_attr), with the names it may hold
    if root in LIBRARIES and not _on_the_way_to(".".join(parts), PRIVATE_OK):
        hit = reach.library_refusal(parts, _is_library_module)
        if hit:
            return hit
    elif root in STDLIB_NAMES and root not in reach.STDLIB_ALLOWED:
        return reach.import_refusal(root, STDLIB_NAMES, _installed)
    if root != "@" and any(p in BANNED_ATTRS for p in parts[1:]):
        return "introspection", ".".join(parts), _INTROSPECT
    if root != "@":
        for p in parts[1:]:
            if p in NAMED:
                rule, why = NAMED[p]
                return rule, ".".join(parts), why
    if root == "@" and attr in BANNED_BUILTINS:
        return _BUILTIN_RULES.get(attr, "dynamic_code"), attr, BANNED_BUILTINS[attr]
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
    if root == "sys" and attr in ("stdout", "stderr") and len(parts) > 2 and parts[2] not in STREAM_ALLOWED:
        return "files", ".".join(parts[:3]), "of sys.stdout and sys.stderr only write and flush are allowed " \
                                             "(their buffers are files)"
    if root == "torch" and attr == "library" and len(parts) > 2 and parts[2] not in TORCH_LIBRARY_OK:
        return "dispatch", ".".join(parts), _DISPATCH + " (of torch.library only %s are allowed)" % ", ".join(
            sorted(TORCH_LIBRARY_OK))
    if root == "torch" and any(p.startswith(("register_module_", "_global_")) for p in parts):
        return "introspection", ".".join(parts), "global module hooks see every module's inputs and outputs"
    if root == CLASS and attr in OPAQUE_ATTRS:
        return "unresolved_module", ".".join(parts), _UNRESOLVED % attr
    private = _private_hit(parts)
    if private:
        return "private", private, _PRIVATE
    return None


_UNRESOLVED = ("an object this check cannot resolve is used like a module (os, sys, subprocess, ctypes): "
               "no kernel needs .%s on anything")


def _rerooted(parts: List[str]) -> List[List[str]]:
    """The chains q stands for: itself, and from each module named on the way (torch.serialization.os.fork
    is os.fork, torch.storage.np.load is numpy.load), those first."""
    found = []
    for i, part in enumerate(parts):
        if i and (part in REROOT or part in LIBRARIES):
            found.append(parts[i:])
        elif i and part in MODULE_ALIASES:
            found.append(MODULE_ALIASES[part].split(".") + parts[i + 1:])
        elif i and _stdlib_on_the_way(parts, i):
            found.append(parts[i:])
    return found + [parts]


def _on_the_way_to(name: str, allowed: Iterable[str]) -> bool:
    """name is one of `allowed`, below one, or a chain on the way to one (torch._C on the way to
    torch._C._cuda_getCurrentRawStream)."""
    return reach.under(name, allowed) or any(p.startswith(name + ".") for p in allowed)


def _stdlib_on_the_way(parts: List[str], i: int) -> bool:
    """parts[i] is a standard module reached through torch, numpy or triton (torch.fx.graph_module.linecache),
    not a module of the library of the same name (torch.random, torch.signal)."""
    return parts[0] in LIBRARIES and parts[i] in STDLIB_MODULES and ".".join(parts[:i + 1]) not in library_modules()


def forbidden(q: str) -> Optional[reach.Hit]:
    """(rule, subject, why) when the dotted name q is refused, else None."""
    for parts in _rerooted(q.split(".")):
        hit = _forbidden_rooted(parts)
        if hit:
            return hit
    return None


_LIBRARY_MODULES: Optional[Set[str]] = None
STDLIB_NAMES = frozenset(getattr(sys, "stdlib_module_names", ()))
_INSTALLED: Dict[str, bool] = {}


def _is_library_module(name: str) -> bool:
    return name in library_modules()


def _installed(root: str) -> bool:
    """A top-level module of that name can be imported here (a builtin module or one on the path):
    found, not imported."""
    if root not in _INSTALLED:
        try:
            found = root in sys.builtin_module_names or importlib.machinery.PathFinder.find_spec(root) is not None
        except (ImportError, ValueError, OSError):
            found = False
        _INSTALLED[root] = found
    return _INSTALLED[root]


def library_modules() -> Set[str]:
    """Dotted names of the modules of torch, numpy and triton, from the files of the installed
    packages (nothing is imported; read once per process)."""
    global _LIBRARY_MODULES
    if _LIBRARY_MODULES is None:
        found: Set[str] = set()
        for root in sorted(LIBRARIES):
            try:
                spec = importlib.machinery.PathFinder.find_spec(root)
            except (ImportError, ValueError, OSError):
                spec = None
            for base in (spec.submodule_search_locations or ()) if spec else ():
                for path, dirs, files in os.walk(base):
                    rel = os.path.relpath(path, base)
                    if rel != "." and "__init__.py" not in files:
                        dirs[:] = []
                        continue
                    prefix = root if rel == "." else root + "." + rel.replace(os.sep, ".")
                    dirs[:] = [d for d in dirs if d.isidentifier()]
                    found.add(prefix)
                    found.update(prefix + "." + f.split(".")[0] for f in files if f.endswith((".py", ".so")) and
                                 f.split(".")[0].isidentifier() and f != "__init__.py")
        _LIBRARY_MODULES = found
    return _LIBRARY_MODULES


def show(q: str) -> str:
    if q.startswith(OPAQUE):
        return "(a call's result)" + q[len(OPAQUE):]
    return q[2:] if q.startswith("@.") else q


def _module_string(s: str) -> Optional[str]:
    """The module or dotted name that the string s names ("os", "ctypes", "os.system", "os:system")
    where that is refused, else None."""
    name = s.replace(":", ".")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
        return None
    root = name.split(".")[0]
    if name in MODULE_STRINGS or (root in MODULE_STRINGS | {"os", "sys"} and "." in name and forbidden(name)):
        return name
    return None


def _bound_names(node: ast.AST) -> List[str]:
    """Identifiers a node binds other than by `name = value` or a loop over constants."""
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [(node.asname or node.name).split(".")[0]]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    # Pattern matching's nodes exist from Python 3.10; on 3.9 (the harness runs there too) no
    # source contains them.
    if sys.version_info >= (3, 10) and isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if sys.version_info >= (3, 10) and isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []


class Names:
    """Resolution of names and attribute chains to dotted names of what was imported ("os.fork",
    "torch.cuda.Event") or of builtins ("@.open"), through imports and plain assignments; and of
    names bound only to constants to their values."""

    def __init__(self, tree: ast.AST) -> None:
        # walked once: every pass below goes over this list (nodes of every kind, narrowed where it matters)
        self.nodes: List[Any] = list(ast.walk(tree))
        self.parent: Dict[ast.AST, ast.AST] = {}
        for node in self.nodes:
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.bindings: Dict[str, Set[str]] = {}
        self._memo: Optional[Dict[int, Tuple[ast.AST, FrozenSet[str]]]] = None
        self.modules = set(KNOWN_MODULES)
        self.annotations: Set[int] = set()
        self.local_classes = {n.name: n for n in self.nodes if isinstance(n, ast.ClassDef)}
        self._constants(tree)
        aliases: List[Tuple[List[Any], ast.expr]] = []
        for node in self.nodes:
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
                targets: List[Any] = node.targets if isinstance(node, ast.Assign) else [node.target]
                aliases.append(([t.id for t in targets], node.value))
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and dotted(node.targets[0]):
                # self.cls = type(x): attribute targets are bound by their dotted name ("self.cls"). A
                # module or timer stored this way is refused as a value use; this follows the rest.
                aliases.append(([dotted(node.targets[0])], node.value))
            annotations = [getattr(node, "returns", None), getattr(node, "annotation", None)]
            for annotation in annotations:
                if annotation is not None:
                    self.annotations.update(id(n) for n in ast.walk(annotation))
        for _ in range(4):  # `a = os; b = a; c = b.path`: a few rounds reach a fixed point in practice
            for targets, value in aliases:
                for q in self.qual(value):
                    for t in targets:
                        self.bind(t, q)
        self._memo = {}  # the bindings are final: qual is a function of the node from here on

    def _constants(self, tree: ast.AST) -> None:
        """self.consts: identifier -> the set of constant values it is ever bound to, for names
        bound only by `name = <constant expression>` or `for name in <constant sequence>`
        (flow-insensitive, like the rest); self.env: those bound to one value."""
        candidates: Dict[str, List[Tuple[bool, ast.expr]]] = {}
        variable: Set[str] = set()
        for node in self.nodes:
            variable.update(_bound_names(node))
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                parent = self.parent.get(node)
                if isinstance(parent, ast.Assign) and node in parent.targets:
                    candidates.setdefault(node.id, []).append((False, parent.value))
                elif isinstance(parent, ast.AnnAssign) and parent.target is node and parent.value is not None:
                    candidates.setdefault(node.id, []).append((False, parent.value))
                elif isinstance(parent, (ast.For, ast.comprehension)) and parent.target is node:
                    candidates.setdefault(node.id, []).append((True, parent.iter))
                else:
                    variable.add(node.id)
        self.consts, self.env, self.multi = {}, {}, set()
        for _ in range(4):
            for name, items in candidates.items():
                if name in variable:
                    continue
                values = set()
                for each, expr in items:
                    found = self.values(expr)
                    if found is not None and each:
                        found = set().union(*(v if isinstance(v, (list, tuple)) else [None] for v in found))
                    if found is None or None in found:
                        break
                    values |= {tuple(v) if isinstance(v, list) else v for v in found}
                else:
                    if values and len(values) <= 64:
                        self.consts[name] = values
                        if len(values) == 1:
                            self.env[name] = next(iter(values))
                        else:
                            self.multi.add(name)

    def fold(self, node: ast.AST) -> Any:
        return fold(node, self.env)

    def values(self, node: ast.AST) -> Optional[Set[Any]]:
        """Every value a constant expression can have (names bound to several constants are tried
        with each), else None."""
        multi = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in self.multi}) \
            if self.multi else ()
        envs = [dict(self.env)]
        for name in multi:
            envs = [dict(e, **{name: v}) for e in envs for v in self.consts[name]]
            if len(envs) > 64:
                return None
        found = set()
        for env in envs:
            value = fold(node, env)
            if value is None:
                return None
            found.add(tuple(value) if isinstance(value, list) else value)
        return found

    def strings(self, node: ast.AST) -> Optional[Set[Any]]:
        """The strings a constant expression can be, else None (a name built at run time)."""
        found = self.values(node)
        return found if found and all(isinstance(v, str) for v in found) else None

    def bind(self, name: str, q: str) -> None:
        quals = self.bindings.setdefault(name, set())
        if len(quals) < 16 and q.count(".") < 12:
            quals.add(q)

    def is_alias(self, node: ast.AST) -> bool:
        """`name = expr` (or `a = b = expr`, `name: T = expr`) outside a class body."""
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            return False
        return all(isinstance(t, ast.Name) for t in targets) and not isinstance(self.parent.get(node), ast.ClassDef)

    def qual(self, node: ast.AST) -> Set[str]:
        if self._memo is None:
            return self._qual(node)
        found = self._memo.get(id(node))
        if found is None:
            found = self._memo[id(node)] = (node, frozenset(self._qual(node)))
        return set(found[1])

    def _qual(self, node: ast.AST) -> Set[str]:
        if isinstance(node, ast.Name):
            quals = set(self.bindings.get(node.id, ()))
            if node.id in BUILTIN_NAMES and not self.is_parameter(node):
                quals.add("@." + node.id)
            if node.id == "__builtins__":
                quals.add("builtins")
            return quals
        if isinstance(node, ast.Attribute):
            if node.attr == "__class__":
                return {CLASS}
            quals = {q + "." + node.attr for q in self.qual(node.value) if not q.startswith("@.")}
            return quals | self.bindings.get(dotted(node) or "", set())
        if isinstance(node, ast.Call):
            func = self.qual(node.func)
            if "@.type" in func and len(node.args) == 1:
                return {CLASS}
            if "@.getattr" in func and len(node.args) > 1:  # a computed name is refused elsewhere
                names = self.strings(node.args[1]) or ()
                return {q + "." + n for q in self.qual(node.args[0]) if not q.startswith("@.") for n in names}
            target = self.importer(node, func)
            if isinstance(target, str):
                return {target}
            if not func:
                return {OPAQUE}
        return set()

    def is_parameter(self, node: ast.Name) -> bool:
        """The name is a parameter of a function it is in (`def g(input)`), not the builtin. A
        default value or annotation is evaluated outside the function it belongs to."""
        child: ast.AST = node
        parent = self.parent.get(node)
        outside = None
        while parent is not None:
            if isinstance(child, ast.arguments):
                outside = parent
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and parent is not outside:
                a = parent.args
                if node.id in {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x}:
                    return True
            child, parent = parent, self.parent.get(parent)
        return False

    def importer(self, node: ast.Call, func: Optional[Set[str]] = None) -> Union[str, bool, None]:
        """For a call of a function that imports by name: the dotted name it imports when that is a
        literal string, True when it is anything else (even a constant expression: names of modules
        are written out), else None (not an importer)."""
        func = self.qual(node.func) if func is None else func
        kinds = {q.rsplit(".", 1)[-1] for q in func} & IMPORTERS_RESOLVED
        if isinstance(node.func, ast.Attribute) and node.func.attr in IMPORTERS:
            kinds.add(node.func.attr)
        if not kinds:
            return None
        kind = sorted(kinds)[0]
        arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in (
            "name", "module", "place", "t")), None)
        if arg is None:
            return "numpy" if kind == "_makenamedict" else True
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            # set_default_tensor_type(torch.cuda.FloatTensor): a class, not a name
            return None if self.resolved(arg) and kind == "set_default_tensor_type" else True
        name = arg.value.replace(":", ".")
        if kind == "__import__":
            fromlist = len(node.args) > 3 or any(k.arg == "fromlist" for k in node.keywords)
            return name if fromlist else name.split(".")[0]
        if kind == "add_newdoc" and len(node.args) > 1:
            obj = node.args[1]
            return name + "." + obj.value if isinstance(obj, ast.Constant) and isinstance(obj.value, str) else True
        return name

    def resolved(self, node: ast.AST) -> Set[str]:
        """The dotted names of imported things (or CLASS) node may be; builtins and results of
        unresolved calls left out."""
        return {q for q in self.qual(node) if not q.startswith(("@.", OPAQUE))}

    def is_module(self, q: str) -> bool:
        parts = q.split(".")
        if parts[0] in LIBRARIES and len(parts) > 1 and parts[-1] in STDLIB_MODULES:
            return True
        return any(".".join(p) in self.modules or ".".join(p) in library_modules() for p in _rerooted(parts))


def _is_self(node: ast.AST) -> bool:
    return (dotted(node) or "").split(".")[0] == "self"


def _is_super(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_METHODS = (ast.FunctionDef, ast.AsyncFunctionDef)  # what self.methods holds
Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
# Classes whose instances are nn.Module-like objects a constructor returns (a safe `self.x = ...`).
_IMPLICIT_CLASS_METHODS = {"__new__", "__init_subclass__", "__class_getitem__"}


class Selves:
    """Where `self` is the instance a method of the kernel's classes was called on, so that a name
    built at run time may be looked up on it (`getattr(self, f"w{i}")`, nn.Module code does that)
    without reaching a function, a class or a module. Refused wherever `self` could be something
    else: `self` rebound or taken by a function that is not a method, a method called on its class
    (`ModelNew.peek(fn, name)`) or reached by name, methods of metaclasses and of __new__.

    A chain `self.a.b` is the kernel's own too when every `self.a`, `self.a.b` is assigned only the
    result of a class's constructor (nn.ModuleList(...), a class of the file) or a constant, and
    `self` is never handed to code that could assign it something else."""

    def __init__(self, tree: ast.AST, names: Names) -> None:
        self.names = names
        self.methods = set()
        self.tainted = False
        self.chains_tainted = False
        self.metaclasses = set()
        for _ in range(3):
            for cls in names.local_classes.values():
                if any(k.arg == "metaclass" for k in cls.keywords) or any(self._meta_base(b) for b in cls.bases):
                    self.metaclasses.add(cls.name)
        for cls in names.local_classes.values():
            if cls.name in self.metaclasses:
                continue
            for item in cls.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and self._plain(item):
                    self.methods.add(item)
        self.method_names = {m.name for m in self.methods}
        self.instances = self._instance_names()
        self.exposed: Set[str] = set()
        self.stores: Dict[str, List[Optional[ast.expr]]] = {}
        for node in names.nodes:
            self._scan(node)

    def _instance_names(self) -> Set[str]:
        """Names only ever bound to a new object of one of the file's classes (`model = ModelNew()`):
        `model.forward(x)` calls forward on an instance."""
        good, bad = set(), set()
        for node in self.names.nodes:
            bad.update(_bound_names(node))
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                parent = self.names.parent.get(node)
                value = parent.value if isinstance(parent, ast.Assign) and parent.targets == [node] else None
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                        value.func.id in self.names.local_classes and self._plain_class(value.func.id, set()):
                    good.add(node.id)
                else:
                    bad.add(node.id)
        return good - bad

    def _meta_base(self, base: ast.expr) -> bool:
        name = (dotted(base) or "").split(".")[-1]
        return "@.type" in self.names.qual(base) or name in self.metaclasses or name.endswith(("Meta", "MetaClass"))

    def _plain(self, fn: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> bool:
        args = fn.args.posonlyargs + fn.args.args
        if fn.name in _IMPLICIT_CLASS_METHODS or not args or args[0].arg != "self":
            return False
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            quals = self.names.qual(target)
            library = self.names.resolved(target) and dotted(target) not in self.names.local_classes
            if not ("@.property" in quals or library):
                return False
        return True

    def _scan(self, node: ast.AST) -> None:
        names = self.names
        if isinstance(node, ast.Name) and node.id == "self" and not isinstance(node.ctx, ast.Load):
            self.tainted = True
        elif "self" in _bound_names(node) and not isinstance(node, ast.arg):
            self.tainted = True
        elif isinstance(node, _FUNCTIONS):
            a = node.args
            every = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
            selfs = [x for x in every if x.arg == "self"]
            if selfs and (node not in self.methods or selfs[0] is not (a.posonlyargs + a.args)[0]):
                self.tainted = True
        elif isinstance(node, ast.Attribute) and node.attr in self.method_names:
            v, call = node.value, names.parent.get(node)
            with_self = isinstance(call, ast.Call) and call.func is node and call.args and \
                isinstance(call.args[0], ast.Name) and call.args[0].id == "self"  # Base.__init__(self)
            instance = isinstance(v, ast.Name) and (v.id == "self" or v.id in self.instances)
            if not (instance or _is_super(v) or with_self or (names.resolved(v) and CLASS not in names.resolved(v))):
                self.exposed.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in self.method_names:
            self.exposed.add(node.id)
        if isinstance(node, ast.Constant) and node.value in self.method_names:
            self.exposed.add(node.value)  # getattr(C, "peek"), C.__dict__["peek"]
        # stores to self chains, for chain_ok
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) and _is_self(node):
            parent = names.parent.get(node)
            value: Optional[ast.expr]
            if isinstance(parent, ast.Assign) and node in parent.targets:
                value = parent.value
            elif isinstance(parent, ast.AnnAssign) and parent.target is node:
                value = parent.value
            else:
                value = None
            self.stores.setdefault(cast(str, dotted(node)), []).append(value)  # self.<chain>
        elif isinstance(node, ast.Call) and len(node.args) >= 3 and "@.setattr" in names.qual(node.func) and \
                _is_self(node.args[0]):
            attr = names.strings(node.args[1])
            if attr and len(attr) == 1:
                self.stores.setdefault((dotted(node.args[0]) or "") + "." + next(iter(attr)), []).append(node.args[2])
            elif not self._safe_value(node.args[2]):
                self.chains_tainted = True  # setattr(self, name_at_run_time, anything)
        elif isinstance(node, ast.Name) and node.id == "self" and isinstance(node.ctx, ast.Load):
            parent = names.parent.get(node)
            if not self._self_use_ok(node, parent):
                self.chains_tainted = True

    def _self_use_ok(self, node: ast.AST, parent: Optional[ast.AST]) -> bool:
        """self used where nothing can assign its attributes behind the check's back."""
        if isinstance(parent, ast.Attribute) and parent.value is node:
            if parent.attr != "__dict__":
                return True
            grand = self.names.parent.get(parent)
            return (isinstance(grand, ast.Subscript) and isinstance(grand.ctx, ast.Load)) or \
                (isinstance(grand, ast.Attribute) and grand.attr in ("get", "keys", "items", "values")) or \
                (isinstance(grand, ast.Call) and grand.args == [parent] and "@.len" in self.names.qual(grand.func))
        if isinstance(parent, (ast.Compare, ast.Expr)) or (isinstance(parent, ast.Call) and parent.func is node):
            return True
        call = self.names.parent.get(parent) if isinstance(parent, ast.keyword) else parent
        if isinstance(call, ast.Call) and call.func is not node:
            func = self.names.qual(call.func)
            if any(show(q) in ATTR_FUNCS for q in func) and call.args[:1] == [node]:
                return True
            if func & {"@.isinstance", "@.type", "@.id", "@.print", "@.repr", "@.str", "@.hash", "@.len", "@.dir",
                       "@.super"}:
                return True
            return bool(self.names.resolved(call.func)) and not any(
                show(q) in ATTR_FUNCS for q in func)  # nn.Module.__init__(self), torch functions
        return False

    def _safe_value(self, value: Optional[ast.AST]) -> bool:
        """value is an instance: a constant, a container, an nn module or parameter, or an object of
        one of the file's classes (not a function, a bound method, a class or a module, one
        attribute away from __globals__ or a module's functions)."""
        if value is None:
            return False
        if isinstance(value, (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.DictComp, ast.ListComp,
                              ast.SetComp)):
            return True
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        if isinstance(func, ast.Name) and func.id in self.names.local_classes:
            return self._plain_class(func.id, set())
        resolved = self.names.resolved(func)
        return bool(resolved) and all(q.startswith("torch.nn.") and q.split(".")[-1][:1].isupper() for q in resolved)

    def _plain_class(self, name: str, seen: Set[str]) -> bool:
        """A class of the file whose constructor returns an instance: no metaclass and no __new__
        of its own or of a base class of the file."""
        if name in seen:
            return True
        seen.add(name)
        cls = self.names.local_classes[name]
        defined = {getattr(n, "name", None) for n in cls.body} | {
            t.id for n in cls.body for t in getattr(n, "targets", ()) if isinstance(t, ast.Name)}
        if name in self.metaclasses or "__new__" in defined:
            return False
        return all(self._plain_class(b.id, seen) for b in cls.bases
                   if isinstance(b, ast.Name) and b.id in self.names.local_classes)

    def method_of(self, node: ast.AST) -> Optional[Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]]:
        current: Optional[ast.AST] = node
        while current is not None:
            current = self.names.parent.get(current)
            if isinstance(current, _FUNCTIONS) and any(
                    a.arg == "self" for a in current.args.posonlyargs + current.args.args + current.args.kwonlyargs):
                return current
        return None

    def is_self(self, node: ast.AST) -> bool:
        """node is a `self` that is the kernel's own instance."""
        if self.tainted or not (isinstance(node, ast.Name) and node.id == "self"):
            return False
        method = self.method_of(node)
        return isinstance(method, _METHODS) and method in self.methods and method.name not in self.exposed

    def chain_ok(self, node: ast.AST) -> bool:
        """node is `self` or a chain `self.a.b` of the kernel's own objects."""
        parts = (dotted(node) or "").split(".")
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not self.is_self(root):
            return False
        if len(parts) == 1:
            return True
        if self.chains_tainted:
            return False
        for i in range(2, len(parts) + 1):
            attr, prefix = parts[i - 1], ".".join(parts[:i])
            stores = self.stores.get(prefix)
            if attr.startswith("__") or attr in self.method_names or not stores or \
                    not all(self._safe_value(v) for v in stores):
                return False
        return True


def _patched(base: Set[str]) -> Tuple[str, str]:
    """What a patch of something resolved to `base` hits, and why that is refused."""
    q = sorted(base)[0]
    if q.startswith(CLASS):
        return "a class reached through type() or __class__", "patching classes of objects is not allowed"
    return q, "patching imported modules (torch, triton, timers) is not allowed"


def _src(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 3] + "..."


_TYPE_NODES = (ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Constant, ast.Load, ast.BinOp,
               ast.BitOr)


def _string_annotations(node: ast.AST, depth: int = 0) -> Iterator[Tuple[ast.Constant, ast.expr]]:
    """(string constant, the expression it parses to) for every string in the annotation node
    but those of Literal[...]: typing.get_type_hints, torch.library.custom_op and
    functools.singledispatch evaluate them as code."""
    literal: Set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and (dotted(n.value) or "").split(".")[-1] == "Literal":
            literal.update(id(m) for m in ast.walk(n.slice))
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in literal:
            try:
                expr = ast.parse(n.value.strip(), mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue  # not an expression: evaluating it fails before anything runs
            yield n, expr
            if depth < 3:
                yield from _string_annotations(expr, depth + 1)


# Special methods a class of the kernel may define. Any other one is a hook that Python, numpy or
# torch call behind the check's back, on objects the harness handles too: __getattr__ answers
# numpy's lookup of __array_interface__ (an array over any address), __reduce__ hands copy and
# pickle a callable and its arguments (getattr(module, name)), __torch_function__ and
# __torch_dispatch__ see every torch call on the object (the audit's and the worker's included),
# __class__ lies to isinstance, __del__ runs the kernel's code whenever the object is freed.
SPECIAL_METHODS_OK = frozenset(
    "__init__ __new__ __init_subclass__ __set_name__ __post_init__ __call__ __repr__ __str__ __format__ __len__ "
    "__length_hint__ __getitem__ __setitem__ __delitem__ __missing__ __iter__ __next__ __reversed__ __contains__ "
    "__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __enter__ __exit__ __get__ __set__ __delete__ "
    "__add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__ __rtruediv__ "
    "__itruediv__ __floordiv__ __rfloordiv__ __ifloordiv__ __mod__ __rmod__ __imod__ __pow__ __rpow__ __ipow__ "
    "__matmul__ __rmatmul__ __imatmul__ __neg__ __pos__ __abs__ __invert__ __and__ __rand__ __iand__ __or__ "
    "__ror__ __ior__ __xor__ __rxor__ __ixor__ __lshift__ __rlshift__ __rshift__ __rrshift__ __divmod__ "
    "__rdivmod__ __index__ __int__ __float__ __complex__ __round__ __trunc__ __floor__ __ceil__ __sizeof__ "
    "__copy__ __deepcopy__ __class_getitem__ __slots__ __doc__ __module__ __qualname__ __constants__ "
    "__match_args__".split())
_SPECIAL_WHY = ("a class may define only ordinary special methods (construction, calls, containers, comparisons, "
                "arithmetic): %s is a hook Python, numpy or torch call on the object behind the check's back "
                "(attribute lookups, pickling and copying, torch's dispatch, isinstance, finalization)")
# Bases that make a class a tensor: its __torch_function__ runs the kernel's code in every torch call
# on its instances, the audit's and the worker's included.
TENSOR_BASES = {"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer",
                "torch.nn.parameter.Buffer", "torch._C.TensorBase", "torch._C._TensorBase"}
# Calls that build a class at run time: its namespace (a dict, a callback) defines special methods no
# check sees.
CLASS_BUILDERS = {"types.new_class", "dataclasses.make_dataclass", "enum.EnumMeta", "enum.EnumType"}
_CLASS_BUILT = ("classes built at run time are not allowed: their special methods (__getattr__, __reduce__, "
                "__torch_function__, ...) are named in a dict no check sees; write a class statement")
_FORMAT_ATTRS = ("format", "format_map")


def _defined_names(item: ast.stmt) -> List[str]:
    """Names a statement of a class body (or module) defines."""
    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [item.name]
    targets = item.targets if isinstance(item, ast.Assign) else [getattr(item, "target", None)]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _forwards_to_super(fn: Any) -> bool:
    """`def __getattr__(self, name): return super().__getattr__(name)` (nn.Module subclasses)."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not isinstance(fn, ast.FunctionDef) or len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    call = body[0].value
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == fn.name \
        and _is_super(call.func.value) and len(call.args) == 1 and not call.keywords


def _special_method_rules(names: Names, refuse: Refuse) -> None:
    """Special methods outside SPECIAL_METHODS_OK, in a class body or at module level (a module's
    __getattr__ answers every attribute looked up on it), and classes deriving from torch.Tensor."""
    for node in names.nodes:
        if isinstance(node, ast.ClassDef):
            body, where = node.body, "class %s" % node.name
            for base in node.bases:
                tensor = sorted(q for q in names.resolved(base) if q in TENSOR_BASES)
                if tensor:
                    refuse("dispatch", "class %s derives from %s" % (node.name, tensor[0]),
                           "tensor subclasses are not allowed: their __torch_function__ runs in every torch call on "
                           "their instances, the harness's included (return plain tensors)", node.lineno)
        elif isinstance(node, ast.Module):
            body, where = node.body, "the module"
        else:
            continue
        for item in body:
            for name in _defined_names(item):
                if _refused_special(name, item, module=isinstance(node, ast.Module)):
                    refuse("hook", "%s defines %s" % (where, name), _SPECIAL_WHY % name, getattr(item, "lineno", None))


def _refused_special(name: str, item: ast.stmt, module: bool) -> bool:
    """`name`, defined by `item` in a class body (or at module level), is a hook no kernel may define."""
    if module:
        return name in ("__getattr__", "__getattribute__")
    if not (name.startswith("__") and name.endswith("__") and len(name) > 4):
        return False
    if name in SPECIAL_METHODS_OK or name in NAMED:  # NAMED ones have their own rule
        return False
    return not (name == "__getattr__" and _forwards_to_super(item))


def _class_builder_call(node: ast.Call, names: Names) -> Optional[str]:
    """The call builds a class at run time: type(name, bases, namespace), type.__new__ / __call__,
    types.new_class, dataclasses.make_dataclass. Returns what it is written as, else None."""
    func = names.qual(node.func)
    if "@.type" in func and len(node.args) + len(node.keywords) >= 2:
        return "type(...) with a namespace"
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("__new__", "__call__", "__init__") and \
            "@.type" in names.qual(node.func.value):
        return "type.%s" % node.func.attr
    built = sorted(q for q in func if q in CLASS_BUILDERS)
    return built[0] if built else None


def _computed_format(node: ast.Call, names: Names) -> Optional[str]:
    """str.format / format_map with a format string built at run time: its fields read attributes and
    items by name ("{0.__class__}"), which no check sees. Returns the call as written, else None."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in _FORMAT_ATTRS:
        return None
    if isinstance(func.value, ast.Name) and func.value.id == "str" and "@.str" in names.qual(func.value):
        fmt = node.args[0] if node.args else None  # str.format(fmt, ...)
    else:
        fmt = func.value
    if fmt is None or names.strings(fmt) is not None or names.resolved(fmt):
        return None
    return _src(node.func)


class _Checker:
    """What the security rules share over one kernel's tree: its names and selves, the report, the
    (subject, line) pairs already reported (one error per name and line), and the names the kernel
    defines itself (its private names are its own business)."""

    def __init__(self, tree: ast.AST, report: StaticReport) -> None:
        self.names = Names(tree)
        self.selves = Selves(tree, self.names)
        self.report = report
        self.seen: Set[Tuple[str, Optional[int]]] = set()
        self.own: Set[str] = set()
        for node in self.names.nodes:
            self.own.update(_bound_names(node))
            if isinstance(node, (ast.Name, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
                self.own.add(node.id if isinstance(node, ast.Name) else node.attr)

    def refuse(self, rule: str, what: str, why: str, line: Optional[int]) -> None:
        report = self.report
        report.error(rule, "%s (line %s): %s" % (what, line, why), line)

    def check_name(self, q: str, how: str, line: Optional[int], node: Optional[ast.AST] = None,
                   presence: bool = False) -> None:
        """Refuses the name q (a module, or an object under one) if it is forbidden; `how`: "imports" or "uses"."""
        refuse, seen = self.refuse, self.seen
        hit = forbidden(q)
        if not hit and how == "imports":
            hit = reach.import_refusal(q, STDLIB_NAMES, _installed)
        if not hit or (presence and hit[0] == reach.RULE):
            return  # hasattr(torch, "compile") reaches nothing
        rule, subject, why = hit
        # One error per name and line: `gc.get_objects` is not also reported as `gc`.
        if any(l == line and (s == subject or s.startswith(subject + ".") or subject.startswith(s + "."))
               for s, l in seen):
            return
        seen.add((subject, line))
        written = _src(node) if node is not None else show(q)
        subject = show(subject)
        refuse(rule, "%s %s" % (how, subject) + ("" if written == subject else " (written %s)" % written), why, line)

    def check_attr(self, attr: str, obj: ast.AST, line: Optional[int], written: str) -> None:
        """`obj.attr` (or getattr(obj, "attr")) where obj resolves to nothing imported (a parameter,
        a call's result, an item of a container, self): names of files, native memory and loaders,
        of os, sys and subprocess functions, of modules, and private names not the kernel's own."""
        names, selves, refuse, own = self.names, self.selves, self.refuse, self.own
        opaque = OPAQUE in names.qual(obj)
        if attr in NAMED:
            rule, why = NAMED[attr]
            refuse(rule, "uses .%s on %s" % (attr, written), why, line)
        elif attr in (OPAQUE_ATTRS if opaque else ANY_RECEIVER) or attr in MODULE_ATTRS:
            refuse("unresolved_module", "uses .%s on %s" % (attr, written), _UNRESOLVED % attr, line)
        elif _private(attr) and attr not in own and attr not in PRIVATE_PUBLIC and not selves.chain_ok(obj):
            refuse("private", "uses .%s on %s" % (attr, written), _PRIVATE, line)

    def value_use_allowed(self, node: ast.AST) -> bool:
        """May this module, timer, attribute function or private name be used here (not handed on as a value)?"""
        names = self.names
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
        if isinstance(parent, ast.Call) and parent.args[:1] == [node] and "typing.cast" in names.qual(parent.func):
            return True
        # getattr(os, ...) and friends: the object of an attribute function is checked by that rule.
        return isinstance(parent, ast.Call) and parent.args[:1] == [node] and \
            any(show(q) in ATTR_FUNCS for q in names.qual(parent.func))


def _import_rules(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """Imports, by statement: each imported name checked, relative imports, private modules, star imports."""
    names, refuse, check_name = ck.names, ck.refuse, ck.check_name
    if isinstance(node, ast.Import):
        for a in node.names:
            check_name(a.name, "imports", line)
            private = any(_private(p) for p in a.name.split(".")) and not any(
                a.name == p or a.name.startswith(p + ".") for p in PRIVATE_OK)  # every part is a module
            if private and not forbidden(a.name):
                refuse("private", "imports %s" % a.name, _PRIVATE, line)
    elif isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if node.level:
            refuse("imports", "relative import from %s%s" % ("." * node.level, module),
                   "the kernel is a single file", line)
        else:
            if any(_private(p) for p in module.split(".")) and not forbidden(module) and not any(
                    module == p or module.startswith(p + ".") for p in PRIVATE_OK):
                refuse("private", "imports from %s" % module, _PRIVATE, line)
            for a in node.names:
                if a.name != "*":
                    check_name(module + "." + a.name, "imports", line)
                elif forbidden(module):
                    check_name(module, "imports", line)
                elif module not in STAR_IMPORT_OK:
                    refuse("imports", "from %s import *" % module,
                           "star imports hide which names are used (import them by name)", line)


def _class_body_import_rule(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """No import in a class body: it makes the module a class attribute, out of reach of the checks."""
    names, refuse = ck.names, ck.refuse
    parent = names.parent.get(node)
    if isinstance(node, (ast.Import, ast.ImportFrom)) and isinstance(parent, ast.ClassDef):
        refuse("imports", "import in the body of class %s" % parent.name,
               "it makes the module a class attribute, out of reach of the checks", line)


def _attribute_rules(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """Attributes that reach frames, globals, code and the class graph, on any object; and the names
    refused on an object the names do not resolve (check_attr)."""
    names, selves, refuse, check_attr, seen = ck.names, ck.selves, ck.refuse, ck.check_attr, ck.seen
    if isinstance(node, ast.Attribute) and node.attr in BANNED_ATTRS:
        if not (node.attr == "__dict__" and selves.is_self(node.value)) and \
                not (node.attr == "__getattr__" and _is_super(node.value)):
            full = sorted(show(q) for q in names.resolved(node))
            for q in full:  # reported here, not again by the names check below
                seen.add((q, line))
            if full:
                what = "uses " + full[0] + ("" if _src(node) == full[0] else " (written %s)" % _src(node))
            else:
                what = "uses .%s on %s" % (node.attr, _src(node.value))
            refuse("introspection", what, _INTROSPECT, line)
    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and not names.resolved(node) and \
            not any(forbidden(q) for q in names.qual(node)):
        # an object the names do not resolve: a parameter, a call's result, an item, self
        check_attr(node.attr, node.value, line, _src(node.value))


def _enclosing_match(names: Names, node: ast.AST) -> Optional[ast.Match]:
    """The match statement a class pattern belongs to."""
    current: Optional[ast.AST] = node
    while current is not None and not isinstance(current, ast.Match):
        current = names.parent.get(current)
    return current


def _match_class_rule(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """`case object(system=f)` looks .system up on the match's subject: checked like an attribute."""
    names, refuse, check_name, check_attr = ck.names, ck.refuse, ck.check_name, ck.check_attr
    if sys.version_info >= (3, 10) and isinstance(node, ast.MatchClass) and node.kwd_attrs:
        # `case object(system=f)` looks .system up on the subject
        subject = _enclosing_match(names, node)
        for attr in node.kwd_attrs:
            written = "the subject of match (%s=)" % attr
            if attr in BANNED_ATTRS:
                refuse("introspection", "uses .%s on %s" % (attr, written), _INTROSPECT, line)
            elif subject is not None and names.resolved(subject.subject):
                for q in sorted(names.resolved(subject.subject)):
                    check_name(q + "." + attr, "uses", line)
            elif subject is not None:
                check_attr(attr, subject.subject, line, written)


def _class_defines_rule(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """A class that defines __array_interface__ or _as_parameter_ (a NAMED name) hands numpy or ctypes
    an address."""
    refuse = ck.refuse
    if isinstance(node, ast.ClassDef):
        # a class that defines __array_interface__ or _as_parameter_ hands numpy or ctypes an address
        for item in node.body:
            targets = item.targets if isinstance(item, ast.Assign) else [getattr(item, "target", None)]
            defined = [item.name] if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                else [t.id for t in targets if isinstance(t, ast.Name)]
            for name in defined:
                if name in NAMED:
                    rule, why = NAMED[name]
                    refuse(rule, "class %s defines %s" % (node.name, name), why, getattr(item, "lineno", line))


def _banned_name_rule(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """__loader__, __spec__: the module's loader and import machinery."""
    refuse = ck.refuse
    if isinstance(node, ast.Name) and node.id in BANNED_NAMES:
        refuse("introspection", "uses %s" % node.id, _INTROSPECT, line)


def _built_at_run_time_rule(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """Classes built at run time, and str.format with a format string built at run time."""
    names, refuse = ck.names, ck.refuse
    if isinstance(node, ast.Call):
        built, fmt = _class_builder_call(node, names), _computed_format(node, names)
        if built:
            refuse("dynamic_code", "builds a class at run time (%s)" % built, _CLASS_BUILT, line)
        if fmt:
            refuse("computed_name", "%s with a format string built at run time" % fmt,
                   "its fields read attributes and items by name ({0.__class__}), which no check sees: use an "
                   "f-string or a literal format string", line)


def _resolution_rules(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """What names and attribute chains resolve to: each checked, and modules, timers, attribute
    functions and private names used as values."""
    names, refuse, check_name, value_use_allowed = ck.names, ck.refuse, ck.check_name, ck.value_use_allowed
    loads = isinstance(getattr(node, "ctx", ast.Load()), ast.Load)
    if isinstance(node, (ast.Name, ast.Attribute, ast.Call)) and loads:
        quals = names.qual(node)
        parent = names.parent.get(node)
        called_import = isinstance(parent, ast.Call) and parent.func is node and "@.__import__" in quals
        # torch.jit in torch.jit.is_scripting: which modules a kernel may reach is ruled on the whole chain
        inner = isinstance(parent, ast.Attribute) and parent.value is node
        for q in sorted(quals):
            if not (called_import and q == "@.__import__"):  # the call was checked above
                check_name(q, "uses", line, node, presence=inner)
        if not value_use_allowed(node):
            for q in sorted(quals):
                if q.startswith("@.") and show(q) in ATTR_FUNCS and not (
                        isinstance(parent, (ast.Assign, ast.AnnAssign)) and names.is_alias(parent)):
                    refuse("computed_name", "uses %s as a value" % show(q),
                           "getattr, setattr, delattr and hasattr may only be called, with the object and a "
                           "literal name (passed around, the name they get is not checked)", line)
                    break
                stream = q in ("sys.stdout", "sys.stderr") and isinstance(parent, ast.keyword) and \
                    parent.arg == "file"
                if not q.startswith(("@.", OPAQUE)) and not stream and (names.is_module(q) or any(
                        q == p or q.startswith(p + ".") for p in PROTECTED)):
                    refuse("module_value", "uses %s as a value" % q,
                           "modules and timers may only be used through their attributes (passed "
                           "around, what is done with them cannot be checked)", line)
                    break
                if not q.startswith(("@.", "<")) and any(_private(p) for p in q.split(".")[1:]) and \
                        not stream:
                    refuse("private", "uses %s as a value" % q, "private internals may only be called "
                           "(passed around, what is done with them cannot be checked)", line)
                    break


def _store_rules(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """Assignments to (and deletions of) attributes and items of imported things: patching, or writing
    the environment."""
    names, refuse = ck.names, ck.refuse
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


def _banned_string_rule(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """Strings that spell a banned attribute: getattr(x, n) with n built somewhere else."""
    names, refuse = ck.names, ck.refuse
    parent = names.parent.get(node)
    attr_name = isinstance(parent, ast.Call) and parent.args[1:2] == [node] and \
        any(show(q) in ATTR_FUNCS for q in names.qual(parent.func))  # checked by _call_rule
    if isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)) and \
            not isinstance(parent, (ast.BinOp, ast.JoinedStr)) and not attr_name:
        for text in sorted(names.values(node) or (), key=repr):
            if isinstance(text, bytes):
                text = text.decode("latin-1")
            if isinstance(text, str) and (text in BANNED_STRINGS or _FORMAT_REACH.search(text)):
                refuse("introspection", "the string %r names an introspection attribute" % text[:60],
                       _INTROSPECT, line)


def _string_annotation_rules(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """String annotations: typing.get_type_hints and torch.library.custom_op evaluate them as code."""
    names, refuse, check_name = ck.names, ck.refuse, ck.check_name
    for annotation in (getattr(node, "annotation", None), getattr(node, "returns", None)):
        if annotation is None:
            continue
        for const, expr in _string_annotations(annotation):
            bad = next((n for n in ast.walk(expr) if not isinstance(n, _TYPE_NODES) or (
                isinstance(n, ast.BinOp) and not isinstance(n.op, ast.BitOr))), None)
            if bad is not None:
                refuse("dynamic_code", "the string annotation %r" % str(const.value)[:60],
                       "string annotations are evaluated as code (typing.get_type_hints, "
                       "torch.library.custom_op): only type names are allowed in them", line)
                break
            for n in ast.walk(expr):
                if isinstance(n, ast.Attribute) and (n.attr in BANNED_ATTRS or n.attr in NAMED):
                    refuse("introspection", "the string annotation %r" % str(const.value)[:60], _INTROSPECT, line)
                elif isinstance(n, (ast.Name, ast.Attribute)):
                    for q in sorted(names.qual(n)):
                        check_name(q, "uses", line)


def _call_rule(ck: _Checker, node: ast.AST, line: Optional[int]) -> None:
    """A call: importers (a literal name checked like an import, anything else refused), module names
    handed to other calls, and getattr, setattr, delattr and hasattr. Before the names rule:
    `__import__("gc")` is reported as an import."""
    if not isinstance(node, ast.Call):
        return
    names, selves, refuse, check_name, check_attr = ck.names, ck.selves, ck.refuse, ck.check_name, ck.check_attr
    func = {show(q) for q in names.qual(node.func)}
    args = node.args
    target = names.importer(node)
    if target is True:
        first = args[0] if args else None
        computed = names.fold(first) if first is not None else None
        refuse("dynamic_code", "%s(%s)" % (_src(node.func), _src(first) if first is not None else ""),
               "module names must be literal strings" + (" (this one is %r)" % computed if computed else ""), line)
    elif target:
        check_name(target, "imports", line, node)
    elif not func & {"print", "str", "repr", "isinstance", "len"} and not any(f in ATTR_FUNCS for f in func):
        # a module's name handed to a function: an importer this check does not know would reach it
        for arg in list(args) + [k.value for k in node.keywords]:
            for s in sorted(names.strings(arg) or ()):
                module = _module_string(s)
                if module:
                    hit = forbidden(module) or ("dynamic_code", module, _CODE)
                    refuse(hit[0], "passes the name %r to %s" % (s, _src(node.func)),
                           "module names in strings are how an importer this check does not know reaches "
                           "them: %s" % hit[2], line)
    kind = next((k for k in ATTR_FUNCS if k in func), None)
    if kind is None or len(args) < 2 or any(isinstance(a, ast.Starred) for a in args[:2]):
        return
    obj, attr = args[0], args[1]
    literal = isinstance(attr, ast.Constant) and isinstance(attr.value, str)
    strings = names.strings(attr)
    name = names.fold(attr)
    call = "%s(%s, %s)" % (kind, _src(obj), _src(attr))
    base = names.resolved(obj)
    own = selves.chain_ok(obj)
    for s in sorted(strings or ()):
        if s in BANNED_ATTRS and not (s == "__dict__" and selves.is_self(obj)) and not base:
            refuse("introspection", "%s reaches .%s" % (call, s), _INTROSPECT, line)
        elif not base and kind != "setattr":
            check_attr(s, obj, line, call)
    modules = sorted(q for q in base if q != CLASS)
    if base and kind in ("setattr", "delattr"):
        patched, why = _patched(base)
        refuse("patching", "%s on %s" % (call, patched), why, line)
    elif modules and not literal:
        refuse("computed_name", "%s on %s" % (call, modules[0]), "a computed attribute name on a module is not allowed"
               + (" (this one is %r)" % name if isinstance(name, str) else ""), line)
    elif modules and kind == "hasattr":
        for q in modules:
            check_name(q + "." + cast(Any, attr).value, "uses", line, presence=True)
    elif strings is None and not own:
        refuse("computed_name", call,
               "an attribute name built at run time is only allowed on self and on the kernel's own objects "
               "under it (self.layers): on anything else it can reach a function's globals, a class or a module",
               line)
    elif kind == "delattr" and not _is_self(obj):
        refuse("patching", call, "delattr is only allowed on self", line)
    elif kind == "setattr" and not _is_self(obj):
        ck.report.warn("setattr", "%s (line %s): setattr on an object other than self is not checked statically"
                    % (call, line), line)


# The security rules' families, in the order each node meets them (the order matters where one marks
# what another then skips: the attribute rule records its names in `seen` before the resolution rule,
# the call rule reports `__import__("gc")` as an import first). A new family is one function and one row.
NODE_RULES = (
    _import_rules,
    _class_body_import_rule,
    _attribute_rules,
    _match_class_rule,
    _class_defines_rule,
    _banned_name_rule,
    _built_at_run_time_rule,
    _call_rule,
    _resolution_rules,
    _store_rules,
    _banned_string_rule,
    _string_annotation_rules,
)


def _security_rules(tree: ast.AST, report: StaticReport) -> None:
    """Every security rule family over every node of the tree (see the module's docstring)."""
    ck = _Checker(tree, report)
    _special_method_rules(ck.names, ck.refuse)
    for node in ck.names.nodes:
        line = getattr(node, "lineno", None)
        for rule in NODE_RULES:
            rule(ck, node, line)


def _torch_op_rules(modelnew: ast.ClassDef, functions: Dict[str, Function], report: StaticReport, reject: bool) -> None:
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
