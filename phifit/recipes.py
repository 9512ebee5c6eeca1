"""Delta-phi between training recipes: separate fits, a paired block bootstrap, a joint fit.

A *recipe* is one value of a column (``variant`` by default): a training change such as
truncated BPTT or hyperconnections, tested against a ``baseline`` recipe.

**Compare against the baseline refit on the same budgets.**  The reference study probed
its recipes on the four lower budgets only, and the like-for-like baseline is the
baseline refitted on those four budgets (phi = 0.453), not the full-grid fit (0.459)
(paper-notes sections 4.4 and 7).  So for each variant v:

1. The *paired tables*: v's runs and the baseline's runs on the budgets both have
   (all runs when there is no ``budget`` column).  A recipe that changes only the loop
   leaves r = 1 unchanged, so a variant without r = 1 runs borrows the baseline's r = 1
   runs on those budgets (as the study does).
2. Separate fits of both paired tables (same method, box and starts); Delta-phi =
   phi_v - phi_baseline(same budgets).
3. A block bootstrap of Delta-phi that resamples the *same* blocks in both recipes:
   the blocks are (budget, r) cells (or the columns given in ``block``); the union of the
   two tables' cells is drawn with replacement and each recipe keeps its runs in the drawn
   cells, so a cell present in both recipes (and the borrowed r = 1 runs, which are the
   same runs) moves together.  Each replicate refits both tables (warm start + spread
   starts, :func:`phifit.bootstrap.refit_weighted`) and records
   Delta* = phi_v* - phi_base*; a replicate fails when either refit fails.
   Intervals: percentile (and BCa with a delete-one-cell jackknife).  Without a budget
   column and without ``block`` every run is its own block and the two recipes are
   resampled independently (nothing pairs them).
   The p-value inverts the percentile interval: the two-sided bootstrap p-value
   p = min(1, 2 min((1 + #{Delta* <= 0}) / (B + 1), (1 + #{Delta* >= 0}) / (B + 1))),
   the smallest level at which a percentile interval excludes 0.
4. A **joint fit**: E, A, alpha, B, beta shared by all recipes and one phi per recipe,
   on the runs of the budgets every recipe has (a variant's borrowed r = 1 runs are the
   baseline's and enter once; r = 1 runs do not involve phi), compared with the same
   law with one shared phi by the Gaussian likelihood ratio on log residuals (sigma
   profiled out; approximate for Huber fits, see :mod:`phifit.compare`),
   df = (number of recipes - 1), and by AIC/BIC.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from scipy.stats import chi2

from .bootstrap import bootstrap_interval
from .compare import gaussian_log_lik
from .fitters import fit as fit_law
from .fitters.common import effective_spec, goodness_of_fit
from .fitters.engine import DELTA, batched_weighted_lm, identifiable_rows, refit_weighted
from .law import DEFAULT_BOUNDS, THETA_NAMES, LawSpec, log_loss, log_loss_and_jacobian_t
from .plain import to_plain
from .result import FitResult
from .runs import SINGLE_RUNS, RunTable

METHODS = ("huber", "lsq")
LESSON = (
    "Delta-phi compares each variant with the baseline refitted on the same budgets "
    "(the study's lesson: its baseline refit on the four lower budgets gives phi = 0.453, "
    "not the full-grid 0.459)"
)


# -- building the paired tables -------------------------------------------------------------


def _table(frame: pd.DataFrame, source: str, looped: bool) -> RunTable:
    return RunTable(frame.reset_index(drop=True), source=source, looped=looped)


@dataclass(frozen=True)
class _Pair:
    variant: RunTable
    baseline: RunTable
    budgets: list[str] | None
    borrowed_r1: int
    dropped_variant_runs: int


def _pair(runs: RunTable, by: str, variant: Any, baseline: Any) -> _Pair:
    frame = runs.frame
    v = frame[frame[by] == variant]
    b = frame[frame[by] == baseline]
    budgets = None
    dropped = 0
    if "budget" in frame.columns:
        common = sorted(set(v["budget"]) & set(b["budget"]), key=lambda x: (str(type(x)), x))
        if not common:
            raise ValueError(
                f"recipes: variant {variant!r} and baseline {baseline!r} share no "
                f"budget; a like-for-like Delta-phi needs common budgets"
            )
        dropped = int((~v["budget"].isin(common)).sum())
        v = v[v["budget"].isin(common)]
        b = b[b["budget"].isin(common)]
        budgets = [str(x) for x in common]
    borrowed = 0
    if not (v["r"] == 1).any():
        r1 = b[b["r"] == 1]
        borrowed = len(r1)
        v = pd.concat([v, r1], ignore_index=True)
    src = runs.source
    return _Pair(
        variant=_table(v, f"{src}[{by}={variant}]", runs.looped),
        baseline=_table(b, f"{src}[{by}={baseline}]", runs.looped),
        budgets=budgets,
        borrowed_r1=borrowed,
        dropped_variant_runs=dropped,
    )


@dataclass(frozen=True)
class RecipeSelection:
    """The runs of one recipe picked out of a table that holds several, and why."""

    runs: RunTable
    recipe: str | None  # None: the table holds a single recipe (or has no ``by`` column)
    note: str | None  # what was selected, from how many runs, and how to choose otherwise


def select_recipe(runs: RunTable, recipe: Any = None, *, by: str = "variant") -> RecipeSelection:
    """The runs of one recipe, for single-law analyses (fit, compare, equivalence) of a mixed table.

    The joint law holds for one training recipe; pooling recipes with different phi fits
    neither.  When column ``by`` holds several values, ``recipe`` picks one (default: the
    value "baseline"; an error when there is none).  A recipe other than the baseline that
    has no r = 1 runs borrows the baseline's r = 1 runs on its budgets, as in Delta-phi
    (a loop-only change leaves r = 1 unchanged).  A table with one recipe is returned whole.
    """
    if by not in runs.frame.columns or runs.frame[by].nunique() < 2:
        if recipe is not None:
            present = sorted(map(str, runs.frame[by].unique())) if by in runs.frame else []
            if str(recipe) not in present:
                raise ValueError(
                    f"{runs.source}: recipe {str(recipe)!r} asked for, but column {by!r} "
                    + (f"holds only {', '.join(map(repr, present))}" if present else "is absent")
                )
        return RecipeSelection(runs=runs, recipe=None, note=None)
    counts = runs.frame[by].astype(str).value_counts().sort_index()
    listing = ", ".join(f"{k} {v}" for k, v in counts.items())
    key = "baseline" if recipe is None else str(recipe)
    if key not in counts:
        raise ValueError(
            f"{runs.source}: column {by!r} holds several recipes ({listing} runs) and "
            + ("none is named 'baseline'" if recipe is None else f"none is {key!r}")
            + "; pick one with --variant NAME, or compare them with --by "
            + by
        )
    values = {str(v): v for v in runs.frame[by].unique()}
    frame = runs.frame[runs.frame[by].astype(str) == key]
    borrowed = 0
    if key != "baseline" and not (frame["r"] == 1).any() and "baseline" in values:
        pair = _pair(runs, by, values[key], values["baseline"])
        frame, borrowed = pair.variant.frame, pair.borrowed_r1
    selected = _table(frame, f"{runs.source}[{by}={key}]", runs.looped)
    note = (
        f"{runs.source}: column {by!r} holds several recipes ({listing} runs); this analysis "
        f"uses {key!r} ({len(selected)} runs"
        + (f", {borrowed} of them the baseline's r = 1 runs" if borrowed else "")
        + f"); --variant NAME picks another, --by {by} compares them"
    )
    return RecipeSelection(runs=selected, recipe=key, note=note)


def _cell_labels(table: RunTable, cols: list[str]) -> np.ndarray:
    if cols == [SINGLE_RUNS]:
        return np.array([f"run{i}" for i in range(len(table))], dtype=object)
    parts = [table.frame[c].astype(str).to_numpy() for c in cols]
    return np.array(["\x1f".join(p) for p in zip(*parts)], dtype=object)


def _block_columns(runs: RunTable, block: str | Sequence[str] | None) -> list[str]:
    if block is None:
        return ["budget", "r"] if "budget" in runs.frame.columns else [SINGLE_RUNS]
    cols = [c.strip() for c in block.split(",")] if isinstance(block, str) else list(block)
    cols = [c for c in cols if c]
    if not cols:
        raise ValueError("block: give at least one column name (or 'run' for single runs)")
    if cols != [SINGLE_RUNS]:
        missing = [c for c in cols if c not in runs.frame.columns]
        if missing:
            raise ValueError(f"block: no column(s) {', '.join(map(repr, missing))} in the run table")
    return cols


# -- the joint fit (shared E, A, alpha, B, beta; one phi per recipe) -------------------------


@dataclass(frozen=True)
class JointFit:
    """Joint fit with one phi per recipe, against the same law with a shared phi.

    ``params`` the shared {E, A, alpha, B, beta}; ``phi`` {recipe: phi}; ``shared`` the
    single-phi fit on the same runs; LR = n log(RSS_shared / RSS_joint) on log residuals
    with df = recipes - 1; AIC/BIC from the Gaussian working likelihood (k counts sigma).
    """

    params: dict[str, float]
    phi: dict[str, float]
    delta_phi: dict[str, float]
    n_runs: int
    budgets: list[str] | None
    objective: float
    objective_name: str
    r2: float
    rmse: float
    converged: bool
    at_bounds: list[str]
    aic: float
    bic: float
    shared: FitResult
    shared_aic: float
    shared_bic: float
    lr_stat: float
    lr_df: int
    lr_p_value: float
    verdict: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "shared"}
        out["shared"] = self.shared.to_dict()
        return to_plain(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JointFit:
        kw = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "shared"}
        for key in (
            "objective",
            "r2",
            "rmse",
            "aic",
            "bic",
            "shared_aic",
            "shared_bic",
            "lr_stat",
            "lr_p_value",
        ):
            kw[key] = math.nan if kw.get(key) is None else float(kw[key])
        return cls(shared=FitResult.from_dict(data["shared"]), **kw)


def _joint_model(design, groups: np.ndarray, n_groups: int):
    """model(x) for batched_weighted_lm: x = (a, alpha, b, beta, e, phi_1..phi_G)."""
    members = [np.flatnonzero(groups == g) for g in range(n_groups)]
    subdesigns = [design.subset(m) for m in members]

    def model(x):
        m = len(x)
        n = len(groups)
        pred = np.empty((m, n))
        jac_t = np.zeros((m, 5 + n_groups, n))
        for g, (rows, sub) in enumerate(zip(members, subdesigns)):
            if len(rows) == 0:
                continue
            theta = np.concatenate([x[:, :5], x[:, 5 + g : 6 + g]], axis=1)
            p, j = log_loss_and_jacobian_t(theta, sub)
            pred[:, rows] = p
            jac_t[:, :5, rows] = j[:, :5, :]
            jac_t[:, 5 + g, rows] = j[:, 5, :]
        return pred, jac_t

    return model


def _joint_fit(
    tables: dict[str, RunTable],
    shared_table: RunTable,
    groups: np.ndarray,
    names: list[str],
    method: str,
    seed: int,
    n_starts: int,
    budgets: list[str] | None,
    baseline: str,
) -> JointFit:
    g = len(names)
    design, y = shared_table.design, shared_table.log_loss
    delta = DELTA if method == "huber" else math.inf
    lo = np.array([DEFAULT_BOUNDS[c][0] for c in THETA_NAMES[:5]] + [DEFAULT_BOUNDS["phi"][0]] * g)
    hi = np.array([DEFAULT_BOUNDS[c][1] for c in THETA_NAMES[:5]] + [DEFAULT_BOUNDS["phi"][1]] * g)
    shared = fit_law(
        shared_table,
        method=method,
        seed=seed,
        n_starts=n_starts,
        **({"profile": False} if method == "lsq" else {}),
    )
    th = shared.theta
    starts = [np.concatenate([th[:5], np.full(g, th[5])])]
    for name in names:  # each recipe's own fit, with its phi for everyone
        sep = fit_law(
            tables[name],
            method=method,
            seed=seed,
            n_starts=max(50, n_starts // 5),
            **({"profile": False} if method == "lsq" else {}),
        )
        starts.append(np.concatenate([sep.theta[:5], np.full(g, sep.theta[5])]))
    rng = np.random.default_rng(seed)
    starts.extend(lo + (hi - lo) * rng.random((max(n_starts // 5, 20), 5 + g)))
    model = _joint_model(design, groups, g)
    ones = np.ones(len(y))
    res = batched_weighted_lm(model, np.array(starts), y, ones, lo, hi, delta=delta)
    best = res.x[int(np.nanargmin(np.where(np.isfinite(res.objective), res.objective, np.inf)))]

    def fun(x):
        return model(x[None, :])[0][0] - y

    def jac(x):
        return model(x[None, :])[1][0].T

    sol = least_squares(
        fun,
        np.clip(best, lo + 1e-12, hi - 1e-12),
        jac=jac,
        bounds=(lo, hi),
        method="trf",
        loss="huber" if method == "huber" else "linear",
        f_scale=delta if method == "huber" else 1.0,
        x_scale="jac",
        ftol=1e-15,
        xtol=1e-15,
        gtol=1e-15,
        max_nfev=2000,
    )
    x = sol.x
    res_log = fun(x)
    if method == "huber":
        a = np.abs(res_log)
        objective = float(np.where(a <= delta, 0.5 * res_log**2, delta * (a - 0.5 * delta)).sum())
        obj_name = f"sum of Huber(delta={delta:g}) on log-loss residuals"
    else:
        objective = float(np.sum(res_log**2))
        obj_name = "sum of squared log-loss residuals"
    predicted = np.exp(y + res_log)
    r2, rmse, _ = goodness_of_fit(shared_table.loss, predicted)
    n = len(y)
    ll, _ = gaussian_log_lik(res_log)
    k = 5 + g + 1
    aic, bic = -2 * ll + 2 * k, -2 * ll + k * math.log(n)
    ll_s, _ = gaussian_log_lik(shared_table.log_loss - log_loss(shared.theta, design))
    aic_s, bic_s = -2 * ll_s + 2 * 7, -2 * ll_s + 7 * math.log(n)
    notes: list[str] = []
    lr = 2 * (ll - ll_s) if np.isfinite(ll) and np.isfinite(ll_s) else math.inf
    if np.isnan(lr):
        lr = 0.0
    if lr < 0:
        notes.append(f"LR = {lr:.3g} < 0 (Huber fits are not ML fits); reported as 0")
        lr = 0.0
    p = float(chi2.sf(lr, g - 1))
    names_free = [*("a", "alpha", "b", "beta", "e"), *(f"phi[{nm}]" for nm in names)]
    tol = 1e-6 * (hi - lo)
    at_bounds = [
        nm for nm, v, lo_i, hi_i, t in zip(names_free, x, lo, hi, tol) if v <= lo_i + t or v >= hi_i - t
    ]
    params = {
        "E": float(np.exp(x[4])),
        "A": float(np.exp(x[0])),
        "alpha": float(x[1]),
        "B": float(np.exp(x[2])),
        "beta": float(x[3]),
    }
    phis = {nm: float(x[5 + i]) for i, nm in enumerate(names)}
    deltas = {nm: phis[nm] - phis[baseline] for nm in names if nm != baseline}
    if method == "huber":
        notes.append("LR from Gaussian scores of Huber fits (not ML): approximate")
    verdict = (
        f"phi differs between recipes: a shared phi is rejected (LR = {lr:.2f}, df = {g - 1}, p = {p:.2g})"
        if p < 0.05
        else f"a shared phi is not rejected (LR = {lr:.2f}, df = {g - 1}, p = {p:.2g})"
    )
    return JointFit(
        params=params,
        phi=phis,
        delta_phi=deltas,
        n_runs=n,
        budgets=budgets,
        objective=objective,
        objective_name=obj_name,
        r2=r2,
        rmse=rmse,
        converged=bool(sol.status > 0),
        at_bounds=at_bounds,
        aic=aic,
        bic=bic,
        shared=shared,
        shared_aic=aic_s,
        shared_bic=bic_s,
        lr_stat=float(lr),
        lr_df=g - 1,
        lr_p_value=p,
        verdict=verdict,
        notes=notes,
    )


# -- the result -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RecipeComparison:
    """Separate fits per recipe, Delta-phi against the baseline, and the joint fit.

    ``fits`` {recipe: FitResult}: the baseline on all its runs, each variant on its paired
    table.  ``baseline_refits`` {variant: FitResult}: the baseline on that variant's
    budgets (the like-for-like reference).  ``delta_phi`` {variant: {estimate, ci, ci_bca,
    p_value, mc_error, n_boot, n_failed, variant_phi, baseline_phi, budgets, borrowed_r1}}.
    """

    by: str
    baseline: str
    fits: dict[str, FitResult]
    baseline_refits: dict[str, FitResult]
    delta_phi: dict[str, dict[str, Any]]
    joint: JointFit | None
    block: str
    n_boot: int
    seed: int
    level: float
    method: str
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"[[phifit recipes: {self.by}, baseline {self.baseline!r}, method={self.method}"
            f", {self.n_boot} bootstrap replicates of blocks '{self.block}']]",
            "",
        ]
        lines.append(f"    {'recipe':<16} {'runs':>5} {'phi':>8} {'R^2':>8}")
        for name, f in self.fits.items():
            phi = f.params.get("phi")
            lines.append(
                f"    {name:<16} {f.n_runs:>5} {(f'{phi:.4f}' if phi is not None else 'n/a'):>8} {f.r2:>8.5f}"
            )
        lines += [
            "",
            f"    Delta-phi vs baseline refit on the same budgets "
            f"({self.level:.0%} percentile interval, bootstrap p-value):",
        ]
        for name, d in self.delta_phi.items():
            ci = d["ci"]
            boot = (
                f"[{ci[0]:+.4f}, {ci[1]:+.4f}]  p = {d['p_value']:.3g}"
                if ci is not None
                else "(no bootstrap)"
            )
            lines.append(
                f"    {name:<16} {d['estimate']:+.4f}  {boot}   (variant "
                f"{d['variant_phi']:.4f}, baseline {d['baseline_phi']:.4f} on "
                f"{len(d['budgets']) if d['budgets'] else 'all'} budgets; "
                f"{d['n_failed']} failed replicates)"
            )
        if self.joint is not None:
            j = self.joint
            lines += [
                "",
                "    Joint fit (shared E, A, alpha, B, beta; phi per recipe): "
                + ", ".join(f"phi[{k}] = {v:.4f}" for k, v in j.phi.items()),
                f"      R^2 {j.r2:.5f}, AIC {j.aic:.2f} vs {j.shared_aic:.2f} (shared phi "
                f"{j.shared.params.get('phi'):.4f}), BIC {j.bic:.2f} vs {j.shared_bic:.2f}",
                f"      {j.verdict}",
            ]
        notes = list(self.notes) + ([f"joint: {n}" for n in self.joint.notes] if self.joint else [])
        lines += ["", "[[Notes]]"] + [f"    [{i}] {n}" for i, n in enumerate([LESSON] + notes, 1)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        """JSON contract: fits {recipe: fit JSON}, delta_phi {variant: {estimate, ci, p_value,
        ...}}, plus baseline_refits, joint, notes."""
        return to_plain(
            {
                "generator": "phifit",
                "kind": "recipes",
                "by": self.by,
                "baseline": self.baseline,
                "method": self.method,
                "block": self.block,
                "n_boot": self.n_boot,
                "seed": self.seed,
                "level": self.level,
                "fits": {k: v.to_dict() for k, v in self.fits.items()},
                "baseline_refits": {k: v.to_dict() for k, v in self.baseline_refits.items()},
                "delta_phi": self.delta_phi,
                "joint": self.joint.to_dict() if self.joint is not None else None,
                "notes": [LESSON] + list(self.notes),
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecipeComparison:
        notes = [n for n in data.get("notes", []) if n != LESSON]
        return cls(
            by=data["by"],
            baseline=data["baseline"],
            fits={k: FitResult.from_dict(v) for k, v in data["fits"].items()},
            baseline_refits={k: FitResult.from_dict(v) for k, v in data.get("baseline_refits", {}).items()},
            delta_phi=dict(data["delta_phi"]),
            joint=JointFit.from_dict(data["joint"]) if data.get("joint") else None,
            block=data["block"],
            n_boot=int(data["n_boot"]),
            seed=int(data["seed"]),
            level=float(data["level"]),
            method=data["method"],
            notes=notes,
        )


# -- the public entry point -----------------------------------------------------------------


def paired_block_weights(
    tables: Sequence[RunTable], cols: list[str], n: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Bootstrap weights that resample the same blocks in every table.

    The blocks are the cells of ``cols`` (e.g. budget, r), pooled over the tables: G cells
    in the union are drawn with replacement and each table's run gets the number of times
    its cell was drawn, so a cell present in several tables (and runs shared between
    them, such as borrowed r = 1 runs) moves together.  Returns the (n, n_runs) weights per
    table, and the delete-one-cell jackknife weights (G, n_runs) per table.  With
    ``cols == ["run"]`` nothing pairs the tables: each is resampled run by run,
    independently, and no jackknife is returned.
    """
    if cols == [SINGLE_RUNS]:
        out = []
        for t in tables:
            m = len(t)
            w = np.zeros((n, m))
            np.add.at(w, (np.repeat(np.arange(n), m), rng.integers(0, m, (n, m)).ravel()), 1.0)
            out.append(w)
        return out, None
    labels = [_cell_labels(t, cols) for t in tables]
    cells = np.unique(np.concatenate(labels))
    codes = [np.searchsorted(cells, lab) for lab in labels]
    g = len(cells)
    draws = rng.integers(0, g, size=(n, g))
    counts = np.zeros((n, g))
    np.add.at(counts, (np.repeat(np.arange(n), g), draws.ravel()), 1.0)
    jack = np.ones((g, g)) - np.eye(g)
    return [counts[:, c] for c in codes], [jack[:, c] for c in codes]


