"""The launch path a CUDA context draws, and drawing it again until it is the device's fast one.

Measured on an H100 (docs/benchmarks.md, "Timing you can trust", round 4): the GPU time of a
queued run of small launches depends on the CUDA context it goes through. 256 launches of a
tiny kernel, queued behind a spin so that only GPU time is in the window, took 0.461 to 0.520
ms from one context to the next: fixed for a context's life (within 0.3% over 15 s) and drawn
again when the primary context is created again; moving a process's buffers did not move it.
A forward of 256 small Triton launches (an RNN's steps) follows the probe (0.810-0.831 ms in
contexts probing 0.463-0.477, 0.854-0.863 in contexts probing 0.514-0.519): that was most of
the RNN's 7% spread between evaluations, each evaluation's process a fresh draw. (Where its
weights lie moves it too, by up to 4%: worker.op_relocate.)

So every process the judge times (the kernel's worker, the reference's process, the compiled
reference's) draws its context before anything else uses CUDA in it: it creates the primary
context, probes it, and while the probe is above the device's floor by more than the
tolerance it resets the context and creates it again, at most `max_draws` times (it keeps
the last: a context cannot be taken back). Both sides are drawn alike, at a moment the
judge keeps the GPU quiet, and always before the kernel's code exists, so a kernel can
neither choose its draw nor spoil the reference's. The floor is the device's: the judge
keeps the probes of past draws (`Floor`, beside the device's peaks) and passes the floor in
each request.

Only the driver API (ctypes on libcuda) and a PTX probe are used: torch must not have
touched CUDA in the process yet, since a reset under it would pull its context away.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Protocol, Sequence

if TYPE_CHECKING:
    from typing import TypeGuard


class Probed(Protocol):
    """A context that `draw` probes and draws again (Context; a test's stand-in)."""

    def probe(self) -> float: ...

    def redraw(self) -> None: ...

PROBE_LAUNCHES = 256
PROBE_REPEATS = 5  # the fastest of these windows is the probe: another context's work only adds
SPIN_CYCLES = 4_000_000  # ~2 ms at 2 GHz: the host queues the 256 launches (~0.7 ms) behind it
# (a probe is ~15 ms in all, the same figure as behind a 5 ms spin; a new context ~155 ms)
DEFAULT_TOLERANCE = 0.04
DEFAULT_MAX_DRAWS = 6
NO_FLOOR_DRAWS = 3
FLOOR_SAMPLES = 64  # the probes a device's floor is kept from, newest last
SCHEMA = 1

PTX = rb"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry kforge_spin(.param .u64 cycles) {
  .reg .u64 %t0, %t1, %c, %d;
  .reg .pred %p;
  ld.param.u64 %c, [cycles];
  mov.u64 %t0, %clock64;
SPIN:
  mov.u64 %t1, %clock64;
  sub.u64 %d, %t1, %t0;
  setp.lt.u64 %p, %d, %c;
  @%p bra SPIN;
  ret;
}
.visible .entry kforge_tiny(.param .u64 ptr) {
  .reg .u64 %a, %off;
  .reg .u32 %r0;
  .reg .f32 %v;
  ld.param.u64 %a, [ptr];
  mov.u32 %r0, %tid.x;
  mul.wide.u32 %off, %r0, 4;
  add.u64 %a, %a, %off;
  ld.global.f32 %v, [%a];
  add.f32 %v, %v, 0f3F800000;
  st.global.f32 [%a], %v;
  ret;
}
"""


class Unavailable(Exception):
    """The driver API or the probe failed: the context stays as it is (the first draw)."""


def accepts(probe_ms: float, floor_ms: Optional[float], earlier_ms: Sequence[float], tolerance: float) -> bool:
    """Whether a context whose probe is `probe_ms` is kept: within `tolerance` of the lowest
    of the device's floor and this process's earlier draws. Without a floor (the device's
    first evaluation) at least NO_FLOOR_DRAWS contexts are drawn, so that the bar is the
    lowest of several (about half of all contexts are slow ones)."""
    known = [v for v in [floor_ms] + list(earlier_ms) if v is not None]
    if floor_ms is None and len(earlier_ms) < NO_FLOOR_DRAWS - 1:
        return False
    return probe_ms <= min(known) * (1.0 + tolerance)


class Driver:
    """The few driver-API calls a draw needs, each checked, on the harness's one libcuda
    (exchange.cuda_driver)."""

    def __init__(self) -> None:
        from .exchange import cuda_driver

        try:
            self.lib = cuda_driver()
        except OSError as e:
            raise Unavailable("libcuda: %s" % e)

    def call(self, name: str, *args: Any) -> None:
        code = getattr(self.lib, name)(*args)
        if code != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(code, ctypes.byref(text))
            raise Unavailable("%s: error %d (%s)" % (name, code, (text.value or b"?").decode(errors="replace")))


class Context:
    """The primary context of one device, created through the driver API and drawn again on
    request; torch attaches to whichever draw is current when it first uses CUDA."""

    def __init__(self, ordinal: int) -> None:
        self.driver = Driver()
        self.driver.call("cuInit", 0)
        self.device = ctypes.c_int()
        self.driver.call("cuDeviceGet", ctypes.byref(self.device), int(ordinal))
        self.handle: Optional[ctypes.c_void_p] = None
        self.create()

    def create(self) -> None:
        handle = ctypes.c_void_p()
        self.driver.call("cuDevicePrimaryCtxRetain", ctypes.byref(handle), self.device)
        self.driver.call("cuCtxSetCurrent", handle)
        self.handle = handle

    def redraw(self) -> None:
        """Destroys the primary context and creates it again: a new draw."""
        self.driver.call("cuDevicePrimaryCtxRelease_v2", self.device)
        self.handle = None
        self.driver.call("cuDevicePrimaryCtxReset_v2", self.device)
        self.create()

    def probe(self, launches: int = PROBE_LAUNCHES, repeats: int = PROBE_REPEATS) -> float:
        """GPU time (ms) of `launches` tiny launches queued behind a spin: the fastest of
        `repeats` windows."""
        call, c = self.driver.call, ctypes
        module, spin, tiny = c.c_void_p(), c.c_void_p(), c.c_void_p()
        buffer = c.c_uint64()
        start, stop = c.c_void_p(), c.c_void_p()
        call("cuModuleLoadData", c.byref(module), PTX)
        try:
            call("cuModuleGetFunction", c.byref(spin), module, b"kforge_spin")
            call("cuModuleGetFunction", c.byref(tiny), module, b"kforge_tiny")
            call("cuMemAlloc_v2", c.byref(buffer), 4096)
            call("cuEventCreate", c.byref(start), 0)
            call("cuEventCreate", c.byref(stop), 0)
            cycles = c.c_uint64(SPIN_CYCLES)
            spin_args = (c.c_void_p * 1)(c.addressof(cycles))
            tiny_args = (c.c_void_p * 1)(c.addressof(buffer))
            windows: List[float] = []
            for run in range(repeats + 1):  # the first run loads the module's code: not kept
                call("cuLaunchKernel", spin, 1, 1, 1, 1, 1, 1, 0, None, spin_args, None)
                call("cuEventRecord", start, None)
                for _ in range(launches):
                    call("cuLaunchKernel", tiny, 1, 1, 1, 128, 1, 1, 0, None, tiny_args, None)
                call("cuEventRecord", stop, None)
                call("cuEventSynchronize", stop)
                ms = c.c_float()
                call("cuEventElapsedTime", c.byref(ms), start, stop)
                if run:
                    windows.append(float(ms.value))
            return min(windows)
        finally:
            for event in (start, stop):
                if event.value:
                    self.driver.lib.cuEventDestroy_v2(event)
            if buffer.value:
                self.driver.lib.cuMemFree_v2(buffer)
            self.driver.lib.cuModuleUnload(module)


def draw(context: Probed, floor_ms: Optional[float], tolerance: float = DEFAULT_TOLERANCE,
         max_draws: int = DEFAULT_MAX_DRAWS) -> Dict[str, Any]:
    """Probes `context` and draws it again until `accepts`, at most `max_draws` contexts in
    all. Returns the record the judge keeps: every probe in order (the last is the context
    kept) and whether the kept one was accepted."""
    probes: List[float] = []
    while True:
        probe = context.probe()
        accepted = accepts(probe, floor_ms, probes, tolerance)
        probes.append(probe)
        if accepted or len(probes) >= max(1, int(max_draws)):
            return {"probes_ms": probes, "accepted": accepted}
        context.redraw()


def is_probe(value: object) -> TypeGuard[float]:
    """Whether `value` can be a probe's figure (ms): a positive number, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def floor_of(samples: Iterable[object]) -> Optional[float]:
    """The device's floor from its past probes: the second lowest, so that one probe
    measured too low (it cannot be, but a clock can jump) does not make every later draw
    fail; the lowest while there is one."""
    values = sorted(v for v in samples if is_probe(v))
    if not values:
        return None
    return values[1] if len(values) > 1 else values[0]


