"""Start-up time of the command line, side by side with the imports it cannot avoid.

A user runs ``phifit fit`` many times a day; most of its wall time on a small table is
Python start-up and imports.  This script times, in fresh processes (median of
``--repeat`` runs each, all in one run so the ratios compare like with like):

- ``python -c "pass"``                       (the interpreter alone)
- ``python -c "import numpy, pandas"``        (the floor for reading a CSV)
- ``python -c "import phifit"``
- ``phifit --help``
- ``phifit fit data/paper_design_simulated.csv`` (116 runs, the default Huber fit, end to end)

Targets (issue: start-up): ``phifit --help`` <= 0.3 s, ``phifit fit`` on 116 runs <= 1 s.

Then, paired (issue 42: point fits at the import floor): ``phifit fit
data/looped_study_runs_digitized.csv`` against ``python -c "import numpy, pandas, scipy.optimize"``,
run in turn (A B A B ...), each whole process timed from outside; it prints both medians and the
median of the pair-by-pair ratios (target: <= 1.3). Pairing keeps the ratio meaningful on a
machine whose speed drifts.

    python benchmarks/startup_speed.py [--repeat 7] [--pairs 9]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "phifit"]


def timed(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median and min wall time of ``cmd`` over ``repeat`` fresh processes (one warm-up first)."""
    subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


#: the point fit and its import floor, timed in pairs
POINT_FIT = ["phifit fit (study, 116 runs)", [*CLI, "fit", "data/looped_study_runs_digitized.csv"]]
FLOOR_IMPORTS = "import numpy, pandas, scipy.optimize"
FLOOR = [FLOOR_IMPORTS, [sys.executable, "-c", FLOOR_IMPORTS]]
#: the ratio the point fit should stay within (issue 42)
TARGET_RATIO = 1.3


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True)
    return time.perf_counter() - start


def paired(a: list[str], b: list[str], pairs: int) -> tuple[list[float], list[float]]:
    """Wall times of ``a`` and ``b`` run in turn (one warm-up each first), ``pairs`` times."""
    _wall(a), _wall(b)
    times_a, times_b = [], []
    for _ in range(pairs):
        times_a.append(_wall(a))
        times_b.append(_wall(b))
    return times_a, times_b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--pairs", type=int, default=9, help="paired runs of the point fit and its floor")
    args = parser.parse_args()
    cases = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("import numpy, pandas", [sys.executable, "-c", "import numpy, pandas"]),
        ("import phifit", [sys.executable, "-c", "import phifit"]),
        ("phifit --help", [*CLI, "--help"]),
        ("phifit fit (116 runs)", [*CLI, "fit", "data/paper_design_simulated.csv"]),
    ]
    print(f"{'command':<28} {'median s':>9} {'min s':>7}")
    for label, cmd in cases:
        med, low = timed(cmd, args.repeat)
        print(f"{label:<28} {med:>9.3f} {low:>7.3f}")

    times_a, times_b = paired(POINT_FIT[1], FLOOR[1], args.pairs)
    ratios = [a / b for a, b in zip(times_a, times_b)]
    print(f"\npaired, {args.pairs} pairs (whole process, wall s)")
    print(f"{'command':<38} {'median s':>9} {'min s':>7} {'max s':>7}")
    for (label, _), times in ((POINT_FIT, times_a), (FLOOR, times_b)):
        print(f"{label:<38} {statistics.median(times):>9.3f} {min(times):>7.3f} {max(times):>7.3f}")
    ratio = statistics.median(ratios)
    verdict = "within" if ratio <= TARGET_RATIO else "above"
    print(
        f"{'ratio (median of pairs)':<38} {ratio:>9.2f} {min(ratios):>7.2f} {max(ratios):>7.2f}"
        f"  ({verdict} the {TARGET_RATIO}x target)"
    )


if __name__ == "__main__":
    main()
