"""Replays -> Markdown tables and PNG plots, written atomically beside a resolved config.

Every number in docs/simulate.md comes out of these functions, so the tables there are
the files a rerun of the printed command writes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

from allocator.core import atomic
from allocator.core.markdown import table as markdown  # the tables here and of starvation
from pipelines.simulate import Replay, SimConfig, series

COLUMNS = (
    # metric, header, format
    ("utilization", "util %", lambda v: f"{100 * v:.1f}"),
    ("value", "value", lambda v: f"{v:g}"),
    ("rt_shortfall_pct", "rt short %", lambda v: f"{v:.2f}"),
    ("rt_short_forecast_pct", "of which forecast miss", lambda v: f"{v:.2f}"),
    ("rt_short_granted_pct", "of which not granted", lambda v: f"{v:.2f}"),
    ("completed", "completed", lambda v: f"{v:g}"),
    ("started", "started", lambda v: f"{v:g}"),
    ("churn_pct", "churn %", lambda v: f"{v:.1f}"),
    ("stranded_pct", "idle while queued %", lambda v: f"{v:.1f}"),
    ("plan_ms_mean", "ms/plan", lambda v: f"{v:.1f}"),
    ("violations", "moved/interrupted", lambda v: f"{v:g}"),
)


def policy_table(metrics: Mapping[str, Mapping[str, float]],
                 columns: Sequence[tuple[str, str, Any]] = COLUMNS) -> str:
    """One row per policy; the gains over fifo close the table."""
    rows = [[policy, *(fmt(m[key]) for key, _, fmt in columns)] for policy, m in metrics.items()]
    out = markdown(["policy", *(h for _, h, _ in columns)], rows)
    waits = sorted({k for m in metrics.values() for k in m if k.startswith("wait_p")},
                   key=lambda k: -float(k[6:]))
    if waits:
        rows = [[policy, *(f"{m.get(k, float('nan')):.1f}" for k in waits)]
                for policy, m in metrics.items()]
        out += "\nMean wait (steps from arrival to start; unstarted jobs counted to the end)"
        out += " by priority:\n\n" + markdown(["policy", *(f"p{k[6:]}" for k in waits)], rows)
    sizes = sorted({int(k[8:-3]) for m in metrics.values() for k in m
                    if k.startswith("started_") and k.endswith("gpu")})
    if sizes:
        rows = [[policy, *(f"{m.get(f'started_{k}gpu', 0):g} / {m.get(f'arrived_{k}gpu', 0):g}"
                           f" ({m.get(f'p95wait_{k}gpu', float('nan')):.0f})"
                           for k in sizes)] for policy, m in metrics.items()]
        out += ("\nJobs started / arrived, by size (GPUs), with the 95th-percentile wait in "
                "steps (unstarted jobs counted to the end):\n\n") + markdown(
            ["policy", *(f"{k}" for k in sizes)], rows)
    if any("estimate_1h_pct" in m for m in metrics.values()):
        rows = [[policy, f"{m.get('estimate_1h_pct', float('nan')):.1f}",
                 f"{m.get('estimate_3h_pct', float('nan')):.1f}",
                 f"{m.get('estimate_median_err', float('nan')):g}",
                 f"{m.get('estimate_none_pct', float('nan')):.1f}",
                 f"{m['promises']:g} / {m['promises_later']:g}" if "promises" in m else "-"]
                for policy, m in metrics.items()]
        out += ("\nStart estimates (the first plan that saw a started job against its realized "
                "start) and reservations:\n\n") + markdown(
            ["policy", "within 1 h %", "within 3 h %", "median error (steps)",
             "no estimate %", "reservations made / moved later"], rows)
    if "fifo" in metrics:
        base = metrics["fifo"]
        rows = []
        for policy, m in metrics.items():
            if policy == "fifo":
                continue
            gain = 100 * (m["value"] / base["value"] - 1) if base["value"] else float("nan")
            rows.append([policy, f"{100 * (m['utilization'] - base['utilization']):+.1f}",
                         f"{gain:+.1f}"])
        if rows:
            out += "\nGains over online fifo:\n\n" + markdown(
                ["policy", "utilization (points)", "value (%)"], rows)
    return out


def plot_over_time(replays: Mapping[str, Replay], title: str) -> bytes:
    """Utilization and realtime shortfall per step, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for policy, rec in replays.items():
        s = series(rec)
        top.plot(100 * s["utilization"], label=policy, lw=1.2)
        bottom.step(np.arange(len(s["shortfall"])), s["shortfall"], where="mid", label=policy,
                    lw=1.2)
    top.set_ylabel("utilization %")
    top.set_ylim(0, 102)
    top.legend(loc="lower right")
    top.set_title(title)
    peak = max(float(series(rec)["shortfall"].max()) for rec in replays.values())
    bottom.set_ylim(0, max(1.0, 1.1 * peak))
    bottom.set_ylabel("realtime shortfall (GPUs)")
    bottom.set_xlabel("step (hour)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def plot_sweep(rows: Sequence[Mapping[str, float]], title: str) -> bytes:
    """Realized value, shortfall and churn against the planning horizon, per decay."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for decay in sorted({r["decay"] for r in rows}):
        sub = sorted((r for r in rows if r["decay"] == decay), key=lambda r: r["horizon"])
        h = [r["horizon"] for r in sub]
        for ax, key in zip(axes, ("value", "rt_shortfall_pct", "churn_pct"), strict=True):
            ax.plot(h, [r[key] for r in sub], marker="o", label=f"decay {decay:g}")
            ax.set_xlabel("horizon (steps)")
            ax.set_title(key)
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def resolved(config: Any) -> Any:
    """A config as JSON-able data (paths and nested dataclasses included)."""
    if is_dataclass(config) and not isinstance(config, type):
        return {k: resolved(v) for k, v in asdict(config).items()}
    if isinstance(config, dict):
        return {k: resolved(v) for k, v in config.items()}
    if isinstance(config, list | tuple):
        return [resolved(v) for v in config]
    if isinstance(config, Path):
        return str(config)
    return config


def write_world_report(out: Path, replays: Mapping[str, Replay],
                       metrics: Mapping[str, Mapping[str, float]], config: SimConfig,
                       command: str, world_config: Any = None) -> list[Path]:
    """report.md, utilization_shortfall.png, metrics.json, config.json in `out`."""
    world = next(iter(replays.values())).world
    png = out / "utilization_shortfall.png"
    atomic.write_bytes(png, plot_over_time(replays, f"{world.name}: {world.gpus} GPUs, "
                                                    f"{world.steps} steps"))
    text = (f"# Replay: {world.name}\n\n{world.gpus} GPUs, {world.steps} steps, "
            f"{len(world.jobs)} batch jobs, {len(world.services)} realtime services; "
            f"horizon {config.horizon}, replan every {config.replan_every}, "
            f"margin {config.margin}, lead {config.lead}.\n\n"
            f"Reproduce: `{command}`\n\n" + policy_table(metrics)
            + f"\n![utilization and shortfall]({png.name})\n")
    files = [out / "report.md", png, out / "metrics.json", out / "config.json"]
    atomic.write_text(files[0], text)
    atomic.write_text(files[2], atomic.json_text(metrics, indent=1, sort_keys=True))
    atomic.write_text(files[3], atomic.json_text({"sim": resolved(config),
                                            "world": resolved(world_config),
                                            "command": command}, indent=1))
    return files


def suite_table(results: Mapping[str, Mapping[str, Mapping[str, float]]]) -> tuple[str, dict]:
    """One row per world (fast against both baselines) and the target checks."""
    rows = []
    worst = {"value_vs_fifo": np.inf, "value_vs_priority": np.inf, "shortfall_pct": 0.0,
             "violations": 0.0}
    for world, by in results.items():
        f, fi, pr = by["fast"], by["fifo"], by["priority"]
        rows.append([world, f"{f['value']:g}", f"{fi['value']:g}", f"{pr['value']:g}",
                     f"{100 * f['utilization']:.1f}", f"{100 * fi['utilization']:.1f}",
                     f"{100 * pr['utilization']:.1f}", f"{f['rt_shortfall_pct']:.2f}",
                     f"{fi['rt_shortfall_pct']:.2f}", f"{pr['rt_shortfall_pct']:.2f}",
                     f"{f.get('rt_short_granted_pct', 0.0):.2f}",
                     f"{f['churn_pct']:.1f}",
                     f"{sum(by[p]['violations'] for p in by):g}"])
        worst["value_vs_fifo"] = min(worst["value_vs_fifo"], _ratio(f, fi))
        worst["value_vs_priority"] = min(worst["value_vs_priority"], _ratio(f, pr))
        worst["shortfall_pct"] = max(worst["shortfall_pct"], f["rt_shortfall_pct"])
        worst["violations"] += sum(by[p]["violations"] for p in by)
    table = markdown(["world", "value fast", "fifo", "priority", "util % fast", "fifo",
                      "priority", "rt short % fast", "fifo", "priority",
                      "fast short not granted %", "churn % fast",
                      "moved/interrupted"], rows)
    return table, worst


def _ratio(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    return a["value"] / b["value"] if b["value"] else np.inf


def targets_text(worst: Mapping[str, float], n_worlds: int) -> str:
    checks = [
        ("realized value >= online fifo's in every world",
         worst["value_vs_fifo"] >= 1.0, f"worst fast/fifo = {worst['value_vs_fifo']:.3f}"),
        ("realized value >= online priority's in every world",
         worst["value_vs_priority"] >= 1.0,
         f"worst fast/priority = {worst['value_vs_priority']:.3f}"),
        ("realtime shortfall <= 1% of demanded GPU-hours",
         worst["shortfall_pct"] <= 1.0, f"worst fast shortfall = {worst['shortfall_pct']:.2f}%"),
        ("no running job moved or interrupted (checked on the realized grid)",
         worst["violations"] == 0, f"{worst['violations']:g} problems"),
    ]
    lines = [f"Targets over {n_worlds} worlds:\n"]
    lines += [f"- [{'x' if ok else ' '}] {what}: {how}" for what, ok, how in checks]
    return "\n".join(lines) + "\n"
