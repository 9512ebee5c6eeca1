"""Do the residuals of a joint-law fit show a pattern the law does not explain?

Takes a :class:`~phifit.runs.RunTable` and the :class:`~phifit.result.FitResult` fitted
to it; returns a frozen :class:`ResidualDiagnostics` with ``to_dict()`` (plain JSON
types) and ``summary()`` (text).  Problems are :class:`~phifit.cautions.Caution`
records (source "diagnostics"), never printed.

Residuals (actual - predicted, paper-notes section 1.2)
    resid_i = L_i - L_hat_i (nats),  log_resid_i = log L_i - log L_hat_i.
    Summaries per r and per budget (the study's Table 7): n, mean, max |resid|,
    RMSE = sqrt(mean resid^2), SE = sd / sqrt(n), t = mean / SE.

Systematic per-r offset (the law assumes each recurrence uniformly helps or hurts)
    r is flagged when |mean_r| > k * SE_r  (k = 3: strong evidence of a non-zero mean)
    and |mean_r| > max(floor, rel_floor * RMSE_pooled)  (floor = 0.005 nats,
    rel_floor = 0.5: the offset is at least half the typical residual, so that a
    statistically detectable but negligible offset is not flagged).

Residual tests (on log residuals, the scale on which the fit assumes i.i.d. errors)
    - Jarque-Bera normality (statsmodels ``jarque_bera``);
    - Breusch-Pagan heteroscedasticity, Koenker's studentised form, against the
      fitted log loss and against log N_eff (``het_breuschpagan``);
    - OLS trend of the residuals against log D and against log N_eff (slope t-test).
    Each passes when p >= significance (default 0.01).  When the residuals are at numerical
    precision (RMSE of log residuals < 1e-9, a noise-free table) there is nothing to
    test: each test is reported as passed, with that note.

Outlying runs and a low R^2
    :func:`phifit.fitters.common.fit_quality_cautions`: a run whose robust residual
    |e - median| / (1.4826 MAD) exceeds 5 is flagged by its run id, and R^2 < 0.5 is flagged
    (the same checks, and thresholds, as the fit's own warnings); runs of an r flagged for a
    systematic offset are left to that flag.

The small table helpers :func:`check_fit`, :func:`budget_labels` and
:func:`sorted_unique` are shared with :mod:`phifit.diagnostics.identifiability` and
:mod:`phifit.diagnostics.influence`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..cautions import Caution
from ..fitters.common import fit_quality_cautions
from ..law import log_loss, log_n_eff
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from ..serialize import JsonIO, to_plain

__all__ = [
    "NUMERICAL_PRECISION",
    "GroupRow",
    "ResidualTest",
    "ResidualDiagnostics",
    "residual_diagnostics",
    "residual_tests",
    "check_fit",
    "budget_labels",
    "sorted_unique",
]

#: RMSE of log residuals below which residuals are numerical noise (a noise-free table).
NUMERICAL_PRECISION = 1e-9


# ------------------------------------------------------------------------ table helpers
def check_fit(runs: RunTable, fit: FitResult) -> None:
    """ValueError unless ``fit`` was made on ``runs`` (same run count and run ids)."""
    if fit.n_runs != len(runs):
        raise ValueError(
            f"the fit has {fit.n_runs} runs but the table has {len(runs)}; pass the table the fit was made on"
        )
    if fit.run_ids and list(fit.run_ids) != runs.run_ids:
        raise ValueError("the fit's run_ids differ from the table's; pass the table the fit was made on")


def budget_labels(runs: RunTable) -> np.ndarray | None:
    """The ``budget`` column (None when the table has none)."""
    return runs.frame["budget"].to_numpy() if "budget" in runs.frame else None


def scalar(value: Any) -> Any:
    """A NumPy scalar as a plain Python value."""
    return value.item() if hasattr(value, "item") else value


def sorted_unique(values: np.ndarray) -> list[Any]:
    """Distinct values, sorted (by their text when they do not compare)."""
    uniq = list(dict.fromkeys(values.tolist()))
    try:
        return sorted(uniq)
    except TypeError:
        return sorted(uniq, key=str)


@dataclass(frozen=True)
class GroupRow(JsonIO):
    """Residual summary of one group (an r, a budget, or all runs), in nats.

    mean = mean(resid), max_abs = max |resid|, rmse = sqrt(mean(resid^2)),
    se = sd(resid, ddof=1) / sqrt(n) (NaN for n < 2), t = mean / se.
    """

    group: Any
    n: int
    mean: float
    max_abs: float
    rmse: float
    se: float
    t: float
    flagged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)


def _group_row(group: Any, resid: np.ndarray, flagged: bool = False) -> GroupRow:
    n = len(resid)
    mean = float(np.mean(resid))
    se = float(np.std(resid, ddof=1) / math.sqrt(n)) if n >= 2 else float("nan")
    if not se > 0:
        t = 0.0 if abs(mean) == 0 else (math.copysign(math.inf, mean) if se == 0 else float("nan"))
    else:
        t = mean / se
    return GroupRow(
        group=group,
        n=n,
        mean=mean,
        max_abs=float(np.max(np.abs(resid))),
        rmse=float(np.sqrt(np.mean(resid**2))),
        se=se,
        t=float(t),
        flagged=flagged,
    )


@dataclass(frozen=True)
class ResidualTest(JsonIO):
    """One residual test: H0 is 'no pattern'; ``passed`` when p >= significance.

    ``against`` names the regressor (for Breusch-Pagan and trend tests); ``estimate``
    is the trend slope (log residual per unit of the regressor) where it applies.
    """

    name: str
    against: str
    statistic: float
    pvalue: float
    significance: float
    passed: bool
    estimate: float | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)


@dataclass(frozen=True)
class ResidualDiagnostics(JsonIO):
    """Per-run residuals, per-r and per-budget summaries, residual tests and flags.

    Arrays are in table order.  ``fitted_log`` is log L_hat; ``qq_theoretical`` and
    ``qq_sample`` are the normal QQ coordinates of the standardised log residuals
    (Blom plotting positions (i - 3/8) / (n + 1/4)).
    """

    run_ids: list[str]
    r: list[int]
    budget: list[Any] | None
    loss: list[float]
    predicted: list[float]
    resid: list[float]
    log_resid: list[float]
    fitted_log: list[float]
    log_n_eff: list[float]
    log_tokens: list[float]
    pooled: GroupRow
    by_r: list[GroupRow]
    by_budget: list[GroupRow] | None
    tests: list[ResidualTest]
    flags: list[Caution]
    offset_rule: dict[str, float]
    numerically_exact: bool
    qq_theoretical: list[float]
    qq_sample: list[float]

    @property
    def passed(self) -> bool:
        """All residual tests pass and no r is flagged."""
        return all(t.passed for t in self.tests) and not self.flags

    @property
    def flagged_r(self) -> list[int]:
        return [int(row.group) for row in self.by_r if row.flagged]

    def to_frame(self) -> pd.DataFrame:
        """One row per run, in table order: ``run_id``, ``r``, ``budget`` (when the table has
        one), ``loss``, ``predicted``, ``resid`` (nats), ``log_resid``, ``fitted_log``,
        ``log_n_eff``, ``log_tokens``."""
        cols = ["run_id", "r", "budget", "loss", "predicted", "resid", "log_resid", "fitted_log"]
        cols += ["log_n_eff", "log_tokens"]
        data = {"run_id": self.run_ids, **{c: getattr(self, c) for c in cols[1:]}}
        if data["budget"] is None:
            del data["budget"]
        return pd.DataFrame(data)

    def to_dict(self) -> dict[str, Any]:
        out = {
            k: getattr(self, k)
            for k in (
                "run_ids",
                "r",
                "budget",
                "loss",
                "predicted",
                "resid",
                "log_resid",
                "fitted_log",
                "log_n_eff",
                "log_tokens",
                "offset_rule",
                "numerically_exact",
                "qq_theoretical",
                "qq_sample",
            )
        }
        out["pooled"] = self.pooled.to_dict()
        out["by_r"] = [g.to_dict() for g in self.by_r]
        out["by_budget"] = None if self.by_budget is None else [g.to_dict() for g in self.by_budget]
        out["tests"] = [t.to_dict() for t in self.tests]
        out["flags"] = [f.to_dict() for f in self.flags]
        out["passed"] = self.passed
        return to_plain(out)

    def summary(self) -> str:
        lines = [
            "[[Residuals (actual - predicted, nats)]]",
            f"    {'group':<12} {'n':>4} {'mean':>9} {'max|res|':>9} {'RMSE':>8} {'t':>7}",
        ]

        def row(label: str, g: GroupRow) -> str:
            flag = "  <- systematic offset" if g.flagged else ""
            return (
                f"    {label:<12} {g.n:>4} {g.mean:>+9.4f} {g.max_abs:>9.4f} {g.rmse:>8.4f} {g.t:>7.1f}{flag}"
            )

        for g in self.by_r:
            lines.append(row(f"r={g.group}", g))
        lines.append(row("pooled", self.pooled))
        if self.by_budget:
            for g in self.by_budget:
                label = f"C={g.group:.3g}" if isinstance(g.group, (int, float)) else str(g.group)
                lines.append(row(label, g))
        lines += ["", "[[Residual tests (log residuals)]]"]
        for t in self.tests:
            p = "n/a" if not math.isfinite(t.pvalue) else f"{t.pvalue:.3g}"
            verdict = "pass" if t.passed else "FAIL"
            lines.append(
                f"    {t.name:<16} vs {t.against:<14} p = {p:<8} {verdict}"
                + (f"  ({t.note})" if t.note else "")
            )
        if self.flags:
            lines += ["", "[[Flags]]"] + [f"    [{f.kind}] {f.message}" for f in self.flags]
        return "\n".join(lines)


def _offsets_by_r(
    resid: np.ndarray, r: np.ndarray, k: float, threshold: float
) -> tuple[list[GroupRow], list[Caution]]:
    """Per-r residual rows and the ``systematic_r_offset`` cautions: r is flagged when
    |mean_r| > k SE_r and |mean_r| > ``threshold`` (nats), with at least 2 runs."""
    by_r: list[GroupRow] = []
    flags: list[Caution] = []
    for value in np.unique(r):
        g = _group_row(int(value), resid[r == value])
        hit = g.n >= 2 and abs(g.t) > k and abs(g.mean) > threshold
        if hit:
            g = GroupRow(**{**g.__dict__, "flagged": True})
            side = "above" if g.mean > 0 else "below"
            flags.append(
                Caution(
                    "diagnostics",
                    "systematic_r_offset",
                    f"r = {g.group}: runs lie systematically {side} the law (mean residual "
                    f"{g.mean:+.4f} nats, t = {g.t:.1f}, n = {g.n}); the law assumes each r uniformly "
                    f"helps or hurts, so phi may be biased: inspect the r = {g.group} runs or fit "
                    f"without them",
                    {"r": g.group, "mean": g.mean, "t": g.t, "n": g.n, "threshold": threshold, "k": k},
                )
            )
        by_r.append(g)
    return by_r, flags


def r_offset_flags(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    k: float = 3.0,
    floor: float = 0.005,
    rel_floor: float = 0.5,
) -> list[Caution]:
    """Only the per-r offset flags of :func:`residual_diagnostics` (same rule, same cautions),
    without its residual tests: what ``phifit fit`` prints, with no statsmodels or scipy.stats."""
    runs = as_runs(runs)
    check_fit(runs, fit)
    if k <= 0 or floor < 0 or rel_floor < 0:
        raise ValueError("k must be > 0 and floor, rel_floor >= 0")
    resid = runs.loss - np.exp(log_loss(fit.theta, runs.design))
    threshold = max(floor, rel_floor * _group_row("all", resid).rmse)
    return _offsets_by_r(resid, runs.r.astype(int), k, threshold)[1]


def residual_diagnostics(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    significance: float = 0.01,
    k: float = 3.0,
    floor: float = 0.005,
    rel_floor: float = 0.5,
) -> ResidualDiagnostics:
    """Residuals, per-r / per-budget summaries, residual tests and the per-r offset flag.

    Parameters
    ----------
    runs, fit
        The table and the fit made on it.
    significance
        Significance level of each residual test.
    k, floor, rel_floor
        Per-r offset rule: flag r when |mean_r| > k SE_r and
        |mean_r| > max(floor, rel_floor * RMSE_pooled) (nats).
    """
    runs = as_runs(runs)
    check_fit(runs, fit)
    if not 0 < significance < 1:
        raise ValueError(f"significance must be in (0, 1), got {significance}")
    if k <= 0 or floor < 0 or rel_floor < 0:
        raise ValueError("k must be > 0 and floor, rel_floor >= 0")
    from scipy import stats  # imported here: a point fit reads only the offset flags (r_offset_flags)

    theta = fit.theta
    design = runs.design
    fitted_log = log_loss(theta, design)
    predicted = np.exp(fitted_log)
    resid = runs.loss - predicted
    log_resid = runs.log_loss - fitted_log
    lne = log_n_eff(theta[5], design)
    r = runs.r.astype(int)
    pooled = _group_row("all", resid)
    threshold = max(floor, rel_floor * pooled.rmse)
    by_r, flags = _offsets_by_r(resid, r, k, threshold)

    n_free = sum(1 for k, v in fit.params.items() if v is not None and k not in fit.fixed)
    offset_r = [int(g.group) for g in by_r if g.flagged]
    flags += fit_quality_cautions(
        resid, runs.run_ids, fit.r2, n_free, source="diagnostics", explained=np.isin(r, offset_r)
    )

    budgets = budget_labels(runs)
    by_budget = None
    if budgets is not None:
        by_budget = [_group_row(scalar(b), resid[budgets == b]) for b in sorted_unique(budgets)]

    exact = float(np.sqrt(np.mean(log_resid**2))) < NUMERICAL_PRECISION
    tests = residual_tests(log_resid, fitted_log, lne, design.log_tokens, significance, exact)
    n = len(log_resid)
    sd = float(np.std(log_resid, ddof=1)) if n > 1 else 0.0
    standard = np.sort((log_resid - log_resid.mean()) / sd) if sd > 0 else np.zeros(n)
    theo = stats.norm.ppf((np.arange(1, n + 1) - 0.375) / (n + 0.25))
    return ResidualDiagnostics(
        run_ids=runs.run_ids,
        r=r.tolist(),
        budget=None if budgets is None else [scalar(b) for b in budgets],
        loss=runs.loss.tolist(),
        predicted=predicted.tolist(),
        resid=resid.tolist(),
        log_resid=log_resid.tolist(),
        fitted_log=fitted_log.tolist(),
        log_n_eff=lne.tolist(),
        log_tokens=design.log_tokens.tolist(),
        pooled=pooled,
        by_r=by_r,
        by_budget=by_budget,
        tests=tests,
        flags=flags,
        offset_rule={"k": k, "floor": floor, "rel_floor": rel_floor, "threshold": threshold},
        numerically_exact=exact,
        qq_theoretical=theo.tolist(),
        qq_sample=standard.tolist(),
    )


def untested(name: str, against: str, significance: float, why: str) -> ResidualTest:
    """A test that could not be run (``why``): no statistic, counted as passed."""
    return ResidualTest(name, against, float("nan"), float("nan"), significance, True, None, why)


def residual_tests(
    log_resid: np.ndarray,
    fitted_log: np.ndarray,
    lne: np.ndarray,
    log_tokens: np.ndarray,
    significance: float,
    exact: bool,
) -> list[ResidualTest]:
    """The five residual tests (see the module docstring) of ``log_resid``.

    ``fitted_log``, ``lne`` and ``log_tokens`` are the regressors (log L_hat, log N_eff,
    log D); ``exact`` marks residuals at numerical precision (nothing to test).
    """
    from statsmodels.regression.linear_model import OLS
    from statsmodels.stats.diagnostic import het_breuschpagan
    from statsmodels.stats.stattools import jarque_bera

    specs = [
        ("jarque_bera", "normal"),
        ("breusch_pagan", "fitted"),
        ("breusch_pagan", "log_n_eff"),
        ("trend", "log_tokens"),
        ("trend", "log_n_eff"),
    ]
    if exact:
        note = "residuals at numerical precision (noise-free table): nothing to test"
        return [
            ResidualTest(name, against, float("nan"), float("nan"), significance, True, None, note)
            for name, against in specs
        ]
    regressors = {"fitted": fitted_log, "log_n_eff": lne, "log_tokens": log_tokens}
    out: list[ResidualTest] = []
    n = len(log_resid)
    for name, against in specs:
        if n < 8:
            out.append(untested(name, against, significance, f"only {n} runs: too few to test"))
            continue
        estimate = None
        note = ""
        if name == "jarque_bera":
            stat, p, _, _ = jarque_bera(log_resid)
        else:
            x = regressors[against]
            if np.ptp(x) <= 1e-12 * max(1.0, float(np.max(np.abs(x)))):
                out.append(untested(name, against, significance, f"{against} does not vary: nothing to test"))
                continue
            exog = np.column_stack([np.ones(n), x])
            if name == "breusch_pagan":
                stat, p, _, _ = het_breuschpagan(log_resid, exog, robust=True)
                note = "Koenker studentised LM statistic, chi2 with 1 df"
            else:
                ols = OLS(log_resid, exog).fit()
                stat, p, estimate = float(ols.tvalues[1]), float(ols.pvalues[1]), float(ols.params[1])
                note = "t statistic of the OLS slope"
        p = float(p)
        out.append(
            ResidualTest(
                name,
                against,
                float(stat),
                p,
                significance,
                bool(not math.isfinite(p) or p >= significance),
                estimate,
                note,
            )
        )
    return out
