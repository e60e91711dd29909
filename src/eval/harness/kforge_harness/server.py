"""The server: a long-lived trusted process that kforge talks to over JSON lines. It
imports torch and triton once, never initializes CUDA itself, and for each evaluation forks
a judge and asks its sandboxed zygote for a worker.

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

import json
import os
import platform
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

from . import protocol, sandbox, wire
from .device import device_description, versions
from .errors import clean_text, evaluation_log, exception_text, first_line, tail_bytes
from .protocol import PROTOCOL, HarnessError, KernelFailure, TaskFailure, fail, new_result
from .compare import audit_tolerance
from .precision import DEFAULT_POLICY, scan, summarize
from .static import static_check

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZYGOTE_START_S = 300.0  # importing torch and triton inside the sandbox
WORKER_EXIT_GRACE_S = 5.0  # a worker told to exit that has not is killed after this
# The judge's phases before it loads the kernel (judge.py's progress lines).
TASK_PHASES = {"start-up", "loading task", "drawing inputs", "reference forward", "starting the kernel's process",
               "calibrating the timing exchange"}


class Zygote:
    """The sandboxed process that forks workers (zygote.py), and its control channel."""

    def __init__(self, info, policy, scratch):
        """scratch: where the zygote gives workers their directories: the sandbox's private
        /tmp, or (no sandbox) a directory of the server's own."""
        self.info = info
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sandboxed = info.kind != "none"
        argv = sandbox.launch_argv(info, policy, [sys.executable, "-m", "kforge_harness", "zygote",
                                                  str(theirs.fileno()), sandbox.SANDBOX_TMP if sandboxed else scratch,
                                                  "1" if sandboxed else "0"])
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, pass_fds=(theirs.fileno(),),
                                        start_new_session=True, env=None if info.kind != "none" else policy.env)
        theirs.close()
        self.control = ours
        self.exited = {}  # id -> {"status", "strays"}
        self.hello = {}

    def wait_ready(self):
        """Waits for the zygote's hello (it imports torch and triton first: started early,
        that import overlaps with the server's own and with the first job's arrival)."""
        if self.hello:
            return
        ready, _, _ = __import__("select").select([self.control], [], [], ZYGOTE_START_S)
        hello = self.read() if ready else None
        if not hello or hello.get("type") != "hello" or not hello.get("ok"):
            self.stop()
            err = b""
            try:
                err = self.process.stderr.read() if self.process.poll() is not None else b""
            except OSError:
                pass
            raise HarnessError("the sandboxed worker process did not start (%s): %s" % (
                self.info.kind, (hello or {}).get("error") or first_line(err.decode(errors="replace")) or "no answer"))
        self.hello = hello

    def read(self):
        try:
            message, fds = protocol.recv_with_fds(self.control)
        except (OSError, ValueError, protocol.ProtocolViolation):
            return None
        for fd in fds:
            os.close(fd)
        if message and message.get("type") == "exited":
            self.exited[message.get("id")] = message
        return message

    def alive(self):
        return self.process.poll() is None

    def fork(self, rid, job, channel, log_fd):
        protocol.send_fds(self.control, {"op": "fork", "id": rid, "job": job}, [channel.fileno(), log_fd])
        while True:
            message = self.read()
            if message is None:
                raise HarnessError("the sandboxed worker process stopped answering")
            if message.get("type") == "forked" and message.get("id") == rid:
                return

    def kill(self, rid):
        try:
            protocol.send(self.control, {"op": "kill", "id": rid})
        except OSError:
            pass

    def stop(self):
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
    def __init__(self, proto, hidden_paths):
        self.proto = proto
        self.pending = []
        self.buffer = b""
        self.stdin_open = True
        self.selector = selectors.DefaultSelector()
        self.selector.register(0, selectors.EVENT_READ, "stdin")
        self.interpret = os.environ.get("TRITON_INTERPRET") == "1"
        self.hidden_paths = hidden_paths
        self.sandbox = sandbox.detect()
        # The judge's own files (the task it loads, its log): never visible to a worker.
        self.private_root = tempfile.mkdtemp(prefix="kforge-judge-")
        # Without a sandbox the zygote's workers get their directories here (in a sandbox
        # they live in its private /tmp).
        self.scratch_root = tempfile.mkdtemp(prefix="kforge-scratch-")
        self.zygote = None

    def send(self, obj):
        self.proto.write(json.dumps(obj, default=str) + "\n")
        self.proto.flush()

    def read_stdin(self):
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
                    self.send({"event": "error", "error": "malformed request line"})

    def next_request(self):
        while not self.pending and self.stdin_open:
            for key, _ in self.selector.select():
                if key.data == "stdin":
                    self.read_stdin()
        return self.pending.pop(0) if self.pending else None

    def loop(self):
        try:
            while True:
                request = self.next_request()
                if request is None:
                    return
                op = request.get("op")
                rid = request.get("id")
                try:
                    if op == "eval":
                        self.send({"event": "result", "id": rid, "result": self.run_eval(rid, request.get("job") or {})})
                    elif op == "static_check":
                        category, report, _ = static_check(request.get("source", ""), request.get("reject_torch_ops", False))
                        self.send({"event": "static", "id": rid, "category": category, "report": report})
                    elif op == "device_info":
                        self.send({"event": "device_info", "id": rid, "info": self.device_info()})
                    elif op == "device_peaks":
                        self.send({"event": "device_peaks", "id": rid,
                                   "info": self.device_peaks(request.get("cache_dir"))})
                    elif op == "sandbox_info":
                        self.send({"event": "sandbox_info", "id": rid, "info": self.sandbox_record()})
                    elif op == "ncu_check":
                        from .ncu import ncu_check

                        self.send({"event": "ncu_check", "id": rid, "info": ncu_check()})
                    elif op == "cancel":
                        pass  # nothing running: a late cancel is harmless
                    elif op == "shutdown":
                        return
                    else:
                        self.send({"event": "error", "id": rid, "error": "unknown op %r" % op})
                except Exception as e:  # noqa: BLE001 -- the server must outlive any request
                    self.send({"event": "error", "id": rid, "error": "%s: %s" % (type(e).__name__, e),
                               "traceback": traceback.format_exc()})
        finally:
            if self.zygote:
                self.zygote.stop()
            shutil.rmtree(self.private_root, ignore_errors=True)
            shutil.rmtree(self.scratch_root, ignore_errors=True)

    def sandbox_record(self):
        return {"kind": self.sandbox.kind, "detail": self.sandbox.detail, "reason": self.sandbox.reason,
                "enforced": self.sandbox.kind != "none"}

    def policy(self):
        return sandbox.default_policy(harness_dir=HARNESS_DIR, hidden_paths=self.hidden_paths,
                                      interpret=self.interpret, device_env=dict(os.environ))

    def start_zygote(self):
        """Starts the zygote without waiting for it (see Zygote.wait_ready)."""
        if self.zygote:
            self.zygote.stop()
        self.zygote = Zygote(self.sandbox, self.policy(), self.scratch_root)

    def ensure_zygote(self, fresh):
        """The running zygote, started when needed; and, when the last one had died (a kernel
        cannot do that: it is its pid namespace's init and ignores signals), how it ended."""
        lost = None
        if self.zygote is not None and not self.zygote.alive():
            lost = describe_exit(self.zygote.process.returncode, None, "it")  # Popen's returncode: reap()'s terms
        if fresh or self.zygote is None or lost:
            self.start_zygote()
        try:
            self.zygote.wait_ready()
        except HarnessError:
            self.zygote = None
            raise
        return self.zygote, lost

    # -- evaluation ---------------------------------------------------------

    def run_eval(self, rid, job):
        started = time.time()
        # Checked once, before anything runs: a job this harness does not know how to read
        # (a kforge of another version) is an error naming the key, never a default.
        spec = wire.Job.parse(job)
        job = dict(job)
        job["id"] = rid
        job["_wire"] = spec  # what the judge reads the job through
        result = new_result(job)
        result["versions"] = versions()  # imported already; no CUDA involved
        result["sandbox"] = self.sandbox_record()
        if not result["sandbox"]["enforced"]:
            result["notes"].append("NO SANDBOX: the kernel ran with this user's rights (%s)" % self.sandbox.reason)
        try:
            kernel_source = open(spec.kernel_path, encoding="utf-8", errors="replace").read()
            task_source = open(spec.task_path, encoding="utf-8", errors="replace").read()
        except OSError as e:
            return fail(result, "harness", "cannot read input file: %s" % e)
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
            result["duration_s"] = time.time() - started
            return result
        if spec.settings.require_sandbox and not result["sandbox"]["enforced"] and not spec.reference_only:
            fail(result, "harness", "no sandbox could be set up (%s); [eval] require_sandbox = true refuses to "
                 "run the kernel" % self.sandbox.reason)
            result["duration_s"] = time.time() - started
            return result

        private = tempfile.mkdtemp(prefix="eval-", dir=self.private_root)
        try:
            # The task stays in the judge's private dir, out of the worker's sight; the kernel's
            # source reaches the worker in the judge's "load" request (the worker writes its
            # only copy in its own directory).
            task_file = os.path.join(private, "task.py")
            with open(task_file, "w", encoding="utf-8") as f:
                f.write(task_source)
            job.update({"task_file": task_file, "task_source": task_source, "kernel_source": kernel_source,
                        "_result": result})
            outcome = self.run_judge_and_worker(rid, job, private)
        finally:
            shutil.rmtree(private, ignore_errors=True)
        outcome["duration_s"] = time.time() - started
        if outcome.get("correct") and spec.profile and spec.device != "cpu":
            from .ncu import run_ncu

            outcome["profile"] = run_ncu(job, self.sandbox, self.policy(), self.private_root)
        return outcome

    def run_judge_and_worker(self, rid, job, private):
        result, spec = job["_result"], job["_wire"]
        spawn = spec.settings.executor == "spawn"
        if spec.reference_only:
            return self.run_judge_alone(rid, job, private)
        # Where the server's own time goes, beside the judge's phases_s (docs/benchmarks.md).
        server_s = result.setdefault("server_phases_s", {})
        mark = time.time()
        try:
            zygote, lost = self.ensure_zygote(fresh=spawn)
        except HarnessError as e:
            return fail(result, "harness", str(e))
        if lost:
            zygote_restarted(result, lost)
        if zygote.hello.get("warm_error"):
            result["notes"].append("the worker's process could not prebuild Triton's driver utilities (%s): "
                                   "each worker builds them itself, slower" % zygote.hello["warm_error"])
        if zygote.hello.get("preimport_error"):
            result["notes"].append("the worker's process could not preload torch's tracing modules (%s): "
                                   "the audit imports them itself, slower" % zygote.hello["preimport_error"])
        judge_log = os.path.join(private, "judge.log")
        judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # The worker's output goes into a pipe this process drains, never a file by name.
        worker_log = LogTail()
        atol, rtol = audit_tolerance(job)
        worker_job = {"device": spec.device, "jit_kernels": result["static"].get("jit_kernels", []),
                      "limits": {}, "atol": atol, "rtol": rtol,
                      "precision": spec.settings.precision or DEFAULT_POLICY}
        try:
            try:
                zygote.fork(rid, worker_job, worker_end, worker_log.write_fd)
            except (HarnessError, OSError) as e:
                # The zygote died between two evaluations (its launcher may not have been reaped
                # yet, so it looked alive): a new one, once, and the result says so.
                if spawn:
                    raise
                zygote, _ = self.ensure_zygote(fresh=True)  # stops the old one first
                zygote_restarted(result, e)
                zygote.fork(rid, worker_job, worker_end, worker_log.write_fd)
        except (HarnessError, OSError) as e:
            judge_end.close()
            worker_end.close()
            worker_log.close()
            return fail(result, "harness", "cannot start the kernel's process: %s" % e)
        worker_end.close()
        worker_log.writer_gone()
        server_s["worker_start"] = time.time() - mark
        mark = time.time()
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the judge
            try:
                os.close(read_fd)
                os.close(worker_log.fd)
                os.setsid()
                self.proto.close()
                zygote.control.close()
                redirect_output(judge_log)
                judge_main(job, write_fd, judge_end)
            finally:
                os._exit(71)
        judge_end.close()
        os.close(write_fd)
        self.send({"event": "started", "id": rid, "pid": pid, "executor": "spawn" if spawn else "fork",
                   "sandbox": self.sandbox.kind})
        final, ended_by = self.watch(rid, job, read_fd, worker_log)
        server_s["judge"] = time.time() - mark
        mark = time.time()
        kill_group(pid)
        status = reap(pid)
        if ended_by or final is None or not final.get("correct"):
            zygote.kill(rid)
        worker = self.await_worker(zygote, rid, worker_log)
        worker_log.drain()
        worker_log.close()
        server_s["teardown"] = time.time() - mark
        if final is not None:
            final["server_phases_s"] = server_s
        log = read_log(judge_log) + worker_log.text()
        if spawn:
            zygote.stop()
            self.zygote = None

        out = ending(job, final, ended_by, status, log)
        if final is not None and out is final and out.get("category") == "crash" \
                and worker_death_explains(worker, out.get("details")):
            # The worker died: say how (the judge only saw its channel close).
            phase = out.get("phase") or result.get("phase")
            out["summary"] = describe_exit(worker["status"], phase)
            out["message"] = "%s\n%s" % (out["summary"], clean_text(log))
            out["details"] = dict(out.get("details") or {}, **exit_details(worker["status"]))
        if worker and worker.get("strays"):
            out["notes"].append("%d process(es) the kernel left behind were killed" % worker["strays"])
            out["flags"].append("stray_processes")
        add_log(out, job, log)
        if out.get("category") not in (None, "syntax", "static_check") and out.get("message"):
            out["log"] = tail_bytes(out["log"] + "\n" + out["message"])
        return out

    def run_judge_alone(self, rid, job, private):
        """A task check: the judge builds and times the reference; no kernel, no worker."""
        judge_log = os.path.join(private, "judge.log")
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read_fd)
                os.setsid()
                self.proto.close()
                if self.zygote:
                    self.zygote.control.close()
                redirect_output(judge_log)
                judge_main(job, write_fd, None)
            finally:
                os._exit(71)
        os.close(write_fd)
        self.send({"event": "started", "id": rid, "pid": pid, "executor": "fork", "sandbox": "none needed"})
        final, ended_by = self.watch(rid, job, read_fd, None)
        kill_group(pid)
        status = reap(pid)
        log = read_log(judge_log)
        out = ending(job, final, ended_by, status, log)
        add_log(out, job, log)
        return out

    def watch(self, rid, job, read_fd, worker_log):
        """Relays the judge's progress until its result; enforces the deadline and cancels;
        drains the worker's log (None: no worker) so that it never blocks on a full pipe."""
        result = job["_result"]
        started = time.time()
        timeline = job.setdefault("_timeline", [])
        deadline = started + job["_wire"].settings.timeout_s
        self.selector.register(read_fd, selectors.EVENT_READ, "judge")
        if worker_log is not None:
            self.selector.register(worker_log.fd, selectors.EVENT_READ, "worker_log")
        data = b""
        final = None
        ended_by = None
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
                    if key.data == "worker_log":
                        if not worker_log.drain():
                            self.selector.unregister(worker_log.fd)
                        continue
                    chunk = os.read(read_fd, 1 << 16)
                    if not chunk:
                        return final, ended_by
                    data += chunk
                    while b"\n" in data:
                        line, data = data.split(b"\n", 1)
                        try:
                            message = json.loads(line)
                        except ValueError:
                            continue
                        if "progress" in message:
                            result["phase"] = message["progress"]
                            timeline.append((time.time() - started, message["progress"]))
                            self.send({"event": "progress", "id": rid, "phase": message["progress"]})
                        elif "result" in message:
                            final = message["result"]
                if ended_by:
                    return final, ended_by
        finally:
            self.selector.unregister(read_fd)
            if worker_log is not None and worker_log.fd in self.selector.get_map():
                self.selector.unregister(worker_log.fd)
            os.close(read_fd)

    def await_worker(self, zygote, rid, worker_log):
        """The zygote's word that the worker and everything it started are gone (its log
        drained meanwhile: a worker blocked on a full pipe would never end)."""
        import select

        deadline = time.time() + WORKER_EXIT_GRACE_S
        killed = False
        while rid not in zygote.exited:
            remaining = deadline - time.time()
            if remaining <= 0:
                if killed:
                    return None
                zygote.kill(rid)
                killed = True
                deadline = time.time() + WORKER_EXIT_GRACE_S
                continue
            ready, _, _ = select.select([zygote.control] + ([worker_log.fd] if worker_log.open else []), [], [],
                                        remaining)
            if worker_log.fd in ready:
                worker_log.drain()
            if zygote.control in ready and zygote.read() is None:
                return None
        return zygote.exited.pop(rid)

    def device_info(self):
        """Runs in a forked child: the server must never initialize CUDA."""
        def query():
            import torch

            info = {"cuda_available": torch.cuda.is_available()}
            info["devices"] = [device_description(i) for i in range(torch.cuda.device_count())] \
                if info["cuda_available"] else []
            info["cuda_version"] = torch.version.cuda
            return info

        return in_child(query, "device query", 120)

    def device_peaks(self, cache_dir):
        """Each CUDA device's measured peaks (peaks.py), cached or measured now, in a forked
        child (the server must never initialize CUDA): what `kforge doctor` shows."""
        def query():
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


