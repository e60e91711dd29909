"""A cumulative sum along dim 1 of a 2-D tensor: each row in blocks of BLOCK, tl.cumsum within
a block and the running total carried from block to block (the honest order issue 35 found
refused by the fixed atol on KernelBench's 89_cumsum, rows of 32768)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    carry = tl.zeros((1,), dtype=tl.float32)
    for c0 in range(0, C, BLOCK):
        cols = c0 + offs
        mask = cols < C
        x = tl.load(x_ptr + row * C + cols, mask=mask, other=0.0)
        part = tl.cumsum(x, axis=0) + carry
        tl.store(out_ptr + row * C + cols, part, mask=mask)
        carry = tl.sum(tl.where(offs == BLOCK - 1, part, 0.0), axis=0)[None]


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert x.dim() == 2 and self.dim in (1, -1)
        x = x.contiguous()
        R, C = x.shape
        out = torch.empty_like(x)
        cumsum_kernel[(R,)](x, out, C, BLOCK=1024, num_warps=4)
        return out
