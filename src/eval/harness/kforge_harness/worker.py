"""The worker: the only process that runs the candidate's code. Untrusted by construction.

It is forked by the zygote inside the sandbox, attaches the buffers the judge lends it,
imports the kernel, and answers the judge's requests one at a time. It never sees the task
file, the reference model or the reference's outputs, and nothing it says can make a kernel
pass: the judge reads its outputs from buffers the judge owns and compares them itself.
Everything here can be patched by the kernel once it is imported, which is why the judge
calibrates the timing path before the import and times every run with its own events, on its
own stream, around this process's work (window.py).
"""

from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import compiled, guard, launchpath, messages, protocol, seal
from .errors import KernelContext, classify
from .precision import apply_policy, settings
from .exchange import Borrower
from .loading import load_module, seed_everything
from .memory import RELOCATE_LIMIT_BYTES, RELOCATE_SPACER_BYTES, storages_bytes
from .tensors import describe, flatten_outputs, model_tensors

if TYPE_CHECKING:
    import mmap

    import torch

    from .protocol import Message

# What a request's handler (Worker.op_*) returns: False ends the process's service.
Handled = Optional[bool]

# Failure categories a worker may report about its own kernel.
# (static_check: the run-time guard refused what the kernel did, guard.py.)
WORKER_CATEGORIES = {"syntax", "import", "compile", "out_of_resources", "runtime", "cuda_error", "oom", "static_check"}


