"""Line counts of the CLI command modules: each module, each command function, the longest.

Commands should be thin (parse, call one pipeline function, print); this measures how thin.
Usage: python tools/command_sizes.py [--tree DIR] [--top N]
A command function is one a module's `register(app)` passes to `app.command(...)`; its
"body" excludes the signature (the typer options) and the docstring.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def _registered(tree: ast.Module) -> list[str]:
    """Names passed to app.command("x")(name) inside register()."""
    names = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Call)
                and isinstance(node.func.func, ast.Attribute)
                and node.func.func.attr == "command" and node.args
                and isinstance(node.args[0], ast.Name)):
            names.append(node.args[0].id)
    return names


def _body_lines(fn: ast.FunctionDef) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if not body:
        return 0
    return body[-1].end_lineno - body[0].lineno + 1


def measure(tree_dir: Path) -> tuple[list[tuple], list[tuple]]:
    modules, functions = [], []
    for path in sorted((tree_dir / "pipelines").glob("commands_*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        commands = set(_registered(tree))
        modules.append((path.name, len(text.splitlines())))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                total = node.end_lineno - node.lineno + 1
                functions.append((path.name, node.name, node.name in commands, total,
                                  _body_lines(node)))
    return modules, functions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=Path("."), help="Source tree to measure.")
    ap.add_argument("--top", type=int, default=8, help="Longest functions to list.")
    args = ap.parse_args()
    modules, functions = measure(args.tree)
    print("module lines")
    for name, n in modules:
        print(f"  {name:<28} {n:>5}")
    print(f"  {'total':<28} {sum(n for _, n in modules):>5}")
    print("command functions: lines (with signature) / body lines (without it, no docstring)")
    for module, name, command, total, body in functions:
        if command:
            print(f"  {module:<28} {name:<20} {total:>5} {body:>5}")
    print(f"longest functions in commands_*.py (by body lines), top {args.top}")
    for module, name, _, total, body in sorted(functions, key=lambda f: -f[4])[: args.top]:
        print(f"  {module:<28} {name:<20} {total:>5} {body:>5}")


if __name__ == "__main__":
    main()
