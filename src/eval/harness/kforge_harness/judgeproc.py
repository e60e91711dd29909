"""The judge's process: forked by the tasks' zygote, inside the tasks' sandbox
(zygote.py), one per evaluation. The task's code runs here and in the processes the judge
forks (the reference's and the compiled reference's timing processes), never anywhere else.

The server and the judge talk over one stream socket, one JSON object a line each way:
  <- {"job": JOB, "id": ID, "task_source", "kernel_source", "result": RESULT}   first, once
A judge started ahead of its request (ahead.py) gets that line without "id" and
"kernel_source" and with "ahead": true; once every phase before the kernel's is done:
  -> {"ready": true}     <- {"id": ID, "kernel_source": SOURCE, "result": RESULT}
the request's id, its kernel and the server's result for it (its static report, precision
findings, notes, flags), which the judge takes into its own (`adopt`). Then, as above:
  -> {"progress": PHASE}                                        as the judge moves on
  -> {"ask": ..., ...}    <- {"answer": {...}}                  what the server keeps for it
  -> {"result": RESULT}                                         last
The task's source arrives in the job and is written into the judge's own directory (its
private /tmp): the task file kforge named is never opened in here. What the judge asks for
(cachekeeper.Keeper) is all it gets of kforge's cache, under keys the server computes.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, NoReturn, Optional

from . import knobs, wire
from .errors import clean_text, exception_text, first_line
from .protocol import HarnessError, KernelFailure, TaskFailure, fail

if TYPE_CHECKING:
    from . import judge

MAX_LINE = 64 << 20  # bytes of one line from the server (the job carries both sources)


class ServerLink:
    """The judge's end of its channel to the server."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.sendall(json.dumps(message, default=str).encode() + b"\n")
        except OSError as e:
            raise HarnessError("the server stopped listening: %s" % e)

    def receive(self) -> Any:
        line = self.reader.readline(MAX_LINE)
        if not line.endswith(b"\n"):
            raise HarnessError("the server's channel ended" if not line else "an oversized line from the server")
        return json.loads(line)

    def ask(self, ask: str, **fields: Any) -> dict[str, Any]:
        """The server's answer to a request (cachekeeper.Keeper.answer)."""
        self.send(dict(fields, ask=ask))
        message = self.receive()
        answer = message.get("answer") if isinstance(message, dict) else None
        if not isinstance(answer, dict):
            raise HarnessError("the server answered %r with %r" % (ask, message))
        return answer


class Remote:
    """The store the judge sees (the methods of cachekeeper.Keeper it uses), each a request to
    the server. What the server refuses is nothing cached and nothing kept."""

    def __init__(self, link: ServerLink) -> None:
        self.link = link

    def reference_timing(self, device: Any, inputs: Any) -> tuple[Any, Any]:
        answer = self.link.ask("reference_timing", device=device, inputs=inputs)
        return answer.get("key"), answer.get("cached")

    def keep_reference_timing(self, device: Any, inputs: Any, figures: Any) -> Any:
        return self.link.ask("keep_reference_timing", device=device, inputs=inputs, record=figures).get("key")

    def compile_baseline(self, device: Any, inputs: Any, mode: str) -> tuple[Any, Any]:
        answer = self.link.ask("compile_baseline", device=device, inputs=inputs, mode=mode)
        return answer.get("key"), answer.get("cached")

    def keep_compile_baseline(self, device: Any, inputs: Any, mode: str, record: Any) -> Any:
        return self.link.ask("keep_compile_baseline", device=device, inputs=inputs, mode=mode,
                             record=record).get("key")

    def defaults_baseline(self, device: Any, inputs: Any) -> tuple[Any, Any]:
        answer = self.link.ask("defaults_baseline", device=device, inputs=inputs)
        return answer.get("key"), answer.get("cached")

    def keep_defaults_baseline(self, device: Any, inputs: Any, record: Any) -> Any:
        return self.link.ask("keep_defaults_baseline", device=device, inputs=inputs, record=record).get("key")

    def floor_samples(self, gpu: str, driver: Any) -> list[Any]:
        samples = self.link.ask("floor", gpu=gpu, driver=driver).get("samples")
        return samples if isinstance(samples, list) else []

    def keep_floor(self, gpu: str, driver: Any, samples: list[Any]) -> None:
        self.link.ask("keep_floor", gpu=gpu, driver=driver, samples=samples)

    def launchers(self, device: str) -> list[Any]:
        specs = self.link.ask("launchers", device=device).get("specs")
        return specs if isinstance(specs, list) else []

    def keep_launchers(self, device: str, specs: Any) -> None:
        self.link.ask("keep_launchers", device=device, specs=specs)

    def peaks(self) -> dict[str, Any]:
        answer = self.link.ask("peaks")
        peaks = answer.get("peaks")
        return peaks if isinstance(peaks, dict) else {"error": answer.get("error") or "the server sent no peaks"}


