"""Tests of kforge_harness/static.py, the AST filter run before a kernel executes.

Each bypass case is one way a kernel that wants a high score could spell a banned construct.
It is spliced into a kernel that passes the check on its own (test_base_kernel_passes proves
that), so the case fails only because of the construct, and the test asserts both the
category and a substring of the message that names what was found.
"""

import ast
import glob
import os
import textwrap
import tomllib

import pytest

from kforge_harness.static import static_check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

# A correct ReLU kernel; {top} is spliced in at module level, {body} at the end of forward
# (before the return), both at the right indentation.
BASE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
{top}

@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
{body}
        return y
'''


def kernel(top="", body=""):
    return BASE.format(top=textwrap.dedent(top).strip("\n"),
                       body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8))


def errors(source):
    category, report, _ = static_check(source)
    return category, [e["message"] for e in report["errors"]], report


# (id, module-level code, forward code, substring of one error message)
BYPASSES = [
    # --- 1. modules no kernel needs, by every import spelling
    ("import_gc", "import gc", "", "imports gc (line"),
    ("from_gc_import", "from gc import get_objects", "", "imports gc.get_objects"),
    ("import_gc_as", "import gc as collector", "collector.collect()", "imports gc"),
    ("dunder_import_gc", "", "__import__('gc').get_objects()", "uses gc.get_objects (written __import__('gc')"),
    ("dunder_import_gc_alias", "collector = __import__('gc')", "collector.get_objects()", "imports gc"),
    ("dunder_import_concat", "", "__import__('g' + 'c')", "module names must be literal strings (this one is 'gc')"),
    ("dunder_import_variable", "MOD = 'gc'", "__import__(MOD)", "module names must be literal strings"),
    ("dunder_import_alias", "imp = __import__", "imp('os')", "uses __import__"),
    ("importlib_import_module", "import importlib", "importlib.import_module('gc')", "imports importlib"),
    ("import_module_computed", "from importlib import import_module", "import_module('c' + 'types')",
     "module names must be literal strings (this one is 'ctypes')"),
    ("import_ctypes", "import ctypes", "ctypes.string_at(0)", "native code"),
    ("from_ctypes", "from ctypes import CDLL", "", "imports ctypes.CDLL"),
    ("import_cffi", "import cffi", "", "imports cffi"),
    ("import_inspect", "import inspect", "inspect.currentframe()", "imports inspect"),
    ("import_socket", "import socket", "", "network access"),
    ("import_urllib_request", "import urllib.request", "", "imports urllib.request"),
    ("import_requests", "import requests", "", "imports requests"),
    ("import_pickle", "import pickle", "", "imports pickle"),
    ("import_marshal_as", "import marshal as m", "", "imports marshal"),
    ("import_signal", "import signal", "", "imports signal"),
    ("import_kforge_harness", "from kforge_harness import protocol", "", "imports kforge_harness"),
    ("import_builtins", "import builtins", "builtins.print(1)", "imports builtins"),
    ("import_main", "import __main__", "", "imports __main__"),
    ("import_mmap", "import mmap", "", "imports mmap"),
    ("import_runpy", "import runpy", "", "imports runpy"),
    ("import_faulthandler", "import faulthandler", "", "imports faulthandler"),
    ("star_import_os", "from os import *", "fork()", "from os import *"),
    ("relative_import", "from . import helpers", "", "relative import"),
    ("os_reached_through_torch", "", "torch.serialization.os.fork()", "os.fork (written torch.serialization.os.fork)"),
    ("torch_multiprocessing", "import torch.multiprocessing as tmp", "", "threads and processes"),

    # --- 2. frames and interpreter introspection
    ("sys_getframe", "import sys", "sys._getframe(1)", "uses sys._getframe"),
    ("sys_getframe_from_import", "from sys import _getframe as gf", "gf()", "imports sys._getframe"),
    ("sys_current_frames", "import sys", "sys._current_frames()", "sys._current_frames"),
    ("sys_settrace", "import sys", "sys.settrace(None)", "sys.settrace"),
    ("sys_setprofile", "import sys", "sys.setprofile(None)", "sys.setprofile"),
    ("sys_modules", "import sys", "sys.modules['torch']", "sys.modules"),
    ("sys_addaudithook", "import sys", "sys.addaudithook(print)", "sys.addaudithook"),
    ("sys_monitoring", "import sys", "sys.monitoring.use_tool_id(3, 'k')", "sys.monitoring"),
    ("sys_exc_info", "import sys", "sys.exc_info()", "sys.exc_info"),
    ("f_back", "", "f = None\nf.f_back", ".f_back on f"),
    ("f_locals", "", "f = None\nf.f_locals", ".f_locals"),
    ("traceback_frame", "", "e = ValueError()\ne.__traceback__.tb_frame", ".__traceback__"),
    ("generator_frame", "", "g = (i for i in ())\ng.gi_frame.f_back", ".gi_frame"),
    ("function_globals", "", "self.forward.__globals__", ".__globals__ on self.forward"),
    ("closure", "", "self.forward.__closure__", ".__closure__"),
    ("code", "", "self.forward.__code__", ".__code__"),
    ("subclasses", "", "object.__subclasses__()", ".__subclasses__"),
    ("mro_walk", "", "type(x).__mro__[-1]", ".__mro__"),
    ("bases_walk", "", "().__class__.__base__", ".__base__"),
    ("module_dict", "import os", "os.__dict__['fork']", "uses os.__dict__"),
    ("bound_self_builtins", "", "print.__self__", ".__self__"),
    ("builtins_name", "", "__builtins__['eval']", "uses builtins (written __builtins__)"),
    ("globals_call", "", "globals()['torch']", "uses globals"),
    ("locals_call", "", "locals()", "uses locals"),
    ("vars_module", "import os", "vars(os)['fork']", "uses vars"),
    ("eval", "", "eval('1')", "uses eval"),
    ("exec", "", "exec('y = 1')", "uses exec"),
    ("compile", "", "compile('1', 'k', 'eval')", "uses compile"),
    ("eval_alias", "run = eval", "run('1')", "uses eval"),
    ("breakpoint", "", "breakpoint()", "uses breakpoint"),
    ("getattr_concat_globals", "", "getattr(self.forward, '__glo' + 'bals__')", "reaches .__globals__"),
    ("string_built_elsewhere", "NAME = ''.join(['__glo', 'bals__'])", "getattr(self.forward, NAME)",
     "the string '__globals__' names an introspection attribute"),
    ("string_reversed", "NAME = '__slabolg__'[::-1]", "", "'__globals__' names an introspection"),
    ("string_chr", "NAME = ''.join(map(chr, [102, 95, 98, 97, 99, 107]))", "", "'f_back' names an introspection"),
    ("long_concatenation", "NAME = " + " + ".join(["''"] * 300) + " + '__glo' + 'bals__'", "",
     "'__globals__' names an introspection"),
    ("bytes_decoded", "NAME = bytes.fromhex('665f6261636b').decode()", "", "'f_back' names an introspection"),
    ("format_string_reach", "", "'{0.__globals__}'.format(self.forward)", "names an introspection attribute"),
    ("object_getattribute", "", "object.__getattribute__(x, 'shape')", ".__getattribute__"),
    ("global_module_hook", "", "torch.nn.modules.module.register_module_forward_hook(print)",
     "global module hooks"),
    ("torch_library", "", "torch.library.Library('aten', 'IMPL')", "uses torch.library.Library"),
    ("torch_library_impl", "from torch.library import impl", "", "imports torch.library.impl"),
    ("torch_function_mode", "from torch.overrides import TorchFunctionMode", "", "operator dispatch"),
    ("jiterator", "", "torch.cuda.jiterator._create_jit_fn('x')", "torch.cuda.jiterator"),
    ("triton_build", "from triton.runtime.build import _build", "", "imports triton.runtime.build._build"),
    ("numpy_ctypeslib", "import numpy as np", "np.ctypeslib.as_array(0)", "numpy.ctypeslib"),
    ("builtins_through_torch", "", "torch.serialization.builtins.open('/etc/passwd')",
     "builtins.open (written torch.serialization.builtins.open)"),
    ("importlib_through_torch", "", "torch._dynamo.utils.importlib.import_module('os')", "importlib.import_module"),
    ("getattr_dunder_builtins", "", "getattr(__builtins__, 'ev' + 'al')('1')", "computed attribute name on a module"),
    ("getattr_traceback_literal", "", "e = ValueError()\ngetattr(e, '__traceback__')", "reaches .__traceback__"),
    ("cpp_extension", "from torch.utils.cpp_extension import load_inline", "", "torch.utils.cpp_extension"),

    # --- files: kernels never read or write them
    ("open_proc", "", "open('/proc/self/environ').read()", "uses open"),
    ("open_alias", "reader = open", "reader('/proc/1/environ')", "uses open"),
    ("io_open", "import io", "io.open('/proc/1/environ')", "io.open"),
    ("os_open", "import os", "os.open('/proc/1/environ', 0)", "os.open"),
    ("os_listdir", "import os", "os.listdir('/proc')", "os.listdir"),
    ("pathlib_read", "import pathlib", "pathlib.Path('/proc/1/environ').read_bytes()", "imports pathlib"),
    ("linecache_read", "import linecache", "linecache.getline('/proc/1/environ', 1)", "imports linecache"),
    ("torch_load", "", "torch.load('/tmp/ref.pt')", "torch.load"),

    # --- 3. process control, by any spelling
    ("os_fork", "import os", "os.fork()", "uses os.fork (line"),
    ("os_forkpty", "import os", "os.forkpty()", "os.forkpty"),
    ("os_kill", "import os", "os.kill(os.getpid(), 9)", "uses os.kill"),
    ("os_killpg", "import os", "os.killpg(0, 9)", "os.killpg"),
    ("os_system", "import os", "os.system('true')", "os.system"),
    ("os_popen", "import os", "os.popen('true')", "os.popen"),
    ("os_execv", "import os", "os.execv('/bin/true', ['true'])", "os.execv"),
    ("os_spawnl", "import os", "os.spawnl(os.P_NOWAIT, '/bin/true')", "os.spawnl"),
    ("os_posix_spawn", "import os", "os.posix_spawn('/bin/true', [], {})", "os.posix_spawn"),
    ("os_exit", "import os", "os._exit(0)", "os._exit"),
    ("os_setsid", "import os", "os.setsid()", "os.setsid"),
    ("os_setpgid", "import os", "os.setpgid(0, 0)", "os.setpgid"),
    ("os_unshare", "import os", "os.unshare(0)", "os.unshare"),
    ("os_setns", "import os", "os.setns(3)", "os.setns"),
    ("os_chdir", "import os", "os.chdir('/')", "os.chdir"),
    ("os_write_fd", "import os", "os.write(3, b'correct')", "os.write"),
    ("sys_exit", "import sys", "sys.exit(0)", "sys.exit"),
    ("exit_builtin", "", "exit(0)", "uses exit"),
    ("environ_item_write", "import os", "os.environ['TRITON_INTERPRET'] = '1'", "writing the environment"),
    ("environ_update", "import os", "os.environ.update(A='1')", "os.environ.update"),
    ("environ_delete", "import os", "del os.environ['PATH']", "deletes os.environ['PATH']"),
    ("putenv", "import os", "os.putenv('A', '1')", "os.putenv"),
    ("import_os_as", "import os as o", "o.fork()", "os.fork (written o.fork)"),
    ("from_os_import_as", "from os import fork as f", "f()", "imports os.fork"),
    ("assigned_alias", "import os\nk = os.kill", "k(os.getpid(), 9)", "os.kill (written k)"),
    ("alias_chain", "import os\na = os\nb = a", "b.kill(0, 9)", "os.kill (written b.kill)"),
    ("dunder_import_attribute", "", "__import__('os').fork()", "os.fork"),
    ("getattr_concat_fork", "import os", "getattr(os, 'fo' + 'rk')()",
     "a computed attribute name on a module is not allowed (this one is 'fork')"),
    ("getattr_variable", "import os", "name = x.dtype.__repr__()\ngetattr(os, name)()",
     "computed attribute name on a module"),
    ("getattr_literal_fork", "import os", "getattr(os, 'fork')()", "os.fork (written getattr(os, 'fork'))"),
    ("getattr_alias", "import os\ng = getattr\nmod = os", "g(mod, 'kill')(0, 9)", "os.kill"),
    ("hasattr_computed", "import os", "hasattr(os, 'fo' + 'rk')", "computed attribute name"),
    ("getattr_on_sys_computed", "import sys", "getattr(sys, '_get' + 'frame')(0)", "computed attribute name"),
    ("module_passed_to_helper", "import os\ndef call(m):\n    return m.fork()", "call(os)", "uses os as a value"),
    ("module_in_container", "import os", "[os][0].fork()", "uses os as a value"),
    ("module_default_argument", "import os\ndef call(m=os):\n    return m.fork()", "", "uses os as a value"),
    ("module_in_class_body", "import os\nclass Holder:\n    m = os", "Holder.m.fork()", "uses os as a value"),
    ("module_returned_by_lambda", "import os\nget = lambda: os", "get().fork()", "uses os as a value"),
    ("attrgetter", "import operator", "operator.attrgetter('fork')", "operator.attrgetter"),
    ("import_in_class_body", "class Holder:\n    import os as m", "Holder.m.fork()",
     "import in the body of class Holder"),
    ("os_path_os", "import os.path as p", "p.os.fork()", "os.fork (written p.os.fork)"),
    ("global_alias", "import os\ndef alias():\n    global o\n    o = os", "o.fork()", "os.fork (written o.fork)"),
    ("closure_alias", "import os\ndef outer():\n    m = os\n    def inner():\n        return m.kill\n    return inner",
     "",
     "os.kill (written m.kill)"),
    ("match_subject", "import os", "match os:\n    case m:\n        m.fork()", "uses os as a value"),
    ("walrus", "import os", "(o := os).fork()", "uses os as a value"),
    ("conditional_expression", "import os", "(os if x is not None else None).fork()", "uses os as a value"),
    ("tuple_unpacking", "import os\na, b = os, 1", "a.fork()", "uses os as a value"),
    ("comprehension", "import os", "[m.fork() for m in [os]]", "uses os as a value"),
    ("with_as", "import contextlib\nimport os", "with contextlib.nullcontext(os) as m:\n    m.fork()",
     "uses os as a value"),
    ("starred_getattr", "import os", "getattr(*[os, 'fork'])()", "uses os as a value"),
    ("reduce_getattr", "import functools", "functools.reduce(getattr, ['cuda', 'Event'], torch)",
     "uses torch as a value"),
    ("environ_alias_write", "import os\nenv = os.environ", "env['A'] = '1'", "assigns env['A'] (os.environ)"),
    ("environ_setdefault", "import os", "os.environ.setdefault('A', '1')", "os.environ.setdefault"),
    ("environ_inplace_or", "import os", "os.environ |= {'A': '1'}", "writing the environment"),
    ("operator_setitem_environ", "import operator\nimport os", "operator.setitem(os.environ, 'A', '1')",
     "uses os.environ as a value"),
    ("threading", "import threading", "", "threads and processes are not allowed"),

    # --- 4. timer patching and reading the reference, through aliases and computed names
    ("setattr_computed_event", "class Fake:\n    pass\nsetattr(torch.cuda, 'Ev' + 'ent', Fake)", "",
     "setattr(torch.cuda, 'Ev' + 'ent') on torch.cuda"),
    ("setattr_literal_event", "setattr(torch.cuda, 'Event', object)", "", "patching imported modules"),
    ("setattr_via_getattr", "setattr(getattr(torch, 'cuda'), 'synchronize', print)", "", "on torch.cuda"),
    ("assign_through_import_alias", "import torch.cuda as tc\ntc.Event = object", "",
     "assigns tc.Event (torch.cuda.Event)"),
    ("assign_through_from_import", "from torch.cuda import Event\nEvent.elapsed_time = lambda s, o: 0.001", "",
     "assigns Event.elapsed_time (torch.cuda.Event.elapsed_time)"),
    ("assign_through_variable", "E = torch.cuda.Event\nE.elapsed_time = lambda s, o: 0.001", "",
     "(torch.cuda.Event.elapsed_time)"),
    ("assign_time_alias", "import time as t\nt.perf_counter = lambda: 0.0", "",
     "assigns t.perf_counter (time.perf_counter)"),
    ("assign_time_time", "import time\ntime.time = lambda: 0.0", "", "assigns time.time"),
    ("assign_synchronize", "torch.cuda.synchronize = lambda *a: None", "", "assigns torch.cuda.synchronize"),
    ("delete_event", "del torch.cuda.Event", "", "deletes torch.cuda.Event"),
    ("for_target_patch", "for torch.cuda.Event in [object]:\n    pass", "", "assigns torch.cuda.Event"),
    ("augassign_patch", "import timeit\ntimeit.default_timer += 0", "", "assigns timeit.default_timer"),
    ("object_setattr", "object.__setattr__(torch.cuda, 'Event', object)", "", ".__setattr__"),
    ("delattr_module", "delattr(torch.cuda, 'synchronize')", "", "delattr(torch.cuda, 'synchronize') on torch.cuda"),
    ("delattr_other", "", "delattr(x, 'grad')", "delattr is only allowed on self"),
    ("patch_helper_gets_module", "def patch(m, n, v):\n    setattr(m, n, v)\npatch(torch.cuda, 'Event', object)", "",
     "uses torch.cuda as a value"),
    ("patch_helper_gets_timer", "def patch(c):\n    c.elapsed_time = lambda s, o: 0.001\npatch(torch.cuda.Event)", "",
     "uses torch.cuda.Event as a value"),
    ("lambda_patch", "(lambda m: setattr(m, 'Event', object))(torch.cuda)", "", "uses torch.cuda as a value"),
    ("type_of_instance", "ev = torch.cuda.Event(enable_timing=True)\ntype(ev).elapsed_time = lambda s, o: 0.001", "",
     "assigns type(ev).elapsed_time"),
    ("class_of_instance", "ev = torch.cuda.Event(enable_timing=True)\nev.__class__.elapsed_time = lambda s, o: 0.001",
     "", "assigns ev.__class__.elapsed_time"),
    ("setattr_type_of_instance", "ev = torch.cuda.Event(enable_timing=True)\nsetattr(type(ev), 'elapsed_time', print)",
     "", "setattr(type(ev), 'elapsed_time') on a class reached through type() or __class__"),
    ("class_alias_patch",
     "ev = torch.cuda.Event(enable_timing=True)\nC = type(ev)\nC.elapsed_time = lambda s, o: 0.001",
     "", "assigns C.elapsed_time (a class reached through type() or __class__)"),
    ("class_kept_on_self", "", "self.cls = x.__class__\nsetattr(self.cls, '__add__', None)",
     "patching classes of objects is not allowed"),
    ("sys_modules_patch", "import sys\nsys.modules['time'].perf_counter = lambda: 0.0", "", "sys.modules"),
    ("mock_patch", "from unittest import mock", "", "imports unittest.mock"),
    ("setattr_from_imported_timer", "from time import perf_counter", "setattr(perf_counter, '__call__', None)",
     "on time.perf_counter"),
    ("getattr_store", "", "getattr(torch, 'cuda').Event = object", "(torch.cuda.Event)"),
    ("self_class_patch", "", "self.__class__.forward = None", "patching classes of objects"),
    ("subclass_swap", "import torch.cuda as tc\nclass E(tc.Event):\n    pass\ntc.Event = E", "",
     "assigns tc.Event (torch.cuda.Event)"),
    ("gc_reference", "import gc", "for o in gc.get_objects():\n    pass", "uses gc.get_objects"),
]


def test_base_kernel_passes():
    """Every bypass case below is this kernel plus one construct: it must pass on its own."""
    category, messages, report = errors(kernel())
    assert category is None, messages
    assert report["launches"] == ["relu_kernel"]


def test_there_are_enough_cases_and_ids_are_unique():
    ids = [c[0] for c in BYPASSES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("top,body,expected", [c[1:] for c in BYPASSES], ids=[c[0] for c in BYPASSES])
def test_bypass_is_rejected(top, body, expected):
    source = kernel(top, body)
    ast.parse(source)  # the case itself is valid Python: the static check, not a typo, refuses it
    category, messages, _ = errors(source)
    assert category == "static_check", "not refused: %r" % messages
    assert any(expected in m for m in messages), messages


def test_messages_name_the_line():
    source = kernel("import os", "os.fork()")
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "os.fork()" in text)
    _, _, report = errors(source)
    hit = [e for e in report["errors"] if "os.fork" in e["message"]]
    assert hit and hit[0]["line"] == line and "(line %d)" % line in hit[0]["message"]


# Code a legitimate kernel may contain; none of it may add an error.
LEGIT = [
    ("environ_reads", "import os\nDEBUG = os.environ.get('KFORGE_DEBUG', '0') == '1'",
     "if 'X' in os.environ:\n    print(os.environ['X'], os.getenv('Y'))\nfor k, v in os.environ.items():\n    pass"),
    ("os_path_and_cpu_count", "import os", "os.path.join('a', 'b')\nos.cpu_count()\nos.getpid()"),
    ("sys_constants", "import sys", "print(sys.maxsize, sys.version_info, file=sys.stderr)\nsys.stdout.flush()"),
    ("setattr_on_self", "", "for i in range(2):\n    setattr(self, f'w{i}', None)\n    getattr(self, f'w{i}')"),
    ("getattr_literal_on_torch", "", "getattr(torch, 'float16')\ngetattr(tl, 'float32')\nhasattr(torch, 'compile')"),
    ("isinstance_and_annotations",
     "from typing import Optional\ndef f(t: Optional[torch.Tensor]) -> torch.Tensor:\n    return t",
     "assert isinstance(x, (torch.Tensor, list))\nassert type(x) is torch.Tensor"),
    ("module_aliases", "import math\nimport triton.language as language\nT = torch\nsqrt = math.sqrt",
     "sqrt(4.0)\nT.empty(1)"),
    ("star_import_math", "from math import *", "sqrt(2.0)"),
    ("timers_read", "import time", "t0 = time.perf_counter()\ntorch.cuda.synchronize() if x.is_cuda else None"),
    ("dict_of_self", "", "print(len(self.__dict__))"),
    ("computed_getattr_on_tensor", "", "name = 'shape'\ngetattr(x, name)"),
    ("nn_module_subclass", "class Helper(nn.Module):\n    pass", "Helper()"),
    ("autotune_heuristics_libdevice",
     "from triton.language.extra import libdevice\n"
     "@triton.autotune(configs=[triton.Config({'B': 128}, num_warps=4)], key=['n'])\n"
     "@triton.heuristics({'EVEN': lambda args: args['n'] % args['B'] == 0})\n"
     "@triton.jit\ndef k2(p, n, B: tl.constexpr, EVEN: tl.constexpr):\n    tl.store(p, libdevice.tanh(tl.load(p)))",
     "k2[lambda meta: (triton.cdiv(n, meta['B']),)](y, n)"),
    ("autograd_function",
     "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, t):\n"
     "        ctx.save_for_backward(t)\n        return t", "y = Fn.apply(y)"),
    ("torch_library_triton_op", "from torch.library import triton_op, wrap_triton", ""),
    ("dtype_tables_and_functional", "import torch.nn.functional as F\nDT = {torch.float32: tl.float32}\n"
     "ACT = getattr(F, 'relu')", "torch.cuda.synchronize()\nev = torch.cuda.Event(enable_timing=True)"),
    ("builtin_named_parameter", "def g(input, name):\n    return getattr(input, 'shape'), input.dim()", ""),
]


@pytest.mark.parametrize("top,body", [c[1:] for c in LEGIT], ids=[c[0] for c in LEGIT])
def test_legitimate_code_passes(top, body):
    category, messages, _ = errors(kernel(top, body))
    assert category is None, messages


def test_computed_getattr_on_other_objects_is_a_warning():
    """getattr(x, name) on a tensor cannot reach a module; it is visible but not refused."""
    _, messages, report = errors(kernel("", "name = x.dtype.__repr__()\ngetattr(x, name)"))
    assert not messages
    assert any("not checked statically" in w["message"] for w in report["warnings"])


def load_cases():
    with open(os.path.join(FIXTURES, "cases.toml"), "rb") as f:
        return tomllib.load(f)["case"]


# Cases with static_checks = false (timer_patch_dynamic) are correct only with the filter off.
CORRECT = sorted({c["kernel"] for c in load_cases() if c["expect"] == "correct" and c.get("static_checks", True)})


@pytest.mark.parametrize("path", CORRECT)
def test_correct_fixture_kernels_pass(path):
    with open(os.path.join(FIXTURES, path)) as f:
        category, messages, _ = errors(f.read())
    assert category is None, messages


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "examples", "kernels", "*.py"))),
                         ids=os.path.basename)
def test_example_kernels_pass(path):
    with open(path) as f:
        category, messages, _ = errors(f.read())
    assert category is None, messages


def test_environment_printing_fixture_passes():
    """os.environ reads are allowed (the sandbox scrubs the environment); cli_eval.rs runs this
    kernel through the whole pipeline with the static check on."""
    with open(os.path.join(FIXTURES, "kernels", "relu_print_env.py")) as f:
        assert errors(f.read())[0] is None


# hack_* fixtures: complete kernels for tasks/relu.py whose only fault is the banned construct.
HACKS = [
    ("hack_gc_reference.py", {"module", "introspection"}, "gc.get_objects"),
    ("hack_frame_reference.py", {"introspection"}, "sys._getframe"),
    ("hack_getattr_fork.py", {"computed_name", "process"}, "this one is 'fork'"),
    ("hack_env_theft.py", {"files"}, "uses open"),
    ("hack_setattr_timer.py", {"patching"}, "setattr(torch.cuda, 'Ev' + 'ent')"),
]


@pytest.mark.parametrize("name,rules,expected", HACKS, ids=[h[0] for h in HACKS])
def test_hack_fixture_is_rejected_for_its_construct_only(name, rules, expected):
    with open(os.path.join(FIXTURES, "kernels", name)) as f:
        source = f.read()
    assert ast.get_docstring(ast.parse(source)), "the fixture says what it tries"
    category, messages, report = errors(source)
    assert category == "static_check"
    assert any(expected in m for m in messages), messages
    assert {e["rule"] for e in report["errors"]} <= rules, messages
    assert report["jit_kernels"] and report["launches"], "a real Triton launch"


def test_syntax_errors_are_syntax():
    category, report, detail = static_check("def forward(self, x:\n    return x\n")
    assert category == "syntax"
    assert report["errors"][0]["rule"] == "syntax" and detail["line"] == 1
    with open(os.path.join(FIXTURES, "kernels", "relu_syntax.py")) as f:
        category, report, _ = static_check(f.read())
    assert category == "syntax" and "never closed" in report["errors"][0]["message"]


def test_nesting_is_folded_or_refused_never_crashes():
    # 50 nested string additions fold like any other constant; the folded value is harmless.
    category, report, _ = static_check(kernel("NAME = " + "(" * 50 + "'a'" + " + 'b')" * 50))
    assert category is None, report["errors"]
    # 100000 unary minus signs exhaust the parser: a static_check failure, not an exception.
    category, report, _ = static_check(kernel("NAME = " + "-" * 100000 + "1"))
    assert category == "static_check" and report["errors"][0]["rule"] == "unparseable"


# The older hostile fixtures are refused too. relu_os_exit, relu_segfault and relu_sigkill exist
# to prove the evaluator survives a crashing kernel: cases.toml has to run them with
# static_checks = false now, or the filter answers before anything crashes.
@pytest.mark.parametrize("name,expected", [
    ("relu_os_exit.py", "uses os._exit"),
    ("relu_segfault.py", "imports ctypes"),
    ("relu_sigkill.py", "uses os.kill"),
    ("forge_verdict.py", "uses os._exit"),
    ("timer_patch.py", "setattr(_event, 'elapsed' + '_time') on torch.cuda.Event"),
    ("sandbox_escape.py", "uses os.fork"),
])
def test_older_hostile_fixtures_are_refused(name, expected):
    with open(os.path.join(FIXTURES, "kernels", name)) as f:
        category, messages, _ = errors(f.read())
    assert category == "static_check" and any(expected in m for m in messages), messages
