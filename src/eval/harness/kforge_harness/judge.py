"""The judge: one process per evaluation, in the tasks' sandbox (judgeproc.py). It loads
the task, builds the reference, draws every input, lends the worker its buffers, compares
outputs, times both models and decides the verdict. The reference model and its outputs
exist only here, out of the kernel's reach; the task's code runs here too, so the judge
holds no secret and no host path it could write (docs/security.md, "The task sandbox").
"""

import os
import secrets
import select
import tempfile
import time

from . import audit_rules, baselines, cachekeeper, defaults, kbprotocol, knobs, launchpath, oracle, peaks, protocol, seal, sol, timing
from .alignment import plan_alignment
from . import precision
from .compare import (DEFAULT_MODE, all_finite, audit_tolerance, compare_outputs, merge_tolerance, tolerance_for,
                      weak_outputs)
from .device import device_description, environment, gpu_clocks, l2_flush_buffer, l2_flush_bytes, sync
from .errors import first_line
from .exchange import Lender
from .loading import (InputSource, build_reference, copy_into, load_task, reference_forward, rotate_into,
                      task_init_inputs)
from .memory import (Meter, does_not_fit, footprint, gib, inputs_do_not_fit, is_out_of_memory, model_bytes,
                     out_of_memory_reason, tensor_bytes)
from .protocol import HarnessError, KernelFailure, ProtocolViolation, TaskFailure
from .refprocess import ALIAS, ReferenceProcess
from .tensors import Placeholder, clone_tree, flatten_outputs, rebuild, tree_map
from .timed import Side, calibrate, time_runs, window_gain
from .window import GateUnavailable, HostGate
from .wire import OracleRecord, TimingRecord
from .worker import WORKER_CATEGORIES

SLOW_DRAW_MS = 50.0  # above this per draw, timed runs refresh inputs by rotation instead


def where_raised(exc):
    """" at judge.py:123": the harness line an unexpected exception came from, for a
    message that must say more than its type (the innermost frame of this package)."""
    import traceback

    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.dirname(os.path.abspath(f.filename)) == here]
    if not frames:
        return ""
    return " at %s:%d" % (os.path.basename(frames[-1].filename), frames[-1].lineno)


class WorkerLink:
    """The judge's end of the channel to the worker. Anything unexpected from the worker --
    a malformed, oversized, early, duplicate or out-of-order message, or silence -- is a
    `crash` of the kernel; a failure it reports about itself is taken as that failure."""

    def __init__(self, sock, phase):
        self.sock = sock
        self.phase = phase
        # Until the kernel is imported the worker runs only harness code: a failure then is
        # the harness's (or its environment's), not the kernel's.
        self.kernel_loaded = False
        self.opener = None  # from the kernel's import on, messages are sealed (seal.py)

    def seal(self):
        """A key for the worker's messages from here on (it goes in the "load" request)."""
        key = seal.new_key()
        self.opener = seal.Opener(key)
        return key.hex()

    def _crash(self, what, closed=False):
        """`closed`: the channel ended (the process died or shut it), which its exit status
        may explain better (server.worker_death_explains)."""
        if not self.kernel_loaded:
            raise HarnessError("%s before the kernel was loaded (during %s); see the log" % (what, self.phase()))
        raise KernelFailure("crash", "%s (during %s)" % (what, self.phase()),
                            details={"protocol": what, "channel_closed": closed})

    def next_message(self):
        """The next message (unsealed once the kernel is imported, seal.py), or None when the
        channel ended between messages; a violation is the kernel's crash."""
        try:
            data = protocol.recv_payload(self.sock)
            if data is not None and self.opener is not None:
                data = self.opener.open(data)
            return None if data is None else protocol.decode(data)
        except (ProtocolViolation, ValueError) as e:
            self._crash("the kernel's process broke the protocol: %s" % e)
        except OSError as e:
            self._crash("the kernel's process channel failed: %s" % e, closed=True)

    def receive(self, expected, run=None):
        message = self.next_message()
        if message is None:
            self._crash("the kernel's process ended without answering", closed=True)
        kind = message.get("type")
        if kind == "failure":
            category = message.get("category")
            if category not in WORKER_CATEGORIES:
                self._crash("the kernel's process reported an invalid failure category %r" % (category,))
            summary = str(message.get("summary") or category)[:500]
            text = str(message.get("message") or summary)[-protocol.LOG_LIMIT:]
            details = message.get("details") if isinstance(message.get("details"), dict) else {}
            # Whether the kernel had been loaded is the judge's knowledge, never the process's
            # word: a kernel that says "out of memory before I was loaded" would pass for a task
            # that does not fit (the unseen-shapes check skips those).
            details = dict(details, kernel_loaded=self.kernel_loaded, reported_by_process=True)
            raise KernelFailure(category, summary, text, details)
        if kind != expected:
            self._crash("the kernel's process sent %r where %r was due" % (kind, expected))
        if run is not None and message.get("run") != run:
            self._crash("the kernel's process answered run %r for run %r" % (message.get("run"), run))
        return message

    def call(self, request, expected, fds=()):
        """Sends a request (with the file descriptors of memory it lends, closed here once
        sent) and returns the answer it is due."""
        try:
            self.send(request, fds)
        finally:
            for fd in fds:
                os.close(fd)
        return self.receive(expected, request.get("run"))

    def send(self, request, fds=()):
        # An unsolicited message waiting before a request is sent is an early message.
        if select.select([self.sock], [], [], 0)[0]:
            early = self.next_message()
            if early is not None:
                self._crash("the kernel's process sent %r before it was asked" % early.get("type"))
        try:
            if fds:
                protocol.send_fds(self.sock, request, fds)
            else:
                protocol.send(self.sock, request)
        except OSError:
            self._crash("the kernel's process stopped listening", closed=True)

    def ready(self, timeout_s):
        """Whether a message is waiting, or arrives within `timeout_s`."""
        return bool(select.select([self.sock], [], [], timeout_s)[0])


class CompileUnavailable(Exception):
    """The reference under torch.compile cannot be a baseline (it failed to compile or to
    run, or computes another result): the evaluation goes on against eager alone."""


class ReferenceLink(WorkerLink):
    """The judge's channel to the reference's own timing process (refprocess.py): trusted, so
    anything that goes wrong there is the task's or the harness's, never a kernel verdict."""

    def _crash(self, what, closed=False):
        raise HarnessError("the reference's timing process: %s (during %s); see the log"
                           % (what.replace("the kernel's process", "it"), self.phase()))

    def receive(self, expected, run=None):
        try:
            return super().receive(expected, run)
        except KernelFailure as f:
            if f.category == "oom":
                raise task_does_not_fit("timing the reference in its own process ran out of memory: %s" % f.summary)
            raise TaskFailure("timing the reference in its own process failed: %s" % f.summary)


class CompiledLink(WorkerLink):
    """The judge's channel to the compiled reference's process: trusted like the
    reference's, and whatever goes wrong there only costs the compile baseline."""

    def _crash(self, what, closed=False):
        raise CompileUnavailable("its process: %s" % what.replace("the kernel's process", "it"))

    def receive(self, expected, run=None):
        try:
            return super().receive(expected, run)
        except KernelFailure as f:
            raise CompileUnavailable(f.summary)


class CompiledSide(Side):
    """The compiled reference's Side: a process that goes away is a compile baseline lost,
    not a harness failure."""

    def run(self, *args, **kwargs):
        try:
            return super().run(*args, **kwargs)
        except HarnessError as e:
            raise CompileUnavailable(str(e))


def kernel_outputs(done, slots):
    """The kernel's outputs as the judge sees them: tensors read from the judge's own slots
    where the worker's description says they fit, metadata-only stand-ins where not (shape
    and dtype are then what the comparison reports)."""
    import torch

    try:
        tree = rebuild(done.get("outputs"))
    except ValueError as e:
        raise KernelFailure("crash", "the kernel's process described its outputs malformedly: %s" % e)
    by_path = dict(flatten_outputs(slots))

    def resolve(path, value):
        if isinstance(value, Placeholder):
            slot = by_path.get(path)
            if value.kind == "tensor":
                if done.get("copied") and isinstance(slot, torch.Tensor) and tuple(slot.shape) == value.shape \
                        and str(slot.dtype).replace("torch.", "") == value.dtype:
                    return slot
                try:
                    return torch.empty(value.shape, dtype=getattr(torch, value.dtype), device="meta")
                except (AttributeError, TypeError, RuntimeError):
                    return UnsupportedOutput(value.dtype)
            return UnsupportedOutput(value.name)
        return value

    def walk(value, path):
        if isinstance(value, (list, tuple)):
            items = [walk(v, "%s[%d]" % (path, i)) for i, v in enumerate(value)]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {k: walk(v, "%s[%r]" % (path, k)) for k, v in value.items()}
        return resolve(path, value)

    return walk(tree, "out")


def sol_note(figures, kernel):
    """The note of a kernel flagged faster than light."""
    return ("faster than light: the kernel's median %.4f ms (95%% interval up to %.4f ms) is %.0f%% of the speed of "
            "light, the least time the device's measured peaks allow for the task's work at the precision the policy "
            "accepts (%.4f ms: the bytes certain to cross DRAM, the GEMMs at their fastest accepted math, the "
            "elementwise work on the CUDA cores): it does less work than the reference does (an algebraic shortcut, "
            "or outputs it does not really compute), its timing is not what it runs, or (just above 100%%) the peaks "
            "were measured low; it is not taken as the session's best unless you choose it"
            % (kernel["median_ms"], kernel.get("ci_high_ms") or kernel["median_ms"], figures["kernel_pct"],
               figures["bound_ms"]))


def trial_label(kind, index):
    """How a comparison is named where an oracle measured on it is cited."""
    return {"random": "trial %d" % (index + 1), "signed": "the signed-input trial",
            "audit": "the audited forward", "post_timing": "the re-check"}.get(kind, kind)


