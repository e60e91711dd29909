"""Timed runs as the judge measures them (window.py): null calibration, then the reference's
and the kernel's runs interleaved with null runs of the reference's process, until each
median is known well enough, with checks of the kernel's outputs on runs the judge picks.

Both figures come out of one loop: run by run the reference (in its own process,
refprocess.py), the kernel and a null run take turns in a random order, so a drift of the
GPU's clocks or of the cost of switching between processes (a null window is ~0.3 ms of
it) lands on all three alike. Null runs after the kernel is imported are the reference
process's (the kernel's own could be slowed on purpose); the kernel's process's null runs,
taken before its import beside the reference's, give the offset between the two processes.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, overload

from . import knobs, messages, timing
from .device import thrash_l2
from .protocol import HarnessError, KernelFailure
from .timing import Figures
from .window import WindowClock, WorkerGone
from .wire import TimingStatsRecord

if TYPE_CHECKING:
    import torch

    from .exchange import Lender
    from .judge.links import WorkerLink
    from .window import HostGate, Run

# What write_inputs() of a run is: it queues the run's inputs on the judge's stream. Called
# without arguments; `...` because the judge's calibration passes lambdas that bind a value
# as a default argument (`lambda base=first: copy_into(side.inputs, base)`).
WriteInputs = Callable[..., object]
# check(i, run, privates, slot_sets): compares a checked kernel run's snapshot (time_runs).
Check = Callable[[int, "Run", Any, List[Any]], object]
# A snapshot of every output slot of every set: (slot, its copy) per tensor, one list per set.
Snapshot = List[List[Tuple["torch.Tensor", "torch.Tensor"]]]


class Refresh(Protocol):
    """A side's input refresh (judge/inputs.refresher): `(write, privates)` for run `i`."""

    def __call__(self, i: int, keep: bool, input_sets: List[Any], null: bool = False) -> Tuple[WriteInputs, Any]: ...


def no_refresh(i: int, keep: bool, input_sets: List[Any], null: bool = False) -> Tuple[WriteInputs, Any]:
    """A side's refresh before the judge sets it: a harness error, never a run."""
    raise HarnessError("timed run %d: no input refresh was set for this side" % i)

CALIBRATION_RUNS = 30  # per side at most, alternating
# Calibration stops after this many runs per side (and every 5 after) once each side's
# median null window is known within CALIBRATION_ABS_MS or CALIBRATION_SHARE of itself,
# whichever is larger: the offset between the two processes enters every kernel figure,
# and a window that writes large inputs (~1 ms for 1 GiB) is already known to a share of
# its size after a few runs that cost milliseconds each.
CALIBRATION_MIN_RUNS = 10
CALIBRATION_ABS_MS = 0.00025
CALIBRATION_SHARE = 0.001
WIDE_PROBES = 2  # gated windows of several forwards before they are used (widen)
ESTIMATE_RUNS = 3  # gated runs of one forward after the warm-up, for the forwards per window
WARM_RUNS = 3  # ungated windowed runs first: the driver loads modules lazily, which the gate would hold
# A worker that has not said "armed" this long after being asked (and never less than
# ARMED_FLOOR_S) has a forward that waits for the GPU from the host: the gate opens.
ARMED_FLOOR_S = 0.02
ARMED_CAP_S = 2.0
CLOCKS_UP_MS = 30.0  # judge-side GPU work before timed runs: clocks leave idle
# A run whose tail (A to close) is under this share of the null runs' floor closed without
# the worker's context in it.
TAIL_SHARE = 0.5
# Both models' processes move their weights and temporaries (worker.op_relocate) every this
# many rounds of timed runs, at most PLACEMENTS - 1 times: each timing spans several
# placements, which a forward of small launches is sensitive to (docs/benchmarks.md, round 4).
RELOCATE_EVERY = 4
PLACEMENTS = 6
# After timed windows of several forwards: this many rounds of single-forward windows (a null of
# the reference's process, the reference, the kernel, in a random order; every kernel run
# checked). In a window of several forwards every input set is written before the first forward
# starts, so a kernel that finds the later sets in its process could compute them all in one
# launch; alone, a forward has nothing to batch with. Its gain from windows beyond the
# reference's (window_gain) bounds the score.
SINGLE_ROUNDS = 7
# The gain's lower bound must exceed 1 by this much before the score is bounded.
GAIN_SLACK = 0.05


