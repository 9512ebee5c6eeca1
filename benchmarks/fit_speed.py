"""Speed of the default Huber fit against per-start L-BFGS-B loops, in one run.

All solve the reference problem on the same 116-run paper-design table (log-noise sd
0.005): the summed Huber(delta=1e-3) objective on log-loss in the study's box, from the
same 500 uniform random starts, keeping the best.

- phifit: ``phifit.fit(runs)`` (vectorised LM over all starts, then least_squares polish);
- baseline (the protocol as usually coded, e.g. in the Chinchilla replications):
  ``scipy.optimize.minimize(method="L-BFGS-B")`` once per start on the objective alone
  (finite-difference gradients), with the tight tolerances this problem needs
  (ftol=1e-15, gtol=1e-12, maxfun=1e5): SciPy's defaults stop early in wrong basins;
- two more loops for context: the same with phifit's analytic gradient, and with
  SciPy's default tolerances (fast, but see its objective).

Run:  python benchmarks/fit_speed.py [--starts 500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy.optimize import minimize

from phifit import defaults, fit
from phifit.fitters.huber import huber_objective
from phifit.fitters.objective import DELTA
from phifit.law import LawSpec, log_loss_and_jacobian
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

TIGHT = {"ftol": 1e-15, "gtol": 1e-12, "maxfun": 100_000, "maxiter": 10_000}


def lbfgsb_loop(runs, starts: np.ndarray, *, analytic: bool, options: dict) -> tuple[float, int]:
    """Best objective over per-start L-BFGS-B runs, and the total number of evaluations."""
    design, y = runs.design, runs.log_loss

    def fun_and_grad(theta):
        pred, jac = log_loss_and_jacobian(theta, design)
        res = pred - y
        a = np.abs(res)
        obj = np.where(a <= DELTA, 0.5 * res * res, DELTA * (a - 0.5 * DELTA)).sum()
        return obj, np.where(a <= DELTA, res, DELTA * np.sign(res)) @ jac

    def fun(theta):
        return huber_objective(theta, runs)

    spec = LawSpec()
    bounds = list(zip(spec.lower, spec.upper))
    best, nfev = np.inf, 0
    for x0 in starts:
        sol = minimize(
            fun_and_grad if analytic else fun,
            x0,
            jac=analytic,
            method="L-BFGS-B",
            bounds=bounds,
            options=options,
        )
        best = min(best, float(sol.fun))
        nfev += sol.nfev
    return best, nfev


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=defaults.N_STARTS)
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of the phifit fit")
    args = parser.parse_args()

    runs = table_from_frame(simulate("paper", noise=0.005, seed=1), source="paper-design")
    fit(runs, n_starts=10)  # warm-up (imports, caches)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = fit(runs, n_starts=args.starts, seed=0)
        times.append(time.perf_counter() - t0)
    ours = float(np.median(times))
    spec = LawSpec()
    starts = spec.lower + (spec.upper - spec.lower) * np.random.default_rng(0).random((args.starts, 6))

    print(f"cpu cores: {os.cpu_count()}   runs: {len(runs)}   starts: {args.starts}")
    print(
        f"{'phifit fit (median of ' + str(args.repeats) + ')':<46} {ours:9.3f} s   "
        f"objective {res.objective:.12e}   phi {res.phi:.6f}"
    )
    loops = [
        ("L-BFGS-B per start, FD gradient, tight (baseline)", False, TIGHT),
        ("L-BFGS-B per start, analytic gradient, tight", True, TIGHT),
        ("L-BFGS-B per start, FD gradient, SciPy defaults", False, {}),
    ]
    for label, analytic, options in loops:
        t0 = time.perf_counter()
        obj, nfev = lbfgsb_loop(runs, starts, analytic=analytic, options=options)
        took = time.perf_counter() - t0
        print(
            f"{label:<46} {took:9.3f} s   objective {obj:.12e}   evaluations {nfev}   "
            f"phifit is {took / ours:.0f}x faster, objective difference (phifit - loop) "
            f"{res.objective - obj:+.2e}"
        )


if __name__ == "__main__":
    main()
