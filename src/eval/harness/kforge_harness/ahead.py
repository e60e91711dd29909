"""Judges started ahead (issue 38): while the model writes a session's next candidate, the
server starts that candidate's judge and worker and runs every phase before the kernel's:
both sandboxed processes forked, their CUDA contexts drawn, the task loaded, its reference
built and run, the reference's timing process started, the buffers lent. The request that
matches finds them waiting and hands over its kernel (judgeproc.Handover); the kernel's
phases (null-window calibration, import, trials, audit, timing) run as they always do.

What a spare may not change:
- nothing crosses from one evaluation to another: a spare's processes are forked after the
  previous evaluation's are gone, by the same zygotes, and serve one evaluation, as a judge
  started with its request does;
- a spare is used only by a request for the same job but for the kernel (the same settings,
  device and seed) whose task file reads the same now (`alike_key`);
- nothing else runs on the device beside it: any request that would use the device (another
  job, a task check, the peaks, Nsight Compute) kills it first (`Server.discard_spare`), and a
  request that arrives while it still starts waits for it.

Only a job that asks for it (`start_ahead`: kforge sets it for a session's candidates, and
the task check before its first, where `[eval] start_ahead` is on) leaves a spare behind;
`kforge eval` never does.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from . import cachekeeper, wire
from .serverjob import MAX_JUDGE_LINE, ServerJob, judge_messages

if TYPE_CHECKING:
    from .server import LogTail, Zygote

# What may differ between a session's candidates in the job kforge sends: the kernel's file,
# the task's file (the judge gets the task's source, compared instead: on the CPU kforge
# writes each evaluation a copy at the interpreter's sizes), and whether Nsight Compute
# profiles the kernel (the server does, after the judge).
PER_CANDIDATE = ("kernel_path", "task_path", "profile")
# Verdicts after which no spare is started: the task itself failed, or the harness did (it
# would fail the spare the same way).
NO_SPARE_AFTER = ("task", "harness")


def alike_key(raw: Mapping[str, Any], task_source: str) -> str:
    """What a request must share with the job a spare was started for: the job as kforge
    sent it but for what may differ (PER_CANDIDATE), and the task's source."""
    fields = {k: v for k, v in raw.items() if k not in PER_CANDIDATE}
    material = json.dumps([fields, task_source], sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()


def wanted(spec: wire.Job, outcome: Mapping[str, Any]) -> bool:
    """Whether the evaluation of `spec`, which ended with `outcome`, leaves a spare: a job that
    asks for one (a candidate, or the task check before the first), in a zygote that outlives
    it (`executor = "fork"`), after a verdict that does not say the task or the harness failed."""
    return (spec.settings.start_ahead and spec.settings.executor != "spawn"
            and outcome.get("category") not in NO_SPARE_AFTER)


def candidate_job(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The job of the candidate that follows `raw`: itself, or for a task check (a session's,
    before its first candidate) the same job evaluating a kernel."""
    return dict(raw, reference_only=False, kernelbench_protocol=False, kernelbench_rounds=1)


@dataclass
class Spare:
    """A judge and its worker started ahead for the next job like `job`, and what the server
    reads of them until a request takes them. `job` is the server's provisional record (its
    rid names the processes in both zygotes; its result keeps the notes of their start);
    `keeper` answers the judge's questions meanwhile."""

    job: ServerJob
    key: str
    keeper: cachekeeper.Keeper
    judges: Zygote
    channel: socket.socket
    judge_log: LogTail
    zygote: Zygote
    worker_log: LogTail
    started: float = field(default_factory=time.time)
    ready_at: Optional[float] = None  # when the judge said it waits for its kernel
    data: bytes = b""  # what was read of the judge's channel past its last full line

    @property
    def pid(self) -> str:
        return str(self.job.rid)

    def take(self, chunk: bytes, answer: Callable[[dict[str, Any]], None]) -> bool:
        """What the judge sent (`chunk`, empty when its channel closed): progress goes into
        the spare's timeline, questions to `answer`, its readiness is noted. False when the
        spare is lost: its channel closed or flooded, or it sent a result before any kernel (a
        task or harness failure, which the request's own evaluation will meet and report)."""
        if not chunk:
            return False
        messages, self.data = judge_messages(self.data + chunk)
        if len(self.data) > MAX_JUDGE_LINE:
            return False  # a judge that floods its channel
        for message in messages:
            if "progress" in message:
                self.job.timeline.append((time.time() - self.started, str(message["progress"])[:200]))
            elif "ask" in message:
                answer(message)
            elif message.get("ready"):
                self.ready_at = time.time()
            elif "result" in message:
                return False
        return True

    def ahead_s(self, now: float) -> float:
        """The seconds of its start that ran before the request that takes it (`now`)."""
        return min(self.ready_at or now, now) - self.started

    def handover(self, rid: Any, kernel_source: str, result: dict[str, Any]) -> dict[str, Any]:
        """The line that hands the request's kernel to the judge (judgeproc.Handover), with the
        request's result so far: the notes and flags of the spare's start after the request's."""
        result["notes"].extend(self.job.result["notes"])
        result["flags"].extend(self.job.result["flags"])
        return {"id": rid, "kernel_source": kernel_source, "result": dict(result)}
