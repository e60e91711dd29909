"""Per-evaluation wall time of a harness, driven directly (no kforge binary), so that two
harness versions can be compared on one machine without building kforge twice:

    python benches/harness_overhead.py HARNESS_DIR TASK KERNEL [--runs N] [--device cpu|cuda:0]
                                       [--set KEY=JSON]...

HARNESS_DIR holds the `kforge_harness` package (src/eval/harness in a checkout; an older one
from `git archive REV src/eval/harness | tar -x -C /tmp/old`). One server is started (its
start-up and first evaluation reported apart: the zygotes start then), then N evaluations of
the same correct kernel run through it; the medians of the wall time per evaluation (as the
caller sees it), of the kernel's own work (`phases_s.correctness + timing + recheck`) and of
the rest (the overhead) are printed, with each server phase's median.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The job kforge sends with the default [eval] settings (the harness tests' own copy).
sys.path[:0] = [os.path.join(HERE, "..", "src", "eval", "harness"), os.path.join(HERE, "..", "src", "eval", "harness",
                                                                               "tests")]
from jobs import JOB  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("harness")
    parser.add_argument("task")
    parser.add_argument("kernel")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="a job setting, e.g. static_checks=false or trials=2")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.harness), PYTHONDONTWRITEBYTECODE="1",
               TRITON_INTERPRET="1" if args.device == "cpu" else "0")
    started = time.time()
    server = subprocess.Popen([sys.executable, "-m", "kforge_harness", "serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env, cwd=args.harness, text=True)
    hello = json.loads(server.stdout.readline())
    print("server hello after %.2f s (sandbox %s)" % (time.time() - started, (hello.get("sandbox") or {}).get("kind")))
    job = dict(JOB, task_path=os.path.abspath(args.task), kernel_path=os.path.abspath(args.kernel),
               device=args.device, timing=args.device != "cpu", compile_baseline=False)
    job.update({k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)})
    walls, works, phases = [], [], {}
    for i in range(args.runs + 1):
        begun = time.time()
        server.stdin.write(json.dumps({"op": "eval", "id": "b%d" % i, "job": job}) + "\n")
        server.stdin.flush()
        while True:
            event = json.loads(server.stdout.readline())
            if event.get("event") == "result":
                break
        wall = time.time() - begun
        result = event["result"]
        if not result.get("correct"):
            sys.exit("the kernel must be correct: %s %s" % (result.get("category"), result.get("summary")))
        work = sum(result.get("phases_s", {}).get(k, 0.0) for k in ("correctness", "timing", "recheck"))
        if i == 0:
            print("first evaluation (zygotes starting): %.2f s wall" % wall)
            continue
        walls.append(wall)
        works.append(work)
        for name, seconds in (result.get("server_phases_s") or {}).items():
            phases.setdefault(name, []).append(seconds)
    server.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
    server.stdin.flush()
    server.wait(timeout=30)
    overheads = [w - k for w, k in zip(walls, works)]
    print("%d evaluations: wall %.3f s, kernel work %.3f s, overhead %.3f s (medians)" % (
        args.runs, statistics.median(walls), statistics.median(works), statistics.median(overheads)))
    print("server phases (medians): " + ", ".join("%s %.3f s" % (name, statistics.median(v))
                                                   for name, v in sorted(phases.items())))


if __name__ == "__main__":
    main()
