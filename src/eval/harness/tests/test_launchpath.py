"""The launch-path draw's pure parts (launchpath.py): when a context is kept, the device's
floor and its store, the judge's check of a reply, and the draw loop with a fake context.
The driver calls themselves need a GPU (docs/benchmarks.md, round 4)."""

from __future__ import annotations

from pathlib import Path

import json
import os
from typing import Any, Callable, Iterable

from kforge_harness import launchpath
from kforge_harness.launchpath import Draws, Floor, accepts, draw, floor_of


class FakeContext:
    """Probes as listed, one per context; counts the redraws."""

    def __init__(self, probes: Iterable[float]) -> None:
        self.probes = list(probes)
        self.current = 0
        self.redraws = 0

    def probe(self) -> float:
        return self.probes[self.current]

    def redraw(self) -> None:
        self.redraws += 1
        self.current += 1


def test_a_probe_within_the_tolerance_of_the_floor_is_kept() -> None:
    assert accepts(0.47, 0.46, [], 0.04)
    assert not accepts(0.50, 0.46, [], 0.04)


def test_an_earlier_draw_lower_than_the_floor_sets_the_bar() -> None:
    assert not accepts(0.47, 0.50, [0.44], 0.04)
    assert accepts(0.45, 0.50, [0.44], 0.04)


def test_without_a_floor_three_contexts_are_drawn_at_least() -> None:
    assert not accepts(0.46, None, [], 0.04)
    assert not accepts(0.46, None, [0.46], 0.04)
    assert accepts(0.46, None, [0.52, 0.46], 0.04)
    assert not accepts(0.52, None, [0.52, 0.46], 0.04)


def test_the_draw_stops_at_the_first_kept_context() -> None:
    ctx = FakeContext([0.52, 0.51, 0.465, 0.45])
    record = draw(ctx, 0.46, 0.04, 6)
    assert record == {"probes_ms": [0.52, 0.51, 0.465], "accepted": True}
    assert ctx.redraws == 2


def test_the_draw_keeps_the_last_context_when_none_is_accepted() -> None:
    ctx = FakeContext([0.52, 0.51, 0.53])
    record = draw(ctx, 0.46, 0.04, 3)
    assert record == {"probes_ms": [0.52, 0.51, 0.53], "accepted": False}
    assert ctx.redraws == 2  # the third context is the one the process keeps


def test_without_a_floor_the_bar_is_the_lowest_of_three() -> None:
    ctx = FakeContext([0.52, 0.51, 0.54, 0.47, 0.48])
    assert draw(ctx, None, 0.04, 6) == {"probes_ms": [0.52, 0.51, 0.54, 0.47], "accepted": True}
    ctx = FakeContext([0.47, 0.48, 0.475])
    assert draw(ctx, None, 0.04, 6) == {"probes_ms": [0.47, 0.48, 0.475], "accepted": True}


def test_one_draw_allowed_is_one_probe() -> None:
    ctx = FakeContext([0.52])
    assert draw(ctx, 0.46, 0.04, 1) == {"probes_ms": [0.52], "accepted": False}
    assert ctx.redraws == 0


def test_the_floor_is_the_second_lowest_probe() -> None:
    assert floor_of([]) is None
    assert floor_of([0.5]) == 0.5
    assert floor_of([0.52, 0.30, 0.47, 0.46]) == 0.46  # one probe far too low does not set it
    assert floor_of([0.5, -1, "x", None, 0.48]) == 0.5


def test_the_floor_is_stored_per_device_and_keeps_the_newest(tmp_path: Path) -> None:
    floor = Floor(str(tmp_path), "H100 GPU-1", "580.1")
    assert floor.samples == [] and floor.floor_ms() is None
    floor.add([0.5] * (launchpath.FLOOR_SAMPLES - 1) + [0.47, 0.46])
    floor.write()
    again = Floor(str(tmp_path), "H100 GPU-1", "580.1")
    assert len(again.samples) == launchpath.FLOOR_SAMPLES
    assert again.samples[-2:] == [0.47, 0.46] and again.floor_ms() == 0.47
    assert Floor(str(tmp_path), "H100 GPU-2", "580.1").samples == []  # another GPU: its own floor
    assert Floor(str(tmp_path), "H100 GPU-1", "590.0").samples == []  # another driver too


