"""A zygote forks the evaluation's process with a pid other than the one the other sandbox's
process has: legacy CUDA IPC refuses a handle whose exporter's pid equals the importer's
(zygote.spawn_avoiding)."""

from __future__ import annotations

import pytest
from pathlib import Path
import os
from typing import Any

from kforge_harness import zygote

# The control socket and the wakeup descriptor, which the faked spawn never uses.
UNUSED: Any = None


def test_a_child_that_gets_the_avoided_pid_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    pids = iter([41, 42])
    reaped: list[int] = []
    monkeypatch.setattr(zygote, "spawn", lambda *args: next(pids))
    monkeypatch.setattr(os, "waitpid", lambda pid, flags: reaped.append(pid) or (pid, 0))  # type: ignore[func-returns-value]
    assert zygote.spawn_avoiding(41, "kernel", {}, [], UNUSED, UNUSED, "/tmp") == 42
    assert reaped == [41]


def test_without_a_pid_to_avoid_the_first_child_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zygote, "spawn", lambda *args: 7)
    monkeypatch.setattr(os, "waitpid", lambda pid, flags: (_ for _ in ()).throw(AssertionError("reaped")))
    assert zygote.spawn_avoiding(None, "kernel", {}, [], UNUSED, UNUSED, "/tmp") == 7
    assert zygote.spawn_avoiding(3, "kernel", {}, [], UNUSED, UNUSED, "/tmp") == 7


def test_the_child_with_the_avoided_pid_exits_before_anything_else(tmp_path: Path) -> None:
    """Real forks: the child whose pid is the one to avoid ends at once with status 0, before
    it touches its descriptors or runs its role."""
    marker = tmp_path / "ran"
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            if os.getpid() != parent:  # spawn's child, told to avoid its own pid
                zygote._exit_if_avoided(os.getpid())
            marker.write_text("ran")
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert not marker.exists()
