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
  job, a task check, the peaks, Nsight Compute) kills it first (`Ahead.discard`), and a
  request that arrives while it still starts waits for it.

Only a job that asks for it (`start_ahead`: kforge sets it for a session's candidates, and
the task check before its first, where `[eval] start_ahead` is on) leaves a spare behind;
`kforge eval` never does.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import selectors
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from . import cachekeeper, wire
from .forks import Forks, LogTail, Zygote
from .protocol import HarnessError
from .serverjob import MAX_JUDGE_LINE, ServerJob, answer, judge_messages
from .wire import ResultRecord

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


class Ahead:
    """The server's spare (at most one), from its start to the request that takes it or its
    end. Its channel and logs are read in the server's idle loop (`selector`, the server's);
    `forks` starts its processes; `keeper(job)` answers its judge's questions and
    `job_result(raw)` is the server's result skeleton of a job."""

    def __init__(self, forks: Forks, selector: selectors.BaseSelector,
                 keeper: Callable[[ServerJob], cachekeeper.Keeper],
                 job_result: Callable[[Mapping[str, Any]], ResultRecord]) -> None:
        self.forks = forks
        self.selector = selector
        self.keeper = keeper
        self.job_result = job_result
        self.spare: Optional[Spare] = None
        self.started = 0

    def start(self, previous: ServerJob, outcome: Mapping[str, Any]) -> None:
        """After `previous` ended with `outcome` (and no request waits): the judge and worker
        of the next candidate like it, where it asks for them (wanted). Its task is the source
        `previous`'s judge was given (a task file may be a copy gone by now)."""
        if self.spare is not None or not wanted(previous.spec, outcome):
            return  # one started before still waits (the last request never ran a judge)
        raw = candidate_job(previous.raw)
        self.started += 1
        job = ServerJob("ahead-%d" % self.started, raw, wire.Job.parse(raw), self.job_result(raw),
                        task_source=previous.task_source)
        try:
            zygote, judge_end, worker_log, worker_pid = self.forks.start_worker(job)
        except (HarnessError, OSError):
            return  # the request's own start meets it again and says so
        try:
            judges, channel, judge_log = self.forks.start_judge(job, judge_end, worker_pid, ahead=True)
        except (HarnessError, OSError):
            zygote.kill(job.rid)
            zygote.await_exit(job.rid, [worker_log], 0)
            worker_log.close()
            return
        finally:
            judge_end.close()
        self.spare = Spare(job, alike_key(raw, job.task_source), self.keeper(job), judges, channel, judge_log,
                           zygote, worker_log)
        self.selector.register(channel.fileno(), selectors.EVENT_READ, "spare")
        for log in (judge_log, worker_log):
            self.selector.register(log.reader(), selectors.EVENT_READ, log)

    def readable(self, data: object) -> None:
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
            self.discard()

    def take(self, raw: Mapping[str, Any], task_source: str) -> Optional[Spare]:
        """The spare started for a job like `raw` whose task reads `task_source`, off the idle
        loop and alive as far as its channel says; None where there is none such."""
        if self.spare is not None and select.select([self.spare.channel], [], [], 0)[0]:
            self.readable("spare")  # what it said since the last look (it may be gone)
        spare = self.spare
        if spare is None or spare.key != alike_key(raw, task_source):
            return None
        self.unwatch(spare)
        self.spare = None
        return spare

    def unwatch(self, spare: Spare) -> None:
        registered = self.selector.get_map()
        for fd in (spare.channel.fileno(), spare.judge_log.fd, spare.worker_log.fd):
            if fd is not None and fd in registered:
                self.selector.unregister(fd)

    def discard(self) -> None:
        """The spare's processes killed and reaped (and everything they started)."""
        spare, self.spare = self.spare, None
        if spare is None:
            return
        self.unwatch(spare)
        name = spare.job.rid  # the processes' name in both zygotes
        spare.judges.kill(name)
        spare.zygote.kill(name)
        spare.judges.await_exit(name, [spare.judge_log, spare.worker_log], 0)
        spare.zygote.await_exit(name, [spare.worker_log], 0)
        spare.channel.close()
        spare.judge_log.close()
        spare.worker_log.close()
