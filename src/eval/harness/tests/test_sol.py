"""Speed of light (issue 25): the work a forward does, the bound against a device's peaks,
the faster-than-light decision and the peaks' cache. All hand-computed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

import torch

from kforge_harness import peaks, sol
from kforge_harness.loading import reference_forward

from jobs import job

F32 = 4


def count(model: torch.nn.Module, *inputs: torch.Tensor) -> sol.WorkCounts:
    _, counts = sol.count_forward(model, list(inputs), lambda: reference_forward(model, list(inputs), "cpu"))
    return counts


class Gemm(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


class Conv(torch.nn.Module):
    def __init__(self, groups: int = 1) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 16, 3, stride=1, padding=0, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.conv(x)
        return out


class Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(32, 16)
        self.unused = torch.nn.Linear(1000, 1000)  # never read: no byte of it is counted

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc(x)
        return out


def test_a_gemm_is_2mnk_flops_and_its_operands_and_result_in_bytes() -> None:
    m, k, n = 64, 32, 48
    counts = count(Gemm(), torch.randn(m, k), torch.randn(k, n))
    assert counts["flops"] == [{"dtype": "float32", "family": "matmul", "flops": 2 * m * n * k}]
    assert counts["bytes"] == {"inputs": (m * k + k * n) * F32, "parameters": 0, "outputs": m * n * F32}
    assert counts["total_bytes"] == (m * k + k * n + m * n) * F32


def test_a_half_gemm_is_counted_under_its_own_dtype() -> None:
    counts = count(Gemm(), torch.randn(16, 8).half(), torch.randn(8, 4).half())
    assert counts["flops"] == [{"dtype": "float16", "family": "matmul", "flops": 2 * 16 * 4 * 8}]
    assert counts["bytes"]["outputs"] == 16 * 4 * 2


def test_a_convolution_counts_2_n_cout_hout_wout_cin_kh_kw_over_groups() -> None:
    for groups in (1, 2):
        model = Conv(groups)
        n, h, w = 2, 10, 12
        counts = count(model, torch.randn(n, 8, h, w))
        hout, wout = h - 2, w - 2
        flops = 2 * n * 16 * hout * wout * 8 * 3 * 3 // groups
        assert counts["flops"] == [{"dtype": "float32", "family": "convolution", "flops": flops}]
        weight = 16 * (8 // groups) * 3 * 3 * F32
        assert counts["bytes"] == {"inputs": n * 8 * h * w * F32, "parameters": weight,
                                   "outputs": n * 16 * hout * wout * F32}


def test_a_softmax_counts_its_elementwise_and_transcendental_work_and_moves_its_input_and_output() -> None:
    """Issue 35: "work 0 FLOP counted" on a softmax read as if it did no math."""
    counts = count(Softmax(), torch.randn(16, 1024))
    n = 16 * 1024
    assert counts["flops"] == [{"dtype": "float32", "family": "elementwise", "flops": 3 * n},
                               {"dtype": "float32", "family": "transcendental", "flops": n}]
    assert counts["total_bytes"] == 2 * 16 * 1024 * F32


class GeluChain(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.gelu(x) * 2.0 + 1.0
        return y.permute(1, 0).contiguous().sum(dim=0)


def test_elementwise_operators_count_per_element_and_data_movement_counts_nothing() -> None:
    n = 64 * 32
    counts = count(GeluChain(), torch.randn(64, 32))
    # gelu (transcendental), mul, add (one each), the copy of the permute nothing, the sum one per input.
    assert counts["flops"] == [{"dtype": "float32", "family": "elementwise", "flops": 3 * n},
                               {"dtype": "float32", "family": "transcendental", "flops": n}]


def test_parameters_read_are_counted_and_unused_ones_are_not() -> None:
    counts = count(Linear(), torch.randn(8, 32))
    assert counts["flops"] == [{"dtype": "float32", "family": "matmul", "flops": 2 * 8 * 16 * 32}]
    assert counts["bytes"] == {"inputs": 8 * 32 * F32, "parameters": (32 * 16 + 16) * F32, "outputs": 8 * 16 * F32}


def test_an_input_passed_twice_is_read_once_and_an_input_returned_as_is_costs_no_write() -> None:
    class Twice(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
            return x + x, y

    x, y = torch.randn(100), torch.randn(50)
    counts = count(Twice(), x, y)
    assert counts["bytes"] == {"inputs": 100 * F32, "parameters": 0, "outputs": 100 * F32}


def test_an_embedding_reads_only_the_rows_it_looks_up() -> None:
    class Lookup(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.Embedding(10000, 64)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.table(ids)
            return out

    ids = torch.tensor([3, 7, 7, 42])
    counts = count(Lookup(), ids)
    assert counts["bytes"] == {"inputs": 4 * 8, "parameters": 4 * 64 * F32, "outputs": 4 * 64 * F32}

    class Pick(torch.nn.Module):
        def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
            return torch.index_select(x, 0, i)

    counts = count(Pick(), torch.randn(1000, 16), torch.tensor([1, 2]))
    assert counts["bytes"]["inputs"] == 2 * 16 * F32 + 2 * 8


def test_a_slice_reads_only_what_it_uses() -> None:
    class Head(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :4] * 2

    counts = count(Head(), torch.randn(10, 100))
    assert counts["bytes"]["inputs"] == 10 * 4 * F32


PEAKS: dict[str, Any] = {"dram_bytes_per_s": 1e12, "matmul_flops_per_s": {"fp32": 50e12, "tf32": 400e12, "fp16": 800e12,
                                                           "bf16": 800e12}}


def bounded(counts: Mapping[str, Any], peaks_: Mapping[str, Any], policy: str, l2_bytes: Optional[int] = 0,
            flush_l2: bool = True) -> sol.Bound:
    """sol.bound where the peaks give one."""
    found = sol.bound(counts, peaks_, policy, l2_bytes, flush_l2)
    assert found is not None
    return found


def gemm_counts(m: int, n: int, k: int, dtype: str = "float32", size: int = 4) -> dict[str, Any]:
    return {"flops": [{"dtype": dtype, "family": "matmul", "flops": 2 * m * n * k}], "total_flops": 2 * m * n * k,
            "bytes": {"inputs": (m * k + k * n) * size, "parameters": 0, "outputs": m * n * size},
            "total_bytes": (m * k + k * n + m * n) * size}


def test_the_bound_is_the_larger_of_compute_and_memory_time() -> None:
    counts = gemm_counts(4096, 4096, 4096)
    strict = bounded(counts, PEAKS, "strict")
    assert strict["limit"] == "compute"
    # Float32 accuracy at its fastest: 3xTF32 (a third of 400 TFLOP/s) beats the CUDA cores' 50.
    assert abs(strict["bound_ms"] - 1e3 * 2 * 4096 ** 3 * 3 / 400e12) < 1e-9
    assert strict["math"] == {"float32 matmul": "3xtf32"}
    assert abs(strict["memory_ms"] - 1e3 * 3 * 4096 ** 2 * 4 / 1e12) < 1e-9
    slow_tensor_cores = dict(PEAKS, matmul_flops_per_s=dict(PEAKS["matmul_flops_per_s"], tf32=120e12, bf16=240e12))
    assert bounded(counts, slow_tensor_cores, "strict")["math"] == {"float32 matmul": "fp32"}
    # TF32 lets float32 in at TF32's peak.
    assert abs(bounded(counts, PEAKS, "tf32")["compute_ms"] - 1e3 * 2 * 4096 ** 3 / 400e12) < 1e-9
    softmax = {"flops": [], "total_flops": 0, "bytes": {"inputs": 1 << 20, "parameters": 0, "outputs": 1 << 20},
               "total_bytes": 2 << 20}
    memory = bounded(softmax, PEAKS, "strict")
    assert memory["limit"] == "memory" and abs(memory["bound_ms"] - 1e3 * (2 << 20) / 1e12) < 1e-12


def test_convolutions_in_float32_run_at_tf32_under_the_pytorch_policy_and_matmuls_do_not() -> None:
    assert sol.schemes_for("float32", "convolution", "pytorch") == (("tf32", 1),)
    assert sol.schemes_for("float32", "matmul", "pytorch") == sol.FLOAT32_SCHEMES
    assert sol.schemes_for("float32", "matmul", "strict") == (("fp32", 1), ("tf32", 3), ("bf16", 6))
    assert sol.schemes_for("float32", "matmul", "tf32") == (("tf32", 1),)
    assert sol.schemes_for("bfloat16", "matmul", "strict") == (("bf16", 1),)
    assert sol.schemes_for("float64", "matmul", "strict") == ()


def test_elementwise_work_runs_on_the_cuda_cores_beside_the_gemms() -> None:
    counts = {"flops": [{"dtype": "float32", "family": "matmul", "flops": 3 * 10 ** 12},
                        {"dtype": "float32", "family": "elementwise", "flops": 5 * 10 ** 12},
                        {"dtype": "float32", "family": "transcendental", "flops": 10 ** 12}],
              "bytes": {"inputs": 0, "parameters": 0, "outputs": 0}}
    found = bounded(counts, PEAKS, "strict")
    assert abs(found["gemm_ms"] - 1e3 * 3e12 * 3 / 400e12) < 1e-9
    assert abs(found["elementwise_ms"] - 1e3 * 6e12 / (2 * 50e12)) < 1e-9
    # The larger of the two, never their sum: a kernel may overlap them.
    assert found["compute_ms"] == max(found["gemm_ms"], found["elementwise_ms"])
    assert not found["memory_only"]
    assert bounded({"flops": [], "bytes": {"inputs": 8}}, PEAKS, "strict")["memory_only"]


def test_a_dtype_without_a_measured_peak_is_left_out_of_the_compute_bound() -> None:
    counts = gemm_counts(1024, 1024, 1024, "float64", 8)
    result = bounded(counts, PEAKS, "strict")
    assert result["compute_ms"] == 0 and result["unbounded_dtypes"] == ["float64"]
    assert result["limit"] == "memory"


def test_without_peaks_there_is_no_bound_and_the_reason_is_given() -> None:
    counts = gemm_counts(8, 8, 8)
    assert sol.bound(counts, None, "strict") is None
    out = sol.figures(counts, {"error": "measuring the device's peaks failed: OOM"}, "strict", {}, True,
                      {"median_ms": 1.0}, {"median_ms": 0.5})
    assert out["bound_ms"] is None and out["kernel_pct"] is None and not out["faster_than_light"]
    assert "OOM" in out["reason"]
    assert sol.cpu_figures(counts)["reason"].startswith("no GPU")


def test_percentages_of_the_speed_of_light() -> None:
    assert sol.percent_of(0.1, 1.0) == 10.0
    assert sol.percent_of(0.1, 0.0) is None and sol.percent_of(None, 1.0) is None


def test_the_flag_is_raised_whenever_the_median_beats_the_bound() -> None:
    """Issue 35: 128-145% of the speed of light was shown unflagged; any percentage above
    100 now carries the flag."""
    bound_ms = 1.0
    assert not sol.faster_than_light(bound_ms, {"median_ms": 1.05, "ci_high_ms": 1.1})
    assert not sol.faster_than_light(bound_ms, {"median_ms": 1.0})
    assert sol.faster_than_light(bound_ms, {"median_ms": 0.99, "ci_high_ms": 1.02})
    assert sol.faster_than_light(bound_ms, {"median_ms": 0.5})
    assert not sol.faster_than_light(None, {"median_ms": 0.001})


def test_the_bound_counts_only_bytes_certain_to_cross_dram() -> None:
    counts = {"flops": [], "total_flops": 0, "bytes": {"inputs": 100, "parameters": 30, "outputs": 100},
              "total_bytes": 230}
    peaks_ = {"dram_bytes_per_s": 1e3, "matmul_flops_per_s": PEAKS["matmul_flops_per_s"]}
    # Flushed before each run: inputs and parameters come from DRAM, outputs may stay in L2.
    assert bounded(counts, peaks_, "strict", 50, True)["bytes"] == 130 + (100 - 50)
    assert bounded(counts, peaks_, "strict", 50, False)["bytes"] == 230 - 50
    out = sol.figures(counts, peaks_, "strict", {"l2_bytes": 1000}, True, {"median_ms": 260.0},
                      {"median_ms": 150.0, "ci_high_ms": 160.0})
    assert out["bound_ms"] == 130.0 and out["limit"] == "memory"
    assert out["reference_pct"] == 50.0 and abs(out["kernel_pct"] - 100 * 130 / 150) < 1e-9
    assert not out["faster_than_light"]
    fast = sol.figures(counts, peaks_, "strict", {"l2_bytes": 1000}, True, None, {"median_ms": 120.0,
                                                                                 "ci_high_ms": 140.0})
    assert fast["kernel_pct"] > 100 and fast["faster_than_light"]


def test_peaks_are_cached_per_device_driver_and_torch(tmp_path: Path) -> None:
    info = {"name": "NVIDIA H100 80GB HBM3"}
    key = peaks.cache_key(info, "550.54", "2.5.0")
    assert key != peaks.cache_key(info, "555.1", "2.5.0") and key != peaks.cache_key(info, "550.54", "2.6.0")
    assert key != peaks.cache_key({"name": "NVIDIA A100"}, "550.54", "2.5.0")
    assert peaks.read_cached(str(tmp_path), key) is None
    peaks.write_cached(str(tmp_path), key, PEAKS)
    assert peaks.read_cached(str(tmp_path), key) == PEAKS
    assert peaks.device_peaks("cuda:0", info, "550.54", "2.5.0", str(tmp_path))["cached"] is True
    # A record with a zero figure is no peak: it is measured again.
    (tmp_path / (key + ".json")).write_text(json.dumps(dict(PEAKS, dram_bytes_per_s=0)))
    assert peaks.read_cached(str(tmp_path), key) is None
    assert peaks.cache_dir_beside("/c/kforge/baselines") == "/c/kforge/peaks"
    assert peaks.cache_dir_beside(None) is None


def test_a_measurement_that_fails_is_an_error_record_not_an_exception(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        return
    out = peaks.device_peaks("cuda:0", {"name": "none"}, None, torch.__version__, str(tmp_path))
    assert "error" in out and out["error"].startswith("measuring the device's peaks failed")


def test_best_rate_takes_the_fastest_run() -> None:
    assert peaks.best_rate(10.0, [2.0, 1.0, 5.0]) == 10.0
    assert peaks.best_rate(10.0, []) == 0.0


def _judged(work: dict[str, Any], peaks_: Mapping[str, Any],
            kernel: Optional[dict[str, Any]]) -> Tuple[Any, dict[str, Any], Mapping[str, Any]]:
    """What judge.speed.record_speed_of_light reads, on a GPU with timing: (run, work, peaks)."""
    from jobs import judged

    run = judged(job(flush_l2=True, precision="strict"), device={"l2_bytes": 50 << 20},
                 timing={"reference": {"median_ms": 1.0, "ci_high_ms": 1.01}, "kernel": kernel})
    return run, work, peaks_


def test_the_judge_records_the_figures_and_flags_a_kernel_faster_than_light() -> None:
    from kforge_harness.judge.speed import record_speed_of_light

    # 1 GiB in and out at 1 TB/s: 2.147 ms at the speed of light.
    work = {"flops": [], "total_flops": 0, "bytes": {"inputs": 1 << 30, "parameters": 0, "outputs": 1 << 30},
            "total_bytes": 2 << 30}
    honest, work_, peaks_used = _judged(work, PEAKS, {"median_ms": 2.5, "ci_high_ms": 2.6})
    record_speed_of_light(honest, work_, peaks_used)
    figures = honest.result["speed_of_light"]
    # Inputs from DRAM; of the outputs, what L2 (50 MiB) cannot hold.
    least = ((1 << 30) + (1 << 30) - (50 << 20)) / 1e12 * 1e3
    assert figures["limit"] == "memory" and abs(figures["bound_ms"] - least) < 1e-9
    assert abs(figures["kernel_pct"] - 100 * least / 2.5) < 1e-9
    assert not figures["faster_than_light"] and honest.result["flags"] == []
    cheat, work_, peaks_used = _judged(work, PEAKS, {"median_ms": 0.5, "ci_high_ms": 0.52})
    record_speed_of_light(cheat, work_, peaks_used)
    assert cheat.result["speed_of_light"]["faster_than_light"]
    assert cheat.result["flags"] == ["faster_than_light"]
    assert cheat.result["notes"][0].startswith("faster than light: the kernel's median 0.5000 ms (95% interval up to "
                                               "0.5200 ms) is 419% of the speed of light")


def test_the_judge_says_why_there_is_no_bound() -> None:
    from kforge_harness.judge.speed import record_speed_of_light

    failed, work_, peaks_used = _judged({"error": "counting the reference's work failed: RuntimeError: x"}, PEAKS, None)
    record_speed_of_light(failed, work_, peaks_used)
    assert failed.result["speed_of_light"] == {"counts": None,
                                               "reason": "counting the reference's work failed: RuntimeError: x"}
    no_peaks, work_, peaks_used = _judged(gemm_counts(8, 8, 8), {"error": "measuring the device's peaks failed: OOM"},
                              {"median_ms": 0.01})
    record_speed_of_light(no_peaks, work_, peaks_used)
    assert no_peaks.result["speed_of_light"]["bound_ms"] is None
    assert no_peaks.result["speed_of_light"]["reason"].endswith("OOM")


def test_stream_rates_each_at_its_fastest_run_and_the_bandwidth_is_the_fastest_stream() -> None:
    rates = peaks.stream_rates({"copy": (2e9, [2e-3, 1e-3]), "read": (1e9, [0.4e-3]), "write": (1e9, [])})
    assert rates == {"copy": 2e12, "read": 2.5e12, "write": 0.0}
    assert max(rates.values()) == 2.5e12