def between_evaluations(settings):
    return max(settings.between_evaluations, 0.0)


def interval_method(settings):
    """The score interval's method in words (Timing.interval_method)."""
    method = ("bootstrap, %d resamples of both models' timed runs and the null runs, 95%% percentile interval"
              % timing.BOOTSTRAP_RESAMPLES)
    between = between_evaluations(settings)
    if between:
        method += (", combined in quadrature with +-%g%% for what changes between evaluations of one kernel "
                   "(between_evaluations; the runs' own interval is runs_score_low/high)" % (100 * between))
    return method


def shapes_of(tree):
    """The tree with each tensor replaced by a meta tensor of its shape and dtype (what the
    lender needs to allocate alike)."""
    import torch

    return tree_map(lambda v: torch.empty(v.shape, dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor)
                    else v, tree)


def floating_dtypes(*trees):
    """The floating and complex dtypes of a task's tensors (inputs, outputs), by name."""
    import torch

    found = set()
    for tree in trees:
        for _, v in flatten_outputs(tree):
            if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()):
                found.add(str(v.dtype).replace("torch.", ""))
    return sorted(found)


def task_does_not_fit(reason, **details):
    """The `oom` verdict for a task whose plan or inputs do not fit, before any kernel ran."""
    return KernelFailure("oom", "the task does not fit: " + reason, details=dict(details, kernel_loaded=False))


class Frozen:
    """The kernel's outputs copied out of the slots at "done" (values), and the (slot, copy)
    pairs to check that the slots were not written afterwards."""

    def __init__(self, values, pairs):
        self.values = values
        self.pairs = pairs

    def check_unchanged(self):
        from .digest import same_bytes

        for slot, frozen in self.pairs:
            if not same_bytes(slot, frozen):
                raise KernelFailure("crash", "the kernel's process wrote its outputs after it reported its forward "
                                    "done (a thread or process it left running): the judge compares what was "
                                    "there at \"done\"", details={"late_write": True})


class UnsupportedOutput:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "an object of type %s" % self.name


class PhaseClock:
    """Seconds spent in each phase of an evaluation, into result["phases_s"]."""

    def __init__(self, result):
        self.phases = result.setdefault("phases_s", {})
        self.last = time.time()

    def mark(self, name):
        now = time.time()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.last = now


