"""full with one of its search knobs off and on, paired per scenario, one process at a time:
`python benchmarks/full_knob_pairs.py --cases replan2:1275,tuning:1028 --knob MILP_BESIDE`.

Each case runs twice (the order alternating between cases, so drift in the machine's load
falls on both sides), and the table gives each run's status, gap, seconds, cuts and
whether the whole MILP ran beside the cuts. With `--all-of SET`, every case of a seed set
runs with the knob on only, and the cases where the MILP started beside are listed: the
ones worth pairing (elsewhere the knob changes nothing). A diagnosis on tuning seeds; the
test seeds stay out of it (BENCHMARKS.md).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_quality import (  # noqa: E402
    SEED_SETS,
    Case,
    cases_for,
    only_seeds,
    scenario_for,
)

KNOBS = ("MILP_BESIDE",)  # allocator.milp.search's booleans this script flips


def parse_cases(text: str) -> list[tuple[str, Case]]:
    """SET:SEED,... -> (set, case); an unknown set or a seed the set lacks is an error."""
    out = []
    for item in filter(None, text.split(",")):
        set_name, _, seed = item.partition(":")
        if set_name not in SEED_SETS or not seed.isdigit():
            raise typer.BadParameter(f"{item!r}: want SET:SEED with SET one of "
                                     f"{', '.join(SEED_SETS)}", param_hint="--cases")
        [case] = only_seeds(set_name, cases_for(set_name, 16), seed, param_hint="--cases")
        out.append((set_name, case))
    return out


@dataclass(frozen=True)
class Run:
    """One full run's figures."""

    name: str
    on: bool
    seconds: float
    status: str
    gap: float | None
    objective: float
    cuts: int
    beside: bool  # the whole MILP ran beside the cuts

    def row(self) -> str:
        gap = "-" if self.gap is None else f"{100 * self.gap:.2f}%"
        return (f"| {self.name} | {'on' if self.on else 'off'} | {self.status} | {gap} | "
                f"{self.objective:.2f} | {self.seconds:.1f} | {self.cuts} | "
                f"{'yes' if self.beside else 'no'} |")


def run(case: Case, knob: str, on: bool, seconds: float) -> Run:
    """One full run with the knob set."""
    import allocator.milp.search as search
    from allocator.policies.full import full

    scenario = scenario_for(case)
    saved = getattr(search, knob)
    setattr(search, knob, on)
    try:
        began = time.perf_counter()
        report = full(scenario, time_limit=seconds).solve
        spent = time.perf_counter() - began
    finally:
        setattr(search, knob, saved)
    assert report is not None
    return Run(case.name, on, spent, report.status, report.gap, report.objective,
               int(report.phases.get("cuts", 0)), "milp_beside_from" in report.phases)


def main(
    cases: str = typer.Option("", "--cases", help="SET:SEED,... to run off and on"),
    all_of: str = typer.Option("", "--all-of", help="a seed set: every case, knob on only"),
    knob: str = typer.Option("MILP_BESIDE", "--knob", help=" | ".join(KNOBS)),
    seconds: float = typer.Option(30.0, "--time-limit", help="full: seconds each"),
) -> None:
    """Paired runs of full with a knob off and on, or one set's runs with it on."""
    if knob not in KNOBS:
        raise typer.BadParameter(", ".join(KNOBS), param_hint="--knob")
    if bool(cases) == bool(all_of):
        raise typer.BadParameter("give --cases or --all-of (one of them)")
    from benchmarks.bench import machine

    print(f"Machine: {machine()}; load average at start {os.getloadavg()[0]:.2f}\n")
    print("| scenario | knob | status | gap | objective | s | cuts | MILP beside |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    if all_of:
        if all_of not in SEED_SETS:
            raise typer.BadParameter(", ".join(SEED_SETS), param_hint="--all-of")
        started = []
        for case in cases_for(all_of, 16):
            result = run(case, knob, True, seconds)
            print(result.row(), flush=True)
            if result.beside:
                started.append(f"{all_of}:{case.seed}")
        print(f"\nThe MILP started beside on: {','.join(started) or 'none'}")
        return
    for index, (_set_name, case) in enumerate(parse_cases(cases)):
        for on in ((False, True) if index % 2 == 0 else (True, False)):
            print(run(case, knob, on, seconds).row(), flush=True)


if __name__ == "__main__":
    typer.run(main)
