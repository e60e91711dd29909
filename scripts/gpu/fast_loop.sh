#!/usr/bin/env bash
# Issue 38 on a GPU: the interactive loop's figures through `kforge bench fast-loop`.
#   1. the README's by-hand example (`kforge eval examples/tasks/relu.py
#      examples/kernels/relu_triton.py`, a 4096x5120 ReLU, 80 MiB) on GPU 0: one-shot wall;
#   2. a session-like sequence of 5 candidate evaluations of it on one warm evaluator: each
#      one's wall, its correctness trials and the rest, and the judge's phases (median of
#      candidates 2..): where a warm candidate's seconds go on a GPU (the "task"
#      phase repeated per candidate, the compile baseline, worker start);
#   3. the same for the softmax example (512x32768);
#   4. on this host's CPU, the same two for comparison with docs/benchmarks.md's 2-core
#      figures (the task's sizes shrunk for the interpreter: the verdict says to what).
#
#   scripts/gpu/fast_loop.sh
#
# From the repository root, with target/release/kforge built and torch + triton at
# $KFORGE_PYTHON. About 3-6 minutes on an H200. Prints the tables; exit status is kforge's
# (1 where a CPU target is missed; the GPU targets need KernelBench beside it: not here).
set -uo pipefail
kforge=target/release/kforge
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3}
work=$(mktemp -d /tmp/kforge-fast-loop.XXXXXX)
export KFORGE_CACHE_DIR=$work/cache
status=0
run() {
    echo "== $*"
    timeout 600 "$kforge" bench fast-loop "$@" || status=1
    echo
}
run examples/tasks/relu.py examples/kernels/relu_triton.py --device 0 --candidates 5
run examples/tasks/softmax.py examples/kernels/softmax_triton.py --device 0 --candidates 5
run examples/tasks/relu.py examples/kernels/relu_triton.py --cpu --candidates 3
run examples/tasks/softmax.py examples/kernels/softmax_triton.py --cpu --candidates 3
rm -rf "$work"
exit $status
