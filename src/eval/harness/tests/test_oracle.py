"""The `oracle` rule (oracle.py, compare.py) against Triton kernels run by the interpreter:
honest float32 orders (a sequential row sum, a blocked one, a split-K GEMM, a two-level
parallel scan, a 3xTF32 GEMM) pass by a wide margin, reduced precision (a float16
accumulator, bfloat16 or TF32 inputs) fails by a wide margin, on signed inputs (kforge's
extra trial, which puts outputs near zero: the case issue 35 found refused) and on the
task's own [0, 1) inputs.

Run: cd src/eval/harness && TRITON_INTERPRET=1 PYTHONPATH=<pytest-site>:. python -m pytest tests/test_oracle.py -q
"""

from __future__ import annotations

import os
from typing import Any, Callable, Tuple

os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first import of triton

import pytest
import torch
import triton
import triton.language as tl

from kforge_harness import oracle
from kforge_harness.compare import compare_outputs

# A wide margin: honest orders stay below LIMIT / MARGIN, reduced precision above LIMIT * MARGIN.
MARGIN = 4.0
LIMIT = oracle.FACTOR["float32"]


class Task(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.fn(*inputs)


def judged(fn: Callable[..., Any], inputs: list[torch.Tensor], kernel_out: torch.Tensor) -> tuple[bool, dict[str, Any], str | None]:
    """compare_outputs under the oracle rule, the oracle measured on these inputs as the
    judge does: (passed, the output's report)."""
    model = Task(fn)
    pending = oracle.prepare("signed", "test", model, inputs, "cpu")
    assert pending.reason is None, pending.reason
    ref_out = model(*[t.clone() for t in inputs])
    measured = oracle.finish(pending, ref_out)
    passed, reports, reason, tolerance = compare_outputs(ref_out, kernel_out, oracle=measured)
    assert tolerance["oracle"]["kind"] == "float64"
    print("error ratio %.3g" % reports[0]["error_ratio"])
    return passed, reports[0], reason


# -- row sums -------------------------------------------------------------------------------

@triton.jit  # type: ignore[untyped-decorator]  # Triton is untyped; it reads the annotations
def row_sum_sequential(x_ptr, out_ptr, R, C, BLOCK_R: tl.constexpr, HALF: tl.constexpr):  # type: ignore[no-untyped-def]
    """One column at a time into a per-row accumulator: float32, or float16 with HALF."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    mask = rows < R
    if HALF:
        acc = tl.zeros((BLOCK_R,), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for c in range(0, C):
        x = tl.load(x_ptr + rows * C + c, mask=mask, other=0.0)
        acc += x.to(acc.dtype)
    tl.store(out_ptr + rows, acc.to(tl.float32), mask=mask)


@triton.jit  # type: ignore[untyped-decorator]  # Triton is untyped; it reads the annotations
def row_sum_blocked(x_ptr, out_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, BF16: tl.constexpr):  # type: ignore[no-untyped-def]
    """A tree sum of each block of columns (tl.sum), the blocks added in order; the loads
    rounded to bfloat16 with BF16."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_R,), dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        mask = (rows[:, None] < R) & ((c0 + cols)[None, :] < C)
        x = tl.load(x_ptr + rows[:, None] * C + (c0 + cols)[None, :], mask=mask, other=0.0)
        if BF16:
            x = x.to(tl.bfloat16).to(tl.float32)
        acc += tl.sum(x, axis=1)
    tl.store(out_ptr + rows, acc, mask=rows < R)


def row_sum(x: torch.Tensor, kind: str) -> torch.Tensor:
    R, C = x.shape
    out = torch.empty(R, dtype=torch.float32)
    if kind in ("sequential", "float16 accumulator"):
        row_sum_sequential[(triton.cdiv(R, 1024),)](x, out, R, C, BLOCK_R=1024, HALF=kind != "sequential")
    else:
        row_sum_blocked[(triton.cdiv(R, 64),)](x, out, R, C, BLOCK_R=64, BLOCK_C=256, BF16=kind != "blocked")
    return out


@pytest.fixture(scope="module")
def signed_rows() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(1024, 8192)


@pytest.fixture(scope="module")
def summed(signed_rows: torch.Tensor) -> Callable[[str], torch.Tensor]:
    """Each kernel's row sums of signed_rows, computed once (the interpreter is slow)."""
    done: dict[str, torch.Tensor] = {}

    def get(kind: str) -> torch.Tensor:
        if kind not in done:
            done[kind] = row_sum(signed_rows, kind)
        return done[kind]
    return get


@pytest.mark.parametrize("kind", ["sequential", "blocked"])
def test_honest_row_sums_pass_by_a_wide_margin(signed_rows: torch.Tensor, summed: Callable[[str], torch.Tensor], kind: str) -> None:
    """Issue 35: a plain sequential float32 row sum of 8192 signed values was refused by the
    fixed atol (max abs err 9.6e-4)."""
    passed, report, reason = judged(lambda x: x.sum(dim=1), [signed_rows], summed(kind))
    assert passed, reason
    assert report["rule"] == "oracle" and report["oracle"] == "float64 oracle"
    assert report["error_ratio"] < LIMIT / MARGIN, report


@pytest.mark.parametrize("kind", ["float16 accumulator", "bfloat16 inputs"])
def test_reduced_precision_row_sums_fail_by_a_wide_margin(signed_rows: torch.Tensor, summed: Callable[[str], torch.Tensor], kind: str) -> None:
    passed, report, reason = judged(lambda x: x.sum(dim=1), [signed_rows], summed(kind))
    assert not passed
    assert report["error_ratio"] > LIMIT * MARGIN, report
    assert "beyond 128x the error honest float32 arithmetic makes" in (reason or "")
    assert "float64 oracle" in (reason or "")


def test_the_old_fixed_tolerance_refused_the_sequential_sum(signed_rows: torch.Tensor, summed: Callable[[str], torch.Tensor]) -> None:
    """The test's premise: under the `dtype` rule (atol = rtol = 1e-4) the same honest kernel
    fails, which is what the oracle rule fixes."""
    ref = signed_rows.sum(dim=1)
    passed, _, _, _ = compare_outputs(ref, summed("sequential"), mode="dtype")
    assert not passed


# -- GEMMs ----------------------------------------------------------------------------------

@triton.jit
def _tf32(x):  # type: ignore[no-untyped-def]
    """x truncated to TF32's 10 mantissa bits (as float32)."""
    return (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)


@triton.jit  # type: ignore[untyped-decorator]  # Triton is untyped; it reads the annotations
def gemm_split_k(a_ptr, b_ptr, ws_ptr, M, N, K, K_PER_SPLIT,  # type: ignore[no-untyped-def]
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, MATH: tl.constexpr):
    """One split of K into ws[split]; MATH 0: float32 ("ieee"), 1: 3xTF32, 2: TF32, 3: bfloat16."""
    pid_m, pid_n, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_begin = split * K_PER_SPLIT
    for k0 in range(k_begin, tl.minimum(k_begin + K_PER_SPLIT, K), BLOCK_K):
        ks = k0 + rk
        k_mask = (ks < K) & (ks < k_begin + K_PER_SPLIT)
        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + rn[None, :], mask=k_mask[:, None] & (rn[None, :] < N), other=0.0)
        if MATH == 1:
            a_hi = _tf32(a)
            b_hi = _tf32(b)
            a_lo = _tf32(a - a_hi)
            b_lo = _tf32(b - b_hi)
            acc += tl.dot(a_hi, b_lo, input_precision="ieee")
            acc += tl.dot(a_lo, b_hi, input_precision="ieee")
            acc += tl.dot(a_hi, b_hi, input_precision="ieee")
        elif MATH == 2:
            acc += tl.dot(_tf32(a), _tf32(b), input_precision="ieee")
        elif MATH == 3:
            # bfloat16 operands, float32 products and accumulation (as a bfloat16 tl.dot).
            acc += tl.dot(a.to(tl.bfloat16).to(tl.float32), b.to(tl.bfloat16).to(tl.float32), input_precision="ieee")
        else:
            acc += tl.dot(a, b, input_precision="ieee")
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(ws_ptr + split * M * N + rm[:, None] * N + rn[None, :], acc, mask=mask)


