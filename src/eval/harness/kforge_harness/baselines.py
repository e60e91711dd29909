"""The torch.compile baseline: what the reference under `torch.compile` costs, how a kernel's
score against it follows from its score against eager PyTorch, and which of the two a
score is reported against. Pure functions (the judge measures, judge.py).

Why a ratio: a kernel's evaluation times the kernel against the eager reference,
interleaved (timed.py). The compiled reference is timed the same way against the eager
one, once per task and device (its compile takes seconds to minutes), and the ratio of the
two carries over: score vs compile = score vs eager x compiled / eager. Both ratios are
taken between processes timed alike, so the figure is as fair as the eager score.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Dict, Mapping, MutableMapping, Optional, Sequence, Tuple, TypeVar

from .wire import CompileFiguresRecord

# A cached baseline record (read_json): a JSON object.
Cached = Dict[str, Any]
# An evaluation's timing, which against_compile and defaults.against_defaults add to.
T = TypeVar("T", bound=MutableMapping[str, Any])

# The reference's module, loaded as the kernel with its forward under torch.compile. The
# parameters keep their names (a subclass, not torch.compile's wrapper module, whose names
# gain `_orig_mod.`), so the judge aligns them as it aligns the eager reference's.
COMPILED_ALIAS = '''

# kforge: the reference under torch.compile, timed through the worker's protocol
import torch as _kforge_torch
import torch._inductor.config as _kforge_inductor_config

# One process compiles: the judge times it, and a pool of compile workers would outlive it.
_kforge_inductor_config.compile_threads = 1


class ModelNew(Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.forward = _kforge_torch.compile(self.forward, mode=%r)
'''

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CHOICES = ("eager", "compile", "best")
# Where a job's compile figure may come from (the job's `compile_source`): the cache, else
# measured now; or the cache only (a one-shot `kforge eval` on a GPU: the figure is measured
# after the verdict, by a task check of its own, and the verdict re-scored, `rescored`).
CACHE_OR_MEASURE, CACHE_ONLY = COMPILE_SOURCES = ("cache_or_measure", "cache_only")
# The timing's `compile_deferred`: the figure left out of this evaluation, to be measured
# after its verdict (`deferred`); measured after the verdict and scored against
# (`rescored`); or never had after all (kforge writes it where that measurement failed or
# was interrupted).
PENDING, AFTER_VERDICT, FAILED = DEFERRALS = ("pending", "after_verdict", "failed")


def compiled_source(task_source: str, mode: str) -> str:
    if mode not in MODES:
        raise ValueError("unknown torch.compile mode %r (one of %s)" % (mode, ", ".join(MODES)))
    return task_source + COMPILED_ALIAS % mode


def cache_key(baseline_key: str, mode: str) -> str:
    """The compiled figures' key: the eager baseline's (task, device, versions, inputs,
    timing method, precision policy) and the compile mode."""
    return hashlib.sha256(json.dumps([baseline_key, "torch.compile", mode]).encode()).hexdigest()[:32]


def read_json(cache_dir: Optional[str], name: str) -> Optional[Cached]:
    """A cached record (`name` in `cache_dir`), or None where it is missing or unreadable."""
    if not cache_dir:
        return None
    try:
        with open(os.path.join(cache_dir, name)) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_json(cache_dir: Optional[str], name: str, record: Mapping[str, Any]) -> None:
    """Writes a record atomically, without its `cached` mark; a cache that cannot be written
    only costs a measurement next time."""
    if not cache_dir:
        return
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = os.path.join(cache_dir, "%s.%d.tmp" % (name, os.getpid()))
        with open(tmp, "w") as f:
            json.dump({k: v for k, v in record.items() if k != "cached"}, f)
        os.replace(tmp, os.path.join(cache_dir, name))
    except OSError:
        pass


def measured_or_why(value: Mapping[str, Any]) -> bool:
    """Whether a cached baseline record holds figures (a positive median) or why there are
    none (`error`)."""
    return value.get("error") is not None or (value.get("median_ms") or 0) > 0


def read_cached(cache_dir: Optional[str], key: str) -> Optional[Cached]:
    """A cached record (figures or the reason there are none), or None."""
    value = read_json(cache_dir, key + ".compile.json")
    if value is None or value.get("mode") not in MODES or not measured_or_why(value):
        return None
    return value


def write_cached(cache_dir: Optional[str], key: str, record: Mapping[str, Any]) -> None:
    write_json(cache_dir, key + ".compile.json", record)


def figures(mode: str, compile_s: Optional[float], eager: Mapping[str, Any], compiled: Mapping[str, Any],
            speedup_interval: Tuple[Optional[float], Optional[float]]) -> CompileFiguresRecord:
    """The record of a measured compile baseline: `eager` and `compiled` are both sides'
    timing figures from one interleaved measurement, `speedup_interval` the bootstrap of
    eager/compiled."""
    speedup: Optional[float] = eager["median_ms"] / compiled["median_ms"] if compiled["median_ms"] > 0 else None
    low, high = speedup_interval if speedup is not None else (None, None)
    return CompileFiguresRecord({"mode": mode, "error": None, "compile_s": compile_s,
                                 "median_ms": compiled["median_ms"], "ci_low_ms": compiled.get("ci_low_ms"),
                                 "ci_high_ms": compiled.get("ci_high_ms"), "noisy": bool(compiled.get("noisy")),
                                 "runs": compiled.get("runs"),
                                 "forwards_per_window": compiled.get("forwards_per_window"),
                                 "eager_median_ms": eager["median_ms"],
                                 "speedup_over_eager": speedup, "speedup_low": low, "speedup_high": high})


def unavailable(mode: str, why: str, compile_s: Optional[float] = None) -> CompileFiguresRecord:
    """The record of a task torch.compile cannot serve as a baseline for."""
    return CompileFiguresRecord({"mode": mode, "error": why, "compile_s": compile_s})


def divided(score: float, low: Optional[float], high: Optional[float], ratio: float, ratio_low: Optional[float],
            ratio_high: Optional[float]) -> Tuple[float, Optional[float], Optional[float]]:
    """score / ratio with its 95% interval: both relative half-widths add in quadrature on
    the log scale (independent measurements); the lower end pairs the score's lower end with
    the ratio's upper end."""
    value = score / ratio

    def half(a: float, b: float) -> float:
        return math.log(a / b) if a > b > 0 else 0.0

    if low is None or high is None or ratio_low is None or ratio_high is None:
        return value, None, None
    below = math.hypot(half(score, low), half(ratio_high, ratio))
    above = math.hypot(half(high, score), half(ratio, ratio_low))
    return value, value * math.exp(-below), value * math.exp(above)


