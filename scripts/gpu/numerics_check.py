#!/usr/bin/env python3
"""Issue 35 on a GPU: the oracle rule's margins, the speed of light, the defaults baseline.

Run from the repository root on a machine with one H200 (no network needed):

    $KFORGE_PYTHON scripts/gpu/numerics_check.py KB_DIR [--kforge target/release/kforge] [--device 0]
        [--only NAME,...] [--out DIR]

KB_DIR holds KernelBench task files: a checkout's root (level1/, level2/ under it) or a flat
copy; the tasks used are found by file name anywhere under it (8_Matmul_with_irregular_shapes_,
89_cumsum, 12_Gemm_Multiply_LeakyReLU, 1_Conv2D_ReLU_BiasAdd); a check whose task is missing
is skipped. Each check is one `kforge eval TASK KERNEL --json` (policy `strict`, default
tolerance rule `oracle`, no torch.compile baseline) on the repository's fixtures and on the
kernels in scripts/gpu/kernels/. Per check it prints the expected and the actual verdict,
each output's error ratio against its limit (the kernel's error as a multiple of the error
honest float32 arithmetic makes, measured against a float64 oracle) and what it was compared
with, the oracle's time, the score, the speed of light (bound, the math counted, the
kernel's percentage, the flag), and the score against the reference under PyTorch's default
settings where measured. It ends with a line per check: PASS when the verdict is the
expected one and, for the speed of light, no percentage above 100 is shown without
`faster_than_light`. About 5-10 minutes (large tasks: 89_cumsum holds 4 GiB per tensor).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

FIXTURES = "tests/fixtures"
KERNELS = "scripts/gpu/kernels"

# (name, task, kernel, expected category, what it shows)
CHECKS = [
    ("gemm_ieee", "fixture:tasks/gemm_leaky_relu.py", "fixture:kernels/gemm_leaky_relu_ieee.py", "correct",
     "a float32 GEMM with input_precision=ieee"),
    ("gemm_tf32x3", "fixture:tasks/gemm_leaky_relu.py", "kernel:gemm_leaky_relu_tf32x3.py", "correct",
     "the same GEMM in 3xTF32: float32-accurate"),
    ("gemm_tf32", "fixture:tasks/gemm_leaky_relu.py", "fixture:kernels/gemm_leaky_relu_tf32.py", "mismatch",
     "the same GEMM in TF32: refused by a wide margin"),
    ("row_sum_sequential", "fixture:tasks/row_sum.py", "fixture:kernels/row_sum_sequential_ok.py", "correct",
     "a sequential float32 row sum"),
    ("row_sum_fp16_acc", "fixture:tasks/row_sum.py", "fixture:kernels/row_sum_float16_accumulator.py", "mismatch",
     "the same with a float16 accumulator"),
    ("kb8_tf32x3", "kb:8_Matmul_with_irregular_shapes_.py", "kernel:matmul_tf32x3.py", "correct",
     "issue 35: a 3xTF32 GEMM with K = 2949 was refused (8.5e-4)"),
    ("kb8_tf32", "kb:8_Matmul_with_irregular_shapes_.py", "tf32:matmul_tf32x3.py", "mismatch",
     "the same GEMM in plain TF32"),
    ("kb89_cumsum", "kb:89_cumsum.py", "kernel:cumsum_blocked.py", "correct",
     "issue 35: a blocked tl.cumsum with a carried total over rows of 32768 was refused (2.0e-3)"),
    ("kb12_tf32x3", "kb:12_Gemm_Multiply_LeakyReLU.py", "kernel:gemm_leaky_relu_tf32x3.py", "correct",
     "issue 35: 3xTF32 GEMMs showed 128-145% of the speed of light unflagged"),
    ("kb1_conv_hybrid", "kb:1_Conv2D_ReLU_BiasAdd.py", "kernel:conv2d_relu_biasadd_hybrid.py", "correct",
     "issue 35: under strict the score against PyTorch's defaults (cuDNN TF32 on) beside the headline"),
]


def say(text=""):
    print(text, flush=True)


def find_kb(root, name):
    for directory, _, files in os.walk(root):
        if name in files:
            return os.path.join(directory, name)
    return None


def resolve(spec, kb_dir, work):
    kind, name = spec.split(":", 1)
    if kind == "fixture":
        return os.path.join(FIXTURES, name)
    if kind == "kernel":
        return os.path.join(KERNELS, name)
    if kind == "tf32":
        # The 3xTF32 kernel with its precision constant set to plain TF32.
        with open(os.path.join(KERNELS, name)) as f:
            source = f.read().replace('PRECISION = "tf32x3"', 'PRECISION = "tf32"')
        path = os.path.join(work, name.replace(".py", "_tf32.py"))
        with open(path, "w") as f:
            f.write(source)
        return path
    if kind == "kb":
        return find_kb(kb_dir, name) if kb_dir else None
    raise ValueError(spec)


def fmt(value, spec="%.4g"):
    return spec % value if isinstance(value, (int, float)) else "-"


def describe(result, expected):
    """Lines about one result, and whether it is as expected."""
    lines = []
    category = result.get("category") or ("correct" if result.get("correct") else "?")
    ok = category == expected
    lines.append("verdict %s (expected %s)%s" % (category, expected,
                                                 "" if result.get("correct") else ": " + result.get("summary", "")[:400]))
    tolerance = result.get("tolerance") or {}
    for path, entry in (tolerance.get("outputs") or {}).items():
        if entry.get("rule") == "oracle":
            lines.append("%s: error ratio %s (limit %s), honest RMS error %s, largest allowed %s; against %s" % (
                path, fmt(entry.get("error_ratio"), "%.3g"), fmt(entry.get("limit"), "%g"),
                fmt(entry.get("honest_rms"), "%.3g"), fmt(entry.get("max_allowed"), "%.3g"), entry.get("oracle")))
        else:
            lines.append("%s: rule %s atol %s rtol %s%s" % (path, entry.get("rule"), entry.get("atol"),
                                                          entry.get("rtol"),
                                                          " (fallback: %s)" % entry["fallback"]
                                                          if entry.get("fallback") else ""))
    for trial in result.get("trials") or []:
        worst = [o for o in trial.get("outputs") or [] if o.get("error_ratio") is not None]
        if worst:
            lines.append("  trial %s %s: %s" % (trial.get("kind"), trial.get("index"), ", ".join(
                "%s %.3gx (%s)" % (o["output"], o["error_ratio"], "float64" if o.get("oracle") == "float64 oracle"
                                  else "reused scale") for o in worst)))
    oracle = tolerance.get("oracle") or {}
    if oracle:
        lines.append("oracle: %s s%s%s" % (fmt(oracle.get("seconds"), "%.2f"),
                                           "; twin: %s" % oracle["twin_error"] if oracle.get("twin_error") else "",
                                           "; no oracle: %s" % oracle["reason"] if oracle.get("reason") else ""))
    phases = result.get("phases_s") or {}
    lines.append("phases: correctness %s s, timing %s s, defaults baseline %s s" % (
        fmt(phases.get("correctness"), "%.1f"), fmt(phases.get("timing"), "%.1f"),
        fmt(phases.get("defaults_baseline"), "%.1f")))
    timing = result.get("timing") or {}
    if timing.get("meaningful"):
        lines.append("score %s [%s-%s]: kernel %s ms, reference %s ms" % (
            fmt(timing.get("score"), "%.3f"), fmt(timing.get("score_low"), "%.3f"),
            fmt(timing.get("score_high"), "%.3f"), fmt((timing.get("kernel") or {}).get("median_ms")),
            fmt((timing.get("reference") or {}).get("median_ms"))))
        defaults = timing.get("defaults")
        if defaults:
            if defaults.get("error"):
                lines.append("vs PyTorch defaults: none (%s)" % defaults["error"])
            else:
                lines.append("vs PyTorch defaults %s [%s-%s]: the reference runs %s ms there, %sx as fast (%s)" % (
                    fmt(timing.get("score_vs_defaults"), "%.3f"), fmt(timing.get("score_vs_defaults_low"), "%.3f"),
                    fmt(timing.get("score_vs_defaults_high"), "%.3f"), fmt(defaults.get("median_ms")),
                    fmt(defaults.get("speedup_over_reference"), "%.2f"), defaults.get("differs")))
    sol = result.get("speed_of_light") or {}
    flags = result.get("flags") or []
    if sol.get("bound_ms"):
        pct = sol.get("kernel_pct")
        ftl = "faster_than_light" in flags
        if isinstance(pct, (int, float)) and pct > 100 and not ftl:
            ok = False
            lines.append("SPEED OF LIGHT ABOVE 100% UNFLAGGED")
        lines.append("speed of light %s ms (%s; gemm %s ms, elementwise %s ms, memory %s ms; math %s): reference "
                     "%s%%, kernel %s%%%s" % (
                         fmt(sol.get("bound_ms")), sol.get("limit"), fmt(sol.get("gemm_ms")),
                         fmt(sol.get("elementwise_ms")), fmt(sol.get("memory_ms")), sol.get("math"),
                         fmt(sol.get("reference_pct"), "%.0f"), fmt(pct, "%.0f"), " FLAGGED" if ftl else ""))
    elif sol:
        lines.append("speed of light: %s" % (sol.get("reason") or "no bound"))
    if flags:
        lines.append("flags: %s" % ", ".join(flags))
    return lines, ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kb_dir", nargs="?", default=None)
    parser.add_argument("--kforge", default="target/release/kforge")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--only", default=None, help="comma-separated check names")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if not os.path.exists(args.kforge):
        say("%s not found: build it with `cargo build --release`" % args.kforge)
        return 2
    work = args.out or tempfile.mkdtemp(prefix="numerics-check-")
    os.makedirs(work, exist_ok=True)
    config = os.path.join(work, "eval.toml")
    with open(config, "w") as f:
        f.write("[eval]\ncompile_baseline = false\n")
    wanted = set(args.only.split(",")) if args.only else None
    summary = []
    began = time.time()
    for name, task_spec, kernel_spec, expected, what in CHECKS:
        if wanted and name not in wanted:
            continue
        say("\n== %s: %s" % (name, what))
        try:
            task, kernel = resolve(task_spec, args.kb_dir, work), resolve(kernel_spec, args.kb_dir, work)
        except Exception as e:  # noqa: BLE001 -- one check's failure does not end the script
            say("  skipped: %s" % e)
            summary.append((name, "SKIP"))
            continue
        if not task or not os.path.exists(task):
            say("  skipped: task %s not found under %s" % (task_spec, args.kb_dir))
            summary.append((name, "SKIP"))
            continue
        started = time.time()
        try:
            proc = subprocess.run([args.kforge, "eval", task, kernel, "--json", "--device", str(args.device),
                                   "--config", config], capture_output=True, text=True, timeout=900)
            result = json.loads(proc.stdout)
        except subprocess.TimeoutExpired:
            say("  timed out after 900 s")
            summary.append((name, "TIMEOUT"))
            continue
        except ValueError:
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
            say("  no result (exit %d): %s" % (proc.returncode, " | ".join(tail)))
            summary.append((name, "ERROR"))
            continue
        with open(os.path.join(work, name + ".json"), "w") as f:
            json.dump(result, f, indent=1)
        lines, ok = describe(result, expected)
        for line in lines:
            say("  " + line)
        say("  (%.0f s)" % (time.time() - started))
        summary.append((name, "PASS" if ok else "FAIL"))
    say("\n== summary (%.0f s; results in %s)" % (time.time() - began, work))
    for name, outcome in summary:
        say("  %-20s %s" % (name, outcome))
    return 0 if all(o in ("PASS", "SKIP") for _, o in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
