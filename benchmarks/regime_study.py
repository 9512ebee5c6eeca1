"""The CPU regime study: for each arm, the gap of r = 4 to r = 1 at equal FLOPs and m_4 with intervals.

Each arm is a small run table (``data/regime/ARM_runs.csv``, trained from ``trainers/sweeps/regime/ARM.toml``)
that changes one thing, or one named group of things, against ``regime_base`` (the recipe of the shipped
``cpu_recipe_tuned`` / ``cpu_adaptive`` tables). Two measured quantities per arm:

- **The gap** Delta = L(r = 4) - L(r = 1) at the same width, budget (hence, iso-depth, nearly the same tokens)
  and seed, in nats per token. Per (budget, width) cell the mean over seeds; the arm's gap is the mean over
  cells, with a 95% t interval from the seed-to-seed spread within cells (pooled variance of the paired
  differences, n_cells x (n_seeds - 1) degrees of freedom). A negative gap means the looped model wins.
- **m_4 = 4^phi**, the worth of the shared block's four passes in unique-block units (the study: m_4 ~ 1.9;
  m_4 = 1: four passes are worth one block; m_4 < 1: looping costs more than its passes bring). With only r in
  {1, 4} an arm cannot fit every exponent, so alpha and beta are held at a reference pair and E, A, B, phi are
  fitted (Huber on log-loss, phifit's reference method); the interval is the percentile interval of a
  bootstrap over runs (two seeds per cell; a bootstrap over the 8 (budget, width, r) cells, with 4 free
  parameters, gave degenerate intervals). The reference pair is the shipped ``cpu_adaptive`` fit (alpha
  0.362, beta 0.442; the same recipe as regime_base); ``--exponents`` gives another pair, to show how much m_4
  leans on it.

Arms with only one r (the r = 1 control, the r = 4 learning rates) are measured against regime_base: the
control's r = 1 against the plain r = 1 (the price of the loop machinery alone), a learning-rate arm's r = 4
against regime_base's r = 4; their m_4 pairs the arm's runs with regime_base's other r.

    python benchmarks/regime_study.py                      # the side-by-side table (markdown)
    python benchmarks/regime_study.py --exponents 0.243 0.332 --n-boot 200
"""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

import phifit
from phifit.bootstrap import block_bootstrap
from phifit.runs.table import table_from_frame

DATA = Path(__file__).resolve().parents[1] / "data" / "regime"

#: (arm, what it changes, the arm paired with it for m_4 when it has one r only)
ARMS = [
    ("base", "today's recipe: 10 layers 1 / (8/r) / 1, head dim 16, bytes, context 128, clip 1.0", None),
    ("prelude2", "12 layers as 2 / (8/r) / 2 (the study's prelude and coda)", None),
    ("loopctl", "r = 1 built with the loop machinery (1 / 8 / 1, injection W, norm_recur)", "base"),
    ("loopadd", "r = 1 with the machinery less W (additive injection: u = e), norm_recur kept", "base"),
    ("headdim32", "head dim 32 (widths 32, 64)", None),
    ("bpe", "BPE 4,096 with context 256 (batch 8: 2,048 tokens per step)", None),
    ("bpectl", "loopctl at BPE: r = 1 with the loop machinery, bpe's tokenizer and shapes", "bpe"),
    ("recipe", "no gradient clipping; AdamW groups at the study's rates", None),
    ("shape", "6 layers as 1 / (4/r) / 1 at widths 64, 96 (d/L 11-16)", None),
    ("lr010", "MuonH base rate 0.01 for r = 4 (base: 0.02)", "base"),
    ("lr040", "MuonH base rate 0.04 for r = 4 (base: 0.02)", "base"),
    ("scale", "base at 8e12 and 1.6e13 FLOPs (d = 32)", None),
    ("scalectl", "loopctl at 8e12 and 1.6e13 FLOPs (d = 32)", "scale"),
    ("nonorm", "loopadd without norm_recur (recur_norm = false): u = e, no shared RMSNorm", "base"),
    ("bpe2k", "bpe with a 2,048-token vocabulary (context 256, batch 8)", None),
]


