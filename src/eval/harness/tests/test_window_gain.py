"""Issue 34, item 10: the gain a kernel could take from a timed window of several forwards
(timed.window_gain), from single-forward windows taken after them: pure arithmetic here; on a
GPU, scripts/gpu/window_batching.sh runs hack_window_batching.py."""

from __future__ import annotations

from typing import Any

from kforge_harness import timed
from kforge_harness.timed import SingleForward


def single(null: float, reference: float, kernel: float, spread: float = 0.0002) -> SingleForward:
    """Seven rounds of single-forward windows around these per-forward times (ms)."""
    s = SingleForward(fill_ms=0.0)
    jitter = [-3, -2, -1, 0, 1, 2, 3]
    s.nulls = [null + spread * j for j in jitter]
    s.reference = [null + reference + spread * j for j in jitter]
    s.kernel = [null + kernel + spread * j for j in jitter]
    return s


def test_an_honest_kernel_gains_what_the_reference_gains() -> None:
    # Both run ~10% faster per forward in a window (warm weights, shared overhead) than alone.
    g = timed.window_gain(single(0.3, 0.011, 0.0055), 0.0, 0.010, 0.005, forwards=64)
    assert 0.9 < g["gain"] < 1.1 and not g["bounded"], g
    assert g["single_forward_ms"]["kernel"] > 0.005


def test_a_kernel_that_batches_a_windows_forwards_is_bounded() -> None:
    # hack_window_batching: alone 5 us a forward, in windows of 64 forwards 0.5 us a forward.
    g = timed.window_gain(single(0.3, 0.011, 0.005), 0.0, 0.010, 0.0005, forwards=64)
    assert g["bounded"] and 8.0 < g["gain"] < 10.0, g
    assert g["gain_low"] > 1.0 + timed.GAIN_SLACK


def test_noise_alone_is_not_taken_for_batching() -> None:
    # Single windows with 2 us of jitter around the same per-forward times: no bound.
    g = timed.window_gain(single(0.3, 0.010, 0.005, spread=0.002), 0.0, 0.010, 0.0045, forwards=64)
    assert not g["bounded"], g


def test_the_kernels_process_offset_is_taken_off_its_single_windows() -> None:
    g = timed.window_gain(single(0.3, 0.010, 0.007), 0.002, 0.010, 0.005, forwards=64)
    assert abs(g["single_forward_ms"]["kernel"] - 0.005) < 1e-9 and not g["bounded"], g


def test_the_judge_bounds_the_score_and_says_so() -> None:
    from kforge_harness.judge.timing_phase import bound_window_gain

    from jobs import judged

    run = judged()
    result: Any = {"reference": {"median_ms": 0.010, "ci_low_ms": 0.0099, "ci_high_ms": 0.0101},
              "kernel": {"median_ms": 0.0005, "ci_low_ms": 0.00049, "ci_high_ms": 0.00051},
              "score": 20.0, "score_low": 19.0, "score_high": 21.0, "forwards_per_window": 64, "calibration": {}}
    bound_window_gain(run, result, single(0.3, 0.011, 0.005), 0.0)
    windowing = result["calibration"]["windowing"]
    assert windowing["bounded"] and windowing["score_in_windows"] == 20.0
    assert 2.0 < result["score"] < 2.5, result["score"]  # alone: 10/5 us, as the reference gains
    assert result["score_low"] < result["score"] < result["score_high"]
    assert run.result["flags"] == ["window_batching"]
    assert "in windows of 64 forwards" in run.result["notes"][0]
    honest = dict(result, kernel={"median_ms": 0.005}, score=2.0, calibration={})
    run = judged()
    bound_window_gain(run, honest, single(0.3, 0.011, 0.0055), 0.0)
    assert honest["score"] == 2.0 and not run.result["flags"]
