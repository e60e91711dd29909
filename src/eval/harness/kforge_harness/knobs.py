"""Diagnostic switches of the timing protocol (issue 35: where does the reference lose 10%
against KernelBench's timer?). Each is an environment variable of the evaluator's process,
read by the judge, that turns one part of kforge's protocol off so that its share of a
difference can be measured (scripts/gpu/reference_gap.py sets them one at a time). None is
for normal use: a timing taken with any set says so (`timing.environment.diagnostics`), and
its reference figures are cached under their own key, never as a task's baseline."""

from __future__ import annotations

import os
from typing import FrozenSet, Iterable, Optional

KNOBS = {
    "KFORGE_DIAG_NO_RELOCATE": "the models' weights are not moved between rounds of timed runs",
    "KFORGE_DIAG_SAME_INPUTS": "every timed run gets the same input values (no fresh draw or rotation)",
    "KFORGE_DIAG_NO_GATE": "timed windows are not gated (the worker's host latency is inside them)",
    "KFORGE_DIAG_NO_CONTEXT_DRAW": "the timing processes keep the first CUDA context they get",
    "KFORGE_DIAG_GUARD_TRACE": "the run-time guard writes what it would refuse into the log and refuses nothing "
                               "(to list a GPU's library call sites, scripts/gpu/guard_trace.sh)",
}

# The switches of this process when the server gave them (a judge in the tasks' sandbox, whose
# environment is an allow-list without them: judgeproc.py); None: this process's environment.
_given: Optional[FrozenSet[str]] = None


def give(names: Iterable[str]) -> None:
    """The switches the server read from its environment, for a process that cannot read them."""
    global _given
    _given = frozenset(n for n in names if n in KNOBS)


def on(name: str) -> bool:
    """Whether the switch `name` (a key of KNOBS) is set to 1."""
    if name not in KNOBS:
        raise KeyError(name)
    if _given is not None:
        return name in _given
    return os.environ.get(name) == "1"


def active() -> list[str]:
    """The switches set, sorted (empty in normal use)."""
    return sorted(name for name in KNOBS if on(name))
