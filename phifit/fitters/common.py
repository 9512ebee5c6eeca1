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
#: B and beta are held here when every run has one token count (:func:`d_term_unidentified`):
#: B D^-beta = 1e-12 nats, zero within rounding, so the fitted E is E + B D^-beta at that D.
UNIDENTIFIED_B = 1e-12
UNIDENTIFIED_BETA = 0.0
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
    check_information(runs)
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


def check_information(runs: RunTable) -> None:
    """Refuse a table that carries no information about the law, before any fit.

    - every run has the same loss (column ``loss`` constant): the law fits it with E = that
      loss and any A, alpha, B, beta, phi, so no parameter can be estimated (a fit would print
      values with stderr 0, R^2 NaN);
    - every run has the same design (r, n_once, n_rec, tokens): only the mean loss is measured.

    Raises ``ValueError`` naming the file and the column (exit 2 on the command line), as
    :func:`check_run_count` does for a table with no more runs than free parameters.
    """
    where = f"{runs.source}: " if runs.source else ""
    loss = runs.loss
    if len(loss) > 1 and np.ptp(loss) <= 1e-12 * np.max(np.abs(loss)):
        raise ValueError(
            f"{where}column 'loss': the losses do not vary (all {len(loss)} runs have loss {loss[0]:.6g}): "
            "the table carries no information about the law, so no parameter can be estimated"
        )
    design = np.column_stack([runs.r, runs.n_once, runs.n_rec, runs.tokens])
    if len(design) > 1 and np.all(design == design[0]):
        raise ValueError(
            f"{where}columns 'r', 'n_once', 'n_rec', 'tokens': all {len(design)} runs have the same "
            "design: the table measures one mean loss, so no parameter of the law can be estimated"
        )


def d_term_unidentified(runs: RunTable, spec: LawSpec) -> Caution | None:
    """The caution for a table with a single token count D, or None.

    Rule: with one D the data term B D^-beta is the same constant for every run, so B,
    beta and E are not separately identified (only E + B D^-beta is).  The fit then holds
    beta = :data:`UNIDENTIFIED_BETA` and B = :data:`UNIDENTIFIED_B` (the term is ~1e-12
    nats: B = 0 within rounding, while the law keeps its one log-space definition), so the
    fitted E is the identified constant E + B D^-beta at that D.  B and beta are reported
    as null.  A spec that fixes B and beta to other values is left alone (the user chose
    them); one that holds them at the sentinel values (a refit of such a fit) gets the
    caution again.
    """
    if runs.d_term_identifiable:
        return None
    fixed = spec.fixed
    if (
        "B" in fixed
        and "beta" in fixed
        and (fixed["B"], fixed["beta"]) != (UNIDENTIFIED_B, UNIDENTIFIED_BETA)
    ):
        return None
    d = float(runs.tokens[0])
    return caution(
        "fit",
        "d_term_unidentified",
        f"B, beta and E cannot be estimated separately: every run has the same token count "
        f"(D = {d:.4g}), so B D^-beta is one constant over the table; fitted the law with "
        f"B = 0 (beta = 0) and reported E as the constant E + B D^-beta at D = {d:.4g}, B and "
        f"beta as null. Nothing that depends on B or beta (the compute-optimal frontier and "
        f"allocation, predictions at another D) can be computed; add runs at a second token count",
        parameters=["B", "beta"],
        tokens=d,
    )


