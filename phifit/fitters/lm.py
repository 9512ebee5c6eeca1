"""Batched projected Levenberg-Marquardt: many (start, weighting) rows of the objective at once.

For every row s it minimises F_s(x) = sum_i w_si rho(f_i(x) - y_si) inside a box (the
objective of :mod:`phifit.fitters.objective`; ``model`` gives f and its Jacobian).  The rows
share nothing but the model: each has its own weights (and optionally its own responses), its
own damping and its own stopping rule, and leaves the computation when it stops.  What a row
carries between iterations is named in :class:`LMRows`.

:func:`batched_weighted_lm` documents the step, the damping rule, the switch of curvature and
the convergence test.  The point fits (:mod:`phifit.fitters.huber`, :mod:`phifit.fitters.lsq`,
:mod:`phifit.fitters.per_recipe_phi`), the refits (:mod:`phifit.fitters.refit`), the wild
bootstrap and the profiles all run through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .objective import DELTA, irls_weights, loss_terms

#: Jacobian bytes per block of rows in :func:`batched_weighted_lm`: about one core's L2
#: cache, so a block's Jacobian stays in the cache while the block's rows are solved; blocks
#: much larger than the cache do not help (``benchmarks/fit_large.py``; docs/benchmarks.md,
#: 'Figures once kept in docstrings').
BLOCK_BYTES = 2**20

#: Largest damping: a row whose step fails even there is stuck.
MAX_DAMPING = 1e10


@dataclass(frozen=True)
class BatchedLM:
    """End points of :func:`batched_weighted_lm`: one row per start.

    ``x`` (m, k) free coordinates, ``objective`` (m,) the weighted objective,
    ``converged`` (m,) the stopping rule held (see :func:`batched_weighted_lm`),
    ``n_iter`` (m,) iterations used, ``curvature`` (m,) the curvature c of the Gauss-Newton
    matrix each row ended with (1: still in the IRLS phase; ``near_curvature``: switched; None
    from a solver without phases): a finish that takes over a row goes on in its phase
    (:func:`finish_lm`).
    """

    x: np.ndarray
    objective: np.ndarray
    converged: np.ndarray
    n_iter: np.ndarray
    curvature: np.ndarray | None = None


@dataclass
class LMRows:
    """The state of the rows still iterating; entry j of every array belongs to one row.

    ``index`` (a,) the row's position among the m starts; ``x`` (a, k) its point;
    ``weights`` (a, n); ``y`` (a, n) per-row responses, or (n,) shared by every row;
    ``objective`` (a,) F at x; ``grad`` (a, k) and ``hess`` (a, k, k) the gradient and the
    Gauss-Newton matrix at x; ``damping`` (a,) lambda; ``curvature`` (a,) c of the
    Gauss-Newton matrix (1, then ``near_curvature``); ``floor`` (a,) the absolute part of the
    stopping threshold; ``decrement`` (a,) the last Newton decrement solved and ``singular``
    (a,) whether its system was singular; ``stale`` (a,) x, grad or H changed since then.
    With geodesic acceleration also, at x: ``pred`` (a, n) the predictions, ``jac`` (a, k, n)
    the transposed Jacobian and ``wo`` (a, n) the weights w_i omega_i of H (None without it).
    """

    index: np.ndarray
    x: np.ndarray
    weights: np.ndarray
    y: np.ndarray
    objective: np.ndarray
    grad: np.ndarray
    hess: np.ndarray
    damping: np.ndarray
    curvature: np.ndarray
    floor: np.ndarray
    decrement: np.ndarray
    singular: np.ndarray
    stale: np.ndarray
    pred: np.ndarray | None = None
    jac: np.ndarray | None = None
    wo: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.index)

    @property
    def per_row_y(self) -> bool:
        """True when every row has its own responses."""
        return self.y.ndim == 2

    def y_of(self, rows: np.ndarray | slice) -> np.ndarray:
        """The responses of ``rows`` (the shared vector when there is one)."""
        return self.y[rows] if self.y.ndim == 2 else self.y

    def take(self, keep: np.ndarray) -> LMRows:
        """The rows ``keep`` (a boolean mask or an index array) of every per-row array (rows that
        stop leave the state); shared responses stay as they are."""
        return LMRows(
            index=self.index[keep],
            x=self.x[keep],
            weights=self.weights[keep],
            y=self.y_of(keep),
            objective=self.objective[keep],
            grad=self.grad[keep],
            hess=self.hess[keep],
            damping=self.damping[keep],
            curvature=self.curvature[keep],
            floor=self.floor[keep],
            decrement=self.decrement[keep],
            singular=self.singular[keep],
            stale=self.stale[keep],
            pred=None if self.pred is None else self.pred[keep],
            jac=None if self.jac is None else self.jac[keep],
            wo=None if self.wo is None else self.wo[keep],
        )


class _Evaluation:
    """F, grad F and the Gauss-Newton matrix of blocks of rows (see :func:`batched_weighted_lm`).

    ``model.forward`` / ``model.jacobian`` (when the model has them, as
    :func:`~phifit.fitters.objective.law_model` does) split an evaluation in two, so a trial
    point that is rejected costs the predictions only.  The (rows, k, n) arrays of a block live
    in two buffers reused every iteration: fresh ones of that size cost page faults on every
    first touch.
    """

    def __init__(self, model: Callable, delta: float, k: int, n_runs: int, block_bytes: int):
        self.delta = delta
        self.k, self.n_runs = k, n_runs
        self.block = max(1, int(block_bytes) // (8 * k * max(n_runs, 1)))
        self.forward = getattr(model, "forward", None)
        self.jacobian = getattr(model, "jacobian", None)
        if self.forward is None or self.jacobian is None:

            def forward(xs):
                pred, jac_t = model(xs)
                return pred, (jac_t,)

            def jacobian(parts, out=None):
                return parts[0]

            self.forward, self.jacobian = forward, jacobian
        self.buffers: list[np.ndarray] = [np.empty(0), np.empty(0)]

    def buffer(self, i: int, rows: int) -> np.ndarray:
        """Buffer ``i`` viewed as (rows, k, n)."""
        size = rows * self.k * self.n_runs
        if self.buffers[i].size < size:
            self.buffers[i] = np.empty(size)
        return self.buffers[i][:size].reshape(rows, self.k, self.n_runs)

    def derivatives(
        self, jac_t: np.ndarray, ws: np.ndarray, res: np.ndarray, curv: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """g = sum_i w_i psi(res_i) J_i and H = sum_i w_i omega_i J_i J_i^T (omega with curvature
        ``curv``: :func:`~phifit.fitters.objective.irls_weights`)."""
        grad, hess, _ = self.derivatives_and_weights(jac_t, ws, res, curv)
        return grad, hess

    def derivatives_and_weights(
        self, jac_t: np.ndarray, ws: np.ndarray, res: np.ndarray, curv: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`derivatives` and the weights w_i omega_i of H (the geodesic acceleration's)."""
        psi, omega = irls_weights(res, self.delta, curv)
        grad = np.matmul(jac_t, (ws * psi)[..., None])[..., 0]
        wo = ws * omega
        if wo.shape != res.shape:  # least squares: omega = 1 and ws shared
            wo = np.broadcast_to(wo, res.shape)
        scaled = np.multiply(jac_t, wo[..., None, :], out=self.buffer(1, len(jac_t)))
        hess = np.matmul(scaled, np.swapaxes(jac_t, -1, -2))
        return grad, hess, wo

    def local(
        self, xs: np.ndarray, ws: np.ndarray, ys: np.ndarray, curv: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(predictions, transposed Jacobian, w_i omega_i) at the points ``xs``: what the
        geodesic acceleration of :func:`geodesic_correction` needs of a row's current point."""
        pred, parts = self.forward(xs)
        jac_t = np.array(self.jacobian(parts), copy=True)
        _, omega = irls_weights(pred - ys, self.delta, curv)
        return pred, jac_t, np.broadcast_to(ws * omega, pred.shape).copy()

    def _block(
        self, xs: np.ndarray, ws: np.ndarray, ys: np.ndarray, curv: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pred, parts = self.forward(xs)
        res = pred - ys
        obj = (ws * loss_terms(res, self.delta)).sum(-1)
        return (obj, *self.derivatives(self.jacobian(parts), ws, res, curv))

    def evaluate(
        self, xs: np.ndarray, ws: np.ndarray, ys: np.ndarray, curv: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(F, g, H) at the points ``xs`` (rows, k), block by block."""
        rows, k, per_row_y = len(xs), self.k, ys.ndim == 2
        if rows <= self.block:
            return self._block(xs, ws, ys, curv)
        obj, grad, hess = np.empty(rows), np.empty((rows, k)), np.empty((rows, k, k))
        for s in range(0, rows, self.block):
            part = slice(s, s + self.block)
            y_part = ys[part] if per_row_y else ys
            obj[part], grad[part], hess[part] = self._block(xs[part], ws[part], y_part, curv[part])
        return obj, grad, hess

    def trial(self, x_new: np.ndarray, state: LMRows) -> tuple[np.ndarray, np.ndarray]:
        """F at the trial points ``x_new`` of the rows of ``state``, and where it is lower than
        theirs (``better``).  For those rows g and H at ``x_new`` are written into
        ``state.grad`` and ``state.hess``; the Jacobian of the other rows is never computed."""
        rows = len(x_new)
        obj = np.empty(rows)
        better = np.empty(rows, dtype=bool)
        ws, curv = state.weights, state.curvature
        for s in range(0, rows, self.block):
            part = slice(s, s + self.block)
            pred, parts = self.forward(x_new[part])
            res = pred - state.y_of(part)
            obj[part] = obj_part = (ws[part] * loss_terms(res, self.delta)).sum(-1)
            ok = np.isfinite(obj_part) & (obj_part < state.objective[part])
            better[part] = ok
            if ok.all():
                at, ok_parts, ok_res, ok_pred = part, parts, res, pred
            elif ok.any():
                at = np.flatnonzero(ok) + s
                ok_parts, ok_res, ok_pred = tuple(p[ok] for p in parts), res[ok], pred[ok]
            else:
                continue
            jac_t = self.jacobian(ok_parts, self.buffer(0, len(ok_res)))
            if state.jac is None:
                state.grad[at], state.hess[at] = self.derivatives(jac_t, ws[at], ok_res, curv[at])
            else:  # the geodesic acceleration's local model of the row, too
                state.grad[at], state.hess[at], state.wo[at] = self.derivatives_and_weights(
                    jac_t, ws[at], ok_res, curv[at]
                )
                state.pred[at], state.jac[at] = ok_pred, jac_t
        return obj, better


def projected(
    x: np.ndarray,
    grad: np.ndarray,
    hess: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    active_set: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """(g_p, H_p): the gradient with its components pushing out of the box at an active bound
    set to 0; with ``active_set`` also H with those coordinates' rows and columns zeroed and
    their diagonal set to 1 (otherwise H itself)."""
    at_bound = ((x <= lower) & (grad > 0)) | ((x >= upper) & (grad < 0))
    gp = np.where(at_bound, 0.0, grad)
    if not active_set or not at_bound.any():
        return gp, hess
    free = ~at_bound
    hp = hess * (free[:, :, None] & free[:, None, :])
    hp += at_bound[:, :, None] * _eye(x.shape[1])
    return gp, hp


@lru_cache(maxsize=8)
def _eye(k: int) -> np.ndarray:
    """The k x k identity, made once per k (read-only: it is shared)."""
    eye = np.eye(k)
    eye.flags.writeable = False
    return eye


# The solvers (this module and phifit.fitters.newton) call NumPy's public np.linalg.solve, np.clip and
# np.linalg.norm: no measured reason keeps a shortcut (benchmarks/lm_public_calls.py; docs/benchmarks.md,
# "Public NumPy calls in the solver").


def newton_decrement(gp: np.ndarray, hess: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row |g_p^T (H + reg)^-1 g_p| / 2, reg = (1e-12 max diag H + 1e-300) I, and whether
    its system is singular (the decrement is NaN then)."""
    diag = np.einsum("skk->sk", hess)
    reg = hess + (1e-12 * diag.max(-1) + 1e-300)[:, None, None] * _eye(hess.shape[-1])
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


def diagonal_decrement(gp: np.ndarray, hess: np.ndarray) -> np.ndarray:
    """The decrement with diag(H) in place of H: |sum_j g_j^2 / H_jj| / 2 per row."""
    diag = np.einsum("skk->sk", hess)
    sol = gp / np.maximum(diag, 1e-300)
    return 0.5 * np.abs(np.einsum("sk,sk->s", gp, sol))


#: Floor of the damping's scale, relative to the row's largest diagonal entry of H: machine
#: epsilon, below which a coordinate's curvature does not change that entry's floating-point
#: value (see :func:`damping_scale`).
DAMPING_FLOOR = float(np.finfo(float).eps)


def damping_scale(diag: np.ndarray) -> np.ndarray:
    """D_j = max(H_jj, ``DAMPING_FLOOR`` * max_i H_ii) per row: Marquardt's diag(H), floored.

    A coordinate whose Jacobian column has all but vanished (log A at its lower bound with
    alpha at its upper one: A N^-alpha ~ 1e-20, far below the rounding of the loss) has
    H_jj ~ 1e-40 and a gradient of rounding size; with D = diag(H) its damped step
    g_j / (H_jj (1 + lambda)) stays ~1e16 at every lambda, is clipped to the far bound and
    rejected, so the row cannot move the coordinates that still matter (log E stays where it is,
    2-15% above its optimum, measured on a 10-run table's wild refits).  The floor makes the
    damping reach such a coordinate; it changes nothing where every H_jj is above it.  A higher
    floor (1e-12) also damped the near-dead coordinates of random starts, whose clipped jumps
    revive the power term, and fewer of a multi-start fit's starts reached the optimum (1 of
    32 refined starts against 3-4 on a 117-run table with 50 starts)."""
    return np.maximum(diag, DAMPING_FLOOR * diag.max(-1, keepdims=True))


#: Geodesic acceleration (:func:`geodesic_correction`): the finite-difference step h, as a
#: fraction of the LM step, and the largest ratio 2 |a| / |v| of a correction that is used
#: (the values of Transtrum & Sethna 2012, arXiv:1201.5885, section 4).
GEODESIC_H = 0.1
GEODESIC_ALPHA = 0.75


def geodesic_correction(
    ev: _Evaluation,
    rows: LMRows,
    step: np.ndarray,
    hess: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    frozen: np.ndarray | None,
    system: DampedSystem | None = None,
) -> np.ndarray:
    """Half the geodesic acceleration a of the LM step v = ``step`` per row (Transtrum, Machta &
    Sethna 2011, Phys. Rev. E 83, 036701; Transtrum & Sethna 2012, arXiv:1201.5885): the
    second-order term that bends a step along a curved valley of the objective,

        (H + lam D) a = -sum_i w_i omega_i r''_i J_i,
        r''_i = (2 / h) ((f_i(x + h v) - f_i(x)) / h - J_i^T v)   (h = ``GEODESIC_H``),

    r'' the second directional derivative of the predictions along v by finite differences
    (one more evaluation of the model per iteration), H, D, lam and omega those of the step
    itself (``hess``, ``rows.damping``, ``rows.wo``).  The proposal is then v + a / 2.  A
    correction is used only where 2 |a|_D / |v|_D <= ``GEODESIC_ALPHA`` (|u|_D^2 = sum_j D_j
    u_j^2): beyond it the second-order model of the path is not trusted and the row takes v
    alone.  Coordinates ``frozen`` (the active set: at a bound, pushed out of the box) get no
    correction.  ``system``: the step's own :func:`damped_system` (the correction solves the
    same matrix; made here when not given)."""
    if system is None:
        system = damped_system(hess, rows.damping)
    x_h = np.clip(rows.x + GEODESIC_H * step, lower, upper)
    pred_h, _ = ev.forward(x_h)
    moved = (x_h - rows.x) / GEODESIC_H
    along = np.matmul(np.swapaxes(rows.jac, -1, -2), moved[..., None])[..., 0]
    second = (2.0 / GEODESIC_H) * ((pred_h - rows.pred) / GEODESIC_H - along)
    pull = np.matmul(rows.jac, (rows.wo * second)[..., None])[..., 0]
    if frozen is not None:
        pull = np.where(frozen, 0.0, pull)
    accel = solve_damped(system, pull)
    floored = system.scale if system.finite else damping_scale(np.einsum("skk->sk", hess))
    scale = np.sqrt(floored)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = 2.0 * np.linalg.norm(accel * scale, axis=1) / np.linalg.norm(step * scale, axis=1)
    use = np.isfinite(ratio) & (ratio <= GEODESIC_ALPHA) & np.isfinite(accel).all(-1)
    return np.where(use[:, None], 0.5 * accel, 0.0)


@dataclass(frozen=True)
class DampedSystem:
    """The matrices H + lambda D + 1e-300 I of a batch of LM steps (:func:`damped_system`):
    ``matrix`` (s, k, k); ``scale`` (s, k) D, the floored diagonal of H (its raw diagonal where
    some entry is not finite: ``finite`` False), which a failed solve divides by."""

    matrix: np.ndarray
    scale: np.ndarray
    finite: bool


def damped_system(hess: np.ndarray, damping: np.ndarray) -> DampedSystem:
    """H + lambda D + 1e-300 I per row, D the floored diagonal of H (:func:`damping_scale`), or
    D = diag(H) where some diagonal entry is not finite."""
    k = hess.shape[-1]
    diag = np.einsum("skk->sk", hess)
    if np.isfinite(diag).all():
        scale = damping_scale(diag)
        # adding to the diagonal only: the same numbers as the sum of the full matrices
        # (off the diagonal that adds zeros)
        damped = hess.copy()
        on_diag = damped.reshape(len(damped), k * k)[:, :: k + 1]
        on_diag += damping[:, None] * scale
        on_diag += 1e-300
        return DampedSystem(damped, scale, True)
    eye = _eye(k)
    damped = hess + damping[:, None, None] * (diag[:, :, None] * eye) + 1e-300 * eye
    return DampedSystem(damped, diag, False)


def solve_damped(system: DampedSystem, grad: np.ndarray) -> np.ndarray:
    """The step solving ``system`` step = -g per row; where the stacked solve fails (a singular
    system), step = -g / D for every row; non-finite components 0."""
    try:
        step = np.linalg.solve(system.matrix, -grad[..., None])[..., 0]
    except np.linalg.LinAlgError:
        step = -grad / np.maximum(system.scale, 1e-300)
    return np.where(np.isfinite(step), step, 0.0)


def damped_step(grad: np.ndarray, hess: np.ndarray, damping: np.ndarray) -> np.ndarray:
    """The LM step solving (H + lambda D + 1e-300 I) step = -g per row, D the floored diagonal of
    H (:func:`damping_scale`); where the stacked solve fails (a singular system),
    step = -g / D for every row; non-finite components 0."""
    return solve_damped(damped_system(hess, damping), grad)


def checked_rows(
    x0: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray | float,
    lower: np.ndarray,
    upper: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The inputs of a batched solver as float arrays: the starts (m, k) copied and clipped to
    the box, ``y`` (n,) or (m, n), the weights broadcast to (m, n), the box (k,) each;
    ``ValueError`` when ``y`` has another number of rows than the starts or the box another
    width than k."""
    x = np.array(x0, dtype=float, copy=True)
    m, k = x.shape
    y = np.asarray(y, dtype=float)
    if y.ndim == 2 and y.shape[0] != m:
        raise ValueError(f"y has {y.shape[0]} rows for {m} starts")
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    if lower.shape != (k,) or upper.shape != (k,):
        raise ValueError(
            f"the box has {lower.shape} lower and {upper.shape} upper bounds for {k} coordinates"
        )
    x = np.clip(x, lower, upper)
    weights = np.broadcast_to(np.asarray(weights, dtype=float), (m, y.shape[-1]))
    return x, y, weights, lower, upper


def batched_weighted_lm(
    model: Callable,
    x0: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray | float,
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
    geodesic: bool = False,
    start_near: bool = False,
    block_bytes: int = BLOCK_BYTES,
    prune_after: int | None = None,
    prune_keep: int = 1,
    prune_ratio: float = np.inf,
) -> BatchedLM:
    """Projected Levenberg-Marquardt on many (start, weighting) pairs at once.

    Minimises, separately for every row s, inside the box [lower, upper],

        F_s(x) = sum_i w_si rho(f_i(x) - y_si)     (rho: Huber_delta; delta = inf: r^2 / 2)

    ``y`` is one response vector (n,) shared by every row, or one per row (m, n) (the
    wild bootstrap refits many responses at once).  ``model(x)`` maps x (m, k) to predictions
    (m, n) and their *transposed* Jacobian (m, k, n); k, the number of free coordinates, is
    the width of ``x0`` (for the law: ``spec.free_mask.sum()``).  Each iteration solves

        (H + lam D) step = -g,   g = sum_i w_i psi(res_i) J_i,
        H = sum_i w_i omega_i J_i J_i^T,
        omega_i = 1 if |res_i| <= delta else c * delta / |res_i|,
        D = diag(max(H_jj, eps max_i H_ii))  (eps: machine epsilon; :func:`damping_scale`),

    clips x + step to the box and accepts it only if F decreases.  Damping rule, per row:
    lam starts at 1e-3; an accepted step divides it by 5 (down to 1e-12), a rejected one
    multiplies it by 10 (up to 1e10).  c = 1 is the IRLS (reweighted Gauss-Newton) matrix,
    robust far from a minimum but only linearly convergent, because most residuals of a scaling
    fit lie in Huber's linear zone.  Once a row's predicted decrease falls below
    ``switch_rtol * F`` (or its damping reaches 1e10) it switches, once, to c =
    ``near_curvature`` (close to the true Gauss-Newton Hessian of the Huber loss, whose linear
    zone has zero curvature) with lam reset to 1e-3, which converges in a few steps once the
    set of inner residuals has settled.

    Convergence test: a row stops as ``converged`` once the predicted decrease of the projected
    gradient g_p (components pushing out of the box at an active bound set to 0),
    g_p^T H^-1 g_p / 2, is below ``tol * F + atol * sum_i w_i`` (relative: the objective
    is ~1e-4 and its gradients tiny; the small absolute part only matters for an exact,
    noise-free fit, F ~ 0).  It stops unconverged when no step improves F even at maximal
    damping (lam = 1e10) while the predicted decrease is still above 1e3 times that
    threshold, or after ``max_iter`` iterations.  Rows leave the computation as they stop
    (:meth:`LMRows.take`), so the cost falls as they finish.  When some row's system is
    singular, every row of that iteration uses the decrement with diag(H) for H.

    ``active_set=True`` (the finish of :func:`phifit.fitters.refit.polish_unconverged`) drops
    the active coordinates (at a bound, gradient pushing out of the box) from the linear system
    as well: their rows and columns of H are zeroed and their diagonal set to 1, so their
    step is 0 and the free coordinates take the step of the reduced problem
    H_ff step_f = -g_f (projected Newton) instead of a full step that clipping then
    distorts; the decrement becomes g_f^T H_ff^-1 g_f / 2, the reduced problem's own.
    Without it, a row whose optimum has log E at its bound keeps pushing E outward, its
    clipped steps barely improve F, and its decrement, measured with the inverse of the
    full H (which is >= H_ff^-1 on the free block), never falls below the threshold.

    ``geodesic=True`` adds to each step its geodesic acceleration (:func:`geodesic_correction`:
    the second-order term that bends the step along a curved valley, at one more evaluation of
    the predictions per iteration), and ``start_near=True`` starts every row at c =
    ``near_curvature`` (a finish that takes over from another LM, whose IRLS phase is behind
    it).  Both are for the finishes of rows that crawl: a small table's objective is nearly
    piecewise linear (most residuals beyond Huber's delta), its valleys are curved lines where
    the few residuals inside delta stay put, and a straight step leaves such a line after a
    fraction of its length.  Replayed on the finishes of whole reports (every active-set call
    with and without), the finishes take less time and converge at least as many rows
    (docs/benchmarks.md, 'Geodesic finishes' and 'Figures once kept in docstrings').

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

    Kept as one function (about 125 lines of body below this docstring): every iteration updates
    the same arrays (x, F, lam, the curvature switch, the shrinking set of running rows) in one loop
    whose order is the algorithm above; helpers would pass a dozen of them back and forth.
    """
    x, y, weights, lower, upper = checked_rows(x0, y, weights, lower, upper)
    m, k = x.shape
    n_runs = y.shape[-1]
    ev = _Evaluation(model, delta, k, n_runs, block_bytes)

    curv = np.full(m, near_curvature if start_near else 1.0)
    obj, grad, hess = ev.evaluate(x, weights, y, curv)
    converged = np.zeros(m, dtype=bool)
    n_iter = np.full(m, max_iter)
    finite = np.isfinite(obj)
    n_iter[~finite] = 0
    idx = np.flatnonzero(finite)
    # The decrement of a row depends on its x, gradient and H only, which change where a step
    # is accepted (or the curvature switched): it is recomputed there ("stale") and kept
    # elsewhere.
    rows = LMRows(
        index=idx,
        x=x[idx],
        weights=weights[idx],
        y=y[idx] if y.ndim == 2 else y,
        objective=obj[idx],
        grad=grad[idx],
        hess=hess[idx],
        damping=np.full(len(idx), 1e-3),
        curvature=curv[idx],
        floor=(atol * weights.sum(-1))[idx],
        decrement=np.zeros(len(idx)),
        singular=np.zeros(len(idx), dtype=bool),
        stale=np.ones(len(idx), dtype=bool),
    )
    if geodesic and len(idx):
        rows.pred, rows.jac, rows.wo = ev.local(rows.x, rows.weights, rows.y_of(slice(None)), rows.curvature)

    def leave(stop: np.ndarray, it: int) -> None:
        """Record the end points of the rows ``stop`` (they leave the state after this)."""
        at = rows.index[stop]
        x[at], obj[at], n_iter[at] = rows.x[stop], rows.objective[stop], it
        curv[at] = rows.curvature[stop]

    for it in range(max_iter):
        if len(rows) == 0:
            break
        if it == prune_after and m > prune_keep >= 1:
            current = obj.copy()
            current[rows.index] = rows.objective
            current = np.where(np.isfinite(current), current, np.inf)
            kth = np.partition(current, prune_keep - 1)[prune_keep - 1]
            keep = rows.objective <= prune_ratio * kth
            if not keep.all():
                leave(~keep, it)
                rows = rows.take(keep)
        if active_set:
            gp_all, hp_all = projected(rows.x, rows.grad, rows.hess, lower, upper, True)
            if rows.stale.all():
                rows.decrement, rows.singular = newton_decrement(gp_all, hp_all)
            elif rows.stale.any():
                st = rows.stale
                rows.decrement[st], rows.singular[st] = newton_decrement(gp_all[st], hp_all[st])
        elif rows.stale.all():
            rows.decrement, rows.singular = newton_decrement(
                *projected(rows.x, rows.grad, rows.hess, lower, upper, False)
            )
        elif rows.stale.any():
            st = rows.stale
            rows.decrement[st], rows.singular[st] = newton_decrement(
                *projected(rows.x[st], rows.grad[st], rows.hess[st], lower, upper, False)
            )
        rows.stale[:] = False
        if rows.singular.any():
            # as one solve over all rows would: every row takes the diagonal decrement
            gp_hp = (
                (gp_all, hp_all)
                if active_set
                else projected(rows.x, rows.grad, rows.hess, lower, upper, False)
            )
            dec = diagonal_decrement(*gp_hp)
        else:
            dec = rows.decrement
        threshold = tol * rows.objective + rows.floor
        near = dec <= threshold
        switch = (rows.curvature > near_curvature) & (
            (dec <= switch_rtol * rows.objective) | (rows.damping >= MAX_DAMPING)
        )
        near &= ~switch
        stuck = (rows.damping >= MAX_DAMPING) & ~switch
        done = near | (stuck & (dec <= 1e3 * threshold))
        stop = done | stuck
        if stop.any():
            leave(stop, it)
            converged[rows.index[done]] = True
            keep = ~stop
            rows, switch = rows.take(keep), switch[keep]
            if active_set:
                gp_all, hp_all = gp_all[keep], hp_all[keep]
            if len(rows) == 0:
                break
        if switch.any():
            rows.curvature[switch] = near_curvature
            rows.damping[switch] = 1e-3
            _, rows.grad[switch], rows.hess[switch] = ev.evaluate(
                rows.x[switch], rows.weights[switch], rows.y_of(switch), rows.curvature[switch]
            )
            rows.stale |= switch
            if geodesic:  # omega changes with the curvature
                rows.wo[switch] = ev.local(
                    rows.x[switch], rows.weights[switch], rows.y_of(switch), rows.curvature[switch]
                )[2]
            if active_set:
                gp_all, hp_all = projected(rows.x, rows.grad, rows.hess, lower, upper, True)
        g_step, h_step = (gp_all, hp_all) if active_set else (rows.grad, rows.hess)
        system = damped_system(h_step, rows.damping)
        step = solve_damped(system, g_step)
        if geodesic:
            frozen = (g_step == 0.0) & (rows.grad != 0.0) if active_set else None
            step = step + geodesic_correction(ev, rows, step, h_step, lower, upper, frozen, system)
        x_new = np.clip(rows.x + step, lower, upper)
        obj_new, better = ev.trial(x_new, rows)
        rows.x[better], rows.objective[better] = x_new[better], obj_new[better]
        rows.stale |= better
        rows.damping = np.where(
            better, np.maximum(rows.damping * 0.2, 1e-12), np.minimum(rows.damping * 10.0, MAX_DAMPING)
        )
    x[rows.index], obj[rows.index], curv[rows.index] = rows.x, rows.objective, rows.curvature
    return BatchedLM(x=x, objective=obj, converged=converged, n_iter=n_iter, curvature=curv)


def finish_lm(
    model: Callable,
    x0: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray | float,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    delta: float = DELTA,
    max_iter: int = 300,
) -> BatchedLM:
    """The finish of rows another LM left unconverged, from where it left them:
    :func:`batched_weighted_lm` with the active set and the geodesic acceleration, first from the
    near curvature (``active_set``, ``geodesic``, ``start_near``: see there); the rows that does
    not converge run again from their start in the IRLS phase (c = 1, switching as usual), and
    each row keeps the second end where it is lower, or converged at an objective no higher
    (to a relative 1e-9).

    Why both: on a small table's crawling wild refits the near curvature converged where the
    IRLS phase crept (a 12-run table's report: docs/benchmarks.md, 'Figures once kept in
    docstrings'), while a recipe bootstrap's replicate with log A near 22 and alpha and log E at
    their bounds converged in 146 iterations from the IRLS phase and needed 11,000 from the near
    curvature.  Every finish of the package (the bootstrap's, the wild tests', the point fit's
    candidates', the grouped laws', the test-inverted set's) runs through it."""
    kw = {"delta": delta, "max_iter": max_iter, "active_set": True, "geodesic": True}
    end = batched_weighted_lm(model, x0, y, weights, lower, upper, start_near=True, **kw)
    left = np.flatnonzero(~end.converged & np.isfinite(end.objective))
    if len(left) == 0:
        return end
    y_left = y[left] if np.ndim(y) == 2 else y
    w_left = weights[left] if np.ndim(weights) == 2 else weights
    again = batched_weighted_lm(model, np.asarray(x0)[left], y_left, w_left, lower, upper, **kw)
    # never a higher objective (beyond rounding): a converged end elsewhere does not replace a lower one
    finite = np.isfinite(again.objective)
    take = finite & (
        (again.objective < end.objective[left])
        | (again.converged & (again.objective <= end.objective[left] * (1 + 1e-9)))
    )
    x, obj, converged = end.x.copy(), end.objective.copy(), end.converged.copy()
    n_iter, curvature = end.n_iter + 0, end.curvature.copy()
    at = left[take]
    x[at], obj[at], converged[at] = again.x[take], again.objective[take], again.converged[take]
    n_iter[left] += again.n_iter
    curvature[at] = again.curvature[take]
    return BatchedLM(x=x, objective=obj, converged=converged, n_iter=n_iter, curvature=curvature)


def best_of_starts(
    model: Callable,
    starts: tuple[np.ndarray, ...],
    y: np.ndarray,
    weights: np.ndarray | float,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    delta: float = DELTA,
    max_iter: int = 300,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run :func:`batched_weighted_lm` on m rows from each start (k,) in ``starts`` (the same
    start for every row) and keep, per row, the end with the lowest objective (a later start
    replaces an earlier one only when lower by a relative 1e-12).  ``y`` (n,) or (m, n) and
    ``weights`` (m, n) or a scalar as :func:`batched_weighted_lm` takes them; m is the rows of
    whichever is per-row.  Returns x (m, k), objective (m,; inf where not finite), converged (m,)."""
    m = len(y) if np.ndim(y) == 2 else len(np.atleast_2d(weights))
    best_x = best_obj = best_conv = None
    for start in starts:
        x0 = np.tile(np.asarray(start, dtype=float), (m, 1))
        end = batched_weighted_lm(model, x0, y, weights, lower, upper, delta=delta, max_iter=max_iter)
        obj = np.where(np.isfinite(end.objective), end.objective, np.inf)
        if best_x is None:
            best_x, best_obj, best_conv = end.x.copy(), obj, end.converged.copy()
            continue
        better = obj < best_obj * (1 - 1e-12)
        best_x[better], best_obj[better] = end.x[better], obj[better]
        best_conv[better] = end.converged[better]
    return best_x, best_obj, best_conv


__all__ = [
    "BLOCK_BYTES",
    "BatchedLM",
    "LMRows",
    "batched_weighted_lm",
    "best_of_starts",
    "checked_rows",
    "damped_step",
    "damped_system",
    "finish_lm",
    "geodesic_correction",
    "newton_decrement",
    "solve_damped",
]