class Floor:
    """The probes of past draws on one device (GPU, driver), in the cache directory beside
    the device's peaks. Only the judge reads and writes it, and only probes taken before a
    kernel was loaded go in."""

    def __init__(self, cache_dir: Optional[str], gpu_name: Optional[str], driver: Optional[str]) -> None:
        self.cache_dir = cache_dir
        material = json.dumps({"gpu": gpu_name, "driver": driver, "schema": SCHEMA, "launches": PROBE_LAUNCHES},
                              sort_keys=True)
        self.key = "launch-" + hashlib.sha256(material.encode()).hexdigest()[:24]
        self.samples = self.read()

    def path(self) -> Optional[str]:
        return os.path.join(self.cache_dir, self.key + ".json") if self.cache_dir else None

    def read(self) -> List[float]:
        path = self.path()
        if not path:
            return []
        try:
            with open(path) as f:
                value = json.load(f)
        except (OSError, ValueError):
            return []
        samples = value.get("probes_ms") if isinstance(value, dict) else None
        if not isinstance(samples, list):
            return []
        return [float(v) for v in samples if is_probe(v)]

    def floor_ms(self) -> Optional[float]:
        return floor_of(self.samples)

    def add(self, probes: Iterable[object]) -> None:
        self.samples = (self.samples + [float(v) for v in probes if is_probe(v)])[-FLOOR_SAMPLES:]

    def write(self) -> None:
        """Written as the reference baselines are (atomically; a cache that cannot be
        written only costs a draw or two next time)."""
        from .timing import write_baseline

        if self.cache_dir:
            write_baseline(self.cache_dir, self.key, {"probes_ms": self.samples, "schema": SCHEMA})


