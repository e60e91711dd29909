#!/usr/bin/env bash
# Issue 9's GPU measurements in one run (docs/benchmarks.md, "Fidelity and scale against
# KernelBench"): the task check of every task of the given levels with kforge's and
# KernelBench's reference timing, then the wall time of `kforge eval` against KernelBench's
# own evaluation of the same correct ReLU kernel on 19_ReLU at 1 GiB and at its shipped 6 GiB.
#
#   benches/kernelbench_gpu.sh KFORGE_BINARY KERNELBENCH_CHECKOUT OUT_DIR [LEVEL ...]
#
# KERNELBENCH_CHECKOUT is a clone of ScalingIntelligence/KernelBench (never committed here).
# Levels default to level1. Everything lands in OUT_DIR (JSON per level, one line per eval).
set -euo pipefail
kforge=$1; kb=$2; out=$3; shift 3
levels=("${@:-level1}")
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
python=${KFORGE_PYTHON:-python3}

for level in "${levels[@]}"; do
  "$kforge" bench kernelbench "$kb/KernelBench/$level" --json "$out/$level.json" | tee "$out/$level.txt" || true
done

# 19_ReLU at 1 GiB (4096 x 65536) and as shipped (4096 x 393216, 6 GiB).
work=$(mktemp -d)
sed 's/^dim = 393216/dim = 65536/' "$kb/KernelBench/level1/19_ReLU.py" > "$work/19_ReLU_1GiB.py"
cp "$kb/KernelBench/level1/19_ReLU.py" "$work/19_ReLU_6GiB.py"
kernel="$here/../examples/kernels/relu_triton.py"
for task in "$work/19_ReLU_1GiB.py" "$work/19_ReLU_6GiB.py"; do
  for run in 1 2; do
    start=$(date +%s.%N)
    "$kforge" eval "$task" "$kernel" --fresh-baseline --json > "$work/result.json" || true
    end=$(date +%s.%N)
    "$python" - "$task" "$start" "$end" "$work/result.json" >> "$out/eval_wall.jsonl" <<'PY'
import json, os, sys
task, start, end, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
r = json.load(open(path))
t = r.get("timing") or {}
print(json.dumps({"who": "kforge", "task": os.path.basename(task), "wall_s": end - start,
                  "verdict": "correct" if r.get("correct") else r.get("category"), "summary": r.get("summary"),
                  "phases_s": r.get("phases_s"), "memory": r.get("memory"), "footprint": r.get("footprint"),
                  "score": t.get("score"), "reference_ms": (t.get("reference") or {}).get("median_ms"),
                  "kernel_ms": (t.get("kernel") or {}).get("median_ms")}))
PY
    "$python" "$here/kernelbench_eval_wall.py" "$kb" "$task" "$kernel" >> "$out/eval_wall.jsonl" || true
  done
done
rm -rf "$work"
