"""Wall time of ``phifit report`` on a 116-run table, step by step, in one run.

The issue asks for the whole report (fit, 1000-replicate block bootstrap, restricted fits
with leave-one-budget-out refits, diagnostics with 116 + 24 leave-out refits and the phi
profile, frontier with bootstrap bands, 8 figures in PNG (and SVG with --svg), HTML) in under 60 s on
2 cores, without ``--bayes``.  The baseline in the same run is one default Huber fit
(500 starts), so the total is also given as a multiple of it.

Run:  python benchmarks/report_speed.py [--csv RUNS.csv] [--bootstrap 1000] [--repeats 1] [--svg]
      (default table: the study's design simulated with log-noise sd 0.004)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from phifit import defaults, fit
from phifit.report.analysis import AnalysisOptions
from phifit.report.write import build_report
from phifit.runs.table import load_runs, table_from_frame
from phifit.simulation import simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", default=None, help="run table (default: simulated paper design)")
    parser.add_argument("--bootstrap", type=int, default=defaults.N_BOOT)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--svg", action="store_true", help="also write the figures as SVG")
    args = parser.parse_args()
    runs = (
        load_runs(args.csv)
        if args.csv
        else table_from_frame(simulate("paper", noise=0.004, seed=1), source="paper(noise=0.004)")
    )
    print(f"table: {runs.source}, {len(runs)} runs; CPUs visible: {os.cpu_count()}")

    t0 = time.perf_counter()
    fit(runs)
    baseline = time.perf_counter() - t0
    for k in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            files = build_report(
                runs,
                os.path.join(tmp, "report"),
                options=AnalysisOptions(n_boot=args.bootstrap),
                svg=args.svg,
            )
            total = time.perf_counter() - t0
        steps = ", ".join(f"{key} {value:.1f} s" for key, value in files.timings.items())
        print(
            f"report {k + 1}: {total:.1f} s = {total / baseline:.0f} x one Huber fit "
            f"({baseline:.2f} s); {steps}"
        )


if __name__ == "__main__":
    main()
