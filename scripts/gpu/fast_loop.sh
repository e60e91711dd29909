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
#   5. with a KernelBench checkout: the GPU targets beside KernelBench's own
#      eval_kernel_against_ref (`--kernelbench`): the examples' ReLU (80 MiB), a 1 GiB ReLU,
#      level 2 12_Gemm_Multiply_LeakyReLU with a 3xTF32 Triton GEMM, and one-shot on level 1
#      19_ReLU (6 GiB);
#
#   scripts/gpu/fast_loop.sh [KERNELBENCH_CHECKOUT]
#
# Candidates follow each other after `fast-loop`'s default --answer-gap-s (5 s, a model
# writing the next one), in which a session's evaluator starts the next candidate's judge.
#
# From the repository root, with target/release/kforge built and torch + triton at
# $KFORGE_PYTHON. About 3-6 minutes on an H200, 10 more with KernelBench. Prints the tables;
# exit status is kforge's (1 where a CPU target or the warm target against KernelBench is
# missed).
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
kb=${1:-}
if [ -n "$kb" ]; then
    sed 's/^batch_size = 4096/batch_size = 16384/; s/^dim = 5120/dim = 16384/' examples/tasks/relu.py > "$work/relu_1g.py"
    run examples/tasks/relu.py examples/kernels/relu_triton.py --device 0 --candidates 5 --kernelbench "$kb" --kernelbench-evals 4
    run "$work/relu_1g.py" examples/kernels/relu_triton.py --device 0 --candidates 3 --no-by-hand --kernelbench "$kb" --kernelbench-evals 2
    run "$kb/KernelBench/level2/12_Gemm_Multiply_LeakyReLU.py" scripts/gpu/kernels/gemm_leaky_relu_tf32x3.py --device 0 --candidates 4 --kernelbench "$kb" --kernelbench-evals 3
    run "$kb/KernelBench/level1/19_ReLU.py" examples/kernels/relu_triton.py --device 0 --candidates 2 --kernelbench "$kb" --kernelbench-evals 1
fi
rm -rf "$work"
exit $status
