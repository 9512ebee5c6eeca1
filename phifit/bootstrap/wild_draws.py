"""The draws of the wild cluster bootstrap (:mod:`phifit.bootstrap.wild`): what its tables are made of.

A wild table is y*_bi = y0_i + v_bc e~_i: the null fit's predictions y0 (the law of a :class:`Refit`,
at its fit), one weight v_bc per cluster c and replicate b, and the null fit's residuals e adjusted
for what that fit absorbed (e~).  This module holds those ingredients and what follows from them
alone:

- the weight distributions (:func:`draw_weights`: Rademacher signs, or Webb's six points below
  :data:`MIN_CELLS` clusters, :func:`choose_weights`), how many distinct patterns they give
  (:func:`n_patterns`) and so the smallest p-value a test can reach (:func:`min_attainable_p`);
- when the clusters are too few for any test of the free law to be read (:func:`too_few_clusters`);
- the residual adjustments (:func:`adjusted_residuals`, :data:`ADJUSTMENTS`, the default
  :data:`DEFAULT_ADJUST`).

Refitting the tables and turning the refits into a p-value is :mod:`phifit.bootstrap.wild`'s job,
which re-exports every public name here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Below this many cells the Rademacher distribution is too coarse for a reliable p-value.
MIN_CELLS = 12


@dataclass(frozen=True)
class Refit:
    """One law to refit on many responses: ``model(x)`` -> (predictions (m, n), transposed
    Jacobian (m, k, n)) as :func:`~phifit.fitters.lm.batched_weighted_lm` takes it, its box,
    and the starts (each (k,), used for every response)."""

    model: Callable
    lower: np.ndarray
    upper: np.ndarray
    starts: tuple[np.ndarray, ...]


#: The weight distributions of the sign draws: Rademacher (+-1) and Webb's six points
#: (+-sqrt(1/2), +-1, +-sqrt(3/2), mean 0, variance 1; 6^G patterns instead of 2^G).
WEIGHTS = ("rademacher", "webb")
_WEBB = np.array([-math.sqrt(1.5), -1.0, -math.sqrt(0.5), math.sqrt(0.5), 1.0, math.sqrt(1.5)])
#: Residual adjustments before the sign flips (see :func:`adjusted_residuals`).
ADJUSTMENTS = ("none", "rescale", "rescale-means", "cell-leverage", "cr2")
ADJUST_TEXT = {
    "none": "raw",
    "rescale": "rescaled by sqrt(G / (G - k0))",
    "rescale-means": "cell means rescaled by sqrt(G / (G - k0))",
    "cell-leverage": "cell means divided by sqrt(1 - h_c) (h_c: the null fit's share of a cell-wide shift)",
    "cr2": "CR2 leverage-adjusted",
}
#: Floor of 1 - h in the leverage adjustments (a cell the null fit all but absorbs).
MIN_ONE_MINUS_LEVERAGE = 0.05
#: The default adjustment, chosen by ``benchmarks/wild_few_clusters.py`` (see :mod:`phifit.bootstrap.wild`).
DEFAULT_ADJUST = "cell-leverage"


def choose_weights(n_clusters: int, weights: str = "auto") -> str:
    """``"auto"``: Webb's six points below :data:`MIN_CELLS` clusters (2^G Rademacher
    patterns are too few to resolve small p-values there), Rademacher signs from there on."""
    if weights == "auto":
        return "webb" if n_clusters < MIN_CELLS else "rademacher"
    if weights not in WEIGHTS:
        raise ValueError(f"unknown wild weights {weights!r}; expected auto or one of {', '.join(WEIGHTS)}")
    return weights


def min_attainable_p(n_ok: int, n_clusters: int, weights: str) -> float:
    """The smallest p-value the test can report: max(1 / (1 + n_ok), 1 / distinct patterns)."""
    return max(1.0 / (1.0 + n_ok), 1.0 / n_patterns(n_clusters, weights))


def too_few_clusters(n_clusters: int, n_free: int) -> bool:
    """True when the clusters leave the free law fewer than 2 degrees of freedom (G - k < 2):
    the free fit then all but interpolates the cell means and no test of it can be read."""
    return n_clusters - n_free < 2


def draw_weights(rng: np.random.Generator, n_boot: int, n_clusters: int, kind: str) -> np.ndarray:
    """(n_boot, n_clusters) cluster weights: Rademacher signs or Webb's six-point weights."""
    if kind == "rademacher":
        return rng.choice(np.array([-1.0, 1.0]), size=(n_boot, n_clusters))
    if kind == "webb":
        return _WEBB[rng.integers(0, 6, size=(n_boot, n_clusters))]
    raise ValueError(f"unknown wild weights {kind!r}; expected one of {', '.join(WEIGHTS)}")


def n_patterns(n_clusters: int, kind: str) -> float:
    """Distinct weight patterns of ``n_clusters`` clusters: 2^G (Rademacher) or 6^G (Webb)."""
    return float({"rademacher": 2.0, "webb": 6.0}[kind]) ** n_clusters


