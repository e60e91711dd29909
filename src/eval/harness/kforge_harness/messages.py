"""The messages between the judge and a model's process (worker.py: the kernel's, or a
trusted reference's), one TypedDict per request and per reply. Both ends build them with
these types (judge/, timed.py on the judge's side; worker.py on the other), so a field
renamed on one end is a type error on the other (mypy --strict). On the wire each is one
JSON object (protocol.py); the judge validates what comes back (judge/links.py: anything
unexpected is the kernel's crash) and reads replies through these types.

Requests carry `op`; replies carry `type`, the reply each request is due:
  attach -> attached     load -> loaded       params -> params_set   precision -> precision
  clock -> clock_set     draw -> drawn        sets -> sets_set       relocate -> relocated
  forward -> done (timed: armed, then done)   exit -> bye
and any request may be answered by a `failure` (the process's own verdict on itself).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union

Descriptor = Any  # a lent tensor tree's description (exchange.py)


class Attach(TypedDict):
    op: Literal["attach"]
    inputs: Descriptor
    outputs: Descriptor


class Load(TypedDict, total=False):
    op: Literal["load"]
    init_inputs: Descriptor
    seed: int
    source: str
    seal: str  # the key of the worker's sealed messages (seal.py); the kernel's only
    guard: Union[bool, str]  # the run-time guard (guard.py); the kernel's only
    jit_kernels: list[str]  # the kernel's @triton.jit functions, from the server's static report (the audit's)


class Params(TypedDict):
    op: Literal["params"]
    assign: list[list[Any]]  # [parameter name in the loaded model, its buffer's descriptor]


class Precision(TypedDict):
    op: Literal["precision"]


class Forward(TypedDict, total=False):
    op: Literal["forward"]
    mode: str  # "audit", "gpu_time", "timed", "null"
    run: int
    nonce: int
    seq: int
    forwards: int


class Exit(TypedDict):
    op: Literal["exit"]


class Clock(TypedDict):
    op: Literal["clock"]
    flags: Descriptor  # the gate's flags (window.py)


class Draw(TypedDict, total=False):
    op: Literal["draw"]
    floor_ms: Any
    tolerance: float
    max_draws: int


class SetDescriptors(TypedDict):
    """One further set of a window of several forwards (timed.widen): its inputs and
    output slots."""

    inputs: Descriptor
    outputs: Descriptor


class Sets(TypedDict):
    op: Literal["sets"]
    sets: list[SetDescriptors]  # each further set (timed.widen)


class Relocate(TypedDict):
    op: Literal["relocate"]
    nonce: int


class Rehearse(TypedDict):
    op: Literal["rehearse"]
    launchers: list[Any]  # launchers.py's specs of earlier candidates' kernels, to build ahead


class Hello(TypedDict):
    type: Literal["hello"]


class Attached(TypedDict):
    type: Literal["attached"]


class Loaded(TypedDict):
    type: Literal["loaded"]
    state: list[Any]  # [name, shape, dtype] of each parameter and buffer
    module: bool
    tf32: Any  # the process's precision settings once the model is imported


class ParamsSet(TypedDict):
    type: Literal["params_set"]


class PrecisionReading(TypedDict):
    type: Literal["precision"]
    reading: Any  # compiled.read's record


class Done(TypedDict, total=False):
    type: Literal["done"]
    run: Any
    copied: bool
    outputs: Any  # the outputs' description (tensors.describe)
    audit: Any  # the audit record (audit.py), audited forwards only
    gpu: Any  # the GPU time split, gpu_time forwards only
    event_ms: float  # timed forwards: the process's own CUDA events' time per forward (not trusted)


class Bye(TypedDict):
    type: Literal["bye"]


class ClockSet(TypedDict):
    type: Literal["clock_set"]


class SetsSet(TypedDict):
    type: Literal["sets_set"]
    sets: int


class Relocated(TypedDict):
    type: Literal["relocated"]
    bytes: int


class Rehearsed(TypedDict):
    type: Literal["rehearsed"]
    record: Any  # rehearsal.rehearse's record (the process's word only)


class Armed(TypedDict):
    type: Literal["armed"]
    run: Any


class Error(TypedDict):
    type: Literal["error"]
    error: str


class Failure(TypedDict, total=False):
    type: Literal["failure"]
    category: str  # one of worker.WORKER_CATEGORIES
    summary: str
    message: str
    details: dict[str, Any]


Request = Union[Attach, Load, Params, Precision, Forward, Exit, Clock, Draw, Sets, Relocate, Rehearse]
