"""The server's record of an evaluation (serverjob.ServerJob): what the judge is sent and
what the key readers see, and how a judge that ended without a result is told apart before
and after the kernel was loaded."""

from __future__ import annotations

import signal

from kforge_harness import protocol, serverjob

from jobs import JOB, job


def record() -> serverjob.ServerJob:
    raw = dict(JOB, device="cpu")
    return serverjob.ServerJob("e7", raw, job(device="cpu"), protocol.new_result(dict(raw, id="e7")),
                               task_source="class Model: ...", kernel_source="class ModelNew: ...")


def test_the_judge_is_sent_what_kforge_sent_and_both_sources() -> None:
    j = record()
    request = j.judge_request(["KFORGE_DIAG_NO_GATE"])
    assert request["job"] is j.raw and request["id"] == "e7"
    assert request["task_source"] == "class Model: ..." and request["kernel_source"] == "class ModelNew: ..."
    assert request["result"] == dict(j.result) and request["diagnostics"] == ["KFORGE_DIAG_NO_GATE"]
    fields = j.fields()
    assert fields["timing_trials"] == JOB["timing_trials"] and fields["id"] == "e7"
    assert not any(key.startswith("_") for key in fields), "no private keys beside kforge's"


def test_a_judge_killed_before_the_kernel_loaded_is_the_task_not_fitting() -> None:
    j = record()
    j.timeline.append((0.1, "loading task"))
    out = serverjob.ending(j, None, None, -signal.SIGKILL, "")
    assert out["category"] == "oom" and out["details"]["kernel_loaded"] is False
    assert "the task does not fit in host memory" in out["summary"]


def test_a_judge_killed_after_the_kernel_loaded_is_the_evaluation_not_fitting() -> None:
    j = record()
    j.timeline += [(0.1, "loading task"), (0.5, serverjob.KERNEL_LOADING)]
    out = serverjob.ending(j, None, None, -signal.SIGKILL, "")
    assert out["category"] == "oom" and out["details"]["kernel_loaded"] is True


def test_a_malformed_result_from_the_judge_is_a_harness_failure() -> None:
    j = record()
    out = serverjob.checked({"status": "correct", "no_such_field": 1}, j.result, {"enforced": True})
    assert out["category"] == "harness" and "malformed result" in out["summary"]
    good = serverjob.checked(dict(j.result, notes=None), j.result, {"enforced": True, "kind": "test"})
    assert good["sandbox"] == {"enforced": True, "kind": "test"} and good["notes"] == []
