"""fast's variants in the rolling replay over many suite seeds, paired per seed.

One seed of `gpuplan simulate --suite --seed N --policies fast` moves by about 1% when
fast's plans change at all, so a change is judged on the per-seed differences over many
seeds: summed realized value over the 21 worlds, the net value (that value less
realtime's penalty on its realized shortfall, each service's at its priority: the
objective's two terms, undiscounted), and the worst world's realtime shortfall. Each
variant replays the same worlds in this process, one after another:

    python benchmarks/replay_seeds.py --seeds 20-49
    python benchmarks/replay_seeds.py --seeds 7-9 --variants off,pairs
    python benchmarks/replay_seeds.py --seeds 20-39 --variants nohot,pairs --sizes 10,12,14

`--sizes` gives the worlds other GPU counts (world k of each level gets the k-th, cycling):
the suite's 8, 16 and 32 leave out the sizes where some of fast's steps run (the light
hops run from 10 to 16 GPUs).

Variants: `off` (no pair step), `pairs` (the default), `clear` (`clear_blocks=True`, no
pair step), `both` (pair step and `clear_blocks=True`), `nostack` (the default without
the stacked realtime layout), `trials` (the default with 12 pin trials per plan),
`nolast` (the default without the realtime-last candidate), `mirror` (the default with the
mirrored layout, `fast.MIRROR`, in the tail-first layout's place: at fast's own cost),
`nocheap` (the default without the cheap pin trials past 16 GPUs, `fast.CHEAP_TRIALS`),
`noclimb` (the default without the realtime layout climb up to 16 GPUs, `fast.CLIMB_FROM`),
`static` (realtime's static top-first GPU order, blind to blocks running work breaks:
`realtime.BROKEN_FIRST = False`), `notopup` (no top-up of realtime from the cells a
plan leaves free, `fast.TOP_UP = False`), `nosurplus` (no hand-over of GPUs a service
holds above its demand, `fast.SURPLUS_TRADE = False`), `exchange` (any GPU runs handed
between services, `fast.EXCHANGE = True`; off by default), `relayout` (the second look
at the first layout from 17 to 64 GPUs, `fast.RELAYOUT = True`; off by default), `hot`
(two light rounds of realtime hops on the hot path, `fast.HOT_HOPS = 2`, on by default from
10 to 16 GPUs), `nohot` (none, `fast.HOT_HOPS = 0`), `hot14` (the light hops up to 14
GPUs and no light evacuation: the defaults before they went to 16), `hot14evac` (the hops
up to 14, the evacuation at 15-16 as by default), `nohotevac` (the default without the
light evacuation), `hotevac` (the light evacuation at every size up to
`fast.HOT_EVAC_MAX_GPUS`), `noevac64` (the light evacuation kept to 16 GPUs, as before it
ran up to 64), `trials4` (4 pin trials per plan), `lag2`
(the stacked layout's earlier reach: a layer waits at most 2 steps for a preferred GPU
and moves at the step it frees or not at all, `realtime.STACK_LAG = 2`,
`realtime.HANDOVER_WAIT = 0`), `norefill` (no refill of realtime onto other services' released
current GPUs, `realtime.REFILL = False`), `evac15` (the light evacuation only from 15 GPUs,
`fast.HOT_EVAC_MIN_GPUS = 15`), `ru2` (the runner-up's light rounds at every other step at
8 GPUs too, `fast.RUNNER_UP_EVERY_STEP = 0`), `recut` (one round of re-cuts on the hot
path, `fast.HOT_RECUT_ROUNDS = 1`), `stride1` (the light hops' windows at every step,
`fast.HOT_STRIDE = 1`), `hot3` (three light hop rounds, `fast.HOT_HOPS = 3`), `cheap9` and
`cheap9x4` (one and four cheap pin trials from 9 GPUs, `fast.CHEAP_MIN_GPUS = 9`,
`fast.CHEAP_TRIALS = 4`), `norecut` (none after plan-day's hops,
`fast.RECUT_ROUNDS = 0`: for `real_snapshots.py --day`), `nohandover` (no hand-over
shifts after the window rebuilds, `fast.HANDOVERS = False`), `refine` (each plan refined
below 98% of its bound, as `gpuplan plan` does), `refinex` (the same with the exchange
candidate, `refine.REFINE_EXCHANGE = True`), `refinecrowd` (the same with the crowded
run, `refine.REFINE_CROWD = True`, the default now), `refinenocrowd` (without it),
`refinenohandover` (refined, with no hand-over shifts, `fast.HANDOVERS = False`),
`nowalk` (no walking layout on the hot path, `fast.WALK = False`), `refinenowalk` (the
same, refined),
`noflip` (no flipped drift layouts on the hot path, `fast.FLIP = False`), `flip` (the
default, `fast.FLIP = True`), `flipw0` (the flipped plan given the light rounds only
where it beats the winner before them, `fast.FLIP_WITHIN = 0`), `placebo` (fast's own
plans, except that among candidates of equal objective the later wins, not the earlier:
on the 328 stored tuning scenarios another grid on 53, the same value on 49 of those and
a lower one on 4, so its replays measure what a change that is no better does to the
paired figures once the weeks diverge).
`benchmarks/philly_replays.py` and `benchmarks/real_snapshots.py` judge the same variants
on real data.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import typer

from allocator.policies import evac, pin_trials, realtime, rebuild, refine
from allocator.policies import fast as fastmod

# The modules whose constants a variant may set, by the name it gives them.
MODULES: dict[str, ModuleType] = {"fast": fastmod, "realtime": realtime, "refine": refine,
                                  "evac": evac, "pin_trials": pin_trials, "rebuild": rebuild}


@dataclass(frozen=True)
class Variant:
    """One variant of fast: the policy's keyword arguments and the module constants it
    sets (each restored after the replay), everything else fast's own defaults."""

    constants: tuple[tuple[str, str, object], ...] = ()  # (module, name, value)
    clear: bool = False  # clear_blocks=True
    pin_trials: int | None = None  # None: fast's own (`fast.hot_pin_trials`)
    refine: bool = False  # each plan refined below the bound, as `gpuplan plan` does
    gap: bool | None = None  # fast's `gap` (None: its own, `fast.hot_gap`)

    def policy(self) -> Any:
        """fast as the variant calls it (its constants apart: `applied`)."""
        plan = partial(fastmod.fast, clear_blocks=self.clear, pin_trials=self.pin_trials,
                       gap=self.gap)
        return partial(_refined, plan) if self.refine else plan

    @contextmanager
    def applied(self) -> Iterator[None]:
        saved = [(MODULES[m], name, getattr(MODULES[m], name)) for m, name, _ in self.constants]
        try:
            for m, name, value in self.constants:
                setattr(MODULES[m], name, value)
            yield
        finally:
            for module, name, value in saved:
                setattr(module, name, value)