def effective_spec(runs: RunTable, spec: LawSpec) -> tuple[LawSpec, list[Caution]]:
    """The spec actually fitted, with a caution per parameter held because the runs cannot
    identify it.

    - phi (``phi_unidentified``): no looped run (r > 1 with n_rec > 0) or a single r; held
      at :data:`UNIDENTIFIED_PHI`.
    - B and beta (``d_term_unidentified``): a single token count D
      (:func:`d_term_unidentified`).
    """
    out: list[Caution] = []
    fixed = dict(spec.fixed)
    d_term = d_term_unidentified(runs, spec)
    if d_term is not None:
        fixed["B"], fixed["beta"] = UNIDENTIFIED_B, UNIDENTIFIED_BETA
        out.append(d_term)
    if not (runs.phi_identifiable or "phi" in spec.fixed):
        looped = (runs.r > 1) & (runs.n_rec > 0)
        why = "no looped runs (r > 1 with n_rec > 0)" if not looped.any() else "all runs have the same r"
        fixed["phi"] = UNIDENTIFIED_PHI
        out.append(caution("fit", "phi_unidentified", PHI_UNIDENTIFIED_WARNING.format(why=why), level="note"))
    if not out:
        return spec, []
    return LawSpec(fixed=fixed, bounds=spec.bounds), out


def unidentified_params(cautions: list[str | Caution] | None) -> list[str]:
    """Law parameters that a ``d_term_unidentified`` caution marks as not identified."""
    names: list[str] = []
    for c in cautions or []:
        if isinstance(c, Caution) and c.kind == "d_term_unidentified":
            names += [n for n in c.values.get("parameters", []) if n not in names]
    return names


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
    for name in unidentified_params(warnings):
        params[name] = None
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


#: A run is outlying when its robust residual |e_i - median(e)| / (1.4826 MAD(e)) exceeds this
#: (e: residuals in nats; 1.4826 MAD estimates the standard deviation of normal noise without
#: being pulled by the outliers themselves).  Under normal noise |z| > 5 has probability
#: 6e-7 per run, so even a table of thousands of runs flags none by chance; the shipped
#: study tables reach at most 4.3.
OUTLIER_ROBUST_Z = 5.0
#: 1.4826 MAD below this (nats) means the residuals are rounding noise: nothing to flag.
OUTLIER_SCALE_FLOOR = 1e-9
#: Robust residuals need this many runs beyond the free parameters: with fewer, the fit
#: itself pins the residuals towards 0 and their MAD says nothing about the noise.
OUTLIER_MIN_EXTRA_RUNS = 3
#: R^2 (raw nats) below this is a caution: the law leaves more than a tenth of the spread of
#: the losses unexplained, so its parameters describe the table poorly (or one run dominates the
#: spread).  Fits of clean sweeps reach 0.99 (the shipped study tables 0.93 to 0.997).
LOW_R2 = 0.9


def robust_z(residuals: np.ndarray) -> np.ndarray | None:
    """|e_i - median(e)| / (1.4826 MAD(e)) per run; None when the MAD is below
    :data:`OUTLIER_SCALE_FLOOR` (residuals at rounding level)."""
    e = np.asarray(residuals, dtype=float)
    centre = np.median(e)
    scale = 1.4826 * float(np.median(np.abs(e - centre)))
    if not scale > OUTLIER_SCALE_FLOOR:
        return None
    return np.abs(e - centre) / scale


