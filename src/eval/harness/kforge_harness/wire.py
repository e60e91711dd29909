"""The job kforge sends and the result the harness sends back, as typed records.

`Job` (with its `EvalSettings`, the `[eval]` section flattened beside the job's own fields)
mirrors `eval::protocol::Job`; `Result` lists the top-level fields of `EvalResult`
(docs/eval-result.md), `Timing`, `TimingStats` and `CompileFigures` those of its timing and
the figures inside it, `Tolerance`, `OutputTolerance` and `Oracle` those of its tolerance. `schema()` describes them in the terms of kforge's
`eval::wire_schema`, and tests/harness_wire.rs checks that the two sides agree, field by
field, both ways. The judge builds each result record in a `Record` of its dataclass,
which refuses a key the dataclass does not declare.

A field typed `Optional[T]` is always sent and may be null; one with a default of None may
also be left out (kforge leaves an unset `atol` out).

The field types are read at run time (`field_type`, through `typing.get_type_hints`), on
Python 3.9 too: they are written with `Optional`, `Dict` and `List` from typing. A JSON
object or array whose contents this module does not describe is `Dict[str, Any]` or
`List[Any]`.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple, \
    TypeVar, Union

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    _Declared = TypeVar("_Declared", bound=DataclassInstance)


class WireError(ValueError):
    """A job that does not match this harness's `Job`: a key missing, unknown, or of the
    wrong JSON type (a kforge and a harness of different versions)."""


@dataclass(frozen=True)
class EvalSettings:
    """The `[eval]` settings as this job applies them (config.rs `EvalConfig`, documented
    there and in docs/architecture.md, Evaluation)."""

    trials: int
    signed_trial: bool
    post_timing_check: bool
    timing_trials: int
    min_timing_trials: int  # at most timing_trials
    timing_precision: float
    between_evaluations: float  # never negative
    timing_budget_s: float
    warmup: int
    flush_l2: bool
    timeout_s: float
    input_draw_limit_s: float
    seed: int
    reject_torch_ops: bool
    suspicious_speedup: float
    tolerance: str  # precision.TOLERANCE_MODES
    precision: str  # precision.POLICIES
    static_checks: bool
    require_sandbox: bool
    baseline_cache: bool  # off where the job has no baseline_cache_dir
    compile_baseline: bool  # off where the job does not time
    compile_mode: str
    baseline: str  # eager, compile or best
    executor: str  # fork or spawn
    shape_check: bool  # kforge's own (re-checks on unseen shapes); the harness does not read it
    # After this job, start the judge of the next one like it before it is asked for
    # (ahead.py): kforge sets it for a session's candidates where `[eval] start_ahead` is on.
    start_ahead: bool
    # One atol and rtol for every dtype; None: each output's from its dtype.
    atol: Optional[float] = None
    rtol: Optional[float] = None


@dataclass(frozen=True)
class Job:
    """One evaluation job (`{"op": "eval", "job": ...}`)."""

    task_path: str
    kernel_path: str
    device: str  # as torch names it: cpu, cuda:1
    timing: bool  # time both sides (never on the CPU)
    baseline_cache_dir: Optional[str]
    profile: bool  # run Nsight Compute on a correct kernel
    reference_only: bool  # a task check: no kernel
    kernelbench_protocol: bool  # a task check also times the reference with KernelBench's protocol
    kernelbench_rounds: int  # at least 1
    # Where the compile baseline's figure may come from (baselines.COMPILE_SOURCES):
    # `cache_or_measure`, or `cache_only` (a one-shot `kforge eval` measures it after the
    # verdict: without a cached figure the timing leaves it out, `compile_deferred`).
    compile_source: str
    settings: EvalSettings

    @staticmethod
    def parse(message: object) -> Job:
        """The job in a request; WireError names the first key that does not fit."""
        if not isinstance(message, dict):
            raise WireError("the job is %s, not an object" % json_type(message))
        own = {f.name for f in dataclasses.fields(Job)} - {"settings"}
        settings = {k: v for k, v in message.items() if k not in own}
        fields = {k: v for k, v in message.items() if k in own}
        return Job(settings=record(EvalSettings, settings, "job"), **record_fields(Job, fields, "job"))


@dataclass
class Result:
    """The top-level fields of an evaluation result (`EvalResult`; protocol.new_result is
    its skeleton). Their contents are described in docs/eval-result.md."""

    schema: int
    id: Optional[str]
    status: str
    correct: bool
    category: Optional[str]  # protocol.CATEGORIES
    summary: str
    message: str
    details: Dict[str, Any]
    log: str
    device: Dict[str, Any]
    versions: Dict[str, Any]
    static: Dict[str, Any]
    alignment: Optional[Dict[str, Any]]
    trials: List[Any]
    timing: Optional[Dict[str, Any]]
    flags: List[Any]
    notes: List[Any]
    profile: Optional[Dict[str, Any]]
    phase: Optional[str]
    duration_s: float
    child_s: float
    phases_s: Dict[str, Any]
    server_phases_s: Dict[str, Any]
    sandbox: Optional[Dict[str, Any]]
    audit: Optional[Dict[str, Any]]
    tolerance: Optional[Dict[str, Any]]
    precision: Optional[Dict[str, Any]]
    memory: Dict[str, Any]
    footprint: Optional[Dict[str, Any]]
    inputs_drawn_on: Optional[str]
    input_refresh: Optional[str]
    speed_of_light: Optional[Dict[str, Any]]


@dataclass
class TimingStats:
    """One model's timing figures (`TimingStats`: the timing's `reference` and `kernel`),
    as timed.py's `figures()` builds them."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    runs: int
    requested_runs: int
    budget_limited: bool
    ci_low_ms: Optional[float]
    ci_high_ms: Optional[float]
    noisy: bool
    window_median_ms: Optional[float]
    null_ms: Optional[float]
    reported_median_ms: Optional[float]
    gate_timeouts: int
    precision_reached: Optional[bool]
    checked_runs: List[Any]  # kernel only
    cached: bool  # reference only
    # Written by the harness and kept by kforge in the struct's `extra` (passed through to
    # eval/<id>.json, not read): the forwards each window held, the host time to queue one
    # forward, the null window's fill.
    PASSED_THROUGH: ClassVar[FrozenSet[str]] = frozenset({"forwards_per_window", "host_queue_ms", "null_fill_ms"})


