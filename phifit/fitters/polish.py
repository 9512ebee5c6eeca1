"""The least-squares polish: one row of the objective finished by ``scipy.optimize.least_squares``.

It minimises the objective of :mod:`phifit.fitters.objective` on one (start, weighting) pair
with the trust-region reflective method at tight tolerances (``ftol = xtol = gtol = 1e-15``,
at most 2,000 evaluations): the objective of a study-size table is ~1e-4 and its gradients
tiny, so scipy's default tolerances stop early.  For the Huber objective ``loss="huber"``
with ``f_scale=delta``, whose cost is exactly sum_i Huber_delta(r_i); for least squares
``loss="linear"``, cost sum_i r_i^2 / 2.

scipy.optimize is imported only when a polish runs (the worker processes of the refits stay
light; most refits never need it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..law import Design, LawSpec, log_loss, log_loss_and_jacobian
from .objective import DELTA


def polish(
    x0: np.ndarray,
    spec: LawSpec,
    design: Design,
    y: np.ndarray,
    delta: float = DELTA,
    weights: np.ndarray | None = None,
) -> Any:
    """Refine free coordinates ``x0`` of the joint law (module docstring).

    Minimises sum_i w_i Huber_delta(log L_hat_i - log L_i), or sum_i w_i r_i^2 / 2 when delta
    is infinite.  Weights default to 1; for the Huber objective they must be whole numbers
    (bootstrap multiplicities: run i enters w_i times, which is exact); other weights give
    ``None``.  Returns the scipy result (``status > 0``: a tolerance was met).
    """
    mask = spec.free_mask

    def fun(x: np.ndarray) -> np.ndarray:
        return log_loss(spec.full_theta(x), design) - y

    def jac(x: np.ndarray) -> np.ndarray:
        return log_loss_and_jacobian(spec.full_theta(x), design)[1][:, mask]

    return polish_residuals(fun, jac, x0, spec.lower, spec.upper, delta, weights)


def polish_residuals(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    delta: float = DELTA,
    weights: np.ndarray | None = None,
    ftol: float = 1e-15,
) -> Any:
    """:func:`polish` for any model: ``fun(x)`` the (n,) log-loss residuals, ``jac(x)`` their
    (n, k) Jacobian, ``[lower, upper]`` the box of x.

    Same objective, weights rule and tolerances as :func:`polish` (which calls this for the
    joint law).  Integer Huber weights repeat rows (exact); least-squares weights scale the
    residuals by sqrt(w_i).  The start is moved 1e-12 inside the box (scipy needs a strictly
    feasible one).  ``ftol``: the relative change of the objective that stops the polish (1e-15
    by default, as every tolerance; a caller that needs only the objective's value, not the
    point, may stop earlier).
    """
    huber_loss = bool(np.isfinite(delta))
    if weights is None:
        rows, scale = None, None
    else:
        w = np.asarray(weights, dtype=float)
        if huber_loss:
            if np.any(w < 0) or not np.allclose(w, np.round(w)):
                return None
            rows, scale = np.repeat(np.arange(len(w)), np.round(w).astype(int)), None
        else:
            rows, scale = None, np.sqrt(w)

    def fun_w(x: np.ndarray) -> np.ndarray:
        res = fun(x)
        return res[rows] if rows is not None else res if scale is None else scale * res

    def jac_w(x: np.ndarray) -> np.ndarray:
        j = jac(x)
        return j[rows] if rows is not None else j if scale is None else scale[:, None] * j

    x0 = np.clip(x0, lower + 1e-12, upper - 1e-12)
    kw = {"loss": "huber", "f_scale": delta} if huber_loss else {"loss": "linear"}
    from scipy.optimize import least_squares

    return least_squares(
        fun_w,
        x0,
        jac=jac_w,
        bounds=(lower, upper),
        method="trf",
        x_scale="jac",
        ftol=ftol,
        xtol=1e-15,
        gtol=1e-15,
        max_nfev=2000,
        **kw,
    )


__all__ = ["polish", "polish_residuals"]
