"""The run-time guard (guard.py) and the sealed channel (seal.py), through a real worker: the
judge's end of the channel (judge.WorkerLink) asks a forked worker to load a kernel whose
ModelNew reaches for the process's own machinery the way a library would do it for it
(issue 34, item 2). The static filter is not involved: these are what it might miss."""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import textwrap
import types
import threading
from typing import Any

import pytest
import torch  # noqa: F401 -- imported once here, inherited by every forked worker
import triton  # noqa: F401

from kforge_harness import guard, judge, protocol, seal, worker
from kforge_harness.protocol import KernelFailure

KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
{top}

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


def kernel(init: str = "pass", top: str = "") -> str:
    return KERNEL.format(top=textwrap.dedent(top).strip("\n"),
                         init=textwrap.indent(textwrap.dedent(init).strip("\n"), " " * 8))


def load(source: str, guarded: bool = True, sealed: bool = True) -> tuple[Any, int, judge.WorkerLink]:
    """Forks a worker, has it load `source`; returns (the judge's answer or KernelFailure, the
    worker's exit status, the link)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    workdir = tempfile.mkdtemp(prefix="guard-")
    pid = os.fork()
    if pid == 0:
        ours.close()
        # On a thread of its own, as in the zygote's worker: none of this test's frames (files
        # outside the installation, which the guard takes for the kernel's) is on its stack.
        job = {"device": "cpu", "workdir": workdir, "jit_kernels": ["relu_kernel"]}
        thread = threading.Thread(target=worker.main, args=(theirs.fileno(), job))
        thread.start()
        thread.join()
        os._exit(70)
    theirs.close()
    link = judge.WorkerLink(ours, lambda: "loading kernel")
    link.receive("hello")
    link.kernel_loaded = True
    request: dict[str, Any] = {"op": "load", "init_inputs": [], "seed": 0, "source": source, "guard": guarded}
    if sealed:
        request["seal"] = link.seal()
    try:
        answer: Any = link.call(request, "loaded")
        link.call({"op": "exit"}, "bye")
    except KernelFailure as e:
        answer = e
    ours.close()  # a worker still waiting for a request sees the channel end, and exits
    _, status = os.waitpid(pid, 0)
    return answer, status, link


# (id, module-level code, ModelNew.__init__ code, what the refusal names)
REACHES = [
    ("frame_by_getframe", "import sys", "sys._getframe(0).f_back", "sys._getframe"),
    ("frame_of_a_generator", "", "g = (lambda: (yield))()\nnext(g)\ng.gi_frame.f_back", "object.__getattr__"),
    ("frame_of_a_traceback", "", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    e.__traceback__.tb_frame",
     "object.__getattr__"),
    ("gc_objects", "import gc", "gc.get_objects()", "gc.get_objects"),
    ("gc_referrers", "import gc", "gc.get_referrers(self)", "gc.get_referrers"),
    ("eval_of_a_string", "", "eval('1 + 1')", "compile"),
    ("exec_of_a_string", "", "exec('x = 1')", "compile"),
    ("code_swapped", "def f():\n    return 1\ndef g():\n    return 2", "f.__code__ = g.__code__", "object.__"),
    ("code_object_built", "", "(lambda: 0).__code__.replace(co_consts=(1,))", "object.__getattr__"),
    ("marshal_loads", "import marshal", "marshal.loads(marshal.dumps(1))", "marshal.loads"),
    ("pickle_class_lookup", "import pickle", "pickle.loads(pickle.dumps(len))", "pickle.find_class"),
    ("process_memory", "", "open('/proc/self/mem', 'rb')", "the process's memory"),
    ("ctypes_raw_memory", "import ctypes", "ctypes.string_at(id(self), 8)", "ctypes"),
    ("trace_function", "import sys", "sys.settrace(lambda *a: None)", "sys.settrace"),
    ("more_audit_hooks", "import sys", "sys.addaudithook(lambda *a: None)", "sys.addaudithook"),
    ("fx_graph_module_codegen", "import torch.fx as fx",
     "g = fx.Graph()\nx = g.placeholder('x')\ng.output(g.call_method('__getattribute__', (x, 'f_back')))\n"
     "fx.GraphModule(nn.Module(), g)", "exec"),
    ("jit_compilation_unit", "", "torch.jit.CompilationUnit('def f(x):\\n    return x\\n')", "sys._getframe"),
    ("a_module_the_kernel_wrote", "import importlib\nimport os\nimport sys",
     "here = os.path.dirname(os.path.abspath(__file__))\n"
     "with open(os.path.join(here, 'helper_mod.py'), 'w') as f:\n"
     "    f.write('import sys\\ndef frame():\\n    return sys._getframe(0)\\n')\n"
     "sys.path.insert(0, here)\nimportlib.import_module('helper_mod').frame()", "compile"),
]


@pytest.mark.parametrize("top,init,expected", [r[1:] for r in REACHES], ids=[r[0] for r in REACHES])
def test_the_guard_refuses_what_reaches_the_process(top: str, init: str, expected: str) -> None:
    answer, status, _ = load(kernel(init, top))
    assert isinstance(answer, KernelFailure), answer
    assert answer.category == "static_check", (answer.category, answer.summary)
    assert "the run-time guard refused" in answer.summary and expected in answer.summary, answer.summary
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == guard.STATUS, status


@pytest.mark.parametrize("top,init,expected", [r[1:] for r in REACHES], ids=[r[0] for r in REACHES])
def test_without_the_guard_the_same_code_runs(top: str, init: str, expected: str) -> None:
    """What the guard refuses above is what the kernel's code did, not a side effect of loading."""
    answer, status, _ = load(kernel(init, top), guarded=False)
    if isinstance(answer, KernelFailure):  # an error of its own (no file to open, ...), never the guard's
        assert "guard" not in answer.summary, answer.summary
    assert not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == guard.STATUS)