class Side:
    """One model's process as the judge times it: its link, the buffers lent to it (one
    input set and its output slots per forward of a window), its clock, its input refresh
    and (after calibrate) its null runs."""

    def __init__(self, name: str, link: WorkerLink, inputs: Any, slots: Any, gate: Optional[HostGate],
                 lender: Lender, trusted: bool) -> None:
        self.name = name
        self.link = link
        self.inputs = inputs
        self.slots = slots
        self.sets: List[Tuple[Any, Any]] = [(inputs, slots)]
        self.lender = lender
        self.clock = WindowClock(gate, lender)
        self.trusted = trusted
        self.null: Optional[Figures] = None
        self.armed_s = ARMED_FLOOR_S
        self.refresh: Refresh = no_refresh

    def calibration(self) -> Figures:
        """The side's null runs (calibrate): a harness error before they are taken."""
        if self.null is None:
            raise HarnessError("%s: timed before its null runs were calibrated" % self.name)
        return self.null

    def widen(self, count: int) -> None:
        """Lends the process input sets and output slots for windows of `count` forwards."""
        if count <= len(self.sets):
            return
        extra: List[Tuple[Any, Any]] = []
        descriptors: List[messages.SetDescriptors] = []
        fds: List[int] = []
        for _ in range(count - len(self.sets)):
            (inputs, slots), (input_desc, slot_desc), set_fds = self.lender.like([self.inputs, self.slots])
            extra.append((inputs, slots))
            descriptors.append({"inputs": input_desc, "outputs": slot_desc})
            fds.extend(set_fds)
        self.link.call(messages.Sets(op="sets", sets=descriptors), "sets_set", fds)  # closes the fds once sent
        self.sets.extend(extra)

    def input_sets(self, forwards: int) -> List[Any]:
        return [inputs for inputs, _ in self.sets[:forwards]]

    def slot_sets(self, forwards: int) -> List[Any]:
        return [slots for _, slots in self.sets[:forwards]]

    def run(self, mode: str, run: int, write_inputs: WriteInputs, flush: Optional[torch.Tensor],
            armed_within_s: Optional[float], snapshot: Optional[Callable[[], Any]] = None, gated: bool = True,
            forwards: int = 1) -> Run:
        try:
            return self.clock.run(self.link, mode, run, write_inputs, flush, armed_within_s, snapshot, gated,
                                  forwards=forwards)
        except WorkerGone as e:
            if self.trusted or mode == "null":
                raise HarnessError("%s: %s" % (self.name, e))
            raise KernelFailure("crash", str(e), details={"run": run})


def null_run(side: Side, i: int, write_inputs: WriteInputs, flush: Optional[torch.Tensor],
             forwards: int = 1) -> Tuple[float, float, float]:
    run = side.run("null", -100 - i, write_inputs, flush, max(ARMED_FLOOR_S, side.armed_s), forwards=forwards)
    return (run.window_ms, run.tail_ms, run.queue_ms)


