#!/usr/bin/env bash
# Issue 34, item 1 on a GPU: the task's code (judge, reference, compiled reference) runs in a
# sandbox of its own beside the kernel's. What only a GPU shows:
#   1. CUDA IPC, the gate's pinned memory and the timing windows between two sandboxes (the
#      judge's and the worker's): a timed evaluation is correct, with both timings;
#   2. the compile baseline (torch.compile inside the tasks' sandbox: Triton's and inductor's
#      caches in the judge's private /tmp), the launch-path draws and the device's peaks
#      (measured by the server, outside any sandbox) are there, and a second evaluation reads
#      the cached figures back through the server;
#   3. a hostile task under `kforge eval` on the GPU: no secret, no marker on the host;
#   4. the wall time and overhead per evaluation (`kforge bench eval-overhead`), to compare
#      with docs/benchmarks.md's figures for the build before (and OLD_KFORGE if given).
#
#   scripts/gpu/task_sandbox.sh [OLD_KFORGE]
#
# From the repository root, with target/release/kforge built and torch + triton at
# $KFORGE_PYTHON. Prints PASS/FAIL per check and the figures.
set -uo pipefail
new=target/release/kforge
old=${1:-}
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3}
work=$(mktemp -d /tmp/kforge-task-sandbox.XXXXXX)
export KFORGE_CACHE_DIR=$work/cache
fail=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fail=1; fi; }
field() { "$KFORGE_PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

echo "== doctor"
"$new" doctor 2>&1 | grep -i -E "sandbox|device|torch" | head -8

echo "== 1-2. a timed evaluation (fresh cache), then again (cached figures)"
for run in 1 2; do
  "$new" eval examples/tasks/relu.py examples/kernels/relu_triton.py --device 0 --json > "$work/eval$run.json" 2> "$work/eval$run.err"
  echo "run $run: correct=$(field "$work/eval$run.json" "r['correct']") category=$(field "$work/eval$run.json" "r['category']") summary=$(field "$work/eval$run.json" "r['summary'][:200]")"
  echo "  task sandbox: $(field "$work/eval$run.json" "r['sandbox'].get('task')")"
  echo "  score $(field "$work/eval$run.json" "(r['timing'] or {}).get('score')") reference cached: $(field "$work/eval$run.json" "(r['timing'] or {}).get('reference',{}).get('cached')") compile: $(field "$work/eval$run.json" "{k: (r['timing'] or {}).get('compile',{}).get(k) for k in ('cached','error','median_ms')}")"
  echo "  peaks: $(field "$work/eval$run.json" "{k: ((r['speed_of_light'] or {}).get('peaks') or {}).get(k) for k in ('cached','error','dram_bytes_per_s')}")"
  echo "  launch path: $(field "$work/eval$run.json" "{k: v.get('probes_ms') for k, v in (((r['timing'] or {}).get('environment') or {}).get('launch_path') or {}).get('processes', {}).items()}")"
  echo "  phases: $(field "$work/eval$run.json" "{k: round(v, 3) for k, v in r['phases_s'].items()}")"
  echo "  server: $(field "$work/eval$run.json" "{k: round(v, 3) for k, v in r['server_phases_s'].items()}")"
  check "run $run correct and timed" "[ \"\$(field $work/eval$run.json \"r['correct'] and bool((r['timing'] or {}).get('score'))\")\" = True ]"
done
check "the compile baseline was measured, then read back" "[ \"\$(field $work/eval2.json \"(r['timing'] or {}).get('compile',{}).get('cached')\")\" = True ]"
check "the peaks are there" "[ \"\$(field $work/eval2.json \"'dram_bytes_per_s' in (((r['speed_of_light'] or {}).get('peaks')) or {})\")\" = True ]"

echo "== 3. a hostile task on the GPU"
mkdir -p "$work/home" "$work/cwd"
marker=kforge-hostile-gpu-$$
sed -e "s|@NAMES@|OPENAI_API_KEY,KFORGE_PLANTED_SECRET|" -e "s|@TARGETS@|$work/home,$work/cwd,/tmp,$work|" \
    -e "s|@MARKER@|$marker|" tests/fixtures/tasks/hostile_task.py > "$work/hostile.py"
secret=sk-test-secret-gpu-$$-0123456789
root=$PWD
(cd "$work/cwd" && HOME=$work/home OPENAI_API_KEY=$secret KFORGE_PLANTED_SECRET=kforge-planted-gpu-$$ \
  "$root/$new" eval "$work/hostile.py" "$root/tests/fixtures/kernels/relu_ok.py" --device 0 --json > "$work/hostile.json" 2> "$work/hostile.err")
grep -o "TASK-PROBE ran[^\\]*" "$work/hostile.json" | sort -u
check "the hostile task ran" "grep -q 'TASK-PROBE ran during the module body' $work/hostile.json"
check "no secret anywhere" "! grep -r -q -e $secret -e kforge-planted-gpu-$$ $work/hostile.json $work/hostile.err $work/cache/logs"
check "no marker on the host" "! ls $work/home/$marker $work/cwd/$marker /tmp/$marker $work/$marker 2>/dev/null | grep -q ."
echo "  hostile: correct=$(field "$work/hostile.json" "r['correct']") $(field "$work/hostile.json" "r['summary'][:200]")"

echo "== 4. evaluation wall time (this build$( [ -n "$old" ] && echo ", then $old"))"
for bin in "$new" $old; do
  echo "-- $bin"
  "$bin" bench eval-overhead examples/tasks/relu.py examples/kernels/relu_triton.py --runs 3 --device 0 --executor fork 2>&1 | tail -4
done
echo "work dir: $work"
exit $fail
