"""Comparison and the scale-aware tolerance."""

from __future__ import annotations

import math
import random
import re
from typing import Any, Callable

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from kforge_harness import compare
from kforge_harness.compare import compare_outputs, effective_atol, weak_outputs


def test_effective_atol_scales_only_small_outputs() -> None:
    assert effective_atol(1e-2, 5.0, "scaled") == 1e-2
    assert effective_atol(1e-2, 1e-3, "scaled") == pytest.approx(2e-5)
    assert effective_atol(1e-2, 0.0, "scaled") == 1e-7
    assert effective_atol(1e-2, 1e-3, "kernelbench") == 1e-2
    with pytest.raises(ValueError):
        effective_atol(1e-2, 1.0, "loose")


def softmax_like() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.softmax(torch.rand(64, 1000), dim=1)  # every value about 1e-3


def test_zeros_cannot_match_an_output_below_atol() -> None:
    ref = softmax_like()
    passed, reports, reason, tolerance = compare_outputs(ref, torch.zeros_like(ref), 1e-2, 1e-2)
    assert not passed and "scaled to the output's magnitude" in (reason or "")
    assert tolerance["effective_atol"]["out"] < 1e-4


def test_a_constant_cannot_either() -> None:
    ref = softmax_like()
    passed, _, _, _ = compare_outputs(ref, torch.full_like(ref, 1e-3), 1e-2, 1e-2)
    assert not passed


def test_kernelbench_mode_passes_zeros_and_they_are_weak() -> None:
    ref = softmax_like()
    passed, reports, _, _ = compare_outputs(ref, torch.zeros_like(ref), 1e-2, 1e-2, "kernelbench")
    assert passed
    assert weak_outputs([{"outputs": reports}]) == ["out"]


def test_honest_low_precision_results_still_pass() -> None:
    ref = softmax_like()
    honest = ref.to(torch.bfloat16).to(torch.float32)
    assert compare_outputs(ref, honest, 1e-2, 1e-2)[0]
    big = torch.randn(100, 100)
    assert compare_outputs(big, big + 5e-3, 1e-2, 1e-2)[0], "ordinary magnitudes keep atol"


def test_structure_shape_dtype_and_nan() -> None:
    ref = (torch.ones(3), torch.zeros(2))
    assert "structure" in (compare_outputs(ref, (torch.ones(3),), 1e-2, 1e-2)[2] or "")
    assert "shape" in (compare_outputs(torch.ones(3), torch.ones(4), 1e-2, 1e-2)[2] or "")
    assert "dtype" in (compare_outputs(torch.ones(3), torch.ones(3, dtype=torch.float64), 1e-2, 1e-2)[2] or "")
    bad = torch.ones(3)
    bad[1] = float("nan")
    assert "NaN" in (compare_outputs(torch.ones(3), bad, 1e-2, 1e-2)[2] or "")


def test_meta_stand_ins_report_shape_without_reading_data() -> None:
    meta = torch.empty((5,), dtype=torch.float32, device="meta")
    passed, _, reason, _ = compare_outputs(torch.ones(3), meta, 1e-2, 1e-2)
    assert not passed and "shape [5]" in (reason or "")


# --- Chunked comparison, checked against a whole-tensor float64 oracle ---------------------


