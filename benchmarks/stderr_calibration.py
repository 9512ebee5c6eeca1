"""Calibration of the analytic standard error of phi against its true sampling spread.

Simulates ``--tables`` tables on the study's 116-run design from its fitted law (true phi =
0.459) under three noise conditions, fits each with the reference Huber method, and compares
the mean analytic standard error of phi (the Huber M-estimator sandwich that ``phifit fit``
prints, :mod:`phifit.fitters.standard_errors`) with the standard deviation of phi_hat across
the tables (the truth it estimates):

- ``independent``: log-noise sd 0.004 per run;
- ``t3``: Student-t noise with 3 degrees of freedom, sd 0.004 per run;
- ``cell-shared``: sd 0.003 shared by each (budget, r) cell plus 0.003 per run.

The ratio mean(SE) / sd(phi_hat) should be near 1 where the formula's assumption
(independent runs) holds; its Monte-Carlo error is reported (delta method on the two means,
bootstrap over tables).  Rerun:

    python benchmarks/stderr_calibration.py --tables 300 --seed 0
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from phifit.fitters.huber import fit_huber
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

CONDITIONS = {
    "independent": {"noise": 0.004},
    "t3": {"noise": 0.004, "noise_df": 3.0},
    "cell-shared": {"noise": 0.003, "cell_noise": 0.003},
}


def study(condition: str, tables: int, seed: int) -> dict[str, float]:
    phis, ses = [], []
    for t in range(tables):
        frame = simulate("paper", seed=seed * 100_000 + t, **CONDITIONS[condition])
        fit = fit_huber(table_from_frame(frame, source=f"{condition}-{t}"), n_starts=200)
        phis.append(fit.params["phi"])
        ses.append((fit.stderr or {}).get("phi", np.nan))
    phis, ses = np.array(phis), np.array(ses)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(2000):
        i = rng.integers(0, tables, tables)
        boot.append(np.nanmean(ses[i]) / np.std(phis[i], ddof=1))
    return {
        "tables": tables,
        "sd_phi_hat": float(np.std(phis, ddof=1)),
        "mean_se": float(np.nanmean(ses)),
        "ratio": float(np.nanmean(ses) / np.std(phis, ddof=1)),
        "ratio_mc_se": float(np.std(boot, ddof=1)),
        "mean_phi_hat": float(np.mean(phis)),
        "missing_se": int(np.isnan(ses).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--conditions", nargs="*", default=list(CONDITIONS))
    args = parser.parse_args()
    print(f"{'condition':<12} {'tables':>6} {'sd(phi_hat)':>11} {'mean SE':>8} {'ratio':>13} {'mean phi':>9}")
    for condition in args.conditions:
        start = time.perf_counter()
        out = study(condition, args.tables, args.seed)
        print(
            f"{condition:<12} {out['tables']:>6} {out['sd_phi_hat']:>11.4f} {out['mean_se']:>8.4f} "
            f"{out['ratio']:>7.3f} ± {out['ratio_mc_se']:.3f} {out['mean_phi_hat']:>9.4f}"
            f"   ({time.perf_counter() - start:.0f} s, {out['missing_se']} without SE)",
            flush=True,
        )


if __name__ == "__main__":
    main()
