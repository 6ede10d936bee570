"""Running Slurm's commands: one place that finds them and turns a failure into one line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

TIMEOUT_S = 60


class SlurmError(RuntimeError):
    """A Slurm command failed (not reachable, refused): not bad input, but nothing to go on."""


def command(name: str) -> str:
    """Slurm's `name`: from GPUPLAN_SLURM_BIN when set (sites with Slurm in /opt/slurm/bin),
    else PATH."""
    base = os.environ.get("GPUPLAN_SLURM_BIN")
    if base:
        return str(Path(base) / name)
    found = shutil.which(name)
    if not found:
        raise SlurmError(f"{name} not found on PATH (is this a Slurm login node?)")
    return found


def run(name: str, *args: str) -> str:
    """Run a Slurm command; its stdout, or SlurmError with the command and its stderr."""
    argv = [command(name), *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SlurmError(f"{name} {' '.join(args)}: {err}") from None
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise SlurmError(f"{name} {' '.join(args)} exited {done.returncode}: "
                         f"{why[-1] if why else 'no message'}")
    return done.stdout
