#!/usr/bin/env bash
# Issue 20 ("Evaluator trust, round 2") on a GPU, in one run (docs/benchmarks.md, "Evaluator
# trust, round 2"): the fixture suite, the escapes with live host targets, and the
# evaluation overhead of this build against an earlier one on the same machine.
#
#   benches/issue20_gpu.sh NEW_KFORGE OLD_KFORGE ESCAPES_TEST_BINARY OUT_DIR
#
# ESCAPES_TEST_BINARY is `cargo test --release --test eval_escapes --no-run`'s executable; it
# finds its fixtures where it was built (CARGO_MANIFEST_DIR), so the checkout must be there.
set -uo pipefail
new=$1; old=$2; escapes=$3; out=$4
mkdir -p "$out"
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3} KFORGE_CACHE_DIR=${KFORGE_CACHE_DIR:-/tmp/kc}
"$new" --version
"$new" doctor 2>&1 | grep -i -E "sandbox|torch|triton|device" | head -8

echo "== fixtures (new build)"
"$new" bench fixtures tests/fixtures/cases.toml --device 0 2>&1 | tee "$out/fixtures.txt" | tail -80

echo "== escapes on cuda:0"
KFORGE_TEST_DEVICE=cuda:0 "$escapes" --test-threads 1 2>&1 | tee "$out/escapes.txt" | grep -E "^test |test result|panicked"

echo "== eval overhead, ReLU example (old build, then new)"
for bin in "$old" "$new"; do
  "$bin" bench eval-overhead examples/tasks/relu.py examples/kernels/relu_triton.py --runs 3 --device 0 2>&1 | tail -4
done
