"""The task's side in a sandbox of its own (issue 34, item 1): the cache the server keeps for
judges (cachekeeper.Keeper, and the judge's judgeproc.Remote that asks it over a socket),
and a hostile task run through a real server, whose environment holds secrets, in a task
check and in an evaluation."""

from __future__ import annotations

from pathlib import Path
import json
import os
import socket
import subprocess
import sys
import threading
from typing import Any

import pytest

from kforge_harness import judgeproc, launchpath, sandbox, serverjob
from kforge_harness.cachekeeper import Floor, Keeper

from jobs import JOB

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HARNESS)))
DEVICE = {"name": "NVIDIA H200", "uuid": "GPU-1234"}
INPUTS = [["in[0]", [64, 1024], "torch.float32"]]
FIGURES = {"median_ms": 1.5, "runs": 20}


def keeper(tmp_path: Path, task: str = "task A", **kwargs: Any) -> Keeper:
    return Keeper(str(tmp_path / "baselines"), task, {"torch": "2.x"}, dict(JOB), **kwargs)


# --- the keeper: keys the server computes, from the task's own source -------------------

def test_a_task_reads_back_what_it_kept_and_never_another_tasks_entry(tmp_path: Path) -> None:
    a, b = keeper(tmp_path, "task A"), keeper(tmp_path, "task B")
    key = a.keep_reference_timing(DEVICE, INPUTS, FIGURES)
    assert a.reference_timing(DEVICE, INPUTS) == (key, FIGURES)
    # Task B names the same device and inputs: its key is its own, and A's entry is not its.
    key_b, cached = b.reference_timing(DEVICE, INPUTS)
    assert key_b != key and cached is None
    b.keep_reference_timing(DEVICE, INPUTS, {"median_ms": 1e-9})
    assert a.reference_timing(DEVICE, INPUTS) == (key, FIGURES)
    record = {"mode": "default", "median_ms": 1.0, "error": None}
    a.keep_compile_baseline(DEVICE, INPUTS, "default", record)
    assert (a.compile_baseline(DEVICE, INPUTS, "default")[1] or {})["median_ms"] == 1.0
    assert b.compile_baseline(DEVICE, INPUTS, "default")[1] is None


def test_the_defaults_baseline_is_kept_by_the_server_per_task(tmp_path: Path) -> None:
    """The reference under PyTorch's defaults is cached like the compile baseline: through the
    server, under the task's own key (it read a key the judge no longer has before: on an H200
    every defaults measurement failed with "'Evaluation' object has no attribute 'baseline_key'")."""
    from kforge_harness import defaults

    a, b = keeper(tmp_path, "task A"), keeper(tmp_path, "task B")
    record = defaults.figures("strict", "float32 convolutions", {"median_ms": 9.5}, {"median_ms": 3.9}, (2.3, 2.5))
    key = a.keep_defaults_baseline(DEVICE, INPUTS, record)
    assert a.answer({"ask": "defaults_baseline", "device": DEVICE, "inputs": INPUTS})["cached"]["median_ms"] == 3.9
    assert a.defaults_baseline(DEVICE, INPUTS)[0] == key
    assert b.defaults_baseline(DEVICE, INPUTS)[1] is None
    assert "error" in a.answer({"ask": "keep_defaults_baseline", "device": DEVICE, "inputs": INPUTS, "record": "x"})


def test_the_launch_floor_is_kept_per_task(tmp_path: Path) -> None:
    a, b = keeper(tmp_path, "task A"), keeper(tmp_path, "task B")
    a.keep_floor("H200 GPU-1", "550", [0.01, 0.011])
    assert a.floor_samples("H200 GPU-1", "550") == [0.01, 0.011]
    assert b.floor_samples("H200 GPU-1", "550") == []
    # The judge's floor (launchpath.Floor) through the store.
    floor = Floor(a, "H200 GPU-1", "550")
    assert floor.floor_ms() == 0.011
    floor.add([0.009])
    floor.write()
    assert Floor(a, "H200 GPU-1", "550").samples == [0.01, 0.011, 0.009]


@pytest.mark.parametrize("request_, says", [
    ({"ask": "reference_timing", "device": "../../etc", "inputs": INPUTS}, "device"),
    ({"ask": "reference_timing", "device": {"name": 3}, "inputs": INPUTS}, "name"),
    ({"ask": "reference_timing", "device": DEVICE, "inputs": ["x" * 100000]}, "signature"),
    ({"ask": "keep_reference_timing", "device": DEVICE, "inputs": INPUTS, "record": "figures"}, "record"),
    ({"ask": "keep_reference_timing", "device": DEVICE, "inputs": INPUTS, "record": {"x": "y" * 300000}},
     "record"),
    ({"ask": "compile_baseline", "device": DEVICE, "inputs": INPUTS, "mode": "../x"}, "mode"),
    ({"ask": "keep_floor", "gpu": "g", "driver": "d", "samples": [-1.0]}, "samples"),
    ({"ask": "keep_floor", "gpu": "g", "driver": "d", "samples": [1.0] * 1000}, "samples"),
    # Nothing shared by every task is the judge's to write.
    ({"ask": "keep_peaks", "peaks": {"dram_bytes_per_s": 1e30}}, "unknown"),
    ({"ask": "read_file", "path": "/etc/passwd"}, "unknown"),
])
def test_a_request_that_does_not_fit_is_refused_never_followed(tmp_path: Path, request_: dict[str, Any], says: str) -> None:
    answer = keeper(tmp_path).answer(request_)
    assert says in answer["error"]
    assert not os.path.exists(tmp_path / "baselines") or not os.listdir(tmp_path / "baselines")