def test_a_damaged_store_reads_as_empty(tmp_path: Path) -> None:
    floor = Floor(str(tmp_path), "gpu", "1")
    path = floor.path()
    assert path is not None
    with open(path, "w") as f:
        f.write("{not json")
    assert Floor(str(tmp_path), "gpu", "1").samples == []
    with open(path, "w") as f:
        json.dump({"probes_ms": [0.5, True, -2, "0.1"]}, f)
    assert Floor(str(tmp_path), "gpu", "1").samples == [0.5]


def test_no_cache_dir_keeps_the_floor_in_memory_only() -> None:
    floor = Floor(None, "gpu", "1")
    floor.add([0.5, 0.49])
    floor.write()
    assert floor.floor_ms() == 0.5 and floor.path() is None


def test_the_judge_keeps_a_valid_reply_and_adds_its_probes_to_the_floor(tmp_path: Path) -> None:
    floor = Floor(str(tmp_path), "gpu", "1")
    floor.add([0.46, 0.47])
    draws = Draws(floor)
    request = draws.request()
    assert request == {"op": "draw", "floor_ms": 0.47, "tolerance": launchpath.DEFAULT_TOLERANCE,
                       "max_draws": launchpath.DEFAULT_MAX_DRAWS}
    record = draws.take("reference", request, {"type": "drawn", "probes_ms": [0.51, 0.455], "accepted": True})
    assert record == {"floor_ms": 0.47, "probes_ms": [0.51, 0.455], "accepted": True}
    assert os.path.exists(floor.path() or "") and Floor(str(tmp_path), "gpu", "1").samples == [0.46, 0.47, 0.51, 0.455]
    env = draws.environment()
    assert env is not None
    assert env["processes"] == {"reference": record} and env["floor_ms"] == 0.46


def test_a_reply_without_valid_probes_is_an_error_and_leaves_the_floor_alone() -> None:
    floor = Floor(None, "gpu", "1")
    draws = Draws(floor, max_draws=3)
    reply: dict[str, Any]
    for reply in ({"error": "cuInit: error 100"}, {"probes_ms": []}, {"probes_ms": [0.5, -1]},
                  {"probes_ms": [0.5, True]}, {"probes_ms": "0.5"}, {"probes_ms": [0.5] * 4}):
        record = draws.take("kernel", draws.request(), reply)
        assert "error" in record and "probes_ms" not in record
    assert floor.samples == []
    assert draws.records["kernel"]["error"] == "the process answered without probes"


def test_nothing_drawn_is_no_environment_record() -> None:
    assert Draws(Floor(None, "gpu", "1")).environment() is None


def worker_answer(worker_setup: Callable[[Any], None]) -> Any:
    """The worker's answer to a draw request, over a real socket pair."""
    import socket

    from kforge_harness import protocol
    from kforge_harness.worker import Worker

    ours, theirs = socket.socketpair()
    try:
        worker = Worker(theirs, {"device": "cpu"})
        worker_setup(worker)
        worker.op_draw({"op": "draw", "floor_ms": 0.46, "tolerance": 0.04, "max_draws": 6}, [])
        return protocol.recv(ours)
    finally:
        ours.close()
        theirs.close()


def test_the_worker_draws_its_context_and_answers_with_the_probes() -> None:
    def setup(worker: Any) -> None:
        worker.context = FakeContext([0.52, 0.47])
    assert worker_answer(setup) == {"type": "drawn", "probes_ms": [0.52, 0.47], "accepted": True}


def test_a_worker_without_a_context_says_why_nothing_was_drawn() -> None:
    def setup(worker: Any) -> None:
        worker.context_error = "libcuda: not found"
    assert worker_answer(setup) == {"type": "drawn", "error": "libcuda: not found"}


def test_a_worker_whose_torch_already_uses_cuda_does_not_draw() -> None:
    ctx = FakeContext([0.52, 0.47])

    def setup(worker: Any) -> None:
        worker.context = ctx
        worker.cuda_attached = True
    assert worker_answer(setup) == {"type": "drawn", "error": "torch already uses CUDA in this process"}
    assert ctx.redraws == 0
