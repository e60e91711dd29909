"""Framing of judge-worker messages: what a hostile worker can send must never be read as
anything but a protocol violation."""

from __future__ import annotations

import socket
import struct

import pytest

from kforge_harness import protocol


def pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def test_round_trip() -> None:
    a, b = pair()
    protocol.send(a, {"type": "done", "run": 3, "event_ms": 0.5})
    assert protocol.recv(b) == {"type": "done", "run": 3, "event_ms": 0.5}


def test_clean_close_between_messages_is_none() -> None:
    a, b = pair()
    a.close()
    assert protocol.recv(b) is None


@pytest.mark.parametrize("raw, why", [
    (struct.pack(">I", protocol.MAX_MESSAGE + 1), "announced"),
    (struct.pack(">I", 10) + b"{not json}", "malformed"),
    (struct.pack(">I", 2) + b"[]", "JSON object"),
    (struct.pack(">I", 2) + b"{}", "JSON object"),
    (struct.pack(">I", 100) + b'{"type": "done"}', "middle of a message"),
    (struct.pack(">I", 4) + b"\xff\xfe\xfd\xfc", "malformed"),
])
def test_violations(raw: bytes, why: str) -> None:
    a, b = pair()
    a.sendall(raw)
    a.close()
    with pytest.raises(protocol.ProtocolViolation, match=why):
        protocol.recv(b)


def test_oversized_message_cannot_be_sent() -> None:
    with pytest.raises(protocol.ProtocolViolation):
        protocol.encode({"type": "x", "blob": "a" * (protocol.MAX_MESSAGE + 1)})


def test_fds_travel_with_seqpacket_messages() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = socket.socketpair()
    protocol.send_fds(a, {"op": "fork", "id": "e1"}, [w.fileno()])
    message, fds = protocol.recv_with_fds(b)
    assert message == {"op": "fork", "id": "e1"} and len(fds) == 1
    socket.socket(fileno=fds[0]).sendall(b"hi")
    assert r.recv(2) == b"hi"


def test_categories_are_unique_and_failures_check_them() -> None:
    assert len(set(protocol.CATEGORIES)) == len(protocol.CATEGORIES)
    with pytest.raises(AssertionError):
        protocol.KernelFailure("not_a_category", "x")


def test_the_log_says_the_phases_even_when_nothing_was_printed() -> None:
    from kforge_harness.errors import evaluation_log

    log = evaluation_log([(0.01, "loading task"), (1.5, "correctness trial 1/5")], "")
    assert "    0.01  loading task" in log
    assert "    1.50  correctness trial 1/5" in log
    assert log.rstrip().endswith("(nothing printed)")
    printed = evaluation_log([], "hello from the kernel\n")
    assert "(none reported)" in printed
    assert printed.rstrip().endswith("hello from the kernel")


def test_descriptors_travel_with_their_message_even_a_large_one() -> None:
    import os
    import threading

    a, b = pair()
    r, w = os.pipe()
    big = {"op": "load", "source": "x" * (3 << 20)}  # larger than a socket buffer: sent in parts
    sender = threading.Thread(target=protocol.send_fds, args=(a, big, [w]))
    sender.start()
    message, fds = protocol.recv_message(b)
    sender.join()
    assert message == big and len(fds) == 1
    os.write(fds[0], b"ok")  # the received descriptor is the pipe's write end
    assert os.read(r, 2) == b"ok"
    for fd in fds + [r, w]:
        os.close(fd)
    protocol.send(a, {"op": "exit"})
    assert protocol.recv_message(b) == ({"op": "exit"}, [])
    a.close()
    assert protocol.recv_message(b) == (None, [])


def test_a_message_cut_short_closes_the_descriptors_it_brought() -> None:
    import os

    a, b = pair()
    r, w = os.pipe()
    data = protocol.encode({"op": "attach"})
    socket.send_fds(a, [data[:6]], [w])  # header and a piece of the body, then the peer goes
    a.close()
    with pytest.raises(protocol.ProtocolViolation):
        protocol.recv_message(b)
    os.close(w)
    assert os.read(r, 1) == b""  # every write end is closed: the received copy was too
    os.close(r)
