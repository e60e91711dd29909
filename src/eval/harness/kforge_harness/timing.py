"""Timing figures and the rules that turn them into a score. Pure functions (torch only for
the bootstrap's arithmetic): the judge measures, this module decides what the measurements
mean."""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from .protocol import PROTOCOL

from . import knobs

# One side's timing figures (stats, side_figures: wire.TimingStats's fields), a calibration
# (calibration) or a cached baseline: JSON objects of figures.
Figures = Dict[str, Any]

# How a timed run is measured (window.py). Part of the baseline key: a cached reference
# timing measured another way is never compared with a kernel measured this way.
TIMING_METHOD = ("judge-window/gated-ipc-events/inputs-then-l2-fill-42-int64/fresh-inputs/null-subtracted/"
                 "forwards-per-window-0.5ms-64")
METHOD_NAME = "judge_window"
METHOD_TEXT = ("both models timed by the judge's own CUDA events around each one's process's whole GPU work "
               "(gated, ordered by stream-memory flags), inputs written and L2 thrashed inside the window, "
               "interleaved run by run with null runs of the reference's process, whose median window is "
               "subtracted; forwards under half a millisecond run several to a window, each on its own input "
               "set, and the window is divided by their count")

# The interval of a median is "wide" beyond this share of it: the figure is marked noisy.
NOISY = 0.05
# Half an interval this narrow is as precise as CUDA events resolve (0.5 us), whatever the
# share of a median of a few microseconds it is.
RESOLUTION_MS = 0.00025
# Estimates below this are under what the clock resolves (a null window's own spread).
FLOOR_MS = 0.0005
# A worker whose reported event time is under this share of the judge's figure (less an
# absolute allowance: below ~30 us the judge's figure carries a few microseconds of the
# window's own, docs/benchmarks.md) reported a time the judge's clock contradicts.
REPORTED_SHARE = 0.5
REPORTED_SLACK_MS = 0.03
# Share of timed runs whose outputs the judge checks, chosen per run by the judge's own
# randomness; at least MIN_CHECKS per side. A kernel that fakes half its runs (the share it
# must fake to move a median) escapes 20 runs' checks with probability 0.8**10 ~ 11%, and
# the tail check in judge.py refuses faked runs outright.
CHECK_RATE = 0.2
MIN_CHECKS = 3
BOOTSTRAP_RESAMPLES = 2000
# Short forwards run several to a window, each on an input set of its own, until their GPU
# time reaches WINDOW_TARGET_MS: a window carries a few microseconds of switching between
# processes that differ from one evaluation to the next (docs/benchmarks.md), which is then
# shared by that many forwards. At most MAX_FORWARDS per window, and the extra input sets and
# output slots of both processes within SETS_BYTES and a quarter of the free memory.
WINDOW_TARGET_MS = 0.5
MAX_FORWARDS = 64
SETS_BYTES = 1 << 30
# Every forward gets a fresh draw of the task's inputs: a window holds no more forwards than
# draws of DRAWS_MS_PER_RUN take.
DRAWS_MS_PER_RUN = 25.0


