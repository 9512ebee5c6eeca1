"""Sampling coordinates of the Bayesian model and their whitening.

In theta = (a, alpha, b, beta, e, phi) (the law's coordinates, :mod:`phifit.law`) the
posterior is a curved, narrow ridge: corr(a, alpha) and corr(b, beta) exceed 0.999 on the
study's design, and E trades off against A and alpha.  NUTS then needs hundreds of
leapfrog steps per draw and still diverges.  The sampler therefore moves in

    v = (A_c, log alpha, B_c, log beta, E, phi),   A_c = A N_c^-alpha,  B_c = B D_c^-beta

(the two power-law terms at the design's central size N_c = e^c_N and data D_c = e^c_D),
in which the predicted loss is close to linear, whitened as v_free = centre + L z, with
the centre at the Huber optimum and L the Cholesky factor of the Laplace covariance there.

phi is then mapped onto its box by a logistic (the interval transform of Stan and PyMC):
w = logit((phi - lo) / (hi - lo)) (:func:`interval_bounds`).  Without it the box is a wall: a
posterior that reaches it (phi's lower end on the bundled CPU tables) sends NUTS trajectories
across it, each counted as a divergence.  E is left linear: mapped the same way onto its box
(e^-3, e^2) on the 12-cell CPU design, whose three budgets barely locate E, the chains
wandered down E's long lower tail and mixed far worse (R-hat up to 2.4 on 3 of 5 tables,
against at most 1.014 with E linear; divergences did not fall).

The N-term ridge.  Where the budgets span little compute (the 12-cell CPU design: three
budgets over 4x), the data fix the N-term's level and slope at the centre, S = E + A_c and
G = alpha A_c, but not how S splits between E and A_c: E can fall toward its floor e^lo_e
while A_c rises and alpha falls, at almost the same likelihood.  In (A_c, log alpha, E) that
ridge is curved and ends at the wall E = e^lo_e, where NUTS trajectories diverged (every one
of 8 such tables had divergences, 15-163 of 4000 draws, starting at small E and heading to
smaller E, larger A_c, smaller alpha).  When a, alpha and e are free (and alpha is logged)
they are therefore sampled as (S, log G, w) (:func:`ridge_floor`),

    E = lo + (S - lo) sigmoid(w),   A_c = (S - lo) (1 - sigmoid(w)),   alpha = G / A_c,

lo = e^lo_e: the ridge is the w axis, E > lo and A_c > 0 hold for every w, and the Jacobian
adds log((S - lo) s (1 - s)).

The D-term ridge.  Three budgets fix the D-term no better: the data fix the total level at the
centre, T = E + A_c + B_c, and the D-slope H = beta B_c, but E trades against B_c (and beta)
as it does against A_c.  With the N-term's coordinates alone, E, B and beta still mixed ten
times worse than A and alpha on failing 12-cell tables (bulk ESS 120-140 against 1100-1500).
When b and beta are free too (beta logged: :func:`level_split`), the total level is therefore
split three ways, v = (T, log G, w_B, log H, w_A, phi):

    (E - lo, A_c, B_c) = (T - lo) softmax(0, -w_A, -w_B),   alpha = G / A_c,   beta = H / B_c,

w_A = log((E - lo) / A_c), w_B = log((E - lo) / B_c) (:func:`level_shares`): both ridges are
axes, E > lo, A_c > 0 and B_c > 0 hold everywhere, and the Jacobian adds
log((T - lo)^2 s_E s_A s_B).

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


#: Index in v of the coordinates mapped onto their box by a logistic: phi (see the module docstring).
INTERVAL_INDEX = {"phi": 5}


def interval_bounds(spec: LawSpec) -> dict[int, tuple[float, float]]:
    """{index in v: (lo, hi)} of the coordinates sampled through a logistic onto their box.

    Those of :data:`INTERVAL_INDEX` (phi), when free and the box is finite; E would map onto
    (e^lo_e, e^hi_e).
    """
    out = {}
    for c, k in INTERVAL_INDEX.items():
        lo, hi = spec.bounds[c]
        if not spec.free_mask[THETA_NAMES.index(c)] or not (math.isfinite(lo) and math.isfinite(hi)):
            continue
        out[k] = (math.exp(lo), math.exp(hi)) if c == "e" else (float(lo), float(hi))
    return out


def ridge_floor(spec: LawSpec) -> float | None:
    """E's floor e^lo_e when the N-term ridge coordinates (S, log G, w) are used (a, alpha
    and e free, alpha logged, e's lower bound finite), else None (module docstring)."""
    free = dict(zip(THETA_NAMES, spec.free_mask))
    lo = spec.bounds["e"][0]
    if free["a"] and free["e"] and free["alpha"] and log_exponents(spec)[1] and math.isfinite(lo):
        return math.exp(lo)
    return None


