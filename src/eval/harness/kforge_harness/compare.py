"""Comparison of a kernel's outputs with the reference's: structure, shape, dtype, NaN/Inf
placement and tolerance.

Tolerance modes:
- `scaled` (default): |new - ref| <= atol_eff + rtol * |ref|, where atol_eff = min(atol,
  max(SCALE_FRACTION * scale, ATOL_FLOOR)) and scale is the largest finite |ref| of that
  output. An output whose magnitude is far below atol (a softmax over many columns) can then
  not be matched by zeros or a constant, while outputs of ordinary magnitude (scale >=
  atol / SCALE_FRACTION) are judged exactly as KernelBench judges them.
- `kernelbench`: atol_eff = atol, KernelBench's own rule (torch.allclose), for people who
  want its exact verdicts.
"""

import math

from .tensors import describe_shape, flatten_outputs, structure


TOLERANCE_MODES = ("scaled", "kernelbench")
# 2% of the output's own scale: bf16 rounding (0.4%) and half-precision accumulation stay
# well inside it, while zeros miss the largest element by 100% of the scale.
SCALE_FRACTION = 0.02
ATOL_FLOOR = 1e-7  # an all-zero reference still allows rounding noise


def effective_atol(atol, scale, mode):
    if mode == "kernelbench":
        return atol
    if mode != "scaled":
        raise ValueError("unknown tolerance mode %r" % mode)
    return min(atol, max(SCALE_FRACTION * scale, ATOL_FLOOR))


def weak_outputs(trials, atol=None):
    """Outputs whose reference never reaches atol in magnitude: under KernelBench's rule a
    kernel returning zeros would pass them."""
    weak = set()
    for trial in trials:
        for o in trial["outputs"]:
            if o.get("max_abs_ref") is not None and o.get("atol") is not None and o["max_abs_ref"] < o["atol"]:
                weak.add(o["output"])
    return sorted(weak)


def compare_outputs(ref_out, new_out, atol, rtol, mode="scaled"):
    """Returns (passed, per-output reports, reason of the first failure or None, tolerance
    summary {mode, atol, rtol, effective_atol: {output: value}})."""
    import torch

    tolerance = {"mode": mode, "atol": atol, "rtol": rtol, "effective_atol": {}}

    ref_items = flatten_outputs(ref_out)
    new_items = flatten_outputs(new_out)
    if [p for p, _ in ref_items] != [p for p, _ in new_items]:
        reason = "output structure differs: the kernel returned %s, the reference %s" % (
            structure(new_out), structure(ref_out))
        return False, [], reason, tolerance
    reports = []
    first_failure = None
    for (path, r), (_, n) in zip(ref_items, new_items):
        report = {"output": path, "passed": True}
        reason = None
        if isinstance(r, torch.Tensor):
            report.update({"shape": list(r.shape), "dtype": str(r.dtype).replace("torch.", "")})
            if not isinstance(n, torch.Tensor):
                reason = "%s: the kernel returned %s, the reference a tensor" % (path, type(n).__name__)
            elif tuple(n.shape) != tuple(r.shape):
                reason = "%s: shape %s, the reference %s" % (path, describe_shape(n), describe_shape(r))
            elif n.dtype != r.dtype:
                reason = "%s: dtype %s, the reference %s" % (path, str(n.dtype).replace("torch.", ""), report["dtype"])
            else:
                reason = compare_tensor(path, r, n, atol, rtol, report, mode)
                if "atol_effective" in report:
                    tolerance["effective_atol"][path] = report["atol_effective"]
        elif isinstance(r, (int, float, bool)) and not isinstance(n, torch.Tensor):
            if isinstance(n, (int, float, bool)) and (
                (r == n) or (isinstance(r, float) and math.isclose(n, r, rel_tol=rtol, abs_tol=atol))
            ):
                pass
            else:
                reason = "%s: %r, the reference %r" % (path, n, r)
        elif r is None:
            if n is not None:
                reason = "%s: the kernel returned %s, the reference None" % (path, type(n).__name__)
        else:
            if type(n) is not type(r) or n != r:
                reason = "%s: the kernel returned %r, the reference %r" % (path, n, r)
        if reason:
            report["passed"] = False
            report["reason"] = reason
            first_failure = first_failure or reason
        reports.append(report)
    return first_failure is None, reports, first_failure, tolerance