HONEST_TOP = '''
import dataclasses
import enum
import functools
import logging
import statistics
import warnings
from collections import namedtuple
from typing import List, NamedTuple

Pair = namedtuple("Pair", ["a", "b"])


class Shape(NamedTuple):
    n: int


class Mode(enum.Enum):
    FAST = 1


@dataclasses.dataclass(frozen=True)
class Cfg:
    block: int = 1024
    sizes: List[int] = dataclasses.field(default_factory=list)


@functools.lru_cache(maxsize=None)
def grid(n):
    return (triton.cdiv(n, 1024),)
'''
HONEST_INIT = '''
logging.getLogger(__name__).warning("built %s %s %s", Pair(1, 2), Shape(3), Mode.FAST)
warnings.warn("a warning")
self.cfg = Cfg()
self.mean = statistics.mean([1, 2])
try:
    raise ValueError("handled")
except ValueError:
    pass
x = torch.rand(2048)
y = torch.empty_like(x)
relu_kernel[grid(x.numel())](x, y, x.numel(), BLOCK=1024)
assert torch.equal(y, x.relu())
'''


def test_honest_code_under_the_guard_loads() -> None:
    """Dataclasses, namedtuples, enums, logging, warnings, a module imported for the first time,
    a handled exception and a Triton launch: libraries' own uses of frames, exec and code objects
    are allowed."""
    answer, status, _ = load(kernel(HONEST_INIT, HONEST_TOP))
    assert not isinstance(answer, KernelFailure), answer.summary
    assert answer["type"] == "loaded"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_signal_handlers_cannot_be_installed() -> None:
    answer, _, _ = load(kernel("import signal\nsignal.signal(signal.SIGALRM, lambda s, frame: frame)"))
    assert isinstance(answer, KernelFailure) and "signal handlers cannot be installed" in answer.message, answer


FORGED_FAILURE = '''
import os
import stat
import struct
import json


def forge():
    """A failure report written on every socket the process holds: the judge used to take it."""
    data = json.dumps({"type": "failure", "category": "oom", "summary": "out of memory, kernel not loaded"}).encode()
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack(">I", len(data)) + data)
        except OSError:
            pass
'''


def test_a_failure_report_the_kernel_writes_itself_is_not_taken() -> None:
    answer, _, _ = load(kernel("forge()", FORGED_FAILURE), guarded=False)
    assert isinstance(answer, KernelFailure) and answer.category == "crash", answer
    assert "did not seal" in answer.summary, answer.summary


def test_without_the_seal_the_forged_report_was_the_verdict() -> None:
    answer, _, _ = load(kernel("forge()", FORGED_FAILURE), guarded=False, sealed=False)
    assert isinstance(answer, KernelFailure) and answer.category == "oom", answer


def test_a_replaced_harness_function_is_found() -> None:
    """Replacing a function of the harness's own modules (the fx route did it to the audit) is
    found before the worker answers."""
    top = "import sys\nAUDIT = sys.modules['kforge_harness.audit']"
    answer, _, _ = load(kernel("AUDIT.audited_forward = lambda *a, **k: None", top), guarded=True)
    assert isinstance(answer, KernelFailure) and answer.category == "static_check", answer
    assert "kforge_harness.audit.audited_forward" in answer.summary, answer.summary