def fit_quality_cautions(
    residuals: np.ndarray,
    run_ids: list[str],
    r2: float,
    n_free: int,
    *,
    source: str = "fit",
    explained: np.ndarray | None = None,
) -> list[Caution]:
    """Cautions about how well the law describes the table: outlying runs (robust residual
    above :data:`OUTLIER_ROBUST_Z`, named by run id) and R^2 below :data:`LOW_R2`.

    ``explained`` (bool per run) marks runs another caution already accounts for (e.g. all
    runs of an r with a systematic offset): they are not named as outliers."""
    out: list[Caution] = []
    e = np.asarray(residuals, dtype=float)
    z = robust_z(e) if len(e) >= n_free + OUTLIER_MIN_EXTRA_RUNS else None
    if z is not None:
        flagged = z > OUTLIER_ROBUST_Z
        if explained is not None:
            flagged &= ~np.asarray(explained, dtype=bool)
        hits = np.flatnonzero(flagged)
        hits = hits[np.argsort(-z[hits])]
        if len(hits):
            named = [str(run_ids[i]) if i < len(run_ids) else f"row {i}" for i in hits]
            shown = ", ".join(
                f"{named[j]} ({e[i]:+.4g} nats, z = {z[i]:.1f})" for j, i in enumerate(hits[:5])
            )
            more = f" and {len(hits) - 5} more" if len(hits) > 5 else ""
            out.append(
                caution(
                    source,
                    "outlying_runs",
                    f"{len(hits)} outlying run{'s' * (len(hits) != 1)}: {shown}{more}; robust residual "
                    f"|e - median| / (1.4826 MAD) above {OUTLIER_ROBUST_Z:g}. Check these runs (a failed "
                    f"or diverged run, a unit mix-up, a wrong row) and refit without them",
                    run_ids=named,
                    residuals=[float(e[i]) for i in hits],
                    robust_z=[float(z[i]) for i in hits],
                    threshold=OUTLIER_ROBUST_Z,
                )
            )
    if np.isfinite(r2) and r2 < LOW_R2:
        out.append(
            caution(
                source,
                "low_r2",
                f"R^2 = {r2:.3f} (raw nats) is below {LOW_R2:g}: the law leaves more than "
                f"{1 - LOW_R2:.0%} of the spread of the losses unexplained; look for outlying runs, "
                f"or runs whose losses barely vary "
                f"(then R^2 says little and the parameters are not determined)",
                r2=float(r2),
                threshold=LOW_R2,
            )
        )
    return out


def conditioning_cautions(runs: RunTable, result: FitResult, *, source: str = "fit") -> list[Caution]:
    """A caution when the fit's information matrix (:func:`phifit.fitters.standard_errors.information`,
    every free parameter, those at a bound included) is singular or its condition number
    exceeds :data:`~phifit.fitters.standard_errors.MAX_CONDITION`: some parameter combination
    is not determined by the table, so the standard errors mean nothing.  None for a fit
    without an optimisation objective (Bayesian).  The caution names the parameters the
    undetermined directions move (eigenvectors of the unit-diagonal matrix with an eigenvalue
    below its largest / MAX_CONDITION, and always the smallest: entries of at least 0.3 in
    absolute value).

    This is a property of the optimum, not of the design: ``FitResult.phi_identified`` (phi
    reported, not null) only says the design has looped runs at two values of r, and stays True
    when phi is locally undetermined (e.g. alpha on its bound 0, where r^phi no longer moves the
    loss); the caution then names phi among the parameters it moves."""
    from .objective import refit_settings
    from .standard_errors import MAX_CONDITION, information

    try:
        spec, delta = refit_settings(result)
    except ValueError:
        return []
    im, _ = information(runs, spec, result.theta, delta, phi_free=result.phi is not None)
    if not im.ill_conditioned:
        return []
    what = (
        f"singular (condition number {im.condition:.3g})"
        if im.singular
        else f"ill-conditioned (condition number {im.condition:.3g} > {MAX_CONDITION:.0e})"
    )
    moved: list[str] = [THETA_TO_PARAM[n] for n in im.vanished]
    if np.all(np.isfinite(im.unit)):
        eig, vectors = np.linalg.eigh(im.unit)
        weak = eig <= eig.max() / MAX_CONDITION
        weak[0] = True  # the least-determined direction, at least
        reach = np.max(np.abs(vectors[:, weak]), axis=1)
        moved += [
            THETA_TO_PARAM[n] for n, c in zip(im.names, reach) if c >= 0.3 and THETA_TO_PARAM[n] not in moved
        ]
    which = f" (it moves {', '.join(moved)})" if moved else ""
    return [
        caution(
            source,
            "ill_conditioned",
            f"the information matrix J^T W J is {what}: some parameter combination{which} is not "
            "determined by the table, so the stderr column means nothing; read bootstrap intervals "
            "and the phi profile (phifit.diagnostics), and add runs that separate these parameters",
            condition_number=im.condition,
            singular=im.singular,
            moves=moved,
            threshold=MAX_CONDITION,
        )
    ]