def fill_time(slots: Any, gate: Optional[HostGate], forwards: int = 1) -> float:
    """The GPU time (ms) of filling tensors like the outputs `forwards` times back to back,
    on the judge's stream: what a null run's forwards do in the worker (worker.null_outputs),
    added back to its window. Queued behind the gate (when there is one) as the worker's
    are: launched one by one onto an idle stream, each small fill would wait for the host's
    launch, several microseconds that no window holds."""
    import torch

    from .tensors import flatten_outputs

    tensors = [t for _, t in flatten_outputs(slots) if isinstance(t, torch.Tensor)]
    # torch leaves cuda.Event.__init__ unannotated
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    stop = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    stream = torch.cuda.current_stream()
    times: List[float] = []
    for _ in range(11):
        torch.cuda.synchronize()
        if gate is not None:
            gate.hold(stream)
        try:
            start.record(stream)
            for _ in range(forwards):
                for t in tensors:
                    t.fill_(0)
            stop.record(stream)
        finally:
            if gate is not None:
                gate.release()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return timing.quantile(times[1:], 0.5)


def warm_nulls(side: Side, write_inputs: WriteInputs, flush: Optional[torch.Tensor]) -> None:
    armed: List[float] = []
    for i in range(WARM_RUNS):
        started = time.perf_counter()
        side.run("null", -1 - i, write_inputs, flush, None, gated=False)
        armed.append(time.perf_counter() - started)
    side.armed_s = min(ARMED_CAP_S, max(ARMED_FLOOR_S, 10 * max(armed)))


def calibrate(sides: Sequence[Tuple[Side, WriteInputs]], flush: Optional[torch.Tensor],
              progress: Callable[[str], object]) -> None:
    """Null runs of each side's process before its model is imported (it cannot inflate
    them), alternating: everything a timed run does but the forward, the write of the
    inputs included. `sides` is [(side, write_inputs)]; sets each side.null."""
    progress("calibrating the timing window")
    for side, write in sides:
        warm_nulls(side, write, flush)
    clocks_up(flush)
    fill = fill_time(sides[0][0].slots, sides[0][0].clock.gate)
    runs: Dict[int, List[Tuple[float, float, float]]] = {id(side): [] for side, _ in sides}
    for i in range(CALIBRATION_RUNS):
        for side, write in sides:
            runs[id(side)].append(null_run(side, i, write, flush))
        done = i + 1
        if done >= CALIBRATION_MIN_RUNS and done % 5 == 0 and all(
                null_known([r[0] for r in runs[id(side)]]) for side, _ in sides):
            break
    for side, _ in sides:
        null = timing.calibration(runs[id(side)], fill)
        null["gated"] = side.clock.gating()
        side.null = null


def null_known(windows: Sequence[float]) -> bool:
    """Whether the median of these null windows is known well enough to stop calibrating
    (CALIBRATION_ABS_MS, CALIBRATION_SHARE)."""
    return timing.relative_width(windows, CALIBRATION_ABS_MS) <= CALIBRATION_SHARE


def clocks_up(flush: Optional[torch.Tensor]) -> None:
    """A burst of the judge's own GPU work: an idle GPU runs at a fraction of its clock and
    takes milliseconds to come up, which would slow the first runs."""
    import torch

    if flush is None:
        return
    started = time.perf_counter()
    while (time.perf_counter() - started) * 1e3 < CLOCKS_UP_MS:
        for _ in range(8):
            thrash_l2(flush)
        torch.cuda.synchronize()


class Outcome:
    """One side's timed runs: the judge's figures (whole windows of `forwards` forwards)
    and what the worker reported (per forward)."""

    def __init__(self, forwards: int, fill_ms: float = 0.0) -> None:
        self.forwards = forwards
        self.fill_ms = fill_ms  # added back to each null window: its forwards' fills
        self.windows: List[float] = []
        self.reported: List[float] = []
        self.queues: List[float] = []
        self.checked: List[int] = []
        self.precision_reached = False
        self.budget_limited = False
        self.single: Optional[SingleForward] = None  # single-forward windows after windows of several

    def add(self, run: Run) -> None:
        self.windows.append(run.window_ms)
        self.queues.append(run.queue_ms)

    def estimates(self, null_ms: float, offset: float) -> List[float]:
        """Per forward: each window less the null window (and the process's offset), over
        the forwards it held."""
        return [(w - null_ms - offset) / self.forwards for w in self.windows]

    def figures(self, null_ms: float, offset: float, own_null: Mapping[str, Any],
                job: Mapping[str, Any]) -> TimingStatsRecord:
        figures = TimingStatsRecord(timing.side_figures(self.estimates(null_ms, offset), self.windows,
                                                        null_ms + offset, self.reported, self.forwards))
        # The host time to queue one forward, above the null's: a forward whose host time
        # exceeds its GPU time would be host-bound in eager use (windows hold GPU time only).
        figures["host_queue_ms"] = max(timing.quantile(self.queues, 0.5) - own_null["queue_ms"], 0.0) / self.forwards
        figures.update({"requested_runs": job["timing_trials"], "budget_limited": self.budget_limited,
                        "null_fill_ms": self.fill_ms,
                        "checked_runs": sorted(self.checked), "precision_reached": self.precision_reached})
        return figures


