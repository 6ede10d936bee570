"""The one error type for bad input: it names the file, the job and the field.

The CLI turns it into one line on stderr and exit code 2, with no output written.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input, located as precisely as the caller knows: file, job id, field."""

    def __init__(
        self, message: str, *, file: str | None = None, job: str | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.job = job
        self.field = field
        super().__init__(self.line())

    def located(self, file: str) -> InputError:
        """The same error, with the file filled in (loaders know it, parsers do not)."""
        return InputError(self.message, file=self.file or file, job=self.job, field=self.field)

    def line(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file)
        if self.job is not None:
            parts.append(f"job {self.job!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        where = ": ".join(parts)
        return f"{where}: {self.message}" if where else self.message
