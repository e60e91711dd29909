"""Judges started ahead (ahead.py, judgeproc.Handover): which requests a spare serves, which
verdicts leave one, what the server reads of a spare before a request takes it, and how the
request's kernel and result are handed over and taken into the judge's own."""

from __future__ import annotations

import io
import json
import selectors
import shutil
import socket
import threading
import time
from typing import Any

import pytest

from kforge_harness import ahead, judgeproc, protocol, serverjob
from kforge_harness.judge.context import PhaseClock

from jobs import JOB, job


def spare(**fields: Any) -> ahead.Spare:
    """A Spare whose processes are stand-ins: what is tested here reads only its records."""
    raw = dict(JOB, device="cpu", start_ahead=True)
    record = serverjob.ServerJob("ahead-1", raw, job(device="cpu", start_ahead=True),
                                 protocol.new_result(dict(raw, id=None)), task_source="class Model: ...")
    stand_in: Any = None
    return ahead.Spare(record, ahead.alike_key(raw, "class Model: ..."), stand_in, stand_in, stand_in, stand_in,
                       stand_in, stand_in, **fields)


def test_a_spare_serves_the_same_job_whatever_its_kernel_task_file_or_profile() -> None:
    key = ahead.alike_key(JOB, "class Model: ...")
    assert ahead.alike_key(dict(JOB, kernel_path="/tmp/other.py"), "class Model: ...") == key
    # On the CPU kforge writes each evaluation's task at the interpreter's sizes to a new file.
    assert ahead.alike_key(dict(JOB, task_path="/tmp/kforge-interpreter-sizes-x/task.py"), "class Model: ...") == key
    assert ahead.alike_key(dict(JOB, profile=True), "class Model: ...") == key


def test_a_spare_serves_no_job_that_differs_in_its_task_settings_or_device() -> None:
    key = ahead.alike_key(JOB, "class Model: ...")
    assert ahead.alike_key(JOB, "class Model: ...  # edited") != key
    for change in ({"seed": 43}, {"trials": 3}, {"device": "cuda:1"}, {"precision": "tf32"},
                   {"timing": False}, {"start_ahead": True}):
        assert ahead.alike_key(dict(JOB, **change), "class Model: ...") != key, change


def test_only_a_job_that_asks_leaves_a_spare_and_not_after_a_broken_task() -> None:
    asked = job(start_ahead=True)
    assert ahead.wanted(asked, {"category": None, "correct": True})
    assert ahead.wanted(asked, {"category": "mismatch"})
    assert ahead.wanted(asked, {"category": "crash"})
    assert ahead.wanted(job(start_ahead=True, reference_only=True), {"category": None})  # a session's check
    assert not ahead.wanted(job(start_ahead=False), {"category": None})
    assert not ahead.wanted(job(start_ahead=True, executor="spawn"), {"category": None})
    for category in ("task", "harness"):
        assert not ahead.wanted(asked, {"category": category}), category


def test_after_a_task_check_the_spare_is_for_the_candidate_job_that_follows_it() -> None:
    check = dict(JOB, reference_only=True, kernel_path=JOB["task_path"], kernelbench_protocol=True,
                 kernelbench_rounds=3)
    follows = ahead.candidate_job(check)
    assert follows["reference_only"] is False and follows["kernelbench_protocol"] is False
    assert ahead.alike_key(follows, "class Model: ...") == ahead.alike_key(JOB, "class Model: ...")
    assert ahead.candidate_job(JOB) == JOB  # a candidate's: the same job


def test_the_server_keeps_a_spares_progress_answers_its_questions_and_notes_it_ready() -> None:
    s = spare()
    asked: list[Any] = []
    lines = [{"progress": "loading task"}, {"ask": "peaks"}, {"ready": True}]
    chunk = b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    # A line cut in two by the pipe: kept until its end arrives.
    assert s.take(chunk[:10], asked.append)
    assert s.job.timeline == [] and not s.ready_at
    assert s.take(chunk[10:] + b'{"progress": "lend', asked.append)
    assert [phase for _, phase in s.job.timeline] == ["loading task"]
    assert asked == [{"ask": "peaks"}] and s.ready_at
    assert s.data == b'{"progress": "lend'


def test_a_spare_that_ends_or_sends_a_result_before_its_kernel_is_lost() -> None:
    assert not spare().take(b"", lambda message: None)
    failed = json.dumps({"result": {"category": "task"}}).encode() + b"\n"
    assert not spare().take(failed, lambda message: None)


def test_the_seconds_ahead_are_those_before_the_request_and_stop_at_ready() -> None:
    s = spare(started=100.0)
    assert s.ahead_s(now=103.0) == 3.0  # still starting when the request came
    s.ready_at = 101.5
    assert s.ahead_s(now=110.0) == 1.5  # waited idle after that: none of its work


def test_the_handover_carries_the_requests_result_with_the_spares_start_notes_after_its_own() -> None:
    s = spare()
    s.job.result["notes"].append("the worker's process could not prepare Triton")
    result = protocol.new_result({"id": "eval-9", "device": "cpu"})
    result["notes"].append("NO SANDBOX")
    result["static"] = {"errors": [], "warnings": [], "jit_kernels": ["relu_kernel"], "launches": []}
    handed = s.handover("eval-9", "class ModelNew: ...", result)
    assert handed["id"] == "eval-9" and handed["kernel_source"] == "class ModelNew: ..."
    assert handed["result"]["notes"] == ["NO SANDBOX", "the worker's process could not prepare Triton"]
    assert handed["result"]["static"]["jit_kernels"] == ["relu_kernel"]


