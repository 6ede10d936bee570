"""What every command shares: bad input -> one line on stderr and exit code 2."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import typer

from allocator.errors import InputError

EXIT_BAD_INPUT = 2


@contextlib.contextmanager
def input_errors(file: str | None = None) -> Iterator[None]:
    """Turn an InputError raised inside into the contract's exit: one clear line, code 2."""
    try:
        yield
    except InputError as err:
        located = err.located(file) if file else err
        print(f"gpuplan: error: {located.line()}", file=sys.stderr)
        raise typer.Exit(EXIT_BAD_INPUT) from None