class Worker:
    # Set by op_clock: the flags the judge lends and their addresses (A, end).
    flags: torch.Tensor
    clock: List[int]
    # What null runs return (null_outputs), made on the first.
    null_scratch: Any

    def __init__(self, sock: socket.socket, job: Dict[str, Any]) -> None:
        self.sock = sock
        self.job = job  # the zygote's job for this process (JSON from the judge)
        self.device: str = job["device"]
        self.gpu = self.device != "cpu"
        self.borrower = Borrower(self.device)
        self.model: Any = None  # the kernel's ModelNew instance (or a task's Model): anything at all
        self.inputs: Any = None  # tensor trees the judge lends (exchange.py)
        self.outputs: Any = None
        self.sets: List[Tuple[Any, Any]] = []
        # jit_kernels: the load request's (a worker can be started before its kernel is known)
        self.ctx: KernelContext = {"interpret": not self.gpu, "kernel_file": None, "jit_kernels": []}
        # the driver's primary context until torch attaches
        self.context: Optional[launchpath.Context] = None
        self.context_error: Optional[str] = None
        self.cuda_attached = False
        self.relocated: List[object] = []  # what op_relocate moved away from, kept alive
        self.seal: Optional[Callable[[bytes], bytes]] = None  # seals every message once the kernel is imported
        # what the kernel changed of the harness's code (guard.snapshot)
        self.changed: Optional[Callable[[], List[str]]] = None
        # the audit's entry points (audit.audited_forward, audit_gpu.gpu_time), taken before the import
        self.audited_forward: Optional[Callable[..., Tuple[Any, Dict[str, Any]]]] = None
        self.gpu_time: Optional[Callable[..., Dict[str, Any]]] = None
        self.launches = compiled.Launches()  # the audited forwards' Triton launches (op_precision)
        # on the CPU, their reading started after an audited forward (compiled.start)
        self.reading: Optional[compiled.Pending] = None
        self.source: Optional[str] = None

    def reply(self, message: Mapping[str, object]) -> None:
        data = protocol.payload(message)
        if self.seal is not None:
            data = self.seal(data)
        self.sock.sendall(protocol.frame(data), socket.MSG_NOSIGNAL)

    def refused_at_run_time(self, text: str) -> None:
        """The guard's verdict on the kernel's code (guard.py): the process ends after it."""
        self.reply(messages.Failure(type="failure", category="static_check", summary=text))

    def harness_changed(self) -> Optional[messages.Failure]:
        """A failure to report when the kernel replaced a function or class the harness relies on,
        else None."""
        names = self.changed() if self.changed is not None else []
        if not names:
            return None
        return messages.Failure(
            type="failure", category="static_check",
            summary="the kernel's process replaced the harness's own code (%s%s): refused at run time"
                    % (", ".join(names[:3]), ", ..." if len(names) > 3 else ""))

    def protect(self, request: Message, kernel_file: str) -> None:
        """Before the kernel's first line: the seal of every later message, the harness's entry
        points and a note of its code (held by this instance alone), and the run-time guard."""
        from .audit import audited_forward, gpu_time

        key = request.pop("seal", None)
        if key:
            self.seal = seal.signer(bytes.fromhex(key))
        self.audited_forward, self.gpu_time = audited_forward, gpu_time
        mode = request.get("guard")
        if mode:
            self.changed = guard.snapshot()
            guard.install(kernel_file, self.refused_at_run_time, trace=guard.to_log if mode == "trace" else None)

    def failure(self, exc: BaseException, stage: str) -> None:
        f = classify(exc, stage, self.ctx)
        self.reply(messages.Failure(type="failure", category=f.category, summary=f.summary, message=f.message,
                                    details=f.details))

    def serve(self) -> None:
        if self.gpu:
            # The primary context through the driver API, not torch: the judge may have it
            # drawn again (op_draw, launchpath.py) before torch attaches to it.
            import torch  # its device names only: CUDA stays untouched until attach_cuda

            try:
                self.context = launchpath.Context(torch.device(self.device).index or 0)
            except launchpath.Unavailable as e:
                self.context, self.context_error = None, str(e)
        if self.job.get("precision"):
            apply_policy(self.job["precision"])  # the policy's settings, before any task or kernel code
        self.reply(messages.Hello(type="hello"))
        while True:
            request, fds = protocol.recv_message(self.sock)
            if request is None:
                return
            if request.get("op") == "exit":
                self.reply(messages.Bye(type="bye"))
                return
            op = request.get("op")
            handler = getattr(self, "op_" + str(op), None)
            if handler is None:
                self.reply(messages.Error(type="error", error="unknown op %r" % op))
                return
            if op != "draw":
                self.attach_cuda()
            # The judge lends memory with the message that needs it; mapped (and closed) here.
            mappings = self.borrower.map_fds(fds)
            if handler(request, mappings) is False:
                return

    def attach_cuda(self) -> None:
        """torch's CUDA, on the primary context as last drawn (once)."""
        if self.gpu and not self.cuda_attached:
            import torch

            torch.cuda.set_device(self.device)
            torch.empty(1, device=self.device)  # the context the IPC handles open into
            self.cuda_attached = True

    def op_draw(self, request: Message, mappings: Sequence[mmap.mmap]) -> None:
        """Draws the process's CUDA context until its launch path is within the tolerance of
        the floor (launchpath.draw), before torch or any model uses it. The judge asks
        before lending buffers and before the kernel is imported."""
        if self.cuda_attached:
            record = {"error": "torch already uses CUDA in this process"}
        elif self.context is None:
            record = {"error": self.context_error or "no CUDA context"}
        else:
            try:
                record = launchpath.draw(self.context, request.get("floor_ms"),
                                         float(request.get("tolerance") or launchpath.DEFAULT_TOLERANCE),
                                         int(request.get("max_draws") or launchpath.DEFAULT_MAX_DRAWS))
            except launchpath.Unavailable as e:
                record = {"error": str(e)}
        # The answer first: torch attaches while the judge allocates what it lends next.
        self.reply(dict(record, type="drawn"))
        self.attach_cuda()

    def op_attach(self, request: Message, mappings: Sequence[mmap.mmap]) -> None:
        self.inputs = self.borrower.attach_tree(request["inputs"], mappings)
        self.outputs = self.borrower.attach_tree(request["outputs"], mappings)
        self.sets = [(self.inputs, self.outputs)]
        self.reply(messages.Attached(type="attached"))

    def op_rehearse(self, request: Message, mappings: Sequence[mmap.mmap]) -> None:
        """The harness's checks once on its own model, before the kernel is known (rehearsal.py)."""
        from .rehearsal import rehearse_worker

        self.reply(messages.Rehearsed(type="rehearsed", record=rehearse_worker(self, request)))

    def op_sets(self, request: Message, mappings: Sequence[mmap.mmap]) -> None:
        """More input sets and output slots for timed windows of several forwards (timed.py):
        set k's forward reads set k's inputs and its outputs go into set k's slots."""
        extra = [(self.borrower.attach_tree(s["inputs"], mappings), self.borrower.attach_tree(s["outputs"], mappings))
                 for s in request["sets"]]
        # Added to the sets lent before: the judge lends only the ones a wider window needs.
        self.sets = self.sets + extra
        self.reply(messages.SetsSet(type="sets_set", sets=len(self.sets)))

    def op_load(self, request: Message, mappings: Sequence[mmap.mmap]) -> Handled:
        import torch

        init = self.borrower.attach_tree(request["init_inputs"], mappings)
        # The kernel's source comes with the request: this process writes its only copy into
        # its own directory (Triton reads kernels from source files), before any of it runs.
        kernel_file = os.path.join(self.job["workdir"], "kernel.py")
        fd = os.open(kernel_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(request["source"])
        self.ctx["kernel_file"] = kernel_file
        self.ctx["jit_kernels"] = list(request.get("jit_kernels") or [])
        self.source = request["source"]
        if not self.gpu:
            interpret_autotune()
        self.protect(request, kernel_file)
        try:
            kernel = load_module(kernel_file, "kforge_kernel")
        except SystemExit as e:
            self.reply(messages.Failure(type="failure", category="import",
                                        summary="the kernel called sys.exit(%s) while being imported" % (e.code,)))
            return False
        except BaseException as e:  # noqa: BLE001 -- everything the candidate raises is classified
            self.failure(e, "import")
            return False
        cls = getattr(kernel, "ModelNew", None)
        if not isinstance(cls, type):
            self.reply(messages.Failure(type="failure", category="import",
                                        summary="the kernel module has no class ModelNew after import"))
            return False
        try:
            seed_everything(int(request["seed"]))
            model = cls(*init)
            if isinstance(model, torch.nn.Module):
                model = model.to(self.device)
        except BaseException as e:  # noqa: BLE001
            self.failure(e, "build")
            return False
        self.model = model
        state = []
        if isinstance(model, torch.nn.Module):
            state = [[name, list(t.shape), str(t.dtype).replace("torch.", "")]
                     for name, t in model.state_dict().items()]
        changed = self.harness_changed()
        if changed:
            self.reply(changed)
            return False
        # The precision settings in force once the module ran its import (a task or kernel may
        # set them): the reference's go into the timing's environment.
        tf32 = settings()
        self.reply(messages.Loaded(type="loaded", state=state, module=isinstance(model, torch.nn.Module), tf32=tf32))
        return None

    def op_params(self, request: Message, mappings: Sequence[mmap.mmap]) -> None:
        import torch

        state = self.model.state_dict()
        with torch.no_grad():
            for name, desc in request["assign"]:
                state[name].copy_(self.borrower.attach(desc, mappings))
        self.reply(messages.ParamsSet(type="params_set"))

    def op_relocate(self, request: Message, mappings: Sequence[mmap.mmap]) -> Handled:
        """The model's parameters and buffers to fresh memory, a spacer of a random size
        before them, and the allocator's free blocks back to the driver, then one forward
        (untimed) so that its temporaries are allocated again elsewhere too. A forward of
        small launches runs up to 4% faster or slower depending on where its weights and
        temporaries lie (docs/benchmarks.md, round 4); the judge asks both models' processes
        alike every few timed runs, so each timing spans several placements instead of one.
        The old copies stay alive (anything may hold them); models over RELOCATE_LIMIT_BYTES
        are not copied."""
        import random

        import torch

        moved = 0
        try:
            if self.gpu and isinstance(self.model, torch.nn.Module):
                tensors = [t for t in model_tensors(self.model) if t.is_cuda]
                if storages_bytes(tensors) <= RELOCATE_LIMIT_BYTES:
                    rng = random.Random(int(request.get("nonce") or 0))
                    spacer = rng.randint(1, RELOCATE_SPACER_BYTES // 512) * 512
                    self.relocated.append(torch.empty(spacer, dtype=torch.uint8, device=self.device))
                    moved = relocate_tensors(tensors, self.relocated)
            if self.gpu:
                torch.cuda.empty_cache()
                with torch.no_grad():
                    self.model(*self.inputs)
                torch.cuda.synchronize()
        except BaseException as e:  # noqa: BLE001
            self.failure(e, "forward")
            return False
        self.reply(messages.Relocated(type="relocated", bytes=moved))
        return None

    def op_precision(self, request: Message, mappings: Sequence[mmap.mmap]) -> None:
        """What the audited forwards' Triton launches compute in, from their compiled code
        (compiled.py): the judge reads it (precision.with_compiled)."""
        try:
            reading = compiled.read(self.launches, self.source or "", self.job["workdir"], self.gpu, self.reading)
            self.reading = None
        except Exception as e:  # noqa: BLE001 -- the judge then keeps the source's reading, and says why
            reading = {"kernels": [], "errors": ["%s: %s" % (type(e).__name__, str(e)[:300])]}
        self.reply(messages.PrecisionReading(type="precision", reading=reading))

    def op_clock(self, request: Message, mappings: Sequence[mmap.mmap]) -> None:
        """The flags the judge lends to order timed runs (window.py)."""
        from .window import FLAG_A, FLAG_END

        self.flags = self.borrower.attach(request["flags"], mappings)
        base = self.flags.data_ptr()
        self.clock = [base + 4 * flag for flag in (FLAG_A, FLAG_END)]
        self.reply(messages.ClockSet(type="clock_set"))

    def op_forward(self, request: Message, mappings: Sequence[mmap.mmap]) -> Handled:
        import torch

        mode = request["mode"]
        if mode in ("timed", "null"):
            return self.windowed(request)
        record = None
        try:
            with torch.no_grad():
                if mode == "gpu_time":
                    out = None
                    assert self.gpu_time is not None  # protect() took it, before the load
                    record = self.gpu_time(self.model, self.inputs, self.ctx["jit_kernels"])
                elif mode == "audit":
                    assert self.audited_forward is not None  # protect() took it, before the load
                    out, record = self.audited_forward(self.model, self.inputs, self.device, self.ctx["jit_kernels"],
                                                  atol=self.job.get("atol", 1e-2), rtol=self.job.get("rtol", 1e-2),
                                                  seed=int(request.get("nonce") or 0),
                                                  harness=[t for _, t in flatten_outputs(self.outputs)
                                                           if isinstance(t, torch.Tensor)],
                                                  launches=self.launches)
                else:
                    out = self.model(*self.inputs)
            if self.gpu:
                torch.cuda.synchronize()  # every stream: work put on a side stream must be done
            copied = self.copy_outputs(out) if mode != "gpu_time" else True
            description = describe(out) if mode != "gpu_time" else None
            if self.gpu:
                torch.cuda.synchronize()
                if mode in ("audit", "gpu_time"):
                    # The audit's bookkeeping goes back to the device: the judge and the
                    # timed runs need that memory, and this process's cache would keep it.
                    out = None
                    torch.cuda.empty_cache()
        except BaseException as e:  # noqa: BLE001
            self.failure(e, "forward")
            return False
        message = messages.Done(type="done", run=request.get("run"), copied=copied, outputs=description)
        if record is not None:
            message["gpu" if mode == "gpu_time" else "audit"] = record
            changed = self.harness_changed()
            if changed:
                self.reply(changed)
                return False
        self.reply(message)
        if mode == "audit":
            # The judge's trials go on while the launches' compiled code is read beside them.
            self.reading = compiled.start(self.launches, self.source or "", self.job["workdir"], self.gpu,
                                          self.reading)
        return None

    def windowed(self, request: Message) -> Handled:
        """A run inside the judge's window (window.py): everything is queued behind the
        judge's flag A, then `forwards` forwards, each on its input set with its outputs
        copied into that set's slots on the forward's stream (PyTorch's rule: a returned
        tensor is ready on the current stream), then the end flag; "armed" says all of it is
        queued. The events of this process time the forwards alone, for the record."""
        import torch

        from .window import wait_value, write_value

        a, end = self.clock
        seq = int(request["seq"])
        count = int(request.get("forwards") or 1)
        stream = torch.cuda.current_stream()
        events = []
        copied = True
        out = None
        try:
            if not 1 <= count <= len(self.sets):
                raise ValueError("a window of %d forwards over %d input sets" % (count, len(self.sets)))
            with torch.no_grad():
                wait_value(stream, a, seq)
                for inputs, slots in self.sets[:count]:
                    # torch leaves cuda.Event.__init__ unannotated
                    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                    stop = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                    start.record(stream)
                    out = self.null_outputs() if request["mode"] == "null" else self.model(*inputs)
                    stop.record(stream)
                    events.append((start, stop))
                    copied = self.copy_outputs(out, slots) and copied
                write_value(stream, end, seq)
            if request["mode"] == "null":
                out = None
            self.reply(messages.Armed(type="armed", run=request.get("run")))
            torch.cuda.synchronize()
            description = describe(out) if out is not None else None
        except BaseException as e:  # noqa: BLE001
            self.failure(e, "forward")
            return False
        self.reply(messages.Done(type="done", run=request.get("run"), copied=copied, outputs=description,
                                 event_ms=sum(start.elapsed_time(stop) for start, stop in events) / count))
        return None

    def null_outputs(self) -> Any:
        """What a null run returns: its own tensors shaped like the slots, just written (a
        fill), so their copy into the slots reads them from L2 as a forward's fresh outputs
        are read; the judge adds the fill's time back (timed.py)."""
        import torch

        from .tensors import tree_map

        if getattr(self, "null_scratch", None) is None:
            self.null_scratch = tree_map(lambda v: torch.empty_like(v) if isinstance(v, torch.Tensor) else v,
                                         self.outputs)
        tree_map(lambda v: v.fill_(0) if isinstance(v, torch.Tensor) else v, self.null_scratch)
        return self.null_scratch

    def copy_outputs(self, out: Any, slots: Any = None) -> bool:
        """Copies each output into the judge's slot of the same path, shape and dtype (of
        `slots`, the first set's by default); the judge finds out from the description which
        did not fit."""
        import torch

        slots = dict(flatten_outputs(self.outputs if slots is None else slots))
        copied = True
        for path, value in flatten_outputs(out):
            if isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter):
                # A subclass's __torch_function__ would run in the copy below and in the audit's
                # digests: the kernel's code deciding what the harness reads.
                raise TypeError("forward returned a %s at %s, a subclass of torch.Tensor: outputs must be plain "
                                "tensors" % (type(value).__name__, path))
            slot = slots.get(path)
            if isinstance(slot, torch.Tensor) and isinstance(value, torch.Tensor) \
                    and tuple(value.shape) == tuple(slot.shape) and value.dtype == slot.dtype:
                slot.copy_(value.detach())
            elif isinstance(slot, torch.Tensor) or isinstance(value, torch.Tensor):
                copied = False
        return copied


def interpret_autotune() -> None:
    """Under the interpreter `@triton.autotune` with several configs would benchmark them,
    which needs a GPU driver ("0 active drivers"): the first config left after the kernel's
    own pruning runs instead. Timing means nothing on the CPU, correctness is the same for
    every config. (Harness code, run before the kernel is imported.)"""
    from triton.runtime import autotuner

    original = autotuner.Autotuner.prune_configs
    if getattr(original, "kforge_interpret", False):
        return

    def first_config(self: Any, kwargs: Any) -> Any:
        return original(self, kwargs)[:1]

    setattr(first_config, "kforge_interpret", True)  # a mark on the function: not an attribute mypy knows
    autotuner.Autotuner.prune_configs = first_config


def relocate_tensors(tensors: Sequence[torch.Tensor], kept: List[object]) -> int:
    """Copies each storage behind `tensors` once and points every tensor at its copy with its
    own offset, size and strides, so that what shared memory still does (an RNN's weights in
    cuDNN's single chunk, tied weights): the model computes exactly as before, elsewhere.
    The old storages go into `kept`. Returns the bytes copied."""
    import torch

    copies: Dict[int, torch.UntypedStorage] = {}
    moved = 0
    with torch.no_grad():
        for t in tensors:
            old = t.untyped_storage()
            key = old.data_ptr()
            if key not in copies:
                # torch leaves UntypedStorage.clone unannotated
                copies[key] = old.clone()  # type: ignore[no-untyped-call]
                moved += old.nbytes()
                kept.append(old)
            view = torch.empty(0, dtype=t.dtype, device=t.device)
            view.set_(copies[key], t.storage_offset(), t.size(), t.stride())
            t.data = view
    return moved


def main(channel_fd: int, job: Dict[str, Any]) -> None:
    """Body of the forked worker. Never returns."""
    status = 0
    try:
        sock = socket.socket(fileno=channel_fd)
        Worker(sock, job).serve()
    except BaseException:  # noqa: BLE001 -- the judge sees the closed channel as a crash
        import traceback

        traceback.print_exc()
        status = 70
    finally:
        try:
            import sys

            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        time.sleep(0)
        os._exit(status)
