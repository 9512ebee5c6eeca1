"""What non-looped model a looped one is worth (paper §3.3, App. F.4).

A looped model with N_once once-applied parameters and N_rec shared parameters looped r
times predicts the loss of a non-looped model of

    N_eff = N_once + r^phi N_rec            (effective non-looped size)

parameters, holds N_unique = N_once + N_rec parameters, and costs per token what a
non-looped model of N_unrolled = N_once + r N_rec parameters costs (its unrolled size:
every recurrence executes the shared block again).

Example (paper-notes §4.1): a 1B non-looped model at width d has 20 blocks of
n_b = 12 d^2; its r = 4 iso-depth twin keeps 2 + 2 blocks once and loops 4 blocks
4 times.  With phi = 0.459: N_unique = 8/20 = 0.40 (0.408, i.e. ~410M, with the
2 d^2 injection layer counted in N_rec), N_eff = (4 + 4^0.459 * 4)/20 = 0.578 (~580M),
N_unrolled = (4 + 4 * 4)/20 = 1.0 (~1B).  The paper's 580M omits the injection
layer; counting it gives (48 + 4^phi * 50)/240 = 0.594.  :func:`paper_example`
returns both.

Intervals: N_eff is monotone in phi, so the percentile interval of phi over bootstrap
draws maps exactly onto the percentile interval of N_eff (:mod:`phifit.bootstrap.draws`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import defaults
from .bootstrap.draws import clean_thetas, percentile_interval
from .law import JointLaw
from .result import FitResult
from .runs.table import RunTable
from .serialize import JsonIO, to_plain

__all__ = ["Equivalence", "equivalence", "paper_example", "EquivalenceTable", "equivalence_table"]


def _fmt_count(x: float) -> str:
    """12.3M / 1.03B style, two to three significant figures."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


@dataclass(frozen=True)
class Equivalence(JsonIO):
    """A looped model's effective size, unique size and unrolled training cost.

    n_eff = n_once + r^phi n_rec; n_unique = n_once + n_rec; n_unrolled = n_once + r n_rec
    (the non-looped size with the same training FLOPs per token).  Intervals are
    percentile intervals over bootstrap draws of phi (None without draws).
    """

    r: int
    n_once: float
    n_rec: float
    phi: float
    n_unique: float
    n_eff: float
    n_unrolled: float
    level: float = defaults.LEVEL
    n_draws: int = 0
    phi_interval: list[float] | None = None
    n_eff_interval: list[float] | None = None

    @property
    def eff_over_unrolled(self) -> float:
        """N_eff / N_unrolled: the share of the compute-matched non-looped size obtained."""
        return self.n_eff / self.n_unrolled

    @property
    def eff_over_unique(self) -> float:
        """N_eff / N_unique: how many non-looped parameters each unique parameter is worth."""
        return self.n_eff / self.n_unique

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out.update(eff_over_unrolled=self.eff_over_unrolled, eff_over_unique=self.eff_over_unique)
        return to_plain(out)

    def summary(self) -> str:
        ci = ""
        if self.n_eff_interval is not None:
            lo, hi = self.n_eff_interval
            how = (
                f"{self.n_draws} bootstrap draws"
                if self.n_draws
                else "the interval of phi mapped through N_eff"
            )
            ci = f" [{_fmt_count(lo)}, {_fmt_count(hi)}] ({self.level:.0%}, {how})"
        phi_ci = ""
        if self.phi_interval is not None:
            phi_ci = f" [{self.phi_interval[0]:.3f}, {self.phi_interval[1]:.3f}]"
        return "\n".join(
            [
                f"looped model: r = {self.r}, n_once = {_fmt_count(self.n_once)}, "
                f"n_rec = {_fmt_count(self.n_rec)}, phi = {self.phi:.4g}{phi_ci}",
                f"  unique parameters   N_once + N_rec       = {_fmt_count(self.n_unique)}",
                f"  effective size      N_once + r^phi N_rec = {_fmt_count(self.n_eff)}{ci}",
                f"  unrolled cost       N_once + r N_rec     = {_fmt_count(self.n_unrolled)} "
                f"(training FLOPs per token of a non-looped model this size)",
                f"  => a {_fmt_count(self.n_unique)} looped model ~ a {_fmt_count(self.n_eff)} "
                f"non-looped one at the training cost of a {_fmt_count(self.n_unrolled)} one "
                f"(N_eff / N_unrolled = {self.eff_over_unrolled:.3f})",
            ]
        )

    def __str__(self) -> str:
        return self.summary()