def test_the_judge_takes_the_requests_id_kernel_report_and_notes_before_its_own() -> None:
    job_fields: dict[str, Any] = {"id": None, "kernel_source": "", "task_file": "/tmp/task.py"}
    own = protocol.new_result({"id": None, "device": "cpu"})
    own["notes"].append("timed windows are not gated")
    own["precision"] = {"kernel_math": []}
    server = protocol.new_result({"id": "eval-9", "device": "cpu"})
    server["notes"].append("NO SANDBOX")
    server["flags"].append("zygote_restarted")
    server["static"] = {"errors": [], "warnings": [{"rule": "torch_op"}], "jit_kernels": ["k"], "launches": []}
    server["precision"] = {"kernel_math": [{"category": "tf32", "text": "allow_tf32=True"}]}
    judgeproc.adopt(job_fields, own, {"id": "eval-9", "kernel_source": "class ModelNew: ...",
                                      "result": server})
    assert job_fields["id"] == "eval-9" and job_fields["kernel_source"] == "class ModelNew: ..."
    assert own["id"] == "eval-9" and own["static"]["jit_kernels"] == ["k"]
    assert own["precision"] == server["precision"]
    assert own["notes"] == ["NO SANDBOX", "timed windows are not gated"]
    assert own["flags"] == ["zygote_restarted"]


class FakeRun:
    """What Handover.wait touches of a judge's Run."""

    def __init__(self) -> None:
        self.job: dict[str, Any] = {"id": None, "kernel_source": ""}
        self.result = protocol.new_result({"id": None, "device": "cpu"})
        self.clock = PhaseClock(self.result)


def test_a_judge_started_ahead_says_it_is_ready_then_takes_the_kernel_it_is_handed() -> None:
    judge_end, server_end = socket.socketpair()
    run = FakeRun()
    handover = judgeproc.Handover(judgeproc.ServerLink(judge_end))
    waiting = threading.Thread(target=handover.wait, args=(run,))
    waiting.start()
    reader = server_end.makefile("rb")
    assert json.loads(reader.readline()) == {"ready": True}
    handed = {"id": "eval-3", "kernel_source": "class ModelNew: ...", "result": protocol.new_result({"id": "eval-3"})}
    handed_at = time.time()
    server_end.sendall(json.dumps(handed).encode() + b"\n")
    waiting.join(10)
    assert not waiting.is_alive()
    assert run.job["kernel_source"] == "class ModelNew: ..." and run.result["id"] == "eval-3"
    assert run.clock.last >= handed_at, "the wait is not counted in the next phase"
    assert run.clock.phases == {}


def test_a_handover_without_a_kernel_is_a_harness_error() -> None:
    judge_end, server_end = socket.socketpair()
    handover = judgeproc.Handover(judgeproc.ServerLink(judge_end))
    server_end.sendall(b'{"id": "eval-3"}\n')
    try:
        stand_in: Any = FakeRun()
        handover.wait(stand_in)
    except protocol.HarnessError as e:
        assert "no kernel" in str(e)
    else:
        raise AssertionError("a handover without a kernel was taken")


class AnsweringKeeper:
    """The server's keeper as a judge's questions meet it: every question answered."""

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"peaks": {"asked": message["ask"]}}


def test_a_spare_still_starting_is_handed_its_kernel_only_once_it_says_it_is_ready(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A spare adopted while it still starts may be asking the server something (the device's
    peaks, the launch-path floor): the kernel must not arrive as that question's answer."""
    from kforge_harness import sandbox, server

    monkeypatch.setattr(sandbox, "detect", lambda: sandbox.SandboxInfo("none", "a test's"))
    # select(2) takes any stdin a test runner gives (epoll refuses /dev/null).
    monkeypatch.setattr(selectors, "DefaultSelector", selectors.SelectSelector)
    serving = server.Server(io.StringIO(), [])
    serving.selector.unregister(0)  # kforge's requests: none in this test
    judge_end, server_end = socket.socketpair()
    raw = dict(JOB, device="cpu")
    record = serverjob.ServerJob("eval-1", raw, job(device="cpu", timeout_s=20.0),
                                 protocol.new_result(dict(raw, id="eval-1")))
    seen: list[Any] = []

    def starting_judge() -> None:
        link = judgeproc.ServerLink(judge_end)
        seen.append(link.ask("peaks"))
        run = FakeRun()
        stand_in: Any = run
        judgeproc.Handover(link).wait(stand_in)
        seen.append(run.job["kernel_source"])
        link.send({"result": {"status": "correct"}})
        judge_end.close()  # the judge's end, as its process's exit closes it

    judge = threading.Thread(target=starting_judge)
    judge.start()
    handover = json.dumps({"id": "eval-1", "kernel_source": "class ModelNew: ...",
                           "result": protocol.new_result({"id": "eval-1"})}).encode() + b"\n"
    stand_in: Any = AnsweringKeeper()
    try:
        final, ended_by = serving.watch(record, server_end, stand_in, [], b"", handover)
    finally:
        judge.join(10)
        shutil.rmtree(serving.private_root, ignore_errors=True)
        shutil.rmtree(serving.scratch_root, ignore_errors=True)
    assert seen == [{"peaks": {"asked": "peaks"}}, "class ModelNew: ..."]
    assert final == {"status": "correct"} and ended_by is None
