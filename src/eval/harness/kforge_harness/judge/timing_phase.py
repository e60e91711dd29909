"""The timing phase: both models' timed runs, interleaved (timed.py), into the result's
timing record; and a task check's timing of the reference alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import baselines, defaults, knobs, timing
from ..device import environment as device_environment, gpu_clocks
from ..memory import tensor_bytes
from ..timed import time_runs, window_gain
from ..wire import TimingRecord
from .context import Run, between_evaluations, input_signature, interval_method
from .reference import Reference


@dataclass
class Baselines:
    """The second references' records (baselines.py, defaults.py), once known: measured
    before any kernel is imported, applied to every timing."""

    compiled: Optional[dict[str, Any]] = None
    defaults: Optional[dict[str, Any]] = None

    def apply(self, run: Run, result: Any) -> Any:
        """The timing with the compile baseline's figures, the score against them and the
        baseline its headline is against (baselines.py), then the defaults figures where
        measured; the result notes a baseline asked for and not had. A compile figure the
        job took from the cache only, and found none of, is deferred (baselines.deferred)."""
        if run.settings.compile_baseline and self.compiled is None and \
                run.spec.compile_source == baselines.CACHE_ONLY:
            baselines.deferred(result, run.settings.baseline or "best")
        elif run.settings.compile_baseline:
            baselines.against_compile(result, self.compiled, run.settings.baseline or "best")
            if self.compiled is not None and self.compiled.get("error"):
                run.note("no torch.compile baseline (%s): %s; scores are against eager PyTorch"
                         % (self.compiled["mode"], self.compiled["error"]))
        if self.defaults is not None:
            defaults.against_defaults(result, self.defaults)
            if self.defaults.get("error"):
                run.note("no figure under PyTorch's default settings: %s" % self.defaults["error"])
        return result


def reference_timing(run: Run, reference: Reference, flush: Any, base: Any,
                     draw_ms: Callable[[], float]) -> TimingRecord:
    """A task check's timing: the reference alone (cached per task, inputs, device and
    method, or measured now)."""
    spec = run.spec
    device, inputs = run.result["device"], input_signature(base)
    key, cached = run.store.reference_timing(device, inputs)
    # Rounds time the reference again in its process: it must not be let go for a cache hit.
    use_cache = spec.settings.baseline_cache and spec.kernelbench_rounds <= 1
    if cached is not None and use_cache:
        cached["cached"] = True
        figures = cached
    else:
        figures = reference.time_alone(flush, draw_ms)
        if spec.settings.baseline_cache:
            run.store.keep_reference_timing(device, inputs, figures)
        figures["cached"] = False
    result = TimingRecord({"meaningful": True, "method": timing.METHOD_NAME, "kernel": {}, "score": None,
                           "baseline_key": key, "reference": figures, "flush_l2_bytes": tensor_bytes(flush),
                           "calibration": reference.side.null if reference.side else None,
                           "environment": environment(run, reference.tf32, None)})
    return result


def environment(run: Run, reference_tf32: Any, before: Any) -> dict[str, Any]:
    """The timing's environment record (device.environment, with the policy, the diagnostics and the launch path)."""
    env: dict[str, Any] = device_environment(run.result["device"], run.result["versions"], reference_tf32, before,
                                             timing.METHOD_TEXT, run.result.get("input_refresh"))
    env["precision"] = run.policy  # the policy the reference's settings (tf32_*) came from
    env["diagnostics"] = knobs.active()
    env["launch_path"] = run.draws.environment() if run.draws is not None else None
    return env


def bound_window_gain(run: Run, result: Any, single: Any, offset: float) -> None:
    """Issue 34, item 10: in a window of several forwards every input set is written before
    the first forward, so a kernel that found the later sets in its process could compute
    several forwards in one launch. It gains nothing alone: where the kernel's figure per
    forward in windows is below its single-forward figure by more than the reference's is
    (timed.window_gain), its figures count what the reference gains from windows and no
    more, and the result says so. The record is the timing calibration's `windowing`."""
    reference, kernel = result["reference"], result["kernel"]
    windowing = window_gain(single, offset, reference["median_ms"], kernel["median_ms"],
                            result["forwards_per_window"])
    result["calibration"]["windowing"] = windowing
    if not windowing["bounded"] or result["score"] is None:
        return
    gain = windowing["gain"]
    windowing["kernel_median_ms_in_windows"] = kernel["median_ms"]
    windowing["score_in_windows"] = result["score"]
    for key in ("median_ms", "ci_low_ms", "ci_high_ms", "mean_ms", "min_ms", "max_ms"):
        if isinstance(kernel.get(key), (int, float)):
            kernel[key] = kernel[key] * gain
    result["score"] = timing.score(reference, kernel)
    for key in ("score_low", "score_high", "runs_score_low", "runs_score_high"):
        if isinstance(result.get(key), (int, float)):
            result[key] = result[key] / gain
    run.result["flags"].append("window_batching")
    run.result["notes"].append(
        "the kernel's forwards were %.2fx faster per forward in windows of %d forwards than alone "
        "(%.4f ms alone), against %.2fx for the reference: more than sharing a window gives (a kernel that "
        "computes several forwards' inputs in one launch gains so); its figures count the reference's gain only "
        "(score %.3gx, %.3gx in windows)" % (
            windowing["single_forward_ms"]["kernel"] / max(windowing["per_forward_ms"]["kernel"], 1e-9),
            result["forwards_per_window"], windowing["single_forward_ms"]["kernel"],
            windowing["single_forward_ms"]["reference"] / max(windowing["per_forward_ms"]["reference"], 1e-9),
            result["score"], windowing["score_in_windows"]))


