"""`gpuplan starvation`'s pipeline: options checked first, targets judged from the metrics,
the report and metrics written (the replays themselves are pipelines.simulate's, tested there)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from allocator.core.errors import InputError
from pipelines import starvation
from pipelines.starvation import UNGUARDED, StarveArgs, checks, run_starvation
from pipelines.worlds import World


def world(level_load: float) -> World:
    return World(name="w", gpus=16, steps=48, jobs=(), services=(),
                 meta={"level_load": level_load})


def metrics(value: float = 100.0, started8: float = 4.0, p95_8: float = 6.0,
            shortfall: float = 0.5, estimate: float = 80.0) -> dict[str, float]:
    return {"value": value, "utilization": 0.8, "rt_shortfall_pct": shortfall,
            "arrived": 14.0, "started": 10.0 + started8,
            "arrived_1gpu": 10.0, "started_1gpu": 10.0, "p95wait_1gpu": 4.0,
            "arrived_8gpu": 4.0, "started_8gpu": started8, "p95wait_8gpu": p95_8,
            "estimate_1h_pct": estimate}


def suite(**fast) -> dict[str, dict[str, float]]:
    base = metrics(value=90.0, shortfall=1.0, estimate=30.0)
    return {"fast": metrics(**fast), UNGUARDED: metrics(value=100.0), "fifo": base,
            "priority": base, "backfill": base}


def test_every_target_met_when_the_figures_say_so():
    assert all(ok for _, ok, _ in checks(world(0.5), suite()))


@pytest.mark.parametrize(("fast", "target"), [
    ({"started8": 3.0}, "every job starts within the world"),
    ({"p95_8": 9.0}, "8-GPU p95 wait <= 2 x 1-GPU p95 wait"),
    ({"value": 96.0}, "value loss against no guard <= 3%"),
    ({"shortfall": 2.0}, "value above priority at no more realtime shortfall"),
    ({"estimate": 50.0}, ">= 70% of start estimates within 1 h, >= 2x backfill's share"),
])
def test_each_target_missed_on_its_own_figure(fast, target):
    verdict = {name: ok for name, ok, _ in checks(world(0.5), suite(**fast))}
    assert not verdict[target]
    assert sum(not ok for ok in verdict.values()) <= 2  # shortfall misses both baselines


def test_an_overloaded_world_judges_shares_not_completion():
    names = [name for name, _, _ in checks(world(1.5), suite(started8=1.0))]
    assert "every size class starts >= half the overall share" in names
    assert "every job starts within the world" not in names
    verdict = {name: ok for name, ok, _ in checks(world(1.5), suite(started8=1.0))}
    assert not verdict["every size class starts >= half the overall share"]  # 25% < 39%


def test_unknown_world_is_bad_input_before_any_replay(tmp_path, monkeypatch):
    monkeypatch.setattr(starvation, "measure", lambda *a: pytest.fail("replayed"))
    args = StarveArgs(worlds="fit-00,nowhere", seed=7, age=0.25, reservations=1,
                      age_in_plan=False, out=tmp_path / "out", workers=1)
    with pytest.raises(InputError) as caught:
        run_starvation(args)
    assert caught.value.field == "--worlds" and "'nowhere'" in caught.value.message
    assert not (tmp_path / "out").exists()


def test_the_command_writes_report_and_metrics(tmp_path, monkeypatch):
    from pipelines.cli import build_app

    seen = {}

    def measure(worlds, config, workers, baseline_margin):
        seen.update(names=[w.name for w in worlds], config=config, workers=workers,
                    baseline_margin=baseline_margin)
        return {w.name: suite() for w in worlds}

    monkeypatch.setattr(starvation, "measure", measure)
    monkeypatch.setattr(starvation, "starve_world", lambda name, seed: world(0.5))
    out = tmp_path / "out"
    result = CliRunner().invoke(build_app("starvation"), [
        "starvation", "--worlds", "fit-00", "--age", "0.5", "--reservations", "2",
        "--workers", "1", "--margin", "0.3", "--baseline-margin", "0.2",
        "--half-node-reservations", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"report -> {out / 'report.md'}"
    assert seen["workers"] == 1
    assert (seen["config"].age, seen["config"].reservations, seen["config"].guard) == (
        0.5, 2, True)
    assert (seen["config"].margin, seen["baseline_margin"]) == (0.3, 0.2)
    assert seen["config"].half_node_reservations == 1
    assert json.loads((out / "metrics.json").read_text()) == {"w": suite()}
    report = (out / "report.md").read_text()
    assert "--worlds fit-00 --seed 7 --age 0.5 --reservations 2" in report
    assert "**6 of 6 target checks met.**" in report


@pytest.mark.parametrize("field", ["margin", "baseline_margin"])
@pytest.mark.parametrize("value", [-0.1, float("nan"), 11.0])
def test_a_margin_out_of_range_is_bad_input_before_any_replay(tmp_path, monkeypatch, field,
                                                              value):
    monkeypatch.setattr(starvation, "measure", lambda *a: pytest.fail("replayed"))
    args = StarveArgs(worlds="fit-00", seed=7, age=0.25, reservations=1, age_in_plan=False,
                      out=tmp_path / "out", workers=1, **{field: value})
    with pytest.raises(InputError) as caught:
        run_starvation(args)
    assert caught.value.field == "--" + field.replace("_", "-")


def test_fast_gets_its_margin_guarded_and_not_the_baselines_theirs(monkeypatch):
    seen = []

    def run_tasks(tasks, workers):
        seen.extend((p, c.margin, c.guard) for _, p, c in tasks)
        return [(w.name, p, {"policy": p}, None) for w, p, _ in tasks]

    monkeypatch.setattr(starvation, "run_tasks", run_tasks)
    config = starvation.SimConfig(guard=True, margin=0.4)
    out = starvation.measure([world(0.5)], config, 1, baseline_margin=0.15)
    assert sorted(seen) == sorted([("fast", 0.4, True), ("fifo", 0.15, True),
                                   ("priority", 0.15, True), ("backfill", 0.15, True),
                                   ("fast", 0.4, False)])
    assert out["w"][UNGUARDED] == {"policy": "fast"}
    assert out["w"]["fast"] == {"policy": "fast"}
    assert set(out["w"]) == {"fast", "fifo", "priority", "backfill", UNGUARDED}


@pytest.mark.parametrize(("field", "flag"), [("age", "--age"), ("reservations",
                                              "--reservations"),
                                             ("half_nodes", "--half-node-reservations")])
def test_a_negative_count_names_its_own_flag(tmp_path, monkeypatch, field, flag):
    monkeypatch.setattr(starvation, "measure", lambda *a: pytest.fail("replayed"))
    given = {"age": 0.25, "reservations": 1, field: -1}
    args = StarveArgs(worlds="fit-00", seed=7, age_in_plan=False, out=tmp_path / "out",
                      workers=1, **given)
    with pytest.raises(InputError) as caught:
        run_starvation(args)
    assert caught.value.field == flag
