"""The processes of an evaluation and how they end: the two sandboxed zygotes (the kernels'
forks workers, the tasks' forks judges, zygote.py), the worker and judge they fork for one
evaluation with their channels and logs (`Forks`), and the words for a process's exit."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterable, Mapping, MutableMapping, Optional, Sequence, Tuple, Union

from . import knobs, protocol, sandbox
from .compare import audit_tolerance
from .errors import first_line
from .precision import DEFAULT_POLICY
from .protocol import HarnessError, Message, fail
from .serverjob import ServerJob, send_line

ZYGOTE_START_S = 300.0  # importing torch and triton inside the sandbox
WORKER_EXIT_GRACE_S = 5.0  # a worker told to exit that has not is killed after this


class Zygote:
    """A sandboxed process that forks an evaluation's processes (zygote.py), and its control
    channel: the kernels' zygote forks workers, the tasks' zygote judges (`role`)."""

    def __init__(self, info: sandbox.SandboxInfo, policy: sandbox.Policy, scratch: str, role: str = "kernel") -> None:
        """scratch: where the zygote gives its processes their directories: the sandbox's
        private /tmp, or (no sandbox) a directory of the server's own, one per zygote."""
        self.info = info
        self.role = role
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sandboxed = info.kind != "none"
        argv = sandbox.launch_argv(info, policy, [sys.executable, "-m", "kforge_harness", "zygote",
                                                  str(theirs.fileno()), sandbox.SANDBOX_TMP if sandboxed else scratch,
                                                  "1" if sandboxed else "0", role])
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, pass_fds=(theirs.fileno(),),
                                        start_new_session=True, env=None if info.kind != "none" else policy.env)
        theirs.close()
        self.control = ours
        self.exited: Dict[object, Message] = {}  # id -> {"status", "strays"}
        self.hello: Message = {}

    def wait_ready(self) -> None:
        """Waits for the zygote's hello (it imports torch and triton first: started early,
        that import overlaps with the server's own and with the first job's arrival)."""
        if self.hello:
            return
        ready, _, _ = select.select([self.control], [], [], ZYGOTE_START_S)
        hello = self.read() if ready else None
        if not hello or hello.get("type") != "hello" or not hello.get("ok"):
            self.stop()
            err = b""
            try:
                stderr = self.process.stderr  # a pipe (Popen's stderr=PIPE)
                err = stderr.read() if stderr is not None and self.process.poll() is not None else b""
            except OSError:
                pass
            raise HarnessError("the sandboxed %s process did not start (%s): %s" % (
                "judge" if self.role == "task" else "worker", self.info.kind,
                (hello or {}).get("error") or first_line(err.decode(errors="replace")) or "no answer"))
        self.hello = hello

    def read(self) -> Optional[Message]:
        try:
            message, fds = protocol.recv_with_fds(self.control)
        except (OSError, ValueError, protocol.ProtocolViolation):
            return None
        for fd in fds:
            os.close(fd)
        if message and message.get("type") == "exited":
            self.exited[message.get("id")] = message
        return message

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, rid: Optional[str], job: Mapping[str, object], fds: Iterable[int],
             avoid_pid: Optional[int] = None) -> Optional[int]:
        """Has the zygote fork the evaluation's process with `fds` (zygote.py says which), with a
        pid other than `avoid_pid` in the zygote's namespace; returns its pid there."""
        protocol.send_fds(self.control, {"op": "fork", "id": rid, "job": job, "avoid_pid": avoid_pid}, list(fds))
        while True:
            message = self.read()
            if message is None:
                raise HarnessError("the sandboxed %s process stopped answering"
                                   % ("judge" if self.role == "task" else "worker"))
            if message.get("type") == "forked" and message.get("id") == rid:
                pid: Optional[int] = message.get("pid")
                return pid

    def await_exit(self, rid: Optional[str], logs: Sequence[Optional[LogTail]],
                   kill_after_s: float) -> Optional[Message]:
        """The zygote's word that process `rid` and everything it started are gone, its
        status and strays (None if the zygote stopped answering); `logs` (LogTails) drained
        meanwhile: a process blocked on a full pipe would never end. Killed after
        `kill_after_s` (at once: 0), and given up on WORKER_EXIT_GRACE_S after that."""
        deadline = time.time() + kill_after_s
        killed = False
        while rid not in self.exited:
            remaining = deadline - time.time()
            if remaining <= 0:
                if killed:
                    return None
                self.kill(rid)
                killed = True
                deadline = time.time() + WORKER_EXIT_GRACE_S
                continue
            open_logs = [log for log in logs if log is not None and log.open]
            ready, _, _ = select.select([self.control] + [log.reader() for log in open_logs], [], [], remaining)
            for log in open_logs:
                if log.fd in ready:
                    log.drain()
            if self.control in ready and self.read() is None:
                return None
        return self.exited.pop(rid)

    def kill(self, rid: Optional[str]) -> None:
        try:
            protocol.send(self.control, {"op": "kill", "id": rid})
        except OSError:
            pass

    def stop(self) -> None:
        try:
            self.control.close()
        except OSError:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass



