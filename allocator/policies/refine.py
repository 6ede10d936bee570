"""A fast plan that its proven bound finds wanting is made again: with its evacuations
by a second rule, and with the daily plan's trials.

The hot path is built for milliseconds and usually lands within a point of the optimum;
the plans where it does not are the ones its bound leaves room on, and only those pay for
more runs (BENCHMARKS.md, "Refinement below the bound"). full runs them all
(full.py's `refined_plan`), so it never ends below the plan `gpuplan plan` gives.
"""

from __future__ import annotations

from typing import Any

from allocator.model import Scenario, queued_work

# fast as `gpuplan plan-day` runs it: a plan made once and kept spends a few more runs
# (BENCHMARKS.md, "Pin trials", "Defer trials", "Realtime hops", "Trial passes": each
# chosen on the tuning seeds).
DAY_TRIALS: dict[str, Any] = {"pin_trials": 24, "defer_trials": 48, "hops": 2,
                              "trial_passes": 4}

# Refine a plan below this share of its bound. Chosen on the tuning seeds: two plans in
# five are refined and every hot plan below 97% of the proven optimum is among them (a
# plan below 97% of the optimum is below 97% of any bound). It was 0.98 until the bound
# grew tighter (the services' corridors, the deflected descent), which refined 16 fewer
# of the 360 tuning and replan plans at 0.98; 0.985 refines 150, and lifts every set
# above what the looser bound gave at 0.98 (BENCHMARKS.md).
REFINE_BELOW = 0.985
# Where the trials stay within about half a second a plan: up to 64 GPUs (at 256 they take
# 0.4-0.5 s on the scale scenarios for +0.5-1.0%), queued jobs x steps up to 2,500 (real
# backlogs of 200-411 queued jobs at 24 steps took 0.6-4.4 s, 87 queued 0.35 s), and the
# compiled decoder's horizon (past 63 steps fast runs in Python: 42-57 s of trials at
# 96-168 steps).
REFINE_MAX_GPUS = 64
REFINE_MAX_WORK = 2_500
# The services' exchange as a candidate too: one more hot-path run that lifts a shortage
# the layouts leave on the dearer service (a real 16-GPU replan 689 -> 897, past the work
# cap), but in the rolling replay of the real weeks it cost 3.1% of net value at 14 GPUs
# (se 1.4; realtime shortfall 2.44 -> 3.07%): off, as `--exchange` is (BENCHMARKS.md,
# "Refinement below the bound"). `gpuplan plan --exchange` refines with it.
REFINE_EXCHANGE = False
# One more hot-path run whose block evacuations also land moved runs where they break
# batch blocks least (evac.py's "cost" rule, beside the hot path's "low"), with no work
# cap: on the real replans the refinement's caps keep from the trials, fast's loss is the
# realtime layout (benchmarks/loss_anatomy.py --philly), and this run lifts a 32-GPU one
# by 2.9% (BENCHMARKS.md, "A service's rise on a GPU another let go"). The "cost" rule
# runs in Python: tens of ms.
REFINE_EVAC_RULES: tuple[str, ...] | None = ("low", "cost")


# On a replan (services holding GPUs), one more hot-path run with the opened and fresh
# layouts at any margin (fast's `replan_layouts=True`; the hot path keeps them only where
# they win by fast.REPLAN_MARGIN, since at any margin they lowered realized value in the
# rolling Philly replay). On the replan tuning seeds they lifted the hot path from 98.08%
# to 98.42% of the optimum at any margin (BENCHMARKS.md, "Replans").
REFINE_REPLAN = True
# One more hot-path run whose constructions that leave a service short have its layers laid
# again as paths around their batch work (fast's `reroute`, rtpath.py): replan3 s1433
# 302 -> 460 (full's optimum 460.2), s1624 117 -> 137.
REFINE_REROUTE = True
# One more hot-path run with the flipped drift layouts (fast's `flip`, drift.py): services
# on the aligned blocks first, walking out later in the day.
REFINE_FLIP = True
# On a replan, one more hot-path run with realtime's GPU rank crowded (fast's `crowd`,
# realtime.crowded): services keep and grow where blocks are broken at step 0 already. On
# the replan tuning sets it lifts `gpuplan plan` from 99.278% to 99.319% of the optima
# (min 95.89 -> 96.67%) and 99.637 -> 99.671%. Ten paired rolling replays of the Philly
# weeks had read it as a loss (net value -0.80% and -0.45% at 14 and 16 GPUs); thirty
# pairs at each size read -0.19% (se 0.22) and +0.34% (se 0.34), realtime's shortfall
# 2.36 -> 2.38% and 2.16 -> 2.12% (BENCHMARKS.md, "The crowded refinement run on thirty
# replays"; `benchmarks/philly_replays.py --variants refinenocrowd,refine --gpus 14,16
# --seeds 7-16`).
REFINE_CROWD = True
# One more hot-path run whose block searches follow the gap rule (fast's `gap`,
# blocks.gap_fit): a run goes where it fills a free stretch most tightly, so a block
# frees up for a waiting large job when the runs on it end together. On its own the rule
# is no better than the buddy rule (the tuning sets' hot path 99.206 -> 99.235%, 60 up and
# 45 down), but the two fail on different plans (BENCHMARKS.md, "The gap rule").
REFINE_GAP = True


