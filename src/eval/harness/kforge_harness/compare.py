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

Tensors are compared chunk by chunk (CHUNK_ELEMENTS) in the outputs' own precision: a first
pass over the reference finds its scale, a second gathers the errors, counts and the first
bad element. No temporary is larger than a few chunks, whatever the outputs' size or strides.
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


# Comparison is done in chunks of the flattened outputs, at most this many elements each:
# a KernelBench output can be 6 GiB (ReLU on 4096x393216 float32), and a few full-size
# temporaries of it would not fit on the GPU beside the reference and the kernel.
CHUNK_ELEMENTS = 1 << 24
# Below this a denominator counts as zero (an atol of 0 would otherwise divide by zero).
TINY = 1e-30


def all_finite(tree):
    """Whether every floating or complex tensor of a tree is free of NaN and Inf: the same
    chunked pass that finds a reference's scale (no full-size temporary, strided outputs
    cut along their dims)."""
    import torch

    for _, v in flatten_outputs(tree):
        if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()):
            if _reference_extent(torch.view_as_real(v) if v.is_complex() else v)[1]:
                return False
    return True


def reference_scale(r):
    """The largest finite |ref| (0 for an empty or all non-finite output)."""
    return _reference_extent(r)[0]


def compare_tensor(path, r, n, atol, rtol, report, mode="scaled"):
    """Compares two tensors of the same shape and dtype (strides may differ; n may be on
    another device). Fills the report; returns the reason of the failure or None."""
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
    report["atol_effective"] = atol
    if not ref_has_nonfinite and _identical(r, n):
        # Every element equal (and finite): one pass instead of the tolerance analysis,
        # which is most of a trial's time on the CPU for exact kernels (ReLU, copies).
        report.update({"max_abs_err": 0.0, "max_rel_err": 0.0, "max_abs_ref": scale, "numel": r.numel(),
                       "bad_elements": 0})
        return None
    tally = _FloatTally(r, atol, rtol, ref_has_nonfinite)
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
        return "%s: %d elements differ where the reference is NaN/Inf" % (path, totals["special_bad"])
    report["bad_elements"] = totals["bad"]
    if not totals["bad"]:
        return None
    index = _unravel(totals["first_bad"], r.shape)
    scaled = "" if atol == given_atol else " (atol %g scaled to the output's magnitude)" % given_atol
    return ("%s: %d of %d elements outside tolerance (atol %g%s, rtol %g); max abs err %.3g, max rel err %.3g; "
            "first at %s: %.6g vs reference %.6g") % (
        path, totals["bad"], r.numel(), atol, scaled, rtol, report["max_abs_err"], report["max_rel_err"],
        list(index), n[index].item(), r[index].item())


def _identical(r, n):
    """Whether every element of n equals r's, chunk by chunk (stops at the first chunk that
    differs)."""
    import torch

    return all(torch.equal(r_chunk, n_chunk) for _, r_chunk, n_chunk in _chunk_pairs(r, n))


def _compare_exactly(path, r, n, report):
    """Integer and bool outputs must match exactly."""
    import torch

    differing = torch.zeros((), dtype=torch.int64, device=r.device)
    first = torch.full((), r.numel(), dtype=torch.int64, device=r.device)
    for offset, r_chunk, n_chunk in _chunk_pairs(r, n):
        differs = n_chunk != r_chunk
        count = differs.sum()
        differing += count
        first = _earliest(first, differs, count, offset)
    bad, first = (int(v) for v in _to_host(differing, first))
    report["bad_elements"] = bad
    report["numel"] = r.numel()
    if not bad:
        return None
    index = _unravel(first, r.shape)
    return "%s: %d of %d elements differ (integer output must match exactly; first at %s: %s vs %s)" % (
        path, bad, r.numel(), list(index), n[index].item(), r[index].item())


