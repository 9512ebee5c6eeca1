"""Does one 10-run table show both faces of the honest answer? A scan of third-party-like tables.

Issue 41 asked for one table (10 runs, one token count, loss U-shaped in r, one outlier) on which
``fit().summary()`` names an ill-conditioned information matrix *and* a low R^2, *and* the
lack-of-fit test of r^phi rejects (so ``phifit.answer`` leads with it).  ``tests/test_honest_answer.py``
shows the two on two tables; this script looks for one table with all three.

Every table: two widths d x r in {1, 2, 4, 8, 16} (10 runs), one token count, no budget, the loss
E + A (c_once b + c_rec m_r b)^-alpha (b = 12 d^2, E = 1.8) plus noise sd 0.002 and one outlying
run, with one free multiplier m_r per r.  Four families of m_r and designs, drawn at random:

- ``random``: m_r log-normal (sd 1.2), m_1 = 1;
- ``bump``: m_r = exp(h - s (log2 r - x0)^2) (peak anywhere in r = 2-8), jittered;
- ``symmetric``: the bump centred at r = 4 (the shape that puts the r^phi fit at phi ~ 0,
  where E, A and alpha meet two width levels: the singular case);
- ``tilted``: around m_r = (1, 4, 6, 2, 0.2) (the table on which the lack-of-fit test rejects).

For each: the Huber fit (``phifit.fit``), the condition number of its information matrix
(:func:`phifit.diagnostics.identifiability.identifiability`), R^2, and, where the matrix is
ill-conditioned (> ``MAX_CONDITION``) and R^2 < 0.9, the lack-of-fit wild test with 199 replicates.

Run:  python benchmarks/honest_answer_scan.py [--tables 200] [--seed 0]    (about 10 minutes, one core)
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

import phifit
from phifit.diagnostics.identifiability import identifiability
from phifit.diagnostics.multipliers import fit_multipliers
from phifit.fitters.common import LOW_R2
from phifit.fitters.standard_errors import MAX_CONDITION
from phifit.runs.table import as_runs

RS = np.array([1, 2, 4, 8, 16])
X = np.log2(RS)


def table(mult, widths, c_once, c_rec, alpha, big_a, seed, out_idx, out_size) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for d in widths:
        block = 12 * d * d
        for r, m in zip(RS, mult, strict=True):
            loss = 1.8 + big_a * (c_once * block + c_rec * m * block) ** -alpha + rng.normal(0, 0.002)
            rows.append(
                {
                    "run_id": f"d{d}_r{r}",
                    "r": int(r),
                    "n_once": c_once * block,
                    "n_rec": c_rec * block,
                    "tokens": 5e9,
                    "loss": loss,
                }
            )
    rows[out_idx]["loss"] += out_size
    return pd.DataFrame(rows).round({"loss": 4})


def draw(family: str, rng: np.random.Generator) -> dict:
    if family == "random":
        m = np.concatenate([[1.0], np.exp(rng.normal(0, 1.2, 4))])
    elif family in ("bump", "symmetric"):
        x0 = 2.0 if family == "symmetric" else rng.uniform(1, 3)
        h = rng.uniform(0.2, 3.0)
        m = np.exp(h - (h / 4 if family == "symmetric" else rng.uniform(0.1, 1.0)) * (X - x0) ** 2)
        m = m / m[0] * np.exp(rng.normal(0, 0.05 if family == "symmetric" else 0.2, 5))
        m[0] = 1.0
    else:
        m = np.array([1, 4, 6, 2, 0.2]) * np.exp(rng.normal(0, 0.3, 5))
        m[0] = 1.0
    d1 = int(rng.choice([256, 384, 512]))
    widths = (d1, int(d1 * rng.choice([1.0625, 1.25, 1.5, 2.0, 4.0])))
    return {
        "mult": m,
        "widths": widths,
        "c_once": float(rng.choice([0.1, 0.5, 1, 4])),
        "c_rec": float(rng.choice([1, 2, 4, 8])),
        "alpha": float(rng.uniform(0.2, 0.5)),
        "big_a": float(np.exp(rng.uniform(3, 7))),
        "out_idx": int(rng.integers(10)),
        "out_size": float(rng.choice([0.01, 0.02, 0.04, 0.08])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200, help="tables per family")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        f"{'family':<10}{'tables':>8}{'ill-cond.':>11}{'+ low R2':>10}{'tested':>8}{'rejected':>10}  "
        "lack-of-fit p (ill-conditioned, low R2)  max condition where rejected"
    )
    for k, family in enumerate(("random", "bump", "symmetric", "tilted")):
        rng = np.random.default_rng([args.seed, k])
        n = ill = both = rejected = 0
        ps, cond_rejected = [], []
        for i in range(args.tables):
            spec = draw(family, rng)
            frame = table(seed=i, **spec)
            if frame["loss"].min() < 1.0 or frame["loss"].max() > 6.0:
                continue
            runs = as_runs(frame)
            try:
                fit = phifit.fit(runs)
                cond = identifiability(runs, fit, profile_points=0).condition_number
            except ValueError:
                continue
            n += 1
            ill += cond > MAX_CONDITION
            low = fit.r2 < LOW_R2
            if cond > MAX_CONDITION and low:
                both += 1
                mult = fit_multipliers(runs, fit, n_boot=0, n_wild=199, n_jobs=1)
                if mult.wild is not None:
                    ps.append(mult.wild.p_value)
                    rejected += bool(mult.rejected)
            elif low and family == "tilted" and i % 5 == 0:  # the rejecting family: its conditioning
                mult = fit_multipliers(runs, fit, n_boot=0, n_wild=199, n_jobs=1)
                if mult.rejected:
                    cond_rejected.append(cond)
        p_text = ", ".join(f"{p:.3f}" for p in sorted(ps)) or "-"
        c_text = f"{max(cond_rejected):.2g} ({len(cond_rejected)} rejected)" if cond_rejected else "-"
        print(
            f"{family:<10}{n:>8}{ill:>11}{both:>10}{len(ps):>8}{rejected:>10}  {p_text}  {c_text}", flush=True
        )


if __name__ == "__main__":
    main()
