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


def test_disagreement_allows_latency_noise_and_a_ratio_of_the_event_time():
    # An honest kernel: host-bounded time a little above the event time.
    disagrees, allowed = timing.disagreement(1.0, 1.12, 0.0, JOB)
    assert not disagrees and allowed == pytest.approx(0.15)
    # A patched timer: reports 1 us for a 2 ms kernel.
    disagrees, allowed = timing.disagreement(0.001, 2.0, 0.001, JOB)
    assert disagrees and allowed < 0.06
    # Noise in the calibration widens the allowance.
    assert not timing.disagreement(0.1, 0.25, 0.05, JOB)[0]


def test_score_is_reference_over_kernel():
    assert timing.score({"median_ms": 2.0}, {"median_ms": 0.5}) == 4.0
    assert timing.score({"median_ms": 2.0}, {"median_ms": 0.0}) is None


def test_baseline_cache_round_trip_and_rejects_garbage(tmp_path):
    timing.write_baseline(str(tmp_path), "k", {"median_ms": 1.5})
    assert timing.read_baseline(str(tmp_path), "k") == {"median_ms": 1.5}
    (tmp_path / "bad.json").write_text('{"median_ms": -1}')
    assert timing.read_baseline(str(tmp_path), "bad") is None
    assert timing.read_baseline(str(tmp_path), "missing") is None