class _FloatTally:
    """The running totals of one floating comparison, chunk by chunk. They stay on the
    reference's device as 0-d tensors, so the chunks follow each other without a host sync.

    Rules: where the reference is finite, the kernel's value must be finite and
    |new - ref| <= atol + rtol * |ref|; where it is NaN or +-Inf, the kernel's must be the
    same (NaN matches NaN). Errors are measured where both are finite, the relative error
    only where |ref| >= atol (near zero it explodes without meaning anything: atol governs
    there)."""

    def __init__(self, r, atol, rtol, ref_has_nonfinite):
        import torch

        # The outputs' own precision: half types are widened to float32 chunk by chunk.
        self.work = torch.float64 if r.dtype == torch.float64 else torch.float32
        self.atol, self.rtol = atol, rtol
        self.ref_has_nonfinite = ref_has_nonfinite

        def count():
            return torch.zeros((), dtype=torch.int64, device=r.device)

        self.lost = count()  # NaN/Inf in the kernel's output where the reference is finite
        self.special_bad = count()  # differing where the reference is NaN/Inf
        self.bad = count()  # both finite, outside tolerance
        self.first_bad = torch.full((), r.numel(), dtype=torch.int64, device=r.device)
        self.max_abs_err = torch.zeros((), dtype=self.work, device=r.device)
        self.max_rel_err = torch.zeros((), dtype=self.work, device=r.device)

    def add(self, offset, r_chunk, n_chunk):
        import torch

        r_chunk, n_chunk = r_chunk.to(self.work), n_chunk.to(self.work)
        unmeasured = self._check_nonfinite(r_chunk, n_chunk)
        abs_err = (n_chunk - r_chunk).abs_()
        abs_err.masked_fill_(unmeasured, 0)
        abs_ref = r_chunk.abs()
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

    def _check_nonfinite(self, r_chunk, n_chunk):
        """Counts the NaN/Inf failures of a chunk; returns the mask of elements whose error is
        not measured (not both finite)."""
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
        same = (n_chunk == r_chunk) | (torch.isnan(n_chunk) & torch.isnan(r_chunk))
        self.special_bad += (~ref_finite & ~same).sum()
        return both_finite.logical_not_()

    def totals(self):
        """The totals as Python numbers (one host sync)."""
        lost, special_bad, bad, first_bad, max_abs_err, max_rel_err = _to_host(
            self.lost, self.special_bad, self.bad, self.first_bad, self.max_abs_err, self.max_rel_err)
        return {"lost": int(lost), "special_bad": int(special_bad), "bad": int(bad), "first_bad": int(first_bad),
                "max_abs_err": max_abs_err, "max_rel_err": max_rel_err}


def _reference_extent(r):
    """(largest finite |r|, whether r holds a NaN or Inf), in one chunked pass."""
    import torch

    if r.numel() == 0:
        return 0.0, False
    largest = None  # of the finite |r|
    largest_any = None  # of all |r|: NaN or Inf when r holds one (maximum propagates NaN)
    for _, chunk in _chunks(r.detach()):
        magnitude = chunk.abs()
        if magnitude.is_floating_point():
            chunk_any = magnitude.amax()
            largest_any = chunk_any if largest_any is None else torch.maximum(largest_any, chunk_any)
            magnitude.nan_to_num_(nan=0.0, posinf=0.0)
        chunk_largest = magnitude.amax()
        largest = chunk_largest if largest is None else torch.maximum(largest, chunk_largest)
    if largest_any is None:
        return float(largest), False
    largest, largest_any = _to_host(largest, largest_any)
    return largest, not math.isfinite(largest_any)


def _earliest(first, mask, count, offset):
    """min(first, offset + position of mask's first True) when count (mask's number of
    True) is not 0, else first; computed on the device without a host sync."""
    import torch

    # argmax returns the first maximal element; bool is viewed as bytes for it.
    position = mask.view(torch.uint8).argmax() + offset
    return torch.where(count > 0, torch.minimum(first, position), first)


def _to_host(*scalars):
    """0-d tensors of one device as Python numbers, in one transfer."""
    import torch

    return torch.stack([s.to(torch.float64) for s in scalars]).tolist()


def _unravel(flat, shape):
    """The multi-index of a flat row-major index."""
    index = []
    for size in reversed(tuple(shape)):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def _chunk_pairs(r, n):
    """(offset, r's chunk, n's chunk on r's device) over the same logical range of both."""
    for offset, r_chunk, n_chunk in _chunks(r, n):
        yield offset, r_chunk, n_chunk.to(r.device)


def _chunks(*tensors):
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


def _piece_indices(shape, limit):
    """Indices (ints, then one slice) that cut a tensor of this non-empty shape into pieces
    of at most `limit` elements, in logical order: runs of whole slices along dim 0, or,
    where one such slice alone is too big, each slice cut the same way one dim further in."""
    if not shape:
        yield ()
        return

    def cut(prefix, dim):
        inner = math.prod(shape[dim + 1:])
        if inner > limit:
            for i in range(shape[dim]):
                yield from cut(prefix + (i,), dim + 1)
            return
        step = limit // inner
        for start in range(0, shape[dim], step):
            yield prefix + (slice(start, start + step),)

    yield from cut((), 0)
