"""KernelBench level 2 task 1_Conv2D_ReLU_BiasAdd as a hybrid: the convolution by the library
(cuDNN, under the policy's settings), ReLU and the per-channel bias in one Triton epilogue.
Under `strict` its result shows its speedup against the reference under PyTorch's defaults
(cuDNN TF32 on) beside the headline (issue 35)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(y_ptr, b_ptr, out_ptr, n, HW, C, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    channel = (offs // HW) % C
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + channel, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(y, 0.0) + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = self.conv(x).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        relu_bias_kernel[(triton.cdiv(n, 1024),)](y, self.bias, out, n, y.shape[2] * y.shape[3], y.shape[1],
                                                  BLOCK=1024)
        return out
