"""What every command shares: bad input -> one line on stderr and exit code 2.

`input_errors` turns the InputError of one step into that line; `guarded` is the one
top-level handler around the whole app, for everything a step did not foresee.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import typer

from allocator.core.errors import InputError

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1

# The rolling replay's options that `gpuplan simulate` and `gpuplan starvation` share.
STABILITY_OPTION = typer.Option(
    "off", "--stability",
    help="fast keeps each queued job's last planned start unless a fresh plan gains more "
         "than this share of the objective (allocator/policies/stable.py); off.")


def finite(value: float | None) -> float | None:
    """A float option's check: click's ranges let nan and inf through (nan compares false)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def pin_trials_option(default: int | None) -> Any:
    """fast's `--pin-trials` (`gpuplan plan`: None, the hot path's own, `fast.hot_pin_trials`;
    `gpuplan plan-day`: 24)."""
    own = " Default: the hot path's own (fast.HOT_PIN_TRIALS)." if default is None else ""
    return typer.Option(default, "--pin-trials", min=0, max=1000,
                        help="fast: replan up to N times, each with one delayed job pinned "
                             "to an earlier block; the best plan wins (better one-shot "
                             "plans, each trial about one more fast run; 0 = none)." + own,
                        show_default=default is not None)


def defer_trials_option(default: int | None) -> Any:
    """fast's `--defer-trials` (`gpuplan plan`: None, the hot path's own,
    `fast.hot_defer_trials`; `gpuplan plan-day`: 48)."""
    own = " Default: the hot path's own (fast.HOT_DEFER_TRIALS)." if default is None else ""
    return typer.Option(default, "--defer-trials", min=0, max=1000,
                        help="fast: after the pin trials, replan up to N times, each with "
                             "one started job held back a step; the best plan wins (each "
                             "trial about one more fast run; 0 = none)." + own,
                        show_default=default is not None)


def trial_passes_option(default: int) -> Any:
    """fast's `--trial-passes` (`gpuplan plan`: 1, `gpuplan plan-day`: 4)."""
    return typer.Option(default, "--trial-passes", min=1, max=100,
                        help="fast: run the pin and defer trials again from the plan they "
                             "found, up to N passes, until a pass lifts nothing (each pass "
                             "about as long as the first).")


def hops_option(default: int) -> Any:
    """fast's `--hops` (`gpuplan plan`: 0, `gpuplan plan-day`: 2)."""
    return typer.Option(default, "--hops", min=0, max=100,
                        help="fast: up to N rounds of realtime hops, a block of a service's "
                             "GPUs moved to another free block for part of the day where "
                             "the batch work gains (<= 16 GPUs; up to about 100 ms a "
                             "plan; 0 = none).")


ESTIMATE_HORIZON_OPTION = typer.Option(
    72, "--estimate-horizon",
    help="A job the first plan leaves out of its horizon gets its start estimate from a "
         "plan this many steps long; 0: off.")


def distinct_outputs(inputs: list[Path], outputs: list[Path]) -> None:
    """InputError when an output would overwrite an input or another output."""
    seen: dict[Path, Path] = {}
    for path in inputs:
        seen.setdefault(path.resolve(), path)
    for path in outputs:
        key = path.resolve()
        if key in seen:
            raise InputError(f"is also {seen[key]}; give a different output path",
                             file=str(path))
        seen[key] = path


@contextlib.contextmanager
def input_errors(file: str | None = None) -> Iterator[None]:
    """Turn an InputError raised inside into the contract's exit: one clear line, code 2."""
    try:
        yield
    except InputError as err:
        located = err.located(file) if file else err
        print(f"gpuplan: error: {located.line()}", file=sys.stderr)
        raise typer.Exit(EXIT_BAD_INPUT) from None


# -- the top-level handler ------------------------------------------------------------------

def _debug_requested(argv: list[str]) -> bool:
    """`--debug` anywhere on the command line (removed from it) or GPUPLAN_DEBUG=1."""
    flag = "--debug" in argv
    while "--debug" in argv:
        argv.remove("--debug")
    return flag or os.environ.get("GPUPLAN_DEBUG", "").strip() not in ("", "0")


def _from_library(err: BaseException, *names: str) -> bool:
    return type(err).__module__.split(".")[0] in names


def describe(err: BaseException) -> tuple[int, str]:
    """(exit code, one line) for an exception that reached the top."""
    if isinstance(err, InputError):
        return EXIT_BAD_INPUT, err.line()
    if isinstance(err, OSError):
        where = ": ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
        what = err.strerror or str(err) or type(err).__name__
        return EXIT_BAD_INPUT, f"{where}: {what}" if where else what
    if isinstance(err, MemoryError):
        return EXIT_BAD_INPUT, ("out of memory: the input is larger than this machine can "
                                "plan (see the limits in docs/contract/MODEL.md)")
    if isinstance(err, RecursionError):
        return EXIT_BAD_INPUT, "input nested too deeply"
    if isinstance(err, OverflowError | UnicodeError) or _from_library(err, "pandas", "numpy"):
        text = " ".join(str(err).split())[:300] or type(err).__name__
        return EXIT_BAD_INPUT, f"{type(err).__name__}: {text}"
    text = " ".join(str(err).split())[:300]
    return EXIT_INTERNAL, (f"internal error: {type(err).__name__}: {text} (rerun with --debug "
                           "or GPUPLAN_DEBUG=1 for the traceback)")


def _click_modules() -> list[ModuleType]:
    """click's exceptions, from typer's own copy (typer >= 0.20) and from click itself."""
    found = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


def _classes(modules: list[ModuleType], name: str) -> tuple[Any, ...]:
    """The class `name` from each module that has it (typed Any: click's exception classes
    have attributes, such as exit_code, that a bare `type[BaseException]` would hide)."""
    return tuple(getattr(m, name) for m in modules if isinstance(getattr(m, name, None), type))


def guarded(make_app: Callable[[], Callable[..., object]]) -> None:
    """Run the CLI; any exception it lets through becomes one line (exit 2, or 1 if ours).

    Click runs outside its standalone mode, so that its usage errors are one line too.
    """
    modules = _click_modules()
    exits = (*_classes(modules, "Exit"), typer.Exit)
    aborts = (*_classes(modules, "Abort"), KeyboardInterrupt)
    no_args = _classes(modules, "NoArgsIsHelpError")
    usage = _classes(modules, "ClickException")
    debug = _debug_requested(sys.argv)
    try:
        code = make_app()(standalone_mode=False)
    except SystemExit:
        raise
    except exits as err:
        sys.exit(err.exit_code)
    except no_args as err:  # `gpuplan` alone: the help, and click's usage exit
        print(err.ctx.get_help() if err.ctx else err.format_message())
        sys.exit(EXIT_BAD_INPUT)
    except usage as err:
        text = " ".join(err.format_message().split())
        print(f"gpuplan: error: {text} (see gpuplan --help)", file=sys.stderr)
        sys.exit(err.exit_code)
    except aborts:
        print("gpuplan: interrupted", file=sys.stderr)
        sys.exit(130)
    except BaseException as err:
        code, line = describe(err)
        if debug:
            traceback.print_exc()
        print(f"gpuplan: error: {line}", file=sys.stderr)
        sys.exit(code)
    sys.exit(code if isinstance(code, int) else 0)
