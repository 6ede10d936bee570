"""MLflow tracking for every pipeline: an embedded SQLite store by default, any server by URI.

Tracking is a side channel. When MLflow is unreachable or fails, the tracker prints one
warning line, switches itself off for the rest of the process, and the pipeline's local
outputs (models/, plans, reports) are written all the same.

Store: `MLFLOW_TRACKING_URI` when set; otherwise `sqlite:///<home>/mlruns/mlflow.db` with
artifacts under `<home>/mlruns/artifacts/` (what `make ui` opens), where <home> is
pipelines.home's state directory (`gpuplan where`). A command that only reads models never
creates the store. Switch: GPUPLAN_TRACKING=off|on (the test suite's autouse fixture sets
it off, so a test never touches the project's store).

Registry: `train` registers every version with a description of the history it came from;
the alias `champion` moves only when pipelines.promotion says the new version is at least
as good on the same held-out rows (or `--promote`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

EXPERIMENTS = {
    "estimators": "gpuplan-estimators",
    "scoring": "gpuplan-scoring",
    "plans": "gpuplan-plans",
    "bench": "gpuplan-bench",
}
MODEL_NAMES = {
    "training": "gpuplan-training-cost",
    "quantization": "gpuplan-quantization-cost",
}
EXPERIMENT_NOTES = {
    "estimators": "One run per `gpuplan train`: the held-out evaluation as metrics "
                  "(training.<variant>.<metric>, quantization.<algorithm>.<metric>), the "
                  "report as an artifact, each estimator registered as a model version "
                  "(Models tab); @champion moves only on evidence.",
    "scoring": "One run per scored queue (`gpuplan score`, or `plan-day` on an unscored "
               "queue): which model versions scored it, how many rows were rejected.",
    "plans": "One run per daily plan (`gpuplan plan-day`), named after the cluster, the "
             "plan's start and the policy; filter by the tags policy, cluster, plan_start "
             "and commit. The run's Description is the report's first part (what to start "
             "now); the full report and the grid picture are artifacts under plan/.",
    "bench": "The demo's allocator benchmark: fast against fifo and priority per scenario.",
}
MODEL_NOTES = {
    "training": "gpuplan's training-cost estimator (GPU count and p50/p90 GPU-hours of a "
                "fine-tuning job). Every `gpuplan train` registers a version described by "
                "its history and held-out evaluation; @champion, which `score` and "
                "`plan-day` load, moves only when a version is at least as good on the same "
                "held-out rows (or `gpuplan train --promote`).",
    "quantization": "gpuplan's quantization-cost estimator (GPU count and p50/p90 "
                    "GPU-hours of a GPTQ/AWQ/bitsandbytes job). Versions and @champion as "
                    "for gpuplan-training-cost.",
}
CHAMPION = "champion"
STORE_DIR = "mlruns"
PROBE_TIMEOUT_S = 3.0
# A server that dies mid-run must fail each call within a minute, not retry for minutes
# (MLflow's own default); but one busy answer (a 5xx, a reset) of a live server must not
# switch tracking off for the rest of the run: two retries, within about 3 s.
_HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
                  "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
_PIP = ["scikit-learn", "lightgbm", "statsmodels", "pandas", "numpy"]


def default_uri(root: str | os.PathLike[str] | None = None) -> str:
    """The embedded store: a SQLite file in gpuplan's home (`gpuplan where`), or under `root`."""
    from pipelines.home import home

    base = Path(root) if root is not None else home().path
    return f"sqlite:///{(base / STORE_DIR / 'mlflow.db').resolve()}"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI", "").strip() or default_uri()


def _is_remote(uri: str) -> bool:
    return urlparse(uri).scheme in ("http", "https")


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///"):])


