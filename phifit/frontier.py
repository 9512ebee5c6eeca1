"""The compute-optimal frontier of a fitted law, per r (paper §4.2), and its isoFLOP curves.

For a FLOP budget C and recurrence r, the compute-optimal model minimises the predicted
loss over the architectures of a family subject to C = F D:

    L*_r(C) = min over size x of  L(N_once(x), N_rec(x), D = C / F_r(x), r)

with F_r(x) the training FLOPs per token.  The frontier gap of r is L*_r(C) - L*_1(C).
Two families:

- :class:`PaperFamily`: the study's architectures at a *continuous* width s (d = 64 s;
  prelude/recur/coda 2/(16/r)/2, injection 2 d^2 counted in N_rec, F from paper Eq. 6 via
  :func:`phifit.study.paper_architecture`) and D = C / F continuous.  Under the
  study's joint law this reproduces the joint-law gap ranges of paper-notes §4.2
  (0.027-0.044, 0.053-0.086, 0.077-0.125 nats for r = 2, 4, 8 over the six budgets).
- :class:`TableFamily`: derived from a run table, per r: the once-applied share
  N_once / N as a linear function of log N, log F as a quadratic in log N (degrees capped
  by the number of distinct sizes), fitted to the distinct architectures of that r, and
  the search restricted to the range of N trained at that r (no extrapolation; an optimum
  on the edge is a :class:`~phifit.cautions.Caution`, source "frontier").  F per token is
  :attr:`phifit.runs.RunTable.flops_per_token`.

The minimum over a dense grid in log size is refined by the parabola through the three
grid points around it (vectorised over budgets and bootstrap draws).  Intervals are
percentile intervals over bootstrap draws of theta (:mod:`phifit.bootstrap.draws`).

:func:`isoflop_curves` evaluates the law along each trained isoFLOP curve, L(N) at
D = C / F(N), for the figure.

For a non-looped table (:func:`non_looped`), :func:`allocation` gives Chinchilla's closed-form
allocation exponents N* ∝ C^a, D* ∝ C^b, a = beta / (alpha + beta), b = alpha / (alpha + beta),
with bootstrap intervals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import defaults
from .bootstrap.draws import clean_thetas, law_theta, percentile_interval
from .cautions import Caution, caution
from .law import Design, JointLaw, log_loss
from .result import FitResult
from .runs.table import RunTable
from .serialize import JsonIO, to_plain
from .study import PAPER_GRID, PAPER_RECURRENCES, paper_architecture

__all__ = [
    "PaperFamily",
    "TableFamily",
    "Frontier",
    "frontier",
    "IsoflopCurves",
    "isoflop_curves",
    "paper_budgets",
    "Allocation",
    "allocation",
    "allocation_exponents",
    "non_looped",
]


@dataclass(frozen=True)
class PaperFamily:
    """The study's iso-depth architectures at a continuous width s, d = 64 s.

    Counts and FLOPs per token from :func:`phifit.study.paper_architecture` (paper
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
class TableFamily(JsonIO):
    """Architectures interpolated from a run table, per r, as functions of x = log N_unique.

    ``coef`` maps r to {"once": polynomial coefficients of N_once / N in x (clipped to
    [0, 1]), "logf": coefficients of log F in x, "x_range": [min, max] of x trained at r,
    "n_sizes": the number of distinct sizes trained at r}.
    """

    coef: Mapping[int, Mapping[str, Any]]
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


def _loss_on_grid(
    theta: np.ndarray, grid: Mapping[str, np.ndarray], r: int, log_tokens: np.ndarray
) -> np.ndarray:
    """L = E + A N_eff^-alpha + B D^-beta on every (budget, size) point, (m, g) or (S, m, g).

    The size term depends on the size only, so it is computed once per draw and broadcast over
    the budgets; only the data term is evaluated on the whole (draw, budget, size) array.  The
    same law as :func:`phifit.law.loss` (which sums the terms in log space), to rounding.
    """
    t = np.atleast_2d(theta)  # (S, 6): a, alpha, b, beta, e, phi
    a, alpha, b, beta, e, phi = (t[:, i, None] for i in range(6))
    with np.errstate(divide="ignore"):  # a size with no once-used (or no shared) parameters
        log_n_once, log_n_rec = np.log(grid["n_once"]), np.log(grid["n_rec"])
    log_n_eff = np.logaddexp(log_n_once, phi * np.log(float(r)) + log_n_rec)
    size_term = np.exp(a - alpha * log_n_eff) + np.exp(e)  # (S, g)
    data_term = np.exp(b[:, :, None] - beta[:, :, None] * log_tokens[None, :, :])  # (S, m, g)
    values = data_term + size_term[:, None, :]
    return values[0] if np.ndim(theta) == 1 else values


def _frontier_core(
    theta: np.ndarray, grid: Mapping[str, np.ndarray], r: int, budgets: np.ndarray
) -> dict[str, np.ndarray]:
    """L*, x* per budget (theta (6,) or (S, 6)); arrays (m,) or (S, m)."""
    x, f = grid["x"], grid["flops_per_token"]
    log_tokens = np.log(budgets[:, None] / f[None, :])  # (m, g)
    values = _loss_on_grid(np.asarray(theta, dtype=float), grid, r, log_tokens)
    lstar, xstar, edge = _minimise_on_grid(values, x)
    return {"l_star": lstar, "x_star": xstar, "at_edge": edge}


def _interp(xstar: np.ndarray, grid: Mapping[str, np.ndarray], key: str) -> np.ndarray:
    x = grid["x"]
    if x[-1] <= x[0]:
        return np.full_like(xstar, grid[key][0])
    return np.exp(np.interp(xstar, x, np.log(np.maximum(grid[key], 1e-300))))


@dataclass(frozen=True)
class Frontier(JsonIO):
    """Compute-optimal frontier per r under a law, and the gap of each r to the base r.

    All dicts are keyed by r.  Per budget: ``l_star`` (nats), ``n_unique_star``,
    ``n_eff_star``, ``tokens_star``, ``size_star`` (family size variable: width s for
    the paper family, N for a table family), ``at_edge`` (optimum on the edge of the
    searched sizes).  ``gap[r] = l_star[r] - l_star[base_r]``; ``gap_interval[r]`` per
    budget [lo, hi] at ``level`` from bootstrap draws.  ``warnings``: an optimum on the
    edge of the sizes searched, as :class:`~phifit.cautions.Caution` (source "frontier",
    kind "optimum_at_edge").  ``exponents[r]``: OLS slopes of log N* and
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
    level: float = defaults.LEVEL
    n_draws: int = 0
    gap_interval: dict[int, list[list[float]]] | None = None
    l_star_interval: dict[int, list[list[float]]] | None = None
    warnings: list[Caution] = field(default_factory=list)

    @property
    def gap_range(self) -> dict[int, list[float]]:
        """[min, max] of the gap across budgets, per r."""
        return {r: [float(min(g)), float(max(g))] for r, g in self.gap.items()}

    def to_frame(self) -> pd.DataFrame:
        """One row per (budget, r): ``budget`` (FLOPs), ``r``, ``l_star``, ``n_unique_star``,
        ``n_eff_star``, ``tokens_star``, ``size_star``, ``at_edge``, ``gap`` (to the base r; NaN
        for the base r) and, with bootstrap draws, ``l_star_lo``/``l_star_hi`` and
        ``gap_lo``/``gap_hi`` at ``level``."""
        rows = []
        for r in self.r_values:
            for i, c in enumerate(self.budgets):
                row = {"budget": c, "r": r}
                for name in ("l_star", "n_unique_star", "n_eff_star", "tokens_star", "size_star", "at_edge"):
                    row[name] = getattr(self, name)[r][i]
                row["gap"] = self.gap[r][i] if r in self.gap else math.nan
                for name, bands in (("l_star", self.l_star_interval), ("gap", self.gap_interval)):
                    if bands is not None:
                        lo, hi = bands[r][i] if r in bands else (math.nan, math.nan)
                        row[f"{name}_lo"], row[f"{name}_hi"] = lo, hi
                rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["gap_range"] = self.gap_range
        out["warnings"] = [w.to_dict() for w in self.warnings]
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
    level: float | None = None,
    points: int = 801,
    base_r: int | None = None,
) -> Frontier:
    """Compute-optimal frontier L*_r(C) and the gap to ``base_r`` (default: smallest r).

    ``thetas`` (bootstrap draws, (S, 6)) give percentile intervals for L* and the gaps at
    ``level`` (default: the fit's ``ci_level`` when ``law`` is a FitResult, else 0.95).

    Raises ``ValueError`` for a fit that did not identify B and beta (a single token count):
    the frontier trades size against tokens, so it rests on the data term.
    """
    if isinstance(law, FitResult) and not law.d_term_identified:
        raise ValueError(
            "no compute-optimal frontier: the fit did not identify B and beta (every run has the "
            "same token count), and the trade of size against tokens at a fixed budget rests on them"
        )
    if level is None:
        level = law.ci_level if isinstance(law, FitResult) else 0.95
    budgets = np.asarray(sorted(float(c) for c in budgets))
    if len(budgets) == 0 or np.any(~np.isfinite(budgets)) or np.any(budgets <= 0):
        raise ValueError("budgets must be one or more positive FLOP counts")
    if points < 5:
        raise ValueError(f"points must be >= 5, got {points}")
    theta = law_theta(law)
    r_values = sorted(int(r) for r in family.r_values)
    base = r_values[0] if base_r is None else int(base_r)
    if base not in r_values:
        raise ValueError(f"base_r = {base} is not among the family's r values {r_values}")
    draws = clean_thetas(thetas)
    out: dict[str, dict[int, Any]] = {
        k: {} for k in ("l_star", "n_unique_star", "n_eff_star", "tokens_star", "size_star", "at_edge")
    }
    draw_l: dict[int, np.ndarray] = {}
    warnings: list[Caution] = []
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
        for edge, end, advice in (
            (small_end, "smallest", "train smaller models there"),
            (core["at_edge"] & ~small_end, "largest", "train larger models there"),
        ):
            if edge.any():
                warnings.append(
                    caution(
                        "frontier",
                        "optimum_at_edge",
                        f"r = {r}: at C = {', '.join(f'{c:.3g}' for c in budgets[edge])} "
                        f"the fitted optimum lies at the {end} size searched; {advice} "
                        f"(the true optimum may be beyond the grid)",
                        r=r,
                        budgets=budgets[edge].tolist(),
                        edge=end,
                    )
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
class IsoflopCurves(JsonIO):
    """The law along each trained isoFLOP curve: per (budget, r) cell, the predicted loss
    at D = C / F over sizes spanning the cell's trained sizes (10% wider in log N).

    ``cells``: {budget, r, n_unique (list), loss (list)}.
    """

    cells: list[dict[str, Any]]

    def to_frame(self) -> pd.DataFrame:
        """The curves in long form, one row per point: ``budget``, ``r``, ``n_unique``, ``loss``."""
        rows = [
            {"budget": c["budget"], "r": c["r"], "n_unique": n, "loss": loss}
            for c in self.cells
            for n, loss in zip(c["n_unique"], c["loss"])
        ]
        return pd.DataFrame(rows, columns=["budget", "r", "n_unique", "loss"])

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
    theta = law_theta(law)
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


def paper_budgets() -> list[float]:
    """The study's six FLOP budgets."""
    return sorted(PAPER_GRID)


# ------------------------------------------------------------ Chinchilla-law allocation
# Compute-optimal allocation of a Chinchilla-law fit: N* ∝ C^a, D* ∝ C^b.
#
# For L(N, D) = E + A N^-alpha + B D^-beta under the compute estimate C = 6 N D, minimising
# L at fixed C gives (Hoffmann et al. 2022, App. D.2)
#
#     N*(C) = G (C / 6)^a,   D*(C) = G^-1 (C / 6)^b,
#     a = beta / (alpha + beta),   b = alpha / (alpha + beta),   G = (alpha A / (beta B))^(1 / (alpha + beta))
#
# so a + b = 1, and a = b = 1/2 exactly when alpha = beta (equal scaling).  The intervals are
# percentile intervals of a and b computed on every bootstrap replicate's (alpha, beta), at the
# fit's interval level, so they carry the exponents' correlation.


def non_looped(runs: Any) -> bool:
    """True when no run of the table is looped (none has r > 1 with N_rec > 0): the joint
    law is Chinchilla's L = E + A N^-alpha + B D^-beta and phi does not enter."""
    return not bool(((np.asarray(runs.r) > 1) & (np.asarray(runs.n_rec) > 0)).any())


def allocation_exponents(alpha: Any, beta: Any) -> tuple[Any, Any]:
    """(a, b) = (beta / (alpha + beta), alpha / (alpha + beta)); vectorised over arrays."""
    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    total = alpha + beta
    return beta / total, alpha / total


@dataclass(frozen=True)
class Allocation(JsonIO):
    """The compute-optimal exponents of a Chinchilla-law fit: N* ∝ C^a, D* ∝ C^b, with
    a = beta / (alpha + beta), b = alpha / (alpha + beta) (the comment above; C = 6 N D).

    ``ci``: {"a": [lo, hi], "b": [lo, hi]} percentile bootstrap intervals at ``level``
    (empty without a bootstrap); ``n_boot``: replicates used.
    """

    a: float
    b: float
    ci: dict[str, list[float]]
    level: float = defaults.LEVEL
    n_boot: int = 0

    def to_dict(self) -> dict[str, Any]:
        return to_plain(dict(self.__dict__))

    def summary(self) -> str:
        """Two lines: N* ∝ C^a and D* ∝ C^b with their intervals."""

        def one(name: str, value: float) -> str:
            iv = self.ci.get(name)
            text = f"{value:.3f}"
            if iv and None not in iv and all(np.isfinite(iv)):
                text += f" ({self.level:.0%} bootstrap [{iv[0]:.3f}, {iv[1]:.3f}])"
            return text

        return (
            f"N* ∝ C^{one('a', self.a)}, D* ∝ C^{one('b', self.b)}  "
            "(a = beta/(alpha+beta), b = alpha/(alpha+beta), C = 6ND)"
        )


def allocation(fit: Any, bootstrap: Any | None = None, *, level: float | None = None) -> Allocation:
    """The allocation exponents of ``fit`` (a FitResult) with intervals from ``bootstrap``
    (a :class:`~phifit.bootstrap.result.BootstrapResult`, its replicates' alpha and beta)."""
    a, b = allocation_exponents(fit.params["alpha"], fit.params["beta"])
    level = float(level if level is not None else (fit.ci_level or defaults.LEVEL))
    ci: dict[str, list[float]] = {}
    n_used = 0
    if bootstrap is not None:
        for name, index in (("a", 0), ("b", 1)):
            iv = bootstrap.interval(
                lambda p, i=index: allocation_exponents(p["alpha"], p["beta"])[i], level=level
            )
            ci[name] = [float(iv.lo), float(iv.hi)]
            n_used = int(iv.n_used)
    return Allocation(a=float(a), b=float(b), ci=ci, level=level, n_boot=n_used)
