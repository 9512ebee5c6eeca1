"""Can this design and this fit pin phi down?  Design checks, conditioning and the phi profile.

Design checks (:func:`design_warnings`, data only): no looped run or a single r
(phi unidentifiable), r barely varying, few looped runs, a shared block too small to
move the loss, fewer distinct model sizes than the size term's parameters.

A single token count D is handled by the fit itself
(:func:`phifit.fitters.common.d_term_unidentified`): B D^-beta is then one constant over
the table, so B, beta and E are not separately identified; the fit holds B = 0, reports E
as E + B D^-beta at that D and B, beta as null, and the frontier, the allocation and losses
at another D are withheld.

At the optimum (:func:`identifiability`)
    Gauss-Newton information I = J^T W J of the log-loss Jacobian (W: the fit's IRLS
    weights, 1 inside the Huber threshold delta and delta / |res| beyond; all 1 for
    least squares), the parameter correlation matrix of I^-1, the condition number of I
    scaled to unit diagonal (:func:`phifit.fitters.standard_errors.information`, the matrix the
    fit's own conditioning check reads), approximate standard errors sigma^2 I^-1 with
    sigma^2 = sum(log_resid^2) / (n - k).

The phi profile (:func:`phi_profile`)
    F_prof(phi) = min over the other free parameters of the fit's OWN objective
    F = sum_i rho(log L_hat_i - log L_i) (rho = Huber_delta, or r^2 / 2 for least
    squares), in the fit's own box, so that F_prof is minimal at phi_hat and equals the
    fit's objective there.  Each point starts from its neighbour's optimum, from the
    estimate and from spread starts (the best end point is kept, then polished), and a
    second pass from the ends inwards keeps any better neighbour start: the curve is
    smooth.  The profile deviance is n log(F_prof(phi) / F_min) (for least squares the
    Gaussian profile deviance n log(SSR(phi) / SSR_min); for Huber the same formula on
    the Huber objective), and the profile interval is {phi : deviance <= chi2_1(0.95) =
    3.84} around the minimum.  It treats the runs as independent draws with a common
    error scale, so it is narrower than a block bootstrap when runs share a budget.
    It needs an optimisation objective: a Bayesian fit has none, and gets no profile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from .. import defaults
from ..cautions import Caution, caution
from ..fitters.lm import batched_weighted_lm
from ..fitters.objective import law_model, loss_terms, refit_settings
from ..fitters.polish import polish
from ..fitters.refit import spread_starts
from ..fitters.standard_errors import MAX_CONDITION, Information, information
from ..law import COORD_LABELS, THETA_NAMES, THETA_TO_PARAM, LawSpec, log_loss
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from ..serialize import JsonIO, to_plain
from .residuals import check_fit

__all__ = [
    "CHI2_95",
    "PROFILE_INTERVAL_LABEL",
    "Identifiability",
    "identifiability",
    "design_warnings",
    "phi_profile",
    "crossing_interval",
    "PROFILE_SIDES",
    "ProfilePlan",
    "attach_profile",
    "profile_plan",
    "profile_plan_for",
    "profile_result",
    "profile_side",
]

#: chi2_1 quantile for an approximate 95% profile interval: ``scipy.stats.chi2.ppf(0.95, 1)``
#: (= 1.959963984540054^2), written out so that importing the diagnostics does not import
#: scipy.stats, which would lengthen every report's start (docs/benchmarks.md, 'Where `phifit
#: report` spends its time on table (a)'; ``tests/test_diagnostics.py`` checks the value).
CHI2_95 = 3.841458820694124
#: What the profile interval is (for figure legends and reports).
PROFILE_INTERVAL_LABEL = "profile interval (assumes independent runs)"


# --------------------------------------------------------------------------- design
def design_warnings(
    runs: RunTable,
    *,
    phi: float = 0.5,
    min_looped: int = 6,
    min_log_r_sd: float = 0.25,
    min_rec_share: float = 0.05,
) -> list[Caution]:
    """Warnings when the design cannot separate phi (data only, no fit needed).

    - ``phi_unidentifiable``: no looped run (r > 1, n_rec > 0) or a single value of r;
    - ``r_barely_varies``: sd of log r over runs < ``min_log_r_sd`` (0.25; the paper's
      r in {1, 2, 4, 8} gives 0.78, half r = 1 / half r = 2 gives 0.35);
    - ``few_looped_runs``: fewer than ``min_looped`` runs with r > 1;
    - ``n_rec_tiny``: median over looped runs of the looped share of the effective size,
      r^phi n_rec / N_eff (at ``phi``), below ``min_rec_share`` (0.05): phi then moves
      N_eff, hence the loss, too little to be measured;
    - ``few_sizes``: fewer than 3 distinct models (n_once, n_rec, r): the size term
      A N_eff^-alpha with phi takes at most as many values as there are models, so A, alpha
      and phi (three parameters) are not separately identified.
    """
    out: list[Caution] = []
    r, n_rec, n_once = runs.r, runs.n_rec, runs.n_once
    looped = (r > 1) & (n_rec > 0)
    if not looped.any():  # a non-looped table: Chinchilla's law, phi does not enter (a note)
        out.append(
            Caution(
                "diagnostics",
                "non_looped",
                "non-looped table (no run with r > 1 and n_rec > 0): the law is Chinchilla's "
                "L = E + A N^-alpha + B D^-beta and phi does not enter; add looped runs at a second r "
                "to measure phi",
                {"r_values": sorted(set(r.astype(int).tolist()))},
                level="note",
            )
        )
        return out
    n_models = len({(float(a), float(b), float(c)) for a, b, c in zip(n_once, n_rec, r)})
    if n_models < 3:
        out.append(
            Caution(
                "diagnostics",
                "few_sizes",
                f"only {n_models} distinct model(s) (n_once, n_rec, r): the size term takes at most "
                f"{n_models} value(s), so A, alpha and phi cannot be estimated separately; add models "
                f"of other sizes",
                {"n_models": n_models},
            )
        )
    if not runs.phi_identifiable:
        why = "a single value of r"
        out.append(
            Caution(
                "diagnostics",
                "phi_unidentifiable",
                f"phi cannot be estimated: {why}; add runs at a second r",
                {"r_values": sorted(set(r.astype(int).tolist()))},
            )
        )
        return out
    sd = float(np.std(np.log(r)))
    if sd < min_log_r_sd:
        out.append(
            Caution(
                "diagnostics",
                "r_barely_varies",
                f"r barely varies (sd of log r = {sd:.3f} < {min_log_r_sd}): phi is weakly "
                f"identified; add runs at r = 1 and at a larger r",
                {"sd_log_r": sd, "r_values": sorted(set(r.astype(int).tolist()))},
            )
        )
    if looped.sum() < min_looped:
        out.append(
            Caution(
                "diagnostics",
                "few_looped_runs",
                f"only {int(looped.sum())} looped runs (< {min_looped}): phi rests on very few points",
                {"n_looped": int(looped.sum())},
            )
        )
    share = (r[looped] ** phi * n_rec[looped]) / (n_once[looped] + r[looped] ** phi * n_rec[looped])
    med = float(np.median(share))
    if med < min_rec_share:
        out.append(
            Caution(
                "diagnostics",
                "n_rec_tiny",
                f"the shared block is a tiny part of the model (median r^phi n_rec / N_eff = "
                f"{med:.3f} < {min_rec_share} at phi = {phi:g}): phi barely moves the predicted loss "
                f"and cannot be separated from A and alpha",
                {"median_share": med, "phi": phi},
            )
        )
    return out


# ------------------------------------------------------------------- at the optimum


def _profile_text(interval: list[float], grid: list[float] | None) -> str:
    """The profile interval as text; an end on the profiled range prints as "<= lo" / ">= hi"
    (the deviance bound was not crossed there, so that end is not determined)."""
    lo, hi = interval
    left = f"<= {lo:.4f} (end of the profiled range)" if grid is not None and lo <= grid[0] else f"{lo:.4f}"
    right = f">= {hi:.4f} (end of the profiled range)" if grid is not None and hi >= grid[-1] else f"{hi:.4f}"
    return f"[{left}, {right}]"


@dataclass(frozen=True)
class Identifiability(JsonIO):
    """Correlations, conditioning and the phi profile at the optimum.

    ``names``: the free parameters, internal coordinates (a = log A, b = log B, e = log E);
    ``correlation``: k x k correlation matrix of (J^T W J)^-1; ``condition_number``:
    of J^T W J scaled to unit diagonal; ``stderr``: approximate Gauss-Newton standard
    errors (internal coordinates, and A, B, E by the delta method); ``profile``: {phi,
    objective, deviance, ssr, params, objective_name, deviance_name} (see
    :func:`phi_profile`); ``profile_interval``: the approximate 95% interval where the
    deviance <= 3.84, labelled ``profile_interval_label`` (None when phi is fixed, not
    identified, or the fit has no objective); ``warnings``: design and fit cautions.
    """

    names: list[str]
    correlation: list[list[float]]
    condition_number: float
    stderr: dict[str, float]
    profile: dict[str, Any] | None
    profile_interval: list[float] | None
    warnings: list[Caution]
    profile_interval_label: str = PROFILE_INTERVAL_LABEL

    def corr(self, x: str, y: str) -> float:
        return self.correlation[self.names.index(x)][self.names.index(y)]

    @property
    def correlation_reliable(self) -> bool:
        """Whether the correlations are defined (a positive-definite information matrix)."""
        return bool(np.all(np.isfinite(self.correlation)))

    def to_dict(self) -> dict[str, Any]:
        keys = ("names", "correlation", "condition_number", "stderr", "profile", "profile_interval")
        out = {k: getattr(self, k) for k in keys}
        out["profile_interval_label"] = self.profile_interval_label
        out["warnings"] = [w.to_dict() for w in self.warnings]
        return to_plain(out)

    def summary(self) -> str:
        lines = [
            "[[Identifiability]]",
            f"    condition number (unit-diagonal information): {self.condition_number:.3g}",
            "    correlations:",
            "    " + " " * 7 + "".join(f"{COORD_LABELS.get(n, n):>8}" for n in self.names),
        ]
        for i, n in enumerate(self.names):
            # one space between cells whatever the values: columns never run together
            lines.append(
                f"    {COORD_LABELS.get(n, n):<7}" + "".join(f" {c:>7.3f}" for c in self.correlation[i])
            )
        if self.correlation and not np.all(np.isfinite(self.correlation)):
            lines.append("    (correlations not defined: the information matrix is singular, see below)")
        if self.stderr and "phi" in self.stderr and np.isfinite(self.stderr["phi"]):
            lines.append(
                f"    SE(phi), Gauss-Newton sigma^2 (J^T W J)^-1, independent runs: {self.stderr['phi']:.3g}"
            )
        if self.profile_interval:
            grid = self.profile["phi"] if self.profile else None
            text = _profile_text(self.profile_interval, grid)
            lines.append(f"    phi {self.profile_interval_label}, approx. 95%: {text}")
        lines += [f"    [{w.kind}] {w.message}" for w in self.warnings]
        return "\n".join(lines)


def identifiability(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    profile_points: int = 31,
    profile_range: tuple[float, float] | None = None,
    profile_starts: int = 8,
    seed: int = defaults.SEED,
    max_corr: float = 0.99,
    max_cond: float = MAX_CONDITION,
    max_phi_se: float = 0.25,
) -> Identifiability:
    """Correlation matrix, condition number, phi profile and design warnings at the optimum.

    The profile (:func:`phi_profile`) runs over ``profile_range`` (default
    [min(-0.25, phi-0.5), max(1.25, phi+0.5)], which contains the restricted laws
    phi = 0 and phi = 1), clipped to the fit's box, on the fit's own objective.
    Fit warnings: |corr(phi, x)| > ``max_corr``; condition number > ``max_cond``;
    SE(phi) > ``max_phi_se``; profile interval reaching the end of the profile range.
    A Bayesian fit gets the information-matrix checks (unit weights) and no profile.
    """
    runs = as_runs(runs)
    check_fit(runs, fit)
    warnings: list[Caution] = []
    try:
        spec, delta = refit_settings(fit)
    except ValueError as err:
        spec, delta = fit.spec, math.inf
        warnings.append(caution("diagnostics", "profile_skipped", f"no phi profile: {err}", level="note"))
        profile_points = 0
    theta = fit.theta
    warnings = design_warnings(runs, phi=fit.phi if fit.phi is not None else 0.5) + warnings
    im, res = information(runs, spec, theta, delta, phi_free=fit.phi is not None)
    names, cond = im.names, im.condition
    corr, se = _correlation_and_stderr(im, res, len(runs), fit, warnings)
    if cond > max_cond:
        warnings.append(
            caution(
                "diagnostics",
                "ill_conditioned",
                f"the information matrix is ill-conditioned (condition number "
                f"{cond:.3g} > {max_cond:.0e}): some parameter combinations are not determined",
                condition_number=cond,
            )
        )
    if "phi" in names:
        warnings += _phi_cautions(names, corr, se, fit, max_corr=max_corr, max_phi_se=max_phi_se)

    ident = Identifiability(
        names=names,
        correlation=np.asarray(corr).tolist(),
        condition_number=cond,
        stderr=se,
        profile=None,
        profile_interval=None,
        warnings=warnings,
    )
    if "phi" not in names or not profile_points:
        return ident
    plan = profile_plan(
        runs,
        spec,
        theta,
        delta,
        points=profile_points,
        span=profile_range,
        n_spread=profile_starts,
        seed=seed,
    )
    return attach_profile(ident, plan, [profile_side(plan, side) for side in PROFILE_SIDES])


def profile_plan_for(
    runs: RunTable | pd.DataFrame, fit: FitResult, *, seed: int = defaults.SEED
) -> ProfilePlan | None:
    """The plan of the phi profile :func:`identifiability` draws for ``fit`` at its default grid
    and starts, or None where it draws none (phi fixed or not identified, no objective to refit):
    for a caller that runs ``identifiability(..., profile_points=0)`` and the two
    :func:`profile_side` separately (side by side), then :func:`attach_profile` (the same numbers)."""
    try:
        spec, delta = refit_settings(fit)
    except ValueError:
        return None
    if fit.phi is None or not spec.free_mask[5]:
        return None
    return profile_plan(runs, spec, fit.theta, delta, seed=seed)


def attach_profile(
    ident: Identifiability, plan: ProfilePlan, sides: Sequence[tuple[list[int], np.ndarray, np.ndarray]]
) -> Identifiability:
    """``ident`` (computed without a profile) with the profile of ``plan`` from its two sides,
    its interval and its cautions after the others, as :func:`identifiability` orders them."""
    profile, interval, found = profile_result(plan, sides)
    warnings = [*ident.warnings, *found, *_open_profile_cautions(interval, profile["phi"])]
    return replace(ident, profile=profile, profile_interval=interval, warnings=warnings)


def _correlation_and_stderr(
    im: Information, res: np.ndarray, n: int, fit: FitResult, warnings: list[Caution]
) -> tuple[np.ndarray, dict[str, float]]:
    """The parameters' correlation matrix and Gauss-Newton standard errors from the information
    matrix ``im`` and the log residuals ``res``: SE = sqrt(sigma^2 diag((J^T W J)^-1)) with
    sigma^2 = SSR / (n - k), and SE(exp(u)) = exp(u) SE(u) for A, B, E.  When the matrix is
    singular or its inverse not positive-definite: NaN throughout, and a caution in ``warnings``."""
    names, scale, unit, eig = im.names, im.scale, im.unit, im.eig
    # numerically singular: the smallest eigenvalue is below rounding of the largest
    reliable = not im.singular
    cov_unit = np.linalg.inv(unit) if reliable else None
    # a positive-definite matrix has a positive-definite inverse: a diagonal that is not
    # positive means the inverse is rounding noise
    reliable = reliable and bool(np.all(np.diag(cov_unit) > 0))
    if reliable:
        cov = cov_unit / np.outer(scale, scale)
        d = np.sqrt(np.diag(cov))
        corr = np.clip(cov / np.outer(d, d), -1.0, 1.0)
        k = len(names)
        sigma2 = float(np.sum(res**2)) / max(n - k, 1)
        se = dict(zip(names, (np.sqrt(sigma2) * d).tolist()))
        params = fit.law.params
        for coord, name in (("a", "A"), ("b", "B"), ("e", "E")):
            if coord in se:  # delta method: SE(exp(u)) = exp(u) SE(u)
                se[name] = params[name] * se[coord]
        return corr, se
    warnings.append(
        caution(
            "diagnostics",
            "correlations_unreliable",
            f"the information matrix J^T W J is singular or not positive-definite (smallest "
            f"eigenvalue {float(eig.min()):.3g} of the unit-diagonal matrix, largest "
            f"{float(eig.max()):.3g}): some parameter combination is not determined by the "
            f"data, so no correlation or Gauss-Newton standard error is given",
            smallest_eigenvalue=float(eig.min()),
            largest_eigenvalue=float(eig.max()),
        )
    )
    return np.full((len(names), len(names)), np.nan), dict.fromkeys(names, float("nan"))


def _phi_cautions(
    names: list[str],
    corr: np.ndarray,
    se: dict[str, float],
    fit: FitResult,
    *,
    max_corr: float,
    max_phi_se: float,
) -> list[Caution]:
    """Cautions about phi at the optimum: almost collinear with another parameter
    (|corr| > ``max_corr``), or poorly determined (Gauss-Newton SE > ``max_phi_se``)."""
    out: list[Caution] = []
    ip = names.index("phi")
    for jn, other in enumerate(names):
        if other != "phi" and abs(corr[ip, jn]) > max_corr:
            out.append(
                caution(
                    "diagnostics",
                    "phi_correlated",
                    f"phi is almost collinear with {other} (correlation "
                    f"{corr[ip, jn]:+.3f}): the design cannot separate them",
                    **{"with": other, "correlation": float(corr[ip, jn])},
                )
            )
    if se["phi"] > max_phi_se:
        fit_se = (fit.stderr or {}).get("phi")
        method = fit.extras.get("stderr_method") or "another estimate"
        other = (
            f"; the fit's stderr of phi, {fit_se:.3g}, is the {method}, "
            f"which can differ a lot when the information matrix is ill-conditioned or the "
            f"residuals are far from normal"
            if fit_se is not None and np.isfinite(fit_se)
            else ""
        )
        out.append(
            caution(
                "diagnostics",
                "phi_uncertain",
                f"phi is poorly determined (Gauss-Newton SE {se['phi']:.3g} > {max_phi_se}: "
                f"sigma^2 (J^T W J)^-1 with sigma^2 = SSR / (n - k) of the log residuals, "
                f"assuming independent runs{other})",
                se=se["phi"],
                fit_stderr=fit_se,
            )
        )
    return out


def _open_profile_cautions(interval: list[float], grid: list[float]) -> list[Caution]:
    """A caution when the profile interval reaches an end of the profiled ``grid``."""
    open_lo, open_hi = interval[0] <= grid[0], interval[1] >= grid[-1]
    if not (open_lo or open_hi):
        return []
    ends = " and ".join(
        e
        for e, hit in (
            (f"the lower end {grid[0]:.2f}", open_lo),
            (f"the upper end {grid[-1]:.2f}", open_hi),
        )
        if hit
    )
    return [
        caution(
            "diagnostics",
            "phi_profile_flat",
            f"the phi profile stays within the 95% deviance bound up to {ends} of the "
            f"profiled range [{grid[0]:.2f}, {grid[-1]:.2f}]: the profile interval "
            f"{_profile_text(interval, grid)} is open there (the data barely constrain phi)",
            interval=interval,
            range=[float(grid[0]), float(grid[-1])],
        )
    ]


# ------------------------------------------------------------------------ the profile
#: Iterations before a profile point's hopeless starts stop, and how much worse than the best
#: start (objective ratio) counts as hopeless.  Measured on the study's table, cpu_small,
#: cpu_adaptive and tables (a) and (c) of ``benchmarks/report_speed_tables.py`` against running
#: every start to convergence: the profile's objective and interval agree to 3e-14 relative,
#: and the profile takes less time (docs/benchmarks.md, 'Figures once kept in docstrings'); the
#: other parameters at a profile point move only where the objective is flat in them (up to
#: 2e-6 relative, and at one point of the study's profile far from phi_hat, E and A in another
#: basin of equal objective).
PROFILE_PRUNE_AFTER = 15
PROFILE_PRUNE_RATIO = 3.0


def phi_profile(
    runs: RunTable | pd.DataFrame,
    spec: LawSpec,
    theta: np.ndarray,
    delta: float,
    *,
    points: int = 31,
    span: tuple[float, float] | None = None,
    n_spread: int = 8,
    seed: int = defaults.SEED,
) -> tuple[dict[str, Any], list[float], list[Caution]]:
    """Profile of the objective sum_i rho_delta(log L_hat_i - log L_i) along phi.

    ``spec``, ``delta``: the fit's own box, fixed values and loss
    (:func:`phifit.fitters.objective.refit_settings`); ``theta``: its optimum.  The grid is
    ``points`` evenly spaced values over ``span``, a fine grid (step 0.01) within 0.1 of
    phi_hat, phi_hat itself and the restricted laws phi = 0 and phi = 1, all inside the box.

    Returns (profile, interval, cautions).  ``profile`` holds ``phi``, ``objective``
    (F_prof), ``deviance`` (n log(F_prof / F_min)), ``ssr`` (sum of squared log
    residuals at each profile optimum), ``params`` (natural values of the other
    parameters), ``objective_name`` and ``deviance_name``; ``interval`` is where the
    deviance <= chi2_1(0.95).  A caution ``profile_below_fit`` says the profile found a
    lower objective than the fit (the fit stopped short of its optimum).
    """
    plan = profile_plan(runs, spec, theta, delta, points=points, span=span, n_spread=n_spread, seed=seed)
    return profile_result(plan, [profile_side(plan, side) for side in PROFILE_SIDES])


#: The two halves of the phi profile, each a chain of warm-started fits from phi_hat outwards and
#: back (:func:`profile_side`); neither reads the other, so they may run side by side.
PROFILE_SIDES = ("up", "down")


@dataclass(frozen=True)
class ProfilePlan:
    """What the phi profile fits (:func:`profile_plan`): the table's ``design`` and log-losses
    ``y``, the fit's ``theta`` and loss threshold ``delta``, the sorted ``grid`` (phi_hat at index
    ``i0``), one spec per grid point (phi held there) and each point's starts besides its
    neighbour's optimum (the fit's own point and the spread starts, drawn up front in the order
    the sequential profile draws them, so either side's chain gets the same starts alone)."""

    n_runs: int
    design: np.ndarray
    y: np.ndarray
    theta: np.ndarray
    delta: float
    grid: np.ndarray
    i0: int
    specs: list[LawSpec]
    starts: list[list[np.ndarray]]


