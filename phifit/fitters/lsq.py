"""Nonlinear least squares on log-loss with lmfit: standard errors, correlations, profile CI.

Same law, parameterisation and box as the Huber fit (:mod:`phifit.fitters.huber`); only the
criterion differs:

    objective(theta) = sum_i (log L_hat_i(theta) - log L_i)^2        (lmfit's chi-square)

i.e. the Gaussian maximum-likelihood fit of log-loss with a common, unknown sigma.

Procedure:

1. **Multi-start.**  ``n_starts`` uniform starts in the box run together through the
   vectorised projected Levenberg-Marquardt of :func:`phifit.fitters.lm.batched_weighted_lm`
   with delta = inf (plain least squares); the best ``n_refine`` continue to convergence.
2. **lmfit.**  The best end point is refined with ``lmfit.Minimizer.least_squares``
   (scipy's trust-region reflective solver, box handled natively, analytic Jacobian).
3. **Uncertainty.**  Standard errors and correlations come from lmfit's covariance,
   cov = (J^T J)^-1 * chi^2 / (n - k) (scaled by the reduced chi-square, i.e. sigma is
   estimated from the residuals).  a, b, e are logs, so the natural parameters' errors
   use the delta method: se(A) = A se(a), se(B) = B se(b), se(E) = E se(e).
   The **profile interval for phi** is ``lmfit.conf_interval``: phi is stepped away from
   its optimum, the other parameters are refitted, and the interval ends are where the
   F-test of chi^2(phi) / chi^2_best reaches the level (95%):
   F.cdf((chi^2(phi) / chi^2_best - 1) (n - k), 1, n - k) = 0.95.

The covariance assumes the residuals are independent with one variance; with iso-FLOP
designs A and B are loosely identified and their standard errors large.
"""

from __future__ import annotations

import warnings as _warnings
from typing import Any

import numpy as np
import pandas as pd

from .. import defaults
from ..law import COORD_LABELS, THETA_NAMES, THETA_TO_PARAM, LawSpec, log_loss, log_loss_and_jacobian
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from .common import build_result, check_run_count, effective_spec
from .lm import batched_weighted_lm
from .objective import law_model
from .options import LsqOptions, resolve_options
from .standard_errors import ASSUMPTION

OBJECTIVE_NAME = "sum of squared log-loss residuals (lmfit chi-square)"


def _lmfit_params(spec: LawSpec, theta: np.ndarray):
    import lmfit

    params = lmfit.Parameters()
    for i, coord in enumerate(THETA_NAMES):
        lo, hi = spec.bounds[coord]
        vary = THETA_TO_PARAM[coord] not in spec.fixed
        value = float(np.clip(theta[i], lo, hi)) if vary else float(theta[i])
        params.add(coord, value=value, min=lo, max=hi, vary=vary)
    return params


def _theta_of(params) -> np.ndarray:
    return np.array([params[c].value for c in THETA_NAMES], dtype=float)


