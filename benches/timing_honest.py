"""Honest kernels through `kforge eval --fresh-baseline --json`, several sizes and runs, and what
the timing cross-check made of each: the figures issue 21 starts from (docs/benchmarks.md).

    python benches/timing_honest.py KFORGE [--runs N] [--device 0] [--out results.jsonl]

Evaluates examples/kernels/softmax_triton.py on softmax tasks of batch 256 and 1024 by dim
1024..32768 (a copy of examples/tasks/softmax.py with the sizes changed) and the ReLU example
on 16 MiB and 1 GiB, and prints per evaluation: score, event score, flags, the judge's host
floor against the reported event floor, the allowed gap, and the reference's host and event
medians.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def task_with(path, **sizes):
    text = open(path).read()
    for name, value in sizes.items():
        text = re.sub(r"^%s = \d+" % name, "%s = %d" % (name, value), text, flags=re.M)
    return text


def cases():
    softmax = os.path.join(ROOT, "examples/tasks/softmax.py")
    relu = os.path.join(ROOT, "examples/tasks/relu.py")
    for batch in (256, 1024):
        for dim in (1024, 4096, 16384, 32768):
            yield ("softmax_%dx%d" % (batch, dim), task_with(softmax, batch_size=batch, dim=dim),
                   os.path.join(ROOT, "examples/kernels/softmax_triton.py"))
    for name, rows in (("relu_16MiB", 1024), ("relu_1GiB", 65536)):
        yield name, task_with(relu, batch_size=rows, dim=4096), os.path.join(ROOT, "examples/kernels/relu_triton.py")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kforge")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--device", default="0")
    p.add_argument("--out")
    args = p.parse_args()
    work = tempfile.mkdtemp()
    out = open(args.out, "a") if args.out else None
    flagged = total = 0
    print("%-20s %3s %8s %8s %-22s %9s %9s %8s %9s %9s" % ("task", "run", "score", "event", "flags", "host_fl",
                                                            "event_fl", "gap", "ref_host", "ref_event"))
    for name, text, kernel in cases():
        task = os.path.join(work, name + ".py")
        with open(task, "w") as f:
            f.write(text)
        for run in range(args.runs):
            r = subprocess.run([args.kforge, "eval", task, kernel, "--device", args.device, "--json",
                                "--fresh-baseline"], capture_output=True, text=True)
            try:
                result = json.loads(r.stdout)
            except ValueError:
                print(name, run, "no result:", r.stderr[-300:])
                continue
            t = result.get("timing") or {}
            ref = t.get("reference") or {}
            flags = [f for f in result.get("flags", []) if f != "weak_reference"]
            total += 1
            flagged += "host_time_disagrees" in flags
            print("%-20s %3d %8.3f %8.3f %-22s %9.4f %9.4f %8.4f %9.4f %9.4f" % (
                name, run, t.get("score") or 0, t.get("event_score") or t.get("score") or 0, ",".join(flags) or "-",
                t.get("host_floor_ms") or 0, t.get("event_floor_ms") or 0, t.get("allowed_gap_ms") or 0,
                ref.get("host_median_ms") or 0, ref.get("median_ms") or 0))
            if out:
                out.write(json.dumps({"task": name, "run": run, "timing": t, "flags": result.get("flags"),
                                      "correct": result.get("correct"), "phases_s": result.get("phases_s")}) + "\n")
    print("%d of %d evaluations flagged host_time_disagrees" % (flagged, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
