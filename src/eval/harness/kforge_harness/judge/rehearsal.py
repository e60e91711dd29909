"""The rehearsal of a judge started ahead (ahead.py): before it waits for its kernel, it runs
its own checking code once on stand-ins of the task's outputs, and has the kernel's process
run the audit on a model of the harness's own (the worker's `rehearse`, rehearsal.py).

Why: a fresh process pays for the first use of everything, and on a GPU that is not small:
CUDA loads each module of torch's kernels the first time one of them runs (8-40 ms each on an
H200), cuBLAS makes its handle at the first product (~70 ms). A judge and a worker are fresh
for every candidate, and their first comparison, digest, oracle moments and audited forward
came after the kernel arrived. Rehearsed, they are paid while the model writes the candidate.

The stand-ins are small tensors of each floating output's dtype and number of dimensions,
drawn from the judge's own generator: nothing of the task's values, nothing kept. What the
rehearsal computes is thrown away; only the process's warm state remains. The worker's part
runs beside the judge's (its request is sent first) and both end before the judge says it is
ready: its null windows are calibrated after the wait, on a quiet device."""

from __future__ import annotations

import sys
from typing import Any, Dict, Tuple

from .. import messages, oracle
from ..compare import DEFAULT_MODE, compare_outputs
from ..digest import same_bytes, tensor_digest
from ..tensors import flatten_outputs
from ..timing import bootstrap_score
from .context import Run
from .task import Setup

# A stand-in's elements at most: each dimension capped so that their product stays under it.
STAND_IN_ELEMENTS = 4096


def stand_in_shape(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """`shape` with each dimension capped (same number of dimensions, none of them 0, at most
    STAND_IN_ELEMENTS elements): what the comparisons' per-axis sums see of the real one."""
    cap = max(2, int(STAND_IN_ELEMENTS ** (1.0 / max(1, len(shape)))))
    return tuple(max(1, min(int(s), cap)) for s in shape)


def stand_ins(run: Run, setup: Setup) -> Dict[str, Any]:
    """Per floating (real) output path: a small tensor of its dtype on the device."""
    import torch

    out: Dict[str, Any] = {}
    gen = torch.Generator(device=run.device).manual_seed(run.seed)
    for path, meta in flatten_outputs(setup.output_shapes):
        if isinstance(meta, torch.Tensor) and meta.is_floating_point():
            shape = stand_in_shape(tuple(meta.shape))
            out[path] = torch.rand(shape, generator=gen, device=run.device, dtype=torch.float32).to(meta.dtype)
    return out


def rehearse_judge(run: Run, setup: Setup) -> None:
    """The judge's comparisons once on stand-ins: the oracle's moments, a comparison under
    the evaluation's rule, the output digests and the late-write check, the score's
    bootstrap."""
    import torch

    ref = stand_ins(run, setup)
    if ref:
        exact = {path: t.to(torch.float64) for path, t in ref.items()}
        twin = {path: t.clone() for path, t in ref.items()}
        measured = oracle.build("random", "the rehearsal", ref, exact, twin)
        new = {path: t.clone() for path, t in ref.items()}
        settings = run.settings
        compare_outputs(ref, new, settings.atol, settings.rtol, settings.tolerance or DEFAULT_MODE, run.policy, measured)
        for path, t in ref.items():
            tensor_digest(new[path], 1)
            same_bytes(t, new[path])
        if run.gpu:
            torch.cuda.synchronize()
    bootstrap_score([1.0, 1.1, 0.9, 1.0, 1.05, 0.95], [0.5, 0.55, 0.45, 0.5, 0.52, 0.48],
                    [0.1, 0.1, 0.1, 0.1, 0.1, 0.1], resamples=64)
    from .. import audit  # noqa: F401 -- the judge's audit checks import it: now, not after the kernel


def rehearse(run: Run, setup: Setup) -> None:
    """Both rehearsals, the worker's beside the judge's; a rehearsal's own failure is only
    logged (it saves time, it decides nothing)."""
    link = run.link
    specs = run.store.launchers(run.device) if run.gpu and run.store is not None else []
    link.send(messages.Rehearse(op="rehearse", launchers=specs))
    try:
        rehearse_judge(run, setup)
    except Exception as e:  # noqa: BLE001 -- see above
        print("kforge: the judge's rehearsal failed (%s: %s)" % (type(e).__name__, str(e)[:300]), file=sys.stderr)
    answer: messages.Rehearsed = link.receive("rehearsed")
    record = answer.get("record")
    if isinstance(record, dict) and record.get("error"):
        print("kforge: the worker's rehearsal failed (%s)" % str(record["error"])[:300], file=sys.stderr)
    if run.gpu:
        import torch

        torch.cuda.empty_cache()
