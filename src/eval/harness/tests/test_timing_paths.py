"""The timing paths a healthy GPU run never takes: a worker that never closes its window, a
reference process that fails or dies, a driver without the host gate (timed.py, judge.py,
refprocess.py). CPU only: fakes stand in for the windows."""

import os
import signal
import socket

import pytest
import torch

from kforge_harness import judge, protocol, timed
from kforge_harness.judge import start as judge_start
from kforge_harness.protocol import HarnessError, KernelFailure, TaskFailure
from kforge_harness.refprocess import ReferenceProcess
from kforge_harness.window import GateUnavailable, WorkerGone

from jobs import judged


class GoneClock:
    gate = None

    def run(self, *args, **kwargs):
        raise WorkerGone("the window of run 3 never closed")


def side(name, trusted):
    s = object.__new__(timed.Side)
    s.name, s.trusted, s.clock, s.link = name, trusted, GoneClock(), None
    return s


def test_a_kernel_whose_window_never_closes_crashes_the_kernel():
    with pytest.raises(KernelFailure) as failure:
        side("the kernel", False).run("timed", 3, None, None, 0.1)
    assert failure.value.category == "crash"
    assert "never closed" in failure.value.summary
    assert failure.value.details == {"run": 3}


def test_a_null_run_or_the_reference_never_closing_is_the_harnesss_not_the_kernels():
    # A null run is harness code in either process, and the reference is trusted: neither
    # may become a kernel verdict.
    with pytest.raises(HarnessError, match="the kernel: the window of run 3 never closed"):
        side("the kernel", False).run("null", 3, None, None, 0.1)
    with pytest.raises(HarnessError, match="the reference: the window"):
        side("the reference", True).run("timed", 3, None, None, 0.1)


def reference_link():
    judge_end, ref_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return judge.ReferenceLink(judge_end, lambda: "reference timing"), ref_end


def test_a_reference_that_fails_is_a_task_failure_never_a_kernel_verdict():
    link, ref = reference_link()
    protocol.send(ref, {"type": "failure", "category": "runtime", "summary": "RuntimeError: boom"})
    with pytest.raises(TaskFailure, match="timing the reference in its own process failed: RuntimeError: boom"):
        link.receive("loaded")


def test_a_reference_out_of_memory_says_the_task_does_not_fit():
    link, ref = reference_link()
    protocol.send(ref, {"type": "failure", "category": "oom", "summary": "CUDA out of memory"})
    with pytest.raises(KernelFailure) as failure:
        link.receive("attached")
    assert failure.value.category == "oom"
    assert failure.value.summary.startswith("the task does not fit: timing the reference")
    assert failure.value.details["kernel_loaded"] is False


def test_a_reference_that_breaks_the_protocol_is_the_harnesss():
    link, ref = reference_link()
    protocol.send(ref, {"type": "armed", "run": 1})
    with pytest.raises(HarnessError, match="the reference's timing process: it sent 'armed' where 'done' was due"):
        link.receive("done", 1)


def test_a_reference_process_killed_midway_is_reaped_and_reported():
    proc = ReferenceProcess.fork()
    link = judge.ReferenceLink(proc.sock, lambda: "reference timing")
    os.kill(proc.pid, signal.SIGKILL)
    with pytest.raises(HarnessError, match="it ended without answering"):
        link.receive("hello")
    pid = proc.pid
    proc.close()
    assert proc.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left behind


def test_a_reference_process_let_go_unserved_exits_and_is_reaped():
    # A judge whose reference timing is cached never asks it to serve.
    proc = ReferenceProcess.fork()
    pid = proc.pid
    proc.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_without_a_gate_the_result_says_its_windows_hold_host_latency(monkeypatch):
    def no_gate():
        raise GateUnavailable("the CUDA driver has no stream wait on memory (test)")

    monkeypatch.setattr(judge_start, "HostGate", no_gate)
    run = judged()
    judge_start.open_gate(run)
    assert run.gate is None
    assert len(run.result["notes"]) == 1
    assert "timed windows are not gated (the CUDA driver has no stream wait on memory (test))" in \
        run.result["notes"][0]


class WideningSide:
    """A process for widen(): records its lent sets and runs; no gate (`gate_timeouts` the
    runs that would time out at a gate)."""

    def __init__(self, gate=None, gate_timeouts=0):
        self.inputs = [torch.zeros(256)]
        self.slots = [torch.zeros(256)]
        self.sets = [(self.inputs, self.slots)]
        self.clock = type("Clock", (), {"gate": gate, "timeouts": 0, "in_a_row": 0})()
        self.armed_s = timed.ARMED_FLOOR_S
        self.runs = []
        self.gate_timeouts = gate_timeouts
        self.refresh = lambda i, keep, input_sets, null=False: (lambda: None, None)

    def widen(self, count):
        self.sets = self.sets + [(self.inputs, self.slots)] * (count - len(self.sets))

    def input_sets(self, forwards):
        return [inputs for inputs, _ in self.sets[:forwards]]

    def run(self, mode, run, write, flush, armed_within_s, snapshot=None, gated=True, forwards=1):
        self.runs.append((run, gated, forwards))
        if gated and self.gate_timeouts:
            self.gate_timeouts -= 1
            self.clock.timeouts += 1


@pytest.fixture
def free_memory(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (64 << 30, 80 << 30))


def test_without_a_gate_wide_windows_are_used_without_probes(free_memory):
    sides = [WideningSide(), WideningSide()]
    forwards = timed.widen(sides, [0.01, 0.02], None, 0.0)
    assert forwards == 50  # 0.5 ms of 10 us forwards
    for s in sides:
        assert len(s.sets) == 50
        # One ungated warm-up window of 50 forwards; no gated probe (there is no gate to hold).
        assert s.runs == [(-50, False, 50)]


def test_a_probe_that_times_out_at_the_gate_keeps_one_forward_a_window(free_memory):
    sides = [WideningSide(gate=object()), WideningSide(gate=object(), gate_timeouts=1)]
    armed = [s.armed_s for s in sides]
    assert timed.widen(sides, [0.01, 0.02], None, 0.0) == 1
    assert [s.armed_s for s in sides] == armed  # the one-forward wait comes back
    # The probes are not timed runs: their timeouts do not count against the kernel.
    assert [s.clock.timeouts for s in sides] == [0, 0]
    assert [r for r in sides[1].runs if r[1]] == [(-60, True, 50), (-61, True, 50)]
