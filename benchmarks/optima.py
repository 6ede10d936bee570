"""The quality yardstick (allocator.quality): every policy's share of the proven optima in
data/quality, or with `--solve` the set regenerated and solved again (minutes):
    python benchmarks/optima.py            # fast, priority and fifo against optima.json
    python benchmarks/optima.py --solve    # rewrites data/quality and optima.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from allocator.policies import POLICIES  # noqa: E402
from allocator.quality import DIR, load_cases, shares, solve_set, summarize  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solve", action="store_true",
                        help="regenerate data/quality and solve every scenario (minutes)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    parser.add_argument("--dir", type=Path, default=DIR)
    args = parser.parse_args(argv)
    if args.solve:
        solve_set(args.dir, time_limit=args.time_limit)
    cases = load_cases(args.dir)
    for policy in ("fast", "priority", "fifo"):
        s = summarize(shares(POLICIES[policy], cases))
        print(f"{policy}: {s.n} cases, mean {s.mean:.2%}, min {s.minimum:.2%}, "
              f"below 97% {s.below_97}")


if __name__ == "__main__":
    main()
