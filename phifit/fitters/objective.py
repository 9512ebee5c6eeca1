"""The objective every fit and refit of the joint law minimises, and its gradient.

    F(x) = sum_i w_i rho(f_i(x) - y_i),    f_i(x) = log L_hat_i(full_theta(x)),  y_i = log L_i

    rho(r) = Huber_delta(r) = r^2 / 2            for |r| <= delta,
                              delta (|r| - delta / 2)  beyond      (delta > 0: the reference method)
    rho(r) = r^2 / 2                                                 (delta = inf: least squares)

    grad F(x) = sum_i w_i psi(r_i) J_i,    psi(r) = rho'(r) = r for |r| <= delta, delta sign(r) beyond

with J_i the gradient of f_i over the free coordinates x (:func:`law_model`, from the law's analytic
Jacobian in :mod:`phifit.law`).  The weights are w_i = 1 for a plain fit and the multiplicity of run
i for a resampled table (run i entered w_i times: F is then exactly the summed objective of the
concatenated table).  The sum, not the mean: the objective of a 116-run table is ~1e-4, and every
tolerance in :mod:`phifit.fitters.lm` is relative to it.

A :class:`~phifit.result.FitResult` records its box and loss; :func:`refit_settings` reads them
back, so that a refit minimises exactly the fit's own objective.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..defaults import HUBER_DELTA
from ..law import Design, LawSpec, jacobian_t_from_parts, log_loss_parts, weighted_hessian_from_parts

if TYPE_CHECKING:
    from ..result import FitResult

#: Huber threshold of the reference method, on log-loss residuals (one number: phifit.defaults).
DELTA = HUBER_DELTA


def refit_settings(fit: FitResult) -> tuple[LawSpec, float]:
    """(spec, delta) to refit ``fit`` with its own box, fixed values and loss.

    delta is the Huber threshold, or ``inf`` for a least-squares fit.  A Bayesian fit has
    no optimisation objective: ``ValueError`` says so (see :attr:`FitResult.loss_delta`).
    """
    return fit.spec, fit.loss_delta


def huber(x: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """Huber_delta(x) = x^2/2 for |x| <= delta, delta (|x| - delta/2) beyond (elementwise)."""
    ax = np.abs(x)
    return np.where(ax <= delta, 0.5 * x * x, delta * (ax - 0.5 * delta))


def loss_terms(res: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """Per-run terms rho(res) of the objective: Huber_delta(res), or res^2 / 2 when delta is infinite."""
    return huber(res, delta) if np.isfinite(delta) else 0.5 * res * res


def objective(res: np.ndarray, weights: np.ndarray | float, delta: float = DELTA) -> np.ndarray:
    """F = sum_i w_i rho(res_i) along the last axis (``res`` (..., n), ``weights`` broadcasting)."""
    return (weights * loss_terms(res, delta)).sum(-1)


def psi(res: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """rho'(res): res inside [-delta, delta], delta sign(res) beyond; res itself for least squares."""
    if not np.isfinite(delta):
        return res
    return np.where(np.abs(res) <= delta, res, delta * np.sign(res))


def irls_weights(
    res: np.ndarray, delta: float, curvature: np.ndarray
) -> tuple[np.ndarray, np.ndarray | float]:
    """(psi(res), omega) of the reweighted Gauss-Newton model of F (rows of ``res`` (m, n)):

        omega_i = 1 for |res_i| <= delta,  c * delta / |res_i| beyond,

    with c = ``curvature`` (m,) per row.  c = 1 is the IRLS matrix (Huber's rho majorised by a
    quadratic through the current residual), c -> 0 the exact second derivative, which is 0 in
    the linear zone; least squares has omega = 1 everywhere.
    """
    if not np.isfinite(delta):
        return res, 1.0
    ares = np.abs(res)
    inner = ares <= delta
    return (
        np.where(inner, res, delta * np.sign(res)),
        np.where(inner, 1.0, curvature[:, None] * delta / np.maximum(ares, delta)),
    )


def gradient(jac_t: np.ndarray, res: np.ndarray, weights: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """grad F = sum_i w_i psi(res_i) J_i, from the *transposed* Jacobian ``jac_t`` (m, k, n):
    returns (m, k) for residuals and weights (m, n)."""
    return np.matmul(jac_t, (weights * psi(res, delta))[..., None])[..., 0]


def law_model(spec: LawSpec, design: Design) -> Callable:
    """``model(x)`` for :func:`phifit.fitters.lm.batched_weighted_lm`: f(x) = log L_hat on ``design``
    with the free coordinates x completed by ``spec`` (:meth:`LawSpec.full_theta`).

    Returns predicted log-loss (m, n) and its transposed Jacobian over the free coordinates
    (m, k, n).  ``model.forward(x)`` gives the predictions and the parts of the Jacobian,
    ``model.jacobian(parts, out=None)`` (parts of some rows; ``out`` an (rows, k, n) buffer it
    writes into when every coordinate is free) the Jacobian of those rows: the same arithmetic
    in two steps (:func:`~phifit.law.log_loss_parts`), which the LM uses to skip the Jacobian
    of rejected steps.  ``model.curvature(parts, coef)`` is sum_i coef_i d^2 f_i / dx^2 over the
    free coordinates (m, k, k) (:func:`~phifit.law.weighted_hessian_from_parts`), the
    second-order term of :func:`~phifit.fitters.newton.batched_newton`'s exact Hessian.
    """
    mask = spec.free_mask
    all_free = bool(mask.all())

    def forward(x: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        return log_loss_parts(spec.full_theta(x), design)

    def jacobian(parts: tuple[np.ndarray, ...], out: np.ndarray | None = None) -> np.ndarray:
        if all_free:
            return jacobian_t_from_parts(parts, design, out)
        return jacobian_t_from_parts(parts, design)[..., mask, :]

    def curvature(parts: tuple[np.ndarray, ...], coef: np.ndarray) -> np.ndarray:
        hess = weighted_hessian_from_parts(parts, design, jacobian_t_from_parts(parts, design), coef)
        return hess if all_free else hess[:, mask][:, :, mask]

    def model(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pred, parts = forward(x)
        return pred, jacobian(parts)

    model.forward, model.jacobian, model.curvature = forward, jacobian, curvature
    return model


__all__ = [
    "DELTA",
    "gradient",
    "huber",
    "irls_weights",
    "law_model",
    "loss_terms",
    "objective",
    "psi",
    "refit_settings",
]
