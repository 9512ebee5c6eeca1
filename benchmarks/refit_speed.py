"""Refits of 1,000 bootstrap weightings: the committed engine against the working tree, in one run.

Problem: a run table (default: the bundled CPU baseline, 44 runs; ``--table paper`` or
``--table digitized`` for the study-size 116-run tables), its Huber point fit (500 starts,
seed 0), and 1,000 block-bootstrap weightings of its (budget, r) cells drawn as
:func:`phifit.bootstrap.block_bootstrap` draws them (seed 0).  Both engines refit the
*same* weightings from the *same* spread starts with ``refit_weighted`` (4 spread starts,
chunks of 125, ``--n-jobs`` threads), exactly as the bootstrap calls it.

- old: ``phifit/fitters/engine.py`` at ``--old-rev`` (default: the commit before the
  vectorised finish), loaded as a separate module;
- new: the working tree's engine.

Reported: wall time of each (median of ``--repeats``, interleaved old/new), the replicates
left unconverged by the vectorised LM and how many of them went to the scipy polish (old:
all; new: the fallback only), and per replicate the objective difference new - old:
counts worse / better beyond a relative 1e-9 and the largest relative worsening.

Run:  python benchmarks/refit_speed.py [--table cpu|paper|digitized] [--repeats 3] [--n-jobs 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

import phifit.fitters.engine as engine
from phifit.bootstrap import draw_weights
from phifit.fitters.common import effective_spec
from phifit.fitters.huber import HuberOptions, fit_huber
from phifit.law import LawSpec
from phifit.recipes import select_recipe
from phifit.runs import load_runs

ROOT = Path(__file__).resolve().parents[1]
OLD_REV = "6b88e35"  # engine.py before the vectorised finish of unconverged refits
TABLES = {
    "cpu": "data/cpu_small_runs.csv",
    "paper": "data/paper_design_simulated.csv",
    "digitized": "data/looped_study_runs_digitized.csv",
}


def load_engine(rev: str) -> types.ModuleType:
    """``phifit/fitters/engine.py`` at git revision ``rev`` as a standalone module."""
    source = subprocess.run(
        ["git", "show", f"{rev}:phifit/fitters/engine.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for name in ("law", "result", "runs"):
        source = source.replace(f"from ..{name} import", f"from phifit.{name} import")
    module = types.ModuleType(f"phifit_engine_{rev}")
    module.__file__ = f"<engine.py at {rev}>"
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def load_table(name: str):
    runs = load_runs(ROOT / TABLES[name])
    return select_recipe(runs).runs if name == "cpu" else runs


class CountingPolish:
    """Wraps a module's ``polish`` and counts its calls (the scipy polishes)."""

    def __init__(self, module: types.ModuleType):
        self.module, self.inner, self.calls = module, module.polish, 0

    def __enter__(self):
        def counted(*args, **kwargs):
            self.calls += 1
            return self.inner(*args, **kwargs)

        self.module.polish = counted
        return self

    def __exit__(self, *exc):
        self.module.polish = self.inner


def refit(module, runs, spec, weights, x_hat, n_jobs: int) -> tuple[dict, float, int]:
    """refit_weighted as block_bootstrap calls it; returns (output, seconds, scipy polishes)."""
    rng = np.random.default_rng(np.random.SeedSequence(0).spawn(3)[1])
    with CountingPolish(module) as counter:
        t0 = time.perf_counter()
        out = module.refit_weighted(
            runs, spec, weights, x_hat, n_spread=4, seed=rng, n_jobs=n_jobs, chunk_size=125
        )
        seconds = time.perf_counter() - t0
    return out, seconds, counter.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=sorted(TABLES), default="cpu")
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--old-rev", default=OLD_REV)
    parser.add_argument("--save", help="write per-replicate objectives of both engines to this .npz")
    args = parser.parse_args()

    old = load_engine(args.old_rev)
    runs = load_table(args.table)
    fit = fit_huber(runs, options=HuberOptions(n_starts=500, seed=0))
    spec, _ = effective_spec(runs, LawSpec())
    x_hat = fit.theta[spec.free_mask]
    codes, label = runs.cells(None)
    weights = draw_weights(
        codes, args.replicates, np.random.default_rng(np.random.SeedSequence(0).spawn(3)[0])
    )
    print(
        f"table {args.table} ({len(runs)} runs, {int(codes.max()) + 1} blocks of {label}), "
        f"{args.replicates} replicates, n_jobs={args.n_jobs}, old = engine.py at {args.old_rev}"
    )

    times: dict[str, list[float]] = {"old": [], "new": []}
    results: dict[str, tuple[dict, int]] = {}
    for _ in range(args.repeats):
        for name, module in (("old", old), ("new", engine)):
            out, seconds, n_scipy = refit(module, runs, spec, weights, x_hat, args.n_jobs)
            times[name].append(seconds)
            results[name] = (out, n_scipy)
    for name in ("old", "new"):
        out, n_scipy = results[name]
        t = times[name]
        print(
            f"{name}: median {np.median(t):.2f} s (runs {', '.join(f'{s:.2f}' for s in t)}); "
            f"finished after the LM {int(out['polished'].sum())}, scipy polishes {n_scipy}, "
            f"unconverged {int((~out['converged']).sum())}"
        )
    print(f"speed-up old/new: {np.median(times['old']) / np.median(times['new']):.2f}x")

    f_old, f_new = results["old"][0]["objective"], results["new"][0]["objective"]
    rel = (f_new - f_old) / np.abs(f_old)
    worse, better = rel > 1e-9, rel < -1e-9
    print(
        f"objective new - old per replicate: worse (rel > 1e-9) {int(worse.sum())}, "
        f"better (rel < -1e-9) {int(better.sum())}, equal {int((~worse & ~better).sum())}; "
        f"max relative worse {max(float(rel.max()), 0.0):.3g}, "
        f"max relative better {max(float(-rel.min()), 0.0):.3g}"
    )
    touched = results["old"][0]["polished"] | results["new"][0]["polished"]
    moved = np.max(np.abs(results["new"][0]["x"] - results["old"][0]["x"]), axis=1) > 1e-4
    print(
        f"replicates finished after the LM (either engine) {int(touched.sum())}; "
        f"end points moved by > 1e-4 in some coordinate: {int(moved.sum())} "
        f"(of which worse {int((moved & worse).sum())}, better {int((moved & better).sum())})"
    )
    if args.save:
        np.savez(
            args.save, f_old=f_old, f_new=f_new, x_old=results["old"][0]["x"], x_new=results["new"][0]["x"]
        )


if __name__ == "__main__":
    main()