def equivalence(
    law: FitResult | JointLaw,
    *,
    n_once: float,
    n_rec: float,
    r: int,
    thetas: np.ndarray | None = None,
    phi_interval: Sequence[float] | None = None,
    level: float | None = None,
) -> Equivalence:
    """Effective size N_eff = n_once + r^phi n_rec, unique size and unrolled cost.

    ``n_once``, ``n_rec`` and ``r`` are keyword-only
    (``equivalence(fit, n_once=2e8, n_rec=2e8, r=4)``): three numbers in a row whose order is
    easy to confuse.  phi comes from ``law``: a :class:`FitResult` (which must have identified phi) or a
    :class:`JointLaw` (e.g. ``dataclasses.replace(JointLaw.reference(), phi=0.5)`` for a
    given phi).  Intervals: ``thetas`` (bootstrap draws, (S, 6)) give percentile intervals
    for phi and N_eff; otherwise ``phi_interval`` (or a fit's percentile ``ci["phi"]``) is
    mapped through N_eff, which is monotone in phi, so a percentile interval of phi maps
    exactly onto the percentile interval of N_eff.  ``level``: of the intervals (default:
    the fit's ``ci_level`` when its interval is used, else :data:`phifit.defaults.LEVEL`); a
    level that contradicts the fit's interval is refused.
    """
    n_once, n_rec = float(n_once), float(n_rec)
    if not (math.isfinite(n_once) and n_once >= 0):
        raise ValueError(f"n_once must be a finite number >= 0, got {n_once}")
    if not (math.isfinite(n_rec) and n_rec >= 0):
        raise ValueError(f"n_rec must be a finite number >= 0, got {n_rec}")
    if n_once + n_rec <= 0:
        raise ValueError("n_once + n_rec must be > 0")
    if not (float(r) >= 1 and float(r) == int(r)):
        raise ValueError(f"r must be an integer >= 1, got {r}")
    r = int(r)
    if isinstance(law, FitResult):
        fit: FitResult | None = law
        if law.phi is None:
            raise ValueError("the fit did not identify phi; give a JointLaw with the phi to use")
        phi = float(law.phi)
    elif isinstance(law, JointLaw):
        fit, phi = None, float(law.phi)
    else:
        raise TypeError(f"law: expected a FitResult or a JointLaw, got {type(law).__name__}")
    draws = clean_thetas(thetas)
    phi_iv = eff_iv = None
    n = 0
    if draws is None and phi_interval is None and fit is not None and fit.ci and fit.ci.get("phi"):
        if level is not None and not math.isclose(level, fit.ci_level):
            raise ValueError(
                f"level = {level:g}, but the fit's interval of phi is at {fit.ci_level:g}; "
                "give thetas= (bootstrap draws) to read another level"
            )
        level = fit.ci_level
        phi_interval = fit.ci["phi"]
        n = int((fit.bootstrap or {}).get("n", 0)) - int((fit.bootstrap or {}).get("n_failed", 0))
    level = defaults.LEVEL if level is None else float(level)
    if draws is not None:
        phis = draws[:, 5]
        n = len(phis)
        phi_iv = percentile_interval(phis, level)
        eff_iv = percentile_interval(n_once + float(r) ** phis * n_rec, level)
    elif phi_interval is not None:
        lo, hi = sorted(float(v) for v in phi_interval)
        phi_iv = [lo, hi]
        eff_iv = sorted([n_once + float(r) ** lo * n_rec, n_once + float(r) ** hi * n_rec])
    return Equivalence(
        r=r,
        n_once=n_once,
        n_rec=n_rec,
        phi=phi,
        n_unique=n_once + n_rec,
        n_eff=n_once + float(r) ** phi * n_rec,
        n_unrolled=n_once + r * n_rec,
        level=level,
        n_draws=n,
        phi_interval=phi_iv,
        n_eff_interval=eff_iv,
    )


