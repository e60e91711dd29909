"""Unit tests of the `oracle` rule's parts (oracle.py, compare.py): the float64 forward, the
sequential twin, the honest scale, the comparison's edge cases and its fallbacks."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import pytest
import torch

from kforge_harness import oracle
from kforge_harness.compare import compare_outputs, merge_tolerance


class Task(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any], weight: torch.Tensor | None = None) -> None:
        super().__init__()
        self.fn = fn
        self.weight: Any = torch.nn.Parameter(weight) if weight is not None else None

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.fn(self, *inputs)


def measured(model: Task, inputs: Sequence[torch.Tensor], family: str = "signed") -> tuple[Any, oracle.Oracle]:
    pending = oracle.prepare(family, "a test", model, inputs, "cpu")
    ref_out = model(*[t.clone() for t in inputs])
    return ref_out, oracle.finish(pending, ref_out)


# -- the float64 forward and the twin ---------------------------------------------------------

def test_the_float64_forward_widens_the_model_and_puts_it_back_exactly() -> None:
    torch.manual_seed(0)
    weight = torch.randn(64, 32)
    model = Task(lambda self, x: x @ self.weight, weight.clone())
    model.register_buffer("seen", torch.zeros(3))
    x = torch.randn(8, 64)
    out = oracle.float64_forward(model, [x])
    assert out.dtype == torch.float64
    assert torch.allclose(out, x.double() @ weight.double(), rtol=0, atol=1e-12)
    assert model.weight.dtype == torch.float32 and torch.equal(model.weight, weight)
    assert model.seen.dtype == torch.float32
    assert x.dtype == torch.float32


def test_a_reference_that_casts_to_float32_itself_is_no_oracle() -> None:
    model = Task(lambda self, x: (x.float() * 3).sum(dim=1))
    x = torch.randn(16, 256)
    ref_out, result = measured(model, [x])
    assert result.scales == {}
    assert "casts to float32 itself" in (result.reason or "")
    passed, reports, _, tolerance = compare_outputs(ref_out, ref_out.clone(), oracle=result)
    assert passed and reports[0]["fallback"] == result.reason
    assert tolerance["outputs"]["out"]["rule"] == "dtype"


def test_a_reference_without_a_float64_path_falls_back_with_its_reason() -> None:
    def forward(self: Task, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            raise TypeError("no double kernel here")
        return x * 2

    ref_out, result = measured(Task(forward), [torch.randn(4, 4)])
    assert result.reason == "the reference has no float64 path (TypeError: no double kernel here)"


def test_an_oracle_that_would_not_fit_is_not_attempted() -> None:
    calls: list[int] = []
    model = Task(lambda self, x: calls.append(1) or x * 2)  # type: ignore[func-returns-value]
    pending = oracle.prepare("random", "t", model, [torch.ones(3)], "cpu", room=(10 << 30, 1 << 30))
    assert (pending.reason or "").startswith("the float64 oracle would need about 10.0 GiB")
    assert calls == []


@pytest.mark.parametrize("op", [
    lambda x: x.sum(), lambda x: x.sum(dim=1), lambda x: x.sum(dim=(0, 2), keepdim=True),
    lambda x: x.mean(dim=-1), lambda x: x.mean(), lambda x: torch.cumsum(x, dim=1),
    lambda x: x.reshape(12, 200) @ torch.ones(200, 5),
    lambda x: torch.bmm(x, torch.ones(3, 200, 7)),
    lambda x: torch.nn.functional.linear(x, torch.ones(9, 200), torch.arange(9.0)),
    lambda x: torch.addmm(torch.ones(4, 7), x[0], torch.ones(200, 7), beta=0.5, alpha=2.0),
])
def test_the_sequential_twin_computes_the_same_function(op: Callable[[torch.Tensor], torch.Tensor]) -> None:
    torch.manual_seed(1)
    x = torch.randn(3, 4, 200)
    with torch.no_grad(), oracle.twin_mode():
        twin = op(x)
    expected = op(x)
    assert twin.dtype == expected.dtype and twin.shape == expected.shape
    assert torch.allclose(twin, expected, rtol=1e-5, atol=1e-4)


def test_the_twin_adds_in_order_so_its_error_is_a_sequential_sums() -> None:
    """A sum of values that a tree adds exactly and an ordered sum does not: 1 followed by
    many tiny values."""
    x = torch.full((1, 4096), 2.0 ** -25)
    x[0, 0] = 1.0
    with torch.no_grad(), oracle.twin_mode():
        twin = x.sum(dim=1)
    # Blocks of 8 tiny values (8 * 2^-25 = 2^-22) survive being added to 1 only as a
    # rounded multiple of 2^-23 (1's unit in the last place).
    exact = 1.0 + 4095 * 2.0 ** -25
    assert abs(twin.item() - exact) > 1e-8
    assert abs(twin.item() - exact) < 2.0 ** -10


# -- the honest scale ------------------------------------------------------------------------

def test_each_column_gets_its_own_level() -> None:
    """Columns scaled from 1e-3 to 1e3: the honest error of a small column is small, so a
    kernel that returns zeros there fails, while an honest reordering passes everywhere."""
    torch.manual_seed(2)
    scale = torch.logspace(-3, 3, 96)
    model = Task(lambda self, a, b: (a @ b) * scale)
    a, b = torch.randn(128, 512), torch.randn(512, 96)
    ref_out, result = measured(model, [a, b])
    s = result.scales["out"]
    assert 1 in s.axes
    honest = sum(a[:, i * 128:(i + 1) * 128] @ b[i * 128:(i + 1) * 128] for i in range(4)) * scale
    passed, reports, reason, _ = compare_outputs(ref_out, honest, oracle=result)
    assert passed, reason
    lazy = ref_out.clone()
    lazy[:, :8] = 0  # the smallest columns (scales 1e-3 to 2e-3) not computed
    passed, reports, reason, _ = compare_outputs(ref_out, lazy, oracle=result)
    assert not passed and reports[0]["bad_elements"] >= 0.9 * 128 * 8


def test_zeros_cannot_match_an_output_of_tiny_magnitude() -> None:
    torch.manual_seed(3)
    model = Task(lambda self, x: torch.softmax(x, dim=1))
    x = torch.randn(64, 4096)
    ref_out, result = measured(model, [x])
    passed, reports, reason, _ = compare_outputs(ref_out, torch.zeros_like(ref_out), oracle=result)
    assert not passed and reports[0]["error_ratio"] > 1e6
    honest = torch.exp(x - x.amax(1, keepdim=True))
    honest = honest / honest.sum(1, keepdim=True)
    assert compare_outputs(ref_out, honest, oracle=result)[0]


def test_an_exact_reference_allows_rounding_and_no_more_than_the_factor() -> None:
    """ReLU is exact in float32: the honest error is the rounding of the exact value, so a
    result one unit in the last place off passes (error ratio 2), bfloat16's rounding fails."""
    torch.manual_seed(4)
    model = Task(lambda self, x: torch.relu(x))
    x = torch.randn(256, 256)
    ref_out, result = measured(model, [x])
    passed, reports, _, _ = compare_outputs(ref_out, torch.nextafter(ref_out, torch.full_like(ref_out, 10.0)),
                                            oracle=result)
    assert passed and 1.0 < reports[0]["error_ratio"] <= 2.0 + 1e-9
    passed, reports, _, _ = compare_outputs(ref_out, ref_out.bfloat16().float(), oracle=result)
    assert not passed


