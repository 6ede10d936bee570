"""Where a bound's slack comes from, on tuning seeds of the wider family (minutes).

For each scenario, each bound over full's stored proven optimum (benchmarks/stored):

- the block-capacity MILP (allocator.milp.bounds) as it is, then with its starts made
  continuous, with its swap-limit rows dropped, with every variable continuous but the
  `touched` counts, and as a pure LP: which integrality makes it tight;
- the Lagrangian (allocator.lagrange) and the plan's bound (allocator.decomposition);
- the decomposition's limit: the LP over each step's knapsack network and each job's
  starts (what its descent converges to).

    python benchmarks/bound_anatomy.py --seed 1000 --seed 1003 --seed 1068
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import typer

ROOT = Path(__file__).resolve().parent.parent


def block_variant(scenario, integral: str = "all", swaps: bool = True) -> float | None:
    """The block-capacity relaxation with only some variables integral: "all", "no starts"
    (starts continuous), "touched" (only the blocks-spoilt counts) or "none" (an LP)."""
    import pulp

    from allocator.milp import bounds

    m = bounds.build_block_model(scenario)
    starts = {id(z) for z, _, _ in m.chosen}
    for var in m.prob.variables():
        keep = (integral == "all" or (integral == "no starts" and id(var) not in starts)
                or (integral == "touched" and var.name.startswith("touched")))
        if not keep:
            var.cat = pulp.LpContinuous
    if not swaps:
        for name in [n for n in m.prob.constraints if n.startswith("c4_")]:
            del m.prob.constraints[name]
    got = bounds.solve_block(m, time_limit=60)
    if any(v.cat == pulp.LpInteger for v in m.prob.variables()):
        return got.value
    return pulp.value(m.prob.objective) + m.fixed  # an LP: its optimum is the bound


def decomposition_lp(scenario) -> float:
    """max reward x + step values, x in each job's start simplex, each step's choice a unit
    flow through its knapsack network (whose polytope is integral), linked y = cover(x)."""
    import pulp

    from allocator import decomposition as dec
    from allocator.lagrange import _problem

    p = _problem(scenario)
    tb = dec.tables(p, scenario.G)
    G, T, J = tb.G, tb.T, tb.J
    prob = pulp.LpProblem("decomposition", pulp.LpMaximize)
    terms = []
    x = {}
    for j in range(J):
        here = []
        for s in range(T):
            if np.isfinite(tb.reward[j, s]):
                x[j, s] = pulp.LpVariable(f"x_{j}_{s}", 0, 1)
                here.append(x[j, s])
                terms.append(float(tb.reward[j, s]) * x[j, s])
        if here:
            prob += pulp.lpSum(here) <= 1
    top = 1
    while top * 2 <= G:
        top *= 2
    for t in range(T):
        into: dict[int, list] = {0: []}  # cells used -> arcs in (layer 0: the source)
        taken: dict[int, list] = {}
        layer, k = 0, top
        while k >= 1:
            for j in (j for j in range(J) if tb.gpus[j] == k):
                nxt: dict[int, list] = {}
                for b, arcs in into.items():
                    skip = pulp.LpVariable(f"f_{t}_{layer}_{b}_s", 0)
                    out = [skip]
                    nxt.setdefault(b, []).append(skip)
                    if tb.cover[j, t] and b + k <= G:
                        take = pulp.LpVariable(f"f_{t}_{layer}_{b}_t", 0)
                        out.append(take)
                        nxt.setdefault(b + k, []).append(take)
                        taken.setdefault(j, []).append(take)
                    prob += pulp.lpSum(out) == (1 if layer == 0 else pulp.lpSum(arcs))
                into, layer = nxt, layer + 1
            if k >= 2:
                cap = int(tb.caps[k.bit_length() - 2, t])
                into = {b: a for b, a in into.items() if b <= cap}
            k //= 2
        for b, arcs in into.items():
            inflow = 1 if layer == 0 else pulp.lpSum(arcs)
            if b <= tb.free[t] and np.isfinite(tb.rt_best[t, tb.free[t] - b]):
                sink = pulp.LpVariable(f"sink_{t}_{b}", 0)
                terms.append(float(tb.rt_best[t, tb.free[t] - b]) * sink)
                prob += sink == inflow
            else:
                prob += inflow == 0
        for j in range(J):
            cover = [x[j, s] for s in range(T) if (j, s) in x and s <= t < tb.ends[j, s]]
            prob += pulp.lpSum(taken.get(j, [])) == pulp.lpSum(cover)
    prob += pulp.lpSum(terms)
    prob.solve(pulp.HiGHS(msg=False))
    return float(pulp.value(prob.objective)) + tb.base


def main(seeds: list[int] = typer.Option([1000, 1003], "--seed", help="tuning seeds")) -> None:
    sys.path.insert(0, str(ROOT))
    from allocator import decomposition as dec
    from allocator import grid as gridlib
    from allocator.lagrange import _descend, _problem
    from allocator.policies.fast import fast
    from benchmarks.bench_quality import (
        TEST_SEEDS,
        TUNING2_SEEDS,
        TUNING_SEEDS,
        scenario_for,
        small_cases,
    )

    if any(s in TEST_SEEDS for s in seeds):
        raise typer.BadParameter("tuning seeds only (1000-1089)", param_hint="--seed")
    stored = {}
    for name in ("tuning", "tuning2"):
        stored.update(json.loads((ROOT / "benchmarks" / "stored" / f"full30-{name}.json")
                                 .read_text()))
    head = ["scenario", "block MILP", "continuous starts", "no swap rows",
            "only touched integral", "pure LP", "Lagrangian", "plan's bound",
            "decomposition LP"]
    print("Each bound over full's proven optimum.\n")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for case in small_cases((*TUNING_SEEDS, *TUNING2_SEEDS)):
        if case.seed not in seeds:
            continue
        run = stored.get(case.name) or {}
        if run.get("status") != "optimal":
            print(f"| {case.name} | (no proven optimum stored) |")
            continue
        s, best = scenario_for(case), run["full"]
        obj = gridlib.objective(s, fast(s))
        p = _problem(s)
        lagrangian = _descend(p, obj)[0]
        values = [block_variant(s), block_variant(s, "no starts"),
                  block_variant(s, swaps=False), block_variant(s, "touched"),
                  block_variant(s, "none"), lagrangian, dec.quick_bound(s, obj).value,
                  decomposition_lp(s)]
        cells = ["-" if v is None else f"{100 * (v / best - 1):+.2f}%" for v in values]
        print(f"| {case.name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    typer.run(main)
