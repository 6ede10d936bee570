"""Where gpuplan keeps its state, and where its bundled files are: one place, never the cwd.

State (the MLflow store `mlruns/`, the default output root `out/`, the models `train`
fits by default) lives in one directory, the *home*:

1. `GPUPLAN_HOME` when set;
2. else the project directory (the checkout holding `pyproject.toml` beside `pipelines/`)
   when the current directory is inside it, so `make demo` and `make ui` see one store;
3. else a per-user directory: `$XDG_DATA_HOME/gpuplan`, by default `~/.local/share/gpuplan`.

Bundled inputs (data/, the committed models/) resolve against the project directory, so
`gpuplan plan-day` run from /tmp reads the same `data/cluster.json` as from the checkout.
`gpuplan where` prints all of it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV = "GPUPLAN_HOME"
STORE_DIR = "mlruns"
OUT_DIR = "out"
MODELS_DIR = "models"


def project_dir() -> Path:
    """The checkout this code runs from (an editable install): where data/ and models/ are."""
    return Path(__file__).resolve().parents[1]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True


def _user_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".local" / "share") / "gpuplan"


@dataclass(frozen=True)
class Home:
    """The resolved state directory and why it was chosen (printed by `gpuplan where`)."""

    path: Path
    reason: str

    @property
    def store(self) -> Path:
        return self.path / STORE_DIR

    @property
    def out(self) -> Path:
        return self.path / OUT_DIR

    @property
    def trained_models(self) -> Path:
        """Where `gpuplan train` saves by default: under out/, never the committed models/."""
        return self.out / MODELS_DIR


def home() -> Home:
    """The state directory, by the rule in this module's docstring (not created here)."""
    given = os.environ.get(ENV, "").strip()
    if given:
        return Home(Path(given).expanduser().resolve(), f"${ENV}")
    project = project_dir()
    if (project / "pyproject.toml").exists() and _inside(Path.cwd(), project):
        return Home(project, "the project directory (the current directory is inside it)")
    return Home(_user_dir(), f"the per-user directory: the current directory is outside "
                f"the project; set ${ENV} to choose another")


def out_dir(*parts: str) -> Path:
    """A default output directory under the home's out/."""
    return home().out.joinpath(*parts)


def bundled(relative: str) -> Path:
    """A file shipped with the project (data/..., models/), whatever the current directory."""
    return project_dir() / relative


BUNDLED_MODELS = "models"


def bundled_models() -> Path:
    """The committed estimators (fitted on data/history, see docs/estimators.md)."""
    return bundled(BUNDLED_MODELS)


def default_models() -> Path:
    """The estimators a command falls back to when the registry has no champion: the
    home's trained models when `gpuplan train` has saved some there, else the bundled ones."""
    trained = home().trained_models
    if (trained / "manifest.json").exists():
        return trained
    return bundled_models()


def project_commit() -> str:
    """The checkout's short commit (a run tag), or "-" outside a git checkout."""
    import subprocess

    try:
        done = subprocess.run(["git", "-C", str(project_dir()), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return "-"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "-"
