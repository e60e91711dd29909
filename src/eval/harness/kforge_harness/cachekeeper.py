"""What evaluations keep for later ones (the reference's timing, the compile baseline, the
reference under PyTorch's defaults, the launch-path floor) and the device's peaks: kept by the trusted server, never by the judge.

The judge runs the task's code (in the tasks' sandbox: docs/security.md, "The task
sandbox"), so nothing of kforge's cache is visible to it and it writes none of it. It asks
the server instead (judgeproc.Remote, one JSON line each way), and the server's `Keeper`
reads and writes the files under keys it computes itself: from what it knows (the task's
source, the job's settings, the harness's versions) and what the judge measured (the device
it names, the inputs' shapes). Every key includes the hash of the task's own source, so a
hostile task reads and writes only entries of its own task: never another task's, and never
one that every task shares. The device's peaks are one such shared record: the server
measures them itself, in a process of its own where no task's code runs (`peaks`).

A request that does not fit (a wrong type, oversized) is answered with an error, never
followed: what the judge sends is data, never a path.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple

from . import baselines, defaults, launchers, launchpath, timing
from .peaks import Peaks

# A cached record (a reference's timing, a baseline's figures) as JSON.
Record = Dict[str, Any]


class FloorStore(Protocol):
    """Where a Floor's samples are kept: a Keeper, or the judge's judgeproc.Remote."""

    def floor_samples(self, gpu: Optional[str], driver: Optional[str]) -> List[float]: ...

    def keep_floor(self, gpu: Optional[str], driver: Optional[str], samples: object) -> None: ...

MAX_MATERIAL = 64 << 10  # bytes of JSON a key's material (the inputs' shapes) may take
MAX_RECORD = 256 << 10  # bytes of JSON of a record to keep
MAX_NAME = 256  # characters of a device name, uuid or driver version


class Refused(ValueError):
    """A judge's request the keeper does not follow: the text says why."""


def json_size(value: object) -> int:
    return len(json.dumps(value, default=str))


def device_of(value: object) -> Dict[str, Optional[str]]:
    """The device as the judge described it, reduced to what keys read: name and uuid."""
    if not isinstance(value, dict):
        raise Refused("the device is not an object")
    out: Dict[str, Optional[str]] = {}
    for name in ("name", "uuid"):
        v = value.get(name)
        if v is not None and not (isinstance(v, str) and len(v) <= MAX_NAME):
            raise Refused("the device's %s is not a short string" % name)
        out[name] = v
    return out


def inputs_of(value: object) -> List[Any]:
    """The inputs' signature ([path, shape, dtype] per tensor), as plain JSON of bounded size."""
    if not isinstance(value, list) or json_size(value) > MAX_MATERIAL:
        raise Refused("the inputs' signature is not a list of at most %d bytes" % MAX_MATERIAL)
    return value


def record_of(value: object) -> Record:
    if not isinstance(value, dict) or json_size(value) > MAX_RECORD:
        raise Refused("the record is not an object of at most %d bytes" % MAX_RECORD)
    return value


def short_text(value: object, what: str) -> Optional[str]:
    if value is not None and not (isinstance(value, str) and len(value) <= MAX_NAME):
        raise Refused("%s is not a short string" % what)
    return value