@triton.jit  # type: ignore[untyped-decorator]  # Triton is untyped; it reads the annotations
def add_splits(ws_ptr, c_ptr, MN, SPLITS: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLITS):
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc, mask=mask)


MATHS = {"float32": 0, "3xTF32": 1, "TF32": 2, "bfloat16": 3}


def gemm(a: torch.Tensor, b: torch.Tensor, math: str, splits: int) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    ws = torch.empty((splits, M, N), dtype=torch.float32)
    per = triton.cdiv(triton.cdiv(K, splits), 32) * 32
    gemm_split_k[(triton.cdiv(M, 32), triton.cdiv(N, 32), splits)](
        a, b, ws, M, N, K, per, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, MATH=MATHS[math])
    c = torch.empty((M, N), dtype=torch.float32)
    add_splits[(triton.cdiv(M * N, 1024),)](ws, c, M * N, SPLITS=splits, BLOCK=1024)
    return c


@pytest.fixture(scope="module")
def signed_gemm() -> tuple[torch.Tensor, torch.Tensor]:
    """K = 2949: the irregular-shapes KernelBench task where a 3xTF32 GEMM was refused."""
    torch.manual_seed(1)
    return torch.randn(64, 2949), torch.randn(2949, 96)


@pytest.mark.parametrize("math,splits", [("float32", 1), ("float32", 4), ("3xTF32", 1), ("3xTF32", 3)])
def test_honest_gemms_pass_by_a_wide_margin(signed_gemm: tuple[torch.Tensor, torch.Tensor], math: str, splits: int) -> None:
    a, b = signed_gemm
    passed, report, reason = judged(torch.matmul, [a, b], gemm(a, b, math, splits))
    assert passed, reason
    assert report["error_ratio"] < LIMIT / MARGIN, report


