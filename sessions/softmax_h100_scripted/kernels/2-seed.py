# SCRIPTED-BROKEN seed: a typo
"""Row softmax in Triton: y[i, :] = exp(x[i, :] - max_i) / sum(exp(x[i, :] - max_i)).

Try it with:  kforge eval examples/tasks/softmax.py examples/kernels/softmax_triton.py

One program per row. The whole row is loaded into registers at once, so the kernel reads
each input element once and writes each output element once: the minimum memory traffic.
tl.arange needs a power-of-two length, so BLOCK is the row length rounded up to a power of
two and the extra lanes are masked off. Masked lanes load -inf: they do not change the max,
and exp(-inf) = 0 keeps them out of the sum.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    # Subtracting the row max makes every exponent <= 0: exp cannot overflow.
    x = x - tl.maxx(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, num / den, mask=mask)


class ModelNew(nn.Module):
    """Same constructor and forward signature as the task's Model."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        # More warps for longer rows, so that each thread holds a bounded number of values
        # in registers (32768 columns over 16 warps of 32 threads = 64 values per thread).
        num_warps = 4 if BLOCK <= 2048 else (8 if BLOCK <= 8192 else 16)
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                  BLOCK=BLOCK, num_warps=num_warps)
        return y

