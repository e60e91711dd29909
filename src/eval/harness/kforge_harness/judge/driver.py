"""The drivers: one per job kind, each a short sequence of phases that assembles the
`ResultRecord`. `evaluate` judges a kernel; `check_task` checks a task alone (what `kforge
run` shows before any LLM call). `judge` runs the one a job asks for, with the reference's
processes forked first and everything released however it ends."""

from __future__ import annotations

from typing import Any, Optional

from .. import defaults, messages
from ..compare import weak_outputs
from ..exchange import Lender
from ..loading import copy_into
from ..memory import is_out_of_memory
from ..protocol import HarnessError, KernelFailure, TaskFailure
from ..tensors import flatten_outputs
from ..timed import calibrate
from ..wire import Job, ResultRecord
from . import timing_phase
from .compile_baseline import compile_phase
from .context import Progress, Run, release_gate
from .defaults_baseline import defaults_phase
from .inputs import draw_cost
from .kernel import Checked, kernel_phase
from .kernelbench import kernelbench_rounds, kernelbench_timing
from .links import WorkerLink
from .oracles import Oracles
from .reference import Reference, draw_context
from .speed import record_speed_of_light
from .start import start
from .timing_phase import Baselines


def open_run(job: dict[str, Any], spec: Job, result: ResultRecord, store: Any, progress: Progress,
             channel: Any, handover: Any = None) -> Run:
    """The evaluation of `job` (what kforge sent, with the task file and both sources, as
    the modules that read it by key see it; `spec` the same typed), whose result so far is
    `result`; `store`: what the server keeps for it (judgeproc.Remote); `channel`: the
    socket to the kernel's process, None for a task check; `handover`: where a judge started
    ahead of its request waits for the kernel (judgeproc.Handover), None otherwise."""
    run = Run(job=job, spec=spec, result=result, progress=progress, store=store, handover=handover)
    if channel:
        run.link = WorkerLink(channel, run.phase)
    return run


def judge(run: Run) -> ResultRecord:
    """The job's driver, its reference's processes forked before this process's CUDA
    context exists (refprocess.py); an allocation of the judge's that fails is `oom`."""
    try:
        with fork_reference(run) as reference:
            try:
                return (check_task if run.spec.reference_only else evaluate)(run, reference)
            finally:
                release_gate(run)  # a stream held at the gate would hang the judge's teardown
    except (KernelFailure, TaskFailure, HarnessError):
        raise
    except Exception as e:  # noqa: BLE001 -- an allocation of the judge's that failed
        if is_out_of_memory(e):
            raise run.out_of_memory(e)
        raise


def fork_reference(run: Run) -> Reference:
    """The reference's timing process (timed jobs on a GPU), with the compiled reference's
    where the compile baseline is asked for and the defaults reference's where the policy
    differs from PyTorch's defaults; none otherwise."""
    if not (run.device != "cpu" and run.spec.timing):
        return Reference.none(run)
    return Reference.fork(run, bool(run.settings.compile_baseline), bool(defaults.differences(run.policy)))


def evaluate(run: Run, reference: Reference) -> ResultRecord:
    """A kernel's evaluation: start, the baselines (before the kernel is imported), the
    kernel phase, the timing phase, the re-check, the speed of light."""
    import torch

    started, first, flush = start(run, reference)
    setup = started.setup
    oracles = Oracles(run, setup.ref)
    # Before the kernel is imported: figures that are cached for every later evaluation of
    # the task are never measured beside a kernel's code (its process could load the GPU
    # while they are taken).
    seconds = Baselines(compile_phase(run, setup, reference, oracles, flush, first.get),
                        defaults_phase(run, setup, reference, flush, first.get))
    if run.gpu:
        torch.cuda.empty_cache()
    if run.timing:
        draw_context(run, run.link, "kernel")
    lender = Lender("cuda_ipc" if run.gpu else "memfd", run.device)
    try:
        checked = kernel_phase(run, setup, reference, oracles, started.precision, lender, first, flush)
        if run.timing:
            run.progress("timing")
            run.meter.enter("kernel timing")
            run.result["timing"] = timing_phase.measure(run, reference, checked.side, flush,
                                                        checked.checker.check_timed, draw_cost(setup), seconds)
            run.clock.mark("timing")
        recheck(run, checked)
        reference.close()
        run.clock.mark("reference_exit")
        try:
            run.link.call(messages.Exit(op="exit"), "bye")
        except KernelFailure:
            pass  # the worker is done either way; its exit is not part of the verdict
    finally:
        lender.close()
    record_speed_of_light(run, setup.work, started.peaks)
    return correct(run, setup.source.where, weak_outputs(run.result["trials"]))


