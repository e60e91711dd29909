"""Facts about the evaluation device and the versions in use."""

from __future__ import annotations

import os
import platform
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Tuple, TypedDict, Union

if TYPE_CHECKING:
    import ctypes

    import torch


class DeviceInfo(TypedDict, total=False):
    """result["device"]: what device_description says of the evaluation's device."""

    kind: str
    torch_name: str
    name: str
    interpreter: bool
    uuid: Optional[str]
    capability: str
    memory_bytes: int
    multiprocessors: int
    l2_bytes: Optional[int]


# The NVML library (a ctypes.CDLL: its functions are looked up by name, so `Any`) and a
# device's handle.
NvmlDevice = Tuple[Any, "ctypes.c_void_p"]
# A device as torch takes it: "cpu", "cuda:0", an index or a torch.device.
DeviceLike = Union[str, int, "torch.device"]


def device_description(device: DeviceLike) -> DeviceInfo:
    import torch

    if device == "cpu":
        return {"kind": "cpu", "torch_name": "cpu", "name": platform.processor() or platform.machine(),
                "interpreter": True}
    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    return {
        "kind": "cuda",
        "torch_name": str(torch.device(device)),
        "uuid": str(uuid) if uuid is not None else None,
        "name": props.name,
        "capability": "%d.%d" % (props.major, props.minor),
        "memory_bytes": props.total_memory,
        "multiprocessors": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "interpreter": False,
    }


def versions() -> dict[str, str]:
    import torch
    import triton

    return {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__}


def missing_bytecode(modules: Sequence[Any]) -> list[str]:
    """The package directories of these modules whose byte code is not on disk: Python then
    compiles their sources at every import, in every process kforge starts (an environment
    with PYTHONDONTWRITEBYTECODE=1, or a read-only install never byte-compiled: `import torch`
    3.5 s instead of 2.2 s on an H200 host)."""
    out = []
    for module in modules:
        cached, source = getattr(module, "__cached__", None), getattr(module, "__file__", None)
        if cached and source and not os.path.exists(cached):
            out.append(os.path.dirname(source))
    return out


def sync(device: DeviceLike) -> None:
    import torch

    if device != "cpu":
        torch.cuda.synchronize()


def l2_flush_bytes(job: Mapping[str, Any], result: Mapping[str, Any]) -> int:
    """Bytes of the L2 flush buffer: at least 256 MB and twice L2; 0 when flushing is off."""
    if not job["flush_l2"]:
        return 0
    l2: int = result["device"].get("l2_bytes") or 0
    return max(256 << 20, 2 * l2)


