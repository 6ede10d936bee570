"""One scenario file planned, a plan file checked against its scenario, plans drawn.

What `gpuplan plan`, `check` and `show` do, below the command line. The plan path stays
light: no solver, pandas or matplotlib unless the policy or a picture asks for one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from allocator import policies
from allocator.core import atomic, limits
from allocator.core.errors import InputError
from allocator.core.readers import read_json
from allocator.model import Scenario
from allocator.plan import Plan, make_plan
from allocator.scenario_io import load_scenario, scenario_to_dict
from allocator.scenarios import SPECS, generate
from allocator.validator import compute_metrics, metrics_agree, violations
from pipelines.cliutil import distinct_outputs

SOLVERS = ("highs", "cbc")


@dataclass(frozen=True)
class PlanArgs:
    """What `gpuplan plan` reads."""

    scenario: Path
    policy: str
    out: Path
    png: Path | None
    time_limit: float  # full: solver seconds
    solver: str  # full: highs | cbc
    lp_bound: bool  # full: also the LP-relaxation bound
    search: int | None  # fast: order-search budget (None: scaled to the cluster)
    clear_blocks: bool  # fast: step 9, services moved out of delayed jobs' windows
    # fast: step 8, replans with one delayed job pinned earlier (0: none; None: the hot
    # path's own, `fast.hot_pin_trials`)
    pin_trials: int | None
    bound: bool | None  # prove an upper bound: None where cheap, True always, False never
    block_bound: float | None  # seconds for the block-capacity relaxation, or None
    mirror: bool = False  # fast: one more realtime layout, stacked at the bottom
    exchange: bool = False  # fast: services hand GPU runs to each other (step 6)
    # fast: step 8, replans with one started job held back a step (0: none; None: the hot
    # path's own, `fast.hot_defer_trials`)
    defer_trials: int | None = None
    hops: int = 0  # fast: step 9, rounds of realtime hops
    trial_passes: int = 1  # fast: step 8, passes of the trials until one lifts nothing
    relayout: bool = False  # fast: step 6's second look at the first layout (17-64 GPUs)
    light_rounds: bool = True  # fast: step 9's light rounds on the hot path (10-16 GPUs)
    rebuilds: bool | None = None  # fast: the window rebuilds last (None: by cluster size)
    refine_below: float = 0.0  # fast: a plan below this share of its bound made again deeper


def picture(scenario: Scenario) -> dict:
    """What the grid picture needs from the scenario: node boundaries and step length."""
    return {"node_size": scenario.cluster.node_size,
            "step_minutes": scenario.cluster.step_minutes}


def _checked(a: PlanArgs) -> Scenario:
    """The scenario, once every option is known good; nothing is written before."""
    try:
        loaded = load_scenario(a.scenario)
        if a.policy not in policies.POLICIES:
            raise InputError(f"unknown policy {a.policy!r}; choose from "
                             f"{', '.join(sorted(policies.POLICIES))}", field="--policy")
        if loaded.reservations and a.policy in ("fifo", "priority"):
            raise InputError(f"policy {a.policy} is MODEL.md's baseline and ignores "
                             "reservations; use fast, full or backfill", field="reservations")
    except InputError as err:
        raise err.located(str(a.scenario)) from None
    limits.finite(a.time_limit, "--time-limit", low=0, low_open=True, high=limits.MAX_SECONDS)
    if a.solver not in SOLVERS:
        raise InputError(f"unknown solver {a.solver!r}; choose from {', '.join(SOLVERS)}",
                         field="--solver")
    distinct_outputs([a.scenario], [a.out, *([a.png] if a.png else [])])
    for target in (a.out, a.png):
        if target is not None:
            atomic.writable_target(target)
    return loaded


def plan_file(a: PlanArgs) -> Plan:
    """Plan the scenario with the policy; write the plan (and its picture) together or not
    at all. InputError on bad input, before anything is written."""
    loaded = _checked(a)
    options: dict = {}
    if a.policy == "full":
        options = {"time_limit": a.time_limit, "solver": a.solver, "lp_bound": a.lp_bound}
    elif a.policy == "fast":
        options = {"clear_blocks": a.clear_blocks, "pin_trials": a.pin_trials,
                   "defer_trials": a.defer_trials, "hops": a.hops,
                   "trial_passes": a.trial_passes, "mirror": a.mirror,
                   "exchange": a.exchange, "relayout": a.relayout}
        if not a.light_rounds:
            options["hot_hops"] = 0
        if a.rebuilds is not None:
            options["rebuilds"] = a.rebuilds
        if a.search is not None:
            options["search"] = a.search
    mode = ("block" if a.block_bound else "off" if a.bound is False else "on" if a.bound
            else "auto")
    try:  # a policy can refuse the scenario too (fast: a reservation it cannot honour)
        result = make_plan(loaded, a.policy, bound=mode, block_seconds=a.block_bound or 0.0,
                           refine_below=a.refine_below, **options)
    except InputError as err:
        raise err.located(str(a.scenario)) from None
    files: dict[Path, str | bytes] = {a.out: result.to_json()}
    if a.png:
        from allocator.render import render_png

        files[a.png] = render_png([result.to_dict()], **picture(loaded))
    atomic.write_all(files)  # the plan and its picture together, or neither
    return result


# ---------------------------------------------------------------- reading and checking plans


def read_plan(path: Path) -> dict:
    """A plan file: a JSON object whose grid is rows of job ids (strings) or nulls."""
    body = read_json(path)
    if not isinstance(body, dict) or not isinstance(body.get("grid"), list):
        raise InputError("a plan is a JSON object with a grid", field="grid")
    cells = 0  # a ragged grid is read: whether it is legal is the checker's verdict
    for t, row in enumerate(body["grid"]):
        if not isinstance(row, list):
            raise InputError("each grid row is a list", field=f"grid[{t}]")
        cells += len(row)
        for g, cell in enumerate(row):
            if cell is not None and not isinstance(cell, str):
                raise InputError(f"must be a job id or null, got {json.dumps(cell)}",
                                 field=f"grid[{t}][{g}]")
    if cells > limits.MAX_CELLS:
        raise InputError(f"a grid beyond gpuplan's limit of {limits.MAX_CELLS} cells",
                         field="grid")
    metrics = body.get("metrics", {})
    if not isinstance(metrics, dict):
        raise InputError("must be an object", field="metrics")
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise InputError(f"must be a finite number, got {json.dumps(value)}",
                             field=f"metrics.{key}")
    for key in ("kinds", "starts"):
        if key in body and not isinstance(body[key], dict):
            raise InputError("must be an object", field=key)
    return body


def _read_located(path: Path) -> dict:
    try:
        return read_plan(path)
    except InputError as err:
        raise err.located(str(path)) from None


def check_plan(scenario_file: Path, plan: Path) -> list[str]:
    """The outside checker: the grid's illegalities, else its metrics that disagree with
    those recomputed from the grid alone; empty when the plan holds."""
    try:
        loaded = load_scenario(scenario_file)
    except InputError as err:
        raise err.located(str(scenario_file)) from None
    body = _read_located(plan)
    problems = violations(loaded, body["grid"])
    if not problems:
        problems = metrics_agree(body.get("metrics", {}), compute_metrics(loaded, body["grid"]))
    return problems


def show_plans(plans: list[Path], png: Path) -> None:
    """Draw plans top to bottom into one PNG."""
    from allocator.render import render_png

    bodies = [_read_located(path) for path in plans]
    distinct_outputs(list(plans), [png])
    atomic.write_bytes(png, render_png(bodies))


def write_scenarios(out_dir: Path, seed: int) -> list[Path]:
    """The seven benchmark scenarios (allocator/scenarios.py), generated with the seed."""
    written = []
    for name in SPECS:
        body = json.dumps(scenario_to_dict(generate(name, seed)), indent=1)
        atomic.write_text(out_dir / f"{name}.json", body + "\n")
        written.append(out_dir / f"{name}.json")
    return written
