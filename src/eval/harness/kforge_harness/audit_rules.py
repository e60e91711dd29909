"""The judge's side of the audit (audit.py runs in the worker): validates the record an untrusted
worker sent and rules on it. Pure Python, no torch: `classify(record, device_is_gpu)` survives any
record, and a record it cannot read is `malformed`, never a pass. The record's schema is in audit.py's
docstring.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from .audit_vocab import (ATEN_DOMINANT, GPU_CLASSES, LABELS, MAX_ERRORS, MAX_KERNELS, MAX_LAUNCH_NAMES, MAX_NAME,
                          MAX_OPS, MAX_OUTPUTS, MEANINGFUL, OP_KINDS, VERSION)

Predicate = Callable[[Any], bool]
# A predicate, {key: spec} (keys marked _Optional may be absent) or [cap, item spec].
Spec = Union[Predicate, Dict[str, Any], List[Any]]


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v < 1 << 62


def _number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and v >= 0


def _fraction(v: Any) -> bool:
    return _number(v) and v <= 1.0


def _name(v: Any) -> bool:
    return type(v) is str and len(v) <= MAX_NAME


def _one_of(*values: Any) -> Predicate:
    return lambda v: any(type(v) is type(x) and v == x for x in values)


def _shares(keys: Iterable[str]) -> Predicate:
    return lambda v: (isinstance(v, dict) and set(v) == set(keys) and all(_fraction(x) for x in v.values())
                      and sum(v.values()) <= 1 + 1e-6)


class _Optional:
    """In a {key: spec}: the key may be absent (records of workers from before it)."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec


def _ok(value: Any, spec: Spec) -> bool:
    """spec: a predicate, {key: spec} (these keys, those marked _Optional may be absent) or [cap, item spec]."""
    if isinstance(spec, dict):
        required = {k for k, s in spec.items() if not isinstance(s, _Optional)}
        return (isinstance(value, dict) and required <= set(value) <= set(spec)
                and all(_ok(value[k], spec[k].spec if isinstance(spec[k], _Optional) else spec[k]) for k in value))
    if isinstance(spec, list):
        return isinstance(value, list) and len(value) <= spec[0] and all(_ok(v, spec[1]) for v in value)
    return spec(value)


def _digest(v: Any) -> bool:
    """digest.tensor_digest's form: 24 lowercase hex digits."""
    return type(v) is str and len(v) == 24 and all(c in "0123456789abcdef" for c in v)


OUTPUT_SPEC = {"path": _name, "shape": [16, _count], "dtype": _name, "numel": _count, "shares": _shares(LABELS),
               "writers": lambda v: (isinstance(v, dict) and set(v) <= {"aten", "library", "triton"}
                                     and all(_name(w) for w in v.values())),
               "digest": _digest}
GPU_SPECS = ({"measured": _one_of(False), "reason": _name},
             {"measured": _one_of(True), "total_us": lambda v: _number(v) and 0 < v < 1e15,
              "shares": _shares(GPU_CLASSES),
              "kernels": [MAX_KERNELS, {"name": _name, "class": _one_of(*GPU_CLASSES), "us": _number, "count": _count}]})
RECORD_SPEC = {
    "version": _one_of(VERSION), "device": _one_of("cpu", "cuda"),
    "aten_ops": [MAX_OPS, {"name": _name, "count": _count, "kind": _one_of(*OP_KINDS)}],
    "aten_ops_dropped": _count, "triton_launches": _count,
    "launches": [MAX_LAUNCH_NAMES, {"name": _name, "count": _count, "elements_written": _count}],
    "outputs": [MAX_OUTPUTS, OUTPUT_SPEC],
    "gpu": lambda v: v is None or any(_ok(v, s) for s in GPU_SPECS),
    "errors": [MAX_ERRORS, _name],
    "snapshots": _Optional(_one_of("device", "host")), "bookkeeping_peak_bytes": _Optional(_count),
}


def _validate(record: Any, device_is_gpu: bool) -> Optional[str]:
    """The first problem with the record, or None."""
    if not _ok(record, RECORD_SPEC):
        return "it does not follow the schema"
    if record["device"] != ("cuda" if device_is_gpu else "cpu"):
        return "its device is not the evaluation's"
    if sum(x["count"] for x in record["launches"]) > record["triton_launches"]:
        return "its launch counts exceed its total"
    if any(o["numel"] > 0 and abs(sum(o["shares"].values()) - 1) > 1e-6 for o in record["outputs"]):
        return "an output's shares do not add up"
    gpu = record["gpu"]
    if gpu and gpu["measured"] and (abs(sum(gpu["shares"].values()) - 1) > 1e-6
                                    or any(k["us"] > gpu["total_us"] * (1 + 1e-6) for k in gpu["kernels"])):
        return "its GPU times do not add up"
    return None


def _percent(share: float) -> str:
    # never round a sliver away: "<1%" and ">99%" say that the other part is not nothing
    return "<1%" if 0 < share < 0.005 else ">99%" if 0.995 <= share < 1 else "%d%%" % round(share * 100)


def _describe_output(o: Dict[str, Any]) -> str:
    words = {"alloc": "never written", "input": "copied from inputs", "aten": "PyTorch",
             "library": "PyTorch library", "triton": "Triton", "unseen": "made where the audit could not see"}
    parts = ["%s %s%s" % (_percent(o["shares"][k]), words[k], " (%s)" % o["writers"][k] if k in o["writers"] else "")
             for k in sorted(LABELS, key=lambda k: -o["shares"][k]) if o["shares"][k] > 0]
    return "%s: %s" % (o["path"], ", ".join(parts) or "empty")