def l2_flush_buffer(job: Mapping[str, Any], result: Mapping[str, Any],
                    device: DeviceLike) -> Optional[torch.Tensor]:
    """A buffer larger than L2 (l2_flush_bytes), written by the judge before each timed run:
    L2 is shared by every process on the GPU, so the worker cannot keep it warm. int64 and
    written by `thrash_l2`, as KernelBench does: a zero fill becomes a memset, which is not
    the same work on the GPU (on a tiny task the launch then showed in the timed region)."""
    import torch

    nbytes = l2_flush_bytes(job, result)
    return torch.empty(nbytes // 8, dtype=torch.int64, device=device) if nbytes else None


def thrash_l2(buffer: torch.Tensor) -> None:
    """KernelBench's L2 thrash: an in-place fill of a buffer larger than L2 with 42."""
    buffer.fill_(42)



# -- what shaped a timing (result["timing"]["environment"]) --------------------------------

NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
NVML_CLOCK_ID_APP_TARGET, NVML_CLOCK_ID_APP_DEFAULT = 1, 2
THROTTLE_REASONS = [(0x1, "idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
                    (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
                    (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
                    (0x100, "display_clock_setting")]
_nvml: list[Any] = []


def nvml_device(device_info: Mapping[str, Any]) -> Optional[NvmlDevice]:
    """(NVML library, handle) for the device by its UUID, or None where NVML is missing."""
    import ctypes

    uuid = device_info.get("uuid")
    if not uuid:
        return None
    if not _nvml:
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            _nvml.append(lib if lib.nvmlInit_v2() == 0 else None)
        except (OSError, AttributeError):
            _nvml.append(None)
    lib = _nvml[0]
    if lib is None:
        return None
    handle = ctypes.c_void_p()
    name = uuid if uuid.startswith("GPU-") else "GPU-" + uuid
    if lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) != 0:
        return None
    return lib, handle


def _clock(lib: Any, handle: ctypes.c_void_p, kind: int, clock_id: Optional[int] = None) -> Optional[int]:
    import ctypes

    value = ctypes.c_uint()
    status = (lib.nvmlDeviceGetClockInfo(handle, kind, ctypes.byref(value)) if clock_id is None
              else lib.nvmlDeviceGetClock(handle, kind, clock_id, ctypes.byref(value)))
    return value.value if status == 0 else None


def gpu_clocks(device_info: Mapping[str, Any]) -> Optional[dict[str, Optional[int]]]:
    """SM and memory clocks now (MHz), or None without NVML."""
    found = nvml_device(device_info)
    if found is None:
        return None
    lib, handle = found
    return {"sm": _clock(lib, handle, NVML_CLOCK_SM), "mem": _clock(lib, handle, NVML_CLOCK_MEM)}


def environment(device_info: Mapping[str, Any], versions: Mapping[str, Any], tf32: Optional[Mapping[str, Any]],
                before: Optional[Mapping[str, Optional[int]]], method: str,
                input_refresh: Optional[str]) -> Dict[str, Any]:
    """What shaped a timing: precision settings of the reference's process, clocks before and
    after the kernel's timed runs (and whether they were pinned), driver and library versions,
    the method and the input refresh."""
    import ctypes

    import torch

    env: Dict[str, Any] = {"torch": versions.get("torch"), "triton": versions.get("triton"), "cuda_runtime": torch.version.cuda,
           "timing_method": method, "input_refresh": input_refresh}
    tf32 = tf32 or {}
    env.update({"tf32_matmul": tf32.get("matmul"), "tf32_cudnn": tf32.get("cudnn"),
                "float32_matmul_precision": tf32.get("float32_matmul_precision")})
    found = nvml_device(device_info)
    if found is None:
        env["clocks_locked"] = None
        return env
    lib, handle = found
    after = gpu_clocks(device_info)
    if before and after:
        env["sm_clock_mhz"] = [before["sm"], after["sm"]]
        env["mem_clock_mhz"] = [before["mem"], after["mem"]]
    value = ctypes.c_uint()
    if lib.nvmlDeviceGetMaxClockInfo(handle, NVML_CLOCK_SM, ctypes.byref(value)) == 0:
        env["max_sm_clock_mhz"] = value.value
    if lib.nvmlDeviceGetMaxClockInfo(handle, NVML_CLOCK_MEM, ctypes.byref(value)) == 0:
        env["max_mem_clock_mhz"] = value.value
    reasons = ctypes.c_ulonglong()
    getter = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        lib.nvmlDeviceGetCurrentClocksThrottleReasons
    bits = reasons.value if getter(handle, ctypes.byref(reasons)) == 0 else None
    env["throttle_reasons"] = [name for bit, name in THROTTLE_REASONS if bits is not None and bits & bit]
    target = _clock(lib, handle, NVML_CLOCK_SM, NVML_CLOCK_ID_APP_TARGET)
    default = _clock(lib, handle, NVML_CLOCK_SM, NVML_CLOCK_ID_APP_DEFAULT)
    if target is None or default is None:
        env["clocks_locked"] = None
    else:
        env["clocks_locked"] = target != default or (bits is not None and bool(bits & 0x2))
    buffer = ctypes.create_string_buffer(96)
    if lib.nvmlSystemGetDriverVersion(buffer, 96) == 0:
        env["driver"] = buffer.value.decode(errors="replace")
    version = ctypes.c_int()
    if lib.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(version)) == 0:
        env["cuda_driver"] = "%d.%d" % (version.value // 1000, version.value % 1000 // 10)
    return env
