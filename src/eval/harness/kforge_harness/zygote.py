"""The zygote: a long-lived process inside the sandbox that imports torch and triton once
and forks a worker per evaluation, so that isolation does not cost an interpreter start
(2.5-3 s) per evaluation.

Control channel (a SOCK_SEQPACKET socket from the server, fd given on the command line):
  <- {"op": "fork", "id": ID, "job": {...}} with the worker's end of its judge channel and
     the write end of its log pipe attached
  -> {"type": "forked", "id": ID}
  -> {"type": "exited", "id": ID, "status": N, "strays": K}   when the worker has ended and
                                                              every process it left is dead
  <- {"op": "kill", "id": ID}                                 kills the worker now
The zygote never initializes CUDA (a forked CUDA context is unusable) and never imports a
kernel. It makes itself non-dumpable, so a worker running as the same user cannot ptrace it
or read its memory through /proc, and ignores every signal a worker could send it (in the
sandbox it is the pid namespace's init, which receives only signals it handles).

Each worker gets a fresh private directory under the scratch root (its cwd, TMPDIR, the
kernel's source file and its own Triton cache). When a worker has ended and every process it
left is dead, the zygote empties the scratch root (and, in a sandbox, /dev/shm): nothing a
kernel writes reaches a later evaluation.
"""

import importlib
import os
import select
import shutil
import signal
import socket
import tempfile
import time

from . import protocol, sandbox


def serve(control_fd, scratch, sandboxed):
    """scratch: the directory whose contents belong to the evaluations (the sandbox's private
    /tmp, or a directory of the server's without a sandbox); sandboxed: /dev/shm is private too."""
    ignore_signals()
    control = socket.socket(fileno=control_fd)
    try:
        import torch  # noqa: F401 -- imported once here, inherited by every worker
        import triton  # noqa: F401
    except BaseException as e:  # noqa: BLE001
        protocol.send(control, {"type": "hello", "ok": False, "error": "%s: %s" % (type(e).__name__, e)})
        return 3
    # A Triton launch under a dispatch mode (the audit) makes torch import its tracing
    # machinery (dynamo, sympy, fsdp): 4-6 s on an H100 host, paid by every fresh worker
    # unless it is imported once here, before the fork.
    started, preimport_error = time.time(), None
    # (Not dynamo and inductor: the audit's modes opt out of the wrapper that imported them
    # (audit.no_dynamo). Imported before the fork they made every Triton launch in the
    # worker ~80 us slower on an H100, torch 2.11, which the timing cross-check flagged.)
    for name in ("torch.utils._python_dispatch", "torch._higher_order_ops.triton_kernel_wrap"):
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 -- only a cost: the audit imports what it needs itself
            preimport_error = "%s: %s" % (type(e).__name__, e)
    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "zygote-triton")  # emptied below, once loaded
    warm_error = warm_triton_driver()
    sandbox.harden_zygote()
    wipe(scratch, sandboxed)
    protocol.send(control, {"type": "hello", "ok": True, "pid": os.getpid(), "warm_error": warm_error,
                            "preimport_s": time.time() - started, "preimport_error": preimport_error})
    running = {}  # pid -> id
    while True:
        readable, _, _ = select.select([control], [], [], 0.2)
        if readable:
            try:
                message, fds = protocol.recv_with_fds(control)
            except (OSError, protocol.ProtocolViolation):
                message, fds = None, []
            if message is None:
                break  # the server went away: everything in the sandbox dies with us
            if message.get("op") == "fork" and len(fds) == 2:
                pid = spawn_worker(message["job"], fds[0], fds[1], control, scratch)
                for fd in fds:
                    os.close(fd)
                running[pid] = message.get("id")
                protocol.send(control, {"type": "forked", "id": message.get("id")})
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
        reap(running, control, scratch, sandboxed)
    for pid in running:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return 0


def reap(running, control, scratch, sandboxed):
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


def wipe(scratch, sandboxed):
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


def ignore_signals():
    """No signal a worker can send stops the zygote: as its pid namespace's init it then
    receives none (the kernel drops signals with the default action for init), and outside a
    sandbox they are ignored. SIGCHLD keeps its default (waitpid polls)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGPIPE, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGVTALRM,
                signal.SIGPROF, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGWINCH, signal.SIGURG):
        signal.signal(sig, signal.SIG_IGN)


def warm_triton_driver():
    """Builds Triton's CUDA driver utilities (a C module compiled with the system compiler,
    a few seconds) here, once, before any kernel exists, so a fresh worker with its empty
    private Triton cache inherits them loaded instead of compiling them again. Loading the
    module does not initialize CUDA. Nothing to do when interpreting. Returns an error text
    or None (a failure only costs each worker the build)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return None
    try:
        from triton.backends.nvidia.driver import CudaUtils

        CudaUtils()
        return None
    except Exception as e:  # noqa: BLE001
        return "%s: %s" % (type(e).__name__, str(e)[:300])


def spawn_worker(job, channel_fd, log_fd, control, scratch):
    pid = os.fork()
    if pid:
        return pid
    try:
        control.close()
        os.setsid()
        sandbox.redirect_stdio(log_fd)
        channel = os.dup(channel_fd)
        sandbox.harden_worker(keep_fds=[0, 1, 2, channel], limits=job.get("limits") or {})
        workdir = tempfile.mkdtemp(prefix="eval-", dir=scratch)
        os.chdir(workdir)
        # The kernel's Triton cache is its own: a fresh, empty directory emptied again after
        # the evaluation, so no entry a kernel plants reaches another evaluation.
        os.environ["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton")
        os.environ["TMPDIR"] = workdir
        tempfile.tempdir = workdir
        job = dict(job, workdir=workdir)
        from . import worker

        worker.main(channel, job)
    finally:
        os._exit(71)

