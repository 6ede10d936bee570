"""The starvation suite: replay worlds under the guard and without it, check the targets.

Replays the Philly + ServeGen week and the starvation worlds (pipelines/starve.py) under
fast with the guard (age claims + the top job's reservation, pipelines/guard.py), fast
without it, MODEL.md's fifo and priority, and the Slurm-style `backfill` baseline (priority
order, backfill, the same top-job reservation), then checks the targets: every size class
starts, the 8-GPU wait against the 1-GPU wait, value against the unguarded run, value
and realtime shortfall against the baselines, and whether first start estimates hold.
`run_starvation` writes `report.md` and `metrics.json` atomically under --out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from allocator.core import atomic
from allocator.core.errors import InputError
from pipelines.philly import PhillyConfig, philly_world
from pipelines.simulate import SimConfig, check_estimate_horizon, run_tasks
from pipelines.simulate_report import markdown
from pipelines.starve import FAST_MARGIN, exact_durations, starve_names, starve_world
from pipelines.worlds import World

GUARDED_RUNS = ("fast", "fifo", "priority", "backfill")
UNGUARDED = "fast-noguard"


@dataclass(frozen=True)
class StarveArgs:
    """What `gpuplan starvation` reads."""

    worlds: str  # comma-separated: philly and/or starvation worlds
    seed: int
    age: float
    reservations: int
    age_in_plan: bool
    out: Path
    workers: int
    exact: bool = False  # every prediction exact: what duration error costs
    margin: float = FAST_MARGIN  # fast's headroom on the realtime forecast (+ no guard)
    half_nodes: int = 0  # promises held for half-node jobs, besides `reservations`
    baseline_margin: float = SimConfig.margin  # the same for fifo, priority and backfill
    stability: float | None = None  # fast's stability term (allocator/policies/stable.py)
    estimate_horizon: int = SimConfig.estimate_horizon  # long plans for start estimates


def run_starvation(a: StarveArgs) -> Path:
    """Check the options, replay the suite, write report.md and metrics.json; the report."""
    names = [w.strip() for w in a.worlds.split(",") if w.strip()]
    known = ["philly", *starve_names()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise InputError(f"unknown world {bad[0] if bad else ''!r}; choose from "
                         f"{', '.join(known)}", field="--worlds")
    for flag, value in (("--margin", a.margin), ("--baseline-margin", a.baseline_margin)):
        if not 0 <= value <= 10:  # also refuses NaN
            raise InputError(f"{flag} must be in [0, 10], got {value}", field=flag)
    counts = (("--age", a.age, 0), ("--reservations", a.reservations, 0),
              ("--half-node-reservations", a.half_nodes, 0), ("--workers", a.workers, 1))
    for flag, value, low in counts:
        if value < low:
            raise InputError(f"{flag} must be >= {low}, got {value:g}", field=flag)
    check_estimate_horizon(a.estimate_horizon, SimConfig.horizon)
    built = [philly_world(PhillyConfig(seed=a.seed)) if n == "philly"
             else starve_world(n, a.seed) for n in names]
    if a.exact:
        built = [exact_durations(w) for w in built]
    metrics = measure(built, guarded_config(a), a.workers, a.baseline_margin)
    command = (f"gpuplan starvation --worlds {','.join(names)} --seed {a.seed} "
               f"--age {a.age:g} --reservations {a.reservations} "
               f"--half-node-reservations {a.half_nodes} --margin {a.margin:g} "
               f"--baseline-margin {a.baseline_margin:g} "
               f"--stability {'off' if a.stability is None else f'{a.stability:g}'} "
               f"--estimate-horizon {a.estimate_horizon}"
               f"{' --age-in-plan' if a.age_in_plan else ''}"
               f"{' --exact-durations' if a.exact else ''} --out {a.out}")
    atomic.write_text(a.out / "report.md", render(built, metrics, command))
    atomic.write_text(a.out / "metrics.json", json.dumps(metrics, indent=1, sort_keys=True))
    return a.out / "report.md"


def guarded_config(a: StarveArgs) -> SimConfig:
    """The replay settings of fast with the guard (and, guard off, of fast alone)."""
    return SimConfig(guard=True, age=a.age, reserve=a.reservations > 0,
                     reservations=max(a.reservations, 1), age_in_plan=a.age_in_plan,
                     ranges=True, margin=a.margin, half_node_reservations=a.half_nodes,
                     stability=a.stability, estimate_horizon=a.estimate_horizon)


def measure(worlds: list[World], config: SimConfig, workers: int,
            baseline_margin: float | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """world -> policy -> realized metrics; fast also without the guard (`fast-noguard`).

    fast (guarded and not) provisions realtime with `config.margin` on its forecast; the
    baselines with `baseline_margin` (None: the same). The baselines reserve the forecast's
    peak for the whole horizon (MODEL.md), so extra headroom is a different, smaller thing
    for them than for fast, which follows the forecast curve step by step.
    """
    base = config if baseline_margin is None else replace(config, margin=baseline_margin)
    out: dict[str, dict[str, dict[str, float]]] = {w.name: {} for w in worlds}
    labelled = [(p, (w, p, config if p == "fast" else base))
                for w in worlds for p in GUARDED_RUNS]
    labelled += [(UNGUARDED, (w, "fast", replace(config, guard=False))) for w in worlds]
    results = run_tasks([task for _, task in labelled], workers)
    for (label, _), (name, _, m, _) in zip(labelled, results, strict=True):
        out[name][label] = m
    return out


def _sizes(m: dict[str, float]) -> list[int]:
    return sorted(int(k[8:-3]) for k in m if k.startswith("arrived_") and k.endswith("gpu"))


def checks(world: World, m: dict[str, dict[str, float]]) -> list[tuple[str, bool, str]]:
    """The targets for one world, as (target, met, figures)."""
    fast, bare = m["fast"], m[UNGUARDED]
    sizes = [k for k in _sizes(fast) if fast[f"arrived_{k}gpu"] > 0]
    out = []
    fits = world.meta.get("level_load", 2.0) < 1.0
    if fits:
        missing = {k: fast[f"arrived_{k}gpu"] - fast[f"started_{k}gpu"] for k in sizes}
        out.append(("every job starts within the world", not any(missing.values()),
                    ", ".join(f"{k} GPUs: {fast[f'started_{k}gpu']:g}/"
                              f"{fast[f'arrived_{k}gpu']:g}" for k in sizes)))
        if 8 in sizes and 1 in sizes:
            p8, p1 = fast["p95wait_8gpu"], fast["p95wait_1gpu"]
            out.append(("8-GPU p95 wait <= 2 x 1-GPU p95 wait", p8 <= 2 * p1,
                        f"{p8:g} vs {p1:g} steps"))
    else:
        share = fast["started"] / fast["arrived"] if fast["arrived"] else 0.0
        worst = min(sizes, key=lambda k: fast[f"started_{k}gpu"] / fast[f"arrived_{k}gpu"])
        ws = fast[f"started_{worst}gpu"] / fast[f"arrived_{worst}gpu"]
        out.append(("every size class starts >= half the overall share", ws >= share / 2,
                    f"worst {worst} GPUs {100 * ws:.1f}% vs overall {100 * share:.1f}%"))
    loss = 100 * (1 - fast["value"] / bare["value"]) if bare["value"] else 0.0
    out.append(("value loss against no guard <= 3%", loss <= 3.0,
                f"{fast['value']:g} vs {bare['value']:g} ({-loss:+.1f}%)"))
    for base in ("priority", "backfill"):
        b = m[base]
        ok = fast["value"] > b["value"] and fast["rt_shortfall_pct"] <= b["rt_shortfall_pct"]
        out.append((f"value above {base} at no more realtime shortfall", ok,
                    f"value {fast['value']:g} vs {b['value']:g}, shortfall "
                    f"{fast['rt_shortfall_pct']:.2f}% vs {b['rt_shortfall_pct']:.2f}%"))
    est, slurm = fast.get("estimate_1h_pct", 0.0), m["backfill"].get("estimate_1h_pct", 0.0)
    out.append((">= 70% of start estimates within 1 h, >= 2x backfill's share",
                est >= 70 and est >= 2 * slurm, f"{est:.1f}% vs backfill {slurm:.1f}%"))
    return out


def render(worlds: list[World], metrics: dict, command: str) -> str:
    lines = ["# Starvation: do large jobs start?\n", f"Reproduce: `{command}`\n"]
    met = total = 0
    for world in worlds:
        m = metrics[world.name]
        sizes = _sizes(m["fast"])
        lines.append(f"\n## {world.name}\n\n{world.gpus} GPUs, {world.steps} steps, "
                     f"{len(world.jobs)} batch jobs, {len(world.services)} realtime services.\n")
        rows = []
        for policy, r in m.items():
            rows.append([policy, f"{r['value']:g}", f"{100 * r['utilization']:.1f}",
                         f"{r['rt_shortfall_pct']:.2f}",
                         *(f"{r[f'started_{k}gpu']:g}/{r[f'arrived_{k}gpu']:g} "
                           f"({r[f'p95wait_{k}gpu']:.0f})" for k in sizes),
                         f"{r.get('estimate_1h_pct', 0):.1f} / {r.get('estimate_3h_pct', 0):.1f}"
                         f" / {r.get('estimate_median_err', 0):g}",
                         f"{r.get('estimate_range_pct', 0):.1f} / "
                         f"{r.get('estimate_range_width', 0):g}",
                         f"{r['promises']:g}/{r['promises_later']:g}" if "promises" in r
                         else "-"])
        lines.append(markdown(["policy", "value", "util %", "rt short %",
                               *(f"{k} GPUs started (p95 wait)" for k in sizes),
                               "estimate within 1 h % / 3 h % / median error",
                               "in p50..p90 range % / median width",
                               "promises / moved later"], rows))
        lines.append("")
        for target, ok, figures in checks(world, m):
            lines.append(f"- [{'x' if ok else ' '}] {target}: {figures}")
            met += ok
            total += 1
    lines.append(f"\n**{met} of {total} target checks met.**\n")
    return "\n".join(lines) + "\n"
