"""The rules that turn the judge's measurements into a score."""

import random

import pytest

from kforge_harness import timing

JOB = {"host_slack_ms": 0.05, "host_time_ratio": 1.1, "timing_budget_s": 1.0, "timing_trials": 100,
       "min_timing_trials": 10}


def test_stats_median_of_even_and_odd():
    assert timing.stats([3.0, 1.0, 2.0])["median_ms"] == 2.0
    assert timing.stats([4.0, 1.0, 2.0, 3.0])["median_ms"] == 2.5


def test_run_count_is_bounded_both_ways():
    assert timing.run_count(0.001, JOB) == 100
    assert timing.run_count(1000.0, JOB) == 10
    assert timing.run_count(20.0, JOB) == 50


def test_verification_runs_always_include_the_last_and_about_nine():
    rng = random.Random(1)
    chosen = timing.verification_runs(100, rng)
    assert 99 in chosen and 8 <= len(chosen) <= 10
    assert all(0 <= i < 100 for i in chosen)
    assert timing.verification_runs(1, rng) == {0}
    assert len(timing.verification_runs(10, rng)) >= 3


def test_a_cheater_on_half_the_runs_is_almost_always_checked():
    # Runs 0..49 cheat: how often does a check land on one of them?
    rng = random.Random(7)
    caught = sum(bool(timing.verification_runs(100, rng) & set(range(50))) for _ in range(2000))
    assert caught / 2000 > 0.99


def test_host_bound_subtracts_the_calibrated_overhead_and_never_goes_negative():
    assert timing.host_bound([1.0, 0.2], 0.3) == [0.7, 0.0]


def test_calibration_takes_the_floor_and_the_noise_above_it():
    walls = [0.30] * 50 + [0.32] * 30 + [1.5] * 20  # a long right tail of scheduler wake-ups
    cal = timing.calibration(walls)
    assert cal["floor_ms"] == pytest.approx(0.30) and cal["spread_ms"] == pytest.approx(0.0)
    assert cal["runs"] == 100


CAL = {"overhead_ms": 0.33, "floor_ms": 0.30, "spread_ms": 0.01, "runs": 35}


def test_an_honest_kernel_is_not_contradicted():
    events = [0.015] * 100
    walls = [0.30 + 0.015 + 0.02 + (0.5 if i % 7 == 0 else 0.0) for i in range(100)]  # launch latency, tail
    disagrees, allowed, bound, event = timing.disagreement(events, walls, CAL, JOB)
    assert not disagrees and bound == pytest.approx(0.035) and event == pytest.approx(0.015)


def test_a_patched_timer_is_contradicted():
    # Reports 1 us for 20 passes that really take 0.29 ms (seen on an H100).
    events = [0.001] * 100
    walls = [0.30 + 0.29 + (0.4 if i % 5 == 0 else 0.0) for i in range(100)]
    disagrees, allowed, bound, event = timing.disagreement(events, walls, CAL, JOB)
    assert disagrees and allowed < 0.1 and bound == pytest.approx(0.29)


def test_noise_and_the_ratio_widen_the_allowance():
    noisy = dict(CAL, spread_ms=0.05)
    assert not timing.disagreement([0.1] * 10, [0.30 + 0.25] * 10, noisy, JOB)[0]
    assert timing.disagreement([0.1] * 10, [0.30 + 0.25] * 10, CAL, JOB)[0]
    assert not timing.disagreement([10.0] * 10, [0.30 + 10.9] * 10, CAL, JOB)[0], "10% of a long kernel"


def test_score_is_reference_over_kernel():
    assert timing.score({"median_ms": 2.0}, {"median_ms": 0.5}) == 4.0
    assert timing.score({"median_ms": 2.0}, {"median_ms": 0.0}) is None


def test_baseline_cache_round_trip_and_rejects_garbage(tmp_path):
    timing.write_baseline(str(tmp_path), "k", {"median_ms": 1.5})
    assert timing.read_baseline(str(tmp_path), "k") == {"median_ms": 1.5}
    (tmp_path / "bad.json").write_text('{"median_ms": -1}')
    assert timing.read_baseline(str(tmp_path), "bad") is None
    assert timing.read_baseline(str(tmp_path), "missing") is None


def test_cached_reference_timings_are_per_physical_gpu():
    job = {"warmup": 10, "timing_trials": 100, "min_timing_trials": 10, "timing_budget_s": 1.0,
           "flush_l2": True}
    versions = {"torch": "2.11.0"}
    gpu0 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa"}
    gpu1 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bbbb"}
    key = lambda device, task="t": timing.baseline_key(task, device, versions, "sig", job)
    # Two GPUs of one model never share a baseline: a score compares kernel and reference
    # timed on the same device.
    assert key(gpu0) != key(gpu1)
    assert key(gpu0) == key(dict(gpu0))
    assert key(gpu0) != key(gpu0, task="u")