def _p_value(deltas: np.ndarray) -> float:
    d = deltas[np.isfinite(deltas)]
    b = len(d)
    if b == 0:
        return float("nan")
    lo = (1 + np.sum(d <= 0)) / (b + 1)
    hi = (1 + np.sum(d >= 0)) / (b + 1)
    return float(min(1.0, 2 * min(lo, hi)))


def _refit_many(
    table: RunTable,
    point: FitResult,
    weights: np.ndarray,
    method: str,
    seed: np.random.Generator,
    n_jobs: int,
    progress: bool,
    desc: str,
) -> np.ndarray:
    """phi per weighting of ``table`` (NaN where the refit failed or phi is unidentifiable)."""
    spec, _ = effective_spec(table, LawSpec())
    if "phi" in spec.fixed:
        raise ValueError(f"{table.source}: phi is not identifiable (no looped runs or a single r)")
    x_hat = point.theta[spec.free_mask]
    delta = DELTA if method == "huber" else math.inf
    out = refit_weighted(
        table, spec, weights, x_hat, delta=delta, seed=seed, n_jobs=n_jobs, progress=progress, desc=desc
    )
    ok = out["converged"] & np.isfinite(out["objective"]) & identifiable_rows(table, weights)
    ok &= (weights > 0).sum(axis=1) > int(spec.free_mask.sum())
    phi = spec.full_theta(out["x"])[:, 5]
    return np.where(ok, phi, np.nan)


