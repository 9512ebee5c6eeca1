"""The refit engine: every fit and refit of the joint law in phifit runs through here.

One module on purpose: the objective, the batched solver, its polish and the drivers that
feed it many weightings or responses are one mechanism, and keeping them together is what
lets no other module re-implement any of them.

One objective, written once (:func:`loss_terms`):

    F(x) = sum_i w_i rho(log L_hat_i(x) - log L_i),
    rho = Huber_delta (delta > 0: the reference method) or r^2 / 2 (delta = inf: least squares)

with integer weights w_i when a run enters a resampled table w_i times (then F is exactly
the objective of the concatenated resampled table) and w_i = 1 otherwise.  Its parts:

- :func:`batched_weighted_lm`: projected Levenberg-Marquardt on many (start, weighting)
  rows at once, with the law's analytic Jacobian (:func:`law_model`);
- :func:`polish`: ``scipy.optimize.least_squares`` at tight tolerances on one row (the
  objective is ~1e-4 and its gradients tiny: default tolerances stop early);
  :func:`polish_residuals` the same for any model (the grouped-phi joint fit);
- :func:`refit_weighted`: warm-started refits of many weightings of one table (warm
  start from the point estimate plus spread starts, best end point per row, unconverged
  rows finished by :func:`polish`), in chunks run in parallel threads;
- :func:`identifiable_rows`: which weightings still identify phi.

The multi-start point fit (:mod:`phifit.fitters.huber`), least squares
(:mod:`phifit.fitters.lsq`), the bootstrap, diagnostics, recipes and the planner call these;
none re-implements them.  A :class:`~phifit.result.FitResult` records its box and loss, and
:func:`refit_settings` reads them back, so a refit uses exactly the fit's own objective.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..law import Design, LawSpec, jacobian_t_from_parts, log_loss, log_loss_and_jacobian, log_loss_parts
from ..result import FitResult

if TYPE_CHECKING:  # pandas and scipy.optimize stay out of the bootstrap's worker processes (start-up)
    from ..runs.table import RunTable

#: Huber threshold of the reference method, on log-loss residuals.
DELTA = 1e-3


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
    """Per-run terms of the objective: Huber_delta(res), or res^2 / 2 when delta is infinite."""
    return huber(res, delta) if np.isfinite(delta) else 0.5 * res * res


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
    full_theta = _theta_filler(spec)

    def fun(x):
        return log_loss(full_theta(x), design) - y

    def jac(x):
        return log_loss_and_jacobian(full_theta(x), design)[1][:, mask]

    return polish_residuals(fun, jac, x0, spec.lower, spec.upper, delta, weights)


def polish_residuals(
    fun,
    jac,
    x0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    delta: float = DELTA,
    weights: np.ndarray | None = None,
):
    """:func:`polish` for any model: ``fun(x)`` the (n,) log-loss residuals, ``jac(x)`` their
    (n, k) Jacobian, ``[lower, upper]`` the box of x.

    Same objective, weights rule and tolerances as :func:`polish` (which calls this for the
    joint law); the grouped-phi fit of :mod:`phifit.fitters.per_recipe_phi` calls it with its own model.
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

    def fun_w(x):
        res = fun(x)
        return res[rows] if rows is not None else res if scale is None else scale * res

    def jac_w(x):
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
        ftol=1e-15,
        xtol=1e-15,
        gtol=1e-15,
        max_nfev=2000,
        **kw,
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


#: Jacobian bytes per block of rows in :func:`batched_weighted_lm`: about one core's L2
#: cache.  Measured (``benchmarks/fit_large.py``, 500 starts): 0.5-2 MiB blocks cut the
#: fit's time by ~0.3x at 1,856 runs and ~0.35x at 116 runs against one block; 4-8 MiB don't.
BLOCK_BYTES = 2**20


