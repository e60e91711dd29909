"""The timing protocol's diagnostic switches (knobs.py): off unless set to 1, and a timing
taken with any set is never cached as a task's baseline."""

from __future__ import annotations

import pytest

from kforge_harness import knobs, timed, timing

from jobs import job


def test_no_switch_is_on_unless_set_to_1(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in knobs.KNOBS:
        monkeypatch.delenv(name, raising=False)
    assert knobs.active() == []
    monkeypatch.setenv("KFORGE_DIAG_NO_GATE", "yes")
    assert not knobs.on("KFORGE_DIAG_NO_GATE")
    monkeypatch.setenv("KFORGE_DIAG_NO_GATE", "1")
    assert knobs.active() == ["KFORGE_DIAG_NO_GATE"]
    with pytest.raises(KeyError):
        knobs.on("KFORGE_DIAG_UNKNOWN")


def test_relocation_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KFORGE_DIAG_NO_RELOCATE", raising=False)
    assert timed.relocating(timed.RELOCATE_EVERY)
    monkeypatch.setenv("KFORGE_DIAG_NO_RELOCATE", "1")
    assert not timed.relocating(timed.RELOCATE_EVERY)


def test_a_diagnostic_timing_has_its_own_cache_key(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = job().settings.__dict__ | {"precision": "strict"}
    args = ("source", {"name": "GPU", "uuid": "u"}, {"torch": "2"}, [["in[0]", [4], "float32"]], spec)
    for name in knobs.KNOBS:
        monkeypatch.delenv(name, raising=False)
    plain = timing.baseline_key(*args)
    monkeypatch.setenv("KFORGE_DIAG_SAME_INPUTS", "1")
    assert timing.baseline_key(*args) != plain


def test_switches_given_by_the_server_replace_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge in the tasks' sandbox has an allow-listed environment without the switches: the
    server reads them and gives them in the job (judgeproc.py); unknown names are dropped."""
    from kforge_harness import knobs

    monkeypatch.setenv("KFORGE_DIAG_NO_GATE", "1")
    monkeypatch.setattr(knobs, "_given", None)
    assert knobs.on("KFORGE_DIAG_NO_GATE")
    knobs.give(["KFORGE_DIAG_GUARD_TRACE", "KFORGE_DIAG_NOT_A_SWITCH"])
    assert not knobs.on("KFORGE_DIAG_NO_GATE")
    assert knobs.on("KFORGE_DIAG_GUARD_TRACE")
    assert knobs.active() == ["KFORGE_DIAG_GUARD_TRACE"]