def deeper(options: dict[str, Any]) -> dict[str, Any] | None:
    """fast's options with the daily plan's trials raised into them, or None when they
    already search as deep (a second run would find the same plan)."""
    raised = dict(options)
    for key, depth in DAY_TRIALS.items():
        raised[key] = max(int(options.get(key, 0) or 0), depth)
    return None if raised == options else raised


def affordable(scenario: Scenario) -> bool:
    """Whether the trials' cost on this scenario stays within the refinement's budget."""
    return compiled(scenario) and queued_work(scenario) <= REFINE_MAX_WORK


def compiled(scenario: Scenario) -> bool:
    """Up to 64 GPUs, where fast's compiled decoder runs: one more hot-path run is cheap."""
    from allocator.policies.decoder import compiled_for

    return scenario.G <= REFINE_MAX_GPUS and compiled_for(scenario, None)


def candidates(scenario: Scenario, options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The runs a wanting plan is refined with, by name: on a replan "replan", one more
    hot-path run with the opened and fresh layouts (REFINE_REPLAN, and every other run
    makes them too); "reroute", where services run, one more hot-path run laying short
    services again as paths (REFINE_REROUTE); on a replan "crowd", one more hot-path run
    with realtime's rank crowded (REFINE_CROWD); "gap", one more hot-path run by the gap
    rule where the hot path made none (REFINE_GAP, fast.HOT_GAP); "flip", one more
    hot-path run with the flipped drift layouts where they can differ and the hot path
    made none (REFINE_FLIP); "evacuations", one more hot-path run with
    REFINE_EVAC_RULES where its light evacuation runs, and "trials", the daily plan's
    trials and hops, where affordable; with REFINE_EXCHANGE, "exchange" before them, one
    more hot-path run where services may hand GPU runs to each other."""
    from allocator.policies.fast import flippable, hot_flips, hot_gap, light_evacuation
    from allocator.policies.fresh import holds_current

    runs: dict[str, dict[str, Any]] = {}
    if not compiled(scenario):
        return runs
    replan = REFINE_REPLAN and options.get("replan_layouts") is None and \
        holds_current(scenario)
    if replan:  # every run below makes them too
        options = {**options, "replan_layouts": True}
        runs["replan"] = options
    if REFINE_REROUTE and scenario.realtime_jobs and options.get("reroute") is None:
        runs["reroute"] = {**options, "reroute": True}  # a run of its own: passed on to
        # the others, it lowered one (tuning3 s1098 -0.6%) and doubled their time
    if REFINE_CROWD and holds_current(scenario) and not options.get("crowd"):
        runs["crowd"] = {**options, "crowd": True}
    # (where the hot path makes its plan by both rules, the gap rule's is in it already)
    if REFINE_GAP and options.get("gap") is None and not hot_gap(scenario):
        runs["gap"] = {**options, "gap": True}
    if REFINE_FLIP and options.get("flip") is None and flippable(scenario) and \
            not hot_flips(scenario):
        runs["flip"] = {**options, "flip": True}
    if REFINE_EXCHANGE and not options.get("exchange"):
        runs["exchange"] = {**options, "exchange": True}
    if REFINE_EVAC_RULES is not None and not options.get("evac_rules") and \
            light_evacuation(scenario, options.get("hot_hops")):  # where the rules matter
        runs["evacuations"] = {**options, "evac_rules": REFINE_EVAC_RULES}
    trials = deeper(options)
    if trials is not None and affordable(scenario):
        runs["trials"] = trials
    return runs


def wanting(objective: float, bound: float | None, below: float) -> bool:
    """Whether a plan's distance from its bound asks for the trials."""
    return below > 0 and bound is not None and bound > 0 and objective < below * bound