def usable(compiled: Optional[Mapping[str, Any]]) -> bool:
    """Whether a compile record has figures a score can be divided by."""
    return bool(compiled is not None and compiled.get("error") is None and compiled.get("speedup_over_eager"))


def choose(choice: str, compiled: Optional[Mapping[str, Any]]) -> Tuple[str, str]:
    """Which baseline the headline score is against: `eager`, `compile` or `best` (the
    faster of the two by the measured medians), with why. A task with no compile figures
    is scored against eager whatever the choice."""
    if choice not in CHOICES:
        raise ValueError("unknown baseline %r (one of %s)" % (choice, ", ".join(CHOICES)))
    if choice == "eager":
        return "eager", "baseline = eager"
    if not usable(compiled):
        why: str = (compiled or {}).get("error") or "no torch.compile figures"
        return "eager", "baseline = %s, scored against eager: %s" % (choice, why)
    if choice == "compile":
        return "compile", "baseline = compile"
    assert compiled is not None  # usable
    speedup: float = compiled["speedup_over_eager"]
    low: Optional[float] = compiled.get("speedup_low")
    # Faster beyond the measurement's noise: a tie (an interval that holds 1) stays eager,
    # the baseline KernelBench scores against.
    if speedup > 1.0 and (low is None or low > 1.0):
        return "compile", "baseline = best: torch.compile is %.2fx as fast as eager" % speedup
    if speedup > 1.0:
        assert low is not None  # the branch above took a missing one
        return "eager", ("baseline = best: torch.compile and eager cannot be told apart (%.2fx [%.2f-%.2f]), "
                         "scored against eager" % (speedup, low, compiled.get("speedup_high") or speedup))
    return "eager", "baseline = best: eager is as fast as torch.compile (%.2fx)" % speedup


def against_compile(timing_result: T, compiled: Optional[Mapping[str, Any]], choice: str) -> T:
    """Adds to an evaluation's timing the compile figures, the score against them and the
    baseline its headline is against (`baseline`, `baseline_reason`)."""
    timing_result["compile"] = compiled
    score = timing_result.get("score")
    if score is not None and compiled is not None and usable(compiled):
        value, low, high = divided(score, timing_result.get("score_low"), timing_result.get("score_high"),
                                   compiled["speedup_over_eager"], compiled.get("speedup_low"),
                                   compiled.get("speedup_high"))
        timing_result.update(score_vs_compile=value, score_vs_compile_low=low, score_vs_compile_high=high)
    used, why = choose(choice, compiled)
    timing_result["baseline"], timing_result["baseline_reason"] = used, why
    return timing_result


def deferred(timing_result: T, choice: str) -> T:
    """Adds to an evaluation's timing what stands while its compile figure is deferred (no
    cached figure under `cache_only`): no figure, `compile_deferred` pending, the headline
    against eager until `rescored` gives it the figure."""
    choose(choice, None)  # an unknown choice is refused here as it is there
    timing_result["compile"] = None
    timing_result["compile_deferred"] = PENDING
    timing_result["baseline"] = "eager"
    timing_result["baseline_reason"] = "baseline = eager" if choice == "eager" else (
        "baseline = %s, scored against eager until torch.compile's figure, measured after this verdict, "
        "is in" % choice)
    return timing_result


def rescored(timing_result: T, compiled: Optional[Mapping[str, Any]], choice: str) -> T:
    """A deferred evaluation's timing scored against the compile figure measured after its
    verdict: `against_compile`, as the judge applies it, and `compile_deferred` saying the
    figure came after the verdict."""
    against_compile(timing_result, compiled, choice)
    timing_result["compile_deferred"] = AFTER_VERDICT
    return timing_result
