"""Timing figures and the rules that turn them into a score. Pure functions (no torch):
the judge measures, this module decides what the measurements mean."""

import hashlib
import json
import math
import os
import random

from .protocol import PROTOCOL

# How a timed run is measured (flush, events, refresh). Part of the baseline key: a cached
# reference timing measured another way is never compared with a kernel measured this way.
TIMING_METHOD = "l2-fill-42-int64/events-after-thrash/fresh-inputs"


def stats(values):
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    median = ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])
    mean = sum(ordered) / n
    var = sum((v - mean) ** 2 for v in ordered) / (n - 1) if n > 1 else 0.0
    return {"median_ms": median, "mean_ms": mean, "min_ms": ordered[0], "max_ms": ordered[-1],
            "std_ms": math.sqrt(var), "runs": n}


def quantile(values, q):
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = (len(ordered) - 1) * q
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def run_count(estimate_ms, job):
    """Timed runs for a model whose one run took about `estimate_ms`: as many as the
    budget allows, within [min_timing_trials, timing_trials]."""
    wanted = int(job["timing_budget_s"] * 1e3 / max(estimate_ms, 1e-3))
    return max(job["min_timing_trials"], min(job["timing_trials"], wanted))


def verification_runs(runs, rng=None):
    """Which timed runs of the kernel the judge checks against the reference. Chosen by the
    judge's own randomness (the worker cannot know which), about 2*ln(100) ~ 9 of them: a
    kernel that cheats on half of 100 runs (returns cached or garbage outputs to look fast)
    escapes with probability (1 - 9/100)^50 < 1%. The last run is always checked."""
    rng = rng or random.SystemRandom()
    wanted = min(runs, max(3, int(round(2 * math.log(max(runs, 2)) + 0.5))))
    chosen = set(rng.sample(range(runs), wanted - 1)) if wanted > 1 else set()
    chosen.add(runs - 1)
    return chosen


def calibration(walls_ms):
    """The exchange's own cost from null runs: its median (for host-bounded figures), its
    10th percentile (the floor most runs reach) and the noise just above that floor.
    Scheduler wake-ups put a long right tail on these times; low quantiles cancel it."""
    return {"overhead_ms": quantile(walls_ms, 0.5), "floor_ms": quantile(walls_ms, 0.1),
            "spread_ms": quantile(walls_ms, 0.3) - quantile(walls_ms, 0.1), "runs": len(walls_ms)}


def host_bound(walls_ms, overhead_ms):
    """The kernel's time per run as the judge's clock bounds it: each run's wall time from
    the judge's 'go' to the worker's 'done', less the overhead of that exchange measured
    before the kernel was imported (the kernel cannot shorten either)."""
    return [max(w - overhead_ms, 0.0) for w in walls_ms]


def disagreement(events_ms, walls_ms, cal, job):
    """Whether the times the worker reported are contradicted by the judge's own clock.
    Compared at the 10th percentile on both sides: the judge's floor-to-floor bound on the
    kernel (wall floor less the exchange's floor) against the reported event times' floor.
    Allowed gap: host_slack_ms (launch and synchronize latency), twice the noise above the
    exchange's floor, and (host_time_ratio - 1) of the event time.
    Returns (disagrees, allowed_ms, bound_ms, event_ms)."""
    event = quantile(events_ms, 0.1)
    bound = max(quantile(walls_ms, 0.1) - cal["floor_ms"], 0.0)
    allowed = job["host_slack_ms"] + 2.0 * cal["spread_ms"] + (job["host_time_ratio"] - 1.0) * event
    return bound - event > allowed, allowed, bound, event


def score(reference, kernel):
    return reference["median_ms"] / kernel["median_ms"] if kernel["median_ms"] > 0 else None


def baseline_key(task_source, device_info, versions, signature, job):
    material = json.dumps({
        "task": hashlib.sha256(task_source.encode()).hexdigest(),
        "gpu": device_info.get("name"),
        # Per physical device: two GPUs of one model still differ (clocks, cooling), and a
        # score compares kernel and reference timed on the same one.
        "gpu_uuid": device_info.get("uuid"),
        "torch": versions.get("torch"),
        "inputs": signature,
        "timing": [job["warmup"], job["timing_trials"], job["min_timing_trials"], job["timing_budget_s"],
                   job["flush_l2"]],
        "harness": PROTOCOL,
        "method": TIMING_METHOD,
    }, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def read_baseline(cache_dir, key):
    if not cache_dir:
        return None
    try:
        with open(os.path.join(cache_dir, key + ".json")) as f:
            value = json.load(f)
        return value if isinstance(value, dict) and value.get("median_ms", 0) > 0 else None
    except (OSError, ValueError):
        return None


def write_baseline(cache_dir, key, timing):
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
