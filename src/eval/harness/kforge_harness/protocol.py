"""The harness's shared vocabulary: failure categories, the result skeleton, limits, and the
framing of messages between processes.

Three roles never share a process (docs/security.md): the server (trusted, long-lived,
runs no task's or kernel's code), the judge (one per evaluation: reference, inputs,
comparison, timing, verdict; it runs the task's code, so it lives in the tasks' sandbox) and
the worker (untrusted, in the kernels' sandbox: imports the kernel and runs ModelNew). Only
the judge decides; what a worker sends can make its own kernel fail, never pass.
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
from typing import Any, Dict, Iterable, Mapping, MutableMapping, Optional, TypeVar

from .wire import ResultRecord

# A decoded message: a JSON object whose values are whatever the peer sent.
Message = Dict[str, Any]
# A record a failure is written into (a ResultRecord, or what is built into one).
R = TypeVar("R", bound=MutableMapping[str, Any])

PROTOCOL = 3
LOG_LIMIT = 1 << 20  # bytes of worker output kept in a result
MESSAGE_LINES = 150  # lines of cleaned error text, as the repair prompt wants them
MAX_MESSAGE = 4 << 20  # bytes of one framed message; a larger one is a protocol violation

# Every failure category, in the order docs/eval-result.md lists them. The Rust enum
# `Category` must agree (tests/harness_categories.rs checks it).
CATEGORIES = (
    "static_check", "syntax", "import", "compile", "out_of_resources", "runtime",
    "cuda_error", "oom", "mismatch", "torch_fallback", "timeout", "crash", "harness",
    "task", "cancelled",
)


class KernelFailure(Exception):
    """A classified failure of the candidate: ends the evaluation with a category."""

    def __init__(self, category: str, summary: str, message: str = "",
                 details: Optional[Mapping[str, object]] = None) -> None:
        super().__init__(summary)
        assert category in CATEGORIES, category
        self.category = category
        self.summary = summary
        self.message = message or summary
        self.details: dict[str, object] = dict(details or {})


class TaskFailure(Exception):
    """The task file itself is unusable: not the kernel's fault."""


class HarnessError(Exception):
    """A fault of the harness or its environment, not of the kernel or the task."""


class ProtocolViolation(Exception):
    """A peer sent something the protocol does not allow (malformed, oversized, early,
    duplicate). From a worker this is a `crash` of its kernel, never a pass."""


def new_result(job: Mapping[str, object]) -> ResultRecord:
    """The result's skeleton; every key written into it later must be a field of wire.Result."""
    return ResultRecord({
        "schema": 2,
        "id": job.get("id"),
        "status": "failed",
        "correct": False,
        "category": None,
        "summary": "",
        "message": "",
        "details": {},
        "log": "",
        "device": {"kind": "cpu" if job.get("device") == "cpu" else "cuda"},
        "versions": {},
        "static": {"errors": [], "warnings": [], "jit_kernels": [], "launches": []},
        "alignment": None,
        "trials": [],
        "timing": None,
        "flags": [],
        "notes": [],
        "profile": None,
        "phase": None,
        "duration_s": 0.0,
        "child_s": 0.0,
        "sandbox": None,
        "audit": None,
        "tolerance": None,
        "memory": {},
        "footprint": None,
    })


def fail(result: R, category: str, summary: str, message: str = "",
         details: Optional[Mapping[str, object]] = None) -> R:
    assert category in CATEGORIES, category
    result.update({"status": "failed", "correct": False, "category": category, "summary": summary,
                   "message": message or summary, "details": details or {}})
    return result


# -- framing --------------------------------------------------------------------------
# A message is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object).

def encode(message: Mapping[str, object]) -> bytes:
    return frame(payload(message))


def payload(message: Mapping[str, object]) -> bytes:
    """A message's bytes, unframed (what a seal covers, seal.py)."""
    return json.dumps(message, default=str, allow_nan=True).encode()


