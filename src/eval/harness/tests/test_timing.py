"""The rules that turn the judge's measurements into a score."""

from __future__ import annotations

from pathlib import Path
import random

import pytest

from kforge_harness import timing

JOB = {"timing_budget_s": 1.0, "timing_trials": 100, "min_timing_trials": 10}


def test_stats_median_of_even_and_odd() -> None:
    assert timing.stats([3.0, 1.0, 2.0])["median_ms"] == 2.0
    assert timing.stats([4.0, 1.0, 2.0, 3.0])["median_ms"] == 2.5


def test_run_count_is_bounded_both_ways() -> None:
    assert timing.run_count(0.001, JOB) == 100
    assert timing.run_count(1000.0, JOB) == 10
    assert timing.run_count(20.0, JOB) == 50


def test_median_interval_brackets_the_median_by_order_statistics() -> None:
    values = [float(v) for v in range(100)]
    lo, hi = timing.median_interval(values)
    assert 38 <= lo < 49.5 < hi <= 61
    assert timing.median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0), "too few runs: the whole range"


def test_median_interval_covers_the_true_median_about_95_percent_of_the_time() -> None:
    rng = random.Random(3)
    covered = 0
    for _ in range(2000):
        sample = [rng.expovariate(1.0) for _ in range(40)]  # skewed, like run times
        lo, hi = timing.median_interval(sample)
        covered += lo <= 0.6931 <= hi
    assert 0.93 <= covered / 2000 <= 0.99


def test_precision_is_half_the_interval_over_the_median() -> None:
    tight = [1.0 + 0.001 * (i % 7) for i in range(50)]
    assert timing.relative_width(tight) < 0.01 and timing.precise_enough(tight, 0.01)
    loose = [1.0 + 0.2 * (i % 7) for i in range(50)]
    assert not timing.precise_enough(loose, 0.01)
    assert not timing.precise_enough(tight[:5], 0.01), "never on fewer than 6 runs"
    assert timing.relative_width([-1.0] * 10) == float("inf")
    few_us = [0.003 + 0.0001 * (i % 3) for i in range(60)]  # +-0.1 us on 3 us: 3%, as fine as events resolve
    assert timing.relative_width(few_us) == 0.0 and timing.precise_enough(few_us, 0.01)


def test_calibration_takes_the_floor_the_noise_above_it_and_the_tail_floor() -> None:
    windows = [0.30] * 50 + [0.32] * 30 + [1.5] * 20
    runs = [(w, 0.25 if i < 90 else 0.1, 0.05) for i, w in enumerate(windows)]
    cal = timing.calibration(runs, fill_ms=0.01)
    assert cal["floor_ms"] == pytest.approx(0.29) and cal["spread_ms"] == pytest.approx(0.0)
    assert cal["overhead_ms"] == pytest.approx(0.30), "the null forward's fill is added back"
    assert cal["tail_floor_ms"] == pytest.approx(0.235) and cal["queue_ms"] == pytest.approx(0.05)
    assert cal["runs"] == 100


def test_side_figures_are_the_runs_above_the_null() -> None:
    windows = [0.400 + 0.001 * (i % 3) for i in range(30)]
    figures = timing.side_figures([w - 0.300 for w in windows], windows, 0.300, [0.1] * 30)
    assert figures["median_ms"] == pytest.approx(0.101) and figures["null_ms"] == pytest.approx(0.300)
    assert figures["ci_low_ms"] <= figures["median_ms"] <= figures["ci_high_ms"]
    assert figures["window_median_ms"] == pytest.approx(0.401) and not figures["noisy"]
    assert figures["reported_median_ms"] == pytest.approx(0.1)


def test_a_window_at_the_null_floor_is_not_a_zero_or_negative_time() -> None:
    figures = timing.side_figures([-0.001] * 20, [0.299] * 20, 0.300, [])
    assert figures["median_ms"] == timing.FLOOR_MS and figures["ci_low_ms"] == timing.FLOOR_MS
    assert figures["reported_median_ms"] is None