def oracle(r: torch.Tensor, n: torch.Tensor, atol: float, rtol: float, mode: str) -> dict[str, Any]:
    """The comparison rules on whole tensors in float64: what compare_tensor must find."""
    if r.is_complex():
        r, n = torch.view_as_real(r), torch.view_as_real(n)
    if not r.is_floating_point():
        differs = n != r
        first = differs.nonzero()[0].tolist() if differs.any() else None
        return {"category": "integer" if differs.any() else None, "bad": int(differs.sum()), "first": first}
    r64, n64 = r.double(), n.double()
    ref_finite, new_finite = torch.isfinite(r64), torch.isfinite(n64)
    scale = float(r64.abs()[ref_finite].max()) if ref_finite.any() else 0.0
    atol_eff = effective_atol(atol, scale, mode)
    both = ref_finite & new_finite
    abs_err = torch.where(both, (n64 - r64).abs(), torch.zeros_like(r64))
    abs_ref = r64.abs()
    rel_err = torch.where(both & (abs_ref >= atol_eff), abs_err / abs_ref.clamp_min(1e-30), torch.zeros_like(r64))
    if mode == "kernelbench":
        # KernelBench's rule is torch.allclose itself, in the outputs' own dtype.
        not_close = ~torch.isclose(r, n, rtol=rtol, atol=atol)
        bad = both & not_close
        special = int((~ref_finite & not_close).sum())
    else:
        bad = both & (abs_err > atol_eff + rtol * abs_ref)
        special = int((~ref_finite & ~((torch.isnan(r64) & torch.isnan(n64)) | (r64 == n64))).sum())
    lost = int((ref_finite & ~new_finite).sum())
    count = int(bad.sum())
    category: str | None
    if lost:
        category, bad_elements = "lost", lost
    elif special:
        category, bad_elements = "special", special
    else:
        category, bad_elements = ("tolerance" if count else None), count
    first = bad.nonzero()[0].tolist() if category == "tolerance" else None
    return {"category": category, "bad": bad_elements, "first": first,
            "max_abs_err": float(abs_err.max()) if r64.numel() else 0.0,
            "max_rel_err": float(rel_err.max()) if r64.numel() else 0.0,
            "max_abs_ref": scale, "atol_effective": atol_eff}


REASON_PATTERNS = {
    "lost": r"(\d+) elements are NaN/Inf where the reference is finite",
    "special": r"(\d+) elements differ where the reference is NaN/Inf",
    "tolerance": r"(\d+) of \d+ elements outside tolerance .* first at (\[[\d, ]*\]):",
    "integer": r"(\d+) of \d+ elements differ \(integer output must match exactly; first at (\[[\d, ]*\]):",
}


def check_against_oracle(ref: torch.Tensor, new: torch.Tensor, atol: float, rtol: float, mode: str) -> dict[str, Any]:
    expected = oracle(ref, new, atol, rtol, mode)
    passed, reports, reason, tolerance = compare_outputs(ref, new, atol, rtol, mode)
    report = reports[0]
    context = "expected %r, got %r / %r" % (expected, reason, report)
    assert passed == (expected["category"] is None), context
    assert report["bad_elements"] == expected["bad"], context
    assert report["numel"] == (torch.view_as_real(ref) if ref.is_complex() else ref).numel()
    if expected["category"] is not None:
        match = re.search(REASON_PATTERNS[expected["category"]], reason or "")
        assert match, context
        assert int(match.group(1)) == expected["bad"], context
        if expected["first"] is not None:
            assert match.group(2) == str(expected["first"]), context
    if "max_abs_err" in expected:
        assert report["max_abs_ref"] == expected["max_abs_ref"]
        assert report["atol_effective"] == expected["atol_effective"]
        assert tolerance["effective_atol"]["out"] == expected["atol_effective"]
        assert report["max_abs_err"] == pytest.approx(expected["max_abs_err"], rel=1e-5, abs=1e-30), context
        assert report["max_rel_err"] == pytest.approx(expected["max_rel_err"], rel=1e-5, abs=1e-30), context
    return expected


SHAPES = [(), (0,), (1,), (1, 1), (13,), (5, 7), (7, 5), (3, 4, 5), (2, 1, 9, 3), (17, 11), (4, 0, 3), (64,)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.bool, torch.complex64]
TOLERANCES = [(1e-2, 1e-2), (1e-3, 1e-3), (1e-4, 0.0), (0.0, 1e-2)]


def laid_out(values: torch.Tensor, layout: str) -> torch.Tensor:
    """The same logical values with other strides: transposed storage or a stepped slice."""
    if layout == "transposed" and values.dim() >= 2:
        order = list(reversed(range(values.dim())))
        return values.permute(order).contiguous().permute(order)
    if layout == "strided" and values.dim() >= 1:
        big = torch.zeros([2 * s + 1 for s in values.shape], dtype=values.dtype)
        view = big[tuple(slice(1, None, 2) for _ in values.shape)]
        view.copy_(values)
        return view
    return values


