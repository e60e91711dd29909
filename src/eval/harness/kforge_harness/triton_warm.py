"""What the kernels' zygote prepares of Triton, once, before any kernel exists, so that each
worker it forks does not pay for it again (issue 38, measured on an H200 with py-spy: 1 s of
every GPU candidate's first forward).

- Triton's CUDA driver utilities, a C module compiled with the system compiler: built here
  (`warm_driver`) and its cache entry kept in memory (`snapshot`). A worker starts with its
  own fresh, empty Triton cache (no entry a kernel plants reaches another evaluation), and
  Triton's driver compiles the module again at its first launch unless the entry is there:
  each worker's fresh cache gets a copy (`plant`), written by the worker's process before
  the kernel is imported. What the worker then does to its copy reaches no other process.
- `triton_key()`, the hash of Triton's own files (its compiler, its backends, libtriton):
  computed once here, inherited by every worker through its memoized result, instead of
  each worker reading and hashing libtriton at its first compile (0.46 s on the H200).
- Triton modules its compiler imports lazily at the first compile (`LAZY_IMPORTS`).

Every step is only a cost: a failure leaves the worker to do it itself, never a refusal.
Nothing is done when Triton interprets (the CPU)."""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Callable, Dict, Optional, Tuple

# Modules Triton's compiler imports at a kernel's first compile; imported here where they
# exist in the installed Triton (which modules varies by version).
LAZY_IMPORTS = ("triton.experimental.gluon",)

# A snapshot of a Triton cache directory: path relative to it -> the file's bytes.
Snapshot = Dict[str, bytes]

# Larger files are not kept: the driver utilities are well under this.
MAX_SNAPSHOT_BYTES = 16 << 20


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def prepare(cache_dir: str) -> Tuple[Optional[str], Snapshot]:
    """Everything above, in the zygote with TRITON_CACHE_DIR at `cache_dir`: the error texts
    of the steps that failed (None if none did) and the snapshot of what was built there."""
    if interpreting():
        return None, {}
    errors = [e for e in (warm_driver(), precompute_key()) if e]
    import_lazy_modules()
    return "; ".join(errors) or None, snapshot(cache_dir)


def warm_driver() -> Optional[str]:
    """Builds Triton's CUDA driver utilities into the current TRITON_CACHE_DIR. Loading the
    module does not initialize CUDA. Returns an error text or None."""
    def build() -> None:
        from triton.backends.nvidia.driver import CudaUtils

        CudaUtils()

    return _attempt(build)


def precompute_key() -> Optional[str]:
    """Triton's own hash, memoized in this process for the processes it forks. Returns an
    error text or None."""
    def compute() -> None:
        from triton.runtime.cache import triton_key

        triton_key()

    return _attempt(compute)


def _attempt(step: Callable[[], None]) -> Optional[str]:
    """One step, unless Triton interprets: its error text, or None."""
    if interpreting():
        return None
    try:
        step()
        return None
    except Exception as e:  # noqa: BLE001 -- only a cost: each worker does it itself
        return "%s: %s" % (type(e).__name__, str(e)[:300])


def import_lazy_modules() -> None:
    if interpreting():
        return
    for name in LAZY_IMPORTS:
        try:
            if importlib.util.find_spec(name) is not None:
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 -- only a cost: the compiler imports it itself
            pass


def snapshot(cache_dir: str) -> Snapshot:
    """The regular files under `cache_dir` (symlinks and oversized files left out), read
    before the directory is wiped."""
    files: Snapshot = {}
    total = 0
    for root, dirs, names in os.walk(cache_dir, followlinks=False):
        for name in names:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            size = os.path.getsize(path)
            if total + size > MAX_SNAPSHOT_BYTES:
                continue
            with open(path, "rb") as f:
                files[os.path.relpath(path, cache_dir)] = f.read()
            total += size
    return files


def plant(files: Snapshot, cache_dir: str) -> None:
    """Writes a snapshot's files into a (fresh) cache directory. A failure leaves the
    directory as it is: the worker's Triton then builds what is missing."""
    for relative, data in files.items():
        if os.path.isabs(relative) or ".." in relative.split(os.sep):
            continue  # never written outside the directory (a snapshot only holds relative paths)
        path = os.path.join(cache_dir, relative)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        except OSError:
            return
