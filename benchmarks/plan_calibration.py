"""Calibration of `phifit plan`: predicted vs realised width of phi's interval and power.

For each design (the paper design at log-noise sd 0.004 under the study's law; the bundled
CPU design under the Huber fit of its own baseline runs, at the residual sd of that fit):

- **predicted**: :func:`phifit.plan.design.simulate_plan` as ``phifit plan --simulate`` runs it
  (``--tables`` tables, 100 cell-bootstrap replicates, 39 wild replicates, 200 starts),
  and the asymptotic mode (:func:`phifit.plan.design.asymptotic_plan`);
- **realised**: ``--realised`` further tables drawn with independent seeds and analysed
  with the reference settings a user would run (500 starts, a 200-replicate cell
  bootstrap as the study's, wild cluster tests with 99 replicates).

Reported per design: the median 95% percentile-interval width of phi (predicted, realised,
asymptotic) and the rejection rate of phi = 0 at p < 0.05 (predicted, realised, asymptotic),
with the acceptance bands (width within +-15%, power within +-7 points; asymptotic width
within +-25% of the simulation's on the paper design).

    python benchmarks/plan_calibration.py --tables 100 --realised 100 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np


def realised(design, params, noise, n_tables: int, seed: int, n_jobs: int) -> dict:
    """Tables analysed with the reference settings (500 starts, 200 bootstrap, 99 wild)."""
    from joblib import Parallel, delayed

    from phifit.plan.modes import analyse_table

    frame = design.frame[["budget", "r", "size", "n_once", "n_rec", "tokens", "flops"]].copy()
    seeds = [int(s.generate_state(1)[0] % 2**31) for s in np.random.SeedSequence(seed).spawn(n_tables)]
    out = Parallel(n_jobs=n_jobs)(
        delayed(analyse_table)(frame, dict(params), (noise.per_run, noise.cell), s, 200, 99, None, 500)
        for s in seeds
    )
    ok = [t for t in out if "error" not in t and math.isfinite(t["width"])]
    widths = np.array([t["width"] for t in ok])
    rej = np.array([t["p0"] < 0.05 for t in ok])
    return {
        "n": len(ok),
        "width_median": float(np.median(widths)),
        "width_q10": float(np.quantile(widths, 0.1)),
        "width_q90": float(np.quantile(widths, 0.9)),
        "power_phi0": float(rej.mean()),
        "power_phi0_mc_se": float(math.sqrt(rej.mean() * (1 - rej.mean()) / len(rej))),
        "p_box": float(np.mean([t["at_box"] for t in ok])),
    }


def main() -> None:
    from phifit.fitters.huber import fit_huber
    from phifit.plan.design import (
        NoiseModel,
        asymptotic_plan,
        design_from_paper,
        design_from_table,
        noise_from_pilot,
        simulate_plan,
    )
    from phifit.recipes.pairing import select_recipe
    from phifit.runs.table import load_runs
    from phifit.study import REFERENCE_PARAMS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=100, help="tables of the simulation mode (prediction)")
    ap.add_argument("--realised", type=int, default=100, help="independent tables analysed in full")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--designs", default="paper,cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    cases = {}
    if "paper" in args.designs:
        cases["paper"] = (design_from_paper(), dict(REFERENCE_PARAMS), NoiseModel(0.004, source="given"))
    if "cpu" in args.designs:
        runs = select_recipe(load_runs("data/cpu_small_runs.csv")).runs
        fit = fit_huber(runs)
        cases["cpu"] = (design_from_table(runs), dict(fit.params), noise_from_pilot(runs, fit))
    results = {}
    for name, (design, params, noise) in cases.items():
        t0 = time.perf_counter()
        asym = asymptotic_plan(design, params, noise)
        sim = simulate_plan(
            design, params, noise, n_tables=args.tables, seed=args.seed, n_jobs=args.jobs, progress=False
        )
        t1 = time.perf_counter()
        real = realised(design, params, noise, args.realised, args.seed + 1, args.jobs)
        t2 = time.perf_counter()
        w_err = sim.width_median / real["width_median"] - 1
        p_err = sim.power.get("phi=0", math.nan) - real["power_phi0"]
        results[name] = {
            "noise": noise.to_dict(),
            "predicted": {
                "width_median": sim.width_median,
                "width_q10": sim.width_q10,
                "width_q90": sim.width_q90,
                "power_phi0": sim.power.get("phi=0"),
                "p_box": sim.p_box,
                "n_failed": sim.n_failed,
                "seconds": t1 - t0,
            },
            "realised": {**real, "seconds": t2 - t1},
            "asymptotic": {
                "width": asym.width,
                "power_phi0": asym.power["phi=0"],
                "trusted": asym.trusted,
                "ratio_to_simulation": asym.width / sim.width_median,
            },
            "width_rel_error": w_err,
            "power_abs_error": p_err,
            "width_ok": abs(w_err) <= 0.15,
            "power_ok": abs(p_err) <= 0.07,
        }
        print(
            f"{name}: noise {noise.per_run:.4g}/{noise.cell:.4g}; median width "
            f"predicted {sim.width_median:.4g} "
            f"[{sim.width_q10:.3g}, {sim.width_q90:.3g}] vs realised {real['width_median']:.4g} "
            f"[{real['width_q10']:.3g}, {real['width_q90']:.3g}] ({100 * w_err:+.1f}%); power vs phi = 0 "
            f"predicted {sim.power.get('phi=0', math.nan):.3f} vs realised {real['power_phi0']:.3f} "
            f"({100 * p_err:+.1f} points); P(box) {sim.p_box:.2f} vs {real['p_box']:.2f}; asymptotic width "
            f"{asym.width:.4g} ({asym.width / sim.width_median:.2f} x simulation, "
            f"{'trusted' if asym.trusted else 'flagged untrusted'}); {t1 - t0:.0f} s + {t2 - t1:.0f} s",
            flush=True,
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
