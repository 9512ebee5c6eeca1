"""Speed of the block bootstrap (1000 replicates) against a per-start scipy loop, in one run.

Problem: the study's 116-run paper design, log-noise sd 0.004 (R^2 ~ 0.997), the summed
Huber(delta=1e-3) objective on log-loss in the study's box, 1000 replicates of the 24
(budget, r) cells.

- phifit: ``block_bootstrap(runs, point, n_boot=1000, n_jobs=2)`` with the point estimate given: all
  replicates x (warm start + 4 spread starts) through the vectorised Levenberg-Marquardt,
  2 worker processes, plus the 24 delete-one-cell jackknife refits for BCa and the
  intervals with their Monte-Carlo errors.  Median of ``--repeats`` runs.
- baseline: the *same* replicates (same block draws) from the *same* starts (warm start +
  the same 4 spread starts), each start solved by ``scipy.optimize.minimize(method=
  "L-BFGS-B")`` with the analytic gradient and the tight tolerances this tiny objective
  needs (ftol=1e-15, gtol=1e-12, maxfun=1e5), keeping the best per replicate; one process.
  By default it runs on the first ``--baseline-replicates`` (50) replicates and its time is
  scaled linearly to 1000 (said in the output); ``--baseline-replicates 1000`` runs all.
- For scale, the study's protocol (a fresh 500-start fit per replicate) is estimated from
  a few replicates fitted with phifit's own vectorised 500-start fit.

Run:  python benchmarks/bootstrap_speed.py [--replicates 1000] [--repeats 3]
                                          [--baseline-replicates 50]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy.optimize import minimize

from phifit import defaults
from phifit.bootstrap.block import block_bootstrap, block_codes, draw_weights
from phifit.fitters.huber import HuberOptions, fit_huber
from phifit.fitters.objective import DELTA
from phifit.fitters.refit import spread_starts
from phifit.law import LawSpec, log_loss_and_jacobian
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate


def lbfgsb_replicate(runs, weights: np.ndarray, starts: np.ndarray) -> tuple[float, float]:
    """Best (objective, phi) over per-start L-BFGS-B runs on one weighted table."""
    design, y = runs.design, runs.log_loss

    def fun(theta):
        pred, jac = log_loss_and_jacobian(theta, design)
        res = pred - y
        a = np.abs(res)
        obj = (weights * np.where(a <= DELTA, 0.5 * res * res, DELTA * (a - 0.5 * DELTA))).sum()
        dres = weights * np.where(a <= DELTA, res, DELTA * np.sign(res))
        return obj, dres @ jac

    spec = LawSpec()
    bounds = list(zip(spec.lower, spec.upper))
    best, phi = np.inf, np.nan
    for x0 in starts:
        sol = minimize(
            fun,
            x0,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"ftol": 1e-15, "gtol": 1e-12, "maxfun": 100_000, "maxiter": 10_000},
        )
        if sol.fun < best:
            best, phi = float(sol.fun), float(sol.x[5])
    return best, phi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=defaults.N_BOOT)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-replicates", type=int, default=50)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = args.replicates

    runs = table_from_frame(simulate("paper", noise=0.004, seed=1), source="paper-design")
    point = fit_huber(runs)
    block_bootstrap(runs, point, n_boot=20, progress=False)  # warm-up
    times, times_1 = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        boot = block_bootstrap(runs, point, n_boot=n, seed=args.seed, n_jobs=args.n_jobs, progress=False)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    block_bootstrap(runs, point, n_boot=n, seed=args.seed, n_jobs=1, progress=False)
    times_1.append(time.perf_counter() - t0)
    ours = float(np.median(times))

    # the same replicates and starts for the baseline
    streams = np.random.SeedSequence(args.seed).spawn(3)
    codes, _ = block_codes(runs, None)
    weights = draw_weights(codes, n, np.random.default_rng(streams[0]))
    spec = LawSpec()
    spread = spread_starts(point.theta, spec, n, 4, np.random.default_rng(streams[1]))
    m = min(args.baseline_replicates, n)
    t0 = time.perf_counter()
    base = [
        lbfgsb_replicate(runs, weights[i], np.vstack([point.theta[None, :], spread[i]])) for i in range(m)
    ]
    base_time = time.perf_counter() - t0
    base_total = base_time * n / m
    base_obj = np.array([b[0] for b in base])
    base_phi = np.array([b[1] for b in base])
    ours_phi = boot.params["phi"][:m]
    w = weights[:m]
    from phifit.fitters.objective import objective
    from phifit.law import log_loss

    ours_obj = np.array(
        [objective(log_loss(boot.thetas[i], runs.design) - runs.log_loss, w[i], DELTA) for i in range(m)]
    )

    # the study's protocol, a fresh 500-start fit per replicate (phifit's vectorised fit)
    k = 3
    t0 = time.perf_counter()
    for i in range(k):
        fit_huber(
            runs.subset(np.repeat(np.arange(len(runs)), weights[i].astype(int))),
            options=HuberOptions(n_starts=defaults.N_STARTS, seed=i),
        )
    protocol = (time.perf_counter() - t0) / k * n

    print(
        f"cpu cores: {os.cpu_count()}   runs: {len(runs)}   blocks: {boot.n_blocks} "
        f"(budget, r) cells   replicates: {n}   starts per replicate: 1 warm + 4 spread"
    )
    print(
        f"phifit block_bootstrap, n_jobs={args.n_jobs} (median of {args.repeats}): "
        f"{ours:7.2f} s   [{', '.join(f'{t:.2f}' for t in times)}]   failed: {boot.n_failed}"
        f"   phi 95% CI {boot.ci['phi'][0]:.4f} .. {boot.ci['phi'][1]:.4f}"
    )
    print(f"phifit block_bootstrap, n_jobs=1:                {times_1[0]:7.2f} s")
    scaled = "" if m == n else f" (measured on {m} replicates in {base_time:.1f} s, scaled x{n / m:g})"
    print(f"scipy L-BFGS-B per start, same replicates and starts: {base_total:8.1f} s{scaled}")
    print(f"speed-up: {base_total / ours:.0f}x")
    print(
        f"agreement on those {m} replicates: max |phi_phifit - phi_scipy| = "
        f"{np.max(np.abs(ours_phi - base_phi)):.2e}; scipy objective lower than phifit's "
        f"by > 1e-9 relative in {int(np.sum(base_obj < ours_obj * (1 - 1e-9)))} replicates "
        f"(largest relative gap {np.max((ours_obj - base_obj) / base_obj):+.2e})"
    )
    print(
        f"for scale, the study's protocol (fresh 500-start fit per replicate, phifit's "
        f"vectorised fit, from {k} replicates): ~{protocol:.0f} s for {n}"
    )


if __name__ == "__main__":
    main()
