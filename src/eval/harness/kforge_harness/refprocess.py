"""The reference's own process, for timing it exactly as the kernel is timed.

A score divides two figures; they mean the same thing only if both come out of the same
measurement. So the reference runs, for its timed runs, in a process of its own that serves
the worker's protocol (worker.py) with the task's Model as its "kernel": the judge lends it
buffers, calibrates its null runs, and times its windows (window.py) exactly as it does the
kernel's. The process runs the task's code, as the judge does, so it lives where the judge
does, in the tasks' sandbox (zygote.py), never in the kernels'; the judge forks it before
its own CUDA context exists (a CUDA context does not survive a fork); until asked to serve
it waits, and a judge whose reference timing is cached lets it go without it ever touching
the GPU.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Optional

from . import protocol

# The task's module, loaded as the kernel: its Model is the model the worker builds.
ALIAS = "\n\n# kforge: the reference, timed through the worker's protocol\nModelNew = Model\n"


class ReferenceProcess:
    def __init__(self, pid: Optional[int], sock: Optional[socket.socket]) -> None:
        self.pid = pid
        self.sock = sock
        self.serving = False

    @classmethod
    def fork(cls) -> ReferenceProcess:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                parent.close()
                keep = child.fileno()
                # Nothing of the judge's (its result pipe, the kernel's channel) stays open here.
                os.closerange(3, keep)
                os.closerange(keep + 1, 1 << 16)
                request, _ = protocol.recv_message(child)
                if request and request.get("op") == "serve":
                    from .worker import Worker

                    Worker(child, request["job"]).serve()
            except BaseException:  # noqa: BLE001 -- the judge sees the closed channel
                import traceback

                traceback.print_exc()
                status = 70
            finally:
                os._exit(status)
        child.close()
        return cls(pid, parent)

    def serve(self, job: dict[str, Any]) -> None:
        """Starts the worker's protocol in the process (it then says hello)."""
        assert self.sock is not None, "served after close"
        protocol.send(self.sock, {"op": "serve", "job": job})
        self.serving = True

    def close(self) -> None:
        """Lets the process go and reaps it (it exits on its channel's end)."""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        if self.pid:
            import signal
            import time

            deadline = time.time() + 10.0
            while True:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    break
                if time.time() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    break
                time.sleep(0.01)
            self.pid = None
