"""Wall time of KernelBench's own evaluation of one kernel, in a fresh process: the figure
`kforge eval`'s wall time is compared with (issue 9's target: at most 0.3x), and, with
`--evals N`, a warm KernelBench process's (issue 38: `kforge bench fast-loop --kernelbench`
embeds this script).

    python benches/kernelbench_eval_wall.py KERNELBENCH_CHECKOUT TASK.py KERNEL.py [--trials 5] [--perf-trials 100]
        [--evals 1] [--device N]

Runs `kernelbench.eval.eval_kernel_against_ref` (backend "triton") as its scripts do, with
5 correctness trials and 100 timed trials, `--evals` times in this one process, and prints
one JSON line after each: the wall seconds from this script's start (its imports included,
as a `kforge eval` wall includes kforge's; the first line's is the one-shot figure), that
evaluation's own seconds (`eval_s`) and the result KernelBench returned. Run it in the same
lease, on the same GPU, as the kforge evaluation it is compared with
(benches/kernelbench_gpu.sh does both).
"""

import time

STARTED = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402


def shim_missing_modules():
    """KernelBench's package imports modules its evaluation never uses: pydantic (the base of
    its result record), requests, and through `kernelbench.utils` dotenv, tqdm, openai and
    litellm (its LLM client). Where the GPU machine's Python lacks one, a minimal module stands
    in so the evaluation itself runs unchanged; the output names every shim."""
    import copy
    import importlib.util
    import types

    class BaseModel:
        def __init__(self, **fields):
            for klass in reversed(type(self).__mro__):
                for name in getattr(klass, "__annotations__", {}):
                    if hasattr(klass, name):
                        setattr(self, name, copy.deepcopy(getattr(klass, name)))
            for name, value in fields.items():
                setattr(self, name, value)

    def unused(name):
        def fail(*args, **kwargs):
            raise RuntimeError("%s is a stand-in: KernelBench's evaluation should not call it" % name)
        return fail

    def stand_in(module, attr):
        if attr.startswith("__"):  # inspect and importlib probe dunders: those stay absent
            raise AttributeError(attr)
        return unused("%s.%s" % (module, attr))

    shimmed = []
    for name in ("pydantic", "requests", "dotenv", "tqdm", "openai", "litellm"):
        if importlib.util.find_spec(name) is not None:
            continue
        module = types.ModuleType(name)
        if name == "pydantic":
            module.BaseModel = BaseModel
        elif name == "dotenv":
            module.load_dotenv = lambda *args, **kwargs: False
        else:
            # `from openai import OpenAI` and the like: any attribute, failing only if called.
            module.__getattr__ = lambda attr, name=name: stand_in(name, attr)
        sys.modules[name] = module
        shimmed.append(name)
    return shimmed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout")
    parser.add_argument("task")
    parser.add_argument("kernel")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--perf-trials", type=int, default=100)
    parser.add_argument("--evals", type=int, default=1)
    parser.add_argument("--device", type=int, default=None, help="a CUDA index (KernelBench's default: the current)")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.checkout, "src"))
    shimmed = shim_missing_modules()
    from kernelbench.eval import eval_kernel_against_ref

    with open(args.task) as f:
        task = f.read()
    with open(args.kernel) as f:
        kernel = f.read()
    where = {}
    if args.device is not None:
        import torch

        where["device"] = torch.device("cuda", args.device)
    for i in range(max(1, args.evals)):
        began = time.time()
        result = eval_kernel_against_ref(task, kernel, num_correct_trials=args.trials,
                                         num_perf_trials=args.perf_trials, measure_performance=True, backend="triton",
                                         **where)
        ended = time.time()
        summary = {k: getattr(result, k, None) for k in ("compiled", "correctness", "runtime", "ref_runtime",
                                                         "metadata")}
        print(json.dumps({"wall_s": ended - STARTED, "eval": i + 1, "eval_s": ended - began,
                          "task": os.path.basename(args.task), "result": summary, "shimmed": shimmed},
                         default=str), flush=True)


if __name__ == "__main__":
    main()
