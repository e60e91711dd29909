#!/usr/bin/env bash
# Issue 34, items 2, 8, 9, 10 and issue 36, item 7 on a GPU. What only a GPU shows:
#   1. the run-time guard (guard.py) on the GPU's own paths: Triton compiling with ptxas and the
#      system compiler, its CUDA driver (ctypes), CUDA IPC, timed windows, torch.library's
#      triton_op: the whole fixture manifest on cuda (`kforge bench fixtures`), every verdict as
#      cases.toml expects (no honest kernel refused by the guard: its refusals say "run-time guard");
#   2. the precision record read from the launched kernels' own TTIR (and PTX) on the GPU:
#      `reading` is "compiled", and the kinds match the fixtures (TF32 by default and when chosen
#      at run time, TF32x3, IEEE, float16 by .to() and by alias, none for the dead fp16 branch);
#   3. windows of several forwards: an honest tiny kernel gains what the reference gains from them
#      (windowing.gain ~1, not bounded), hack_window_batching.py (one launch for a whole window,
#      run with the static filter and the guard off) is flagged `window_batching` and its score
#      bounded; prints forwards per window, single-forward and per-forward figures, gain, scores;
#   4. the wall time of an evaluation with the guard and the compiled reading (phases_s), for
#      docs/benchmarks.md.
#
#   scripts/gpu/guard_precision_windows.sh
#
# From the repository root, with target/release/kforge built and torch + triton at
# $KFORGE_PYTHON. Prints PASS/FAIL per check and the figures.
set -uo pipefail
kf=target/release/kforge
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3}
work=$(mktemp -d /tmp/kforge-guard-gpu.XXXXXX)
fail=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fail=1; fi; }
field() { "$KFORGE_PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
printf '[eval]\nstatic_checks = false\n' > "$work/unfiltered.toml"

if [ "${SKIP_MANIFEST:-0}" != 1 ]; then  # the whole manifest takes ~15 minutes on an H200
echo "== 1. the fixture manifest on cuda (guard on wherever static_checks is)"
"$kf" bench fixtures tests/fixtures/cases.toml --device 0 > "$work/fixtures.txt" 2>&1
tail -n 120 "$work/fixtures.txt"
check "every fixture verdict as expected on cuda" "grep -q -E '^[0-9]+ passed, 0 failed' $work/fixtures.txt"
check "no refusal by the run-time guard in the manifest" "! grep -q 'run-time guard' $work/fixtures.txt"
fi

echo "== 2. precision read from the launched kernels' code"
expect_math() {  # name task kernel python-expression-over-kinds
  "$kf" eval "tests/fixtures/tasks/$2" "tests/fixtures/kernels/$3" --device 0 --no-timing --json > "$work/$1.json" 2> "$work/$1.err"
  echo "$1: correct=$(field "$work/$1.json" "r['correct']") reading=$(field "$work/$1.json" "(r['precision'] or {}).get('reading')")"
  echo "  kernel_math: $(field "$work/$1.json" "[(f['category'], f['line'], f.get('compiled')) for f in (r['precision'] or {}).get('kernel_math', [])]")"
  echo "  reduced: $(field "$work/$1.json" "(r['precision'] or {}).get('reduced')") summary: $(field "$work/$1.json" "r['summary'][:160]")"
  check "$1 read from the compiled kernel" "[ \"\$(field $work/$1.json \"((r['precision'] or {}).get('reading') or {}).get('read')\")\" = compiled ]"
  check "$1 kinds" "[ \"\$(field $work/$1.json \"(lambda kinds: $4)({f['category'] for f in (r['precision'] or {}).get('kernel_math', [])})\")\" = True ]"
}
expect_math tf32_default gemm_leaky_relu.py gemm_leaky_relu_tf32.py "'tf32_dot' in kinds"
expect_math tf32_runtime gemm_leaky_relu.py gemm_leaky_relu_runtime_precision.py "'tf32_dot' in kinds and 'ieee_dot' not in kinds"
expect_math tf32x3 gemm_leaky_relu.py gemm_leaky_relu_tf32x3.py "kinds == {'tf32x3_dot'}"
expect_math ieee gemm_leaky_relu.py gemm_leaky_relu_ieee.py "kinds == {'ieee_dot'}"
expect_math fp16_to softmax.py softmax_fp16_to.py "'low_precision_cast' in kinds"
expect_math fp16_alias softmax.py softmax_fp16_alias.py "'low_precision_cast' in kinds"
expect_math dead_branch softmax.py softmax_dead_fp16_branch_ok.py "not (kinds & {'low_precision_cast', 'low_precision_accumulator'})"
expect_math triton_op relu.py relu_triton_op_ok.py "True"
check "triton_op correct on the GPU" "[ \"\$(field $work/triton_op.json \"r['correct']\")\" = True ]"

echo "== 3. windows of several forwards"
window() {  # name kernel [config]
  "$kf" eval tests/fixtures/tasks/relu.py "tests/fixtures/kernels/$2" --device 0 --json ${3:+--config $3} > "$work/$1.json" 2> "$work/$1.err"
  echo "$1: correct=$(field "$work/$1.json" "r['correct']") score=$(field "$work/$1.json" "(r['timing'] or {}).get('score')") flags=$(field "$work/$1.json" "r['flags']")"
  echo "  forwards per window: $(field "$work/$1.json" "(r['timing'] or {}).get('forwards_per_window')")"
  echo "  windowing: $(field "$work/$1.json" "((r['timing'] or {}).get('calibration') or {}).get('windowing')")"
  echo "  notes: $(field "$work/$1.json" "[n for n in r['notes'] if 'window' in n]")"
}
window honest relu_ok.py
window batching hack_window_batching.py "$work/unfiltered.toml"
check "the honest kernel is not bounded" "[ \"\$(field $work/honest.json \"'window_batching' not in r['flags']\")\" = True ]"
check "the batching kernel is bounded and flagged" "[ \"\$(field $work/batching.json \"'window_batching' in r['flags'] and ((r['timing'] or {}).get('calibration') or {}).get('windowing', {}).get('bounded')\")\" = True ]"

echo "== 4. wall time with the guard and the compiled reading"
for run in 1 2 3; do
  "$kf" eval tests/fixtures/tasks/gemm_leaky_relu.py tests/fixtures/kernels/gemm_leaky_relu_ieee.py --device 0 --json > "$work/wall$run.json" 2>/dev/null
  echo "run $run: duration_s=$(field "$work/wall$run.json" "round(r['duration_s'], 2)") precision phase: $(field "$work/wall$run.json" "round(r['phases_s'].get('precision', 0), 3)")"
done

echo "results in $work"
exit $fail