def level_split(spec: LawSpec) -> bool:
    """Whether the D-term joins the ridge coordinates, splitting the total level three ways
    (:func:`ridge_floor` applies, and b and beta are free with beta logged; module docstring)."""
    free = dict(zip(THETA_NAMES, spec.free_mask))
    return ridge_floor(spec) is not None and free["b"] and free["beta"] and bool(log_exponents(spec)[3])


def _sigmoid(w: float) -> float:
    return 1.0 / (1.0 + math.exp(-w)) if w >= 0 else math.exp(w) / (1.0 + math.exp(w))


def _to_ridge(u: np.ndarray, lo: float | None, d_term: bool = False) -> np.ndarray:
    """(A_c, log alpha, ., ., E, .) -> (S, log G, ., ., w, .): S = E + A_c, G = alpha A_c,
    w = logit((E - lo) / (S - lo)); with ``d_term`` also (., ., B_c, log beta, ., .) ->
    (T, log G, w_B, log H, w_A, .): T = E + A_c + B_c, H = beta B_c, w_A = log((E - lo) / A_c),
    w_B = log((E - lo) / B_c)."""
    if lo is None:
        return u
    v = np.array(u, float)
    a_c, e_big = u[0], u[4]
    v[0], v[1] = e_big + a_c, u[1] + math.log(a_c)
    v[4] = math.log(e_big - lo) - math.log(a_c)  # logit((E - lo) / (S - lo)); S - E = A_c
    if d_term:
        b_c = u[2]
        v[0] += b_c
        v[2] = math.log(e_big - lo) - math.log(b_c)
        v[3] = u[3] + math.log(b_c)
    return v