def adjusted_residuals(
    resid: np.ndarray, codes: np.ndarray, null: Refit, delta: float, adjust: str
) -> np.ndarray:
    """The null fit's residuals e = y - y0, adjusted for what the null fit absorbed.

    A fit with k0 free parameters pulls its residuals towards 0 where it has leverage; with G
    clusters and noise shared within them the cluster sums of e shrink by about (G - k0) / G
    in variance, so sign flips of raw residuals generate too little noise and the test
    over-rejects.

    - ``"none"``: e as it is;
    - ``"rescale"``: e * sqrt(G / (G - k0)) (the small-sample factor of CR1 variance
      estimators, applied to the residuals);
    - ``"rescale-means"``: only each cell's mean residual ebar_c is rescaled,
      e_i <- e_i + (sqrt(G / (G - k0)) - 1) ebar_c(i): the fit absorbs the noise the cells share
      (G cell means against k0 parameters), hardly the deviations within a cell (n runs);
    - ``"cell-leverage"`` (the default): each cell's mean residual ebar_c is divided by
      sqrt(1 - h_c), h_c = 1_c^T H 1_c / n_c the share of a shift common to the cell's n_c runs
      that the null fit absorbs (H = J (J^T J)^-1 J^T, J the null law's Jacobian at its fit):
      e_i <- e_i + (1 / sqrt(1 - h_c(i)) - 1) ebar_c(i).  The HC2 correction with the cell
      shift as the observation; on the 12-cell CPU design the h_c sum to ~2.2, not k0 = 5,
      since the law's parameters are also spent on the shapes within cells;
    - ``"cr2"``: per cluster g, e_g <- W_g^-1/2 (I - H_gg)^-1/2 W_g^1/2 e_g with H the hat
      matrix W^1/2 J (J^T W J)^-1 J^T W^1/2 of the null fit's Jacobian J and IRLS weights W
      (Bell and McCaffrey 2002; MacKinnon, Nielsen and Webb 2023, "Fast and reliable
      jackknife and bootstrap methods for cluster-robust inference", J. Appl. Econometrics).
    """
    if adjust == "none":
        return resid
    n_clusters = int(codes.max()) + 1
    x0 = np.asarray(null.starts[0], dtype=float)
    k0 = x0.size
    if adjust in ("rescale", "rescale-means"):
        # no cluster-level freedom left (G <= k0): the largest factor
        factor = math.sqrt(n_clusters) if n_clusters <= k0 else math.sqrt(n_clusters / (n_clusters - k0))
        if adjust == "rescale":
            return resid * factor
        means = np.bincount(codes, weights=resid, minlength=n_clusters) / np.bincount(
            codes, minlength=n_clusters
        )
        return resid + (factor - 1.0) * means[codes]
    if adjust == "cell-leverage":
        _, jac_t = null.model(x0[None, :])
        jac = jac_t[0].T  # (n, k0)
        hat = jac @ np.linalg.pinv(jac.T @ jac) @ jac.T
        counts = np.bincount(codes, minlength=n_clusters)
        means = np.bincount(codes, weights=resid, minlength=n_clusters) / counts
        shift = np.zeros(n_clusters)
        for g in range(n_clusters):
            rows = codes == g
            shift[g] = hat[np.ix_(rows, rows)].sum() / counts[g]
        factor = 1.0 / np.sqrt(np.clip(1.0 - shift, MIN_ONE_MINUS_LEVERAGE, 1.0))
        return resid + ((factor - 1.0) * means)[codes]
    if adjust != "cr2":
        raise ValueError(f"unknown residual adjustment {adjust!r}; expected one of {', '.join(ADJUSTMENTS)}")
    _, jac_t = null.model(x0[None, :])
    jac = jac_t[0].T  # (n, k0)
    if np.isfinite(delta):
        a = np.abs(resid)
        w = np.where(a <= delta, 1.0, delta / np.maximum(a, delta))
    else:
        w = np.ones_like(resid)
    sw = np.sqrt(w)
    jw = sw[:, None] * jac
    gram_inv = np.linalg.pinv(jw.T @ jw)
    out = resid.copy()
    for g in range(n_clusters):
        rows = np.flatnonzero(codes == g)
        h = jw[rows] @ gram_inv @ jw[rows].T
        vals, vecs = np.linalg.eigh(np.eye(len(rows)) - h)
        inv_sqrt = vecs @ np.diag(1.0 / np.sqrt(np.clip(vals, 1e-2, None))) @ vecs.T
        out[rows] = (inv_sqrt @ (sw[rows] * resid[rows])) / sw[rows]
    return out


__all__ = [
    "ADJUSTMENTS",
    "ADJUST_TEXT",
    "DEFAULT_ADJUST",
    "MIN_CELLS",
    "MIN_ONE_MINUS_LEVERAGE",
    "WEIGHTS",
    "Refit",
    "adjusted_residuals",
    "choose_weights",
    "draw_weights",
    "min_attainable_p",
    "n_patterns",
    "too_few_clusters",
]