def profile_plan(
    runs: RunTable | pd.DataFrame,
    spec: LawSpec,
    theta: np.ndarray,
    delta: float,
    *,
    points: int = 31,
    span: tuple[float, float] | None = None,
    n_spread: int = 8,
    seed: int = defaults.SEED,
) -> ProfilePlan:
    """The grid, specs and starts of :func:`phi_profile` (its arguments)."""
    runs = as_runs(runs)
    phi_hat = float(theta[5])
    grid = _profile_grid(phi_hat, spec.bounds["phi"], span, points)
    rng = np.random.default_rng(seed)
    specs = [LawSpec(fixed={**spec.fixed, "phi": float(g)}, bounds=spec.bounds) for g in grid]
    i0 = int(np.flatnonzero(grid == phi_hat)[0])
    starts: list[list[np.ndarray]] = [[] for _ in grid]
    for i in [*range(i0, len(grid)), *range(i0 - 1, -1, -1)]:  # the sequential profile's order
        free = specs[i].free_mask
        starts[i] = [theta[free]]
        if n_spread:
            starts[i] += list(spread_starts(theta[free], specs[i], 1, n_spread, rng)[0])
    return ProfilePlan(len(runs), runs.design, runs.log_loss, theta, delta, grid, i0, specs, starts)


