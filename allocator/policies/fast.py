"""`fast`: the hot-path heuristic. Legal by construction, whole queue and horizon in view.

1. Running jobs are pinned.
2. Realtime demand is placed as a curve, not a peak (allocator/policies/realtime.py):
   the fewest GPUs that meet demand while changing by at most `swap_limit` per step,
   rising ahead of a peak, on the GPUs batch work can use least: first those whose
   aligned blocks running jobs keep broken for most of the horizon, then the top ones.
   A service's layers keep off other services' current GPUs all day (the owner decides
   at step 0 what it keeps); once every layer is placed, a service that left it short
   of its curve takes GPUs free for a whole run, released current GPUs included
   (`RealtimePlacer.refill`), before the batch work can fill them. Where the first
   layout still leaves realtime short and a service lets current GPUs go at step 0, that
   layout is made once more with those GPUs anyone's from step 0 (`RELEASED`): the refill
   cannot pay for a rise split across two GPUs, the layers can place it whole.
   Where a service holds more current GPUs than its curve keeps at step 0, the first,
   climbed and realtime-last layouts are made once more with the ones it drops there
   anyone's from step 0 (`DROPPED`): a service sitting in a block the queue needs can
   then move onto a GPU its neighbour let go.
   On a replan (services holding current GPUs) two more first layouts (`replan_layouts`;
   on the hot path kept only where they win by `REPLAN_MARGIN`): one with each
   service's current GPUs, as many as its swap limit lets go at step 0, anyone's from
   step 0 (`OPENED`), and the first layout of the same day without current GPUs, each
   service walking onto it from the GPUs it holds within its swap limit (`FRESH`,
   allocator/policies/fresh.py): every other layout keeps a service on the scattered
   GPUs yesterday left it, and the blocks they break stay broken. A third, the drift
   layout (`DRIFT`, allocator/policies/drift.py), lays services out step by step: each
   rise on the GPUs realtime's rank prefers, each fall off those it likes least, spare
   swap budget moving a service off an aligned block, so a service on the block a large
   job needs walks off it as its demand rises and falls; on the hot path its plan wins
   at no margin (`DRIFT_MARGIN`). Where one of them wins,
   step 9's light rounds (and on the hot path the final reroute) run on the best other
   candidate too.
3. Batch-like jobs are placed greedily under several value orders, each job at its
   earliest feasible start on the aligned block that best fits the hole it lands in
   (the block whose buddy is already busy). Occupancy only grows, so no later placement
   opens an earlier start for a job already placed: one pass per order is final. A
   bounded order search then moves delayed jobs ahead, and a pair step sends two jobs
   to the back of the order at once, or brings a delayed job and another to its front
   (moves no single insertion makes).
   The same is tried with two other realtime layouts: tail-first (an interval that
   would break a block everywhere waits for a GPU no block misses), and stacked (every
   layer on the top GPUs, a service moving off its current GPU once one of them frees):
   breaking blocks least one layer at a time can spread a service over several blocks.
   With `mirror=True`, also stacked at the bottom of the cluster (off by default).
   Where running work moved the preference off the plain top-first order, the stacked
   layout on that order is a candidate too (`STATIC_STACK`).
   Up to 16 GPUs the stacked layout is climbed first: one realtime run at a time moves to
   another free GPU while a greedy pass of the batch work earns more
   (allocator/policies/layout_climb.py); full's plans show the layout, not the batch
   order, is where fast loses most (benchmarks/loss_anatomy.py). Where the stacked
   layout equals an earlier one, that one is placed unclimbed as well.
4. The same is tried with realtime's later layers (its rises and peaks) placed after the
   batch work, into the gaps it leaves, the batch placement keeping that many GPUs per
   step spare; long batch runs then need not dodge peaks placed before them. And once
   with every layer placed after the batch work (realtime last): a service may then sit
   on the low GPUs while long small jobs take the top, then move up when a large job
   needs the low block, which no layout made before the batch work reaches.
5. Every candidate is topped up before it is scored (allocator/policies/topup.py): a
   service still short of demand takes single-GPU runs from the cells the finished plan
   leaves free, within its swap limit. Layouts keep a service off GPUs another service
   is about to release; once the plan is done, those cells are free to take. Up to 64
   GPUs it then takes runs of GPUs another service holds above its demand (the giver
   loses nothing the plan promised it), and free cells once more.
6. The best grid by objective wins, the baselines' grids among the candidates, so fast
   is never below fifo or priority on the same scenario. From 17 to 64 GPUs, after
   step 8's cheap trial, the first layout is made twice more with the winner in view
   (`relaid`): its ties broken towards the blocks the winner's small and running jobs
   break, and bottom-first; either replaces the winner only if it is worth more. Only
   with `relayout=True` (`RELAYOUT`, off: it lowered realized value in the Philly replay).
   With reservations, candidates that break a swap limit are dropped first; if none is
   left (services could not pay their way off a reserved block), steps 1-5 run again
   with services holding their GPUs there while their curves fall
   (`RealtimePlacer(hold_through_off=True)`). With
   `exchange=True` (off by default: it lowers realized value in the rolling replay),
   each candidate's services first hand GPU runs to each other where the objective
   rises, within both swap limits (`topup.exchange`): every layout keeps a service on its
   current GPUs, so the service left short is not always the cheapest one to leave short.
7. Only with `anchors` (a rolling replan's previous starts): a stable candidate keeping
   them, chosen unless the best grid beats it by more than `stability`
   (allocator/policies/stable.py).
8. With `pin_trials=N`: up to N replans, each with one delayed job pinned to an
   earlier aligned block as a reservation (allocator/policies/pin_trials.py): better
   one-shot plans at a fast run's cost each, no net gain in the rolling replay
   (`HOT_PIN_TRIALS`, off; nor when kept only where every service keeps its GPUs,
   `HOT_TRIAL_HEADROOM`). Past 16 GPUs the hot path makes
   `CHEAP_TRIALS` cheap ones instead: the pin, replanned with only the
   construction (steps 2-4) that built the winning grid. Then, only with
   `defer_trials=N` (`HOT_DEFER_TRIALS` from 9 to 16 GPUs, off): up to N replans, each
   with one started job's earliest start a step past the start the plan gave it: every
   job starts at its earliest feasible start here, and the optimum often holds one back
   (same module). With `trial_passes=N`,
   both kinds of trials (and step 9's hops, when asked for) run again from the plan
   they found, up to N passes in all, until a pass lifts nothing: a deferral or a hop
   opens room for pins the first pass could not make.
9. Only with `hops=N`: up to N rounds of realtime hops on the best grid's layout
   (allocator/policies/hops.py): a block of realtime GPUs moved to another free block
   for a window that opens at step 0 or closes at the horizon's end, handing over one
   GPU at a time, kept while the best greedy pass of the batch work over the value
   orders earns more; after each round the batch work is placed again (order search
   included) and the plan kept if it is worth more.
   Every layout holds a service's GPUs for whole runs, and the optimum often moves a
   service off the block a large job needs later. On the plan of steps 1-7 and on every
   other construction's plan of steps 1-4 (`HOP_OTHERS`: candidates beside the trials'
   plan), and on what each pass of step 8's trials found (the first starts from the plan
   without hops), so hops never lower what the trials alone give. Up to 16 GPUs and 63
   steps; on in `gpuplan plan-day`. After the hop rounds, block evacuations
   (allocator/policies/evac.py), from the best plan's layout: every realtime run of an
   aligned 4- or 8-GPU block moved off it from a step on (or up to one), which needs
   several services or runs to leave together and so no single hop makes; judged the
   same way. From 17 to 64 GPUs (`EVAC_MAX_GPUS`) the evacuations run without the hops.
   Without `hops` or trials, from 10 to 16 GPUs, a light version (`hot_hops`, default
   `HOT_HOPS` = 2 rounds): each round judged by one greedy pass, windows every other
   step, and from 8 GPUs one evacuation round after them; with anchors, before the
   stable candidate is judged. From 8 to 16 GPUs the light rounds also run on the
   best-scoring candidate that leaves realtime less short than the winner
   (`HOT_RUNNER_UP`; windows every step at 8 GPUs). Its plan is a candidate beside the
   trials' and hops' too. Last, with `hops` and up to 64 GPUs, `RECUT_ROUNDS` rounds of
   re-cuts (allocator/policies/recut.py): two overlapping runs of one service trade
   their ends (or starts) across their two GPUs, which costs no swap, so a service whose
   rise ends lets go of the GPU the batch work wants (a hop would pay a swap at each
   edge); each judged by the batch work placed again.
   On the hot path from 10 to 16 GPUs the flipped drift layouts (`FLIP`, drift.py's
   `until`), and from 9 to 16 the walking layout (`WALK`, `RealtimePlacer.walking`:
   each service's runs cut first in, first out, so a fall lets go of the GPU held
   longest and a service that dips and rises walks across the cluster, at the same swaps
   as the nested layers), each group's best plan given the light rounds where it comes
   within `FLIP_WITHIN` of the winner's and kept where it ends above the light plan.
10. Only with `clear_blocks=True` (it lowers realized value in the rolling replay; see
   BENCHMARKS.md): up to 16 GPUs, a few trials clear an earlier aligned block for a delayed job: the
   services in it migrate to free GPUs within their swap limits, the job is pinned
   there and the rest of the batch work is placed again (allocator/policies/rtmove.py);
   a trial is kept only if the objective rises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from allocator import grid as gridlib
from allocator import reservations
from allocator.core.errors import InputError
from allocator.model import BatchJob, RealtimeJob, Scenario, largest_queued
from allocator.policies import (
    baselines,
    drift,
    evac,
    fresh,
    handover,
    layout_climb,
    rebuild,
    recut,
    rtmove,
    rtpath,
    topup,
)
from allocator.policies import hops as hopping
from allocator.policies import pin_trials as trials
from allocator.policies.decoder import (
    Decoder,
    Jobs,
    Orders,
    _CDecoder,
    best_searched,
    compiled_for,
    order_rows,
    write_spots,
)
from allocator.policies.realtime import RealtimePlacer, released_at_zero
from allocator.policies.stable import STABILITY, Anchors, keep_starts
from allocator.policies.topup import swaps_hold as swaps_hold  # re-exported: the policy's check

OrderKey = Callable[[BatchJob, int], tuple[float, ...]]

# Value orders tried for batch jobs; each is cheap, and different contention shapes favour
# different ones (big-first packs, short-first backfills, arrival order respects fairness,
# long-first keeps the longest runs away from the horizon's end).
ORDERS: tuple[OrderKey, ...] = (
    lambda j, i: (-j.priority, -j.gpus * j.duration_steps, j.arrival_step, i),
    lambda j, i: (-j.priority, j.arrival_step, j.duration_steps, i),
    lambda j, i: (-j.priority * j.gpus * j.duration_steps, i),
    lambda j, i: (-j.priority, -j.gpus, j.duration_steps, i),
    lambda j, i: (j.arrival_step, -j.priority, i),
    lambda j, i: (-j.priority, -j.duration_steps, i),  # the horizon cuts long jobs the most
)


# What the order search may spend, in job placements: 3,000 up to 16 GPUs (chosen on the
# tuning seeds of benchmarks/bench_quality.py; compiled, a placement costs about a
# microsecond there), then less as a placement's cost grows with the GPUs it scans
# (BENCHMARKS.md). `gpuplan plan --search N` overrides.
SEARCH_PLACEMENTS = 3000
# The realtime layouts tried beside the first (breaking batch blocks least, one layer at
# a time): realtime kept off whole blocks where it can wait (tail_first), and realtime
# stacked on the top GPUs, moving off a service's current GPU once one frees (stack).
LAYOUTS: tuple[dict[str, bool], ...] = ({"tail_first": True}, {"stack": True})
# With `mirror=True`, one more: stacked at the bottom of the cluster. On the tuning seeds it
# lifts one-shot plans (BENCHMARKS.md) but, in tail-first's place by default, it lowered
# realized value in the rolling replay by 0.43% over 30 seeds.
MIRROR: dict[str, bool] = {"stack": True, "mirror": True}
# Where running work keeps some aligned blocks broken, realtime prefers their GPUs
# (realtime.preference); the stacked layout on the static top-first order stays a
# candidate then: on 193 snapshots of the Philly tuning weeks the new order alone lowered
# 15 (worst -40%), with this candidate beside it 7 (worst -5.7%), and lifted 73 either way
# (BENCHMARKS.md, "Real replans").
STATIC_STACK: dict[str, bool] = {"stack": True, "static_rank": True}
# Past 16 GPUs, without `pin_trials`, this many cheap pin trials (step 8 replans with only
# the winning candidate's construction and the plan's own set-up, `Prepared`: about a
# fifth of fast's instructions each at 64 GPUs, 6.1 of 29.7 M; a third before): on
# the 64-GPU tuning seeds one lifted fast by 0.45% on average (+3.3% on one), a second
# added 0.12% for as much time again, past the 5 ms budget (BENCHMARKS.md; still past it
# by instructions at 4.6 ms a plan, quiet: 29.7 + 6.1 M). Up to 16 GPUs
# the pins mostly pay through another construction winning, which a cheap trial misses.
CHEAP_TRIALS = 1
CHEAP_MIN_GPUS = 17
# From 17 to 64 GPUs, the first layout (realtime breaking batch blocks least) is laid out
# twice more once the plan is chosen (`relaid`): its ties broken towards the blocks the
# plan's small batch jobs and running jobs break (`consolidated`), and bottom-first. At
# this scale full's plans pack services onto blocks small jobs break anyway (64-GPU tuning
# seed 1011: fast's batch placement on full's realtime layout is within 0.1% of the
# optimum, fast 3.9% below it). On the first 16 64-GPU tuning seeds fast rose from 98.23%
# to 98.76% of full's best plan (each of the two alone: 98.54% and 98.49%), on the 60
# tuning2 seeds at 64 GPUs by 0.21% on average (17 up, none down), for 27% more of fast's
# instructions at 64 GPUs / 30 jobs (callgrind: 46.1 -> 58.7 M a call). A second round
# on the new winner found nothing; half the order search for the two kept +0.18% of the
# 0.21 on tuning2, a quarter +0.14%. Past 64 GPUs it cost a quarter more of fast's time
# for +0.07% (256 GPUs), so it stops there; up to 16 GPUs the plans stay as they are
# (BENCHMARKS.md). Off by default all the same (`gpuplan plan --relayout`, `fast(...,
# relayout=True)`): in the rolling replay of the real Philly week (32 GPUs,
# docs/simulate.md) it lowered fast's realized value by 5.1% (12,882 -> 12,227) and
# started 28 of the 157 8-GPU jobs instead of 41, though the seeded suite's replays rose
# 0.2-1.0% (seeds 7-9) and benchmarks/replay_seeds.py's seeds 20-39 did not move.
RELAYOUT = False
RELAYOUT_MIN_GPUS = 17
RELAYOUT_MAX_GPUS = 64
# Up to 16 GPUs, the stacked layout (or the layout it equals) is climbed before its batch
# placement (allocator/policies/layout_climb.py), in at most CLIMB_PASSES greedy passes: on
# the tuning seeds +0.13% (tuning) and +0.40% (tuning2) against the proven optima, 100
# passes doing as well as 200 or 1000. At 64 GPUs it found nothing in 3,000 passes.
# None: no climb (benchmarks/replay_seeds.py's `noclimb`). Where the stacked layout equals
# an earlier one, that one is placed unclimbed too (on 88 of the 330 tuning plans; 7 of them
# rose, 1 fell, the Philly replays at 10-16 GPUs did not move). Climbing the first and
# tail-first layouts as well lifted 13 tuning plans and lowered 1 (+0.02% mean) and 9 of 40
# replays (3 lowered), for 15% more time at 8 GPUs and nothing in `gpuplan plan`: not kept.
CLIMB_FROM: dict[str, bool] | None = {"stack": True}
CLIMB_PASSES = 100
CLIMB_MAX_GPUS = 16

# Every candidate's realtime is topped up from the cells its plan leaves free
# (allocator/policies/topup.py); False: not (benchmarks compare the two).
TOP_UP = True
# And from GPUs other services hold above their demand (topup.exchange with
# surplus_only): the giver loses nothing the plan promised it. On the rolling replays it
# changed nothing beyond noise; on crowded Philly replans it lifts fast by up to 3.5x.
SURPLUS_TRADE = True
# Up to this many GPUs: the trade runs Python loops per service pair and GPU, and at 256
# and 1024 GPUs it cost 1.7x and 5x fast's time for no gain on the scale cases.
SURPLUS_MAX_GPUS = 64
# `exchange=True`: each candidate's services hand GPU runs to each other where the
# objective rises (topup.exchange), before the winner is chosen. Off by default: better
# one-shot plans, but in the rolling replay the runs it hands over are the tops of
# forecast peaks, and realized value and shortfall got worse (BENCHMARKS.md).
EXCHANGE = False

# The share of `search` each of step 8's trials' order search gets.
CLEAR_SHARE = 4
# Step 4's realtime-last candidate (benchmarks/replay_seeds.py switches it off).
REALTIME_LAST = True
# Its order search gets a quarter of `search` and no pair step: on the tuning seeds the
# whole budget found no better plans, at a fifth more of fast's time on 8 GPUs.
LAST_SHARE = 4


@dataclass(frozen=True)
class Prepared:
    """What fast lays out once per scenario, for the pin trials' replans to reuse: a
    trial's scenario is the same jobs with one more reservation, which changes neither the
    scores, the job arrays nor the value orders (less the reserved jobs), and the
    realtime layers only where `RealtimePlacer.rebased` finds a curve could change. At
    64 GPUs laying these out again was half of a cheap trial's Python."""

    scenario: Scenario
    score: gridlib.Scorer
    jobs: Jobs
    orders: tuple[tuple[int, ...], ...]
    placer: RealtimePlacer

    def serves(self, other: Scenario) -> bool:
        """`other` differs from this scenario at most in its reservations."""
        mine = self.scenario
        return (other.jobs is mine.jobs or other.jobs == mine.jobs) and \
            other.cluster == mine.cluster and other.weights == mine.weights

    def orders_without(self, reserved: frozenset[int]) -> tuple[tuple[int, ...], ...]:
        """`value_orders` with the jobs `reserved` taken out (the keys order the rest
        alike)."""
        orders = self.orders
        for job in reserved:  # a trial reserves one job or a few: tuple slices, no rescan
            orders = Orders(o[:o.index(job)] + o[o.index(job) + 1:] if job in o else o
                            for o in orders)
        return orders


