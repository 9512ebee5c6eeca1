"""Huber point fit on 1,856 runs and on the study's 116 runs: committed engine vs working tree.

Tables: the paper design simulated 16 times (``simulate("paper", noise=0.005, seed=k)``,
k = 0..15, concatenated, run ids made unique: 1,856 runs) and ``data/paper_design_simulated.csv``
(116 runs).  Both fits are ``fit_huber`` with its defaults (500 starts, seed 0); "old" runs
its vectorised stage through ``batched_weighted_lm`` of the engine (``phifit/fitters/engine.py``,
later ``phifit/fitters/lm.py``) at ``--old-rev`` (default: before hopeless starts were pruned
from the exploration; any pruning setting is ignored there, so every start takes all
exploration iterations), "new" through the working tree's.  The polish is the same.  Old and
new alternate within one process; medians of ``--repeats``.  The fitted parameters of old and new must agree
(printed: largest absolute difference, and the objective's relative change new - old).

Run:  python benchmarks/fit_large.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from refit_speed import ROOT, load_engine

import phifit.fitters.huber as huber
import phifit.fitters.lm as engine_lm
from phifit.fitters.huber import fit_huber
from phifit.runs.table import load_runs, table_from_frame
from phifit.simulation import simulate

OLD_REV = "72e54a2"  # engine.py before the exploration pruned hopeless starts


def large_table(copies: int = 16):
    frames = []
    for k in range(copies):
        frame = simulate("paper", noise=0.005, seed=k)
        frame["run_id"] = [f"{rid}_copy{k}" for rid in frame["run_id"]]
        frames.append(frame)
    return table_from_frame(pd.concat(frames, ignore_index=True), source=f"paper design x{copies}")


def without_pruning(lm):
    """``lm`` called with the pruning settings dropped (an engine that predates them)."""

    def call(*args, prune_after=None, prune_keep=1, prune_ratio=np.inf, **kwargs):
        return lm(*args, **kwargs)

    return call


def timed_fit(runs, lm) -> tuple[float, np.ndarray, float]:
    saved = huber.batched_weighted_lm
    huber.batched_weighted_lm = lm
    try:
        t0 = time.perf_counter()
        fit = fit_huber(runs)
        return time.perf_counter() - t0, fit.theta, fit.objective
    finally:
        huber.batched_weighted_lm = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--old-rev", default=OLD_REV)
    args = parser.parse_args()
    old = load_engine(args.old_rev)
    tables = {"1856 runs": large_table(), "116 runs": load_runs(ROOT / "data" / "paper_design_simulated.csv")}
    print(f"old = the engine at {args.old_rev}")
    for name, runs in tables.items():
        times: dict[str, list[float]] = {"old": [], "new": []}
        thetas, objectives = {}, {}
        for _ in range(args.repeats):
            for label, lm in (
                ("old", without_pruning(old.batched_weighted_lm)),
                ("new", engine_lm.batched_weighted_lm),
            ):
                seconds, thetas[label], objectives[label] = timed_fit(runs, lm)
                times[label].append(seconds)
        t_old, t_new = np.median(times["old"]), np.median(times["new"])
        print(
            f"{name} ({len(runs)}): old {t_old:.3f} s, new {t_new:.3f} s (new/old {t_new / t_old:.2f}); "
            f"runs old {', '.join(f'{s:.2f}' for s in times['old'])}, "
            f"new {', '.join(f'{s:.2f}' for s in times['new'])}; "
            f"max |theta new - old| {np.max(np.abs(thetas['new'] - thetas['old'])):.2g}, "
            f"objective (new - old) / old {(objectives['new'] - objectives['old']) / objectives['old']:+.2g}"
        )


if __name__ == "__main__":
    main()
