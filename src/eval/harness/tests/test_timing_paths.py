"""The timing paths a healthy GPU run never takes: a worker that never closes its window, a
reference process that fails or dies, a driver without the host gate (timed.py, judge.py,
refprocess.py). CPU only: fakes stand in for the windows."""

from __future__ import annotations

import os
import signal
import socket
from typing import TYPE_CHECKING, Any, Callable, List, NoReturn, Optional, Tuple, cast

import pytest
import torch

from kforge_harness import judge, protocol, timed
from kforge_harness.judge import start as judge_start
from kforge_harness.protocol import HarnessError, KernelFailure, TaskFailure
from kforge_harness.refprocess import ReferenceProcess
from kforge_harness.window import GateUnavailable, Run, WindowClock, WorkerGone

from jobs import judged

if TYPE_CHECKING:
    from kforge_harness.judge.links import WorkerLink


class GoneClock(WindowClock):
    def __init__(self) -> None:
        self.gate = None

    def run(self, *args: Any, **kwargs: Any) -> Run:
        raise WorkerGone("the window of run 3 never closed")


def side(name: str, trusted: bool) -> timed.Side:
    s = object.__new__(timed.Side)
    # No link: the clock fails before anything is sent.
    s.name, s.trusted, s.clock, s.link = name, trusted, GoneClock(), cast("WorkerLink", None)
    return s


def no_inputs() -> None:
    pass


def test_a_kernel_whose_window_never_closes_crashes_the_kernel() -> None:
    with pytest.raises(KernelFailure) as failure:
        side("the kernel", False).run("timed", 3, no_inputs, None, 0.1)
    assert failure.value.category == "crash"
    assert "never closed" in failure.value.summary
    assert failure.value.details == {"run": 3}


def test_a_null_run_or_the_reference_never_closing_is_the_harnesss_not_the_kernels() -> None:
    # A null run is harness code in either process, and the reference is trusted: neither
    # may become a kernel verdict.
    with pytest.raises(HarnessError, match="the kernel: the window of run 3 never closed"):
        side("the kernel", False).run("null", 3, no_inputs, None, 0.1)
    with pytest.raises(HarnessError, match="the reference: the window"):
        side("the reference", True).run("timed", 3, no_inputs, None, 0.1)


def reference_link() -> Tuple[judge.ReferenceLink, socket.socket]:
    judge_end, ref_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return judge.ReferenceLink(judge_end, lambda: "reference timing"), ref_end


def test_a_reference_that_fails_is_a_task_failure_never_a_kernel_verdict() -> None:
    link, ref = reference_link()
    protocol.send(ref, {"type": "failure", "category": "runtime", "summary": "RuntimeError: boom"})
    with pytest.raises(TaskFailure, match="timing the reference in its own process failed: RuntimeError: boom"):
        link.receive("loaded")


def test_a_reference_out_of_memory_says_the_task_does_not_fit() -> None:
    link, ref = reference_link()
    protocol.send(ref, {"type": "failure", "category": "oom", "summary": "CUDA out of memory"})
    with pytest.raises(KernelFailure) as failure:
        link.receive("attached")
    assert failure.value.category == "oom"
    assert failure.value.summary.startswith("the task does not fit: timing the reference")
    assert failure.value.details["kernel_loaded"] is False


def test_a_reference_that_breaks_the_protocol_is_the_harnesss() -> None:
    link, ref = reference_link()
    protocol.send(ref, {"type": "armed", "run": 1})
    with pytest.raises(HarnessError, match="the reference's timing process: it sent 'armed' where 'done' was due"):
        link.receive("done", 1)


def test_a_reference_process_killed_midway_is_reaped_and_reported() -> None:
    proc = ReferenceProcess.fork()
    pid, sock = proc.pid, proc.sock
    assert pid is not None and sock is not None  # a fresh fork's
    link = judge.ReferenceLink(sock, lambda: "reference timing")
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(HarnessError, match="it ended without answering"):
        link.receive("hello")
    proc.close()
    assert proc.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left behind


def test_a_reference_process_let_go_unserved_exits_and_is_reaped() -> None:
    # A judge whose reference timing is cached never asks it to serve.
    proc = ReferenceProcess.fork()
    pid = proc.pid
    assert pid is not None  # a fresh fork's
    proc.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_without_a_gate_the_result_says_its_windows_hold_host_latency(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_gate() -> NoReturn:
        raise GateUnavailable("the CUDA driver has no stream wait on memory (test)")

    monkeypatch.setattr(judge_start, "HostGate", no_gate)
    run = judged()
    judge_start.open_gate(run)
    assert run.gate is None
    assert len(run.result["notes"]) == 1
    assert "timed windows are not gated (the CUDA driver has no stream wait on memory (test))" in \
        run.result["notes"][0]


class WideningSide(timed.Side):
    """A process for widen(): records its lent sets and runs; no gate (`gate_timeouts` the
    runs that would time out at a gate)."""

    def __init__(self, gate: object = None, gate_timeouts: int = 0) -> None:
        self.inputs = [torch.zeros(256)]
        self.slots = [torch.zeros(256)]
        self.sets = [(self.inputs, self.slots)]
        self.clock = type("Clock", (), {"gate": gate, "timeouts": 0, "in_a_row": 0})()
        self.armed_s = timed.ARMED_FLOOR_S
        self.runs: List[Tuple[int, bool, int]] = []
        self.gate_timeouts = gate_timeouts
        self.refresh = lambda i, keep, input_sets, null=False: (lambda: None, None)

    def widen(self, count: int) -> None:
        self.sets = self.sets + [(self.inputs, self.slots)] * (count - len(self.sets))

    def input_sets(self, forwards: int) -> List[Any]:
        return [inputs for inputs, _ in self.sets[:forwards]]

    def run(self, mode: str, run: int, write_inputs: Callable[..., object], flush: Optional[torch.Tensor],
            armed_within_s: Optional[float], snapshot: Optional[Callable[[], Any]] = None, gated: bool = True,
            forwards: int = 1) -> Run:
        self.runs.append((run, gated, forwards))
        if gated and self.gate_timeouts:
            self.gate_timeouts -= 1
            self.clock.timeouts += 1
        return Run(0.0, 0.0, 0.0, {}, None)  # widen() reads nothing of it


@pytest.fixture
def free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (64 << 30, 80 << 30))


def test_without_a_gate_wide_windows_are_used_without_probes(free_memory: None) -> None:
    sides = [WideningSide(), WideningSide()]
    forwards = timed.widen(sides, [0.01, 0.02], None, 0.0)
    assert forwards == 50  # 0.5 ms of 10 us forwards
    for s in sides:
        assert len(s.sets) == 50
        # One ungated warm-up window of 50 forwards; no gated probe (there is no gate to hold).
        assert s.runs == [(-50, False, 50)]


def test_a_probe_that_times_out_at_the_gate_keeps_one_forward_a_window(free_memory: None) -> None:
    sides = [WideningSide(gate=object()), WideningSide(gate=object(), gate_timeouts=1)]
    armed = [s.armed_s for s in sides]
    assert timed.widen(sides, [0.01, 0.02], None, 0.0) == 1
    assert [s.armed_s for s in sides] == armed  # the one-forward wait comes back
    # The probes are not timed runs: their timeouts do not count against the kernel.
    assert [s.clock.timeouts for s in sides] == [0, 0]
    assert [r for r in sides[1].runs if r[1]] == [(-60, True, 50), (-61, True, 50)]