def in_child(query, what, timeout_s):
    """`query()`'s JSON-able answer, computed in a forked child (CUDA is initialized there,
    never in the server); {"error": ...} where it raised or the child died."""
    import select

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
    chunks = []
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
        return json.loads(b"".join(chunks) or b"{}") or {"error": describe_exit(status, what, "the " + what)}
    except ValueError:
        return {"error": describe_exit(status, what, "the " + what)}


def zygote_restarted(result, why):
    result["flags"].append("zygote_restarted")
    result["notes"].append("the sandbox's worker-forking process had died since the last evaluation (%s) "
                           "and was started again" % why)


def add_log(out, job, log):
    """The evaluation's log onto its result (the phases the judge reported, then what the
    processes printed); a correct result's phase says it finished."""
    out["log"] = tail_bytes((out.get("log") or "") + evaluation_log(job.get("_timeline", []), log))
    if out.get("correct"):
        out["phase"] = "finished"


def ending(job, final, ended_by, status, log):
    """The result of an evaluation whose judge has ended: its own, or what ended it."""
    result = job["_result"]
    if ended_by == "shutdown":
        sys.exit(0)
    timeout_s = float(job.get("timeout_s", 300))
    phase = result.get("phase") or "start-up"
    if ended_by == "cancelled":
        out = fail(result, "cancelled", "evaluation cancelled")
        out["status"] = "cancelled"
        return out
    if ended_by == "timeout":
        return fail(result, "timeout", "timed out after %gs (during %s)" % (timeout_s, phase),
                    "the evaluation did not finish within %gs; last phase: %s\n%s" % (
                        timeout_s, phase, clean_text(log, 40)))
    if final is not None:
        return final
    if status == -signal.SIGKILL:
        # Nothing of kforge's SIGKILLs a judge it still waits for (a timeout or a cancel ends
        # above), and a kernel cannot reach it: the host's out-of-memory killer does that.
        before = phase in TASK_PHASES or phase.startswith("timing reference")
        return fail(result, "oom", "the judge was killed (SIGKILL) during %s, most likely by the host's "
                    "out-of-memory killer: %s" % (
                        phase, "the task does not fit in host memory (before any kernel ran)" if before
                        else "the evaluation needed more host memory than was free"),
                    clean_text(log), {"phase": phase, "kernel_loaded": not before, "signal": "SIGKILL"})
    return fail(result, "harness", describe_exit(status, result.get("phase"), "the judge"), clean_text(log))


