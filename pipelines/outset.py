"""Output sets that commit as one: a command's files appear together or not at all.

A command writes its files into a fresh staging directory beside the target
(`.NAME.set-PID-XXXX`), then swaps it with the target in one atomic exchange
(Linux renameat2 RENAME_EXCHANGE; elsewhere two renames, undone on the next run if
interrupted between them). A killed run therefore leaves the previous complete set or
the new one, never a mix. Files in the target that the new set does not own are carried
over as hard links. Each set holds `.gpuplan-set.json`: a run id and the sha256 of every
file, so a reader (or a test) can tell that the files belong together.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Collection, Iterator
from pathlib import Path

from allocator.core.atomic import check_parents, pid_alive
from allocator.core.errors import InputError

MARKER = ".gpuplan-set.json"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically; False when the system cannot (not Linux, old libc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):
        return False
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if call(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (38, 22, 95):  # ENOSYS, EINVAL, EOPNOTSUPP: this file system cannot swap
        return False
    raise OSError(err, os.strerror(err), str(b))


def _owner(path: Path, target: Path) -> int | None:
    rest = path.name[len(target.name) + 2:]  # "set-PID-XXXX[.old]"
    if not rest.startswith("set-"):
        return None
    pid = rest[4:].split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def recover(target: Path) -> None:
    """Undo what a killed run left: restore a set moved aside, remove stale staging dirs."""
    parent = target.parent
    if not parent.is_dir():
        return
    for path in sorted(parent.glob(f".{target.name}.set-*")):
        pid = _owner(path, target)
        if pid is None or pid_alive(pid):
            continue
        if path.name.endswith(".old") and not target.exists():
            with contextlib.suppress(OSError):  # killed between the two renames: old set back
                os.rename(path, target)
            continue
        shutil.rmtree(path, ignore_errors=True)


def check_target(target: Path) -> None:
    """InputError when `target` cannot hold an output set (a file, or above the cwd)."""
    if target.exists() and not target.is_dir():
        raise InputError("is not a directory", file=str(target))
    check_parents(target)
    here = Path.cwd().resolve()
    resolved = target.resolve()
    if resolved == here or resolved in here.parents:
        raise InputError("is the working directory or above it; give a directory of its own",
                         file=str(target))


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _carry_over(target: Path, stage: Path, owned: Collection[str] | None) -> None:
    """Hard-link what the new set keeps from the old one (all of it when owned is None)."""
    if not target.is_dir():
        return
    for entry in target.iterdir():
        if entry.name == MARKER or (owned is not None and entry.name in owned):
            continue
        if entry.name.startswith(".") and entry.name.endswith(".tmp"):
            continue  # a killed writer's temporary
        dest = stage / entry.name
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, dest, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, dest)


def _link_or_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def files_of(stage: Path) -> dict[str, str]:
    """sha256 of every regular file below `stage`, by relative path (the marker aside)."""
    out = {}
    for path in sorted(stage.rglob("*")):
        if path.is_file() and path.name != MARKER:
            out[path.relative_to(stage).as_posix()] = _digest(path)
    return out


def verify(target: Path) -> str | None:
    """The set's run id when every file matches its marker; None when the set is mixed."""
    try:
        marker = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = marker.get("files", {})
    for name, digest in files.items():
        path = target / name
        if not path.is_file() or _digest(path) != digest:
            return None
    return str(marker.get("run"))


@contextlib.contextmanager
def output_set(target: str | os.PathLike[str], command: str,
               owned: Collection[str] | None = None) -> Iterator[Path]:
    """Yield a staging directory; when the body returns, it becomes `target` in one swap.

    `owned`: the names this command writes; old files of those names are dropped rather
    than carried into the new set (None: carry everything, the new files overwrite).
    """
    target = Path(target)
    if target.is_symlink():  # swap the directory it names, never the link itself
        target = target.resolve()
    check_target(target)
    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    recover(target)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.set-{os.getpid()}-",
                                  dir=target.parent))
    try:
        _carry_over(target, stage, owned)
        yield stage
        run = uuid.uuid4().hex
        marker = {"run": run, "command": command, "files": files_of(stage)}
        (stage / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        _fsync_dir(stage)
        if not target.exists():
            os.rename(stage, target)
        elif not _exchange(stage, target):
            aside = stage.with_name(stage.name + ".old")
            os.rename(target, aside)
            os.rename(stage, target)
            shutil.rmtree(aside, ignore_errors=True)
        _fsync_dir(target.parent)
    finally:
        if stage.exists():  # the old set after the swap, or the new one after a failure
            shutil.rmtree(stage, ignore_errors=True)
        if not target.exists():  # a failed first run leaves no empty directories behind
            for parent in made:
                with contextlib.suppress(OSError):
                    parent.rmdir()


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
