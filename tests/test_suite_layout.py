"""The suite's own layout: shared helpers live in helper modules, so no test module imports
another (one did, and a helper moved between two test modules broke a clean CI run)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported(path: Path) -> set[str]:
    """The modules `path` imports from, by their dotted names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_test_module_imports_another() -> None:
    modules = sorted(TESTS.glob("test_*.py"))
    assert len(modules) > 50  # (the glob found the suite)
    offenders = {path.name: sorted(name for name in _imported(path)
                                   if name.split(".")[-1].startswith("test_"))
                 for path in modules}
    assert {name: found for name, found in offenders.items() if found} == {}