@pytest.mark.parametrize("math", ["TF32", "bfloat16"])
def test_reduced_precision_gemms_fail_by_a_wide_margin(signed_gemm: tuple[torch.Tensor, torch.Tensor], math: str) -> None:
    a, b = signed_gemm
    passed, report, reason = judged(torch.matmul, [a, b], gemm(a, b, math, 1))
    assert not passed
    assert report["error_ratio"] > LIMIT * MARGIN, report


def test_on_the_tasks_own_non_negative_inputs_too() -> None:
    """KernelBench's inputs are in [0, 1): outputs are large and positive, the errors
    relative. Honest orders still pass, bfloat16 still fails."""
    torch.manual_seed(2)
    a, b = torch.rand(64, 1024), torch.rand(1024, 64)
    for math, splits in (("float32", 4), ("3xTF32", 1)):
        passed, report, reason = judged(torch.matmul, [a, b], gemm(a, b, math, splits))
        assert passed and report["error_ratio"] < LIMIT / MARGIN, (math, report, reason)
    passed, report, _ = judged(torch.matmul, [a, b], gemm(a, b, "bfloat16", 1))
    assert not passed and report["error_ratio"] > LIMIT, report


# -- scans ----------------------------------------------------------------------------------

@triton.jit  # type: ignore[untyped-decorator]  # Triton is untyped; it reads the annotations
def scan_blocks(x_ptr, out_ptr, totals_ptr, R, C, BLOCKS, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):  # type: ignore[no-untyped-def]
    """Pass 1 of a two-level parallel scan: each block of columns scanned on its own, its
    total stored."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    block = tl.program_id(1)
    cols = block * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=mask, other=0.0)
    part = tl.cumsum(x, axis=1)
    tl.store(out_ptr + rows[:, None] * C + cols[None, :], part, mask=mask)
    tl.store(totals_ptr + rows * BLOCKS + block, tl.sum(x, axis=1), mask=rows < R)


@triton.jit  # type: ignore[untyped-decorator]  # Triton is untyped; it reads the annotations
def add_block_offsets(out_ptr, offsets_ptr, R, C, BLOCKS, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):  # type: ignore[no-untyped-def]
    """Pass 3: each block's exclusive prefix of the totals added to it."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    block = tl.program_id(1)
    cols = block * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    offset = tl.load(offsets_ptr + rows * BLOCKS + block, mask=rows < R, other=0.0)
    part = tl.load(out_ptr + rows[:, None] * C + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows[:, None] * C + cols[None, :], part + offset[:, None], mask=mask)


