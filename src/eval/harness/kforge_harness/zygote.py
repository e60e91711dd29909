"""The zygotes: long-lived processes inside the sandbox that import torch and triton once
and fork an evaluation's process each, so that isolation does not cost an interpreter start
(2.5-3 s) per evaluation. A server has two, each in a sandbox of its own (`role`):

- the kernels' zygote forks a worker per evaluation (worker.py: imports the kernel);
- the tasks' zygote forks a judge per evaluation (judgeproc.py: loads the task, builds the
  reference, compares and times). A task's code is as untrusted as a kernel's (the user,
  a batch directory or an agent over MCP chose it), so it never runs outside a sandbox
  either, and never in the kernels' sandbox, where a kernel could reach it.

Control channel (a SOCK_SEQPACKET socket from the server, fd given on the command line):
  <- {"op": "fork", "id": ID, "job": {...}} with the process's descriptors attached: for a
     worker its end of the judge channel and the write end of its log pipe; for a judge its
     end of the server channel, the write end of its log pipe and, unless it checks a task
     alone, its end of the worker channel
  -> {"type": "forked", "id": ID}
  -> {"type": "exited", "id": ID, "status": N, "strays": K}   when the process has ended and
                                                              every process it left is dead
  <- {"op": "kill", "id": ID}                                 kills the process now
A zygote never initializes CUDA (a forked CUDA context is unusable), never imports a kernel
and never loads a task. It makes itself non-dumpable, so a process it forked running as the
same user cannot ptrace it or read its memory through /proc, and ignores every signal such a
process could send it (in the sandbox it is the pid namespace's init, which receives only
signals it handles: SIGCHLD, which only wakes it to reap).

Each process gets a fresh private directory under the scratch root (its cwd, TMPDIR, the
kernel's or the task's source file and its own Triton cache). When it has ended and every
process it left is dead, the zygote empties the scratch root (and, in a sandbox, /dev/shm):
nothing a kernel or a task writes reaches a later evaluation.
"""

from __future__ import annotations

import importlib
import os
import select
import shutil
import signal
import socket
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional

from . import protocol, sandbox, triton_warm


ROLES = ("kernel", "task")
# Modules each role's processes use, imported once here, before the fork. A Triton launch
# under a dispatch mode (the audit, the judge's work counter) makes torch import its tracing
# machinery (dynamo, sympy, fsdp): 4-6 s on an H100 host, paid by every fresh process unless
# it is imported once here. (Not dynamo and inductor in the kernels' zygote: the audit's
# modes opt out of the wrapper that imported them (audit.no_dynamo). Imported before the fork
# they made every Triton launch in the worker ~80 us slower on an H100, torch 2.11, which the
# timing cross-check flagged.)
PREIMPORTS = {
    "kernel": ("torch.utils._python_dispatch", "torch._higher_order_ops.triton_kernel_wrap"),
    "task": ("torch.utils._python_dispatch", "kforge_harness.judge"),
}
# The descriptors a fork request carries: (fewest, most).
FORK_FDS = {"kernel": (2, 2), "task": (2, 3)}
# The processes a zygote forked and has not reaped: pid -> the evaluation's id.
Running = Dict[int, Any]


def serve(control_fd: int, scratch: str, sandboxed: bool, role: str = "kernel") -> int:
    """scratch: the directory whose contents belong to the evaluations (the sandbox's private
    /tmp, or a directory of the server's without a sandbox); sandboxed: /dev/shm is private too;
    role: whose processes it forks (ROLES)."""
    ignore_signals()
    control = socket.socket(fileno=control_fd)
    try:
        import torch  # noqa: F401 -- imported once here, inherited by every process forked
        import triton  # noqa: F401
    except BaseException as e:  # noqa: BLE001
        protocol.send(control, {"type": "hello", "ok": False, "error": "%s: %s" % (type(e).__name__, e)})
        return 3
    started, preimport_error = time.time(), None
    for name in PREIMPORTS[role]:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 -- only a cost: the process imports what it needs itself
            preimport_error = "%s: %s" % (type(e).__name__, e)
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "zygote-triton")  # emptied below, once loaded
    warm_error: Optional[str] = None
    triton_files: triton_warm.Snapshot = {}
    if role == "kernel":
        from .audit import freeze_heap

        warm_error, triton_files = triton_warm.prepare(os.environ["TRITON_CACHE_DIR"])
        freeze_heap()  # last: what the warm-up made is frozen too
    sandbox.harden_zygote()
    wipe(scratch, sandboxed)
    woken = child_wakeup()
    protocol.send(control, {"type": "hello", "ok": True, "pid": os.getpid(), "warm_error": warm_error,
                            "preimport_s": time.time() - started, "preimport_error": preimport_error})
    running: Running = {}  # pid -> id
    fewest, most = FORK_FDS[role]
    watched: list[socket.socket | int] = [control, woken]
    while True:
        readable, _, _ = select.select(watched, [], [], 1.0)
        if woken in readable:
            drain(woken)
        # Ended processes first: the next one is forked only once the last one's strays are
        # gone (kill_strays spares nothing but this process).
        reap(running, control, scratch, sandboxed)
        if control in readable:
            try:
                message, fds = protocol.recv_with_fds(control)
            except (OSError, protocol.ProtocolViolation):
                message, fds = None, []
            if message is None:
                break  # the server went away: everything in the sandbox dies with us
            if message.get("op") == "fork" and fewest <= len(fds) <= most:
                pid = spawn_avoiding(message.get("avoid_pid"), role, message["job"], fds, control, woken, scratch,
                                     triton_files)
                for fd in fds:
                    os.close(fd)
                running[pid] = message.get("id")
                protocol.send(control, {"type": "forked", "id": message.get("id"), "pid": pid})
            elif message.get("op") == "kill":
                for pid, rid in running.items():
                    if rid == message.get("id"):
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            else:
                for fd in fds:
                    os.close(fd)
    for pid in running:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return 0


