"""The server's record of one evaluation (`ServerJob`), and how an evaluation whose judge
has ended becomes its result (`ending`, `add_log`, `checked`)."""

from __future__ import annotations

import json
import signal
import socket
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from . import wire
from .errors import clean_text, evaluation_log, first_line, tail_bytes
from .protocol import fail
from .wire import ResultRecord

MAX_JUDGE_LINE = 64 << 20  # bytes of one line from a judge (its result, with its trials)

# The judge's progress line when it hands the kernel to its process (judge/kernel.py): the
# phases before it run harness and task code only.
KERNEL_LOADING = "loading kernel"


@dataclass
class ServerJob:
    """One evaluation as the server holds it: what kforge sent (`raw`, and `spec` parsed
    from it), its id, both sources once read, the result so far and the judge's progress
    (`timeline`: seconds since the judge started, phase)."""

    rid: Any
    raw: dict[str, Any]
    spec: wire.Job
    result: ResultRecord
    task_source: str = ""
    kernel_source: str = ""
    timeline: list[tuple[float, str]] = field(default_factory=list)

    def fields(self) -> dict[str, Any]:
        """The job as the modules that read it by key see it (cachekeeper's keys,
        compare.audit_tolerance, ncu): what kforge sent, with its id and both sources."""
        return dict(self.raw, id=self.rid, task_source=self.task_source, kernel_source=self.kernel_source)

    def judge_request(self, diagnostics: list[str], ahead: bool = False) -> dict[str, Any]:
        """The first line the judge's process reads (judgeproc.py). `ahead`: a judge started
        before its request (ahead.py): no id, no kernel, and no notes or flags yet (the
        request's come with its kernel)."""
        if ahead:
            return {"job": self.raw, "ahead": True, "task_source": self.task_source,
                    "result": dict(self.result, notes=[], flags=[]), "diagnostics": diagnostics}
        return {"job": self.raw, "id": self.rid, "task_source": self.task_source,
                "kernel_source": self.kernel_source, "result": dict(self.result), "diagnostics": diagnostics}

    def kernel_loaded(self) -> bool:
        """Whether the judge had begun loading the kernel into its process (its progress said
        so): before that, nothing the kernel wrote had run."""
        return any(phase == KERNEL_LOADING for _, phase in self.timeline)


def judge_messages(data: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """The JSON objects on the complete lines of `data` (what a judge sent on its channel;
    any other line is skipped), and what follows the last line."""
    messages = []
    while b"\n" in data:
        line, data = data.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            messages.append(message)
    return messages, data


def add_log(out: Any, job: ServerJob, log: str) -> None:
    """The evaluation's log onto its result (the phases the judge reported, then what the
    processes printed); a correct result's phase says it finished."""
    out["log"] = tail_bytes((out.get("log") or "") + evaluation_log(job.timeline, log))
    if out.get("correct"):
        out["phase"] = "finished"


def ending(job: ServerJob, final: Any, ended_by: Optional[str], status: Optional[int], log: str) -> Any:
    """The result of an evaluation whose judge has ended: its own, or what ended it."""
    from .forks import describe_exit

    result = job.result
    if ended_by == "shutdown":
        sys.exit(0)
    timeout_s = float(job.raw.get("timeout_s", 300))
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
    loaded = job.kernel_loaded()
    if status == -signal.SIGKILL:
        # Nothing of kforge's SIGKILLs a judge it still waits for (a timeout or a cancel ends
        # above), and a kernel cannot reach it: the host's out-of-memory killer does that.
        return fail(result, "oom", "the judge was killed (SIGKILL) during %s, most likely by the host's "
                    "out-of-memory killer: %s" % (
                        phase, "the evaluation needed more host memory than was free" if loaded
                        else "the task does not fit in host memory (before any kernel ran)"),
                    clean_text(log), {"phase": phase, "kernel_loaded": loaded, "signal": "SIGKILL"})
    return fail(result, "harness", describe_exit(status, result.get("phase"), "the judge"), clean_text(log),
                {"kernel_loaded": loaded})


def checked(final: Any, result: ResultRecord, sandbox: dict[str, Any]) -> Any:
    """The judge's result as the server passes it on: a result record (only the fields
    kforge reads; anything else is a `harness` failure), with what only the server knows
    (the sandbox, the versions) set again by the server: the judge runs the task's code,
    which could have written anything into it."""
    try:
        if not isinstance(final, dict):
            raise KeyError("the judge's result is not an object")
        out = wire.ResultRecord(final)
    except KeyError as e:
        return fail(result, "harness", "the judge sent a malformed result: %s" % first_line(str(e)),
                    details={"kernel_loaded": True})
    out["sandbox"] = sandbox
    out["versions"] = result["versions"]
    for key in ("notes", "flags"):
        if not isinstance(out.get(key), list):
            out[key] = []
    return out


def send_line(channel: socket.socket, line: bytes) -> None:
    """A line to a judge; one that is gone already says how through its channel's end."""
    try:
        channel.sendall(line)
    except OSError:
        pass


def answer(channel: socket.socket, reply: Mapping[str, Any]) -> None:
    """The server's answer to a judge's request (judgeproc.ServerLink.ask)."""
    send_line(channel, json.dumps({"answer": reply}, default=str).encode() + b"\n")
