"""`kforge mcp` driven by the official MCP Python SDK's client, as an agent built on it
would: connect (the SDK probes `server/discover`, then falls back to the initialize
handshake), list the tools, check a task and evaluate kernels on the CPU with progress,
read a session, cancel an evaluation and go on. The SDK validates every structured result
against the tool's outputSchema. Run by tests/mcp_sdk.rs; exits non-zero on any failure.

Environment: KFORGE_BIN (the binary), KFORGE_FIXTURES (tests/fixtures), and the
KFORGE_CACHE_DIR / KFORGE_CONFIG_DIR / KFORGE_PYTHON the server is to run with.
"""

import json
import os
import sys
import warnings

import anyio
from mcp import Client, MCPDeprecationWarning, StdioServerParameters

# `ping` is deprecated from 2026-07-28 on; this connection speaks 2025-11-25, where it is not.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

FIXTURES = os.environ["KFORGE_FIXTURES"]
SERVER_ENV = {k: os.environ[k] for k in ("KFORGE_CACHE_DIR", "KFORGE_CONFIG_DIR", "KFORGE_PYTHON")}


def fixture(*parts: str) -> str:
    return os.path.join(FIXTURES, *parts)


def schema_combinators(schema, path=""):
    """Every oneOf/anyOf/allOf in a schema."""
    found = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("oneOf", "anyOf", "allOf"):
                found.append(path + "/" + key)
            found += schema_combinators(value, path + "/" + key)
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found += schema_combinators(value, "%s/%d" % (path, i))
    return found


def text_of(result) -> str:
    assert result.content and result.content[0].type == "text", result
    return result.content[0].text


async def check_tools(client) -> None:
    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    assert names == ["eval", "task_check", "session_summary", "candidate_code"], names
    for tool in listed.tools:
        assert tool.title, tool
        assert tool.output_schema and tool.output_schema["type"] == "object", tool
        assert tool.input_schema["type"] == "object", tool
        assert not schema_combinators(tool.input_schema), (tool.name, schema_combinators(tool.input_schema))
        hints = tool.annotations
        assert hints is not None, tool
        for hint in ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
            assert isinstance(getattr(hints, hint), bool), (tool.name, hint)
        assert hints.read_only_hint == (tool.name in ("session_summary", "candidate_code")), tool


async def evaluate_with_progress(client) -> dict:
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    result = await client.call_tool(
        "eval",
        {"task": fixture("tasks", "relu.py"), "kernel": fixture("kernels", "relu_ok.py"), "device": "cpu"},
        progress_callback=on_progress,
    )
    assert not result.is_error, result
    assert "CORRECT  5/5 trials" in text_of(result), text_of(result)
    verdict = result.structured_content
    assert verdict["correct"] is True and verdict["status"] == "correct", verdict
    assert verdict["timing"] is None, "no timing on the CPU"
    assert seen, "no progress"
    progress = [p for p, _, _ in seen]
    assert all(b > a for a, b in zip(progress, progress[1:])), seen
    assert {t for _, t, _ in seen} == {7}, seen  # set-up, 5 trials, the signed-input trial
    # The last step reached is the signed-input trial's (6), or a part of it (its oracle,
    # the reading of the compiled kernels after it): never the total, never short of it.
    assert 6 <= progress[-1] < 7, seen
    assert any(m == "signed-input trial" for _, _, m in seen), seen
    assert all(m for _, _, m in seen), seen
    return {"progress": len(seen), "phases": [m for _, _, m in seen]}


async def failing_kernel(client) -> None:
    with open(fixture("kernels", "relu_identity.py")) as f:
        source = f.read()
    result = await client.call_tool(
        "eval", {"task": fixture("tasks", "relu.py"), "kernel_source": source, "device": "cpu", "trials": 2}
    )
    assert not result.is_error, result
    assert result.structured_content["correct"] is False, result.structured_content
    assert result.structured_content["category"] == "mismatch", result.structured_content


async def session_tools(client) -> None:
    session = fixture("sessions", "softmax")
    summary = await client.call_tool("session_summary", {"session": session})
    assert not summary.is_error, summary
    best = summary.structured_content["best"]["id"]
    assert "best: #%d " % best in text_of(summary), text_of(summary)
    assert "n/a" not in text_of(summary), text_of(summary)
    code = await client.call_tool("candidate_code", {"session": session, "candidate": best})
    assert not code.is_error, code
    with open(os.path.join(session, summary.structured_content["best"]["file"])) as f:
        assert code.structured_content["code"] == f.read()
    # A tool that cannot do its work: a result the model reads, not a protocol error.
    missing = await client.call_tool("candidate_code", {"session": session, "candidate": 99})
    assert missing.is_error and "no candidate #99" in text_of(missing), missing


async def cancel_then_go_on(client) -> None:
    started = anyio.Event()

    async def on_progress(progress, total, message):
        if message and message.startswith("correctness trial"):
            started.set()

    async def long_eval():
        await client.call_tool(
            "eval",
            {"task": fixture("tasks", "relu.py"), "kernel": fixture("kernels", "relu_ok.py"), "device": "cpu",
             "trials": 500},
            progress_callback=on_progress,
        )
        raise AssertionError("the cancelled evaluation finished")

    async with anyio.create_task_group() as group:
        group.start_soon(long_eval)
        with anyio.fail_after(300):
            await started.wait()
        # Cancelling the caller sends notifications/cancelled for the request.
        group.cancel_scope.cancel()
    await client.send_ping()
    # The evaluator is not held by the cancelled evaluation.
    result = await client.call_tool(
        "eval",
        {"task": fixture("tasks", "relu.py"), "kernel": fixture("kernels", "relu_ok.py"), "device": "cpu",
         "trials": 1},
    )
    assert result.structured_content["correct"] is True, result


async def main() -> None:
    server = StdioServerParameters(command=os.environ["KFORGE_BIN"], args=["mcp"], env=SERVER_ENV)
    report = {}
    with anyio.fail_after(900):
        async with Client(server) as client:
            report["protocol_version"] = client.protocol_version
            assert client.protocol_version == "2025-11-25", client.protocol_version
            assert client.server_info.name == "kforge", client.server_info
            await check_tools(client)
            check = await client.call_tool("task_check", {"task": fixture("tasks", "relu.py"), "device": "cpu"})
            assert not check.is_error, check
            assert check.structured_content["status"] == "ready", check.structured_content
            report["task_check"] = text_of(check)
            report["eval"] = await evaluate_with_progress(client)
            await failing_kernel(client)
            await session_tools(client)
            await cancel_then_go_on(client)
    print("MCP-SDK-REPORT " + json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
    sys.exit(0)