def fail_static(result, category, report, syntax):
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


def worker_death_explains(worker, details):
    """Whether the worker's end explains a `crash` verdict: the judge saw only its channel
    close (`channel_closed` in the verdict's details, judge.WorkerLink) and the worker died
    of a signal or an unusual status. A judge that caught the kernel itself (a forged
    output, a window that never closed) ended first; a worker still alive then is killed by
    the server, and that SIGKILL must not replace the judge's reason."""
    if not worker or worker.get("status") in (None, 0, 70):
        return False
    return bool((details or {}).get("channel_closed"))


def judge_main(job, result_fd, channel):
    """Body of the judge process. Never returns."""
    status = 0
    writer = os.fdopen(result_fd, "w", buffering=1)
    started = time.time()
    result = job["_result"]

    def progress(phase):
        result["phase"] = phase
        try:
            writer.write(json.dumps({"progress": phase}) + "\n")
        except OSError:
            pass

    try:
        from .judge import Evaluation  # a broken import is a `harness` result, not a silent exit

        Evaluation(job, progress, channel).run()
    except KernelFailure as f:
        fail(result, f.category, f.summary, f.message, f.details)
    except TaskFailure as f:
        fail(result, "task", str(f))
    except HarnessError as e:
        fail(result, "harness", str(e))
    except BaseException as e:  # noqa: BLE001 -- a harness bug must still produce a result
        fail(result, "harness", "harness error: %s: %s" % (type(e).__name__, first_line(str(e))),
             clean_text(exception_text(e)))
    result["child_s"] = time.time() - started
    try:
        writer.write(json.dumps({"result": result}, default=str) + "\n")
        writer.flush()
    except BaseException:  # noqa: BLE001
        status = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def scrub_environment(env):
    """The trusted processes' own hygiene (the sandbox builds the kernel's environment from
    an allow-list; this only keeps credentials out of the judge, which runs the task)."""
    for name in list(env):
        if any(word in name.upper() for word in SECRET_WORDS) or sandbox.looks_secret(env[name]):
            del env[name]


