#!/usr/bin/env bash
# Records the sample session in sessions/: a real `kforge run` of the softmax example on a
# GPU, answered by the scripted stand-in for an LLM (examples/scripted_llm.py), so every
# figure in it was measured and no key was needed.
#
#   sessions/record.sh OUT_DIR [KFORGE_BINARY]
#
# Writes OUT_DIR/<session>/ and prints its path. Needs a CUDA GPU (on the CPU it runs too,
# without timing) and the Python environment kforge uses (KFORGE_PYTHON or the managed one).
set -euo pipefail
out=${1:?usage: sessions/record.sh OUT_DIR [KFORGE_BINARY]}
kforge=${2:-kforge}
here=$(cd "$(dirname "$0")/.." && pwd)
port=${SCRIPTED_LLM_PORT:-8199}
config=$(mktemp --suffix=.toml)
cat > "$config" <<TOML
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
python3 "$here/examples/scripted_llm.py" --port "$port" 2> "$out.llm.log" &
llm=$!
trap 'kill $llm 2>/dev/null; rm -f "$config"' EXIT
sleep 1
"$kforge" run "$here/examples/tasks/softmax.py" --headless --mode auto --seeds 2 \
    --config "$config" --sessions-dir "$out"
ls -d "$out"/*/
