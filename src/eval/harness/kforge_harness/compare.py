"""Comparison of a kernel's outputs with the reference's: structure, shape, dtype, NaN/Inf
placement and tolerance.

The default rule (`oracle`, oracle.py): a float32, float16 or bfloat16 output is compared
with the reference run in float64 on the same inputs, each element within FACTOR times the
error honest float32 arithmetic makes there (measured on the reference and its sequential
twin, at least the rounding of the exact value); the result records each output's
error ratio (its worst element's error over the honest error). Where an output has no
oracle (a float64 output, an operator without a float64 path, memory), or the person set
atol/rtol, the output falls back to the `dtype` rule below, and the report says why.

The `dtype` rule's tolerance of a floating output comes from its dtype (DTYPE_TOLERANCE: atol = rtol =
1e-4 for float32, 1e-2 for float16 and bfloat16, as KernelBench and torchbench use), or from
the person's explicit atol/rtol, which then hold for every dtype. Under the `tf32` precision
policy float32 outputs get TF32_TOLERANCE instead (precision.py). Integer and bool outputs
must match exactly.

Tolerance modes:
- `dtype` (default): |new - ref| <= atol_eff + rtol * |ref| with the dtype's atol and rtol,
  where atol_eff = min(atol, max(SCALE_FRACTION * scale, ATOL_FLOOR)) and scale is the
  largest finite |ref| of that output. An output whose magnitude is far below atol (a
  softmax over many columns) can then not be matched by zeros or a constant, while outputs of
  ordinary magnitude (scale >= atol / SCALE_FRACTION) are judged by the dtype's tolerance.
- `kernelbench`: KernelBench HEAD's rule exactly: torch.allclose(ref, new, atol=tol,
  rtol=tol) with tol the dtype's (KernelBench keys it on the evaluation's precision, the dtype
  it casts models and inputs to; kforge keys it on each output's dtype, which is the same for
  its fp32/fp16/bf16 evaluations), unscaled: |ref - new| <= atol + rtol * |new| computed in
  the outputs' own dtype, NaN never close (not even to NaN), an infinity close only to itself.
- `scaled`: the rule of `dtype` with one atol = rtol = LEGACY_TOLERANCE (1e-2) for every
  dtype, kforge's default before per-dtype tolerances.

Tensors are compared chunk by chunk (CHUNK_ELEMENTS) in the outputs' own precision: a first
pass over the reference finds its scale, a second gathers the errors, counts and the first
bad element. No temporary is larger than a few chunks, whatever the outputs' size or strides.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from .tensors import describe_shape, flatten_outputs, structure
from .wire import OutputToleranceRecord, ToleranceRecord

if TYPE_CHECKING:
    import torch

    from .oracle import Oracle, OutputScale

# One output's report (compare_outputs' per-output entries: output, passed, shape, dtype, the
# errors and counts, reason): a JSON object the judge writes into the result.
Report = Dict[str, Any]
# A dtype as torch has it, or its name.
DtypeLike = Union["torch.dtype", str]
# An index into a tensor: ints, then a slice (_piece_indices).
Index = Tuple[Union[int, slice], ...]


TOLERANCE_MODES = ("oracle", "dtype", "kernelbench", "scaled")
DEFAULT_MODE = "oracle"
# atol = rtol per floating dtype (complex dtypes take their real part's). float32 and the
# half types are KernelBench's and torchbench's. float64: an honest float64 kernel differs
# from the reference by reordering alone (~1e-13 relative on 1e4-term sums), while one that
# computes in float32 is off by float32's rounding (~6e-8 relative per operation, far more
# after a reduction): 1e-9 tells them apart. float8: one unit in the last place at 1.0 (3 and
# 2 mantissa bits).
DTYPE_TOLERANCE = {
    "float32": 1e-4,
    "float16": 1e-2,
    "bfloat16": 1e-2,
    "float64": 1e-9,
    "float8_e4m3fn": 0.125,
    "float8_e4m3fnuz": 0.125,
    "float8_e5m2": 0.25,
    "float8_e5m2fnuz": 0.25,
}
# Under the `tf32` policy, float32 outputs: TF32 keeps float16's 10 mantissa bits, so the
# half types' tolerance is its natural one (a TF32 GEMM with K = 8192 was measured 0.0048
# off in absolute terms on outputs of magnitude ~1, inside it).
TF32_TOLERANCE = 1e-2
# Any other floating dtype: float16's tolerance, or its own epsilon when coarser.
OTHER_FLOAT_TOLERANCE = 1e-2
# The `scaled` mode's one tolerance (kforge's default atol = rtol before issue 22).
LEGACY_TOLERANCE = 1e-2
COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}
# 2% of the output's own scale: bf16 rounding (0.4%) and half-precision accumulation stay
# well inside it, while zeros miss the largest element by 100% of the scale.
SCALE_FRACTION = 0.02
ATOL_FLOOR = 1e-7  # an all-zero reference still allows rounding noise


def dtype_name(dtype: DtypeLike) -> str:
    """`float32` for torch.float32 (and for the string itself)."""
    return str(dtype).replace("torch.", "")


def dtype_tolerance(dtype: DtypeLike, precision: Optional[str] = "strict") -> float:
    """atol = rtol of the table for a floating dtype (torch dtype or its name) under a
    precision policy."""
    name = dtype_name(dtype)
    name = COMPLEX_PARTS.get(name, name)
    if name == "float32" and precision == "tf32":
        return TF32_TOLERANCE
    if name in DTYPE_TOLERANCE:
        return DTYPE_TOLERANCE[name]
    try:
        import torch

        eps: float = torch.finfo(getattr(torch, name)).eps
    except (AttributeError, TypeError, ImportError):
        eps = 0.0
    return max(OTHER_FLOAT_TOLERANCE, eps)


def tolerance_for(dtype: DtypeLike, atol: Optional[float] = None, rtol: Optional[float] = None, mode: str = DEFAULT_MODE,
                  precision: Optional[str] = "strict") -> Tuple[float, float]:
    """(atol, rtol) for an output of this dtype under the `dtype`, `kernelbench` and
    `scaled` rules (and an `oracle` output that falls back to `dtype`): the explicit values
    where given, else the table's (the `scaled` mode's single LEGACY_TOLERANCE)."""
    if mode not in TOLERANCE_MODES:
        raise ValueError("unknown tolerance mode %r" % mode)
    table = LEGACY_TOLERANCE if mode == "scaled" else dtype_tolerance(dtype, precision)
    return (table if atol is None else float(atol)), (table if rtol is None else float(rtol))


def audit_tolerance(job: Mapping[str, Any]) -> Tuple[float, float]:
    """(atol, rtol) the audit labels copies and nudges within: the explicit ones, else the
    widest table value a float32 task meets (LEGACY_TOLERANCE): a wider net only labels more
    elements as copies of what a launch was handed."""
    atol, rtol = job.get("atol"), job.get("rtol")
    return (LEGACY_TOLERANCE if atol is None else atol), (LEGACY_TOLERANCE if rtol is None else rtol)


def effective_atol(atol: float, scale: float, mode: str) -> float:
    if mode == "kernelbench":
        return atol
    if mode not in TOLERANCE_MODES:
        raise ValueError("unknown tolerance mode %r" % mode)
    return min(atol, max(SCALE_FRACTION * scale, ATOL_FLOOR))


def weak_outputs(trials: Iterable[Mapping[str, Any]], atol: Optional[float] = None) -> List[str]:
    """Outputs whose reference never reaches atol in magnitude: under KernelBench's rule a
    kernel returning zeros would pass them."""
    weak: set[str] = set()
    for trial in trials:
        for o in trial["outputs"]:
            if o.get("max_abs_ref") is not None and o.get("atol") is not None and o["max_abs_ref"] < o["atol"]:
                weak.add(o["output"])
    return sorted(weak)


def compare_outputs(ref_out: Any, new_out: Any, atol: Optional[float] = None, rtol: Optional[float] = None,
                    mode: str = DEFAULT_MODE, precision: Optional[str] = "strict",
                    oracle: Optional[Oracle] = None) -> Tuple[bool, List[Report], Optional[str], ToleranceRecord]:
    """Returns (passed, per-output reports, reason of the first failure or None, tolerance
    summary {mode, precision, atol, rtol (the explicit ones, else None), effective_atol:
    {output: value}, outputs: {output: {dtype, rule, ...}}, oracle}). atol/rtol None: each
    output's from its dtype (tolerance_for). `oracle` (oracle.Oracle): the float64 oracle
    and honest scales of this comparison's input family, for the `oracle` mode."""
    import torch

    honest = mode == "oracle" and atol is None and rtol is None
    tolerance = ToleranceRecord({"mode": mode, "precision": precision, "atol": atol, "rtol": rtol,
                                 "effective_atol": {}, "outputs": {},
                                 "oracle": oracle.record() if honest and oracle is not None else None})

    ref_items = flatten_outputs(ref_out)
    new_items = flatten_outputs(new_out)
    if [p for p, _ in ref_items] != [p for p, _ in new_items]:
        reason: Optional[str] = "output structure differs: the kernel returned %s, the reference %s" % (
            structure(new_out), structure(ref_out))
        return False, [], reason, tolerance
    reports: List[Report] = []
    first_failure: Optional[str] = None
    for (path, r), (_, n) in zip(ref_items, new_items):
        report: Report = {"output": path, "passed": True}
        reason = None
        if isinstance(r, torch.Tensor):
            report.update({"shape": list(r.shape), "dtype": str(r.dtype).replace("torch.", "")})
            if not isinstance(n, torch.Tensor):
                reason = "%s: the kernel returned %s, the reference a tensor" % (path, type(n).__name__)
            elif tuple(n.shape) != tuple(r.shape):
                reason = "%s: shape %s, the reference %s" % (path, describe_shape(n), describe_shape(r))
            elif n.dtype != r.dtype:
                reason = "%s: dtype %s, the reference %s" % (path, str(n.dtype).replace("torch.", ""), report["dtype"])
            elif (r.is_floating_point() or r.is_complex()) and honest and oracle is not None \
                    and path in oracle.scales:
                reason = compare_honest(path, r, n, oracle.targets.get(path), oracle.scales[path], report)
                tolerance["outputs"][path] = honest_summary(report)
            else:
                if r.is_floating_point() or r.is_complex():
                    rule = "dtype" if mode == "oracle" else mode
                    out_atol, out_rtol = tolerance_for(r.dtype, atol, rtol, rule, precision)
                    entry = OutputToleranceRecord({"dtype": report["dtype"], "rule": rule, "atol": out_atol,
                                                   "rtol": out_rtol})
                    if mode == "oracle":
                        report["fallback"] = entry["fallback"] = (
                            "atol/rtol set explicitly" if not honest
                            else oracle.why_not(path) if oracle is not None else "no float64 oracle")
                    tolerance["outputs"][path] = entry
                else:
                    out_atol, out_rtol, rule = 0.0, 0.0, "dtype"
                reason = compare_tensor(path, r, n, out_atol, out_rtol, report, rule)
                if "atol_effective" in report:
                    tolerance["effective_atol"][path] = report["atol_effective"]
        elif isinstance(r, (int, float, bool)) and not isinstance(n, torch.Tensor):
            # A Python number: float32's tolerance (a reference's `.item()` of a float32 result).
            rule = "dtype" if mode == "oracle" else mode
            out_atol, out_rtol = tolerance_for("float32", atol, rtol, rule, precision)
            if isinstance(n, (int, float, bool)) and (
                (r == n) or (isinstance(r, float) and math.isclose(n, r, rel_tol=out_rtol, abs_tol=out_atol))
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


def merge_tolerance(previous: Optional[Mapping[str, Any]], latest: Mapping[str, Any]) -> Mapping[str, Any]:
    """The evaluation's tolerance summary after one more comparison: the latest's, with each
    `oracle` output's entry the one of the comparison where its error ratio against the
    float64 oracle was worst (the margin the result reports; a comparison under a reused
    scale, against the float32 reference, counts only where no float64 one was made) and the
    oracle's description kept from whichever had one."""
    if not previous or previous.get("mode") != latest.get("mode"):
        return latest
    merged = ToleranceRecord(dict(latest, outputs=dict(latest.get("outputs") or {}), effective_atol=dict(
        previous.get("effective_atol") or {}, **(latest.get("effective_atol") or {}))))
    for path, entry in (previous.get("outputs") or {}).items():
        now = merged["outputs"].get(path)
        if now is None or _margin_rank(entry) > _margin_rank(now):
            merged["outputs"][path] = entry
    if merged.get("oracle") is None and previous.get("oracle") is not None:
        merged["oracle"] = previous["oracle"]
    return merged


def _margin_rank(entry: Mapping[str, Any]) -> Tuple[bool, float]:
    """How an output's entry ranks as the reported margin: float64 comparisons first, then
    the larger error ratio."""
    return (entry.get("oracle") == "float64 oracle", entry.get("error_ratio") or 0.0)


def honest_summary(report: Mapping[str, Any]) -> OutputToleranceRecord:
    """An `oracle` output's entry in the tolerance summary."""
    keys = ("dtype", "rule", "limit", "error_ratio", "honest_rms", "max_allowed", "oracle", "worst_at")
    return OutputToleranceRecord({k: report[k] for k in keys if k in report})


def compare_honest(path: str, r: torch.Tensor, n: torch.Tensor, target: Optional[torch.Tensor], scale: OutputScale,
                   report: Report) -> Optional[str]:
    """Compares a kernel's output with the oracle (`target`, float64; None: the float32
    reference `r` stands in, under a scale measured on an earlier comparison) under the
    honest scale: |n - target| <= factor * s per element; NaN/Inf as the dtype rule
    (the kernel must be finite where the reference is, and equal to it where it is not).
    Fills the report; returns the reason of the failure or None."""
    import torch

    r, n = r.detach(), n.detach()
    factor = scale.factor
    if r.is_complex():
        r, n = torch.view_as_real(r), torch.view_as_real(n)
        target = torch.view_as_real(target) if target is not None else None
    largest, ref_has_nonfinite = _reference_extent(r)
    report.update({"rule": "oracle", "limit": factor, "honest_rms": scale.rms(), "numel": r.numel(),
                   "max_abs_ref": largest,
                   "oracle": "float64 oracle" if target is not None else
                   "the float32 reference, under the honest error measured on %s" % scale.source})
    if target is None and not ref_has_nonfinite and _identical(r, n):
        report.update({"max_abs_err": 0.0, "max_rel_err": 0.0, "bad_elements": 0, "error_ratio": 0.0,
                       "max_allowed": None})
        return None
    tally = _HonestTally(r, ref_has_nonfinite)
    for offsets, (r_chunk, n_chunk, t_chunk) in _offset_chunks(r, n, target if target is not None else r):
        tally.add(offsets, r_chunk, n_chunk.to(r.device), t_chunk.to(r.device), scale)
    totals = tally.totals()
    report.update({k: totals[k] for k in ("max_abs_err", "max_rel_err", "error_ratio", "max_allowed")})
    if totals["worst"] < r.numel():
        report["worst_at"] = list(_unravel(totals["worst"], r.shape))
    if totals["lost"]:
        report["bad_elements"] = totals["lost"]
        return "%s: %d elements are NaN/Inf where the reference is finite" % (path, totals["lost"])
    if totals["special_bad"]:
        report["bad_elements"] = totals["special_bad"]
        return "%s: %d elements differ where the reference is NaN/Inf" % (path, totals["special_bad"])
    report["bad_elements"] = totals["bad"]
    if not totals["bad"]:
        return None
    index = _unravel(totals["worst"], r.shape)
    exact = (target if target is not None else r)[index].item()
    against = "the float64 oracle" if target is not None else "the float32 reference"
    return ("%s: %d of %d elements beyond %gx the error honest %s arithmetic makes on these inputs "
            "(measured against a float64 oracle); the worst is %.3gx at %s: %.6g vs %.6g (%s), allowed +-%.3g "
            "there (honest error %.3g); max abs err %.3g") % (
        path, totals["bad"], r.numel(), factor, "float32" if factor == 128.0 else scale.dtype,
        totals["error_ratio"], list(index), n[index].item(), exact, against, totals["worst_allowed"],
        totals["worst_allowed"] / factor, report["max_abs_err"])


def _offset_chunks(*tensors: torch.Tensor) -> Iterator[Tuple[torch.Tensor, List[torch.Tensor]]]:
    """(flat offsets as a tensor on the first tensor's device, chunks) in oracle-sized pieces."""
    import torch

    from .oracle import _chunks as oracle_chunks

    for start, pieces in oracle_chunks(*tensors):
        yield torch.arange(start, start + pieces[0].numel(), device=pieces[0].device), pieces


class _HonestTally:
    """The running totals of one comparison under the honest scale, chunk by chunk, kept on
    the reference's device (one host sync at the end)."""

    def __init__(self, r: torch.Tensor, ref_has_nonfinite: bool) -> None:
        import torch

        device = r.device
        self.ref_has_nonfinite = ref_has_nonfinite

        def zero(dtype: torch.dtype = torch.float64) -> torch.Tensor:
            return torch.zeros((), dtype=dtype, device=device)

        self.lost, self.special_bad, self.bad = zero(torch.int64), zero(torch.int64), zero(torch.int64)
        self.worst = torch.full((), r.numel(), dtype=torch.int64, device=device)
        self.worst_ratio, self.worst_allowed = zero(), zero()
        self.max_abs_err, self.max_rel_err, self.max_allowed = zero(), zero(), zero()

    def add(self, offsets: torch.Tensor, r_chunk: torch.Tensor, n_chunk: torch.Tensor, t_chunk: torch.Tensor,
            scale: OutputScale) -> None:
        import torch

        r64, n64, t64 = (c.to(torch.float64) for c in (r_chunk, n_chunk, t_chunk))
        ref_finite = torch.isfinite(r64)
        new_finite = torch.isfinite(n64)
        if self.ref_has_nonfinite:
            differs = ~((n64 == r64) | (torch.isnan(n64) & torch.isnan(r64)))
            self.special_bad += (~ref_finite & differs).sum()
        self.lost += (ref_finite & ~new_finite).sum()
        measured = ref_finite & new_finite
        # The exact value where the oracle has one, else the reference's.
        exact = torch.where(torch.isfinite(t64), t64, r64).masked_fill_(~measured, 0.0)
        error = (n64 - exact).abs_().masked_fill_(~measured, 0.0)
        honest = scale.at(offsets, exact)
        allowed = honest * scale.factor
        bad = error > allowed
        self.bad += bad.sum()
        ratio = error / honest
        ratio.masked_fill_(~measured, 0.0)
        chunk_worst = ratio.argmax()
        chunk_ratio = ratio[chunk_worst]
        better = chunk_ratio > self.worst_ratio
        self.worst = torch.where(better, offsets[chunk_worst], self.worst)
        self.worst_allowed = torch.where(better, allowed[chunk_worst], self.worst_allowed)
        self.worst_ratio = torch.maximum(self.worst_ratio, chunk_ratio)
        self.max_abs_err = torch.maximum(self.max_abs_err, error.amax())
        self.max_allowed = torch.maximum(self.max_allowed, allowed.masked_fill_(~measured, 0.0).amax())
        magnitude = exact.abs_()
        rel = error.div_(torch.where(magnitude > 0, magnitude, math.inf))
        self.max_rel_err = torch.maximum(self.max_rel_err, rel.amax())

    def totals(self) -> Dict[str, Any]:
        values = _to_host(self.lost, self.special_bad, self.bad, self.worst, self.worst_ratio, self.worst_allowed,
                          self.max_abs_err, self.max_rel_err, self.max_allowed)
        lost, special_bad, bad, worst = (int(v) for v in values[:4])
        ratio, worst_allowed, max_abs_err, max_rel_err, max_allowed = values[4:]
        return {"lost": lost, "special_bad": special_bad, "bad": bad, "worst": worst, "error_ratio": ratio,
                "worst_allowed": worst_allowed, "max_abs_err": max_abs_err, "max_rel_err": max_rel_err,
                "max_allowed": max_allowed}


# Comparison is done in chunks of the flattened outputs, at most this many elements each:
# a KernelBench output can be 6 GiB (ReLU on 4096x393216 float32), and a few full-size
# temporaries of it would not fit on the GPU beside the reference and the kernel.
CHUNK_ELEMENTS = 1 << 24
# Below this a denominator counts as zero (an atol of 0 would otherwise divide by zero).
TINY = 1e-30


def all_finite(tree: Any) -> bool:
    """Whether every floating or complex tensor of a tree is free of NaN and Inf: the same
    chunked pass that finds a reference's scale (no full-size temporary, strided outputs
    cut along their dims)."""
    import torch

    for _, v in flatten_outputs(tree):
        if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()):
            if _reference_extent(torch.view_as_real(v) if v.is_complex() else v)[1]:
                return False
    return True