def _quiet_mlflow() -> None:
    """MLflow's INFO chatter (migrations, 'Created version') drowns the pipeline's output."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    for name in ("mlflow", "alembic", "urllib3", "sqlalchemy", "databricks"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)  # failures: our one line
    warnings.filterwarnings("ignore", module=r"mlflow(\..*)?")
    os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")


def _short(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 160 else text[:157] + "..."


@contextlib.contextmanager
def _store_lock(db: Path | None) -> Iterator[None]:
    """An exclusive lock beside an embedded store (no-op for servers and without fcntl)."""
    if db is None:
        yield
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        handle = open(db.parent / ".gpuplan-store.lock", "a+")  # noqa: SIM115
    except OSError:  # a read-only store: the store itself will say so
        yield
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass
class ModelRef:
    """Where an estimator came from: the registry (name, version) or a local file."""

    source: str  # "registry" | "local"
    uri: str
    name: str = ""
    version: str = ""

    def as_params(self, prefix: str) -> dict[str, str]:
        return {f"{prefix}_source": self.source, f"{prefix}_uri": self.uri,
                f"{prefix}_version": self.version or "-"}


class Tracker:
    """One per process: lazily connects, and goes quiet after the first failure."""

    def __init__(self, uri: str | None = None, *, enabled: bool = True,
                 warn: Callable[[str], None] | None = None) -> None:
        # GPUPLAN_TRACKING=off: a parent (the demo) has already warned, stay silent
        switch = os.environ.get("GPUPLAN_TRACKING", "").lower()
        self.uri = uri or tracking_uri()
        self._enabled = enabled and switch != "off"
        self._ready: bool | None = None
        self._warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
        self._experiment_ids: dict[str, str] = {}

    # -- state ---------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self._enabled and self._connect()

    def store_exists(self) -> bool:
        """An embedded store whose database is not there yet holds no champion: reading
        models must not create it (a failing command leaves nothing behind)."""
        db = _sqlite_path(self.uri)
        return db is None or db.exists()

    def where(self) -> str:
        """The store in words, for error messages that say how to point elsewhere."""
        return (f"MLflow store {self.uri} (set MLFLOW_TRACKING_URI or GPUPLAN_HOME "
                "to use another)")

    def fail(self, what: str, err: BaseException) -> None:
        """The one warning line; after it, every tracking call is a no-op."""
        if self._enabled:
            line = (f"gpuplan: warning: MLflow tracking at {self.uri} is off ({what}: "
                    f"{_short(err)}); local outputs are still written")
            self._warn(line)
        self._enabled = False

    def _connect(self) -> bool:
        if self._ready is not None:
            return self._ready
        self._ready = False
        try:
            _quiet_mlflow()
            if _is_remote(self.uri):
                for key, value in _HTTP_DEFAULTS.items():
                    os.environ.setdefault(key, value)
                import requests

                requests.get(self.uri.rstrip("/") + "/health",
                             timeout=PROBE_TIMEOUT_S).raise_for_status()
            db = _sqlite_path(self.uri)
            if db is not None:
                db.parent.mkdir(parents=True, exist_ok=True)
            # MLflow prints its own tracebacks on a broken store: the warning below says it
            with _store_lock(db), contextlib.redirect_stderr(io.StringIO()):
                import mlflow

                _quiet_mlflow()  # again: importing mlflow resets its loggers
                mlflow.set_tracking_uri(self.uri)
                mlflow.set_registry_uri(self.uri)
                # the store answers, and a new one is created (tables, migrations) by one
                # process at a time: concurrent first runs must not race on CREATE TABLE
                self.client().search_experiments(max_results=1)
            self._ready = True
        except Exception as err:  # an unreachable store must never stop a pipeline
            self.fail("cannot connect", err)
        return self._ready

    def client(self):
        from mlflow import MlflowClient

        return MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)

    def experiment_id(self, key: str) -> str:
        """Get or create the experiment; embedded stores keep artifacts beside the database."""
        name = EXPERIMENTS.get(key, key)
        if name in self._experiment_ids:
            return self._experiment_ids[name]
        client = self.client()
        db = _sqlite_path(self.uri)
        found = client.get_experiment_by_name(name)
        if found is not None:
            exp_id = found.experiment_id
        else:
            location = (db.parent / "artifacts" / name).resolve().as_uri() if db else None
            with _store_lock(db):  # get-or-create, once, across concurrent processes
                found = client.get_experiment_by_name(name)
                exp_id = found.experiment_id if found is not None else \
                    client.create_experiment(name, artifact_location=location)
        with _store_lock(db):  # the tags too: two first runs would insert the same tag twice
            self._describe(client, exp_id, key)
        self._experiment_ids[name] = exp_id
        return exp_id

    @staticmethod
    def _describe(client: Any, exp_id: str, key: str) -> None:
        """The experiment's description (its page header) and MLflow 3's experiment kind:
        these are training runs, so the UI opens on Runs, not on the GenAI overview."""
        note = EXPERIMENT_NOTES.get(key)
        tags = client.get_experiment(exp_id).tags or {}
        if note and tags.get("mlflow.note.content") != note:
            client.set_experiment_tag(exp_id, "mlflow.note.content", note)
        if tags.get("mlflow.experimentKind") != "custom_model_development":
            client.set_experiment_tag(exp_id, "mlflow.experimentKind",
                                      "custom_model_development")

    # -- runs ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def run(self, experiment: str, run_name: str,
            tags: Mapping[str, str] | None = None) -> Iterator[Run]:
        """A tracked run; the body always executes, tracked or not, and its errors propagate."""
        handle = Run(self, None)
        if self.enabled:
            try:
                import mlflow

                active = mlflow.start_run(experiment_id=self.experiment_id(experiment),
                                          run_name=run_name, tags=dict(tags or {}))
                handle = Run(self, active.info.run_id)
            except Exception as err:
                self.fail("cannot start a run", err)
        status = "FAILED"
        try:
            yield handle
            status = "FINISHED"
        finally:
            if handle.run_id is not None:
                try:
                    import mlflow

                    mlflow.end_run(status=status)
                except Exception as err:
                    self.fail("cannot end the run", err)

    # -- the registry --------------------------------------------------------------------

    def load_champion(self, kind: str, fallback: Callable[[], Any],
                      fallback_uri: str = "models/") -> tuple[Any, ModelRef]:
        """The registered `champion` of this estimator, else `fallback()` (models/ on disk).

        A registry with no such model falls back quietly; a failing registry warns once.
        """
        name = MODEL_NAMES.get(kind, kind)
        if self.store_exists() and self.enabled:
            try:
                version = self._champion_version(name)
                if version is not None:
                    import mlflow.sklearn

                    model = mlflow.sklearn.load_model(f"models:/{name}@{CHAMPION}")
                    return model, ModelRef("registry", f"models:/{name}/{version}", name,
                                           str(version))
            except Exception as err:
                self.fail(f"cannot load {name}@{CHAMPION}", err)
        return fallback(), ModelRef("local", fallback_uri)

    def champion(self, kind: str) -> tuple[Any, ModelRef] | None:
        """The current champion of this estimator and its reference, or None (no store, no
        champion, or a failing registry: then one warning)."""
        model, ref = self.load_champion(kind, lambda: None)
        return (model, ref) if model is not None and ref.source == "registry" else None

    def _champion_version(self, name: str) -> str | None:
        from mlflow.exceptions import MlflowException

        try:
            return self.client().get_model_version_by_alias(name, CHAMPION).version
        except MlflowException as err:
            if getattr(err, "error_code", "") in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND",
                                                  "INVALID_PARAMETER_VALUE"):
                return None
            raise


@dataclass
class Run:
    """Logging calls on one run; each is a no-op when untracked, and never raises."""

    tracker: Tracker
    run_id: str | None
    models: dict[str, ModelRef] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.run_id is not None and self.tracker._enabled

    def _guard(self, what: str, call: Callable[[], Any]) -> Any:
        if not self.active:
            return None
        try:
            return call()
        except Exception as err:
            self.tracker.fail(what, err)
            return None

    def params(self, values: Mapping[str, Any]) -> None:
        if not self.active:
            return
        import mlflow

        clean = {k: ("" if v is None else str(v))[:500] for k, v in values.items()}
        self._guard("log params", lambda: mlflow.log_params(clean))

    def metrics(self, values: Mapping[str, Any], step: int | None = None) -> None:
        if not self.active:
            return
        import math

        import mlflow

        clean = {}
        for k, v in values.items():
            try:
                f = float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(f):
                clean[k] = f
        self._guard("log metrics", lambda: mlflow.log_metrics(clean, step=step))

    def tags(self, values: Mapping[str, Any]) -> None:
        if not self.active:
            return
        import mlflow

        self._guard("set tags", lambda: mlflow.set_tags({k: str(v) for k, v in values.items()}))

    def artifact(self, path: str | os.PathLike[str], folder: str | None = None) -> None:
        if not self.active:
            return
        import mlflow

        if Path(path).exists():
            self._guard("log an artifact", lambda: mlflow.log_artifact(str(path), folder))

    def artifacts(self, paths: Sequence[str | os.PathLike[str]], folder: str | None = None) -> None:
        for path in paths:
            self.artifact(path, folder)

    def register(self, kind: str, estimator: Any, *, alias: str = CHAMPION,
                 promote: bool = True, description: str = "",
                 lightgbm_parts: Mapping[str, Any] | None = None) -> ModelRef | None:
        """Log with the sklearn flavour (pyfunc included), register with `description`,
        and point `alias` at the new version only when `promote`.

        `lightgbm_parts` (name -> LightGBM model inside the estimator) are also logged with
        the lightgbm flavour, unregistered, so the boosters can be inspected on their own.
        """
        name = MODEL_NAMES.get(kind, kind)

        def call() -> ModelRef:
            import mlflow.sklearn

            # cloudpickle: skops refuses the project's own estimator classes
            with contextlib.redirect_stderr(io.StringIO()):  # "Created version 3 of ..."
                info = mlflow.sklearn.log_model(estimator, name=f"{kind}-cost",
                                                registered_model_name=name,
                                                serialization_format="cloudpickle",
                                                pip_requirements=_PIP)
            version = str(info.registered_model_version)
            client = self.tracker.client()
            note = MODEL_NOTES.get(kind, "")
            if note and client.get_registered_model(name).description != note:
                client.update_registered_model(name, description=note)
            if description:
                client.update_model_version(name, version, description=description[:5000])
            if promote:
                client.set_registered_model_alias(name, alias, version)
            for part, booster in (lightgbm_parts or {}).items():
                import mlflow.lightgbm

                mlflow.lightgbm.log_model(booster, name=f"{kind}-{part}-lightgbm",
                                          pip_requirements=["lightgbm"])
            return ModelRef("registry", f"models:/{name}/{version}", name, version)

        ref = self._guard(f"register {name}", call)
        if ref is not None:
            self.models[kind] = ref
        return ref


_PROCESS_TRACKER: Tracker | None = None


def get_tracker() -> Tracker:
    """The process's tracker (one warning per process, however many runs)."""
    global _PROCESS_TRACKER
    if _PROCESS_TRACKER is None or _PROCESS_TRACKER.uri != tracking_uri():
        _PROCESS_TRACKER = Tracker()
    return _PROCESS_TRACKER