def warm_up(side: Side, job: Mapping[str, Any], flush: Optional[torch.Tensor]) -> float:
    """Warm-up forwards (ungated: modules load lazily); the worker's time from "go" to
    "armed" sets how long the gate waits for it. Then ESTIMATE_RUNS gated runs: their median
    window above the null is the estimate of one forward (ms) that sets the forwards per
    window (an ungated window holds the host's latency, ten times a short forward's)."""
    armed: List[float] = []
    for i in range(max(1, job["warmup"])):
        write, _ = side.refresh(i, False, side.input_sets(1))
        started = time.perf_counter()
        side.run("timed", -1 - i, write, flush, None, gated=False)
        armed.append(time.perf_counter() - started)
    side.armed_s = min(ARMED_CAP_S, max(ARMED_FLOOR_S, 4 * max(armed)))
    windows: List[float] = []
    for i in range(ESTIMATE_RUNS):
        write, _ = side.refresh(i, False, side.input_sets(1))
        windows.append(side.run("timed", -20 - i, write, flush, side.armed_s).window_ms)
    estimate: float = max(timing.quantile(windows, 0.5) - side.calibration()["overhead_ms"], 1e-3)
    return estimate


def widen(sides: Sequence[Side], estimates: Sequence[float], flush: Optional[torch.Tensor], draw_ms: float) -> int:
    """The forwards per window for these models (timing.forwards_per_window; one input draw
    takes `draw_ms`, one per forward is drawn): each side is lent the input sets and slots,
    and a warm-up window of that many forwards (ungated) sets how long the gate waits for
    the worker to queue them. Then WIDE_PROBES gated windows per side: a forward of many
    launches (an RNN's steps) can fill the stream's launch queue while the gate holds it,
    and the worker then cannot say "armed" until the gate opens, which would put its host
    time into every window. Any such timeout keeps one forward per window."""
    import torch

    from .memory import tensor_bytes

    set_bytes = tensor_bytes(sides[0].inputs) + tensor_bytes(sides[0].slots)
    free = torch.cuda.mem_get_info()[0]
    forwards = timing.forwards_per_window(estimates, set_bytes, free, draw_ms)
    if forwards == 1:
        return 1
    single = {id(side): side.armed_s for side in sides}
    for side in sides:
        side.widen(forwards)
        write, _ = side.refresh(-50, False, side.input_sets(forwards))
        started = time.perf_counter()
        side.run("timed", -50, write, flush, None, gated=False, forwards=forwards)
        side.armed_s = min(ARMED_CAP_S, max(ARMED_FLOOR_S, 4 * (time.perf_counter() - started)))
    queued = True
    for side in sides:
        if side.clock.gate is None:
            continue
        before = side.clock.timeouts
        for i in range(WIDE_PROBES):
            write, _ = side.refresh(-60 - i, False, side.input_sets(forwards))
            side.run("timed", -60 - i, write, flush, side.armed_s, forwards=forwards)
        if side.clock.timeouts > before:
            queued = False
        side.clock.timeouts, side.clock.in_a_row = before, 0  # probes, not timed runs
    if queued:
        return forwards
    for side in sides:
        side.armed_s = single[id(side)]
    return 1