def recheck(run: Run, checked: Checked) -> None:
    """The re-check after timing, on fresh values in the timing buffers. Without timed runs
    (the CPU) there is nothing to re-check after: every trial already wrote fresh values
    into the same lent buffers."""
    if not (run.settings.post_timing_check and run.timing):
        return
    checker = checked.checker
    run.progress("re-check after timing")
    run.meter.enter("recheck")
    checker.check("post_timing", run.settings.trials + 1, lambda: checker.setup.source.draw(run.seed + 3000))
    checker.same_kernels_everywhere(checker.ruled_record())
    run.result["audit"]["details"]["audited_forwards"] = len(checker.audit_records)
    run.clock.mark("recheck")


def correct(run: Run, drawn_on: Any, weak: Optional[list[str]]) -> ResultRecord:
    """The result of a kernel that passed every check."""
    result = run.result
    if weak:
        result["flags"].append("weak_reference")
        result["notes"].append(
            "reference output %s is small next to atol: the tolerance was scaled down to the "
            "output's own magnitude (see tolerance)" % ", ".join(weak))
    result["inputs_drawn_on"] = drawn_on
    result["correct"] = True
    result["status"] = "correct"
    return result


def check_task(run: Run, reference: Reference) -> ResultRecord:
    """The task check: Model built, run on its inputs, timed (GPU) with the baselines and
    KernelBench's protocol where asked, footprint planned, the tolerance stated."""
    started, first, flush = start(run, reference)
    setup = started.setup
    oracles = Oracles(run, setup.ref)
    spec = run.spec
    if run.timing:
        ref_side = reference.side
        calibrate([(ref_side, lambda base=first.values: copy_into(ref_side.inputs, base))], flush, run.progress)
        run.result["timing"] = timing_phase.reference_timing(run, reference, flush, first.values, draw_cost(setup))
        rounds = max(1, spec.kernelbench_rounds) if spec.kernelbench_protocol else 0
        if rounds > 1:
            kernelbench_rounds(run, setup, reference, rounds, flush, draw_cost(setup))
        # Last of what uses the reference's process: the task check's own figures
        # stand whatever becomes of it while torch.compile runs beside it.
        seconds = Baselines(compile_phase(run, setup, reference, oracles, flush, first.get),
                            defaults_phase(run, setup, reference, flush, first.get))
        seconds.apply(run, run.result["timing"])
        if rounds == 1:
            first.release()  # KernelBench draws its own inputs and allocates its own flush
            del flush
            reference.base = None
            reference.close()
            kernelbench_timing(run, setup)
    record_speed_of_light(run, setup.work, started.peaks)
    oracles.task_tolerance(lambda: setup.source.draw(run.seed + 1))
    return reference_only(run, setup.output_shapes, setup.source.where)


def reference_only(run: Run, output_shapes: Any, drawn_on: Any) -> ResultRecord:
    """The task check's result: the reference's outputs as its one trial."""
    import torch

    result = run.result
    outputs = []
    for path, value in flatten_outputs(output_shapes):
        if isinstance(value, torch.Tensor):
            outputs.append({"output": path, "passed": True, "shape": list(value.shape),
                            "dtype": str(value.dtype).replace("torch.", "")})
    result["trials"].append({"kind": "reference", "index": 0, "passed": True, "outputs": outputs})
    result["inputs_drawn_on"] = drawn_on
    result["correct"] = True
    result["status"] = "correct"
    result["notes"].append("reference check only: no kernel was evaluated")
    return result
