"""A throwaway phase (issue 37, item 5's measurement): records how many floating dtypes the
task has, between the task phase and the baselines."""

from __future__ import annotations

from .context import Run
from .start import Started


def inputs_digest(run: Run, started: Started) -> None:
    run.note("throwaway phase: %d floating dtype(s)" % len(started.setup.task_dtypes))
    run.clock.mark("inputs_digest")
