"""Batched projected Newton with the exact Hessian of the objective: the finish of flat valleys.

For every row s it minimises, inside the box [lower, upper], the objective of
:mod:`phifit.fitters.objective`

    F_s(x) = sum_i w_si rho(f_i(x) - y_si),

with the exact Hessian

    H = sum_i w_i rho''(r_i) J_i J_i^T + sum_i w_i psi(r_i) d^2 f_i,

rho'' = 1 inside Huber's quadratic zone and 0 beyond it (1 everywhere for least squares).
The Levenberg-Marquardt solver of :mod:`phifit.fitters.lm` drops the second term and
replaces the zero curvature of the linear zone by a small positive one.  Where most residuals
of a small table lie in the linear zone (a 10-run table's RMSE is ten times Huber's delta),
the matrix it keeps has next to no curvature along a valley the data do not fix (log A and
alpha trading off over a narrow range of N), so its steps creep along the valley and its
stopping rule, measured with that matrix, does not see that the point has stopped moving
the objective.  The exact Hessian holds the valley's curvature, which comes from the second
term; with it a Newton step crosses the valley's floor in a few iterations and the Newton
decrement measures what is left to gain.

Each iteration, per row: the coordinates at a bound whose gradient pushes out of the box
leave the system (their step is 0); the free block H_ff is scaled to unit diagonal
(D = sqrt|diag H_ff|), made positive definite by adding (max(0, -lambda_min) (1 + 1e-9) + mu) I
to the scaled matrix, and the step solves that system; it is clipped to the box and accepted
only if F decreases.  mu starts at 1e-3, is divided by 5 after an accepted step (down to 1e-12)
and multiplied by 10 after a rejected one; a row whose mu passes 1e10 stops unconverged.
A row stops as converged when its scaled H_ff is positive definite (smallest eigenvalue
above 1e-12 times the largest) and the Newton decrement g_f^T H_ff^-1 g_f / 2 is at most
``tol * F + atol * sum_i w_i``, the stopping rule of :func:`~phifit.fitters.lm.batched_weighted_lm`.

The model must give the second-order term: ``model.curvature(parts, coef)`` (sum_i coef_i
d^2 f_i over the free coordinates) beside ``model.forward`` and ``model.jacobian``, as
:func:`~phifit.fitters.objective.law_model` does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .lm import MAX_DAMPING, BatchedLM, checked_rows
from .objective import DELTA, loss_terms


def has_curvature(model: Callable) -> bool:
    """True when ``model`` gives what :func:`batched_newton` needs."""
    return all(hasattr(model, name) for name in ("forward", "jacobian", "curvature"))


def _derivatives(
    model: Callable, parts: tuple[np.ndarray, ...], res: np.ndarray, ws: np.ndarray, delta: float
) -> tuple[np.ndarray, np.ndarray]:
    """(g, H) of F from the model's parts at residuals ``res`` (module docstring)."""
    if np.isfinite(delta):
        inner = np.abs(res) <= delta
        psi = np.where(inner, res, delta * np.sign(res))
        second = ws * inner
    else:
        psi, second = res, ws
    jac_t = model.jacobian(parts)
    grad = np.matmul(jac_t, (ws * psi)[..., None])[..., 0]
    hess = np.matmul(jac_t * second[:, None, :], np.swapaxes(jac_t, 1, 2))
    hess += model.curvature(parts, ws * psi)
    return grad, hess