# -- the estimators: registry first, models/ second ------------------------------------------

ESTIMATOR_KINDS = ("training", "quantization")


def lightgbm_parts(estimator: Any) -> dict[str, Any]:
    """The LightGBM models a fitted estimator holds (attributes ending in `_`), by name."""
    try:
        import lightgbm
    except ImportError:  # pragma: no cover - lightgbm is a dependency
        return {}
    parts = {}
    for attr, value in sorted(vars(estimator).items()):
        if attr.endswith("_") and isinstance(value, lightgbm.LGBMModel):
            parts[attr.rstrip("_")] = value
    return parts


def load_estimators(models_dir: str | os.PathLike[str] | None = None,
                    tracker: Tracker | None = None) -> tuple[dict[str, Any], dict[str, ModelRef]]:
    """The estimators a command uses, and where each came from.

    `models_dir` given (the user's `--models`): that directory only, the registry is not
    consulted. Not given: each estimator's registered champion, else the fallback directory
    (pipelines.home.default_models: what `train` saved in the home, else the bundled
    models/). InputError naming the store and the directory when nothing is found.
    """
    from forecasting.store import FILES
    from forecasting.store import load_estimators as load_local
    from pipelines.home import default_models

    tracker = tracker or get_tracker()
    if models_dir is not None:
        found = load_local(models_dir)
        refs = {kind: ModelRef("local", str(Path(models_dir) / FILES[kind]))
                for kind in ESTIMATOR_KINDS if kind in found}
        return {k: v for k, v in found.items() if k in ESTIMATOR_KINDS}, refs
    fallback_dir = default_models()
    local: dict[str, Any] | None = None
    problem: Exception | None = None

    def from_disk(kind: str) -> Any:
        nonlocal local, problem
        if local is None and problem is None:
            try:
                local = load_local(fallback_dir)
            except Exception as err:  # reported below only if nothing else is found
                problem, local = err, {}
        return (local or {}).get(kind)

    found = {}
    refs = {}
    for kind in ESTIMATOR_KINDS:
        path = fallback_dir / FILES[kind]
        model, ref = tracker.load_champion(kind, functools.partial(from_disk, kind), str(path))
        if model is not None:
            found[kind], refs[kind] = model, ref
    if not found:
        from allocator.core.errors import InputError

        why = f" ({_short(problem)})" if problem is not None else ""
        raise InputError(f"no fitted estimators: no @{CHAMPION} in {tracker.where()}, and "
                         f"none in {fallback_dir}{why}; run `gpuplan train`, or give "
                         "--models DIR", field="models")
    return found, refs


