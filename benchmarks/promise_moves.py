"""How often the guard's promises move later, over many small drawn worlds.

The worlds are `tests/test_guard.py`'s strategy (long small jobs, a few whole-node ones,
maybe a service), drawn by hypothesis from a fixed seed, with exact durations, so no job
overruns and every later move comes from realtime on a promised block:

    python benchmarks/promise_moves.py --examples 4000 --seed 777

prints the worlds with a service that replayed, the promises made and the later moves
(fast, guarded, `tests/test_guard.py`'s replay settings). Run it in a checkout of an older
commit to compare.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from hypothesis import HealthCheck, given, seed, settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines import simulate as sim  # noqa: E402
from tests.test_guard import CONFIG, worlds  # noqa: E402


def main(examples: int = typer.Option(4000, "--examples", help="worlds drawn"),
         draw_seed: int = typer.Option(777, "--seed", help="hypothesis seed")) -> None:
    """Promises made and moved later in the drawn worlds that have a service."""
    counts = {"worlds": 0, "promises": 0, "later": 0, "later_realtime": 0}

    @seed(draw_seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(worlds(exact=True))
    def replay(world: sim.World) -> None:
        if not world.services:
            return
        rec = sim.replay(world, "fast", CONFIG)
        assert rec.guard is not None
        counts["worlds"] += 1
        counts["promises"] += rec.guard.made
        counts["later"] += rec.guard.later
        counts["later_realtime"] += getattr(rec.guard, "later_realtime", rec.guard.later)

    replay()
    print(" ".join(f"{k}={v}" for k, v in counts.items()))


if __name__ == "__main__":
    typer.run(main)