def _from_ridge(v: np.ndarray, lo: float | None, d_term: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`_to_ridge` and d u / d v (6 x 6; the identity without the ridge)."""
    jac = np.eye(len(v))
    if lo is None:
        return np.array(v, float), jac
    if d_term:
        return _from_level_split(v, lo)
    u = np.array(v, float)
    big_s, g, w = v[0], v[1], v[4]
    s = _sigmoid(w)
    span = big_s - lo
    a_c = span * (1.0 - s)
    u[0], u[1], u[4] = a_c, g - math.log(a_c), lo + span * s
    ds = span * s * (1.0 - s)
    jac[0, 0], jac[0, 4] = 1.0 - s, -ds
    jac[1, 0], jac[1, 1], jac[1, 4] = -(1.0 - s) / a_c, 1.0, ds / a_c
    jac[4, 0], jac[4, 4] = s, ds
    return u, jac


def level_shares(w_a: float, w_b: float) -> tuple[float, float, float]:
    """(s_E, s_A, s_B): the softmax of (0, -w_A, -w_B), the shares of T - lo held by E - lo, A_c
    and B_c."""
    m = max(0.0, -w_a, -w_b)
    e0, ea, eb = math.exp(-m), math.exp(-w_a - m), math.exp(-w_b - m)
    z = e0 + ea + eb
    return e0 / z, ea / z, eb / z


def _from_level_split(v: np.ndarray, lo: float) -> tuple[np.ndarray, np.ndarray]:
    """(T, log G, w_B, log H, w_A, .) -> (A_c, log alpha, B_c, log beta, E, .) and d u / d v:

    (E - lo, A_c, B_c) = (T - lo) (s_E, s_A, s_B) (:func:`level_shares`), alpha = G / A_c,
    beta = H / B_c; |d u / d v| = (T - lo)^2 s_E s_A s_B."""
    big_t, g, w_b, h, w_a = v[0], v[1], v[2], v[3], v[4]
    k = big_t - lo
    s_e, s_a, s_b = level_shares(w_a, w_b)
    u = np.array(v, float)
    a_c, b_c = k * s_a, k * s_b
    u[0], u[1], u[2], u[3], u[4] = a_c, g - math.log(a_c), b_c, h - math.log(b_c), lo + k * s_e
    jac = np.eye(len(v))
    # columns: T (0), w_A (4), w_B (2); rows: A_c (0), B_c (2), E (4), log alpha (1), log beta (3)
    jac[0, 0], jac[0, 4], jac[0, 2] = s_a, -k * s_a * (1.0 - s_a), k * s_a * s_b
    jac[2, 0], jac[2, 4], jac[2, 2] = s_b, k * s_a * s_b, -k * s_b * (1.0 - s_b)
    jac[4, 0], jac[4, 4], jac[4, 2] = s_e, k * s_e * s_a, k * s_e * s_b
    jac[1, 0], jac[1, 1], jac[1, 4], jac[1, 2] = -1.0 / k, 1.0, 1.0 - s_a, -s_b
    jac[3, 0], jac[3, 3], jac[3, 4], jac[3, 2] = -1.0 / k, 1.0, -s_a, 1.0 - s_b
    return u, jac


def _to_interval(v: np.ndarray, intervals: dict[int, tuple[float, float]] | None) -> np.ndarray:
    """v with each interval coordinate replaced by w = logit((v - lo) / (hi - lo))."""
    v = np.array(v, float)
    for k, (lo, hi) in (intervals or {}).items():
        p = (v[k] - lo) / (hi - lo)
        v[k] = math.log(p) - math.log1p(-p)
    return v


def _from_interval(
    v: np.ndarray, intervals: dict[int, tuple[float, float]] | None
) -> tuple[np.ndarray, np.ndarray]:
    """(v with each w mapped back to lo + (hi - lo) sigmoid(w), dv/dw per coordinate)."""
    v = np.array(v, float)
    dv_dw = np.ones(len(v))
    for k, (lo, hi) in (intervals or {}).items():
        s = 1.0 / (1.0 + math.exp(-v[k]))
        v[k] = lo + (hi - lo) * s
        dv_dw[k] = (hi - lo) * s * (1.0 - s)
    return v, dv_dw


def theta_to_v(
    theta: np.ndarray,
    c_n: float,
    c_d: float,
    log_exp: np.ndarray,
    intervals: dict[int, tuple[float, float]] | None = None,
    ridge: float | None = None,
    d_term: bool = False,
) -> np.ndarray:
    """Sampling coordinates v from theta = (a, alpha, b, beta, e, phi):

        v = (A_c, log alpha, B_c, log beta, E, phi),
        A_c = exp(a - alpha c_N) = A N_c^-alpha,  B_c = exp(b - beta c_D) = B D_c^-beta.

    In v the predicted loss at the centre, E + A_c + B_c, is linear and the exponents'
    right skew is removed, so the posterior is close to Gaussian.  ``log_exp``
    (:func:`log_exponents`) says whether alpha and beta are logged (not when the box
    allows negative values); ``intervals`` (:func:`interval_bounds`) which coordinates are
    then replaced by w = logit((v - lo) / (hi - lo)); ``ridge`` (:func:`ridge_floor`), E's
    floor when (A_c, log alpha, E) are replaced by the ridge coordinates (S, log G, w).
    """
    a, alpha, b, beta, e, phi = (float(x) for x in theta)
    v = np.array(
        [
            math.exp(a - alpha * c_n),
            math.log(alpha) if log_exp[1] else alpha,
            math.exp(b - beta * c_d),
            math.log(beta) if log_exp[3] else beta,
            math.exp(e),
            phi,
        ]
    )
    return _to_interval(_to_ridge(v, ridge, d_term), intervals)


def v_to_theta(
    v: np.ndarray,
    c_n: float,
    c_d: float,
    log_exp: np.ndarray,
    intervals: dict[int, tuple[float, float]] | None = None,
    ridge: float | None = None,
    d_term: bool = False,
) -> np.ndarray:
    """Inverse of :func:`theta_to_v`."""
    v, _ = _from_interval(v, intervals)
    v, _ = _from_ridge(v, ridge, d_term)
    alpha = math.exp(v[1]) if log_exp[1] else float(v[1])
    beta = math.exp(v[3]) if log_exp[3] else float(v[3])
    return np.array(
        [math.log(v[0]) + alpha * c_n, alpha, math.log(v[2]) + beta * c_d, beta, math.log(v[4]), float(v[5])]
    )


def dtheta_dv(
    v: np.ndarray,
    c_n: float,
    c_d: float,
    log_exp: np.ndarray,
    intervals: dict[int, tuple[float, float]] | None = None,
    ridge: float | None = None,
    d_term: bool = False,
) -> np.ndarray:
    """Jacobian d theta / d v (6 x 6), v as :func:`theta_to_v` returns it.

    Its log-determinant is -log A_c - log B_c - log E (+ log alpha + log beta when those
    are logged) + sum over the interval coordinates of log((hi - lo) s (1 - s)), s =
    sigmoid(w), + log((S - lo) s (1 - s)) with the ridge coordinates or log((T - lo)^2 s_E s_A s_B)
    with the level split: the ``log_jac`` term
    of the model's prior potential.
    """
    v, dv_dw = _from_interval(v, intervals)
    v, du_dv = _from_ridge(v, ridge, d_term)
    m = np.eye(len(THETA_NAMES))
    d_alpha = math.exp(v[1]) if log_exp[1] else 1.0
    d_beta = math.exp(v[3]) if log_exp[3] else 1.0
    m[0, 0], m[0, 1], m[1, 1] = 1.0 / v[0], c_n * d_alpha, d_alpha
    m[2, 2], m[2, 3], m[3, 3] = 1.0 / v[2], c_d * d_beta, d_beta
    m[4, 4] = 1.0 / v[4]
    return (m @ du_dv) * dv_dw[None, :]


def whitening(runs: RunTable, spec: LawSpec, prior_sd: dict[str, float]) -> dict[str, Any]:
    """Centre and factor of the free sampling coordinates: v_free = centre + L z.

    centre = v (:func:`theta_to_v`, with the interval coordinates of :func:`interval_bounds`
    and the ridge coordinates where :func:`ridge_floor` applies) at the Huber optimum (200
    starts, moved 0.1% of the box inside it); L is the Cholesky factor of the Laplace
    covariance (J_v' J_v / s^2 + M' P M)^-1 over the free coordinates, with
    M = d theta / d v, J_v = J M (J the law's analytic Jacobian of log L_hat),
    s = 1.4826 MAD of the Huber residuals (floored at 1e-4) and P the diagonal
    prior precision on theta (``prior_sd`` per coordinate).  Only the sampler's efficiency
    depends on this; the posterior does not.
    """
    from ..huber import HuberOptions, fit_huber

    mask = spec.free_mask
    log_exp = log_exponents(spec)
    intervals, ridge, d_term = interval_bounds(spec), ridge_floor(spec), level_split(spec)
    huber = fit_huber(runs, spec=spec, options=HuberOptions(n_starts=200, seed=0))
    theta = np.asarray(huber.theta, dtype=float)
    lo, hi = spec.lower, spec.upper
    margin = 1e-3 * (hi - lo)
    theta[mask] = np.clip(theta[mask], lo + margin, hi - margin)
    c_n, c_d = centres(runs, float(theta[5]))
    v = theta_to_v(theta, c_n, c_d, log_exp, intervals, ridge, d_term)
    pred, jac = log_loss_and_jacobian(theta, runs.design)
    resid = runs.log_loss - pred
    scale = max(1.4826 * float(np.median(np.abs(resid - np.median(resid)))), 1e-4)
    m = dtheta_dv(v, c_n, c_d, log_exp, intervals, ridge, d_term)[np.ix_(mask, mask)]
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
