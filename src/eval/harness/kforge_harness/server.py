"""The server: a long-lived trusted process that kforge talks to over JSON lines. It
imports torch and triton once, never initializes CUDA itself, never runs a task's or a
kernel's code, and for each evaluation asks its two sandboxed zygotes for a judge (the
tasks' zygote: the task's code runs only in there) and a worker (the kernels' zygote).

Protocol with kforge (one JSON object per line):
  -> {"op": "eval", "id": ID, "job": {...}}       <- {"event": "progress", "id", "phase"}...
                                                   <- {"event": "result", "id", "result": {...}}
  -> {"op": "cancel", "id": ID}                    (kills judge and worker; result status "cancelled")
  -> {"op": "static_check", "id", "source", "reject_torch_ops"}  <- {"event": "static", "id", "report"}
  -> {"op": "device_info", "id"}                   <- {"event": "device_info", "id", "info"}
  -> {"op": "sandbox_info", "id"}                  <- {"event": "sandbox_info", "id", "info"}
  -> {"op": "ncu_check", "id"}                     <- {"event": "ncu_check", "id", "info"}
  -> {"op": "device_peaks", "id", "cache_dir"}     <- {"event": "device_peaks", "id", "info"}
  -> {"op": "shutdown"}
"""

from __future__ import annotations

import json
import os
import platform
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from typing import IO, Any, Callable, Dict, Iterable, List, Mapping, MutableMapping, Optional, Sequence, Tuple, Union

from . import ahead, cachekeeper, envelope, knobs, protocol, sandbox, wire
from .device import device_description, versions
from .errors import clean_text, evaluation_log, first_line, tail_bytes
from .protocol import PROTOCOL, HarnessError, fail, new_result
from .compare import audit_tolerance
from .precision import DEFAULT_POLICY, scan, summarize
from .static import static_check
from .wire import WireError
from .serverjob import (KERNEL_LOADING, MAX_JUDGE_LINE, ServerJob, add_log, checked,  # noqa: F401 -- KERNEL_LOADING: its home before
                        ending, judge_messages)
from .peaks import Peaks
from .protocol import Message
from .wire import ResultRecord

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


