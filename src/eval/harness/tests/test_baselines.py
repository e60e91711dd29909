"""The torch.compile baseline's pure parts: the compiled reference's module, the cache, the
score against it and which baseline a headline score is against."""

from __future__ import annotations

from typing import Any, Callable
from pathlib import Path
import json
import math
import os

import pytest
import torch

from kforge_harness import baselines

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.register_buffer("shift", torch.ones(features))

    def forward(self, x):
        return torch.relu(self.linear(x)) + self.shift


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''


def load(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "task", "exec"), namespace)
    return namespace


def test_the_compiled_reference_keeps_the_reference_names_and_compiles_its_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str | None] = []

    def fake_compile(fn: Callable[..., Any], mode: str | None = None) -> Callable[..., Any]:
        calls.append(mode)
        return lambda *args: fn(*args) * 1.0

    monkeypatch.setattr(torch, "compile", fake_compile)
    ns = load(baselines.compiled_source(TASK, "max-autotune"))
    model, reference = ns["ModelNew"](8), ns["Model"](8)
    assert calls == ["max-autotune"]
    # The judge aligns parameters and buffers by name: no `_orig_mod.` prefix.
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in reference.named_parameters()]
    assert [n for n, _ in model.named_buffers()] == ["shift"]
    reference.load_state_dict(model.state_dict())
    x = torch.randn(4, 8)
    assert torch.equal(model(x), reference(x)), "the compiled forward is the task's forward"


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown torch.compile mode 'fast'"):
        baselines.compiled_source(TASK, "fast")


def test_the_cache_key_depends_on_the_baseline_key_and_the_mode() -> None:
    keys = {baselines.cache_key(k, m) for k in ("a", "b") for m in ("default", "max-autotune")}
    assert len(keys) == 4


def test_the_cache_keeps_figures_and_failures_and_ignores_what_it_cannot_trust(tmp_path: Path) -> None:
    measured = baselines.figures("default", 12.5, {"median_ms": 2.0},
                                 {"median_ms": 1.6, "ci_low_ms": 1.59, "ci_high_ms": 1.61}, (1.2, 1.3))
    baselines.write_cached(str(tmp_path), "k1", dict(measured, cached=False))
    assert baselines.read_cached(str(tmp_path), "k1") == measured, "the `cached` mark is not stored"
    failed = baselines.unavailable("default", "it failed to compile", 3.0)
    baselines.write_cached(str(tmp_path), "k2", failed)
    assert (baselines.read_cached(str(tmp_path), "k2") or {})["error"] == "it failed to compile"
    assert baselines.read_cached(str(tmp_path), "missing") is None
    assert baselines.read_cached(None, "k1") is None
    for key, text in (("bad", "{not json"), ("zero", json.dumps({"mode": "default", "error": None, "median_ms": 0})),
                      ("mode", json.dumps({"mode": "turbo", "error": "x"})), ("list", "[1]")):
        with open(os.path.join(tmp_path, key + ".compile.json"), "w") as f:
            f.write(text)
        assert baselines.read_cached(str(tmp_path), key) is None, key


def test_figures_record_the_speedup_over_eager_and_its_interval() -> None:
    record = baselines.figures("default", 20.0, {"median_ms": 3.0}, {"median_ms": 2.0, "noisy": True}, (1.4, 1.6))
    assert record["speedup_over_eager"] == 1.5
    assert (record["speedup_low"], record["speedup_high"]) == (1.4, 1.6)
    assert record["noisy"] and record["error"] is None and record["compile_s"] == 20.0


def test_the_score_against_compile_divides_and_combines_both_intervals() -> None:
    value, low, high = baselines.divided(1.2, 1.17, 1.23, 1.5, 1.48, 1.52)
    assert value == pytest.approx(0.8)
    below = math.hypot(math.log(1.2 / 1.17), math.log(1.52 / 1.5))
    above = math.hypot(math.log(1.23 / 1.2), math.log(1.5 / 1.48))
    assert low == pytest.approx(0.8 * math.exp(-below))
    assert high == pytest.approx(0.8 * math.exp(above))
    assert low is not None and high is not None
    assert low < 0.8 * 1.17 / 1.2 and high > 0.8 * 1.23 / 1.2, "wider than the score's own interval"
    assert baselines.divided(1.2, None, None, 1.5, 1.4, 1.6) == (pytest.approx(0.8), None, None)  # type: ignore[comparison-overlap]