class Draws:
    """The judge's side of the draws of one evaluation: the request each timing process gets
    (the floor as it stands), and each process's record, kept for the timing's environment.
    A reply is checked before anything of it is kept: probes must be positive numbers."""

    def __init__(self, floor: Floor, tolerance: float = DEFAULT_TOLERANCE, max_draws: int = DEFAULT_MAX_DRAWS) -> None:
        self.floor = floor
        self.tolerance = tolerance
        self.max_draws = max_draws
        self.records: Dict[str, Dict[str, Any]] = {}

    def request(self) -> Dict[str, Any]:
        return {"op": "draw", "floor_ms": self.floor.floor_ms(), "tolerance": self.tolerance,
                "max_draws": self.max_draws}

    def take(self, who: str, request: Mapping[str, Any], reply: Mapping[str, Any]) -> Dict[str, Any]:
        """Keeps `who`'s record from its reply to `request`; its probes join the floor."""
        record: Dict[str, Any] = {"floor_ms": request["floor_ms"]}
        probes: Any = reply.get("probes_ms")
        valid = isinstance(probes, list) and 0 < len(probes) <= self.max_draws and all(map(is_probe, probes))
        if valid:
            record.update(probes_ms=[float(v) for v in probes], accepted=bool(reply.get("accepted")))
            self.floor.add(record["probes_ms"])
            self.floor.write()
        else:
            record["error"] = str(reply.get("error") or "the process answered without probes")[:300]
        self.records[who] = record
        return record

    def environment(self) -> Optional[Dict[str, Any]]:
        """The timing environment's `launch_path`: None where nothing was drawn."""
        if not self.records:
            return None
        return {"tolerance": self.tolerance, "max_draws": self.max_draws, "launches": PROBE_LAUNCHES,
                "floor_ms": self.floor.floor_ms(), "processes": dict(self.records)}
