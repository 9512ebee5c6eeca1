"""Speed of the default Huber fit against a per-start L-BFGS-B loop, in one run.

Both solve the reference problem on the same 116-run paper-design table (log-noise
sd 0.005): the summed Huber(delta=1e-3) objective on log-loss in the study's box,
from the same 500 uniform random starts.

- phifit: ``phifit.fit(runs)`` (vectorised LM over all starts, then least_squares polish);
- baseline: ``scipy.optimize.minimize(method="L-BFGS-B")`` once per start with the
  analytic gradient and the tight tolerances the problem needs (ftol=1e-15,
  gtol=1e-12, maxfun=1e5), keeping the best objective: the study's protocol.

Run:  python benchmarks/fit_speed.py [--starts 500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy.optimize import minimize

from phifit import fit
from phifit.fit.huber import DELTA
from phifit.law import LawSpec, log_loss_and_jacobian
from phifit.runs import table_from_frame
from phifit.simulate import simulate


def lbfgsb_loop(runs, starts: np.ndarray) -> float:
    """Best objective over per-start L-BFGS-B runs with the analytic gradient."""
    design, y = runs.design, runs.log_loss

    def fun(theta):
        pred, jac = log_loss_and_jacobian(theta, design)
        res = pred - y
        a = np.abs(res)
        obj = np.where(a <= DELTA, 0.5 * res * res, DELTA * (a - 0.5 * DELTA)).sum()
        dres = np.where(a <= DELTA, res, DELTA * np.sign(res))
        return obj, dres @ jac

    spec = LawSpec()
    bounds = list(zip(spec.lower, spec.upper))
    best = np.inf
    for x0 in starts:
        sol = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxfun": 100_000, "maxiter": 10_000})
        best = min(best, float(sol.fun))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of the phifit fit")
    args = parser.parse_args()

    runs = table_from_frame(simulate("paper", noise=0.005, seed=1), source="paper-design")
    fit(runs, n_starts=10)  # warm-up (imports, caches)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = fit(runs, n_starts=args.starts, seed=0)
        times.append(time.perf_counter() - t0)
    spec = LawSpec()
    starts = spec.lower + (spec.upper - spec.lower) * np.random.default_rng(0).random((args.starts, 6))
    t0 = time.perf_counter()
    base_obj = lbfgsb_loop(runs, starts)
    base_time = time.perf_counter() - t0

    ours = float(np.median(times))
    print(f"cpu cores: {os.cpu_count()}   runs: {len(runs)}   starts: {args.starts}")
    print(f"phifit fit (median of {args.repeats}): {ours:8.3f} s   objective {res.objective:.12e}"
          f"   phi {res.phi:.6f}")
    print(f"L-BFGS-B per-start loop:        {base_time:8.3f} s   objective {base_obj:.12e}")
    print(f"speed-up: {base_time / ours:.0f}x   objective difference (ours - baseline): "
          f"{res.objective - base_obj:+.3e}")


if __name__ == "__main__":
    main()
