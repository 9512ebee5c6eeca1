"""What every fitter shares: goodness of fit, bound checks and the FitResult assembly.

Each fitter finds theta its own way and hands it to :func:`build_result`, so R^2,
RMSE, residuals, the working log-likelihood with its AIC and BIC
(:mod:`phifit.fitters.likelihood`) and the bound/identifiability warnings are defined once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import defaults
from ..cautions import Caution, caution
from ..law import THETA_NAMES, THETA_TO_PARAM, LawSpec, log_loss, theta_to_params
from ..result import FitResult
from ..runs.table import RunTable
from .likelihood import GaussianScore

#: phi is held here when the data cannot identify it: N_eff = N_once + N_rec.
UNIDENTIFIED_PHI = 0.0
PHI_UNIDENTIFIED_WARNING = (
    "phi is not identifiable from these runs ({why}); fitted the law without phi "
    "(N = n_once + n_rec, the unique parameter count) and reported phi as null"
)


#: Below this many runs per free parameter a fit is flagged as barely determined.
RUNS_PER_PARAMETER_WARN = 3


def check_run_count(runs: RunTable, spec: LawSpec, *, source: str = "fit") -> list[Caution]:
    """Refuse a fit with no more runs than free parameters; caution below 3 per parameter.

    With n <= k the law passes through every run (R^2 = 1, residuals 0) and nothing about
    it is measured, so this raises ``ValueError`` (exit 2 on the command line).  With
    n < 3 k the fit is returned with a warning.
    """
    n, k = len(runs), int(spec.free_mask.sum())
    where = f"{runs.source}: " if runs.source else ""
    if n < k + 1:
        raise ValueError(
            f"{where}{n} run(s) for {k} free parameter(s): a fit needs at least {k + 1} runs "
            f"(more runs than free parameters) to measure anything"
        )
    if n < RUNS_PER_PARAMETER_WARN * k:
        return [
            caution(
                source,
                "few_runs",
                f"only {n} runs for {k} free parameters (fewer than {RUNS_PER_PARAMETER_WARN} per "
                f"parameter): the fit is barely determined; read R^2 and every interval with care",
                n_runs=n,
                n_free=k,
            )
        ]
    return []


def effective_spec(runs: RunTable, spec: LawSpec) -> tuple[LawSpec, list[Caution]]:
    """The spec actually fitted: phi is fixed when the runs cannot identify it."""
    if runs.phi_identifiable or "phi" in spec.fixed:
        return spec, []
    looped = (runs.r > 1) & (runs.n_rec > 0)
    why = "no looped runs (r > 1 with n_rec > 0)" if not looped.any() else "all runs have the same r"
    fixed = dict(spec.fixed)
    fixed["phi"] = UNIDENTIFIED_PHI
    message = PHI_UNIDENTIFIED_WARNING.format(why=why)
    return LawSpec(fixed=fixed, bounds=spec.bounds), [
        caution("fit", "phi_unidentified", message, level="note")
    ]


def goodness_of_fit(loss: np.ndarray, predicted: np.ndarray) -> tuple[float, float, np.ndarray]:
    """(R^2, RMSE, residuals) on raw nats; residual = actual - predicted.

    R^2 = 1 - SSR / SST with SST centred on the mean loss; NaN when SST = 0.
    """
    resid = loss - predicted
    ssr = float(np.sum(resid**2))
    sst = float(np.sum((loss - loss.mean()) ** 2))
    r2 = 1.0 - ssr / sst if sst > 0 else float("nan")
    return r2, float(np.sqrt(np.mean(resid**2))), resid


def bound_hits(theta_free: np.ndarray, spec: LawSpec, rtol: float = 1e-6) -> list[str]:
    """Natural names of the free parameters within rtol * (box width) of a bound."""
    lo, hi = spec.lower, spec.upper
    tol = rtol * (hi - lo)
    hit = (theta_free <= lo + tol) | (theta_free >= hi - tol)
    return [name for name, h in zip(spec.free_names, hit) if h]


def bound_messages(theta: np.ndarray, spec: LawSpec, names: list[str], source: str = "fit") -> list[Caution]:
    """Readable 'phi = 3 at upper bound 3' cautions (internal coordinates for a, b, e)."""
    msgs = []
    inverse = {v: k for k, v in THETA_TO_PARAM.items()}
    for name in names:
        coord = inverse[name]
        value = theta[THETA_NAMES.index(coord)]
        lo, hi = spec.bounds[coord]
        side, bound = ("lower", lo) if abs(value - lo) <= abs(value - hi) else ("upper", hi)
        label = coord if coord == name else f"{coord} = log {name}"
        msgs.append(
            caution(
                source,
                "at_bound",
                f"{label} = {value:.6g} at {side} bound {bound:g}; the optimum may lie "
                f"outside the box and this parameter is not well determined",
                parameter=name,
                value=float(value),
                bound=float(bound),
            )
        )
    return msgs


def build_result(
    runs: RunTable,
    spec: LawSpec,
    theta: np.ndarray,
    *,
    method: str,
    objective: float,
    objective_name: str,
    converged: bool,
    loss: str,
    delta: float | None = None,
    warnings: list[str | Caution] | None = None,
    extras: Mapping[str, Any] | None = None,
    stderr: Mapping[str, float] | None = None,
    phi_identified: bool = True,
    ci_level: float = defaults.LEVEL,
) -> FitResult:
    """Assemble a FitResult from the fitted theta (complete, internal coordinates).

    Its ``log_lik``, ``aic`` and ``bic`` score the log-loss residuals of ``theta`` with the
    Gaussian working likelihood, k = the free parameters of ``spec`` + 1 (sigma).

    ``spec`` is the spec fitted (after :func:`effective_spec`); the result records its
    fixed values and box, and the loss (``"huber"`` with ``delta``, ``"squares"``,
    ``"student_t"``), so anything downstream refits it the same way.  Plain-string
    warnings become :class:`~phifit.cautions.Caution` records of source ``method``.
    """
    fitted_log = log_loss(theta, runs.design)
    predicted = np.exp(fitted_log)
    r2, rmse, resid = goodness_of_fit(runs.loss, predicted)
    score = GaussianScore.from_residuals(runs.log_loss - fitted_log, int(spec.free_mask.sum()))
    free = theta[spec.free_mask]
    hits = bound_hits(free, spec)
    params: dict[str, float | None] = theta_to_params(theta)
    if not phi_identified:
        params["phi"] = None
    fixed = {k: v for k, v in spec.fixed.items() if phi_identified or k != "phi"}
    msgs = [w if isinstance(w, Caution) else caution(method, "fit", w) for w in warnings or []]
    msgs += bound_messages(theta, spec, hits, source=method)
    if not converged:
        msgs.append(
            caution(
                method,
                "unconverged",
                "the optimiser did not report convergence; treat the estimates with care",
            )
        )
    return FitResult(
        method=method,
        params=params,
        n_runs=len(runs),
        objective=float(objective),
        objective_name=objective_name,
        r2=r2,
        rmse=rmse,
        converged=bool(converged),
        fixed=dict(fixed),
        at_bounds=hits,
        bounds={k: [float(lo), float(hi)] for k, (lo, hi) in spec.bounds.items()},
        loss=loss,
        delta=float(delta) if loss == "huber" else None,
        ci_level=ci_level,
        warnings=msgs,
        residuals=resid.tolist(),
        run_ids=runs.run_ids,
        source=runs.source,
        stderr=dict(stderr) if stderr is not None else None,
        extras=dict(extras or {}),
        **score_fields(score),
    )


def score_fields(score: GaussianScore) -> dict[str, float | None]:
    """FitResult's ``log_lik``, ``aic``, ``bic`` from a working-likelihood score (all None when
    the log-likelihood is not finite: residuals exactly zero)."""
    if not np.isfinite(score.log_lik):
        return {"log_lik": None, "aic": None, "bic": None}
    return {"log_lik": float(score.log_lik), "aic": float(score.aic), "bic": float(score.bic)}
