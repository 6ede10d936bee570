"""fast keeps the best of the layouts its docstring promises, not just the first one.

fast builds candidate grids (allocator/policies/fast.py, steps 2-6): batch work after
realtime placed as a curve; the same after realtime placed tail-first, and stacked on the
top GPUs; batch work keeping
realtime's later layers spare, then those layers placed, without and with spilling onto
the reserve at realtime's cheapest shortfall price; and the baselines. Each is rebuilt
here from the same public pieces, and fast's plan must be worth at least each of them.

Mutation testing found that dropping the tail-first layout, or mispricing the spill,
passed every test: the quality sets rarely need those layouts. Here any scenario where one
of them is strictly the best catches the loss. (Reservations are left out: their pins
are tested in tests/test_reservations.py.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from allocator import grid as gridlib
from allocator.model import BatchJob, Cluster, RealtimeJob, Running, Scenario, Weights
from allocator.policies import baselines, layout_climb
from allocator.policies import fast as fastmod
from allocator.policies.decoder import Jobs
from allocator.policies.fast import (
    LAST_SHARE,
    default_search,
    fast,
    place_batch,
    value_orders,
)
from allocator.policies.realtime import RealtimePlacer, place_realtime
from allocator.scenario_io import load_scenario
from allocator.validator import violations
from tests.strategies import contended_scenarios, examples


def _training(i: int, priority: float, gpus: int, steps: int,
              running: Running | None = None) -> BatchJob:
    """A training job "tr{i}" for the drawn cases below, as hypothesis printed them."""
    return BatchJob(id=f"tr{i}", kind="training", priority=priority, gpus=gpus,
                    duration_steps=steps, running=running)


def layouts(scenario: Scenario) -> dict[str, np.ndarray]:
    """The grids fast's docstring describes, built independently of fast()."""
    search = default_search(scenario)
    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    out = {}
    first = base.copy()
    place_realtime(scenario, first)
    out["realtime first"] = place_batch(scenario, first, None, search)
    tails = base.copy()
    place_realtime(scenario, tails, tail_first=True)
    out["realtime tail-first"] = place_batch(scenario, tails, None, search)
    stacked = base.copy()
    place_realtime(scenario, stacked, stack=True)
    if fastmod.CLIMB_FROM and scenario.realtime_jobs and scenario.G <= fastmod.CLIMB_MAX_GPUS:
        # up to 16 GPUs fast climbs this layout first (tests/test_layout_climb.py)
        stacked = layout_climb.climb(scenario, stacked, Jobs.of(scenario),
                                     value_orders(scenario), fastmod.CLIMB_PASSES)
    out["realtime stacked"] = place_batch(scenario, stacked, None, search)
    if scenario.realtime_jobs:
        around = base.copy()
        placer = RealtimePlacer(scenario, around)
        placer.place(around, "first")
        placer.finish(around)
        held_back = placer.later_demand()
        cheapest = min(scenario.weights.realtime_penalty * j.priority
                       for j in scenario.realtime_jobs)
        for name, spill in (("later layers kept spare", -1.0),
                            ("later layers, spill at the cheapest shortfall", cheapest)):
            layout = place_batch(scenario, around, held_back, search, spill=spill,
                                 pair_step=spill < 0)  # as fast: no pair step with spill
            placer.copy().place(layout, "later")
            out[name] = layout
        # with fast's budget for it: a quarter of the search (more search can do better)
        last = realtime_last_layout(scenario, base, search // LAST_SHARE)
        if last is not None:
            out["realtime last"] = last
    out["priority"] = baselines.priority(scenario)
    out["fifo"] = baselines.fifo(scenario)
    return out


def realtime_last_layout(scenario: Scenario, base: np.ndarray, search: int
                         ) -> np.ndarray | None:
    """Batch work first, every realtime GPU of the curves kept spare, services on their
    current GPUs at step 0; then realtime into the gaps. None where a swap limit breaks
    (fast then skips the candidate)."""
    grid = base.copy()
    current = [(i, list(j.current_gpus)) for i, j in enumerate(scenario.jobs)
               if isinstance(j, RealtimeJob) and j.current_gpus]
    for i, gpus in current:
        for g in gpus:
            if grid[0, g] == gridlib.FREE:
                grid[0, g] = i
    placer = RealtimePlacer(scenario, base)
    grid = place_batch(scenario, grid, placer.later_demand(later_only=False), search,
                       pair_step=False)  # as fast: no pair step for this candidate
    for i, gpus in current:
        for g in gpus:
            if grid[0, g] == i:
                grid[0, g] = gridlib.FREE
    placer.place(grid, "all")
    placer.finish(grid)
    swaps = [p for p in violations(scenario, gridlib.to_ids(scenario, grid))
             if "constraint 4" in p]
    return None if swaps else grid


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_fast_is_worth_at_least_each_of_its_layouts(scenario: Scenario) -> None:
    value = gridlib.objective(scenario, fast(scenario))
    for name, grid in layouts(scenario).items():
        assert value >= gridlib.objective(scenario, grid) - 1e-6, name


def test_fast_keeps_the_first_layout_the_stacked_one_equals() -> None:
    """A case a 4,000-example run drew (6 GPUs, 2 steps, one running job, a service
    wanting 3 GPUs then none): the stacked layout equals the first, and the climb from it
    earns 28.0 where the first unclimbed earns 35.0. fast used to climb the shared layout
    in place, losing the first; it now keeps both."""
    job = _training
    scenario = Scenario(
        cluster=Cluster(gpus=6, horizon_steps=2, node_size=1, step_minutes=60),
        weights=Weights(realtime_penalty=8.0, decay=1.0),
        jobs=(job(0, 5.0, 2, 2), job(1, 2.0, 1, 2), job(2, 1.0, 1, 1), job(3, 3.0, 4, 2),
              job(4, 1.0, 1, 1), job(5, 6.0, 2, 1), job(6, 1.0, 1, 1, Running(3, 1)),
              RealtimeJob(id="re7", priority=1.0, demand=(3, 0), swap_limit=2)),
        name="contended")
    value = gridlib.objective(scenario, fast(scenario))
    assert value >= gridlib.objective(scenario, layouts(scenario)["realtime first"]) - 1e-6


TAIL_FIRST_WINS = Path(__file__).parent / "data" / "quality_cases" / "tail_first_wins.json"


def test_fast_keeps_the_tail_first_layout_where_it_alone_is_best() -> None:
    """The tail-first layout is strictly the best in about 1 of 400 drawn scenarios with
    8-32 GPUs and none of the smaller ones, too rare for the property above to find: this
    one (found by drawing, 26 GPUs, 14 steps) is kept as a fixed case."""
    scenario = load_scenario(TAIL_FIRST_WINS)
    values = {name: gridlib.objective(scenario, g) for name, g in layouts(scenario).items()}
    tail = values.pop("realtime tail-first")
    values.pop("realtime stacked")  # which reaches the same plan here
    assert tail > max(values.values()) + 1e-6, (tail, values)  # the case still tells
    assert gridlib.objective(scenario, fast(scenario)) >= tail - 1e-6


MIRROR_WINS = Path(__file__).parent / "data" / "quality_cases" / "mirror_wins.json"


def mirrored_layout(scenario: Scenario) -> np.ndarray:
    """Realtime stacked at the bottom (`fast(mirror=True)`'s extra layout), then batch."""
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    placer = RealtimePlacer(scenario, grid).copy(stack=True, mirror=True)
    placer.place(grid)
    placer.finish(grid)
    return place_batch(scenario, grid, None, default_search(scenario))


def test_fast_with_mirror_keeps_the_mirrored_layout_where_it_alone_is_best(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Tuning seed 1047 (8 GPUs): realtime stacked at the bottom beats every default layout
    by 2%; without the layout climb (which reaches past it there: off here, so the mirror
    is what is tested, and so is the light round of hops) fast finds it only when asked
    (`mirror=True`)."""
    monkeypatch.setattr(fastmod, "CLIMB_FROM", None)
    monkeypatch.setattr(fastmod, "HOT_HOPS", 0)
    scenario = load_scenario(MIRROR_WINS)
    values = {name: gridlib.objective(scenario, g) for name, g in layouts(scenario).items()}
    mirrored = gridlib.objective(scenario, mirrored_layout(scenario))
    assert mirrored > 1.01 * max(values.values()), (mirrored, values)  # the case still tells
    assert gridlib.objective(scenario, fast(scenario, mirror=True)) >= mirrored - 1e-6
    assert gridlib.objective(scenario, fast(scenario)) < mirrored - 1e-6


def _mirror_past_the_margin() -> Scenario:
    """A drawn case (a 4,000-example run): a 14-GPU replan whose opened layout (26.0) beat
    the others (24.0) by the replan margin, until the mirrored layout (25.0) counted among
    the others."""
    return Scenario(
        cluster=Cluster(gpus=14, horizon_steps=2, node_size=1, step_minutes=60),
        weights=Weights(realtime_penalty=0.0, decay=1.0),
        jobs=(*(_training(i, 1.0, gpus, 2) for i, gpus in enumerate((1, 2, 2, 4, 4))),
              RealtimeJob(id="re5", priority=1.0, demand=(2, 0), swap_limit=2,
                          current_gpus=(0, 1, 2))),
        name="contended")


def _mirror_before_the_light_rounds() -> Scenario:
    """A drawn case (a 4,000-example run): on 8 GPUs the mirrored layout's plan (143.0)
    beat the others' best (140.0), which the light rounds would have lifted to 156.0; they
    ran on the mirrored plan instead and found nothing."""
    return Scenario(
        cluster=Cluster(gpus=8, horizon_steps=12, node_size=1, step_minutes=60),
        weights=Weights(realtime_penalty=8.0, decay=1.0),
        jobs=(_training(0, 1.0, 1, 12), _training(1, 5.0, 2, 12),
              *(_training(i, 1.0, 1, 12) for i in range(2, 7)),
              RealtimeJob(id="re7", priority=1.0, demand=(1, 3, *(0,) * 8, 1, 0),
                          swap_limit=1, current_gpus=(0, 2)),
              RealtimeJob(id="re8", priority=2.0, demand=(*(0,) * 11, 3), swap_limit=1)),
        name="contended")


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
@example(scenario=_mirror_past_the_margin())
@example(scenario=_mirror_before_the_light_rounds())
def test_the_mirrored_layout_only_adds_a_candidate(scenario: Scenario) -> None:
    """With `mirror`, fast is legal and worth at least its default plan (a superset of
    candidates, and the plan made without it the floor)."""
    grid = fast(scenario, mirror=True)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    default = gridlib.objective(scenario, fast(scenario))
    assert gridlib.objective(scenario, grid) >= default - 1e-6


# Generated scenarios (tuning seeds of benchmarks/bench_quality.py) where one layout alone
# keeps the plan: the stacked one on 8 GPUs with the service's three base layers, and on
# 12 GPUs where the services must move to the unaligned top once the running jobs there
# end (realtime last reaches the same plan on the 8-GPU one, so it is left out there);
# realtime last on an 8-GPU one (seed 1068) where only batch work placed before realtime
# reaches the optimum.
ALONE_BEST = [("stack_wins.json", "realtime stacked", 1.3, ("realtime last",)),
              ("stack_moves_wins.json", "realtime stacked", 1.3, ("realtime last",)),
              ("realtime_last_wins.json", "realtime last", 1.02, ())]


@pytest.mark.parametrize(("name", "layout", "margin", "same"), ALONE_BEST,
                         ids=[case[0].removesuffix(".json") for case in ALONE_BEST])
def test_fast_keeps_a_layout_where_it_alone_is_best(name: str, layout: str, margin: float,
                                                    same: tuple[str, ...],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """(Layout climb off: on seed 1068 the climbed stacked layout comes within 0.1% of
    realtime last, so the case would no longer tell.)"""
    monkeypatch.setattr(fastmod, "CLIMB_FROM", None)
    scenario = load_scenario(Path(__file__).parent / "data" / "quality_cases" / name)
    values = {n: gridlib.objective(scenario, g) for n, g in layouts(scenario).items()}
    best = values.pop(layout)
    for other in same:
        values.pop(other, None)
    assert best > margin * max(values.values()), (best, values)  # the case still tells
    assert gridlib.objective(scenario, fast(scenario)) >= best - 1e-6


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_the_stacked_layout_is_legal(scenario: Scenario) -> None:
    """Realtime moving off its current GPUs mid-plan stays within its swap limit."""
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    place_realtime(scenario, grid, stack=True)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []


def _two_gpu_service_beside_a_running_pair() -> Scenario:
    """10 GPUs; a 2-GPU service (swap limit 2) all day; a running job on GPUs 8-9, the two
    outside every 8-GPU block, for 3 steps; an 8-GPU job queued."""
    from allocator.scenario_io import scenario_from_dict

    return scenario_from_dict({
        "name": "handover", "cluster": {"gpus": 10, "horizon_steps": 12, "node_size": 8},
        "jobs": [
            {"id": "serve", "kind": "realtime", "priority": 10, "demand": [2] * 12,
             "swap_limit": 2},
            {"id": "run", "kind": "training", "priority": 1, "gpus": 2, "duration_steps": 3,
             "running": {"first_gpu": 8, "remaining_steps": 3}},
            {"id": "big", "kind": "training", "priority": 5, "gpus": 8, "duration_steps": 6}]})


def test_the_stacked_layout_moves_both_layers_off_the_block_a_gpu_a_step() -> None:
    """Both layers want GPUs 8-9, free from step 3: the first moves at step 3 (a release
    and an acquire), the second a step later (the budget at step 3 is spent), and neither
    head is dropped: 2 GPUs every step, off the 8-GPU block from step 4, the big job on
    it from there. (The head's release was once charged only when the head was placed,
    after the second layer's hand-over had spent it: a GPU short for three steps.)"""
    scenario = _two_gpu_service_beside_a_running_pair()
    grid = gridlib.empty(scenario)
    gridlib.pin_running(scenario, grid)
    place_realtime(scenario, grid, stack=True)
    assert violations(scenario, gridlib.to_ids(scenario, grid)) == []
    held = (grid == 0).sum(axis=1)
    assert (held == 2).all(), held
    assert (grid[4:, 8:] == 0).all() and not (grid[4:, :8] == 0).any()
    plan = fast(scenario)
    assert (plan[4:10, :8] == 2).all()


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios())
def test_the_realtime_last_layout_is_kept_only_when_legal(scenario: Scenario) -> None:
    """A realtime-last candidate fast keeps passes the validator."""
    from allocator import reservations
    from allocator.policies.decoder import Jobs
    from allocator.policies.fast import realtime_last, value_orders

    base = gridlib.empty(scenario)
    gridlib.pin_running(scenario, base)
    held = reservations.holds(scenario)
    search = default_search(scenario)
    grid = realtime_last(scenario, base, RealtimePlacer(scenario, base), search, held,
                         Jobs.of(scenario), value_orders(scenario, held))
    if grid is not None:
        assert violations(scenario, gridlib.to_ids(scenario, grid)) == []


@settings(max_examples=examples(0.5))
@given(scenario=contended_scenarios(), data=st.data())
def test_fast_swap_check_agrees_with_the_validator(scenario: Scenario, data: st.DataObject
                                                   ) -> None:
    """`swaps_hold` says yes exactly where the validator finds no swap-limit violation, on
    fast's grid with some realtime cells moved to other free GPUs (often too many)."""
    from allocator.policies.fast import swaps_hold

    grid = fast(scenario)
    for _ in range(data.draw(st.integers(0, 6))):
        cells = np.argwhere(grid >= 0)
        realtime = [(t, g) for t, g in cells.tolist()
                    if not isinstance(scenario.jobs[grid[t, g]], BatchJob)]
        free = np.argwhere(grid == gridlib.FREE).tolist()
        if not realtime or not free:
            break
        t, g = data.draw(st.sampled_from(realtime))
        same_step = [h for u, h in free if u == t]
        if not same_step:
            continue
        h = data.draw(st.sampled_from(same_step))
        grid[t, h], grid[t, g] = grid[t, g], gridlib.FREE
    swaps = [p for p in violations(scenario, gridlib.to_ids(scenario, grid))
             if "constraint 4" in p]
    event(f"a swap limit broken: {bool(swaps)}")
    assert swaps_hold(scenario, grid) == (not swaps), swaps


def test_plan_command_passes_mirror_to_fast(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`gpuplan plan --mirror` plans with the extra layout: on the fixed case (layout climb
    and light hops off, as above) its objective is the mirrored one's, above the default
    command's."""
    import json

    monkeypatch.setattr(fastmod, "CLIMB_FROM", None)
    monkeypatch.setattr(fastmod, "HOT_HOPS", 0)

    from typer.testing import CliRunner

    from pipelines.cli import build_app

    runner = CliRunner()
    values = {}
    for flag in ([], ["--mirror"]):
        out = tmp_path / f"plan{len(flag)}.json"
        result = runner.invoke(build_app(), ["plan", str(MIRROR_WINS), "--out", str(out),
                                             "--refine-below", "0", *flag])
        assert result.exit_code == 0, result.output
        values[bool(flag)] = json.loads(out.read_text())["metrics"]["objective"]
    scenario = load_scenario(MIRROR_WINS)
    assert values[True] == pytest.approx(gridlib.objective(scenario, fast(scenario,
                                                                          mirror=True)))
    assert values[True] > values[False]