def unseen_outputs(record: Dict[str, Any]) -> List[str]:
    """Paths of the outputs of a (validated) record with elements whose writer the audit did
    not see."""
    return [o["path"] for o in record["outputs"] if o["shares"]["unseen"] > 0]


def _result(verdict: str, summary: str, shares: Dict[str, Any], details: Dict[str, Any]) -> Dict[str, Any]:
    return {"verdict": verdict, "summary": summary[:1000], "triton_share": shares.get("triton"),
            "library_share": shares.get("library"), "aten_share": shares.get("aten"), "details": details}


def classify(record: Any, device_is_gpu: bool) -> Dict[str, Any]:
    """Verdict on an audit record: "ok", "torch_fallback", or "malformed" (with the reason)."""
    try:
        problem = _validate(record, device_is_gpu)
    except (RecursionError, TypeError, ValueError, OverflowError) as exc:  # hostile nesting, huge ints
        problem = "it cannot be read (%s)" % type(exc).__name__
    if problem:
        return _result("malformed", "audit record rejected: " + problem, {}, {"reason": problem})
    if record["errors"]:
        # An audit that lost track of the forward cannot vouch for it; failing closed also means a
        # kernel gains nothing by making the audit trip.
        reason = "the audit could not follow the forward: " + record["errors"][0]
        return _result("malformed", reason, {}, {"reason": reason, "errors": record["errors"]})

    compute_ops = sum(o["count"] for o in record["aten_ops"] if o["kind"] in ("compute", "library"))
    launches = ", ".join("%s x%d" % (x["name"], x["count"]) for x in record["launches"][:4])
    gpu, shares = record["gpu"], {}
    if gpu and gpu["measured"]:
        shares = gpu["shares"]
        parts = ["Triton kernels: %s of GPU time; cuBLAS/cuDNN: %s; other PyTorch kernels: %s; copies: %s"
                 % tuple(_percent(shares[k]) for k in GPU_CLASSES)]
    else:
        parts = ["%d Triton launch(es)%s, %d PyTorch compute op(s)"
                 % (record["triton_launches"], " (%s)" % launches if launches else "", compute_ops)]
        if gpu:
            parts.append("GPU time not measured: " + gpu["reason"])
    parts += [_describe_output(o) for o in record["outputs"][:4]]
    details = {"triton_launches": record["triton_launches"], "aten_compute_ops": compute_ops,
               "launches": record["launches"], "outputs": record["outputs"], "gpu": gpu}

    reasons, unseen, pytorch_ops = [], [], []
    if record["triton_launches"] == 0:
        reasons.append("no Triton kernel was launched")
    for o in record["outputs"]:
        if o["numel"] > 0 and o["shares"]["unseen"] > 0:
            # Written where the audit could not follow (numpy, another thread, PyTorch with dispatch
            # disabled, memory written behind the kernels' backs): nothing vouches for those values.
            # Failing closed: an honest kernel computes its outputs in Triton launched from forward.
            unseen.append(o["path"])
            reasons.append("%s of %s was produced where the audit could not see it (numpy, another thread, "
                           "disabled dispatch, raw memory writes): compute every output with Triton kernels "
                           "launched from forward, on its thread" % (_percent(o["shares"]["unseen"]), o["path"]))
            continue
        # PyTorch's output: PyTorch (aten or a library) computed a meaningful part of it and Triton
        # less than that. Allocations, views, .contiguous() and copies of inputs are not PyTorch
        # compute; a Triton copy of PyTorch's result is. An aten epilogue on a Triton result (Triton
        # GEMM, then `out + bias` in torch) counts as PyTorch's as well: allowing it would let a
        # trivial Triton pre-pass launder any torch op. A Triton launch that writes over a library
        # result (cuBLAS/cuDNN) is credited with what it wrote (audit.py, the epilogue rule).
        pytorch = o["shares"]["aten"] + o["shares"]["library"]
        if o["numel"] > 0 and o["shares"]["triton"] < MEANINGFUL <= pytorch:
            ops = [o["writers"][k] for k in ("aten", "library") if k in o["writers"] and o["shares"][k] > 0]
            pytorch_ops += [op for op in ops if op not in pytorch_ops]
            aten = o["writers"].get("aten") if o["shares"]["aten"] > 0 else None
            library = o["writers"].get("library") if o["shares"]["library"] > 0 else None
            fix = []
            if aten:
                fix.append("move `%s` into a Triton kernel (fuse it into the kernel that computes its input, or "
                           "add a Triton kernel for it)" % aten)
            if library:
                fix.append("`%s` (cuBLAS/cuDNN) may stay in PyTorch, but a Triton kernel must write the output: "
                           "apply what follows it in a Triton epilogue kernel" % library)
            reasons.append("%s was computed by PyTorch (%s), Triton wrote %s of it%s"
                           % (o["path"], _percent(pytorch), _percent(o["shares"]["triton"]),
                              ": " + "; ".join(fix) if fix else ""))
    if shares and shares["triton"] < MEANINGFUL and shares["aten"] >= ATEN_DOMINANT:
        # Library GEMM/conv time is not held against a kernel (hybrids are legal); plain PyTorch
        # compute kernels dwarfing the Triton ones mean the Triton part is decoration.
        reasons.append("Triton kernels hold %s of GPU time, other PyTorch kernels %s"
                       % (_percent(shares["triton"]), _percent(shares["aten"])))
    if reasons:
        details["reasons"] = reasons
        details["pytorch_ops"] = pytorch_ops  # the PyTorch ops that wrote the refused outputs (a repair names them)
        if unseen:
            details["unseen_outputs"] = unseen
        return _result("torch_fallback", "; ".join(reasons + parts), shares, details)
    return _result("ok", "; ".join(parts), shares, details)
