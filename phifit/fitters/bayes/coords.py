"""Sampling coordinates of the Bayesian model and their whitening.

In theta = (a, alpha, b, beta, e, phi) (the law's coordinates, :mod:`phifit.law`) the
posterior is a curved, narrow ridge: corr(a, alpha) and corr(b, beta) exceed 0.999 on the
study's design, and E trades off against A and alpha.  NUTS then needs hundreds of
leapfrog steps per draw and still diverges.  The sampler therefore moves in

    v = (A_c, log alpha, B_c, log beta, E, phi),   A_c = A N_c^-alpha,  B_c = B D_c^-beta

(the two power-law terms at the design's central size N_c = e^c_N and data D_c = e^c_D),
in which the predicted loss is close to linear, whitened as v_free = centre + L z, with
the centre at the Huber optimum and L the Cholesky factor of the Laplace covariance there.

This is a change of variables only: :func:`phifit.fitters.bayes.model.build_model`
evaluates the priors and the box on theta and adds log |d theta / d v|
(:func:`dtheta_dv`), so the posterior of theta is unchanged.  On the study's design it
takes NUTS from hundreds to ~7 leapfrog steps per draw, with no divergences.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...law import THETA_NAMES, LawSpec, log_loss_and_jacobian, log_n_eff
from ...runs.table import RunTable


def centres(runs: RunTable, phi: float) -> tuple[float, float]:
    """c_N = mean log N_eff (at ``phi``) and c_D = mean log D over the runs."""
    return float(np.mean(log_n_eff(phi, runs.design))), float(np.mean(runs.design.log_tokens))


def log_exponents(spec: LawSpec) -> np.ndarray:
    """(6,) flags: a free alpha / beta is sampled as log alpha / log beta when its box is >= 0."""
    flags = np.zeros(len(THETA_NAMES), dtype=bool)
    for i, c in enumerate(THETA_NAMES):
        flags[i] = c in ("alpha", "beta") and bool(spec.free_mask[i]) and spec.bounds[c][0] >= 0.0
    return flags


def theta_to_v(theta: np.ndarray, c_n: float, c_d: float, log_exp: np.ndarray) -> np.ndarray:
    """Sampling coordinates v from theta = (a, alpha, b, beta, e, phi):

        v = (A_c, log alpha, B_c, log beta, E, phi),
        A_c = exp(a - alpha c_N) = A N_c^-alpha,  B_c = exp(b - beta c_D) = B D_c^-beta.

    In v the predicted loss at the centre, E + A_c + B_c, is linear and the exponents'
    right skew is removed, so the posterior is close to Gaussian.  ``log_exp``
    (:func:`log_exponents`) says whether alpha and beta are logged (not when the box
    allows negative values).
    """
    a, alpha, b, beta, e, phi = (float(x) for x in theta)
    return np.array(
        [
            math.exp(a - alpha * c_n),
            math.log(alpha) if log_exp[1] else alpha,
            math.exp(b - beta * c_d),
            math.log(beta) if log_exp[3] else beta,
            math.exp(e),
            phi,
        ]
    )


def v_to_theta(v: np.ndarray, c_n: float, c_d: float, log_exp: np.ndarray) -> np.ndarray:
    """Inverse of :func:`theta_to_v`."""
    alpha = math.exp(v[1]) if log_exp[1] else float(v[1])
    beta = math.exp(v[3]) if log_exp[3] else float(v[3])
    return np.array(
        [math.log(v[0]) + alpha * c_n, alpha, math.log(v[2]) + beta * c_d, beta, math.log(v[4]), float(v[5])]
    )


def dtheta_dv(v: np.ndarray, c_n: float, c_d: float, log_exp: np.ndarray) -> np.ndarray:
    """Jacobian d theta / d v (6 x 6).

    Its log-determinant is -log A_c - log B_c - log E (+ log alpha + log beta when those
    are logged): the ``log_jac`` term of the model's prior potential.
    """
    m = np.eye(len(THETA_NAMES))
    d_alpha = math.exp(v[1]) if log_exp[1] else 1.0
    d_beta = math.exp(v[3]) if log_exp[3] else 1.0
    m[0, 0], m[0, 1], m[1, 1] = 1.0 / v[0], c_n * d_alpha, d_alpha
    m[2, 2], m[2, 3], m[3, 3] = 1.0 / v[2], c_d * d_beta, d_beta
    m[4, 4] = 1.0 / v[4]
    return m


def whitening(runs: RunTable, spec: LawSpec, prior_sd: dict[str, float]) -> dict[str, Any]:
    """Centre and factor of the free sampling coordinates: v_free = centre + L z.

    centre = v at the Huber optimum (200 starts, moved 0.1% of the box inside it); L is the
    Cholesky factor of the Laplace covariance (J_v' J_v / s^2 + M' P M)^-1 over the free
    coordinates, with M = d theta / d v, J_v = J M (J the law's analytic Jacobian of
    log L_hat), s = 1.4826 MAD of the Huber residuals (floored at 1e-4) and P the diagonal
    prior precision on theta (``prior_sd`` per coordinate).  Only the sampler's efficiency
    depends on this; the posterior does not.
    """
    from ..huber import HuberOptions, fit_huber

    mask = spec.free_mask
    log_exp = log_exponents(spec)
    huber = fit_huber(runs, spec=spec, options=HuberOptions(n_starts=200, seed=0))
    theta = np.asarray(huber.theta, dtype=float)
    lo, hi = spec.lower, spec.upper
    margin = 1e-3 * (hi - lo)
    theta[mask] = np.clip(theta[mask], lo + margin, hi - margin)
    c_n, c_d = centres(runs, float(theta[5]))
    v = theta_to_v(theta, c_n, c_d, log_exp)
    pred, jac = log_loss_and_jacobian(theta, runs.design)
    resid = runs.log_loss - pred
    scale = max(1.4826 * float(np.median(np.abs(resid - np.median(resid)))), 1e-4)
    m = dtheta_dv(v, c_n, c_d, log_exp)[np.ix_(mask, mask)]
    jv = jac[:, mask] @ m
    prior_prec = np.diag([1.0 / prior_sd[c] ** 2 for c, f in zip(THETA_NAMES, mask) if f])
    precision = jv.T @ jv / scale**2 + m.T @ prior_prec @ m
    cov = np.linalg.inv(precision)
    return {
        "centre": v[mask],
        "chol": np.linalg.cholesky(0.5 * (cov + cov.T)),
        "c_n": c_n,
        "c_d": c_d,
        "residual_scale": scale,
        "huber_theta": theta,
    }
