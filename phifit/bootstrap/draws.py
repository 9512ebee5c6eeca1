"""Quantities evaluated at bootstrap draws of theta, and their percentile intervals.

Every derived quantity q(theta) (an effective size, a frontier loss, a gap) gets its
interval the same way: evaluate q at each bootstrap draw theta_s = (a, alpha, b, beta,
e, phi)_s, drop draws whose refit failed (non-finite rows), and read the percentile
interval

    [q_((1 - level)/2), q_((1 + level)/2)]      (quantiles over the draws, NaN ignored).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import defaults
from ..law import JointLaw, params_to_theta
from ..result import FitResult

__all__ = ["percentile_interval", "clean_thetas", "law_theta"]


def percentile_interval(values: np.ndarray, level: float = defaults.LEVEL) -> list[float]:
    """Percentile interval [q_(1-level)/2, q_(1+level)/2] over axis 0, ignoring NaN.

    For ``values`` of shape (S, ...) the result has shape (2, ...) (as nested lists); with
    no finite value it is all NaN.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    values = np.asarray(values, float)
    if values.shape[0] == 0 or np.all(np.isnan(values)):
        shape = values.shape[1:]
        return np.full((2,) + shape, np.nan).tolist()
    return np.nanpercentile(values, q, axis=0).tolist()


def clean_thetas(thetas: np.ndarray | None) -> np.ndarray | None:
    """Bootstrap draws as an (S, 6) array without failed (non-finite) rows; None when no
    draw is left (or none was given)."""
    if thetas is None:
        return None
    thetas = np.atleast_2d(np.asarray(thetas, float))
    if thetas.shape[-1] != 6:
        raise ValueError(
            f"bootstrap thetas must have 6 columns (a, alpha, b, beta, e, phi), got shape {thetas.shape}"
        )
    keep = np.all(np.isfinite(thetas), axis=1)
    return thetas[keep] if keep.any() else None


def law_theta(law: JointLaw | FitResult | Mapping[str, float]) -> np.ndarray:
    """Internal parameters (a, alpha, b, beta, e, phi) of a law, a fit or a parameter dict."""
    if isinstance(law, (FitResult, JointLaw)):
        return law.theta
    return params_to_theta(law)