def _rows(keep: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The rows ``keep`` of each per-row array of the LM's state (rows that stop leave it)."""
    return tuple(a[keep] for a in arrays)


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
    active_set: bool = False,
    block_bytes: int = BLOCK_BYTES,
    prune_after: int | None = None,
    prune_keep: int = 1,
    prune_ratio: float = np.inf,
) -> BatchedLM:
    """Projected Levenberg-Marquardt on many (start, weighting) pairs at once.

    Minimises, separately for every row s,

        F_s(x) = sum_i w_si Huber_delta(f_i(x) - y_si)     (delta = inf: least squares)

    ``y`` is one response vector (n,) shared by every row, or one per row (m, n) (the
    wild bootstrap refits many responses at once).

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

    ``active_set=True`` (the finish of :func:`polish_unconverged`) drops the active
    coordinates (at a bound, gradient pushing out of the box) from the linear system as
    well: their rows and columns of H are zeroed and their diagonal set to 1, so their
    step is 0 and the free coordinates take the step of the reduced problem
    H_ff step_f = -g_f (projected Newton) instead of a full step that clipping then
    distorts; the decrement becomes g_f^T H_ff^-1 g_f / 2, the reduced problem's own.
    Without it, a row whose optimum has log E at its bound keeps pushing E outward, its
    clipped steps barely improve F, and its decrement, measured with the inverse of the
    full H (which is >= H_ff^-1 on the free block), never falls below the threshold.

    Rows are evaluated in blocks whose Jacobian takes at most ``block_bytes`` (many
    starts on a large table give an (m, k, n) Jacobian that no longer fits in the cache);
    every row's arithmetic is the same in any block, so results do not depend on it.

    Pruning (the multi-start fit's exploration): with ``prune_after = p``, just before
    iteration p every row still running whose objective exceeds ``prune_ratio`` times the
    ``prune_keep``-th smallest objective over all rows stops there, unconverged.  Accepted
    steps only lower F, so a row stopped at F_p > ratio * F_(keep) could only enter the best
    ``prune_keep`` at the end if it fell below that bar in the remaining iterations (it
    can happen: the pruning is a bet that buys time); the rows kept end bit-identical to a
    run without pruning.
    """
    x = np.clip(np.array(x0, dtype=float, copy=True), lower, upper)
    m, k = x.shape
    y = np.asarray(y, dtype=float)
    per_row_y = y.ndim == 2
    n_runs = y.shape[-1]
    if per_row_y and y.shape[0] != m:
        raise ValueError(f"y has {y.shape[0]} rows for {m} starts")
    weights = np.broadcast_to(np.asarray(weights, dtype=float), (m, n_runs))
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    eye = np.eye(k)
    finite_delta = bool(np.isfinite(delta))
    block = max(1, int(block_bytes) // (8 * k * max(n_runs, 1)))
    # a model may split its evaluation (see law_model): predictions first, the Jacobian only
    # for the rows that need it (a rejected trial step needs the objective alone)
    forward = getattr(model, "forward", None)
    jacobian = getattr(model, "jacobian", None)
    if forward is None or jacobian is None:

        def forward(xs):
            pred, jac_t = model(xs)
            return pred, (jac_t,)

        def jacobian(parts, out=None):
            return parts[0]

    # the (rows, k, n) arrays of a block live in two buffers reused every iteration: fresh
    # ones of that size cost page faults on every first touch
    buffers: list[np.ndarray] = []

    def buffer(i, rows, kk):
        while len(buffers) <= i:
            buffers.append(np.empty(0))
        if buffers[i].size < rows * kk * n_runs:
            buffers[i] = np.empty(rows * kk * n_runs)
        return buffers[i][: rows * kk * n_runs].reshape(rows, kk, n_runs)

    def derivatives(jac_t, ws, res, curv):
        if finite_delta:
            ares = np.abs(res)
            inner = ares <= delta
            psi = np.where(inner, res, delta * np.sign(res))
            omega = np.where(inner, 1.0, curv[:, None] * delta / np.maximum(ares, delta))
        else:
            psi, omega = res, 1.0
        grad = np.matmul(jac_t, (ws * psi)[..., None])[..., 0]
        scaled = np.multiply(jac_t, (ws * omega)[..., None, :], out=buffer(1, *jac_t.shape[:2]))
        hess = np.matmul(scaled, np.swapaxes(jac_t, -1, -2))
        return grad, hess

    def evaluate_block(xs, ws, ys, curv):
        pred, parts = forward(xs)
        res = pred - ys
        obj = (ws * loss_terms(res, delta)).sum(-1)
        return (obj, *derivatives(jacobian(parts), ws, res, curv))

    def evaluate(xs, ws, ys, curv):
        rows = len(xs)
        if rows <= block:
            return evaluate_block(xs, ws, ys, curv)
        obj, grad, hess = np.empty(rows), np.empty((rows, k)), np.empty((rows, k, k))
        for s in range(0, rows, block):
            part = slice(s, s + block)
            y_part = ys[part] if per_row_y else ys
            obj[part], grad[part], hess[part] = evaluate_block(xs[part], ws[part], y_part, curv[part])
        return obj, grad, hess

    def trial(xs, ws, ys, curv, obj_cur, grad, hess):
        """Objective at the trial points xs; where it is lower than obj_cur, also the
        gradient and H there, written into grad and hess (the accepted rows)."""
        rows = len(xs)
        obj = np.empty(rows)
        better = np.empty(rows, dtype=bool)
        for s in range(0, rows, block):
            part = slice(s, s + block)
            y_part = ys[part] if per_row_y else ys
            pred, parts = forward(xs[part])
            res = pred - y_part
            obj[part] = obj_part = (ws[part] * loss_terms(res, delta)).sum(-1)
            ok = np.isfinite(obj_part) & (obj_part < obj_cur[part])
            better[part] = ok
            if ok.all():
                jac_t = jacobian(parts, buffer(0, len(ok), 6))
                grad[part], hess[part] = derivatives(jac_t, ws[part], res, curv[part])
            elif ok.any():
                at = np.flatnonzero(ok) + s
                jac_t = jacobian(tuple(p[ok] for p in parts), buffer(0, len(at), 6))
                grad[at], hess[at] = derivatives(jac_t, ws[at], res[ok], curv[at])
        return obj, better

    def projected(xs, grad, hess):
        """g_p (out-pushing components at a bound zeroed) and H, reduced with ``active_set``."""
        at_bound = ((xs <= lower) & (grad > 0)) | ((xs >= upper) & (grad < 0))
        gp = np.where(at_bound, 0.0, grad)
        if not active_set or not at_bound.any():
            return gp, hess
        free = ~at_bound
        hp = hess * (free[:, :, None] & free[:, None, :])
        hp += at_bound[:, :, None] * eye
        return gp, hp

    def newton_decrement(gp, hess):
        """Per row |g_p^T (H + reg)^-1 g_p| / 2 and whether its system is singular (NaN then)."""
        diag = np.einsum("skk->sk", hess)
        reg = hess + (1e-12 * diag.max(-1) + 1e-300)[:, None, None] * eye
        singular = np.zeros(len(gp), dtype=bool)
        try:
            sol = np.linalg.solve(reg, gp[..., None])[..., 0]
        except np.linalg.LinAlgError:
            # which rows: each system alone (LAPACK solves every matrix of a stack separately)
            sol = np.full(gp.shape, np.nan)
            for j in range(len(gp)):
                try:
                    sol[j] = np.linalg.solve(reg[j : j + 1], gp[j : j + 1, :, None])[0, :, 0]
                except np.linalg.LinAlgError:
                    singular[j] = True
        return 0.5 * np.abs(np.einsum("sk,sk->s", gp, sol)), singular

    def diagonal_decrement(gp, hess):
        """The decrement with diag(H) for H, for every row when some row's system is singular."""
        diag = np.einsum("skk->sk", hess)
        sol = gp / np.maximum(diag, 1e-300)
        return 0.5 * np.abs(np.einsum("sk,sk->s", gp, sol))

    curv = np.ones(m)
    floor = atol * weights.sum(-1)
    obj, grad_a, hess_a = evaluate(x, weights, y, curv)
    converged = np.zeros(m, dtype=bool)
    n_iter = np.full(m, max_iter)
    idx = np.flatnonzero(np.isfinite(obj))
    n_iter[~np.isfinite(obj)] = 0
    xa, wa, obj_a, curv, floor = x[idx], weights[idx], obj[idx], curv[idx], floor[idx]
    ya = y[idx] if per_row_y else y
    grad_a, hess_a = grad_a[idx], hess_a[idx]
    lam = np.full(len(idx), 1e-3)
    # The decrement of a row depends on its x, gradient and H only, which change where a step
    # is accepted (or the curvature switched): it is recomputed there ("stale") and kept
    # elsewhere.  Rows whose system is singular make the whole iteration use the diagonal
    # decrement, as one solve over all rows would.
    dec_solved = np.zeros(len(idx))
    singular = np.zeros(len(idx), dtype=bool)
    stale = np.ones(len(idx), dtype=bool)
    for it in range(max_iter):
        if len(idx) == 0:
            break
        if it == prune_after and m > prune_keep >= 1:
            current = obj.copy()
            current[idx] = obj_a
            current = np.where(np.isfinite(current), current, np.inf)
            kth = np.partition(current, prune_keep - 1)[prune_keep - 1]
            keep = obj_a <= prune_ratio * kth
            if not keep.all():
                gone = ~keep
                x[idx[gone]], obj[idx[gone]], n_iter[idx[gone]] = xa[gone], obj_a[gone], it
                idx, xa, wa, obj_a, lam, curv, floor, grad_a, hess_a, dec_solved, singular, stale = _rows(
                    keep, idx, xa, wa, obj_a, lam, curv, floor, grad_a, hess_a, dec_solved, singular, stale
                )
                if per_row_y:
                    ya = ya[keep]
        if active_set:
            gp_all, hp_all = projected(xa, grad_a, hess_a)
            if stale.any():
                dec_solved[stale], singular[stale] = newton_decrement(gp_all[stale], hp_all[stale])
        elif stale.all():
            dec_solved, singular = newton_decrement(*projected(xa, grad_a, hess_a))
        elif stale.any():
            dec_solved[stale], singular[stale] = newton_decrement(
                *projected(xa[stale], grad_a[stale], hess_a[stale])
            )
        stale[:] = False
        if singular.any():
            dec = diagonal_decrement(*(projected(xa, grad_a, hess_a) if not active_set else (gp_all, hp_all)))
        else:
            dec = dec_solved
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
            idx, xa, wa, obj_a, lam, curv, floor, grad_a, hess_a, dec_solved, singular, stale, switch = _rows(
                keep,
                idx,
                xa,
                wa,
                obj_a,
                lam,
                curv,
                floor,
                grad_a,
                hess_a,
                dec_solved,
                singular,
                stale,
                switch,
            )
            if active_set:
                gp_all, hp_all = gp_all[keep], hp_all[keep]
            if per_row_y:
                ya = ya[keep]
            if len(idx) == 0:
                break
        if switch.any():
            curv[switch] = near_curvature
            lam[switch] = 1e-3
            y_switch = ya[switch] if per_row_y else ya
            _, grad_a[switch], hess_a[switch] = evaluate(xa[switch], wa[switch], y_switch, curv[switch])
            stale |= switch
            if active_set:
                gp_all, hp_all = projected(xa, grad_a, hess_a)
        g_step, h_step = (gp_all, hp_all) if active_set else (grad_a, hess_a)
        diag = np.einsum("skk->sk", h_step)
        if np.isfinite(diag).all():
            # H + lam diag(H) + 1e-300 I, adding to the diagonal only: the same numbers as the
            # sum of the full matrices (off the diagonal that adds zeros)
            damped = h_step.copy()
            on_diag = damped.reshape(len(damped), k * k)[:, :: k + 1]
            on_diag += lam[:, None] * diag
            on_diag += 1e-300
        else:
            damped = h_step + lam[:, None, None] * (diag[:, :, None] * eye) + 1e-300 * eye
        try:
            step = np.linalg.solve(damped, -g_step[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = -g_step / np.maximum(diag, 1e-300)
        step = np.where(np.isfinite(step), step, 0.0)
        x_new = np.clip(xa + step, lower, upper)
        obj_new, better = trial(x_new, wa, ya, curv, obj_a, grad_a, hess_a)
        xa[better], obj_a[better] = x_new[better], obj_new[better]
        stale |= better
        lam = np.where(better, np.maximum(lam * 0.2, 1e-12), np.minimum(lam * 10.0, 1e10))
    x[idx], obj[idx] = xa, obj_a
    return BatchedLM(x=x, objective=obj, converged=converged, n_iter=n_iter)


def _theta_filler(spec: LawSpec):
    """``spec.full_theta`` with the mask and the fixed values looked up once (same numbers)."""
    mask = spec.free_mask
    if mask.all():
        return lambda x: np.array(x, dtype=float)
    fixed_at = np.flatnonzero(~mask)
    fixed_values = spec.full_theta(np.zeros(int(mask.sum())))[fixed_at]

    def full_theta(x):
        x = np.asarray(x, dtype=float)
        theta = np.empty(x.shape[:-1] + (len(mask),))
        theta[..., mask] = x
        theta[..., fixed_at] = fixed_values
        return theta

    return full_theta


def law_model(spec: LawSpec, design):
    """``model(x)`` for :func:`batched_weighted_lm`: the joint law on ``design`` under ``spec``.

    Returns predicted log-loss (m, n) and its transposed Jacobian over the free
    coordinates (m, k, n).  ``model.forward(x)`` gives the predictions and the parts of the
    Jacobian, ``model.jacobian(parts, out=None)`` (parts of some rows; ``out`` a buffer it
    may write into) the Jacobian of those rows: the
    same arithmetic in two steps (:func:`~phifit.law.log_loss_parts`), which
    :func:`batched_weighted_lm` uses to skip the Jacobian of rejected steps.
    """
    mask = spec.free_mask
    all_free = bool(mask.all())
    full_theta = _theta_filler(spec)

    def forward(x):
        return log_loss_parts(full_theta(x), design)

    def jacobian(parts, out=None):
        if all_free:
            return jacobian_t_from_parts(parts, design, out)
        return jacobian_t_from_parts(parts, design)[..., mask, :]

    def model(x):
        pred, parts = forward(x)
        return pred, jacobian(parts)

    model.forward, model.jacobian = forward, jacobian
    return model


# -- refitting many weighted tables (bootstrap, jackknife, recipes, planning) ---------------


@dataclass(frozen=True)
class RefitProblem:
    """Everything a worker needs to refit weighted tables (plain data)."""

    design: Design
    y: np.ndarray
    fixed: dict
    bounds: dict
    delta: float
    max_iter: int = 300
    explore_iter: int = 15
    prune_ratio: float = 2.0

    @property
    def spec(self) -> LawSpec:
        return LawSpec(fixed=self.fixed, bounds=self.bounds)


def refit_chunk(
    problem: RefitProblem, weights: np.ndarray, x_hat: np.ndarray, spread: np.ndarray
) -> dict[str, np.ndarray]:
    """Refit weighted tables: warm start plus spread starts, best end point per table.

    ``weights`` (c, n), ``x_hat`` (k,) free coordinates of the point estimate,
    ``spread`` (c, K, k) extra starts.  Returns per table: ``x`` (c, k), ``objective``,
    ``converged``, ``switched`` (a spread start beat the warm start by more than a
    relative 1e-9), ``n_iter`` (iterations of the best start).
    """
    spec = problem.spec
    model = law_model(spec, problem.design)
    lo, hi = spec.lower, spec.upper
    c = len(weights)
    kw = {"delta": problem.delta}
    warm = batched_weighted_lm(
        model, np.tile(x_hat, (c, 1)), problem.y, weights, lo, hi, max_iter=problem.max_iter, **kw
    )
    best_x, best_obj = warm.x.copy(), warm.objective.copy()
    best_conv, best_it = warm.converged.copy(), warm.n_iter.copy()
    switched = np.zeros(c, dtype=bool)
    n_spread = spread.shape[1] if spread.ndim == 3 else 0
    if n_spread:
        owner = np.repeat(np.arange(c), n_spread)
        ws = weights[owner]
        explore = batched_weighted_lm(
            model,
            spread.reshape(-1, spread.shape[-1]),
            problem.y,
            ws,
            lo,
            hi,
            max_iter=problem.explore_iter,
            **kw,
        )
        ceiling = problem.prune_ratio * np.where(np.isfinite(best_obj), best_obj, np.inf)[owner]
        carry = (~explore.converged) & (explore.objective <= ceiling)
        x_end, obj_end = explore.x.copy(), explore.objective.copy()
        conv_end, it_end = explore.converged.copy(), explore.n_iter.copy()
        if carry.any():
            more = batched_weighted_lm(
                model, explore.x[carry], problem.y, ws[carry], lo, hi, max_iter=problem.max_iter, **kw
            )
            x_end[carry], obj_end[carry] = more.x, more.objective
            conv_end[carry], it_end[carry] = more.converged, more.n_iter + problem.explore_iter
        obj_end = np.where(np.isfinite(obj_end), obj_end, np.inf)
        for j in range(n_spread):
            rows = np.arange(c) * n_spread + j
            cand = obj_end[rows]
            # a spread start replaces the warm one only when it is clearly better
            better = cand < np.where(np.isfinite(best_obj), best_obj, np.inf) * (1 - 1e-9)
            better &= conv_end[rows] | ~best_conv
            switched |= better & (cand < warm.objective * (1 - 1e-9))
            best_x[better], best_obj[better] = x_end[rows][better], cand[better]
            best_conv[better], best_it[better] = conv_end[rows][better], it_end[rows][better]
    polished = polish_unconverged(problem, weights, best_x, best_obj, best_conv)
    return {
        "x": best_x,
        "objective": best_obj,
        "converged": best_conv,
        "switched": switched,
        "n_iter": best_it,
        "polished": polished,
    }


#: Iterations of the batched active-set finish of rows the refit's LM left unconverged.
FINISH_ITER = 3_000


def polish_unconverged(
    problem: RefitProblem,
    weights: np.ndarray,
    x: np.ndarray,
    objective: np.ndarray,
    converged: np.ndarray,
    far_drop: float = 0.05,
    finish_iter: int = FINISH_ITER,
) -> np.ndarray:
    """Finish, in place, the rows the vectorised LM left unconverged (finite objective).

    The LM stops unconverged after ``max_iter`` steps on long, flat valleys, typically
    log E sliding to its bound on a resampled table with a poorly determined E: its
    clipped full steps keep pushing E out of the box.  Two stages:

    1. All such rows continue together from where they stopped in
       :func:`batched_weighted_lm` with ``active_set=True`` (coordinates pinned at a bound
       leave the linear system, the others keep stepping; the stopping rule is the
       reduced problem's decrement), for up to ``finish_iter`` iterations: a row creeping
       along the flat E valley needs thousands, and an iteration on a batch of rows costs far
       less than one least-squares polish.  It only accepts steps that lower the objective,
       so a row it finishes ends no higher than it started.
    2. A row that still fails (typically still creeping along the E valley after
       ``max_iter`` steps) is refined from where stage 1 left it by the point fit's
       least-squares polish (:func:`polish`, ``least_squares`` at tight tolerances on the
       weighted objective), the only finish before stage 1 existed.  So is a row whose
       objective stage 1 lowered by more than ``far_drop`` (it started far from a minimum
       and may have reached another basin than the polish would): the polish runs from
       stage 1's start and the lower of the two ends is kept.

    A row counts as converged when stage 1 meets its stopping rule, or when the polish
    meets a tolerance without raising the objective (relative 1e-9).  Returns the (c,)
    mask of rows finished by either stage.
    """
    spec = problem.spec
    finished = np.zeros(len(x), dtype=bool)
    rows = np.flatnonzero(~converged & np.isfinite(objective))
    if len(rows) == 0:
        return finished
    lm = batched_weighted_lm(
        law_model(spec, problem.design),
        x[rows],
        problem.y,
        weights[rows],
        spec.lower,
        spec.upper,
        delta=problem.delta,
        max_iter=finish_iter,
        active_set=True,
    )
    # a row that fell far (> far_drop of its objective) was not near a minimum: its path may
    # end in another basin than the polish's, so it also gets the polish (from where the first
    # LM stopped, as before) and keeps the better end (measured: 1 weighting in ~5,000)
    x_start, f_start = x[rows].copy(), objective[rows].copy()
    lower = lm.objective <= f_start  # always (accepted steps only lower F): a guard
    x[rows[lower]], objective[rows[lower]] = lm.x[lower], lm.objective[lower]
    done = lm.converged & lower
    converged[rows[done]] = finished[rows[done]] = True
    far = done & (lm.objective < (1 - far_drop) * f_start)
    for j in np.flatnonzero(~done | far):
        i = rows[j]
        x0 = x_start[j] if far[j] else x[i]
        sol = polish(x0, spec, problem.design, problem.y, problem.delta, weights[i])
        if sol is None or sol.status <= 0:
            continue
        res = log_loss(spec.full_theta(sol.x), problem.design) - problem.y
        obj = float(np.sum(weights[i] * loss_terms(res, problem.delta)))
        if obj < objective[i] * (1 - 1e-12) or (not far[j] and obj <= objective[i] * (1 + 1e-9) + 1e-300):
            x[i], objective[i], converged[i], finished[i] = sol.x, obj, True, True
    return finished


def spread_starts(
    x_hat: np.ndarray, spec: LawSpec, n_rows: int, n_spread: int, rng: np.random.Generator
) -> np.ndarray:
    """(n_rows, n_spread, k) starts: the first half around x_hat (sd 10% of each box width),
    the rest uniform in the box."""
    lo, hi = spec.lower, spec.upper
    k = len(lo)
    n_local = (n_spread + 1) // 2
    local = x_hat + 0.1 * (hi - lo) * rng.standard_normal((n_rows, n_local, k))
    uniform = lo + (hi - lo) * rng.random((n_rows, n_spread - n_local, k))
    return np.clip(np.concatenate([local, uniform], axis=1), lo, hi)


def identifiable_rows(runs: RunTable, weights: np.ndarray) -> np.ndarray:
    """Per weighting: True when the runs with w > 0 identify phi (looped runs, >= 2 values of r)."""
    r = runs.r
    looped = (r > 1) & (runs.n_rec > 0)
    present = weights > 0
    has_loop = (present & looped).any(axis=1)
    n_r = np.zeros(len(weights), dtype=int)
    for value in np.unique(r):
        n_r += (present & (r == value)).any(axis=1)
    return has_loop & (n_r >= 2)


def refit_weighted(
    runs: RunTable,
    spec: LawSpec,
    weights: np.ndarray,
    x_hat: np.ndarray,
    *,
    delta: float = DELTA,
    n_spread: int = 4,
    seed: int | np.random.Generator = 0,
    n_jobs: int = 1,
    chunk_size: int = 100,
    progress: bool = False,
    desc: str = "refits",
) -> dict[str, np.ndarray]:
    """Refit the law to many weightings of one table (warm start from ``x_hat``).

    ``spec`` is the spec fitted (after :func:`phifit.fitters.common.effective_spec`);
    ``x_hat`` the free coordinates of the point estimate; ``weights`` (m, n_runs).
    Results are independent of ``n_jobs`` and ``chunk_size`` (starts are drawn up front).
    Returns arrays ``x`` (m, k), ``objective``, ``converged``, ``switched``, ``n_iter``,
    ``polished`` (finished by the least-squares polish, :func:`polish_unconverged`).
    """
    weights = np.asarray(weights, dtype=float)
    m = len(weights)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    spread = spread_starts(x_hat, spec, m, n_spread, rng)
    problem = RefitProblem(
        design=runs.design, y=runs.log_loss, fixed=dict(spec.fixed), bounds=dict(spec.bounds), delta=delta
    )
    chunks = [np.arange(i, min(i + chunk_size, m)) for i in range(0, m, chunk_size)]
    bar = progress_bar(m, desc, progress)
    outputs: list[dict[str, np.ndarray]] = []
    try:
        if n_jobs == 1 or len(chunks) == 1:
            for ch in chunks:
                outputs.append(refit_chunk(problem, weights[ch], x_hat, spread[ch]))
                bar.update(len(ch))
        else:
            from joblib import Parallel, delayed

            # processes, not threads: the LM's many small NumPy calls hold the GIL, so threads
            # barely overlap (CPU baseline, 1,000 replicates, 2 idle cores: threads 5.0 s, worker
            # processes 3.6 s with their start-up, 2.0 s once started; joblib keeps the workers
            # for later calls).  Results do not depend on the backend: starts are drawn up front.
            parallel = Parallel(n_jobs=n_jobs, return_as="generator", backend="loky")
            jobs = (delayed(refit_chunk)(problem, weights[ch], x_hat, spread[ch]) for ch in chunks)
            for ch, out in zip(chunks, parallel(jobs)):
                outputs.append(out)
                bar.update(len(ch))
    finally:
        bar.close()
    return {key: np.concatenate([o[key] for o in outputs]) for key in outputs[0]}


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str, progress: bool):
    """A tqdm bar on stderr; off when ``progress`` is False or stderr is not a terminal."""
    if not progress:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="rep", file=sys.stderr, disable=None, leave=False)
