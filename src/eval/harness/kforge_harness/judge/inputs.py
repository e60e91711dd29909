"""The values of the judge's inputs: a trial's signed draw, and each timed run's refresh
(fresh draws of get_inputs() where a draw is cheap, rotations of one where not)."""

from __future__ import annotations

from typing import Any, Callable

from .. import knobs
from ..loading import copy_into, rotate_into
from ..tensors import clone_tree
from .context import Run
from .task import Setup

SLOW_DRAW_MS = 50.0  # above this per draw, timed runs refresh inputs by rotation instead


def draws_fresh(setup: Setup) -> bool:
    """Whether timed forwards get fresh draws of get_inputs() (else rotations of one)."""
    return setup.first_draw_ms <= SLOW_DRAW_MS


def draw_cost(setup: Setup) -> Callable[[], float]:
    """The host time of one timed forward's fresh inputs (the latest draw's), 0 where
    timed runs rotate instead of drawing (a function: the latest draw is read when asked)."""
    return lambda: float(setup.source.draw_ms or 0.0) if draws_fresh(setup) else 0.0


def signed_draw(setup: Setup, seed: int) -> Callable[[], Any]:
    """A draw of the task's inputs with its floating tensors replaced by standard-normal
    values (integer and bool inputs as drawn)."""
    from ..loading import seed_everything
    from ..tensors import signed_like

    def draw() -> Any:
        base = setup.source.draw(seed)
        seed_everything(seed + 1)
        return signed_like(base)
    return draw


def copier(buffers: Any, values: Any) -> Callable[[], Any]:
    """Writes `values` into `buffers` when called."""
    return lambda: copy_into(buffers, values)


def rotation(buffers: Any, base: Any, rng: Any) -> Callable[[], Any]:
    """Writes a rotation of `base` by a random offset per tensor into `buffers` when called."""
    return lambda: rotate_into(buffers, base, rng)


def refresher(run: Run, setup: Setup, base: Any) -> Callable[..., Any]:
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
    fresh = draws_fresh(setup)
    same = knobs.on("KFORGE_DIAG_SAME_INPUTS")
    if same:
        run.result["input_refresh"] = "the same values every timed run (diagnostic KFORGE_DIAG_SAME_INPUTS)"
    if fresh:
        run.result.setdefault("input_refresh", "fresh draw of get_inputs() per timed forward")
    else:
        run.result["input_refresh"] = ("rotation per timed forward (one get_inputs() draw takes %.0f ms)"
                                        % setup.first_draw_ms)
    drawn: list[Any] = []

    def refresh(i: int, keep: bool, input_sets: list[Any], null: bool = False) -> tuple[Callable[[], None], Any]:
        writes: list[Callable[[], Any]] = []
        privates: list[Any] = []
        for buffers in input_sets:
            if same:
                if not drawn:
                    drawn.append(base if base is not None else setup.source.draw(run.seed + 10000))
                writes.append(copier(buffers, drawn[0]))
                privates.append(clone_tree(drawn[0]) if keep else None)
                continue
            if not fresh:
                private = None
                if keep:
                    private = clone_tree(base)
                    rotate_into(private, base, rng)
                writes.append(copier(buffers, private) if private is not None else rotation(buffers, base, rng))
                privates.append(private)
                continue
            if null and drawn:
                values = drawn[0]
            else:
                # The last draw goes before the next is made (the writes queued hold
                # what they need): a large task's draw is more than the judge can keep twice.
                drawn.clear()
                values = setup.source.draw(run.seed + 10000 + rng.randrange(1 << 30))
                drawn[:] = [values]
            writes.append(copier(buffers, values))
            privates.append(values)

        def write() -> None:
            """Queues the run's values, once: then lets go of them (the copies are queued
            on the judge's stream, where the next allocation waits for them), so that a
            loop still holding this function holds no draw. A large task's draw is more
            than the judge can keep three times."""
            for one in writes:
                one()
            writes.clear()
        return write, (privates if keep else None)
    return refresh