def random_reference(rng: random.Random, shape: tuple[int, ...], real_dtype: torch.dtype, layout: str) -> torch.Tensor:
    """A reference of these logical values; 'expanded' repeats values along some dims."""
    base_shape = list(shape)
    if layout == "expanded":
        for d, size in enumerate(shape):
            if size > 1 and rng.random() < 0.6:
                base_shape[d] = 1
    magnitude = rng.choice([1e-3, 1.0, 100.0])
    base = torch.randn(base_shape, dtype=torch.float64) * magnitude
    if rng.random() < 0.3 and base.numel():  # NaN/Inf in the reference
        flat = base.view(-1)
        for i in rng.sample(range(flat.numel()), max(1, flat.numel() // 10)):
            flat[i] = rng.choice([math.nan, math.inf, -math.inf])
    base = base.to(real_dtype)
    return base.expand(shape) if layout == "expanded" else laid_out(base, layout)


def random_new(rng: random.Random, ref: torch.Tensor, atol: float, rtol: float, mode: str) -> torch.Tensor:
    """The kernel's output: the reference within tolerance, some elements far outside it,
    some NaN/Inf; none near a threshold (float32 and float64 rounding must agree)."""
    r64 = ref.double()
    ref_finite = torch.isfinite(r64)
    scale = float(r64.abs()[ref_finite].max()) if ref_finite.any() else 0.0
    atol_eff = effective_atol(atol, scale, mode)
    bound = atol_eff + rtol * r64.abs()
    shape = ref.shape
    error = (torch.rand(shape, dtype=torch.float64) - 0.5) * bound
    bad_rate = rng.choice([0.0, 0.0, 0.01, 0.2, 1.0])
    far = torch.rand(shape, dtype=torch.float64) < bad_rate
    sign = torch.where(torch.rand(shape) < 0.5, -1.0, 1.0).double()
    error = torch.where(far, sign * (2 + 8 * torch.rand(shape, dtype=torch.float64)) * bound, error)
    new = torch.where(ref_finite, r64 + error, r64).contiguous()
    flat = new.view(-1)
    if flat.numel() and rng.random() < 0.2:  # NaN/Inf in the kernel's output
        for i in rng.sample(range(flat.numel()), max(1, flat.numel() // 20)):
            flat[i] = rng.choice([math.nan, math.inf, -math.inf, 0.5])
    special = (~ref_finite).reshape(-1).nonzero().view(-1).tolist()
    if special and rng.random() < 0.4:  # not the reference's NaN/Inf
        for i in rng.sample(special, rng.randint(1, len(special))):
            flat[i] = rng.choice([v for v in (math.nan, math.inf, -math.inf, 0.5) if not (
                v == flat[i] or (math.isnan(v) and math.isnan(flat[i])))])
    new = new.to(ref.dtype)
    # Rounding to the dtype may land an element on a threshold: make those exact.
    n64 = new.double()
    both = ref_finite & torch.isfinite(n64)
    abs_err, abs_ref = (n64 - r64).abs(), r64.abs()
    near = both & (((abs_err - bound).abs() <= 1e-3 * bound) | ((abs_ref - atol_eff).abs() <= 1e-3 * atol_eff))
    return torch.where(near, ref.contiguous(), new)


def random_case(rng: random.Random, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, float, float, str]:
    shape = rng.choice(SHAPES)
    atol, rtol = rng.choice(TOLERANCES)
    mode = rng.choice(["scaled", "kernelbench"])
    ref_layout = rng.choice(["contiguous", "transposed", "strided", "expanded"])
    new_layout = rng.choice(["contiguous", "transposed", "strided"])
    if not (dtype.is_floating_point or dtype.is_complex):
        if dtype == torch.bool:
            base = torch.rand(shape) < 0.5
        else:
            base = torch.randint(-50, 50, shape, dtype=dtype)
        ref = laid_out(base, ref_layout) if ref_layout != "expanded" else base
        new = base.clone()
        if new.numel() and rng.random() < 0.6:
            flat = new.view(-1)
            for i in rng.sample(range(flat.numel()), rng.randint(1, flat.numel())):
                flat[i] = (~flat[i]) if dtype == torch.bool else flat[i] + 1
        return ref, laid_out(new, new_layout), atol, rtol, mode
    if dtype.is_complex:
        real_ref = random_reference(rng, tuple(shape) + (2,), torch.float32, "contiguous")
        real_new = random_new(rng, real_ref, atol, rtol, mode)
        ref = laid_out(torch.view_as_complex(real_ref), ref_layout if ref_layout != "expanded" else "strided")
        return ref, laid_out(torch.view_as_complex(real_new.contiguous()), new_layout), atol, rtol, mode
    ref = random_reference(rng, shape, dtype, ref_layout)
    new = random_new(rng, ref, atol, rtol, mode)
    return ref, laid_out(new, new_layout), atol, rtol, mode


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 24])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_chunked_comparison_matches_the_oracle(monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, chunk: int) -> None:
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", chunk)
    rng = random.Random("%s/%d" % (dtype, chunk))
    torch.manual_seed(rng.randrange(1 << 30))
    categories = set()
    for _ in range(60):
        ref, new, atol, rtol, mode = random_case(rng, dtype)
        categories.add(check_against_oracle(ref, new, atol, rtol, mode)["category"])
    # The random cases reach every verdict the dtype can have.
    if dtype.is_floating_point or dtype.is_complex:
        assert categories == {None, "lost", "special", "tolerance"}
    else:
        assert categories == {None, "integer"}


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_first_bad_element_at_every_position_across_chunk_boundaries(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 7)
    base = torch.rand(5, 8) + 1
    ref = laid_out(base, layout)
    for position in range(base.numel()):
        new = base.clone()
        new.view(-1)[position:] += 1  # bad from here to the end, over later chunks too
        passed, reports, reason, _ = compare_outputs(ref, new, 1e-2, 1e-2)
        assert not passed
        assert reports[0]["bad_elements"] == base.numel() - position
        assert "first at %s:" % [position // 8, position % 8] in (reason or "")
        assert reports[0]["max_abs_err"] == pytest.approx(1.0, rel=1e-5)


def test_bad_elements_on_both_sides_of_a_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 7)
    ref = torch.ones(3, 10).t()  # (10, 3), transposed: pieces of 2 rows
    new = ref.contiguous()
    new[4, 2] = 5.0  # flat 14, the first element of a chunk of the contiguous kernel output
    new[4, 1] = 3.0  # flat 13, the last of the one before
    new[9, 0] = -1.0
    passed, reports, reason, _ = compare_outputs(ref, new, 1e-2, 1e-2)
    assert not passed and reports[0]["bad_elements"] == 3
    assert "first at [4, 1]: 3 vs reference 1" in (reason or "")
    assert reports[0]["max_abs_err"] == 4.0 and reports[0]["max_rel_err"] == 4.0
    integers = torch.arange(30, dtype=torch.int32).view(10, 3)
    changed = integers.t().contiguous().t().clone()
    changed[4, 1] = -7
    reason = compare_outputs(integers, changed, 1e-2, 1e-2)[2]
    assert "1 of 30 elements differ" in (reason or "") and "first at [4, 1]: -7 vs 13" in (reason or "")


def test_reference_nan_and_inf_must_be_matched_exactly() -> None:
    ref = torch.tensor([1.0, math.nan, math.inf, -math.inf, 2.0])
    assert compare_outputs(ref, ref.clone(), 1e-2, 1e-2)[0]
    for i, value in [(1, 0.0), (2, -math.inf), (3, math.nan), (2, 1e30)]:
        new = ref.clone()
        new[i] = value
        passed, reports, reason, _ = compare_outputs(ref, new, 1e-2, 1e-2)
        assert not passed and "1 elements differ where the reference is NaN/Inf" in (reason or "")
    new = ref.clone()
    new[0] = math.inf
    reason = compare_outputs(ref, new, 1e-2, 1e-2)[2]
    assert "1 elements are NaN/Inf where the reference is finite" in (reason or "")


def test_report_fields_of_a_passing_comparison() -> None:
    ref = torch.tensor([[0.5, -4.0], [1e-5, 2.0]], dtype=torch.float64)
    new = ref + torch.tensor([[0.001, -0.002], [0.0, 0.0]], dtype=torch.float64)
    passed, reports, reason, tolerance = compare_outputs(ref, new, 1e-2, 1e-2)
    assert passed and reason is None
    report = reports[0]
    assert report["max_abs_ref"] == 4.0 and report["numel"] == 4 and report["bad_elements"] == 0
    assert report["atol"] == 1e-2 and report["atol_effective"] == 1e-2
    assert report["max_abs_err"] == pytest.approx(0.002)
    assert report["max_rel_err"] == pytest.approx(0.002)  # 0.001 / 0.5; 1e-5 is below atol
    assert compare.reference_scale(torch.tensor([math.nan, -3.0, math.inf])) == 3.0
    assert compare.reference_scale(torch.empty(0)) == 0.0


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 20, 1000])
def test_chunks_cover_tensors_in_logical_order(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", limit)
    torch.manual_seed(1)
    x = torch.randn(4, 5, 6)
    cases = [x, x.permute(2, 0, 1), x[:, ::2, 1:], torch.randn(5, 1).expand(5, 9), x[1], x[0, 0, 0],
             torch.randn(3, 1, 200)[:, :, ::3]]
    for t in cases:
        for other in (t.contiguous(), laid_out(t.contiguous(), "transposed")):
            chunks = list(compare._chunks(t, other))
            offsets = [c[0] for c in chunks]
            assert offsets == sorted(offsets) and (not chunks or offsets[0] == 0)
            assert all(c[1].dim() == 1 and 0 < c[1].numel() <= limit for c in chunks)
            assert torch.equal(torch.cat([c[1] for c in chunks]), t.reshape(-1))
            assert torch.equal(torch.cat([c[2] for c in chunks]), t.reshape(-1))
            assert [c[0] + c[1].numel() for c in chunks][:-1] == offsets[1:]


class LargestAllocation(TorchDispatchMode):
    """Records the largest storage an operation allocates (views and in-place results share
    their input's storage and do not count)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.largest: int = 0
        self.op: Any = None

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                if t.untyped_storage().nbytes() > self.largest:
                    self.largest, self.op = t.untyped_storage().nbytes(), func
        return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.complex64],
                         ids=str)
@pytest.mark.parametrize("layout", ["transposed", "expanded", "strided", "contiguous"])
def test_no_temporary_is_larger_than_a_few_chunks(monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, layout: str) -> None:
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 64)
    torch.manual_seed(2)
    if layout == "expanded":
        ref = (torch.randn(1, 60) * 10).to(dtype).expand(50, 60)
    else:
        ref = laid_out((torch.randn(60, 50) * 10).to(dtype), layout)
    wrong = ref.contiguous().clone()
    wrong.view(-1)[-1] += 1  # the whole of both tensors is read before the verdict
    for new in (ref.contiguous(), wrong):
        spy = LargestAllocation()
        with spy:
            passed, _, reason, _ = compare_outputs(ref, new, 1e-2, 1e-2)
        assert passed == (new is not wrong), reason
        # A float64 or int64 chunk is 64 * 8 bytes; the tensors are 3,000 elements.
        assert spy.largest <= 2 * 64 * 8, "%s allocated %d bytes" % (spy.op, spy.largest)


class HostReads(TorchDispatchMode):
    """Counts the reads of a tensor's value by the host (.item(), float(), bool()): each one
    waits for the GPU."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default):
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=str)
def test_host_reads_do_not_grow_with_the_number_of_chunks(monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype) -> None:
    ref = (torch.randn(30, 40) * 10).to(dtype).t()
    wrong = ref.contiguous()
    wrong[3:, :] += 1
    reads = []
    for chunk in (7, 1 << 24):
        monkeypatch.setattr(compare, "CHUNK_ELEMENTS", chunk)
        for new in (ref.contiguous(), wrong):
            spy = HostReads()
            with spy:
                compare_outputs(ref, new, 1e-2, 1e-2)
            reads.append(spy.count)
    assert reads[:2] == reads[2:], reads  # 200 pieces or one: the same host reads