class Server:
    def __init__(self, proto: IO[str], hidden_paths: Sequence[str]) -> None:
        self.proto = proto
        self.pending: List[Any] = []  # requests read and not yet handled: decoded JSON, any value
        self.buffer = b""
        self.stdin_open = True
        self.selector = selectors.DefaultSelector()
        self.selector.register(0, selectors.EVENT_READ, "stdin")
        self.interpret = os.environ.get("TRITON_INTERPRET") == "1"
        self.hidden_paths = hidden_paths
        self.sandbox = sandbox.detect()
        # Without a sandbox each zygote gives its processes their directories here, one root
        # each (in a sandbox they live in its private /tmp); ncu's inputs go to the first.
        self.private_root = tempfile.mkdtemp(prefix="kforge-judge-")
        self.scratch_root = tempfile.mkdtemp(prefix="kforge-scratch-")
        self.zygote: Optional[Zygote] = None  # the kernels' (workers)
        self.judges: Optional[Zygote] = None  # the tasks' (judges)
        self.peaks: Dict[str, Peaks] = {}  # device -> its peaks, measured or read by this server (cachekeeper.py)
        self.spare: Optional[ahead.Spare] = None  # the judge and worker started ahead (ahead.py)
        self.spares_started = 0
        # The last evaluation that ran a judge, as start_ahead reads it: (its job, with the
        # task's source, and its result); None once read.
        self.last_judged: Optional[Tuple[ServerJob, Mapping[str, Any]]] = None

    def send(self, obj: Mapping[str, Any]) -> None:
        self.proto.write(json.dumps(obj, default=str) + "\n")
        self.proto.flush()

    def read_stdin(self) -> None:
        try:
            chunk = os.read(0, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            self.stdin_open = False
            self.selector.unregister(0)
            return
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line.strip():
                try:
                    self.pending.append(json.loads(line))
                except ValueError:
                    self.send(envelope.Error(None, "malformed request line").message())

    def next_request(self) -> Any:
        """The next request; meanwhile a spare's judge is answered and its logs drained."""
        while not self.pending and self.stdin_open:
            for key, _ in self.selector.select():
                if key.data == "stdin":
                    self.read_stdin()
                else:
                    self.spare_readable(key.data)
        return self.pending.pop(0) if self.pending else None

    def poll_stdin(self) -> None:
        """Reads what kforge has sent already, without waiting."""
        for key, _ in self.selector.select(timeout=0):
            if key.data == "stdin":
                self.read_stdin()

    def loop(self) -> None:
        try:
            while True:
                request = self.next_request()
                if request is None:
                    return
                rid = request.get("id") if isinstance(request, dict) else None
                try:
                    parsed = envelope.parse_request(request)
                except WireError as e:
                    self.send(envelope.Error(rid, str(e)).message())
                    continue
                if isinstance(parsed, envelope.Shutdown):
                    return
                try:
                    reply = self.answer(parsed)
                    if reply is not None:
                        self.send(reply.message())
                    self.start_ahead()
                except Exception as e:  # noqa: BLE001 -- the server must outlive any request
                    self.send(envelope.Error(rid, "%s: %s" % (type(e).__name__, e), traceback.format_exc()).message())
        finally:
            self.discard_spare()
            for zygote in (self.zygote, self.judges):
                if zygote:
                    zygote.stop()
            shutil.rmtree(self.private_root, ignore_errors=True)
            shutil.rmtree(self.scratch_root, ignore_errors=True)

    def answer(self, request: envelope.Request) -> Optional[envelope.Event]:
        """The event that answers `request` (envelope.py); None for a late cancel (nothing
        runs between evaluations)."""
        if isinstance(request, envelope.Eval):
            return envelope.Result(request.id, self.run_eval(request.id, request.job))
        if isinstance(request, envelope.StaticCheck):
            category, report, _ = static_check(request.source, request.reject_torch_ops)
            return envelope.Static(request.id, category, report)
        if isinstance(request, envelope.DeviceInfo):
            return envelope.Info(request.id, request.OP, device_info())
        if isinstance(request, envelope.DevicePeaks):
            self.discard_spare()  # the peaks are measured on an idle device
            return envelope.Info(request.id, request.OP, device_peaks(request.cache_dir))
        if isinstance(request, envelope.SandboxInfo):
            return envelope.Info(request.id, request.OP, self.sandbox_record())
        if isinstance(request, envelope.NcuCheck):
            from .ncu import ncu_check

            self.discard_spare()
            return envelope.Info(request.id, request.OP, ncu_check())
        return None  # a cancel with nothing running is harmless

    def sandbox_record(self) -> Dict[str, Any]:
        return sandbox_record(self.sandbox)

    def policy(self, role: str = "kernel") -> sandbox.Policy:
        return sandbox.default_policy(harness_dir=HARNESS_DIR, hidden_paths=self.hidden_paths,
                                      interpret=self.interpret, device_env=dict(os.environ), role=role)

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

    # -- evaluation ---------------------------------------------------------

    def run_eval(self, rid: Optional[str], job: Dict[str, Any]) -> Dict[str, Any]:
        started = time.time()
        # Checked once, before anything runs: a job this harness does not know how to read
        # (a kforge of another version) is an error naming the key, never a default.
        spec = wire.Job.parse(job)
        raw = job
        result = self.job_result(raw, rid)
        if not result["sandbox"]["enforced"]:
            result["notes"].append("NO SANDBOX: the %s ran with this user's rights (%s)" % (
                "task" if spec.reference_only else "task and the kernel", self.sandbox.reason))
        try:
            kernel_source = open(spec.kernel_path, encoding="utf-8", errors="replace").read()
            task_source = open(spec.task_path, encoding="utf-8", errors="replace").read()
        except OSError as e:
            return fail(result, "harness", "cannot read input file: %s" % e)
        if static_verdict(spec, result, kernel_source):
            result["duration_s"] = time.time() - started
            return result
        if spec.settings.require_sandbox and not result["sandbox"]["enforced"]:
            # The task's code is as untrusted as a kernel's: a task check runs it too.
            fail(result, "harness", "no sandbox could be set up (%s); [eval] require_sandbox = true refuses to "
                 "run the %s" % (self.sandbox.reason, "task" if spec.reference_only else "task and the kernel"))
            result["duration_s"] = time.time() - started
            return result
        server_job = ServerJob(rid, raw, spec, result, task_source=task_source, kernel_source=kernel_source)
        spare = None if spec.reference_only else self.take_spare(raw, task_source)
        self.discard_spare()  # one for another job: nothing runs on the device beside this one
        outcome = self.run_judge(server_job, self.keeper(server_job), with_worker=not spec.reference_only, spare=spare)
        outcome["duration_s"] = time.time() - started
        if outcome.get("correct") and spec.profile and spec.device != "cpu":
            from .ncu import run_ncu

            outcome["profile"] = run_ncu(server_job.fields(), self.sandbox, self.policy(), self.private_root)
        self.last_judged = (server_job, outcome)
        return outcome

    def job_result(self, raw: Mapping[str, Any], rid: Optional[str]) -> ResultRecord:
        """A job's result skeleton with what only the server knows (versions, sandbox)."""
        result = new_result(dict(raw, id=rid))
        result["versions"] = versions()  # imported already; no CUDA involved
        result["sandbox"] = self.sandbox_record()
        return result

    def keeper(self, job: ServerJob) -> cachekeeper.Keeper:
        """What the server keeps for `job`'s judge (cachekeeper.py), under keys of its own."""
        spec = job.spec
        return cachekeeper.Keeper(spec.baseline_cache_dir, job.task_source, job.result["versions"], job.fields(),
                                  peaks=lambda: measured_peaks(self.peaks, spec.device, spec.baseline_cache_dir))

    # -- judges started ahead (ahead.py) ------------------------------------

    def start_ahead(self) -> None:
        """After a session's candidate was answered: the judge and worker of the next one
        like it, started while the model writes it. Not when a request is waiting already,
        nor where the job or its verdict says no (ahead.wanted). Its task is the source the
        candidate's judge was given (a task file may be a copy gone by now)."""
        last, self.last_judged = self.last_judged, None
        if last is None or self.spare is not None:
            return
        previous, outcome = last
        if not ahead.wanted(previous.spec, outcome):
            return
        raw, task_source = ahead.candidate_job(previous.raw), previous.task_source
        spec = wire.Job.parse(raw)
        self.poll_stdin()
        if self.pending or not self.stdin_open:
            return
        self.spares_started += 1
        job = ServerJob("ahead-%d" % self.spares_started, raw, spec, self.job_result(raw, None),
                        task_source=task_source)
        try:
            zygote, judge_end, worker_log, worker_pid = self.start_worker(job)
        except (HarnessError, OSError):
            return  # the request's own start meets it again and says so
        try:
            judges, channel, judge_log = self.start_judge(job, judge_end, worker_pid, ahead=True)
        except (HarnessError, OSError):
            zygote.kill(job.rid)
            zygote.await_exit(job.rid, [worker_log], 0)
            worker_log.close()
            return
        finally:
            judge_end.close()
        self.spare = ahead.Spare(job, ahead.alike_key(raw, task_source), self.keeper(job), judges, channel,
                                 judge_log, zygote, worker_log)
        self.selector.register(channel.fileno(), selectors.EVENT_READ, "spare")
        for log in (judge_log, worker_log):
            self.selector.register(log.reader(), selectors.EVENT_READ, log)

    def spare_readable(self, data: object) -> None:
        """What the spare's judge sent (`data` "spare") or printed (a LogTail): its questions
        answered, its progress kept; a spare that ended is discarded."""
        spare = self.spare
        if spare is None:
            return
        if isinstance(data, LogTail):
            if not data.drain():
                self.selector.unregister(data.reader())
            return
        try:
            chunk = os.read(spare.channel.fileno(), 1 << 16)
        except OSError:
            chunk = b""
        if not spare.take(chunk, lambda message: answer(spare.channel, spare.keeper.answer(message))):
            self.discard_spare()

    def take_spare(self, raw: Mapping[str, Any], task_source: str) -> Optional[ahead.Spare]:
        """The spare started for a job like `raw` whose task reads `task_source`, off the idle
        loop and alive as far as its channel says; None where there is none such."""
        spare = self.spare
        if spare is None:
            return None
        if select.select([spare.channel], [], [], 0)[0]:
            self.spare_readable("spare")  # what it said since the last look (it may be gone)
        spare = self.spare
        if spare is None or spare.key != ahead.alike_key(raw, task_source):
            return None
        self.unwatch_spare(spare)
        self.spare = None
        return spare

    def unwatch_spare(self, spare: ahead.Spare) -> None:
        registered = self.selector.get_map()
        for fd in (spare.channel.fileno(), spare.judge_log.fd, spare.worker_log.fd):
            if fd is not None and fd in registered:
                self.selector.unregister(fd)

    def discard_spare(self) -> None:
        """The spare's processes killed and reaped (and everything they started)."""
        spare, self.spare = self.spare, None
        if spare is None:
            return
        self.unwatch_spare(spare)
        spare.judges.kill(spare.pid)
        spare.zygote.kill(spare.pid)
        spare.judges.await_exit(spare.pid, [spare.judge_log, spare.worker_log], 0)
        spare.zygote.await_exit(spare.pid, [spare.worker_log], 0)
        spare.channel.close()
        spare.judge_log.close()
        spare.worker_log.close()

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
        try:
            server_end.sendall(json.dumps(request, default=str).encode() + b"\n")
        except OSError:
            pass  # the judge is gone already: its end says how
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

    def run_judge(self, job: ServerJob, keeper: cachekeeper.Keeper, with_worker: bool,
                  spare: Optional[ahead.Spare] = None) -> Dict[str, Any]:
        """One evaluation's judge (and, `with_worker`, its worker) from start to result; with
        `spare`, the ones started ahead for it, handed its kernel."""
        rid, result, spec = job.rid, job.result, job.spec
        # Where the server's own time goes, beside the judge's phases_s (docs/benchmarks.md).
        server_s = result.setdefault("server_phases_s", {})
        mark = time.time()
        zygote: Optional[Zygote] = None
        worker_log: Optional[LogTail] = None
        data = b""  # what was read of the judge's channel past its last full line
        handover: Optional[bytes] = None  # the kernel, for a spare that is not ready yet
        if spare is not None:
            zygote, worker_log = spare.zygote, spare.worker_log
            judges, server_end, judge_log = spare.judges, spare.channel, spare.judge_log
            proc = spare.pid  # the processes' name in both zygotes
            server_s["ahead"] = spare.ahead_s(mark)
            job.timeline.extend(spare.job.timeline)
            data = spare.data
            handover = json.dumps(spare.handover(rid, job.kernel_source, result), default=str).encode() + b"\n"
            if spare.ready_at is not None:
                # It waits for nothing but the kernel; one still starting may be asking the
                # server something: it gets the kernel once it says it is ready (watch).
                send_line(server_end, handover)
                handover = None
        else:
            proc = rid
            started = self.start_processes(job, with_worker, server_s)
            if isinstance(started, dict):
                return started
            zygote, worker_log, judges, server_end, judge_log = started
        mark = time.time()
        self.send(envelope.Started(rid, "spawn" if spec.settings.executor == "spawn" else "fork",
                                   self.sandbox.kind).message())
        if job.timeline:
            self.send(envelope.Progress(rid, job.timeline[-1][1]).message())  # where the spare stands
        final, ended_by = self.watch(job, server_end, keeper, [judge_log, worker_log], data, handover)
        server_s["judge"] = time.time() - mark
        mark = time.time()
        server_end.close()
        # A judge that sent its result has nothing left to do; one that did not is given
        # the grace to end by itself, so that its status says how it ended.
        judge = judges.await_exit(proc, [judge_log, worker_log],
                                  0 if final is not None or ended_by else WORKER_EXIT_GRACE_S)
        worker: Optional[Message] = None
        if zygote is not None:
            worker = zygote.await_exit(proc, [worker_log],
                                       0 if ended_by or final is None or not final.get("correct")
                                       else WORKER_EXIT_GRACE_S)
        log = judge_log.text()
        judge_log.close()
        if worker_log is not None:
            worker_log.drain()
            log += worker_log.text()
            worker_log.close()
        server_s["teardown"] = time.time() - mark
        if zygote is not None and spec.settings.executor == "spawn":
            zygote.stop()
            self.zygote = None
        if final is not None:
            final = checked(final, result, self.sandbox_record())
            final["server_phases_s"] = server_s
        out: Dict[str, Any] = ending(job, final, ended_by, (judge or {}).get("status"), log)
        if final is not None and out is final and out.get("category") == "crash" and worker is not None \
                and worker_death_explains(worker, out.get("details")):
            # The worker died: say how (the judge only saw its channel close).
            phase = out.get("phase") or result.get("phase")
            out["summary"] = describe_exit(worker["status"], phase)
            out["message"] = "%s\n%s" % (out["summary"], clean_text(log))
            out["details"] = dict(out.get("details") or {}, **exit_details(worker["status"]))
        for who, ended in (("the task", judge), ("the kernel", worker)):
            if ended and ended.get("strays"):
                out["notes"].append("%d process(es) %s left behind were killed" % (ended["strays"], who))
                out["flags"].append("stray_processes")
        add_log(out, job, log)
        if out.get("category") not in (None, "syntax", "static_check") and out.get("message"):
            out["log"] = tail_bytes(out["log"] + "\n" + out["message"])
        return out

    def watch(self, job: ServerJob, channel: socket.socket, keeper: cachekeeper.Keeper,
              logs: Sequence[Optional[LogTail]], data: bytes = b"",
              handover: Optional[bytes] = None) -> Tuple[Any, Optional[str]]:
        """Relays the judge's progress until its result; answers its requests (`keeper`:
        what the server keeps for it); enforces the deadline and cancels; drains the logs
        (LogTails or None) so that no process blocks on a full pipe; `data`: what was read of
        the channel before (a spare's, ahead.py); `handover`: the line that hands a spare its
        kernel, sent when it says it is ready. Returns (the judge's
        result or None, what ended it: None, "timeout", "cancelled", "shutdown")."""
        rid, result = job.rid, job.result
        started = time.time()
        timeline = job.timeline
        deadline = started + job.spec.settings.timeout_s
        read_fd = channel.fileno()
        self.selector.register(read_fd, selectors.EVENT_READ, "judge")
        tails = [log for log in logs if log is not None]
        for log in tails:
            self.selector.register(log.reader(), selectors.EVENT_READ, log)
        final: Any = None  # the judge's result: decoded JSON, checked by serverjob.checked
        ended_by: Optional[str] = None
        try:
            while True:
                remaining = deadline - time.time()
                if remaining <= 0:
                    return final, "timeout"
                for key, _ in self.selector.select(timeout=min(remaining, 1.0)):
                    if key.data == "stdin":
                        self.read_stdin()
                        if not self.stdin_open:
                            ended_by = "shutdown"
                        for req in list(self.pending):
                            if req.get("op") == "cancel" and req.get("id") == rid:
                                self.pending.remove(req)
                                ended_by = "cancelled"
                        continue
                    if isinstance(key.data, LogTail):
                        if not key.data.drain():
                            self.selector.unregister(key.data.reader())
                        continue
                    try:
                        chunk = os.read(read_fd, 1 << 16)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        return final, ended_by
                    data += chunk
                    if len(data) > MAX_JUDGE_LINE:
                        return final, ended_by  # a judge that floods its channel ends without a result
                    messages, data = judge_messages(data)
                    for message in messages:
                        if "progress" in message:
                            phase = str(message["progress"])[:200]
                            result["phase"] = phase
                            timeline.append((time.time() - started, phase))
                            self.send(envelope.Progress(rid, phase).message())
                        elif "ask" in message:
                            answer(channel, keeper.answer(message))
                        elif message.get("ready") and handover is not None:
                            send_line(channel, handover)
                            handover = None
                        elif "result" in message:
                            final = message["result"]
                if ended_by:
                    return final, ended_by
        finally:
            self.selector.unregister(read_fd)
            for log in tails:
                if log.fd is not None and log.fd in self.selector.get_map():
                    self.selector.unregister(log.fd)

def scratch_dir(root: str, role: str) -> str:
    """The directory under `root` where a zygote of `role` gives its processes theirs (no sandbox)."""
    path = os.path.join(root, role)
    os.makedirs(path, exist_ok=True)
    return path


def device_info() -> Dict[str, Any]:
    """Runs in a forked child: the server must never initialize CUDA."""
    def query() -> Dict[str, Any]:
        import torch

        info: Dict[str, Any] = {"cuda_available": torch.cuda.is_available()}
        info["devices"] = [device_description(i) for i in range(torch.cuda.device_count())] \
            if info["cuda_available"] else []
        info["cuda_version"] = torch.version.cuda
        return info

    return in_child(query, "device query", 120)

def device_peaks(cache_dir: Optional[str]) -> Dict[str, Any]:
    """Each CUDA device's measured peaks (peaks.py), cached or measured now, in a forked
    child (the server must never initialize CUDA): what `kforge doctor` shows."""
    def query() -> Dict[str, Any]:
        import torch

        from . import peaks

        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            return {"devices": []}
        found = []
        for i in range(torch.cuda.device_count()):
            info = device_description(i)
            found.append(dict(peaks.device_peaks("cuda:%d" % i, info, peaks.driver_version(info),
                                                 torch.__version__, cache_dir), device="cuda:%d" % i,
                              name=info.get("name")))
        return {"devices": found}

    return in_child(query, "peaks measurement", 300)


def measured_peaks(kept: Dict[str, Peaks], device: str, cache_dir: Optional[str]) -> Peaks:
    """The device's peaks (peaks.py), read from the cache or measured, in a forked child
    of this server's (no task's code runs there: a task could otherwise forge the peaks
    every task's bound is taken against); once per device for the server's life (`kept`:
    the server's peaks by device)."""
    if device not in kept:
        def query() -> Peaks:
            import torch

            from . import peaks

            torch.cuda.set_device(device)
            info = device_description(device)
            return peaks.device_peaks(device, info, peaks.driver_version(info), torch.__version__,
                                      peaks.cache_dir_beside(cache_dir))

        found = in_child(query, "peaks measurement", 300)
        if "error" in found:
            return found  # not kept: a later evaluation tries again
        kept[device] = found
    return dict(kept[device])


def in_child(query: Callable[[], Dict[str, Any]], what: str, timeout_s: float) -> Dict[str, Any]:
    """`query()`'s JSON-able answer, computed in a forked child (CUDA is initialized there,
    never in the server); {"error": ...} where it raised or the child died."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            try:
                info = query()
            except Exception as e:  # noqa: BLE001
                info = {"error": "%s: %s" % (type(e).__name__, e)}
            os.write(write_fd, json.dumps(info).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks: List[bytes] = []
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if select.select([read_fd], [], [], 1.0)[0]:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_fd)
    kill_group(pid, own_group=False)
    status = reap(pid)
    try:
        # JSON that this server's own child wrote: an object (or nothing)
        found: Dict[str, Any] = json.loads(b"".join(chunks) or b"{}") or {
            "error": describe_exit(status, what, "the " + what)}
        return found
    except ValueError:
        return {"error": describe_exit(status, what, "the " + what)}


def sandbox_record(info: sandbox.SandboxInfo) -> Dict[str, Any]:
    """The result's and the hello's `sandbox`: the mechanism, and that tasks and kernels
    each run in one of their own (`task`: docs/security.md, "The task sandbox")."""
    enforced = info.kind != "none"
    return {"kind": info.kind, "detail": info.detail, "reason": info.reason, "enforced": enforced,
            "task": {"enforced": enforced,
                     "detail": "sandboxed apart from the kernel (%s): no secret, nothing of the host writable, no "
                               "host process in view" % info.kind if enforced else
                               "NO SANDBOX: the task's code ran with your rights (%s)" % info.reason}}


def send_line(channel: socket.socket, line: bytes) -> None:
    """A line to a judge; one that is gone already says how through its channel's end."""
    try:
        channel.sendall(line)
    except OSError:
        pass


def answer(channel: socket.socket, reply: Mapping[str, Any]) -> None:
    """The server's answer to a judge's request (judgeproc.ServerLink.ask)."""
    send_line(channel, json.dumps({"answer": reply}, default=str).encode() + b"\n")


def zygote_restarted(result: MutableMapping[str, Any], why: object) -> None:
    result["flags"].append("zygote_restarted")
    result["notes"].append("the sandbox's worker-forking process had died since the last evaluation (%s) "
                           "and was started again" % why)


def static_verdict(spec: wire.Job, result: ResultRecord, kernel_source: str) -> bool:
    """The static checks of the kernel (none for a task check), their report and the
    source's precision findings into `result`; True where they fail it (its result then
    says how)."""
    if spec.reference_only:
        category, report, syntax = None, result["static"], None
    else:
        category, report, syntax = static_check(kernel_source, spec.settings.reject_torch_ops)
    result["static"] = report
    if not spec.reference_only:
        # What the kernel computes in, from its source; the judge applies it to the task's dtypes.
        result["precision"] = summarize(spec.settings.precision or DEFAULT_POLICY, scan(kernel_source), [], {})
    if category == "static_check" and not spec.settings.static_checks:
        # The filter is off: its findings stay in the report as warnings, and the kernel
        # meets the sandbox, the judge and the audit alone.
        report["warnings"] = report["errors"] + report["warnings"]
        report["errors"] = []
        category = None
    if category:
        fail_static(result, category, report, syntax)
        return True
    return False


def fail_static(result: ResultRecord, category: str, report: Dict[str, Any], syntax: Optional[Dict[str, Any]]) -> None:
    if category == "syntax":
        summary = report["errors"][0]["message"]
        message = summary
        if syntax and syntax.get("text"):
            caret = " " * max((syntax.get("col") or 1) - 1, 0) + "^"
            message = "%s\n    %s\n    %s" % (summary, syntax["text"], caret)
        fail(result, "syntax", summary, message, syntax)
    else:
        summary = "; ".join(e["message"] for e in report["errors"])
        fail(result, "static_check", summary, "\n".join(
            "line %s: %s" % (e["line"], e["message"]) if e["line"] else e["message"]
            for e in report["errors"]), {"errors": report["errors"]})


def worker_death_explains(worker: Optional[Mapping[str, Any]], details: Optional[Mapping[str, Any]]) -> bool:
    """Whether the worker's end explains a `crash` verdict: the judge saw only its channel
    close (`channel_closed` in the verdict's details, judge.WorkerLink) and the worker died
    of a signal or an unusual status. A judge that caught the kernel itself (a forged
    output, a window that never closed) ended first; a worker still alive then is killed by
    the server, and that SIGKILL must not replace the judge's reason."""
    if not worker or worker.get("status") in (None, 0, 70):
        return False
    return bool((details or {}).get("channel_closed"))


SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def scrub_environment(env: MutableMapping[str, str]) -> None:
    """The server's own hygiene (kforge already starts it with an allow-listed environment;
    both sandboxes build theirs from an allow-list again): no credential-like variable stays
    in a process that forks, whatever reaches it."""
    for name in list(env):
        if any(word in name.upper() for word in SECRET_WORDS) or sandbox.looks_secret(env[name]):
            del env[name]


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


def kill_group(pid: int, own_group: bool = True) -> None:
    try:
        if own_group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def reap(pid: int) -> Optional[int]:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


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


def serve(hidden_paths: Sequence[str]) -> int:
    # The protocol gets a private copy of stdout; fd 1 becomes stderr so stray prints from
    # imports can never corrupt the JSON stream.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    scrub_environment(os.environ)
    started = time.time()
    server = Server(proto, hidden_paths)
    if server.sandbox.kind != "none":
        # The zygotes (the kernels' and the tasks') import torch and triton in their
        # sandboxes while this process does the same: on a first evaluation the imports
        # overlap instead of adding up (the tasks' zygote started at the first job put its
        # import after this one's: 2-5 s of a one-shot `kforge eval`).
        server.start_zygote()
        server.start_judges()
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except BaseException as e:  # noqa: BLE001
        for zygote in (server.zygote, server.judges):
            if zygote:
                zygote.stop()
        proto.write(json.dumps({"event": "hello", "ok": False, "protocol": PROTOCOL,
                                "python": platform.python_version(), "executable": sys.executable,
                                "error": "%s: %s" % (type(e).__name__, e)}) + "\n")
        proto.flush()
        return 3
    hello = {"event": "hello", "ok": True, "protocol": PROTOCOL, "pid": os.getpid(),
             "executable": sys.executable, "import_s": time.time() - started,
             "interpret": os.environ.get("TRITON_INTERPRET") == "1", "fork": hasattr(os, "fork"),
             "sandbox": server.sandbox_record()}
    hello.update(versions())
    proto.write(json.dumps(hello) + "\n")
    proto.flush()
    server.loop()
    return 0
