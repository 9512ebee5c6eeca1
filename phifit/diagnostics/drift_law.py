"""The joint law with a compute-dependent phi, and its multi-start fit.

    log L_i = LSE(a - alpha log N_eff,i,  b - beta log D_i,  e),
    N_eff,i = N_once,i + r_i^phi(C_i) N_rec,i,
    phi(C) = phi_0 + phi_1 log(C / C_ref),

with C_i the FLOP budget of run i's isoFLOP curve and C_ref the geometric mean of the table's
distinct budgets, so that phi_0 is phi at the centre of the budget range (in log C) and phi_1
the change of phi per e-fold of compute.  The free coordinates are
x = (a, alpha, b, beta, e, phi_0, phi_1): the law's box for the first six (phi_0 in phi's) and
:data:`PHI1_BOUNDS` for phi_1.  With phi_1 = 0 the model *is* the joint law.

Derivatives: with c_i = log(C_i / C_ref), d log L_i / d phi_0 is the law's d log L_i / d phi
at phi_i = phi(C_i), and d log L_i / d phi_1 = c_i d log L_i / d phi.  The model evaluates the
law itself (:func:`phifit.law.log_loss_parts`): the shift phi_1 c_i log r_i is added to
log N_rec, since phi_i log r_i + log N_rec,i = phi_0 log r_i + (log N_rec,i + phi_1 c_i log r_i).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..fitters.lm import batched_weighted_lm
from ..fitters.objective import loss_terms
from ..fitters.polish import polish_residuals
from ..law import DEFAULT_BOUNDS, THETA_NAMES, Design, jacobian_t_from_parts, log_loss_parts

#: The box of phi_1, per e-fold of compute (a drift of 2 per e-fold moves phi by ~4.6 per decade).
PHI1_BOUNDS: tuple[float, float] = (-2.0, 2.0)
#: Names of the free coordinates x.
COORDINATES: tuple[str, ...] = (*THETA_NAMES[:5], "phi_0", "phi_1")


def budget_values(frame: Any) -> np.ndarray | None:
    """Each run's budget C in FLOPs (the ``budget`` column) as floats, or None when the table
    has no numeric, positive, finite budget column."""
    if "budget" not in frame:
        return None
    try:
        values = np.asarray(frame["budget"], dtype=float)
    except (TypeError, ValueError):
        return None
    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
        return None
    return values


def budget_offsets(budget: np.ndarray) -> tuple[np.ndarray, float]:
    """(c, C_ref): c_i = log(C_i / C_ref) with C_ref = exp(mean over distinct budgets of log C)."""
    logs = np.log(np.asarray(budget, dtype=float))
    log_ref = float(np.mean(np.log(np.unique(np.asarray(budget, dtype=float)))))
    return logs - log_ref, float(np.exp(log_ref))


def drift_box(bounds: Mapping[str, tuple[float, float]] = DEFAULT_BOUNDS) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of x: the law's box for (a, alpha, b, beta, e, phi_0), then phi_1's."""
    lower = [bounds[c][0] for c in THETA_NAMES] + [PHI1_BOUNDS[0]]
    upper = [bounds[c][1] for c in THETA_NAMES] + [PHI1_BOUNDS[1]]
    return np.array(lower, dtype=float), np.array(upper, dtype=float)