def test_identical_outputs_take_the_one_pass_path_with_the_same_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    r = torch.randn(37, 11).t()  # strided, as a reference may return
    n = r.contiguous()
    fast = compare.compare_outputs(r, n, 1e-2, 1e-2)
    calls: list[Any] = []
    monkeypatch.setattr(compare, "_FloatTally",
                        lambda *a: calls.append(a) or (_ for _ in ()).throw(AssertionError))  # type: ignore[func-returns-value]
    assert compare.compare_outputs(r, n, 1e-2, 1e-2) == fast and not calls  # no tolerance analysis
    monkeypatch.undo()
    monkeypatch.setattr(compare, "_identical", lambda r, n: False)
    assert compare.compare_outputs(r, n, 1e-2, 1e-2) == fast  # the full analysis agrees
    n[3, 4] += 1.0
    monkeypatch.undo()
    passed, _, reason, _ = compare.compare_outputs(r, n, 1e-2, 1e-2)
    assert not passed and "first at [3, 4]" in (reason or "")


@pytest.mark.parametrize("layout", ["transposed", "strided", "contiguous"])
def test_all_finite_finds_nan_and_inf_anywhere_without_a_full_size_temporary(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 64)
    values = torch.randn(60, 50)
    assert compare.all_finite([laid_out(values, layout), (torch.arange(4), 3)])
    for bad in (math.nan, math.inf, -math.inf):
        poisoned = values.clone()
        poisoned[59, 49] = bad  # the last element in logical order
        tensor = laid_out(poisoned, layout)
        spy = LargestAllocation()
        with spy:
            assert not compare.all_finite({"out": [torch.ones(3), tensor]})
        assert spy.largest <= 2 * 64 * 8, "%s allocated %d bytes" % (spy.op, spy.largest)
    assert not compare.all_finite(torch.complex(torch.zeros(4), torch.tensor([0.0, 0.0, math.nan, 0.0])))
    assert compare.all_finite(torch.complex(torch.zeros(4), torch.ones(4)))


