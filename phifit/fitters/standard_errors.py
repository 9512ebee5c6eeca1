"""Analytic standard errors of a point fit, for independent runs.

**Huber M-estimator** (Huber 1981, *Robust Statistics*, section 7.6; Huber 1973): for
residuals r_i = log L_hat_i - log L_i at the optimum, psi(r) = clip(r, -delta, delta),
J the Jacobian of log L_hat over the free coordinates, n runs and k free parameters,

    cov(theta_hat) = K^2 * [sum_i psi(r_i)^2 / (n - k)] / m^2 * (J^T J)^-1,
    m = (1/n) sum_i psi'(r_i)    (the share of residuals inside +-delta),
    K = 1 + (k / n) * m (1 - m) / m^2    (Huber's small-sample correction).

For least squares (delta = inf) this is the usual sigma^2 (J^T J)^-1 with
sigma^2 = SSR / (n - k).  a, b, e are logs: se(A) = A se(a) and likewise for B and E
(delta method).  Coordinates at a bound of the box are left out (no standard error).

What it assumes: runs are independent with a common error distribution.  When runs share
noise within a (budget, r) cell, as real sweeps do, no such formula is right: use the
cell block bootstrap.  The label in :data:`ASSUMPTION` goes wherever these numbers are
printed.
"""

from __future__ import annotations

import math

import numpy as np

from ..law import THETA_NAMES, THETA_TO_PARAM, LawSpec, log_loss_and_jacobian
from ..runs.table import RunTable

#: Printed next to these standard errors.
ASSUMPTION = "analytic, assumes independent runs"


def m_estimator_stderr(
    runs: RunTable, spec: LawSpec, theta: np.ndarray, delta: float, at_bounds: list[str] | None = None
) -> dict[str, float]:
    """Standard errors {natural name: se} of the free, interior parameters (see module docstring).

    ``spec`` is the spec fitted, ``theta`` the full optimum, ``delta`` the Huber threshold
    (``inf``: least squares), ``at_bounds`` natural names of parameters at a box bound
    (left out).  Returns an empty dict when the information matrix is singular or no
    residual lies inside +-delta (m = 0).
    """
    pred, jac = log_loss_and_jacobian(theta, runs.design)
    res = pred - runs.log_loss
    skip = set(at_bounds or ())
    mask = spec.free_mask.copy()
    for i, coord in enumerate(THETA_NAMES):
        if THETA_TO_PARAM[coord] in skip:
            mask[i] = False
    n, k = len(res), int(mask.sum())
    if k == 0 or n <= k:
        return {}
    if math.isfinite(delta):
        psi = np.clip(res, -delta, delta)
        m = float(np.mean(np.abs(res) <= delta))
        if m == 0.0:
            return {}
        correction = 1.0 + (k / n) * m * (1.0 - m) / m**2
        scale2 = correction**2 * float(np.sum(psi**2)) / (n - k) / m**2
    else:
        scale2 = float(np.sum(res**2)) / (n - k)
    j = jac[:, mask]
    try:
        cov = scale2 * np.linalg.inv(j.T @ j)
    except np.linalg.LinAlgError:
        return {}
    diag = np.diag(cov)
    if not np.all(np.isfinite(diag)) or np.any(diag < 0):
        return {}
    out: dict[str, float] = {}
    for coord, var in zip((c for c, f in zip(THETA_NAMES, mask) if f), diag):
        name = THETA_TO_PARAM[coord]
        se = math.sqrt(var)
        out[name] = math.exp(theta[THETA_NAMES.index(coord)]) * se if coord in ("a", "b", "e") else se
    return out
