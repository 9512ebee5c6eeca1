"""Restricted fits of the joint law and the tests between them (phi free vs phi = 0, 1, ...).

One module on purpose: the fits, their scores, both tests and the verdict rule are one
result (:class:`Comparison`); the likelihood, the held-out error and the wild bootstrap
live in :mod:`phifit.fitters.likelihood`, :mod:`phifit.compare.holdout` and :mod:`phifit.bootstrap.wild`.

Each specification (phi free, and every entry of ``fixes``) is fitted with the same
method, objective, box and starts.  For each fit:

- ``objective``, ``r2``, ``rmse``: the fitter's own criterion, R^2 and RMSE on raw nats.
- **Gaussian working log-likelihood** on log residuals (sigma profiled out), AIC and BIC
  with k = free law parameters + 1, and the **likelihood ratio** against the free fit,
  LR = n log(RSS_restricted / RSS_free) against chi^2(df), df = parameters the restriction
  fixes; all defined in :mod:`phifit.fitters.likelihood`.  phi = 0 and phi = 1 lie inside phi's box
  [-3, 3], so the plain chi^2(1) applies; a value fixed *on* a bound of its box (e.g.
  phi = 3) uses the boundary mixture 0.5 chi^2(0) + 0.5 chi^2(1).  For ``method="huber"``
  these are Gaussian scores of Huber fits and the test is approximate; a negative LR (the
  restricted Huber fit has the smaller RSS) is reported as 0 with a caution.
- **Out-of-sample error** (needs a ``budget`` column with at least 3 budgets):
  ``cv_rmse``, leave-one-budget-out: for each budget, refit on the other budgets (full
  multi-start fit) and predict the held-out runs; the RMSE in nats over all runs, each
  predicted once.  ``extrap_rmse``: fit on every budget but the largest, RMSE of the
  prediction on the largest.

- **Restricted wild cluster bootstrap** (:mod:`phifit.bootstrap.wild`, ``n_wild`` replicates,
  default 999): the drop of the fit's own objective, T = F_restricted - F_free, referred
  to its distribution over tables rebuilt from the restricted fit with one Rademacher sign
  per (budget, r) cell.  Runs of a sweep share noise within a cell (one data order, one
  seed, one learning-rate choice); the chi-square LR test assumes independent runs and is
  then badly over-sized, the wild test is not (``benchmarks/bootstrap_coverage.py``).

**Verdict rule.**  A restricted law is *rejected* when its test against the free fit has
p < 0.05 (:data:`phifit.fitters.likelihood.SIGNIFICANCE`) **and** it does not predict held-out
budgets better than the free fit (leave-one-budget-out RMSE at least the free fit's).  The
test is the wild cluster bootstrap; with ``n_wild=0`` it is the chi-square LR test, and
the verdict says it assumes independent runs.  If the test rejects but the restricted law
predicts held-out budgets better, the verdict is "not rejected: in-sample evidence only".
Without budgets the rule is the test alone, and the verdict says so.  The extrapolation
RMSE (one budget, few runs) is reported, not used.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import defaults
from ..bootstrap.sequential import StopRule
from ..bootstrap.wild import ADJUST_TEXT, WildTest, too_few_clusters, wild_cluster_tests
from ..cautions import Caution, caution, collect
from ..fitters.common import effective_spec
from ..fitters.likelihood import (
    APPROXIMATE,
    LIKELIHOOD,
    SIGNIFICANCE,
    GaussianScore,
    LRTest,
    gaussian_log_lik,
    lr_test,
    p_text,
)
from ..fitters.parallel import check_backend
from ..law import LawSpec, log_loss, to_internal
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from ..serialize import JsonIO, to_plain
from .holdout import (
    PendingFolds,
    budget_order,
    collect_out_of_sample,
    fit_spec,
    fold_note,
    fold_problems,
    spec_label,
    start_out_of_sample,
)

METHODS = ("huber", "lsq")
VERDICT_RULE = (
    "a restricted law is rejected when its test against the free fit (the restricted wild cluster "
    "bootstrap over (budget, r) cells; the chi-square LR test, which assumes independent runs, "
    "when the bootstrap is off) gives p < 0.05 and its leave-one-budget-out RMSE is not below the "
    "free fit's; without budgets, the test alone decides"
)
#: How the chi-square LR p-value is labelled wherever it is printed.
CHI2_LABEL = "chi-square LR, assumes independent runs"


@dataclass(frozen=True)
class FitStats(JsonIO):
    """Comparison statistics of one fit (definitions in the module docstring).

    ``warnings``: this fit's cautions (negative LR, a null on a box bound, a fold where phi
    was not identifiable, a free fit at a bound); the :class:`Comparison` collects them all.
    """

    label: str
    fixed: dict[str, float]
    objective: float
    r2: float
    rmse: float
    rss_log: float
    log_lik: float
    n_params: int  # free law parameters + 1 (sigma)
    aic: float
    bic: float
    lr_stat: float | None
    lr_df: int | None
    lr_p_value: float | None
    lr_reference: str | None
    wild: WildTest | None
    cv_rmse: float | None
    cv_rmse_by_budget: dict[str, float] | None
    extrap_rmse: float | None
    extrap_budget: str | None
    rejected: bool | None
    warnings: list[Caution] = field(default_factory=list)
    #: Why no verdict can be read from the test (None: it can): the free fit's tested parameter
    #: on a bound of its box, too few cells for the free law, or a test that cannot reach 5%.
    undecided: str | None = None

    @property
    def p_value(self) -> float | None:
        """The p-value the verdict uses: the wild cluster bootstrap's, else the chi-square LR's."""
        return self.wild.p_value if self.wild is not None else self.lr_p_value

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("warnings", "wild")}
        out["warnings"] = [w.to_dict() for w in self.warnings]
        out["wild"] = None if self.wild is None else self.wild.to_dict()
        out["wild_p_value"] = None if self.wild is None else self.wild.p_value
        out["lr_assumption"] = CHI2_LABEL
        return to_plain(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FitStats:
        kw = {k: data.get(k) for k in cls.__dataclass_fields__ if k not in ("warnings", "fixed", "wild")}
        kw["wild"] = WildTest.from_dict(data["wild"]) if data.get("wild") else None
        for key in ("objective", "r2", "rmse", "rss_log", "log_lik", "aic", "bic"):
            kw[key] = math.inf if key == "log_lik" and kw[key] is None else kw[key]
            kw[key] = math.nan if kw[key] is None else float(kw[key])
        return cls(
            fixed=dict(data.get("fixed") or {}),
            warnings=[Caution.from_dict(w, source="compare") for w in data.get("warnings") or []],
            **kw,
        )

    def summary(self) -> str:
        """One line: label, R^2, AIC, BIC, LR and p, held-out RMSE, verdict."""
        p = p_text(self.lr_p_value)
        verdict = (
            ""
            if self.rejected is None
            else "  undecided"
            if self.undecided
            else ("  rejected" if self.rejected else "  not rejected")
        )
        return (
            f"{self.label}: R^2 {self.r2:.5f}, AIC {self.aic:.2f}, BIC {self.bic:.2f}"
            + (f", wild cluster bootstrap p {p_text(self.wild.p_value)}" if self.wild is not None else "")
            + (
                f", LR {self.lr_stat:.2f} (df {self.lr_df}, p {p}; {CHI2_LABEL})"
                if self.lr_stat is not None
                else ""
            )
            + (f", CV RMSE {self.cv_rmse:.5f}" if self.cv_rmse is not None else "")
            + verdict
        )


@dataclass(frozen=True)
class Comparison(JsonIO):
    """Fits of the free and restricted laws, their statistics and a verdict.

    ``fits`` and ``stats`` are keyed by label ("free", "phi=0", "phi=1", ...).  ``warnings``
    holds every caution of the comparison (source "compare"): the general ones (no budgets,
    too few budgets, the approximate LR of Huber fits) and each fit's, labelled.
    """

    fits: dict[str, FitResult]
    stats: dict[str, FitStats]
    verdict: str
    method: str
    n_runs: int
    budgets: list[str]
    rule: str = VERDICT_RULE
    warnings: list[Caution] = field(default_factory=list)

    @property
    def notes(self) -> list[str]:
        """The cautions' messages (the older, text-only view of :attr:`warnings`)."""
        return [w.message for w in self.warnings]

    def to_frame(self):
        """The comparison's table as a DataFrame, one row per fit ("free", "phi=0", "phi=1",
        ...): phi, r2, rmse, aic, bic, log_lik, the LR statistic and its chi-square p-value,
        the wild bootstrap p-value (NaN when not run), cv_rmse and extrap_rmse."""
        import pandas as pd

        def num(x: Any) -> float:
            return np.nan if x is None else float(x)

        rows = {
            label: {
                "phi": num(self.fits[label].params.get("phi")),
                "r2": num(st.r2),
                "rmse": num(st.rmse),
                "aic": num(st.aic),
                "bic": num(st.bic),
                "log_lik": num(st.log_lik),
                "lr_stat": num(st.lr_stat),
                "lr_p_value": num(st.lr_p_value),
                "wild_p_value": np.nan if st.wild is None else num(st.wild.p_value),
                "cv_rmse": num(st.cv_rmse),
                "extrap_rmse": num(st.extrap_rmse),
            }
            for label, st in self.stats.items()
        }
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame.index.name = "fit"
        return frame

    def __repr__(self) -> str:
        fits = ", ".join(repr(k) for k in self.fits)
        verdict = self.verdict if len(self.verdict) <= 120 else self.verdict[:117] + "..."
        return (
            f"Comparison(method={self.method!r}, n_runs={self.n_runs}, fits=[{fits}], "
            f"verdict={verdict!r}, n_warnings={len(self.warnings)})"
        )

    def summary(self) -> str:
        lines = [
            f"[[phifit compare: {self.n_runs} runs, method={self.method}]]",
            f"AIC/BIC/LR: {LIKELIHOOD}"
            + (" (approximate for Huber fits: not the ML estimator)" if self.method == "huber" else ""),
            "",
        ]
        head = (
            f"    {'fit':<10} {'phi':>7} {'R^2':>8} {'RMSE':>8} {'AIC':>9} {'BIC':>9} "
            f"{'wild p':>8} {'LR':>9} {'chi2 p':>9} {'CV RMSE':>8} {'extrap':>8}"
        )
        lines.append(head)

        def f(v, spec):
            return format(v, spec) if v is not None and np.isfinite(v) else "-"

        for label, st in self.stats.items():
            phi = self.fits[label].params.get("phi")
            lines.append(
                f"    {label:<10} {f(phi, '7.4f'):>7} {f(st.r2, '8.5f'):>8} {f(st.rmse, '8.5f'):>8}"
                f" {f(st.aic, '9.2f'):>9} {f(st.bic, '9.2f'):>9}"
                f" {p_text(st.wild.p_value) if st.wild is not None else '-':>8} {f(st.lr_stat, '9.2f'):>9}"
                f" {p_text(st.lr_p_value):>9} {f(st.cv_rmse, '8.5f'):>8}"
                f" {f(st.extrap_rmse, '8.5f'):>8}"
            )
        wild = [st.wild for st in self.stats.values() if st.wild is not None]
        if wild:
            w = wild[0]
            floor = f", smallest attainable p {w.min_p:.2g}" if w.min_p is not None else ""
            lines.append(
                f"    wild p: restricted wild cluster bootstrap, {w.n_boot} replicates, {w.weights} weights "
                f"per {w.block} block ({w.n_blocks} blocks), residuals {ADJUST_TEXT.get(w.adjust, w.adjust)}"
                f"{floor}; chi2 p: {CHI2_LABEL}"
            )
        else:
            lines.append(f"    chi2 p: {CHI2_LABEL}")
        lines += ["", f"Verdict: {self.verdict}", f"Rule: {self.rule}"]
        if self.warnings:
            lines += ["", "[[Notes]]"] + [f"    [{i}] {w}" for i, w in enumerate(self.warnings, 1)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        """JSON contract: {"fits": {label: fit JSON + aic, bic, lr_stat, lr_p_value, cv_rmse,
        ..., "comparison_warnings"}, "verdict": str, "warnings": [caution], ...}."""
        fits = {}
        for label, res in self.fits.items():
            entry = res.to_dict()
            st = self.stats[label].to_dict()
            st.pop("label")
            st.pop("fixed")
            st["comparison_warnings"] = st.pop("warnings")
            entry.update(st)
            fits[label] = entry
        return to_plain(
            {
                "generator": "phifit",
                "kind": "comparison",
                "method": self.method,
                "n_runs": self.n_runs,
                "budgets": self.budgets,
                "fits": fits,
                "verdict": self.verdict,
                "verdict_rule": self.rule,
                "warnings": [w.to_dict() for w in self.warnings],
                "likelihood": LIKELIHOOD,
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        fits, stats = {}, {}
        for label, entry in data["fits"].items():
            fits[label] = FitResult.from_dict(entry)
            stats[label] = FitStats.from_dict(
                {**entry, "label": label, "warnings": entry.get("comparison_warnings") or []}
            )
        return cls(
            fits=fits,
            stats=stats,
            verdict=data["verdict"],
            method=data["method"],
            n_runs=int(data["n_runs"]),
            budgets=list(data.get("budgets", [])),
            rule=data.get("verdict_rule", VERDICT_RULE),
            warnings=[Caution.from_dict(w, source="compare") for w in data.get("warnings") or []],
        )


def _check_fixes(fixes: Sequence[Mapping[str, float]]) -> list[dict[str, float]]:
    out, seen = [], set()
    for fx in fixes:
        if not isinstance(fx, Mapping) or not fx:
            raise ValueError(
                f"fixes: each entry must be a non-empty mapping such as {{'phi': 0.0}}, got {fx!r}"
            )
        fx = {str(k): float(v) for k, v in fx.items()}
        for k, v in fx.items():
            to_internal(k, v)
        label = spec_label(fx)
        if label not in seen:
            seen.add(label)
            out.append(fx)
    return out


def compare_fits(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    fixes: Sequence[Mapping[str, float]] = ({"phi": 0.0}, {"phi": 1.0}),
    seed: int = defaults.SEED,
    cv: bool = True,
    n_starts: int = defaults.N_STARTS,
    n_wild: int = defaults.N_WILD,
    block: str | Sequence[str] | None = None,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    wild_stop: StopRule | None = None,
    recipe: str | None = None,
) -> Comparison:
    """Compare the free fit ``fit`` with each restriction in ``fixes``; tests, information criteria, CV.

    Parameters
    ----------
    runs
        The run table ``fit`` was fitted to (a RunTable or a DataFrame validated like a CSV;
        phi must be identifiable to compare restrictions on phi).
    fit
        The free fit: a Huber (the study's) or least-squares :class:`FitResult` of ``runs``.
        Every restricted and held-out fit uses its method, spec (box, other fixed values) and
        loss.  The Bayesian fit has its own comparison (LOO, :func:`phifit.fitters.bayes.compare_loo`).
    fixes
        Restricted specifications, each a mapping of natural names to values.
    seed, n_starts
        Starts of every refit (the restricted and held-out fits); ``seed`` also seeds the wild
        bootstrap.
    cv
        Compute the out-of-sample errors (needs a ``budget`` column with >= 3 budgets).
    n_wild, block
        Replicates of the restricted wild cluster bootstrap test of each restriction (0: the
        chi-square LR test alone decides; else >= :data:`phifit.defaults.N_WILD_MIN`) and its
        clusters (default (budget, r) cells, else single runs).
    wild_stop
        A :class:`phifit.bootstrap.sequential.StopRule`: each wild test stops before ``n_wild``
        replicates once p's side of the rule's level is settled (its p then comes from the
        replicates it used, and its result says so); None: every test runs all ``n_wild``.
    n_jobs, backend, scheduler
        Where the wild tests' refits run (:func:`phifit.bootstrap.wild.wild_cluster_tests`,
        :mod:`phifit.fitters.parallel`); ``n_jobs`` None: the cores this process may use
        (:func:`phifit.defaults.workers`).  The p-values do not depend on them.
    recipe
        When the table's ``variant`` column holds several recipes: the one to compare (default
        the one ``fit`` was fitted to, else "baseline", as ``--variant`` picks it;
        :func:`phifit.recipes.pairing.recipe_runs`).  A table of several recipes is never pooled.
    """
    from ..runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=fit)  # one recipe of a mixed table, as --variant picks it
    runs, fixes = _checked_request(runs, fit, fixes, n_wild, backend, scheduler)
    method, base_spec = fit.method, fit.spec
    workers = defaults.resolve_workers(n_jobs)
    delta = fit.loss_delta
    _check_phi_testable(runs, base_spec, fixes)
    specs = _specs(base_spec, fixes)
    notes, order, do_cv = _out_of_sample_plan(runs, cv, specs)
    notes += _test_cautions(method, n_wild)
    parallel = {"n_jobs": workers, "backend": backend, "scheduler": scheduler, "stop": wild_stop}
    fits: dict[str, FitResult] = {}
    stats: dict[str, FitStats] = {}
    free_score: GaussianScore | None = None
    # the held-out folds start first: they run on the workers while the restricted fits run here
    # and fill the gaps between the wild tests' rounds
    folds = _start_held_out(runs, specs, method, seed, n_starts, order, delta, do_cv, parallel)
    tested = {}
    for label, spec in specs.items():
        res = fit if label == "free" else fit_spec(runs, spec, method, seed, n_starts, delta=delta)
        fits[label] = res
        score = _gaussian_score(runs, spec, res)
        lr = undecided = None
        if label == "free":
            free_score = score
            st_notes = _free_fit_cautions(res)
        else:
            boundary = [n for n in _on_bound(spec) if n not in base_spec.fixed]
            df = free_score.n_params - score.n_params
            lr = lr_test(free_score, score, df, on_boundary=boundary, label=label)
            undecided = _undecided_before_test(runs, fits["free"], spec, base_spec, block)
            st_notes = [*lr.warnings]
            if undecided:
                st_notes.append(caution("compare", "undecided", f"{label}: undecided: {undecided}"))
        tested[label] = [spec, res, score, lr, None, st_notes, undecided]
    _wild_tests(runs, fits["free"], tested, block, n_wild, seed, parallel)
    held_out = _held_out_errors(specs, order, folds)
    for label, (spec, res, score, lr, wild, st_notes, undecided) in tested.items():
        errors, cv_notes = held_out[label]
        stats[label] = _fit_stats(label, spec, res, score, lr, wild, errors, st_notes + cv_notes, undecided)
    stats = _decide(stats, do_cv)
    return Comparison(
        fits=fits,
        stats=stats,
        verdict=_verdict(fits, stats, do_cv),
        method=method,
        n_runs=len(runs),
        budgets=[str(b) for b in order],
        warnings=collect(notes, *(st.warnings for st in stats.values())),
    )


def _checked_request(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    fixes: Sequence[Mapping[str, float]],
    n_wild: int,
    backend: str | None,
    scheduler: str | None,
) -> tuple[RunTable, list[dict[str, float]]]:
    """The run table and the distinct restrictions, after checking the request (``ValueError`` otherwise)."""
    if n_wild and n_wild < defaults.N_WILD_MIN:
        raise ValueError(f"compare: n_wild must be 0 (off) or >= {defaults.N_WILD_MIN}, got {n_wild}")
    runs = as_runs(runs)
    method = fit.method
    if method not in METHODS:
        raise ValueError(
            f"compare: the fit's method {method!r} has no refit comparison; expected one of "
            f"{', '.join(METHODS)} (a Bayesian fit is compared by LOO: compare_loo)"
        )
    if fit.n_runs != len(runs) or list(fit.run_ids) != runs.run_ids:
        raise ValueError("compare: the given fit was not fitted to these runs")
    check_backend(backend, scheduler)
    fixes = _check_fixes(fixes)
    if not fixes:
        raise ValueError("compare: give at least one restriction to compare with the free fit")
    held = sorted({k for fx in fixes for k in fx} & set(fit.spec.fixed))
    if held:
        raise ValueError(
            f"compare: the fit holds {', '.join(held)} fixed already; compare restrictions of a fit "
            "that leaves them free"
        )
    return runs, fixes


def _check_phi_testable(runs: RunTable, base_spec: LawSpec, fixes: list[dict[str, float]]) -> None:
    """Raise ``ValueError`` when a restriction fixes phi but the runs cannot identify phi."""
    _, unident = effective_spec(runs, base_spec)
    if any(c.kind == "phi_unidentified" for c in unident) and any("phi" in fx for fx in fixes):
        raise ValueError(
            "compare: phi is not identifiable from these runs (no looped runs, or "
            "a single value of r), so restrictions on phi cannot be tested"
        )


def _out_of_sample_plan(
    runs: RunTable, cv: bool, specs: dict[str, LawSpec]
) -> tuple[list[Caution], list[Any], bool]:
    """(cautions, budgets in order, whether to compute held-out errors): they need >= 3 budgets,
    and the fold of the largest budget and one other that can be fitted
    (:func:`~phifit.compare.holdout.fold_problems`; other folds that cannot are left out)."""
    notes: list[Caution] = []
    order: list[Any] = []
    if not cv:
        return notes, order, False
    if "budget" not in runs.frame.columns:
        notes.append(
            caution(
                "compare",
                "no_budget",
                "no 'budget' column: no leave-one-budget-out or extrapolation error; "
                "the verdict rests on the likelihood-ratio test alone",
                level="note",
            )
        )
        return notes, order, False
    order = budget_order(runs)
    if len(order) < 3:
        notes.append(
            caution(
                "compare",
                "few_budgets",
                f"only {len(order)} budget(s): out-of-sample errors need at least 3; "
                f"the verdict rests on the likelihood-ratio test alone",
                level="note",
                n_budgets=len(order),
            )
        )
        return notes, order, False
    unfit = fold_problems(runs, specs, order)
    if str(order[-1]) in unfit or len(order) - len(unfit) < 2:
        notes += [fold_note(b, why) for b, why in unfit.items()]
        notes.append(
            caution(
                "compare",
                "no_held_out_errors",
                f"{len(unfit)} of {len(order)} leave-one-budget-out folds cannot be fitted"
                f"{', the largest budget among them' if str(order[-1]) in unfit else ''}: no out-of-sample "
                "errors; the verdict rests on the tests alone",
                level="note",
            )
        )
        return notes, order, False
    return notes, order, True


def _test_cautions(method: str, n_wild: int) -> list[Caution]:
    """Cautions on the test itself: approximate LR for Huber fits, chi-square only when ``n_wild`` is 0."""
    notes: list[Caution] = []
    if method == "huber":
        notes.append(caution("compare", "approximate_lr", APPROXIMATE, level="note"))
    if not n_wild:
        notes.append(
            caution(
                "compare",
                "chi2_only",
                "the verdict uses the chi-square likelihood-ratio test, which assumes independent runs: "
                "with noise shared within (budget, r) cells it rejects true restrictions far too often "
                "(use the wild cluster bootstrap, the default)",
            )
        )
    return notes


def _specs(base_spec: LawSpec, fixes: list[dict[str, float]]) -> dict[str, LawSpec]:
    """{label: spec}: "free" (the fit's own spec) first, then each restriction added to its fixed values."""
    specs = {"free": base_spec}
    for fx in fixes:
        specs[spec_label(fx)] = LawSpec(fixed={**base_spec.fixed, **fx}, bounds=base_spec.bounds)
    return specs


def _gaussian_score(runs: RunTable, spec: LawSpec, res: FitResult) -> GaussianScore:
    """Gaussian working score of the fit's log residuals, k = the spec's free law parameters.

    The fit scored its residuals at the optimiser's theta; ``res.theta`` is rebuilt from the
    reported parameters, a rounding away, so the two log-likelihoods can differ in the last
    digit.  Where they agree to 1e-9 the fit's own is kept, so that the comparison and the fit
    it reports (and their JSON, which shares the key) read the same number."""
    k_law = int(effective_spec(runs, spec)[0].free_mask.sum())
    score = GaussianScore.from_residuals(runs.log_loss - log_loss(res.theta, runs.design), k_law)
    if res.log_lik is not None and math.isclose(res.log_lik, score.log_lik, rel_tol=1e-9, abs_tol=1e-12):
        score = dataclasses.replace(score, log_lik=float(res.log_lik))
    return score


def _free_fit_cautions(res: FitResult) -> list[Caution]:
    """A caution if the free fit has parameters at a box bound (the chi-square LR reference is doubtful)."""
    if not res.at_bounds:
        return []
    return [
        caution(
            "compare",
            "free_fit_at_bound",
            f"free: the free fit has {', '.join(res.at_bounds)} at a box bound: "
            f"the chi-square reference of the LR tests is doubtful",
            parameters=list(res.at_bounds),
        )
    ]


def _wild_tests(
    runs: RunTable,
    free: FitResult,
    tested: dict[str, list[Any]],
    block: str | Sequence[str] | None,
    n_wild: int,
    seed: int,
    parallel: dict[str, Any],
) -> None:
    """The wild cluster bootstrap test of every restriction in ``tested`` (label -> [spec, fit,
    score, lr, wild, cautions, undecided]) that is not undecided before it, run side by side
    (:func:`phifit.bootstrap.wild.wild_cluster_tests`); each entry gets its test, the test's
    cautions, and "undecided" when the test cannot reject at the significance level."""
    labels = [label for label, entry in tested.items() if label != "free" and not entry[6]]
    if not n_wild or not labels:
        return
    tests = wild_cluster_tests(
        runs, free, [tested[label][1] for label in labels], n_boot=n_wild, block=block, seed=seed, **parallel
    )
    for label, wild in zip(labels, tests, strict=True):
        entry = tested[label]
        entry[4] = wild
        entry[5] += wild.warnings
        if not wild.resolves(SIGNIFICANCE):
            entry[6] = (
                f"the wild test's smallest attainable p ({wild.min_p:.2g}) is not below "
                f"{SIGNIFICANCE:g}: it cannot reject at that level"
            )


def _start_held_out(
    runs: RunTable,
    specs: dict[str, LawSpec],
    method: str,
    seed: int,
    n_starts: int,
    order: list[Any],
    delta: float,
    do_cv: bool,
    parallel: dict[str, Any],
) -> PendingFolds | None:
    """Start every spec's leave-one-budget-out folds on ``parallel``'s workers
    (:func:`phifit.compare.holdout.start_out_of_sample`); None without cross-validation."""
    if not do_cv:
        return None
    where = {k: parallel[k] for k in ("n_jobs", "backend", "scheduler")}
    return start_out_of_sample(runs, specs, method, seed, n_starts, order, delta=delta, **where)


def _held_out_errors(
    specs: dict[str, LawSpec], order: list[Any], folds: PendingFolds | None
) -> dict[str, tuple[dict[str, Any], list[Caution]]]:
    """{label: (leave-one-budget-out RMSE (all, by budget), extrapolation RMSE and budget (None: no
    cv), cautions)} from the folds :func:`_start_held_out` started."""
    if folds is None:
        none = {"cv_rmse": None, "cv_rmse_by_budget": None, "extrap_rmse": None, "extrap_budget": None}
        return {label: (dict(none), []) for label in specs}
    per_spec = collect_out_of_sample(folds)
    out: dict[str, tuple[dict[str, Any], list[Caution]]] = {}
    for label, (cv_rmse, per, extrap, cv_notes) in per_spec.items():
        errors = {
            "cv_rmse": cv_rmse,
            "cv_rmse_by_budget": per,
            "extrap_rmse": extrap,
            "extrap_budget": str(order[-1]),
        }
        out[label] = (errors, list(cv_notes))
    return out


def _fit_stats(
    label: str,
    spec: LawSpec,
    res: FitResult,
    score: GaussianScore,
    lr: LRTest | None,
    wild: WildTest | None,
    held_out: dict[str, Any],
    notes: list[Caution],
    undecided: str | None,
) -> FitStats:
    """One fit's comparison statistics, before the verdict rule (``rejected`` None)."""
    return FitStats(
        label=label,
        fixed=dict(spec.fixed),
        objective=res.objective,
        r2=res.r2,
        rmse=res.rmse,
        rss_log=score.rss,
        log_lik=score.log_lik,
        n_params=score.n_params,
        aic=score.aic,
        bic=score.bic,
        lr_stat=None if lr is None else lr.statistic,
        lr_df=None if lr is None else lr.df,
        lr_p_value=None if lr is None else lr.p_value,
        lr_reference=None if lr is None else lr.reference,
        wild=wild,
        **held_out,
        rejected=None,
        warnings=notes,
        undecided=undecided,
    )


def _undecided_before_test(
    runs: RunTable, free: FitResult, spec: LawSpec, base_spec: LawSpec, block: str | None
) -> str | None:
    """Why a test of ``spec`` against the free fit cannot be read, before running it (None: it can).

    - the free fit has a parameter the restriction fixes on a bound of its box: the data do
      not locate the free law there (the estimate is the box's edge, not a measurement), so
      neither the bootstrap nor the chi-square reference of the statistic holds (Andrews 2000,
      "Inconsistency of the bootstrap when a parameter is on the boundary", Econometrica 68(2));
    - fewer than 2 cells beyond the free law's parameters (:func:`~phifit.bootstrap.wild.too_few_clusters`).
    """
    tested = [n for n in spec.fixed if n not in base_spec.fixed]
    on_bound = [n for n in tested if n in free.at_bounds]
    if on_bound:
        values = ", ".join(f"{n} = {free.params[n]:.3g}" for n in on_bound if free.params.get(n) is not None)
        return (
            f"the free fit's {', '.join(on_bound)} sits on the bound of its search box ({values}): "
            "the data do not locate the free law, so no test against it can be read"
        )
    n_free = int(effective_spec(runs, base_spec)[0].free_mask.sum())
    codes, label = runs.cells(block)
    n_cells = int(codes.max()) + 1
    if too_few_clusters(n_cells, n_free):
        return (
            f"{n_cells} ({label.replace(',', ', ')}) blocks for the free law's {n_free} parameters: "
            "it all but interpolates the block means, so no test against it can be read"
        )
    return None


def _on_bound(spec: LawSpec) -> list[str]:
    """Parameters the spec fixes on a bound of their box (a null on the boundary)."""
    out = []
    for name, value in spec.fixed.items():
        coord, internal = to_internal(name, value)
        lo, hi = spec.bounds[coord]
        if math.isclose(internal, lo, abs_tol=1e-12) or math.isclose(internal, hi, abs_tol=1e-12):
            out.append(name)
    return out


def _decide(stats: dict[str, FitStats], use_cv: bool) -> dict[str, FitStats]:
    """Apply the verdict rule (module docstring) to every restricted fit."""
    free = stats["free"]
    out = {}
    for label, st in stats.items():
        if label == "free":
            out[label] = st
            continue
        significant = st.p_value is not None and st.p_value < SIGNIFICANCE and not st.undecided
        if use_cv and st.cv_rmse is not None and free.cv_rmse is not None:
            rejected = significant and st.cv_rmse >= free.cv_rmse
        else:
            rejected = significant
        out[label] = dataclasses.replace(st, rejected=bool(rejected))
    return out


def _join(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _readable(label: str) -> str:
    return " and ".join(part.replace("=", " = ") for part in label.split(","))


def _verdict(fits: dict[str, FitResult], stats: dict[str, FitStats], use_cv: bool) -> str:
    free = stats["free"]
    phi = fits["free"].params.get("phi")
    free_text = f"phi free ({phi:.3f})" if phi is not None else "the free fit"
    rejected = [lbl for lbl, st in stats.items() if lbl != "free" and st.rejected]
    undecided = [lbl for lbl, st in stats.items() if lbl != "free" and st.undecided]
    kept = [lbl for lbl, st in stats.items() if lbl != "free" and not st.rejected and not st.undecided]

    def evidence(lbls: list[str]) -> str:
        ps = _join([f"p = {p_text(stats[lbl].p_value)}".replace("= <", "< ") for lbl in lbls])
        wild = all(stats[lbl].wild is not None for lbl in lbls)
        test = "wild cluster bootstrap" if wild else f"likelihood-ratio ({CHI2_LABEL})"
        text = f"{test} {ps} at the 5% level"
        if use_cv:
            cvs = _join([f"{stats[lbl].cv_rmse:.4f}" for lbl in lbls])
            ex = _join([f"{stats[lbl].extrap_rmse:.4f}" for lbl in lbls])
            text += (
                f"; leave-one-budget-out RMSE {cvs} vs {free.cv_rmse:.4f} nats with "
                f"{free_text}; extrapolation to the largest budget {ex} vs "
                f"{free.extrap_rmse:.4f} nats"
            )
        return text

    parts = []
    if rejected:
        names = [_readable(lbl) for lbl in rejected]
        if len(names) == 1:
            parts.append(f"{names[0]} is rejected: {evidence(rejected)}")
        else:
            both = "both " if len(names) == 2 else "all "
            parts.append(f"{_join(names)} are {both}rejected: {evidence(rejected)}")
    for lbl in kept:
        st = stats[lbl]
        significant = st.p_value is not None and st.p_value < SIGNIFICANCE
        why = (
            "in-sample evidence only: it predicts held-out budgets no worse than the free fit"
            if significant
            else "the data do not distinguish it from the free fit"
        )
        parts.append(f"{_readable(lbl)} is not rejected ({why}): {evidence([lbl])}")
    reasons: dict[str, list[str]] = {}
    for lbl in undecided:
        reasons.setdefault(stats[lbl].undecided or "", []).append(lbl)
    for reason, lbls in reasons.items():
        names = _join([_readable(lbl) for lbl in lbls])
        ps = [p_text(stats[lbl].p_value) for lbl in lbls if stats[lbl].p_value is not None]
        seen = f" (p = {', '.join(ps)}, not read as evidence)" if ps else ""
        parts.append(f"{names} {'is' if len(lbls) == 1 else 'are'} undecided: {reason}{seen}")
    if not use_cv and (rejected or kept):
        parts.append("decided by the test alone (no out-of-sample error: it needs >= 3 budgets and cv on)")
    return ". ".join(parts) + "."


__all__ = ["Comparison", "FitStats", "VERDICT_RULE", "compare_fits", "gaussian_log_lik"]