def test_noisy_when_the_interval_is_wider_than_five_percent() -> None:
    rng = random.Random(5)
    estimates = [rng.uniform(0.05, 0.15) for _ in range(30)]  # 0.1 ms +- 50%
    assert timing.side_figures(estimates, estimates, 0.0, [])["noisy"]


def test_bootstrap_interval_contains_the_ratio_and_tightens_with_agreeing_runs() -> None:
    rng = random.Random(11)
    null = [0.300 + rng.gauss(0, 0.0005) for _ in range(40)]
    ref = [0.500 + rng.gauss(0, 0.001) for _ in range(100)]  # 0.2 ms above null
    kernel = [0.410 + rng.gauss(0, 0.001) for _ in range(100)]  # 0.1 ms above null and its 0.01 ms offset
    lo, hi = timing.bootstrap_score(ref, kernel, null, 0.01, seed=1)
    assert lo < 2.0 < hi and hi - lo < 0.1
    assert timing.bootstrap_score(ref, kernel, null, 0.01, seed=1) == (lo, hi), "seeded: reproducible"
    noisy = [0.410 + rng.gauss(0, 0.02) for _ in range(100)]
    nlo, nhi = timing.bootstrap_score(ref, noisy, null, 0.01, seed=1)
    assert nhi - nlo > 2 * (hi - lo)


def test_a_grossly_underreported_time_disagrees_and_honest_ones_do_not() -> None:
    assert timing.reported_disagrees(0.4, 1.0) and timing.reported_disagrees(0.001, 1.5)
    assert not timing.reported_disagrees(0.95, 1.0) and not timing.reported_disagrees(1.2, 1.0)
    assert not timing.reported_disagrees(0.005, 0.022), "tens of microseconds are inside the slack"
    assert not timing.reported_disagrees(None, 1.0)


def test_checks_land_on_a_cheater_faking_half_of_forty_runs() -> None:
    # A kernel must fake over half its runs to move a median; each run is checked with
    # CHECK_RATE by the judge's own randomness.
    rng = random.Random(7)
    caught = sum(any(rng.random() < timing.CHECK_RATE for _ in range(20)) for _ in range(5000))
    assert caught / 5000 > 0.98


def test_score_is_reference_over_kernel() -> None:
    assert timing.score({"median_ms": 2.0}, {"median_ms": 0.5}) == 4.0
    assert timing.score({"median_ms": 2.0}, {"median_ms": 0.0}) is None


def test_baseline_cache_round_trip_and_rejects_garbage(tmp_path: Path) -> None:
    timing.write_baseline(str(tmp_path), "k", {"median_ms": 1.5})
    assert timing.read_baseline(str(tmp_path), "k") == {"median_ms": 1.5}
    (tmp_path / "bad.json").write_text('{"median_ms": -1}')
    assert timing.read_baseline(str(tmp_path), "bad") is None
    assert timing.read_baseline(str(tmp_path), "missing") is None


def test_cached_reference_timings_are_per_physical_gpu() -> None:
    job = {"warmup": 10, "timing_trials": 100, "min_timing_trials": 10, "timing_budget_s": 1.0,
           "flush_l2": True, "timing_precision": 0.01}
    versions = {"torch": "2.11.0"}
    gpu0 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa"}
    gpu1 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bbbb"}
    def key(device: dict[str, str], task: str = "t") -> str:
        return timing.baseline_key(task, device, versions, "sig", job)

    # Two GPUs of one model never share a baseline: a score compares kernel and reference
    # timed on the same device.
    assert key(gpu0) != key(gpu1)
    assert key(gpu0) == key(dict(gpu0))
    assert key(gpu0) != key(gpu0, task="u")
    assert key(gpu0) != timing.baseline_key("t", gpu0, versions, "sig", dict(job, timing_precision=0.05)), \
        "a reference timed to another precision is another baseline"


def test_short_forwards_fill_a_window_long_ones_run_alone() -> None:
    big_free = 80 << 30
    assert timing.forwards_per_window([0.010, 0.020], 1 << 20, big_free) == 50, "the shorter model sets it"
    assert timing.forwards_per_window([0.002], 1 << 20, big_free) == timing.MAX_FORWARDS
    assert timing.forwards_per_window([0.6, 0.8], 1 << 20, big_free) == 1
    assert timing.forwards_per_window([0.25], 1 << 20, big_free) == 2