def fast(scenario: Scenario, *, search: int | None = None, clear_blocks: bool = False,
         anchors: Anchors | None = None,
         stability: float = STABILITY, pin_trials: int | None = None, mirror: bool = False,
         only: str | None = None, cheap_trials: int | None = None,
         exchange: bool | None = None, defer_trials: int | None = None, hops: int = 0,
         hot_hops: int | None = None, relayout: bool | None = None,
         prepared: Prepared | None = None, trial_passes: int = 1,
         evac_rules: tuple[str, ...] | None = None,
         replan_layouts: bool | None = None, reroute: bool | None = None,
         flip: bool | None = None, crowd: bool = False,
         mirror_floor: bool = True, rebuilds: bool | None = None,
         walk: bool | None = None, gap: bool | None = None) -> np.ndarray:
    """The heuristic's grid; `search` bounds the order search in job placements (0: none).

    The bound is a count, not a time, so the same input always gives the same grid.
    `clear_blocks` adds step 10: better one-shot plans up to 16 GPUs, but worse realized
    value in the rolling replay (BENCHMARKS.md), so it is off by default.
    `anchors`: job id -> (start, first GPU) the previous plan gave it (stable.py).
    `pin_trials`: step 8's replans (0: none; None: `HOT_PIN_TRIALS` from
    `HOT_PIN_MIN_GPUS` to `HOT_PIN_MAX_GPUS`, else none; off by default).
    `mirror`: one more realtime layout in step 3, stacked at the bottom of the cluster
    (`MIRROR`); better one-shot plans, worse realized value in the rolling replay
    (BENCHMARKS.md), so off by default.
    `cheap_trials`: step 8's cheap replans (None: `CHEAP_TRIALS` past 16 GPUs, else 0);
    `only`: build only that construction's candidates (a cheap trial's replan).
    `exchange`: services hand GPU runs to each other in step 6 (None: `EXCHANGE`);
    better one-shot plans, worse realized value in the rolling replay (BENCHMARKS.md).
    `defer_trials`: step 8's replans with a started job held back a step (0: none;
    None: `HOT_DEFER_TRIALS` from `HOT_PIN_MIN_GPUS` to `HOT_PIN_MAX_GPUS`, else none).
    `trial_passes`: step 8's passes of both trials (each from the best plan so far).
    `hops`: step 9's rounds of realtime hops (0: none).
    `hot_hops`: without `hops` and trials, step 9's light rounds (None: `HOT_HOPS`; 0 also
    turns off the light evacuation).
    `relayout`: step 6's second look at the first layout from 17 to 64 GPUs (None:
    `RELAYOUT`); better one-shot plans, worse realized value in the Philly replay.
    `prepared`: the laid-out parts of a scenario this one differs from only in its
    reservations (a pin trial's replan); the same grid as without, in less time.
    `evac_rules`: where step 9's evacuations land moved runs (None: evac.RULES, "low").
    `replan_layouts`: step 2's opened, fresh and drift layouts on a replan (None:
    `REPLAN_LAYOUTS`, kept only where they win by `REPLAN_MARGIN`, the drift layout by
    `DRIFT_MARGIN`; True: at any margin, as
    `gpuplan plan` refines a wanting replan).
    `reroute`: step 2's constructions that leave a service short made once more with its
    layers laid again as paths around their batch work (rtpath.py; None: `REROUTE`), and
    the plan itself last (alone: `REROUTE_LAST`).
    `flip`: the flipped drift layouts (drift.py), one per step of `FLIP_STEPS`, their best
    plan judged beside the plan after step 9's light rounds (None: `hot_flips`).
    `crowd`: on a replan, realtime's GPU rank led by the blocks services' current GPUs
    crowd (realtime.crowded; a refinement run with `refine.REFINE_CROWD`).
    `mirror_floor`: with `mirror`, the plan made without it is made too and kept where it
    is worth more (the later steps are local searches: a higher candidate can end lower),
    so the mirror never lowers the plan; False in step 8's replans, which their trials judge.
    `rebuilds`: the window rebuilds last (rebuild.py; None: with REBUILDS, from REBUILD_MIN_GPUS
    to REBUILD_MAX_GPUS, without anchors), then with HANDOVERS the services' moves shifted
    (handover.py); False in step 8's replans, whose winner gets them.
    `walk`: the walking layout, its plan judged beside the plan after step 9's light
    rounds as the flipped ones are (None: `hot_walk`).
    `gap`: every batch placement's best fit by the gap rule (Jobs.gap), not the buddy
    rule alone: a second hot-path run `gpuplan plan` refines a wanting plan with. None:
    with `HOT_GAP` from `HOT_GAP_MIN_GPUS` to `HOT_GAP_MAX_GPUS`, the plan made both ways
    and the better kept (the buddy rule's on a tie); else the buddy rule alone.
    """
    by_both = gap is None and only is None and hot_gap(scenario)
    # the caller's options, for a plan made twice (by both rules, or mirrored and not)
    caller: dict[str, Any] = {}
    if by_both or (mirror and mirror_floor and only is None):
        caller = dict(
            search=search, clear_blocks=clear_blocks, anchors=anchors, stability=stability,
            pin_trials=pin_trials, cheap_trials=cheap_trials, exchange=exchange,
            defer_trials=defer_trials, hops=hops, hot_hops=hot_hops, relayout=relayout,
            prepared=prepared, trial_passes=trial_passes, evac_rules=evac_rules,
            replan_layouts=replan_layouts, reroute=reroute, flip=flip, crowd=crowd,
            rebuilds=rebuilds, walk=walk)
    if by_both:
        both = [fast(scenario, **caller, mirror=mirror, mirror_floor=mirror_floor, gap=rule)
                for rule in (False, True)]
        return _best(gridlib.Scorer(scenario), both)
    if gap is None:
        gap = False
    if search is None:
        search = default_search(scenario)
    # the hot path's own trials (pin, defer), judged by the headroom they leave
    headroom = HOT_TRIAL_HEADROOM and (
        (pin_trials is None and hot_pin_trials(scenario) > 0)
        or (defer_trials is None and hot_defer_trials(scenario) > 0))
    if pin_trials is None:
        pin_trials = hot_pin_trials(scenario)
    if defer_trials is None:
        defer_trials = hot_defer_trials(scenario)
    if mirror and mirror_floor and only is None:  # (as resolved here)
        options = {**caller, "search": search, "pin_trials": pin_trials,
                   "defer_trials": defer_trials, "gap": gap}
        without = fast(scenario, **options)
        with_it = fast(scenario, mirror=True, mirror_floor=False, **options)
        return _best(gridlib.Scorer(scenario), [without, with_it])
    if anchors is not None and stability < 0:
        anchors = None  # the term turned off: the plan made without anchors, every step of it
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    held = reservations.holds(scenario)  # reserved jobs are pinned like running ones
    held.pin(base)
    held.keep_realtime_off(base)
    if prepared is not None and prepared.serves(scenario):
        score, jobs = prepared.score, prepared.jobs
        orders = prepared.orders_without(held.reserved)
        placer = prepared.placer.rebased(base) or RealtimePlacer(scenario, base, crowd=crowd)
    else:
        score = gridlib.Scorer(scenario)  # the weights laid out once for every candidate
        jobs = Jobs.of(scenario)  # the same arrays for every layout's batch placement
        orders = value_orders(scenario, held)  # and the same value orders
        placer = RealtimePlacer(scenario, base, crowd=crowd)
    if gap != jobs.gap:
        jobs = replace(jobs, gap=gap)
    # for step 8's replans (made where they run: the same parts, none changed before)
    ready = partial(Prepared, scenario, score, jobs, orders, placer)
    # a trial's replan: judged by its trial, so no mirror floor, light rounds or rebuilds
    # of its own (the plan the trials leave gets them)
    replan = partial(fast, search=search, mirror=mirror, mirror_floor=False,
                     exchange=exchange, hot_hops=0, rebuilds=False,
                     replan_layouts=replan_layouts, pin_trials=0, defer_trials=0, gap=gap)
    layouts = LAYOUTS + ((MIRROR,) if mirror else ()) + \
        ((STATIC_STACK,) if placer.rank_moved else ())
    make = partial(_candidates, scenario, base, held, score, jobs, orders, search, layouts,
                   only=only)
    candidates, tags = make(placer)
    if RELEASED and only in (None, "released"):  # (a cheap trial of a "released" winner
        # asks for that construction alone: the first layout is then built to read it off)
        first = candidates[0] if only is None else make(placer, only="first")[0][0]
        let_go = released_at_zero(scenario, first) if score.shortfall_cost(first) > 0 else {}
        if let_go:  # the first layout again, those GPUs anyone's from step 0
            more = _made_again(make, scenario, base, let_go, ("first",), crowd)
            candidates += more
            tags += ["released"] * len(more)
    replanning = REPLAN_LAYOUTS if replan_layouts is None else replan_layouts
    if DROPPED and (DROPPED_HOT or replanning) and only in (None, "dropped"):
        let_go = dropped_current(scenario, placer)
        if let_go:  # the GPUs services drop at step 0 anyone's from then on
            more = _made_again(make, scenario, base, let_go, DROPPED_BUILDS, crowd)
            candidates += more
            tags += ["dropped"] * len(more)
    if OPENED and replanning and only in (None, "opened"):
        let_go = opened_current(scenario, placer.rank)
        if let_go:  # the first layout with services' current GPUs anyone's from step 0
            cheaper = partial(_candidates, scenario, base, held, score, jobs, orders,
                              search // REPLAN_SHARE, layouts)
            more = _made_again(cheaper, scenario, base, let_go, ("first",), crowd)
            candidates += more
            tags += ["opened"] * len(more)
    if FRESH and replanning and only in (None, "fresh") and not scenario.reservations \
            and fresh.holds_current(scenario):
        more = _fresh_candidates(scenario, base, held, jobs, orders, search // REPLAN_SHARE)
        candidates += more
        tags += ["fresh"] * len(more)
    if DRIFT and replanning and only in (None, "drift") and not scenario.reservations \
            and placer.largest > 1 and fresh.holds_current(scenario):  # (one-GPU jobs
        # alone: where services sit is all one to them)
        layout = drift.drift_layout(scenario, base, placer)
        candidates.append(place_batch(scenario, layout, None, search // REPLAN_SHARE,
                                      held=held, jobs=jobs, orders=orders))
        tags.append("drift")
    if scenario.reservations:
        keep = [k for k, g in enumerate(candidates) if swaps_hold(scenario, g)]
        candidates, tags = [candidates[k] for k in keep], [tags[k] for k in keep]
    if not candidates:  # (without reservations the first layout always gives one)
        if only is not None:  # a cheap trial's construction built no legal plan: skipped
            raise InputError(f"the construction {only} built no legal plan",
                             field="reservations")
        # no layout paid its way off a reserved block: hold on there
        candidates, tags = make(RealtimePlacer(scenario, base, hold_through_off=True,
                                               crowd=crowd))
        candidates = legal_around_reservations(scenario, candidates)
        tags = ["held"] * len(candidates)
    if EXCHANGE if exchange is None else exchange:
        for grid in candidates:  # every one: a hand-over can change which one wins
            _filled(scenario, grid, held.realtime_off, "any")
    rerouting = REROUTE if reroute is None else reroute
    if rerouting:  # beside the constructions, not for them: a rerouted one that wins
        # here can end below the plan the original's light rounds reach (tuning3 -0.08)
        laid = [rtpath.rerouted(scenario, made, score, held.realtime_off)
                for made in candidates]
        changed = [k for k in range(len(laid)) if laid[k] is not candidates[k]]
        candidates += [laid[k] for k in changed]
        tags += [tags[k] for k in changed]
    fallback = None  # where a replan layout won by the margin: the others' winner
    if replan_layouts is None and REPLAN_MARGIN is not None:
        candidates, tags, won, fallback = _by_margin(scenario, score, held, candidates,
                                                     tags, REPLAN_MARGIN)
    else:
        won = _winner(scenario, score, held, candidates)
    best = candidates[won]
    light = best  # step 9's light rounds: the plan, or beside what trials and hops give
    hot_rounds = HOT_HOPS if hot_hops is None else hot_hops
    light_rounds = hot_rounds if HOT_MIN_GPUS <= scenario.G <= HOT_MAX_GPUS else 0
    light_evac = int(light_evacuation(scenario, hot_hops))
    # what each light plan was before its evacuation lifted it: a finalist beside it,
    # since the last steps are local searches and can lift the plan without the
    # evacuation past the plan with it (a drawn 16-GPU family scenario: 1252.14 and 1256.05
    # before them, 1262.87 and 1256.05 after), so the light evacuation never lowers a plan
    unevacuated: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id -> (plan, before)
    # step 9's light rounds on a plan: its hops judged by one greedy pass, then the light
    # evacuation (the plan, the best of the rest after a replan layout won, the
    # runner-up less short and the flipped plan all get them)
    light_hop = partial(hopped, scenario, held=held, score=score, jobs=jobs, orders=orders,
                        search=search, evac_rounds=light_evac, one_order=True,
                        evac_rules=evac_rules, before_evac=unevacuated)
    if light_rounds > 0 or light_evac:
        light = light_hop(best, rounds=light_rounds)
    reroute_last = REROUTE_LAST and only is None and not anchors
    finalists: list[np.ndarray] = []  # beside the plan, what the final reroute judges
    if ((light is not best or replan_layouts is None) and tags[won] in REPLAN_TAGS
            and (k := fallback if fallback is not None
                 else _best_other(score, candidates, tags, tags[won])) is not None):
        # a replan's layout won before the light rounds: the best of the rest gets them too
        # (on the replan tuning seeds they lifted another's plan past the winner's), and on
        # the hot path the final reroute as well, even where the rounds leave the winner
        # as it was (a real 16-GPU replan: the opened layout's plan won by 38%, 665 to
        # 481, and the rest's best rerouted reached 721). On the hot path "the rest" is
        # the plan made without the replan layouts (replan3 s1627: its light rounds took
        # it from 292 to 478, past the opened layout's 468)
        other = light_hop(candidates[k], rounds=light_rounds)
        if replan_layouts is None and reroute_last:
            finalists.append(other)  # rerouted with the plan at the end, kept if better
        if score(other) > score(light) + 1e-9:
            light = other
    if (HOT_RUNNER_UP and hot_rounds > 0 and tags[won] != "held"
            and HOT_RUNNER_UP_MIN_GPUS <= scenario.G <= HOT_MAX_GPUS):
        k = _less_short(score, candidates, won)
        if k is not None:
            other = light_hop(candidates[k], rounds=hot_rounds,
                              stride=1 if scenario.G <= RUNNER_UP_EVERY_STEP else HOT_STRIDE)
            if score(other) > score(light) + 1e-9:
                if reroute_last:  # the plan it beat stays a finalist (rerouted, it can
                    finalists.append(light)  # win again: so the runner-up never lowers)
                light = other
    beside = [flipped(scenario, base, placer, held, jobs, orders, search // FLIP_SHARE)
              if only is None and (hot_flips(scenario) if flip is None
                                   else flip and flippable(scenario)) else []]
    if only is None and (hot_walk(scenario) if walk is None else walk and walkable(scenario)):
        beside.append([walked(scenario, base, placer, held, jobs, orders,
                              search // FLIP_SHARE)])
    for group in filter(None, beside):
        # the flipped layouts' best plan, then the walking layout's, given the light rounds
        # where it comes within FLIP_WITHIN of the winner's, replaces the light plan where
        # it beats it (which then stays among the final reroute's finalists: never a
        # lower plan; in one group, the walking plan would take the flipped plans' turn)
        k = _winner(scenario, score, held, group)
        reach = score(best)
        if score(group[k]) >= reach - FLIP_WITHIN * abs(reach) - 1e-9:
            other = light_hop(group[k], rounds=light_rounds)
            if score(other) > score(light) + 1e-9:
                if reroute_last:
                    finalists.append(light)
                light = other
    if anchors or not (hops or pin_trials or defer_trials):
        best = light  # (with anchors, what the stable candidate is judged against; the
        # cheap trials start from it)
    if cheap_trials is None:
        cheap_trials = CHEAP_TRIALS if scenario.G >= CHEAP_MIN_GPUS else 0
    if cheap_trials and not anchors and not pin_trials and tags[won] not in ("baseline", "held"):
        best = trials.pin_trials(scenario, best, partial(replan, only=tags[won],
                                                         cheap_trials=0, prepared=ready()),
                                 cheap_trials, score)
    if ((RELAYOUT if relayout is None else relayout)
            and RELAYOUT_MIN_GPUS <= scenario.G <= RELAYOUT_MAX_GPUS and only is None
            and scenario.realtime_jobs and tags[won] != "held"):
        more = relaid(scenario, best, base, held, jobs, orders, search, placer)
        if scenario.reservations:
            more = [g for g in more if swaps_hold(scenario, g)]
        if EXCHANGE if exchange is None else exchange:
            for grid in more:
                _filled(scenario, grid, held.realtime_off, "any")
        if more:  # the incumbent first: a tie keeps it
            best = [best, *more][_winner(scenario, score, held, [best, *more])]
    if anchors:
        best = keep_starts(scenario, best, base, anchors, stability, held,
                           placing_around(scenario, search, held, jobs, orders))
    early = own = best  # `own`: steps 1-7's plan hopped, `early` the best hopped plan
    if hops > 0 and not anchors:  # steps 1-7's plan hopped: a candidate beside the trials'
        early = own = hopped(scenario, best, held, score, jobs, orders, search, hops,
                             evac_rules=evac_rules)
        if HOP_OTHERS and tags[won] != "held" and scenario.G <= hopping.MAX_GPUS:
            early_value = score(early)
            for k in range(len(candidates)):  # and every other construction's plan
                if k != won:
                    other = hopped(scenario, candidates[k], held, score, jobs, orders, search,
                                   hops, evac_rules=evac_rules)
                    if (got := score(other)) > early_value + 1e-9:
                        early, early_value = other, got
    trying = (pin_trials > 0 or defer_trials > 0) and not anchors
    before = score(best) if trying else 0.0
    untried = light if headroom and trying else None  # the plan without the trials
    for _ in range(trial_passes if trying else 0):
        if pin_trials > 0:
            best = trials.pin_trials(scenario, best, partial(replan, prepared=ready()),
                                     pin_trials, score)
        if defer_trials > 0:
            best = trials.defer_trials(scenario, best, replan, defer_trials)
        if hops > 0:  # what the trials found, hopped in turn
            best = hopped(scenario, best, held, score, jobs, orders, search, hops,
                          evac_rules=evac_rules)
        lifted = score(best)
        if lifted <= before + 1e-9:
            break  # a pass that lifted nothing: the next would try the same replans
        before = lifted  # the next pass starts from this plan
    unlifted = None  # the plan the rest of the steps would start from without HOP_OTHERS
    if hops > 0 and not anchors and score(early) > score(best) + 1e-9:
        if early is not own:  # another construction's hopped plan won
            unlifted = own if score(own) > score(best) + 1e-9 else best
        best = early  # steps 1-7's plan hopped beat the trials'

    def finished(plan: np.ndarray) -> np.ndarray:
        """The last steps (the light plan, re-cuts, the final reroute, block clearing)."""
        # the light plan (without light rounds, trials or hops it is the plan itself: a
        # score of a grid against itself, two full counts, decides nothing)
        if not anchors and light is not plan and score(light) > score(plan) + 1e-9:
            plan = light
        recuts = RECUT_ROUNDS if hops > 0 else HOT_RECUT_ROUNDS
        uncut = plan
        if recuts > 0 and not anchors and not scenario.reservations:
            plan = recut.search(scenario, plan, partial(hopping.layout, scenario),
                                partial(_placed_again, scenario, held, jobs, orders, search),
                                score, recuts)
        rebuilding = rebuilds if rebuilds is not None else REBUILDS and not anchors and \
            REBUILD_MIN_GPUS <= scenario.G <= REBUILD_MAX_GPUS
        last = _last_steps(scenario, held, score, jobs, orders, search) if rebuilding \
            else None
        if rerouting or reroute_last:
            # the plan without trials too: a reroute can lift it past the trials' plan (so
            # trials never lower the plan); with the rebuilds, each is rebuilt and the plan
            # before the re-cuts is a finalist too (the rebuilds are a local search: a
            # higher plan can end lower, so every step before them keeps its promise)
            plan = _rerouted_best(scenario, score, held,
                                  [plan, *([uncut] if last else []),
                                   *([] if anchors else [light]), *finalists,
                                   *([] if anchors else _unevacuated(unevacuated,
                                                                     [light, *finalists]))],
                                  last)
        elif last is not None:
            plan = _best(score, [last(p) for p in
                                 _distinct([plan, uncut, *([] if anchors else [light])])])
        if clear_blocks and scenario.G <= 16:  # past 16 GPUs a trial costs too much
            plan = rtmove.clear_blocks(scenario, plan, jobs, held, search // CLEAR_SHARE,
                                       partial(place_batch, orders=orders))
        return plan

    best = finished(best)
    if untried is not None:
        # kept only where it ends higher and every service holds at least the GPUs the
        # plan without it gives at every step: in a rolling replan that headroom serves
        # the demand the forecast missed, which the one-shot objective does not value
        plain = finished(untried)
        if not (score(best) > score(plain) + 1e-9 and score.holds_realtime(best, plain)):
            best = plain
    if unlifted is not None:
        # the last steps are local searches, so a higher start can end lower (a drawn
        # 12-GPU family scenario: the re-cuts took the plan without the lift from 580.47
        # to 583.45 and left the lifted 582.35 as it was); both finished, HOP_OTHERS
        # never lowers the plan
        other = finished(unlifted)
        if score(other) > score(best) + 1e-9:
            best = other
    return best


# The window rebuilds (rebuild.py) close every plan from REBUILD_MIN_GPUS to
# REBUILD_MAX_GPUS, plan-day's and the refinement's too; `rebuilds` overrides. On the
# tuning seeds they lift one-shot plans at every size from 8 to 64 GPUs, none lowered. In
# the rolling Philly replays they seldom change a plan's first hour, the one a replan
# commits, and from the first they change, a replay and its pair run different weeks: net
# value at 14 and 16 GPUs fell over the first ten paired replays and rose over the next
# twenty, +0.02% and +0.53% over all thirty (BENCHMARKS.md, "Window rebuilds to 16
# GPUs"). At 8 GPUs they lift little for a third of the 1 ms budget; past 16 they cost
# the 64-GPU hot path its 5 ms. `REBUILDS`: False turns them off at every size.
REBUILDS = True
REBUILD_MIN_GPUS = 9
REBUILD_MAX_GPUS = 16
# After the window rebuilds, wherever they run: the services' moves from one GPU to
# another shifted a few steps earlier or later, the batch work placed again around each
# (allocator/policies/handover.py; BENCHMARKS.md, "Hand-over shifts").
HANDOVERS = True
# The walking layout (RealtimePlacer.walking: a service whose demand falls lets go of the
# GPU it has held longest, so it walks across the cluster over the day) is made beside the
# flipped layouts on the hot path from WALK_MIN_GPUS to WALK_MAX_GPUS (`walk=None`), and
# judged as they are: its batch work placed with the search over FLIP_SHARE (the full
# search gained nothing more on the tuning sets), its plan given the light rounds where it
# comes within FLIP_WITHIN of the winner's (at 1%, 0.006 points less there), kept where it
# ends higher (BENCHMARKS.md, "Walking layouts"). Not at 8 GPUs: there it costs a sixth
# more time (0.78 -> 0.91 ms on the 8-GPU scale scenario), against the 1 ms target.
WALK = True
WALK_MIN_GPUS = 9
WALK_MAX_GPUS = 16
# After step 9's hop rounds, this many rounds of block evacuation (allocator/policies/
# evac.py), which no single hop makes. On the tuning seeds with plan-day's trials: tuning2
# s1048 96.17 -> 98.63% of the optimum (its minimum then 97.08%), two others +0.02-0.04%,
# none lowered, 2-4% more of plan-day's fast time; a second round changed nothing. 0: none.
EVAC_ROUNDS = 1
# With `hops`, up to this many rounds of re-cuts last (allocator/policies/recut.py, up to
# its MAX_GPUS): two overlapping runs of one service trade ends across their GPUs, at no
# cost in swaps. On the tuning seeds up to 16 GPUs with plan-day's trials: 17 of 189
# proven plans lifted, none lowered, about 3% more of plan-day's time. 0: none.
RECUT_ROUNDS = 3
# Without `hops` (the hot path): off. One round lifts 31 of the 189 but takes fast's time
# up by 85% (a batch placement per trial); at 64 GPUs 3.8x (BENCHMARKS.md, "Re-cuts").
HOT_RECUT_ROUNDS = 0
# With `hops`, up to the hops' 16 GPUs, every construction's plan of steps 1-4 is hopped
# too, not only the winner's: a runner-up's realtime layout can be the better start. On the
# tuning seeds with plan-day's trials it lifts 9 of 189 proven plans, none lowered:
# tuning4 s1184 (8 GPUs) from below zero to 99.91% of the optimum (the first layout gives
# the highest-priority services the one free GPU at the first steps but loses batch value
# later, which its hops win back), s1132 96.80 -> 98.30%; about 65% more time at 16 GPUs
# (past 16 GPUs, the evacuation alone, it lifted none of the 64-GPU tuning seeds). Where
# its plan wins, the last steps (re-cuts, reroute, clearing) also finish the plan without
# it and keep the better: they are local searches, and a randomized test run found a
# drawn scenario where the lifted start ended lower.
HOP_OTHERS = True
# Past the hops' 16 GPUs the evacuation runs alone, up to EVAC_MAX_GPUS: on the 64-GPU
# tuning seeds 1000-1029 (30 jobs) plan-day's plan rose on 8 of 30 (+0.13% on average,
# s1007 +1.25%) for about 8 ms a round against plan-day's ~100 ms. (On the hot path there,
# judged by six orders, it cost 8 ms against the 5 ms target; judged by one order, the
# light evacuation below, about 1.3 ms: on.)
EVAC_MAX_GPUS = 64
# The hot path's light hops (no `hops`, no trials): HOT_HOPS rounds, each judged by one
# greedy pass (the order earning most on the starting layout), windows whose inner edge
# is every HOT_STRIDE-th step, from HOT_MIN_GPUS to HOT_MAX_GPUS. One order and every
# other step cost about a sixth of a round of step 9 (six orders, every step: one such
# round gave 96.44 / 94.34% on the first two tuning sets for 12-14 ms more a plan); a
# third round lifted five plans by 0.1-0.5%; windows every step (one round) lifted s1059
# by 0.05% at twice the search's cost; every fourth step lost s1033 (98.66 -> 91.57%).
# On by default from 10 to 16 GPUs. From 10 to 14, over the three tuning sets (150 seeds,
# 146 proven optima), they lift 27 of the 89 plans there (+0.36 points on average, up to
# +7.1) and lower none; rolling replay of 10-14 GPU worlds, +0.77% realized value. At 16,
# with the light evacuation, 18 of 33 (+0.43 points on the proven optima) for about 2.8
# ms a plan; the replay of 16-GPU worlds
# (`benchmarks/replay_seeds.py --variants hot14,nohotevac --sizes 16`): seeds 20-39 net value
# (batch value less realtime's penalty) +0.78% (se 0.29), seeds 40-59 +1.08% (se 0.42),
# while the worst world's realtime shortfall rose 0.19 / 0.65 points: a tighter layout
# leaves a service less room when a job overruns (seed 58's worst world: 6.8% against
# 0.4%, all of it granted demand, none a forecast miss). The objective's own price of that
# shortfall is in the net value, which still rose; an operator who weighs the tail more
# sets HOT_MAX_GPUS = 14. Not at 8 GPUs: 2 of 19 plans lifted (+0.11 points on average)
# for 36% more instructions against the 1 ms target there.
# `fast(scenario, hot_hops=0)` turns them off, `hot_hops=N` sets the rounds.
HOT_HOPS = 2
HOT_STRIDE = 2
HOT_MIN_GPUS = 10
HOT_MAX_GPUS = 16
# The hot path's light evacuation: one round of block evacuation (evac.py, judged by the
# same one greedy pass) after the light hops, from HOT_EVAC_MIN_GPUS to HOT_EVAC_MAX_GPUS
# (`hot_hops=0` turns it off too). With the light hops at 16 GPUs it lifts 6 more of the
# 26 tuning plans there (s1132 93.2 -> 96.8% of the optimum; +0.15 points on average) for
# about 0.4 ms a plan (compiled); in the replay it changes nothing that counts (16-GPU
# worlds, seeds 20-39: net value -0.01%, se 0.09). From 8 to 14 GPUs, over the four
# tuning sets (189 proven optima), it lifts 5 plans and lowers none (s1095 at 8 GPUs 98.31
# -> 100%, s1040 at 10 98.56 -> 99.86%) for about 10% more time at 8 GPUs (0.48 -> 0.53
# ms on the 8-GPU scale scenario); the replay of 8-14 GPU worlds (seeds 20-39, variant
# `evac15`): value +0.06% (se 0.06), net +0.02% (se 0.07). On the Philly weeks' replans
# at 12 and 14 GPUs it lifts 13 of 159 snapshots, none lowered (one 65.6 -> 97.7% of
# full's plan), and the rolling replays' net value +0.94% (12 GPUs, se 0.68) and +0.71%
# (14, se 0.35). (An earlier round kept it off at 8 GPUs, 13% more time against a 1 ms
# target then missed.) Past 16 GPUs (no light hops there) up to 64: on the 64-GPU tuning
# seeds 1000-1029 it lifts 11 of 30 plans (+0.13 points of plan-day's plan
# on average, s1004 +1.6%), none lowered, for about 1.3 ms a plan (1.8 -> 3.1 ms); the
# replay of 64-GPU worlds (`benchmarks/replay_seeds.py --variants noevac64,pairs --sizes
# 64`, seeds 22-31): net value +0.37% (se 0.12), 8 of 10 up. Windows at every other step
# (half the moves) kept +0.31% for 0.8 ms: not kept.
HOT_EVAC_MIN_GPUS = 8
HOT_EVAC_MAX_GPUS = 64


def light_evacuation(scenario: Scenario, hot_hops: int | None) -> bool:
    """Whether the hot path's light evacuation runs (`hot_hops`: fast's option): services
    to move, no reservations (`hopped` skips those), HOT_EVAC_MIN_GPUS to HOT_EVAC_MAX_GPUS."""
    return (hot_hops != 0 and HOT_EVAC_MIN_GPUS <= scenario.G <= HOT_EVAC_MAX_GPUS
            and bool(scenario.realtime_jobs) and not scenario.reservations)
# The hot path's light rounds also run on the best candidate that leaves realtime less
# short than the winner, from HOT_RUNNER_UP_MIN_GPUS to HOT_MAX_GPUS: it lost on batch value,
# which hops win back. On the tuning seeds it runs on 3 of 210 plans and lifts one, tuning4
# s1184 (8 GPUs: the winner gives the one free GPU of the first steps to the cheapest
# service; -23.38 -> 6.67 against an optimum of 8.90), for about 5% more time at 8 GPUs
# (the check; the 8-GPU yardstick never runs it). Up to RUNNER_UP_EVERY_STEP GPUs, where
# the winner gets no light hops, the runner-up's windows are every step (not every HOT_STRIDE-th):
# s1184 6.67 -> 8.90, the optimum, and no other tuning plan moved; at 16 GPUs every step
# cost 26% more time on the scale scenario for the same plan, so not there.
HOT_RUNNER_UP = True
HOT_RUNNER_UP_MIN_GPUS = 8
RUNNER_UP_EVERY_STEP = 8


def hopped(scenario: Scenario, best: np.ndarray, held: reservations.Holds,
           score: gridlib.Scorer, jobs: Jobs, orders: tuple[tuple[int, ...], ...],
           search: int, rounds: int, evac_rounds: int = EVAC_ROUNDS,
           one_order: bool = False, stride: int | None = None,
           evac_rules: tuple[str, ...] | None = None,
           before_evac: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
           ) -> np.ndarray:
    """Step 9: `best`, or a plan on its realtime layout after one or more hops, where that
    is worth more once the batch work is placed again and realtime topped up as in step 5.
    Each round's layout is judged so: a greedy pass only guides the hops, and a second
    hop that pleases it can leave the full placement worse than the first. Then
    `evac_rounds` block evacuations, judged the same way. `one_order`: the hops judged by
    one greedy pass (the hot path's light round) instead of the best over the orders.
    `evac_rules`: where the evacuations' moved runs land (None: evac.RULES).
    `before_evac`: where an evacuation lifted the plan, the plan returned's id -> it and
    the plan before its first evacuation (for the final steps to judge too)."""
    if (scenario.reservations or not scenario.realtime_jobs
            or not hopping.compiled(scenario)):
        return best  # (the Python search is a test reference: seconds a round)
    if scenario.G > hopping.MAX_GPUS:  # the hop search grows with the blocks squared
        rounds = 0
        if scenario.G > EVAC_MAX_GPUS:
            return best
    if rounds <= 0 and evac_rounds <= 0:
        return best
    cells, value = hopping.layout(scenario, best), score(best)
    judge = orders
    if one_order:  # the pass of the order that earns most on the starting layout
        judge = (layout_climb.best_order(Decoder.new(scenario, cells >= 0, None, jobs),
                                         orders),)
    if stride is None:
        stride = HOT_STRIDE if one_order else 1
    hop = partial(hopping_round, stride=stride)
    stuck: set[object] = set()  # a kind of round that found nothing: not run again
    kept = cells  # the layout of the best plan so far
    hopped_only = None  # the best plan before an evacuation lifted it
    evacuate = evac.search if evac_rules is None else partial(evac.search, rules=evac_rules)
    for step in [hop] * rounds + [evacuate] * evac_rounds:
        if step is evacuate:
            # from the best plan's layout, not the last hop's: a hop the greedy pass liked
            # but the full placement did not can hide the block worth clearing (tuning
            # seed 1197 with plan-day's trials: 97.03 -> 100% of the optimum)
            cells = kept
        moved = None if step in stuck else step(scenario, cells, jobs, judge)
        if moved is None:
            stuck.add(step)  # (evacuations still run after the hops stop)
            continue
        cells = moved
        # (in the grid's own dtype: the search's layouts are int64)
        grid = _placed_again(scenario, held, jobs, orders, search, cells.astype(best.dtype))
        got = score(grid)
        if got > value + 1e-9:
            if step is evacuate and hopped_only is None:
                hopped_only = best
            best, value, kept = grid, got, cells
    if before_evac is not None and hopped_only is not None:
        before_evac[id(best)] = (best, hopped_only)
    return best


def _unevacuated(before_evac: dict[int, tuple[np.ndarray, np.ndarray]],
                 plans: list[np.ndarray]) -> list[np.ndarray]:
    """The plans `hopped` recorded as what each of `plans` was before its evacuation."""
    out = []
    for plan in _distinct(plans):
        entry = before_evac.get(id(plan))
        if entry is not None and entry[0] is plan:
            out.append(entry[1])
    return out


def _placed_again(scenario: Scenario, held: reservations.Holds, jobs: Jobs,
                  orders: tuple[tuple[int, ...], ...], search: int, cells: np.ndarray
                  ) -> np.ndarray:
    """The batch work placed on a layout (realtime and running cells), realtime then
    topped up: how step 9 judges a layout it changed."""
    grid = place_batch(scenario, cells, None, search, held=held, jobs=jobs, orders=orders)
    if TOP_UP:
        _filled(scenario, grid, held.realtime_off,
                "surplus" if _surplus_trade(scenario) else None)
    return grid


def _last_steps(scenario: Scenario, held: reservations.Holds, score: gridlib.Scorer,
                jobs: Jobs, orders: tuple[tuple[int, ...], ...], search: int
                ) -> Callable[[np.ndarray], np.ndarray]:
    """The last local steps on a finished plan, their parts built once for every plan the
    final reroute judges: the window rebuilds (rebuild.py), then with HANDOVERS the
    services' moves shifted (handover.py; not with reservations)."""
    rebuilt = partial(rebuild.rebuilt, scenario, queued=orders[0] if orders else (),
                      jobs=jobs, place=placing_around(scenario, search, held, jobs, orders))
    if not HANDOVERS or scenario.reservations:
        return rebuilt
    shifted = partial(handover.search, scenario,
                      layout_of=partial(hopping.layout, scenario),
                      place=partial(_placed_again, scenario, held, jobs, orders, search),
                      score=score, judge=partial(evac.Evacuation(scenario, jobs).value,
                                                 orders=orders, compiled=None))
    return lambda plan: shifted(rebuilt(plan))


def _rerouted_best(scenario: Scenario, score: gridlib.Scorer, held: reservations.Holds,
                   plans: list[np.ndarray],
                   then: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """Each plan rerouted once (rtpath.py), and `then` applied to it, the best kept; the
    first wins a tie."""
    laid = [rtpath.rerouted(scenario, plan, score, held.realtime_off)
            for plan in _distinct(plans)]
    return _best(score, laid if then is None else [then(plan) for plan in laid])


def _distinct(plans: list[np.ndarray]) -> list[np.ndarray]:
    """Each plan once (by identity), first seen first."""
    seen: list[np.ndarray] = []
    for plan in plans:
        if not any(plan is other for other in seen):
            seen.append(plan)
    return seen


def _best(score: gridlib.Scorer, plans: list[np.ndarray]) -> np.ndarray:
    """The best-scoring plan; the first wins a tie (one plan: no score to compare)."""
    best = plans[0]
    if len(plans) > 1:
        value = score(best)
        for plan in plans[1:]:
            if (got := score(plan)) > value + 1e-9:
                best, value = plan, got
    return best


def _less_short(score: gridlib.Scorer, candidates: list[np.ndarray], won: int) -> int | None:
    """The best-scoring candidate whose realtime shortfall costs less than the winner's
    (None if the winner's costs nothing, or none does)."""
    if len(candidates) < 2:
        return None
    _, lost = score.split(score.counts(candidates[won]))
    if lost <= 0:
        return None
    _, split = score.split_all(candidates)
    short = [k for k in range(len(candidates)) if k != won and split[k][1] < lost - 1e-9]
    return max(short, key=lambda k: (split[k][0], -k)) if short else None


def hopping_round(scenario: Scenario, cells: np.ndarray, jobs: Jobs,
                  orders: tuple[tuple[int, ...], ...], stride: int = 1) -> np.ndarray | None:
    """One round of hops on the layout `cells`: the new layout, or None if none pays."""
    moved, kept = hopping.search(scenario, cells, jobs, orders, 1, stride=stride)
    return moved if kept else None


def _best_other(score: gridlib.Scorer, candidates: list[np.ndarray], tags: list[str],
                tag: str) -> int | None:
    """The best candidate another construction than `tag` built (None: there is none)."""
    others = [k for k, t in enumerate(tags) if t != tag]
    return max(others, key=lambda k: (score(candidates[k]), -k)) if others else None


def _by_margin(scenario: Scenario, score: gridlib.Scorer, held: reservations.Holds,
               candidates: list[np.ndarray], tags: list[str], margin: float
               ) -> tuple[list[np.ndarray], list[str], int, int | None]:
    """The candidates and the winner's index: the replan layouts' best (`REPLAN_TAGS`)
    where it beats the others' by `margin` of their value, else the others alone, as if
    the replan layouts had not been made (the plan is then the one without them); and
    where a replan layout won, the index of the others' winner (else None)."""
    plain = [k for k, t in enumerate(tags) if t not in REPLAN_TAGS]
    moved = [k for k, t in enumerate(tags) if t in REPLAN_TAGS]
    if not plain or not moved:
        return candidates, tags, _winner(scenario, score, held, candidates), None
    kept = [candidates[k] for k in plain]
    won = _winner(scenario, score, held, kept)
    value = score(kept[won])
    past = [k for k in moved  # (the drift layout's own margin: `DRIFT_MARGIN`)
            if score(candidates[k]) >= value + (DRIFT_MARGIN if tags[k] == "drift"
                                                else margin) * abs(value)]
    if past:
        return candidates, tags, past[_winner(scenario, score, held,
                                              [candidates[k] for k in past])], plain[won]
    return kept, [tags[k] for k in plain], won, None


def _winner(scenario: Scenario, score: gridlib.Scorer, held: reservations.Holds,
            candidates: list[np.ndarray]) -> int:
    """The candidate with the highest objective once realtime takes what it is short of
    from free cells, and (`SURPLUS_TRADE`, up to `SURPLUS_MAX_GPUS`) from GPUs other
    services hold above their demand (allocator/policies/topup.py); ties keep the earlier
    one. A top-up scans the grid once per run it takes, so a candidate is topped up (in
    place) only if its objective plus the most that could add reaches the best so far:
    the winner of topping up every candidate, at a fraction of the cost (topping up all
    of them, in numpy, had doubled fast's time at 8 GPUs)."""
    counted, split = score.split_all(candidates)
    floor = max(value for value, _ in split)
    slack = 1e-9 * max(1.0, abs(floor))  # rounding: a tie must still be topped up
    surplus = _surplus_trade(scenario)
    plain = []
    for counts, (value, lost) in zip(counted, split, strict=True):
        # a top-up adds at most what shortfall takes off, and at most its gain bound
        room = topup.gain_bound(counts, score.realtime, score.demand, score.penalty,
                                surplus) \
            if TOP_UP and lost > 0 and value + lost >= floor - slack else 0.0
        plain.append((value, room))
    won, best = -1, -np.inf
    for k in sorted(range(len(candidates)), key=lambda k: (-sum(plain[k]), k)):
        value, room = plain[k]
        if value + room + slack < best:
            break  # sorted by value + room: no later candidate reaches the best either
        if room > 0 and _filled(scenario, candidates[k], held.realtime_off,
                                "surplus" if surplus else None):
            value = score(candidates[k])
        if value > best or (value == best and k < won):
            won, best = k, value
    return won


def _surplus_trade(scenario: Scenario) -> bool:
    """Whether step 5 trades GPUs services hold above their demand (`SURPLUS_TRADE`, up
    to `SURPLUS_MAX_GPUS`)."""
    return SURPLUS_TRADE and scenario.G <= SURPLUS_MAX_GPUS


def _filled(scenario: Scenario, grid: np.ndarray, keep_off: np.ndarray | None,
            trade: str | None) -> bool:
    """Top up `grid`'s realtime from free cells first (they cost no one anything), then
    trade between services (`trade`: "surplus", whole GPUs others hold above their
    demand; "any", any run where the objective rises; None: no trade), then top up from
    free cells again (a service that gave a GPU away may now take a free one); True if
    anything changed."""
    changed = topup.top_up(scenario, grid, keep_off)
    if trade and topup.exchange(scenario, grid, keep_off, surplus_only=trade == "surplus"):
        topup.top_up(scenario, grid, keep_off)
        changed = True
    return changed


def _candidates(scenario: Scenario, base: np.ndarray, held: reservations.Holds,
                score: gridlib.Scorer, jobs: Jobs, orders: tuple[tuple[int, ...], ...],
                search: int, modes: tuple[dict[str, bool], ...],
                placer: RealtimePlacer, only: str | None = None
                ) -> tuple[list[np.ndarray], list[str]]:
    """Steps 1-4 of the docstring: one grid per realtime layout and batch order, with
    `placer`'s layers and curves shared by every layout; beside each grid, the name of its
    construction ("first", "layout1"..., "climbed", "phased-spare", "phased-spill", "last",
    "baseline"), and with `only`, that construction alone."""
    candidates: list[np.ndarray] = []
    tags: list[str] = []
    layouts: list[np.ndarray] = []
    names: list[str] = []
    if only in (None, "first"):
        layouts.append(_lay_out(placer.copy(), base, held))
        names.append("first")
    climbing = (scenario.realtime_jobs and not scenario.reservations and CLIMB_FROM is not None
                and scenario.G <= CLIMB_MAX_GPUS and only in (None, "climbed"))
    climb_at, shared = -1, False
    for m, mode in enumerate(modes if scenario.realtime_jobs else (), start=1):
        if only is not None and only != f"layout{m}" and not (climbing and mode == CLIMB_FROM):
            continue
        grid = _lay_out(placer.copy(**mode), base, held)
        same = [k for k, seen in enumerate(layouts) if _equal(grid, seen)]
        if not same:
            layouts.append(grid)
            names.append(f"layout{m}")
        if mode == CLIMB_FROM:
            climb_at = same[0] if same else len(layouts) - 1
            shared = bool(same)
    if climbing and climb_at >= 0:
        climbed = layout_climb.climb(scenario, layouts[climb_at], jobs, orders,
                                     CLIMB_PASSES)
        if only == "climbed":
            layouts, names = [climbed], ["climbed"]
        else:
            if shared and not _equal(climbed, layouts[climb_at]):
                # the layout it equals is another construction's: that one stays too, last
                # (a tie keeps the climbed), since the climb judges moves by one greedy pass
                # and the full placement can rank them otherwise (a drawn 6-GPU case: 35.0
                # unclimbed against 28.0 climbed)
                layouts.append(layouts[climb_at])
                names.append(names[climb_at])
            layouts[climb_at], names[climb_at] = climbed, "climbed"
    for grid, name in zip(layouts, names, strict=True):
        candidates.append(place_batch(scenario, grid, None, search, held=held, jobs=jobs,
                                      orders=orders))
        tags.append(name)
    if scenario.realtime_jobs and (only is None or only.startswith("phased")):
        around = base.copy()
        phased = placer.copy()
        phased.place(around, "first")
        phased.finish(around)
        held_back = phased.later_demand()
        if held_back.any():
            # Twice: keeping those GPUs spare, and letting a job worth more than the realtime
            # shortfall it causes take reserved GPUs (the objective's own trade).
            cheapest = min(scenario.weights.realtime_penalty * j.priority
                           for j in scenario.realtime_jobs)
            for spill in (-1.0, cheapest):
                tag = "phased-spare" if spill < 0 else "phased-spill"
                if only is not None and only != tag:
                    continue
                # The batch value a pass counts is not the objective here (the later
                # layers come after it), so the grid before the pair step competes too,
                # unless the realtime shortfall the later layers leave costs less than
                # the step gained (then the earlier grid cannot be worth more). With
                # spill, a pass does not count the shortfall its spilled jobs cause at
                # all: no pair step there (on the tuning seeds it gained nothing).
                earlier: list[tuple[np.ndarray, float]] = []
                layout = place_batch(scenario, around, held_back, search, spill=spill,
                                     held=held, jobs=jobs, orders=orders,
                                     before_pairs=earlier, pair_step=spill < 0)
                _place_later(phased, layout)
                held.release(layout)
                candidates.append(layout)
                tags.append(tag)
                for grid, gained in earlier:
                    if score.shortfall_cost(layout) < gained - 1e-6:
                        continue
                    _place_later(phased, grid)
                    held.release(grid)
                    candidates.append(grid)
                    tags.append(tag)
    if scenario.realtime_jobs and REALTIME_LAST and only in (None, "last"):
        last = realtime_last(scenario, base, placer.copy(), search // LAST_SHARE, held,
                             jobs, orders)
        if last is not None:
            candidates.append(last)
            tags.append("last")
    if not scenario.reservations and only is None:  # the baselines know nothing of them
        more = baselines.both(scenario, jobs, base)  # (no reservations: base is the
        # empty grid with running jobs pinned)
        candidates += more
        tags += ["baseline"] * len(more)
    return candidates, tags


def _made_again(make: Callable[..., tuple[list[np.ndarray], list[str]]], scenario: Scenario,
                base: np.ndarray, let_go: dict[int, frozenset[int]], builds: tuple[str, ...],
                crowd: bool = False) -> list[np.ndarray]:
    """The constructions `builds` (`_candidates`' names) made once more by `make` with the
    current GPUs `let_go` anyone's from step 0, their release paid there: the released,
    dropped and opened layouts differ only in what they let go. `crowd`: fast's."""
    again = RealtimePlacer(scenario, base, released=let_go, crowd=crowd)
    return [grid for build in builds for grid in make(again, only=build)[0]]


# Step 2's first layout made once more where it leaves realtime short and a service lets
# current GPUs go at step 0: those GPUs then open to every service from step 0, not only
# to the refill. On a real replan (Philly, 14 GPUs) a service short of a six-step rise
# could only have had the GPU another service let go: 661 -> 748, the proven optimum.
RELEASED = True


# On a replan, the first, climbed and realtime-last layouts made once more with the current
# GPUs each service drops at step 0 (its curve keeps fewer) anyone's from then on: every
# other layout keeps them off-limits to the other services all day, so a service sitting
# in a block the queue needs never moved onto a GPU its neighbour had let go. On the
# replan tuning seeds of benchmarks/bench_quality.py: 98.08 -> 98.23% (replan) and
# 98.10 -> 98.38% (replan2) of the proven optima; in the rolling replays of the real
# Philly weeks net value -0.22%, +0.24%, +0.03% at 14, 16 and 32 GPUs, each within its
# standard error (BENCHMARKS.md, "Dropped GPUs").
DROPPED = True
# The constructions made with them: on the replan tuning seeds the dropped candidate that
# won was climbed (4), first, last and phased-spare (1 each); the phased ones are left out.
DROPPED_BUILDS: tuple[str, ...] = ("first", "climbed", "last")
# Whether the hot path makes them (False: only with `replan_layouts`, as the opened and
# fresh ones; `gpuplan plan`'s refinement gains nothing from them there, a scratch run).
DROPPED_HOT = True


def dropped_current(scenario: Scenario, placer: RealtimePlacer) -> dict[int, frozenset[int]]:
    """Per service holding more current GPUs than its curve keeps at step 0, the ones it
    drops there (its least-liked, within its swap limit)."""
    out: dict[int, frozenset[int]] = {}
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob) and job.current_gpus and job.swap_limit > 0:
            extra = min(len(job.current_gpus) - int(placer.curves[i][0]), job.swap_limit)
            if extra > 0:
                worst = sorted(job.current_gpus, key=lambda g: (placer.rank[g], g))
                out[i] = frozenset(worst[:extra])
    return out


# On a replan, the first layout with each service's current GPUs (as many as its swap limit
# lets go at step 0) anyone's from step 0. With FRESH, on the replan tuning seeds of
# benchmarks/bench_quality.py: 98.08 -> 98.42% of the proven optima, min 87.74 -> 91.71%
# (BENCHMARKS.md, "Replans: services on the GPUs yesterday left them").
OPENED = True


def opened_current(scenario: Scenario, rank: np.ndarray) -> dict[int, frozenset[int]]:
    """Per service holding current GPUs, those it could let go at step 0 within its swap
    limit (all of them, or the ones realtime's `rank` likes least)."""
    out: dict[int, frozenset[int]] = {}
    for i, job in enumerate(scenario.jobs):
        if isinstance(job, RealtimeJob) and job.current_gpus and job.swap_limit > 0:
            worst = sorted(job.current_gpus, key=lambda g: (rank[g], g))
            out[i] = frozenset(worst[: job.swap_limit])
    return out


# On a replan, the first layout of the same day with no current GPUs, each service walking
# onto it from the GPUs it holds (allocator/policies/fresh.py). The other layouts made so
# (tail-first, stacked) lifted no more tuning replans.
FRESH = True
# The drift layout (drift.py) on a replan: services walk off aligned blocks as their
# demand rises and falls. One more replan layout: on the replan tuning seeds it lifted
# the hot path on 51 of 420 plans (2 lowered, -1.3% at most), x1.12 time on a replan.
DRIFT = True
# The margin the drift layout's plan must win by on the hot path (`_by_margin`; the same
# fallback as the others'). At none against 5%, the rolling Philly replays' net value
# moved +0.69 / -0.03 / +0.42% (se 0.81 / 0.98 / 0.38) at 14/16/32 GPUs: not the loss the
# opened and fresh layouts showed at no margin (BENCHMARKS.md, "The drift layout").
DRIFT_MARGIN = 0.0
FRESH_MODES: tuple[dict[str, bool], ...] = ({},)
# The opened and fresh layouts' batch placement searches orders with the budget over this.
REPLAN_SHARE = 4
# Whether the hot path makes them (`replan_layouts=None`), and the margin a replan layout's
# plan must win by there (a share of the best other plan's value; None: any): below it the
# hot path's plan is the one made without them. At any margin they lowered the rolling
# Philly replays' net value in an earlier round (-0.30/-0.52/-0.56% at 14/16/32 GPUs, se
# 0.76/0.94/0.32) for one-shot gains, since a replan every hour moves services for small
# gains a forecast's error undoes. With 5%: the replan tuning seeds 98.29 -> 98.55%
# (replan) and 98.38 -> 98.56% (replan2) of the proven optima, replan3 summed +0.46%, 17
# of 420 up and none down; real Philly replans one shot 4 of 377 up, none down; the
# rolling replays' net value within noise (BENCHMARKS.md, "Replan layouts on the hot
# path"); about a fifth more time on a replan (3.4 -> 4.2 ms median at 8-16 GPUs), none
# elsewhere. `gpuplan plan` refines a wanting replan with them at any margin.
REPLAN_LAYOUTS = True
REPLAN_MARGIN: float | None = 0.05
REPLAN_TAGS = ("opened", "fresh", "drift")
# The flipped drift layouts (drift.py, `until` > 0): services on the aligned blocks first,
# walking out from each step of FLIP_STEPS on (a large job's block free later in the day),
# each layout's batch placement searching orders with the budget over FLIP_SHARE. Their best
# plan gets the light rounds where it comes within FLIP_WITHIN of the winner's (before the
# rounds), and replaces the plan where it ends above it, so a plan never falls.
# On the hot path (`flip=None`) from FLIP_MIN_GPUS to FLIP_MAX_GPUS when FLIP is set;
# `gpuplan plan` refines a wanting plan with them at every size (allocator/policies/refine.py).
FLIP = True
FLIP_STEPS = (2, 6, 10, 16)
FLIP_SHARE = 4
FLIP_WITHIN = 0.02
FLIP_MIN_GPUS = 10
FLIP_MAX_GPUS = 16
# Whether the hot path lays a short service's layers again as paths in every construction
# (`reroute=None`; the final plan alone: REROUTE_LAST below). Off: a few ms more where
# constructions leave a service short, for hundredths of a point (BENCHMARKS.md, "services
# rerouted as paths"); `gpuplan plan` refines a wanting plan with it (allocator/policies/refine.py).
REROUTE = False
# Whether the hot path lays a short service's layers again in its final plan alone
# (kept where it raises the objective, so never lower): on the real Philly replans one shot
# 4 of 315 lifted (+2.3 to +50%), none lowered, the same median time; replan3 96.39 ->
# 96.50% of the plans' bounds; the tuning and replan sets with stored optima unchanged;
# rolling Philly replays net value +0.00 / -0.01 / +0.11% at 14 / 16 / 32 GPUs (se 0.00,
# 0.25, 0.18). Rerouting every construction on the hot path too (`REROUTE`): tuning2
# +0.03, tuning3 -0.01, tuning4 +0.02 points, a few ms: off.
REROUTE_LAST = True


# One whole pin trial on the hot path from 9 to 16 GPUs (step 8: a delayed job pinned to an
# earlier block, everything else planned again around it; kept only where it ends higher).
# Off: one-shot plans gain (the six tuning sets' 299 proven optima 99.206 -> 99.240%, 14
# up, none down; held-out test 98.95 -> 99.16%, its minimum 85.10 -> 93.97%) for ~30% more
# time, but the real Philly weeks' rolling replays show no net gain: 45 pairs a size
# replayed as before read about -0.33% at 14 GPUs and -0.65% at 16, 60 a size with
# overruns planned as long as they run (overrun share 0.3) -0.30% and +0.27% (se 0.37,
# 0.59), realtime's shortfall a little higher each time (BENCHMARKS.md, "One whole pin
# trial on the hot path", "The hot pin trial judged again"). `fast(pin_trials=1)` or
# `gpuplan plan --pin-trials 1` asks for it.
HOT_PIN_TRIALS = 0
# With HOT_PIN_TRIALS or HOT_DEFER_TRIALS, the trials' plan is kept only where every
# service holds at least the GPUs the plan made without them gives, at every step (both
# plans finished): the pin trial's replay loss came with a higher realtime shortfall,
# the GPU-steps the plan without it gives services beyond their forecast going to batch
# work instead. Off: with the pin trial it keeps 6 of the trial's 14 one-shot lifts on
# the tuning sets (99.206 -> 99.217% of the proven optima, none down, ~1.5x the time),
# and over the same 120 paired Philly replays realtime's shortfall no longer rises
# (2.06 -> 2.07%), but net value does not either: -0.12% (se 0.24), 30 up / 30 down
# (BENCHMARKS.md, "The hot pin trial judged by the headroom it leaves"). With the defer
# trials it keeps 24 of their 36 lifts (99.206 -> 99.258%, none down, ~3x the time), and
# over 90 paired Philly replays it gains less than they do alone (net +0.41%, se 0.45,
# against +0.73%, se 0.48) with the same shortfall rise (+0.06 point a size; "The hot
# defer trials judged by the headroom they leave"). `--variant hotpinroom` /
# `hotdeferroom` in the benchmarks asks for both knobs.
HOT_TRIAL_HEADROOM = False
HOT_PIN_MIN_GPUS = 9
HOT_PIN_MAX_GPUS = 16


# Defer trials on the hot path at the same sizes (step 8: a started job held back a step,
# everything planned again; kept only where it ends higher). Off: four lift one-shot plans
# (tuning sets +0.08 points, 36 up, none down; held-out test 98.95 -> 99.06%) for about
# 2.5x the time, but the real Philly weeks' rolling replays show no net gain (14 GPUs
# +0.88%, se 0.80; 16 GPUs -0.15%, se 0.74) and a slightly higher realtime shortfall
# (BENCHMARKS.md, "Defer trials on the hot path"). With overruns planned as running on
# (the replays' overrun share 0.3), 60 pairs a size read +0.28% (se 0.59) and +0.77% (se
# 0.55), +0.52% (se 0.40) over the 120, realtime's mean shortfall +0.06 point at both
# ("Overruns planned as long as they run", "The hot pin trial judged again"). Turning it
# on moves pinned plans, figures and recorded cases at 9-16 GPUs.
HOT_DEFER_TRIALS = 0
# The hot path made twice, by the buddy rule and by the gap rule (Jobs.gap), the better
# kept: the two rules fail on different plans, and the better of the two lifts the tuning
# sets from 99.206 to 99.328% of the proven optima (56 plans up, none down) for twice the
# time (BENCHMARKS.md, "The gap rule"). Off: over 60 rolling replays of the real Philly
# weeks (14 and 16 GPUs) net value reads +0.68% (se 0.47), but realtime's mean shortfall
# rises 0.08 point at 16 GPUs, past the 0.05 the trials' rule allows.
HOT_GAP = False
HOT_GAP_MIN_GPUS = 9
HOT_GAP_MAX_GPUS = 16


def hot_pin_trials(scenario: Scenario) -> int:
    """The whole pin trials fast makes by default."""
    return HOT_PIN_TRIALS if HOT_PIN_MIN_GPUS <= scenario.G <= HOT_PIN_MAX_GPUS else 0


def hot_gap(scenario: Scenario) -> bool:
    """Whether the hot path (`gap=None`) makes its plan by both rules."""
    return HOT_GAP and HOT_GAP_MIN_GPUS <= scenario.G <= HOT_GAP_MAX_GPUS


def hot_defer_trials(scenario: Scenario) -> int:
    """The defer trials fast makes by default."""
    return HOT_DEFER_TRIALS if HOT_PIN_MIN_GPUS <= scenario.G <= HOT_PIN_MAX_GPUS else 0


def flippable(scenario: Scenario) -> bool:
    """Whether flipped layouts can differ from the plain ones: services to lay, a queued
    job of more than one GPU (a block to free), no reservations (which pin realtime)."""
    return walkable(scenario) and largest_queued(scenario) > 1


def hot_flips(scenario: Scenario) -> bool:
    """Whether the hot path (`flip=None`) makes the flipped layouts."""
    return FLIP and FLIP_MIN_GPUS <= scenario.G <= FLIP_MAX_GPUS and flippable(scenario)


def flipped(scenario: Scenario, base: np.ndarray, placer: RealtimePlacer,
            held: reservations.Holds, jobs: Jobs, orders: tuple[tuple[int, ...], ...],
            search: int) -> list[np.ndarray]:
    """The batch work placed on each flipped drift layout (`FLIP_STEPS` before the
    horizon's end; a layout equal to an earlier one is skipped)."""
    layouts: list[np.ndarray] = []
    for until in FLIP_STEPS:
        if until >= scenario.T:
            break
        layout = drift.drift_layout(scenario, base, placer, until)
        if not any(_equal(layout, other) for other in layouts):
            layouts.append(layout)
    return [place_batch(scenario, layout, None, search, held=held, jobs=jobs, orders=orders)
            for layout in layouts]


def walkable(scenario: Scenario) -> bool:
    """Whether a walking layout can be made: services to lay, no reservations (which pin
    realtime)."""
    return bool(scenario.realtime_jobs) and not scenario.reservations


def hot_walk(scenario: Scenario) -> bool:
    """Whether the hot path (`walk=None`) makes the walking layout."""
    return WALK and WALK_MIN_GPUS <= scenario.G <= WALK_MAX_GPUS and walkable(scenario)


def walked(scenario: Scenario, base: np.ndarray, placer: RealtimePlacer,
           held: reservations.Holds, jobs: Jobs, orders: tuple[tuple[int, ...], ...],
           search: int) -> np.ndarray:
    """The batch work placed on the walking layout (RealtimePlacer.walking: each service's
    runs cut first in, first out)."""
    layout = _lay_out(placer.walking(), base, held)
    return place_batch(scenario, layout, None, search, held=held, jobs=jobs, orders=orders)


def _fresh_candidates(scenario: Scenario, base: np.ndarray, held: reservations.Holds,
                      jobs: Jobs, orders: tuple[tuple[int, ...], ...], search: int
                      ) -> list[np.ndarray]:
    """The fresh layouts (`FRESH_MODES`) the services can walk onto, batch work placed."""
    placer = RealtimePlacer(fresh.without_current(scenario), base)
    out = []
    for mode in FRESH_MODES:
        layout = _lay_out(placer.copy(**mode), base, held)
        if fresh.walk_on(scenario, layout) and swaps_hold(scenario, layout):
            out.append(place_batch(scenario, layout, None, search, held=held, jobs=jobs,
                                   orders=orders))
    return out


def _place_later(phased: RealtimePlacer, grid: np.ndarray) -> None:
    """Realtime's later layers into the gaps the batch work left, then its refill."""
    later = phased.copy()
    later.place(grid, "later")
    later.refill(grid)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """np.array_equal for two grids (same cells, same shape), by their bytes where they
    are of one dtype: fewer numpy calls, as fast compares every layout it builds."""
    if a.dtype != b.dtype:
        return bool(np.array_equal(a, b))
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def relaid(scenario: Scenario, best: np.ndarray, base: np.ndarray, held: reservations.Holds,
           jobs: Jobs, orders: tuple[tuple[int, ...], ...], search: int,
           placer: RealtimePlacer) -> list[np.ndarray]:
    """Step 6's second look: the first layout again, its ties (the GPUs that cost batch
    blocks nothing) broken by `consolidated`'s rank and then bottom-first, each with its
    batch work placed; the winner's batch placement says which blocks small jobs break,
    which no layout made before the batch work knows."""
    placers = [placer.copy(tail_first=False, stack=False, mirror=True)]
    if placer.largest > 1:
        rank = consolidated(scenario, best, placer.static_rank, placer.largest)
        placers.insert(0, placer.ranked(rank, tail_first=False, stack=False))
    return [place_batch(scenario, _lay_out(p, base, held), None, search, held=held, jobs=jobs,
                        orders=orders) for p in placers]


def consolidated(scenario: Scenario, grid: np.ndarray, tie: np.ndarray, largest: int
                 ) -> np.ndarray:
    """A rank per GPU (higher: better for realtime): GPUs outside every aligned block of
    `largest` GPUs first, then those whose block `grid` breaks for the most steps with
    running jobs or batch jobs smaller than `largest` (a service there costs the large
    jobs nothing), ties by `tie`."""
    T, G = grid.shape
    small = np.zeros(len(scenario.jobs) + 1, dtype=bool)  # the last entry: a free cell
    for i, job in enumerate(scenario.jobs):
        small[i] = isinstance(job, BatchJob) and (job.gpus < largest or job.running is not None)
    broken = small[np.where(grid < 0, len(scenario.jobs), grid)]
    whole = (G // largest) * largest
    steps = np.full(G, T + 1)  # outside every block: first
    steps[:whole] = np.repeat(
        broken[:, :whole].reshape(T, -1, largest).any(axis=2).sum(axis=0), largest)
    return np.lexsort((tie, steps)).argsort().astype(np.float64)


def default_search(scenario: Scenario) -> int:
    """The order search's budget when none is given: SEARCH_PLACEMENTS up to 16 GPUs,
    less beyond, as a placement scans more GPUs."""
    return SEARCH_PLACEMENTS * 16 // max(16, scenario.G)


def _lay_out(placer: RealtimePlacer, base: np.ndarray, held: reservations.Holds
             ) -> np.ndarray:
    """`base` (running and reserved jobs pinned) with every realtime layer `placer` places."""
    grid: np.ndarray = base.copy()
    placer.place(grid)
    placer.finish(grid)
    placer.refill(grid)
    held.release(grid)
    return grid


def realtime_last(scenario: Scenario, base: np.ndarray, placer: RealtimePlacer, search: int,
                  held: reservations.Holds, jobs: Jobs, orders: tuple[tuple[int, ...], ...]
                  ) -> np.ndarray | None:
    """Batch work first, as many GPUs per step kept spare as realtime's curves ask, then
    every realtime layer into the gaps it leaves: a service may then sit low while long
    small jobs take the top, which no layout placed before the batch work reaches.

    Services keep their current GPUs at step 0 (releasing them all there could break a
    swap limit); None where the swap limits still fail (the candidate is skipped).
    """
    kept = base.copy()
    current = [(i, list(job.current_gpus)) for i, job in enumerate(scenario.jobs)
               if isinstance(job, RealtimeJob) and job.current_gpus]
    for i, gpus in current:
        kept[0, gpus] = np.where(kept[0, gpus] == gridlib.FREE, i, kept[0, gpus])
    grid = place_batch(scenario, kept, placer.later_demand(later_only=False), search,
                       held=held, jobs=jobs, orders=orders, pair_step=False)
    for i, gpus in current:
        grid[0, gpus] = np.where(grid[0, gpus] == i, gridlib.FREE, grid[0, gpus])
    placer.place(grid, "all")
    placer.finish(grid)
    placer.refill(grid)
    held.release(grid)
    return grid if swaps_hold(scenario, grid) else None


def legal_around_reservations(scenario: Scenario, candidates: list[np.ndarray]
                              ) -> list[np.ndarray]:
    """The second pass's candidates within every swap limit: a safety net (no sound
    promise is known to fail there). None legal: the reservations are refused as input
    (exit code 2), never an illegal plan.
    """
    legal = [g for g in candidates if swaps_hold(scenario, g)]
    if not legal:
        r = scenario.reservations[0]
        raise InputError(f"fast found no plan in which realtime leaves the reserved block "
                         f"{r.first_gpu}-{r.first_gpu + r.gpus - 1} within its swap limit "
                         f"by step {r.start}; reserve a later start or another block",
                         job=r.id, field="reservations")
    return legal



def place_batch(scenario: Scenario, grid: np.ndarray, held_back: np.ndarray | None,
                search: int, compiled: bool | None = None, spill: float = -1.0,
                held: reservations.Holds | None = None,
                jobs: Jobs | None = None, pinned: frozenset[int] = frozenset(),
                orders: tuple[tuple[int, ...], ...] | None = None,
                before_pairs: list[tuple[np.ndarray, float]] | None = None,
                pair_step: bool = True) -> np.ndarray:
    """Batch jobs onto `grid` (a copy): the best of the value orders, then the order search
    and the pair step.

    `compiled` picks the decoder (None: the C one where it can run); both give one grid.
    `spill` prices reserved GPUs a job may take instead of waiting (Decoder.new).
    `held`: the reservations (their jobs already pinned; their blocks busy past the start).
    `jobs`: the scenario's job arrays (Jobs.of), when the caller already has them.
    `pinned`: batch jobs already written into `grid` (placed by the caller, not here).
    `orders`: value_orders(scenario, held), when the caller already has them.
    `before_pairs`: where given, the grid before the pair step is appended to it, with the
    batch value the step gained, when the step raised it. `pair_step`: False skips the
    pair step (the order search still runs).
    """
    grid = grid.copy()
    spare = None if held_back is None else (grid == gridlib.FREE).sum(axis=1) - held_back
    busy = grid >= 0 if held is None or held.batch_busy is None else \
        (grid >= 0) | held.batch_busy
    jobs = Jobs.of(scenario) if jobs is None else jobs
    if orders is None:
        orders = value_orders(scenario, held)
    if pinned:
        orders = tuple(tuple(i for i in order if i not in pinned) for order in orders)
    queued = orders[0] if orders else ()
    if isinstance(orders, Orders):  # (worked out once for every candidate of a plan)
        distinct, rows = orders.distinct, orders.rows
    else:
        distinct, rows = tuple(dict.fromkeys(orders)), None  # each once, first seen first
    searching = bool(queued) and search >= len(queued)
    # Two pair neighbourhoods, each from the order search's result, where it pays; the
    # better pass is kept (the back step on a tie).
    budgets = (search, search // FRONT_SHARE) if searching and pair_step and PAIRS \
        and search >= PAIR_MIN_PASSES * len(queued) else None
    if queued and compiled_for(scenario, compiled):  # the steps below in one C call
        searched, paired = best_searched(
            busy, spare, jobs, order_rows(distinct) if rows is None else rows, spill,
            search // len(queued) if searching else -1, budgets, PAIR_POLISH, SWAPS)
        if paired is not None:
            if before_pairs is not None and paired[2] > searched[2]:
                kept = grid.copy()
                write_spots(kept, searched[0], searched[1], jobs)
                before_pairs.append((kept, paired[2] - searched[2]))
            searched = paired
        write_spots(grid, searched[0], searched[1], jobs)
        return grid
    empty = Decoder.new(scenario, busy, spare, jobs, compiled, spill=spill)
    best, won = empty.best_of(distinct, rows)
    best_order = distinct[won] if won >= 0 else ()
    if searching and best is not None:
        best, order = improve_order(scenario, empty, best_order, best, search // len(queued))
        if budgets is not None:
            back = pairs_back(scenario, empty, order, best, budgets[0])
            ahead = pairs_front(scenario, empty, order, best, budgets[1])
            paired_pass = back if back.value >= ahead.value else ahead
            if before_pairs is not None and paired_pass.value > best.value:
                kept = grid.copy()
                best.write(scenario, kept)
                before_pairs.append((kept, paired_pass.value - best.value))
            best = paired_pass
    if best is not None:
        best.write(scenario, grid)
    return grid


def placing_around(scenario: Scenario, search: int, held: reservations.Holds, jobs: Jobs,
                   orders: tuple[tuple[int, ...], ...]
                   ) -> Callable[[np.ndarray, frozenset[int]], np.ndarray]:
    """place_batch with a plan's parts bound, for the steps that keep some batch jobs where
    they are (the ids in `kept`, already on the grid) and place the rest again: the stable
    starts and the window rebuilds."""
    def place(grid: np.ndarray, kept: frozenset[int]) -> np.ndarray:
        return place_batch(scenario, grid, None, search, held=held, jobs=jobs, orders=orders,
                           pinned=kept)
    return place


def value_orders(scenario: Scenario, held: reservations.Holds | None = None
                 ) -> Orders:
    """The queued batch jobs (not running, not reserved) in each of ORDERS."""
    skip = frozenset() if held is None else held.reserved
    queued = {i: job for i, job in enumerate(scenario.jobs)
              if isinstance(job, BatchJob) and not job.running and i not in skip}
    ranks = ({i: key(job, i) for i, job in queued.items()} for key in ORDERS)
    return Orders(tuple(sorted(queued, key=rank.__getitem__)) for rank in ranks)


# The order search can also try swapping the delayed job with the one at the target
# position (two same-priority jobs each cut by the other are a swap, not an insertion).
# Off by default: on the tuning seeds it gains 0.2-0.4% on average, but its denser plans
# left one world of the rolling replay (pipelines/simulate.py, high-04) 1.96% short of
# realtime demand under forecast error, over the 1% that replay promises.
SWAPS = False


def improve_order(scenario: Scenario, empty: Decoder, order: tuple[int, ...], best: Decoder,
                  packs: int) -> tuple[Decoder, tuple[int, ...]]:
    """First-improvement search over orders: move a delayed job ahead of others, keep gains.

    Returns the best pass and the order that gives it.

    The greedy decoder puts each job at its earliest free start, so the order alone decides
    who is delayed; moving a delayed (or left out) job forward (inserted, or swapped with
    the job there) is the change that can help it. A trial replays only the suffix it
    changes, from a saved prefix state. The compiled decoder runs the same search in C.
    """
    if isinstance(empty, _CDecoder) and isinstance(best, _CDecoder):
        out, final = empty.improve(order, best, packs, SWAPS)
        return out, tuple(final)
    current = list(order)
    budget = packs * max(1, len(order))  # in placements
    while budget > 0:
        prefix = _prefix_states(empty, current)
        movable = [a for a in range(1, len(current))
                   if best.start[current[a]] < 0
                   or best.start[current[a]] > scenario.batch_job_at(current[a]).arrival_step]
        improved = False
        # Front positions first: most gains come from pulling a delayed job to the head.
        for b in range(len(current) - 1):
            base = prefix[b]
            for a in (a for a in movable if a > b):
                if budget <= 0:
                    break
                trial = [*current[:b], current[a], *current[b:a], *current[a + 1 :]]
                budget -= len(trial) - b
                state = _gain(base, trial[b:], best)
                if state is None and SWAPS and a != b + 1 and budget > 0:
                    trial = list(current)
                    trial[a], trial[b] = trial[b], trial[a]
                    budget -= len(trial) - b
                    state = _gain(base, trial[b:], best)
                if state is not None:
                    current, best = trial, state
                    improved = True
                    break
            if improved or budget <= 0:
                break
        if not improved:
            break
    return best, tuple(current)


# The pair step (pairs_back) after the order search: it spends up to the order search's
# budget again, and runs where that budget is at least PAIR_MIN_PASSES passes (up to
# 64 GPUs at the default budget; beyond, one scan costs more than it finds). Each pair
# move kept is polished by PAIR_POLISH passes of the order search. Chosen on the tuning
# seeds of benchmarks/bench_quality.py (BENCHMARKS.md).
PAIRS = True
PAIR_MIN_PASSES = 4
PAIR_POLISH = 5
# pairs_front's budget: this share of the order search's (a quarter keeps most of its
# gain on the tuning seeds, at the cost the latency targets allow).
FRONT_SHARE = 4


def pairs_back(scenario: Scenario, empty: Decoder, order: tuple[int, ...], best: Decoder,
               budget: int) -> Decoder:
    """A large-neighbourhood step past the order search: two jobs sent to the back at once.

    At the insertion search's local optimum a job placed early can hold a block two
    others need in turn: sending it back alone helps nothing when the job after it then
    takes the same block, and no single insertion sends both. Each pair of positions,
    the front one first and before the last delayed job, is tried (a suffix replay from
    the saved prefix state); the first gain is kept and polished by a short order search
    (`PAIR_POLISH`), and the scan starts again, until a scan finds nothing or `budget`
    placements are spent.
    The compiled decoder runs the same step in C.
    """
    if isinstance(empty, _CDecoder) and isinstance(best, _CDecoder):
        return empty.pairs(order, best, budget, PAIR_POLISH, SWAPS)
    current = list(order)
    n = len(current)
    while budget > 0 and n > 2:
        prefix = _prefix_states(empty, current)
        # Sending two jobs back gains only if a job placed after the front one was
        # delayed (or left out): front positions up to the last such job are tried.
        last = max((p for p, i in enumerate(current)
                    if best.start[i] < 0
                    or best.start[i] > scenario.batch_job_at(i).arrival_step), default=-1)
        improved = False
        for a in range(min(n - 2, last)):
            for c in range(a + 1, n):
                if budget <= 0:
                    break
                trial = [j for p, j in enumerate(current) if p not in (a, c)]
                trial += [current[a], current[c]]
                budget -= n - a
                state = _gain(prefix[a], trial[a:], best)
                if state is not None:
                    best, polished = improve_order(scenario, empty, tuple(trial), state,
                                                   PAIR_POLISH)
                    budget -= PAIR_POLISH * n
                    current = list(polished)
                    improved = True
                    break
            if improved or budget <= 0:
                break
        if not improved:
            break
    return best


def pairs_front(scenario: Scenario, empty: Decoder, order: tuple[int, ...], best: Decoder,
                budget: int) -> Decoder:
    """The pair step's other neighbourhood: a delayed job and another brought to the front.

    A delayed job moved to the head alone often only displaces the next job that wants
    its block; moved there together with a job from behind it, the two can land on
    blocks no single insertion reaches. Each delayed job, in order, is tried with each
    job behind it, the delayed one first, at the head of the order (a full replay); the
    first gain is kept and polished by a short order search (`PAIR_POLISH`), and the
    scan starts again, until a scan finds nothing or `budget` placements are spent.
    The compiled decoder runs the same step in C.
    """
    if isinstance(empty, _CDecoder) and isinstance(best, _CDecoder):
        return empty.pairs(order, best, budget, PAIR_POLISH, SWAPS, front=True)
    current = list(order)
    n = len(current)
    while budget > 0 and n > 2:
        delayed = [p for p, i in enumerate(current)
                   if best.start[i] < 0
                   or best.start[i] > scenario.batch_job_at(i).arrival_step]
        improved = False
        for a in delayed:
            for c in range(a + 1, n):
                if budget <= 0:
                    break
                trial = [current[a], current[c]]
                trial += [j for p, j in enumerate(current) if p not in (a, c)]
                budget -= n
                state = _gain(empty, trial, best)
                if state is not None:
                    best, polished = improve_order(scenario, empty, tuple(trial), state,
                                                   PAIR_POLISH)
                    budget -= PAIR_POLISH * n
                    current = list(polished)
                    improved = True
                    break
            if improved or budget <= 0:
                break
        if not improved:
            break
    return best


def _gain(base: Decoder, suffix: list[int], best: Decoder) -> Decoder | None:
    """The state after replaying `suffix` from `base`, if it beats `best`; else None."""
    state = base.copy()
    tail_value = state.pack(suffix)
    return state if base.value + tail_value > best.value + 1e-9 else None


def _prefix_states(empty: Decoder, order: list[int]) -> list[Decoder]:
    """The decoder state before each position of `order`, for suffix replays."""
    state = empty.copy()
    out = []
    for i in order:
        out.append(state.copy())
        state.pack((i,))
    return out
