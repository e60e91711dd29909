"""The worker's rehearsal: the harness's own checking code, run once on a model of its own
before a started-ahead worker is handed its kernel (ahead.py), so that what a fresh process
pays the first time it does anything is paid while the model writes the candidate, not on the
candidate's way to its verdict.

What a fresh process pays the first time, on an H200 (scripts/gpu, docs/benchmarks.md): CUDA
loads each module of torch's kernels when one of them first runs (8-40 ms each), cuBLAS makes
its handle at the first product (~70 ms: the audit's digests are float64 products), Triton
builds its compiler's state and its launcher at the first launch, and the audit imports what
it uses. The rehearsal's forward goes through the audit (`audit.audited_forward`) and the GPU
time split (`audit_gpu.gpu_time`) exactly as a kernel's does: a Triton launch of its own
kernel between PyTorch operators, on tensors of each dtype the judge's output slots hold.

Nothing of it is left behind for the kernel: its tensors are dropped and their memory handed
back; the Triton kernel it compiled is the harness's, in this process's own cache. A rehearsal
that fails costs nothing but the time it would have saved: the error is reported and the
evaluation goes on as without it.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Sequence

import triton
import triton.language as tl

# Elements of each rehearsal tensor: a few blocks of the kernel, and of the audit's digest.
ELEMENTS = 4096
BLOCK = 1024
# The Triton kernel's name in the audit's launch records (audited_forward's jit_kernel_names).
KERNEL_NAME = "_kforge_rehearsal_scale"


@triton.jit  # type: ignore[untyped-decorator]  # Triton is untyped; it reads the annotations
def _kforge_rehearsal_scale(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * scale, mask=mask)


class _Model:
    """A forward like an LLM's hybrid kernel: PyTorch operators around a Triton launch."""

    def __call__(self, x: Any) -> Any:
        import torch

        shifted = x - 1
        out = torch.empty_like(shifted)
        n = shifted.numel()
        _kforge_rehearsal_scale[(triton.cdiv(n, BLOCK),)](shifted, out, n, 2.0, BLOCK=BLOCK)
        return out + 1


def floating_dtypes(slots: Any) -> List[Any]:
    """The distinct floating dtypes among the output slots (float32 first, always there):
    the dtypes the audit's and the copies' kernels will see. Only those PyTorch computes in
    (not the float8 formats, which its operators do not take)."""
    import torch

    from .tensors import flatten_outputs

    found = [torch.float32]
    computed = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    for _, value in flatten_outputs(slots):
        if isinstance(value, torch.Tensor) and value.dtype in computed and value.dtype not in found:
            found.append(value.dtype)
    return found


def rehearse(device: str, slots: Any, atol: float, rtol: float, specs: Sequence[Any] = ()) -> Dict[str, Any]:
    """One audited forward and one GPU-time forward of the rehearsal's model per dtype of
    `slots`, their outputs copied and described as the worker's are. Returns the record
    {"seconds", "dtypes", "triton_launches" (that the audit saw), "launchers" (launchers.build's
    record of `specs`, earlier candidates' launchers: on a GPU), "error"}; never raises."""
    began = time.perf_counter()
    from .launchers import build

    built = build(list(specs)) if device != "cpu" else {"built": 0, "error": None}
    dtypes: Sequence[Any] = []
    launches = 0
    error = None
    try:
        import torch

        from . import compiled
        from .audit import audited_forward, gpu_time
        from .tensors import describe

        dtypes = floating_dtypes(slots)
        model = _Model()
        for dtype in dtypes:
            x = torch.rand(ELEMENTS, device=device).to(dtype)
            with torch.no_grad():
                out, record = audited_forward(model, [x], device, [KERNEL_NAME], atol=atol, rtol=rtol, seed=1,
                                         launches=compiled.Launches())
                slot = torch.empty_like(out)
                slot.copy_(out.detach())
                describe(out)
                if device != "cpu":
                    gpu_time(model, [x], [KERNEL_NAME])
                    torch.cuda.synchronize()
            launches += int(record.get("triton_launches") or 0)
            del x, out, slot, record
        if device != "cpu":
            torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001 -- a rehearsal that fails only saves nothing
        error = "%s: %s" % (type(e).__name__, str(e)[:300])
    return {"seconds": time.perf_counter() - began, "dtypes": [str(d).replace("torch.", "") for d in dtypes],
            "triton_launches": launches, "launchers": built, "error": error}


def rehearse_worker(worker: Any, request: Mapping[str, Any]) -> Dict[str, Any]:
    """A worker's `rehearse` (worker.Worker): only before its kernel is loaded, on its output
    slots, with the launcher specs the judge sent."""
    if worker.model is not None or worker.source is not None:
        return {"error": "the kernel is already loaded"}
    return rehearse(worker.device, worker.outputs, worker.job.get("atol", 1e-2), worker.job.get("rtol", 1e-2),
                    request.get("launchers") or [])