def profile_side(plan: ProfilePlan, side: str) -> tuple[list[int], np.ndarray, np.ndarray]:
    """One side of the profile: (grid indices, theta (n, 6), F_prof (n,)) for phi_hat and above
    (``"up"``) or below phi_hat (``"down"``).  Outwards from phi_hat, each point starts from its
    inner neighbour's optimum, the fit's point and its spread starts; then from the end inwards a
    better outer neighbour's optimum replaces a point."""
    if side not in PROFILE_SIDES:
        raise ValueError(f"unknown profile side {side!r}; expected one of {', '.join(PROFILE_SIDES)}")
    i0, n = plan.i0, len(plan.grid)
    out = list(range(i0, n)) if side == "up" else list(range(i0 - 1, -1, -1))
    thetas: dict[int, np.ndarray] = {}
    obj: dict[int, float] = {}
    prev = plan.theta
    for i in out:
        spec = plan.specs[i]
        thetas[i], obj[i] = _best_of(
            spec, [prev[spec.free_mask], *plan.starts[i]], plan.design, plan.y, plan.delta
        )
        prev = thetas[i]
    back = range(n - 2, i0, -1) if side == "up" else range(1, i0)
    for i in back:
        nb = i + 1 if side == "up" else i - 1
        spec = plan.specs[i]
        t, f = _best_of(spec, [thetas[nb][spec.free_mask]], plan.design, plan.y, plan.delta)
        if f < obj[i]:
            thetas[i], obj[i] = t, f
    index = sorted(thetas)
    return index, np.array([thetas[i] for i in index]).reshape(-1, 6), np.array([obj[i] for i in index])


