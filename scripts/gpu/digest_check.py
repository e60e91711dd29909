#!/usr/bin/env python3
"""The content digests (kforge_harness/digest.py) on a GPU: exact, and how fast.

Run from the repository root on a machine with a CUDA GPU:

    PYTHONPATH=src/eval/harness $KFORGE_PYTHON scripts/gpu/digest_check.py [--gib 6] [--old DIR]

1. Exactness: the GPU's float64 products give the CPU's digests (which test_digest.py ties to
   the word-by-word sums in Python integers) on random words, on the worst case for the
   products' sums (every half at -2^15) and at offsets that cross blocks, and pieces add up to
   the whole on a tensor of --gib GiB.
2. Speed: the median of 3 whole-tensor digests of --gib GiB on the GPU, and with --old DIR
   (a directory holding an older kforge_harness/digest.py) the same for that implementation.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time

import torch

from kforge_harness.digest import BLOCK_WORDS, PRIME, words_digest


def timed(fn, *args) -> float:  # type: ignore[no-untyped-def]
    torch.cuda.synchronize()
    started = time.perf_counter()
    fn(*args)
    torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=6.0)
    parser.add_argument("--old", default=None)
    args = parser.parse_args()
    cuda = torch.device("cuda")
    failures = 0
    g = torch.Generator().manual_seed(1)
    cases = {
        "random 64 MiB + 3 bytes": torch.randint(0, 256, (64 * 2**20 + 3,), generator=g, dtype=torch.uint8),
        "worst case, 3 blocks": torch.full((6 * BLOCK_WORDS + 2,), -32768, dtype=torch.int16).view(torch.uint8),
        "int32 extremes": torch.tensor([-2**31, 2**31 - 1, -1, 0] * 100_003, dtype=torch.int32).view(torch.uint8),
    }
    for name, raw in cases.items():
        for first in (0, 7, BLOCK_WORDS - 1, 5 * BLOCK_WORDS + 3):
            cpu, gpu = words_digest(raw, 11, first), words_digest(raw.to(cuda), 11, first)
            ok = cpu == gpu
            failures += not ok
            print("exact  %-26s first word %8d: cpu %s gpu %s %s" % (name, first, cpu, gpu, "ok" if ok else "DIFFER"))
    n = int(args.gib * 2**30) // 4 * 4
    big = torch.empty(n, dtype=torch.uint8, device=cuda)
    big.view(torch.float32).normal_()
    whole = words_digest(big, 5)
    cut = n // 3 // 4 * 4
    parts = [words_digest(big[:cut], 5), words_digest(big[cut:], 5, cut // 4)]
    added = tuple((x + y) % PRIME for x, y in zip(*parts))
    failures += added != whole
    print("exact  %.1f GiB whole vs two pieces: %s %s %s" % (args.gib, whole, added, "ok" if added == whole else "DIFFER"))
    runs = [timed(words_digest, big, 5) for _ in range(3)]
    print("speed  %.1f GiB digest on the GPU: median %.1f ms (%.0f GB/s)" % (
        args.gib, 1e3 * statistics.median(runs), n / statistics.median(runs) / 1e9))
    if args.old:
        spec = importlib.util.spec_from_file_location("old_digest", args.old + "/kforge_harness/digest.py")
        assert spec is not None and spec.loader is not None
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        runs = [timed(old.words_digest, big, 5) for _ in range(3)]
        print("speed  %.1f GiB digest, old int64 implementation: median %.1f ms" % (
            args.gib, 1e3 * statistics.median(runs)))
    print("FAILED: %d" % failures if failures else "all exact")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