def reference_scale(r: torch.Tensor) -> float:
    """The largest finite |ref| (0 for an empty or all non-finite output)."""
    return _reference_extent(r)[0]


def compare_tensor(path: str, r: torch.Tensor, n: torch.Tensor, atol: float, rtol: float, report: Report,
                   mode: str = DEFAULT_MODE) -> Optional[str]:
    """Compares two tensors of the same shape and dtype (strides may differ; n may be on
    another device) under this output's atol and rtol. Fills the report; returns the reason
    of the failure or None."""
    import torch

    r = r.detach()
    n = n.detach()
    if r.is_complex():
        r, n = torch.view_as_real(r), torch.view_as_real(n)
    if not r.is_floating_point():
        return _compare_exactly(path, r, n, report)
    given_atol = atol
    scale, ref_has_nonfinite = _reference_extent(r)
    atol = effective_atol(given_atol, scale, mode)
    report["atol"] = given_atol
    report["rtol"] = rtol
    report["atol_effective"] = atol
    if not ref_has_nonfinite and _identical(r, n):
        # Every element equal (and finite): one pass instead of the tolerance analysis,
        # which is most of a trial's time on the CPU for exact kernels (ReLU, copies).
        report.update({"max_abs_err": 0.0, "max_rel_err": 0.0, "max_abs_ref": scale, "numel": r.numel(),
                       "bad_elements": 0})
        return None
    tally = _FloatTally(r, atol, rtol, ref_has_nonfinite, allclose=mode == "kernelbench")
    for offset, r_chunk, n_chunk in _chunk_pairs(r, n):
        tally.add(offset, r_chunk, n_chunk)
    totals = tally.totals()
    report["max_abs_err"] = totals["max_abs_err"]
    report["max_rel_err"] = totals["max_rel_err"]
    report["max_abs_ref"] = scale
    report["numel"] = r.numel()
    # The reasons in order of gravity: NaN/Inf in the kernel's output, then disagreement
    # on the reference's own NaN/Inf, then values outside tolerance.
    if totals["lost"]:
        report["bad_elements"] = totals["lost"]
        return "%s: %d elements are NaN/Inf where the reference is finite" % (path, totals["lost"])
    if totals["special_bad"]:
        report["bad_elements"] = totals["special_bad"]
        nan_rule = " (torch.allclose: NaN is never close, not even to NaN)" if mode == "kernelbench" else ""
        return "%s: %d elements differ where the reference is NaN/Inf%s" % (path, totals["special_bad"], nan_rule)
    report["bad_elements"] = totals["bad"]
    if not totals["bad"]:
        return None
    index = _unravel(totals["first_bad"], r.shape)
    scaled = "" if atol == given_atol else " (atol %g scaled to the output's magnitude)" % given_atol
    return ("%s: %d of %d elements outside tolerance (atol %g%s, rtol %g); max abs err %.3g, max rel err %.3g; "
            "first at %s: %.6g vs reference %.6g") % (
        path, totals["bad"], r.numel(), atol, scaled, rtol, report["max_abs_err"], report["max_rel_err"],
        list(index), n[index].item(), r[index].item())


