#!/usr/bin/env python3
"""`kforge mcp` on a GPU: an `eval` with a progress token, its progress printed.

On the CPU the evaluation's steps are the set-up, the trials and the signed-input trial;
on a GPU with timing the kernel's timing and the re-check after it come too. This shows
that part (which no CPU test can): every notification carries `total` (trials + 4 with the
default re-check), `progress` rises with every notification and stays below `total`, and
the re-check (the last step, `total - 1`) is reached. It also prints the verdict's score and
checks that the structured result has a timing with a score.

Run from the repository root on a machine with a GPU, after `cargo build --release`:
    python3 scripts/gpu/mcp_progress.py
Uses plain JSON-RPC over the server's stdin/stdout (no SDK, no network). The server finds
its Python as kforge does (`KFORGE_PYTHON`, else the managed environment).
"""

import json
import os
import subprocess
import sys

BIN = os.environ.get("KFORGE_BIN", "target/release/kforge")
TRIALS = 5


def main() -> int:
    server = subprocess.Popen([BIN, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(message):
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()

    def reply(request_id, notes):
        while True:
            line = server.stdout.readline()
            if not line:
                raise SystemExit("the server closed stdout")
            message = json.loads(line)
            if message.get("id") == request_id:
                return message
            notes.append(message)

    notes = []
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "gpu", "version": "0"}}})
    init = reply(1, notes)
    print("protocol", init["result"]["protocolVersion"])
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "eval",
        "arguments": {"task": "examples/tasks/relu.py", "kernel": "examples/kernels/relu_triton.py",
                      "device": "cuda:0", "trials": TRIALS},
        "_meta": {"progressToken": "gpu"},
    }})
    result = reply(2, notes)["result"]
    progress = [n["params"] for n in notes if n.get("method") == "notifications/progress"]
    for p in progress:
        print("progress %8.3f / %s  %s" % (p["progress"], p["total"], p["message"]))
    totals = {p["total"] for p in progress}
    values = [p["progress"] for p in progress]
    ok = True
    expected_total = TRIALS + 4
    if totals != {expected_total}:
        print("FAIL: totals %s, expected {%d}" % (totals, expected_total))
        ok = False
    if any(b <= a for a, b in zip(values, values[1:])) or max(values) >= expected_total:
        print("FAIL: progress does not rise below the total")
        ok = False
    if values and values[-1] < expected_total - 1:
        print("FAIL: the re-check (step %d) was not reached: last %s" % (expected_total - 1, values[-1]))
        ok = False
    structured = result["structuredContent"]
    timing = structured.get("timing") or {}
    print("verdict:", result["content"][0]["text"].splitlines()[0])
    print("score:", timing.get("score"), "interval:", timing.get("score_low"), timing.get("score_high"))
    if not structured.get("correct") or timing.get("score") is None:
        print("FAIL: no timed, correct result")
        ok = False
    server.stdin.close()
    server.wait(timeout=60)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