def _set(*constants: tuple[str, str, object], **options: Any) -> Variant:
    return Variant(constants=constants, **options)


def combined(names: str) -> Variant:
    """The variants named, joined by `+`, as one: every constant each sets (in turn), the
    keyword arguments of any that asks for them."""
    parts = [VARIANTS[name] for name in names.split("+")]
    pins = [v.pin_trials for v in parts if v.pin_trials is not None]
    gaps = [v.gap for v in parts if v.gap is not None]
    return Variant(constants=tuple(c for v in parts for c in v.constants),
                   clear=any(v.clear for v in parts),
                   pin_trials=max(pins) if pins else None,
                   refine=any(v.refine for v in parts), gap=any(gaps) if gaps else None)


def _best_later_on_a_tie(score: Any, plans: list[Any]) -> Any:
    """fast's `_best` with the later plan winning a tie (`placebo`)."""
    return _FAST_BEST(score, plans[::-1])


def _winner_later_on_a_tie(scenario: Any, score: Any, held: Any, candidates: list[Any]) -> int:
    """fast's `_winner` with the later candidate winning a tie (`placebo`)."""
    return len(candidates) - 1 - _FAST_WINNER(scenario, score, held, candidates[::-1])


_FAST_BEST, _FAST_WINNER = fastmod._best, fastmod._winner
NO_PAIRS = ("fast", "PAIRS", False)
VARIANTS: dict[str, Variant] = {
    "off": _set(NO_PAIRS), "pairs": Variant(),
    "clear": _set(NO_PAIRS, clear=True), "both": Variant(clear=True),
    "nostack": _set(("fast", "LAYOUTS", tuple(m for m in fastmod.LAYOUTS
                                             if not m.get("stack")))),
    "trials": Variant(pin_trials=12), "trials4": Variant(pin_trials=4),
    "trials1": Variant(pin_trials=1),
    "nohotpin": _set(("fast", "HOT_PIN_TRIALS", 0)),
    "hotpin": _set(("fast", "HOT_PIN_TRIALS", 1)),
    "hotpinroom": _set(("fast", "HOT_PIN_TRIALS", 1), ("fast", "HOT_TRIAL_HEADROOM", True)),
    "hotdefer": _set(("fast", "HOT_DEFER_TRIALS", 4)),
    "hotdefer2": _set(("fast", "HOT_DEFER_TRIALS", 2)),
    "hotdeferroom": _set(("fast", "HOT_DEFER_TRIALS", 4), ("fast", "HOT_TRIAL_HEADROOM", True)),
    "hotgap": _set(("fast", "HOT_GAP", True)), "gaponly": Variant(gap=True),
    "placebo": _set(("fast", "_best", _best_later_on_a_tie),
                    ("fast", "_winner", _winner_later_on_a_tie)),
    "nolast": _set(("fast", "REALTIME_LAST", False)),
    "mirror": _set(("fast", "LAYOUTS", ({"stack": True, "mirror": True}, {"stack": True}))),
    "nocheap": _set(("fast", "CHEAP_TRIALS", 0)),
    "noclimb": _set(("fast", "CLIMB_FROM", None)),
    "static": _set(("realtime", "BROKEN_FIRST", False)),
    "noreleased": _set(("fast", "RELEASED", False)),
    "noopened": _set(("fast", "OPENED", False)),
    "nofresh": _set(("fast", "FRESH", False)),
    "nodropped": _set(("fast", "DROPPED", False)),
    "coldropped": _set(("fast", "DROPPED_HOT", False)),
    "unaffordable": _set(("realtime", "AFFORDABLE_STACK", False)),
    "pinlead": _set(("pin_trials", "LEAD", True)),
    "earliest": _set(("pin_trials", "SPOT", "earliest")),
    "reroute": _set(("fast", "REROUTE", True)),
    "flip": _set(("fast", "FLIP", True)),
    "noflip": _set(("fast", "FLIP", False)),
    "flipw0": _set(("fast", "FLIP_WITHIN", 0.0)),
    "noreroutelast": _set(("fast", "REROUTE_LAST", False)),
    "refineold": _set(("pin_trials", "LEAD", True), ("pin_trials", "SPOT", "earliest"),
                      refine=True),
    "noreplan": _set(("fast", "OPENED", False), ("fast", "FRESH", False)),
    "noreplanhot": _set(("fast", "REPLAN_LAYOUTS", False)),
    "replanany": _set(("fast", "REPLAN_MARGIN", None)),
    "nodrift": _set(("fast", "DRIFT", False)),
    "drift5": _set(("fast", "DRIFT_MARGIN", 0.05)),
    "evaccost": _set(("evac", "RULES", ("low", "cost"))),
    "notopup": _set(("fast", "TOP_UP", False)),
    "exchange": _set(("fast", "EXCHANGE", True)),
    "nosurplus": _set(("fast", "SURPLUS_TRADE", False)),
    "relayout": _set(("fast", "RELAYOUT", True)),
    "hot": _set(("fast", "HOT_HOPS", 2)), "nohot": _set(("fast", "HOT_HOPS", 0)),
    "hot14": _set(("fast", "HOT_MAX_GPUS", 14), ("fast", "HOT_EVAC_MIN_GPUS", 1 << 30)),
    "hot14evac": _set(("fast", "HOT_MAX_GPUS", 14)),
    "hotevac": _set(("fast", "HOT_EVAC_MIN_GPUS", 0)),
    "nohotevac": _set(("fast", "HOT_EVAC_MIN_GPUS", 1 << 30)),
    "noevac64": _set(("fast", "HOT_EVAC_MAX_GPUS", 16)),
    "lag2": _set(("realtime", "STACK_LAG", 2), ("realtime", "HANDOVER_WAIT", 0)),
    "norunner": _set(("fast", "HOT_RUNNER_UP", False)),
    "norefill": _set(("realtime", "REFILL", False)),
    "ru2": _set(("fast", "RUNNER_UP_EVERY_STEP", 0)),
    "evac15": _set(("fast", "HOT_EVAC_MIN_GPUS", 15)),
    "recut": _set(("fast", "HOT_RECUT_ROUNDS", 1)),
    "stride1": _set(("fast", "HOT_STRIDE", 1)),
    "hot3": _set(("fast", "HOT_HOPS", 3)),
    "cheap9": _set(("fast", "CHEAP_MIN_GPUS", 9)),
    "cheap9x4": _set(("fast", "CHEAP_MIN_GPUS", 9), ("fast", "CHEAP_TRIALS", 4)),
    "norecut": _set(("fast", "RECUT_ROUNDS", 0)),
    "norebuild": _set(("fast", "REBUILDS", False)),
    "nohandover": _set(("fast", "HANDOVERS", False)),
    "nowalk": _set(("fast", "WALK", False)),
    "rebuild12": _set(("fast", "REBUILD_MAX_GPUS", 12)),
    "rebuildall": _set(("rebuild", "OUT_CAP", -1)),
    "refine": Variant(refine=True),
    "refinecrowd": _set(("refine", "REFINE_CROWD", True), refine=True),
    "refinenocrowd": _set(("refine", "REFINE_CROWD", False), refine=True),
    "refinex": _set(("refine", "REFINE_EXCHANGE", True), refine=True),
    "refinenohandover": _set(("fast", "HANDOVERS", False), refine=True),
    "refinenowalk": _set(("fast", "WALK", False), refine=True),
}


