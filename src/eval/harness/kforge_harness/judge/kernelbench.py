"""The reference timed again with KernelBench's own protocol (kbprotocol.py), in the judge's
process, for `kforge bench kernelbench` (issue 9): the figure users compare kforge's with,
and the rounds of both protocols in alternating order."""

from __future__ import annotations

from typing import Any, Callable

from .. import kbprotocol
from ..memory import is_out_of_memory
from .context import Run
from .reference import Reference
from .task import Setup


def once(run: Run, setup: Setup) -> Any:
    """The reference timed once with KernelBench's protocol on its own fresh draw."""
    return kbprotocol.time_model(setup.ref, setup.source.draw(run.seed), run.device)


def kernelbench_timing(run: Run, setup: Setup) -> None:
    """timing.kernelbench: KernelBench's figure; a failure leaves kforge's standing, noted."""
    result = run.result
    run.progress("timing reference: KernelBench's protocol")
    try:
        # KernelBench seeds get_inputs() with its seed: once() draws the same way.
        result["timing"]["kernelbench"] = once(run, setup)
    except Exception as e:  # noqa: BLE001 -- a failed comparison leaves kforge's figure standing
        if is_out_of_memory(e):
            raise
        run.note("timing with KernelBench's protocol failed: %s: %s"
                 % (type(e).__name__, (str(e).splitlines() or [""])[0]))


def kernelbench_rounds(run: Run, setup: Setup, reference: Reference, rounds: int, flush: Any,
                       draw_ms: Callable[[], float]) -> None:
    """Both protocols in alternating order, `rounds` times in this process (`kforge bench
    kernelbench --rounds N`): the spread of each protocol's medians over the rounds says
    how much of a difference between them is noise of the reference on this machine.
    Round one's figures stay the task check's; the rounds go to `timing.rounds`. Both
    draws (kforge's first, KernelBench's own) are alive at once here: a round that runs
    out of memory ends the rounds with a note, not the task check."""
    result = run.result
    figures = result["timing"]
    try:
        kernelbench_timing(run, setup)
    except Exception as e:  # noqa: BLE001
        if not is_out_of_memory(e):
            raise
        run.note("timing with KernelBench's protocol ran out of memory with both protocols' inputs alive: "
                 "run with one round")
        return
    kernelbench = result["timing"].get("kernelbench")
    if kernelbench is None:
        return
    done = [{"order": kbprotocol.KFORGE_FIRST, "kforge_ms": figures["reference"]["median_ms"],
             "kernelbench_ms": kernelbench["median_ms"]}]
    for n, order in enumerate(kbprotocol.round_orders(rounds)[1:], start=2):
        run.progress("timing reference: round %d of %d (%s)" % (n, rounds, order.replace("_", " ")))
        try:
            if order == kbprotocol.KERNELBENCH_FIRST:
                kb = once(run, setup)
                kf = reference.time_alone(flush, draw_ms)
            else:
                kf = reference.time_alone(flush, draw_ms)
                kb = once(run, setup)
        except Exception as e:  # noqa: BLE001 -- the first round's figures stand
            if not is_out_of_memory(e):
                raise
            run.note("the timing rounds stopped after %d of %d: out of memory with both protocols' inputs alive"
                     % (len(done), rounds))
            break
        done.append({"order": order, "kforge_ms": kf["median_ms"], "kernelbench_ms": kb["median_ms"]})
    result["timing"]["rounds"] = done