def load(arm: str) -> pd.DataFrame | None:
    path = DATA / f"{arm}_runs.csv"
    if not path.exists():
        return None
    df = pd.read_csv(path)
    return df if len(df) else None


def paired_gap(looped: pd.DataFrame, anchor: pd.DataFrame, column: str = "loss") -> dict[str, float] | None:
    """Mean of L(looped) - L(anchor) over (budget, size) cells, paired by seed, with a 95% t interval
    (``column``: the loss in nats per token, or ``bits_per_byte``)."""
    m = paired(looped, anchor, column)
    if m.empty:
        return None
    cells = m.groupby(["budget", "size"])["d"]
    means = cells.mean()
    dev = m["d"] - cells.transform("mean")
    dof = int(len(m) - len(means))
    out = {"gap": float(means.mean()), "cells": int(len(means)), "pairs": int(len(m)), "dof": dof}
    if dof > 0:
        pooled = float((dev**2).sum() / dof)
        # mean over cells of cell means: var = sum_c s^2 / n_c / C^2
        n_c = cells.size().to_numpy()
        se = math.sqrt(pooled * float(np.sum(1.0 / n_c)) / len(n_c) ** 2)
        half = float(stats.t.ppf(0.975, dof)) * se
        out |= {"lo": out["gap"] - half, "hi": out["gap"] + half, "se": se}
    out["by_cell"] = {f"{b:g}/d{int(s)}": round(float(v), 4) for (b, s), v in means.items()}
    return out


def m4(
    table: pd.DataFrame, exponents: tuple[float, float], n_boot: int, seed: int
) -> dict[str, float] | None:
    """m_4 = 4^phi with alpha, beta held at ``exponents``; percentile interval over runs."""
    if set(table["r"]) != {1, 4}:
        return None
    runs = table_from_frame(table.reset_index(drop=True), source="regime")
    fix = {"alpha": exponents[0], "beta": exponents[1]}
    if len(runs) <= 4 or table.groupby(["budget", "size", "r"]).ngroups < 6:
        return None  # fewer cells than a fit of E, A, B, phi and its cell bootstrap need
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = phifit.fit(runs, fix=fix)
        boot = block_bootstrap(runs, fit, n_boot=n_boot, block="run", seed=seed, progress=False)
    phi = fit.params["phi"]
    draws = np.asarray(boot.params["phi"], dtype=float)
    draws = draws[np.isfinite(draws)]
    lo, hi = np.percentile(draws, [2.5, 97.5]) if len(draws) else (math.nan, math.nan)
    return {"m4": 4.0**phi, "lo": 4.0**lo, "hi": 4.0**hi, "phi": phi, "r2": fit.r2, "n": len(runs)}


def slope_over_budget(diffs: pd.DataFrame) -> dict[str, float] | None:
    """Least-squares slope of paired differences ``d`` against log2(budget), with a 95% t interval."""
    if diffs["budget"].nunique() < 2 or len(diffs) < 3:
        return None
    x = np.log2(diffs["budget"].to_numpy(float))
    y = diffs["d"].to_numpy(float)
    fit = stats.linregress(x, y)
    half = float(stats.t.ppf(0.975, len(x) - 2)) * fit.stderr
    return {"slope": fit.slope, "lo": fit.slope - half, "hi": fit.slope + half, "n": len(x)}


def paired(looped: pd.DataFrame, anchor: pd.DataFrame, column: str = "loss") -> pd.DataFrame:
    """Seed-paired differences ``d`` = looped - anchor per (budget, size, seed)."""
    keys = ["budget", "size", "seed"]
    m = looped[keys + [column]].merge(anchor[keys + [column]], on=keys, suffixes=("_x", "_y"))
    return m.assign(d=m[f"{column}_x"] - m[f"{column}_y"])