def test_nan_and_inf_follow_the_reference() -> None:
    model = Task(lambda self, x: torch.log(x))
    x = torch.rand(64, 128) + 0.5
    x[0, 0], x[1, 1] = -1.0, 0.0  # NaN and -Inf in the reference
    ref_out, result = measured(model, [x])
    assert torch.isnan(ref_out[0, 0]) and torch.isinf(ref_out[1, 1])
    assert compare_outputs(ref_out, ref_out.clone(), oracle=result)[0]
    lost = ref_out.clone()
    lost[5, 5] = float("nan")
    passed, _, reason, _ = compare_outputs(ref_out, lost, oracle=result)
    assert not passed and "NaN/Inf where the reference is finite" in (reason or "")
    finite = ref_out.clone()
    finite[1, 1] = 0.0
    passed, _, reason, _ = compare_outputs(ref_out, finite, oracle=result)
    assert not passed and "where the reference is NaN/Inf" in (reason or "")


def test_integer_and_float64_outputs_are_not_the_oracles() -> None:
    model = Task(lambda self, x: (x.argmax(dim=1), x.double() * 2, x * 3))
    x = torch.randn(32, 64)
    ref_out, result = measured(model, [x])
    # x.double() in the float64 forward is no narrowing; the float64 output has no wider oracle.
    assert result.reason is None and "out[0]" not in result.scales
    assert "out[1]" in result.unavailable and "no wider oracle" in result.unavailable["out[1]"]
    assert "out[2]" in result.scales
    wrong = (ref_out[0].clone(), ref_out[1].clone(), ref_out[2].clone())
    wrong[0][3] += 1
    passed, reports, reason, tolerance = compare_outputs(ref_out, wrong, oracle=result)
    assert not passed and "integer output must match exactly" in (reason or "")
    assert tolerance["outputs"]["out[1]"]["rule"] == "dtype"
    assert tolerance["outputs"]["out[1]"]["fallback"].startswith("a float64 output")