def redirect_output(log_path):
    scrub_environment(os.environ)
    sandbox.redirect_stdio(log_path)


class LogTail:
    """A worker's output: the read end of a pipe whose write end the worker has as stdout and
    stderr. Drained as it comes (non-blocking), keeping the last LOG_LIMIT bytes; it is only
    bytes from a pipe, never a file the worker could have swapped for a link."""

    def __init__(self):
        self.fd, self.write_fd = os.pipe()
        os.set_blocking(self.fd, False)
        self.data = bytearray()
        self.open = True

    def writer_gone(self):
        """The write end has been handed over: only the worker holds it now."""
        os.close(self.write_fd)
        self.write_fd = None

    def drain(self):
        """Reads what is there; False once the pipe is closed on the worker's side."""
        while self.open:
            try:
                chunk = os.read(self.fd, 1 << 16)
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

    def text(self):
        return bytes(self.data[-protocol.LOG_LIMIT:]).decode("utf-8", errors="replace")

    def close(self):
        for fd in (self.fd, self.write_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fd = self.write_fd = None


def kill_group(pid, own_group=True):
    try:
        if own_group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def reap(pid):
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def exit_details(status):
    if status is None:
        return {}
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "signal %d" % -status
        return {"signal": name, "signal_number": -status}
    return {"exit_code": status}


def describe_exit(status, phase, who="the kernel's process"):
    where = " during %s" % phase if phase else ""
    if status is None:
        return "%s vanished%s" % (who, where)
    if status < 0:
        name = exit_details(status)["signal"]
        meaning = {"SIGSEGV": "segmentation fault", "SIGKILL": "killed", "SIGABRT": "aborted",
                   "SIGBUS": "bus error", "SIGFPE": "floating-point exception", "SIGILL": "illegal instruction"}
        return "%s died from %s (%s)%s" % (who, name, meaning.get(name, "signal"), where)
    return "%s exited with code %d without a result%s" % (who, status, where)


def read_log(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - protocol.LOG_LIMIT))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def serve(hidden_paths):
    # The protocol gets a private copy of stdout; fd 1 becomes stderr so stray prints from
    # imports can never corrupt the JSON stream.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    scrub_environment(os.environ)
    started = time.time()
    server = Server(proto, hidden_paths)
    if server.sandbox.kind != "none":
        # The zygote imports torch and triton in its sandbox while this process does the
        # same: on a first evaluation the two imports overlap instead of adding up.
        server.start_zygote()
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except BaseException as e:  # noqa: BLE001
        if server.zygote:
            server.zygote.stop()
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
