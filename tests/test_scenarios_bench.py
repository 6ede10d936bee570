"""The bundled benchmark scenarios: regenerable, legal under every policy, fast never behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from allocator.plan import make_plan
from allocator.scenario_io import load_scenario, scenario_to_dict
from allocator.scenarios import SPECS, generate
from benchmarks import bench

SCENARIO_DIR = Path(__file__).resolve().parents[1] / "data" / "scenarios"


@pytest.mark.parametrize("name", list(SPECS))
def test_bundled_file_is_what_the_generator_writes(name: str) -> None:
    on_disk = json.loads((SCENARIO_DIR / f"{name}.json").read_text())
    assert on_disk == json.loads(json.dumps(scenario_to_dict(generate(name, 7))))


@pytest.mark.parametrize("name", list(SPECS))
def test_generator_is_deterministic_and_seed_sensitive(name: str) -> None:
    assert generate(name, 7) == generate(name, 7)
    assert generate(name, 7) != generate(name, 8)


def test_scenarios_have_the_articles_sizes() -> None:
    sizes = {name: (generate(name).G, len(generate(name).jobs)) for name in SPECS}
    assert sizes == {
        "mixed-control": (8, 10), "realtime-contention": (8, 8), "training-heavy": (8, 16),
        "large-mixed": (14, 16), "oversubscribed": (8, 9), "scale": (64, 30),
        "uniform-priority": (14, 16),
    }


def test_uniform_priority_is_large_mixed_with_equal_priorities() -> None:
    mixed, uniform = generate("large-mixed"), generate("uniform-priority")
    assert [j.id for j in mixed.jobs] == [j.id for j in uniform.jobs]
    assert {j.priority for j in uniform.jobs} == {1.0}


@pytest.mark.parametrize("name", list(SPECS))
def test_scenario_is_contended(name: str) -> None:
    """More batch work than fits, and a realtime peak that strands GPUs when reserved."""
    s = load_scenario(SCENARIO_DIR / f"{name}.json")
    asked = sum(j.gpus * min(j.duration_steps, s.T) for j in s.batch_jobs)
    assert asked > s.G * s.T - sum(sum(r.demand) for r in s.realtime_jobs)
    stranded = sum(max(r.demand) * s.T - sum(r.demand) for r in s.realtime_jobs)
    assert stranded > 0


@pytest.mark.parametrize("name", list(SPECS))
def test_fast_beats_both_baselines_on_every_benchmark_scenario(name: str) -> None:
    s = load_scenario(SCENARIO_DIR / f"{name}.json")
    plans = {p: make_plan(s, p) for p in ("fast", "fifo", "priority")}
    fast = plans["fast"].metrics
    for baseline in ("fifo", "priority"):
        assert fast.objective >= plans[baseline].metrics.objective - 1e-9
        if plans[baseline].metrics.rt_shortfall == 0:
            assert fast.rt_shortfall == 0


def test_bench_rows_and_markdown() -> None:
    results = bench.run([generate("mixed-control")], repeats=2)
    table = bench.rows(results, "fifo")
    assert table[0]["scenario"] == "mixed-control"
    assert table[0]["util_after"] >= table[0]["util_before"]
    text = bench.markdown(table, "fast vs fifo")
    assert "| mixed-control | 8 | 10 |" in text


def test_render_png_draws_a_picture() -> None:
    from allocator.render import render_png

    s = generate("mixed-control")
    png = render_png([make_plan(s, "fast").to_dict(), make_plan(s, "fifo").to_dict()])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
