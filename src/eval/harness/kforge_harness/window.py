"""The judge's own clock on a worker's forward (docs/architecture.md, "Timing").

A timed run is a window on the judge's CUDA stream, around work queued in another process:

    judge:   [gate] pre | inputs <- staged | L2 thrash | A:=n at | ~end e2 | snapshot
    worker:                                   ~A | forward | outputs -> slots | end:=n

`X:=n` is a stream write of the run's number n into flag X, `~X` a stream wait until X
holds at least n (CUDA stream memory operations on a buffer the judge lends; interprocess
events would need the judge's /dev/shm inside the sandbox). The run's window is pre to e2:
the forward, with cold inputs as KernelBench has them, and the copy of its outputs into the
judge's slots, which a null run (timed.py) copies alike. Both ends are the judge's timing
events on the judge's stream, so nothing the worker reports enters a score:

- The gate (a stream wait on a pinned host word) holds the judge's stream until the worker
  says it has queued all of its work ("armed"): neither process's host latency is inside
  the window, only GPU work.
- The window opens before the judge writes the run's inputs: nothing the worker computes
  from them can precede it.
- Contexts of two processes time-slice the GPU (no MPS): while the worker's work runs, the
  judge's stream cannot, and it closes the window when the worker's context goes idle after
  `end` (or at the end of a time slice, ~2 ms). The judge's stream has nothing runnable
  between A and `end`: an earlier version let it run a step as soon as the worker's work
  started (an `early` flag), which made the GPU time-slice the two contexts during every
  forward and cost forwards longer than a time slice ~10% (13% on KernelBench's level 2
  GEMMs, docs/benchmarks.md "The reference against KernelBench's timer"), in kforge's
  figures alone. Writing `end` early gains nothing: the close still waits for the worker's
  context to idle or yield, and a forward longer than a time slice has not written its
  slots when the judge's snapshot (on the same stream, right after e2) reads them on a
  checked run.
- A worker that writes a flag far ahead (or never) leaves the judge's window without the
  worker's context in it, which the tail (A to e2, at least two context switches) shows
  (timed.py refuses such a run); one that never writes `end` is a crash after a deadline.

Measured on an H200 with this ordering built on interprocess events (docs/benchmarks.md,
"Timing you can trust"): a null window is 0.303 ms with a 1.5 us 10-90% spread; a
5/20/100/1000 us spin measures 4.5/19.3/99.1/995 us above it.
"""

from __future__ import annotations

import ctypes
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple

from .device import thrash_l2
from .exchange import Lender, cuda_driver

if TYPE_CHECKING:
    import numpy
    import torch

    from .protocol import Message


class Link(Protocol):
    """The judge's channel to the process whose forwards it times (judge.WorkerLink)."""

    def send(self, request: Mapping[str, object], fds: Tuple[int, ...] = ()) -> None: ...

    def ready(self, timeout_s: float) -> bool: ...

    def receive(self, expected: str, run: Optional[int] = None) -> Message: ...


# libcuda, and its stream wait and write functions (ctypes function pointers: `Any`).
Driver = Tuple["ctypes.CDLL", Any, Any]
_driver: List[Driver] = []


def driver() -> Driver:
    """libcuda (exchange.py loads it) with its stream memory operations typed, once per
    process: (library, wait, write)."""
    if not _driver:
        lib = cuda_driver()
        wait = getattr(lib, "cuStreamWaitValue32_v2", None) or lib.cuStreamWaitValue32
        write = getattr(lib, "cuStreamWriteValue32_v2", None) or lib.cuStreamWriteValue32
        for f in (wait, write):
            f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        _driver.append((lib, wait, write))
    return _driver[0]


def wait_value(stream: torch.cuda.Stream, address: int, value: int) -> None:
    """Holds `stream` until the 32-bit word at `address` is >= value (cyclically)."""
    status = driver()[1](ctypes.c_void_p(stream.cuda_stream), address, value & 0x7FFFFFFF, 0)  # _GEQ
    if status:
        raise RuntimeError("cuStreamWaitValue32 failed with CUDA driver error %d" % status)


def write_value(stream: torch.cuda.Stream, address: int, value: int) -> None:
    """Writes `value` to the word at `address` once `stream` reaches this point."""
    status = driver()[2](ctypes.c_void_p(stream.cuda_stream), address, value & 0x7FFFFFFF, 0)
    if status:
        raise RuntimeError("cuStreamWriteValue32 failed with CUDA driver error %d" % status)


# The flags' places in their lent buffer (int32 indices, 64 bytes apart).
FLAG_A, FLAG_END = 0, 16
FLAG_WORDS = 32


class GateUnavailable(RuntimeError):
    """The driver refused a stream wait on host memory: windows are timed without a gate."""


