#!/usr/bin/env bash
# Issue 12 (docs/benchmarks.md, "The KernelBench export checked by KernelBench's own
# evaluator"): two softmax tasks laid out as KernelBench level 1 problems 1 and 2 run as a
# batch with the scripted stand-in LLM (examples/scripted_llm.py), then KernelBench's
# `eval_kernel_against_ref` evaluates the exported kernels against the same task sources.
#
#   benches/batch_kernelbench_recheck.sh KFORGE_BINARY KERNELBENCH_CHECKOUT WORK_DIR
#
# KERNELBENCH_CHECKOUT is a clone of ScalingIntelligence/KernelBench (never committed here).
# Needs a CUDA GPU and a Python with torch and triton (KFORGE_PYTHON, else python3).
set -euo pipefail
kforge=$1; kb=$2; work=$3
here=$(cd "$(dirname "$0")/.." && pwd)
python=${KFORGE_PYTHON:-python3}
port=${SCRIPTED_LLM_PORT:-8199}
level=$work/tasks/KernelBench/level1
mkdir -p "$level"
sed "s/^dim = 32768/dim = 4096/; s/^batch_size = 512/batch_size = 1024/" \
    "$here/examples/tasks/softmax.py" > "$level/1_Softmax_1024x4096.py"
sed "s/^dim = 32768/dim = 16384/; s/^batch_size = 512/batch_size = 1024/" \
    "$here/examples/tasks/softmax.py" > "$level/2_Softmax_1024x16384.py"
cat > "$work/config.toml" <<TOML
[llm]
default = "scripted"
[llm.providers.scripted]
preset = "vllm"
base_url = "http://127.0.0.1:$port/v1"
model = "scripted-1"
[llm.prices."scripted-1"]
input_per_mtok = 0.0
output_per_mtok = 0.0
TOML
# The stand-in LLM must not outlive the script (it would hold the caller's output open).
python3 "$here/examples/scripted_llm.py" --port "$port" > "$work/llm.log" 2>&1 &
llm=$!
trap 'kill $llm 2>/dev/null' EXIT
sleep 1
"$kforge" batch "$work/tasks" --level 1 --out "$work/batch" --config "$work/config.toml" \
    --seeds 1 --stages "" --jobs 2
kill $llm
export=$work/batch/kernelbench/level_1
KB_SRC=$kb/src EXPORT=$export LEVEL=$level "$python" - <<'PY'
import importlib, json, os, sys, types
# KernelBench's package pulls in its LLM clients and dataset tooling; only eval.py, timing.py
# and their torch code run here. Missing third-party modules get empty stand-ins.
kb = types.ModuleType("kernelbench"); kb.__path__ = [os.path.join(os.environ["KB_SRC"], "kernelbench")]
sys.modules["kernelbench"] = kb
class Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        class Anything:
            def __init__(self, *a, **k):
                for key, v in k.items():
                    setattr(self, key, v)
            def __call__(self, *a, **k):
                return Anything()
            def __repr__(self):
                return repr(self.__dict__)
        return Anything
for name in ("kernelbench.utils", "kernelbench.timing", "kernelbench.eval"):
    for _ in range(30):
        try:
            importlib.import_module(name)
            break
        except ModuleNotFoundError as e:
            print("stand-in for", e.name)
            sys.modules[e.name] = Stub(e.name)
from kernelbench.eval import eval_kernel_against_ref
export, level = os.environ["EXPORT"], os.environ["LEVEL"]
ours = json.load(open(os.path.join(export, "eval_results.json")))
for p, ref in (("1", "1_Softmax_1024x4096.py"), ("2", "2_Softmax_1024x16384.py")):
    kernel = open(os.path.join(export, "level_1_problem_%s_sample_0_kernel.py" % p)).read()
    r = eval_kernel_against_ref(open(os.path.join(level, ref)).read(), kernel, num_correct_trials=5,
                                num_perf_trials=100, measure_performance=True, backend="triton",
                                build_dir=os.path.join(os.path.dirname(export), "kbbuild"), device=0)
    k = ours[p][0]
    print("problem", p, "kernelbench: compiled", r.compiled, "correct", r.correctness, "runtime", r.runtime,
          "| kforge: compiled", k["compiled"], "correct", k["correctness"], "runtime", k["runtime"],
          "median", k["metadata"]["kforge_kernel_median_ms"], "speedup", k["metadata"]["kforge_speedup"])
PY