class LogTail:
    """A worker's output: the read end of a pipe whose write end the worker has as stdout and
    stderr. Drained as it comes (non-blocking), keeping the last LOG_LIMIT bytes; it is only
    bytes from a pipe, never a file the worker could have swapped for a link."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.fd: Optional[int] = read_fd  # None once closed
        self.write_fd: Optional[int] = write_fd  # None once handed over or closed
        os.set_blocking(read_fd, False)
        self.data = bytearray()
        self.open = True

    def reader(self) -> int:
        """The read end, which only close() gives up."""
        assert self.fd is not None, "a closed LogTail read"
        return self.fd

    def writer(self) -> int:
        """The write end, until writer_gone() or close()."""
        assert self.write_fd is not None, "a LogTail's write end used after it was handed over"
        return self.write_fd

    def writer_gone(self) -> None:
        """The write end has been handed over: only the worker holds it now."""
        os.close(self.writer())
        self.write_fd = None

    def drain(self) -> bool:
        """Reads what is there; False once the pipe is closed on the worker's side."""
        while self.open:
            try:
                chunk = os.read(self.reader(), 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                chunk = b""
            if not chunk:
                self.open = False
                break
            self.data += chunk
            if len(self.data) > 2 * protocol.LOG_LIMIT:
                del self.data[:-protocol.LOG_LIMIT]
        return False

    def text(self) -> str:
        return bytes(self.data[-protocol.LOG_LIMIT:]).decode("utf-8", errors="replace")

    def close(self) -> None:
        for fd in (self.fd, self.write_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fd = self.write_fd = None



def exit_details(status: Optional[int]) -> Dict[str, Any]:
    if status is None:
        return {}
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "signal %d" % -status
        return {"signal": name, "signal_number": -status}
    return {"exit_code": status}


def describe_exit(status: Optional[int], phase: Optional[str], who: str = "the kernel's process") -> str:
    where = " during %s" % phase if phase else ""
    if status is None:
        return "%s vanished%s" % (who, where)
    if status < 0:
        name = exit_details(status)["signal"]
        meaning = {"SIGSEGV": "segmentation fault", "SIGKILL": "killed", "SIGABRT": "aborted",
                   "SIGBUS": "bus error", "SIGFPE": "floating-point exception", "SIGILL": "illegal instruction"}
        return "%s died from %s (%s)%s" % (who, name, meaning.get(name, "signal"), where)
    return "%s exited with code %d without a result%s" % (who, status, where)



def scratch_dir(root: str, role: str) -> str:
    """The directory under `root` where a zygote of `role` gives its processes theirs (no sandbox)."""
    path = os.path.join(root, role)
    os.makedirs(path, exist_ok=True)
    return path



def zygote_restarted(result: MutableMapping[str, Any], why: object) -> None:
    result["flags"].append("zygote_restarted")
    result["notes"].append("the sandbox's worker-forking process had died since the last evaluation (%s) "
                           "and was started again" % why)


class Forks:
    """The two zygotes, each started ahead of its first use and again when it died, and the
    worker and judge they fork for an evaluation. `policy(role)`: each sandbox's policy."""

    def __init__(self, info: sandbox.SandboxInfo, policy: Callable[[str], sandbox.Policy], scratch_root: str) -> None:
        self.sandbox = info
        self.policy = policy
        self.scratch_root = scratch_root
        self.zygote: Optional[Zygote] = None  # the kernels' (workers)
        self.judges: Optional[Zygote] = None  # the tasks' (judges)

    def stop(self) -> None:
        for zygote in (self.zygote, self.judges):
            if zygote:
                zygote.stop()

    def drop_zygote(self) -> None:
        """The kernels' zygote stopped (`executor = "spawn"`: a fresh one per evaluation)."""
        if self.zygote is not None:
            self.zygote.stop()
        self.zygote = None

    def start_zygote(self) -> Zygote:
        """Starts the kernels' zygote without waiting for it (see Zygote.wait_ready)."""
        if self.zygote:
            self.zygote.stop()
        self.zygote = Zygote(self.sandbox, self.policy("kernel"), scratch_dir(self.scratch_root, "kernel"), "kernel")
        return self.zygote

    def start_judges(self) -> Zygote:
        """Starts the tasks' zygote without waiting for it."""
        if self.judges:
            self.judges.stop()
        self.judges = Zygote(self.sandbox, self.policy("task"), scratch_dir(self.scratch_root, "task"), "task")
        return self.judges

    def ensure_zygote(self, fresh: bool) -> Tuple[Zygote, Optional[str]]:
        """The running kernels' zygote, started when needed; and, when the last one had died
        (a kernel cannot do that: it is its pid namespace's init and ignores signals), how it
        ended."""
        lost = None
        zygote = self.zygote
        if zygote is not None and not zygote.alive():
            lost = describe_exit(zygote.process.returncode, None, "it")  # Popen's returncode: reap()'s terms
        if fresh or zygote is None or lost:
            zygote = self.start_zygote()
        try:
            zygote.wait_ready()
        except HarnessError:
            self.zygote = None
            raise
        return zygote, lost

    def ensure_judges(self) -> Zygote:
        """The running tasks' zygote, started again when it has died."""
        judges = self.judges
        if judges is None or not judges.alive():
            judges = self.start_judges()
        try:
            judges.wait_ready()
        except HarnessError:
            self.judges = None
            raise
        return judges

    def start_worker(self, job: ServerJob) -> Tuple[Zygote, socket.socket, LogTail, Optional[int]]:
        """The worker forked by the kernels' zygote: (the zygote, the judge's end of its channel,
        its log, its pid in the kernels' sandbox)."""
        rid, spec, result = job.rid, job.spec, job.result
        spawn = spec.settings.executor == "spawn"
        zygote, lost = self.ensure_zygote(fresh=spawn)
        if lost:
            zygote_restarted(result, lost)
        if zygote.hello.get("warm_error"):
            result["notes"].append("the worker's process could not prepare Triton (its driver utilities, its hash) "
                                   "(%s): each worker does it itself, slower" % zygote.hello["warm_error"])
        if zygote.hello.get("preimport_error"):
            result["notes"].append("the worker's process could not preload torch's tracing modules (%s): "
                                   "the audit imports them itself, slower" % zygote.hello["preimport_error"])
        judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # The worker's output goes into a pipe this process drains, never a file by name.
        worker_log = LogTail()
        atol, rtol = audit_tolerance(job.raw)
        # Nothing of the kernel: the worker may be started ahead of it (ahead.py); its
        # @triton.jit names come with the load request.
        worker_job = {"device": spec.device, "limits": {}, "atol": atol, "rtol": rtol,
                      "precision": spec.settings.precision or DEFAULT_POLICY}
        try:
            try:
                pid = zygote.fork(rid, worker_job, [worker_end.fileno(), worker_log.writer()])
            except (HarnessError, OSError) as e:
                # The zygote died between two evaluations (its launcher may not have been reaped
                # yet, so it looked alive): a new one, once, and the result says so.
                if spawn:
                    raise
                zygote, _ = self.ensure_zygote(fresh=True)  # stops the old one first
                zygote_restarted(result, e)
                pid = zygote.fork(rid, worker_job, [worker_end.fileno(), worker_log.writer()])
        except BaseException:
            judge_end.close()
            worker_log.close()
            raise
        finally:
            worker_end.close()
        worker_log.writer_gone()
        return zygote, judge_end, worker_log, pid

    def start_judge(self, job: ServerJob, judge_end: Optional[socket.socket],
                    worker_pid: Optional[int] = None, ahead: bool = False) -> Tuple[Zygote, socket.socket, LogTail]:
        """The judge forked by the tasks' zygote, its job sent: (its server channel, its log).
        judge_end: its end of the worker's channel (None: a task check); its pid differs from
        `worker_pid` (the worker's in its own sandbox: CUDA IPC between them needs it);
        `ahead`: started before its request (ahead.py)."""
        judges = self.ensure_judges()
        if judges.hello.get("preimport_error"):
            job.result["notes"].append("the judge's process could not preload its modules (%s): each judge "
                                       "imports them itself, slower" % judges.hello["preimport_error"])
        server_end, judge_server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        judge_log = LogTail()
        fds = [judge_server_end.fileno(), judge_log.writer()] + ([judge_end.fileno()] if judge_end else [])
        try:
            judges.fork(job.rid, {}, fds, avoid_pid=worker_pid)
        except BaseException:
            server_end.close()
            judge_log.close()
            raise
        finally:
            judge_server_end.close()
        judge_log.writer_gone()
        request = job.judge_request(knobs.active(), ahead)
        send_line(server_end, json.dumps(request, default=str).encode() + b"\n")
        return judges, server_end, judge_log

    def start_processes(self, job: ServerJob, with_worker: bool, server_s: Dict[str, Any]) -> Union[
            Dict[str, Any], Tuple[Optional[Zygote], Optional[LogTail], Zygote, socket.socket, LogTail]]:
        """The evaluation's worker (`with_worker`) and judge, its job sent: (the kernels'
        zygote, the worker's log, the tasks' zygote, the judge's channel, its log), or the
        `harness` result of a start that failed."""
        rid, result = job.rid, job.result
        mark = time.time()
        zygote: Optional[Zygote] = None
        judge_end: Optional[socket.socket] = None
        worker_log: Optional[LogTail] = None
        worker_pid: Optional[int] = None
        if with_worker:
            try:
                zygote, judge_end, worker_log, worker_pid = self.start_worker(job)
            except (HarnessError, OSError) as e:
                return fail(result, "harness", "cannot start the kernel's process: %s" % e)
            server_s["worker_start"] = time.time() - mark
            mark = time.time()
        try:
            judges, server_end, judge_log = self.start_judge(job, judge_end, worker_pid)
        except (HarnessError, OSError) as e:
            if zygote is not None and worker_log is not None:  # both started by start_worker
                zygote.kill(rid)
                zygote.await_exit(rid, [worker_log], 0)
                worker_log.close()
            return fail(result, "harness", "cannot start the task's process: %s" % e,
                        details={"kernel_loaded": False})
        finally:
            if judge_end is not None:
                judge_end.close()
        server_s["judge_start"] = time.time() - mark
        return zygote, worker_log, judges, server_end, judge_log


