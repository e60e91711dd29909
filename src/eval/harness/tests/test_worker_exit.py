"""When a worker's end explains a `crash` verdict (server.worker_death_explains)."""

import signal

from kforge_harness.server import worker_death_explains


def test_a_worker_that_died_on_its_own_explains_the_crash():
    assert worker_death_explains({"status": -signal.SIGSEGV, "killed_on_request": False})
    assert worker_death_explains({"status": -signal.SIGKILL, "killed_on_request": False})  # the host's OOM killer
    assert worker_death_explains({"status": 3})


def test_the_servers_own_kill_does_not_replace_the_judges_reason():
    # The judge caught the kernel (a forged output) and ended; the worker, still alive, was
    # killed on the server's request: the judge's reason stands.
    assert not worker_death_explains({"status": -signal.SIGKILL, "killed_on_request": True})


def test_a_kill_asked_after_the_worker_had_died_of_another_signal_keeps_that_signal():
    assert worker_death_explains({"status": -signal.SIGSEGV, "killed_on_request": True})


def test_an_ordinary_exit_or_no_word_explains_nothing():
    for worker in (None, {}, {"status": None}, {"status": 0}, {"status": 70}):
        assert not worker_death_explains(worker)
