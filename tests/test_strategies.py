"""The strategies feed the oracles: most drawn scenarios must be contended, or the oracles
cannot tell a good allocator from a bad one. These tests measure the mix they draw.

Each collects a fixed (derandomized) sample of a strategy's examples and checks the shares;
`hypothesis.event` records the distribution, shown by `pytest --hypothesis-show-statistics`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from allocator.scenario_io import scenario_from_dict
from tests.strategies import (
    REALTIME,
    contended_scenario_dicts,
    contention,
    micro_scenario_dicts,
    mostly_contended,
    scenario_dicts,
    tiny_scenario_dicts,
)


def sample(strategy: st.SearchStrategy[dict[str, Any]], n: int = 200) -> list[dict[str, Any]]:
    """n examples, the same ones on every run, each accepted by the strict loader."""
    drawn: list[dict[str, Any]] = []

    @settings(max_examples=n, derandomize=True, database=None)
    @given(strategy)
    def collect(d: dict[str, Any]) -> None:
        scenario_from_dict(d)  # legal by construction
        queued, load = contention(d)
        event(f"queued batch jobs: {min(queued, 5)}{'+' if queued >= 5 else ''}")
        event("load >= 1" if load >= 1 else "load < 1")
        drawn.append(d)

    collect()
    return drawn


def share(drawn: list[dict[str, Any]], test: Callable[[dict[str, Any]], bool]) -> float:
    return sum(map(test, drawn)) / len(drawn)


def queued_sizes(d: dict[str, Any]) -> set[int]:
    return {j["gpus"] for j in d["jobs"] if j["kind"] != REALTIME and not j.get("running")}


def moving_realtime(d: dict[str, Any]) -> bool:
    return any(j["kind"] == REALTIME and len(set(j["demand"])) > 1 for j in d["jobs"])


def has_running(d: dict[str, Any]) -> bool:
    return any(j.get("running") for j in d["jobs"])


def contended(d: dict[str, Any], queued: int = 3) -> bool:
    n, load = contention(d)
    return n >= queued and load >= 1


def test_most_tiny_scenarios_are_contended() -> None:
    """The brute-force oracle's input: >= 70% with 3+ queued batch jobs at load >= 1."""
    drawn = sample(tiny_scenario_dicts())
    assert share(drawn, contended) >= 0.7
    multi = [d for d in drawn if d["cluster"]["gpus"] >= 2 and contended(d)]
    assert share(multi, lambda d: len(queued_sizes(d)) >= 2) >= 0.9  # different sizes
    # Hypothesis biases draws towards constants found in the loaded modules, so the mix
    # moves a little with what else the session imported: these bounds leave room for it.
    assert share(drawn, lambda d: moving_realtime(d) or has_running(d)) >= 0.4
    assert share(drawn, moving_realtime) >= 0.15
    assert share(drawn, has_running) >= 0.15


def test_most_general_scenarios_are_contended() -> None:
    """`scenarios()` (the legality and determinism properties' input) likewise."""
    drawn = sample(mostly_contended(contended_scenario_dicts(), scenario_dicts()))
    assert share(drawn, contended) >= 0.7
    assert share(drawn, moving_realtime) >= 0.3
    assert share(drawn, has_running) >= 0.3


def test_micro_scenarios_mostly_compete_for_the_grid() -> None:
    """At most 6 cells and 2 jobs: two queued jobs asking for at least the whole grid."""
    drawn = sample(micro_scenario_dicts())
    assert share(drawn, lambda d: contended(d, queued=2)) >= 0.7


def test_contention_counts_what_the_queue_asks_against_what_is_left() -> None:
    """The measure itself, on a hand-worked case."""
    d = {"cluster": {"gpus": 4, "horizon_steps": 2}, "jobs": [
        {"kind": "training", "gpus": 2, "duration_steps": 5, "arrival_step": 1},   # 2 x 1
        {"kind": "training", "gpus": 1, "duration_steps": 1, "arrival_step": 0},   # 1 x 1
        {"kind": "training", "gpus": 1, "duration_steps": 2, "arrival_step": 0,
         "running": {"first_gpu": 3, "remaining_steps": 2}},                        # pins 2
        {"kind": REALTIME, "demand": [1, 9], "swap_limit": 1},                      # 1 + 4
    ]}
    queued, load = contention(d)
    assert queued == 2
    assert load == 3 / (8 - 2 - 5)
