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
  -> {"op": "rescore", "id", "timing", "compiled", "choice"}  <- {"event": "rescored", "id", "timing"}
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
import sys
import tempfile
import time
import traceback
from typing import IO, Any, Callable, Dict, List, Mapping, MutableMapping, Optional, Sequence, Tuple

from . import ahead, baselines, cachekeeper, envelope, launchers, sandbox, wire
from .device import device_description, missing_bytecode, versions
from .errors import clean_text, tail_bytes
from .protocol import PROTOCOL, fail, new_result
from .precision import DEFAULT_POLICY, scan, summarize
from .static import static_check
from .wire import WireError
from .forks import WORKER_EXIT_GRACE_S, Forks, LogTail, Zygote, describe_exit, exit_details
from .serverjob import KERNEL_LOADING  # noqa: F401 -- its home before
from .serverjob import MAX_JUDGE_LINE, ServerJob, add_log, answer, checked, ending, judge_messages, send_line
from .peaks import Peaks
from .protocol import Message
from .wire import ResultRecord

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
        self.forks = Forks(self.sandbox, self.policy, self.scratch_root)
        self.peaks: Dict[str, Peaks] = {}  # device -> its peaks, measured or read by this server (cachekeeper.py)
        self.launchers = launchers.Kept()  # earlier candidates' launcher specs per task and device (launchers.py)
        self.ahead = ahead.Ahead(self.forks, self.selector, self.keeper, lambda raw: self.job_result(raw, None))
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
                    self.ahead.readable(key.data)
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
            self.ahead.discard()
            self.forks.stop()
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
            self.ahead.discard()  # the peaks are measured on an idle device
            return envelope.Info(request.id, request.OP, device_peaks(request.cache_dir))
        if isinstance(request, envelope.Rescore):
            return rescore(request)  # runs nothing: a spare started ahead is left where it is
        if isinstance(request, envelope.SandboxInfo):
            return envelope.Info(request.id, request.OP, self.sandbox_record())
        if isinstance(request, envelope.NcuCheck):
            from .ncu import ncu_check

            self.ahead.discard()
            return envelope.Info(request.id, request.OP, ncu_check())
        return None  # a cancel with nothing running is harmless

    def sandbox_record(self) -> Dict[str, Any]:
        return sandbox_record(self.sandbox)

    def policy(self, role: str = "kernel") -> sandbox.Policy:
        return sandbox.default_policy(harness_dir=HARNESS_DIR, hidden_paths=self.hidden_paths,
                                      interpret=self.interpret, device_env=dict(os.environ), role=role)

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
        spare = None if spec.reference_only else self.ahead.take(raw, task_source)
        self.ahead.discard()  # one for another job: nothing runs on the device beside this one
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
                                  peaks=lambda: measured_peaks(self.peaks, spec.device, spec.baseline_cache_dir),
                                  kept=self.launchers)

    def start_ahead(self) -> None:
        """After an evaluation was answered, where no request waits already: the next
        candidate's judge and worker started (ahead.py)."""
        last, self.last_judged = self.last_judged, None
        if last is None:
            return
        self.poll_stdin()
        if not self.pending and self.stdin_open:
            self.ahead.start(*last)

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
            proc = spare.job.rid  # the processes' name in both zygotes
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
            started = self.forks.start_processes(job, with_worker, server_s)
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
            self.forks.drop_zygote()
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

def rescore(request: envelope.Rescore) -> envelope.Rescored:
    """An evaluation's timing scored against a compile figure measured after its verdict
    (`kforge eval` on a GPU): baselines.rescored, the judge's own scoring."""
    return envelope.Rescored(request.id, baselines.rescored(dict(request.timing), request.compiled, request.choice))


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
        server.forks.start_zygote()
        server.forks.start_judges()
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except BaseException as e:  # noqa: BLE001
        server.forks.stop()
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
    hello["no_bytecode"] = missing_bytecode([torch, triton])
    proto.write(json.dumps(hello) + "\n")
    proto.flush()
    server.loop()
    return 0