def parallel_scan(x: torch.Tensor, tf32: bool = False) -> torch.Tensor:
    R, C = x.shape
    if tf32:
        x = (x.view(torch.int32) & -8192).view(torch.float32)
    blocks = triton.cdiv(C, 512)
    out = torch.empty_like(x)
    totals = torch.empty((R, blocks), dtype=torch.float32)
    grid = (triton.cdiv(R, 64), blocks)
    scan_blocks[grid](x, out, totals, R, C, blocks, BLOCK_R=64, BLOCK_C=512)
    # Pass 2, the totals' exclusive scan, in a tree order (Hillis-Steele), float32.
    inclusive = totals.clone()
    step = 1
    while step < blocks:
        shifted = inclusive.clone()
        shifted[:, step:] = inclusive[:, step:] + inclusive[:, :-step]
        inclusive, step = shifted, step * 2
    offsets = torch.zeros_like(totals)
    offsets[:, 1:] = inclusive[:, :-1]
    add_block_offsets[grid](out, offsets.contiguous(), R, C, blocks, BLOCK_R=64, BLOCK_C=512)
    return out


def test_a_parallel_scan_passes_and_tf32_inputs_fail() -> None:
    """Issue 35: a blocked tl.cumsum with a carried total over rows of 32768 was refused."""
    torch.manual_seed(3)
    x = torch.randn(64, 32768)
    passed, report, reason = judged(lambda t: torch.cumsum(t, dim=1), [x], parallel_scan(x))
    assert passed, reason
    assert report["error_ratio"] < LIMIT / MARGIN, report
    passed, report, _ = judged(lambda t: torch.cumsum(t, dim=1), [x], parallel_scan(x, tf32=True))
    assert not passed and report["error_ratio"] > LIMIT * MARGIN, report


@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 5), (2, 3000), (6000, 2), (1, 9), (11, 1, 13), (4, 2, 2, 3)])
@pytest.mark.parametrize("chunk", [1, 3, 7, 16, 64, 1 << 22])
def test_axis_sums_by_views_equal_one_scatter_of_every_element(shape: Tuple[int, ...], chunk: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """_add_axis_sums (padded views; the GPU serialized index_add_ on a few addresses) gives
    the per-axis sums index_add_ of every element gives, for pieces cut anywhere."""
    monkeypatch.setattr(oracle, "CHUNK", chunk)
    values = torch.randn(shape, dtype=torch.float64)
    for axis in range(len(shape)):
        want = torch.zeros(shape[axis], dtype=torch.float64)
        flat = values.reshape(-1)
        want.index_add_(0, oracle._dim_indices(torch.arange(flat.numel()), shape, axis), flat)
        got = torch.zeros(shape[axis], dtype=torch.float64)
        for start, (piece,) in oracle._chunks(values):
            oracle._add_axis_sums(got, piece, start, shape, axis)
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-12), (shape, chunk, axis)
