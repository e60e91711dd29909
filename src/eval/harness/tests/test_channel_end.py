"""A process at the other end of a channel that is gone: the judge learns it as an error it
can name (EPIPE), never dies of SIGPIPE (evaluation processes run with its default action);
and a worker lent more input sets keeps the ones it had."""

from __future__ import annotations

import mmap
import os
import signal
import socket
from typing import Any, Callable, Sequence

import pytest

from kforge_harness import protocol
from kforge_harness.exchange import Borrower
from kforge_harness.worker import Worker


def _exit_status_sending_to_a_closed_peer(send: Callable[[socket.socket], object]) -> int:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.close()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as redirect_stdio sets it
            send(ours)
        except BrokenPipeError:
            code = 0
        except BaseException:  # noqa: BLE001
            code = 4
        finally:
            os._exit(code)
    ours.close()
    _, status = os.waitpid(pid, 0)
    return status


def test_a_message_to_a_peer_that_is_gone_is_an_error_not_sigpipe() -> None:
    status = _exit_status_sending_to_a_closed_peer(lambda s: protocol.send(s, {"op": "x" * 100000}))
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_file_descriptors_to_a_peer_that_is_gone_are_an_error_not_sigpipe() -> None:
    def send(s: socket.socket) -> None:
        r, w = os.pipe()
        protocol.send_fds(s, {"op": "attach"}, [r])

    status = _exit_status_sending_to_a_closed_peer(send)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


class _Borrower(Borrower):
    def attach_tree(self, descriptors: Any, mappings: Sequence[mmap.mmap] = ()) -> Any:
        return descriptors


def test_more_input_sets_are_added_to_those_lent_before(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = Worker.__new__(Worker)
    replies: list[object] = []
    worker.borrower = _Borrower("cpu")
    monkeypatch.setattr(worker, "reply", replies.append)
    worker.op_attach({"inputs": "in0", "outputs": "out0"}, [])
    worker.op_sets({"sets": [{"inputs": "in1", "outputs": "out1"}, {"inputs": "in2", "outputs": "out2"}]}, [])
    # A wider window later: the judge lends only the sets it lacks.
    worker.op_sets({"sets": [{"inputs": "in%d" % k, "outputs": "out%d" % k} for k in range(3, 6)]}, [])
    assert [s[0] for s in worker.sets] == ["in%d" % k for k in range(6)]
    assert replies[-1] == {"type": "sets_set", "sets": 6}
