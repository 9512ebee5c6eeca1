"""Questions users ask of a fitted joint law, with bootstrap intervals when draws exist.

Effective size (paper §3.3, App. F.4)
    A looped model with N_once once-applied and N_rec shared parameters looped r times
    predicts the loss of a non-looped model of

        N_eff = N_once + r^phi N_rec            (effective non-looped size)

    parameters, holds N_unique = N_once + N_rec parameters, and costs per token what a
    non-looped model of N_unrolled = N_once + r N_rec parameters costs (its unrolled
    size: every recurrence executes the shared block again).

    Example (paper-notes §4.1): a 1B non-looped model at width d has 20 blocks of
    n_b = 12 d^2; its r = 4 iso-depth twin keeps 2 + 2 blocks once and loops 4 blocks
    4 times.  With phi = 0.459: N_unique = 8/20 = 0.40 (0.408, i.e. ~410M, with the
    2 d^2 injection layer counted in N_rec), N_eff = (4 + 4^0.459 * 4)/20 = 0.578 (~580M),
    N_unrolled = (4 + 4 * 4)/20 = 1.0 (~1B).  The paper's 580M omits the injection
    layer; counting it gives (48 + 4^phi * 50)/240 = 0.594.  :func:`paper_example`
    returns both.

Compute-optimal frontier (paper §4.2)
    For a FLOP budget C and recurrence r, the compute-optimal model minimises the
    predicted loss over the architectures of a family subject to C = F * D:

        L*_r(C) = min over size x of  L(N_once(x), N_rec(x), D = C / F_r(x), r)

    with F_r(x) the training FLOPs per token.  The frontier gap of r is
    L*_r(C) - L*_1(C).  Two families:

    - :class:`PaperFamily`: the study's architectures at a *continuous* width s
      (d = 64 s; prelude/recur/coda 2/(16/r)/2, injection 2 d^2 counted in N_rec, F from
      paper Eq. 6 via :func:`phifit.simulation.paper_architecture`) and D = C / F
      continuous.  Under the study's joint law this reproduces the joint-law gap ranges
      of paper-notes §4.2 (0.027-0.044, 0.053-0.086, 0.077-0.125 nats for r = 2, 4, 8
      over the six budgets).
    - :class:`TableFamily`: derived from a run table, per r: the once-applied share
      N_once / N as a linear function of log N, log F as a quadratic in log N (degrees
      capped by the number of distinct sizes), fitted to the distinct architectures of
      that r, and the search restricted to the range of N trained at that r (no
      extrapolation; an optimum on the edge is flagged).  F per token is ``flops /
      tokens`` when the table has a ``flops`` column, else 6 (N_once + r N_rec).

    The minimum over a dense grid in log size is refined by the parabola through the
    three grid points around it (vectorised over budgets and bootstrap draws).

Per-cell parabola minima (Chinchilla's approach 2, the study's headline numbers)
    In each (budget, r) cell, fit L = c0 + c1 x + c2 x^2 with x = log N_unique; the
    minimum is N* = exp(-c1 / (2 c2)), L* = c0 - c1^2 / (4 c2).  The gap is
    L*_r - L*_1 per budget (the study: 0.03-0.06, 0.05-0.08, 0.09-0.12 nats).  This
    estimate comes from the data alone, not from the law.

Intervals are percentile intervals of the quantity evaluated at each bootstrap draw of
theta (draws whose refit failed are dropped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .law import Design, JointLaw, log_loss, params_to_theta
from .plain import to_plain
from .reference import PAPER_GRID, PAPER_RECURRENCES, paper_architecture
from .result import FitResult
from .runs import RunTable

__all__ = [
    "Equivalence",
    "equivalence",
    "paper_example",
    "EquivalenceTable",
    "equivalence_table",
    "PaperFamily",
    "TableFamily",
    "Frontier",
    "frontier",
    "ParabolaMinima",
    "parabola_minima",
    "table_budgets",
    "paper_budgets",
    "IsoflopCurves",
    "isoflop_curves",
    "run_compute",
    "percentile_interval",
]


# ---------------------------------------------------------------------------- helpers
def percentile_interval(values: np.ndarray, level: float = 0.95) -> list[float]:
    """Percentile interval [q_(1-level)/2, q_(1+level)/2] over axis 0, ignoring NaN."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    values = np.asarray(values, float)
    if values.shape[0] == 0 or np.all(np.isnan(values)):
        shape = values.shape[1:]
        return np.full((2,) + shape, np.nan).tolist()
    return np.nanpercentile(values, q, axis=0).tolist()