def test_explicit_tolerances_select_the_dtype_rule() -> None:
    model = Task(lambda self, x: x.sum(dim=1))
    x = torch.randn(16, 512)
    ref_out, result = measured(model, [x])
    passed, reports, _, tolerance = compare_outputs(ref_out, ref_out + 5e-3, atol=1e-2, rtol=1e-2, oracle=result)
    assert passed and reports[0]["fallback"] == "atol/rtol set explicitly"
    assert tolerance["oracle"] is None


def test_a_reused_scale_compares_with_the_float32_reference() -> None:
    torch.manual_seed(5)
    model = Task(lambda self, a, b: a @ b)
    a, b = torch.randn(64, 700), torch.randn(700, 64)
    _, first = measured(model, [a, b], family="random")
    a2, b2 = torch.randn(64, 700), torch.randn(700, 64)
    ref = a2 @ b2
    honest = sum(a2[:, i * 175:(i + 1) * 175] @ b2[i * 175:(i + 1) * 175] for i in range(4))
    passed, reports, _, _ = compare_outputs(ref, honest, oracle=first.reused())
    assert passed
    assert reports[0]["oracle"] == "the float32 reference, under the honest error measured on a test"
    passed, reports, reason, _ = compare_outputs(ref, ref.bfloat16().float(), oracle=first.reused())
    assert not passed and "(the float32 reference)" in (reason or "")


def test_half_tasks_are_held_to_their_own_units() -> None:
    torch.manual_seed(6)
    model = Task(lambda self, a, b: a @ b)
    a, b = torch.randn(64, 1024).half(), (torch.randn(1024, 64) * 0.03).half()
    ref_out, result = measured(model, [a, b])
    assert result.scales["out"].factor == 16.0
    honest = (a.float() @ b.float()).half()
    assert compare_outputs(ref_out, honest, oracle=result)[0]
    f8 = (a.to(torch.float8_e4m3fn).float() @ (b.float() * 32).to(torch.float8_e4m3fn).float() / 32).half()
    passed, reports, _, _ = compare_outputs(ref_out, f8, oracle=result)
    assert not passed and reports[0]["error_ratio"] > 4 * 16


def test_the_summary_keeps_each_outputs_worst_float64_comparison() -> None:
    def summary(ratio: float, against: str, oracle: dict[str, str] | None = None) -> dict[str, Any]:
        return {"mode": "oracle", "outputs": {"out": {"rule": "oracle", "error_ratio": ratio, "oracle": against}},
                "effective_atol": {}, "oracle": oracle}

    first = summary(9.0, "float64 oracle", {"kind": "float64"})
    merged = merge_tolerance(first, summary(2.0, "float64 oracle"))
    assert merged["outputs"]["out"]["error_ratio"] == 9.0
    assert merged["oracle"] == {"kind": "float64"}
    assert merge_tolerance(merged, summary(20.0, "float64 oracle"))["outputs"]["out"]["error_ratio"] == 20.0
    # A reused scale's comparison (against the float32 reference) is not the margin beside a float64 one.
    assert merge_tolerance(merged, summary(30.0, "the float32 reference"))["outputs"]["out"]["error_ratio"] == 9.0
    reused = merge_tolerance(summary(3.0, "the float32 reference"), summary(4.0, "the float32 reference"))
    assert reused["outputs"]["out"]["error_ratio"] == 4.0


def test_room_needed_follows_the_plan() -> None:
    plan = {"inputs_bytes": 100, "outputs_bytes": 10, "reference_scratch_bytes": 5, "weights_bytes": 7}
    assert oracle.room_needed(plan) == max(2 * 100 + 2 * 10 + 2 * 5 + 7, 2 * 10 + 100 + 2 * 10 + 5)
    assert oracle.room_needed(None) == 0
    assert not math.isnan(oracle.room_needed({}))
