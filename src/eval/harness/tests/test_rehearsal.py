"""The rehearsal of a judge started ahead (judge/rehearsal.py) and of its worker
(rehearsal.py): the checking code runs once on stand-ins before the kernel is known, goes
through the audit's Triton path, leaves nothing behind that a kernel's audit would find, and
never fails an evaluation; and a trial's float64 oracle is measured while the kernel's
forward runs where its pending outputs are a small share of the free memory."""

from __future__ import annotations

import gc
from types import SimpleNamespace
from typing import Any, List

import pytest
import torch

from kforge_harness import rehearsal
from kforge_harness.digest import cached_tables
from kforge_harness.judge import checks, oracles as judge_oracles, rehearsal as judge_rehearsal
from kforge_harness.worker import Worker

from jobs import job, judged


def live_tensors() -> List[torch.Tensor]:
    kept = {id(t) for t in cached_tables()}
    return [o for o in gc.get_objects() if type(o) in (torch.Tensor, torch.nn.Parameter) and id(o) not in kept]


def test_the_workers_rehearsal_runs_an_audited_triton_forward_per_dtype_and_leaves_no_tensor() -> None:
    slots = {"y": torch.zeros(3, dtype=torch.float64), "n": torch.zeros(2, dtype=torch.int64),
             "q": torch.zeros(2, dtype=torch.float8_e4m3fn)}
    gc.collect()
    before = len(live_tensors())
    record = rehearsal.rehearse("cpu", slots, 1e-2, 1e-2)
    gc.collect()
    assert record["error"] is None, record
    assert record["dtypes"] == ["float32", "float64"]  # float32 always, then the slots' floating ones
    assert record["triton_launches"] == 2  # the audit saw the rehearsal's own kernel, once per dtype
    assert len(live_tensors()) == before


def test_a_rehearsal_that_fails_says_why_and_raises_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no audit today")

    monkeypatch.setattr("kforge_harness.audit.audited_forward", broken)
    record = rehearsal.rehearse("cpu", {}, 1e-2, 1e-2)
    assert record["error"] == "RuntimeError: no audit today"


def test_a_worker_rehearses_only_before_its_kernel_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = Worker.__new__(Worker)
    replies: List[Any] = []
    monkeypatch.setattr(worker, "reply", replies.append)
    worker.device, worker.job, worker.outputs = "cpu", {}, {"y": torch.zeros(2)}
    worker.model, worker.source = None, None
    worker.op_rehearse({"op": "rehearse"}, [])
    assert replies[-1]["type"] == "rehearsed" and replies[-1]["record"]["error"] is None
    worker.source = "class ModelNew: ..."
    worker.op_rehearse({"op": "rehearse"}, [])
    assert replies[-1]["record"] == {"error": "the kernel is already loaded"}


def test_stand_ins_keep_each_outputs_dimensions_and_stay_small() -> None:
    for shape in [(4096, 5120), (7,), (2, 3, 1, 5), (1000, 1000, 1000), (3, 0, 2), ()]:
        small = judge_rehearsal.stand_in_shape(shape)
        assert len(small) == len(shape)
        assert all(1 <= s <= max(1, d) for s, d in zip(small, shape))
        n = 1
        for s in small:
            n *= s
        assert n <= judge_rehearsal.STAND_IN_ELEMENTS, (shape, small)
    assert judge_rehearsal.stand_in_shape((7,)) == (7,)


class FakeLink:
    """A kernel's channel that answers `rehearsed` and notes what it was sent."""

    def __init__(self, record: Any) -> None:
        self.sent: List[Any] = []
        self.record = record

    def send(self, request: Any) -> None:
        self.sent.append(request)

    def receive(self, expected: str) -> Any:
        assert expected == "rehearsed"
        return {"type": "rehearsed", "record": self.record}


def setup_with(outputs: Any) -> Any:
    return SimpleNamespace(output_shapes=outputs)


