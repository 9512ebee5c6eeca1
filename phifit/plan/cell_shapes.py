"""The shape of the law's misfit within a (budget, r) cell: where an isoFLOP curve bends
differently from the law, its runs' residuals are not a level plus noise but a curve in model size.

Per cell c of a pilot, the log-loss residuals e_i of its Huber fit are fitted by least squares as

    e_i = a_c + b_c u_i + c_c u_i^2 + noise,    u_i = x_i - xbar_c,   x_i = ln(N_once,i + N_rec,i)

(degree min(2, n_c - 2, distinct sizes - 1): a level for 2 runs, a line for 3, the parabola
from 4 runs at 3 or more sizes; one residual degree of freedom per cell is always left for the
noise).  The noise is the pooled sd of what the curves leave, sqrt(sum_i (e_i - fitted_i)^2 /
(n - sum_c (deg_c + 1))).  On the study's 116 runs the curves take 97% of the within-cell
residual sum of squares (a line alone 42%): the within-cell misfit is a bend, not noise.

A planned run in a cell the pilot saw takes its cell's curve at its own size (u clipped to the range
the pilot's runs covered: no extrapolated parabola).  A planned cell the pilot did not see draws its
slope and curvature from N(mean_b, tau_b^2) and N(mean_c, tau_c^2): their means over the pilot's
cells (a bend the law misses in every cell, as on the study's runs, is kept) and their random-effects
variances (method of moments: their variance over the pilot's cells less the mean of their sampling
variances), with u centred on the planned cell's own runs and the curvature term centred so that the
level keeps its own draw's meaning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class CellShape:
    """One pilot cell's curve a + b u + c u^2 in u = ln(N_once + N_rec) - ``center``, valid on [lo, hi]."""

    center: float
    a: float
    b: float
    c: float
    lo: float
    hi: float

    def at(self, x: np.ndarray) -> np.ndarray:
        """The curve at sizes ``x`` = ln(N_once + N_rec), u clipped to [lo, hi]."""
        u = np.clip(np.asarray(x, dtype=float) - self.center, self.lo, self.hi)
        return self.a + self.b * u + self.c * u * u

    def to_dict(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in ("center", "a", "b", "c", "lo", "hi")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellShape:
        return cls(**{k: float(data[k]) for k in ("center", "a", "b", "c", "lo", "hi")})


@dataclass(frozen=True)
class ShapeFit:
    """The pilot's cell curves (``shapes``, keyed by (budget, r)), the noise they leave (``noise_sd``)
    and the random-effects sds of their slopes and curvatures (``tau_b``, ``tau_c``)."""

    shapes: dict[tuple[float, int], CellShape]
    noise_sd: float
    tau_b: float
    tau_c: float
    share: float  # share of the within-cell sum of squares the curves take
    mean_b: float = 0.0  # the slopes' and curvatures' means over cells: a bend the law misses everywhere
    mean_c: float = 0.0


def log_size(frame: pd.DataFrame) -> np.ndarray:
    """x = ln(N_once + N_rec): where a run sits along its isoFLOP curve."""
    return np.log(frame["n_once"].to_numpy(float) + frame["n_rec"].to_numpy(float))


def fit_cell_shapes(frame: pd.DataFrame, residuals: np.ndarray) -> ShapeFit:
    """:class:`ShapeFit` of the residuals of a table with ``budget``, ``r``, ``n_once`` and ``n_rec``
    columns (module docstring)."""
    df = pd.DataFrame(
        {
            "budget": frame["budget"].astype(float).to_numpy(),
            "r": frame["r"].astype(int).to_numpy(),
            "x": log_size(frame),
            "e": np.asarray(residuals, dtype=float),
        }
    )
    shapes: dict[tuple[float, int], CellShape] = {}
    ss_left = ss_within = 0.0
    n_coef = 0
    slopes, curves = [], []  # (estimate, unscaled sampling variance) of cells that estimate them
    for (budget, r), cell in df.groupby(["budget", "r"], sort=True):
        x, e = cell["x"].to_numpy(), cell["e"].to_numpy()
        center = float(x.mean())
        u = x - center
        deg = max(0, min(2, len(e) - 2, len(np.unique(np.round(u, 12))) - 1))
        design = np.vander(u, deg + 1, increasing=True)
        coef, *_ = np.linalg.lstsq(design, e, rcond=None)
        fitted = design @ coef
        ss_left += float(np.sum((e - fitted) ** 2))
        ss_within += float(np.sum((e - e.mean()) ** 2))
        n_coef += deg + 1
        full = np.zeros(3)
        full[: deg + 1] = coef
        shapes[(float(budget), int(r))] = CellShape(center, *full, float(u.min()), float(u.max()))
        if deg >= 1:
            unscaled = np.diag(np.linalg.pinv(design.T @ design))
            slopes.append((coef[1], unscaled[1]))
            if deg == 2:
                curves.append((coef[2], unscaled[2]))
    dof = len(df) - n_coef
    noise2 = ss_left / dof if dof > 0 else 0.0
    return ShapeFit(
        shapes=shapes,
        noise_sd=math.sqrt(noise2),
        tau_b=_random_effect_sd(slopes, noise2),
        tau_c=_random_effect_sd(curves, noise2),
        share=1.0 - ss_left / ss_within if ss_within > 0 else 0.0,
        mean_b=float(np.mean([v for v, _ in slopes])) if slopes else 0.0,
        mean_c=float(np.mean([v for v, _ in curves])) if curves else 0.0,
    )


def _random_effect_sd(estimates: list[tuple[float, float]], noise2: float) -> float:
    """sqrt(max(0, var(estimates) - noise2 * mean(unscaled sampling variance))): the sd of a cell
    coefficient across cells, its estimation noise taken out (0 with fewer than 2 cells)."""
    if len(estimates) < 2:
        return 0.0
    values = np.array([v for v, _ in estimates])
    sampling = noise2 * float(np.mean([s for _, s in estimates]))
    return math.sqrt(max(0.0, float(values.var(ddof=1)) - sampling))


def drawn_shape(
    x: np.ndarray,
    level: float,
    tau_b: float,
    tau_c: float,
    rng: np.random.Generator,
    mean_b: float = 0.0,
    mean_c: float = 0.0,
) -> np.ndarray:
    """A cell the pilot did not see: ``level`` + b u + c (u^2 - mean u^2), u = x - mean x over the
    planned cell's runs ``x``, b ~ N(mean_b, tau_b^2), c ~ N(mean_c, tau_c^2)."""
    u = np.asarray(x, dtype=float) - float(np.mean(x))
    b, c = mean_b + tau_b * rng.standard_normal(), mean_c + tau_c * rng.standard_normal()
    return level + b * u + c * (u * u - float(np.mean(u * u)))


__all__ = ["CellShape", "ShapeFit", "drawn_shape", "fit_cell_shapes", "log_size"]