def _clean_thetas(thetas: np.ndarray | None) -> np.ndarray | None:
    if thetas is None:
        return None
    thetas = np.atleast_2d(np.asarray(thetas, float))
    if thetas.shape[-1] != 6:
        raise ValueError(
            f"bootstrap thetas must have 6 columns (a, alpha, b, beta, e, phi), got shape {thetas.shape}"
        )
    keep = np.all(np.isfinite(thetas), axis=1)
    return thetas[keep] if keep.any() else None


def _law_theta(law: JointLaw | FitResult | Mapping[str, float]) -> np.ndarray:
    if isinstance(law, FitResult):
        return law.theta
    if isinstance(law, JointLaw):
        return law.theta
    return params_to_theta(law)


def _fmt_count(x: float) -> str:
    """12.3M / 1.03B style, two to three significant figures."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


# ------------------------------------------------------------------------ equivalence
@dataclass(frozen=True)
class Equivalence:
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
    level: float = 0.95
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
    n_once: float,
    n_rec: float,
    r: int,
    *,
    phi: float | None = None,
    fit: FitResult | None = None,
    thetas: np.ndarray | None = None,
    phi_interval: Sequence[float] | None = None,
    level: float = 0.95,
) -> Equivalence:
    """Effective size N_eff = n_once + r^phi n_rec, unique size and unrolled cost.

    phi comes from ``phi`` or else from ``fit``.  Intervals: ``thetas`` (bootstrap draws,
    (S, 6)) give percentile intervals for phi and N_eff; otherwise ``phi_interval`` (or the
    fit's percentile ``ci["phi"]``) is mapped through N_eff, which is monotone in phi, so
    a percentile interval of phi maps exactly onto the percentile interval of N_eff.
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
    if phi is None:
        if fit is None:
            raise ValueError("give phi= or fit=")
        if fit.phi is None:
            raise ValueError("the fit did not identify phi; give phi= explicitly")
        phi = fit.phi
    phi = float(phi)
    draws = _clean_thetas(thetas)
    phi_iv = eff_iv = None
    n = 0
    if phi_interval is None and fit is not None and fit.ci and fit.ci.get("phi"):
        phi_interval = fit.ci["phi"]
        n = int((fit.bootstrap or {}).get("n", 0)) - int((fit.bootstrap or {}).get("n_failed", 0))
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
    d2 = n_r1 / 240.0
    n_once = 48 * d2
    blocks = (16 // r) * 12 * d2
    return {
        "blocks_only": equivalence(n_once, blocks, r, phi=phi),
        "with_injection": equivalence(n_once, blocks + 2 * d2, r, phi=phi),
    }


@dataclass(frozen=True)
class EquivalenceTable:
    """Equivalence of every distinct looped architecture (r > 1) of a run table."""

    rows: list[Equivalence]

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [row.to_dict() for row in self.rows]}

    def summary(self) -> str:
        lines = [
            f"    {'r':>2} {'n_once':>9} {'n_rec':>9} {'unique':>9} {'N_eff':>9} "
            f"{'95% interval':>21} {'unrolled':>9} {'eff/unrolled':>12}"
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
    runs: RunTable, fit: FitResult, *, thetas: np.ndarray | None = None, level: float = 0.95
) -> EquivalenceTable:
    """:func:`equivalence` for each distinct (r, n_once, n_rec) with r > 1 in the table."""
    if fit.phi is None:
        raise ValueError("the fit did not identify phi: no equivalence table")
    frame = runs.frame[["r", "n_once", "n_rec"]].drop_duplicates()
    frame = frame[frame["r"] > 1].sort_values(["r", "n_once", "n_rec"])
    rows = [
        equivalence(row.n_once, row.n_rec, int(row.r), phi=fit.phi, thetas=thetas, level=level)
        for row in frame.itertuples(index=False)
    ]
    return EquivalenceTable(rows=rows)


# ---------------------------------------------------------------------------- families
@dataclass(frozen=True)
class PaperFamily:
    """The study's iso-depth architectures at a continuous width s, d = 64 s.

    Counts and FLOPs per token from :func:`phifit.simulation.paper_architecture` (paper
    Eq. 6, full BPTT, injection counted in N_rec); ``size`` is the width s.
    """

    r_values: tuple[int, ...] = PAPER_RECURRENCES
    s_range: tuple[float, float] = (2.0, 128.0)
    description: str = (
        "paper architectures at continuous width s (d = 64 s, prelude/recur/"
        "coda 2/(16/r)/2, injection in N_rec, F from paper Eq. 6)"
    )

    def grid(self, r: int, points: int) -> dict[str, np.ndarray]:
        x = np.linspace(math.log(self.s_range[0]), math.log(self.s_range[1]), points)
        arch = paper_architecture(np.exp(x), int(r))
        return {
            "x": x,
            "size": np.exp(x),
            "n_once": np.asarray(arch["n_once"], float),
            "n_rec": np.asarray(arch["n_rec"], float),
            "flops_per_token": np.asarray(arch["flops_per_token"], float),
        }


@dataclass(frozen=True)
class TableFamily:
    """Architectures interpolated from a run table, per r, as functions of x = log N_unique.

    ``coef`` maps r to {"once": polynomial coefficients of N_once / N in x (clipped to
    [0, 1]), "logf": coefficients of log F in x, "x_range": [min, max] of x trained at r}.
    """

    coef: Mapping[int, Mapping[str, list[float]]]
    description: str = (
        "derived from the table: per r, N_once/N linear and log F quadratic "
        "in log N, search limited to the sizes trained at that r"
    )

    @property
    def r_values(self) -> tuple[int, ...]:
        return tuple(sorted(self.coef))

    @classmethod
    def from_runs(cls, runs: RunTable) -> TableFamily:
        f = runs.flops_per_token
        source = "flops / tokens" if runs.has_flops else "6 (n_once + r n_rec)"
        coef: dict[int, dict[str, list[float]]] = {}
        for r in np.unique(runs.r.astype(int)):
            m = runs.r.astype(int) == r
            n = runs.n_once[m] + runs.n_rec[m]
            x = np.log(n)
            keys = np.round(x, 9)
            ux = np.unique(keys)
            xs = np.array([x[keys == k].mean() for k in ux])
            share = np.array([(runs.n_once[m][keys == k] / n[keys == k]).mean() for k in ux])
            logf = np.array([np.log(f[m][keys == k]).mean() for k in ux])
            k = len(ux)
            coef[int(r)] = {
                "once": np.polyfit(xs, share, min(1, k - 1)).tolist(),
                "logf": np.polyfit(xs, logf, min(2, k - 1)).tolist(),
                "x_range": [float(xs.min()), float(xs.max())],
                "n_sizes": k,
            }
        return cls(
            coef=coef,
            description=(
                f"derived from the table (F per token = {source}): per r, N_once/N linear and "
                f"log F quadratic in log N, search limited to the sizes trained at that r"
            ),
        )

    def grid(self, r: int, points: int) -> dict[str, np.ndarray]:
        """The architectures at ``points`` sizes evenly spaced in log N over the trained range."""
        lo, hi = self._coef(r)["x_range"]
        x = np.linspace(lo, hi, points) if hi > lo else np.full(points, lo)
        return self.at(r, x)

    def at(self, r: int, x: np.ndarray) -> dict[str, np.ndarray]:
        """The architectures at x = log N_unique (extrapolates the smooth fits outside the
        trained range: use only slightly beyond it)."""
        c = self._coef(r)
        x = np.asarray(x, float)
        n = np.exp(x)
        share = np.clip(np.polyval(c["once"], x), 0.0, 1.0)
        return {
            "x": x,
            "size": n,
            "n_once": share * n,
            "n_rec": (1 - share) * n,
            "flops_per_token": np.exp(np.polyval(c["logf"], x)),
        }

    def _coef(self, r: int) -> Mapping[str, Any]:
        if int(r) not in self.coef:
            raise ValueError(f"no runs with r = {r} in the table")
        return self.coef[int(r)]

    def to_dict(self) -> dict[str, Any]:
        return to_plain({"description": self.description, "coef": dict(self.coef)})


# ---------------------------------------------------------------------------- frontier
def _minimise_on_grid(values: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Minimum over the last axis with parabolic refinement; returns (f*, x*, at_edge)."""
    i = np.argmin(values, axis=-1)
    g = values.shape[-1]
    at_edge = (i == 0) | (i == g - 1)
    j = np.clip(i, 1, g - 2)
    f0 = np.take_along_axis(values, j[..., None], -1)[..., 0]
    fm = np.take_along_axis(values, (j - 1)[..., None], -1)[..., 0]
    fp = np.take_along_axis(values, (j + 1)[..., None], -1)[..., 0]
    h = x[1] - x[0] if g > 1 else 0.0
    curv = fp - 2 * f0 + fm
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(curv > 0, 0.5 * (fm - fp) / curv, 0.0)
        fstar = np.where(curv > 0, f0 - (fp - fm) ** 2 / (8 * curv), f0)
    shift = np.clip(shift, -1.0, 1.0)
    xstar = x[j] + shift * h
    edge_f = np.take_along_axis(values, i[..., None], -1)[..., 0]
    fstar = np.where(at_edge, edge_f, fstar)
    xstar = np.where(at_edge, x[i], xstar)
    return fstar, xstar, at_edge


def _frontier_core(
    theta: np.ndarray, grid: Mapping[str, np.ndarray], r: int, budgets: np.ndarray
) -> dict[str, np.ndarray]:
    """L*, x* per budget (theta (6,) or (S, 6)); arrays (m,) or (S, m)."""
    x, f = grid["x"], grid["flops_per_token"]
    m, g = len(budgets), len(x)
    tokens = budgets[:, None] / f[None, :]
    design = Design.from_arrays(
        np.full(m * g, float(r)), np.tile(grid["n_once"], m), np.tile(grid["n_rec"], m), tokens.ravel()
    )
    logl = log_loss(theta, design)
    values = np.exp(logl).reshape(logl.shape[:-1] + (m, g))
    lstar, xstar, edge = _minimise_on_grid(values, x)
    return {"l_star": lstar, "x_star": xstar, "at_edge": edge}


def _interp(xstar: np.ndarray, grid: Mapping[str, np.ndarray], key: str) -> np.ndarray:
    x = grid["x"]
    if x[-1] <= x[0]:
        return np.full_like(xstar, grid[key][0])
    return np.exp(np.interp(xstar, x, np.log(np.maximum(grid[key], 1e-300))))


@dataclass(frozen=True)
class Frontier:
    """Compute-optimal frontier per r under a law, and the gap of each r to the base r.

    All dicts are keyed by r.  Per budget: ``l_star`` (nats), ``n_unique_star``,
    ``n_eff_star``, ``tokens_star``, ``size_star`` (family size variable: width s for
    the paper family, N for a table family), ``at_edge`` (optimum on the edge of the
    searched sizes).  ``gap[r] = l_star[r] - l_star[base_r]``; ``gap_interval[r]`` per
    budget [lo, hi] from bootstrap draws.  ``exponents[r]``: OLS slopes of log N* and
    log D* on log C across budgets (N* proportional to C^a, D* to C^b).
    """

    family: str
    budgets: list[float]
    base_r: int
    r_values: list[int]
    l_star: dict[int, list[float]]
    n_unique_star: dict[int, list[float]]
    n_eff_star: dict[int, list[float]]
    tokens_star: dict[int, list[float]]
    size_star: dict[int, list[float]]
    at_edge: dict[int, list[bool]]
    gap: dict[int, list[float]]
    exponents: dict[int, dict[str, float]]
    level: float = 0.95
    n_draws: int = 0
    gap_interval: dict[int, list[list[float]]] | None = None
    l_star_interval: dict[int, list[list[float]]] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def gap_range(self) -> dict[int, list[float]]:
        """[min, max] of the gap across budgets, per r."""
        return {r: [float(min(g)), float(max(g))] for r, g in self.gap.items()}

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["gap_range"] = self.gap_range
        return to_plain(out)

    def summary(self) -> str:
        lines = [
            f"[[Compute-optimal frontier: {self.family}]]",
            f"    gap to r = {self.base_r} (nats), per budget C:",
        ]
        head = f"    {'C':>10} " + "".join(f"{f'L*(r={r})':>11}" for r in self.r_values)
        head += "".join(f"{f'gap r={r}':>11}" for r in self.gap)
        lines.append(head)
        for i, c in enumerate(self.budgets):
            text = f"    {c:>10.3g} " + "".join(f"{self.l_star[r][i]:>11.4f}" for r in self.r_values)
            for r in self.gap:
                text += f"{self.gap[r][i]:>11.4f}"
            lines.append(text)
        for r, (lo, hi) in self.gap_range.items():
            lines.append(f"    r = {r}: gap {lo:.3f} - {hi:.3f} nats")
        for r, e in self.exponents.items():
            lines.append(f"    r = {r}: N* ~ C^{e['n']:.2f}, D* ~ C^{e['d']:.2f}")
        lines += [f"    warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def frontier(
    law: JointLaw | FitResult | Mapping[str, float],
    family: PaperFamily | TableFamily,
    budgets: Sequence[float],
    *,
    thetas: np.ndarray | None = None,
    level: float = 0.95,
    points: int = 801,
    base_r: int | None = None,
) -> Frontier:
    """Compute-optimal frontier L*_r(C) and the gap to ``base_r`` (default: smallest r).

    ``thetas`` (bootstrap draws, (S, 6)) give percentile intervals for L* and the gaps.
    """
    budgets = np.asarray(sorted(float(c) for c in budgets))
    if len(budgets) == 0 or np.any(~np.isfinite(budgets)) or np.any(budgets <= 0):
        raise ValueError("budgets must be one or more positive FLOP counts")
    if points < 5:
        raise ValueError(f"points must be >= 5, got {points}")
    theta = _law_theta(law)
    r_values = sorted(int(r) for r in family.r_values)
    base = r_values[0] if base_r is None else int(base_r)
    if base not in r_values:
        raise ValueError(f"base_r = {base} is not among the family's r values {r_values}")
    draws = _clean_thetas(thetas)
    out: dict[str, dict[int, Any]] = {
        k: {} for k in ("l_star", "n_unique_star", "n_eff_star", "tokens_star", "size_star", "at_edge")
    }
    draw_l: dict[int, np.ndarray] = {}
    warnings: list[str] = []
    for r in r_values:
        grid = family.grid(r, points)
        core = _frontier_core(theta, grid, r, budgets)
        xs = core["x_star"]
        n_once, n_rec = _interp(xs, grid, "n_once"), _interp(xs, grid, "n_rec")
        flops = _interp(xs, grid, "flops_per_token")
        out["l_star"][r] = core["l_star"].tolist()
        out["n_unique_star"][r] = (n_once + n_rec).tolist()
        out["n_eff_star"][r] = (n_once + float(r) ** theta[5] * n_rec).tolist()
        out["tokens_star"][r] = (budgets / flops).tolist()
        out["size_star"][r] = _interp(xs, grid, "size").tolist()
        out["at_edge"][r] = core["at_edge"].tolist()
        small_end = core["at_edge"] & (xs <= grid["x"][0])
        for edge, advice in (
            (small_end, "smallest size searched; train smaller models there"),
            (core["at_edge"] & ~small_end, "largest size searched; train larger models there"),
        ):
            if edge.any():
                warnings.append(
                    f"r = {r}: at C = {', '.join(f'{c:.3g}' for c in budgets[edge])} "
                    f"the fitted optimum lies at the {advice} (the true optimum may "
                    f"be beyond the grid)"
                )
        if draws is not None:
            draw_l[r] = _frontier_core(draws, grid, r, budgets)["l_star"]
    gap = {
        r: (np.array(out["l_star"][r]) - np.array(out["l_star"][base])).tolist()
        for r in r_values
        if r != base
    }
    exponents = {}
    if len(budgets) >= 2:
        lc = np.log(budgets)
        for r in r_values:
            exponents[r] = {
                "n": float(np.polyfit(lc, np.log(out["n_unique_star"][r]), 1)[0]),
                "d": float(np.polyfit(lc, np.log(out["tokens_star"][r]), 1)[0]),
            }
    gap_iv = l_iv = None
    if draws is not None:
        l_iv = {r: np.asarray(percentile_interval(draw_l[r], level)).T.tolist() for r in r_values}
        gap_iv = {
            r: np.asarray(percentile_interval(draw_l[r] - draw_l[base], level)).T.tolist()
            for r in r_values
            if r != base
        }
    return Frontier(
        family=family.description,
        budgets=budgets.tolist(),
        base_r=base,
        r_values=r_values,
        gap=gap,
        exponents=exponents,
        level=level,
        n_draws=0 if draws is None else len(draws),
        gap_interval=gap_iv,
        l_star_interval=l_iv,
        warnings=warnings,
        **out,
    )


@dataclass(frozen=True)
class IsoflopCurves:
    """The law along each trained isoFLOP curve: per (budget, r) cell, the predicted loss
    at D = C / F over sizes spanning the cell's trained sizes (10% wider in log N).

    ``cells``: {budget, r, n_unique (list), loss (list)}.
    """

    cells: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return to_plain({"cells": self.cells})


def isoflop_curves(
    law: JointLaw | FitResult | Mapping[str, float],
    runs: RunTable,
    *,
    family: TableFamily | None = None,
    points: int = 80,
) -> IsoflopCurves:
    """Predicted isoFLOP curves for every (budget, r) cell of a table with a numeric
    ``budget`` column (the budget is the FLOP count C)."""
    if "budget" not in runs.frame or not pd.api.types.is_numeric_dtype(runs.frame["budget"]):
        raise ValueError("isoFLOP curves need a numeric 'budget' column (the FLOP budget C)")
    family = family or TableFamily.from_runs(runs)
    theta = _law_theta(law)
    budgets = runs.frame["budget"].to_numpy(float)
    r_all = runs.r.astype(int)
    x_all = np.log(runs.n_once + runs.n_rec)
    cells = []
    for c in sorted(set(budgets.tolist())):
        for r in sorted(set(r_all.tolist())):
            m = (budgets == c) & (r_all == r)
            if not m.any():
                continue
            lo, hi = x_all[m].min(), x_all[m].max()
            pad = 0.1 * (hi - lo) if hi > lo else 0.1
            arch = family.at(r, np.linspace(lo - pad, hi + pad, points))
            design = Design.from_arrays(
                np.full(points, float(r)), arch["n_once"], arch["n_rec"], c / arch["flops_per_token"]
            )
            cells.append(
                {
                    "budget": c,
                    "r": r,
                    "n_unique": np.exp(arch["x"]).tolist(),
                    "loss": np.exp(log_loss(theta, design)).tolist(),
                }
            )
    return IsoflopCurves(cells=cells)


def table_budgets(runs: RunTable, *, n_default: int = 6) -> list[float]:
    """The FLOP budgets of a table: its numeric ``budget`` labels; without them,
    ``n_default`` budgets evenly spaced in log compute between the smallest and the
    largest training compute of the runs (``flops``, else 6 (n_once + r n_rec) D),
    rounded to 3 significant figures."""
    if "budget" in runs.frame:
        values = runs.frame["budget"]
        if pd.api.types.is_numeric_dtype(values):
            return sorted(float(v) for v in values.unique())
    compute = run_compute(runs)
    grid = np.geomspace(compute.min(), compute.max(), n_default if compute.max() > compute.min() else 1)
    return sorted({float(f"{c:.3g}") for c in grid})


def run_compute(runs: RunTable) -> np.ndarray:
    """Training compute of each run, C = F D: :attr:`phifit.runs.RunTable.compute`."""
    return runs.compute


# ------------------------------------------------------------------- parabola minima
@dataclass(frozen=True)
class ParabolaMinima:
    """Per-(budget, r) parabola minima of loss vs log N_unique (Chinchilla approach 2).

    ``cells``: {budget, r, n, n_star, l_star, curvature, in_range, ok}; ``gap[r]``:
    per budget {budget, gap} for budgets where both r and the base r have a valid
    (convex, in-range) minimum.
    """

    cells: list[dict[str, Any]]
    base_r: int
    gap: dict[int, list[dict[str, float]]]
    warnings: list[str]

    @property
    def gap_range(self) -> dict[int, list[float]]:
        return {r: [min(x["gap"] for x in g), max(x["gap"] for x in g)] for r, g in self.gap.items() if g}

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["gap_range"] = self.gap_range
        return to_plain(out)

    def summary(self) -> str:
        lines = ["[[Per-cell parabola minima (loss vs log N, approach 2)]]"]
        for r, (lo, hi) in self.gap_range.items():
            lines.append(
                f"    r = {r}: gap to r = {self.base_r} {lo:.3f} - {hi:.3f} nats "
                f"over {len(self.gap[r])} budgets"
            )
        lines += [f"    warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def parabola_minima(runs: RunTable, *, base_r: int | None = None) -> ParabolaMinima:
    """Fit L = c0 + c1 x + c2 x^2 (x = log N_unique) in each (budget, r) cell with >= 3 sizes.

    A cell is ``ok`` when c2 > 0 (convex) and N* lies within the sizes trained there
    (``in_range``) or beyond the outermost size by at most half the mean spacing of the
    sizes in log N; otherwise its minimum is reported but not used for gaps.
    """
    if "budget" not in runs.frame:
        raise ValueError("per-cell parabola minima need a 'budget' column (one isoFLOP curve per budget)")
    frame = runs.frame
    r_all = frame["r"].to_numpy(int)
    r_values = sorted(set(r_all.tolist()))
    base = r_values[0] if base_r is None else int(base_r)
    x_all = np.log(runs.n_once + runs.n_rec)
    budgets = frame["budget"].to_numpy()
    cells, warnings = [], []
    levels = list(dict.fromkeys(budgets.tolist()))
    try:
        levels = sorted(levels)
    except TypeError:
        levels = sorted(levels, key=str)
    for b in levels:
        for r in r_values:
            m = (budgets == b) & (r_all == r)
            x, y = x_all[m], runs.loss[m]
            n_sizes = len(np.unique(np.round(x, 9)))
            if n_sizes < 3:
                if m.any():
                    warnings.append(f"C = {b}, r = {r}: {n_sizes} size(s), a parabola needs 3")
                continue
            xc = x.mean()
            c2, c1, c0 = np.polyfit(x - xc, y, 2)
            convex = c2 > 0
            xs = xc - c1 / (2 * c2) if convex else float("nan")
            ls = c0 - c1**2 / (4 * c2) if convex else float("nan")
            in_range = bool(convex and x.min() <= xs <= x.max())
            # a minimum just beyond the last size is still usable: allow half the mean
            # spacing of the sizes (in log N) on either side
            slack = 0.5 * np.ptp(x) / (n_sizes - 1)
            usable = bool(convex and x.min() - slack <= xs <= x.max() + slack)
            if not convex:
                warnings.append(
                    f"C = {_label(b)}, r = {r}: the isoFLOP points are not convex in log N; no minimum"
                )
            elif not usable:
                warnings.append(
                    f"C = {_label(b)}, r = {r}: the parabola minimum N* = {math.exp(xs):.3g} "
                    f"lies outside the sizes trained; not used for gaps"
                )
            cells.append(
                {
                    "budget": _py(b),
                    "r": int(r),
                    "n": int(m.sum()),
                    "n_star": float(math.exp(xs)) if convex else float("nan"),
                    "l_star": float(ls),
                    "curvature": float(c2),
                    "in_range": in_range,
                    "ok": usable,
                }
            )
    gap: dict[int, list[dict[str, float]]] = {}
    ok = {(c["budget"], c["r"]): c for c in cells if c["ok"]}
    for r in r_values:
        if r == base:
            continue
        gap[r] = [
            {"budget": _py(b), "gap": ok[(_py(b), r)]["l_star"] - ok[(_py(b), base)]["l_star"]}
            for b in levels
            if (_py(b), r) in ok and (_py(b), base) in ok
        ]
    return ParabolaMinima(cells=cells, base_r=base, gap=gap, warnings=warnings)


def _py(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _label(budget: Any) -> str:
    """A budget as people write it: 2e+12 for a number, the label itself otherwise."""
    return f"{budget:.3g}" if isinstance(budget, (int, float, np.number)) else str(budget)


def paper_budgets() -> list[float]:
    """The study's six FLOP budgets."""
    return sorted(PAPER_GRID)
