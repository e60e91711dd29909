"""KernelBench's published reference-timing protocol, reimplemented so kforge's own
reference timing can be compared with it in the same process (`kforge bench kernelbench`).

What it follows (KernelBench `src/kernelbench/timing.py`: `measure_ref_program_time` with
its defaults, `time_execution_with_cuda_event`, `clear_l2_cache`, `get_timing_stats`):

- the model runs under `torch.no_grad()` on the current CUDA device and stream;
- `NUM_WARMUP` warm-up calls, each followed by a synchronize, then `torch.cuda.empty_cache()`;
- `NUM_TRIALS + DISCARD_FIRST` timed trials: synchronize, create the two events, thrash L2
  by allocating a 256 MB int64 tensor and filling it, record the start event, run the
  model, record the end event, synchronize; the first `DISCARD_FIRST` trials are dropped;
- the same inputs are reused by every trial (KernelBench draws them once);
- statistics in ms: mean, population standard deviation (numpy's default), min, max, and
  here also the median (kforge's figure).

Where it differs, on purpose: KernelBench rounds its published statistics to three
significant figures; these are kept unrounded so a difference of a fraction of a percent
still shows. KernelBench also casts inputs and model to its `precision` (fp32 by default);
the model and inputs here are the task's own, which for its fp32 tasks is the same thing.

The pure parts (the trial count, the discard rule, the statistics) need no GPU and are
unit-tested in tests/test_kbprotocol.py.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, Union

from . import timing
from .timing import Figures

if TYPE_CHECKING:
    import torch

NUM_WARMUP = 5  # measure_ref_program_time's default
NUM_TRIALS = 100
DISCARD_FIRST = 1
L2_THRASH_SHAPE = (32, 1024, 1024)  # int64: 32 * 1024 * 1024 * 8 B = 256 MB
L2_THRASH_BYTES = 32 * 1024 * 1024 * 8


def total_trials(num_trials: int = NUM_TRIALS, discard_first: int = DISCARD_FIRST) -> int:
    """How many timed trials run: the kept ones plus the ones discarded at the start."""
    if num_trials < 1 or discard_first < 0:
        raise ValueError("need at least one kept trial and a non-negative discard count")
    return num_trials + discard_first


def kept_trials(elapsed_ms: Iterable[float], discard_first: int = DISCARD_FIRST) -> list[float]:
    """The trials that count: every one after the first `discard_first` (KernelBench keeps
    trial i when i >= discard_first)."""
    return [t for i, t in enumerate(elapsed_ms) if i >= discard_first]


def timing_stats(elapsed_ms: Sequence[float]) -> Figures:
    """KernelBench's statistics of the kept trials, unrounded, plus the median: kforge's own
    `timing.stats`, with the standard deviation KernelBench reports, the population one
    (numpy's `np.std` default, ddof=0) instead of kforge's sample one."""
    if not elapsed_ms:
        raise ValueError("no timed trials to summarize")
    stats = timing.stats([float(t) for t in elapsed_ms])
    mean = stats["mean_ms"]
    stats["std_ms"] = math.sqrt(math.fsum((float(t) - mean) ** 2 for t in elapsed_ms) / len(elapsed_ms))
    return stats


KFORGE_FIRST = "kforge_first"
KERNELBENCH_FIRST = "kernelbench_first"


def round_orders(rounds: int) -> list[str]:
    """Which protocol times the reference first in each round of `rounds` (at least one):
    kforge's first, then the two alternate, so a drift of the GPU or host over the rounds
    (clocks, temperature, other work) falls on both protocols alike instead of showing as a
    difference between them. Round one is kforge's first because its timing also serves the
    task check."""
    if rounds < 1:
        raise ValueError("need at least one round")
    return [KFORGE_FIRST if i % 2 == 0 else KERNELBENCH_FIRST for i in range(rounds)]


def clear_l2_cache(device: torch.device) -> None:
    """KernelBench's L2 thrash: a fresh 256 MB tensor, filled, then freed, before each trial."""
    import torch

    dummy = torch.empty(L2_THRASH_SHAPE, dtype=torch.int64, device=device)
    dummy.fill_(42)
    del dummy


def time_model(model: Callable[..., object], inputs: Sequence[object], device: Union[str, int, torch.device],
               num_warmup: int = NUM_WARMUP, num_trials: int = NUM_TRIALS,
               discard_first: int = DISCARD_FIRST) -> Figures:
    """Times `model(*inputs)` on CUDA `device` with KernelBench's protocol and returns its
    statistics (see `timing_stats`) with the protocol's settings. Exceptions propagate."""
    import torch

    device = torch.device(device)
    elapsed: list[float] = []
    with torch.no_grad(), torch.cuda.device(device):
        torch.cuda.synchronize(device=device)
        for _ in range(num_warmup):
            model(*inputs)
            torch.cuda.synchronize(device=device)
        # Releases PyTorch's cached blocks only, as KernelBench does here; not an L2 flush.
        torch.cuda.empty_cache()
        for _ in range(total_trials(num_trials, discard_first)):
            torch.cuda.synchronize(device=device)
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            clear_l2_cache(device)
            start.record()
            _ = model(*inputs)  # held until the next trial's output replaces it, as theirs is
            end.record()
            torch.cuda.synchronize(device=device)
            elapsed.append(start.elapsed_time(end))
        del _
    stats = timing_stats(kept_trials(elapsed, discard_first))
    stats.update({"warmup": num_warmup, "discarded": discard_first, "l2_thrash_bytes": L2_THRASH_BYTES})
    return stats