def profile_result(
    plan: ProfilePlan, sides: Sequence[tuple[list[int], np.ndarray, np.ndarray]]
) -> tuple[dict[str, Any], list[float], list[Caution]]:
    """:func:`phi_profile`'s (profile, interval, cautions) from its two sides' points."""
    grid, design, y, delta = plan.grid, plan.design, plan.y, plan.delta
    thetas = np.empty((len(grid), 6))
    obj = np.empty(len(grid))
    for index, side_thetas, side_obj in sides:
        thetas[index], obj[index] = side_thetas, side_obj
    phi_hat = float(grid[plan.i0])
    f_hat = _fit_objective(plan.theta, design, y, delta)
    i_min = int(np.argmin(obj))
    f_min = float(obj[i_min])
    cautions = _below_fit_cautions(f_min, float(grid[i_min]), f_hat, phi_hat)
    dev = _profile_deviance(obj, f_min, plan.n_runs)
    interval = crossing_interval(grid, dev, i_min, CHI2_95)
    rho = f"Huber(delta={delta:g})" if np.isfinite(delta) else "r^2 / 2"
    profile = {
        "phi": grid.tolist(),
        "objective": obj.tolist(),
        "deviance": dev.tolist(),
        "ssr": np.sum((log_loss(thetas, design) - y) ** 2, axis=-1).tolist(),
        "params": _natural_others(thetas),
        "objective_name": f"sum over runs of {rho} on log-loss residuals, other parameters refitted",
        "deviance_name": "n log(F(φ) / F_min)",
    }
    return profile, interval, cautions


