"""A real Slurm for the tests: scripts/slurm-up under a temporary directory, once per session
(under pytest-xdist, once per worker that runs a Slurm test: each cluster is private to its
base directory, ports and munge socket, so two can run side by side).

Where Slurm cannot run (packages missing, not root) the tests that need it skip with one line
saying so; under CI (CI=true) that is a failure instead, since CI installs the packages.
Every daemon is stopped by its recorded PID at the end (scripts/slurm-up --down), and a
previous run's leftovers under the same base are stopped and wiped before starting.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from allocator.core.atomic import pid_alive

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "slurm-up"
NEEDED = ("munged", "mariadbd", "mysql_install_db", "slurmdbd", "slurmctld", "slurmd",
          "sacctmgr", "sbatch", "squeue", "sinfo", "sacct", "scontrol")
PACKAGES = "slurm-wlm slurmctld slurmd slurm-client munge slurmdbd mariadb-server"


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def why_unavailable() -> str | None:
    """None when a private Slurm can be started here, else the one-line reason."""
    if os.geteuid() != 0:
        return "needs root"
    missing = [n for n in NEEDED if _which(n) is None]
    if missing:
        return f"{missing[0]} not installed (apt-get install -y {PACKAGES})"
    return None


@dataclass(frozen=True)
class SlurmCluster:
    """A running private cluster: its base dir and the environment its commands need."""

    base: Path
    env: dict[str, str]
    node: str

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              check=check, timeout=120)

    def sbatch(self, gpus: int, *, minutes: int = 10, payload: str = "sleep 1",
               comment: str | None = None, hold: bool = False, name: str = "t") -> str:
        argv = ["sbatch", "--parsable", f"--gres=gpu:{gpus}", "-t", str(minutes), "-J", name,
                "-D", str(self.base / "jobs"), "-o", "/dev/null", "--wrap", payload]
        if comment is not None:
            argv[1:1] = [f"--comment={comment}"]
        if hold:
            argv[1:1] = ["--hold"]
        return self.run(*argv).stdout.strip().split(";")[0]

    def jobs(self) -> dict[str, dict]:
        doc = json.loads(self.run("squeue", "--json").stdout)
        return {str(j["job_id"]): j for j in doc["jobs"]}

    def wait(self, what: str, ready, timeout_s: float = 60.0):
        """Poll until `ready()` is truthy (Slurm acts asynchronously); fail naming `what`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = ready()
            if value:
                return value
            time.sleep(0.3)
        pytest.fail(f"Slurm: {what} did not happen within {timeout_s:.0f} s")

    def reset(self) -> None:
        """Between tests: no job left, no reservation left."""
        self.run("scancel", "--user=root", "--full", check=False)
        for line in self.run("scontrol", "-o", "show", "reservation", check=False
                             ).stdout.splitlines():
            if line.startswith("ReservationName="):
                name = line.split()[0].split("=", 1)[1]
                self.run("scontrol", "delete", "reservation", name, check=False)
        self.wait("all jobs to leave the queue", lambda: all(
            j["job_state"] not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")
            for j in self.jobs().values()))


PREFIX = "gpuplan-slurm-"
OWNER = "owner.pid"  # the pytest process a base belongs to


def stop_stale(env: dict[str, str]) -> None:
    """A run killed before its finalizer leaves daemons behind: stop those (by their recorded
    PIDs) and remove their base, but only where the owning pytest process is gone, so that
    another xdist worker's live cluster is left alone."""
    for base in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        owner = base / OWNER
        try:
            pid = int(owner.read_text())
        except (OSError, ValueError):
            continue
        if not pid_alive(pid):
            subprocess.run([str(SCRIPT), "--down", str(base)], env=env, check=False,
                           timeout=120, capture_output=True)
            shutil.rmtree(base, ignore_errors=True)


def start_cluster() -> SlurmCluster:
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    stop_stale(env)
    base = Path(tempfile.mkdtemp(prefix=PREFIX))
    (base / OWNER).write_text(str(os.getpid()))
    done = subprocess.run([str(SCRIPT), str(base)], env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    if done.returncode != 0:
        subprocess.run([str(SCRIPT), "--down", str(base)], env=env, check=False, timeout=120)
        logs = base / "log"
        tail = "".join(p.read_text(errors="replace")[-300:] for p in sorted(logs.glob("*")))
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"scripts/slurm-up failed: {done.stderr.strip()[-300:]}\n{tail}")
    env["SLURM_CONF"] = str(base / "etc" / "slurm.conf")
    env["GPUPLAN_TRACKING"] = "off"
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return SlurmCluster(base=base, env=env, node=node)


def stop_cluster(cluster: SlurmCluster) -> None:
    subprocess.run([str(SCRIPT), "--down", str(cluster.base)], env=cluster.env, check=False,
                   timeout=120, capture_output=True)
    shutil.rmtree(cluster.base, ignore_errors=True)


def require_slurm(module_level: bool = False) -> None:
    """Skip (one line) where Slurm cannot run; fail loudly under CI=true, which installs it
    (each test then fails, in the fixture, while the rest of the suite still runs)."""
    reason = why_unavailable()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            if module_level:
                return
            pytest.fail(f"Slurm tests must run in CI, but Slurm is unavailable: {reason}",
                        pytrace=False)
        pytest.skip(f"real-Slurm tests skipped: {reason}", allow_module_level=module_level)


@pytest.fixture(scope="session")
def slurm_session():
    require_slurm()
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture
def slurm(slurm_session):
    """The session's cluster, emptied of jobs and reservations before each test."""
    slurm_session.reset()
    return slurm_session
