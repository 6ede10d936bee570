"""Atomic file output: write beside the target, fsync, rename. No half-written files.

Temporary names carry the writer's pid, so a later run removes what a killed one left
(`.NAME.PID.XXXX.tmp`) without touching a live writer's file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from allocator.core.errors import InputError


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (a stale temporary's owner is gone)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_temps(target: Path) -> None:
    """Remove `.NAME.PID.*.tmp` files beside `target` whose writer is no longer running."""
    with contextlib.suppress(OSError):
        for leftover in target.parent.glob(f".{target.name}.*.tmp"):
            parts = leftover.name[len(target.name) + 2:].split(".")
            if parts and parts[0].isdigit() and not pid_alive(int(parts[0])):
                with contextlib.suppress(OSError):
                    leftover.unlink()


def writable_target(target: Path) -> None:
    """InputError (the path named) when `target` cannot be a file we write."""
    if target.is_dir():
        raise InputError("is a directory; give a file path", file=str(target))
    check_parents(target)


def check_parents(target: Path) -> None:
    """InputError when the nearest existing parent of `target` is a file: nothing can be
    created below it."""
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{parent} is not a directory", file=str(target))
            break


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success it replaces `target` in one rename."""
    target = Path(target)
    writable_target(target)
    with _staged(target) as tmp_path:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        # mkstemp makes the file owner-only; give it the mode a plain open() would have.
        os.chmod(tmp_path, _mode_of(target))
        os.replace(tmp_path, target)


def write_text(target: str | os.PathLike[str], text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_all(files: Mapping[Path, str | bytes]) -> None:
    """Several files as one: every temporary written first, then the renames.

    A failure while writing (a full disk, an unwritable place) leaves every target as it was.
    """
    for target in files:
        writable_target(Path(target))
    with contextlib.ExitStack() as stack:
        temps = {}
        for target, body in files.items():
            tmp = stack.enter_context(_staged(Path(target)))
            if isinstance(body, bytes):
                tmp.write_bytes(body)
            else:
                tmp.write_text(body, encoding="utf-8")
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            temps[Path(target)] = tmp
        for target, tmp in temps.items():
            os.chmod(tmp, _mode_of(target))
            os.replace(tmp, target)


@contextlib.contextmanager
def _staged(target: Path) -> Iterator[Path]:
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp",
                               dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _mode_of(target: Path) -> int:
    """An existing file keeps its mode; a new one gets 0o666 less the process umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def json_text(obj: object, **options: Any) -> str:
    """Standard JSON (RFC 8259): a NaN or an infinity, where a metric has none, is null."""
    return json.dumps(_finite(obj), allow_nan=False, **options)


def _finite(obj: object) -> object:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "shape", None) == ():
        return _finite(obj.item())  # a numpy scalar
    return obj