# --- Per-dtype tolerances (issue 22) ---------------------------------------------------------


def test_tolerance_table_per_dtype_and_policy() -> None:
    assert compare.dtype_tolerance(torch.float32) == 1e-4
    assert compare.dtype_tolerance("float16") == 1e-2
    assert compare.dtype_tolerance(torch.bfloat16) == 1e-2
    assert compare.dtype_tolerance(torch.float64) == 1e-9
    assert compare.dtype_tolerance(torch.complex64) == 1e-4
    assert compare.dtype_tolerance(torch.complex128) == 1e-9
    assert compare.dtype_tolerance(torch.float8_e4m3fn) == 0.125
    assert compare.dtype_tolerance(torch.float8_e5m2) == 0.25
    # TF32 changes float32 only.
    assert compare.dtype_tolerance(torch.float32, "tf32") == 1e-2
    assert compare.dtype_tolerance(torch.float16, "tf32") == 1e-2
    assert compare.dtype_tolerance(torch.float64, "tf32") == 1e-9
    # A floating dtype outside the table: float16's, or its own epsilon when coarser.
    assert compare.dtype_tolerance("float8_e8m0fnu") >= 1e-2
    assert compare.dtype_tolerance("no_such_dtype") == 1e-2


def test_explicit_tolerances_override_the_table_for_every_dtype() -> None:
    assert compare.tolerance_for(torch.float32) == (1e-4, 1e-4)
    assert compare.tolerance_for(torch.float16) == (1e-2, 1e-2)
    assert compare.tolerance_for(torch.float32, atol=1e-3) == (1e-3, 1e-4)
    assert compare.tolerance_for(torch.bfloat16, atol=1e-3, rtol=0.0) == (1e-3, 0.0)
    assert compare.tolerance_for(torch.float32, mode="kernelbench") == (1e-4, 1e-4)
    assert compare.tolerance_for(torch.float32, mode="kernelbench", precision="tf32") == (1e-2, 1e-2)
    # `scaled`: the one tolerance of kforge before per-dtype tolerances.
    assert compare.tolerance_for(torch.float32, mode="scaled") == (1e-2, 1e-2)
    assert compare.tolerance_for(torch.float64, mode="scaled", rtol=1e-5) == (1e-2, 1e-5)
    with pytest.raises(ValueError):
        compare.tolerance_for(torch.float32, mode="loose")


