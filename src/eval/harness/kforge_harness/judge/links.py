"""The judge's channels: to the kernel's process (`WorkerLink`: anything unexpected is the
kernel's crash), to the reference's timing process (`ReferenceLink`: trusted, a failure is
the task's or the harness's) and to a second reference's (`CompiledLink`: a failure costs
that baseline only)."""

from __future__ import annotations

import os
import select
import socket
from typing import Any, Callable, Mapping, NoReturn, Optional, Sequence

from .. import protocol, seal
from ..protocol import HarnessError, KernelFailure, ProtocolViolation, TaskFailure
from ..timed import Side
from ..worker import WORKER_CATEGORIES
from .context import task_does_not_fit

Message = dict[str, Any]  # a reply as received, before it is read as its type (messages.py)


class WorkerLink:
    """The judge's end of the channel to the worker. Anything unexpected from the worker --
    a malformed, oversized, early, duplicate or out-of-order message, or silence -- is a
    `crash` of the kernel; a failure it reports about itself is taken as that failure."""

    def __init__(self, sock: socket.socket, phase: Callable[[], str]) -> None:
        self.sock = sock
        self.phase = phase
        # Until the kernel is imported the worker runs only harness code: a failure then is
        # the harness's (or its environment's), not the kernel's.
        self.kernel_loaded = False
        self.opener: Optional[seal.Opener] = None  # from the kernel's import on, messages are sealed (seal.py)

    def seal(self) -> str:
        """A key for the worker's messages from here on (it goes in the "load" request)."""
        key = seal.new_key()
        self.opener = seal.Opener(key)
        return key.hex()

    def _crash(self, what: str, closed: bool = False) -> NoReturn:
        """`closed`: the channel ended (the process died or shut it), which its exit status
        may explain better (server.worker_death_explains)."""
        if not self.kernel_loaded:
            raise HarnessError("%s before the kernel was loaded (during %s); see the log" % (what, self.phase()))
        raise KernelFailure("crash", "%s (during %s)" % (what, self.phase()),
                            details={"protocol": what, "channel_closed": closed})

    def next_message(self) -> Optional[Message]:
        """The next message (unsealed once the kernel is imported, seal.py), or None when the
        channel ended between messages; a violation is the kernel's crash."""
        try:
            data = protocol.recv_payload(self.sock)
            if data is not None and self.opener is not None:
                data = self.opener.open(data)
            return None if data is None else protocol.decode(data)
        except (ProtocolViolation, ValueError) as e:
            self._crash("the kernel's process broke the protocol: %s" % e)
        except OSError as e:
            self._crash("the kernel's process channel failed: %s" % e, closed=True)

    def receive(self, expected: str, run: Optional[int] = None) -> Message:
        message = self.next_message()
        if message is None:
            self._crash("the kernel's process ended without answering", closed=True)
        kind = message.get("type")
        if kind == "failure":
            category = message.get("category")
            if category not in WORKER_CATEGORIES:
                self._crash("the kernel's process reported an invalid failure category %r" % (category,))
            summary = str(message.get("summary") or category)[:500]
            text = str(message.get("message") or summary)[-protocol.LOG_LIMIT:]
            details: dict[str, Any] = message["details"] if isinstance(message.get("details"), dict) else {}
            # Whether the kernel had been loaded is the judge's knowledge, never the process's
            # word: a kernel that says "out of memory before I was loaded" would pass for a task
            # that does not fit (the unseen-shapes check skips those).
            details = dict(details, kernel_loaded=self.kernel_loaded, reported_by_process=True)
            raise KernelFailure(category, summary, text, details)
        if kind != expected:
            self._crash("the kernel's process sent %r where %r was due" % (kind, expected))
        if run is not None and message.get("run") != run:
            self._crash("the kernel's process answered run %r for run %r" % (message.get("run"), run))
        return message

    def call(self, request: Mapping[str, Any], expected: str, fds: Sequence[int] = ()) -> Message:
        """Sends a request (with the file descriptors of memory it lends, closed here once
        sent) and returns the answer it is due."""
        try:
            self.send(request, fds)
        finally:
            for fd in fds:
                os.close(fd)
        return self.receive(expected, request.get("run"))

    def send(self, request: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        # An unsolicited message waiting before a request is sent is an early message.
        if select.select([self.sock], [], [], 0)[0]:
            early = self.next_message()
            if early is not None:
                self._crash("the kernel's process sent %r before it was asked" % early.get("type"))
        try:
            if fds:
                protocol.send_fds(self.sock, request, fds)
            else:
                protocol.send(self.sock, request)
        except OSError:
            self._crash("the kernel's process stopped listening", closed=True)

    def ready(self, timeout_s: float) -> bool:
        """Whether a message is waiting, or arrives within `timeout_s`."""
        return bool(select.select([self.sock], [], [], timeout_s)[0])


class CompileUnavailable(Exception):
    """The reference under torch.compile cannot be a baseline (it failed to compile or to
    run, or computes another result): the evaluation goes on against eager alone."""


class ReferenceLink(WorkerLink):
    """The judge's channel to the reference's own timing process (refprocess.py): trusted, so
    anything that goes wrong there is the task's or the harness's, never a kernel verdict."""

    def _crash(self, what: str, closed: bool = False) -> NoReturn:
        raise HarnessError("the reference's timing process: %s (during %s); see the log"
                           % (what.replace("the kernel's process", "it"), self.phase()))

    def receive(self, expected: str, run: Optional[int] = None) -> Message:
        try:
            return super().receive(expected, run)
        except KernelFailure as f:
            if f.category == "oom":
                raise task_does_not_fit("timing the reference in its own process ran out of memory: %s" % f.summary)
            raise TaskFailure("timing the reference in its own process failed: %s" % f.summary)


class CompiledLink(WorkerLink):
    """The judge's channel to the compiled reference's process: trusted like the
    reference's, and whatever goes wrong there only costs the compile baseline."""

    def _crash(self, what: str, closed: bool = False) -> NoReturn:
        raise CompileUnavailable("its process: %s" % what.replace("the kernel's process", "it"))

    def receive(self, expected: str, run: Optional[int] = None) -> Message:
        try:
            return super().receive(expected, run)
        except KernelFailure as f:
            raise CompileUnavailable(f.summary)


class CompiledSide(Side):
    """The compiled reference's Side: a process that goes away is a compile baseline lost,
    not a harness failure."""

    def run(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().run(*args, **kwargs)
        except HarnessError as e:
            raise CompileUnavailable(str(e))