class Evaluation:
    def __init__(self, job, progress, channel):
        # `job` is the server's record of the evaluation: what kforge sent, the sources, the
        # result so far; what kforge sent is read typed (wire.Job), never by key.
        self.job = job
        self.spec = job["_wire"]
        self.settings = self.spec.settings
        self.result = job["_result"]
        self.device = self.spec.device
        self.gpu = self.device != "cpu"
        self.seed = int(self.settings.seed)
        self.progress = progress
        self.link = WorkerLink(channel, lambda: self.result.get("phase") or "start-up") if channel else None
        # What later evaluations reuse (the reference's timing, the compile baseline, the
        # launch-path floor) and the device's peaks, kept by the server (cachekeeper.py).
        self.store = job.get("_store")
        self.meter = Meter(self.device, self.result["memory"])
        self.lender = None
        self.gate = None
        self.reference_process = None
        self.reference_side = None
        self.reference_lender = None
        self.compiled_process = None
        self.compiled_side = None
        self.compiled_lender = None
        self.compiled = None  # the compile baseline's record (baselines.py), once known
        self.defaults_process = None
        self.defaults_side = None
        self.defaults_lender = None
        self.defaults = None  # the defaults baseline's record (defaults.py), once known
        self.clock = None
        self.policy = self.settings.precision or precision.DEFAULT_POLICY
        self.task_dtypes = []
        self.reference_settings = None
        self.kernel_settings = None
        self.source_math = None  # the kernel source's precision findings (the server's scan)
        self.compiled_reading = None  # what the launched kernels' compiled code computes in (compiled.py)
        self.draws = None  # launchpath.Draws, once a timing process is drawn
        self.oracles = {}  # input family ("random", "signed") -> oracle.Oracle (compare.py's `oracle` rule)
        self.oracle_trials = set()  # the families whose oracle a trial measured
        self.oracle_seconds = 0.0

    def run(self):
        try:
            return self.run_phases()
        except (KernelFailure, TaskFailure, HarnessError):
            raise
        except Exception as e:  # noqa: BLE001 -- an allocation of the judge's that failed
            if is_out_of_memory(e):
                raise self.out_of_memory(e)
            raise
        finally:
            if self.gate is not None and self.gate.held:
                self.gate.release()  # a stream held at the gate would hang the judge's teardown
            self.close_compiled()
            self.close_defaults()
            self.close_reference()
            if self.lender is not None:
                self.lender.close()

    def out_of_memory(self, error):
        """The `oom` verdict for an allocation of the judge's that failed: before the kernel
        was loaded the task itself does not fit; after, the kernel's process holds memory
        the plan did not leave it."""
        free, total = self.meter.state()
        phase = self.result.get("phase") or "start-up"
        loaded = self.link is not None and self.link.kernel_loaded
        what = ("the evaluation (during %s, with the kernel's process holding memory)" % phase if loaded
                else "the task (during %s, before any kernel ran)" % phase)
        summary = out_of_memory_reason(what, error, free, total)
        plan = self.result.get("footprint")
        if plan:
            summary += "; planned peak %s (inputs %s, outputs %s)" % (
                gib(plan["planned_peak_bytes"]), gib(plan["inputs_bytes"]), gib(plan["outputs_bytes"]))
        return KernelFailure("oom", summary, details={"footprint": plan, "phase": phase, "kernel_loaded": loaded,
                                                      "free_bytes": int(free), "total_bytes": int(total)})

    def run_phases(self):
        import torch

        job, spec, result = self.job, self.spec, self.result
        clock = self.clock = PhaseClock(result)
        if self.device != "cpu" and spec.timing:
            # Before this process's CUDA context exists (see refprocess.py); the reference's
            # process starts its own while this one loads the task.
            self.reference_process = ReferenceProcess.fork()
            self.reference_process.serve(self.reference_job())
            if spec.settings.compile_baseline:
                # The compiled reference's process, forked now for the same reason, and
                # asked to serve only when the compile baseline is not cached: until then it
                # waits without a CUDA context.
                self.compiled_process = ReferenceProcess.fork()
            if defaults.differences(self.policy):
                # The reference under PyTorch's defaults, a process forked now for the same
                # reason, served only where the task's work is affected and not cached.
                self.defaults_process = ReferenceProcess.fork()
        server_interprets = os.environ.get("TRITON_INTERPRET") == "1"
        if self.gpu == server_interprets:
            raise HarnessError("a %s job reached a server %s TRITON_INTERPRET=1" % (
                self.device, "started with" if server_interprets else "started without"))
        if self.gpu:
            if not torch.cuda.is_available():
                raise HarnessError("CUDA is not available in the judge (device %s)" % self.device)
            torch.cuda.set_device(self.device)
        result["device"] = device_description(self.device)
        clock.mark("cuda_init")
        self.meter.enter("startup")
        self.progress("loading task")
        task = load_task(job["task_file"])
        self.source = InputSource(task, self.device, spec.settings.input_draw_limit_s)
        init_inputs = task_init_inputs(task, result)
        self.init_inputs = init_inputs
        # The policy's precision settings before the reference exists (precision.py).
        self.reference_settings = precision.apply_policy(self.policy)
        self.ref = build_reference(task, init_inputs, self.seed, self.device)
        first, first_out = self.first_forward()
        self.task_dtypes = floating_dtypes(first, first_out)
        self.describe_precision()
        # Only the shapes of the first draw and outputs are needed from here on (every trial
        # draws again): the outputs go back to the device before any buffer is lent.
        input_shapes, output_shapes = shapes_of(first), shapes_of(first_out)
        del first_out
        clock.mark("task")  # the task loaded, its reference built and run once
        self.peaks = None
        if self.timing():
            self.peaks = self.device_peaks()
            clock.mark("peaks")
        flush = l2_flush_buffer(job, result, self.device) if self.timing() else None
        if self.link is not None:
            # The worker starts (its CUDA context included) while the judge loads the task and
            # draws; it is idle, with no kernel imported, from its hello until it is attached.
            self.progress("starting the kernel's process")
            self.link.receive("hello")
        clock.mark("startup")
        if self.timing():
            self.open_gate()
            self.progress("starting the reference's timing process")
            self.start_reference(input_shapes, output_shapes)
            # Slow draws are rotated per timed run: `first` is what both sides rotate.
            self.base = None if self.draws_fresh() else first
            self.reference_side.refresh = self.refresher(self.base)
        clock.mark("reference_process")
        self.input_shapes, self.output_shapes = input_shapes, output_shapes
        if not spec.reference_only:
            # Before the kernel is imported: figures that are cached for every later
            # evaluation of the task are never measured beside a kernel's code (its process
            # could load the GPU while they are taken). A task check measures them after its
            # own figures (below); a session's evaluations read them from the cache.
            self.compile_phase(flush, lambda base=first: base)
            self.defaults_phase(flush, lambda base=first: base)
        if spec.reference_only:
            if self.timing():
                calibrate([(self.reference_side, lambda base=first: copy_into(self.reference_side.inputs, base))],
                          flush, self.progress)
                result["timing"] = self.reference_timing(flush, first)
                rounds = max(1, spec.kernelbench_rounds) if spec.kernelbench_protocol else 0
                if rounds > 1:
                    self.kernelbench_rounds(rounds, flush, first)
                # Last of what uses the reference's process: the task check's own figures
                # stand whatever becomes of it while torch.compile runs beside it.
                self.compile_phase(flush, lambda base=first: base)
                self.defaults_phase(flush, lambda base=first: base)
                self.against_compile(result["timing"])
                self.against_defaults(result["timing"])
                if rounds == 1:
                    del first, flush  # KernelBench draws its own inputs and allocates its own flush
                    self.close_reference()
                    self.kernelbench_timing()
            self.record_speed_of_light()
            self.task_tolerance()
            return self.reference_only(output_shapes)
        if self.gpu:
            torch.cuda.empty_cache()
        if self.timing():
            self.draw_context(self.link, "kernel")
        self.lender = Lender("cuda_ipc" if self.gpu else "memfd", self.device)
        self.meter.enter("buffers")
        (self.inputs, self.slots), (input_desc, slot_desc), fds = self.lender.like([input_shapes, output_shapes])
        self.meter.sample()
        self.link.call({"op": "attach", "inputs": input_desc, "outputs": slot_desc}, "attached", fds)
        self.meter.sample()
        clock.mark("buffers")
        if self.timing():
            self.kernel_side = Side("the kernel", self.link, self.inputs, self.slots, self.gate, self.lender, False)
            self.link.call(self.kernel_side.clock.request(), "clock_set")
            self.kernel_side.refresh = self.refresher(self.base)
            staged = self.source.draw(self.seed + 2000)
            calibrate([(self.reference_side, lambda base=first: copy_into(self.reference_side.inputs, base)),
                       (self.kernel_side, lambda base=staged: copy_into(self.inputs, base))], flush, self.progress)
            del staged
        del first
        clock.mark("calibration")
        self.progress("loading kernel")
        init_buffers, init_desc, fds = self.lender.like(init_inputs)
        copy_into(init_buffers, init_inputs)
        self.link.kernel_loaded = True  # from here on the worker runs the kernel's code
        # The key that seals the worker's messages and the run-time guard (guard.py, which goes
        # with the static checks) are set up before the kernel's first line runs.
        loaded = self.link.call({"op": "load", "init_inputs": init_desc, "seed": self.seed,
                                 "source": job["kernel_source"], "seal": self.link.seal(),
                                 "guard": self.guard_mode()}, "loaded", fds)
        self.kernel_settings = loaded.get("tf32")
        self.describe_precision()
        clock.mark("load")
        self.progress("building models")
        self.align(loaded)
        clock.mark("build")
        self.meter.enter("correctness")
        try:
            self.correctness()
        except KernelFailure as failure:
            if failure.category == "mismatch":
                self.read_compiled_of_a_mismatch()
            raise
        clock.mark("correctness")
        self.meter.enter("audit")
        self.audit(clock)
        clock.mark("audit_gpu_time" if self.gpu else "audit")
        self.read_compiled()
        clock.mark("precision")
        if self.timing():
            self.progress("timing")
            self.meter.enter("kernel timing")
            result["timing"] = self.measure(flush)
            clock.mark("timing")
        # Without timed runs (the CPU) there is nothing to re-check after: every trial
        # already wrote fresh values into the same lent buffers.
        if spec.settings.post_timing_check and self.timing():
            self.progress("re-check after timing")
            self.meter.enter("recheck")
            self.check("post_timing", spec.settings.trials + 1, lambda: self.source.draw(self.seed + 3000))
            self.same_kernels_everywhere(self.ruled_record())
            self.result["audit"]["details"]["audited_forwards"] = len(self.audit_records)
            clock.mark("recheck")
        self.close_reference()
        clock.mark("reference_exit")
        try:
            self.link.call({"op": "exit"}, "bye")
        except KernelFailure:
            pass  # the worker is done either way; its exit is not part of the verdict
        self.record_speed_of_light()
        weak = weak_outputs(result["trials"])
        if weak:
            result["flags"].append("weak_reference")
            result["notes"].append(
                "reference output %s is small next to atol: the tolerance was scaled down to the "
                "output's own magnitude (see tolerance)" % ", ".join(weak))
        result["inputs_drawn_on"] = self.source.where
        result["correct"] = True
        result["status"] = "correct"
        return result

    def counted_forward(self, inputs):
        """The reference's forward on `inputs`, its work counted on the way (sol.py) into
        self.work. Counting never costs the task its check: a forward the counter disturbs
        runs again without it, and the work is then unknown, with the reason."""
        try:
            out, self.work = sol.count_forward(self.ref, inputs,
                                               lambda: reference_forward(self.ref, inputs, self.device))
            return out
        except Exception as e:  # noqa: BLE001
            if is_out_of_memory(e):
                raise
            self.work = {"error": "counting the reference's work failed: %s: %s" % (type(e).__name__, str(e)[:300])}
        return reference_forward(self.ref, inputs, self.device)

    def device_peaks(self):
        """The device's measured peaks (peaks.py), from the server: cached per device, else
        measured now, in a process of the server's where no task's code runs."""
        self.progress("device peaks")
        return self.store.peaks()

    def record_speed_of_light(self):
        """result["speed_of_light"]: the reference's work and, on a GPU with timing, the bound
        against the device's peaks, both sides' share of it and the faster-than-light flag."""
        result = self.result
        work = getattr(self, "work", None) or {"error": "the reference's work was not counted"}
        if "error" in work:
            result["speed_of_light"] = {"counts": None, "reason": work["error"]}
            return
        timing_ = result.get("timing") or {}
        if not self.timing() or not timing_.get("reference"):
            result["speed_of_light"] = sol.cpu_figures(work) if not self.gpu else dict(
                sol.cpu_figures(work), reason="not timed: the bound is compared with timed medians only")
            return
        kernel = timing_.get("kernel") or None
        figures = sol.figures(work, self.peaks, self.policy, result["device"], self.settings.flush_l2,
                              timing_["reference"], kernel if kernel and kernel.get("median_ms") else None)
        result["speed_of_light"] = figures
        if figures["faster_than_light"]:
            result["flags"].append("faster_than_light")
            result["notes"].append(sol_note(figures, kernel))
        if (figures.get("reference_pct") or 0) > 100:
            result["notes"].append(
                "the reference runs at %.0f%% of the speed of light: the device's measured peaks are below what it "
                "reaches (peaks/ in the cache is measured again when removed)" % figures["reference_pct"])

    def first_forward(self):
        """The first draw and the reference's outputs on it; measures the evaluation's
        footprint and refuses (`oom`) a task whose plan does not fit, before any kernel
        runs. Returns (inputs, reference outputs)."""
        import torch

        result = self.result
        self.meter.enter("reference")
        free, total = self.meter.state()
        flush_bytes = l2_flush_bytes(self.job, result) if self.timing() else 0
        where = "%s device" % result["device"].get("name", "GPU") if self.gpu else "host"
        inputs_bytes, outputs_bytes = self.source.meta_sizes(self.init_inputs, free)
        weights_bytes = model_bytes(self.ref)  # the kernel's model, estimated by the reference's
        if outputs_bytes is not None:
            early = footprint(inputs_bytes, outputs_bytes, 0, flush_bytes, free, total, self.timing(), weights_bytes)
            reason = does_not_fit(early, where)
            if reason:
                result["footprint"] = early
                raise task_does_not_fit(reason, footprint=early)
        elif inputs_bytes:
            reason = inputs_do_not_fit(inputs_bytes, free, total, "%s %s" % (gib(total), where))
            if reason:
                raise task_does_not_fit(reason, inputs_bytes=inputs_bytes, free_bytes=int(free),
                                        total_bytes=int(total))
        self.progress("drawing inputs")
        first = self.source.draw(self.seed + 1)
        self.first_draw_ms = self.source.draw_ms
        self.meter.sample()
        self.progress("reference forward")
        if self.gpu:
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        first_out = self.counted_forward(first)
        inputs_bytes, outputs_bytes = tensor_bytes(first), tensor_bytes(first_out)
        scratch = 0
        if self.gpu:
            scratch = max(0, torch.cuda.max_memory_allocated() - before - outputs_bytes)
        self.meter.sample()
        record = footprint(inputs_bytes, outputs_bytes, scratch, flush_bytes, free, total, self.timing(),
                           weights_bytes)
        result["footprint"] = record
        reason = does_not_fit(record, where)
        if reason:
            raise task_does_not_fit(reason, footprint=record)
        return first, first_out

    def kernelbench_timing(self):
        """The reference timed again with KernelBench's own protocol, in this process, for
        `kforge bench kernelbench` (issue 9): the figure users compare kforge's with."""
        result = self.result
        self.progress("timing reference: KernelBench's protocol")
        try:
            # KernelBench seeds get_inputs() with its seed: kernelbench_once draws the same way.
            result["timing"]["kernelbench"] = self.kernelbench_once()
        except Exception as e:  # noqa: BLE001 -- a failed comparison leaves kforge's figure standing
            if is_out_of_memory(e):
                raise
            result["notes"].append("timing with KernelBench's protocol failed: %s: %s"
                                   % (type(e).__name__, (str(e).splitlines() or [""])[0]))

    def kernelbench_rounds(self, rounds, flush, first):
        """Both protocols in alternating order, `rounds` times in this process (`kforge bench
        kernelbench --rounds N`): the spread of each protocol's medians over the rounds says
        how much of a difference between them is noise of the reference on this machine.
        Round one's figures stay the task check's; the rounds go to `timing.rounds`. Both
        draws (kforge's `first`, KernelBench's own) are alive at once here: a round that runs
        out of memory ends the rounds with a note, not the task check."""
        result = self.result
        figures = result["timing"]
        try:
            self.kernelbench_timing()
        except Exception as e:  # noqa: BLE001
            if not is_out_of_memory(e):
                raise
            result["notes"].append("timing with KernelBench's protocol ran out of memory with both "
                                   "protocols' inputs alive: run with one round")
            return
        kernelbench = result["timing"].get("kernelbench")
        if kernelbench is None:
            return
        done = [{"order": kbprotocol.KFORGE_FIRST, "kforge_ms": figures["reference"]["median_ms"],
                 "kernelbench_ms": kernelbench["median_ms"]}]
        for n, order in enumerate(kbprotocol.round_orders(rounds)[1:], start=2):
            self.progress("timing reference: round %d of %d (%s)" % (n, rounds, order.replace("_", " ")))
            try:
                if order == kbprotocol.KERNELBENCH_FIRST:
                    kb = self.kernelbench_once()
                    kf = self.time_reference(flush)
                else:
                    kf = self.time_reference(flush)
                    kb = self.kernelbench_once()
            except Exception as e:  # noqa: BLE001 -- the first round's figures stand
                if not is_out_of_memory(e):
                    raise
                result["notes"].append("the timing rounds stopped after %d of %d: out of memory with both "
                                       "protocols' inputs alive" % (len(done), rounds))
                break
            done.append({"order": order, "kforge_ms": kf["median_ms"], "kernelbench_ms": kb["median_ms"]})
        result["timing"]["rounds"] = done

    def kernelbench_once(self):
        """The reference timed once with KernelBench's protocol on its own fresh draw."""
        return kbprotocol.time_model(self.ref, self.source.draw(self.seed), self.device)

    def reference_only(self, first_out):
        """The task check: Model built, run on its inputs, timed (GPU), footprint planned.
        What `kforge run` shows before any LLM call."""
        import torch

        result = self.result
        outputs = []
        for path, value in flatten_outputs(first_out):
            if isinstance(value, torch.Tensor):
                outputs.append({"output": path, "passed": True, "shape": list(value.shape),
                                "dtype": str(value.dtype).replace("torch.", "")})
        result["trials"].append({"kind": "reference", "index": 0, "passed": True, "outputs": outputs})
        result["inputs_drawn_on"] = self.source.where
        result["correct"] = True
        result["status"] = "correct"
        result["notes"].append("reference check only: no kernel was evaluated")
        return result

    def timing(self):
        return self.gpu and self.spec.timing

    # -- models --------------------------------------------------------------------------

    def align(self, loaded, link=None, lender=None, report=True):
        """The reference's parameters into the loaded model's (by alignment.py's plan),
        through memory lent for the purpose; `link`/`lender` default to the kernel's."""
        import torch

        if not (loaded.get("module") and isinstance(self.ref, torch.nn.Module)):
            return
        state = loaded.get("state")
        if not isinstance(state, list) or len(state) > 100000:
            raise KernelFailure("crash", "the kernel's process described its parameters malformedly")
        ref_state = self.ref.state_dict()
        plan, alignment = plan_alignment(
            [(n, list(t.shape), str(t.dtype).replace("torch.", "")) for n, t in ref_state.items()], state)
        if report:
            self.result["alignment"] = alignment
        if not plan:
            return
        shapes = [(ref_state[r].shape, ref_state[r].dtype) for r, _ in plan]
        buffers, descriptors, fds = (lender or self.lender).lend(shapes)
        with torch.no_grad():
            for buffer, (ref_name, _) in zip(buffers, plan):
                buffer.copy_(ref_state[ref_name])
        sync(self.device)
        assign = [[new, desc] for (_, new), desc in zip(plan, descriptors)]
        (link or self.link).call({"op": "params", "assign": assign}, "params_set", fds)

    def forward(self, mode, run=None, nonce=None):
        request = {"op": "forward", "mode": mode}
        if run is not None:
            request["run"] = run
        if nonce is not None:
            request["nonce"] = nonce
        return self.link.call(request, "done")

    def check(self, kind, index, draw, needs=None, provenance=False, family="random"):
        """One correctness trial, audited. `draw()` makes the judge's private inputs; they go
        into the lent buffers first (the reference may change its inputs in place), then the
        reference runs on the private copy, which is dropped before the worker runs: at the
        peak the judge holds the lent buffers, the reference's outputs and its frozen copy of
        the kernel's. `needs(ref_out)` may decline the trial (returns None then).

        Every correctness forward runs under the audit, so no forward can be told apart as
        the audited one. In each, the values the judge compares are tied to the ones the
        audit labelled by their digest (a nonce per forward seeds it: outputs written by
        anything else after the forward returned are a `crash`), no output element may come
        from a writer the audit did not see, and the kernel's Triton code must run (the same
        kernels in every forward, checked in audit()). Who computed each element is ruled on
        the signed-input forward (`provenance`): on the task's own inputs an honest kernel
        can look like a copy (a ReLU of non-negative inputs is one). `family` names the
        draw's distribution (`random`: the task's get_inputs(), `signed`): the float64 oracle
        is measured on the first comparison of each (compare.py, oracle.py). Returns the
        answer."""
        private = draw()
        copy_into(self.inputs, private)
        sync(self.device)
        pending = self.prepare_oracle(family, trial_label(kind, index), private) if self.oracle_due(family) else None
        ref_out = reference_forward(self.ref, private, self.device)
        private = None
        self.meter.sample()
        if needs is not None and not needs(ref_out):
            return None
        compared_with = self.oracle_of(family, pending, ref_out)
        nonce = secrets.randbelow(1 << 31)
        done = self.forward("audit", nonce=nonce)
        outputs = self.freeze(done)
        self.meter.sample()
        record = done.get("audit")
        verdict = audit_rules.classify(record, self.gpu)
        if verdict.get("verdict") == "malformed":
            raise KernelFailure("crash", "the kernel's process sent an unusable audit record: %s"
                                % verdict.get("summary", "malformed"), details=verdict)
        self.match_audit(record, outputs, nonce)
        self.compare_frozen(kind, index, ref_out, outputs, oracle=compared_with)
        self.audit_records.append((kind, record, provenance))
        if verdict.get("verdict") != "ok" and (provenance or audit_rules.unseen_outputs(record)
                                              or not record["triton_launches"]):
            self.refuse(verdict)
        return done

    def ruled_record(self):
        """The audit record of the last forward ruled on for provenance."""
        return [record for _, record, provenance in self.audit_records if provenance][-1]

    def same_kernels_everywhere(self, ruled):
        """Every audited forward launched the Triton kernels of the forward ruled on (by name;
        counts may differ: autotuning benchmarks its configs in the first one)."""
        expected = sorted({x["name"] for x in ruled["launches"]})
        for kind, record, _ in self.audit_records:
            ran = sorted({x["name"] for x in record["launches"]})
            if ran != expected:
                label = {"random": "a correctness trial", "post_timing": "the re-check after timing"}.get(kind, kind)
                raise KernelFailure(
                    "torch_fallback", "the audited forwards ran different Triton kernels: %s ran %s, the "
                    "signed-input trial %s: every forward must compute with the same Triton code"
                    % (label, ", ".join(ran) or "none", ", ".join(expected) or "none"),
                    details={"kernels": expected, "differing": ran, "kind": kind})

    def freeze(self, done, taken=None, slots=None):
        """The kernel's outputs as the judge compares them: a copy of each slot, into the
        judge's own memory, which the worker cannot write (a thread it left running can still
        write the slots): taken now, or the [(slot, copy)] pairs `taken` earlier (a timed
        run's snapshot at its close), of `slots` (the first set's by default). Returns a tree
        of frozen values (stand-ins where the outputs did not fit the slots) and the pairs."""
        import torch

        earlier = {id(slot): copy for slot, copy in taken or ()}
        pairs = []

        def copy(v):
            if isinstance(v, torch.Tensor) and v.device.type != "meta":
                frozen = earlier[id(v)] if taken is not None else v.clone()
                pairs.append((v, frozen))
                return frozen
            return v

        return Frozen(tree_map(copy, kernel_outputs(done, self.slots if slots is None else slots)), pairs)

    def match_audit(self, record, outputs, nonce):
        """The frozen values must be the ones the audit saw: each output's digest, seeded by
        this forward's nonce, against the one in the (schema-checked) audit record."""
        from .audit import MAX_OUTPUTS
        from .digest import tensor_digest

        import torch

        seen = {o["path"]: o.get("digest") for o in record["outputs"]}
        for path, value in flatten_outputs(outputs.values):
            if not isinstance(value, torch.Tensor) or value.device.type == "meta":
                continue
            if path not in seen:
                raise KernelFailure("crash", "the audit record has no entry for output %s%s" % (
                    path, " (the audit records at most %d outputs)" % MAX_OUTPUTS
                    if len(record["outputs"]) >= MAX_OUTPUTS else ""))
            if seen[path] != tensor_digest(value, nonce):
                raise KernelFailure(
                    "crash", "output %s is not what the audited forward returned: something wrote the "
                    "judge's output buffer after the forward (another thread or process of the kernel's)" % path,
                    details={"output": path})

    def compare_frozen(self, kind, index, ref_out, outputs, record=True, forward=None, oracle=None):
        """Compares the frozen outputs; then checks that the slots still hold what was frozen:
        a kernel that writes its outputs after saying "done" is a `crash` whatever the
        comparison said (on a GPU such a write would move work out of the timed window)."""
        try:
            self.compare(kind, index, ref_out, outputs.values, record, forward, oracle)
        except KernelFailure:
            outputs.check_unchanged()
            raise
        outputs.check_unchanged()

    def refuse(self, verdict):
        self.result["audit"] = verdict
        if verdict.get("verdict") == "torch_fallback":
            raise KernelFailure("torch_fallback", verdict.get("summary", "PyTorch did the work"), details=verdict)
        raise KernelFailure("crash", "the kernel's process sent an unusable audit record: %s"
                            % verdict.get("summary", "malformed"), details=verdict)

    def signed_draw(self, seed):
        """A draw of the task's inputs with its floating tensors replaced by standard-normal
        values (integer and bool inputs as drawn)."""
        from .loading import seed_everything
        from .tensors import signed_like

        def draw():
            base = self.source.draw(seed)
            seed_everything(seed + 1)
            return signed_like(base)
        return draw

    def describe_precision(self):
        """The result's `precision` record (docs/eval-result.md): the policy, the tolerance
        per task dtype, what the kernel computes in (its source's findings, then what its
        process had in force once imported) as it applies to the task's dtypes, and the
        settings the reference ran under."""
        settings = self.settings
        if self.source_math is None:
            self.source_math = [f for f in (self.result.get("precision") or {}).get("kernel_math", [])
                                if not f.get("dynamic") and not f.get("compiled")]
        found = self.source_math + precision.dynamic_findings(self.policy, self.kernel_settings)
        found, reading = precision.with_compiled(found, self.compiled_reading)
        mode = settings.tolerance or DEFAULT_MODE
        table = {d: list(tolerance_for(d, settings.atol, settings.rtol, mode, self.policy))
                 for d in self.task_dtypes}
        record = precision.summarize(self.policy, found, self.task_dtypes, table)
        if self.honest_rule():
            # The table stays the fallback's (an output without an oracle).
            record["rule"] = "oracle"
            record["factor"] = {d: oracle.FACTOR[d] for d in self.task_dtypes if oracle.covers(d)}
        record["reference_settings"] = self.reference_settings
        record["kernel_settings"] = self.kernel_settings
        record["reading"] = reading
        self.result["precision"] = record

    def guard_mode(self):
        """The worker's run-time guard (guard.py): on with the static checks; "trace" under the
        diagnostic switch KFORGE_DIAG_GUARD_TRACE, which refuses nothing and says so."""
        if not self.settings.static_checks:
            return False
        if knobs.on("KFORGE_DIAG_GUARD_TRACE"):
            self.result["notes"].append("the run-time guard only traced what it would refuse (diagnostic switch "
                                        "KFORGE_DIAG_GUARD_TRACE): this verdict is not one to trust")
            return "trace"
        return True

    def read_compiled(self):
        """What the audited forwards' launches compute in, from their compiled code (the
        worker's compiled.read; on the CPU compiled up to TTIR for a CUDA target), into the
        precision record; on the CPU a kernel whose math the policy refuses there is refused
        (refuse_blind_precision)."""
        self.progress("reading the compiled kernels")
        self.compiled_reading = self.link.call({"op": "precision"}, "precision").get("reading")
        self.describe_precision()
        if not self.gpu:
            self.refuse_blind_precision()

    def read_compiled_of_a_mismatch(self):
        """The compiled reading for a kernel that gave wrong values: its precision record (and
        so its repair's precision hint) then says what the launched kernels computed in, also
        where the source cannot (a precision chosen at run time). Best effort: the mismatch is
        the verdict whatever this finds."""
        try:
            self.progress("reading the compiled kernels")
            self.compiled_reading = self.link.call({"op": "precision"}, "precision").get("reading")
            self.describe_precision()
        except Exception as e:  # noqa: BLE001 -- the verdict stands; the source's reading stays
            self.result["notes"].append("the compiled kernels of this mismatch were not read: %s" % first_line(str(e)))

    def refuse_blind_precision(self):
        """Issue 36, item 7: Triton's interpreter computes tl.dot in float32 whatever its input
        precision, and PyTorch's CPU matmuls never use TF32, so a kernel the policy would refuse on
        a GPU for TF32 math passes every trial here. Its CPU verdict is not `correct` but a
        `mismatch` that says so, with what was seen, so that the pipeline repairs it before a GPU
        runs it."""
        record = self.result.get("precision") or {}
        blind = [c for c in record.get("reduced") or [] if c in precision.CPU_BLIND]
        if not blind:
            return
        seen = [f["text"] for f in record.get("kernel_math") or [] if f.get("category") in blind]
        summary = "would fail under %s on a GPU: %s" % (self.policy, "; ".join(seen[:3]) + ("; ..." if len(seen) > 3
                                                                                                else ""))
        message = ("%s. On the CPU the trials cannot show it (Triton's interpreter computes tl.dot in float32 "
                   "whatever input_precision says, and PyTorch's CPU matmuls never use TF32); on a GPU the %s "
                   "policy holds float32 outputs to float32's tolerance. Pass input_precision=\"ieee\" (or "
                   "\"tf32x3\") to tl.dot, and leave TF32 off." % (summary, self.policy))
        raise KernelFailure("mismatch", summary, message,
                            {"precision": blind, "would_fail_on": "gpu", "kernel_math": seen})

    def compare(self, kind, index, ref_out, new_out, record=True, forward=None, oracle=None):
        """One comparison, recorded as a trial (`record`, or whenever it fails); `forward`
        is (k, count) for the k-th of a timed window's forwards; `oracle` the float64
        oracle of its inputs (else the latest of the task's own draws, compare.py)."""
        settings = self.settings
        if oracle is None:
            oracle = self.reused_oracle("random")
        passed, outputs, reason, tolerance = compare_outputs(
            ref_out, new_out, settings.atol, settings.rtol, settings.tolerance or DEFAULT_MODE, self.policy, oracle)
        merged = merge_tolerance(self.result.get("tolerance"), tolerance)
        if merged.get("oracle") is not None:
            merged["oracle"] = OracleRecord(dict(merged["oracle"], seconds=self.oracle_seconds))
            self.result["phases_s"]["oracle"] = self.oracle_seconds  # within correctness
        self.result["tolerance"] = merged
        if not passed and (self.result.get("precision") or {}).get("reduced"):
            # A mismatch of a kernel that computes below the task's precision: say so with it.
            reason = "%s; %s (precision policy %s)" % (reason, self.result["precision"]["statement"], self.policy)
        if record or not passed:
            self.result["trials"].append({"kind": kind, "index": index, "passed": passed, "outputs": outputs})
        if not passed:
            which = "" if forward is None else ", forward %d of the %d in its window" % (forward[0] + 1, forward[1])
            label = {"random": "trial %d" % (index + 1), "signed": "signed-input trial",
                     "audit": "audited forward",
                     "timed": "timed run %d%s (its outputs as the forward's stream left them, checked against "
                              "the reference)" % (index + 1, which),
                     "post_timing": "re-check after timing (fresh values in the timing buffers)"}[kind]
            raise KernelFailure("mismatch", "%s: %s" % (label, reason), "%s: %s" % (label, reason),
                                {"trial": index, "kind": kind, "reason": reason, "outputs": outputs})

    # -- the float64 oracle (oracle.py) -------------------------------------------------

    def honest_rule(self):
        """Whether comparisons use the `oracle` rule (the default, without explicit atol/rtol)."""
        settings = self.settings
        return (settings.tolerance or DEFAULT_MODE) == "oracle" and settings.atol is None and settings.rtol is None

    def oracle_due(self, family):
        """Whether this comparison measures its own oracle: the first of its family in the
        trials (a compile baseline's check may have measured one on another draw before)."""
        return self.honest_rule() and family not in self.oracle_trials

    def prepare_oracle(self, family, label, inputs):
        """The float64 and sequential-twin forwards on `inputs`, before the reference runs
        on them; only where the memory the plan leaves has room for them."""
        free, _ = self.meter.state()
        if self.gpu:
            import torch

            free += torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        room = (oracle.room_needed(self.result.get("footprint")), int(free * 0.9))
        self.progress("float64 oracle (%s)" % label)
        return oracle.prepare(family, label, self.ref, inputs, self.device, room)

    def oracle_of(self, family, pending, ref_out):
        """The oracle a comparison is judged with: its own (from `pending`), which becomes
        its family's, or its family's measured earlier (None: the dtype rule)."""
        if pending is None:
            return self.reused_oracle(family)
        measured = oracle.finish(pending, ref_out)
        self.oracle_seconds += measured.seconds
        self.oracle_trials.add(family)
        if measured.reason is not None and family in self.oracles:
            return self.reused_oracle(family)  # the family's earlier oracle still stands
        self.oracles[family] = measured
        return measured

    def reused_oracle(self, family):
        """The family's oracle scales without exact values (None: there is none)."""
        known = self.oracles.get(family)
        return known.reused() if known is not None else None

    def task_tolerance(self):
        """A task check's statement of the rule in numbers (the prompts state it): per
        floating output, the honest error and the largest deviation allowed on one draw of
        the task's own inputs, with the reference's own error ratio against its float64
        oracle. Never fails the task check: without an oracle the reason is recorded."""
        if not self.honest_rule():
            return
        self.progress("float64 oracle of the task's outputs")
        inputs = self.source.draw(self.seed + 1)
        pending = self.prepare_oracle("random", "the task check", inputs)
        ref_out = reference_forward(self.ref, inputs, self.device)
        del inputs
        measured = oracle.finish(pending, ref_out)
        self.oracle_seconds += measured.seconds
        try:
            _, _, _, tolerance = compare_outputs(ref_out, ref_out, None, None, "oracle", self.policy, measured)
        except Exception as e:  # noqa: BLE001 -- the figures are information: the task stands
            if is_out_of_memory(e):
                self.result["notes"].append("the task's tolerance figures were not measured: out of memory")
                return
            raise
        tolerance["oracle"] = OracleRecord(dict(tolerance["oracle"] or measured.record(),
                                                seconds=self.oracle_seconds))
        self.result["tolerance"] = tolerance

    def oracle_on(self, family, label, inputs):
        """Measures the family's oracle on `inputs` alone (the float32 reference runs on a
        copy): where a comparison needs one before any trial (the compile baseline's)."""
        from .tensors import clone_tree

        if not self.honest_rule() or family in self.oracles:
            return
        pending = self.prepare_oracle(family, label, inputs)
        ref_out = reference_forward(self.ref, clone_tree(inputs), self.device)
        measured = oracle.finish(pending, ref_out)
        self.oracle_seconds += measured.seconds
        self.oracles[family] = measured

    def correctness(self):
        """The random trials, then the signed-input trial (on the task's [0, 1) inputs an
        honest ReLU equals its input, which says nothing about who computed it); every one
        audited."""
        settings = self.settings
        self.audit_records = []
        for t in range(settings.trials):
            self.progress("correctness trial %d/%d" % (t + 1, settings.trials))
            self.check("random", t, lambda: self.source.draw(self.seed + 1 + t))
        if settings.signed_trial:
            self.progress("signed-input trial")
            done = self.check("signed", settings.trials, self.signed_draw(self.seed + 1000), needs=all_finite,
                              provenance=True, family="signed")
            if done is None:
                self.result["notes"].append("signed-input trial skipped: the reference is not finite on signed inputs")

    def audit(self, clock):
        """The audit's verdict in the result, from the forward that rules on provenance (the
        signed-input trial; else one more audited forward, on signed inputs where the
        reference allows them), on a GPU with each class's share of GPU time from one more
        forward; and the same Triton kernels must have run in every audited forward (a
        kernel that computes with PyTorch in some forwards and with Triton in others ran
        different code)."""
        if not any(provenance for _, _, provenance in self.audit_records):
            self.progress("audit of one forward")
            done = self.check("audit", self.settings.trials + 2, self.signed_draw(self.seed + 500), needs=all_finite,
                              provenance=True, family="signed")
            if done is None:
                self.check("audit", self.settings.trials + 2, lambda: self.source.draw(self.seed + 502),
                           provenance=True)
        record = dict(self.ruled_record())
        self.same_kernels_everywhere(record)
        clock.mark("audit")
        if self.gpu and isinstance(record, dict):
            # GPU time in its own forward on fresh values: a memoizing kernel would answer a
            # repeat of the audited inputs from its cache.
            copy_into(self.inputs, self.source.draw(self.seed + 600))
            sync(self.device)
            record["gpu"] = self.forward("gpu_time").get("gpu")
            self.meter.sample()
        verdict = audit_rules.classify(record, self.gpu)
        if isinstance(verdict.get("details"), dict):
            verdict["details"]["audited_forwards"] = len(self.audit_records)
        self.result["audit"] = verdict
        if verdict.get("verdict") != "ok":
            self.refuse(verdict)

    # -- timing --------------------------------------------------------------------------

    def open_gate(self):
        """The gate that keeps host latency out of timed windows (window.py); without one the
        windows include the worker's host time, and the result says so."""
        if knobs.on("KFORGE_DIAG_NO_GATE"):
            self.gate = None
            self.result["notes"].append("timed windows are not gated: diagnostic switch KFORGE_DIAG_NO_GATE")
            return
        try:
            self.gate = HostGate()
        except GateUnavailable as e:
            self.gate = None
            self.result["notes"].append("timed windows are not gated (%s): each includes its process's host "
                                        "latency, so figures are noisier and short forwards look slower" % e)

    def draws_fresh(self):
        """Whether timed forwards get fresh draws of get_inputs() (else rotations of one)."""
        return self.first_draw_ms <= SLOW_DRAW_MS

    def draw_cost_ms(self):
        """The host time of one timed forward's fresh inputs (the latest draw's), 0 where
        timed runs rotate instead of drawing."""
        return self.source.draw_ms if self.draws_fresh() else 0.0

    def refresher(self, base):
        """A function refresh(i, keep, input_sets, null=False) -> (write, privates) for timed
        run i: `write()` queues the run's never-seen input values into each set of lent
        buffers on the judge's stream (inside the window, window.py); `privates` are the
        judge's own copies of them, one per set, when `keep` (else None). A fresh draw of
        get_inputs() per set when a draw is cheap; otherwise a rotation of `base` by a
        random offset per tensor (the same values, every position moved), noted in the
        result. A null run (`null`) writes as much, of values already drawn: nothing reads
        them."""
        import random

        rng = random.SystemRandom()
        fresh = self.draws_fresh()
        same = knobs.on("KFORGE_DIAG_SAME_INPUTS")
        if same:
            self.result["input_refresh"] = "the same values every timed run (diagnostic KFORGE_DIAG_SAME_INPUTS)"
        if fresh:
            self.result.setdefault("input_refresh", "fresh draw of get_inputs() per timed forward")
        else:
            self.result["input_refresh"] = ("rotation per timed forward (one get_inputs() draw takes %.0f ms)"
                                            % self.first_draw_ms)
        drawn = []

        def refresh(i, keep, input_sets, null=False):
            writes, privates = [], []
            for buffers in input_sets:
                if same:
                    if not drawn:
                        drawn.append(base if base is not None else self.source.draw(self.seed + 10000))
                    writes.append(lambda b=buffers, v=drawn[0]: copy_into(b, v))
                    privates.append(clone_tree(drawn[0]) if keep else None)
                    continue
                if not fresh:
                    private = None
                    if keep:
                        private = clone_tree(base)
                        rotate_into(private, base, rng)
                    writes.append(lambda b=buffers, p=private: copy_into(b, p) if p is not None
                                  else rotate_into(b, base, rng))
                    privates.append(private)
                    continue
                if null and drawn:
                    values = drawn[0]
                else:
                    # The last draw goes before the next is made (the writes queued hold
                    # what they need): a large task's draw is more than the judge can keep twice.
                    drawn.clear()
                    values = self.source.draw(self.seed + 10000 + rng.randrange(1 << 30))
                    drawn[:] = [values]
                writes.append(lambda b=buffers, v=values: copy_into(b, v))
                privates.append(values)

            def write():
                """Queues the run's values, once: then lets go of them (the copies are queued
                on the judge's stream, where the next allocation waits for them), so that a
                loop still holding this function holds no draw. A large task's draw is more
                than the judge can keep three times."""
                for one in writes:
                    one()
                writes.clear()
            return write, (privates if keep else None)
        return refresh

    def reference_job(self):
        """The job of the reference's process (refprocess.py), served by worker.py."""
        workdir = tempfile.mkdtemp(prefix="reference-", dir=os.path.dirname(self.job["task_file"]))
        atol, rtol = audit_tolerance(self.job)
        return {"device": self.device, "jit_kernels": [], "workdir": workdir, "limits": {}, "atol": atol,
                "rtol": rtol, "precision": self.policy}

    def start_reference(self, input_shapes, output_shapes):
        """The reference's process ready to time: buffers lent, the task's Model loaded as
        its kernel with the judge's parameters (its null runs come with the kernel's)."""
        proc = self.reference_process
        if proc is None:
            raise HarnessError("the reference's timing process was not started")
        side, self.reference_lender = self.start_model(proc, "the reference", self.job["task_source"] + ALIAS,
                                                       input_shapes, output_shapes, ReferenceLink, Side)
        self.reference_side = side
        return side

    def start_model(self, proc, name, source, input_shapes, output_shapes, link_class, side_class, who=None):
        """A trusted model process (refprocess.py) ready to time: buffers lent, `source`'s
        ModelNew loaded with the judge's parameters. `who` names its context draw (by
        default `reference` or `compiled`). Returns (side, lender)."""
        link = link_class(proc.sock, lambda: self.result.get("phase") or "reference timing")
        link.receive("hello")
        self.draw_context(link, who or ("reference" if link_class is ReferenceLink else "compiled"))
        lender = Lender("cuda_ipc", self.device)
        (inputs, slots), (input_desc, slot_desc), fds = lender.like([input_shapes, output_shapes])
        link.call({"op": "attach", "inputs": input_desc, "outputs": slot_desc}, "attached", fds)
        side = side_class(name, link, inputs, slots, self.gate, lender, True)
        link.call(side.clock.request(), "clock_set")
        init_buffers, init_desc, fds = lender.like(self.init_inputs)
        copy_into(init_buffers, self.init_inputs)
        loaded = link.call({"op": "load", "init_inputs": init_desc, "seed": self.seed, "source": source},
                           "loaded", fds)
        if link_class is ReferenceLink:
            self.reference_tf32 = loaded.get("tf32")
        self.align(loaded, link, lender, report=False)
        return side, lender

    def draw_context(self, link, who):
        """Has a timing process draw its CUDA context (launchpath.py) while the GPU is quiet:
        before the process gets buffers and before any kernel is imported. `who` names its
        record in the timing's environment."""
        if knobs.on("KFORGE_DIAG_NO_CONTEXT_DRAW"):
            return
        if self.draws is None:
            info = self.result.get("device") or {}
            floor = cachekeeper.Floor(self.store, "%s %s" % (info.get("name"), info.get("uuid")),
                                      peaks.driver_version(info))
            self.draws = launchpath.Draws(floor)
        request = self.draws.request()
        self.draws.take(who, request, link.call(request, "drawn"))

    def reference_timing(self, flush, base):
        """A task check's timing: the reference alone (cached per task, inputs, device and
        method, or measured now)."""
        spec = self.spec
        device, inputs = self.result["device"], self.input_signature(base)
        key, cached = self.store.reference_timing(device, inputs)
        # Rounds time the reference again in its process: it must not be let go for a cache hit.
        use_cache = spec.settings.baseline_cache and spec.kernelbench_rounds <= 1
        if cached is not None and use_cache:
            cached["cached"] = True
            figures = cached
        else:
            figures = self.time_reference(flush)
            if spec.settings.baseline_cache:
                self.store.keep_reference_timing(device, inputs, figures)
            figures["cached"] = False
        result = TimingRecord({"meaningful": True, "method": timing.METHOD_NAME, "kernel": {}, "score": None,
                               "baseline_key": key, "reference": figures, "flush_l2_bytes": tensor_bytes(flush),
                               "calibration": self.reference_side.null if self.reference_side else None,
                               "environment": self.environment(None)})
        return result

    def input_signature(self, base):
        """The inputs as the cached figures' keys read them (timing.baseline_key): each
        tensor's path, shape and dtype; the server computes the keys (cachekeeper.py)."""
        import torch

        return [[p, list(v.shape), str(v.dtype)] for p, v in flatten_outputs(base, "in")
                if isinstance(v, torch.Tensor)]

    def against_compile(self, result):
        """The timing with the compile baseline's figures, the score against them and the
        baseline its headline is against (baselines.py); the result notes a task that has
        no compile figures while they were asked for."""
        if not self.settings.compile_baseline:
            return result
        baselines.against_compile(result, self.compiled, self.settings.baseline or "best")
        if self.compiled is not None and self.compiled.get("error"):
            self.result["notes"].append("no torch.compile baseline (%s): %s; scores are against eager PyTorch"
                                        % (self.compiled["mode"], self.compiled["error"]))
        return result

    def compile_phase(self, flush, base_of):
        """The compile baseline (compile_baseline), its phase marked apart; nothing where it
        is not asked for. `base_of()` gives inputs for the calibration, called only when the
        baseline is measured."""
        if not (self.timing() and self.settings.compile_baseline):
            return
        self.meter.enter("compile baseline")
        self.compile_baseline(flush, base_of, self.input_shapes, self.output_shapes)
        self.clock.mark("compile_baseline")

    def compile_baseline(self, flush, base_of, input_shapes, output_shapes):
        """The reference under torch.compile against the eager reference (baselines.py):
        cached per task, inputs, device, versions, timing method, precision policy and mode,
        else compiled and timed now, interleaved with the eager reference in its process.
        Sets self.compiled; the compiled process is gone when it returns."""
        mode = self.settings.compile_mode or "default"
        # The inputs' shapes and dtypes are all the key reads of them.
        device, inputs = self.result["device"], self.input_signature(input_shapes)
        _, cached = self.store.compile_baseline(device, inputs, mode)
        if cached is not None and self.settings.baseline_cache:
            self.close_compiled()
            self.compiled = dict(cached, cached=True)
            return
        self.progress("timing the reference under torch.compile (mode %s)" % mode)
        started = time.perf_counter()
        try:
            record = self.measure_compiled(flush, base_of(), mode, input_shapes, output_shapes)
        except Exception as e:  # noqa: BLE001 -- a baseline never decides a verdict
            # Whatever went wrong (the compiled process, the reference's beside it, memory
            # the judge could not get for the comparison) costs the compile baseline only:
            # the task's and the kernel's own figures are measured before it.
            record = baselines.unavailable(mode, self.baseline_lost(e)[:500], time.perf_counter() - started)
        finally:
            self.close_compiled()
        if self.settings.baseline_cache:
            self.store.keep_compile_baseline(device, inputs, mode, record)
        self.compiled = dict(record, cached=False)

    def baseline_lost(self, error):
        """Why a second reference (compiled, or under PyTorch's defaults) has no figures,
        after its measurement raised: the gate let go and the memory returned first."""
        if self.gate is not None and self.gate.held:
            self.gate.release()
        if self.gpu and is_out_of_memory(error):
            import torch

            torch.cuda.empty_cache()
        if isinstance(error, KernelFailure):
            return error.summary
        if isinstance(error, (CompileUnavailable, HarnessError, TaskFailure)):
            return str(error)
        return "%s%s: %s" % (type(error).__name__, where_raised(error), error)

    def measure_compiled(self, flush, first, mode, input_shapes, output_shapes):
        """Starts the compiled reference, compiles it on one forward (timed apart: the
        compile time), compares that forward's outputs with the eager reference's, then
        times both interleaved (timed.py)."""
        job = self.job
        proc = self.compiled_process
        if proc is None:
            raise CompileUnavailable("its process was not started")
        # Its outputs are checked against eager's under the task's rule: the oracle's scale
        # of the task's own draws, measured on `first` (kept for the trials' comparisons).
        self.oracle_on("random", "the compile baseline's check", first)
        # One refresher for both sides, begun anew: the reference's timing left its last
        # draw in the one it had, and each draw is the task's inputs' size.
        self.reference_side.refresh = self.refresher(self.base)
        if self.gpu:
            import torch

            # What the judge's allocator holds unused goes back first: the compiled side's
            # buffers and its draws are each the task's size.
            torch.cuda.empty_cache()
        proc.serve(self.reference_job())
        source = baselines.compiled_source(job["task_source"], mode)
        side, self.compiled_lender = self.start_model(proc, "the compiled reference", source, input_shapes,
                                                      output_shapes, CompiledLink, CompiledSide)
        self.compiled_side = side
        ref = self.reference_side
        # The reference's own calibration, arming and gate count stay those of the
        # measurement they belong to (an evaluation's figures are computed after this).
        kept = (ref.null, ref.armed_s, ref.clock.timeouts, ref.clock.in_a_row)
        try:
            return self.time_compiled(ref, side, flush, first, mode)
        finally:
            ref.null, ref.armed_s, ref.clock.timeouts, ref.clock.in_a_row = kept

    def time_compiled(self, ref, side, flush, first, mode):
        """measure_compiled's work, once both processes are ready."""
        job = self.job
        calibrate([(ref, lambda base=first: copy_into(ref.inputs, base)),
                   (side, lambda base=first: copy_into(side.inputs, base))], flush, self.progress)
        side.refresh = ref.refresh
        # The judge keeps no copy: the run's values go into the compiled side's buffers and,
        # before that side runs (a task may write its inputs in place), into the reference's,
        # whose own process then computes the eager outputs to compare with. The judge's
        # memory already holds the task's inputs, and large tasks have room for no more.
        write, _ = side.refresh(0, False, side.input_sets(1))

        def write_both():
            write()
            copy_into(ref.inputs, side.inputs)

        started = time.perf_counter()
        run = side.run("timed", -1000, write_both, flush, None, gated=False)
        compile_s = time.perf_counter() - started
        try:
            # Read in place, not frozen: the compiled process runs the task's own code (as
            # trusted as the reference's) and is idle once it answered.
            outputs = kernel_outputs(run.done, side.slots)
            eager = ref.run("timed", -1001, lambda: None, flush, None, gated=False)
        except KernelFailure as e:
            raise CompileUnavailable(e.summary)
        ref_out = kernel_outputs(eager.done, ref.slots)
        settings = self.settings
        passed, _, reason, _ = compare_outputs(ref_out, outputs, settings.atol, settings.rtol,
                                               settings.tolerance or DEFAULT_MODE, self.policy,
                                               self.reused_oracle("random"))
        if not passed:
            raise CompileUnavailable("under torch.compile the task computes another result (%s)" % reason)
        del ref_out, outputs
        nulls, eager_out, compiled_out = time_runs(ref, side, flush, job, self.progress,
                                                   draw_ms=self.draw_cost_ms)
        self.meter.sample()
        null_ms = timing.quantile(nulls, 0.5)
        offset = side.null["overhead_ms"] - ref.null["overhead_ms"]
        eager = eager_out.figures(null_ms, 0.0, ref.null, job)
        compiled = compiled_out.figures(null_ms, offset, side.null, job)
        interval = timing.bootstrap_score(eager_out.windows, compiled_out.windows, nulls, offset, seed=self.seed)
        return baselines.figures(mode, compile_s, eager, compiled, interval)

    def close_compiled(self):
        """Ends the compiled reference's process (reaped: its CUDA context and buffers are
        gone before the kernel's are planned) and frees what was lent to it."""
        if self.compiled_side is not None:
            try:
                self.compiled_side.link.call({"op": "exit"}, "bye")
            except (CompileUnavailable, KernelFailure, TaskFailure, HarnessError):
                pass
            self.compiled_side = None
        if self.compiled_lender is not None:
            self.compiled_lender.close()
            self.compiled_lender = None
        if self.compiled_process is not None:
            self.compiled_process.close()
            self.compiled_process = None

    # -- the reference under PyTorch's defaults (defaults.py) ----------------------------

    def defaults_phase(self, flush, base_of):
        """The defaults baseline, its phase marked apart: where the policy's settings differ
        from PyTorch's defaults for the task's work, cached per task, inputs, device and
        versions, else measured now (before any kernel is imported). Sets self.defaults."""
        proc_wanted = self.defaults_process is not None and self.timing()
        if not proc_wanted:
            return
        work = getattr(self, "work", None)
        applies, why = defaults.applies(self.policy, work if work and "error" not in work else None)
        if not applies:
            self.close_defaults()
            return
        self.meter.enter("defaults baseline")
        device, inputs = self.result["device"], self.input_signature(self.input_shapes)
        _, cached = self.store.defaults_baseline(device, inputs)
        if cached is not None and self.settings.baseline_cache:
            self.close_defaults()
            self.defaults = dict(cached, cached=True)
            self.clock.mark("defaults_baseline")
            return
        self.progress("timing the reference under PyTorch's defaults (%s)" % why)
        try:
            record = self.measure_defaults(flush, base_of(), why)
        except Exception as e:  # noqa: BLE001 -- a baseline never decides a verdict
            record = defaults.unavailable(self.policy, self.baseline_lost(e)[:500])
        finally:
            self.close_defaults()
        if self.settings.baseline_cache:
            self.store.keep_defaults_baseline(device, inputs, record)
        self.defaults = dict(record, cached=False)
        self.clock.mark("defaults_baseline")

    def measure_defaults(self, flush, first, why):
        """The reference under PyTorch's defaults in its own process, timed interleaved with
        the policy's reference (timed.py), as the compile baseline is."""
        proc = self.defaults_process
        self.reference_side.refresh = self.refresher(self.base)
        if self.gpu:
            import torch

            torch.cuda.empty_cache()
        proc.serve(dict(self.reference_job(), precision=defaults.DEFAULTS))
        side, self.defaults_lender = self.start_model(
            proc, "the reference under PyTorch's defaults", self.job["task_source"] + ALIAS, self.input_shapes,
            self.output_shapes, CompiledLink, CompiledSide, who="defaults")
        self.defaults_side = side
        ref = self.reference_side
        kept = (ref.null, ref.armed_s, ref.clock.timeouts, ref.clock.in_a_row)
        try:
            calibrate([(ref, lambda base=first: copy_into(ref.inputs, base)),
                       (side, lambda base=first: copy_into(side.inputs, base))], flush, self.progress)
            side.refresh = ref.refresh
            nulls, ref_out, other_out = time_runs(ref, side, flush, self.job, self.progress,
                                                  draw_ms=self.draw_cost_ms)
            self.meter.sample()
            null_ms = timing.quantile(nulls, 0.5)
            offset = side.null["overhead_ms"] - ref.null["overhead_ms"]
            reference = ref_out.figures(null_ms, 0.0, ref.null, self.job)
            other = other_out.figures(null_ms, offset, side.null, self.job)
            interval = timing.bootstrap_score(ref_out.windows, other_out.windows, nulls, offset, seed=self.seed)
            return defaults.figures(self.policy, why, reference, other, interval)
        finally:
            ref.null, ref.armed_s, ref.clock.timeouts, ref.clock.in_a_row = kept

    def against_defaults(self, result):
        """The timing with the defaults figures and the score against them, where measured."""
        if self.defaults is None:
            return result
        defaults.against_defaults(result, self.defaults)
        if self.defaults.get("error"):
            self.result["notes"].append("no figure under PyTorch's default settings: %s" % self.defaults["error"])
        return result

    def close_defaults(self):
        """Ends the defaults reference's process and frees what was lent to it."""
        if self.defaults_side is not None:
            try:
                self.defaults_side.link.call({"op": "exit"}, "bye")
            except (CompileUnavailable, KernelFailure, TaskFailure, HarnessError):
                pass
            self.defaults_side = None
        if self.defaults_lender is not None:
            self.defaults_lender.close()
            self.defaults_lender = None
        if self.defaults_process is not None:
            self.defaults_process.close()
            self.defaults_process = None

    def time_reference(self, flush):
        """The reference's timed runs alone, beside null runs of its process."""
        try:
            nulls, out, _ = time_runs(self.reference_side, None, flush, self.job, self.progress,
                                      draw_ms=self.draw_cost_ms)
        except (KernelFailure, TaskFailure, HarnessError):
            raise
        except Exception as e:  # noqa: BLE001
            if is_out_of_memory(e):
                raise
            raise protocol.TaskFailure("timing the reference failed: %s: %s" % (type(e).__name__, e))
        self.meter.sample()
        return out.figures(timing.quantile(nulls, 0.5), 0.0, self.reference_side.null, self.job)

    def let_reference_go(self):
        """The reference's process told to exit (its "bye") and the buffers lent to it freed,
        without waiting for it to end: it tears its CUDA context down while the judge
        re-checks the kernel, and close_reference() reaps it."""
        if self.reference_side is not None:
            try:
                self.reference_side.link.call({"op": "exit"}, "bye")
            except (KernelFailure, TaskFailure, HarnessError):
                pass
            self.reference_side = None
        if self.reference_lender is not None:
            self.reference_lender.close()
            self.reference_lender = None

    def close_reference(self):
        self.let_reference_go()
        if self.reference_process is not None:
            self.reference_process.close()
            self.reference_process = None

    def bound_window_gain(self, result, single, offset):
        """Issue 34, item 10: in a window of several forwards every input set is written before
        the first forward, so a kernel that found the later sets in its process could compute
        several forwards in one launch. It gains nothing alone: where the kernel's figure per
        forward in windows is below its single-forward figure by more than the reference's is
        (timed.window_gain), its figures count what the reference gains from windows and no
        more, and the result says so. The record is the timing calibration's `windowing`."""
        reference, kernel = result["reference"], result["kernel"]
        windowing = window_gain(single, offset, reference["median_ms"], kernel["median_ms"],
                                result["forwards_per_window"])
        result["calibration"]["windowing"] = windowing
        if not windowing["bounded"] or result["score"] is None:
            return
        gain = windowing["gain"]
        windowing["kernel_median_ms_in_windows"] = kernel["median_ms"]
        windowing["score_in_windows"] = result["score"]
        for key in ("median_ms", "ci_low_ms", "ci_high_ms", "mean_ms", "min_ms", "max_ms"):
            if isinstance(kernel.get(key), (int, float)):
                kernel[key] = kernel[key] * gain
        result["score"] = timing.score(reference, kernel)
        for key in ("score_low", "score_high", "runs_score_low", "runs_score_high"):
            if isinstance(result.get(key), (int, float)):
                result[key] = result[key] / gain
        self.result["flags"].append("window_batching")
        self.result["notes"].append(
            "the kernel's forwards were %.2fx faster per forward in windows of %d forwards than alone "
            "(%.4f ms alone), against %.2fx for the reference: more than sharing a window gives (a kernel that "
            "computes several forwards' inputs in one launch gains so); its figures count the reference's gain only "
            "(score %.3gx, %.3gx in windows)" % (
                windowing["single_forward_ms"]["kernel"] / max(windowing["per_forward_ms"]["kernel"], 1e-9),
                result["forwards_per_window"], windowing["single_forward_ms"]["kernel"],
                windowing["single_forward_ms"]["reference"] / max(windowing["per_forward_ms"]["reference"], 1e-9),
                result["score"], windowing["score_in_windows"]))

    def check_timed(self, i, run, privates, slot_sets):
        """A checked timed run: each set's slots as the judge's stream copied them right
        after the window closed, against the reference on the judge's own copy of that set's
        inputs (one trial recorded per run, every set compared)."""
        count = len(slot_sets)
        for k, (private, slots, taken) in enumerate(zip(privates, slot_sets, run.snapshot)):
            outputs = self.freeze(run.done, taken, slots)
            ref_out = reference_forward(self.ref, private, self.device)
            self.meter.sample()
            self.compare_frozen("timed", i, ref_out, outputs, record=k == count - 1,
                                forward=(k, count) if count > 1 else None)

    def environment(self, before):
        env = environment(self.result["device"], self.result["versions"],
                          getattr(self, "reference_tf32", None), before,
                          timing.METHOD_TEXT, self.result.get("input_refresh"))
        env["precision"] = self.policy  # the policy the reference's settings (tf32_*) came from
        env["diagnostics"] = knobs.active()
        env["launch_path"] = self.draws.environment() if self.draws is not None else None
        return env

    def measure(self, flush):
        """Both models' timed runs, interleaved (timed.py); returns the result's timing."""
        job = self.job
        ref_side, kernel_side = self.reference_side, self.kernel_side
        before = gpu_clocks(self.result["device"])
        try:
            nulls, ref_out, kernel_out = time_runs(ref_side, kernel_side, flush, job, self.progress,
                                                   check=self.check_timed, draw_ms=self.draw_cost_ms,
                                                   mark=self.clock.mark)
        finally:
            self.clock.mark("timing")
            self.let_reference_go()
        self.meter.sample()
        null_ms = timing.quantile(nulls, 0.5)
        offset = kernel_side.null["overhead_ms"] - ref_side.null["overhead_ms"]
        reference = ref_out.figures(null_ms, 0.0, ref_side.null, job)
        kernel = kernel_out.figures(null_ms, offset, kernel_side.null, job)
        calibration = dict(kernel_side.null, reference_overhead_ms=ref_side.null["overhead_ms"], offset_ms=offset,
                           interleaved_null_ms=null_ms, interleaved_null_runs=len(nulls),
                           forwards_per_window=kernel_out.forwards)
        result = TimingRecord({"meaningful": True, "method": timing.METHOD_NAME, "reference": reference,
                               "kernel": kernel, "forwards_per_window": kernel_out.forwards,
                               "score": timing.score(reference, kernel), "baseline_key": None,
                               "flush_l2_bytes": tensor_bytes(flush), "calibration": calibration,
                               "environment": self.environment(before),
                               "interval_method": interval_method(self.settings)})
        if result["score"] is not None:
            low, high = timing.bootstrap_score(ref_out.windows, kernel_out.windows, nulls, offset, seed=self.seed)
            result["runs_score_low"], result["runs_score_high"] = low, high
            result["score_low"], result["score_high"] = timing.with_between_evaluations(
                result["score"], low, high, between_evaluations(self.settings))
        reported_ref = reference.get("reported_median_ms")
        if reported_ref and kernel.get("reported_median_ms"):
            result["reported_score"] = reported_ref / kernel["reported_median_ms"]
        result["noisy"] = bool(reference.get("noisy") or kernel.get("noisy"))
        if kernel_out.single is not None:
            self.bound_window_gain(result, kernel_out.single, offset)
        self.against_compile(result)
        self.against_defaults(result)
        notes, flags = self.result["notes"], self.result["flags"]
        if result["noisy"]:
            flags.append("noisy_timing")
            notes.append("%s: the score is uncertain; run again on a quieter GPU or raise timing_budget_s" % "; ".join(
                "the %s's median %.4f ms has a wide 95%% interval [%.4f-%.4f]" % (name, f["median_ms"],
                                                                                f["ci_low_ms"], f["ci_high_ms"])
                for name, f in (("reference", reference), ("kernel", kernel)) if f.get("noisy")))
        if timing.reported_disagrees(kernel.get("reported_median_ms"), kernel["median_ms"]):
            flags.append("reported_time_disagrees")
            notes.append("the kernel's process reported %.4f ms per forward from its own CUDA events; the judge "
                         "measured %.4f ms around its work: a patched or misled timer (the score is the judge's "
                         "figure)" % (kernel["reported_median_ms"], kernel["median_ms"]))
        if kernel.get("host_queue_ms", 0) > kernel["median_ms"]:
            notes.append(
                "the kernel's forward takes %.4f ms of host time to queue its GPU work, more than the %.4f ms the "
                "GPU spends on it: in eager use it would be host-bound (the score compares GPU time; the "
                "reference queues in %.4f ms)" % (kernel["host_queue_ms"], kernel["median_ms"],
                                                  reference.get("host_queue_ms") or 0.0))
        timeouts = kernel_side.clock.timeouts
        kernel["gate_timeouts"] = timeouts
        reference["gate_timeouts"] = ref_side.clock.timeouts
        if timeouts:
            notes.append("%d timed run(s) of the kernel were not queued in time for the gate (a forward that waits "
                         "for the GPU from the host): their windows include host time" % timeouts)
        suspicious = self.settings.suspicious_speedup
        if result["score"] is not None and result["score"] > suspicious:
            flags.append("suspicious_speedup")
            notes.append("speedup %.1fx is above %gx: check the kernel does all of the work"
                         % (result["score"], suspicious))
        return result
