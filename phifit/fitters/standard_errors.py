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

**Conditioning** (:func:`information`): the Gauss-Newton information I = J^T W J of the
log-loss Jacobian over the free coordinates (W: the Huber IRLS weights, 1 inside +-delta and
delta / |r_i| beyond; all 1 for least squares), scaled to unit diagonal.  Its condition number
(largest over smallest eigenvalue) above :data:`MAX_CONDITION`, or a smallest eigenvalue at
rounding level (numerically singular), or a coordinate whose own information is at rounding
level beside the largest (:attr:`Information.vanished`: the unit scaling would hide it), means
some parameter combination is not determined by the table, and every standard error computed
from I (or J^T J) is then meaningless.  The fit (:func:`phifit.fitters.fit`) and
:func:`phifit.diagnostics.identifiability.identifiability` read the same matrix.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..law import THETA_NAMES, THETA_TO_PARAM, LawSpec, log_loss_and_jacobian, vanished
from ..runs.table import RunTable

#: Printed next to these standard errors.
ASSUMPTION = "analytic, assumes independent runs"
#: A unit-diagonal information matrix whose condition number exceeds this is ill-conditioned:
#: its inverse, hence every standard error read from it, is dominated by rounding and by the
#: direction the data do not determine (the shipped study tables reach 7e5).
MAX_CONDITION = 1e12
#: The unit-diagonal information matrix is numerically singular when its smallest eigenvalue
#: is below this times k times its largest (machine rounding of a k x k matrix).
SINGULAR_RTOL = float(np.finfo(float).eps)


class Information(NamedTuple):
    """The information matrix at an optimum (see the module docstring): ``names`` of the free
    coordinates, ``info`` = J^T W J, ``scale`` = sqrt(diag(info)), ``unit`` = info scaled to unit
    diagonal, its eigenvalues ``eig``, its ``condition`` number (inf when not positive) and
    ``singular`` (not finite, or the smallest eigenvalue at rounding level)."""

    names: list[str]
    info: np.ndarray
    scale: np.ndarray
    unit: np.ndarray
    eig: np.ndarray
    condition: float
    singular: bool

    @property
    def ill_conditioned(self) -> bool:
        """Singular, or condition number above :data:`MAX_CONDITION`."""
        return self.singular or self.condition > MAX_CONDITION

    @property
    def vanished(self) -> list[str]:
        """The coordinates whose information is at rounding level beside the largest
        (:func:`phifit.law.vanished`): the loss does not move with them at all.  The
        unit-diagonal matrix hides them, since scaling blows their columns up to unit length;
        ``singular`` counts them."""
        return [n for n, gone in zip(self.names, vanished(self.scale**2), strict=True) if gone]


def information(
    runs: RunTable, spec: LawSpec, theta: np.ndarray, delta: float, *, phi_free: bool = True
) -> tuple[Information, np.ndarray]:
    """The information matrix of the free coordinates of ``spec`` at ``theta`` (phi left out
    when ``phi_free`` is False: not identified), and the log-loss residuals at ``theta``."""
    pred, jac = log_loss_and_jacobian(theta, runs.design)
    res = pred - runs.log_loss
    ares = np.abs(res)
    w = np.minimum(1.0, delta / np.maximum(ares, 1e-300)) if np.isfinite(delta) else np.ones_like(res)
    mask = spec.free_mask.copy()
    if not phi_free:
        mask[5] = False
    names = [THETA_NAMES[i] for i in np.flatnonzero(mask)]
    j = jac[:, mask]
    info = (j * w[:, None]).T @ j
    scale = np.sqrt(np.diag(info))
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = info / np.outer(scale, scale)
    finite = bool(np.all(np.isfinite(unit)))
    eig = np.linalg.eigvalsh(unit) if finite else np.array([0.0])
    cond = float(eig.max() / eig.min()) if eig.min() > 0 else float("inf")
    singular = not (finite and eig.min() > SINGULAR_RTOL * len(eig) * eig.max())
    im = Information(names, info, scale, unit, eig, cond, singular)
    if im.vanished and not singular:
        im = im._replace(singular=True, condition=float("inf"))
    return im, res


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
