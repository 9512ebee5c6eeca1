"""Residual diagnostics of a joint-law fit: numbers first, plots are drawn from these.

Everything here takes a :class:`~phifit.runs.RunTable` and the
:class:`~phifit.result.FitResult` fitted to it, and returns small frozen
dataclasses with ``to_dict()`` (plain JSON types) and ``summary()`` (text).
Problems are returned as :class:`DiagnosticWarning` records (kind, message,
values), never printed.

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
    Each passes when p >= alpha (default 0.01).  When the residuals are at numerical
    precision (RMSE of log residuals < 1e-9, a noise-free table) there is nothing to
    test: each test is reported as passed, with that note.

Influence
    Leave-one-run-out and leave-one-cell-out (cell = (budget, r)) change in phi,
    delta_i = phi_(-i) - phi_hat.  Leaving runs out = weighting them 0 in the summed
    objective; all refits run together, warm-started from the full-data optimum, in the
    vectorised projected Levenberg-Marquardt of :func:`phifit.fitters.engine.batched_weighted_lm`.

Identifiability
    Gauss-Newton information I = J^T W J of the log-loss Jacobian at the optimum
    (W: Huber IRLS weights), the parameter correlation matrix of I^-1, the condition
    number of I after scaling it to unit diagonal, approximate standard errors
    sigma^2 I^-1 with sigma^2 = sum(log_resid^2) / (n - k); a profile of the Huber
    objective along phi (the other parameters refitted at each phi), with the
    Gaussian profile deviance n log(SSR(phi) / SSR_min) and the approximate 95%
    interval where it is below chi2_1(0.95) = 3.84; design warnings when the runs
    cannot separate phi.

Consistency
    phi refitted on the lower and upper halves of the budgets (the study: 0.44 on
    C <= 2.15e18, 0.49 on C >= 4.64e18) and on each pair {1, r}.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from .fitters.common import goodness_of_fit
from .fitters.engine import DELTA, batched_weighted_lm, law_model, polish
from .fitters.huber import HuberOptions, fit_huber, huber_objective
from .law import PARAM_NAMES, THETA_NAMES, THETA_TO_PARAM, LawSpec, log_loss, log_loss_and_jacobian, log_n_eff
from .plain import to_plain
from .result import FitResult
from .runs import RunTable

__all__ = [
    "DiagnosticWarning",
    "GroupRow",
    "ResidualTest",
    "ResidualDiagnostics",
    "Influence",
    "Identifiability",
    "Consistency",
    "Diagnostics",
    "residual_diagnostics",
    "influence",
    "identifiability",
    "consistency",
    "design_warnings",
    "diagnose",
    "data_summary",
    "NUMERICAL_PRECISION",
]

#: RMSE of log residuals below which residuals are numerical noise (a noise-free table).
NUMERICAL_PRECISION = 1e-9
#: chi2_1 quantile for an approximate 95% profile interval.
_CHI2_95 = float(stats.chi2.ppf(0.95, 1))


# ---------------------------------------------------------------------------- records
@dataclass(frozen=True)
class DiagnosticWarning:
    """A structured warning: ``kind`` (machine tag), ``message`` (what and what to do), ``values``."""

    kind: str
    message: str
    values: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return to_plain({"kind": self.kind, "message": self.message, "values": dict(self.values)})

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


@dataclass(frozen=True)
class GroupRow:
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
class ResidualTest:
    """One residual test: H0 is 'no pattern'; ``passed`` when p >= alpha.

    ``against`` names the regressor (for Breusch-Pagan and trend tests); ``estimate``
    is the trend slope (log residual per unit of the regressor) where it applies.
    """

    name: str
    against: str
    statistic: float
    pvalue: float
    alpha: float
    passed: bool
    estimate: float | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)


# ------------------------------------------------------------------------- residuals
def _check_fit(runs: RunTable, fit: FitResult) -> None:
    if fit.n_runs != len(runs):
        raise ValueError(
            f"the fit has {fit.n_runs} runs but the table has {len(runs)}; pass the table the fit was made on"
        )
    if fit.run_ids and list(fit.run_ids) != runs.run_ids:
        raise ValueError("the fit's run_ids differ from the table's; pass the table the fit was made on")


def _budget_labels(runs: RunTable) -> np.ndarray | None:
    return runs.frame["budget"].to_numpy() if "budget" in runs.frame else None


@dataclass(frozen=True)
class ResidualDiagnostics:
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
    flags: list[DiagnosticWarning]
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
            lines += ["", "[[Flags]]"] + [f"    {f}" for f in self.flags]
        return "\n".join(lines)


def residual_diagnostics(
    runs: RunTable,
    fit: FitResult,
    *,
    alpha: float = 0.01,
    k: float = 3.0,
    floor: float = 0.005,
    rel_floor: float = 0.5,
) -> ResidualDiagnostics:
    """Residuals, per-r / per-budget summaries, residual tests and the per-r offset flag.

    Parameters
    ----------
    runs, fit
        The table and the fit made on it.
    alpha
        Significance level of each residual test.
    k, floor, rel_floor
        Per-r offset rule: flag r when |mean_r| > k SE_r and
        |mean_r| > max(floor, rel_floor * RMSE_pooled) (nats).
    """
    _check_fit(runs, fit)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if k <= 0 or floor < 0 or rel_floor < 0:
        raise ValueError("k must be > 0 and floor, rel_floor >= 0")
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

    by_r: list[GroupRow] = []
    flags: list[DiagnosticWarning] = []
    for value in np.unique(r):
        g = _group_row(int(value), resid[r == value])
        hit = g.n >= 2 and abs(g.t) > k and abs(g.mean) > threshold
        if hit:
            g = GroupRow(**{**g.__dict__, "flagged": True})
            side = "above" if g.mean > 0 else "below"
            flags.append(
                DiagnosticWarning(
                    "systematic_r_offset",
                    f"r = {g.group}: runs lie systematically {side} the law (mean residual "
                    f"{g.mean:+.4f} nats, t = {g.t:.1f}, n = {g.n}); the law assumes each r uniformly "
                    f"helps or hurts, so phi may be biased: inspect the r = {g.group} runs or fit "
                    f"without them",
                    {"r": g.group, "mean": g.mean, "t": g.t, "n": g.n, "threshold": threshold, "k": k},
                )
            )
        by_r.append(g)

    budgets = _budget_labels(runs)
    by_budget = None
    if budgets is not None:
        by_budget = [_group_row(_scalar(b), resid[budgets == b]) for b in _sorted_unique(budgets)]

    exact = float(np.sqrt(np.mean(log_resid**2))) < NUMERICAL_PRECISION
    tests = _residual_tests(log_resid, fitted_log, lne, design.log_tokens, alpha, exact)
    n = len(log_resid)
    sd = float(np.std(log_resid, ddof=1)) if n > 1 else 0.0
    standard = np.sort((log_resid - log_resid.mean()) / sd) if sd > 0 else np.zeros(n)
    theo = stats.norm.ppf((np.arange(1, n + 1) - 0.375) / (n + 0.25))
    return ResidualDiagnostics(
        run_ids=runs.run_ids,
        r=r.tolist(),
        budget=None if budgets is None else [_scalar(b) for b in budgets],
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


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _sorted_unique(values: np.ndarray) -> list[Any]:
    uniq = list(dict.fromkeys(values.tolist()))
    try:
        return sorted(uniq)
    except TypeError:
        return sorted(uniq, key=str)


def _residual_tests(
    log_resid: np.ndarray,
    fitted_log: np.ndarray,
    lne: np.ndarray,
    log_tokens: np.ndarray,
    alpha: float,
    exact: bool,
) -> list[ResidualTest]:
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
            ResidualTest(name, against, float("nan"), float("nan"), alpha, True, None, note)
            for name, against in specs
        ]
    regressors = {"fitted": fitted_log, "log_n_eff": lne, "log_tokens": log_tokens}
    out: list[ResidualTest] = []
    n = len(log_resid)
    for name, against in specs:
        if n < 8:
            out.append(
                ResidualTest(
                    name,
                    against,
                    float("nan"),
                    float("nan"),
                    alpha,
                    True,
                    None,
                    f"only {n} runs: too few to test",
                )
            )
            continue
        estimate = None
        note = ""
        if name == "jarque_bera":
            stat, p, _, _ = jarque_bera(log_resid)
        else:
            x = regressors[against]
            if np.ptp(x) <= 1e-12 * max(1.0, float(np.max(np.abs(x)))):
                out.append(
                    ResidualTest(
                        name,
                        against,
                        float("nan"),
                        float("nan"),
                        alpha,
                        True,
                        None,
                        f"{against} does not vary: nothing to test",
                    )
                )
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
                name, against, float(stat), p, alpha, bool(not math.isfinite(p) or p >= alpha), estimate, note
            )
        )
    return out


# ------------------------------------------------------------------------- refitting
def _spec_of(fit: FitResult) -> LawSpec:
    return LawSpec(fixed=dict(fit.fixed))


def _delta_of(fit: FitResult) -> float:
    return float(fit.extras.get("delta", DELTA)) if fit.extras else DELTA


def _warm_refit(sub: RunTable, spec: LawSpec, theta0: np.ndarray, delta: float) -> np.ndarray:
    """Full theta of the Huber optimum on ``sub``, polished from ``theta0`` (warm start)."""
    sol = polish(theta0[spec.free_mask], spec, sub.design, sub.log_loss, delta)
    return spec.full_theta(sol.x)


def _refit(
    sub: RunTable, spec: LawSpec, theta0: np.ndarray, delta: float, n_starts: int, seed: int
) -> np.ndarray:
    """Best of a warm-started polish from ``theta0`` and a fresh ``n_starts``-start Huber fit."""
    warm = _warm_refit(sub, spec, theta0, delta)
    best, best_obj = warm, float(huber_objective(warm, sub, delta))
    if n_starts > 0:
        cold = fit_huber(
            sub,
            spec=spec,
            options=HuberOptions(n_starts=n_starts, seed=seed, delta=delta, n_refine=min(50, n_starts)),
        )
        theta = cold.theta
        obj = float(huber_objective(theta, sub, delta))
        if obj < best_obj:
            best = theta
    return best


def _require_free_phi(fit: FitResult, what: str) -> None:
    if fit.phi is None:
        raise ValueError(f"{what}: phi is not identified in this fit (no looped runs or one r)")
    if "phi" in fit.fixed:
        raise ValueError(
            f"{what}: phi is fixed at {fit.fixed['phi']:g} in this fit; pass the fit with phi free"
        )


# ------------------------------------------------------------------------- influence
@dataclass(frozen=True)
class Influence:
    """Change in phi when one run, or one (budget, r) cell, is left out.

    ``runs``: per run {run_id, r, budget, phi, delta_phi} in table order;
    ``cells``: per cell {cell, budget, r, n, phi, delta_phi}, or None without a budget
    column; ``top``: the ``n_top`` runs with the largest |delta_phi|.
    """

    phi_hat: float
    runs: list[dict[str, Any]]
    cells: list[dict[str, Any]] | None
    top: list[dict[str, Any]]
    method: str
    notes: list[str]

    @property
    def max_abs_delta(self) -> float:
        """max |delta_phi| over runs (refits that failed are ignored)."""
        values = [abs(x["delta_phi"]) for x in self.runs if math.isfinite(x["delta_phi"])]
        return max(values) if values else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)

    def summary(self) -> str:
        lines = [f"[[Influence on phi = {self.phi_hat:.4f}]]", "    runs that move phi most:"]
        for x in self.top:
            lines.append(
                f"      {x['run_id']:<28} r={x['r']:<3} phi_(-i) = {x['phi']:.4f}  "
                f"delta = {x['delta_phi']:+.4f}"
            )
        if self.cells:
            worst = sorted(
                (c for c in self.cells if math.isfinite(c["delta_phi"])), key=lambda c: -abs(c["delta_phi"])
            )[:3]
            lines.append("    cells that move phi most:")
            for c in worst:
                lines.append(
                    f"      {c['cell']:<28} n={c['n']:<3} phi = {c['phi']:.4f}  delta = {c['delta_phi']:+.4f}"
                )
        lines += [f"    note: {n}" for n in self.notes]
        return "\n".join(lines)


def influence(runs: RunTable, fit: FitResult, *, n_top: int = 5) -> Influence:
    """Leave-one-run-out and leave-one-cell-out change in phi (warm-started Huber refits).

    delta_i = phi_hat(without run i) - phi_hat.  Cells are (budget, r) blocks, the
    study's bootstrap unit; without a ``budget`` column only runs are left out.
    """
    _check_fit(runs, fit)
    _require_free_phi(fit, "influence")
    spec, delta, theta = _spec_of(fit), _delta_of(fit), fit.theta
    phi_hat = float(theta[5])
    n = len(runs)
    ids, r = runs.run_ids, runs.r.astype(int)
    budgets = _budget_labels(runs)
    notes: list[str] = []
    out_masks = [np.eye(n, dtype=bool)[i] for i in range(n)]
    cell_keys: list[tuple[Any, int]] = []
    if budgets is None:
        notes.append("no 'budget' column: leave-one-cell-out needs (budget, r) cells; skipped")
    else:
        for b in _sorted_unique(budgets):
            for value in np.unique(r):
                mask = (budgets == b) & (r == value)
                if mask.any():
                    cell_keys.append((b, int(value)))
                    out_masks.append(mask)
    phis, failed = _left_out_phis(runs, spec, theta, delta, np.array(out_masks))
    if failed:
        notes.append(f"{failed} leave-out refit(s) did not converge; their phi is reported as null")
    per_run = [
        {
            "run_id": ids[i],
            "r": int(r[i]),
            "budget": None if budgets is None else _scalar(budgets[i]),
            "phi": float(phis[i]),
            "delta_phi": float(phis[i] - phi_hat),
        }
        for i in range(n)
    ]
    cells = None
    if budgets is not None:
        cells = []
        for k, (b, value) in enumerate(cell_keys):
            phi = float(phis[n + k])
            label = f"C={b:.3g}, r={value}" if isinstance(_scalar(b), (int, float)) else f"{b}, r={value}"
            cells.append(
                {
                    "cell": label,
                    "budget": _scalar(b),
                    "r": value,
                    "n": int(out_masks[n + k].sum()),
                    "phi": phi,
                    "delta_phi": phi - phi_hat,
                }
            )
    finite = [x for x in per_run if math.isfinite(x["delta_phi"])]
    top = sorted(finite, key=lambda x: -abs(x["delta_phi"]))[:n_top]
    return Influence(
        phi_hat=phi_hat,
        runs=per_run,
        cells=cells,
        top=top,
        method="Huber refits warm-started from the full-data optimum (vectorised "
        "projected Levenberg-Marquardt on 0/1-weighted tables)",
        notes=notes,
    )


def _left_out_phis(
    runs: RunTable, spec: LawSpec, theta: np.ndarray, delta: float, left_out: np.ndarray
) -> tuple[np.ndarray, int]:
    """phi refitted without the runs of each row of ``left_out`` (m, n), all at once.

    Leaving runs out is weighting them 0 in the summed objective, so every refit is a
    row of :func:`phifit.fitters.engine.batched_weighted_lm` started at the full-data optimum;
    a row that does not converge is refitted alone with :func:`phifit.fitters.engine.polish`
    from the same start; a refit whose remaining runs cannot identify phi, or that still
    does not converge, is NaN.
    """

    weights = (~left_out).astype(float)
    x0 = np.tile(theta[spec.free_mask], (len(weights), 1))
    res = batched_weighted_lm(
        law_model(spec, runs.design), x0, runs.log_loss, weights, spec.lower, spec.upper, delta=delta
    )
    phis = spec.full_theta(res.x)[:, 5]
    looped = (runs.r > 1) & (runs.n_rec > 0)
    keep = weights > 0
    n_r = np.zeros(len(weights), int)
    for value in np.unique(runs.r):
        n_r += (keep & (runs.r == value)).any(axis=1)
    ident = (keep & looped).any(axis=1) & (n_r >= 2)
    ok = ident & res.converged & np.isfinite(res.objective)
    for i in np.flatnonzero(ident & ~ok):  # fall back to scipy's least_squares polish
        kept = runs.subset(~left_out[i])
        sol = polish(
            theta[spec.free_mask],
            spec,
            kept.design,
            kept.log_loss,
            delta,
        )
        if sol.status > 0 and np.all(np.isfinite(sol.x)):
            phis[i] = spec.full_theta(sol.x)[5]
            ok[i] = True
    return np.where(ok, phis, np.nan), int((ident & ~ok).sum())


# ------------------------------------------------------------------- identifiability
def design_warnings(
    runs: RunTable,
    *,
    phi: float = 0.5,
    min_looped: int = 6,
    min_log_r_sd: float = 0.25,
    min_rec_share: float = 0.05,
) -> list[DiagnosticWarning]:
    """Warnings when the design cannot separate phi (data only, no fit needed).

    - ``phi_unidentifiable``: no looped run (r > 1, n_rec > 0) or a single value of r;
    - ``r_barely_varies``: sd of log r over runs < ``min_log_r_sd`` (0.25; the paper's
      r in {1, 2, 4, 8} gives 0.78, half r = 1 / half r = 2 gives 0.35);
    - ``few_looped_runs``: fewer than ``min_looped`` runs with r > 1;
    - ``n_rec_tiny``: median over looped runs of the looped share of the effective size,
      r^phi n_rec / N_eff (at ``phi``), below ``min_rec_share`` (0.05): phi then moves
      N_eff, hence the loss, too little to be measured.
    """
    out: list[DiagnosticWarning] = []
    r, n_rec, n_once = runs.r, runs.n_rec, runs.n_once
    looped = (r > 1) & (n_rec > 0)
    if not runs.phi_identifiable:
        why = "no looped runs (r > 1 with n_rec > 0)" if not looped.any() else "a single value of r"
        out.append(
            DiagnosticWarning(
                "phi_unidentifiable",
                f"phi cannot be estimated: {why}; add runs at a second r",
                {"r_values": sorted(set(r.astype(int).tolist()))},
            )
        )
        return out
    sd = float(np.std(np.log(r)))
    if sd < min_log_r_sd:
        out.append(
            DiagnosticWarning(
                "r_barely_varies",
                f"r barely varies (sd of log r = {sd:.3f} < {min_log_r_sd}): phi is weakly "
                f"identified; add runs at r = 1 and at a larger r",
                {"sd_log_r": sd, "r_values": sorted(set(r.astype(int).tolist()))},
            )
        )
    if looped.sum() < min_looped:
        out.append(
            DiagnosticWarning(
                "few_looped_runs",
                f"only {int(looped.sum())} looped runs (< {min_looped}): phi rests on very few points",
                {"n_looped": int(looped.sum())},
            )
        )
    share = (r[looped] ** phi * n_rec[looped]) / (n_once[looped] + r[looped] ** phi * n_rec[looped])
    med = float(np.median(share))
    if med < min_rec_share:
        out.append(
            DiagnosticWarning(
                "n_rec_tiny",
                f"the shared block is a tiny part of the model (median r^phi n_rec / N_eff = "
                f"{med:.3f} < {min_rec_share} at phi = {phi:g}): phi barely moves the predicted loss "
                f"and cannot be separated from A and alpha",
                {"median_share": med, "phi": phi},
            )
        )
    return out


@dataclass(frozen=True)
class Identifiability:
    """Correlations, conditioning and the phi profile at the optimum.

    ``names``: the free parameters, internal coordinates (a = log A, b = log B, e = log E);
    ``correlation``: k x k correlation matrix of (J^T W J)^-1; ``condition_number``:
    of J^T W J scaled to unit diagonal; ``stderr``: approximate Gauss-Newton standard
    errors (internal coordinates, and A, B, E by the delta method); ``profile``: {phi,
    objective, ssr, deviance, params}; ``profile_interval``: approximate 95% interval
    where deviance < 3.84 (None when phi is fixed or not identified); ``warnings``: design and fit warnings.
    """

    names: list[str]
    correlation: list[list[float]]
    condition_number: float
    stderr: dict[str, float]
    profile: dict[str, list[float]] | None
    profile_interval: list[float] | None
    warnings: list[DiagnosticWarning]

    def corr(self, x: str, y: str) -> float:
        return self.correlation[self.names.index(x)][self.names.index(y)]

    def to_dict(self) -> dict[str, Any]:
        out = {
            k: getattr(self, k)
            for k in ("names", "correlation", "condition_number", "stderr", "profile", "profile_interval")
        }
        out["warnings"] = [w.to_dict() for w in self.warnings]
        return to_plain(out)

    def summary(self) -> str:
        lines = [
            "[[Identifiability]]",
            f"    condition number (unit-diagonal information): {self.condition_number:.3g}",
            "    correlations:",
            "    " + " " * 7 + "".join(f"{n:>8}" for n in self.names),
        ]
        for i, n in enumerate(self.names):
            lines.append(f"    {n:<7}" + "".join(f"{c:>8.3f}" for c in self.correlation[i]))
        if self.profile_interval:
            lo, hi = self.profile_interval
            lines.append(f"    phi profile interval (approx. 95%): [{lo:.4f}, {hi:.4f}]")
        lines += [f"    {w}" for w in self.warnings]
        return "\n".join(lines)


def identifiability(
    runs: RunTable,
    fit: FitResult,
    *,
    profile_points: int = 31,
    profile_range: tuple[float, float] | None = None,
    max_corr: float = 0.99,
    max_cond: float = 1e12,
    max_phi_se: float = 0.25,
) -> Identifiability:
    """Correlation matrix, condition number, phi profile and design warnings at the optimum.

    The profile runs over ``profile_range`` (default [min(-0.25, phi-0.5), max(1.25, phi+0.5)],
    which contains the restricted laws phi = 0 and phi = 1), refitting the other
    parameters at each phi by continuation (each refit warm-started from its neighbour).
    Fit warnings: |corr(phi, x)| > ``max_corr``; condition number > ``max_cond``;
    SE(phi) > ``max_phi_se``; profile interval reaching the end of the profile range.
    """
    _check_fit(runs, fit)
    spec, delta, theta = _spec_of(fit), _delta_of(fit), fit.theta
    design = runs.design
    pred, jac = log_loss_and_jacobian(theta, design)
    res = pred - runs.log_loss
    w = np.where(np.abs(res) <= delta, 1.0, delta / np.maximum(np.abs(res), delta))
    mask = spec.free_mask.copy()
    if fit.phi is None:
        mask[5] = False
    names = [THETA_NAMES[i] for i in np.flatnonzero(mask)]
    j = jac[:, mask]
    info = (j * w[:, None]).T @ j
    scale = np.sqrt(np.diag(info))
    warnings = design_warnings(runs, phi=fit.phi if fit.phi is not None else 0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = info / np.outer(scale, scale)
    eig = np.linalg.eigvalsh(unit)
    cond = float(eig.max() / eig.min()) if eig.min() > 0 else float("inf")
    try:
        cov_unit = np.linalg.inv(unit)
        cov = cov_unit / np.outer(scale, scale)
        d = np.sqrt(np.abs(np.diag(cov)))
        corr = cov / np.outer(d, d)
        n, k = len(runs), len(names)
        sigma2 = float(np.sum(res**2)) / max(n - k, 1)
        se = dict(zip(names, (np.sqrt(sigma2) * d).tolist()))
        params = fit.law.params
        for coord, name in (("a", "A"), ("b", "B"), ("e", "E")):
            if coord in se:  # delta method: SE(exp(u)) = exp(u) SE(u)
                se[name] = params[name] * se[coord]
    except np.linalg.LinAlgError:
        corr = np.full((len(names), len(names)), np.nan)
        se = dict.fromkeys(names, float("nan"))
    if cond > max_cond:
        warnings.append(
            DiagnosticWarning(
                "ill_conditioned",
                f"the information matrix is ill-conditioned (condition number "
                f"{cond:.3g} > {max_cond:.0e}): some parameter combinations are not determined",
                {"condition_number": cond},
            )
        )
    if "phi" in names:
        ip = names.index("phi")
        for jn, other in enumerate(names):
            if other != "phi" and abs(corr[ip, jn]) > max_corr:
                warnings.append(
                    DiagnosticWarning(
                        "phi_correlated",
                        f"phi is almost collinear with {other} (correlation "
                        f"{corr[ip, jn]:+.3f}): the design cannot separate them",
                        {"with": other, "correlation": float(corr[ip, jn])},
                    )
                )
        if se["phi"] > max_phi_se:
            warnings.append(
                DiagnosticWarning(
                    "phi_uncertain",
                    f"phi is poorly determined (approximate SE {se['phi']:.3g} > {max_phi_se})",
                    {"se": se["phi"]},
                )
            )

    profile = interval = None
    if "phi" in names:
        profile, interval = _phi_profile(runs, spec, theta, delta, profile_points, profile_range)
        grid = profile["phi"]
        if interval is not None and (interval[0] <= grid[0] or interval[1] >= grid[-1]):
            warnings.append(
                DiagnosticWarning(
                    "phi_profile_flat",
                    f"the phi profile stays within the 95% deviance bound up to "
                    f"the end of the range [{grid[0]:.2f}, {grid[-1]:.2f}]: the data barely constrain phi",
                    {"interval": interval},
                )
            )
    return Identifiability(
        names=names,
        correlation=np.asarray(corr).tolist(),
        condition_number=cond,
        stderr=se,
        profile=profile,
        profile_interval=interval,
        warnings=warnings,
    )


def _phi_profile(
    runs: RunTable,
    spec: LawSpec,
    theta: np.ndarray,
    delta: float,
    points: int,
    span: tuple[float, float] | None,
) -> tuple[dict[str, list[float]], list[float]]:
    phi_hat = float(theta[5])
    lo_b, hi_b = spec.bounds["phi"]
    if span is None:
        span = (min(-0.25, phi_hat - 0.5), max(1.25, phi_hat + 0.5))
    lo, hi = max(span[0], lo_b), min(span[1], hi_b)
    if not lo < hi or points < 3:
        raise ValueError(
            f"profile range must have lower < upper and >= 3 points, got [{lo}, {hi}] with {points}"
        )
    # a coarse grid over the whole range and a fine one (step 0.01) around the estimate
    fine = phi_hat + np.linspace(-0.1, 0.1, 21)
    grid = np.concatenate([np.linspace(lo, hi, points), fine[(fine >= lo) & (fine <= hi)], [phi_hat]])
    grid = np.unique(np.round(grid, 12))
    thetas = np.empty((len(grid), 6))
    start = int(np.argmin(np.abs(grid - phi_hat)))
    thetas[start] = theta
    for order in (range(start + 1, len(grid)), range(start - 1, -1, -1)):
        prev = theta.copy()
        for i in order:
            s = LawSpec(fixed={**spec.fixed, "phi": float(grid[i])}, bounds=spec.bounds)
            sol = polish(prev[s.free_mask], s, runs.design, runs.log_loss, delta)
            prev = s.full_theta(sol.x)
            thetas[i] = prev
    obj = huber_objective(thetas, runs, delta)
    ssr = np.sum((log_loss(thetas, runs.design) - runs.log_loss) ** 2, axis=-1)
    ssr_min = float(ssr.min())
    n = len(runs)
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = n * np.log(ssr / ssr_min) if ssr_min > 0 else np.where(ssr > 0, np.inf, 0.0)
    interval = _crossing_interval(grid, np.asarray(dev, float), int(np.argmin(ssr)), _CHI2_95)
    profile = {
        "phi": grid.tolist(),
        "objective": obj.tolist(),
        "ssr": ssr.tolist(),
        "deviance": np.asarray(dev, float).tolist(),
        "params": {
            THETA_TO_PARAM[c]: (np.exp(thetas[:, i]) if c in ("a", "b", "e") else thetas[:, i]).tolist()
            for i, c in enumerate(THETA_NAMES)
            if c != "phi"
        },
    }
    return profile, interval


def _crossing_interval(x: np.ndarray, dev: np.ndarray, i_min: int, level: float) -> list[float]:
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


# ----------------------------------------------------------------------- consistency
@dataclass(frozen=True)
class Consistency:
    """phi refitted on subsets: budget halves and pairs {1, r}.

    Each entry: {label, n, phi, r2, subset} where ``subset`` describes the runs kept.
    The study reports 0.44 (C <= 2.15e18, n = 56) and 0.49 (C >= 4.64e18, n = 60).
    """

    phi_hat: float
    halves: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    notes: list[str]

    @property
    def spread(self) -> float:
        """max - min of phi over all subsets (NaN when none)."""
        values = [
            x["phi"] for x in self.halves + self.pairs if x["phi"] is not None and math.isfinite(x["phi"])
        ]
        return float(max(values) - min(values)) if values else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)

    def summary(self) -> str:
        lines = [f"[[Consistency of phi (all runs: {self.phi_hat:.4f})]]"]
        for x in self.halves + self.pairs:
            phi = "n/a" if x["phi"] is None or not math.isfinite(x["phi"]) else f"{x['phi']:.4f}"
            lines.append(f"    {x['label']:<34} n = {x['n']:<4} phi = {phi:<8} R^2 = {x['r2']:.4f}")
        lines += [f"    note: {n}" for n in self.notes]
        return "\n".join(lines)


def consistency(runs: RunTable, fit: FitResult, *, n_starts: int = 100, seed: int = 0) -> Consistency:
    """phi refitted on the lower and upper halves of the budgets and on each pair {r0, r}.

    Halves: the sorted distinct budgets split into the lower floor(k/2) and the upper
    rest (the study's six budgets: 3 / 3); without a ``budget`` column, the runs are
    split at the median of their training compute (``flops`` or 6 (n_once + r n_rec) D).
    Pairs: the smallest r (normally 1) with each other r.  Each subset is refitted with
    ``n_starts`` random starts and a warm start from the full-data optimum (the better
    objective wins).
    """
    _check_fit(runs, fit)
    _require_free_phi(fit, "consistency")
    spec, delta, theta = _spec_of(fit), _delta_of(fit), fit.theta
    notes: list[str] = []
    subsets: list[tuple[str, str, np.ndarray]] = []
    budgets = _budget_labels(runs)
    if budgets is not None:
        levels = _sorted_unique(budgets)
        if len(levels) >= 2:
            low = levels[: len(levels) // 2]
            m = np.isin(budgets, low)
            fmt = (lambda b: f"{b:.3g}") if isinstance(levels[0], (int, float)) else str
            subsets.append(("halves", f"lower budgets (C <= {fmt(low[-1])})", m))
            subsets.append(("halves", f"upper budgets (C >= {fmt(levels[len(low)])})", ~m))
        else:
            notes.append("a single budget: no budget halves")
    else:
        compute = (
            runs.frame["flops"].to_numpy(float)
            if "flops" in runs.frame
            else 6.0 * (runs.n_once + runs.r * runs.n_rec) * runs.tokens
        )
        med = float(np.median(compute))
        m = compute <= med
        subsets.append(("halves", f"lower compute (C <= {med:.3g})", m))
        subsets.append(("halves", f"upper compute (C > {med:.3g})", ~m))
        notes.append("no 'budget' column: halves split at the median training compute")
    r = runs.r.astype(int)
    rs = np.unique(r)
    base = int(rs[0])
    if base != 1:
        notes.append(f"no r = 1 runs: pairs use the smallest r = {base} as the base")
    for value in rs[1:]:
        subsets.append(("pairs", f"r in {{{base}, {int(value)}}}", np.isin(r, [base, value])))
    halves, pairs = [], []
    for kind, label, mask in subsets:
        sub = runs.subset(mask)
        entry: dict[str, Any] = {
            "label": label,
            "n": int(mask.sum()),
            "phi": None,
            "r2": float("nan"),
            "params": None,
        }
        if len(sub) >= 7 and sub.phi_identifiable:
            t = _refit(sub, spec, theta, delta, n_starts, seed)
            r2, _, _ = goodness_of_fit(sub.loss, np.exp(log_loss(t, sub.design)))
            entry.update(phi=float(t[5]), r2=r2, params=dict(zip(PARAM_NAMES, _natural(t))))
        else:
            notes.append(f"{label}: too few runs or phi not identifiable; not refitted")
        (halves if kind == "halves" else pairs).append(entry)
    return Consistency(phi_hat=float(theta[5]), halves=halves, pairs=pairs, notes=notes)


def _natural(theta: np.ndarray) -> list[float]:
    a, alpha, b, beta, e, phi = (float(v) for v in theta)
    return [math.exp(e), math.exp(a), alpha, math.exp(b), beta, phi]


# ----------------------------------------------------------------------- data summary
def data_summary(runs: RunTable) -> dict[str, Any]:
    """Counts and ranges of the table: runs per r, per budget, per variant; ranges of N, D, L."""
    frame = runs.frame
    n_unique = runs.n_once + runs.n_rec
    out: dict[str, Any] = {
        "source": runs.source,
        "n_runs": len(runs),
        "runs_per_r": {int(k): int(v) for k, v in frame["r"].value_counts().sort_index().items()},
        "n_unique_range": [float(n_unique.min()), float(n_unique.max())],
        "tokens_range": [float(runs.tokens.min()), float(runs.tokens.max())],
        "loss_range": [float(runs.loss.min()), float(runs.loss.max())],
        "columns": [str(c) for c in frame.columns],
    }
    if "budget" in frame:
        levels = _sorted_unique(frame["budget"].to_numpy())
        out["runs_per_budget"] = {str(b): int((frame["budget"] == b).sum()) for b in levels}
        out["n_cells"] = int(frame.groupby(["budget", "r"]).ngroups)
    if "variant" in frame:
        out["runs_per_variant"] = {
            str(k): int(v) for k, v in frame["variant"].value_counts().sort_index().items()
        }
    return to_plain(out)


# ----------------------------------------------------------------------------- bundle
@dataclass(frozen=True)
class Diagnostics:
    """All diagnostics of one fit (the pieces are None where they do not apply)."""

    residuals: ResidualDiagnostics
    identifiability: Identifiability
    influence: Influence | None
    consistency: Consistency | None
    data: dict[str, Any]
    notes: list[str]

    @property
    def warnings(self) -> list[DiagnosticWarning]:
        return list(self.residuals.flags) + list(self.identifiability.warnings)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(
            {
                "data": self.data,
                "residuals": self.residuals.to_dict(),
                "identifiability": self.identifiability.to_dict(),
                "influence": None if self.influence is None else self.influence.to_dict(),
                "consistency": None if self.consistency is None else self.consistency.to_dict(),
                "warnings": [w.to_dict() for w in self.warnings],
                "notes": self.notes,
            }
        )

    def summary(self) -> str:
        parts = [self.residuals.summary(), self.identifiability.summary()]
        if self.influence is not None:
            parts.append(self.influence.summary())
        if self.consistency is not None:
            parts.append(self.consistency.summary())
        parts += [f"note: {n}" for n in self.notes]
        return "\n\n".join(parts)


def diagnose(
    runs: RunTable,
    fit: FitResult,
    *,
    alpha: float = 0.01,
    influence_top: int = 5,
    consistency_starts: int = 100,
    seed: int = 0,
    skip: Sequence[str] = (),
) -> Diagnostics:
    """Run every diagnostic that applies to this fit (``skip`` may name 'influence',
    'consistency').  Influence and consistency need phi free and identified."""
    notes: list[str] = []
    res = residual_diagnostics(runs, fit, alpha=alpha)
    ident = identifiability(runs, fit)
    infl = cons = None
    phi_free = fit.phi is not None and "phi" not in fit.fixed
    if not phi_free:
        notes.append("phi is fixed or not identified: influence and consistency of phi skipped")
    else:
        if "influence" not in skip:
            infl = influence(runs, fit, n_top=influence_top)
        if "consistency" not in skip:
            cons = consistency(runs, fit, n_starts=consistency_starts, seed=seed)
    return Diagnostics(
        residuals=res,
        identifiability=ident,
        influence=infl,
        consistency=cons,
        data=data_summary(runs),
        notes=notes,
    )