def within_tolerance_fast(r, n, atol, rtol, report):
    """The common case in a few passes and the outputs' own precision (float32 for half
    types): everything finite and within tolerance. Fills the report's error statistics
    and returns True; returns False (report untouched) when the full check must decide."""
    import torch

    work = torch.float64 if r.dtype == torch.float64 else torch.float32
    rw, nw = r.to(work), n.to(work)
    if not (bool(torch.isfinite(rw).all()) and bool(torch.isfinite(nw).all())):
        return False
    abs_err = (nw - rw).abs()
    abs_ref = rw.abs()
    if not bool((abs_err <= atol + rtol * abs_ref).all()):
        return False
    numel = r.numel()
    rel = torch.where(abs_ref >= atol, abs_err / abs_ref.clamp_min(1e-30), torch.zeros_like(abs_err))
    report["max_abs_err"] = float(abs_err.max()) if numel else 0.0
    report["max_rel_err"] = float(rel.max()) if numel else 0.0
    report["max_abs_ref"] = float(abs_ref.max()) if numel else 0.0
    report["numel"] = numel
    report["bad_elements"] = 0
    return True


def reference_scale(r):
    """The largest finite |ref| (0 for an empty or all non-finite output)."""
    import torch

    if r.numel() == 0:
        return 0.0
    a = r.detach().abs()
    if a.is_floating_point():
        a = torch.where(torch.isfinite(a), a, torch.zeros((), dtype=a.dtype, device=a.device))
    return float(a.max())


def compare_tensor(path, r, n, atol, rtol, report, mode="scaled"):
    import torch

    # Compared where the reference lives (float64 on a GPU is fast; copying large
    # outputs to the host was most of a trial's time).
    r = r.detach()
    n = n.detach().to(r.device)
    if r.is_complex():
        r, n = torch.view_as_real(r), torch.view_as_real(n)
    if not r.is_floating_point():
        diff = (n != r)
        bad = int(diff.sum())
        report["bad_elements"] = bad
        report["numel"] = r.numel()
        if bad:
            index = tuple(int(i) for i in diff.nonzero()[0])
            return "%s: %d of %d elements differ (integer output must match exactly; first at %s: %s vs %s)" % (
                path, bad, r.numel(), list(index), n[index].item(), r[index].item())
        return None
    given_atol = atol
    atol = effective_atol(given_atol, reference_scale(r), mode)
    report["atol"] = given_atol
    report["atol_effective"] = atol
    if within_tolerance_fast(r, n, atol, rtol, report):
        return None
    # Something is off: the full analysis in float64 (NaN/Inf placement, counts, first
    # bad element). It is also the authority on borderline elements.
    r64, n64 = r.double(), n.double()
    ref_finite = torch.isfinite(r64)
    new_finite = torch.isfinite(n64)
    both = ref_finite & new_finite
    abs_err = (n64 - r64).abs()
    abs_err = torch.where(both, abs_err, torch.zeros_like(abs_err))
    # Relative error only where the reference is larger than atol: near zero it explodes
    # without meaning anything (atol governs there).
    rel_err = torch.where(r64.abs() >= atol, abs_err / r64.abs().clamp_min(1e-30), torch.zeros_like(abs_err))
    report["max_abs_err"] = float(abs_err.max()) if abs_err.numel() else 0.0
    report["max_rel_err"] = float(torch.where(both, rel_err, torch.zeros_like(rel_err)).max()) if rel_err.numel() else 0.0
    report["max_abs_ref"] = float(torch.where(ref_finite, r64.abs(), torch.zeros_like(r64)).max()) if r64.numel() else 0.0
    report["numel"] = r.numel()
    nonfinite_bad = ref_finite & ~new_finite
    if bool(nonfinite_bad.any()):
        count = int(nonfinite_bad.sum())
        report["bad_elements"] = count
        return "%s: %d elements are NaN/Inf where the reference is finite" % (path, count)
    # Where the reference is NaN or +-Inf, the kernel must agree exactly.
    special_bad = ~ref_finite & ~((torch.isnan(r64) & torch.isnan(n64)) | (r64 == n64))
    if bool(special_bad.any()):
        count = int(special_bad.sum())
        report["bad_elements"] = count
        return "%s: %d elements differ where the reference is NaN/Inf" % (path, count)
    within = abs_err <= (atol + rtol * r64.abs())
    bad = both & ~within
    count = int(bad.sum())
    report["bad_elements"] = count
    if count:
        index = tuple(int(i) for i in bad.nonzero()[0])
        scaled = "" if atol == given_atol else " (atol %g scaled to the output's magnitude)" % given_atol
        return ("%s: %d of %d elements outside tolerance (atol %g%s, rtol %g); max abs err %.3g, max rel err %.3g; "
                "first at %s: %.6g vs reference %.6g") % (
            path, count, r.numel(), atol, scaled, rtol, report["max_abs_err"], report["max_rel_err"],
            list(index), n64[index].item(), r64[index].item())
    return None
