"""The full-mode benchmark rows: what `gpuplan bench --full` tabulates per scenario."""

from __future__ import annotations

from allocator.scenario_io import scenario_from_dict
from benchmarks.bench_full import full_markdown, full_rows


def test_rows_and_table_for_two_small_scenarios() -> None:
    small = [
        scenario_from_dict({
            "name": "two-singles",
            "cluster": {"gpus": 2, "horizon_steps": 3},
            "jobs": [{"id": f"j{n}", "kind": "training", "priority": 1 + n, "gpus": 1,
                      "duration_steps": 2} for n in range(3)],
        }),
        scenario_from_dict({
            "name": "realtime-only",
            "cluster": {"gpus": 2, "horizon_steps": 2},
            "jobs": [{"id": "r", "kind": "realtime", "priority": 1, "demand": [3, 1],
                      "swap_limit": 0}],
        }),
    ]
    rows = full_rows(small, time_limit=5.0)
    assert [r["scenario"] for r in rows] == ["two-singles", "realtime-only"]
    first, second = rows
    assert first["status"] == "optimal" and first["optimum"] == first["full"]
    assert 0 < first["fast_over_optimum"] <= 1.0
    assert first["full"] >= first["fast"]
    # A negative objective (unavoidable shortfall) has no meaningful ratio.
    assert second["full"] < 0 and second["fast_over_optimum"] is None
    table = full_markdown(rows)
    assert "| two-singles | 2 | 3 |" in table and "| realtime-only |" in table


def test_bound_rows_put_the_block_bound_under_the_lp_bound() -> None:
    from benchmarks.bench_full import bound_rows, bounds_markdown

    scenario = scenario_from_dict({
        "name": "pairs",
        "cluster": {"gpus": 4, "horizon_steps": 4},
        "jobs": [{"id": f"p{n}", "kind": "training", "priority": 1 + n, "gpus": 2,
                  "duration_steps": 3, "arrival_step": n} for n in range(3)],
    })
    (row,) = bound_rows([scenario], time_limit=5.0)
    assert row["block_bound"] <= row["lp_bound"] + 1e-9
    assert "| pairs | 4 |" in bounds_markdown([row])


def test_best_with_fast_realtime_is_between_fast_and_the_optimum() -> None:
    from allocator import grid as gridlib
    from allocator.policies.fast import fast
    from benchmarks.bench_full import best_batch_for_realtime
    from tests.brute_force import brute_force

    scenario = scenario_from_dict({
        "cluster": {"gpus": 4, "horizon_steps": 4},
        "jobs": [{"id": "rt", "kind": "realtime", "priority": 2, "demand": [1, 2, 1, 2],
                  "swap_limit": 1},
                 {"id": "a", "kind": "training", "priority": 3, "gpus": 2, "duration_steps": 3},
                 {"id": "b", "kind": "training", "priority": 1, "gpus": 1, "duration_steps": 4}],
    })
    grid = fast(scenario)
    best = best_batch_for_realtime(scenario, grid, time_limit=5.0)
    optimum, _ = brute_force(scenario)
    assert gridlib.objective(scenario, grid) - 1e-9 <= best <= optimum + 1e-9
