"""device.missing_bytecode: the packages Python compiles from source at every import."""

from __future__ import annotations

import compileall
import importlib
import sys
from pathlib import Path

from kforge_harness.device import missing_bytecode


def test_a_package_without_byte_code_is_named_and_one_compiled_is_not(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    package = tmp_path / "kforge_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # PYTHONDONTWRITEBYTECODE=1
    monkeypatch.delitem(sys.modules, "kforge_probe_pkg", raising=False)
    module = importlib.import_module("kforge_probe_pkg")
    assert missing_bytecode([module]) == [str(package)]
    assert compileall.compile_dir(str(package), quiet=1)
    assert missing_bytecode([module]) == []
    assert missing_bytecode([sys]) == []  # a built-in module has no source to compile
