"""The harness's size limits: no function over 100 lines and no class over 400 (issue 37), so that
each module keeps one job and each function one step.

ALLOWED lists today's offenders (qualified names, their sizes when listed). It can only shrink: a
listed one that grew, or that is now within the limit (or gone), fails here too, so whoever shrinks
it removes its entry.

Run: cd src/eval/harness && PYTHONPATH=. python -m pytest tests/test_sizes.py -q
"""

from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Tuple, Union

HARNESS = pathlib.Path(__file__).resolve().parent.parent
FUNCTION_LINES = 100
CLASS_LINES = 400

# "file: Qualified.name" -> its size in lines when it was listed (it may shrink, never grow).
ALLOWED: Dict[str, int] = {}  # none left: the judge became a package of phases (issue 37)

Definition = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef]


def _definitions(body: List[ast.stmt], prefix: str) -> List[Tuple[str, Definition]]:
    """(qualified name, node) of every function and class defined in `body`, nested ones included."""
    out: List[Tuple[str, Definition]] = []
    for node in body:
        for child in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                ast.ClassDef)) else [node]:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                out.append((name, child))
                out += _definitions(child.body, name + ".")
    return out


def lines_of(node: Definition) -> int:
    """Lines from the first decorator (or the def/class line) to the last line of the body."""
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return (node.end_lineno or node.lineno) - first + 1


def measure(root: pathlib.Path) -> Dict[str, int]:
    """"file: Qualified.name" -> lines, of every function over FUNCTION_LINES and class over
    CLASS_LINES in the .py files under `root`'s kforge_harness/ and tests/."""
    over: Dict[str, int] = {}
    for path in sorted(root.glob("kforge_harness/*.py")) + sorted(root.glob("tests/*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, node in _definitions(tree.body, ""):
            limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
            size = lines_of(node)
            if size > limit:
                over["%s: %s" % (path.relative_to(root).as_posix(), name)] = size
    return over


def test_no_function_or_class_over_the_limits() -> None:
    over = measure(HARNESS)
    new = {name: size for name, size in over.items() if name not in ALLOWED}
    grown = {name: size for name, size in over.items() if name in ALLOWED and size > ALLOWED[name]}
    assert not new, "over %d lines (functions) or %d (classes): %s" % (FUNCTION_LINES, CLASS_LINES, new)
    assert not grown, "allowed offenders that grew: %s" % grown


def test_the_allowlist_only_shrinks() -> None:
    fixed = sorted(set(ALLOWED) - set(measure(HARNESS)))
    assert not fixed, "within the limits now (or gone): remove from ALLOWED: %s" % fixed


def test_the_measure_sees_nested_and_decorated_definitions(tmp_path: pathlib.Path) -> None:
    def block(indent: int) -> str:
        return "\n".join(" " * indent + "x = %d" % i for i in range(100))

    (tmp_path / "kforge_harness").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "kforge_harness" / "m.py").write_text(
        "class C:\n    @staticmethod\n    def big():\n%s\n\n    def small():\n        pass\n" % block(8)
        + "def outer():\n    def inner():\n%s\n" % block(8))
    (tmp_path / "tests" / "t.py").write_text("def test_long():\n%s\n" % block(4))
    assert measure(tmp_path) == {"kforge_harness/m.py: C.big": 102, "kforge_harness/m.py: outer": 102,
                                 "kforge_harness/m.py: outer.inner": 101, "tests/t.py: test_long": 101}