#: The budget at which the scale / scalectl rule reads the price and the gap.
RULE_BUDGET = 1.6e13


def budget_rule(name: str, diffs: pd.DataFrame, low_mean: float) -> str:
    """The scale / scalectl decision rule (docs/regime.md): fades, holds or undecided."""
    sl = slope_over_budget(diffs)
    top = diffs[diffs["budget"] == diffs["budget"].max()]["d"]
    if sl is None or top.empty:
        return f"{name}: not enough budgets yet"
    at_top, half = float(top.mean()), low_mean / 2
    if diffs["budget"].max() < RULE_BUDGET:
        verdict = f"not decided yet (the rule reads {RULE_BUDGET:.3g}, not trained yet)"
    elif sl["hi"] < 0 and at_top < half:
        verdict = "fades"
    elif sl["lo"] <= 0 <= sl["hi"] and at_top > half:
        verdict = "holds"
    else:
        verdict = "undecided"
    return (
        f"{name}: slope {sl['slope']:+.4f} [{sl['lo']:+.4f}, {sl['hi']:+.4f}] nats per doubling of budget "
        f"({sl['n']} seed pairs over {diffs['budget'].nunique()} budgets); at {diffs['budget'].max():.3g} "
        f"{at_top:+.3f} ({len(top)} pairs) against half the 2e12-4e12 mean, {half:.3f}: **{verdict}**"
    )


def decision_rules(tables: dict[str, pd.DataFrame | None]) -> list[str]:
    """The readings of the rules written before the runs of scale, scalectl, nonorm, bpe2k, lr010
    and lr040."""
    out = []
    base, scale = tables["base"], tables["scale"]
    loopctl, scalectl = tables["loopctl"], tables["scalectl"]
    if base is not None and scale is not None:
        d32 = pd.concat([base[base["size"] == 32], scale])
        gap = paired(d32[d32.r == 4], d32[d32.r == 1])
        low = gap[gap["budget"] <= 4e12]["d"].mean()
        out.append(budget_rule("gap r = 4 - r = 1 (base, scale; d = 32)", gap, float(low)))
        if loopctl is not None and scalectl is not None:
            ctl = pd.concat([loopctl[loopctl["size"] == 32], scalectl])
            price = paired(ctl, d32[d32.r == 1])
            low = price[price["budget"] <= 4e12]["d"].mean()
            out.append(budget_rule("machinery's price (loopctl, scalectl; d = 32)", price, float(low)))
    nonorm = tables["nonorm"]
    if nonorm is not None and base is not None:
        g = paired_gap(nonorm, base[base.r == 1])
        if g and "lo" in g:
            if g["lo"] <= 0 <= g["hi"] and g["hi"] < 0.038:
                verdict = "norm_recur is the cost"
            elif g["lo"] <= 0.076 <= g["hi"]:
                verdict = "norm_recur is not the cost"
            else:
                verdict = f"part of the cost (share {1 - g['gap'] / 0.076:.0%})"
            out.append(
                f"nonorm's price: {g['gap']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}] ({g['pairs']} pairs) "
                f"against loopadd's 0.076: **{verdict}**"
            )
    bpe, bpe2k = tables["bpe"], tables["bpe2k"]
    if bpe is not None and bpe2k is not None and "bits_per_byte" in bpe2k:
        ref = paired_gap(bpe[bpe.r == 4], bpe[bpe.r == 1], column="bits_per_byte")
        g = paired_gap(bpe2k[bpe2k.r == 4], bpe2k[bpe2k.r == 1], column="bits_per_byte")
        if ref and g and "lo" in ref and "lo" in g:
            overlap = g["lo"] <= ref["hi"] and ref["lo"] <= g["hi"]
            out.append(
                f"bpe2k's gap {g['gap']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}] bits per byte "
                f"({g['pairs']} pairs) "
                f"against bpe's {ref['gap']:+.3f} [{ref['lo']:+.3f}, {ref['hi']:+.3f}]: **the vocabulary "
                + ("does not matter to the gap**" if overlap else "does**")
            )
    base_gap = paired_gap(base[base.r == 4], base[base.r == 1]) if base is not None else None
    for arm in ("lr010", "lr040"):
        lr = tables[arm]
        if lr is None or base is None or not base_gap:
            continue
        g = paired_gap(lr[lr.r == 4], base[base.r == 4])
        if not g or "lo" not in g:
            continue
        half = base_gap["gap"] / 2
        if g["hi"] < 0 and g["gap"] < -half:
            verdict = "the rate is part of the gap"
        elif not g["hi"] < 0:
            verdict = "base's rate stands"
        else:
            verdict = f"a small tuning share ({-g['gap'] / base_gap['gap']:.0%})"
        out.append(
            f"{arm}'s r = 4 - base's r = 4: {g['gap']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}] "
            f"({g['pairs']} pairs) against minus half of base's gap, {-half:+.3f}: **{verdict}**"
        )
    return out


