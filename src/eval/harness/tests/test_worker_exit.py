"""When a worker's end explains a `crash` verdict (server.worker_death_explains), and what
the judge's link says when the channel ends (judge.WorkerLink)."""

from __future__ import annotations

import signal
import socket

import pytest

from kforge_harness import judge, protocol
from kforge_harness.protocol import KernelFailure
from kforge_harness.server import worker_death_explains

CLOSED = {"protocol": "the kernel's process ended without answering", "channel_closed": True}
CAUGHT = {"protocol": "the slots are not what the audited forward returned"}


def test_a_worker_that_died_and_closed_the_channel_explains_the_crash() -> None:
    assert worker_death_explains({"status": -signal.SIGKILL}, CLOSED)  # relu_sigkill, the OOM killer
    assert worker_death_explains({"status": -signal.SIGSEGV}, CLOSED)
    assert worker_death_explains({"status": 3}, CLOSED)


def test_the_servers_kill_after_the_judge_caught_the_kernel_does_not_replace_its_reason() -> None:
    # The judge caught a forged output and ended; the worker, still alive, was then killed.
    assert not worker_death_explains({"status": -signal.SIGKILL}, CAUGHT)
    assert not worker_death_explains({"status": -signal.SIGKILL}, None)


def test_an_ordinary_exit_or_no_word_explains_nothing() -> None:
    for worker in (None, {}, {"status": None}, {"status": 0}, {"status": 70}):
        assert not worker_death_explains(worker, CLOSED)


def link() -> tuple[judge.WorkerLink, socket.socket]:
    judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    link = judge.WorkerLink(judge_end, lambda: "correctness trial 1/5")
    link.kernel_loaded = True
    return link, worker_end


def test_a_channel_that_ends_is_marked_closed_and_a_wrong_message_is_not() -> None:
    worker_link, worker = link()
    worker.close()
    with pytest.raises(KernelFailure) as ended:
        worker_link.receive("done")
    assert ended.value.details["channel_closed"] is True
    worker_link, worker = link()
    protocol.send(worker, {"type": "armed"})
    with pytest.raises(KernelFailure) as wrong:
        worker_link.receive("done")
    assert wrong.value.details["channel_closed"] is False