def frame(data: bytes) -> bytes:
    if len(data) > MAX_MESSAGE:
        raise ProtocolViolation("message of %d bytes exceeds the %d-byte limit" % (len(data), MAX_MESSAGE))
    return struct.pack(">I", len(data)) + data


def send(sock: socket.socket, message: Mapping[str, object]) -> None:
    # MSG_NOSIGNAL: a peer that is gone is an OSError (EPIPE) the caller turns into that
    # side's failure; the evaluation processes run with SIGPIPE's default action, which
    # would kill the judge instead of letting it say which process ended.
    sock.sendall(encode(message), socket.MSG_NOSIGNAL)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(sock: socket.socket) -> Message | None:
    """The next message as a dict, or None when the peer closed the connection cleanly
    between messages. Raises ProtocolViolation for anything else."""
    data = recv_payload(sock)
    return None if data is None else decode(data)


def recv_payload(sock: socket.socket) -> bytes | None:
    """The next message's bytes, unframed and not decoded (recv), or None like recv."""
    header = _recv_exact(sock, 4)
    if header is None:
        return None
    (length,) = struct.unpack(">I", header)
    if length > MAX_MESSAGE:
        raise ProtocolViolation("announced a %d-byte message (limit %d)" % (length, MAX_MESSAGE))
    data = _recv_exact(sock, length)
    if data is None:
        raise ProtocolViolation("connection closed in the middle of a message")
    return data


def decode(data: bytes) -> Message:
    try:
        message = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolViolation("malformed message: %s" % e)
    if not isinstance(message, dict) or not isinstance(message.get("type", message.get("op")), str):
        raise ProtocolViolation("a message must be a JSON object with a type")
    return message


def send_fds(sock: socket.socket, message: Mapping[str, object], fds: Iterable[int]) -> None:
    """A framed message with file descriptors attached (SCM_RIGHTS) to its first bytes. On a
    stream socket sendmsg may take only part of a large message: the rest follows."""
    data = encode(message)
    # sendmsg itself: socket.send_fds drops its `flags` argument (CPython's own code).
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", list(fds)))]
    sent = sock.sendmsg([data], rights, socket.MSG_NOSIGNAL)
    if sent < len(data):
        sock.sendall(data[sent:], socket.MSG_NOSIGNAL)


def recv_message(sock: socket.socket, max_fds: int = 8) -> tuple[Message | None, list[int]]:
    """(message, fds) on a stream socket whose peer may attach file descriptors to a message
    (send_fds); (None, []) when the peer closed cleanly between messages. The descriptors
    arrive with the message's first byte, so the header is read with recvmsg; whatever
    arrives beyond max_fds is closed by the kernel. Raises ProtocolViolation like recv."""
    header = b""
    fds: list[int] = []
    while len(header) < 4:
        data, more, _, _ = socket.recv_fds(sock, 4 - len(header), max_fds)
        fds += more
        if not data:
            for fd in fds:
                os.close(fd)
            if header:
                raise ProtocolViolation("connection closed in the middle of a message")
            return None, []
        header += data
    try:
        (length,) = struct.unpack(">I", header)
        if length > MAX_MESSAGE:
            raise ProtocolViolation("announced a %d-byte message (limit %d)" % (length, MAX_MESSAGE))
        body = _recv_exact(sock, length)
        if body is None:
            raise ProtocolViolation("connection closed in the middle of a message")
        return decode(body), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def recv_with_fds(sock: socket.socket, max_fds: int = 4) -> tuple[Message | None, list[int]]:
    """(message, fds) for a message sent with send_fds on a SOCK_SEQPACKET socket (the
    zygote's control channel: one message per packet); (None, []) at end of stream."""
    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE + 4, max_fds)
    if not data:
        return None, []
    if len(data) < 4:
        raise ProtocolViolation("short message")
    (length,) = struct.unpack(">I", data[:4])
    body = data[4:]
    while len(body) < length:
        more = sock.recv(length - len(body))
        if not more:
            raise ProtocolViolation("connection closed in the middle of a message")
        body += more
    return decode(body), fds