def gemm_like(seed: int = 0) -> torch.Tensor:
    """Outputs of magnitude ~1 with a fifth near zero, like a GEMM of normalized values."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(256, 256, generator=gen)


def test_a_tf32_sized_error_fails_fp32_by_default_and_passes_under_tf32() -> None:
    ref = gemm_like()
    # The error of a TF32 GEMM: ~5e-3 absolute on outputs of magnitude ~1 (measured 0.0048).
    tf32 = ref + 5e-3 * torch.sign(torch.randn(ref.shape, generator=torch.Generator().manual_seed(1)))
    passed, reports, reason, tolerance = compare_outputs(ref, tf32, mode="dtype")
    assert not passed and "atol 0.0001" in (reason or "") and "rtol 0.0001" in (reason or "")
    assert tolerance["outputs"]["out"] == {"dtype": "float32", "rule": "dtype", "atol": 1e-4, "rtol": 1e-4}
    assert tolerance["atol"] is None and tolerance["mode"] == "dtype" and tolerance["precision"] == "strict"
    assert reports[0]["atol"] == 1e-4 and reports[0]["rtol"] == 1e-4
    assert not compare_outputs(ref, tf32, mode="kernelbench")[0]
    passed, _, _, tolerance = compare_outputs(ref, tf32, mode="dtype", precision="tf32")
    assert passed and tolerance["outputs"]["out"]["atol"] == 1e-2
    # The person's explicit tolerance wins over the table (the old default accepts it).
    assert compare_outputs(ref, tf32, 1e-2, 1e-2)[0]
    assert compare_outputs(ref, tf32, mode="scaled")[0]


def test_an_honest_fp32_result_passes_the_fp32_tolerance() -> None:
    ref = gemm_like()
    # A float32 computation in another order: a few units in the last place.
    honest = (ref.double() * (1 + 4e-7 * torch.randn(ref.shape, dtype=torch.float64))).float()
    assert compare_outputs(ref, honest)[0]
    assert compare_outputs(ref, honest, mode="kernelbench")[0]
    # A half-precision rounding of it does not.
    assert not compare_outputs(ref, ref.half().float())[0]


def test_half_outputs_keep_their_own_tolerance_beside_fp32_ones() -> None:
    ref = (gemm_like(), gemm_like(2).half())
    new = (ref[0].clone(), (ref[1].float() * (1 + 3e-3)).half())
    passed, reports, reason, tolerance = compare_outputs(ref, new, mode="dtype")
    assert passed, reason
    assert tolerance["outputs"]["out[1]"] == {"dtype": "float16", "rule": "dtype", "atol": 1e-2, "rtol": 1e-2}
    assert tolerance["outputs"]["out[0]"]["atol"] == 1e-4
    new = ((ref[0].double() * (1 + 3e-3)).float(), new[1])
    passed, _, reason, _ = compare_outputs(ref, new, mode="dtype")
    assert not passed and (reason or "").startswith("out[0]")


def test_tiny_outputs_are_still_scaled_under_the_dtype_table() -> None:
    ref = softmax_like()  # ~1e-3 per element: above fp32's 1e-4, below the old 1e-2
    passed, reports, _, tolerance = compare_outputs(ref, torch.zeros_like(ref))
    assert not passed
    ref = ref * 1e-3  # ~1e-6: below 1e-4, zeros must not pass
    passed, reports, reason, tolerance = compare_outputs(ref, torch.zeros_like(ref))
    assert not passed and "scaled to the output's magnitude" in (reason or "")
    assert tolerance["effective_atol"]["out"] <= 1e-7


KERNELBENCH_TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}


def synthetic_pair(rng: random.Random, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A reference and a kernel's output with many elements near allclose's threshold, some
    NaN/Inf on either side."""
    tol = KERNELBENCH_TOLERANCE[dtype]
    shape = rng.choice([(37,), (9, 13), (4, 5, 6)])
    magnitude = rng.choice([1e-3, 1.0, 50.0])
    ref = (torch.randn(shape, dtype=torch.float64) * magnitude).to(dtype)
    # Errors from far inside to just outside atol + rtol * |new|, of either sign.
    bound = tol + tol * ref.double().abs()
    factor = torch.empty(shape, dtype=torch.float64).uniform_(0.0, 2.0)
    near = torch.rand(shape) < 0.5
    factor = torch.where(near, torch.empty(shape, dtype=torch.float64).uniform_(0.97, 1.03), factor)
    sign = torch.where(torch.rand(shape) < 0.5, -1.0, 1.0).double()
    new = (ref.double() + sign * factor * bound).to(dtype)
    if rng.random() < 0.3:
        flat_r, flat_n = ref.view(-1), new.view(-1)
        for i in rng.sample(range(flat_r.numel()), 3):
            special = rng.choice([math.nan, math.inf, -math.inf])
            flat_r[i] = special
            flat_n[i] = rng.choice([special, special, 0.0, math.nan])
    if rng.random() < 0.3:  # all close: the verdict is a pass unless NaN/Inf breaks it
        new = ref.clone()
    return ref, new


