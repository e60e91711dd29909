"""Wall time of KernelBench's own evaluation of one kernel, in a fresh process: the figure
`kforge eval`'s wall time is compared with (issue 9's target: at most 0.3x).

    python benches/kernelbench_eval_wall.py KERNELBENCH_CHECKOUT TASK.py KERNEL.py [--trials 5] [--perf-trials 100]

Runs `kernelbench.eval.eval_kernel_against_ref` (backend "triton") as its scripts do, with
5 correctness trials and 100 timed trials, and prints one JSON line: the wall seconds from
this script's start (its imports included, as a `kforge eval` wall includes kforge's) and
the result KernelBench returned. Run it in the same lease, on the same GPU, as the kforge
evaluation it is compared with (benches/kernelbench_gpu.sh does both).
"""

import time

STARTED = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout")
    parser.add_argument("task")
    parser.add_argument("kernel")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--perf-trials", type=int, default=100)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.checkout, "src"))
    from kernelbench.eval import eval_kernel_against_ref

    with open(args.task) as f:
        task = f.read()
    with open(args.kernel) as f:
        kernel = f.read()
    result = eval_kernel_against_ref(task, kernel, num_correct_trials=args.trials, num_perf_trials=args.perf_trials,
                                     measure_performance=True, backend="triton")
    summary = {k: getattr(result, k, None) for k in ("compiled", "correctness", "runtime", "ref_runtime", "metadata")}
    print(json.dumps({"wall_s": time.time() - STARTED, "task": os.path.basename(args.task), "result": summary},
                     default=str))


if __name__ == "__main__":
    main()
