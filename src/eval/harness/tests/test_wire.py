"""The typed job and result (wire.py): a job that does not match is refused by key, and a
result only takes the fields kforge reads (tests/harness_wire.rs checks the declarations
against kforge's own)."""

from __future__ import annotations

import json

import pytest

from kforge_harness import protocol, wire

from jobs import JOB

def test_a_job_parses_into_its_settings() -> None:
    job = wire.Job.parse(JOB)
    assert (job.device, job.timing, job.baseline_cache_dir) == ("cuda:0", True, None)
    assert (job.settings.trials, job.settings.seed, job.settings.tolerance) == (5, 42, "dtype")
    assert job.settings.atol is None, "an unset atol is left out of the job"
    assert wire.Job.parse(dict(JOB, atol=0.01, rtol=0.02)).settings.rtol == 0.02


@pytest.mark.parametrize("change, named", [
    ({"trials": None}, "missing key 'trials'"),
    ({"kernelbench_rounds": None}, "missing key 'kernelbench_rounds'"),
    ({"trails": 5}, "unknown key 'trails'"),
    ({"seed": "42"}, "key 'seed' is string, EvalSettings.seed wants integer"),
    ({"timing": 1}, "key 'timing' is integer, Job.timing wants boolean"),
    ({"baseline_cache_dir": 3}, "key 'baseline_cache_dir' is integer, Job.baseline_cache_dir wants string or null"),
])
def test_a_job_that_does_not_match_is_refused_by_key(change: dict[str, object], named: str) -> None:
    job = {k: v for k, v in dict(JOB, **change).items() if v is not None or k == "baseline_cache_dir"}
    with pytest.raises(wire.WireError, match=named):
        wire.Job.parse(job)


def test_a_whole_number_reads_as_a_number() -> None:
    assert wire.Job.parse(dict(JOB, timeout_s=300)).settings.timeout_s == 300


def test_the_result_skeleton_only_has_declared_fields_and_refuses_others() -> None:
    result = protocol.new_result({"id": "e1", "device": "cpu"})
    assert set(result) <= wire.RESULT_FIELDS
    result["timing"] = {"score": 2.0}
    result.setdefault("phases_s", {})["load"] = 0.5
    protocol.fail(result, "mismatch", "trial 1: wrong")
    assert json.loads(json.dumps(result))["category"] == "mismatch"
    with pytest.raises(KeyError, match="'timming' is not a field"):
        result["timming"] = {}
    with pytest.raises(KeyError, match="'phase_s' is not a field"):
        result.setdefault("phase_s", {})
    with pytest.raises(KeyError, match="'score' is not a field"):
        result.update(score=2.0)