@dataclass
class CompileFigures:
    """The reference under torch.compile (`CompileFigures`: the timing's `compile`), as
    baselines.py's `figures()` and `unavailable()` build it."""

    mode: str
    error: Optional[str]
    compile_s: Optional[float]
    median_ms: Optional[float]
    ci_low_ms: Optional[float]
    ci_high_ms: Optional[float]
    noisy: bool
    eager_median_ms: Optional[float]
    speedup_over_eager: Optional[float]
    speedup_low: Optional[float]
    speedup_high: Optional[float]
    cached: bool
    # Kept by kforge in `extra`: the compiled side's runs and forwards per window.
    PASSED_THROUGH: ClassVar[FrozenSet[str]] = frozenset({"runs", "forwards_per_window"})


@dataclass
class DefaultsFigures:
    """The reference under PyTorch's default precision settings (`DefaultsFigures`: the
    timing's `defaults`), as defaults.py's `figures()` and `unavailable()` build it."""

    error: Optional[str]
    pytorch_settings: Dict[str, Any]
    policy_settings: Dict[str, Any]
    differs: Optional[str]
    median_ms: Optional[float]
    ci_low_ms: Optional[float]
    ci_high_ms: Optional[float]
    noisy: bool
    reference_median_ms: Optional[float]
    speedup_over_reference: Optional[float]
    speedup_low: Optional[float]
    speedup_high: Optional[float]
    cached: bool
    used_for: str