def _identical(r: torch.Tensor, n: torch.Tensor) -> bool:
    """Whether every element of n equals r's, chunk by chunk (stops at the first chunk that
    differs)."""
    import torch

    return all(torch.equal(r_chunk, n_chunk) for _, r_chunk, n_chunk in _chunk_pairs(r, n))


def _compare_exactly(path: str, r: torch.Tensor, n: torch.Tensor, report: Report) -> Optional[str]:
    """Integer and bool outputs must match exactly."""
    import torch

    differing = torch.zeros((), dtype=torch.int64, device=r.device)
    first = torch.full((), r.numel(), dtype=torch.int64, device=r.device)
    for offset, r_chunk, n_chunk in _chunk_pairs(r, n):
        differs = n_chunk != r_chunk
        count = differs.sum()
        differing += count
        first = _earliest(first, differs, count, offset)
    bad, first_index = (int(v) for v in _to_host(differing, first))
    report["bad_elements"] = bad
    report["numel"] = r.numel()
    if not bad:
        return None
    index = _unravel(first_index, r.shape)
    return "%s: %d of %d elements differ (integer output must match exactly; first at %s: %s vs %s)" % (
        path, bad, r.numel(), list(index), n[index].item(), r[index].item())


class _FloatTally:
    """The running totals of one floating comparison, chunk by chunk. They stay on the
    reference's device as 0-d tensors, so the chunks follow each other without a host sync.

    Rules: where the reference is finite, the kernel's value must be finite and
    |new - ref| <= atol + rtol * |ref|; where it is NaN or +-Inf, the kernel's must be the
    same (NaN matches NaN). Errors are measured where both are finite, the relative error
    only where |ref| >= atol (near zero it explodes without meaning anything: atol governs
    there).

    `allclose` (the `kernelbench` mode): an element is bad where torch.isclose(ref, new,
    rtol, atol) is false, computed in the outputs' own dtype as torch.allclose does:
    |ref - new| <= atol + rtol * |new|, NaN never close, an infinity close only to itself."""

    def __init__(self, r: torch.Tensor, atol: float, rtol: float, ref_has_nonfinite: bool, allclose: bool = False) -> None:
        import torch

        # The outputs' own precision: half types are widened to float32 chunk by chunk.
        self.work = torch.float64 if r.dtype == torch.float64 else torch.float32
        self.atol, self.rtol = atol, rtol
        self.ref_has_nonfinite = ref_has_nonfinite
        self.allclose = allclose

        def count() -> torch.Tensor:
            return torch.zeros((), dtype=torch.int64, device=r.device)

        self.lost = count()  # NaN/Inf in the kernel's output where the reference is finite
        self.special_bad = count()  # differing where the reference is NaN/Inf
        self.bad = count()  # both finite, outside tolerance
        self.first_bad = torch.full((), r.numel(), dtype=torch.int64, device=r.device)
        self.max_abs_err = torch.zeros((), dtype=self.work, device=r.device)
        self.max_rel_err = torch.zeros((), dtype=self.work, device=r.device)

    def add(self, offset: int, r_chunk: torch.Tensor, n_chunk: torch.Tensor) -> None:
        import torch

        not_close: Optional[torch.Tensor] = None
        if self.allclose:
            # In the outputs' own dtype, before widening: torch.allclose's exact arithmetic.
            not_close = torch.isclose(r_chunk, n_chunk, rtol=self.rtol, atol=self.atol).logical_not_()
        r_chunk, n_chunk = r_chunk.to(self.work), n_chunk.to(self.work)
        unmeasured = self._check_nonfinite(r_chunk, n_chunk, not_close)
        abs_err = (n_chunk - r_chunk).abs_()
        abs_err.masked_fill_(unmeasured, 0)
        abs_ref = r_chunk.abs()
        if not_close is not None:
            bad = not_close.logical_and_(unmeasured.logical_not())
        else:
            # Where not both are finite abs_err is 0 and the bound is positive or NaN: not bad.
            bad = abs_err > abs_ref.mul(self.rtol).add_(self.atol)
        count = bad.sum()
        self.bad += count
        self.first_bad = _earliest(self.first_bad, bad, count, offset)
        self.max_abs_err = torch.maximum(self.max_abs_err, abs_err.amax())
        # Relative error: dividing by +inf where not |ref| >= atol (NaN included) leaves 0.
        denominator = torch.where(abs_ref >= self.atol, abs_ref, math.inf)
        if self.atol < TINY:
            denominator.clamp_min_(TINY)
        rel_err = abs_err.div_(denominator)  # abs_err is not needed any more
        self.max_rel_err = torch.maximum(self.max_rel_err, rel_err.amax())

    def _check_nonfinite(self, r_chunk: torch.Tensor, n_chunk: torch.Tensor,
                         not_close: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Counts the NaN/Inf failures of a chunk (where the reference is NaN/Inf: those of
        `not_close` when given, else the elements not equal to it, NaN matching NaN);
        returns the mask of elements whose error is not measured (not both finite)."""
        import torch

        if not self.ref_has_nonfinite:
            # The common case, known from the first pass: only the kernel's output can
            # hold NaN/Inf, and each one is a failure.
            new_nonfinite = torch.isfinite(n_chunk).logical_not_()
            self.lost += new_nonfinite.sum()
            return new_nonfinite
        ref_finite = torch.isfinite(r_chunk)
        new_finite = torch.isfinite(n_chunk)
        both_finite = ref_finite & new_finite
        self.lost += ref_finite.sum() - both_finite.sum()
        if not_close is not None:
            differs = not_close
        else:
            differs = ~((n_chunk == r_chunk) | (torch.isnan(n_chunk) & torch.isnan(r_chunk)))
        self.special_bad += (~ref_finite & differs).sum()
        return both_finite.logical_not_()

    def totals(self) -> Dict[str, Any]:
        """The totals as Python numbers (one host sync)."""
        lost, special_bad, bad, first_bad, max_abs_err, max_rel_err = _to_host(
            self.lost, self.special_bad, self.bad, self.first_bad, self.max_abs_err, self.max_rel_err)
        return {"lost": int(lost), "special_bad": int(special_bad), "bad": int(bad), "first_bad": int(first_bad),
                "max_abs_err": max_abs_err, "max_rel_err": max_rel_err}


def _reference_extent(r: torch.Tensor) -> Tuple[float, bool]:
    """(largest finite |r|, whether r holds a NaN or Inf), in one chunked pass."""
    import torch

    if r.numel() == 0:
        return 0.0, False
    largest: Optional[torch.Tensor] = None  # of the finite |r|
    largest_any: Optional[torch.Tensor] = None  # of all |r|: NaN or Inf when r holds one (maximum propagates NaN)
    for _, chunk in _chunks(r.detach()):
        magnitude = chunk.abs()
        if magnitude.is_floating_point():
            chunk_any = magnitude.amax()
            largest_any = chunk_any if largest_any is None else torch.maximum(largest_any, chunk_any)
            magnitude.nan_to_num_(nan=0.0, posinf=0.0)
        chunk_largest = magnitude.amax()
        largest = chunk_largest if largest is None else torch.maximum(largest, chunk_largest)
    assert largest is not None  # r has elements
    if largest_any is None:
        return float(largest), False
    extent, extent_any = _to_host(largest, largest_any)
    return extent, not math.isfinite(extent_any)


def _earliest(first: torch.Tensor, mask: torch.Tensor, count: torch.Tensor, offset: int) -> torch.Tensor:
    """min(first, offset + position of mask's first True) when count (mask's number of
    True) is not 0, else first; computed on the device without a host sync."""
    import torch

    # argmax returns the first maximal element; bool is viewed as bytes for it.
    position = mask.view(torch.uint8).argmax() + offset
    return torch.where(count > 0, torch.minimum(first, position), first)


def _to_host(*scalars: torch.Tensor) -> List[Any]:
    """0-d tensors of one device as Python numbers, in one transfer."""
    import torch

    return torch.stack([s.to(torch.float64) for s in scalars]).tolist()


def _unravel(flat: int, shape: Iterable[int]) -> Tuple[int, ...]:
    """The multi-index of a flat row-major index."""
    index: List[int] = []
    for size in reversed(tuple(shape)):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def _chunk_pairs(r: torch.Tensor, n: torch.Tensor) -> Iterator[Tuple[int, torch.Tensor, torch.Tensor]]:
    """(offset, r's chunk, n's chunk on r's device) over the same logical range of both."""
    for offset, r_chunk, n_chunk in _chunks(r, n):
        yield offset, r_chunk, n_chunk.to(r.device)


def _chunks(*tensors: torch.Tensor) -> Iterator[Tuple[Any, ...]]:
    """(flat offset, 1-D chunk of each tensor) covering tensors of one shape in logical
    (row-major) order, at most CHUNK_ELEMENTS elements a chunk; the same elements in each.
    Contiguous tensors are cut from their flat view (no copy); otherwise each tensor is cut
    along its dimensions and only a piece at a time is copied into a flat chunk (reshaping
    a strided tensor whole would copy it whole)."""
    limit = max(1, CHUNK_ELEMENTS)
    numel = tensors[0].numel()
    if numel == 0:
        return
    if all(t.is_contiguous() for t in tensors):
        flat = [t.view(-1) for t in tensors]
        for start in range(0, numel, limit):
            yield (start,) + tuple(f[start:start + limit] for f in flat)
        return
    offset = 0
    for index in _piece_indices(tuple(tensors[0].shape), limit):
        pieces = tuple(t[index].reshape(-1) for t in tensors)
        yield (offset,) + pieces
        offset += pieces[0].numel()


def _piece_indices(shape: Tuple[int, ...], limit: int) -> Iterator[Index]:
    """Indices (ints, then one slice) that cut a tensor of this non-empty shape into pieces
    of at most `limit` elements, in logical order: runs of whole slices along dim 0, or,
    where one such slice alone is too big, each slice cut the same way one dim further in."""
    if not shape:
        yield ()
        return

    def cut(prefix: Index, dim: int) -> Iterator[Index]:
        inner = math.prod(shape[dim + 1:])
        if inner > limit:
            for i in range(shape[dim]):
                yield from cut(prefix + (i,), dim + 1)
            return
        step = limit // inner
        for start in range(0, shape[dim], step):
            yield prefix + (slice(start, start + step),)

    yield from cut((), 0)
