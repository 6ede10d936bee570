"""Look at gpuplan's MLflow runs as a user does: a real `mlflow server`, a real browser.

    .venv/bin/python tools/mlflow_screenshots.py [--out docs/mlflow] [--home DIR]

1. Fills a fresh store (a temporary GPUPLAN_HOME, or --home to reuse one) by running the
   README's "Use your own data" commands on data/examples/: train, score, plan-day.
2. Starts `mlflow server` on 127.0.0.1 (a free port) over that store.
3. Loads the experiments list, the plans experiment (as MLflow 3 opens it, and in its
   "Model training" view), one plan run, the registered training-cost model and its first
   version in headless Chromium, and saves a PNG of each under --out.

Needs `chromium` (Debian: apt-get install chromium); without it, it says so in one line
and exits 3. Not a test: CI does not need a browser.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "data" / "examples"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gpuplan(*args: str, env: dict[str, str]) -> None:
    command = [sys.executable, "-m", "pipelines.cli", *args]
    print("$ gpuplan " + " ".join(args), flush=True)
    subprocess.run(command, env=env, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def fill(home: Path) -> None:
    """The README's own-data commands, every path explicit."""
    env = {**os.environ, "GPUPLAN_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    out = home / "mine"
    E = EXAMPLES.relative_to(ROOT)  # the commands run in the checkout, as the README's do
    gpuplan("train", str(E / "history" / "training.csv"), "--quantization",
            str(E / "history" / "quantization.csv"), "--models", str(out / "models"),
            "--report", str(out / "evaluation.md"), env=env)
    gpuplan("score", str(E / "queue.csv"), "--out", str(out / "scored.csv"), env=env)
    for policy_flag in ([], ["--full", "--time-limit", "20"]):
        gpuplan("plan-day", "--queue", str(out / "scored.csv"), "--cluster",
                str(E / "cluster.json"), "--traffic", str(E / "traffic.csv"),
                "--services", str(E / "services.json"), "--running",
                str(E / "running.json"), "--out-dir",
                str(out / ("day-full" if policy_flag else "day")), *policy_flag, env=env)


def wait_healthy(url: str, server: subprocess.Popen, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"mlflow server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"mlflow server at {url} did not answer /health in {seconds:.0f} s")


def shoot(browser: str, url: str, png: Path, profile: Path, height: int = 1000) -> None:
    png.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([browser, *CHROME_FLAGS, f"--user-data-dir={profile}",
                    f"--window-size=1500,{height}", "--virtual-time-budget=20000",
                    f"--screenshot={png}", url],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=180)
    print(f"saved {png.relative_to(ROOT) if png.is_relative_to(ROOT) else png}  <- {url}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "mlflow")
    parser.add_argument("--home", type=Path, default=None,
                        help="Reuse this GPUPLAN_HOME's store instead of filling a new one.")
    args = parser.parse_args()
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        print("mlflow_screenshots: no chromium on PATH (apt-get install chromium); "
              "nothing done", file=sys.stderr)
        return 3
    with tempfile.TemporaryDirectory(prefix="gpuplan-ui-") as tmp:
        home = args.home or Path(tmp) / "home"
        if args.home is None:
            fill(home)
        store = f"sqlite:///{home / 'mlruns' / 'mlflow.db'}"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
        server = subprocess.Popen(
            [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
             store, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_healthy(url, server)
            from mlflow import MlflowClient

            client = MlflowClient(tracking_uri=url)
            plans = client.get_experiment_by_name("gpuplan-plans")
            runs = client.search_runs([plans.experiment_id], max_results=1,
                                      order_by=["attributes.start_time DESC"])
            profile = Path(tmp) / "chrome"
            ml = "?workflowType=machine_learning"  # MLflow 3's "Model training" view
            run = f"{url}/#/experiments/{plans.experiment_id}/runs/{runs[0].info.run_id}"
            pages = [
                ("experiments.png", f"{url}/#/experiments{ml}", 800),
                ("plans-experiment-default.png", f"{url}/#/experiments/"
                                                 f"{plans.experiment_id}", 800),
                ("plans-experiment.png", f"{url}/#/experiments/{plans.experiment_id}{ml}",
                 900),
                ("plan-run.png", f"{run}{ml}", 1400),
                ("training-cost-model.png", f"{url}/#/models/gpuplan-training-cost{ml}", 900),
                ("training-cost-version.png",
                 f"{url}/#/models/gpuplan-training-cost/versions/1{ml}", 900),
            ]
            for name, page, height in pages:
                shoot(browser, page, args.out / name, profile, height)
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
