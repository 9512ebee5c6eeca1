"""Does phi differ between recipes?  The joint fit against the shared-phi null.

On the runs of the budgets every recipe has (a variant's borrowed r = 1 runs are the
baseline's and enter once; r = 1 runs do not involve phi) two laws are fitted through the
refit engine (:func:`phifit.fitters.per_recipe_phi.fit_joint`, same objective, box and starts):

- the **joint** law: E, A, alpha, B, beta shared by all recipes and one phi per recipe;
- the **null**: the same law with one phi shared by every recipe.

They are compared by the restricted wild cluster bootstrap (:mod:`phifit.bootstrap.wild`: the shared-phi
fit's residuals, one Rademacher sign per (budget, r) cell, both laws refitted; it holds its size
when runs share noise within a cell), by the Gaussian likelihood ratio on log residuals (sigma
profiled out; approximate for Huber fits; it assumes independent runs), LR = n log(RSS_shared /
RSS_joint), df = recipes - 1, and by AIC/BIC (k counts sigma), from :mod:`phifit.fitters.likelihood`.
A shared phi is rejected when the wild bootstrap gives p < 0.05 (the chi-square test decides
only when the bootstrap is off, ``n_wild=0``, and the verdict then says what it assumes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import defaults
from ..bootstrap.wild import Refit, WildTest, too_few_clusters, wild_cluster_statistics, wild_test_result
from ..cautions import Caution, caution
from ..fitters.likelihood import APPROXIMATE, SIGNIFICANCE, GaussianScore, LRTest, lr_test
from ..fitters.objective import DELTA, loss_terms
from ..fitters.per_recipe_phi import JointOptions, fit_joint, grouped_law, joint_log_loss
from ..law import DEFAULT_BOUNDS
from ..result import FitResult
from ..runs.table import RunTable
from ..serialize import JsonIO, to_plain


@dataclass(frozen=True)
class JointFit(JsonIO):
    """The joint fit (one phi per recipe) against the shared-phi fit on the same runs.

    ``fit`` and ``shared`` are :class:`~phifit.result.FitResult` records (method "joint";
    per-recipe phis in ``fit.extras["phi"]``); ``score`` and ``shared_score`` their Gaussian
    working-likelihood scores; ``lr`` the likelihood-ratio test of the shared phi;
    ``budgets`` the budgets used (None without a budget column); ``wild`` the restricted wild
    cluster bootstrap test of the shared phi (None when it was not run).
    """

    fit: FitResult
    shared: FitResult
    score: GaussianScore
    shared_score: GaussianScore
    lr: LRTest
    budgets: list[str] | None
    verdict: str
    warnings: list[Caution] = field(default_factory=list)
    wild: WildTest | None = None

    # -- the numbers, by name ---------------------------------------------------------------
    @property
    def phi(self) -> dict[str, float]:
        """{recipe: phi} of the joint fit."""
        return dict(self.fit.extras["phi"])

    @property
    def delta_phi(self) -> dict[str, float]:
        """{variant: phi_variant - phi_reference} of the joint fit."""
        ref = self.fit.extras["reference"]
        return {nm: v - self.phi[ref] for nm, v in self.phi.items() if nm != ref}

    @property
    def params(self) -> dict[str, float]:
        """The shared {E, A, alpha, B, beta}."""
        return {k: v for k, v in self.fit.params.items() if k != "phi"}

    n_runs = property(lambda self: self.fit.n_runs, doc="runs in the joint table")
    r2 = property(lambda self: self.fit.r2, doc="R^2 of the joint fit, raw nats")
    aic = property(lambda self: self.score.aic, doc="AIC of the joint fit")
    bic = property(lambda self: self.score.bic, doc="BIC of the joint fit")
    shared_aic = property(lambda self: self.shared_score.aic, doc="AIC of the shared-phi fit")
    shared_bic = property(lambda self: self.shared_score.bic, doc="BIC of the shared-phi fit")
    lr_stat = property(lambda self: self.lr.statistic, doc="LR of the shared phi")
    lr_df = property(lambda self: self.lr.df, doc="recipes - 1")
    lr_p_value = property(lambda self: self.lr.p_value, doc="chi^2(df) p-value of LR")

    def summary(self) -> str:
        return "\n".join(
            [
                "    Joint fit (shared E, A, alpha, B, beta; phi per recipe): "
                + ", ".join(f"phi[{k}] = {v:.4f}" for k, v in self.phi.items()),
                f"      R^2 {self.r2:.5f}, AIC {self.aic:.2f} vs {self.shared_aic:.2f} (shared phi "
                f"{self.shared.params.get('phi'):.4f}), BIC {self.bic:.2f} vs {self.shared_bic:.2f}",
                f"      {self.verdict}",
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON: both fits, their scores, the test, the verdict, plus the headline numbers
        (phi, delta_phi, aic, bic, shared_aic, shared_bic, lr_stat, lr_df, lr_p_value)."""
        return to_plain(
            {
                "fit": self.fit.to_dict(),
                "shared": self.shared.to_dict(),
                "score": self.score.to_dict(),
                "shared_score": self.shared_score.to_dict(),
                "lr": self.lr.to_dict(),
                "budgets": self.budgets,
                "verdict": self.verdict,
                "warnings": [w.to_dict() for w in self.warnings],
                "phi": self.phi,
                "delta_phi": self.delta_phi,
                "n_runs": self.n_runs,
                "r2": self.r2,
                "aic": self.aic,
                "bic": self.bic,
                "shared_aic": self.shared_aic,
                "shared_bic": self.shared_bic,
                "lr_stat": self.lr_stat,
                "lr_df": self.lr_df,
                "lr_p_value": self.lr_p_value,
                "lr_assumption": "chi-square LR, assumes independent runs",
                "wild": None if self.wild is None else self.wild.to_dict(),
                "wild_p_value": None if self.wild is None else self.wild.p_value,
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JointFit:
        return cls(
            fit=FitResult.from_dict(data["fit"]),
            shared=FitResult.from_dict(data["shared"]),
            score=GaussianScore.from_dict(data["score"]),
            shared_score=GaussianScore.from_dict(data["shared_score"]),
            lr=LRTest.from_dict(data["lr"], source="recipes"),
            budgets=None if data.get("budgets") is None else list(data["budgets"]),
            verdict=str(data["verdict"]),
            warnings=[Caution.from_dict(w, source="recipes") for w in data.get("warnings") or []],
            wild=WildTest.from_dict(data["wild"]) if data.get("wild") else None,
        )


def joint_table(runs: RunTable, by: str, recipes: Mapping[str, Any]) -> tuple[RunTable, list[str] | None]:
    """The runs of the budgets every recipe has, each recipe's own runs once (recipe = ``by``).

    A variant's borrowed r = 1 runs are the baseline's, so they are already in the table.
    Returns the table and its budgets (None without a budget column).
    """
    frame = runs.frame
    budgets = None
    if "budget" in frame.columns:
        common = set(frame["budget"])
        for value in recipes.values():
            common &= set(frame.loc[frame[by] == value, "budget"])
        if not common:
            raise ValueError("recipes: no budget is shared by every recipe; no joint fit")
        frame = frame[frame["budget"].isin(common)]
        budgets = sorted(map(str, common))
    parts = [frame[frame[by] == value] for value in recipes.values()]
    pooled = pd.concat(parts, ignore_index=True)
    return RunTable(pooled, source=f"{runs.source}[joint]", looped=runs.looped), budgets


def fit_recipes_jointly(
    runs: RunTable,
    *,
    by: str,
    recipes: Mapping[str, Any],
    baseline: str,
    method: str = "huber",
    seed: int = defaults.SEED,
    n_starts: int = defaults.N_STARTS,
    starts: Mapping[str, FitResult] | None = None,
    n_wild: int = defaults.N_WILD,
) -> JointFit:
    """Joint fit (phi per recipe) and shared-phi fit on :func:`joint_table`, the wild cluster
    bootstrap and LR tests, AIC/BIC.

    ``recipes`` maps each recipe's text to its value in column ``by``; ``starts`` are fits
    (e.g. each recipe's own) whose parameters warm-start both fits; ``n_wild`` replicates of
    the wild cluster bootstrap (0: the chi-square LR test decides).
    """
    table, budgets = joint_table(runs, by, recipes)
    labels = table.frame[by].map({v: k for k, v in recipes.items()}).to_numpy()
    names = list(recipes)
    warm = [f.theta for f in (starts or {}).values()]
    opts = JointOptions(n_starts=n_starts, seed=seed)
    kw = {"recipes": names, "reference": baseline, "method": method, "options": opts}
    shared = fit_joint(table, labels, shared_phi=True, starts=warm, **kw)
    joint = fit_joint(table, labels, starts=[*warm, shared.theta], **kw)
    g = len(names)
    score = GaussianScore.from_residuals(table.log_loss - joint_log_loss(joint, table, labels), 5 + g)
    shared_score = GaussianScore.from_residuals(table.log_loss - joint_log_loss(shared, table, labels), 6)
    lr = lr_test(score, shared_score, g - 1, source="recipes", label="joint")
    warnings = list(lr.warnings) + list(joint.warnings)
    if method == "huber":
        warnings.append(caution("recipes", "approximate_lr", f"joint: {APPROXIMATE}", level="note"))
    wild = None
    if n_wild:
        wild = _wild_joint_test(table, labels, names, shared, joint, method, n_wild, seed)
        warnings += wild.warnings
        text = (
            f"wild cluster bootstrap p = {wild.p_value:.2g}; chi-square LR = {lr.statistic:.2f}, "
            f"df = {lr.df}, p = {lr.p_value:.2g}, which assumes independent runs"
        )
        p_value = wild.p_value
    else:
        text = (
            f"chi-square LR = {lr.statistic:.2f}, df = {lr.df}, p = {lr.p_value:.2g}, "
            "assuming independent runs"
        )
        p_value = lr.p_value
    undecided = _undecided(joint, table, names, wild)
    if undecided:
        verdict = f"undecided: {undecided} ({text}, not read as evidence)"
        warnings.append(caution("recipes", "undecided", f"shared phi: undecided: {undecided}"))
    elif p_value < SIGNIFICANCE:
        verdict = f"phi differs between recipes: a shared phi is rejected ({text})"
    else:
        verdict = f"a shared phi is not rejected ({text})"
    return JointFit(
        fit=joint,
        shared=shared,
        score=score,
        shared_score=shared_score,
        lr=lr,
        budgets=budgets,
        verdict=verdict,
        warnings=warnings,
        wild=wild,
    )


def _undecided(joint: FitResult, table: RunTable, names: list[str], wild: WildTest | None) -> str | None:
    """Why the test of a shared phi cannot be read (None: it can): a recipe's phi on a bound
    of its box (the data do not locate it), too few (budget, r) cells for the per-recipe law's
    5 + G parameters, or a wild test whose smallest attainable p is not below 5%."""
    lo, hi = DEFAULT_BOUNDS["phi"]
    phis = joint.extras.get("phi") or {}
    on_bound = [nm for nm in names if phis.get(nm) is not None and not lo + 1e-6 < phis[nm] < hi - 1e-6]
    if on_bound:
        return (
            f"the phi of {', '.join(on_bound)} sits on the bound of its search box "
            f"({', '.join(f'{phis[nm]:.3g}' for nm in on_bound)}): the data do not locate it"
        )
    codes, _ = table.cells(None)
    n_cells, n_free = int(codes.max()) + 1, 5 + len(names)
    if too_few_clusters(n_cells, n_free):
        return f"{n_cells} (budget, r) cells for the per-recipe law's {n_free} parameters"
    if wild is not None and not wild.resolves(SIGNIFICANCE):
        return f"the wild test's smallest attainable p ({wild.min_p:.2g}) is not below {SIGNIFICANCE:g}"
    return None


def _wild_joint_test(
    table: RunTable,
    labels: np.ndarray,
    names: list[str],
    shared: FitResult,
    joint: FitResult,
    method: str,
    n_boot: int,
    seed: int,
) -> WildTest:
    """The restricted wild cluster bootstrap of "one phi for every recipe" (module docstring):
    clusters are the (budget, r) cells of the joint table, pooled over recipes."""
    delta = DELTA if method == "huber" else np.inf
    design, y = table.design, table.log_loss
    law0 = grouped_law(table, labels, names, shared_phi=True)
    law1 = grouped_law(table, labels, names, shared_phi=False)
    x0 = np.asarray(shared.extras["x"], dtype=float)
    x1 = np.asarray(joint.extras["x"], dtype=float)
    x0_in_1 = np.concatenate([x0[:5], np.repeat(x0[5], len(names))])
    model0, model1 = law0.model(design), law1.model(design)
    y0 = model0(x0[None, :])[0][0]
    observed = float(loss_terms(y0 - y, delta).sum() - loss_terms(model1(x1[None, :])[0][0] - y, delta).sum())
    codes, label = table.cells(None)
    stats, ok = wild_cluster_statistics(
        y,
        y0,
        codes,
        Refit(model0, law0.lower, law0.upper, (x0,)),
        Refit(model1, law1.lower, law1.upper, (x0_in_1, x1)),
        delta,
        n_boot,
        np.random.default_rng(seed),
        n_jobs=1,
    )
    return wild_test_result(
        "shared phi",
        observed,
        stats,
        ok,
        block=label,
        n_blocks=int(codes.max()) + 1,
        seed=seed,
        source="recipes",
    )


__all__ = ["JointFit", "fit_recipes_jointly", "joint_table"]
