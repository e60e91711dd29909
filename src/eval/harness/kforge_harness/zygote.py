"""The zygote: a long-lived process inside the sandbox that imports torch and triton once
and forks a worker per evaluation, so that isolation does not cost an interpreter start
(2.5-3 s) per evaluation.

Control channel (a SOCK_SEQPACKET socket from the server, fd given on the command line):
  <- {"op": "fork", "id": ID, "job": {...}} with the worker's end of its judge channel attached
  -> {"type": "forked", "id": ID}
  -> {"type": "exited", "id": ID, "status": N, "strays": K}   when the worker has ended and
                                                              every process it left is dead
  <- {"op": "kill", "id": ID}                                 kills the worker now
The zygote never initializes CUDA (a forked CUDA context is unusable) and never imports a
kernel. It makes itself non-dumpable, so a worker running as the same user cannot ptrace it
or read its memory through /proc.
"""

import importlib
import os
import select
import signal
import time
import socket

from . import protocol, sandbox


def serve(control_fd):
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
    sandbox.harden_zygote()
    protocol.send(control, {"type": "hello", "ok": True, "pid": os.getpid(),
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
            if message.get("op") == "fork" and len(fds) == 1:
                pid = spawn_worker(message["job"], fds[0], control)
                os.close(fds[0])
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
        reap(running, control)
    for pid in running:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return 0


def reap(running, control):
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
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        protocol.send(control, {"type": "exited", "id": rid, "status": code, "strays": strays})


def spawn_worker(job, channel_fd, control):
    pid = os.fork()
    if pid:
        return pid
    try:
        control.close()
        os.setsid()
        sandbox.redirect_stdio(job["log_path"])
        channel = os.dup(channel_fd)
        sandbox.harden_worker(keep_fds=[0, 1, 2, channel], limits=job.get("limits") or {})
        os.chdir(job["workdir"])
        os.environ["TMPDIR"] = job["workdir"]
        import tempfile

        tempfile.tempdir = job["workdir"]
        from . import worker

        worker.main(channel, job)
    finally:
        os._exit(71)