class Handover:
    """Where a judge started ahead of its request waits for the kernel (judge/kernel.py's
    await_kernel); `idle_s`: how long it waited, which is none of its phases."""

    def __init__(self, link: ServerLink) -> None:
        self.link = link
        self.idle_s = 0.0

    def wait(self, run: judge.Run) -> None:
        self.link.send({"ready": True})
        waited = time.time()
        handed = self.link.receive()
        self.idle_s = time.time() - waited
        if not (isinstance(handed, dict) and isinstance(handed.get("kernel_source"), str)
                and isinstance(handed.get("result"), dict)):
            raise HarnessError("the server handed over no kernel: %s" % first_line(str(handed))[:200])
        adopt(run.job, run.result, handed)
        run.clock.skip()


def adopt(job: dict[str, Any], result: dict[str, Any], handed: dict[str, Any]) -> None:
    """The request's kernel and the server's result for it taken into a judge started ahead:
    its id, source, static report and precision findings; the server's notes and flags
    before the judge's own (in the order a judge started with its request has them)."""
    server = handed["result"]
    job["id"] = handed.get("id")
    job["kernel_source"] = handed["kernel_source"]
    for key in ("id", "static", "precision"):
        result[key] = server.get(key)
    result["notes"][:0] = list(server.get("notes") or [])
    result["flags"][:0] = list(server.get("flags") or [])


def kernel_was_loaded(run: Optional[judge.Run]) -> bool:
    """Whether the kernel's code had been given to its process when the evaluation ended
    (`run`: the judge's Run, None where it was never opened)."""
    return bool(run is not None and run.kernel_loaded())


def main(server: socket.socket, channel: Optional[socket.socket], workdir: str) -> NoReturn:
    """Body of the judge process (server: its channel to the server; channel: to the worker,
    None for a task check). Never returns."""
    status = 0
    started = time.time()
    link = ServerLink(server)
    try:
        request = link.receive()
        raw = request["job"]
        knobs.give(request.get("diagnostics") or [])
        task_file = os.path.join(workdir, "task.py")
        with open(task_file, "w", encoding="utf-8") as f:
            f.write(request["task_source"])
        # What the modules that read the job by key see (timed.py, device.py, compare.py):
        # what kforge sent, its id, the task file written here and both sources.
        handover = Handover(link) if request.get("ahead") else None
        job = dict(raw, id=request.get("id"), task_file=task_file, task_source=request["task_source"],
                   kernel_source=request.get("kernel_source", ""))
        spec = wire.Job.parse(raw)
        result = wire.ResultRecord(request["result"])
    except BaseException:  # noqa: BLE001 -- the server says the judge ended without a result
        os._exit(70)

    def progress(phase: str) -> None:
        result["phase"] = phase
        try:
            link.send({"progress": phase})
        except HarnessError:
            pass

    run: Optional[judge.Run] = None
    try:
        from . import judge  # a broken import is a `harness` result, not a silent exit

        run = judge.open_run(job, spec, result, Remote(link), progress, channel, handover)
        judge.judge(run)
    except KernelFailure as f:
        fail(result, f.category, f.summary, f.message, f.details)
    except TaskFailure as f:
        fail(result, "task", str(f))
    except HarnessError as e:
        fail(result, "harness", str(e))
    except BaseException as e:  # noqa: BLE001 -- a harness bug must still produce a result
        fail(result, "harness", "harness error: %s: %s" % (type(e).__name__, first_line(str(e))),
             clean_text(exception_text(e)))
    if result.get("category") in ("harness", "oom") and isinstance(result.get("details"), dict):
        # Whether the kernel's code had run: only a failure the judge saw before it had can
        # be the task's or the harness's alone (the unseen-shapes check skips only those).
        result["details"].setdefault("kernel_loaded", kernel_was_loaded(run))
    result["child_s"] = time.time() - started - (handover.idle_s if handover else 0.0)
    try:
        link.send({"result": result})
    except BaseException:  # noqa: BLE001
        status = 70
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)