@pytest.mark.parametrize("dtype", list(KERNELBENCH_TOLERANCE), ids=str)
def test_kernelbench_mode_reproduces_torch_allclose_with_kernelbench_tolerances(monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype) -> None:
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 16)
    rng = random.Random(str(dtype))
    torch.manual_seed(rng.randrange(1 << 30))
    verdicts = set()
    for _ in range(300):
        ref, new = synthetic_pair(rng, dtype)
        tol = KERNELBENCH_TOLERANCE[dtype]
        expected = torch.allclose(ref, new, atol=tol, rtol=tol)
        passed, reports, reason, tolerance = compare_outputs(ref, new, mode="kernelbench")
        assert passed == expected, (ref, new, reason)
        assert reports[0]["atol_effective"] == tol  # never scaled
        verdicts.add(passed)
        # Explicit tolerances replace KernelBench's for every dtype.
        assert compare_outputs(ref, new, 0.05, 0.0, "kernelbench")[0] == torch.allclose(ref, new, atol=0.05, rtol=0.0)
    assert verdicts == {True, False}


def test_kernelbench_mode_nan_is_never_close_and_rtol_is_on_the_kernels_value() -> None:
    ref = torch.tensor([1.0, math.nan, math.inf])
    passed, _, reason, _ = compare_outputs(ref, ref.clone(), mode="kernelbench")
    assert not passed and "NaN is never close" in (reason or "")
    assert compare_outputs(ref, ref.clone())[0], "kforge's own rule matches NaN with NaN"
    # allclose's bound is atol + rtol * |new|: here inside it, though outside atol + rtol * |ref|.
    ref = torch.tensor([100.0], dtype=torch.float64)
    new = torch.tensor([100.010101], dtype=torch.float64)
    assert torch.allclose(ref, new, atol=1e-4, rtol=1e-4)
    assert compare_outputs(ref, new, 1e-4, 1e-4, mode="kernelbench")[0]
    assert not compare_outputs(ref, new, 1e-4, 1e-4, mode="dtype")[0]
