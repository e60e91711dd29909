"""Triton launchers built ahead (launchers.py): a spec is Triton's argument types and nothing
else, whatever an earlier candidate's processes sent; the server keeps the latest per task and
device; a worker started ahead builds them with Triton's own source, and only where this
Triton compiles a launcher per signature."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List

import pytest

from kforge_harness import cachekeeper, compiled, launchers
from kforge_harness.judge import rehearsal as judge_rehearsal

from jobs import JOB, job, judged


def kernel_compiled_with(signature: dict[str, Any], tensordesc_meta: Any = None) -> Any:
    """What JITFunction.run returns, as far as spec_of reads it."""
    return SimpleNamespace(src=SimpleNamespace(signature=signature),
                           metadata=SimpleNamespace(tensordesc_meta=tensordesc_meta))


def test_a_spec_is_tritons_argument_types_in_order() -> None:
    compiled_kernel = kernel_compiled_with({"x_ptr": "*fp32", "y_ptr": "*kbf16", "n": "i32", "pair": ("i64", "fp32"),
                                            "BLOCK": "constexpr"})
    assert launchers.spec_of(compiled_kernel) == {"signature": ["*fp32", "*kbf16", "i32", ["i64", "fp32"], "constexpr"]}
    assert launchers.spec_of(kernel_compiled_with({"d": "tensordesc<fp32[64, 64]>"}, [{"swizzle": 128}])) is None
    assert launchers.spec_of(SimpleNamespace(asm={})) is None  # the interpreter's: no compiled source
    assert launchers.spec_of(kernel_compiled_with({"x": "*fp32 evil"})) is None


@pytest.mark.parametrize("spec", [
    {"signature": ["*fp32", "i32; system(\"id\")"]},
    {"signature": ["*fp32\n"]},
    {"signature": ["*"]},
    {"signature": ["tensordesc<fp32[64]>"]},
    {"signature": [["i32", ["i32", ["i32"]]]]},  # tuples nest two deep at most
    {"signature": ["i32"] * (launchers.MAX_ARGS + 1)},
    {"signature": ["i32"], "constants": {"BLOCK": 1}},
    {"signature": "i32"},
    ["i32"],
    None,
])
def test_anything_but_tritons_types_is_no_spec(spec: Any) -> None:
    assert not launchers.valid(spec)
    assert launchers.merged([spec], []) == []


def test_specs_merge_newest_first_each_once_and_few() -> None:
    a, b, c, d, e = ({"signature": ["*fp32"] * k} for k in range(1, 6))
    assert launchers.merged([b, a], [a, c]) == [b, a, c]
    assert launchers.merged([e, d, c], [b, a]) == [e, d, c, b][:launchers.MAX_SPECS]


def test_the_server_keeps_a_tasks_specs_per_device_and_refuses_bad_ones() -> None:
    kept = launchers.Kept()
    keeper = cachekeeper.Keeper(None, "class Model: ...", {}, JOB, kept=kept)
    other_task = cachekeeper.Keeper(None, "class Model: pass", {}, JOB, kept=kept)
    spec = {"signature": ["*fp32", "*fp32", "i32", "constexpr"]}
    assert keeper.answer({"ask": "keep_launchers", "device": "cuda:0", "specs": [spec]}) == {}
    assert keeper.answer({"ask": "launchers", "device": "cuda:0"}) == {"specs": [spec]}
    assert keeper.answer({"ask": "launchers", "device": "cuda:1"}) == {"specs": []}
    assert other_task.answer({"ask": "launchers", "device": "cuda:0"}) == {"specs": []}
    refused = keeper.answer({"ask": "keep_launchers", "device": "cuda:0", "specs": [{"signature": ["i32 x"]}]})
    assert "error" in refused
    assert keeper.answer({"ask": "launchers", "device": "cuda:0"}) == {"specs": [spec]}  # nothing of it kept


class FakeDriver:
    """triton.backends.nvidia.driver as far as build uses it, noting each launcher built."""

    def __init__(self, fail_at: int = -1) -> None:
        self.sources: List[Any] = []
        self.fail_at = fail_at
        self.include_dirs = ["/include"]
        self.libraries = ["cuda"]

    def library_dirs(self) -> List[str]:
        return ["/lib"]

    def make_launcher(self, constants: Any, signature: Any, tensordesc_meta: Any) -> str:
        return "launcher for %r" % (list(signature.values()),)

    def compile_module_from_src(self, src: str, name: str, library_dirs: Any, include_dirs: Any,
                                libraries: Any) -> None:
        if len(self.sources) == self.fail_at:
            raise RuntimeError("gcc: not found")
        self.sources.append((src, name, library_dirs, include_dirs, libraries))


def test_a_worker_builds_each_valid_spec_as_tritons_launcher_would(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.backends.nvidia import driver

    fake = FakeDriver()
    for name in ("make_launcher", "compile_module_from_src", "library_dirs", "include_dirs", "libraries"):
        monkeypatch.setattr(driver, name, getattr(fake, name), raising=False)
    record = launchers.build([{"signature": ["*fp32", ["i32", "i64"]]}, {"signature": ["bad type"]}])
    assert record == {"built": 1, "error": None}
    assert fake.sources == [("launcher for ['*fp32', ('i32', 'i64')]", "__triton_launcher", ["/lib"], ["/include"],
                             ["cuda"])]
    fake.sources, fake.fail_at = [], 1
    record = launchers.build([{"signature": ["*fp32"]}, {"signature": ["*fp16"]}])
    assert record == {"built": 1, "error": "RuntimeError: gcc: not found"}


def test_a_triton_with_a_generic_launcher_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.backends.nvidia import driver

    monkeypatch.delattr(driver, "make_launcher", raising=False)
    assert launchers.build([{"signature": ["*fp32"]}]) == {"built": 0, "error": None}


def test_the_audited_launches_note_their_launchers() -> None:
    launches = compiled.Launches()
    kernel = SimpleNamespace(fn=lambda x_ptr, n: None)
    result = kernel_compiled_with({"x_ptr": "*fp32", "n": "i32"})
    launches.note(kernel, [], {}, result)
    launches.note(kernel, [], {}, result)
    assert launches.launchers == [{"signature": ["*fp32", "i32"]}]
    # The worker's reading on a GPU tells the judge, which asks the server to keep them.
    assert compiled.read(launches, "", "/nonexistent", True)["launchers"] == [{"signature": ["*fp32", "i32"]}]


class Store:
    def __init__(self, specs: List[Any]) -> None:
        self.specs = specs

    def launchers(self, device: str) -> List[Any]:
        return self.specs


class Link:
    def __init__(self) -> None:
        self.sent: List[Any] = []

    def send(self, request: Any) -> None:
        self.sent.append(request)

    def receive(self, expected: str) -> Any:
        return {"type": "rehearsed", "record": {"error": None}}


def test_the_judge_hands_its_worker_the_kept_specs_on_a_gpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge_rehearsal, "rehearse_judge", lambda run, setup: None)
    spec = {"signature": ["*fp32", "i32"]}
    for device, sent in (("cuda:0", [spec]), ("cpu", [])):
        run = judged(job(device=device), store=Store([spec]))
        run.link = Link()
        monkeypatch.setattr("torch.cuda.empty_cache", lambda: None)
        setup: Any = SimpleNamespace(output_shapes=())
        judge_rehearsal.rehearse(run, setup)
        assert run.link.sent == [{"op": "rehearse", "launchers": sent}], device