def seed_range(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def replay(seed: int, variant: Variant, sizes: tuple[int, ...] | None = None
           ) -> dict[str, tuple[float, float, float]]:
    """world -> (realized value, realtime shortfall %, net value), fast as the variant
    gives it."""
    from pipelines.worlds import suite

    worlds = suite(seed) if sizes is None else suite(seed, sizes=sizes)
    rows = run_fast(worlds, variant)
    return {w: (m["value"], m["rt_shortfall_pct"], m["net_value"]) for w, m in rows}


def run_fast(worlds: list[Any], variant: Variant, config: Any = None
             ) -> list[tuple[str, dict[str, float]]]:
    """(world name, realized metrics) per world, fast replayed in this process as the
    variant gives it (registered for the replay, its defaults restored after), under
    `config` (a `SimConfig`; None: the replay's defaults)."""
    from allocator import policies
    from pipelines.simulate import SimConfig, run_many

    policies.register("fast", variant.policy())
    try:
        with variant.applied():
            rows = run_many(worlds, ["fast"], SimConfig() if config is None else config)
    finally:
        policies.register("fast", fastmod.fast)
    return [(w, m) for w, _, m, _ in rows]


def _refined(plan: Any, scenario: Any, **options: Any) -> Any:
    """`plan`'s grid, or where `gpuplan plan` would refine it (allocator/policies/refine.py, as
    `make_plan(..., bound="auto", refine_below=REFINE_BELOW)` does) the best of it and its
    candidates' grids."""
    from allocator import grid as gridlib
    from allocator.plan import prove_bound

    grid = plan(scenario, **options)
    value = gridlib.objective(scenario, grid)
    proven = prove_bound(scenario, value, "auto") or {}
    if not refine.wanting(value, proven.get("value"), refine.REFINE_BELOW):
        return grid
    for more in refine.candidates(scenario, options).values():
        again = plan(scenario, **more)
        if (got := gridlib.objective(scenario, again)) > value:
            grid, value = again, got
    return grid


def main(seeds: str = typer.Option("20-49", "--seeds", help="e.g. 20-49 or 7,8,9"),
         variants: str = typer.Option("off,pairs,clear,both", "--variants"),
         sizes: str | None = typer.Option(None, "--sizes",
                                          help="the worlds' GPU counts, e.g. 10,12,14 "
                                               "(default: the suite's 8, 16 and 32)")
         ) -> None:
    names = variants.split(",")
    world_sizes = None if sizes is None else tuple(int(g) for g in sizes.split(","))
    base = names[0]
    table: dict[str, dict[int, dict[str, tuple[float, float, float]]]] = {n: {} for n in names}
    print("| seed | " + " | ".join(f"{n} value | {n} worst rt % | {n} net" for n in names)
          + " |")
    print("|---" * (1 + 3 * len(names)) + "|")
    for seed in seed_range(seeds):
        cells = []
        for name in names:
            run = table[name][seed] = replay(seed, VARIANTS[name], world_sizes)
            cells += [f"{sum(v for v, _, _ in run.values()):,.0f}",
                      f"{max(r for _, r, _ in run.values()):.2f}",
                      f"{sum(n for _, _, n in run.values()):,.0f}"]
        print(f"| {seed} | " + " | ".join(cells) + " |", flush=True)
    for name in names[1:]:
        value = _change(table[name], table[base], 0)
        net = _change(table[name], table[base], 2)
        worst = [max(r for _, r, _ in table[name][s].values())
                 - max(r for _, r, _ in table[base][s].values()) for s in table[name]]
        print(f"{name} - {base} over {len(value)} seeds: value {_mean_se(value)}%, "
              f"{sum(v > 0 for v in value)} up, {sum(v < 0 for v in value)} down; "
              f"net value (less realtime's penalty) {_mean_se(net)}% of the base's value; "
              f"worst realtime shortfall {_mean_se(worst)} points")


def _change(runs: dict[int, dict[str, tuple[float, float, float]]],
            base: dict[int, dict[str, tuple[float, float, float]]], k: int) -> list[float]:
    """Per seed, entry `k` summed over the worlds, as a % change over the base's value
    (the net value is set against the value, so its change reads on the same scale)."""
    return [100 * (sum(r[k] for r in runs[s].values()) - sum(r[k] for r in base[s].values()))
            / sum(r[0] for r in base[s].values()) for s in runs]


def _mean_se(xs: list[float]) -> str:
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs):+.2f} (sd {sd:.2f}, se {sd / len(xs) ** 0.5:.2f})"


if __name__ == "__main__":
    typer.run(main)
