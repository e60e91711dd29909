"""GEMM (nn.Linear) * multiplier, LeakyReLU in one Triton kernel whose tl.dot runs in 3xTF32:
float32 accuracy on tensor cores. For tests/fixtures/tasks/gemm_leaky_relu.py and KernelBench
level 2 task 12_Gemm_Multiply_LeakyReLU (same constructor and parameters)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_leaky_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, multiplier, slope,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        x = tl.load(x_ptr + rm[:, None].to(tl.int64) * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K),
                    other=0.0)
        w = tl.load(w_ptr + rn[None, :].to(tl.int64) * K + ks[:, None], mask=(rn[None, :] < N) & (ks[:, None] < K),
                    other=0.0)
        acc += tl.dot(x, w, input_precision="tf32x3")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    y = (acc + bias[None, :]) * multiplier
    y = tl.where(y >= 0, y, y * slope)
    tl.store(out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.gemm.weight.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
        gemm_leaky_relu_kernel[grid](x, self.gemm.weight, self.gemm.bias, out, M, N, K,
                                     self.multiplier, self.negative_slope,
                                     BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3)
        return out