def test_forwards_per_window_stay_within_the_sets_memory_and_the_draws_time() -> None:
    big_free = 80 << 30
    # 64 MiB a set, both sides' extra sets within 1 GiB: eight extra sets each.
    assert timing.forwards_per_window([0.005], 64 << 20, big_free) == 9
    # A quarter of the free memory bounds it below SETS_BYTES.
    assert timing.forwards_per_window([0.005], 1 << 20, 16 << 20) == 3
    # Draws of 2 ms each: 12 fit the host time a run may spend on them.
    assert timing.forwards_per_window([0.005], 1 << 20, big_free, draw_ms=2.0) == 12
    assert timing.forwards_per_window([0.005], 1 << 20, big_free, draw_ms=100.0) == 1


def test_figures_of_a_window_of_several_forwards_are_per_forward() -> None:
    # 10 forwards a window: windows 0.3 ms of null plus 10 x 0.02 ms.
    windows = [0.500 + 0.0002 * (i % 3) for i in range(30)]
    estimates = [(w - 0.300) / 10 for w in windows]
    figures = timing.side_figures(estimates, windows, 0.300, [0.02] * 30, forwards=10)
    assert figures["median_ms"] == pytest.approx(0.02002) and figures["forwards_per_window"] == 10
    assert figures["window_median_ms"] == pytest.approx(0.5002)
    # The clock resolves a window to RESOLUTION_MS, a forward of it to a tenth of that.
    spread = [0.0200 + 0.0001 * (i % 2) for i in range(30)]
    assert timing.relative_width(spread, timing.RESOLUTION_MS / 10) > 0
    assert timing.relative_width(spread) == 0.0


def test_the_precision_policy_is_part_of_the_baseline_key() -> None:
    job = {"warmup": 10, "timing_trials": 100, "min_timing_trials": 10, "timing_budget_s": 1.0,
           "flush_l2": True, "timing_precision": 0.01}
    gpu = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa"}

    def key(**changes: str) -> str:
        return timing.baseline_key("t", gpu, {"torch": "2.11.0"}, "sig", dict(job, **changes))

    # A reference timed with TF32 matmuls is not the strict one; no policy means strict.
    assert key(precision="tf32") != key(precision="strict")
    assert key(precision="pytorch") != key(precision="strict")
    assert key() == key(precision="strict")


def test_between_evaluations_widens_a_tight_interval_and_barely_moves_a_wide_one() -> None:
    # A +-0.5% bootstrap becomes about +-1.6% with a 1.5% between-evaluations term.
    low, high = timing.with_between_evaluations(2.0, 1.99, 2.01, 0.015)
    assert 2.0 / 1.0165 < low < 2.0 / 1.0150 and 2.0 * 1.0150 < high < 2.0 * 1.0165
    # A +-20% bootstrap moves by well under a percent.
    low, high = timing.with_between_evaluations(1.0, 0.8, 1.2, 0.015)
    assert 0.797 < low < 0.8 and 1.2 < high < 1.202
    # The interval stays around the score even when the bootstrap is lopsided.
    low, high = timing.with_between_evaluations(1.0, 1.0, 1.3, 0.015)
    assert low < 1.0 < high and abs(low - 1 / 1.015) < 1e-9
    # 0, or no score, leaves the bootstrap alone.
    assert timing.with_between_evaluations(1.0, 0.99, 1.01, 0.0) == (0.99, 1.01)
    assert timing.with_between_evaluations(None, 0.99, 1.01, 0.015) == (0.99, 1.01)


def test_two_evaluations_within_the_repeatability_have_overlapping_intervals() -> None:
    # Scores 3% apart, each with a tight bootstrap: disjoint alone, overlapping with the term.
    a = (1.00, 0.997, 1.003)
    b = (1.03, 1.027, 1.033)
    assert a[2] < b[1]
    a_low, a_high = timing.with_between_evaluations(*a, 0.015)
    b_low, b_high = timing.with_between_evaluations(*b, 0.015)
    assert b_low <= a_high
