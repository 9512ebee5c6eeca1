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
2. **Polish.**  The best few distinct end points are refined together by projected
   Newton steps with the objective's exact Hessian (:mod:`phifit.fitters.newton`), to the
   LM's stopping rule; those Newton does not finish, together by the active-set LM (the
   refits' finish); one that still does not converge is refined with
   ``scipy.optimize.least_squares(loss="huber", f_scale=delta)``, whose cost is
   exactly the summed Huber objective, at tight tolerances (the objective is ~1e-4
   and its gradients tiny, so default tolerances stop early in wrong basins).

The result reports how many starts reached the best basin.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..law import LawSpec, log_loss
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from .common import bound_hits, build_result, check_run_count, effective_spec
from .lm import batched_weighted_lm, finish_lm
from .newton import batched_newton
from .objective import DELTA, huber, law_model
from .options import HuberOptions, resolve_options
from .polish import polish
from .refit import FINISH_ITER
from .standard_errors import ASSUMPTION, m_estimator_stderr


def finish_candidates(
    candidates: list[np.ndarray], model: Any, spec: LawSpec, runs: RunTable, delta: float
) -> list[tuple[np.ndarray, float, bool, str]]:
    """(x, objective, converged, solver message) of each candidate end point, refined: all
    together by projected Newton steps with the exact Hessian
    (:func:`~phifit.fitters.newton.batched_newton`); the candidates Newton does not finish, all
    together by the active-set LM from where the first LM left them (as the refits' finish,
    :func:`~phifit.fitters.refit.polish_unconverged`, for up to its ``FINISH_ITER`` iterations);
    one that still does not converge by scipy's least-squares polish from where the first LM
    left it (:func:`~phifit.fitters.polish.polish`, converged when it meets a tolerance).
    The batched stages come first because one polish per candidate costs far more than a batch
    of steps shared by all: on a 12-run table's leave-one-budget-out fits
    (``benchmarks/report_speed_tables.py``'s table (c), 20 fits) 44 candidates went to the polish
    before the LM stage, and the ends with and without it lie within 1e-5 of each other (flat
    valleys; timings in docs/benchmarks.md, 'Figures once kept in docstrings')."""
    if not candidates:
        return []
    starts = np.array(candidates)
    newton = batched_newton(model, starts, runs.log_loss, 1.0, spec.lower, spec.upper, delta=delta)
    left = np.flatnonzero(~newton.converged)
    finish = None
    if len(left):
        finish = finish_lm(
            model,
            starts[left],
            runs.log_loss,
            1.0,
            spec.lower,
            spec.upper,
            delta=delta,
            max_iter=FINISH_ITER,
        )
    ends = []
    for j, start in enumerate(candidates):
        if newton.converged[j]:
            message = f"projected Newton: decrement within tolerance after {newton.n_iter[j]} iterations"
            ends.append((newton.x[j], float(newton.objective[j]), True, message))
            continue
        at = int(np.searchsorted(left, j))
        if finish is not None and finish.converged[at]:
            message = f"active-set LM: decrement within tolerance after {finish.n_iter[at]} iterations"
            ends.append((finish.x[at], float(finish.objective[at]), True, message))
            continue
        sol = polish(start, spec, runs.design, runs.log_loss, delta)
        objective = float(huber_objective(spec.full_theta(sol.x), runs, delta))
        ends.append((sol.x, objective, bool(sol.status > 0), str(sol.message)))
    return ends


def huber_objective(theta: np.ndarray, runs: RunTable, delta: float = DELTA) -> np.ndarray:
    """Sum over runs of Huber_delta(log L_hat - log L); theta may be (6,) or (S, 6)."""
    return huber(log_loss(theta, runs.design) - runs.log_loss, delta).sum(axis=-1)


def fit_huber(
    runs: RunTable | pd.DataFrame,
    *,
    spec: LawSpec | None = None,
    options: HuberOptions | None = None,
    **settings: Any,
) -> FitResult:
    """Fit the joint law by the summed Huber objective on log-loss (reference method).

    Parameters
    ----------
    runs
        Run table (a :class:`RunTable`, or a DataFrame validated like a run CSV).
    spec
        Which parameters vary (default: all six) and the box.
    options, settings
        Number of starts, seed, delta, iteration limits: a :class:`HuberOptions`, or its
        fields as keywords (``fit_huber(runs, n_starts=200, seed=1)``), as every fitter takes
        them; an unknown name raises ``ValueError`` listing the valid ones.

    Returns
    -------
    FitResult with ``extras``: ``n_starts``, ``n_refined`` (starts carried past the
    exploration stage), ``n_starts_at_best`` (refined starts whose vectorised end point
    is within ``basin_rtol`` of the best objective), ``delta``, ``solver_message``.
    """
    options = resolve_options("huber", options, settings)
    runs = as_runs(runs)
    spec = spec or LawSpec()
    fit_spec, warnings = effective_spec(runs, spec)
    warnings += check_run_count(runs, fit_spec, source="huber")
    rng = np.random.default_rng(options.seed)
    lo, hi = fit_spec.lower, fit_spec.upper
    starts = lo + (hi - lo) * rng.random((options.n_starts, len(lo)))
    model, y = law_model(fit_spec, runs.design), runs.log_loss

    def descend(x0: np.ndarray, iterations: int, **prune: Any) -> tuple[np.ndarray, np.ndarray]:
        end = batched_weighted_lm(
            model, x0, y, 1.0, lo, hi, delta=options.delta, max_iter=iterations, **prune
        )
        return end.x, end.objective

    x_mid, obj_mid = descend(
        starts,
        options.explore_iter,
        prune_after=options.prune_after,
        prune_keep=options.n_refine,
        prune_ratio=options.prune_ratio,
    )
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
    ends = finish_candidates(candidates, model, fit_spec, runs, options.delta)
    if not ends:
        raise RuntimeError("no start produced a finite objective; check the run table")
    best_x, _, best_converged, message = min(ends, key=lambda end: end[1])
    theta = fit_spec.full_theta(best_x)
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
    phi_identified = "phi" not in fit_spec.fixed or "phi" in spec.fixed
    stderr = m_estimator_stderr(runs, fit_spec, theta, options.delta, at_bounds=bound_hits(best_x, fit_spec))
    if not phi_identified:
        stderr.pop("phi", None)
    return build_result(
        runs,
        fit_spec,
        theta,
        method="huber",
        loss="huber",
        delta=options.delta,
        objective=objective,
        objective_name=f"sum of Huber(delta={options.delta:g}) on log-loss residuals",
        converged=best_converged,
        warnings=warnings,
        phi_identified=phi_identified,
        stderr=stderr or None,
        extras={
            "stderr_method": f"Huber M-estimator sandwich ({ASSUMPTION})",
            "n_starts": options.n_starts,
            "n_refined": int(len(keep)),
            "n_starts_at_best": n_at_best,
            "delta": options.delta,
            "seed": options.seed,
            "solver_message": message,
            "n_polished": len(candidates),
        },
    )