def _profile_grid(
    phi_hat: float, bounds: tuple[float, float], span: tuple[float, float] | None, points: int
) -> np.ndarray:
    """Sorted phi grid in the box: ``points`` over ``span``, step 0.01 near phi_hat, 0, 1 and phi_hat."""
    lo_b, hi_b = bounds
    if span is None:
        span = (min(-0.25, phi_hat - 0.5), max(1.25, phi_hat + 0.5))
    lo, hi = max(span[0], lo_b), min(span[1], hi_b)
    if not lo < hi or points < 3:
        raise ValueError(
            f"profile range must have lower < upper and >= 3 points, got [{lo}, {hi}] with {points}"
        )
    fine = phi_hat + np.linspace(-0.1, 0.1, 21)
    grid = np.concatenate([np.linspace(lo, hi, points), fine, [0.0, 1.0]])
    grid = np.unique(np.round(grid[(grid >= lo) & (grid <= hi)], 12))
    return np.sort(np.append(grid[np.abs(grid - phi_hat) > 1e-9], phi_hat))


def _fit_objective(theta: np.ndarray, design: np.ndarray, y: np.ndarray, delta: float) -> float:
    """The fit's objective F(theta) = sum_i rho_delta(log L_hat_i - log L_i)."""
    return float(np.sum(loss_terms(log_loss(theta, design) - y, delta)))


