"""Every TorchDispatchMode of the harness opts out of torch's dynamo wrapper
(dispatch_modes.no_dynamo): the wrapper's first call imports torch._dynamo and inductor,
seconds paid by every judge and worker forked for an evaluation (issue 38: the judge's work
counter did, the 2-3.5 s "task" phase of every CPU candidate)."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import kforge_harness

PACKAGE = pathlib.Path(kforge_harness.__file__).resolve().parent


def dispatch_mode_classes() -> list[tuple[str, ast.ClassDef]]:
    """(module file, class) for every class of the package deriving from TorchDispatchMode."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(base, ast.Name) and base.id == "TorchDispatchMode" for base in node.bases):
                found.append((str(path.relative_to(PACKAGE)), node))
    return found


def test_every_dispatch_mode_of_the_harness_opts_out_of_dynamo() -> None:
    classes = dispatch_mode_classes()
    # the audit's mode, the GPU timer, the work counter, the narrowing watch, the twin
    assert len(classes) >= 5, [name for name, _ in classes]
    for module, cls in classes:
        methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
        skip = methods.get("_should_skip_dynamo")
        assert skip is not None, "%s: %s lacks _should_skip_dynamo" % (module, cls.name)
        returned = [n.value for n in ast.walk(skip) if isinstance(n, ast.Return)]
        assert returned and all(isinstance(r, ast.Call) and isinstance(r.func, ast.Name)
                                and r.func.id == "no_dynamo" for r in returned), (module, cls.name)


def test_the_judges_modes_do_not_import_dynamo(tmp_path: pathlib.Path) -> None:
    """The work counter, the float64 oracle (its narrowing watch) and the sequential twin on a
    fresh interpreter: torch._dynamo stays unimported (other tests may have imported it, so
    not in this process)."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys, torch\n"
        "from kforge_harness import oracle, sol\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.relu(x).sum(dim=1) + 1\n"
        "x = torch.randn(4, 8)\n"
        "sol.count_forward(M(), [x], lambda: M()(x))\n"
        "oracle.float64_forward(M(), [x])\n"
        "oracle.twin_forward(M(), [x])\n"
        "print('torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(PACKAGE.parent)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"], out.stdout