def child_wakeup() -> int:
    """A descriptor that becomes readable when a child ends (SIGCHLD through Python's wakeup
    fd), so an ended process is reaped and reported at once instead of at the next poll."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(write_fd)
    return read_fd


def drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass


def reap(running: Running, control: socket.socket, scratch: str, sandboxed: bool) -> None:
    while running:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        rid = running.pop(pid, None)
        if rid is None:
            continue  # an orphan re-parented to us: reaped, nothing to report
        # Whatever the worker started (a daemon, a forked helper) goes with it.
        strays = sandbox.kill_strays({os.getpid(), 1})
        wipe(scratch, sandboxed)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        protocol.send(control, {"type": "exited", "id": rid, "status": code, "strays": strays})


def wipe(scratch: str, sandboxed: bool) -> None:
    """Empties the scratch root (and the sandbox's /dev/shm): only once no process of the
    evaluation is left (kill_strays), so nothing can be planted behind it. rmtree never
    follows a symlink out of the tree."""
    for root in [scratch] + (["/dev/shm"] if sandboxed else []):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            path = os.path.join(root, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass


def ignore_signals() -> None:
    """No signal a worker can send stops the zygote: as its pid namespace's init it then
    receives none (the kernel drops signals with the default action for init), and outside a
    sandbox they are ignored. SIGCHLD keeps its default (waitpid polls)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGPIPE, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGVTALRM,
                signal.SIGPROF, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGWINCH, signal.SIGURG):
        signal.signal(sig, signal.SIG_IGN)


def spawn_avoiding(avoid: Optional[int], role: str, job: Mapping[str, Any], fds: List[int], control: socket.socket,
                   woken: int, scratch: str, triton_files: Optional[triton_warm.Snapshot] = None) -> int:
    """spawn(), with a pid other than `avoid` in this zygote's pid namespace. The judge lends
    the worker its GPU buffers by legacy CUDA IPC, and the driver refuses to open a handle
    in a process whose pid equals the exporter's (it takes it for the exporting process
    itself: CUDA error 201), which two sibling pid namespaces make likely (each sandbox's
    first process is pid 2; measured on an H200, scripts/gpu/ipc_between_sandboxes.py). A
    child that gets that number exits at once, unused, and the next fork takes the next."""
    while True:
        pid = spawn(role, job, fds, control, woken, scratch, avoid, triton_files)
        if pid != avoid:
            return pid
        os.waitpid(pid, 0)


def _exit_if_avoided(avoid: Optional[int]) -> None:
    """In a child just forked: ends it at once, unused, when its pid is the other process's
    (spawn_avoiding)."""
    if avoid is not None and os.getpid() == avoid:
        os._exit(0)


def spawn(role: str, job: Mapping[str, Any], fds: List[int], control: socket.socket, woken: int, scratch: str,
          avoid: Optional[int] = None, triton_files: Optional[triton_warm.Snapshot] = None) -> int:
    """Forks the role's process: a worker (fds: its judge channel, its log pipe) or a judge
    (fds: its server channel, its log pipe, and its worker channel unless it checks a task
    alone). Returns the child's pid in the parent."""
    pid = os.fork()
    if pid:
        return pid
    _exit_if_avoided(avoid)
    try:
        control.close()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(woken)
        os.setsid()
        sandbox.redirect_stdio(fds[1])
        channels = [os.dup(fd) for fd in fds[:1] + fds[2:]]
        sandbox.harden_worker(keep_fds=[0, 1, 2] + channels, limits=job.get("limits") or {})
        workdir = tempfile.mkdtemp(prefix="eval-", dir=scratch)
        os.chdir(workdir)
        # The process's Triton cache is its own: a fresh, empty directory emptied again after
        # the evaluation, so no entry a kernel (or a task) plants reaches another evaluation.
        os.environ["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton")
        # ...holding only a copy of what this zygote built before any kernel existed.
        triton_warm.plant(triton_files or {}, os.environ["TRITON_CACHE_DIR"])
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(workdir, "inductor")
        os.environ["TMPDIR"] = workdir
        tempfile.tempdir = workdir
        job = dict(job, workdir=workdir)
        if role == "kernel":
            from . import worker

            worker.main(channels[0], job)
        else:
            from . import judgeproc

            server = socket.socket(fileno=channels[0])
            judgeproc.main(server, socket.socket(fileno=channels[1]) if len(channels) > 1 else None, workdir)
    finally:
        os._exit(71)