def fmt(x: float | None, nd: int = 3) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exponents", nargs=2, type=float, default=(0.362, 0.442), metavar=("ALPHA", "BETA"))
    parser.add_argument("--n-boot", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tables = {arm: load(arm) for arm, _, _ in ARMS}
    print(
        "| arm | changes | runs | seeds | gap r=4 − r=1 (nats) [95%] | per cell (budget/width) | m_4 [95%] | "
        "train h |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for arm, what, partner in ARMS:
        df = tables[arm]
        base = tables.get(partner) if partner else None
        if df is None or (partner and base is None):
            print(f"| {arm} | {what} | 0 | – | not trained yet | | | |")
            continue
        seeds = ",".join(str(s) for s in sorted(df["seed"].unique()))
        hours = df["wall_s"].sum() / 3600
        if partner is None:
            gap = paired_gap(df[df.r == 4], df[df.r == 1])
            table = df
        elif set(df["r"]) == {1}:  # a control's r = 1 against the plain r = 1; m_4 with it as the anchor
            gap = paired_gap(df[df.r == 1], base[base.r == 1])
            table = pd.concat([df[df.r == 1], base[(base.r == 4) & base["size"].isin(df["size"].unique())]])
        else:  # r = 4 only: against base's r = 4; m_4 with base's r = 1
            gap = paired_gap(df[df.r == 4], base[base.r == 4])
            table = pd.concat([df[df.r == 4], base[(base.r == 1) & base["size"].isin(df["size"].unique())]])
        m = m4(table, tuple(args.exponents), args.n_boot, args.seed)
        g = "–"
        if gap:
            g = f"{gap['gap']:+.3f}"
            if "lo" in gap:
                g += f" [{gap['lo']:+.3f}, {gap['hi']:+.3f}]"
            g += f" ({gap['pairs']} pairs)"
        cells = ", ".join(f"{k} {v:+.3f}" for k, v in (gap or {}).get("by_cell", {}).items())
        mm = f"{fmt(m['m4'], 2)} [{fmt(m['lo'], 2)}, {fmt(m['hi'], 2)}]" if m else "–"
        print(f"| {arm} | {what} | {len(df)} | {seeds} | {g} | {cells} | {mm} | {hours:.2f} |")
    print(
        f"\nm_4 with alpha = {args.exponents[0]}, beta = {args.exponents[1]} held; {args.n_boot} bootstrap "
        "replicates over runs. Gap rows of the r = 1 controls (loopctl, loopadd, "
        "scalectl): their r = 1 minus the plain r = 1 of base (scale); their m_4 pairs base's (scale's) "
        "r = 4 with the control's r = 1 as the anchor. Of lr010 / lr040: their r = 4 minus base's r = 4."
    )
    rules = decision_rules(tables)
    if rules:
        print("\nDecision rules written before the runs (docs/regime.md):\n")
        print("\n".join(f"- {line}" for line in rules))


if __name__ == "__main__":
    main()
