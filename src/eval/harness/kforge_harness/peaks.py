"""The device's measured peaks, for the speed-of-light bound (sol.py): DRAM bandwidth and
matmul throughput per math, from a short micro-benchmark (~1-3 s), cached per device.

- Bandwidth: the fastest of three streams over COPY_BYTES, each best of REPEATS: a
  device-to-device copy (bytes read + bytes written over its time), a read (a sum) and a
  write (a fill). A bound must not be beaten by an honest kernel, and one pattern alone
  measured low: on an H100 the copy gave 2.91-2.94 TB/s while the reference of a 12 GiB
  ReLU streamed at 3.01 TB/s.
- Matmul: square MATMUL_SIZE matmuls in fp32 with TF32 off, fp32 with TF32 on ("tf32"),
  fp16 and bf16; 2*n^3 FLOPs over the time of one, best of REPEATS.

Times come from CUDA events around each run after a warm-up. The best run is the figure: a
peak is what the device can do, and a slower run only measured something else (clocks
rising, another process). The cache key is the GPU's name, the driver and torch's version
(cuBLAS comes with torch).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

if TYPE_CHECKING:
    import torch

# A peaks record (as cached, and as device_peaks returns it: with "cached" and "key", or
# {"error", "key"}): {"dram_bytes_per_s", "dram_streams", "matmul_flops_per_s": {math: FLOP/s},
# "method", "measure_s", "gpu", "driver", "torch"}.
Peaks = Dict[str, Any]
# {stream: (bytes it moves a run, seconds of each timed run)}
StreamRuns = Dict[str, Tuple[float, List[float]]]

COPY_BYTES = 1 << 30
MATMUL_SIZE = 8192
REPEATS = 5
METHOD = ("bandwidth: the fastest of a device-to-device copy ((read + written bytes) / time), a sum (read) "
          "and a fill (written) of %d MiB; matmul: %dx%d square "
          "torch.matmul per math (fp32 with TF32 off, tf32, fp16, bf16), 2n^3 / time; best of %d after a warm-up, "
          "CUDA events" % (COPY_BYTES >> 20, MATMUL_SIZE, MATMUL_SIZE, REPEATS))
SCHEMA = 2


def cache_key(device_info: Optional[Mapping[str, Any]], driver: Optional[str], torch_version: str) -> str:
    material = json.dumps({"gpu": (device_info or {}).get("name"), "driver": driver, "torch": torch_version,
                           "method": METHOD, "schema": SCHEMA}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:24]


def read_cached(cache_dir: Optional[str], key: str) -> Optional[Peaks]:
    if not cache_dir:
        return None
    try:
        with open(os.path.join(cache_dir, key + ".json")) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if valid(value) else None


def valid(peaks: object) -> bool:
    """Whether a peaks record holds positive figures for the bandwidth and each math."""
    if not isinstance(peaks, dict):
        return False
    bandwidth = peaks.get("dram_bytes_per_s")
    matmul = peaks.get("matmul_flops_per_s")
    if not isinstance(bandwidth, (int, float)) or bandwidth <= 0 or not isinstance(matmul, dict):
        return False
    return all(isinstance(matmul.get(n), (int, float)) and matmul[n] > 0 for n in ("fp32", "tf32", "fp16", "bf16"))


def write_cached(cache_dir: Optional[str], key: str, peaks: Peaks) -> None:
    """Written as the reference baselines are (atomically; a cache that cannot be written
    only costs a measurement next time)."""
    from .timing import write_baseline

    write_baseline(cache_dir, key, peaks)


def best_rate(amount: float, seconds: Iterable[float]) -> float:
    """`amount` per second at the fastest of the runs' `seconds` (0 where none ran)."""
    fastest = min((s for s in seconds if s > 0), default=None)
    return amount / fastest if fastest else 0.0