def _best_of(
    spec: LawSpec, starts: list[np.ndarray], design: np.ndarray, y: np.ndarray, delta: float
) -> tuple[np.ndarray, float]:
    """(full theta, F) of the best batched-LM end from ``starts`` under ``spec``, polished if F drops."""
    # the fit's own exploration rule: after PROFILE_PRUNE_AFTER iterations a start whose
    # objective exceeds PROFILE_PRUNE_RATIO x the best stops (the rows kept end bit-identical)
    end = batched_weighted_lm(
        law_model(spec, design),
        np.array(starts),
        y,
        1.0,
        spec.lower,
        spec.upper,
        delta=delta,
        prune_after=PROFILE_PRUNE_AFTER,
        prune_ratio=PROFILE_PRUNE_RATIO,
    )
    obj = np.where(np.isfinite(end.objective), end.objective, np.inf)
    x = end.x[int(np.argmin(obj))]
    t = spec.full_theta(x)
    f = _fit_objective(t, design, y, delta)
    sol = polish(x, spec, design, y, delta)
    if sol is not None and sol.status > 0 and np.all(np.isfinite(sol.x)):
        t2 = spec.full_theta(sol.x)
        f2 = _fit_objective(t2, design, y, delta)
        if f2 < f:
            t, f = t2, f2
    return t, f