@dataclass
class Timing:
    """The result's `timing` (`Timing`), as the judge builds it: `reference` and `kernel`
    are `TimingStats`, `compile` a `CompileFigures`, `defaults` a `DefaultsFigures`;
    `calibration`, `environment`,
    `kernelbench` and `rounds` are not typed here."""

    meaningful: bool
    method: Optional[str]
    forwards_per_window: Optional[int]
    reference: Dict[str, Any]
    kernel: Dict[str, Any]
    score: Optional[float]
    score_low: Optional[float]
    score_high: Optional[float]
    interval_method: Optional[str]
    noisy: bool
    reported_score: Optional[float]
    baseline_key: Optional[str]
    flush_l2_bytes: int
    calibration: Optional[Dict[str, Any]]
    environment: Optional[Dict[str, Any]]
    kernelbench: Optional[Dict[str, Any]]
    rounds: List[Any]
    compile: Optional[Dict[str, Any]]
    score_vs_compile: Optional[float]
    score_vs_compile_low: Optional[float]
    score_vs_compile_high: Optional[float]
    baseline: Optional[str]
    baseline_reason: Optional[str]
    defaults: Optional[Dict[str, Any]] = None
    score_vs_defaults: Optional[float] = None
    score_vs_defaults_low: Optional[float] = None
    score_vs_defaults_high: Optional[float] = None
    # baselines.DEFERRALS: the compile figure left out of this evaluation (`pending`), or
    # measured after its verdict and scored against since (`after_verdict`); absent otherwise.
    compile_deferred: Optional[str] = None
    # Kept by kforge in `extra`: the bootstrap interval alone, before the
    # between-evaluations term widens it into score_low/score_high.
    PASSED_THROUGH: ClassVar[FrozenSet[str]] = frozenset({"runs_score_low", "runs_score_high"})


@dataclass
class Tolerance:
    """The result's `tolerance` (`ToleranceUsed`), as compare.py's `compare_outputs()` and
    `merge_tolerance()` build it: `outputs` maps each floating output to an
    `OutputTolerance`, `oracle` is an `Oracle` (null outside the `oracle` rule)."""

    mode: str
    precision: Optional[str]
    atol: Optional[float]
    rtol: Optional[float]
    effective_atol: Dict[str, Any]
    outputs: Dict[str, Any]
    oracle: Optional[Dict[str, Any]]


@dataclass
class OutputTolerance:
    """One floating output's entry in the tolerance (`OutputTolerance`): the rule it was held
    to and, under `oracle`, its margin; under `dtype`, its atol and rtol."""

    dtype: str
    rule: Optional[str] = None
    atol: Optional[float] = None
    rtol: Optional[float] = None
    limit: Optional[float] = None
    error_ratio: Optional[float] = None
    honest_rms: Optional[float] = None
    max_allowed: Optional[float] = None
    oracle: Optional[str] = None
    worst_at: Optional[List[Any]] = None
    fallback: Optional[str] = None


@dataclass
class Oracle:
    """The float64 oracle of the `oracle` rule (`OracleUsed`), as oracle.py's
    `Oracle.record()` builds it and the judge completes (`seconds`)."""

    kind: str
    rule: str
    factor: Dict[str, Any]
    twin: Optional[str]
    twin_error: Optional[str]
    reason: Optional[str]
    seconds: Optional[float]


RESULT_FIELDS = frozenset(f.name for f in dataclasses.fields(Result))


class Record(Dict[str, Any]):
    """A record as the judge builds it: a plain JSON object on the wire, whose keys can
    only be those its dataclass (`DECLARED`) declares or passes through (a misspelt or
    undeclared key fails where it is written, with a KeyError, not as a field kforge
    silently drops or keeps unread). Such a KeyError is a harness bug: nothing takes it for
    a kernel's or a task's failure, so the server ends the evaluation as a `harness` result
    (only inside the compile baseline's measurement does it cost that baseline alone, as
    any failure there does)."""

    DECLARED: ClassVar[type[DataclassInstance]]  # the dataclass; set by each subclass
    WHAT: ClassVar[str] = ""  # what the record is, for the error

    def __init__(self, fields: Union[Mapping[str, Any], Iterable[Tuple[str, Any]]] = ()) -> None:
        super().__init__()
        self.update(fields)

    @classmethod
    def keys_allowed(cls) -> FrozenSet[str]:
        declared = frozenset(f.name for f in dataclasses.fields(cls.DECLARED))
        passed: FrozenSet[str] = getattr(cls.DECLARED, "PASSED_THROUGH", frozenset())
        return declared | passed

    @classmethod
    def field(cls, key: str) -> str:
        if key not in cls.keys_allowed():
            raise KeyError("%r is not a field of %s (wire.%s)" % (key, cls.WHAT, cls.DECLARED.__name__))
        return key

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(self.field(key), value)

    def setdefault(self, key: str, default: Any = None) -> Any:
        return super().setdefault(self.field(key), default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value


class ResultRecord(Record):
    """A result as the judge and the server build it (`Result`)."""

    DECLARED = Result
    WHAT = "an evaluation result"


class TimingRecord(Record):
    """The result's timing as the judge builds it (`Timing`)."""

    DECLARED = Timing
    WHAT = "a timing"


class TimingStatsRecord(Record):
    """One model's timing figures as timed.py builds them (`TimingStats`)."""

    DECLARED = TimingStats
    WHAT = "a model's timing figures"


class CompileFiguresRecord(Record):
    """The compile baseline's record as baselines.py builds it (`CompileFigures`)."""

    DECLARED = CompileFigures
    WHAT = "the compile baseline's figures"


class DefaultsFiguresRecord(Record):
    """The defaults baseline's record as defaults.py builds it (`DefaultsFigures`)."""

    DECLARED = DefaultsFigures
    WHAT = "the defaults baseline's figures"


class ToleranceRecord(Record):
    """The result's tolerance as compare.py builds it (`Tolerance`)."""

    DECLARED = Tolerance
    WHAT = "a tolerance"


class OutputToleranceRecord(Record):
    """One output's entry in the tolerance (`OutputTolerance`)."""

    DECLARED = OutputTolerance
    WHAT = "an output's tolerance"


class OracleRecord(Record):
    """The oracle's description (`Oracle`)."""

    DECLARED = Oracle
    WHAT = "the oracle's description"


# -- checking ------------------------------------------------------------------------

JSON_TYPES: Dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object",
                               list: "array"}