def paper_example(phi: float = 0.459, *, n_r1: float = 1e9, r: int = 4) -> dict[str, Equivalence]:
    """The study's F.4 example: the iso-depth r-looped twin of an ``n_r1`` non-looped model.

    The r = 1 model has 20 blocks of n_b = 12 d^2 (N = 240 d^2, ignoring the tiny norm
    gains).  Its twin keeps 2 + 2 blocks once (N_once = 48 d^2) and loops 16/r blocks
    (N_rec = (16/r) 12 d^2, plus the 2 d^2 injection layer when counted).

    Returns ``{"blocks_only": ..., "with_injection": ...}``.  At r = 4, phi = 0.459:
    blocks only: 400M unique, 578M effective, 1.00B unrolled; with injection: 408M
    (the paper's "410M"), 594M, 1.03B (the paper's "~3% injection overhead").  The
    paper's 580M is the blocks-only effective size.
    """
    if 16 % r:
        raise ValueError(f"r = {r} does not divide the 16 looped layers of the paper design")
    law = dataclasses.replace(JointLaw.reference(), phi=float(phi))
    d2 = n_r1 / 240.0
    n_once = 48 * d2
    blocks = (16 // r) * 12 * d2
    return {
        "blocks_only": equivalence(law, n_once=n_once, n_rec=blocks, r=r),
        "with_injection": equivalence(law, n_once=n_once, n_rec=blocks + 2 * d2, r=r),
    }


@dataclass(frozen=True)
class EquivalenceTable(JsonIO):
    """Equivalence of every distinct looped architecture (r > 1) of a run table; intervals
    of N_eff at ``level``."""

    rows: list[Equivalence]
    level: float = defaults.LEVEL

    def to_frame(self):
        """One row per looped architecture: r, n_once, n_rec, phi, n_unique, n_eff, n_unrolled,
        eff_over_unrolled, eff_over_unique and, with an interval, ``n_eff_lo``, ``n_eff_hi``."""
        import pandas as pd

        rows = []
        for e in self.rows:
            iv = e.n_eff_interval or [math.nan, math.nan]
            rows.append(
                {
                    "r": e.r,
                    "n_once": e.n_once,
                    "n_rec": e.n_rec,
                    "phi": e.phi,
                    "n_unique": e.n_unique,
                    "n_eff": e.n_eff,
                    "n_eff_lo": iv[0],
                    "n_eff_hi": iv[1],
                    "n_unrolled": e.n_unrolled,
                    "eff_over_unrolled": e.eff_over_unrolled,
                    "eff_over_unique": e.eff_over_unique,
                }
            )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "rows": [row.to_dict() for row in self.rows]}

    def summary(self) -> str:
        lines = [
            f"    {'r':>2} {'n_once':>9} {'n_rec':>9} {'unique':>9} {'N_eff':>9} "
            f"{f'{self.level:.0%} interval':>21} {'unrolled':>9} {'eff/unrolled':>12}"
        ]
        for e in self.rows:
            iv = (
                f"[{_fmt_count(e.n_eff_interval[0])}, {_fmt_count(e.n_eff_interval[1])}]"
                if e.n_eff_interval
                else ""
            )
            lines.append(
                f"    {e.r:>2} {_fmt_count(e.n_once):>9} {_fmt_count(e.n_rec):>9} "
                f"{_fmt_count(e.n_unique):>9} {_fmt_count(e.n_eff):>9} {iv:>21} "
                f"{_fmt_count(e.n_unrolled):>9} {e.eff_over_unrolled:>12.3f}"
            )
        return "\n".join(lines)


def equivalence_table(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    thetas: np.ndarray | None = None,
    level: float | None = None,
    recipe: str | None = None,
) -> EquivalenceTable:
    """:func:`equivalence` for each distinct (r, n_once, n_rec) with r > 1 in the table.

    ``level`` of the intervals: the fit's ``ci_level`` unless given.  ``recipe``: the recipe of a table whose
    ``variant`` column holds several (default the one ``fit`` was fitted to, else "baseline";
    :func:`phifit.recipes.pairing.recipe_runs`)."""
    from .runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=fit)  # one recipe of a mixed table, as --variant picks it
    level = fit.ci_level if level is None else float(level)
    if fit.phi is None:
        raise ValueError("the fit did not identify phi: no equivalence table")
    frame = runs.frame[["r", "n_once", "n_rec"]].drop_duplicates()
    frame = frame[frame["r"] > 1].sort_values(["r", "n_once", "n_rec"])
    rows = [
        equivalence(fit, n_once=row.n_once, n_rec=row.n_rec, r=int(row.r), thetas=thetas, level=level)
        for row in frame.itertuples(index=False)
    ]
    return EquivalenceTable(rows=rows, level=level)
