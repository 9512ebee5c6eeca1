"""Coverage of phi's intervals and size of the phi = 0 tests, under the noise real sweeps have.

A rerunnable Monte-Carlo study.  Conditions (tables simulated from a known law):

- ``independent``: the study's 116-run design (24 (budget, r) cells), its fitted law
  (phi = 0.459), log-noise sd 0.004 per run (R^2 ~ 0.997, as in the study);
- ``cell-shared``: the same, with sd 0.003 shared by each (budget, r) cell plus 0.003 per
  run (one data order, one seed, one learning-rate choice per cell, as real sweeps have);
- ``t3``: Student-t noise with 3 degrees of freedom, sd 0.004 per run;
- ``small``: a 44-run, 12-cell design like the bundled CPU table (its budgets, r values and
  parameter counts; the baseline recipe of ``data/cpu_small_runs.csv``), phi = 0.459 and the
  other parameters from that table's fit, log-noise sd 0.004;
- ``small-cell-shared``: the same 12-cell design with the noise the real CPU table has,
  sd 0.010 shared by each (budget, r) cell plus 0.013 per run: few clusters, and a null fit
  (5 free parameters) that absorbs much of the noise they share.

Per table, the same simulated table for every method (coverage, at the true phi):

- the reference Huber fit;
- the (budget, r) cell bootstrap: 95% percentile interval (the default) and BCa;
- the single-run bootstrap: 95% percentile interval.

Per table, for size (a second table from the same condition with true phi = 0):

- the chi-square likelihood-ratio test of phi = 0 (``phifit compare``'s, assumes
  independent runs) and the restricted wild cluster bootstrap test (:mod:`phifit.bootstrap.wild`),
  each rejecting at the 5% level.

Reported per condition: coverage +- its binomial standard error, the mean width against the
ideal 3.92 x sd(phi_hat) (the width of a normal interval with the true spread), the mean
phi_hat with a flag when its bias exceeds 2 standard errors, intervals that reach the search
box, and the size of each test +- its binomial standard error.

``--parts size`` runs only the size half (the tests at phi = 0; much cheaper), ``--parts
coverage`` only the intervals.  Results are appended, one JSON line per table, to ``--out`` (default
``benchmarks/results/coverage.jsonl``, not tracked); a rerun skips the tables already there,
so the study resumes where it stopped.  Tables run in parallel processes (joblib).

    python benchmarks/bootstrap_coverage.py --tables 600 --n-jobs 2            # the study
    python benchmarks/bootstrap_coverage.py --conditions small-cell-shared --parts size --tables 400
    python benchmarks/bootstrap_coverage.py --summary                         # print the table
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np

CONDITIONS = {
    "independent": {"design": "paper", "noise": 0.004},
    "cell-shared": {"design": "paper", "noise": 0.003, "cell_noise": 0.003},
    "t3": {"design": "paper", "noise": 0.004, "noise_df": 3.0},
    "small": {"design": "small", "noise": 0.004},
    "small-cell-shared": {"design": "small", "noise": 0.013, "cell_noise": 0.010},
}
#: What a table computes: the intervals' coverage, the tests' size, or both.
PARTS = ("coverage", "size")
TRUE_PHI = 0.459
LEVEL = 0.95
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "coverage.jsonl"


def _design(name: str):
    """(design frame, true params) of a condition."""
    from phifit import defaults
    from phifit.fitters.huber import fit_huber
    from phifit.recipes.pairing import select_recipe
    from phifit.runs.table import load_runs
    from phifit.study import REFERENCE_PARAMS

    if name == "paper":
        return "paper", dict(REFERENCE_PARAMS)
    runs = select_recipe(load_runs(ROOT / "data" / "cpu_small_runs.csv")).runs
    params = dict(fit_huber(runs, n_starts=defaults.N_STARTS).params)
    params["phi"] = TRUE_PHI
    frame = runs.frame[["run_id", "budget", "r", "n_once", "n_rec", "tokens"]].copy()
    return frame, params


def one_table(
    condition: str, index: int, replicates: int, wild_replicates: int, parts: tuple[str, ...] = PARTS
) -> dict:
    """Simulate, fit, bootstrap and test one table pair of ``condition`` (``parts``: what to
    compute); plain numbers."""
    from phifit.bootstrap.block import block_bootstrap
    from phifit.bootstrap.wild import wild_cluster_test
    from phifit.fitters.huber import fit_huber
    from phifit.fitters.likelihood import GaussianScore, lr_test
    from phifit.law import LawSpec, log_loss
    from phifit.runs.table import table_from_frame
    from phifit.simulation import simulate

    settings = dict(CONDITIONS[condition])
    design, params = _design(settings.pop("design"))
    seed = 1_000_003 * (list(CONDITIONS).index(condition) + 1) + index
    out: dict = {"condition": condition, "table": index}

    if "coverage" in parts:  # coverage at the true phi: every method on the same table
        frame = simulate(design, params={**params, "phi": TRUE_PHI}, seed=seed, **settings)
        runs = table_from_frame(frame, source=f"{condition} {index}")
        point = fit_huber(runs, n_starts=200, seed=index)
        out["phi_hat"] = point.phi
        for label, block in (("cell", None), ("run", "run")):
            boot = block_bootstrap(
                runs,
                point,
                n_boot=replicates,
                block=block,
                seed=index,
                n_jobs=1,
                progress=False,
                jackknife=label == "cell",
            )
            out[f"{label}_percentile"] = boot.ci["phi"]
            if label == "cell":
                out["cell_bca"] = boot.ci_bca["phi"]
            out[f"{label}_failed"] = boot.n_failed
    if "size" not in parts:
        return out

    # size at phi = 0: a table where phi = 0 is true
    frame0 = simulate(design, params={**params, "phi": 0.0}, seed=seed + 500_000, **settings)
    runs0 = table_from_frame(frame0, source=f"{condition} {index} (phi = 0)")
    free = fit_huber(runs0, n_starts=200, seed=index)
    null = fit_huber(runs0, n_starts=200, seed=index, spec=LawSpec(fixed={"phi": 0.0}))
    scores = [
        GaussianScore.from_residuals(runs0.log_loss - log_loss(f.theta, runs0.design), 6 - len(f.spec.fixed))
        for f in (free, null)
    ]
    out["chi2_p"] = lr_test(scores[0], scores[1], 1).p_value
    wild = wild_cluster_test(runs0, free, null, n_boot=wild_replicates, seed=index, n_jobs=1)
    out["wild_p"] = wild.p_value
    out["wild_weights"], out["wild_adjust"] = wild.weights, wild.adjust
    return out


def _done(path: Path) -> set[tuple[str, int]]:
    if not path.exists():
        return set()
    keys = set()
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            for part, key in (("coverage", "phi_hat"), ("size", "wild_p")):
                if key in row:
                    keys.add((row["condition"], row["table"], part))
    return keys


def run(args: argparse.Namespace) -> None:
    from joblib import Parallel, delayed

    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _done(path)
    # conditions interleaved, so that a study stopped early has every condition at a similar count
    parts = tuple(args.parts)
    todo = [
        (c, i)
        for i in range(args.tables)
        for c in args.conditions
        if any((c, i, part) not in done for part in parts)
    ]
    print(f"{len(todo)} tables to go -> {path}", flush=True)
    start = time.perf_counter()
    jobs = (delayed(one_table)(c, i, args.replicates, args.wild_replicates, parts) for c, i in todo)
    with path.open("a", encoding="utf-8") as fh:
        for k, row in enumerate(Parallel(n_jobs=args.n_jobs, return_as="generator")(jobs), 1):
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            if k % 20 == 0 or k == len(todo):
                rate = (time.perf_counter() - start) / k
                print(f"  {k}/{len(todo)} tables, {rate:.1f} s each", flush=True)


def _share(hits: np.ndarray) -> str:
    n = len(hits)
    p = float(np.mean(hits)) if n else math.nan
    return f"{100 * p:5.1f} ± {100 * math.sqrt(p * (1 - p) / n):.1f}%" if n else "n/a"


def summarise(path: Path, conditions: list[str]) -> str:
    merged: dict[tuple[str, int], dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            # a table's parts may come from separate runs (--parts); a part written twice counts once
            merged.setdefault((row["condition"], row["table"]), {}).update(row)
    rows = list(merged.values())
    lines = [
        f"{'condition':<18} {'tables':>6} {'method':<16} {'coverage':>14} {'width/ideal':>11} "
        f"{'at bound':>8}",
    ]
    size_lines = [f"{'condition':<18} {'tables':>6} {'chi2 LR size':>14} {'wild size':>14}"]
    for condition in conditions:
        every = [r for r in rows if r["condition"] == condition]
        tested = [r for r in every if "wild_p" in r]
        sub = [r for r in every if "phi_hat" in r]
        if tested:
            chi2 = np.array([r["chi2_p"] < 0.05 for r in tested])
            wild = np.array([r["wild_p"] < 0.05 for r in tested])
            size_lines.append(f"{condition:<18} {len(tested):>6} {_share(chi2):>14} {_share(wild):>14}")
        if not sub:
            continue
        phi_hat = np.array([r["phi_hat"] for r in sub])
        sd = float(np.std(phi_hat, ddof=1))
        ideal = 2 * 1.959964 * sd
        bias = float(np.mean(phi_hat) - TRUE_PHI)
        bias_se = sd / math.sqrt(len(sub))
        flag = "  BIAS > 2 SE" if abs(bias) > 2 * bias_se else ""
        for key, label in (
            ("cell_percentile", "cell percentile"),
            ("cell_bca", "cell BCa"),
            ("run_percentile", "run percentile"),
        ):
            ci = np.array([r[key] if r[key] and None not in r[key] else [np.nan, np.nan] for r in sub], float)
            cover = (ci[:, 0] <= TRUE_PHI) & (TRUE_PHI <= ci[:, 1])
            width = float(np.nanmean(ci[:, 1] - ci[:, 0]))
            at_bound = int(np.sum((ci[:, 0] <= -3 + 1e-6) | (ci[:, 1] >= 3 - 1e-6)))
            lines.append(
                f"{condition:<18} {len(sub):>6} {label:<16} {_share(cover):>14} "
                f"{width / ideal:>11.2f} {at_bound:>8}"
            )
        lines.append(
            f"{'':<18} {'':>6} mean phi_hat {np.mean(phi_hat):.4f} (bias {bias:+.4f} ± {bias_se:.4f}), "
            f"sd(phi_hat) {sd:.4f}{flag}"
        )
    return "\n".join(
        lines + ["", "size at 5% of the tests of phi = 0 (tables where phi = 0 is true):"] + size_lines
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=600, help="tables per condition (default 600)")
    parser.add_argument("--replicates", type=int, default=300, help="bootstrap replicates per interval")
    parser.add_argument("--wild-replicates", type=int, default=199, help="wild bootstrap replicates per test")
    parser.add_argument("--conditions", nargs="*", default=list(CONDITIONS), choices=list(CONDITIONS))
    parser.add_argument("--parts", nargs="*", default=list(PARTS), choices=PARTS, help="what to compute")
    parser.add_argument("--n-jobs", type=int, default=2, help="tables in parallel (processes)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="JSON lines, one per table (resumable)")
    parser.add_argument("--summary", action="store_true", help="only summarise what --out holds")
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if not args.summary:
        run(args)
    print(summarise(Path(args.out), args.conditions))


if __name__ == "__main__":
    main()