def test_the_peaks_are_the_servers(tmp_path: Path) -> None:
    assert "error" in keeper(tmp_path).answer({"ask": "peaks"})["peaks"]
    measured = {"dram_bytes_per_s": 4.8e12, "cached": True}
    assert keeper(tmp_path, peaks=lambda: measured).answer({"ask": "peaks"}) == {"peaks": measured}


def test_the_judge_asks_the_server_over_its_channel(tmp_path: Path) -> None:
    """judgeproc.Remote on one end of a socket pair, the server's answers (serverjob.answer from
    a Keeper) on the other: what the judge keeps comes back, under the server's key."""
    ours, theirs = socket.socketpair()
    kept = keeper(tmp_path)

    def serve() -> None:
        reader = theirs.makefile("rb")
        for line in reader:
            serverjob.answer(theirs, kept.answer(json.loads(line)))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    remote = judgeproc.Remote(judgeproc.ServerLink(ours))
    assert remote.reference_timing(DEVICE, INPUTS)[1] is None
    key = remote.keep_reference_timing(DEVICE, INPUTS, FIGURES)
    assert key == kept.reference_key(DEVICE, INPUTS)
    assert remote.reference_timing(DEVICE, INPUTS) == (key, FIGURES)
    assert remote.reference_timing("not a device", INPUTS) == (None, None)
    assert "error" in remote.peaks()
    remote.keep_floor("g", "d", [0.5])
    assert remote.floor_samples("g", "d") == [0.5]
    ours.close()
    thread.join(5)


def test_launchpath_floor_keys_stay_apart_from_the_keepers(tmp_path: Path) -> None:
    """The keeper's floor key names the task: the shared per-device floor of older harnesses
    (launchpath.Floor's own key) is never read."""
    shared = launchpath.Floor(str(tmp_path / "peaks"), "g", "d")
    shared.add([1e-6])
    shared.write()
    assert keeper(tmp_path).floor_samples("g", "d") == []


# --- a hostile task through a real server --------------------------------------------------

HOSTILE = open(os.path.join(REPO, "tests", "fixtures", "tasks", "hostile_task.py")).read()
KERNEL = os.path.join(REPO, "tests", "fixtures", "kernels", "relu_ok.py")
SECRET = "sk-proj-Zq8xW3vK9mPb2LtY7rNc4HdJ6fGs1QaE"
KFORGE_SECRET = "planted-in-kforges-environment-7c1e"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Any], list[str], str]:
    """A server started with secrets in its environment (kforge filters its own; the
    harness must hold even when one slips through), asked for a task check and an evaluation
    of the hostile task. Returns (results, marker paths, the server's stderr)."""
    if sandbox.detect().kind == "none":
        pytest.skip("no sandbox works here: %s" % sandbox.detect().reason)
    root = tmp_path_factory.mktemp("hostile")
    home, cwd = root / "home", root / "cwd"
    home.mkdir()
    cwd.mkdir()
    marker = "kforge-hostile-task-pytest-%d" % os.getpid()
    targets = [str(home), str(cwd), "/tmp", str(root)]
    task = root / "task.py"
    task.write_text(HOSTILE.replace("@NAMES@", "OPENAI_API_KEY,KFORGE_PLANTED").replace(
        "@TARGETS@", ",".join(targets)).replace("@MARKER@", marker))
    env = dict(os.environ, PYTHONPATH=HARNESS, TRITON_INTERPRET="1", HOME=str(home),
               OPENAI_API_KEY=SECRET, KFORGE_PLANTED=KFORGE_SECRET)
    proc = subprocess.Popen([sys.executable, "-m", "kforge_harness", "serve"], cwd=str(cwd), env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = json.loads(proc.stdout.readline())
        assert hello.get("ok"), hello
        results: list[Any] = []
        for i, reference_only in enumerate((True, False)):
            job = dict(JOB, task_path=str(task), kernel_path=KERNEL, device="cpu", timing=False,
                       compile_baseline=False, reference_only=reference_only, baseline_cache_dir=str(root / "b"))
            proc.stdin.write(json.dumps({"op": "eval", "id": "h%d" % i, "job": job}) + "\n")
            proc.stdin.flush()
            while True:
                event = json.loads(proc.stdout.readline())
                if event.get("event") == "result":
                    results.append(event["result"])
                    break
        proc.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
        proc.stdin.flush()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return results, [os.path.join(t, marker) for t in targets], err


def test_a_hostile_task_sees_no_secret_and_writes_nothing_on_the_host(hostile_run: tuple[list[Any], list[str], str]) -> None:
    results, markers, err = hostile_run
    for result in results:
        assert "TASK-PROBE ran during the module body" in result["log"], result["log"]
        text = json.dumps(result)
        assert SECRET not in text and KFORGE_SECRET not in text, result["log"]
        assert result["sandbox"]["task"]["enforced"] is True, result["sandbox"]
    assert SECRET not in err and KFORGE_SECRET not in err
    for marker in markers:
        assert not os.path.exists(marker), open(marker).read()
    assert results[0]["correct"] and results[1]["correct"], [(r["category"], r["summary"]) for r in results]