def _reduced(
    x: np.ndarray, grad: np.ndarray, hess: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The scaled reduced system of each row: (g_s, S, d, lambda_min) with g_s = g_f / d,
    S = D^-1 H_ff D^-1 (the active coordinates' rows and columns replaced by the identity)
    and lambda_min the smallest eigenvalue of S."""
    k = x.shape[1]
    at_bound = ((x <= lower) & (grad > 0)) | ((x >= upper) & (grad < 0))
    free = ~at_bound
    h = hess * (free[:, :, None] & free[:, None, :]) + at_bound[:, :, None] * np.eye(k)
    d = np.sqrt(np.maximum(np.abs(np.einsum("skk->sk", h)), 1e-300))
    scaled = h / (d[:, :, None] * d[:, None, :])
    g_s = np.where(at_bound, 0.0, grad) / d
    with np.errstate(invalid="ignore"):
        lam = np.linalg.eigvalsh(scaled) if np.isfinite(scaled).all() else None
    if lam is None:
        lam = np.full((len(x), k), np.nan)
        ok = np.isfinite(scaled).all(axis=(1, 2))
        lam[ok] = np.linalg.eigvalsh(scaled[ok])
    return g_s, scaled, d, lam


def batched_newton(
    model: Callable,
    x0: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray | float,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    delta: float = DELTA,
    max_iter: int = 200,
    tol: float = 1e-13,
    atol: float = 1e-26,
) -> BatchedLM:
    """Minimise F_s inside the box from each start ``x0`` (m, k) by projected Newton steps
    with the exact Hessian (module docstring).  ``y`` (n,) shared or (m, n) per row,
    ``weights`` (m, n) or a scalar, as :func:`~phifit.fitters.lm.batched_weighted_lm` takes
    them; returns the same :class:`~phifit.fitters.lm.BatchedLM` (x, objective, converged,
    n_iter).  Accepted steps only lower F, so a row ends no higher than it started."""
    x, y, weights, lower, upper = checked_rows(x0, y, weights, lower, upper)
    m, k = x.shape
    per_row_y = y.ndim == 2

    def y_of(rows: np.ndarray) -> np.ndarray:
        return y[rows] if per_row_y else y

    pred, parts = model.forward(x)
    res = pred - y
    obj = (weights * loss_terms(res, delta)).sum(-1)
    grad = np.zeros((m, k))
    hess = np.zeros((m, k, k))
    finite = np.isfinite(obj) & np.isfinite(res).all(-1)
    if finite.any():
        at = np.flatnonzero(finite)
        grad[at], hess[at] = _derivatives(
            model, tuple(p[finite] for p in parts), res[finite], weights[finite], delta
        )
    floor = atol * weights.sum(-1)
    damping = np.full(m, 1e-3)
    converged = np.zeros(m, dtype=bool)
    n_iter = np.where(finite, max_iter, 0)
    running = np.flatnonzero(finite)
    eye = np.eye(k)
    for it in range(max_iter):
        if len(running) == 0:
            break
        g_s, scaled, d, lam = _reduced(x[running], grad[running], hess[running], lower, upper)
        lam_min, lam_max = lam[:, 0], np.abs(lam).max(-1)
        definite = np.isfinite(lam_min) & (lam_min > 1e-12 * lam_max)
        decrement = np.full(len(running), np.inf)
        if definite.any():
            sol = np.linalg.solve(scaled[definite], g_s[definite][..., None])[..., 0]
            decrement[definite] = 0.5 * np.abs(np.einsum("sk,sk->s", g_s[definite], sol))
        done = definite & (decrement <= tol * obj[running] + floor[running])
        stuck = damping[running] >= MAX_DAMPING
        stop = done | stuck | ~np.isfinite(lam_min)
        if stop.any():
            converged[running[done]] = True
            n_iter[running[stop]] = it
            keep = ~stop
            running, g_s, scaled, d, lam_min = (
                running[keep],
                g_s[keep],
                scaled[keep],
                d[keep],
                lam_min[keep],
            )
            if len(running) == 0:
                break
        # (1 + 1e-9): the shifted matrix stays nonsingular however large -lambda_min is
        shift = np.maximum(0.0, -lam_min) * (1 + 1e-9) + damping[running]
        system = scaled + shift[:, None, None] * eye
        try:
            step = -np.linalg.solve(system, g_s[..., None])[..., 0] / d
        except np.linalg.LinAlgError:  # rounding left some system singular: a gradient step
            step = -g_s / (1.0 + shift[:, None]) / d
        x_new = np.clip(x[running] + np.where(np.isfinite(step), step, 0.0), lower, upper)
        pred_new, parts_new = model.forward(x_new)
        res_new = pred_new - y_of(running)
        obj_new = (weights[running] * loss_terms(res_new, delta)).sum(-1)
        better = np.isfinite(obj_new) & (obj_new < obj[running])
        if better.any():
            at = running[better]
            x[at], obj[at] = x_new[better], obj_new[better]
            grad[at], hess[at] = _derivatives(
                model, tuple(p[better] for p in parts_new), res_new[better], weights[at], delta
            )
        damping[running] = np.where(
            better,
            np.maximum(damping[running] * 0.2, 1e-12),
            damping[running] * 10.0,
        )
    return BatchedLM(x=x, objective=obj, converged=converged, n_iter=n_iter)


__all__ = ["batched_newton", "has_curvature"]