def test_the_judge_rehearses_beside_its_worker_and_only_logs_either_failure(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    run = judged(job(device="cpu", tolerance="oracle"))
    run.link = FakeLink({"error": "RuntimeError: boom"})
    outputs = (torch.empty(64, 33, device="meta"), torch.empty(5, dtype=torch.int64, device="meta"))
    judge_rehearsal.rehearse(run, setup_with(outputs))
    assert run.link.sent == [{"op": "rehearse", "launchers": []}]
    assert "the worker's rehearsal failed (RuntimeError: boom)" in capsys.readouterr().err

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("no comparison today")

    monkeypatch.setattr(judge_rehearsal, "compare_outputs", broken)
    run.link = FakeLink({"error": None})
    judge_rehearsal.rehearse(run, setup_with(outputs))
    err = capsys.readouterr().err
    assert "the judge's rehearsal failed (ValueError: no comparison today)" in err
    assert "worker's" not in err


def test_the_judges_rehearsal_compares_each_floating_output_under_the_evaluations_rule(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: List[Any] = []
    from kforge_harness.compare import compare_outputs as real

    def spy(ref: Any, new: Any, *args: Any) -> Any:
        out = real(ref, new, *args)
        seen.append((sorted(ref), args[2], out[0]))
        return out

    monkeypatch.setattr(judge_rehearsal, "compare_outputs", spy)
    run = judged(job(device="cpu", tolerance="oracle"))
    outputs = {"a": torch.empty(64, 33, device="meta"), "b": torch.empty(3, dtype=torch.float64, device="meta"),
               "c": torch.empty(5, dtype=torch.int64, device="meta")}
    judge_rehearsal.rehearse_judge(run, setup_with(outputs))
    (paths, mode, passed), = seen
    assert len(paths) == 2 and mode == "oracle" and passed


class OrderLink:
    """A kernel's channel for one audited trial, noting the order of sends and receives."""

    def __init__(self, events: List[str]) -> None:
        self.events = events

    def send(self, request: Any) -> None:
        self.events.append("send %s" % request["mode"])

    def receive(self, expected: str) -> Any:
        self.events.append("receive %s" % expected)
        return {"type": "done", "audit": {}}

    def call(self, request: Any, expected: str) -> Any:
        self.send(request)
        return self.receive(expected)


class OrderOracles:
    def __init__(self, events: List[str], beside: bool) -> None:
        self.events, self.beside = events, beside

    def due(self, family: str) -> bool:
        return True

    def prepare(self, family: str, label: str, inputs: Any) -> Any:
        self.events.append("prepare")
        return "pending"

    def beside_forward(self, pending: Any) -> bool:
        return self.beside

    def of(self, family: str, pending: Any, ref_out: Any) -> Any:
        self.events.append("oracle")
        return None


@pytest.mark.parametrize("beside, order", [
    (True, ["prepare", "send audit", "oracle", "receive done"]),
    (False, ["prepare", "oracle", "send audit", "receive done"]),
])
def test_a_trials_oracle_is_measured_while_the_kernel_runs_where_memory_allows(
        monkeypatch: pytest.MonkeyPatch, beside: bool, order: List[str]) -> None:
    events: List[str] = []
    run = judged(job(device="cpu"))
    run.link = OrderLink(events)
    setup = SimpleNamespace(ref=lambda x: x, source=SimpleNamespace(draw=lambda: [torch.ones(2)]))
    stand_ins: Any = (setup, OrderOracles(events, beside))
    checker = checks.Checker(run, stand_ins[0], stand_ins[1], [torch.zeros(2)], [torch.zeros(2)])
    monkeypatch.setattr(checks, "freeze", lambda done, slots: SimpleNamespace(values=None))
    monkeypatch.setattr("kforge_harness.audit_rules.classify", lambda record, gpu: {"verdict": "ok"})
    monkeypatch.setattr(checker, "match_audit", lambda *args: None)
    monkeypatch.setattr(checker, "compare_frozen", lambda *args, **kwargs: None)
    checker.check("random", 0, lambda: [torch.ones(2)])
    assert events == order


def test_an_oracle_is_held_through_the_forward_only_when_it_is_a_small_share_of_free_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    run = judged(job(device="cpu"))
    monkeypatch.setattr(run.meter, "state", lambda: (1000 * 8 * 10, 1 << 40))
    measured = judge_oracles.Oracles(run, None)
    small = SimpleNamespace(exact=torch.zeros(500, dtype=torch.float64), twin=torch.zeros(500, dtype=torch.float64))
    large = SimpleNamespace(exact=torch.zeros(600, dtype=torch.float64), twin=torch.zeros(600, dtype=torch.float64))
    assert measured.beside_forward(small)  # 8000 bytes held, 10% of 80000 free
    assert not measured.beside_forward(large)