def describe_refs(refs: Mapping[str, ModelRef]) -> str:
    """One line: which model each estimator is and where it came from (every command prints
    it, so a score is never made by an estimator nobody named)."""
    parts = []
    for kind, ref in refs.items():
        origin = (f"registry alias @{CHAMPION}, version {ref.version}"
                  if ref.source == "registry" else "local file")
        parts.append(f"{kind} {ref.uri} ({origin})")
    return "models: " + "; ".join(parts) if parts else "models: none"


def table_metrics(frame: Any, key: str, prefix: str) -> dict[str, float]:
    """A report table (one row per group) flattened to metrics `prefix.group.column`."""
    out: dict[str, float] = {}
    if frame is None:
        return out
    for row in frame.to_dict("records"):
        group = str(row.get(key, "")).replace(" ", "_")
        for col, value in row.items():
            if col == key or isinstance(value, bool | str):
                continue
            out[f"{prefix}.{group}.{col}"] = value
    return out


def log_training(estimators: Mapping[str, Any], *, params: Mapping[str, Any],
                 metrics: Mapping[str, Any], artifacts: list[Path],
                 promote: Mapping[str, bool] | None = None,
                 descriptions: Mapping[str, str] | None = None,
                 run_name: str = "train", tags: Mapping[str, str] | None = None,
                 tracker: Tracker | None = None) -> dict[str, ModelRef]:
    """One run in gpuplan-estimators: parameters, evaluation metrics, reports, and each
    estimator registered with its description; `champion` moves to the new version only
    for the kinds `promote` says (all of them when not given)."""
    tracker = tracker or get_tracker()
    with tracker.run("estimators", run_name, tags={**run_tags(), **(tags or {})}) as run:
        run.params(params)
        run.metrics(metrics)
        run.artifacts([p for p in artifacts if p], "reports")
        for kind in ESTIMATOR_KINDS:
            if kind in estimators:
                run.register(kind, estimators[kind],
                             promote=True if promote is None else bool(promote.get(kind)),
                             description=(descriptions or {}).get(kind, ""),
                             lightgbm_parts=lightgbm_parts(estimators[kind]))
        return dict(run.models)


