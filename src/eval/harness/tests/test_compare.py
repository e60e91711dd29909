"""Comparison and the scale-aware tolerance."""

import pytest
import torch

from kforge_harness.compare import compare_outputs, effective_atol, weak_outputs


def test_effective_atol_scales_only_small_outputs():
    assert effective_atol(1e-2, 5.0, "scaled") == 1e-2
    assert effective_atol(1e-2, 1e-3, "scaled") == pytest.approx(2e-5)
    assert effective_atol(1e-2, 0.0, "scaled") == 1e-7
    assert effective_atol(1e-2, 1e-3, "kernelbench") == 1e-2
    with pytest.raises(ValueError):
        effective_atol(1e-2, 1.0, "loose")


def softmax_like():
    torch.manual_seed(0)
    return torch.softmax(torch.rand(64, 1000), dim=1)  # every value about 1e-3


def test_zeros_cannot_match_an_output_below_atol():
    ref = softmax_like()
    passed, reports, reason, tolerance = compare_outputs(ref, torch.zeros_like(ref), 1e-2, 1e-2)
    assert not passed and "scaled to the output's magnitude" in reason
    assert tolerance["effective_atol"]["out"] < 1e-4


def test_a_constant_cannot_either():
    ref = softmax_like()
    passed, _, _, _ = compare_outputs(ref, torch.full_like(ref, 1e-3), 1e-2, 1e-2)
    assert not passed


def test_kernelbench_mode_passes_zeros_and_they_are_weak():
    ref = softmax_like()
    passed, reports, _, _ = compare_outputs(ref, torch.zeros_like(ref), 1e-2, 1e-2, "kernelbench")
    assert passed
    assert weak_outputs([{"outputs": reports}]) == ["out"]


def test_honest_low_precision_results_still_pass():
    ref = softmax_like()
    honest = ref.to(torch.bfloat16).to(torch.float32)
    assert compare_outputs(ref, honest, 1e-2, 1e-2)[0]
    big = torch.randn(100, 100)
    assert compare_outputs(big, big + 5e-3, 1e-2, 1e-2)[0], "ordinary magnitudes keep atol"


def test_structure_shape_dtype_and_nan():
    ref = (torch.ones(3), torch.zeros(2))
    assert "structure" in compare_outputs(ref, (torch.ones(3),), 1e-2, 1e-2)[2]
    assert "shape" in compare_outputs(torch.ones(3), torch.ones(4), 1e-2, 1e-2)[2]
    assert "dtype" in compare_outputs(torch.ones(3), torch.ones(3, dtype=torch.float64), 1e-2, 1e-2)[2]
    bad = torch.ones(3)
    bad[1] = float("nan")
    assert "NaN" in compare_outputs(torch.ones(3), bad, 1e-2, 1e-2)[2]


def test_meta_stand_ins_report_shape_without_reading_data():
    meta = torch.empty((5,), dtype=torch.float32, device="meta")
    passed, _, reason, _ = compare_outputs(torch.ones(3), meta, 1e-2, 1e-2)
    assert not passed and "shape [5]" in reason
