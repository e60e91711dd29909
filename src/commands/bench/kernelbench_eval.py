"""KernelBench's own evaluator of one kernel, run for `kforge bench fast-loop --kernelbench`.

Imports `kernelbench.eval` from a KernelBench checkout and calls its
`eval_kernel_against_ref` on the task and the kernel `--evals` times in this one process,
as KernelBench's scripts do (5 correctness trials, 100 timed runs, cuda_event timing, the
triton backend). After each evaluation it prints one JSON line: its wall, the seconds since
this process started (the first line's is KernelBench's one-shot wall, imports included),
and what KernelBench concluded. kforge compares its own walls with these.

KernelBench's package imports modules its evaluator never calls (an LLM client, dotenv,
tqdm); where one is not installed it is replaced by an empty stand-in and named on stderr, so
a GPU host without them can still run the evaluator. Nothing of the evaluation is replaced.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import types
from typing import Any

STARTED = time.monotonic()

# Modules `kernelbench` imports at module level that its evaluator does not use.
UNUSED_BY_EVAL = {
    "dotenv": {"load_dotenv": lambda *a, **k: None},
    "tqdm": {"tqdm": lambda it=None, *a, **k: it},
    "openai": {"OpenAI": object},
    "litellm": {"completion": None},
    "requests": {},
}


class _BaseModel:
    """pydantic.BaseModel as KernelExecResult uses it: keyword fields over class defaults."""

    def __init__(self, **fields: Any) -> None:
        for name, value in type(self).__dict__.items():
            if not name.startswith("_") and not callable(value):
                setattr(self, name, value.copy() if isinstance(value, dict) else value)
        for name, value in fields.items():
            setattr(self, name, value)


def stand_in_missing() -> list[str]:
    """Empty modules for what is not installed; the names of those replaced."""
    replaced = []
    for name, attributes in UNUSED_BY_EVAL.items():
        try:
            importlib.import_module(name)
        except ImportError:
            module = types.ModuleType(name)
            for attribute, value in attributes.items():
                setattr(module, attribute, value)
            sys.modules[name] = module
            replaced.append(name)
    try:
        importlib.import_module("pydantic")
    except ImportError:
        module = types.ModuleType("pydantic")
        setattr(module, "BaseModel", _BaseModel)
        sys.modules["pydantic"] = module
        replaced.append("pydantic")
    return replaced


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True, help="a KernelBench checkout")
    parser.add_argument("--task", required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--evals", type=int, default=4)
    args = parser.parse_args()
    replaced = stand_in_missing()
    if replaced:
        print("kernelbench: stand-ins for modules its evaluator does not use: %s" % ", ".join(replaced),
              file=sys.stderr)
    sys.path.insert(0, os.path.join(args.repo, "src"))
    import torch
    from kernelbench.eval import eval_kernel_against_ref

    with open(args.task) as f:
        task = f.read()
    with open(args.kernel) as f:
        kernel = f.read()
    for i in range(args.evals):
        began = time.monotonic()
        result = eval_kernel_against_ref(task, kernel, seed_num=42, num_correct_trials=5, num_perf_trials=100,
                                         measure_performance=True, timing_method="cuda_event",
                                         device=torch.device("cuda", args.device), backend="triton",
                                         precision=torch.float32)
        ended = time.monotonic()
        line = {
            "eval": i + 1,
            "wall_s": ended - began,
            "since_start_s": ended - STARTED,
            "compiled": bool(getattr(result, "compiled", False)),
            "correct": bool(getattr(result, "correctness", False)),
            "runtime_ms": getattr(result, "runtime", -1.0),
            "ref_runtime_ms": getattr(result, "ref_runtime", -1.0),
        }
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
