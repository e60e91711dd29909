"""What the kernels' zygote prepares of Triton for its workers (triton_warm.py): the cache
entries it built are copied into a worker's fresh cache and nothing else is, Triton's own hash
is computed once and inherited by a forked process, and when Triton interprets nothing is done."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kforge_harness import triton_warm


def test_a_snapshot_planted_in_a_fresh_cache_holds_the_same_files(tmp_path: Path) -> None:
    built = tmp_path / "zygote-triton"
    (built / "KEY1").mkdir(parents=True)
    (built / "KEY1" / "cuda_utils.so").write_bytes(b"\x7fELF built")
    (built / "KEY1" / "__grp__cuda_utils.json").write_text("{}")
    files = triton_warm.snapshot(str(built))
    assert files == {os.path.join("KEY1", "cuda_utils.so"): b"\x7fELF built",
                     os.path.join("KEY1", "__grp__cuda_utils.json"): b"{}"}
    fresh = tmp_path / "worker" / "triton"
    triton_warm.plant(files, str(fresh))
    assert (fresh / "KEY1" / "cuda_utils.so").read_bytes() == b"\x7fELF built"
    # The worker's copy is its own: changing it leaves the snapshot (the zygote's) as it was.
    (fresh / "KEY1" / "cuda_utils.so").write_bytes(b"planted by a kernel")
    assert files[os.path.join("KEY1", "cuda_utils.so")] == b"\x7fELF built"


def test_symlinks_and_oversized_files_are_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = tmp_path / "c"
    built.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("not a cache entry")
    (built / "link").symlink_to(secret)
    (built / "big").write_bytes(b"x" * 64)
    (built / "small").write_bytes(b"y")
    monkeypatch.setattr(triton_warm, "MAX_SNAPSHOT_BYTES", 8)
    assert triton_warm.snapshot(str(built)) == {"small": b"y"}


def test_planting_never_writes_outside_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "cache"
    triton_warm.plant({"../escaped": b"x", str(tmp_path / "abs"): b"x", "ok/f": b"y"}, str(target))
    assert not (tmp_path / "escaped").exists()
    assert not (tmp_path / "abs").exists()
    assert (target / "ok" / "f").read_bytes() == b"y"


def test_a_directory_that_cannot_be_written_costs_only_the_build(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    triton_warm.plant({"k/f": b"y"}, str(blocker))  # no exception: the worker builds it itself
    assert blocker.read_text().startswith("a file")


def test_interpreting_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_warm.warm_driver() is None
    assert triton_warm.precompute_key() is None
    triton_warm.import_lazy_modules()
    assert triton_warm.prepare("/nonexistent") == (None, {})


def test_a_failing_step_is_named_and_the_others_still_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """prepare() reports every failed step and still precomputes the hash and snapshots what
    was built (each step is only a cost)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    ran: list[str] = []

    def driver_fails() -> None:
        raise RuntimeError("no C compiler")

    monkeypatch.setattr(triton_warm, "warm_driver", lambda: triton_warm._attempt(driver_fails))
    monkeypatch.setattr(triton_warm, "precompute_key", lambda: ran.append("key"))
    monkeypatch.setattr(triton_warm, "import_lazy_modules", lambda: ran.append("imports"))
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "f").write_bytes(b"x")
    error, files = triton_warm.prepare(str(tmp_path))
    assert error == "RuntimeError: no C compiler"
    assert ran == ["key", "imports"]
    assert files == {os.path.join("k", "f"): b"x"}


def test_tritons_hash_is_computed_once_and_a_forked_process_inherits_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime.cache import triton_key

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    triton_key.cache_clear()
    assert triton_warm.precompute_key() is None
    assert triton_key.cache_info().currsize == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        triton_key()
        os.write(write, b"%d" % triton_key.cache_info().misses)
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    # The child's call was a hit: no miss beyond the parent's one.
    assert os.read(read, 16) == b"1"
    os.close(read)
