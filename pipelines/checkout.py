"""The source checkout's benchmarks package, loaded at call time by the commands that run it.

benchmarks/ is not installed: the commands that run experiments (`bench`, `profile-eval`,
`figures`, ...) find it beside the installed source tree, so an editable install from a
checkout runs them and an installed wheel says, in one line, that they are not there.
The import is dynamic on purpose: no installed module imports benchmarks statically
(`lint-imports` checks it).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from allocator.core.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "benchmarks"


def benchmarks(module: str) -> ModuleType:
    """`benchmarks.<module>` from the checkout gpuplan runs from; InputError (exit 2) when
    gpuplan is installed without its checkout."""
    home = ROOT / PACKAGE
    if not (home / "__init__.py").is_file():
        raise InputError(f"`{PACKAGE}/` ships with the source checkout, not with the installed "
                         f"package (looked in {ROOT}); run this command from a checkout "
                         "(`pip install -e .`)")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    package = importlib.import_module(PACKAGE)
    found = Path(getattr(package, "__file__", None) or "").parent
    if found != home:  # a `benchmarks` of some other distribution came first on sys.path
        raise InputError(f"`import {PACKAGE}` finds {found}, not the checkout's {home}")
    return importlib.import_module(f"{PACKAGE}.{module}")
