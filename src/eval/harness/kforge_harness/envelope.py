"""The envelope between kforge and the harness's server (server.py), typed: one dataclass per
request kforge sends (its `op`) and per event the server answers with (its `event`). The
server parses each request line into its record (`parse_request`: an unknown op, or a field
of the wrong JSON type, is an `error` event naming it) and builds each event from its record
(`Event.message()`). kforge's side is src/eval/envelope.rs (its `Request` and `Event`
enums); tests/harness_wire.rs compares its `schema()` with this module's (`schema()`): each
op and event with its fields and their JSON types, both ways.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Union

from .wire import JSON_TYPES, WireError


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
class Rescore:
    """An evaluation's timing scored again against a compile figure measured after its
    verdict (baselines.rescored: `against_compile`, the one scoring there is): `timing` the
    evaluation's, `compiled` the figure (a task check's timing's `compile`), `choice` the
    `[eval] baseline`. Answered by `rescored`."""

    OP: ClassVar[str] = "rescore"
    id: Optional[str]
    timing: dict[str, Any] = field(default_factory=dict)
    compiled: Optional[dict[str, Any]] = None
    choice: str = "best"


@dataclass(frozen=True)
class Shutdown:
    """Exit (nothing answers it, so it has no id)."""

    OP: ClassVar[str] = "shutdown"


Request = Union[Eval, Cancel, StaticCheck, DeviceInfo, SandboxInfo, NcuCheck, DevicePeaks, Rescore, Shutdown]
REQUESTS: tuple[type, ...] = (Eval, Cancel, StaticCheck, DeviceInfo, SandboxInfo, NcuCheck, DevicePeaks, Rescore,
                              Shutdown)
_PYTHON_TYPES: dict[str, type] = {name: python for python, name in JSON_TYPES.items()}


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
    kinds = _fields(record)
    for f in dataclasses.fields(record):
        if f.name not in message or message[f.name] is None:
            continue
        value = message[f.name]
        if not isinstance(value, _PYTHON_TYPES[kinds[f.name]]):
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
class Rescored(Event):
    """The answer to `rescore`: the timing scored against the compile figure."""

    EVENT: ClassVar[str] = "rescored"
    timing: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Info(Event):
    """The answer to a query (device_info, sandbox_info, ncu_check, device_peaks): its
    `event` is the query's op."""

    kind: str = ""
    info: dict[str, Any] = field(default_factory=dict)

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


EVENTS: tuple[type, ...] = (Progress, Started, Result, Static, Rescored, Error)
INFO_OPS = (DeviceInfo.OP, SandboxInfo.OP, NcuCheck.OP, DevicePeaks.OP)


def schema() -> dict[str, dict[str, dict[str, str]]]:
    """{"ops": {op: {field: JSON type}}, "events": {event: {field: JSON type}}}: each request
    and each event as it is on the wire (an event's `id` included, a query's answer under the
    query's op), for tests/harness_wire.rs to compare with kforge's `eval::envelope::schema()`.
    Null and absence are not part of it: parse_request takes any field left out or null as
    its default, and kforge reads what an event may leave out as an Option. The hello, the
    server's first line, is not an event of the envelope."""
    events = {e.EVENT: _fields(e) for e in EVENTS}  # type: ignore[attr-defined]
    info = {name: kind for name, kind in _fields(Info).items() if name != "kind"}
    events.update({op: info for op in INFO_OPS})
    return {"ops": {r.OP: _fields(r) for r in REQUESTS},  # type: ignore[attr-defined]
            "events": events}


def _fields(record: type) -> dict[str, str]:
    """A record's fields with their JSON types (wire.JSON_TYPES; Optional[T] is T's)."""
    hints = typing.get_type_hints(record)
    out = {}
    for f in dataclasses.fields(record):
        hint = hints[f.name]
        if typing.get_origin(hint) is Union:
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        out[f.name] = JSON_TYPES[typing.get_origin(hint) or hint]
    return out