@overload
def time_runs(ref: Side, kernel: Side, flush: Optional[torch.Tensor], job: Mapping[str, Any],
              progress: Callable[[str], object], check: Optional[Check] = None,
              rng: Optional[random.Random] = None, draw_ms: Optional[Callable[[], float]] = None,
              mark: Optional[Callable[[str], object]] = None) -> Tuple[List[float], Outcome, Outcome]: ...


@overload
def time_runs(ref: Side, kernel: None, flush: Optional[torch.Tensor], job: Mapping[str, Any],
              progress: Callable[[str], object], check: Optional[Check] = None,
              rng: Optional[random.Random] = None, draw_ms: Optional[Callable[[], float]] = None,
              mark: Optional[Callable[[str], object]] = None) -> Tuple[List[float], Outcome, None]: ...


def time_runs(ref: Side, kernel: Optional[Side], flush: Optional[torch.Tensor], job: Mapping[str, Any],
              progress: Callable[[str], object], check: Optional[Check] = None,
              rng: Optional[random.Random] = None, draw_ms: Optional[Callable[[], float]] = None,
              mark: Optional[Callable[[str], object]] = None) -> Tuple[List[float], Outcome, Optional[Outcome]]:
    """The interleaved loop. `ref` is the reference's Side (its null runs are the ones
    taken throughout), `kernel` the kernel's Side or None (a task check). Each side's
    `refresh(i, keep, input_sets)` returns (write, privates): `write()` queues run i's
    inputs into every set on the judge's stream inside the window, `privates` are the
    judge's own copies, one per set, when `keep`. `check(i, run, privates, slot_sets)`
    compares a checked kernel run's snapshot (one per set). Every window holds the same
    number of forwards (widen), each on its own input set. Runs go on until
    each median's 95% interval is within +-timing_precision (after min_timing_trials), or
    timing_trials, or the time budget (per side). Returns (null windows, ref Outcome,
    kernel Outcome or None). `draw_ms()` is the host time of one forward's inputs.
    `mark(phase)` (PhaseClock.mark) closes the warm-up and widening phases."""
    rng = rng or random.SystemRandom()
    marked: Callable[[str], object] = mark or (lambda phase: None)
    precision = float(job.get("timing_precision") or 0.01)
    sides = [ref] + ([kernel] if kernel is not None else [])
    estimates = [warm_up(side, job, flush) for side in sides]
    marked("timing_warm_up")
    forwards = widen(sides, estimates, flush, draw_ms() if draw_ms is not None else 0.0)
    fill_ms = fill_time(ref.slots, ref.clock.gate, forwards)
    marked("timing_widen")
    per_run = forwards * sum(estimates) + ref.calibration()["overhead_ms"]
    clocks_up(flush)
    planned = timing.run_count(per_run, job)
    progress("timing: up to %d runs of %s%s" % (planned, " and ".join(side.name for side in sides),
                                                ", %d forwards a window" % forwards if forwards > 1 else ""))
    deadline = time.time() + job["timing_budget_s"] * len(sides)
    nulls: List[float] = []
    outcomes = {id(side): Outcome(forwards, fill_ms) for side in sides}
    offset = (kernel.calibration()["overhead_ms"] - ref.calibration()["overhead_ms"]) if kernel is not None else 0.0
    i = 0
    budget_limited = False

    def one(what: str, i: int, keep: bool = False) -> None:
        if what == "null":
            write, _ = ref.refresh(i, False, ref.input_sets(forwards), null=True)
            nulls.append(null_run(ref, i, write, flush, forwards)[0] - fill_ms)
            return
        side = ref if what == "ref" else kernel
        assert side is not None  # "kernel" only where there is one
        out = outcomes[id(side)]
        keep = keep or (check is not None and side is kernel and rng.random() < timing.CHECK_RATE)
        run = timed_window(side, i, flush, forwards, check if keep and side is kernel else None)
        out.add(run)
        out.reported.append(float(run.done["event_ms"]))
        if keep and side is kernel:
            out.checked.append(i)

    def precise() -> bool:
        null = timing.quantile(nulls, 0.5)
        return all(timing.precise_enough(outcomes[id(side)].estimates(null, offset if side is kernel else 0.0),
                                         precision, forwards) for side in sides)

    while True:
        if relocating(i):
            for side in sides:
                relocate(side, rng)
        order = ["null"] + ["ref"] + (["kernel"] if kernel is not None else [])
        rng.shuffle(order)
        last = i >= planned - 1
        for what in order:
            one(what, i, keep=(check is not None and what == "kernel" and last
                               and len(outcomes[id(kernel)].checked) < timing.MIN_CHECKS))
        i += 1
        if i >= planned:
            budget_limited = planned < job["timing_trials"]
            break
        if time.time() > deadline and i >= job["min_timing_trials"]:
            budget_limited = True
            break
        if i >= job["min_timing_trials"] and i % 5 == 0 and precise():
            break
    # A trusted second model (the compiled reference, judge.py) is timed without checks.
    while kernel is not None and check is not None and len(outcomes[id(kernel)].checked) < timing.MIN_CHECKS:
        one("kernel", i, keep=True)
        i += 1
    reached = precise()
    for out in outcomes.values():
        out.budget_limited = budget_limited
        out.precision_reached = reached
    if kernel is not None and forwards > 1:
        outcomes[id(kernel)].single = single_forward_windows(ref, kernel, flush, check, rng)
    return nulls, outcomes[id(ref)], outcomes[id(kernel)] if kernel is not None else None


