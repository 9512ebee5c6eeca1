"""The old training recipe against the new one on the same grid: does the recipe remove the misfit?

Reads two run tables of the same (budget, width, r) grid, trained with two recipes (by default the
baseline runs of ``data/cpu_small_runs.csv``, one AdamW rate for every width, against
``data/cpu_recipe_runs.csv``, the study's learning-rate transfer with MuonH), fits the joint law to each
(:func:`phifit.fitters.huber.fit_huber`) and prints side by side:

- phi and the law's R^2 (raw nats) and RMSE;
- the per-r mean residual (nats, actual - predicted) with its t = mean / (sd / sqrt(n)), as
  ``phifit diagnose`` reports it;
- the sd of the (budget, r) cell-mean residuals, and tau: their random-effects sd once the within-cell
  noise is taken out (one-way ANOVA, :func:`phifit.plan.inputs.misfit_from_pilot`): the misfit a plan
  carries;
- the lack-of-fit test of r^phi against one free multiplier per r
  (:func:`phifit.diagnostics.multipliers.fit_multipliers`: wild cluster bootstrap p, the m_r);
- phi's 95% cell-bootstrap percentile interval and its width (``--boot`` replicates, seed 0), the
  interval ``phifit report`` leads with.

    python benchmarks/recipe_comparison.py            # ~2 min on 2 cores
    python benchmarks/recipe_comparison.py --markdown # the table data/README.md quotes

Only rows of the ``baseline`` variant are read; a table whose grids differ is refused (a side-by-side
is only a comparison on the same cells).
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

OLD = "data/cpu_small_runs.csv"
NEW = "data/cpu_recipe_runs.csv"


def grid_of(frame: pd.DataFrame) -> set[tuple[float, int, int]]:
    """The (budget, width, r) cells of a table."""
    return set(zip(frame["budget"].astype(float), frame["d_model"].astype(int), frame["r"].astype(int)))


def load(path: str) -> Any:
    """The baseline runs of a table, as a RunTable."""
    from phifit.runs.table import load_runs

    runs = load_runs(path)
    if "variant" in runs.frame:
        runs = runs.subset(runs.frame["variant"].astype(str) == "baseline")
    return runs


def summarise(runs: Any, n_boot: int, n_wild: int, n_jobs: int) -> dict[str, Any]:
    """The misfit and the interval of one table (module docstring)."""
    from phifit.bootstrap.block import block_bootstrap
    from phifit.diagnostics.multipliers import fit_multipliers
    from phifit.diagnostics.residuals import residual_diagnostics
    from phifit.fitters.huber import fit_huber
    from phifit.plan.inputs import misfit_from_pilot

    fit = fit_huber(runs)
    res = residual_diagnostics(runs, fit)
    misfit = misfit_from_pilot(runs, fit)
    mult = fit_multipliers(runs, fit, n_boot=0, n_wild=n_wild, n_jobs=n_jobs)
    boot = block_bootstrap(runs, fit, n_boot=n_boot, seed=0, n_jobs=n_jobs, progress=False, jackknife=False)
    lo, hi = boot.ci["phi"]
    cell_means = np.array(list(misfit.offsets.values()))
    return {
        "source": runs.source,
        "n_runs": len(runs),
        "phi": float(fit.phi),
        "r2": float(fit.r2),
        "rmse": float(fit.rmse),
        "by_r": [{"r": int(g.group), "n": g.n, "mean": g.mean, "t": g.t} for g in res.by_r],
        "cell_mean_sd": float(np.std(cell_means, ddof=1)),
        "tau": float(misfit.tau),
        "within_sd": float(misfit.within_sd),
        "lof_p": None if mult.p_value is None else float(mult.p_value),
        "multipliers": {str(int(r)): float(m) for r, m in zip(mult.r, mult.multiplier)},
        "phi_ci": [float(lo), float(hi)],
        "width": float(hi - lo),
        "n_boot": n_boot,
    }


def markdown(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The side-by-side table."""

    def p(v: float | None) -> str:
        return "untested" if v is None else f"{v:.3g}"

    rows = [
        ("runs", lambda s: str(s["n_runs"])),
        ("phi (Huber fit)", lambda s: f"{s['phi']:.3f}"),
        ("R^2 (raw nats)", lambda s: f"{s['r2']:.4f}"),
        ("RMSE (nats)", lambda s: f"{s['rmse']:.4f}"),
    ]
    for r in [g["r"] for g in old["by_r"]]:
        rows.append(
            (
                f"mean residual, r = {r} (t)",
                lambda s, r=r: next(f"{g['mean']:+.4f} ({g['t']:+.1f})" for g in s["by_r"] if g["r"] == r),
            )
        )
    rows += [
        ("sd of the (budget, r) cell means", lambda s: f"{s['cell_mean_sd']:.4f}"),
        ("tau (cell offsets' random-effects sd)", lambda s: f"{s['tau']:.4f}"),
        ("within-cell sd", lambda s: f"{s['within_sd']:.4f}"),
        ("lack of fit of r^phi, wild p", lambda s: p(s["lof_p"])),
        (
            "free multipliers m_2, m_4, m_8",
            lambda s: ", ".join(f"{v:.2f}" for v in s["multipliers"].values()),
        ),
        ("phi, 95% cell-bootstrap interval", lambda s: f"[{s['phi_ci'][0]:.3f}, {s['phi_ci'][1]:.3f}]"),
        ("its width", lambda s: f"{s['width']:.3f}"),
    ]
    lines = ["| | old recipe | new recipe |", "|---|---|---|"]
    lines += [f"| {name} | {get(old)} | {get(new)} |" for name, get in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default=OLD, help=f"the old recipe's table (default {OLD})")
    ap.add_argument("--new", default=NEW, help=f"the new recipe's table (default {NEW})")
    ap.add_argument("--boot", type=int, default=1000, help="cell-bootstrap replicates of phi's interval")
    ap.add_argument("--wild", type=int, default=999, help="wild replicates of the lack-of-fit test")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--markdown", action="store_true", help="print the side-by-side as a Markdown table")
    ap.add_argument("--json", default=None, help="write both summaries as JSON")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    old, new = load(args.old), load(args.new)
    for path, runs in ((args.old, old), (args.new, new)):
        absent = [c for c in ("budget", "d_model", "r") if c not in runs.frame]
        if absent:
            raise SystemExit(
                f"{path}: no column {', '.join(absent)}; the side-by-side matches runs "
                "by (budget, d_model, r), "
                "as the trainer writes them"
            )
    missing = grid_of(old.frame) ^ grid_of(new.frame)
    if missing:
        raise SystemExit(
            f"{args.old} and {args.new} differ in {len(missing)} (budget, width, r) cells, "
            f"e.g. {sorted(missing)[:3]}: a side-by-side needs the same grid"
        )
    out = {
        "old": summarise(old, args.boot, args.wild, args.jobs),
        "new": summarise(new, args.boot, args.wild, args.jobs),
    }
    if args.markdown:
        print(markdown(out["old"], out["new"]))
    else:
        print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
