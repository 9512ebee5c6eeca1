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
    import lmfit

    runs = as_runs(runs)
    if n_starts < 1:
        raise ValueError(f"n_starts must be >= 1, got {n_starts}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    spec = spec or LawSpec()
    fit_spec, notes = effective_spec(runs, spec)
    notes += check_run_count(runs, fit_spec, source="lsq")
    design, y = runs.design, runs.log_loss
    lo, hi, mask = fit_spec.lower, fit_spec.upper, fit_spec.free_mask
    k = int(mask.sum())
    n = len(runs)

    rng = np.random.default_rng(seed)
    starts = lo + (hi - lo) * rng.random((n_starts, k))
    model = law_model(fit_spec, design)
    ones = np.ones(n)
    explore = batched_weighted_lm(model, starts, y, ones, lo, hi, delta=np.inf, max_iter=20)
    order = np.argsort(np.where(np.isfinite(explore.objective), explore.objective, np.inf))
    keep = order[: max(1, min(n_refine, n_starts))]
    refine = batched_weighted_lm(model, explore.x[keep], y, ones, lo, hi, delta=np.inf, max_iter=300)
    if not np.isfinite(refine.objective).any():
        raise RuntimeError("no start produced a finite objective; check the run table")
    best_start = refine.x[int(np.nanargmin(refine.objective))]

    def residual(params):
        return log_loss(_theta_of(params), design) - y

    free_coords = [c for c, f in zip(THETA_NAMES, mask) if f]

    def jacobian(params):
        # columns of the parameters varying now (conf_interval holds phi fixed while profiling)
        vary = np.array([params[c].vary for c in THETA_NAMES])
        return log_loss_and_jacobian(_theta_of(params), design)[1][:, vary]

    params = _lmfit_params(fit_spec, fit_spec.full_theta(best_start))
    minimizer = lmfit.Minimizer(residual, params, Dfun=jacobian)
    out = minimizer.minimize(method="least_squares", ftol=1e-15, xtol=1e-15, gtol=1e-15)
    theta = _theta_of(out.params)
    chisqr = float(np.sum(residual(out.params) ** 2))
    nfree = n - k
    warnings = list(notes)

    stderr_internal: dict[str, float] = {}
    correlation: dict[str, dict[str, float]] = {}
    if out.covar is not None and out.errorbars:
        cov = np.asarray(out.covar)
        sd = np.sqrt(np.clip(np.diag(cov), 0, None))
        for i, c in enumerate(free_coords):
            stderr_internal[c] = float(sd[i])
            correlation[c] = {
                d: float(cov[i, j] / (sd[i] * sd[j])) if sd[i] > 0 and sd[j] > 0 else float("nan")
                for j, d in enumerate(free_coords)
            }
    else:
        warnings.append(
            "lmfit could not estimate the covariance (singular J^T J or a parameter "
            "at a bound): no standard errors"
        )
    stderr: dict[str, float] | None = None
    if stderr_internal:
        stderr = {}
        for c, se in stderr_internal.items():
            name = THETA_TO_PARAM[c]
            stderr[name] = float(np.exp(theta[THETA_NAMES.index(c)]) * se) if c in ("a", "b", "e") else se

    profile_ci: dict[str, list[float]] = {}
    exact = chisqr <= 1e-24 * n
    if profile and "phi" in free_coords and exact:
        phi_hat = float(out.params["phi"].value)
        profile_ci["phi"] = [phi_hat, phi_hat]
        warnings.append("the fit is exact (chi-square ~ 0): the profile interval of phi has zero width")
    elif profile and "phi" in free_coords:
        if not stderr_internal.get("phi"):
            warnings.append(
                "no profile interval for phi: lmfit needs a finite standard error to start the profile"
            )
        else:
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
                warnings.append(
                    f"the {level:.0%} profile interval of phi reaches the box bound: an end is infinite"
                )

    tolerance = 1e-3 * chisqr + 1e-10 * n
    n_at_best = int(np.sum(2 * refine.objective <= chisqr + tolerance))
    extras: dict[str, Any] = {
        "n_starts": n_starts,
        "n_refined": int(len(keep)),
        "n_starts_at_best": n_at_best,
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
