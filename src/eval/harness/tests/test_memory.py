"""The memory plan: its arithmetic, the refusal line, and what counts as out of memory."""

from __future__ import annotations

import pytest

import torch

from kforge_harness import memory
from kforge_harness.exchange import DriverOutOfMemory

GIB = 1 << 30


def test_plan_counts_two_inputs_four_outputs_two_scratch_two_flush() -> None:
    assert memory.plan_bytes(10, 100, 1000, 10000) == 2 * 10 + 4 * 100 + 2 * 1000 + 2 * 10000


def test_a_timed_plan_holds_the_reference_process_beside_the_kernel() -> None:
    spacers = 2 * memory.relocation_bytes(0)  # moved or not, each process's spacers stay
    assert memory.plan_bytes(10, 100, 1000, 10000, timed=True) == 4 * 10 + 6 * 100 + 2 * 1000 + 2 * 10000 + spacers
    six = 6 * GIB  # KernelBench's largest ReLU still fits an 80 GB GPU timed
    assert memory.does_not_fit(memory.footprint(six, six, 0, 256 << 20, 78 * GIB, 80 * GIB, timed=True), "x") is None


def test_the_kernels_model_is_planned_and_timed_the_copies_its_moves_leave_in_both_processes() -> None:
    from kforge_harness.timed import PLACEMENTS

    mib = 1 << 20
    moves = PLACEMENTS - 1
    assert moves >= 1
    untimed = memory.plan_bytes(10, 100, 1000, 10000, weights_bytes=8 * mib)
    assert untimed == memory.plan_bytes(10, 100, 1000, 10000) + 8 * mib
    timed = memory.plan_bytes(10, 100, 1000, 10000, timed=True, weights_bytes=8 * mib)
    kept = 2 * moves * (8 * mib + memory.RELOCATE_SPACER_BYTES)
    assert timed == 4 * 10 + 6 * 100 + 2 * 1000 + 2 * 10000 + 8 * mib + kept
    # A model over the limit is never moved: only the kernel's own copy is planned.
    big = memory.RELOCATE_LIMIT_BYTES + 1
    assert memory.relocation_bytes(big) == 0
    assert memory.plan_bytes(0, 0, 0, 0, timed=True, weights_bytes=big) == big
    record = memory.footprint(10, 100, 1000, 10000, 1 << 40, 1 << 40, timed=True, weights_bytes=8 * mib)
    assert (record["weights_bytes"], record["relocation_bytes"], record["planned_peak_bytes"]) == (8 * mib, kept, timed)
    assert memory.footprint(10, 100, 0, 0, 1 << 40, 1 << 40, weights_bytes=8 * mib)["relocation_bytes"] == 0


def test_a_refusal_names_the_kernels_model_when_there_is_one() -> None:
    record = memory.footprint(GIB, GIB, 0, 0, GIB, 8 * GIB, weights_bytes=2 * GIB)
    refusal = memory.does_not_fit(record, "x")
    assert refusal is not None and "the kernel's model 2.0 GiB;" in refusal
    refusal = memory.does_not_fit(memory.footprint(GIB, GIB, 0, 0, GIB, 8 * GIB), "x")
    assert refusal is not None and "model" not in refusal


def test_model_bytes_counts_each_storage_once() -> None:
    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(4, 4, bias=False)  # 64 bytes
            self.b = torch.nn.Linear(4, 4, bias=False)
            self.b.weight = self.a.weight  # tied: one storage
            self.register_buffer("steps", torch.zeros(2, dtype=torch.int64))  # 16 bytes
            flat = torch.zeros(8)  # two parameters that view one flat buffer (32 bytes)
            self.p = torch.nn.Parameter(flat[:4])
            self.q = torch.nn.Parameter(flat[4:])

    assert memory.model_bytes(Tied()) == 64 + 16 + 32
    assert memory.model_bytes(lambda x: x) == 0


def test_kernelbench_relu_fits_an_80_gb_gpu_and_not_a_24_gb_one() -> None:
    six = 6 * GIB  # 4096 x 393216 float32
    flush = 256 << 20
    h100 = memory.footprint(six, six, 0, flush, 78 * GIB, 80 * GIB)
    assert h100["planned_peak_bytes"] == 36 * GIB + 2 * flush
    assert memory.does_not_fit(h100, "H100 device") is None
    small = memory.footprint(six, six, 0, flush, 20 * GIB, 24 * GIB)
    reason = memory.does_not_fit(small, "host")
    assert reason is not None
    assert reason.startswith("the evaluation needs about 36.5 GiB of host memory (inputs 6.0 GiB, outputs 6.0 GiB")
    assert reason.endswith("but 20.0 GiB of 24.0 GiB are free")


def test_an_exact_fit_is_a_fit() -> None:
    record = memory.footprint(GIB, GIB, 0, 0, 6 * GIB, 8 * GIB)
    assert record["planned_peak_bytes"] == 6 * GIB
    assert memory.does_not_fit(record, "x") is None
    record["free_bytes"] -= 1
    assert memory.does_not_fit(record, "x") is not None


def test_small_sizes_read_in_mib() -> None:
    assert memory.gib(3 << 20) == "3 MiB"
    assert memory.gib(GIB + GIB // 2) == "1.5 GiB"


def test_tensor_bytes_walks_nested_outputs() -> None:
    tree = [torch.zeros(4, 4), (torch.zeros(2, dtype=torch.float16), 3), {"k": torch.zeros(1, dtype=torch.int64)}]
    assert memory.tensor_bytes(tree) == 64 + 4 + 8


def test_out_of_memory_errors_are_recognised_and_others_are_not() -> None:
    assert memory.is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 6 GiB"))
    assert memory.is_out_of_memory(DriverOutOfMemory("cuMemAlloc: out of memory (CUDA_ERROR_OUT_OF_MEMORY)"))
    # torch's CPU allocator, word for word (torch 2.15)
    assert memory.is_out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
                                                "can't allocate memory: you tried to allocate 1099511627776 bytes. "
                                                "Error code 12 (Cannot allocate memory)"))
    assert not memory.is_out_of_memory(RuntimeError("shape mismatch"))
    assert not memory.is_out_of_memory(ValueError("memory layout"))


def test_host_memory_reads_proc_meminfo() -> None:
    available, total = memory.host_memory()
    assert 0 < available <= total


def test_meter_keeps_the_peak_per_phase_on_a_gpu_and_nothing_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    record: dict[str, int] = {}
    meter = memory.Meter("cuda:0", record)
    states = iter([(70, 100), (40, 100), (60, 100), (90, 100)])
    monkeypatch.setattr(meter, "state", lambda: next(states))
    meter.enter("correctness")   # 30 used
    meter.sample()               # 60 used
    meter.sample()               # 40 used: the peak stays
    meter.enter("timing")        # 10 used
    assert record == {"correctness": 60, "timing": 10}
    cpu: dict[str, int] = {}
    memory.Meter("cpu", cpu).enter("correctness")
    assert cpu == {}


def test_inputs_alone_are_refused_when_two_copies_do_not_fit() -> None:
    assert memory.inputs_do_not_fit(10 * GIB, 20 * GIB, 24 * GIB, "24.0 GiB host") is None
    reason = memory.inputs_do_not_fit(4096 * GIB, 20 * GIB, 24 * GIB, "24.0 GiB host")
    assert reason == ("get_inputs() makes 4096.0 GiB of inputs and an evaluation holds at least two copies "
                      "(8192.0 GiB) but 20.0 GiB of 24.0 GiB host memory are free")