def timed_window(side: Side, i: int, flush: Optional[torch.Tensor], forwards: int,
                 check: Optional[Check] = None) -> Run:
    """One timed run of `side` (its inputs refreshed): a window that closed without the
    process in it, or a time the process reported that is no time, is its crash. `check`
    (a checked run of the kernel) compares its snapshot. Returns the Run."""
    write, privates = side.refresh(i, check is not None, side.input_sets(forwards))
    snapshot = snapshotter(side.slot_sets(forwards)) if check is not None else None
    run = side.run("timed", i, write, flush, side.armed_s, snapshot=snapshot, forwards=forwards)
    floor = side.calibration()["tail_floor_ms"]
    if run.tail_ms < TAIL_SHARE * floor:
        message = ("timed run %d: the judge's window closed without %s's process in it (%.3f ms from the "
                   "window's start flag to its close, null runs never under %.3f ms): the process wrote the "
                   "flags that order it ahead of its work" % (i, side.name, run.tail_ms, floor))
        if side.trusted:
            raise HarnessError(message)
        raise KernelFailure("crash", message, details={"tail_ms": run.tail_ms, "tail_floor_ms": floor, "run": i})
    event = run.done.get("event_ms")
    if not isinstance(event, (int, float)) or not event >= 0:
        raise KernelFailure("crash", "%s's process reported an invalid time %r for run %d" % (side.name, event, i))
    if check is not None:
        check(i, run, privates, side.slot_sets(forwards))
    return run


class SingleForward:
    """Single-forward windows taken after the timed windows of several forwards: whole windows
    (ms) of the reference's process's nulls (less their one fill), of the reference and of the
    kernel."""

    def __init__(self, fill_ms: float) -> None:
        self.fill_ms = fill_ms
        self.nulls: List[float] = []
        self.reference: List[float] = []
        self.kernel: List[float] = []