def json_type(value: object) -> str:
    """The JSON type of a decoded value, as the schema names it."""
    if value is None:
        return "null"
    for python, name in JSON_TYPES.items():
        if type(value) is python:
            return name
    return type(value).__name__


def field_type(cls: type[DataclassInstance], field: dataclasses.Field[Any]) -> Tuple[str, bool, bool]:
    """(the JSON type, null allowed, may be left out) of a dataclass field. A generic
    (`Dict[str, Any]`, `List[Any]`) is the JSON type of its origin."""
    hint = typing.get_type_hints(cls)[field.name]
    nullable = typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint)
    if nullable:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    absent = field.default is None
    return JSON_TYPES[typing.get_origin(hint) or hint], nullable and not absent, absent


def fits(value: object, expected: str, nullable: bool, absent: bool) -> bool:
    if value is None:
        return nullable or absent
    got = json_type(value)
    return got == expected or (expected == "number" and got == "integer")


def record_fields(cls: type[DataclassInstance], message: Mapping[str, Any], where: str) -> Dict[str, Any]:
    """The keyword arguments of `cls` from a decoded object, every key checked."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "settings"}
    for key in message:
        if key not in fields:
            raise WireError("%s: unknown key %r (this harness's %s has no such field)" % (where, key, cls.__name__))
    out: Dict[str, Any] = {}
    for name, field in fields.items():
        expected, nullable, absent = field_type(cls, field)
        if name not in message:
            if absent:
                continue
            raise WireError("%s: missing key %r (%s.%s)" % (where, name, cls.__name__, name))
        value = message[name]
        if not fits(value, expected, nullable, absent):
            raise WireError("%s: key %r is %s, %s.%s wants %s" % (where, name, json_type(value), cls.__name__, name,
                                                                 expected + (" or null" if nullable else "")))
        out[name] = value
    return out


def record(cls: type[_Declared], message: Mapping[str, Any], where: str) -> _Declared:
    return cls(**record_fields(cls, message, where))


def schema() -> Dict[str, Dict[str, str]]:
    """{record: {field: JSON type}}, a type written `T|null` where null is allowed and
    `T|absent` where the field may be left out: what tests/harness_wire.rs compares with
    kforge's `eval::wire_schema::schema()`."""

    def of(cls: type[DataclassInstance]) -> Dict[str, str]:
        out: Dict[str, str] = {}
        for field in dataclasses.fields(cls):
            if field.name == "settings":
                continue
            expected, nullable, absent = field_type(cls, field)
            out[field.name] = expected + ("|null" if nullable else "") + ("|absent" if absent else "")
        return out

    return {"Job": of(Job), "EvalSettings": of(EvalSettings), "EvalResult": of(Result), "Timing": of(Timing),
            "TimingStats": of(TimingStats), "CompileFigures": of(CompileFigures), "Tolerance": of(Tolerance),
            "OutputTolerance": of(OutputTolerance), "Oracle": of(Oracle), "DefaultsFigures": of(DefaultsFigures)}
