#!/usr/bin/env bash
# Issue 34, item 1 on a GPU: the task's code (judge, reference, compiled reference) runs in a
# sandbox of its own beside the kernel's. What only a GPU shows:
#   0. legacy CUDA IPC between the two sandboxes, on its own (ipc_between_sandboxes.py): the
#      judge now lends its buffers from the tasks' sandbox to the worker in the kernels'
#      (before, from the host); if 1. fails, this line says whether that is why;
#   1. CUDA IPC, the gate's pinned memory and the timing windows between two sandboxes (the
#      judge's and the worker's): a timed evaluation is correct, with both timings;
#   2. the compile baseline (torch.compile inside the tasks' sandbox: Triton's and inductor's
#      caches in the judge's private /tmp), the launch-path draws and the device's peaks
#      (measured by the server, outside any sandbox) are there, and a second evaluation reads
#      the cached reference timing and compile baseline back through the server;
#   3. a hostile task under `kforge eval` on the GPU: it runs, and no secret, no marker on
#      the host;
#   4. the wall time and overhead per evaluation (`kforge bench eval-overhead`), to compare
#      with docs/benchmarks.md's figures for the build before (and OLD_KFORGE if given).
#
#   scripts/gpu/task_sandbox.sh [OLD_KFORGE]
#
# From the repository root, with target/release/kforge built and torch + triton at
# $KFORGE_PYTHON. Prints PASS/FAIL per check and the figures; about 2-3 minutes on an H200
# (each command is cut off after 5 minutes at most). Exit 1 if any check failed.
set -uo pipefail
new=target/release/kforge
old=${1:-}
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3}
work=$(mktemp -d /tmp/kforge-task-sandbox.XXXXXX)
export KFORGE_CACHE_DIR=$work/cache
fail=0
started=$SECONDS
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fail=1; fi; }
field() { "$KFORGE_PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@" 2>&1 | tail -1; }
is_true() { [ "$(field "$1" "$2")" = True ]; }

echo "== doctor"
timeout 300 "$new" doctor 2>&1 | grep -i -E "sandbox|device|torch" | head -8

echo "== 0. legacy CUDA IPC between the two sandboxes"
timeout 300 "$KFORGE_PYTHON" scripts/gpu/ipc_between_sandboxes.py
ipc=$?
check "a handle exported in the tasks' sandbox opens in the kernels' sandbox" "[ $ipc -eq 0 ]"

echo "== 1-2. a timed evaluation (fresh cache), then again (cached figures)"
for run in 1 2; do
  timeout 300 "$new" eval examples/tasks/relu.py examples/kernels/relu_triton.py --device 0 --json \
    > "$work/eval$run.json" 2> "$work/eval$run.err"
  r=$work/eval$run.json
  echo "run $run: correct=$(field "$r" "r['correct']") category=$(field "$r" "r['category']") summary=$(field "$r" "r['summary'][:300]")"
  echo "  task sandbox: $(field "$r" "r['sandbox'].get('task')")"
  echo "  score $(field "$r" "(r['timing'] or {}).get('score')") reference cached: $(field "$r" "((r['timing'] or {}).get('reference') or {}).get('cached')") compile: $(field "$r" "{k: ((r['timing'] or {}).get('compile') or {}).get(k) for k in ('cached','error','median_ms')}")"
  echo "  peaks: $(field "$r" "{k: ((r['speed_of_light'] or {}).get('peaks') or {}).get(k) for k in ('cached','error','dram_bytes_per_s')}")"
  echo "  launch path: $(field "$r" "{k: (v or {}).get('probes_ms') for k, v in ((((r['timing'] or {}).get('environment') or {}).get('launch_path') or {}).get('processes') or {}).items()}")"
  echo "  phases: $(field "$r" "{k: round(v, 3) for k, v in r['phases_s'].items()}")"
  echo "  server: $(field "$r" "{k: round(v, 3) for k, v in r['server_phases_s'].items()}")"
  if ! is_true "$r" "r['correct']"; then
    echo "  message: $(field "$r" "(r.get('message') or '')[-1500:]")"
    tail -5 "$work/eval$run.err"
  fi
  check "run $run correct and timed" "is_true $r \"r['correct'] and bool((r['timing'] or {}).get('score'))\""
  check "run $run's result says the task was sandboxed" "is_true $r \"r['sandbox']['task']['enforced']\""
done
check "the reference timing was measured, then read back" "is_true $work/eval2.json \"((r['timing'] or {}).get('reference') or {}).get('cached') is True\""
check "the compile baseline was measured, then read back" "is_true $work/eval2.json \"(((r['timing'] or {}).get('compile') or {}).get('median_ms') or 0) > 0 and ((r['timing'] or {}).get('compile') or {}).get('cached') is True\""
check "the peaks were measured (by the server)" "is_true $work/eval2.json \"(((r['speed_of_light'] or {}).get('peaks') or {}).get('dram_bytes_per_s') or 0) > 0\""
check "the launch path was drawn for both timing processes" "is_true $work/eval1.json \"all(p in ((((r['timing'] or {}).get('environment') or {}).get('launch_path') or {}).get('processes') or {}) for p in ('kernel', 'reference'))\""

echo "== 3. a hostile task on the GPU"
mkdir -p "$work/home" "$work/cwd"
marker=kforge-hostile-gpu-$$
sed -e "s|@NAMES@|OPENAI_API_KEY,KFORGE_PLANTED_SECRET|" -e "s|@TARGETS@|$work/home,$work/cwd,/tmp,$work|" \
    -e "s|@MARKER@|$marker|" tests/fixtures/tasks/hostile_task.py > "$work/hostile.py"
secret=sk-test-secret-gpu-$$-0123456789
planted=kforge-planted-gpu-$$
root=$PWD
(cd "$work/cwd" && HOME=$work/home OPENAI_API_KEY=$secret KFORGE_PLANTED_SECRET=$planted \
  timeout 300 "$root/$new" eval "$work/hostile.py" "$root/tests/fixtures/kernels/relu_ok.py" --device 0 --json \
  > "$work/hostile.json" 2> "$work/hostile.err")
grep -o "TASK-PROBE ran[^\\]*" "$work/hostile.json" | sort -u
check "the hostile task ran" "grep -q 'TASK-PROBE ran during the module body' $work/hostile.json"
check "no secret anywhere" "! grep -r -q -e $secret -e $planted $work/hostile.json $work/hostile.err $work/cache $work/home $work/cwd"
check "no marker on the host" "! ls $work/home/$marker $work/cwd/$marker /tmp/$marker $work/$marker 2>/dev/null | grep -q ."
echo "  hostile: correct=$(field "$work/hostile.json" "r['correct']") $(field "$work/hostile.json" "r['summary'][:200]")"

echo "== 4. evaluation wall time (this build$( [ -n "$old" ] && echo ", then $old"))"
for bin in "$new" $old; do
  echo "-- $bin"
  timeout 300 "$bin" bench eval-overhead examples/tasks/relu.py examples/kernels/relu_triton.py --runs 3 --device 0 \
    --executor fork 2>&1 | tail -4
done
echo "work dir: $work; $((SECONDS - started)) s"
exit $fail