def run_tags() -> dict[str, str]:
    """Tags every gpuplan run carries, so runs can be filtered by code version."""
    from pipelines.home import project_commit

    return {"commit": project_commit()}


def log_scoring(*, params: Mapping[str, Any], metrics: Mapping[str, Any],
                refs: Mapping[str, ModelRef], artifacts: list[Path],
                tracker: Tracker | None = None) -> None:
    """One run in gpuplan-scoring: which model versions scored the queue, and the result."""
    tracker = tracker or get_tracker()
    queue = Path(str(params.get("queue", ""))).name
    with tracker.run("scoring", f"score {queue}".strip(), tags=run_tags()) as run:
        merged = dict(params)
        for kind, ref in refs.items():
            merged.update(ref.as_params(f"{kind}_model"))
        run.params(merged)
        run.metrics(metrics)
        run.artifacts([p for p in artifacts if p], "queue")


def evaluation_metrics(report: Any) -> dict[str, float]:
    """forecasting.evaluate's Report as metrics: per variant / algorithm, and targets met."""
    out = table_metrics(getattr(report, "training", None), "variant", "training")
    out.update(table_metrics(getattr(report, "quantization", None), "algorithm",
                             "quantization"))
    targets = getattr(report, "targets", None)
    if targets is not None and len(targets):
        out["targets_met"] = float(targets["met"].astype(bool).sum())
        out["targets_total"] = float(len(targets))
    return out
