#!/usr/bin/env bash
# The run-time guard (guard.py) on a GPU's own code paths: every honest fixture of
# tests/fixtures/cases.toml (expect = "correct", the static checks on) and the examples are
# evaluated on cuda with the diagnostic switch KFORGE_DIAG_GUARD_TRACE=1, under which the guard
# refuses nothing and writes each event it would refuse (once per library call site) into the
# evaluation's log. Prints, per kernel, its verdict and the traced sites, then every distinct
# site: the call sites a GPU adds to guard.ALLOWED (Triton's compiler and launcher, CUDA
# graphs, cuDNN...), which the Triton interpreter on a CPU never reaches.
#
#   scripts/gpu/guard_trace.sh            (from the repository root; target/release/kforge)
set -uo pipefail
kf=target/release/kforge
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3}
work=$(mktemp -d /tmp/kforge-guard-trace.XXXXXX)
"$KFORGE_PYTHON" - > "$work/cases.txt" <<'PY'
import tomllib
cases = tomllib.load(open("tests/fixtures/cases.toml", "rb"))["case"]
for c in cases:
    if c.get("expect") == "correct" and c.get("static_checks", True) and not c.get("config"):
        print(c["name"], c["task"], c["kernel"])
PY
echo "examples examples/tasks/relu.py examples/kernels/relu_triton.py" >> "$work/cases.txt"
while read -r name task kernel; do
  case $task in examples/*) t=$task; k=$kernel;; *) t=tests/fixtures/$task; k=tests/fixtures/$kernel;; esac
  KFORGE_DIAG_GUARD_TRACE=1 timeout 120 "$kf" eval "$t" "$k" --device 0 --no-timing --json > "$work/$name.json" 2> "$work/$name.err"
  "$KFORGE_PYTHON" - "$work/$name.json" "$name" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("%s: no result (%s)" % (sys.argv[2], e)); sys.exit()
traced = sorted({l.split("kforge guard trace: ", 1)[1] for l in (r.get("log") or "").splitlines() if "kforge guard trace: " in l})
print("%s: correct=%s category=%s %s" % (sys.argv[2], r.get("correct"), r.get("category"), (r.get("summary") or "")[:160]))
for t in traced:
    print("  TRACE " + t)
PY
done < "$work/cases.txt" | tee "$work/trace.txt"
echo "== distinct sites"
grep "  TRACE " "$work/trace.txt" | sed -e 's/  TRACE //' -e 's/ line=.*//' | sort | uniq -c | sort -rn
echo "results in $work"