def test_sealed_messages_open_in_order_only() -> None:
    key = seal.new_key()
    sign, opener = seal.signer(key), seal.Opener(key)
    first, second = sign(b'{"type": "a"}'), sign(b'{"type": "b"}')
    assert opener.open(first) == b'{"type": "a"}'
    with pytest.raises(ValueError):
        opener.open(first)  # replayed
    assert opener.open(second) == b'{"type": "b"}'
    with pytest.raises(ValueError):
        seal.Opener(key).open(second)  # out of order
    with pytest.raises(ValueError):
        seal.Opener(seal.new_key()).open(first)  # another key
    with pytest.raises(ValueError):
        seal.Opener(key).open(b'{"type": "a"}')  # unsealed


def test_an_unsealed_message_after_the_import_is_a_crash() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    link = judge.WorkerLink(ours, lambda: "correctness trial 1/5")
    link.kernel_loaded = True
    key = bytes.fromhex(link.seal())
    sign = seal.signer(key)
    theirs.sendall(protocol.frame(sign(protocol.payload({"type": "done"}))))
    assert link.receive("done")["type"] == "done"
    protocol.send(theirs, {"type": "done"})
    with pytest.raises(KernelFailure) as crash:
        link.receive("done")
    assert crash.value.category == "crash" and "did not seal" in crash.value.summary


def test_memory_files() -> None:
    assert guard.memory_file("/proc/self/mem") and guard.memory_file("/proc/1/task/1/mem")
    assert guard.memory_file(b"/proc/self/pagemap")
    assert not guard.memory_file("/proc/self/maps") and not guard.memory_file(3)
    link = os.path.join(tempfile.mkdtemp(), "innocent")
    os.symlink("/proc/self/mem", link)
    assert guard.memory_file(link)


def test_signal_module_is_left_alone_in_this_process() -> None:
    assert callable(signal.signal)


def test_outputs_must_be_plain_tensors() -> None:
    """A tensor subclass's __torch_function__ would run in the worker's copy into the judge's slot
    and in the audit's digests of the output: the kernel deciding what the harness reads."""

    class Liar(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]

    w = worker.Worker.__new__(worker.Worker)
    w.outputs = torch.zeros(4)
    out = torch.ones(4).as_subclass(Liar)
    with pytest.raises(TypeError, match="outputs must be plain tensors"):
        w.copy_outputs(out)
    assert w.copy_outputs(torch.ones(4)) and torch.equal(w.outputs, torch.ones(4))


def test_importlib_compiles_and_runs_modules_of_the_installation_only() -> None:
    """A module imported while the kernel runs is compiled (no .pyc) and run by importlib: allowed
    for a file of the installation, refused for one elsewhere (the kernel's own)."""
    from types import SimpleNamespace

    frame: Any = SimpleNamespace(f_code=SimpleNamespace(co_filename="<frozen importlib._bootstrap>",
                                                   co_name="_call_with_frames_removed"), f_back=None)
    known, trusted = guard.roots(), guard.trusted_roots()
    installed = os.path.join(os.path.dirname(os.__file__), "statistics.py")
    assert guard.permitted("compile", (b"x = 1", installed), frame, known, trusted)
    assert not guard.permitted("compile", (b"x = 1", "/tmp/eval-x/helper_mod.py"), frame, known, trusted)
    code = compile("x = 1", installed, "exec")
    assert guard.permitted("exec", (code,), frame, known, trusted)
    assert not guard.permitted("exec", (compile("x = 1", "/tmp/eval-x/helper_mod.py", "exec"),), frame, known,
                               trusted)


@pytest.mark.parametrize("event, site", [
    ("object.__getattr__", ("site:triton/runtime/jit.py", "get_jit_fn_file_line")),
    ("sys._getframe", ("stdlib:traceback.py", "extract_stack")),
])
def test_the_library_sites_a_gpu_launch_reaches_are_allowed(event: str, site: guard.Site) -> None:
    """Seen on an H200 (scripts/gpu/guard_trace.sh): Triton names the kernel's file and line at
    a launch (the code's co_filename, never the code object itself), torch.library takes the
    stack's file names and lines (FrameSummary, no frame) when an operator is registered."""
    assert site in guard.ALLOWED[event]
    known = (("stdlib", "/usr/lib/python3/"), ("site", "/site/"))
    path = {"stdlib": "/usr/lib/python3/", "site": "/site/"}[site[0].split(":")[0]] + site[0].split(":", 1)[1]
    frame: Any = types.SimpleNamespace(f_code=types.SimpleNamespace(co_filename=path, co_name=site[1]), f_back=None)
    args = (object(), "__code__") if event.startswith("object.") else (frame,)
    assert guard.permitted(event, args, frame, known, ())
    other: Any = types.SimpleNamespace(f_code=types.SimpleNamespace(co_filename=path, co_name="elsewhere"), f_back=None)
    assert not guard.permitted(event, args, other, known, ())
