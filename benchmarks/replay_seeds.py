"""fast's variants in the rolling replay over many suite seeds, paired per seed.

One seed of `gpuplan simulate --suite --seed N --policies fast` moves by about 1% when
fast's plans change at all, so a change is judged on the per-seed differences over many
seeds: summed realized value over the 21 worlds, and the worst world's realtime
shortfall. Each variant replays the same worlds in this process, one after another:

    python benchmarks/replay_seeds.py --seeds 20-49
    python benchmarks/replay_seeds.py --seeds 7-9 --variants off,pairs
    python benchmarks/replay_seeds.py --seeds 20-39 --variants nohot,pairs --sizes 10,12,14

`--sizes` gives the worlds other GPU counts (world k of each level gets the k-th, cycling):
the suite's 8, 16 and 32 leave out the sizes where some of fast's steps run (the light
hops run from 10 to 14 GPUs).

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
10 to 14 GPUs), `nohot` (none, `fast.HOT_HOPS = 0`), `lag2`
(the stacked layout's earlier reach: a layer waits at most 2 steps for a preferred GPU
and moves at the step it frees or not at all, `realtime.STACK_LAG = 2`,
`realtime.HANDOVER_WAIT = 0`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import partial

import typer


@dataclass(frozen=True)
class Variant:
    """fast's switches for one variant (the defaults are fast's own)."""

    pairs: bool = True
    clear: bool = False
    stack: bool = True
    pin_trials: int = 0
    realtime_last: bool = True
    layouts: tuple[dict[str, bool], ...] | None = None  # None: fast's own LAYOUTS
    cheap_trials: int | None = None  # None: fast's own CHEAP_TRIALS
    climb: bool = True  # False: no layout climb (fast.CLIMB_FROM = None)
    broken_first: bool = True  # False: realtime's static GPU order (realtime.BROKEN_FIRST)
    top_up: bool = True  # False: no realtime top-up from free cells (fast.TOP_UP)
    exchange: bool = False  # True: GPU runs handed between services (fast.EXCHANGE)
    surplus: bool = True  # False: no surplus GPUs handed over (fast.SURPLUS_TRADE)
    relayout: bool = False  # True: the second look at the first layout (fast.RELAYOUT)
    hot_hops: int | None = None  # light rounds of hops on the hot path (None: fast.HOT_HOPS)
    stack_lag: int | None = None  # None: realtime's own STACK_LAG
    handover_wait: int | None = None  # None: realtime's own HANDOVER_WAIT


VARIANTS: dict[str, Variant] = {
    "off": Variant(pairs=False), "pairs": Variant(),
    "clear": Variant(pairs=False, clear=True), "both": Variant(clear=True),
    "nostack": Variant(stack=False), "trials": Variant(pin_trials=12),
    "nolast": Variant(realtime_last=False),
    "mirror": Variant(layouts=({"stack": True, "mirror": True}, {"stack": True})),
    "nocheap": Variant(cheap_trials=0), "noclimb": Variant(climb=False),
    "static": Variant(broken_first=False), "notopup": Variant(top_up=False),
    "exchange": Variant(exchange=True), "nosurplus": Variant(surplus=False),
    "relayout": Variant(relayout=True), "hot": Variant(hot_hops=2), "nohot": Variant(hot_hops=0),
    "lag2": Variant(stack_lag=2, handover_wait=0),
}


def seed_range(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def replay(seed: int, variant: Variant, sizes: tuple[int, ...] | None = None
           ) -> dict[str, tuple[float, float]]:
    """world -> (realized value, realtime shortfall %), fast as the variant gives it."""
    from allocator import policies
    from allocator.policies import fast as fastmod
    from allocator.policies import realtime
    from pipelines.simulate import SimConfig, run_many
    from pipelines.worlds import suite

    saved = (fastmod.PAIRS, fastmod.LAYOUTS, fastmod.REALTIME_LAST, fastmod.CHEAP_TRIALS,
             fastmod.CLIMB_FROM, realtime.BROKEN_FIRST, fastmod.TOP_UP, fastmod.EXCHANGE,
             fastmod.SURPLUS_TRADE, fastmod.RELAYOUT, fastmod.HOT_HOPS, realtime.STACK_LAG,
             realtime.HANDOVER_WAIT)
    fastmod.TOP_UP, fastmod.EXCHANGE = variant.top_up, variant.exchange
    if variant.stack_lag is not None:
        realtime.STACK_LAG = variant.stack_lag
    if variant.handover_wait is not None:
        realtime.HANDOVER_WAIT = variant.handover_wait
    fastmod.SURPLUS_TRADE, fastmod.RELAYOUT = variant.surplus, variant.relayout
    if variant.hot_hops is not None:
        fastmod.HOT_HOPS = variant.hot_hops
    if not variant.climb:
        fastmod.CLIMB_FROM = None
    realtime.BROKEN_FIRST = variant.broken_first
    fastmod.PAIRS = variant.pairs
    if variant.cheap_trials is not None:
        fastmod.CHEAP_TRIALS = variant.cheap_trials
    fastmod.REALTIME_LAST = variant.realtime_last
    if variant.layouts is not None:
        fastmod.LAYOUTS = variant.layouts
    if not variant.stack:
        fastmod.LAYOUTS = tuple(m for m in fastmod.LAYOUTS if not m.get("stack"))
    policies.register("fast", partial(fastmod.fast, clear_blocks=variant.clear,
                                      pin_trials=variant.pin_trials))
    try:
        worlds = suite(seed) if sizes is None else suite(seed, sizes=sizes)
        rows = run_many(worlds, ["fast"], SimConfig())
    finally:
        (fastmod.PAIRS, fastmod.LAYOUTS, fastmod.REALTIME_LAST, fastmod.CHEAP_TRIALS,
         fastmod.CLIMB_FROM, realtime.BROKEN_FIRST, fastmod.TOP_UP, fastmod.EXCHANGE,
         fastmod.SURPLUS_TRADE, fastmod.RELAYOUT, fastmod.HOT_HOPS, realtime.STACK_LAG,
         realtime.HANDOVER_WAIT) = saved
        policies.register("fast", fastmod.fast)
    return {w: (m["value"], m["rt_shortfall_pct"]) for w, _, m, _ in rows}


def main(seeds: str = typer.Option("20-49", "--seeds", help="e.g. 20-49 or 7,8,9"),
         variants: str = typer.Option("off,pairs,clear,both", "--variants"),
         sizes: str | None = typer.Option(None, "--sizes",
                                          help="the worlds' GPU counts, e.g. 10,12,14 "
                                               "(default: the suite's 8, 16 and 32)")
         ) -> None:
    names = variants.split(",")
    world_sizes = None if sizes is None else tuple(int(g) for g in sizes.split(","))
    base = names[0]
    table: dict[str, dict[int, dict[str, tuple[float, float]]]] = {n: {} for n in names}
    print("| seed | " + " | ".join(f"{n} value | {n} worst rt %" for n in names) + " |")
    print("|---" * (1 + 2 * len(names)) + "|")
    for seed in seed_range(seeds):
        cells = []
        for name in names:
            run = table[name][seed] = replay(seed, VARIANTS[name], world_sizes)
            cells += [f"{sum(v for v, _ in run.values()):,.0f}",
                      f"{max(r for _, r in run.values()):.2f}"]
        print(f"| {seed} | " + " | ".join(cells) + " |", flush=True)
    for name in names[1:]:
        value = [100 * (sum(v for v, _ in table[name][s].values())
                        / sum(v for v, _ in table[base][s].values()) - 1) for s in table[name]]
        worst = [max(r for _, r in table[name][s].values())
                 - max(r for _, r in table[base][s].values()) for s in table[name]]
        n = len(value)
        sd = statistics.stdev(value) if n > 1 else 0.0
        sdw = statistics.stdev(worst) if n > 1 else 0.0
        print(f"{name} - {base} over {n} seeds: value {statistics.fmean(value):+.2f}% "
              f"(sd {sd:.2f}, se {sd / n ** 0.5:.2f}, {sum(v > 0 for v in value)} up, "
              f"{sum(v < 0 for v in value)} down); worst realtime shortfall "
              f"{statistics.fmean(worst):+.2f} points (se {sdw / n ** 0.5:.2f})")


if __name__ == "__main__":
    typer.run(main)