class DriftModel:
    """``model(x)`` of the drift law on one design for
    :func:`~phifit.fitters.lm.batched_weighted_lm`: predicted log L (m, n) and the transposed
    Jacobian (m, 7, n), plus ``forward`` / ``jacobian`` (the engine skips the Jacobian of
    rejected steps).  ``offset`` is c_i = log(C_i / C_ref).  Plain data: it pickles to workers."""

    def __init__(self, design: Design, offset: np.ndarray) -> None:
        self.design = design
        self.offset = np.asarray(offset, dtype=float)
        self._shift = self.offset * design.log_r  # c_i log r_i: 0 for r = 1 runs

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """Predicted log L of the rows of x (m, 7), and the parts of their Jacobian."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        d = self.design
        shifted = Design(d.log_n_once, d.log_n_rec + x[:, 6:7] * self._shift, d.log_r, d.log_tokens)
        return log_loss_parts(x[:, :6], shifted)

    def jacobian(self, parts: tuple[np.ndarray, ...], out: np.ndarray | None = None) -> np.ndarray:
        """The (m, 7, n) transposed Jacobian from ``parts`` (``out``: a buffer to write into)."""
        base = jacobian_t_from_parts(parts, self.design)
        jac = np.empty(base.shape[:-2] + (7, base.shape[-1])) if out is None else out
        jac[..., :6, :] = base
        np.multiply(base[..., 5, :], self.offset, out=jac[..., 6, :])
        return jac

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pred, parts = self.forward(x)
        return pred, self.jacobian(parts)

    def __getstate__(self) -> dict[str, Any]:
        return {"design": self.design, "offset": self.offset}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["design"], state["offset"])


@dataclass(frozen=True)
class MultiStart:
    """The end of a multi-start fit: x, its objective, whether the polish converged, how many
    refined starts reached the best objective, and the polish's message."""

    x: np.ndarray
    objective: float
    converged: bool
    n_at_best: int
    message: str


def multistart_fit(
    model: Any,
    y: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    delta: float,
    starts: Sequence[np.ndarray] = (),
    n_starts: int = 500,
    seed: int = 0,
    explore_iter: int = 8,
    n_refine: int = 32,
    refine_iter: int = 300,
    n_polish: int = 3,
    basin_rtol: float = 1e-3,
) -> MultiStart:
    """Minimise F(x) = sum_i rho(f_i(x) - y_i) in the box as the Huber fit does: ``n_starts``
    random starts uniform in the box explored together on the batched LM, the best ``n_refine``
    (with every warm start) carried to convergence, the best ``n_polish`` distinct end points
    finished by the least-squares polish; the lowest objective wins."""
    k = len(lower)
    rng = np.random.default_rng(seed)

    def descend(x0: np.ndarray, iterations: int) -> tuple[np.ndarray, np.ndarray]:
        end = batched_weighted_lm(model, x0, y, 1.0, lower, upper, delta=delta, max_iter=iterations)
        return end.x, np.where(np.isfinite(end.objective), end.objective, np.inf)

    carried = [np.clip(np.asarray(s, dtype=float), lower, upper).reshape(1, k) for s in starts]
    if n_starts:
        x_mid, obj_mid = descend(lower + (upper - lower) * rng.random((n_starts, k)), explore_iter)
        carried.append(x_mid[np.argsort(obj_mid)[:n_refine]])
    x_end, obj_end = descend(np.concatenate(carried), refine_iter)

    def fun(x: np.ndarray) -> np.ndarray:
        return model(x[None, :])[0][0] - y

    def jac(x: np.ndarray) -> np.ndarray:
        return model(x[None, :])[1][0].T

    candidates: list[np.ndarray] = []
    for i in np.argsort(obj_end):
        if np.isfinite(obj_end[i]) and all(
            np.max(np.abs(x_end[i] - c) / (upper - lower)) > 1e-3 for c in candidates
        ):
            candidates.append(x_end[i])
        if len(candidates) >= n_polish:
            break
    if not candidates:
        raise RuntimeError("drift fit: no start produced a finite objective; check the run table")
    best, best_obj = None, np.inf
    for c in candidates:
        sol = polish_residuals(fun, jac, c, lower, upper, delta)
        obj = float(np.sum(loss_terms(fun(sol.x), delta)))
        if obj < best_obj:
            best, best_obj = sol, obj
    n_at_best = int(np.sum(obj_end <= best_obj + basin_rtol * best_obj + 1e-10 * len(y)))
    return MultiStart(best.x, best_obj, bool(best.status > 0), n_at_best, str(best.message))


__all__ = [
    "COORDINATES",
    "DriftModel",
    "MultiStart",
    "PHI1_BOUNDS",
    "budget_offsets",
    "budget_values",
    "drift_box",
    "multistart_fit",
]
