"""Huber fit of the joint law on log-loss: the reference study's method.

Objective (paper-notes section 1.2, following Hoffmann et al. 2022):

    objective(theta) = sum_i Huber_delta(log L_hat_i - log L_i),   delta = 1e-3
    Huber_delta(x) = x^2 / 2 if |x| <= delta, else delta (|x| - delta / 2)

a *sum* over runs, minimised in the box a, b in [-5, 35], alpha, beta in [0, 2.5],
e in [-3, 2], phi in [-3, 3].  The study takes the best of 500 L-BFGS-B runs from
random starts.  phifit keeps the 500 random starts but runs them together:

1. **Vectorised stage.**  All starts take projected Levenberg-Marquardt steps at
   once on the iteratively reweighted (IRLS) Huber problem, using the analytic
   Jacobian from :mod:`phifit.law` (:func:`batched_weighted_lm`, the same routine
   that refits bootstrap replicates); each start keeps its own damping.  After a
   short exploration the best ``n_refine`` starts continue; the rest are dropped.
2. **Polish.**  The best few distinct end points are refined with
   ``scipy.optimize.least_squares(loss="huber", f_scale=delta)``, whose cost is
   exactly the summed Huber objective, at tight tolerances (the objective is ~1e-4
   and its gradients tiny, so default tolerances stop early in wrong basins).

The result reports how many starts reached the best basin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from ..law import LawSpec, log_loss, log_loss_and_jacobian, log_loss_and_jacobian_t
from ..result import FitResult
from ..runs import RunTable
from .common import build_result, effective_spec

DELTA = 1e-3


def huber(x: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """Huber_delta(x) = x^2/2 for |x| <= delta, delta (|x| - delta/2) beyond (elementwise)."""
    ax = np.abs(x)
    return np.where(ax <= delta, 0.5 * x * x, delta * (ax - 0.5 * delta))


def loss_terms(res: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """Per-run terms of the objective: Huber_delta(res), or res^2 / 2 when delta is infinite."""
    return huber(res, delta) if np.isfinite(delta) else 0.5 * res * res


def huber_objective(theta: np.ndarray, runs: RunTable, delta: float = DELTA) -> np.ndarray:
    """Sum over runs of Huber_delta(log L_hat - log L); theta may be (6,) or (S, 6)."""
    return huber(log_loss(theta, runs.design) - runs.log_loss, delta).sum(axis=-1)


@dataclass(frozen=True)
class HuberOptions:
    """Settings of the Huber fit (defaults reproduce the reference protocol)."""

    n_starts: int = 500  # random starts, uniform in the box (the study: 500)
    seed: int = 0  # seed of the starts
    delta: float = DELTA  # Huber threshold on log-loss residuals
    explore_iter: int = 8  # vectorised LM iterations on every start
    n_refine: int = 32  # best starts carried on after exploration
    refine_iter: int = 40  # further vectorised LM iterations on those
    n_polish: int = 3  # distinct candidates refined with least_squares
    basin_rtol: float = 1e-3  # a start "reached the best" if within this relative objective


def _polish(x0: np.ndarray, spec: LawSpec, runs: RunTable, delta: float):
    """Refine one start with least_squares(loss='huber'); returns the scipy result."""
    return polish(x0, spec, runs.design, runs.log_loss, delta)


def polish(
    x0: np.ndarray,
    spec: LawSpec,
    design,
    y: np.ndarray,
    delta: float = DELTA,
    weights: np.ndarray | None = None,
):
    """Refine free coordinates ``x0`` with ``scipy.optimize.least_squares`` at tight tolerances.

    Minimises sum_i w_i Huber_delta(log L_hat_i - log L_i) (``loss="huber"``,
    ``f_scale=delta``, whose cost is exactly that sum), or sum_i w_i r_i^2 / 2 when delta
    is infinite.  Weights default to 1; for the Huber objective they must be whole numbers
    (bootstrap multiplicities: run i enters w_i times, which is exact); other weights give
    ``None``.  Returns the scipy result (``status > 0``: a tolerance was met).
    """
    mask = spec.free_mask
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

    def fun(x):
        res = log_loss(spec.full_theta(x), design) - y
        return res[rows] if rows is not None else res if scale is None else scale * res

    def jac(x):
        j = log_loss_and_jacobian(spec.full_theta(x), design)[1][:, mask]
        return j[rows] if rows is not None else j if scale is None else scale[:, None] * j

    x0 = np.clip(x0, spec.lower + 1e-12, spec.upper - 1e-12)
    kw = {"loss": "huber", "f_scale": delta} if huber_loss else {"loss": "linear"}
    return least_squares(
        fun,
        x0,
        jac=jac,
        bounds=(spec.lower, spec.upper),
        method="trf",
        x_scale="jac",
        ftol=1e-15,
        xtol=1e-15,
        gtol=1e-15,
        max_nfev=2000,
        **kw,
    )


def fit_huber(
    runs: RunTable, *, spec: LawSpec | None = None, options: HuberOptions | None = None
) -> FitResult:
    """Fit the joint law by the summed Huber objective on log-loss (reference method).

    Parameters
    ----------
    runs
        Validated run table.
    spec
        Which parameters vary (default: all six) and the box.
    options
        Number of starts, seed, delta, iteration limits.

    Returns
    -------
    FitResult with ``extras``: ``n_starts``, ``n_refined`` (starts carried past the
    exploration stage), ``n_starts_at_best`` (refined starts whose vectorised end point
    is within ``basin_rtol`` of the best objective), ``delta``, ``solver_message``.
    """
    spec = spec or LawSpec()
    options = options or HuberOptions()
    fit_spec, warnings = effective_spec(runs, spec)
    rng = np.random.default_rng(options.seed)
    lo, hi = fit_spec.lower, fit_spec.upper
    starts = lo + (hi - lo) * rng.random((options.n_starts, len(lo)))
    model, y = law_model(fit_spec, runs.design), runs.log_loss

    def descend(x0: np.ndarray, iterations: int) -> tuple[np.ndarray, np.ndarray]:
        end = batched_weighted_lm(model, x0, y, 1.0, lo, hi, delta=options.delta, max_iter=iterations)
        return end.x, end.objective

    x_mid, obj_mid = descend(starts, options.explore_iter)
    keep = np.argsort(np.where(np.isfinite(obj_mid), obj_mid, np.inf))[: options.n_refine]
    x_end, obj_end = descend(x_mid[keep], options.refine_iter)

    # polish the best few distinct end points
    order = np.argsort(obj_end)
    candidates: list[np.ndarray] = []
    for i in order:
        if not np.isfinite(obj_end[i]):
            continue
        if all(np.max(np.abs(x_end[i] - c) / (hi - lo)) > 1e-3 for c in candidates):
            candidates.append(x_end[i])
        if len(candidates) >= options.n_polish:
            break
    best = None
    for c in candidates:
        sol = _polish(c, fit_spec, runs, options.delta)
        if best is None or sol.cost < best.cost:
            best = sol
    if best is None:
        raise RuntimeError("no start produced a finite objective; check the run table")
    theta = fit_spec.full_theta(best.x)
    objective = float(huber_objective(theta, runs, options.delta))
    # a start "reached the best" when its vectorised end point is within a relative
    # basin_rtol of the optimum, or within 1e-10 per run for a (near) perfect fit
    tolerance = options.basin_rtol * objective + 1e-10 * len(runs)
    n_at_best = int(np.sum(obj_end <= objective + tolerance))
    if n_at_best <= 1:
        warnings.append(
            f"only {n_at_best} of the {len(keep)} refined starts reached the best "
            f"objective; the optimum may be hard to find (try more starts)"
        )
    return build_result(
        runs,
        fit_spec,
        theta,
        method="huber",
        objective=objective,
        objective_name=f"sum of Huber(delta={options.delta:g}) on log-loss residuals",
        converged=bool(best.status > 0),
        warnings=warnings,
        phi_identified="phi" not in fit_spec.fixed or "phi" in spec.fixed,
        extras={
            "n_starts": options.n_starts,
            "n_refined": int(len(keep)),
            "n_starts_at_best": n_at_best,
            "delta": options.delta,
            "seed": options.seed,
            "solver_message": str(best.message),
            "n_polished": len(candidates),
        },
    )


# -- many weighted refits at once (bootstrap, jackknife, recipes) ---------------------------


@dataclass(frozen=True)
class BatchedLM:
    """End points of :func:`batched_weighted_lm`: one row per start.

    ``x`` (m, k) free coordinates, ``objective`` (m,) the weighted objective,
    ``converged`` (m,) the stopping rule held (see :func:`batched_weighted_lm`),
    ``n_iter`` (m,) iterations used.
    """

    x: np.ndarray
    objective: np.ndarray
    converged: np.ndarray
    n_iter: np.ndarray


def weighted_huber(res: np.ndarray, weights: np.ndarray, delta: float) -> np.ndarray:
    """sum_i w_i Huber_delta(res_i) along the last axis; delta = inf gives sum_i w_i res_i^2 / 2.

    With integer weights (the multiplicity of each run in a resampled table) this is
    exactly the summed objective over the concatenated, resampled table.
    """
    ares = np.abs(res)
    if np.isinf(delta):
        return (weights * 0.5 * res * res).sum(-1)
    return (weights * np.where(ares <= delta, 0.5 * res * res, delta * (ares - 0.5 * delta))).sum(-1)


def batched_weighted_lm(
    model,
    x0: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    delta: float = DELTA,
    max_iter: int = 300,
    tol: float = 1e-13,
    atol: float = 1e-26,
    switch_rtol: float = 1e-6,
    near_curvature: float = 1e-2,
) -> BatchedLM:
    """Projected Levenberg-Marquardt on many (start, weighting) pairs at once.

    Minimises, separately for every row s,

        F_s(x) = sum_i w_si Huber_delta(f_i(x) - y_i)     (delta = inf: least squares)

    inside the box [lower, upper].  ``model(x)`` maps x (m, k) to predictions (m, n)
    and their *transposed* Jacobian (m, k, n).  Each iteration solves

        (H + lam diag(H)) step = -g,   g = sum_i w_i psi(res_i) J_i,
        H = sum_i w_i omega_i J_i J_i^T,
        omega_i = 1 if |res_i| <= delta else c * delta / |res_i|,

    clips x + step to the box and accepts it only if F decreases; each row keeps its
    own damping lam.  c = 1 is the IRLS (reweighted Gauss-Newton) matrix, robust far
    from a minimum but only linearly convergent, because most residuals of a scaling
    fit lie in Huber's linear zone.  Once a row's predicted decrease falls below
    ``switch_rtol * F`` it switches to c = ``near_curvature`` (close to the true
    Gauss-Newton Hessian of the Huber loss, whose linear zone has zero curvature), which
    converges in a few steps once the set of inner residuals has settled.

    A row stops as ``converged`` once the predicted decrease of the projected gradient
    g_p (components pushing out of the box at an active bound set to 0),
    g_p^T H^-1 g_p / 2, is below ``tol * F + atol * sum_i w_i`` (relative: the objective
    is ~1e-4 and its gradients tiny; the small absolute part only matters for an exact,
    noise-free fit, F ~ 0).  It stops unconverged when no step improves F even at maximal
    damping (lam = 1e10) while the predicted decrease is still above 1e3 times that
    threshold, or after ``max_iter`` iterations.  Rows leave the
    computation as they stop, so the cost falls as they finish.
    """
    x = np.clip(np.array(x0, dtype=float, copy=True), lower, upper)
    m, k = x.shape
    weights = np.broadcast_to(np.asarray(weights, dtype=float), (m, len(y)))
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    eye = np.eye(k)
    finite_delta = bool(np.isfinite(delta))

    def evaluate(xs, ws, curv):
        pred, jac_t = model(xs)
        res = pred - y
        obj = (ws * loss_terms(res, delta)).sum(-1)
        if finite_delta:
            ares = np.abs(res)
            inner = ares <= delta
            psi = np.where(inner, res, delta * np.sign(res))
            omega = np.where(inner, 1.0, curv[:, None] * delta / np.maximum(ares, delta))
        else:
            psi, omega = res, 1.0
        grad = np.matmul(jac_t, (ws * psi)[..., None])[..., 0]
        hess = np.matmul(jac_t * (ws * omega)[..., None, :], np.swapaxes(jac_t, -1, -2))
        return obj, grad, hess

    def decrement(xs, grad, hess):
        at_bound = ((xs <= lower) & (grad > 0)) | ((xs >= upper) & (grad < 0))
        gp = np.where(at_bound, 0.0, grad)
        diag = np.einsum("skk->sk", hess)
        reg = hess + (1e-12 * diag.max(-1) + 1e-300)[:, None, None] * eye
        try:
            sol = np.linalg.solve(reg, gp[..., None])[..., 0]
        except np.linalg.LinAlgError:
            sol = gp / np.maximum(diag, 1e-300)
        return 0.5 * np.abs(np.einsum("sk,sk->s", gp, sol))

    curv = np.ones(m)
    floor = atol * weights.sum(-1)
    obj, grad_a, hess_a = evaluate(x, weights, curv)
    converged = np.zeros(m, dtype=bool)
    n_iter = np.full(m, max_iter)
    idx = np.flatnonzero(np.isfinite(obj))
    n_iter[~np.isfinite(obj)] = 0
    xa, wa, obj_a, curv, floor = x[idx], weights[idx], obj[idx], curv[idx], floor[idx]
    grad_a, hess_a = grad_a[idx], hess_a[idx]
    lam = np.full(len(idx), 1e-3)
    for it in range(max_iter):
        if len(idx) == 0:
            break
        dec = decrement(xa, grad_a, hess_a)
        threshold = tol * obj_a + floor
        near = dec <= threshold
        switch = (curv > near_curvature) & ((dec <= switch_rtol * obj_a) | (lam >= 1e10))
        near &= ~switch
        stuck = (lam >= 1e10) & ~switch
        done = near | (stuck & (dec <= 1e3 * threshold))
        stop = done | stuck
        if stop.any():
            x[idx[stop]], obj[idx[stop]] = xa[stop], obj_a[stop]
            converged[idx[done]] = True
            n_iter[idx[stop]] = it
            keep = ~stop
            idx, xa, wa, obj_a, lam, curv, floor = (
                idx[keep],
                xa[keep],
                wa[keep],
                obj_a[keep],
                lam[keep],
                curv[keep],
                floor[keep],
            )
            grad_a, hess_a, switch = grad_a[keep], hess_a[keep], switch[keep]
            if len(idx) == 0:
                break
        if switch.any():
            curv[switch] = near_curvature
            lam[switch] = 1e-3
            _, grad_a[switch], hess_a[switch] = evaluate(xa[switch], wa[switch], curv[switch])
        diag = np.einsum("skk->sk", hess_a)
        damped = hess_a + lam[:, None, None] * (diag[:, :, None] * eye) + 1e-300 * eye
        try:
            step = np.linalg.solve(damped, -grad_a[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = -grad_a / np.maximum(diag, 1e-300)
        step = np.nan_to_num(step, nan=0.0, posinf=0.0, neginf=0.0)
        x_new = np.clip(xa + step, lower, upper)
        obj_new, grad_new, hess_new = evaluate(x_new, wa, curv)
        better = np.isfinite(obj_new) & (obj_new < obj_a)
        xa[better], obj_a[better] = x_new[better], obj_new[better]
        grad_a[better], hess_a[better] = grad_new[better], hess_new[better]
        lam = np.where(better, np.maximum(lam * 0.2, 1e-12), np.minimum(lam * 10.0, 1e10))
    x[idx], obj[idx] = xa, obj_a
    return BatchedLM(x=x, objective=obj, converged=converged, n_iter=n_iter)


def law_model(spec: LawSpec, design):
    """``model(x)`` for :func:`batched_weighted_lm`: the joint law on ``design`` under ``spec``.

    Returns predicted log-loss (m, n) and its transposed Jacobian over the free
    coordinates (m, k, n).
    """
    mask = spec.free_mask
    all_free = bool(mask.all())

    def model(x):
        pred, jac_t = log_loss_and_jacobian_t(spec.full_theta(x), design)
        return pred, (jac_t if all_free else jac_t[..., mask, :])

    return model
