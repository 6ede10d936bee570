"""fast's variants in rolling replays of the real Philly weeks, paired per replay.

`benchmarks/replay_seeds.py` judges a variant of fast on seeded suite worlds; this runs the
same variants (its `VARIANTS`) on real data: the Philly jobs of virtual cluster 6c71a0 with
ServeGen demand (`gpuplan simulate --philly`), over every week the bundled trace holds,
each cluster size and each seed of the jobs' priorities. One replay moves by a few tenths
of a percent when fast's plans change at all, so the variant is set against the base
replay by replay, per cluster size:

    python benchmarks/philly_replays.py --variants pairs,relayout --gpus 32,64
    python benchmarks/philly_replays.py --variants pairs,exchange --gpus 16 --seeds 7-11
    python benchmarks/philly_replays.py --variants pairs,pairs@0.3 --gpus 14,16

`NAME@SHARE` replays a variant with the replay's overrun share (`gpuplan simulate
--overrun-share`): a job past its predicted end is planned to run SHARE of its elapsed
time more, not one more step.

Replays are deterministic, so a base replayed once need not be replayed again while fast's
code stays as it was: `--base FILE:NAME` reads the base's replays from the table an
earlier run printed (its NAME columns) and pairs every variant with them:

    python benchmarks/philly_replays.py --variants pairs@0.3 --gpus 14 > base14.md
    python benchmarks/philly_replays.py --variants hotpin@0.3 --gpus 14 \
        --base base14.md:pairs@0.3

A variant's or a base's replays may be spread over several tables (one per seed range, or
per size); `--tables` reads variants' replays from tables too, so runs made apart are
compared as one, with nothing replayed:

    python benchmarks/philly_replays.py --variants hotpin@0.3 --gpus 14,16 --seeds 7-26 \
        --base a.md:pairs@0.3,b.md:pairs@0.3 --tables c.md:hotpin@0.3,d.md:hotpin@0.3

Per size: the summed realized value and net value (realized value less realtime's
penalty on its realized shortfall, as replay_seeds.py reports), the per-replay mean
change with its standard error and how many replays rose and fell, the mean and worst
realtime shortfall (and its paired change per replay, with its standard error: what the
replay decision rules' shortfall clause reads), and the mean of its part not granted
(demand the forecast asked for that the plan, or an overrun on the service's GPUs, did
not give; the rest is the forecast's miss, which no plan changes). About 10-90 s a
replay at 14-16 GPUs on 2 cores, two replays at once (a variant with trials about 3x
that).

A pair of replays is the same week only until the variant first changes a committed start;
after that the two hold different jobs, overrun at other hours, and differ by more than
the variant's own effect. A variant that seldom changes a committed start (the window
rebuilds at 14-16 GPUs: -1.67% and -1.10% net over ten pairs, +0.02% and +0.53% over
thirty) needs many pairs; `benchmarks/real_snapshots.py --against` judges the same plans
one by one.
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.replay_seeds import VARIANTS, Variant, run_fast, seed_range  # noqa: E402

WEEKS = ("2017-10-30", "2017-11-06", "2017-11-13")  # the bundled trace's three Mondays


@dataclass(frozen=True)
class Run:
    """One replay's figures: realized value, net value, realtime shortfall (% of demand)
    and the part of it the forecast had asked for (not granted: the plan, or an overrun on
    the service's GPUs, left it short)."""

    value: float
    net: float
    shortfall: float
    granted: float = 0.0


def replay(week: str, gpus: int, seed: int, variant: Variant, overrun_share: float = 0.0
           ) -> Run:
    """One Philly week on `gpus` GPUs, priorities drawn with `seed`, fast as `variant`, an
    overrun's remaining time planned as `overrun_share` of its elapsed time (SimConfig)."""
    from pipelines.philly import PhillyConfig, philly_world
    from pipelines.simulate import SimConfig

    world = philly_world(PhillyConfig(start=week, gpus=gpus, seed=seed))
    [(_, m)] = run_fast([world], variant, SimConfig(overrun_share=overrun_share))
    return Run(m["value"], m["net_value"], m["rt_shortfall_pct"], m["rt_short_granted_pct"])


COLUMNS = ("value", "net", "rt %", "ng %")  # a variant's columns in the printed table, as Run


def read_table(path: Path, name: str) -> dict[tuple[str, int, int], Run]:
    """The replays of variant `name` in a table this script printed, by (week, GPUs,
    seed). A table from before the not-granted column gives those runs NaN there."""
    rows = [line.strip().strip("|").split("|") for line in
            path.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    if not rows:
        raise ValueError(f"{path}: no table")
    head = [cell.strip() for cell in rows[0]]
    at = [head.index(f"{name} {c}") if f"{name} {c}" in head else None for c in COLUMNS]
    if None in at[:-1]:  # only the not-granted column may be missing (older tables)
        raise ValueError(f"{path}: no columns for {name!r}")
    out = {}
    for number, row in enumerate(rows[1:], start=2):
        cell = [c.strip().replace(",", "") for c in row]
        try:
            out[(cell[0], int(cell[1]), int(cell[2]))] = Run(
                *(float(cell[k]) if k is not None else math.nan for k in at))
        except (IndexError, ValueError):  # e.g. a run cut short mid-line
            raise ValueError(f"{path}: table row {number} is not a replay's figures: "
                             f"{'|'.join(row).strip()!r}") from None
    return out


def compare(runs: list[Run], base: list[Run]) -> str:
    """The variant against the base over paired replays, in one line."""
    value = [100 * (r.value / b.value - 1) for r, b in zip(runs, base, strict=True)]
    net = [100 * (r.net - b.net) / b.value for r, b in zip(runs, base, strict=True)]

    short = [r.shortfall - b.shortfall for r, b in zip(runs, base, strict=True)]

    def mean_se(xs: list[float], unit: str = "%") -> str:
        se = statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else 0.0
        return f"{statistics.fmean(xs):+.2f}{unit} (se {se:.2f})"

    total = sum(r.value for r in runs) / sum(b.value for b in base) - 1
    return (f"value {100 * total:+.2f}% summed, per replay {mean_se(value)}, "
            f"{sum(v > 0 for v in value)} up / {sum(v < 0 for v in value)} down; "
            f"net value {mean_se(net)} of the base's value; realtime shortfall mean "
            f"{statistics.fmean(r.shortfall for r in runs):.2f}% "
            f"(base {statistics.fmean(b.shortfall for b in base):.2f}%; paired change "
            f"{mean_se(short, ' point')}, {sum(d > 0 for d in short)} up / "
            f"{sum(d < 0 for d in short)} down), worst "
            f"{max(r.shortfall for r in runs):.2f}% (base {max(b.shortfall for b in base):.2f}%), "
            f"not granted {_mean_pct([r.granted for r in runs])} "
            f"(base {_mean_pct([b.granted for b in base])})")


def _mean_pct(xs: list[float]) -> str:
    """A mean percentage, or n/a where a table read back lacked the figure."""
    mean = statistics.fmean(xs)
    return "n/a" if math.isnan(mean) else f"{mean:.2f}%"


def variant_named(name: str) -> tuple[Variant, float]:
    """A variant's name, with `@SHARE` the replay's overrun share (`pairs@0.3`)."""
    base, _, share = name.partition("@")
    if base not in VARIANTS:
        raise typer.BadParameter(f"unknown {base!r}; known: {', '.join(VARIANTS)}",
                                 param_hint="--variants")
    try:
        return VARIANTS[base], float(share) if share else 0.0
    except ValueError:
        raise typer.BadParameter(f"{name!r}: the share after @ is a number",
                                 param_hint="--variants") from None


def main(variants: str = typer.Option("pairs,relayout", "--variants",
                                      help="the base first, then the variants "
                                           "(replay_seeds.py's names; NAME@SHARE replays "
                                           "it with that overrun share)"),
         gpus: str = typer.Option("32", "--gpus", help="cluster sizes, e.g. 16,32,64"),
         seeds: str = typer.Option("7-11", "--seeds", help="priority seeds, e.g. 7-11"),
         weeks: str = typer.Option(",".join(WEEKS), "--weeks", help="the weeks' Mondays"),
         base: str = typer.Option("", "--base",
                                  help="FILE:NAME[,FILE:NAME...]: the base's replays read "
                                       "from tables earlier runs printed (same code), not "
                                       "replayed"),
         tables: str = typer.Option("", "--tables",
                                    help="FILE:NAME,...: variants' replays read from tables "
                                         "earlier runs printed, not replayed (to pool "
                                         "runs made apart)")
         ) -> None:
    names = variants.split(",")
    parsed = {n: variant_named(n) for n in names}
    sizes = [int(g) for g in gpus.split(",")]
    cases = [(w, g, s) for g in sizes for w in weeks.split(",") for s in seed_range(seeds)]
    stored = stored_base(base, cases) if base else None
    read = stored_runs(tables, cases, "--tables") if tables else {}
    unknown = sorted(set(read) - set(names))
    if unknown:
        raise typer.BadParameter(f"{unknown[0]!r} is not among --variants",
                                 param_hint="--tables")
    table = {n: read[n] if n in read else [replay(w, g, s, *parsed[n]) for w, g, s in cases]
             for n in names}
    print("| week | GPUs | seed | " + " | ".join(
        f"{n} {c}" for n in names for c in COLUMNS) + " |")
    print("|---" * (3 + len(COLUMNS) * len(names)) + "|")
    for k, (w, g, s) in enumerate(cases):
        cells = [f"{table[n][k].value:,.0f} | {table[n][k].net:,.0f} | "
                 f"{table[n][k].shortfall:.2f} | {table[n][k].granted:.2f}" for n in names]
        print(f"| {w} | {g} | {s} | " + " | ".join(cells) + " |")
    if stored is not None:
        table[base] = stored
    base_name, others = (base, names) if stored is not None else (names[0], names[1:])
    for name in others:
        for g in sizes:
            pick = [k for k, (_, size, _) in enumerate(cases) if size == g]
            print(f"{name} - {base_name}, {g} GPUs, {len(pick)} replays: "
                  + compare([table[name][k] for k in pick], [table[base_name][k] for k in pick]))
        if len(sizes) > 1:  # the sizes pooled, as a decision rule over all pairs reads them
            print(f"{name} - {base_name}, all sizes, {len(cases)} replays: "
                  + compare(table[name], table[base_name]))


def stored_runs(specs: str, cases: list[tuple[str, int, int]], hint: str = "--base"
                ) -> dict[str, list[Run]]:
    """Each named variant's runs for `cases`, from tables earlier runs printed
    (`FILE:NAME`, comma-separated; one variant's replays may be spread over several
    tables, e.g. one per seed range), checked before any replay."""
    found: dict[str, dict[tuple[str, int, int], Run]] = {}
    for spec in specs.split(","):
        path, colon, name = spec.rpartition(":")
        if not colon or not path or not name:
            raise typer.BadParameter(f"{spec!r}: give FILE:NAME, the table and the "
                                     "variant's column name", param_hint=hint)
        try:
            found.setdefault(name, {}).update(read_table(Path(path), name))
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint=hint) from None
    out = {}
    for name, runs in found.items():
        missing = [case for case in cases if case not in runs]
        if missing:
            raise typer.BadParameter(f"{specs} has no {name} replay of {missing[0]} "
                                     f"({len(missing)} missing)", param_hint=hint)
        out[name] = [runs[case] for case in cases]
    return out


def stored_base(base: str, cases: list[tuple[str, int, int]]) -> list[Run]:
    """The base's runs for `cases` from `--base FILE:NAME[,FILE:NAME...]` (one name)."""
    runs = stored_runs(base, cases)
    if len(runs) != 1:
        raise typer.BadParameter(f"{base!r}: one base, under one name in every table",
                                 param_hint="--base")
    return next(iter(runs.values()))


if __name__ == "__main__":
    typer.run(main)