def single_forward_windows(ref: Side, kernel: Side, flush: Optional[torch.Tensor], check: Optional[Check],
                           rng: random.Random, first: int = 100000) -> SingleForward:
    """SINGLE_ROUNDS rounds of single-forward windows (every kernel run checked: a kernel that
    told them apart could answer them wrong and fast otherwise)."""
    single = SingleForward(fill_time(ref.slots, ref.clock.gate, 1))
    for r in range(SINGLE_ROUNDS):
        order = ["null", "ref", "kernel"]
        rng.shuffle(order)
        for what in order:
            i = first + r
            if what == "null":
                write, _ = ref.refresh(i, False, ref.input_sets(1), null=True)
                single.nulls.append(null_run(ref, i, write, flush, 1)[0] - single.fill_ms)
            elif what == "ref":
                single.reference.append(timed_window(ref, i, flush, 1).window_ms)
            else:
                single.kernel.append(timed_window(kernel, i, flush, 1, check).window_ms)
    return single


def window_gain(single: SingleForward, offset: float, per_forward_reference_ms: float, per_forward_kernel_ms: float,
                forwards: int) -> Dict[str, Any]:
    """How much faster per forward each model ran in windows of `forwards` forwards than alone
    (single-forward windows, SingleForward), and the kernel's gain beyond the reference's:
    `gain` = (kernel alone / kernel in windows) / (reference alone / reference in windows),
    with `gain_low` from the single medians' 95% intervals. An honest kernel gains what the
    reference gains from sharing a window (gain ~1); one that computes several of a window's
    forwards in one launch gains more, and alone it cannot. `bounded` when gain_low exceeds
    1 + GAIN_SLACK: the score is then the single-forward one (the caller divides it by `gain`)."""
    null = timing.quantile(single.nulls, 0.5)
    floor = timing.FLOOR_MS
    reference = [max(w - null, floor) for w in single.reference]
    kernel = [max(w - null - offset, floor) for w in single.kernel]
    ref_ms, kernel_ms = timing.quantile(reference, 0.5), timing.quantile(kernel, 0.5)
    ref_low, ref_high = timing.median_interval(reference)
    kernel_low, _ = timing.median_interval(kernel)
    per_ref, per_kernel = max(per_forward_reference_ms, floor), max(per_forward_kernel_ms, floor)
    gain = (kernel_ms / per_kernel) / (ref_ms / per_ref)
    gain_low = (max(kernel_low, floor) / per_kernel) / (max(ref_high, floor) / per_ref)
    return {"forwards": forwards, "runs": len(kernel), "null_ms": null,
            "single_forward_ms": {"reference": ref_ms, "kernel": kernel_ms},
            "per_forward_ms": {"reference": per_forward_reference_ms, "kernel": per_forward_kernel_ms},
            "gain": gain, "gain_low": gain_low, "bounded": gain_low > 1.0 + GAIN_SLACK}


def relocating(round_index: int) -> bool:
    """Whether both models' processes move their weights before round `round_index` (never
    before the first: they start where they were loaded; never under the diagnostic
    KFORGE_DIAG_NO_RELOCATE, knobs.py)."""
    if knobs.on("KFORGE_DIAG_NO_RELOCATE"):
        return False
    return 0 < round_index and round_index % RELOCATE_EVERY == 0 and round_index // RELOCATE_EVERY < PLACEMENTS


def relocate(side: Side, rng: random.Random) -> None:
    """`side`'s process moves its model's weights and temporaries (worker.op_relocate); its
    link says what a process that fails or goes away is (a kernel's crash, a harness error)."""
    side.link.call(messages.Relocate(op="relocate", nonce=rng.getrandbits(32)), "relocated")


def snapshotter(slot_sets: Sequence[Any]) -> Callable[[], Snapshot]:
    """A function that copies every output slot of every set on the judge's stream (right
    after the run's close): the values a checked run is judged on, one list per set."""
    import torch

    from .tensors import flatten_outputs

    def take() -> Snapshot:
        return [[(slot, slot.clone()) for _, slot in flatten_outputs(slots) if isinstance(slot, torch.Tensor)]
                for slots in slot_sets]
    return take
