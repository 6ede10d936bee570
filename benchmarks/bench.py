"""The article's benchmark: every policy on the seven scenarios, fast against each baseline.

Latency is the median over repeated in-process calls (the first call warms up), and the
machine is recorded with the results: compare ratios within one run, not across machines.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import platform
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from allocator.core.markdown import table as markdown_table
from allocator.decomposition import quick_bound
from allocator.model import Scenario
from allocator.plan import Plan, make_plan

BASELINES = ("fifo", "priority")


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    plans: dict[str, Plan]
    latency_ms: dict[str, float]  # median per policy
    bound: float | None = None  # the plan's proven upper bound (allocator.decomposition)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}, {platform.system()} {platform.release()}")


def policy_latency(scenario: Scenario, policy: str, repeats: int) -> float:
    """Median of the policy's own time, as recorded in its plans (validation excluded)."""
    samples = [make_plan(scenario, policy).latency_ms for _ in range(repeats + 1)][1:]
    return statistics.median(samples)


def run(scenarios: list[Scenario], repeats: int = 30,
        policies: tuple[str, ...] = ("fast", *BASELINES)) -> list[ScenarioResult]:
    results = []
    for scenario in scenarios:
        plans = {p: make_plan(scenario, p) for p in policies}
        latency = {p: policy_latency(scenario, p, repeats) for p in policies}
        lower = plans["fast"].metrics.objective if "fast" in plans else None
        bound = quick_bound(scenario, lower=lower).value
        results.append(ScenarioResult(scenario, plans, latency, bound))
    return results


def _gain(after: float, before: float) -> float | None:
    return None if before == 0 else 100.0 * (after - before) / abs(before)


def rows(results: list[ScenarioResult], baseline: str) -> list[dict]:
    """One row per scenario: the article's table, fast against `baseline`."""
    out = []
    for r in results:
        b, f = r.plans[baseline].metrics, r.plans["fast"].metrics
        out.append({
            "scenario": r.scenario.name,
            "gpus": r.scenario.G,
            "jobs": len(r.scenario.jobs),
            "baseline": baseline,
            "util_before": round(100 * b.utilization, 1),
            "util_after": round(100 * f.utilization, 1),
            "util_gain_pts": round(100 * (f.utilization - b.utilization), 1),
            "value_before": round(b.value, 1),
            "value_after": round(f.value, 1),
            "value_gain_pct": None if (g := _gain(f.value, b.value)) is None else round(g, 1),
            "completed_before": b.completed,
            "completed_after": f.completed,
            "shortfall_before": b.rt_shortfall,
            "shortfall_after": f.rt_shortfall,
            "objective_before": round(b.objective, 2),
            "objective_after": round(f.objective, 2),
            "fast_ms": round(r.latency_ms["fast"], 3),
            "bound": None if r.bound is None else round(r.bound, 2),
            "fast_vs_bound": (round(f.objective / r.bound, 4)
                              if r.bound and r.bound > 0 and f.objective > 0 else None),
            "baseline_ms": round(r.latency_ms[baseline], 3),
        })
    return out


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.1f}%"


def markdown(table: list[dict], title: str) -> str:
    if not table:
        return f"### {title}\n\n(no rows)\n"
    rows = []
    for r in table:
        gain = "n/a" if r["value_gain_pct"] is None else f"{r['value_gain_pct']:+.1f}%"
        rows.append([r["scenario"], r["gpus"], r["jobs"],
                     f"{r['util_before']} -> {r['util_after']}",
                     f"{r['value_before']:g} -> {r['value_after']:g}", gain,
                     f"{r['completed_before']} -> {r['completed_after']}",
                     f"{r['shortfall_before']} -> {r['shortfall_after']}",
                     f"{r['fast_ms']:.3f}", _pct(r["fast_vs_bound"])])
    return f"### {title}\n\n" + markdown_table(
        ["scenario", "GPUs", "jobs", "utilization %", "value", "value gain", "completed",
         "rt shortfall", "fast ms", "fast / bound"], rows)


def write_csv(path: Path, table: list[dict]) -> None:
    """Rows of dicts as CSV, atomically (nothing when there are no rows)."""
    from allocator.core import atomic

    if not table:
        return
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(table[0]))
    writer.writeheader()
    writer.writerows(table)
    atomic.write_text(path, buf.getvalue())


def write_bench(out_dir: Path, scenarios: list[Scenario], repeats: int, *, full: bool,
                time_limit: float, png: bool,
                status: Callable[[str], contextlib.AbstractContextManager] | None = None) -> str:
    """`gpuplan bench`: the tables (and with `full`, the MILP's), written as one output set
    (bench.md, bench.csv, bench_full.csv, a PNG per scenario); returns the Markdown."""
    from allocator.core import atomic
    from pipelines import outset
    from pipelines.plan_one import picture

    status = status or (lambda _: contextlib.nullcontext())
    with status("planning the benchmark scenarios"):
        results = run(scenarios, repeats=repeats)
    sections = [f"Machine: {machine()}", "", f"Command: `gpuplan bench --repeats {repeats}`",
                ""]
    all_rows = []
    for baseline in BASELINES:
        table = rows(results, baseline)
        all_rows.extend(table)
        sections.append(markdown(table, f"fast vs {baseline}"))
    frows: list[dict] = []
    if full:
        from benchmarks.bench_full import full_markdown, full_rows

        with status("solving the MILP per scenario"):
            frows = full_rows(scenarios, time_limit=time_limit)
        sections.append(full_markdown(frows))
    report = "\n".join(sections)
    with outset.output_set(out_dir, "bench") as stage:  # the tables as one set
        atomic.write_text(stage / "bench.md", report)
        write_csv(stage / "bench.csv", all_rows)
        write_csv(stage / "bench_full.csv", frows)
        if png:
            from allocator.render import render_png

            for r in results:
                pair = [r.plans["fast"].to_dict(), r.plans["fifo"].to_dict()]
                atomic.write_bytes(stage / f"{r.scenario.name}.png",
                                   render_png(pair, **picture(r.scenario)))
    return report