COMPILED: dict[str, Any] = {"mode": "default", "error": None, "speedup_over_eager": 1.5, "speedup_low": 1.48, "speedup_high": 1.52}
SLOWER = dict(COMPILED, speedup_over_eager=0.9)
TIED = dict(COMPILED, speedup_over_eager=1.004, speedup_low=0.99, speedup_high=1.01)
FAILED: dict[str, Any] = {"mode": "default", "error": "it failed to compile"}


@pytest.mark.parametrize("choice, compiled, used, says", [
    ("eager", COMPILED, "eager", "baseline = eager"),
    ("compile", COMPILED, "compile", "baseline = compile"),
    ("best", COMPILED, "compile", "torch.compile is 1.50x as fast as eager"),
    ("best", SLOWER, "eager", "eager is as fast as torch.compile (0.90x)"),
    ("best", TIED, "eager", "cannot be told apart (1.00x [0.99-1.01]), scored against eager"),
    ("compile", FAILED, "eager", "scored against eager: it failed to compile"),
    ("best", None, "eager", "scored against eager: no torch.compile figures"),
])
def test_the_headline_baseline(choice: str, compiled: dict[str, Any] | None, used: str, says: str) -> None:
    got, why = baselines.choose(choice, compiled)
    assert got == used and says in why


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError):
        baselines.choose("fastest", COMPILED)


def test_an_evaluation_gets_the_score_against_compile_and_its_headline() -> None:
    timing: dict[str, Any] = {"score": 1.2, "score_low": 1.17, "score_high": 1.23}
    baselines.against_compile(timing, COMPILED, "best")
    assert timing["score_vs_compile"] == pytest.approx(0.8)
    assert timing["score_vs_compile_low"] < 0.8 < timing["score_vs_compile_high"]
    assert timing["baseline"] == "compile" and timing["compile"] is COMPILED
    timing = {"score": 1.2, "score_low": 1.17, "score_high": 1.23}
    baselines.against_compile(timing, FAILED, "best")
    assert "score_vs_compile" not in timing and timing["baseline"] == "eager"
    # A task check has no kernel score: the figures and the baseline, nothing to divide.
    timing = {"score": None}
    baselines.against_compile(timing, COMPILED, "eager")
    assert "score_vs_compile" not in timing and timing["baseline"] == "eager"


@pytest.mark.parametrize("choice, says", [
    ("eager", "baseline = eager"),
    ("best", "baseline = best, scored against eager until torch.compile's figure"),
])
def test_a_deferred_figure_leaves_the_headline_against_eager_for_now(choice: str, says: str) -> None:
    timing: dict[str, Any] = {"score": 1.2, "score_low": 1.17, "score_high": 1.23}
    baselines.deferred(timing, choice)
    assert timing["compile"] is None and timing["compile_deferred"] == "pending"
    assert timing["baseline"] == "eager" and timing["baseline_reason"].startswith(says)
    with pytest.raises(ValueError):
        baselines.deferred({}, "fastest")


@pytest.mark.parametrize("choice", baselines.CHOICES)
@pytest.mark.parametrize("compiled", [COMPILED, SLOWER, TIED, FAILED])
def test_a_rescored_timing_is_what_the_judge_scores_with_the_figure(choice: str,
                                                                    compiled: dict[str, Any]) -> None:
    """The deferred evaluation's timing, re-scored once the figure came, holds what the judge
    would have written had the figure been cached, and says it came after the verdict."""
    first: dict[str, Any] = {"score": 1.2, "score_low": 1.17, "score_high": 1.23}
    judged = baselines.against_compile(dict(first), compiled, choice)
    later = baselines.rescored(baselines.deferred(dict(first), choice), compiled, choice)
    assert later.pop("compile_deferred") == baselines.AFTER_VERDICT
    assert later == judged


def test_the_rescore_op_answers_with_the_rescored_timing() -> None:
    from kforge_harness import envelope, server

    request = envelope.parse_request({"op": "rescore", "id": "r1", "timing": {"score": 1.2, "compile": None,
                                                                              "compile_deferred": "pending"},
                                      "compiled": COMPILED, "choice": "best"})
    assert isinstance(request, envelope.Rescore)
    message = server.rescore(request).message()
    assert message["event"] == "rescored" and message["id"] == "r1"
    timing = message["timing"]
    assert timing["score_vs_compile"] == pytest.approx(0.8) and timing["baseline"] == "compile"
    assert timing["compile_deferred"] == "after_verdict" and timing["compile"] == COMPILED
    assert request.timing["compile_deferred"] == "pending", "the request's timing is not written"
