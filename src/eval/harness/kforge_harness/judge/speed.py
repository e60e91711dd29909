"""The result's speed of light (sol.py): the reference's work and, on a GPU with timing, the
bound against the device's peaks, both sides' share of it and the faster-than-light flag."""

from __future__ import annotations

from typing import Any, Optional

from .. import sol
from .context import Run


def sol_note(figures: dict[str, Any], kernel: dict[str, Any]) -> str:
    """The note of a kernel flagged faster than light."""
    return ("faster than light: the kernel's median %.4f ms (95%% interval up to %.4f ms) is %.0f%% of the speed of "
            "light, the least time the device's measured peaks allow for the task's work at the precision the policy "
            "accepts (%.4f ms: the bytes certain to cross DRAM, the GEMMs at their fastest accepted math, the "
            "elementwise work on the CUDA cores): it does less work than the reference does (an algebraic shortcut, "
            "or outputs it does not really compute), its timing is not what it runs, or (just above 100%%) the peaks "
            "were measured low; it is not taken as the session's best unless you choose it"
            % (kernel["median_ms"], kernel.get("ci_high_ms") or kernel["median_ms"], figures["kernel_pct"],
               figures["bound_ms"]))


def record_speed_of_light(run: Run, work: Optional[dict[str, Any]], peaks: Any) -> None:
    """result["speed_of_light"] from the reference's counted `work` and the device's `peaks`."""
    result = run.result
    work = work or {"error": "the reference's work was not counted"}
    if "error" in work:
        result["speed_of_light"] = {"counts": None, "reason": work["error"]}
        return
    timing_ = result.get("timing") or {}
    if not run.timing or not timing_.get("reference"):
        result["speed_of_light"] = sol.cpu_figures(work) if not run.gpu else dict(
            sol.cpu_figures(work), reason="not timed: the bound is compared with timed medians only")
        return
    kernel = timing_.get("kernel") or None
    figures = sol.figures(work, peaks, run.policy, result["device"], run.settings.flush_l2,
                          timing_["reference"], kernel if kernel and kernel.get("median_ms") else None)
    result["speed_of_light"] = figures
    if figures["faster_than_light"] and kernel:
        result["flags"].append("faster_than_light")
        result["notes"].append(sol_note(figures, kernel))
    if (figures.get("reference_pct") or 0) > 100:
        result["notes"].append(
            "the reference runs at %.0f%% of the speed of light: the device's measured peaks are below what it "
            "reaches (peaks/ in the cache is measured again when removed)" % figures["reference_pct"])
