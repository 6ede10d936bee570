"""fast against full mode on the wider seeded family, run alone: `python benchmarks/quality.py`.

The same table and summary as `gpuplan bench --quality` (benchmarks/bench_quality.py), with
this script's own command line quoted (BENCHMARKS.md records the runs):
    python benchmarks/quality.py --set test --gpus 16 --time-limit 30
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_quality import print_report  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("tuning", "test"), default="tuning")
    parser.add_argument("--gpus", type=int, default=16,
                        help="16: the small family (8-16 GPUs); 64 or 256: cluster scale")
    parser.add_argument("--count", type=int, default=None, help="first N seeds of the set")
    parser.add_argument("--time-limit", type=float, default=30.0, help="full: seconds each")
    parser.add_argument("--no-full", action="store_true", help="fast and the bound only")
    args = parser.parse_args(argv)
    cmd = (f"python benchmarks/quality.py --set {args.set} --gpus {args.gpus}"
           + (f" --count {args.count}" if args.count else "")
           + f" --time-limit {args.time_limit:g}" + (" --no-full" if args.no_full else ""))
    print_report(args.set, args.gpus, args.count, args.time_limit, not args.no_full, cmd)


if __name__ == "__main__":
    main()
