"""The pieces of one CPU evaluation of the ReLU example, timed in one process (Triton's
interpreter): a get_inputs() draw, the reference, the kernel's forward (twice: the first
includes the interpreter's set-up), the comparison of its output, and the audited forward.

    python benches/eval_pieces_cpu.py          # from the repository root

The per-piece figures of docs/benchmarks.md ("CPU evaluation time") come from this script.
"""

import importlib.util
import os
import sys
import time

os.environ["TRITON_INTERPRET"] = "1"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "src", "eval", "harness"))

import torch  # noqa: E402,F401

from kforge_harness import audit  # noqa: E402
from kforge_harness.compare import compare_outputs  # noqa: E402


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton looks kernels' modules up by name
    spec.loader.exec_module(module)
    return module


def timed(label, fn):
    started = time.perf_counter()
    value = fn()
    print("%-16s %.3f s" % (label, time.perf_counter() - started), flush=True)
    return value


def main():
    task = load(os.path.join(ROOT, "examples", "tasks", "relu.py"), "bench_task")
    kernel = load(os.path.join(ROOT, "examples", "kernels", "relu_triton.py"), "bench_kernel")
    inputs = timed("draw", lambda: list(task.get_inputs()))
    reference, candidate = task.Model(*task.get_init_inputs()), kernel.ModelNew(*task.get_init_inputs())
    ref_out = timed("reference", lambda: reference(*inputs))
    timed("kernel (first)", lambda: candidate(*inputs))
    out = timed("kernel", lambda: candidate(*inputs))
    timed("compare", lambda: compare_outputs(ref_out, out, 1e-2, 1e-2))
    timed("audited forward", lambda: audit.audited_forward(candidate, inputs, "cpu", []))


if __name__ == "__main__":
    main()
