"""The one Markdown table writer: every table gpuplan prints or publishes is built here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def table(headers: Sequence[object], rows: Iterable[Sequence[object]],
          align: Sequence[str] | None = None) -> str:
    """A Markdown table, each cell as str(); `align` gives each column's rule ("---",
    "---:"), plain by default. Ends with a newline."""
    rule = list(align) if align is not None else ["---"] * len(headers)
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