def forwards_per_window(estimates_ms: Sequence[float], set_bytes: int, free_bytes: int, draw_ms: float = 0.0) -> int:
    """How many forwards each timed window holds (the same for both models, so one null run
    fits both): enough for the shortest model's forwards to fill WINDOW_TARGET_MS, within
    MAX_FORWARDS, the memory of the extra sets (each side holds one set of inputs and
    outputs per forward; `set_bytes` is one set, both sides' extra sets are counted) and
    the host time of their draws (`draw_ms` each)."""
    shortest = min(estimates_ms) if estimates_ms else WINDOW_TARGET_MS
    wanted = int(math.ceil(WINDOW_TARGET_MS / max(shortest, 1e-4)))
    if draw_ms > 0:
        wanted = min(wanted, int(DRAWS_MS_PER_RUN // draw_ms))
    if set_bytes > 0:
        room = min(SETS_BYTES, free_bytes // 4)
        wanted = min(wanted, 1 + int(room // (2 * set_bytes)))
    return max(1, min(MAX_FORWARDS, wanted))


def stats(values: Sequence[float]) -> Figures:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    median = ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])
    mean = sum(ordered) / n
    var = sum((v - mean) ** 2 for v in ordered) / (n - 1) if n > 1 else 0.0
    return {"median_ms": median, "mean_ms": mean, "min_ms": ordered[0], "max_ms": ordered[-1],
            "std_ms": math.sqrt(var), "runs": n}


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = (len(ordered) - 1) * q
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def run_count(estimate_ms: float, job: Mapping[str, Any]) -> int:
    """Most timed runs for a model whose one run took about `estimate_ms`: as many as the
    budget allows, within [min_timing_trials, timing_trials]."""
    wanted = int(job["timing_budget_s"] * 1e3 / max(estimate_ms, 1e-3))
    least: int = job["min_timing_trials"]
    most: int = job["timing_trials"]
    return max(least, min(most, wanted))


def median_interval(values: Sequence[float], z: float = 1.959964) -> Tuple[float, float]:
    """Distribution-free 95% interval of the median: the order statistics around rank n/2
    that a binomial(n, 1/2) puts the median between (normal approximation); the whole range
    below 6 values."""
    ordered = sorted(values)
    n = len(ordered)
    if n < 6:
        return ordered[0], ordered[-1]
    half = z * math.sqrt(n) / 2.0
    lo = max(0, int(math.floor(n / 2.0 - half)) - 1)
    hi = min(n - 1, int(math.ceil(n / 2.0 + half)))
    return ordered[lo], ordered[hi]


def relative_width(values: Sequence[float], resolution_ms: float = RESOLUTION_MS) -> float:
    """Half the width of the median's 95% interval over the median (inf at or below 0), or 0
    where that half is within the clock's resolution (per forward: the window's resolution
    over the forwards it holds)."""
    lo, hi = median_interval(values)
    mid = quantile(values, 0.5)
    if (hi - lo) / 2.0 <= resolution_ms and mid > 0:
        return 0.0
    return (hi - lo) / 2.0 / mid if mid > 0 else float("inf")


def precise_enough(estimates: Sequence[float], precision: float, forwards: int = 1) -> bool:
    return len(estimates) >= 6 and relative_width(estimates, RESOLUTION_MS / forwards) <= precision


def calibration(runs: Sequence[Sequence[float]], fill_ms: float = 0.0) -> Figures:
    """A side's null runs (window.py): everything a timed run does but the forward (its null
    forward fills tensors like the outputs, whose time `fill_ms` the judge measured on its
    own stream). Each run is (window, tail, queue) in ms. The median window less the fill is
    what every run's figure is taken above; the floor and the noise above it; and the floor
    of the tail (the worker's part) that a real run cannot go under."""
    windows = [r[0] for r in runs]
    tails = [r[1] for r in runs]
    queues = [r[2] for r in runs]
    return {"overhead_ms": quantile(windows, 0.5) - fill_ms, "floor_ms": quantile(windows, 0.1) - fill_ms,
            "spread_ms": quantile(windows, 0.3) - quantile(windows, 0.1), "fill_ms": fill_ms,
            "tail_floor_ms": quantile(tails, 0.1), "queue_ms": quantile(queues, 0.5), "runs": len(runs)}


def side_figures(estimates_ms: Sequence[float], windows_ms: Sequence[float], null_ms: float,
                 reported_ms: Sequence[float], forwards: int = 1) -> Figures:
    """One side's TimingStats from its runs' figures per forward (window less the null's,
    over the forwards it held): the median with its 95% interval, and whether that interval
    is wide (noisy). `windows_ms` and `null_ms` are whole windows."""
    figures = stats(estimates_ms)
    lo, hi = median_interval(estimates_ms)
    figures["median_ms"] = max(figures["median_ms"], FLOOR_MS)
    figures.update({
        "ci_low_ms": max(lo, FLOOR_MS), "ci_high_ms": max(hi, FLOOR_MS),
        "noisy": relative_width(estimates_ms, RESOLUTION_MS / forwards) > NOISY,
        "forwards_per_window": forwards,
        "window_median_ms": quantile(windows_ms, 0.5), "null_ms": null_ms,
        "reported_median_ms": quantile(reported_ms, 0.5) if reported_ms else None,
    })
    return figures


def bootstrap_score(ref_windows: Sequence[float], kernel_windows: Sequence[float], null_windows: Sequence[float],
                    kernel_offset: float = 0.0, resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = 0) -> Tuple[float, float]:
    """95% percentile interval of reference/kernel, each its median window less the median
    null window (the kernel's less its process's offset too), resampling the three sets of
    runs with replacement. Both models' windows hold the same number of forwards, which
    cancels in the ratio."""
    import torch

    gen = torch.Generator().manual_seed(int(seed))

    def medians(values: Sequence[float]) -> torch.Tensor:
        data = torch.tensor(values, dtype=torch.float64)
        picks = torch.randint(len(values), (resamples, len(values)), generator=gen)
        return data[picks].quantile(0.5, dim=1)

    null = medians(null_windows)
    ref = (medians(ref_windows) - null).clamp(min=FLOOR_MS)
    kernel = (medians(kernel_windows) - null - kernel_offset).clamp(min=FLOOR_MS)
    ratios = (ref / kernel).sort().values
    return float(ratios[int(0.025 * (resamples - 1))]), float(ratios[int(math.ceil(0.975 * (resamples - 1)))])


def with_between_evaluations(score_value: Optional[float], low: float, high: float,
                             between: Optional[float]) -> Tuple[float, float]:
    """The score's interval (low, high) widened by what differs between evaluations of one
    kernel, a relative 95% half-width `between`: on the log scale each side's half-width
    and the between term add in quadrature (independent errors), so a bootstrap far wider
    than `between` barely moves and a tight one becomes +-`between`."""
    if not between or score_value is None or score_value <= 0 or low <= 0 or high <= 0:
        return low, high
    term = math.log1p(between)
    below = math.hypot(math.log(score_value / low) if low < score_value else 0.0, term)
    above = math.hypot(math.log(high / score_value) if high > score_value else 0.0, term)
    return score_value * math.exp(-below), score_value * math.exp(above)


def reported_disagrees(reported_ms: Optional[float], estimate_ms: float) -> bool:
    """The worker's own event time is far below the judge's figure: a patched timer (the
    score is the judge's and does not move)."""
    return reported_ms is not None and reported_ms < REPORTED_SHARE * estimate_ms - REPORTED_SLACK_MS


def score(reference: Mapping[str, Any], kernel: Mapping[str, Any]) -> Optional[float]:
    ratio: Optional[float] = reference["median_ms"] / kernel["median_ms"] if kernel["median_ms"] > 0 else None
    return ratio


def baseline_key(task_source: str, device_info: Mapping[str, Any], versions: Mapping[str, Any], signature: object,
                 job: Mapping[str, Any]) -> str:
    material = json.dumps({
        "task": hashlib.sha256(task_source.encode()).hexdigest(),
        "gpu": device_info.get("name"),
        # Per physical device: two GPUs of one model still differ (clocks, cooling), and a
        # score compares kernel and reference timed on the same one.
        "gpu_uuid": device_info.get("uuid"),
        "torch": versions.get("torch"),
        "inputs": signature,
        "timing": [job["warmup"], job["timing_trials"], job["min_timing_trials"], job["timing_budget_s"],
                   job["flush_l2"], job.get("timing_precision")],
        "harness": PROTOCOL,
        "method": TIMING_METHOD,
        # The reference computes differently under each precision policy (TF32 or not).
        "precision": job.get("precision") or "strict",
        # A diagnostic run's figures are never a task's baseline (knobs.py).
        "diagnostics": knobs.active(),
    }, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def read_baseline(cache_dir: Optional[str], key: str) -> Optional[Figures]:
    if not cache_dir:
        return None
    try:
        with open(os.path.join(cache_dir, key + ".json")) as f:
            value = json.load(f)
        return value if isinstance(value, dict) and value.get("median_ms", 0) > 0 else None
    except (OSError, ValueError):
        return None


def write_baseline(cache_dir: Optional[str], key: str, timing: Mapping[str, Any]) -> None:
    if not cache_dir:
        return
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = os.path.join(cache_dir, "%s.%d.tmp" % (key, os.getpid()))
        with open(tmp, "w") as f:
            json.dump(timing, f)
        os.replace(tmp, os.path.join(cache_dir, key + ".json"))
    except OSError:
        pass  # a cache that cannot be written only costs time next run
