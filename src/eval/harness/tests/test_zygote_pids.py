"""A zygote forks the evaluation's process with a pid other than the one the other sandbox's
process has: legacy CUDA IPC refuses a handle whose exporter's pid equals the importer's
(zygote.spawn_avoiding)."""

import os

from kforge_harness import zygote


def test_a_child_that_gets_the_avoided_pid_is_replaced(monkeypatch):
    pids = iter([41, 42])
    reaped = []
    monkeypatch.setattr(zygote, "spawn", lambda *args: next(pids))
    monkeypatch.setattr(os, "waitpid", lambda pid, flags: reaped.append(pid) or (pid, 0))
    assert zygote.spawn_avoiding(41, "kernel", {}, [], None, None, "/tmp") == 42
    assert reaped == [41]


def test_without_a_pid_to_avoid_the_first_child_is_kept(monkeypatch):
    monkeypatch.setattr(zygote, "spawn", lambda *args: 7)
    monkeypatch.setattr(os, "waitpid", lambda pid, flags: (_ for _ in ()).throw(AssertionError("reaped")))
    assert zygote.spawn_avoiding(None, "kernel", {}, [], None, None, "/tmp") == 7
    assert zygote.spawn_avoiding(3, "kernel", {}, [], None, None, "/tmp") == 7


def test_the_child_with_the_avoided_pid_exits_before_anything_else(tmp_path):
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