def measure(run: Run, ref_proc: Reference, kernel_side: Any, flush: Any, check: Any,
            draw_ms: Callable[[], float], seconds: Baselines) -> TimingRecord:
    """Both models' timed runs, interleaved (timed.py), the kernel's checked by `check`
    (Checker.check_timed); returns the result's timing, with the second references' figures
    (`seconds`) and the notes and flags it calls for."""
    job = run.job
    ref_side = ref_proc.side
    before = gpu_clocks(run.result["device"])
    try:
        nulls, ref_out, kernel_out = time_runs(ref_side, kernel_side, flush, job, run.progress,
                                               check=check, draw_ms=draw_ms, mark=run.clock.mark)
    finally:
        run.clock.mark("timing")
        ref_proc.let_go()
    run.meter.sample()
    null_ms = timing.quantile(nulls, 0.5)
    offset = kernel_side.null["overhead_ms"] - ref_side.null["overhead_ms"]
    reference = ref_out.figures(null_ms, 0.0, ref_side.null, job)
    kernel = kernel_out.figures(null_ms, offset, kernel_side.null, job)
    calibration = dict(kernel_side.null, reference_overhead_ms=ref_side.null["overhead_ms"], offset_ms=offset,
                       interleaved_null_ms=null_ms, interleaved_null_runs=len(nulls),
                       forwards_per_window=kernel_out.forwards)
    result = TimingRecord({"meaningful": True, "method": timing.METHOD_NAME, "reference": reference,
                           "kernel": kernel, "forwards_per_window": kernel_out.forwards,
                           "score": timing.score(reference, kernel), "baseline_key": None,
                           "flush_l2_bytes": tensor_bytes(flush), "calibration": calibration,
                           "environment": environment(run, ref_proc.tf32, before),
                           "interval_method": interval_method(run.settings)})
    if result["score"] is not None:
        low, high = timing.bootstrap_score(ref_out.windows, kernel_out.windows, nulls, offset, seed=run.seed)
        result["runs_score_low"], result["runs_score_high"] = low, high
        result["score_low"], result["score_high"] = timing.with_between_evaluations(
            result["score"], low, high, between_evaluations(run.settings))
    reported_ref = reference.get("reported_median_ms")
    if reported_ref and kernel.get("reported_median_ms"):
        result["reported_score"] = reported_ref / kernel["reported_median_ms"]
    result["noisy"] = bool(reference.get("noisy") or kernel.get("noisy"))
    if kernel_out.single is not None:
        bound_window_gain(run, result, kernel_out.single, offset)
    seconds.apply(run, result)
    timing_notes(run, result, reference, kernel, kernel_side, ref_side)
    return result


def timing_notes(run: Run, result: Any, reference: Any, kernel: Any, kernel_side: Any, ref_side: Any) -> None:
    """The notes and flags of a measured timing: noise, a timer that disagrees with the judge's, a
    host-bound forward, the gate's timeouts, a suspicious speedup."""
    notes, flags = run.result["notes"], run.result["flags"]
    if result["noisy"]:
        flags.append("noisy_timing")
        notes.append("%s: the score is uncertain; run again on a quieter GPU or raise timing_budget_s" % "; ".join(
            "the %s's median %.4f ms has a wide 95%% interval [%.4f-%.4f]" % (name, f["median_ms"],
                                                                            f["ci_low_ms"], f["ci_high_ms"])
            for name, f in (("reference", reference), ("kernel", kernel)) if f.get("noisy")))
    if timing.reported_disagrees(kernel.get("reported_median_ms"), kernel["median_ms"]):
        flags.append("reported_time_disagrees")
        notes.append("the kernel's process reported %.4f ms per forward from its own CUDA events; the judge "
                     "measured %.4f ms around its work: a patched or misled timer (the score is the judge's "
                     "figure)" % (kernel["reported_median_ms"], kernel["median_ms"]))
    if kernel.get("host_queue_ms", 0) > kernel["median_ms"]:
        notes.append(
            "the kernel's forward takes %.4f ms of host time to queue its GPU work, more than the %.4f ms the "
            "GPU spends on it: in eager use it would be host-bound (the score compares GPU time; the "
            "reference queues in %.4f ms)" % (kernel["host_queue_ms"], kernel["median_ms"],
                                              reference.get("host_queue_ms") or 0.0))
    timeouts = kernel_side.clock.timeouts
    kernel["gate_timeouts"] = timeouts
    reference["gate_timeouts"] = ref_side.clock.timeouts
    if timeouts:
        notes.append("%d timed run(s) of the kernel were not queued in time for the gate (a forward that waits "
                     "for the GPU from the host): their windows include host time" % timeouts)
    suspicious = run.settings.suspicious_speedup
    if result["score"] is not None and result["score"] > suspicious:
        flags.append("suspicious_speedup")
        notes.append("speedup %.1fx is above %gx: check the kernel does all of the work"
                     % (result["score"], suspicious))
