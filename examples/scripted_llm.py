"""A scripted stand-in for an LLM: an OpenAI-compatible chat-completions server (streamed
answers, usage in the last chunk) that answers kforge's prompts for the softmax example
from a fixed script instead of a model. It is how `sessions/` got a session with real GPU
numbers and no LLM key; it is not a model and never sees the network.

    python3 examples/scripted_llm.py --port 8199 &
    # then a provider with preset "vllm", base_url http://127.0.0.1:8199/v1, model scripted-1

The script, by the step the prompt comes from:
  seed 1      a kernel with a typo (tl.maxx): it fails to compile   (marker SCRIPTED-BROKEN)
  repair      the example kernel, examples/kernels/softmax_triton.py
  seed 2      the same kernel with 8 warps
  analysis    worth optimizing, with a plan                         (marker SCRIPTED-PLAN)
  optimize    exp2 instead of exp, 16 warps
  stages      grid_and_parallel: 8 warps; block_tiling: 4 warps; memory_and_tuning: 16
              warps and an evict-first load hint
Standard library only.
"""
import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = open(os.path.join(HERE, "kernels", "softmax_triton.py")).read()
WARPS = "num_warps = 4 if BLOCK <= 2048 else (8 if BLOCK <= 8192 else 16)"


def variant(note, warps=None, exp2=False, evict=False, broken=False):
    code = EXAMPLE
    if warps is not None:
        code = code.replace(WARPS, "num_warps = %d" % warps)
    if exp2:
        # exp(x) = exp2(x * log2(e)): one multiply and the hardware's exp2.
        code = code.replace("num = tl.exp(x)", "num = tl.exp2(x * 1.4426950408889634)")
    if evict:
        code = code.replace('other=-float("inf"))', 'other=-float("inf"), eviction_policy="evict_first")')
    if broken:
        code = code.replace("tl.max(x, axis=0)", "tl.maxx(x, axis=0)")
    return "# %s\n%s" % (note, code)


def fenced(text, lang="python"):
    return "Here is the kernel.\n\n```%s\n%s\n```\n" % (lang, text)


ANALYSIS = {
    "worth_optimizing": "yes",
    "reason": "one pass over each row already; the exponentials and the warps per row are what is left",
    "bottleneck": "DRAM bandwidth and the exp throughput",
    "optimisation method": "exp2 with a scaled argument, more warps per row",
    "modification_plan": "SCRIPTED-PLAN: replace tl.exp by tl.exp2(x * log2(e)) and use 16 warps",
    "expected_speedup": "1.1x",
    "output_requirement": "the full (batch, dim) tensor of row softmaxes",
}


def classify(user):
    if "SCRIPTED-BROKEN" in user:
        return "repair"
    if "SCRIPTED-PLAN" in user:
        return "optimize"
    found = [(user.find(s), s) for s in ("grid_and_parallel", "block_tiling", "memory_and_tuning") if s in user]
    if found:
        return min(found)[1]
    if "worth_optimizing" in user:
        return "analysis"
    return "seed"


class Script:
    def __init__(self):
        self.seeds = 0

    def answer(self, user):
        step = classify(user)
        if step == "seed":
            self.seeds += 1
            if self.seeds == 1:
                return step, fenced(variant("SCRIPTED-BROKEN seed: a typo", broken=True))
            return step, fenced(variant("seed 2: 8 warps per row", warps=8))
        if step == "repair":
            return step, fenced(variant("repair: tl.max, not tl.maxx"))
        if step == "analysis":
            return step, "```json\n%s\n```\n" % json.dumps(ANALYSIS, indent=1)
        if step == "optimize":
            return step, fenced(variant("optimized: exp2, 16 warps", warps=16, exp2=True))
        if step == "grid_and_parallel":
            return step, fenced(variant("stage grid_and_parallel: 8 warps", warps=8, exp2=True))
        if step == "block_tiling":
            return step, fenced(variant("stage block_tiling: 4 warps", warps=4, exp2=True))
        return step, fenced(variant("stage memory_and_tuning: evict-first loads", warps=16, exp2=True, evict=True))


SCRIPT = Script()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("scripted_llm: " + fmt % args + "\n")

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            request = {}
        user = "\n".join(m.get("content") or "" for m in request.get("messages", [])
                         if m.get("role") == "user" and isinstance(m.get("content"), str))
        step, text = SCRIPT.answer(user)
        sys.stderr.write("scripted_llm: %s (%d characters)\n" % (step, len(text)))
        chunks = [text[i:i + 200] for i in range(0, len(text), 200)]
        body = []
        for c in chunks:
            body.append({"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]})
        body.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(text) // 4}})
        payload = "".join("data: %s\n\n" % json.dumps(b) for b in body) + "data: [DONE]\n\n"
        data = payload.encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=8199)
    args = p.parse_args()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
