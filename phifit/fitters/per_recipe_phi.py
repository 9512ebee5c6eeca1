"""Joint fit of several recipes: shared E, A, alpha, B, beta and one phi per recipe.

    log L_i = LSE(a - alpha log N_eff,i,  b - beta log D_i,  e),
    N_eff,i = N_once,i + r_i^phi_g(i) N_rec,i,

where g(i) is run i's recipe (a training change such as truncated BPTT).  The free
coordinates are x = (a, alpha, b, beta, e, phi_1, ..., phi_G) in the study's box (every
phi_g in phi's box).  With one group (``shared_phi=True``) the model is the joint law
itself: the null "one phi for every recipe" goes through the same path.

The objective is the engine's (:mod:`phifit.fitters.objective`):

    F(x) = sum_i rho(log L_hat_i(x) - log L_i),   rho = Huber_delta (delta = 1e-3) or r^2 / 2,

minimised like the Huber fit (:mod:`phifit.fitters.huber`): random starts uniform in the
box (plus any warm starts, e.g. each recipe's own fit) explored together by
:func:`~phifit.fitters.lm.batched_weighted_lm`, the best carried on to convergence, and
the best few distinct end points finished by :func:`~phifit.fitters.polish.polish_residuals`
(least squares at tight tolerances).  The result is a :class:`~phifit.result.FitResult`
(``method="joint"``) whose ``params["phi"]`` is the reference recipe's phi and whose
``extras["phi"]`` holds every recipe's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .. import defaults
from ..cautions import Caution, caution
from ..law import (
    DEFAULT_BOUNDS,
    THETA_NAMES,
    THETA_TO_PARAM,
    LawSpec,
    jacobian_t_from_parts,
    log_loss_parts,
)
from ..result import FitResult
from ..runs.table import RunTable
from .common import RUNS_PER_PARAMETER_WARN, goodness_of_fit, score_fields
from .likelihood import GaussianScore
from .lm import batched_weighted_lm
from .objective import DELTA, loss_terms
from .polish import polish_residuals

METHODS = ("huber", "lsq")
SHARED = "shared"  # the one group of a shared-phi fit


@dataclass(frozen=True)
class GroupedLaw:
    """The joint law with one phi per group of runs.

    ``recipes`` the group names (phi_g belongs to ``recipes[g]``); ``groups`` (n,) the
    group index of each run; ``bounds`` the box in internal coordinates (LawSpec's).
    """

    recipes: tuple[str, ...]
    groups: np.ndarray
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_BOUNDS))

    def __post_init__(self) -> None:
        object.__setattr__(self, "bounds", MappingProxyType(dict(LawSpec(bounds=self.bounds).bounds)))

    @property
    def coordinates(self) -> list[str]:
        """Names of x: a, alpha, b, beta, e, then phi[recipe] (plain "phi" for one group)."""
        phis = ["phi"] if len(self.recipes) == 1 else [f"phi[{r}]" for r in self.recipes]
        return [*THETA_NAMES[:5], *phis]

    @property
    def lower(self) -> np.ndarray:
        g = len(self.recipes)
        return np.array([self.bounds[c][0] for c in THETA_NAMES[:5]] + [self.bounds["phi"][0]] * g)

    @property
    def upper(self) -> np.ndarray:
        g = len(self.recipes)
        return np.array([self.bounds[c][1] for c in THETA_NAMES[:5]] + [self.bounds["phi"][1]] * g)

    def theta(self, x: np.ndarray, g: int) -> np.ndarray:
        """The joint law's theta (a, alpha, b, beta, e, phi_g) of group g; x (k,) or (S, k)."""
        x = np.asarray(x, dtype=float)
        return np.concatenate([x[..., :5], x[..., 5 + g : 6 + g]], axis=-1)

    def model(self, design):
        """``model(x)`` for :func:`batched_weighted_lm`: predicted log L (m, n) and its
        transposed Jacobian (m, 5 + G, n); each phi_g moves only its group's runs.

        Like :func:`~phifit.fitters.objective.law_model`, ``model.forward(x)`` gives the
        predictions and the parts of the Jacobian (each group's :func:`~phifit.law.log_loss_parts`,
        one flat tuple of arrays whose first axis is the rows) and ``model.jacobian(parts)`` the
        Jacobian of those rows: the same arithmetic in two steps, so the LM skips the Jacobian of
        rejected steps."""
        n_groups = len(self.recipes)
        members = [np.flatnonzero(self.groups == g) for g in range(n_groups)]
        present = [g for g in range(n_groups) if len(members[g])]
        subdesigns = {g: design.subset(members[g]) for g in present}
        n = len(self.groups)
        width = 7  # arrays per group in log_loss_parts

        def forward(x: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
            pred = np.empty((len(x), n))
            parts: list[np.ndarray] = []
            for g in present:
                p, group_parts = log_loss_parts(self.theta(x, g), subdesigns[g])
                pred[:, members[g]] = p
                parts.extend(group_parts)
            return pred, tuple(parts)

        def jacobian(parts: tuple[np.ndarray, ...], out: np.ndarray | None = None) -> np.ndarray:
            jac_t = np.zeros((len(parts[0]), 5 + n_groups, n))
            for i, g in enumerate(present):
                j = jacobian_t_from_parts(parts[width * i : width * (i + 1)], subdesigns[g])
                rows = members[g]
                jac_t[:, :5, rows] = j[:, :5, :]
                jac_t[:, 5 + g, rows] = j[:, 5, :]
            return jac_t

        def model(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            pred, parts = forward(x)
            return pred, jacobian(parts)

        model.forward, model.jacobian = forward, jacobian
        return model


@dataclass(frozen=True)
class JointOptions:
    """Settings of the joint fit (the Huber fit's, :class:`~phifit.fitters.huber.HuberOptions`)."""

    n_starts: int = defaults.N_STARTS  # random starts, uniform in the box
    seed: int = defaults.SEED
    explore_iter: int = 8  # vectorised LM iterations on every random start
    n_refine: int = 32  # best random starts carried on (with every warm start) to convergence
    refine_iter: int = 300
    n_polish: int = 3  # distinct candidates finished by the least-squares polish
    basin_rtol: float = 1e-3  # a start "reached the best" if within this relative objective


def recipe_labels(runs: RunTable, recipe: str | Sequence[str] | np.ndarray) -> np.ndarray:
    """Each run's recipe as text: ``recipe`` is a column name or one label per run."""
    if isinstance(recipe, str):
        if recipe not in runs.frame.columns:
            raise ValueError(f"joint fit: no column {recipe!r} in the run table")
        return runs.frame[recipe].astype(str).to_numpy()
    labels = np.asarray(recipe).astype(str)
    if labels.shape != (len(runs),):
        raise ValueError(f"joint fit: {len(labels)} recipe labels for {len(runs)} runs")
    return labels


def grouped_law(
    runs: RunTable, labels: np.ndarray, recipes: Sequence[str] | None, shared_phi: bool
) -> GroupedLaw:
    """The grouped law of ``runs``: one group per recipe, or a single one for a shared phi."""
    names = tuple(recipes) if recipes is not None else tuple(sorted(set(labels)))
    unknown = sorted(set(labels) - set(names))
    if unknown:
        raise ValueError(f"joint fit: runs of recipe(s) {', '.join(unknown)} not in {list(names)}")
    if shared_phi:
        return GroupedLaw(recipes=(SHARED,), groups=np.zeros(len(labels), dtype=int))
    codes = np.array([names.index(lab) for lab in labels], dtype=int)
    looped = (runs.r > 1) & (runs.n_rec > 0)
    unidentified = [nm for g, nm in enumerate(names) if not looped[codes == g].any()]
    if unidentified or len(np.unique(runs.r)) < 2:
        why = f"recipe(s) {', '.join(unidentified)} have no looped runs" if unidentified else "a single r"
        raise ValueError(f"joint fit: a phi per recipe is not identifiable ({why})")
    return GroupedLaw(recipes=names, groups=codes)


def _start_rows(law: GroupedLaw, starts: Sequence[np.ndarray]) -> np.ndarray:
    """Warm starts as x rows: a 6-vector theta (one recipe's fit) gives its phi to every group."""
    k, g = 5 + len(law.recipes), len(law.recipes)
    rows = []
    for s in starts:
        s = np.asarray(s, dtype=float)
        rows.append(np.concatenate([s[:5], np.full(g, s[5])]) if len(s) == 6 and k != 6 else s)
    return np.clip(np.array(rows).reshape(-1, k), law.lower, law.upper)


def fit_joint(
    runs: RunTable,
    recipe: str | Sequence[str] | np.ndarray = "variant",
    *,
    recipes: Sequence[str] | None = None,
    reference: str | None = None,
    shared_phi: bool = False,
    method: str = "huber",
    delta: float = DELTA,
    starts: Sequence[np.ndarray] = (),
    options: JointOptions | None = None,
) -> FitResult:
    """Fit shared E, A, alpha, B, beta with one phi per recipe (or one shared phi).

    Parameters
    ----------
    runs
        Run table; ``recipe`` names its recipe column (default "variant") or gives one
        label per run.
    recipes
        Order of the recipes (default: sorted labels); ``reference`` the recipe whose phi is
        reported as ``params["phi"]`` (default the first).
    shared_phi
        One phi for every run: the null model of "phi differs between recipes".
    method, delta
        "huber" (Huber_delta on log-loss residuals, the study's objective) or "lsq".
    starts
        Warm starts besides the random ones: theta 6-vectors (a recipe's own fit) or full x.
    options
        Starts, seed and iteration limits (:class:`JointOptions`).

    Returns
    -------
    FitResult with ``method="joint"``, ``loss`` "huber" or "squares", the box in ``bounds``,
    and ``extras``: ``phi`` {recipe: phi}, ``recipes``, ``reference``, ``shared_phi``,
    ``n_runs_by_recipe``, ``coordinates``, ``x`` (the fitted coordinates), ``n_starts``,
    ``n_starts_at_best``, ``seed``, ``solver_message``.
    """
    if method not in METHODS:
        raise ValueError(f"joint fit: unknown method {method!r}; expected one of {', '.join(METHODS)}")
    options = options or JointOptions()
    labels = recipe_labels(runs, recipe)
    law = grouped_law(runs, labels, recipes, shared_phi)
    names = tuple(recipes) if recipes is not None else tuple(sorted(set(labels)))
    reference = names[0] if reference is None else str(reference)
    if reference not in names:
        raise ValueError(f"joint fit: reference recipe {reference!r} is not one of {list(names)}")
    delta = float(delta) if method == "huber" else np.inf
    lo, hi = law.lower, law.upper
    k, n = len(lo), len(runs)
    warnings: list[Caution] = []
    if n < k + 1:
        raise ValueError(f"joint fit: {n} run(s) for {k} free parameters; it needs at least {k + 1}")
    if n < RUNS_PER_PARAMETER_WARN * k:
        warnings.append(
            caution(
                "joint",
                "few_runs",
                f"only {n} runs for {k} free parameters: the joint fit is barely determined",
                n_runs=n,
                n_free=k,
            )
        )
    model, y = law.model(runs.design), runs.log_loss

    def descend(x0: np.ndarray, iterations: int):
        end = batched_weighted_lm(model, x0, y, 1.0, lo, hi, delta=delta, max_iter=iterations)
        return end.x, np.where(np.isfinite(end.objective), end.objective, np.inf)

    rng = np.random.default_rng(options.seed)
    x_mid, obj_mid = descend(lo + (hi - lo) * rng.random((options.n_starts, k)), options.explore_iter)
    keep = np.argsort(obj_mid)[: options.n_refine]
    carried = np.concatenate([_start_rows(law, starts), x_mid[keep]]) if len(starts) else x_mid[keep]
    x_end, obj_end = descend(carried, options.refine_iter)

    def fun(x):
        return model(x[None, :])[0][0] - y

    def jac(x):
        return model(x[None, :])[1][0].T

    candidates: list[np.ndarray] = []
    for i in np.argsort(obj_end):
        if np.isfinite(obj_end[i]) and all(
            np.max(np.abs(x_end[i] - c) / (hi - lo)) > 1e-3 for c in candidates
        ):
            candidates.append(x_end[i])
        if len(candidates) >= options.n_polish:
            break
    if not candidates:
        raise RuntimeError("joint fit: no start produced a finite objective; check the run table")
    best, best_obj = None, np.inf
    for c in candidates:
        sol = polish_residuals(fun, jac, c, lo, hi, delta)
        obj = float(np.sum(loss_terms(fun(sol.x), delta)))
        if obj < best_obj:
            best, best_obj = sol, obj
    x = best.x
    n_at_best = int(np.sum(obj_end <= best_obj + options.basin_rtol * best_obj + 1e-10 * n))
    return _result(
        runs, law, labels, names, reference, x, best, best_obj, delta, method, options, n_at_best, warnings
    )


def _result(
    runs, law, labels, names, reference, x, sol, objective, delta, method, options, n_at_best, warnings
):
    """The FitResult of a grouped fit (R^2 and RMSE on raw nats, and the working log-likelihood
    with k = the grouped law's free coordinates + 1, as every fitter's)."""
    pred = law.model(runs.design)(x[None, :])[0][0]
    r2, rmse, resid = goodness_of_fit(runs.loss, np.exp(pred))
    score = GaussianScore.from_residuals(runs.log_loss - pred, len(x))
    phis = (
        {nm: float(x[5]) for nm in names} if law.recipes == (SHARED,) else dict(zip(names, map(float, x[5:])))
    )
    theta = law.theta(x, 0)
    params = {
        THETA_TO_PARAM[c]: float(np.exp(v) if c in ("a", "b", "e") else v) for c, v in zip(THETA_NAMES, theta)
    }
    params["phi"] = phis[reference]
    lo, hi = law.lower, law.upper
    tol = 1e-6 * (hi - lo)
    at_bounds = []
    for name, v, lo_i, hi_i, t in zip(law.coordinates, x, lo, hi, tol):
        if v <= lo_i + t or v >= hi_i - t:
            label = THETA_TO_PARAM.get(name, name)
            at_bounds.append(label)
            side, bound = ("lower", lo_i) if abs(v - lo_i) <= abs(v - hi_i) else ("upper", hi_i)
            warnings.append(
                caution(
                    "joint",
                    "at_bound",
                    f"{name} = {v:.6g} at {side} bound {bound:g}; the optimum may lie outside the box",
                    parameter=label,
                    value=float(v),
                    bound=float(bound),
                )
            )
    converged = bool(sol.status > 0)
    if not converged:
        warnings.append(caution("joint", "unconverged", "the joint fit's polish did not report convergence"))
    huber_loss = np.isfinite(delta)
    return FitResult(
        method="joint",
        params=params,
        n_runs=len(runs),
        # least squares reports the plain sum of squares, as the lsq fitter does
        objective=objective if huber_loss else 2.0 * objective,
        objective_name=(
            f"sum of Huber(delta={delta:g}) on log-loss residuals"
            if huber_loss
            else "sum of squared log-loss residuals"
        ),
        r2=r2,
        rmse=rmse,
        converged=converged,
        at_bounds=at_bounds,
        bounds={c: [float(a), float(b)] for c, (a, b) in law.bounds.items()},
        loss="huber" if huber_loss else "squares",
        delta=float(delta) if huber_loss else None,
        warnings=warnings,
        residuals=resid.tolist(),
        run_ids=runs.run_ids,
        source=runs.source,
        extras={
            "model": "shared phi" if law.recipes == (SHARED,) else "one phi per recipe",
            "fit_method": method,
            "phi": phis,
            "recipes": list(names),
            "reference": reference,
            "shared_phi": law.recipes == (SHARED,),
            "n_runs_by_recipe": {nm: int(np.sum(labels == nm)) for nm in names},
            "coordinates": law.coordinates,
            "x": [float(v) for v in x],
            "n_starts": options.n_starts,
            "n_starts_at_best": n_at_best,
            "seed": options.seed,
            "solver_message": str(sol.message),
        },
        **score_fields(score),
    )


def joint_log_loss(fit: FitResult, runs: RunTable, recipe: str | Sequence[str] | np.ndarray = "variant"):
    """Predicted log L of ``runs`` under a joint fit (each run with its recipe's phi)."""
    labels = recipe_labels(runs, recipe)
    phis = fit.extras["phi"]
    names = tuple(phis)
    law = GroupedLaw(recipes=names, groups=np.array([names.index(lab) for lab in labels], dtype=int))
    x = np.concatenate([fit.theta[:5], [phis[nm] for nm in names]])
    return law.model(runs.design)(x[None, :])[0][0]


__all__ = [
    "GroupedLaw",
    "JointOptions",
    "SHARED",
    "fit_joint",
    "grouped_law",
    "joint_log_loss",
    "recipe_labels",
]