def compare_recipes(
    runs: RunTable,
    *,
    by: str = "variant",
    baseline: Any = None,
    n_boot: int = 1000,
    seed: int = 0,
    block: str | Sequence[str] | None = None,
    method: str = "huber",
    n_starts: int = 500,
    n_jobs: int = 2,
    progress: bool = False,
    level: float = 0.95,
    joint: bool = True,
) -> RecipeComparison:
    """Separate fits per recipe, Delta-phi against ``baseline`` with a paired block bootstrap,
    and the joint fit with shared E, A, alpha, B, beta (see the module docstring).

    Parameters
    ----------
    runs
        Run table with a ``by`` column naming each run's recipe.
    by
        Recipe column (default "variant").
    baseline
        The reference recipe; default: the value "baseline" when present, else the first
        value in sorted order (the choice is recorded in ``notes``).
    n_boot, seed, block, n_jobs, progress, level
        Bootstrap settings (:func:`phifit.bootstrap.block_bootstrap`); ``n_boot = 0`` skips
        the bootstrap (no interval or p-value).
    method, n_starts
        Fitting method ("huber" or "lsq") and its random starts.
    joint
        Also fit the joint law with one phi per recipe.
    """
    if method not in METHODS:
        raise ValueError(f"recipes: unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0 or n_boot == 1:
        raise ValueError(f"n_boot must be 0 (no bootstrap) or an integer >= 2, got {n_boot!r}")
    if by not in runs.frame.columns:
        raise ValueError(
            f"recipes: no column {by!r} in the run table; columns: {', '.join(map(str, runs.frame.columns))}"
        )
    values = sorted(runs.frame[by].unique(), key=str)
    if len(values) < 2:
        raise ValueError(
            f"recipes: column {by!r} has a single value ({values[0]!r}); Delta-phi needs at least two recipes"
        )
    notes: list[str] = []
    by_text = {str(v): v for v in values}
    if baseline is None:
        baseline_key = "baseline" if "baseline" in by_text else str(values[0])
        notes.append(f"baseline not given: using {baseline_key!r}")
    else:
        baseline_key = str(baseline)
        if baseline_key not in by_text:
            raise ValueError(
                f"recipes: baseline {baseline_key!r} is not a value of {by!r}; values: {', '.join(by_text)}"
            )
    base_value = by_text[baseline_key]
    cols = _block_columns(runs, block)
    block_label = ",".join(cols)
    paired = cols != [SINGLE_RUNS]
    if not paired:
        notes.append(
            "no budget column (or block='run'): the two recipes of each Delta-phi are "
            "resampled independently, run by run"
        )

    def options() -> dict[str, Any]:
        opts: dict[str, Any] = {"seed": seed, "n_starts": n_starts}
        if method == "lsq":
            opts["profile"] = False
        return opts

    fits: dict[str, FitResult] = {
        baseline_key: fit_law(
            runs.subset((runs.frame[by] == base_value).to_numpy()), method=method, **options()
        )
    }
    if not fits[baseline_key].phi_identified:
        raise ValueError(
            f"recipes: phi is not identifiable from the baseline {baseline_key!r} "
            f"(it needs looped runs and at least two values of r)"
        )
    baseline_refits: dict[str, FitResult] = {}
    deltas: dict[str, dict[str, Any]] = {}
    seeds = np.random.SeedSequence(seed).spawn(len(values))
    base_budgets = (
        set(map(str, runs.frame.loc[runs.frame[by] == base_value, "budget"]))
        if "budget" in runs.frame.columns
        else None
    )
    for i, key in enumerate(by_text):
        if key == baseline_key:
            continue
        pair = _pair(runs, by, by_text[key], base_value)
        if not (pair.variant.r > 1).any():
            raise ValueError(f"recipes: variant {key!r} has no looped runs (r > 1): phi is undefined for it")
        fv = fit_law(pair.variant, method=method, **options())
        same = base_budgets is None or set(pair.budgets or []) == base_budgets
        fb = fits[baseline_key] if same else fit_law(pair.baseline, method=method, **options())
        fits[key] = fv
        if not same:
            baseline_refits[key] = fb
        entry: dict[str, Any] = {
            "estimate": fv.phi - fb.phi,
            "variant_phi": fv.phi,
            "baseline_phi": fb.phi,
            "budgets": pair.budgets,
            "borrowed_r1": pair.borrowed_r1,
            "n_runs_variant": len(pair.variant),
            "n_runs_baseline": len(pair.baseline),
        }
        if pair.borrowed_r1:
            notes.append(
                f"{key}: no r = 1 runs of its own; borrowed the baseline's "
                f"{pair.borrowed_r1} r = 1 runs on the same budgets"
            )
        if pair.dropped_variant_runs:
            notes.append(
                f"{key}: {pair.dropped_variant_runs} runs on budgets the baseline lacks "
                f"were left out of the comparison"
            )
        if n_boot:
            rng = np.random.default_rng(seeds[i])
            (w_v, w_b), jack = paired_block_weights([pair.variant, pair.baseline], cols, n_boot, rng)
            jw_v, jw_b = jack if jack is not None else (None, None)
            phi_v = _refit_many(pair.variant, fv, w_v, method, rng, n_jobs, progress, f"bootstrap {key}")
            phi_b = _refit_many(
                pair.baseline, fb, w_b, method, rng, n_jobs, progress, f"bootstrap {baseline_key}"
            )
            d = phi_v - phi_b
            jack_d = None
            if jw_v is not None:
                jack_d = _refit_many(pair.variant, fv, jw_v, method, rng, 1, False, "") - _refit_many(
                    pair.baseline, fb, jw_b, method, rng, 1, False, ""
                )
            pct = bootstrap_interval(d, level=level, kind="percentile", mc_seed=seed)
            bca = (
                bootstrap_interval(
                    d, level=level, kind="bca", estimate=entry["estimate"], jackknife=jack_d, mc_seed=seed
                )
                if jack_d is not None
                else None
            )
            n_failed = int(np.sum(~np.isfinite(d)))
            n_blocks = (
                len(set(_cell_labels(pair.variant, cols)) | set(_cell_labels(pair.baseline, cols)))
                if paired
                else len(pair.variant) + len(pair.baseline)
            )
            if n_blocks < 10:
                notes.append(
                    f"{key}: the paired bootstrap resamples only {n_blocks} blocks "
                    f"'{block_label}'; with this few blocks its interval is rough"
                )
            entry.update(
                {
                    "ci": pct.to_list(),
                    "ci_bca": bca.to_list() if bca else None,
                    "n_blocks": n_blocks,
                    "p_value": _p_value(d),
                    "mc_error": list(pct.mc_error),
                    "n_boot": int(n_boot),
                    "n_failed": n_failed,
                    "bootstrap_sd": float(np.nanstd(d, ddof=1)),
                }
            )
            if n_failed:
                notes.append(
                    f"{key}: {n_failed} of {n_boot} bootstrap replicates failed (either "
                    f"refit unconverged or phi unidentifiable) and are excluded"
                )
        else:
            entry.update({"ci": None, "ci_bca": None, "p_value": None, "n_boot": 0, "n_failed": 0})
        deltas[key] = entry

    joint_fit = None
    if joint:
        joint_fit = _fit_joint(runs, by, by_text, baseline_key, method, seed, n_starts)
    return RecipeComparison(
        by=by,
        baseline=baseline_key,
        fits=fits,
        baseline_refits=baseline_refits,
        delta_phi=deltas,
        joint=joint_fit,
        block=block_label,
        n_boot=int(n_boot),
        seed=int(seed),
        level=level,
        method=method,
        notes=notes,
    )


def _fit_joint(
    runs: RunTable, by: str, by_text: dict[str, Any], baseline_key: str, method: str, seed: int, n_starts: int
) -> JointFit:
    """The joint table (budgets common to every recipe, borrowed r = 1 runs once) and fit."""
    frame = runs.frame
    budgets = None
    if "budget" in frame.columns:
        common = set(frame["budget"])
        for v in by_text.values():
            common &= set(frame.loc[frame[by] == v, "budget"])
        if not common:
            raise ValueError("recipes: no budget is shared by every recipe; no joint fit")
        frame = frame[frame["budget"].isin(common)]
        budgets = sorted(map(str, common))
    names = list(by_text)
    parts, groups, tables = [], [], {}
    base_r1 = frame[(frame[by] == by_text[baseline_key]) & (frame["r"] == 1)]
    for gi, name in enumerate(names):
        sub = frame[frame[by] == by_text[name]]
        parts.append(sub)
        groups.append(np.full(len(sub), gi))
        own = sub  # the recipe's own table (with borrowed r = 1 runs) gives a start
        if name != baseline_key and not (sub["r"] == 1).any():
            own = pd.concat([sub, base_r1], ignore_index=True)
        tables[name] = _table(own, f"{runs.source}[{by}={name}]", runs.looped)
    pooled = _table(pd.concat(parts, ignore_index=True), f"{runs.source}[joint]", runs.looped)
    return _joint_fit(
        tables, pooled, np.concatenate(groups), names, method, seed, n_starts, budgets, baseline_key
    )


__all__ = ["JointFit", "RecipeComparison", "compare_recipes", "LESSON"]
