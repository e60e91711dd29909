"""ReLU in Triton: y = max(x, 0), elementwise.

Try it with:  kforge eval examples/tasks/relu.py examples/kernels/relu_triton.py

The input is treated as one flat array of n elements. The launch grid has one program per
BLOCK consecutive elements; each program loads its block, applies max(x, 0) and stores the
result. The last block usually runs past the end of the array, so every load and store is
masked with `offs < n`.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    # Which block of the flat array this program handles.
    pid = tl.program_id(axis=0)
    # The element indices of that block: a vector of BLOCK offsets.
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    # Lanes past the end of the array must neither read nor write memory.
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x, 0.0)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    """Same constructor and forward signature as the task's Model."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        # The kernel indexes a flat array, so it needs contiguous memory.
        x = x.contiguous()
        # Allocate the output on the input's device (cuda, or cpu under TRITON_INTERPRET=1).
        y = torch.empty_like(x)
        n = x.numel()
        if x.is_cuda:
            # On a GPU, 1024 elements per program (4 warps, 8 elements per thread) keeps
            # loads wide and gives enough programs to fill every SM.
            BLOCK, num_warps = 1024, 4
        else:
            # Triton's CPU interpreter runs each program one after another in Python, so
            # per-program overhead dominates: use few, large programs there.
            BLOCK, num_warps = 1 << 16, 4
        grid = (triton.cdiv(n, BLOCK),)
        relu_kernel[grid](x, y, n, BLOCK=BLOCK, num_warps=num_warps)
        return y