def _time_runs(device: str, work: Callable[[], object], repeats: int) -> list[float]:
    import torch

    work()  # warm-up: cuBLAS picks its algorithm, clocks rise
    torch.cuda.synchronize(device)
    times: list[float] = []
    for _ in range(repeats):
        # torch.cuda.Event's constructor is not annotated.
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        work()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def _stream_runs(device: str) -> StreamRuns:
    """{stream: (bytes it moves a run, seconds of each timed run)} for a copy, a read and a
    write of COPY_BYTES (the buffers freed on return)."""
    import torch

    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    total = torch.empty((), dtype=torch.float32, device=device)
    return {"copy": (2.0 * COPY_BYTES, _time_runs(device, lambda: dst.copy_(src), REPEATS)),
            "read": (1.0 * COPY_BYTES, _time_runs(device, lambda: torch.sum(src, dim=0, out=total), REPEATS)),
            "write": (1.0 * COPY_BYTES, _time_runs(device, lambda: dst.fill_(2.0), REPEATS))}


def stream_rates(streams: Mapping[str, Tuple[float, Iterable[float]]]) -> dict[str, float]:
    """Bytes per second of each stream at its fastest run."""
    return {name: best_rate(amount, seconds) for name, (amount, seconds) in streams.items()}


def _matmul_runs(device: str, dtype: torch.dtype) -> list[float]:
    """Seconds of each timed MATMUL_SIZE square matmul in `dtype` under the math settings in force."""
    import torch

    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=device, dtype=dtype)
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=device, dtype=dtype)
    c = torch.empty(MATMUL_SIZE, MATMUL_SIZE, device=device, dtype=dtype)
    return _time_runs(device, lambda: torch.matmul(a, b, out=c), REPEATS)


def measure(device: str) -> Peaks:
    """The peaks of `device` (a CUDA device name), measured now."""
    import torch

    from . import precision

    began = time.time()
    saved = precision.settings()
    try:
        with torch.cuda.device(device), torch.no_grad():
            streams = stream_rates(_stream_runs(device))
            matmul: dict[str, float] = {}
            for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                                      ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.set_float32_matmul_precision("high" if tf32 else "highest")
                matmul[name] = best_rate(2.0 * MATMUL_SIZE ** 3, _matmul_runs(device, dtype))
    finally:
        # Its buffers go back to the device, measured or not (the task needs the room).
        torch.cuda.empty_cache()
        torch.backends.cuda.matmul.allow_tf32 = saved["matmul"]
        torch.backends.cudnn.allow_tf32 = saved["cudnn"]
        torch.set_float32_matmul_precision(saved["float32_matmul_precision"])
    return {"dram_bytes_per_s": max(streams.values()), "dram_streams": streams, "matmul_flops_per_s": matmul,
            "method": METHOD, "measure_s": time.time() - began}


def device_peaks(device: str, device_info: Optional[Mapping[str, Any]], driver: Optional[str], torch_version: str,
                 cache_dir: Optional[str]) -> Peaks:
    """The device's peaks: cached, or measured now (and cached). A measurement that fails
    (out of memory beside the task, a driver error) returns {"error": why}: the evaluation
    then has no bound, never a failure."""
    key = cache_key(device_info, driver, torch_version)
    cached = read_cached(cache_dir, key)
    if cached is not None:
        return dict(cached, cached=True, key=key)
    try:
        peaks = measure(device)
    except Exception as e:  # noqa: BLE001 -- no peaks only means no bound
        return {"error": "measuring the device's peaks failed: %s: %s" % (type(e).__name__, str(e)[:300]),
                "key": key}
    if not valid(peaks):
        return {"error": "the device's peaks measured as zero (%s)" % json.dumps(peaks)[:300], "key": key}
    peaks.update(gpu=(device_info or {}).get("name"), driver=driver, torch=torch_version)
    write_cached(cache_dir, key, peaks)
    return dict(peaks, cached=False, key=key)


def driver_version(device_info: Mapping[str, Any]) -> Optional[str]:
    """The NVIDIA driver's version (NVML), else the CUDA driver API's, else None."""
    import ctypes

    from .device import nvml_device

    found = nvml_device(device_info)
    if found is not None:
        buffer = ctypes.create_string_buffer(96)
        if found[0].nvmlSystemGetDriverVersion(buffer, 96) == 0:
            return buffer.value.decode(errors="replace")
    try:
        import torch

        return "cuda %d" % torch._C._cuda_getDriverVersion()  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        return None


def cache_dir_beside(baseline_cache_dir: Optional[str]) -> Optional[str]:
    """The peaks' cache directory: `peaks/` beside the reference baselines' directory."""
    if not baseline_cache_dir:
        return None
    return os.path.join(os.path.dirname(os.path.abspath(baseline_cache_dir)), "peaks")
