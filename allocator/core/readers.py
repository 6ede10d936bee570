"""The one table reader (CSV or Parquet) and the one JSON reader: bad input, one line.

Every command reads its files through these two, so a missing, oversized or malformed
file gets the same message whatever the command: the file named, then what is wrong.
JSON is read finite-only (NaN and Infinity are not JSON, and a plan cannot use them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from allocator.core import limits
from allocator.core.errors import InputError

TABLE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")


def read_table(path: str | os.PathLike[str], *, dtype: Any = None,
               blank_is_missing: bool = True) -> Any:
    """A CSV (gzipped too) or Parquet file, by extension, as a DataFrame; InputError naming
    the file. `dtype` is the CSV's (Parquet carries its own types); with
    `blank_is_missing=False` a blank CSV cell stays an empty string."""
    import pandas as pd

    path = Path(path)
    name = path.name.lower()
    if not name.endswith(TABLE_SUFFIXES):
        raise InputError("expected a .csv, .csv.gz or .parquet file", file=str(path))
    limits.check_file_size(path, limits.MAX_TABLE_BYTES)
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        frame = pd.read_csv(path, dtype=dtype, keep_default_na=blank_is_missing)
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    except Exception as err:  # any parser failure is the same for the user: unreadable
        raise InputError(f"cannot read table: {type(err).__name__}: "
                         f"{' '.join(str(err).split())}", file=str(path)) from None
    limits.check_separator(list(frame.columns), path)
    return frame


def _not_json(name: str) -> object:
    raise ValueError(f"{name} is not allowed")


def read_json(path: str | os.PathLike[str]) -> Any:
    """A JSON file, NaN and Infinity rejected; InputError naming the file."""
    path = Path(path)
    limits.check_file_size(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    except (OSError, ValueError) as err:  # UnicodeDecodeError included
        raise InputError(f"not valid JSON: {err}", file=str(path)) from None
    return parse_json(text, str(path))


def parse_json(text: str, file: str | None = None) -> Any:
    """JSON text as `read_json` reads it (NaN and Infinity rejected); `file` names it."""
    try:
        return json.loads(text, parse_constant=_not_json)
    except RecursionError:
        raise InputError("not valid JSON: nesting too deep", file=file) from None
    except ValueError as err:  # JSONDecodeError, a constant, an integer beyond the limit
        raise InputError(f"not valid JSON: {err}", file=file) from None
