"""Does phi drift with scale?  phi with a compute-dependent term against one phi.

The law values a recurrence by one exponent at every budget.  The **drift law**
(:mod:`phifit.diagnostics.drift_law`) lets it move with compute,

    N_eff = N_once + r^phi(C) N_rec,   phi(C) = phi_0 + phi_1 log(C / C_ref),

C the run's FLOP budget (its isoFLOP curve), C_ref the geometric mean of the table's distinct
budgets (phi_0 is phi at the table's centre; phi_1 the change of phi per e-fold of C), with
E, A, alpha, B, beta shared.  Seven free coordinates (a, alpha, b, beta, e, phi_0, phi_1) in
the law's box, phi_1 in :data:`~phifit.diagnostics.drift_law.PHI1_BOUNDS`.  The null
phi_1 = 0 is the plain law, fitted by the same multi-start engine as the Huber fit (it
reproduces :func:`phifit.fit`); the drift law is fitted from the null solution, from it with a
few trial drifts, and from random starts.

- **Intervals of phi_1 and phi_0**: the (budget, r) cell bootstrap of the law's phi
  (:mod:`phifit.bootstrap.block`: the same weights for the same seed and replicate count).
  Each replicate redraws the cells with replacement and the drift law is refitted to the
  weighted table (sum_i w_i rho(log L_hat_i - log L_i)) from its estimate on the batched LM,
  unconverged rows finished by its active-set LM and the least-squares polish
  (:func:`phifit.diagnostics.multipliers.refit_weighted_rows`; a second start at the null
  solution changed no replicate of the study's table in 1000 and doubles the cost).  A
  replicate fails when its table has looped runs at fewer than two budgets or a single r
  (phi_1 or phi not identified) or its refit does not converge; failures are counted by
  reason, and no interval is given when more than
  :data:`~phifit.bootstrap.result.MAX_FAILED_SHARE` of them failed.
- **Test of phi_1 = 0**: the restricted wild cluster bootstrap (:mod:`phifit.bootstrap.wild`)
  of T = F_one_phi - F_drift: tables rebuilt from the null fit with one sign per (budget, r)
  cell, both laws refitted, p = (1 + #{T* >= T}) / (1 + B').  A small p says phi is not one
  number across these budgets: the exponent a recurrence earns changes with the compute scale,
  and phi is then the table's average of it.  When phi_1 sits on its box bound the table does
  not locate the drift and the answer is *undecided*.

It needs a numeric ``budget`` column with at least three distinct budgets (two budgets fit a
line through two phis exactly: nothing is left to test the line with) and looped runs at two
budgets or more, with two r values or more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import defaults
from ..bootstrap.block import draw_weights
from ..bootstrap.result import failed_refit_cautions, intervals_withheld
from ..bootstrap.sequential import StopRule
from ..bootstrap.wild import Refit, WildTest, wild_cluster_statistics, wild_test_result
from ..cautions import Caution, caution
from ..fitters.likelihood import SIGNIFICANCE, p_text
from ..fitters.objective import DELTA, law_model, loss_terms, refit_settings
from ..fitters.parallel import check_backend
from ..intervals import bootstrap_interval
from ..law import DEFAULT_BOUNDS, THETA_NAMES, THETA_TO_PARAM, LawSpec
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from .drift_law import (
    PHI1_BOUNDS,
    DriftModel,
    MultiStart,
    budget_offsets,
    budget_values,
    drift_box,
    multistart_fit,
)
from .drift_result import SOURCE, DriftFit
from .multipliers import CHUNK, finish_check, gather_refits, replicate_chunks

METHODS = ("huber", "lsq")
#: Trial drifts (per e-fold of C) the drift fit starts from, beside phi_1 = 0 and random starts.
TRIAL_DRIFTS = (-0.2, -0.05, 0.05, 0.2)


def drift_reason(runs: RunTable, budget: np.ndarray | None) -> str:
    """Why ``runs`` cannot test a drift of phi with compute ("" when it can)."""
    if budget is None:
        return "no numeric 'budget' column (the FLOP budget of each isoFLOP curve)"
    levels = np.unique(budget)
    if len(levels) < 3:
        return (
            f"only {len(levels)} budget(s): a drift of phi needs at least 3 (with two, a line "
            "through the two phis fits exactly)"
        )
    looped = (np.asarray(runs.r) > 1) & (np.asarray(runs.n_rec) > 0)
    if not looped.any():
        return "no looped runs (r > 1 with recurrent parameters): phi is not identified"
    if len(np.unique(runs.r)) < 2:
        return "a single r: phi is not identified"
    if len(np.unique(budget[looped])) < 2:
        return "looped runs at a single budget: a drift of phi is not identified"
    return ""


def fit_drift(
    runs: RunTable,
    law: FitResult | None = None,
    *,
    method: str = "huber",
    n_boot: int = defaults.N_BOOT,
    n_wild: int = defaults.N_WILD,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    n_starts: int = defaults.N_STARTS,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    wild_stop: StopRule | None = None,
    recipe: str | None = None,
) -> DriftFit:
    """Fit phi(C) = phi_0 + phi_1 log(C / C_ref), bootstrap it by cells and test phi_1 = 0
    (module docstring).

    ``law``: a fit of the plain law to ``runs`` (its box and loss are used, its parameters warm
    start the fits; no parameter may be fixed); ``n_boot`` cell-bootstrap replicates (0: no
    intervals); ``n_wild`` wild cluster bootstrap replicates of the test (0: no test; else
    >= :data:`phifit.defaults.N_WILD_MIN`); ``n_jobs``, ``backend``, ``scheduler``: where the refits run
    (:mod:`phifit.fitters.parallel`).
    ``wild_stop``: a :class:`phifit.bootstrap.sequential.StopRule` that may end the wild test
    before ``n_wild`` replicates once its decision is settled (None: all of them).
    ``recipe``: the recipe of a table whose ``variant`` column holds several (default the one
    ``law`` was fitted to, else "baseline"; :func:`phifit.recipes.pairing.recipe_runs`).

    It is :func:`setup_drift`, then the setup's bootstrap chunks and its test, then
    :meth:`DriftSetup.finish`: a caller with workers of its own may run the chunks and the test
    as its own tasks (the report does), with the same numbers.
    """
    from ..runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=law)  # one recipe of a mixed table, as --variant picks it
    check_backend(backend, scheduler)
    setup = setup_drift(
        runs,
        law,
        method=method,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        level=level,
        n_starts=n_starts,
        wild_stop=wild_stop,
    )
    if isinstance(setup, DriftFit):
        return setup
    return finish_check(setup, n_jobs=n_jobs, backend=backend, scheduler=scheduler)


@dataclass
class DriftSetup:
    """The drift law's point fits on a table, and what its cell bootstrap and its test of
    phi_1 = 0 refit (:func:`setup_drift`).

    ``x0``: the one-phi optimum (six coordinates); ``fit``: the drift law's fit (seven,
    :class:`~phifit.diagnostics.drift_law.MultiStart`); ``statistic``: T = F_one_phi - F_drift;
    ``weights``: the cell bootstrap's (n_boot, n_runs) weights, ``ident``: the replicates whose
    table identifies phi_1 (the others are not refitted).  :meth:`boot_tasks` are the
    bootstrap's refits in chunks (arguments of
    :func:`~phifit.diagnostics.multipliers.refit_weighted_rows`), :func:`drift_wild_test` the
    test; :meth:`finish` gathers them into the :class:`DriftFit`."""

    runs: RunTable
    budget: np.ndarray
    c_ref: float
    delta: float
    model0: Any
    model1: DriftModel
    spec0: LawSpec
    box1: tuple[np.ndarray, np.ndarray]
    x0: np.ndarray
    fit: MultiStart
    statistic: float
    weights: np.ndarray
    ident: np.ndarray
    n_boot: int
    n_wild: int
    seed: int
    level: float
    wild_stop: StopRule | None

    def wild_test(self, parallel: dict[str, Any] | None = None) -> WildTest:
        """The test of this setup (:func:`drift_wild_test`)."""
        return drift_wild_test(self, parallel)

    def boot_tasks(self, size: int = CHUNK) -> list[tuple]:
        """The cell bootstrap's refits: one argument tuple of
        :func:`~phifit.diagnostics.multipliers.refit_weighted_rows` per chunk of ``size``
        replicates, each started from the drift law's estimate (each replicate's refit is its
        own: any ``size`` gives the same numbers)."""
        lower, upper = self.box1
        y = self.runs.log_loss
        return [
            (self.model1, lower, upper, (self.fit.x,), y, self.weights[ch], self.delta)
            for ch in replicate_chunks(self.ident, size)
        ]

    def finish(self, chunk_results: list[tuple], wild: WildTest | None, size: int = CHUNK) -> DriftFit:
        """The :class:`DriftFit` from the results of :meth:`boot_tasks` (in their order, cut in
        chunks of ``size``) and the test (:func:`drift_wild_test`; None: not run)."""
        lo1, hi1 = self.box1
        x1 = self.fit.x
        warnings = _fit_cautions(x1, lo1, hi1, self.fit.converged)
        on_bound = bool(min(x1[6] - lo1[6], hi1[6] - x1[6]) <= 1e-6 * (hi1[6] - lo1[6]))
        n_boot, seed, level = self.n_boot, self.seed, self.level
        draws = np.full((0, 2), np.nan)
        reasons: dict[str, int] = {}
        n_failed = 0
        if n_boot:
            chunks = replicate_chunks(self.ident, size)
            x, reasons = gather_refits(self.ident, chunks, chunk_results, len(lo1), UNIDENTIFIED)
            draws = x[:, 5:7]
            n_failed = int(sum(reasons.values()))
            warnings += failed_refit_cautions(
                SOURCE, "drift of phi", "phi_0 or phi_1", n_failed, n_boot, reasons
            )
        cis = _phi_intervals(draws, n_boot, n_failed, level, seed)
        budgets = np.unique(self.budget)
        # phi(C_b) = phi_0 + phi_1 log(C_b / C_ref) of each replicate: its interval per budget
        at_budget = draws[:, :1] + draws[:, 1:2] * np.log(budgets / self.c_ref)[None, :]
        budget_cis = _phi_intervals(at_budget, n_boot, n_failed, level, seed) if n_boot else []
        if any(None in ci for ci in budget_cis):
            budget_cis = []
        if wild is not None:
            warnings += _resourced(wild.warnings)
        return DriftFit(
            phi_0=float(x1[5]),
            phi_1=float(x1[6]),
            phi_0_ci=cis[0],
            phi_1_ci=cis[1],
            c_ref=self.c_ref,
            budgets=[float(v) for v in budgets],
            phi=float(self.x0[5]),
            params=_natural_params(x1),
            phi_1_bounds=[float(v) for v in PHI1_BOUNDS],
            on_bound=on_bound,
            statistic=self.statistic,
            wild=wild,
            n_boot=int(n_boot),
            n_failed=n_failed,
            failure_reasons=reasons,
            level=float(level),
            n_runs=len(self.runs),
            testable=True,
            reason="",
            verdict=_verdict(float(x1[6]), cis[1], on_bound, wild),
            phi_budget_ci=budget_cis,
            seed=int(seed),
            warnings=warnings,
        )


def setup_drift(
    runs: RunTable,
    law: FitResult | None = None,
    *,
    method: str = "huber",
    n_boot: int = defaults.N_BOOT,
    n_wild: int = defaults.N_WILD,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    n_starts: int = defaults.N_STARTS,
    wild_stop: StopRule | None = None,
) -> DriftSetup | DriftFit:
    """The first part of :func:`fit_drift` (same keywords): the arguments checked, the null and
    drift-law point fits and the cell bootstrap's weights, as a :class:`DriftSetup`; or the
    untestable :class:`DriftFit` when the table cannot test a drift (:func:`drift_reason`)."""
    runs = as_runs(runs)
    _check_drift_arguments(method, n_boot, n_wild, law)
    budget = budget_values(runs.frame)
    reason = drift_reason(runs, budget)
    if reason:
        return _untestable(runs, budget, reason, level, seed)
    bounds = DEFAULT_BOUNDS if law is None else refit_settings(law)[0].bounds
    delta = DELTA if method == "huber" else np.inf
    offset, c_ref = budget_offsets(budget)
    design, y = runs.design, runs.log_loss
    spec0 = LawSpec(bounds=bounds)
    model0, model1 = law_model(spec0, design), DriftModel(design, offset)
    box1 = drift_box(spec0.bounds)
    fit_kw: dict[str, Any] = {"delta": delta, "n_starts": n_starts, "seed": seed}
    warm = [] if law is None else [law.theta]
    x0, free = _null_and_drift_fits(model0, model1, y, spec0, box1, warm, fit_kw)
    y0 = model0(x0[None, :])[0][0]
    statistic = max(float(loss_terms(y0 - y, delta).sum() - free.objective), 0.0)
    weights, ident = (
        _cell_draws(runs, budget, n_boot, seed)
        if n_boot
        else (np.zeros((0, len(runs))), np.zeros(0, dtype=bool))
    )
    return DriftSetup(
        runs=runs,
        budget=budget,
        c_ref=c_ref,
        delta=delta,
        model0=model0,
        model1=model1,
        spec0=spec0,
        box1=box1,
        x0=x0,
        fit=free,
        statistic=statistic,
        weights=weights,
        ident=ident,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        level=level,
        wild_stop=wild_stop,
    )


def drift_wild_test(setup: DriftSetup, parallel: dict[str, Any] | None = None) -> WildTest:
    """The restricted wild cluster bootstrap of phi_1 = 0 of a :class:`DriftSetup` (its
    ``n_wild`` replicates, its stop rule), refits on ``parallel`` (keywords of
    :func:`phifit.fitters.parallel.parallel_map`; None: in this process)."""
    y = setup.runs.log_loss
    y0 = setup.model0(setup.x0[None, :])[0][0]
    null = Refit(setup.model0, setup.spec0.lower, setup.spec0.upper, (setup.x0,))
    alternative = Refit(setup.model1, *setup.box1, (np.append(setup.x0, 0.0), setup.fit.x))
    return _wild_test(
        setup.runs,
        y,
        y0,
        null,
        alternative,
        setup.delta,
        setup.statistic,
        setup.n_wild,
        setup.seed,
        parallel or {"n_jobs": 1},
        setup.wild_stop,
    )


def _check_drift_arguments(method: str, n_boot: int, n_wild: int, law: FitResult | None) -> None:
    """Raise ``ValueError`` on an unknown method, too small n_wild or n_boot, or a law with fixed values."""
    if method not in METHODS:
        raise ValueError(f"drift fit: unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if n_wild and n_wild < defaults.N_WILD_MIN:
        raise ValueError(
            f"n_wild must be 0 (off) or >= {defaults.N_WILD_MIN} for a p-value at the 5% level, got {n_wild}"
        )
    if n_boot < 0 or n_boot == 1:
        raise ValueError(f"n_boot must be 0 (off) or >= 2, got {n_boot}")
    if law is not None and law.fixed:
        raise ValueError("drift fit: the law must be fitted with every parameter free")


def _null_and_drift_fits(
    model0: Any,
    model1: DriftModel,
    y: np.ndarray,
    spec0: LawSpec,
    box1: tuple[np.ndarray, np.ndarray],
    warm: list[np.ndarray],
    fit_kw: dict[str, Any],
) -> tuple[np.ndarray, MultiStart]:
    """(the one-phi optimum x0, the drift-law fit started from x0, x0 with trial drifts and ``warm``)."""
    # a given law is the Huber fit's multi-start optimum already: the null is polished from it
    null_kw = fit_kw if not warm else {**fit_kw, "n_starts": 0}
    null = multistart_fit(model0, y, spec0.lower, spec0.upper, starts=warm, **null_kw)
    x0 = null.x
    tries = (
        [np.append(x0, 0.0)] + [np.append(x0, d) for d in TRIAL_DRIFTS] + [np.append(t, 0.0) for t in warm]
    )
    return x0, multistart_fit(model1, y, *box1, starts=tries, **fit_kw)


def _phi_intervals(
    draws: np.ndarray, n_boot: int, n_failed: int, level: float, seed: int
) -> list[list[float | None]]:
    """The percentile interval of each column of the cell-bootstrap draws ([phi_0, phi_1], or phi(C)
    per budget; [None, None]: withheld or infinite)."""
    withheld = not n_boot or intervals_withheld(n_failed, n_boot)
    cis = []
    for j in range(draws.shape[1]):
        iv = bootstrap_interval(draws[:, j], level=level, mc_seed=seed) if not withheld else None
        ok = iv is not None and np.isfinite(iv.lo) and np.isfinite(iv.hi)
        cis.append([float(iv.lo), float(iv.hi)] if ok else [None, None])
    return cis


def _resourced(cautions: list[Caution]) -> list[Caution]:
    """The wild test's cautions under this module's source (same kind, message, level, values)."""
    return [caution(SOURCE, w.kind, w.message, level=w.level, **dict(w.values)) for w in cautions]


def _natural_params(x: np.ndarray) -> dict[str, float]:
    """The shared law parameters in natural units: A = exp(a), B = exp(b), E = exp(e), alpha, beta."""
    natural = (float(np.exp(v) if c in ("a", "b", "e") else v) for c, v in zip(THETA_NAMES, x[:5]))
    return dict(zip((THETA_TO_PARAM[c] for c in THETA_NAMES[:5]), natural))


def _untestable(runs: RunTable, budget: np.ndarray | None, reason: str, level: float, seed: int) -> DriftFit:
    return DriftFit(
        phi_0=None,
        phi_1=None,
        phi_0_ci=[None, None],
        phi_1_ci=[None, None],
        c_ref=None,
        budgets=[] if budget is None else [float(v) for v in np.unique(budget)],
        phi=None,
        params={},
        phi_1_bounds=[float(v) for v in PHI1_BOUNDS],
        on_bound=False,
        statistic=None,
        wild=None,
        n_boot=0,
        n_failed=0,
        failure_reasons={},
        level=float(level),
        n_runs=len(runs),
        testable=False,
        reason=reason,
        verdict=f"a drift of phi with compute cannot be tested: {reason}",
        seed=int(seed),
        warnings=[caution(SOURCE, "untestable", f"drift of phi not tested: {reason}", level="note")],
    )


def _verdict(phi_1: float, ci: list[float | None], on_bound: bool, wild: WildTest | None) -> str:
    """One plain sentence reading phi_1 and its test."""
    per = f"phi_1 = {phi_1:+.3f} per e-fold of compute"
    if on_bound:
        return (
            f"undecided: {per} sits on the bound of its box, so the table does not locate a drift of phi "
            "(the test and the interval are not read)"
        )
    if wild is None:
        return f"not tested (no wild bootstrap): {per}"
    p = wild.p_value
    if p != p:
        return f"not decided: no wild bootstrap replicate converged; {per}"
    if p < SIGNIFICANCE:
        direction = "grows" if phi_1 > 0 else "falls"
        lo, hi = ci
        borderline = (
            "; borderline: the cell-bootstrap interval still includes 0"
            if lo is not None and hi is not None and lo <= 0.0 <= hi
            else ""
        )
        return f"phi {direction} with compute: {per} (wild cluster bootstrap p = {p_text(p)}){borderline}"
    return f"no evidence that phi changes with compute: {per} (wild cluster bootstrap p = {p_text(p)})"


def _fit_cautions(x: np.ndarray, lower: np.ndarray, upper: np.ndarray, converged: bool) -> list[Caution]:
    """Cautions of the drift fit itself: coordinates on the box, an unconverged polish."""
    out: list[Caution] = []
    names = (*THETA_NAMES[:5], "phi_0", "phi_1")
    for name, v, lo, hi in zip(names, x, lower, upper):
        tol = 1e-6 * (hi - lo)
        if v <= lo + tol or v >= hi - tol:
            bound = lo if abs(v - lo) <= abs(v - hi) else hi
            out.append(
                caution(
                    SOURCE,
                    "at_bound",
                    f"drift fit: {name} = {v:.6g} at its bound {bound:g}; the optimum may lie outside "
                    "the box",
                    parameter=name,
                    value=float(v),
                    bound=float(bound),
                )
            )
    if not converged:
        out.append(caution(SOURCE, "unconverged", "drift fit: the polish did not report convergence"))
    return out


# -- the cell bootstrap ------------------------------------------------------------------------
#: The failure of a drift bootstrap replicate whose table does not identify phi_1.
UNIDENTIFIED = "phi_1 not identifiable in the resampled table (looped runs at one budget, or one r)"


def _cell_draws(runs: RunTable, budget: np.ndarray, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The cell bootstrap's (n_boot, n_runs) weights and which replicates identify phi_1 (looped
    runs at two budgets or more, and two r or more)."""
    cells, _ = runs.cells(None)
    # the block bootstrap's first stream: the same resampled tables as the law's bootstrap
    stream = np.random.SeedSequence(seed).spawn(3)[0]
    weights = draw_weights(cells, n_boot, np.random.default_rng(stream))
    present = weights > 0
    r = np.asarray(runs.r, dtype=float)
    looped = (r > 1) & (np.asarray(runs.n_rec) > 0)
    n_budgets = sum(present[:, looped & (budget == b)].any(axis=1).astype(int) for b in np.unique(budget))
    n_r = sum(present[:, r == v].any(axis=1).astype(int) for v in np.unique(r))
    return weights, np.asarray((n_budgets >= 2) & (n_r >= 2), dtype=bool).reshape(n_boot)


# -- the test of phi_1 = 0 ---------------------------------------------------------------------
def _wild_test(
    runs: RunTable,
    y: np.ndarray,
    y0: np.ndarray,
    null: Refit,
    alternative: Refit,
    delta: float,
    observed: float,
    n_wild: int,
    seed: int,
    parallel: dict[str, Any],
    stop: StopRule | None = None,
) -> WildTest:
    """The restricted wild cluster bootstrap of phi_1 = 0, signs per (budget, r) cell."""
    codes, label = runs.cells(None)
    stats, ok = wild_cluster_statistics(
        y=y,
        null_pred=y0,
        codes=codes,
        null=null,
        alternative=alternative,
        delta=delta,
        n_boot=n_wild,
        rng=np.random.default_rng(seed),
        observed=observed,
        stop=stop,
        **parallel,
    )
    return wild_test_result(
        "phi_1 = 0 (one phi for every budget)",
        observed,
        stats,
        ok,
        block=label,
        n_blocks=int(codes.max()) + 1,
        seed=seed,
        source=SOURCE,
        n_max=n_wild,
        stop=stop,
    )


__all__ = [
    "DriftFit",
    "DriftSetup",
    "drift_reason",
    "drift_wild_test",
    "fit_drift",
    "setup_drift",
]
