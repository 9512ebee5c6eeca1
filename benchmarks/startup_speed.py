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

    python benchmarks/startup_speed.py [--repeat 7]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
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


if __name__ == "__main__":
    main()
