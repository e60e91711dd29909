"""The reference under PyTorch's default settings (defaults.py, issue 35): when it is timed,
its record, the score against it, its cache."""

from __future__ import annotations

from typing import Any
from pathlib import Path
import pytest

from kforge_harness import defaults


def counts(*families: str) -> dict[str, Any]:
    return {"flops": [{"dtype": "float32", "family": f, "flops": 10} for f in families]}


def test_strict_differs_for_float32_convolutions_only() -> None:
    assert defaults.differences("pytorch") == []
    assert defaults.differences("strict") == ["TF32 cuDNN convolutions off (PyTorch's default: on)"]
    applies, why = defaults.applies("strict", counts("convolution", "elementwise"))
    assert applies and why.startswith("float32 convolutions: TF32 cuDNN convolutions off")
    applies, why = defaults.applies("strict", counts("matmul"))
    assert not applies and "no float32 work they touch" in why
    assert not defaults.applies("pytorch", counts("convolution"))[0]


def test_tf32_differs_for_float32_matmuls() -> None:
    applies, why = defaults.applies("tf32", counts("matmul"))
    assert applies and why.startswith("float32 matmuls: TF32 matmuls on (PyTorch's default: off)")
    assert not defaults.applies("tf32", counts("convolution"))[0]


def test_a_half_convolution_is_not_touched_and_uncounted_work_is_measured() -> None:
    half = {"flops": [{"dtype": "float16", "family": "convolution", "flops": 10}]}
    assert not defaults.applies("strict", half)[0]
    assert defaults.applies("strict", None)[0]


def test_the_score_against_the_defaults_divides_by_how_much_faster_they_run() -> None:
    record = defaults.figures("strict", "float32 convolutions", {"median_ms": 9.5}, {"median_ms": 3.9,
                              "ci_low_ms": 3.8, "ci_high_ms": 4.0}, (2.3, 2.6))
    assert record["speedup_over_reference"] == pytest.approx(9.5 / 3.9)
    assert record["pytorch_settings"] == {"matmul": False, "cudnn": True, "float32_matmul_precision": "highest"}
    assert record["policy_settings"]["cudnn"] is False
    timing = defaults.against_defaults({"score": 1.05, "score_low": 1.0, "score_high": 1.1}, record)
    # A kernel at 1.05x under strict is 0.43x against what PyTorch runs by default.
    assert timing["score_vs_defaults"] == pytest.approx(1.05 / (9.5 / 3.9))
    assert timing["score_vs_defaults_low"] < timing["score_vs_defaults"] < timing["score_vs_defaults_high"]
    assert "fast_p and the session's selection use the policy's reference" in record["used_for"]


def test_without_figures_there_is_no_score_against_them() -> None:
    record = defaults.unavailable("strict", "its process failed")
    timing: dict[str, Any] = defaults.against_defaults({"score": 1.05}, record)
    assert timing["defaults"]["error"] == "its process failed" and "score_vs_defaults" not in timing


def test_the_record_is_cached_and_a_bad_one_is_not_read(tmp_path: Path) -> None:
    key = defaults.cache_key("abc")
    assert key != defaults.cache_key("abd")
    record = defaults.figures("strict", "w", {"median_ms": 2.0}, {"median_ms": 1.0}, (1.9, 2.1))
    defaults.write_cached(str(tmp_path), key, dict(record, cached=True))
    again = defaults.read_cached(str(tmp_path), key)
    assert again is not None
    assert again["median_ms"] == 1.0 and "cached" not in again
    (tmp_path / (key + ".defaults.json")).write_text('{"error": null, "median_ms": 0}')
    assert defaults.read_cached(str(tmp_path), key) is None
