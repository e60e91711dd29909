#!/usr/bin/env bash
# Issue 37: the judge became a package of phases (src/eval/harness/kforge_harness/judge/). What
# only a GPU shows: the timed paths (the reference's timing process, the compile and defaults
# baselines in their own processes, the kernel's timing, the re-check after timing, the speed
# of light) give the same verdicts, flags and phases as the Evaluation class did.
#
#   scripts/gpu/judge_phases.sh [OLD_KFORGE]
#
# OLD_KFORGE: a release binary built from the commit before the change (cfa8a88), to compare
# with side by side; without it only the new binary's results are printed. From the
# repository root, with target/release/kforge built and torch + triton at $KFORGE_PYTHON.
# For each case it prints: status, category, flags, whether timing has a score with its
# interval and the compile/defaults baselines, and the phases_s names; then the fixture
# manifest's verdicts (`kforge bench fixtures`). Exit 1 where a verdict differs from the old
# binary's (figures differ run to run; verdicts, flags other than noisy_timing, and phase
# names must not).
set -uo pipefail
new=target/release/kforge
old=${1:-}
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3}
work=$(mktemp -d /tmp/kforge-judge-phases.XXXXXX)
fail=0
cases="relu:relu_ok softmax:softmax_ok relu:relu_wrong row_sum:row_sum_sequential_ok gemm_leaky_relu:gemm_leaky_relu_ieee
gemm_leaky_relu:gemm_leaky_relu_tf32 conv_hardtanh:conv_hardtanh_hybrid_ok relu:hack_window_batching
relu:relu_torch_ops huge_inputs:relu_ok"

summary() {
  "$KFORGE_PYTHON" - "$1" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:  # noqa: BLE001
    print("unreadable: %s" % e); sys.exit(0)
t = r.get("timing") or {}
flags = sorted(f for f in r.get("flags") or [] if f != "noisy_timing")
print("status=%s category=%s flags=%s score=%s interval=%s compile=%s defaults=%s sol=%s phases=%s" % (
    r.get("status"), r.get("category"), ",".join(flags), t.get("score") is not None,
    t.get("score_low") is not None, bool(t.get("compile")), bool(t.get("defaults")),
    bool((r.get("speed_of_light") or {}).get("bound_ms")), ",".join(sorted((r.get("phases_s") or {})))))
EOF
}

for pair in $cases; do
  t=${pair%%:*}; k=${pair##*:}
  for which in new old; do
    bin=$new; [ $which = old ] && bin=$old
    [ -z "$bin" ] && continue
    KFORGE_CACHE_DIR=$work/cache-$which timeout 600 "$bin" eval tests/fixtures/tasks/$t.py \
      tests/fixtures/kernels/$k.py --json > "$work/$which-$t-$k.json" 2> "$work/$which-$t-$k.err"
    summary "$work/$which-$t-$k.json" > "$work/$which-$t-$k.txt"
    echo "$which $t/$k: $(cat "$work/$which-$t-$k.txt")"
  done
  if [ -n "$old" ]; then
    a=$(sed 's/ score=.*phases=/ phases=/' "$work/new-$t-$k.txt"); b=$(sed 's/ score=.*phases=/ phases=/' "$work/old-$t-$k.txt")
    if [ "$a" = "$b" ]; then echo "SAME $t/$k"; else echo "DIFFERS $t/$k"; fail=1; fi
  fi
done

echo "== the fixture manifest on the GPU (new binary)"
KFORGE_CACHE_DIR=$work/cache-new timeout 3000 "$new" bench fixtures tests/fixtures/cases.toml 2>&1 | tail -40
echo "(results under $work)"
exit $fail