class Keeper:
    """The server's side: one evaluation's view of the cache (`cache_dir`, the job's
    baseline_cache_dir; None keeps nothing). `peaks()` gives the device's peaks (the server
    measures them); answer() serves a judge's request."""

    def __init__(self, cache_dir: Optional[str], task_source: str, versions: Mapping[str, Any], job: Mapping[str, Any],
                 peaks: Optional[Callable[[], Peaks]] = None, kept: Optional[launchers.Kept] = None) -> None:
        self.cache_dir = cache_dir
        self.kept = kept if kept is not None else launchers.Kept()
        self.task_hash = hashlib.sha256(task_source.encode()).hexdigest()
        self.task_source = task_source
        self.versions = versions
        self.job = job
        self.peaks_of = peaks

    # -- keys: the task's hash first, always ----------------------------------------------

    def reference_key(self, device: object, inputs: object) -> str:
        return timing.baseline_key(self.task_source, device_of(device), self.versions, inputs_of(inputs), self.job)

    def compile_key(self, device: object, inputs: object, mode: object) -> str:
        if mode not in baselines.MODES:
            raise Refused("unknown compile mode %r" % (mode,))
        return baselines.cache_key(self.reference_key(device, inputs), mode)

    def floor_key(self, gpu: object, driver: object) -> str:
        material = json.dumps({"gpu": short_text(gpu, "the GPU's name"), "driver": short_text(driver, "the driver"),
                               "schema": launchpath.SCHEMA, "launches": launchpath.PROBE_LAUNCHES,
                               "task": self.task_hash}, sort_keys=True)
        return "launch-" + hashlib.sha256(material.encode()).hexdigest()[:24]

    # -- what the judge asks for ------------------------------------------------------------

    def reference_timing(self, device: object, inputs: object) -> Tuple[str, Optional[Record]]:
        """(key, the cached reference figures or None)."""
        key = self.reference_key(device, inputs)
        return key, timing.read_baseline(self.cache_dir, key)

    def keep_reference_timing(self, device: object, inputs: object, figures: object) -> str:
        key = self.reference_key(device, inputs)
        timing.write_baseline(self.cache_dir, key, record_of(figures))
        return key

    def compile_baseline(self, device: object, inputs: object, mode: object) -> Tuple[str, Optional[Record]]:
        """(key, the cached compile baseline record or None)."""
        key = self.compile_key(device, inputs, mode)
        return key, baselines.read_cached(self.cache_dir, key)

    def keep_compile_baseline(self, device: object, inputs: object, mode: object, record: object) -> str:
        key = self.compile_key(device, inputs, mode)
        baselines.write_cached(self.cache_dir, key, record_of(record))
        return key

    def defaults_baseline(self, device: object, inputs: object) -> Tuple[str, Optional[Record]]:
        """(key, the cached record of the reference under PyTorch's defaults or None)."""
        key = defaults.cache_key(self.reference_key(device, inputs))
        return key, defaults.read_cached(self.cache_dir, key)

    def keep_defaults_baseline(self, device: object, inputs: object, record: object) -> str:
        key = defaults.cache_key(self.reference_key(device, inputs))
        defaults.write_cached(self.cache_dir, key, record_of(record))
        return key

    def floor_samples(self, gpu: Optional[str], driver: Optional[str]) -> List[float]:
        return self.disk_floor(gpu, driver).samples

    def keep_floor(self, gpu: Optional[str], driver: Optional[str], samples: object) -> None:
        if not isinstance(samples, list) or len(samples) > launchpath.FLOOR_SAMPLES \
                or not all(map(launchpath.is_probe, samples)):
            raise Refused("the floor's samples are not a list of at most %d positive numbers"
                          % launchpath.FLOOR_SAMPLES)
        floor = self.disk_floor(gpu, driver)
        floor.samples = [float(v) for v in samples]
        floor.write()

    def disk_floor(self, gpu: Optional[str], driver: Optional[str]) -> launchpath.Floor:
        """launchpath's floor on disk, beside the device's peaks, under the task's key."""
        from .peaks import cache_dir_beside

        floor = launchpath.Floor(None, gpu, driver)
        floor.cache_dir, floor.key = cache_dir_beside(self.cache_dir), self.floor_key(gpu, driver)
        floor.samples = floor.read()
        return floor

    def launchers_key(self, device: object) -> str:
        return json.dumps({"launchers": str(device), "task": self.task_hash}, sort_keys=True)

    def launchers(self, device: object) -> List[launchers.Spec]:
        """The launcher specs of earlier candidates of the task on `device` (launchers.py): in
        the server's memory, for its life."""
        return self.kept.get(self.launchers_key(device))

    def keep_launchers(self, device: object, specs: object) -> None:
        try:
            self.kept.keep(self.launchers_key(device), specs)
        except ValueError as e:
            raise Refused(str(e))

    def peaks(self) -> Peaks:
        if self.peaks_of is None:
            return {"error": "the device's peaks are not measured here"}
        return self.peaks_of()

    def answer(self, request: Mapping[str, Any]) -> Dict[str, Any]:
        """The answer to a judge's request (a dict, never raises): {"error": why} where the
        request does not fit."""
        try:
            ask = request.get("ask")
            if ask == "reference_timing":
                key, cached = self.reference_timing(request.get("device"), request.get("inputs"))
                return {"key": key, "cached": cached}
            if ask == "keep_reference_timing":
                return {"key": self.keep_reference_timing(request.get("device"), request.get("inputs"),
                                                          request.get("record"))}
            if ask == "compile_baseline":
                key, cached = self.compile_baseline(request.get("device"), request.get("inputs"), request.get("mode"))
                return {"key": key, "cached": cached}
            if ask == "keep_compile_baseline":
                return {"key": self.keep_compile_baseline(request.get("device"), request.get("inputs"),
                                                          request.get("mode"), request.get("record"))}
            if ask == "defaults_baseline":
                key, cached = self.defaults_baseline(request.get("device"), request.get("inputs"))
                return {"key": key, "cached": cached}
            if ask == "keep_defaults_baseline":
                return {"key": self.keep_defaults_baseline(request.get("device"), request.get("inputs"),
                                                           request.get("record"))}
            if ask == "floor":
                return {"samples": self.floor_samples(request.get("gpu"), request.get("driver"))}
            if ask == "keep_floor":
                self.keep_floor(request.get("gpu"), request.get("driver"), request.get("samples"))
                return {}
            if ask == "peaks":
                return {"peaks": self.peaks()}
            if ask == "launchers":
                return {"specs": self.launchers(request.get("device"))}
            if ask == "keep_launchers":
                self.keep_launchers(request.get("device"), request.get("specs"))
                return {}
            raise Refused("unknown request %r" % (ask,))
        except Refused as e:
            return {"error": str(e)}


class Floor(launchpath.Floor):
    """The launch-path floor (launchpath.Floor) kept through a store (a Keeper, or the
    judge's judgeproc.Remote): its samples read and written by the server, under the task's
    key."""

    def __init__(self, store: FloorStore, gpu_name: Optional[str], driver: Optional[str]) -> None:
        self.store = store
        self.gpu_name = gpu_name
        self.driver = driver
        super().__init__(None, gpu_name, driver)

    def read(self) -> List[float]:
        return [float(v) for v in self.store.floor_samples(self.gpu_name, self.driver) if launchpath.is_probe(v)]

    def write(self) -> None:
        self.store.keep_floor(self.gpu_name, self.driver, self.samples)
