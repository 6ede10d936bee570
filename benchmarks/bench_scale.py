"""How fast's cost grows with the cluster: latency, memory and quality from 8 to 4096 GPUs.

Scenarios come from the benchmark generator at each size (same contention recipe), so
growth is measured on like-for-like queues. Each record carries the machine it ran on,
and `compare` reads two records and reports the latency ratio row by row: a regression
guard that needs no timed test.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from allocator.core.markdown import table
from allocator.decomposition import quick_bound
from allocator.lagrange import lagrangian_bound
from allocator.model import Scenario
from allocator.plan import make_plan
from allocator.scenarios import Spec, build
from benchmarks.bench import machine, write_csv

SIZES: tuple[tuple[int, int], ...] = ((8, 10), (64, 30), (256, 120), (1024, 1000),
                                      (4096, 2000))
HORIZONS: tuple[int, ...] = (24, 48)
POLICIES: tuple[str, ...] = ("fast", "fifo", "priority")


@dataclass(frozen=True)
class ScaleCase:
    gpus: int
    jobs: int
    steps: int

    @property
    def name(self) -> str:
        return f"scale-{self.gpus}g-{self.jobs}j-{self.steps}t"

    @property
    def work(self) -> int:
        """GPUs x jobs x steps: the size the cost should grow no faster than."""
        return self.gpus * self.jobs * self.steps


def scenario_for(case: ScaleCase, seed: int = 7) -> Scenario:
    realtime = max(1, round(math.sqrt(case.gpus) / 2))
    spec = Spec(gpus=case.gpus, jobs=case.jobs + realtime, realtime=realtime, load=1.6,
                running=max(1, case.jobs // 20), horizon=case.steps)
    rng = np.random.default_rng([seed, case.gpus, case.jobs, case.steps])
    return build(case.name, spec, rng)


def _repeats(case: ScaleCase) -> int:
    return 30 if case.work <= 100_000 else 10 if case.work <= 5_000_000 else 3


def measure(case: ScaleCase, bound_seconds: float, bound_max_gpus: int) -> dict:
    scenario = scenario_for(case)
    row: dict = {"case": case.name, "gpus": case.gpus, "jobs": case.jobs, "steps": case.steps,
                 "work": case.work}
    objectives = {}
    for policy in POLICIES:
        plan = make_plan(scenario, policy)  # warm-up, and the validated plan
        objectives[policy] = plan.metrics.objective
        samples = [make_plan(scenario, policy).latency_ms for _ in range(_repeats(case))]
        row[f"{policy}_ms"] = round(statistics.median(samples), 3)
        row[f"{policy}_objective"] = round(plan.metrics.objective, 2)
    quick = lagrangian_bound(scenario, lower=objectives["fast"])
    row["lagrangian"] = round(quick.value, 2)
    row["lagrangian_ms"] = round(1000 * quick.seconds, 1)
    row["fast_vs_lagrangian"] = (round(objectives["fast"] / quick.value, 4)
                                 if quick.value > 0 and objectives["fast"] > 0 else None)
    carried = quick_bound(scenario, lower=objectives["fast"])  # what `gpuplan plan` reports
    row["plan_bound"] = round(carried.value, 2)
    row["plan_bound_ms"] = round(1000 * carried.seconds, 1)
    row["plan_bound_method"] = carried.method
    row["fast_vs_plan_bound"] = (round(objectives["fast"] / carried.value, 4)
                                 if carried.value > 0 and objectives["fast"] > 0 else None)
    tracemalloc.start()
    make_plan(scenario, "fast")
    row["fast_peak_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 2)
    tracemalloc.stop()
    row["bound"] = None
    row["fast_vs_bound"] = None
    if case.gpus <= bound_max_gpus:
        from allocator.milp.bounds import block_capacity

        began = time.perf_counter()
        bound = block_capacity(scenario, time_limit=bound_seconds)
        row["bound_seconds"] = round(time.perf_counter() - began, 1)
        row["bound_status"] = bound.status
        if bound.value is not None and bound.value > 0:
            row["bound"] = round(bound.value, 2)
            row["fast_vs_bound"] = round(objectives["fast"] / bound.value, 4)
    return row


def run(cases: list[ScaleCase], bound_seconds: float = 60.0,
        bound_max_gpus: int = 1024, progress=None) -> dict:
    rows = []
    for case in cases:
        rows.append(measure(case, bound_seconds, bound_max_gpus))
        if progress:
            progress(case)
    return {"recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "rows": rows}


def all_cases(sizes=SIZES, horizons=HORIZONS) -> list[ScaleCase]:
    return [ScaleCase(g, j, t) for t in horizons for g, j in sizes]


def growth_exponent(rows: list[dict], policy: str = "fast") -> float | None:
    """Slope of log(latency) against log(GPUs x jobs x steps): <= 1 means at most linear."""
    points = [(math.log(r["work"]), math.log(r[f"{policy}_ms"])) for r in rows
              if r.get(f"{policy}_ms")]
    if len(points) < 2:
        return None
    x, y = np.array(points).T
    return float(np.polyfit(x, y, 1)[0])


def markdown(record: dict) -> str:
    cells = []
    for r in record["rows"]:
        ratio = "n/a" if r["fast_vs_bound"] is None else f"{100 * r['fast_vs_bound']:.1f}%"
        bound = "n/a" if r["bound"] is None else f"{r['bound']:g}"
        if r["bound"] is not None and r.get("bound_status", "optimal") != "optimal":
            bound += f" ({r['bound_status']} at {r.get('bound_seconds')} s: valid, maybe loose)"
        lag = r.get("fast_vs_lagrangian")
        carried = r.get("fast_vs_plan_bound")
        cells.append([r["gpus"], r["jobs"], r["steps"], f"{r['fast_ms']:.3f}",
                      f"{r['fifo_ms']:.3f}", f"{r['priority_ms']:.3f}", r["fast_peak_mib"],
                      f"{r['fast_objective']:g}",
                      f"{r.get('lagrangian', 'n/a')} ({r.get('lagrangian_ms', '-')})",
                      "n/a" if lag is None else f"{100 * lag:.1f}%",
                      f"{r.get('plan_bound', 'n/a')} ({r.get('plan_bound_ms', '-')})",
                      "n/a" if carried is None else f"{100 * carried:.1f}%", bound, ratio])
    text = (f"Machine: {record['machine']}  \nRecorded: {record['recorded_at']}\n\n" + table(
        ["GPUs", "jobs", "steps", "fast ms", "fifo ms", "priority ms", "fast peak MiB",
         "fast objective", "Lagrangian bound (ms)", "fast / it", "plan's bound (ms)",
         "fast / it", "block bound", "fast / it"],
        cells))
    slope = growth_exponent(record["rows"])
    if slope is not None:
        text += (f"\nGrowth: latency ~ (GPUs x jobs x steps)^{slope:.2f} for fast "
                 "(a least-squares fit in log-log; 1.0 is linear).\n")
    return text


def plot_png(record: dict) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for policy, marker in zip(POLICIES, "osd", strict=True):
        for steps, style in ((24, "-"), (48, "--")):
            pts = sorted((r["work"], r[f"{policy}_ms"]) for r in record["rows"]
                         if r["steps"] == steps)
            if pts:
                x, y = zip(*pts, strict=True)
                ax.loglog(x, y, style, marker=marker, label=f"{policy}, {steps} steps")
    ax.set_xlabel("GPUs x jobs x steps")
    ax.set_ylabel("median latency, ms")
    ax.set_title("gpuplan: planning latency against problem size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def compare(new: dict, old: dict) -> list[dict]:
    """Latency ratio new/old per case and policy (> 1 is slower), for cases in both."""
    previous = {r["case"]: r for r in old["rows"]}
    out = []
    for r in new["rows"]:
        if r["case"] not in previous:
            continue
        p = previous[r["case"]]
        out.append({"case": r["case"], **{
            f"{policy}_ratio": round(r[f"{policy}_ms"] / p[f"{policy}_ms"], 3)
            for policy in POLICIES if p.get(f"{policy}_ms") and r.get(f"{policy}_ms") is not None}})
    return out


def load_record(path: Path) -> dict:
    """A scale record as `gpuplan bench --scale` wrote it; InputError naming what is off."""
    from allocator.core.errors import InputError
    from allocator.core.readers import read_json

    body = read_json(path)
    if not isinstance(body, dict) or not isinstance(body.get("rows"), list):
        raise InputError("a scale record is a JSON object with rows", file=str(path),
                         field="rows")
    body.setdefault("machine", "unknown machine")
    for i, row in enumerate(body["rows"]):
        if not isinstance(row, dict) or not isinstance(row.get("case"), str):
            raise InputError("each row is an object with a case name", file=str(path),
                             field=f"rows[{i}]")
        for policy in POLICIES:
            value = row.get(f"{policy}_ms")
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, int | float)
                                      or not math.isfinite(value) or value < 0):
                raise InputError("must be a finite number >= 0", file=str(path),
                                 job=row["case"], field=f"{policy}_ms")
    return body


def run_and_record(out_dir: Path, record_dir: Path, max_gpus: int, bound_seconds: float,
                   bound_max_gpus: int, progress=None, started=None) -> tuple[str, Path]:
    """`gpuplan bench --scale`: run the cases up to `max_gpus`, keep the record in
    `record_dir`, write scale.md, .csv and .png to `out_dir`; (the Markdown, the record)."""
    from allocator.core import atomic

    cases = [c for c in all_cases() if c.gpus <= max_gpus]
    if started:
        started(len(cases))
    record = run(cases, bound_seconds, bound_max_gpus, progress=progress)
    stamp = record["recorded_at"].replace(":", "").replace("+0000", "Z")
    kept = record_dir / f"{stamp}.json"
    atomic.write_text(kept, atomic.json_text(record, indent=1) + "\n")
    text = markdown(record)
    atomic.write_text(out_dir / "scale.md", text)
    write_csv(out_dir / "scale.csv", record["rows"])
    atomic.write_bytes(out_dir / "scale.png", plot_png(record))
    return text, kept
