"""The reference under PyTorch's default precision settings: a second baseline beside the
headline's (issue 35). Pure functions (the judge measures, judge.py).

The headline compares at equal accuracy: under `strict` the reference runs with TF32 off for
cuDNN too, which makes float32 convolutions about 2.4x slower than PyTorch's defaults (TF32
on for cuDNN, off for matmuls); under `tf32` matmuls run in TF32, which PyTorch's defaults do
not. Whenever the policy's settings differ from the defaults for operators the task runs
(float32 convolutions under `strict`, float32 matmuls under `tf32`), the reference is timed
again under the defaults, interleaved with the policy's reference in the same way as the
torch.compile baseline (once per task and device, cached), so a score can also be read
against what the person's PyTorch runs today: score vs defaults = score x defaults median /
policy median. The headline, fast_p and the session's selection stay on the policy's
reference; this figure is shown beside them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Optional, Tuple

from .baselines import T, Cached, divided, measured_or_why, read_json, write_json
from .precision import SETTINGS
from .wire import DefaultsFiguresRecord

DEFAULTS = "pytorch"  # the policy whose settings are PyTorch's defaults
WHAT = ("the headline, fast_p and the session's selection use the policy's reference; this is the same score "
        "against the reference under PyTorch's default settings")


def differences(policy: Optional[str]) -> list[str]:
    """The settings that differ between `policy` and PyTorch's defaults, in words: [] where
    none do."""
    mine, theirs = SETTINGS.get(policy or DEFAULTS, SETTINGS[DEFAULTS]), SETTINGS[DEFAULTS]
    out = []
    if mine[0] != theirs[0]:
        out.append("TF32 matmuls %s (PyTorch's default: %s)" % (_on(mine[0]), _on(theirs[0])))
    if mine[1] != theirs[1]:
        out.append("TF32 cuDNN convolutions %s (PyTorch's default: %s)" % (_on(mine[1]), _on(theirs[1])))
    return out


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def applies(policy: Optional[str], counts: Optional[Mapping[str, Any]]) -> Tuple[bool, str]:
    """(whether the reference is timed under the defaults too, why or why not). It is where
    the policy's settings differ from the defaults for work the task does: float32 matmuls
    (the matmul switch) or float32 convolutions (the cuDNN switch), by the counted work; a
    task whose work was not counted is measured (it may run either)."""
    mine, theirs = SETTINGS.get(policy or DEFAULTS, SETTINGS[DEFAULTS]), SETTINGS[DEFAULTS]
    if mine == theirs or policy == DEFAULTS:
        return False, "the policy runs the reference under PyTorch's defaults"
    if not counts or "flops" not in counts:
        return True, "; ".join(differences(policy))
    families = {entry["family"] for entry in counts["flops"] if entry.get("dtype") == "float32"}
    affected: list[str] = []
    if mine[0] != theirs[0] and "matmul" in families:
        affected.append("float32 matmuls")
    if mine[1] != theirs[1] and "convolution" in families:
        affected.append("float32 convolutions")
    if not affected:
        return False, ("PyTorch's defaults run this task's reference alike (%s; it has no float32 work they touch)"
                       % "; ".join(differences(policy)))
    return True, "%s: %s" % (" and ".join(affected), "; ".join(differences(policy)))


def cache_key(baseline_key: str) -> str:
    """The figures' key: the eager baseline's (task, device, versions, inputs, timing
    method, precision policy) and the defaults."""
    return hashlib.sha256(json.dumps([baseline_key, "pytorch defaults"]).encode()).hexdigest()[:32]


def read_cached(cache_dir: Optional[str], key: str) -> Optional[Cached]:
    value = read_json(cache_dir, key + ".defaults.json")
    return value if value is not None and measured_or_why(value) else None


def write_cached(cache_dir: Optional[str], key: str, record: Mapping[str, Any]) -> None:
    write_json(cache_dir, key + ".defaults.json", record)


def settings_of(policy: str) -> dict[str, Any]:
    matmul, cudnn, matmul_precision = SETTINGS[policy]
    return {"matmul": matmul, "cudnn": cudnn, "float32_matmul_precision": matmul_precision}


def figures(policy: str, why: str, reference: Mapping[str, Any], defaults_side: Mapping[str, Any],
            interval: Tuple[Optional[float], Optional[float]]) -> DefaultsFiguresRecord:
    """The record of a measured defaults baseline: `reference` and `defaults_side` are both
    sides' timing figures from one interleaved measurement, `interval` the bootstrap of
    reference / defaults (how much faster the defaults run)."""
    ratio: Optional[float] = reference["median_ms"] / defaults_side["median_ms"] if defaults_side["median_ms"] > 0 else None
    low, high = interval if ratio is not None else (None, None)
    return DefaultsFiguresRecord({
        "error": None, "pytorch_settings": settings_of(DEFAULTS), "policy_settings": settings_of(policy), "differs": why,
        "median_ms": defaults_side["median_ms"], "ci_low_ms": defaults_side.get("ci_low_ms"),
        "ci_high_ms": defaults_side.get("ci_high_ms"), "noisy": bool(defaults_side.get("noisy")),
        "reference_median_ms": reference["median_ms"], "speedup_over_reference": ratio, "speedup_low": low,
        "speedup_high": high, "cached": False, "used_for": WHAT})


def unavailable(policy: str, why: str) -> DefaultsFiguresRecord:
    """The record of a task whose reference could not be timed under the defaults."""
    return DefaultsFiguresRecord({
        "error": why, "pytorch_settings": settings_of(DEFAULTS), "policy_settings": settings_of(policy), "differs": None,
        "median_ms": None, "ci_low_ms": None, "ci_high_ms": None, "noisy": False, "reference_median_ms": None,
        "speedup_over_reference": None, "speedup_low": None, "speedup_high": None, "cached": False,
        "used_for": WHAT})


def usable(record: Optional[Mapping[str, Any]]) -> bool:
    return bool(record is not None and record.get("error") is None and record.get("speedup_over_reference"))


def against_defaults(timing_result: T, record: Optional[Mapping[str, Any]]) -> T:
    """Adds to an evaluation's timing the defaults figures and the score against them
    (score / (reference / defaults)), with its interval."""
    timing_result["defaults"] = record
    score = timing_result.get("score")
    if score is not None and record is not None and usable(record):
        value, low, high = divided(score, timing_result.get("score_low"), timing_result.get("score_high"),
                                   record["speedup_over_reference"], record.get("speedup_low"),
                                   record.get("speedup_high"))
        timing_result.update(score_vs_defaults=value, score_vs_defaults_low=low, score_vs_defaults_high=high)
    return timing_result
