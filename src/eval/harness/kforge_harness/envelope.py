"""The envelope between kforge and the harness's server (server.py), typed: one dataclass per
request kforge sends (its `op`) and per event the server answers with (its `event`). The
server parses each request line into its record (`parse_request`: an unknown op, or a field
of the wrong JSON type, is an `error` event naming it) and builds each event from its record
(`Event.message()`). kforge's side is src/eval/evaluator.rs and src/eval/server.rs;
tests/harness_wire.rs checks that the ops kforge sends and the events it reads are the ones
declared here (`schema()`), both ways.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Union

from .wire import WireError


@dataclass(frozen=True)
class Eval:
    """Evaluate a job (wire.Job, parsed by the server)."""

    OP: ClassVar[str] = "eval"
    id: Optional[str]
    job: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Cancel:
    """Cancel the evaluation `id` (kills its judge and worker; its result says cancelled)."""

    OP: ClassVar[str] = "cancel"
    id: Optional[str]


@dataclass(frozen=True)
class StaticCheck:
    OP: ClassVar[str] = "static_check"
    id: Optional[str]
    source: str = ""
    reject_torch_ops: bool = False


@dataclass(frozen=True)
class DeviceInfo:
    OP: ClassVar[str] = "device_info"
    id: Optional[str]


@dataclass(frozen=True)
class SandboxInfo:
    OP: ClassVar[str] = "sandbox_info"
    id: Optional[str]


@dataclass(frozen=True)
class NcuCheck:
    OP: ClassVar[str] = "ncu_check"
    id: Optional[str]


@dataclass(frozen=True)
class DevicePeaks:
    OP: ClassVar[str] = "device_peaks"
    id: Optional[str]
    cache_dir: Optional[str] = None


@dataclass(frozen=True)
class Shutdown:
    OP: ClassVar[str] = "shutdown"
    id: Optional[str] = None


Request = Union[Eval, Cancel, StaticCheck, DeviceInfo, SandboxInfo, NcuCheck, DevicePeaks, Shutdown]
REQUESTS: tuple[type, ...] = (Eval, Cancel, StaticCheck, DeviceInfo, SandboxInfo, NcuCheck, DevicePeaks, Shutdown)
_JSON_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "bool": (bool,), "dict[str, Any]": (dict,)}


def parse_request(message: object) -> Request:
    """The request a line holds; WireError (naming the op or the field) where it holds none."""
    if not isinstance(message, dict):
        raise WireError("a request is a JSON object")
    op = message.get("op")
    for record in REQUESTS:
        if record.OP == op:  # type: ignore[attr-defined]
            break
    else:
        raise WireError("unknown op %r" % (op,))
    values: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        if f.name not in message or message[f.name] is None:
            continue
        value = message[f.name]
        declared = str(f.type)
        if declared.startswith("Optional[") and declared.endswith("]"):
            declared = declared[len("Optional["):-1]
        expected = _JSON_TYPES.get(declared)
        if expected is not None and not isinstance(value, expected):
            raise WireError("%s.%s is a %s, not a %s" % (op, f.name, type(value).__name__, f.type))
        values[f.name] = value
    if "id" not in values and any(f.name == "id" and f.default is dataclasses.MISSING
                                  for f in dataclasses.fields(record)):
        values["id"] = None
    parsed: Request = record(**values)
    return parsed


@dataclass(frozen=True)
class Event:
    """An event of the server's, for request `id`: `message()` is its JSON object."""

    EVENT: ClassVar[str] = ""
    id: Optional[str]

    def message(self) -> dict[str, Any]:
        return dict(dataclasses.asdict(self), event=self.EVENT)


@dataclass(frozen=True)
class Progress(Event):
    EVENT: ClassVar[str] = "progress"
    phase: str = ""


@dataclass(frozen=True)
class Started(Event):
    EVENT: ClassVar[str] = "started"
    executor: str = "fork"
    sandbox: str = ""


@dataclass(frozen=True)
class Result(Event):
    EVENT: ClassVar[str] = "result"
    result: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Static(Event):
    EVENT: ClassVar[str] = "static"
    category: Optional[str] = None
    report: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Info(Event):
    """The answer to a query (device_info, sandbox_info, ncu_check, device_peaks): its
    `event` is the query's op."""

    kind: str = ""
    info: Any = None

    def message(self) -> dict[str, Any]:
        return {"event": self.kind, "id": self.id, "info": self.info}


@dataclass(frozen=True)
class Error(Event):
    EVENT: ClassVar[str] = "error"
    error: str = ""
    traceback: Optional[str] = None

    def message(self) -> dict[str, Any]:
        out = dict(super().message())
        if self.traceback is None:
            del out["traceback"]
        if self.id is None:
            del out["id"]
        return out


EVENTS: tuple[type, ...] = (Progress, Started, Result, Static, Error)
INFO_OPS = (DeviceInfo.OP, SandboxInfo.OP, NcuCheck.OP, DevicePeaks.OP)
HELLO = "hello"  # the server's first line (server.serve), before any request


def schema() -> dict[str, list[str]]:
    """The ops and events declared here (tests/harness_wire.rs compares them with kforge's)."""
    return {"ops": sorted(r.OP for r in REQUESTS),  # type: ignore[attr-defined]
            "events": sorted([e.EVENT for e in EVENTS] + list(INFO_OPS) + [HELLO])}  # type: ignore[attr-defined]