def _below_fit_cautions(f_min: float, phi_min: float, f_hat: float, phi_hat: float) -> list[Caution]:
    """A ``profile_below_fit`` caution when min F_prof < F(theta_hat) (1 - 1e-9): the fit stopped short."""
    if not f_min < f_hat * (1 - 1e-9) - 1e-300:
        return []
    return [
        caution(
            "diagnostics",
            "profile_below_fit",
            f"the phi profile reaches a lower objective ({f_min:.6g}) at phi = {phi_min:.4f} than "
            f"the fit at phi = {phi_hat:.4f} ({f_hat:.6g}): the fit stopped short of its optimum; "
            f"refit with more starts",
            phi=phi_min,
            objective=f_min,
            fit_objective=f_hat,
        )
    ]


def _profile_deviance(obj: np.ndarray, f_min: float, n: int) -> np.ndarray:
    """Profile deviance n log(F_prof / F_min) (when F_min = 0: 0 where F_prof = 0, else inf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = n * np.log(obj / f_min) if f_min > 0 else np.where(obj > 0, np.inf, 0.0)
    return np.asarray(dev, float)


def _natural_others(thetas: np.ndarray) -> dict[str, list[float]]:
    """Natural values (A = exp(a), B = exp(b), E = exp(e)) of all but phi at each profile point."""
    return {
        THETA_TO_PARAM[c]: (np.exp(thetas[:, i]) if c in ("a", "b", "e") else thetas[:, i]).tolist()
        for i, c in enumerate(THETA_NAMES)
        if c != "phi"
    }


def crossing_interval(x: np.ndarray, dev: np.ndarray, i_min: int, level: float) -> list[float]:
    """The connected set {x : dev(x) <= level} around x[i_min], ends interpolated linearly
    between the last grid point inside and the first outside (the grid end when none)."""
    ends = []
    for step in (-1, 1):
        i = i_min
        while 0 <= i + step < len(x) and dev[i + step] <= level:
            i += step
        j = i + step
        if not 0 <= j < len(x) or not math.isfinite(dev[j]) or dev[j] == dev[i]:
            ends.append(float(x[i]))
        else:
            frac = (level - dev[i]) / (dev[j] - dev[i])
            ends.append(float(x[i] + frac * (x[j] - x[i])))
    return ends
