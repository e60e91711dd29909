"""Time and extra device memory of the output comparison at KernelBench scale.

    python benches/compare_scale.py [--rows 4096] [--cols 393216]

On a GPU: a 4096x393216 fp32 output (19_ReLU's, 6 GiB) compared with itself, with its last
element wrong, with a transposed (strided) reference, and in bf16. Prints one line per case:
seconds, extra device memory (peak allocated during the comparison beyond the two tensors)
and the verdict's first line.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "eval", "harness"))

import torch  # noqa: E402

from kforge_harness.compare import compare_outputs  # noqa: E402

GIB = float(1 << 30)


def measure(name, ref, new):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    started = time.perf_counter()
    passed, _, reason, _ = compare_outputs(ref, new, 1e-2, 1e-2)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    extra = (torch.cuda.max_memory_allocated() - base) / GIB
    print("%-12s %7.3f s  %6.2f GiB extra  %s" % (name, seconds, extra, "pass" if passed else reason[:100]),
          flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=393216)
    args = parser.parse_args()
    ref = torch.relu(torch.randn(args.rows, args.cols, device="cuda"))
    new = ref.clone()
    measure("equal", ref, new)
    new.view(-1)[-1] += 1.0
    measure("last wrong", ref, new)
    del new
    transposed = ref.t().contiguous().t()  # the same values, column-major
    measure("transposed", transposed, ref)
    del transposed
    half_ref, half_new = ref.bfloat16(), ref.bfloat16()
    del ref
    measure("bf16", half_ref, half_new)


if __name__ == "__main__":
    main()