def fit_lsq(
    runs: RunTable | pd.DataFrame,
    *,
    spec: LawSpec | None = None,
    options: LsqOptions | None = None,
    **settings: Any,
) -> FitResult:
    """Least-squares fit of the joint law on log-loss with lmfit.

    Parameters
    ----------
    runs
        Run table (a :class:`RunTable`, or a DataFrame validated like a run CSV).
    spec
        Which parameters vary (default all six) and the box.
    options, settings
        An :class:`~phifit.fitters.options.LsqOptions` or its fields as keywords (as every
        fitter takes them): ``n_starts``, ``seed`` (uniform random starts in the box for the
        multi-start stage), ``n_refine`` (starts carried to convergence after a short
        exploration), ``profile`` (lmfit's profile-likelihood interval for phi,
        ``conf_interval``), ``level`` (of the profile interval).  An unknown name raises
        ``ValueError`` listing the valid ones.

    Returns
    -------
    FitResult with ``method="lsq"``, ``stderr`` (natural parameters, delta method) and
    ``extras``: ``correlation`` {coord: {coord: r}} over the free internal coordinates
    (a = log A, b = log B, e = log E), ``stderr_internal``, ``profile_ci`` {"phi": [lo, hi]}
    with ``profile_level``, ``sigma_log`` = sqrt(chi^2 / (n - k)), ``redchi``, ``nfev``,
    ``n_starts``, ``n_starts_at_best``.
    """
    opts = resolve_options("lsq", options, settings)
    n_starts, seed, n_refine = opts.n_starts, opts.seed, opts.n_refine
    profile, level = opts.profile, opts.level
    runs = as_runs(runs)
    if n_starts < 1:
        raise ValueError(f"n_starts must be >= 1, got {n_starts}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    spec = spec or LawSpec()
    fit_spec, notes = effective_spec(runs, spec)
    notes += check_run_count(runs, fit_spec, source="lsq")
    design, y = runs.design, runs.log_loss
    n = len(runs)
    free_coords = [c for c, f in zip(THETA_NAMES, fit_spec.free_mask) if f]
    best_start, start_objectives = _multistart_lm(fit_spec, design, y, n_starts, n_refine, seed)
    minimizer, out = _lmfit_refine(fit_spec, design, y, best_start)
    theta = _theta_of(out.params)
    chisqr = float(np.sum((log_loss(theta, design) - y) ** 2))
    nfree = n - len(free_coords)
    warnings = list(notes)
    stderr_internal, correlation, cov_warnings = _covariance_summary(out, free_coords)
    warnings += cov_warnings
    stderr = _natural_stderr(stderr_internal, theta)
    profile_ci: dict[str, list[float]] = {}
    if profile and "phi" in free_coords:
        profile_ci, ci_warnings = _phi_profile_ci(minimizer, out, chisqr, n, level, stderr_internal)
        warnings += ci_warnings
    extras: dict[str, Any] = {
        "n_starts": n_starts,
        "n_refined": int(len(start_objectives)),
        "n_starts_at_best": _n_starts_at_best(start_objectives, chisqr, n),
        "seed": seed,
        "nfev": int(out.nfev),
        "redchi": chisqr / nfree,
        "sigma_log": float(np.sqrt(chisqr / nfree)),
        "solver_message": str(out.message),
        "stderr_internal": stderr_internal,
        "correlation": correlation,
        "covariance_note": "lmfit covariance scaled by the reduced chi-square",
        "stderr_method": f"lmfit covariance scaled by the reduced chi-square ({ASSUMPTION})",
    }
    if profile_ci:
        extras["profile_ci"] = profile_ci
        extras["profile_level"] = level
        extras["profile_method"] = "lmfit.conf_interval (F-test on chi-square, others refitted)"
    return build_result(
        runs,
        fit_spec,
        theta,
        method="lsq",
        loss="squares",
        objective=chisqr,
        objective_name=OBJECTIVE_NAME,
        converged=bool(out.success),
        warnings=warnings,
        extras=extras,
        stderr=stderr,
        phi_identified="phi" not in fit_spec.fixed or "phi" in spec.fixed,
    )


def _multistart_lm(
    fit_spec: LawSpec, design: np.ndarray, y: np.ndarray, n_starts: int, n_refine: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(best end point, refined objectives): uniform starts, 20 LM steps, best ``n_refine`` to convergence."""
    lo, hi = fit_spec.lower, fit_spec.upper
    k = int(fit_spec.free_mask.sum())
    rng = np.random.default_rng(seed)
    starts = lo + (hi - lo) * rng.random((n_starts, k))
    model = law_model(fit_spec, design)
    ones = np.ones(len(y))
    explore = batched_weighted_lm(model, starts, y, ones, lo, hi, delta=np.inf, max_iter=20)
    order = np.argsort(np.where(np.isfinite(explore.objective), explore.objective, np.inf))
    keep = order[: max(1, min(n_refine, n_starts))]
    refine = batched_weighted_lm(model, explore.x[keep], y, ones, lo, hi, delta=np.inf, max_iter=300)
    if not np.isfinite(refine.objective).any():
        raise RuntimeError("no start produced a finite objective; check the run table")
    return refine.x[int(np.nanargmin(refine.objective))], refine.objective


def _lmfit_refine(fit_spec: LawSpec, design: np.ndarray, y: np.ndarray, start: np.ndarray) -> tuple[Any, Any]:
    """(Minimizer, result) of lmfit's least squares on log L_hat - log L from ``start``, analytic Jacobian."""
    import lmfit

    def residual(params):
        return log_loss(_theta_of(params), design) - y

    def jacobian(params):
        # columns of the parameters varying now (conf_interval holds phi fixed while profiling)
        vary = np.array([params[c].vary for c in THETA_NAMES])
        return log_loss_and_jacobian(_theta_of(params), design)[1][:, vary]

    params = _lmfit_params(fit_spec, fit_spec.full_theta(start))
    minimizer = lmfit.Minimizer(residual, params, Dfun=jacobian)
    out = minimizer.minimize(method="least_squares", ftol=1e-15, xtol=1e-15, gtol=1e-15)
    return minimizer, out


def _covariance_summary(
    out: Any, free_coords: list[str]
) -> tuple[dict[str, float], dict[str, dict[str, float]], list[str]]:
    """(SE per free coordinate, r_ij = cov_ij / (sd_i sd_j), warnings) from lmfit's covariance, if any."""
    stderr_internal: dict[str, float] = {}
    correlation: dict[str, dict[str, float]] = {}
    if out.covar is None or not out.errorbars:
        warning = (
            "lmfit could not estimate the covariance (singular J^T J or a parameter "
            "at a bound): no standard errors"
        )
        return stderr_internal, correlation, [warning]
    cov = np.asarray(out.covar)
    sd = np.sqrt(np.clip(np.diag(cov), 0, None))
    for i, c in enumerate(free_coords):
        stderr_internal[c] = float(sd[i])
        correlation[c] = {
            d: float(cov[i, j] / (sd[i] * sd[j])) if sd[i] > 0 and sd[j] > 0 else float("nan")
            for j, d in enumerate(free_coords)
        }
    return stderr_internal, correlation, []


def _natural_stderr(stderr_internal: dict[str, float], theta: np.ndarray) -> dict[str, float] | None:
    """Natural parameters' SEs by the delta method, se(A) = A se(a) for a, b, e (None: no SEs)."""
    if not stderr_internal:
        return None
    stderr: dict[str, float] = {}
    for c, se in stderr_internal.items():
        name = THETA_TO_PARAM[c]
        stderr[name] = float(np.exp(theta[THETA_NAMES.index(c)]) * se) if c in ("a", "b", "e") else se
    return stderr


def _phi_profile_ci(
    minimizer: Any, out: Any, chisqr: float, n: int, level: float, stderr_internal: dict[str, float]
) -> tuple[dict[str, list[float]], list[str]]:
    """({"phi": [lo, hi]} or {}, warnings): lmfit's profile interval (zero width if exact, none w/o SE)."""
    if chisqr <= 1e-24 * n:
        phi_hat = float(out.params["phi"].value)
        return {"phi": [phi_hat, phi_hat]}, [
            "the fit is exact (chi-square ~ 0): the profile interval of phi has zero width"
        ]
    if not stderr_internal.get("phi"):
        return {}, ["no profile interval for phi: lmfit needs a finite standard error to start the profile"]
    return _conf_interval_phi(minimizer, out, level)


def _conf_interval_phi(minimizer: Any, out: Any, level: float) -> tuple[dict[str, list[float]], list[str]]:
    """({"phi": [lo, hi]} or {}, warnings): F-test profile ends of phi at ``level`` by lmfit.conf_interval."""
    import lmfit

    profile_ci: dict[str, list[float]] = {}
    warnings: list[str] = []
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        try:
            ci = lmfit.conf_interval(minimizer, out, p_names=["phi"], sigmas=[level])
            rows = ci["phi"]
            lo_phi = next(v for p, v in rows if p == level and v <= out.params["phi"].value)
            hi_phi = next(v for p, v in reversed(rows) if p == level and v >= out.params["phi"].value)
            profile_ci["phi"] = [float(lo_phi), float(hi_phi)]
        except Exception as err:  # lmfit raises several kinds; report, don't crash
            warnings.append(f"profile interval for phi failed: {err}")
    for w in caught:
        warnings.append(f"lmfit conf_interval: {w.message}")
    if profile_ci and not np.all(np.isfinite(profile_ci["phi"])):
        warnings.append(f"the {level:.0%} profile interval of phi reaches the box bound: an end is infinite")
    return profile_ci, warnings


def _n_starts_at_best(start_objectives: np.ndarray, chisqr: float, n: int) -> int:
    """Refined starts that ended at the best chi-square: 2 F_i <= chi^2 + 1e-3 chi^2 + 1e-10 n."""
    tolerance = 1e-3 * chisqr + 1e-10 * n
    return int(np.sum(2 * start_objectives <= chisqr + tolerance))


def lsq_report(result: FitResult) -> str:
    """The least-squares extras as text: profile interval of phi and the correlations.

    Correlations are those of the fitted coordinates (log A, alpha, log B, beta, log E, phi).
    """
    ex = result.extras
    lines = [
        "[[Least squares (lmfit)]]",
        f"    sigma of log-loss residuals  {ex.get('sigma_log', float('nan')):.5g}"
        f"   ({ex.get('covariance_note', '')})",
    ]
    if "profile_ci" in ex:
        lo, hi = ex["profile_ci"]["phi"]
        lines.append(
            f"    profile-likelihood {ex.get('profile_level', defaults.LEVEL):.0%} interval for "
            f"phi: [{lo:.5g}, {hi:.5g}]   ({ex.get('profile_method', '')})"
        )
    corr = ex.get("correlation") or {}
    if corr:
        names = list(corr)
        lines.append("    correlations:  " + "".join(f"{COORD_LABELS[n]:>8}" for n in names))
        for r in names:
            lines.append(
                f"    {COORD_LABELS[r]:>13}  "
                + "".join(f"{corr[r][c]:>8.3f}" if corr[r][c] is not None else f"{'':>8}" for c in names)
            )
    return "\n".join(lines)


__all__ = ["fit_lsq", "lsq_report", "OBJECTIVE_NAME"]