class HostGate:
    """Holds the judge's stream at a point until the judge's CPU releases it."""

    def __init__(self) -> None:
        import torch

        self.flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)
        self.word: numpy.ndarray[Any, Any] = self.flag.numpy()
        self.count = 0
        self.held = False
        try:
            lib = driver()[0]
            address = ctypes.c_uint64()
            get = lib.cuMemHostGetDevicePointer_v2
            get.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
            status = get(ctypes.byref(address), ctypes.c_void_p(self.flag.data_ptr()), 0)
        except (OSError, AttributeError) as e:
            raise GateUnavailable("the CUDA driver has no stream wait on memory (%s)" % e)
        if status:
            raise GateUnavailable("cuMemHostGetDevicePointer failed with CUDA driver error %d" % status)
        self.address = address.value
        self.probe()

    def probe(self) -> None:
        """The gate must hold: an event behind it stays pending until released."""
        import time

        import torch

        stream = torch.cuda.current_stream()
        behind = torch.cuda.Event()  # type: ignore[no-untyped-call]
        self.hold(stream)
        behind.record(stream)
        time.sleep(0.002)
        holds = not behind.query()  # type: ignore[no-untyped-call]
        self.release()
        behind.synchronize()
        if not holds:
            raise GateUnavailable("a stream wait on host memory did not hold the stream")

    def hold(self, stream: torch.cuda.Stream) -> None:
        self.count += 1
        # The word counts releases (waits are >=), so it never needs a reset.
        try:
            wait_value(stream, self.address, self.count)
        except RuntimeError as e:
            self.count -= 1
            raise GateUnavailable(str(e))
        self.held = True

    def release(self) -> None:
        self.word[0] = self.count & 0x7FFFFFFF
        self.held = False


class Run:
    """One timed run as the judge measured it."""

    __slots__ = ("window_ms", "tail_ms", "queue_ms", "done", "snapshot")

    def __init__(self, window_ms: float, tail_ms: float, queue_ms: float, done: Message, snapshot: Any) -> None:
        self.window_ms = window_ms  # pre to e2
        self.tail_ms = tail_ms  # at to e2: the worker's part, at least two context switches
        # The judge's wall time from asking to "armed": the worker's host time to queue the
        # forward (plus the exchange, which the null runs measure).
        self.queue_ms = queue_ms
        self.done = done
        self.snapshot = snapshot


# After this many runs in a row whose worker did not arm in time (a forward that waits for
# the GPU from the host, which the gate holds), the side's remaining runs go ungated.
UNGATE_AFTER = 3


class WorkerGone(RuntimeError):
    """The worker never wrote the flag that closes a window."""


class WindowClock:
    """Times one worker's forwards: the flags lent to it and the judge's timing events."""

    def __init__(self, gate: Optional[HostGate], lender: Lender) -> None:
        import torch

        self.gate = gate
        (self.flags,), (self.flags_desc,), _ = lender.lend([((FLAG_WORDS,), torch.int32)])
        self.flags.zero_()
        base = self.flags.data_ptr()
        self.address = {name: base + 4 * index for name, index in
                        (("a", FLAG_A), ("end", FLAG_END))}
        self.pre, self.at, self.e2 = (torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                                      for _ in range(3))
        self.seq = 0
        self.timeouts = 0
        self.in_a_row = 0

    def request(self) -> Dict[str, Any]:
        return {"op": "clock", "flags": self.flags_desc}

    def gating(self) -> bool:
        return self.gate is not None and self.in_a_row < UNGATE_AFTER

    def run(self, link: Link, mode: str, run: int, write_inputs: Callable[[], object], flush: Optional[torch.Tensor],
            armed_within_s: Optional[float], snapshot: Optional[Callable[[], Any]] = None, gated: bool = True,
            deadline_s: float = 60.0, forwards: int = 1) -> Run:
        """One run of `forwards` forwards: returns a Run. `write_inputs()` queues the run's
        inputs on the judge's stream; `snapshot()` (checked runs) copies the slots on it
        right after the close. `armed_within_s` (how long the worker has to say "armed") may
        be None for an ungated run alone."""
        import torch

        stream = torch.cuda.current_stream()
        torch.cuda.synchronize()
        self.seq += 1
        gated = gated and self.gating()
        in_time = True
        if gated:
            assert self.gate is not None  # gating()
            assert armed_within_s is not None  # every gated run is given its time to arm
            self.gate.hold(stream)
        try:
            self.pre.record(stream)
            write_inputs()
            if flush is not None:
                thrash_l2(flush)
            write_value(stream, self.address["a"], self.seq)
            self.at.record(stream)
            link.send({"op": "forward", "mode": mode, "run": run, "seq": self.seq, "forwards": forwards})
            sent = time.perf_counter()
            in_time = link.ready(armed_within_s) if gated and armed_within_s is not None else True
            if in_time:
                link.receive("armed", run)
                queued = time.perf_counter() - sent
                self.close(stream)  # queued before the gate opens: no host latency inside
        finally:
            if gated:
                assert self.gate is not None
                self.gate.release()
        if not in_time:
            # The worker had not queued its work: the gate opens and the window runs on with
            # the worker's host time inside it (only this side's figure suffers).
            self.timeouts += 1
            self.in_a_row += 1
            link.receive("armed", run)
            queued = time.perf_counter() - sent
            self.close(stream)
        elif gated:
            self.in_a_row = 0
        copy = snapshot() if snapshot is not None else None
        done = link.receive("done", run)
        self.wait_closed(deadline_s)
        return Run(self.pre.elapsed_time(self.e2), self.at.elapsed_time(self.e2), queued * 1e3, done, copy)

    def close(self, stream: torch.cuda.Stream) -> None:
        wait_value(stream, self.address["end"], self.seq)
        self.e2.record(stream)

    def wait_closed(self, deadline_s: float) -> None:
        """The close, within a deadline: a worker that said "done" without writing `end`
        would hold the judge's stream for good. The judge then writes the flags itself from
        another stream (its stream moves on) and the run is the worker's crash."""
        import torch

        started = time.time()
        while not self.e2.query():  # type: ignore[no-untyped-call]
            if time.time() - started > deadline_s:
                side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
                write_value(side, self.address["end"], self.seq)
                side.synchronize()
                raise WorkerGone("the window of run %d never closed: the process said its forward was done "
                                 "but never wrote the flag that ends it" % self.seq)
            time.sleep(0.0002)
