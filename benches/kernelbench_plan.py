"""The memory plan of every KernelBench task, found on PyTorch's meta device (no GPU, no
allocation): one draw of get_inputs(), the reference's outputs, and the plan's peak
2 I + 4 O + 2 F (the reference's scratch R needs a real forward and is left out here).

    python benches/kernelbench_plan.py KernelBench/KernelBench/level1 [level2 ...] [--capacity-gib 78]

Prints one row per task (sizes in GiB, or why the meta device could not run it) and a
summary: the largest plans and the tasks whose plan exceeds the capacity. The figures in
docs/benchmarks.md ("Memory plan of KernelBench's tasks") come from this script.
"""

import argparse
import importlib.util
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "eval", "harness"))

from kforge_harness.loading import InputSource  # noqa: E402
from kforge_harness.memory import plan_bytes  # noqa: E402

GIB = float(1 << 30)
FLUSH = 256 << 20


def task_files(directory):
    def order(name):
        m = re.match(r"(\d+)_", name)
        return (int(m.group(1)) if m else 1 << 30, name)
    return [os.path.join(directory, n) for n in sorted(os.listdir(directory), key=order) if n.endswith(".py")]


def plan_of(path):
    """(inputs bytes, outputs bytes or None, note): the judge's own meta-device sizing
    (InputSource.meta_sizes), told that no memory is free so that it always runs the forward."""
    spec = importlib.util.spec_from_file_location("kb_task", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
    inputs_bytes, outputs_bytes = InputSource(module, "cpu").meta_sizes(init, free_bytes=0)
    if inputs_bytes is None:
        raise ValueError("get_inputs() does not run on the meta device")
    return inputs_bytes, outputs_bytes, "" if outputs_bytes is not None else "outputs unknown on meta"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--capacity-gib", type=float, default=78.0)
    args = parser.parse_args()
    rows = []
    for directory in args.dirs:
        for path in task_files(directory):
            name = "%s/%s" % (os.path.basename(directory.rstrip("/")), os.path.basename(path)[:-3])
            try:
                i, o, note = plan_of(path)
            except Exception as e:  # noqa: BLE001
                rows.append((name, None, None, None, "task failed on meta: %s" % str(e).splitlines()[0][:80]))
                continue
            peak = plan_bytes(i, o if o is not None else i, 0, FLUSH)
            rows.append((name, i, o, peak, note))
            print("%-58s in %8.3f  out %8s  plan %8.3f GiB  %s" % (
                name, i / GIB, "%.3f" % (o / GIB) if o is not None else "?", peak / GIB, note), flush=True)
    planned = [r for r in rows if r[3] is not None]
    print("\n%d tasks, %d planned (%d with outputs taken as the inputs' size)" % (
        len(rows), len(planned), sum(1 for r in planned if r[2] is None)))
    for name, i, o, peak, note in sorted(planned, key=lambda r: -r[3])[:5]:
        print("largest: %-50s plan %.1f GiB (inputs %.1f, outputs %s GiB)" % (
            name, peak / GIB, i / GIB, "%.1f" % (o / GIB) if o is not None else "?"))
    over = [r for r in planned if r[3] > args.capacity_gib * GIB]
    print("over %.0f GiB: %s" % (args.capacity_gib, ", ".join(r[0] for r in over) or "none"))
    failed = [r for r in rows if r[3] is None]
    for name, *_, note in failed:
        print("not planned: %s: %s" % (name, note))


if __name__ == "__main__":
    main()
