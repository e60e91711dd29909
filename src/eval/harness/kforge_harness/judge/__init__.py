"""The judge: one process per evaluation, in the tasks' sandbox (judgeproc.py). It loads
the task, builds the reference, draws every input, lends the worker its buffers, compares
outputs, times both models and decides the verdict. The reference model and its outputs
exist only here, out of the kernel's reach; the task's code runs here too, so the judge
holds no secret and no host path it could write (docs/security.md, "The task sandbox").

A pipeline of phases with typed hand-offs (docs/architecture.md, "The judge"):
  start.py (task.py: the task phase)  -> Started (a frozen Setup, the precision record, peaks)
  compile_baseline.py, defaults_baseline.py -> the second references' records (Baselines)
  kernel.py (checks.py)               -> Checked (the audited trials, the kernel's timing side)
  timing_phase.py                     -> the TimingRecord
  driver.py: `evaluate` and `check_task` assemble the ResultRecord; `judge` runs one.
The reference's processes are a context-managed `Reference` (reference.py).
"""

from __future__ import annotations

from .context import Run
from .driver import check_task, evaluate, judge, open_run
from .links import CompiledLink, CompiledSide, CompileUnavailable, ReferenceLink, WorkerLink
from .outputs import Frozen, UnsupportedOutput, freeze, kernel_outputs

__all__ = ["CompileUnavailable", "CompiledLink", "CompiledSide", "Frozen", "ReferenceLink", "UnsupportedOutput",
           "Run", "WorkerLink", "check_task", "evaluate", "freeze", "judge", "kernel_outputs", "open_run"]
