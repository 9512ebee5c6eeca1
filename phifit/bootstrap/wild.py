"""Restricted wild cluster bootstrap tests of a restriction on the law (phi = 0, phi = 1, ...).

Real sweeps share noise within a (budget, r) cell: one data order, one seed, one learning-rate
choice per cell.  A likelihood-ratio test that treats the runs as independent is then badly
over-sized (it rejects a true phi = 0 in about a quarter of such tables at the 5% level).
This test keeps the cell structure (Cameron, Gelbach and Miller 2008, "Bootstrap-based
improvements for inference with clustered errors", REStat 90(3); the restricted version,
Davidson and MacKinnon 2010; Roodman et al. 2019, "Fast and wild", Stata J. 19(1)):

1. Fit the law under the restriction (the null) and the free law.  The statistic is the
   drop of the fit's own objective, T = F_null - F_free >= 0 (summed Huber on log-loss
   residuals, or half the sum of squares for least squares).
2. From the null fit's predictions y0_i = log L_hat0_i and residuals e_i = log L_i - y0_i,
   build B tables y*_bi = y0_i + v_bc e~_i with one weight v_bc per cell c (runs of a cell
   keep their residuals together, so noise shared within a cell is kept): Rademacher signs
   +-1, or Webb's six points +-sqrt(1/2), +-1, +-sqrt(3/2) below ``MIN_CELLS`` cells, where
   2^G sign patterns are too few (Webb 2023, "Reworking wild bootstrap-based inference for
   clustered errors", Can. J. Econ. 56(3)).  Each cell's mean residual is first divided by
   sqrt(1 - h_c), with h_c the share of a shift common to the cell's runs that the null fit
   absorbs (:func:`adjusted_residuals`, ``"cell-leverage"``): a fit absorbs part of the noise
   the cells share, hardly any of the deviations within a cell, and flipping raw residuals
   regenerates too little shared noise.  ``benchmarks/wild_few_clusters.py`` measures the
   choices side by side on the 12-cell CPU design with cell-shared noise (true phi = 0):
   raw residuals reject in ~11% of tables at 5%, CR2 leverage-adjusted ones (run level,
   Huber weights) as often, every residual or every cell mean rescaled by sqrt(G / (G - k0))
   in ~1-3% (too few: the law's k0 parameters also fit the shapes within cells, so they
   absorb less than k0 / G of the cell-level noise); ``benchmarks/bootstrap_coverage.py``
   (condition ``small-cell-shared``) measures the default.
3. Refit both laws to every table (the null from its estimate, and from the free estimate with
   the null's fixed values where its estimate has a vanished coordinate, :func:`null_starts`;
   the free law from the null solution and from its own estimate; on the batched engine; a
   table whose first LM stops unconverged also tries :data:`N_SPREAD` spread starts per law, as
   the block bootstrap's refits do; rows still unconverged are finished together by
   exact-Hessian Newton steps, then by its active-set LM, the least-squares polish only as a
   fallback) and record T*_b.
4. p = (1 + #{b: T*_b >= T}) / (1 + B').  B' counts the replicates whose refits converged;
   failures are counted, never dropped silently.  The smallest attainable p is
   max(1 / (1 + B'), 1 / #patterns) and is reported: a test whose smallest p is not below
   the level cannot reject at it.

With fewer than 2 cells per free parameter beyond the free law's own (G - k < 2) the free
fit all but interpolates the cell means and the test cannot be read (:func:`too_few_clusters`;
``phifit compare`` then reports the restriction as undecided).  With independent noise the
test agrees with the chi-square test; with shared noise it holds its size where the
chi-square test does not (``benchmarks/bootstrap_coverage.py`` measures both).

The draws of step 2 (the weight distributions, the residual adjustments, the smallest attainable
p) live in :mod:`phifit.bootstrap.wild_draws`, and every public name there is importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import defaults
from ..cautions import Caution, caution
from ..defaults import resolve_workers
from ..fitters.lm import best_of_starts, finish_lm
from ..fitters.newton import batched_newton, has_curvature
from ..fitters.objective import law_model, loss_terms, refit_settings
from ..fitters.parallel import check_backend, parallel_map
from ..fitters.polish import polish_residuals
from ..fitters.refit import search_spread, spread_in_box
from ..law import Design, LawSpec, log_loss, log_loss_and_jacobian, vanished
from ..result import FitResult
from ..serialize import JsonIO, to_plain
from .sequential import StopRule
from .wild_draws import (  # noqa: F401  (the draws live in their own module; every public name is re-exported)
    ADJUST_TEXT,
    ADJUSTMENTS,
    DEFAULT_ADJUST,
    MIN_CELLS,
    MIN_ONE_MINUS_LEVERAGE,
    WEIGHTS,
    Refit,
    adjusted_residuals,
    choose_weights,
    draw_weights,
    min_attainable_p,
    n_patterns,
    too_few_clusters,
)

if TYPE_CHECKING:  # pandas stays out of the worker processes that refit the wild tables (start-up)
    import pandas as pd

    from ..runs.table import RunTable


@dataclass(frozen=True)
class WildTest(JsonIO):
    """A restricted wild cluster bootstrap test of one restriction against the free law.

    ``statistic`` T = F_null - F_free (the fits' own objective); ``p_value`` =
    (1 + #{T* >= T}) / (1 + n_ok); ``null_quantiles`` the 50/90/95/99% quantiles of T*;
    ``block`` and ``n_blocks`` the clusters whose signs were flipped.  ``n_max``: the replicates
    the test would have drawn, when it stopped after ``n_boot`` of them because p's side of
    ``stop_level`` was settled (:mod:`phifit.bootstrap.sequential`); None when it ran them all.
    """

    restriction: str
    statistic: float
    p_value: float
    n_boot: int
    n_failed: int
    block: str
    n_blocks: int
    null_quantiles: dict[str, float] = field(default_factory=dict)
    seed: int = defaults.SEED
    warnings: list[Caution] = field(default_factory=list)
    weights: str = "rademacher"
    adjust: str = "none"
    min_p: float | None = None
    n_max: int | None = None
    stop_level: float | None = None

    @property
    def stopped_early(self) -> bool:
        return self.n_max is not None and self.n_max > self.n_boot

    @property
    def n_ok(self) -> int:
        return self.n_boot - self.n_failed

    def resolves(self, level: float = 0.05) -> bool:
        """Whether the test can reject at ``level`` at all: its smallest attainable p-value,
        max(1 / (1 + replicates), 1 / distinct weight patterns), is below ``level``."""
        return self.min_p is None or self.min_p < level

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "warnings"}
        if not self.stopped_early:  # a test that ran every replicate reads as it always did
            del out["n_max"], out["stop_level"]
        out["warnings"] = [w.to_dict() for w in self.warnings]
        out["method"] = "restricted wild cluster bootstrap (Rademacher signs per block)"
        return to_plain(out)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WildTest:
        names = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["warnings"] = [Caution.from_dict(w, source="compare") for w in data.get("warnings") or []]
        kwargs["statistic"] = float(kwargs["statistic"])
        kwargs["p_value"] = float(kwargs["p_value"])
        return cls(**kwargs)

    def replicates_text(self) -> str:
        """How many replicates the p-value rests on, and why fewer than asked when it stopped."""
        if self.stopped_early:
            failed = f" ({self.n_failed} failed)" if self.n_failed else ""
            return (
                f"{self.n_boot} replicates{failed} of at most {self.n_max}, stopped once p's side of "
                f"{self.stop_level:g} was settled"
            )
        return f"{self.n_ok} replicates" if not self.n_failed else f"{self.n_ok} of {self.n_boot} replicates"

    def summary(self) -> str:
        floor = f", smallest attainable p {self.min_p:.2g}" if self.min_p is not None else ""
        return (
            f"{self.restriction}: T = {self.statistic:.4g}, wild cluster bootstrap p = {self.p_value:.4g} "
            f"({self.replicates_text()}, {self.weights} weights per {self.block} block, "
            f"{self.n_blocks} blocks, residuals {ADJUST_TEXT.get(self.adjust, self.adjust)}{floor})"
        )


def _objective(pred: np.ndarray, y: np.ndarray, delta: float) -> np.ndarray:
    return loss_terms(pred - y, delta).sum(-1)


#: Iterations of the batched active-set finish of rows the first LM left unconverged.
FINISH_ITER = 10_000

#: Spread starts per wild table and law (:func:`spread_in_box`: half around the law's last
#: start, half uniform in its box), drawn after the sign weights and tried on the tables whose
#: first LM did not converge (:func:`_refit`).  Measured on a 10-run table at one token count
#: (``benchmarks/report_speed_tables.py``'s table (a), the test of phi_0 = -3, 100 tables,
#: against the lowest end of 12 random starts and the polish per table and law): without them
#: the free law's refit missed that minimum on 14 tables (by a median 49%), with them on 5; its
#: refits also took less time (better starts leave fewer rows crawling; docs/benchmarks.md,
#: 'Figures once kept in docstrings').
N_SPREAD = 8
#: A spread start goes on past its exploration only when it is already below its row's best
#: end (``prune_ratio`` of :func:`~phifit.fitters.refit.search_spread`).  The block bootstrap's
#: 2.0, with spread starts on every table, made the study's report markedly slower (the free
#: multipliers' and the drift's wild tests carried almost every spread start); 1.0, on the
#: unconverged tables only, keeps its time and still shortens table (a)'s (docs/benchmarks.md,
#: 'Figures once kept in docstrings').
SPREAD_PRUNE = 1.0

#: The least-squares polish of a wild refit stops when an iteration changes the objective by less
#: than this fraction: the statistic T* = F_null - F_alt needs the objectives, not the points, and a
#: row the polish reaches crawls along a flat valley where the point moves and F does not.
POLISH_FTOL = 1e-10


def _residuals(model: Callable, y: np.ndarray) -> tuple[Callable, Callable]:
    """``fun(x)`` (the residuals) and ``jac(x)`` (their Jacobian) of one response for the
    least-squares polish, sharing one evaluation of ``model`` per point (the polish asks for
    both at the same x)."""
    last: dict[str, Any] = {}

    def evaluate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if last.get("x") is None or not np.array_equal(last["x"], x):
            pred, jac_t = model(x[None, :])
            last.update(x=np.array(x, copy=True), res=pred[0] - y, jac=jac_t[0].T)
        return last["res"], last["jac"]

    # copies: scipy scales the residuals and the Jacobian of a robust loss in place
    return (lambda x: evaluate(x)[0].copy()), (lambda x: evaluate(x)[1].copy())


def _refit(
    law: Refit,
    y: np.ndarray,
    delta: float,
    spread: np.ndarray | None = None,
    max_iter: int = 300,
    finish_iter: int = FINISH_ITER,
) -> tuple[np.ndarray, np.ndarray]:
    """Best objective per row of ``y`` (B, n) over the starts, and whether it converged.

    Every row starts from each of the law's starts; a row the first LM leaves unconverged also
    tries its own spread starts ``spread`` (B, K, k) as the block bootstrap's refits do
    (:func:`~phifit.fitters.refit.search_spread`: a short exploration, and those already below
    the row's best end run on; :data:`N_SPREAD`, :data:`SPREAD_PRUNE`).

    Rows the LM leaves unconverged (typically log E creeping along its bound) are finished as
    the bootstrap's refits are (:func:`phifit.fitters.refit.polish_unconverged`): first all
    together by projected Newton steps with the exact Hessian
    (:func:`~phifit.fitters.newton.batched_newton`, when the model gives its curvature), then
    the rows it does not finish by the active-set LM from where they stopped, for up to ``finish_iter``
    iterations (it only accepts steps that lower the objective; an iteration on a batch of
    rows costs far less than one scipy polish, and a row creeping along a flat valley needs
    thousands); a row it does not finish is refined by the least-squares polish.

    A row whose objective the finish lowered a lot is kept where the finish left it.  Polishing
    such rows a second time from where the first LM stopped (in case the finish had crossed into
    another basin) took two thirds of the wild refits' time on a 10-run table at one token count
    and lowered 3 of 796 rows' objectives, by at most 2%: less than the Monte-Carlo error of any
    p-value built on them.
    """
    best_x, best_obj, best_conv = best_of_starts(
        law.model, law.starts, y, 1.0, law.lower, law.upper, delta=delta, max_iter=max_iter
    )
    if spread is not None:
        # the rows the first LM left unconverged, where a better basin is likeliest and a
        # crawl costs most; only spread ends below the row's best after the exploration go on
        rows = np.flatnonzero(~best_conv)
        if len(rows):
            best = (best_x[rows], best_obj[rows], best_conv[rows], None)
            search_spread(
                law.model,
                y[rows],
                1.0,
                law.lower,
                law.upper,
                spread[rows],
                best,
                delta=delta,
                max_iter=max_iter,
                prune_ratio=SPREAD_PRUNE,
            )
            best_x[rows], best_obj[rows], best_conv[rows] = best[:3]
    rows = np.flatnonzero(~best_conv & np.isfinite(best_obj))
    if len(rows) and has_curvature(law.model):
        newton = batched_newton(law.model, best_x[rows], y[rows], 1.0, law.lower, law.upper, delta=delta)
        done = newton.converged & (newton.objective <= best_obj[rows])  # always lower: a guard
        best_x[rows[done]], best_obj[rows[done]] = newton.x[done], newton.objective[done]
        best_conv[rows[done]] = True
        rows = rows[~done]
    if len(rows) == 0:
        return best_obj, best_conv
    lm = finish_lm(
        law.model,
        best_x[rows],
        y[rows],
        1.0,
        law.lower,
        law.upper,
        delta=delta,
        max_iter=finish_iter,
    )
    lower = np.isfinite(lm.objective) & (lm.objective <= best_obj[rows])  # always: a guard
    done = lm.converged & lower
    best_x[rows[lower]], best_obj[rows[lower]] = lm.x[lower], lm.objective[lower]
    best_conv[rows[done]] = True
    for i in rows[~done]:
        fun, jac = _residuals(law.model, y[i])
        sol = polish_residuals(fun, jac, best_x[i], law.lower, law.upper, delta, ftol=POLISH_FTOL)
        if sol is None or sol.status <= 0:
            continue
        obj = float(_objective(law.model(sol.x[None, :])[0][0], y[i], delta))
        if obj <= best_obj[i] * (1 + 1e-9):
            best_obj[i], best_conv[i] = obj, True
    return best_obj, best_conv


def null_starts(
    spec0: LawSpec, theta0: np.ndarray, theta1: np.ndarray, design: Design
) -> tuple[np.ndarray, ...]:
    """The null law's starts: its own fit ``theta0``, and, where that fit has coordinates whose
    Jacobian has vanished (:func:`phifit.law.vanished`), also the free fit ``theta1`` with the
    null's fixed values (``spec0``'s free coordinates of it, in its box).  A null fit that is
    the constant model (log A at -5 with alpha at 2.5, the law's power term ~1e-20 of the loss)
    has no gradient towards the null's other optima; the free fit is alive there.  Measured on
    table (a)'s test of phi_0 = -3 (100 tables, against the lowest end of 12 random starts and
    the polish per table): the null's refit missed that minimum on 30 tables (by up to 4.7 times
    the objective) from its own fit alone, on 11 (by at most 59%) with the second start.  A live
    null fit keeps its one start (a second costs every table another LM run, which lengthened
    the shipped CPU tables' test-inverted sets: docs/benchmarks.md, 'Where `phifit report` spends
    its time on table (a)', 'Rows that could not move')."""
    mask = spec0.free_mask
    _, jac = log_loss_and_jacobian(theta0, design)
    if not vanished((jac[:, mask] ** 2).sum(axis=0)).any():
        return (theta0[mask],)
    return (theta0[mask], np.clip(theta1[mask], spec0.lower, spec0.upper))


def wild_cluster_statistics(
    y: np.ndarray,
    null_pred: np.ndarray,
    codes: np.ndarray,
    null: Refit,
    alternative: Refit,
    delta: float,
    n_boot: int,
    rng: np.random.Generator,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    adjust: str = DEFAULT_ADJUST,
    weights: str = "auto",
    observed: float | None = None,
    stop: StopRule | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """T*_b = F_null - F_alt refitted on y*_b = y0 + s_bc (y - y0), one Rademacher sign per
    cluster c (``codes``: each run's cluster); returns (T* (n,), converged (n,)) with n = B
    unless the test stopped early.  The alternative's starts should include the null solution,
    so that T* >= 0 up to tolerance.

    With ``stop`` (a :class:`phifit.bootstrap.sequential.StopRule`) and the ``observed`` T, the B
    tables (drawn in one go, so the first n are the full test's first n) are refitted in the
    rule's stages and the refits stop once p's side of the rule's level is settled; the arrays
    returned are then the first n.  With more than one worker (``n_jobs``, None:
    :func:`phifit.defaults.workers`) and at least ``2 * MIN_ROWS_PER_JOB`` tables in a stage, the
    null's and the alternative's refits of the stage's tables are tasks of
    :func:`phifit.fitters.parallel.parallel_map` on ``backend`` (``scheduler``: a Dask scheduler's
    address; :func:`run_wild_jobs` says how they are cut).  Each table's refits are its own: the
    same numbers on any backend and any cut.  :func:`prepare_wild` and :func:`run_wild_jobs` run
    several such tests side by side."""
    job = prepare_wild(
        y, null_pred, codes, null, alternative, delta, n_boot, rng, adjust, weights, observed, stop
    )
    return run_wild_jobs([job], n_jobs=n_jobs, backend=backend, scheduler=scheduler)[0]


@dataclass
class WildJob:
    """One wild test's refits, drawn and waiting (:func:`prepare_wild`): its B tables ``y_star``,
    its two laws and loss, the replicate counts of its ``stages`` (one: all B, without a stop
    rule) and what the stages run so far gave."""

    y_star: np.ndarray
    null: Refit
    alternative: Refit
    delta: float
    observed: float | None
    stop: StopRule | None
    stages: list[int]
    spreads: tuple[np.ndarray, np.ndarray] | None = None
    stats: list[np.ndarray] = field(default_factory=list)
    oks: list[np.ndarray] = field(default_factory=list)
    done: int = 0  # tables refitted so far
    finished: bool = False

    def next_tables(self) -> np.ndarray:
        """The tables of the next stage."""
        return self.y_star[self.done : self.stages[len(self.stats)]]

    def next_spreads(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The spread starts (null's, alternative's) of the next stage's tables."""
        if self.spreads is None:
            return None, None
        stage = slice(self.done, self.stages[len(self.stats)])
        return self.spreads[0][stage], self.spreads[1][stage]

    def record(self, f0: np.ndarray, ok0: np.ndarray, f1: np.ndarray, ok1: np.ndarray) -> None:
        """Add a stage's refits; the job is finished after its last stage, or sooner once its
        stop rule settles p's side of the level."""
        self.oks.append(ok0 & ok1 & np.isfinite(f0) & np.isfinite(f1))
        self.stats.append(np.maximum(f0 - f1, 0.0))
        self.done += len(f0)
        if len(self.stats) == len(self.stages):
            self.finished = True
        elif self.stop is not None and self.observed is not None:
            t_star, ok = np.concatenate(self.stats), np.concatenate(self.oks)
            self.finished = self.stop.decided(exceedances(t_star[ok], self.observed), int(ok.sum()))

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(T* (n,), converged (n,)) of the tables refitted."""
        return np.concatenate(self.stats), np.concatenate(self.oks)


def prepare_wild(
    y: np.ndarray,
    null_pred: np.ndarray,
    codes: np.ndarray,
    null: Refit,
    alternative: Refit,
    delta: float,
    n_boot: int,
    rng: np.random.Generator,
    adjust: str = DEFAULT_ADJUST,
    weights: str = "auto",
    observed: float | None = None,
    stop: StopRule | None = None,
    n_spread: int = N_SPREAD,
) -> WildJob:
    """The tables of one wild test (:func:`wild_cluster_statistics`' arguments), drawn, and its
    stages; nothing is refitted yet.  ``n_spread`` spread starts per table and law
    (:data:`N_SPREAD`) are drawn after the sign weights: half around the law's own estimate
    (its last start), half uniform in its box."""
    n_clusters = int(codes.max()) + 1
    resid = adjusted_residuals(y - null_pred, codes, null, delta, adjust)
    signs = draw_weights(rng, n_boot, n_clusters, choose_weights(n_clusters, weights))
    y_star = null_pred + signs[:, codes] * resid
    # after the signs, so the tables are those drawn without them
    spreads = (
        tuple(
            spread_in_box(
                np.asarray(law.starts[-1], dtype=float), law.lower, law.upper, n_boot, n_spread, rng
            )
            for law in (null, alternative)
        )
        if n_spread
        else None
    )
    stages = stop.stages(n_boot) if stop is not None and observed is not None else [n_boot]
    return WildJob(y_star, null, alternative, delta, observed, stop, stages, spreads)


def run_wild_jobs(
    jobs: list[WildJob],
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Run the wild tests ``jobs`` side by side, in rounds: each round refits the next stage of
    every job not yet finished, all of them as one set of tasks, so that the workers share the
    jobs' refits and each round waits for one slowest batch rather than one per job and stage;
    returns each job's (T*, converged).

    A round goes to the workers when there are several and it holds at least
    ``2 * MIN_ROWS_PER_JOB`` tables; otherwise it is refitted here.  Each job's stage is cut by
    law, each law's tables in ``max(1, workers // 2)`` parts (one with two workers).  Why by law
    and not by table: a batch of refits costs about as much as its slowest row (the rows a flat
    valley keeps crawling for thousands of iterations of the batched finish, whose per-iteration
    cost hardly depends on how many rows are left), so two half-batches of both laws cost nearly
    twice one whole batch of each.  Each table's refits are its own, and each job's stages and
    stop decisions are its own, so every job gives the same numbers alone or beside others, on
    any backend and any cut."""
    workers = resolve_workers(n_jobs)
    check_backend(backend, scheduler)
    while True:
        active = [job for job in jobs if not job.finished]
        if not active:
            break
        stages = [job.next_tables() for job in active]
        spreads = [job.next_spreads() for job in active]
        if workers > 1 and sum(len(t) for t in stages) >= 2 * MIN_ROWS_PER_JOB:
            cuts = [np.array_split(np.arange(len(t)), max(1, min(workers // 2, len(t)))) for t in stages]
            tasks = [
                (law, tables[part], job.delta, None if spread is None else spread[part])
                for job, tables, parts, pair in zip(active, stages, cuts, spreads, strict=True)
                for law, spread in zip((job.null, job.alternative), pair, strict=True)
                for part in parts
            ]
            done = iter(parallel_map(_refit, tasks, n_jobs=workers, backend=backend, scheduler=scheduler))
            for job, parts in zip(active, cuts, strict=True):
                null_parts = [next(done) for _ in parts]
                alt_parts = [next(done) for _ in parts]
                f0, ok0 = (np.concatenate([d[i] for d in null_parts]) for i in range(2))
                f1, ok1 = (np.concatenate([d[i] for d in alt_parts]) for i in range(2))
                job.record(f0, ok0, f1, ok1)
        else:
            for job, tables, pair in zip(active, stages, spreads, strict=True):
                job.record(*_refit_both(job.null, job.alternative, tables, job.delta, pair))
    return [job.result() for job in jobs]


def exceedances(t_star: np.ndarray, observed: float) -> int:
    """#{b: T*_b >= T}, with a relative tolerance of 1e-9 for refits that reach T exactly."""
    return int(np.sum(t_star >= observed * (1 - 1e-9)))


#: A stage of fewer than twice this many wild tables is refitted in this process (not worth
#: a worker's start-up).
MIN_ROWS_PER_JOB = 100


def _refit_both(
    null: Refit,
    alternative: Refit,
    y_star: np.ndarray,
    delta: float,
    spreads: tuple[np.ndarray | None, np.ndarray | None] = (None, None),
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    f0, ok0 = _refit(null, y_star, delta, spreads[0])
    f1, ok1 = _refit(alternative, y_star, delta, spreads[1])
    return f0, ok0, f1, ok1


def wild_test_result(
    name: str,
    observed: float,
    stats: np.ndarray,
    ok: np.ndarray,
    *,
    block: str,
    n_blocks: int,
    seed: int,
    source: str,
    weights: str = "auto",
    adjust: str = DEFAULT_ADJUST,
    n_max: int | None = None,
    stop: StopRule | None = None,
) -> WildTest:
    """The :class:`WildTest` of an observed statistic against its bootstrap draws
    (``weights``, ``adjust``, ``stop``: as passed to :func:`wild_cluster_statistics`; ``n_max``
    the replicates it was asked for, when ``stop`` may have ended it sooner)."""
    n_boot = len(stats)
    stopped = stop is not None and n_max is not None and n_max > n_boot
    valid = stats[ok]
    n_ok = int(ok.sum())
    weights = choose_weights(n_blocks, weights)
    min_p = min_attainable_p(n_ok, n_blocks, weights) if n_ok else None
    p_value = (1.0 + exceedances(valid, observed)) / (1.0 + n_ok) if n_ok else math.nan
    warnings: list[Caution] = []
    if n_ok < n_boot:
        warnings.append(
            caution(
                source,
                "wild_failed",
                f"{name}: {n_boot - n_ok} of {n_boot} wild bootstrap replicates did not converge "
                "and were left out of the p-value",
                n_failed=n_boot - n_ok,
            )
        )
    if n_blocks < MIN_CELLS:
        patterns = f"{'6' if weights == 'webb' else '2'}^{n_blocks} {weights} weight patterns"
        warnings.append(
            caution(
                source,
                "few_clusters",
                f"{name}: only {n_blocks} blocks ({block}) for the wild cluster bootstrap ({patterns}, "
                f"smallest attainable p {min_p if min_p is not None else math.nan:.2g}): with so few "
                "clusters its size is not guaranteed",
                n_blocks=n_blocks,
                min_p=min_p,
            )
        )
    quantiles = (
        {f"{int(100 * q)}%": float(np.quantile(valid, q)) for q in (0.5, 0.9, 0.95, 0.99)} if n_ok else {}
    )
    return WildTest(
        restriction=name,
        statistic=observed,
        p_value=p_value,
        n_boot=n_boot,
        n_failed=n_boot - n_ok,
        block=block,
        n_blocks=n_blocks,
        null_quantiles=quantiles,
        seed=seed,
        warnings=warnings,
        weights=weights,
        adjust=adjust,
        min_p=min_p,
        n_max=n_max if stopped else None,
        stop_level=stop.level if stopped and stop is not None else None,
    )


def wild_cluster_test(
    runs: RunTable | pd.DataFrame,
    free: FitResult,
    restricted: FitResult,
    *,
    n_boot: int = defaults.N_WILD,
    block: str | None = None,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    adjust: str = DEFAULT_ADJUST,
    weights: str = "auto",
    stop: StopRule | None = None,
) -> WildTest:
    """Restricted wild cluster bootstrap p-value of ``restricted`` against ``free``
    (``n_jobs``, ``backend``, ``scheduler``: where the refits run, :func:`wild_cluster_statistics`;
    ``n_jobs`` None: the cores this process may use; ``stop``: a
    :class:`phifit.bootstrap.sequential.StopRule` that may end the test before ``n_boot``
    replicates once its decision is settled, None: all of them).

    Both fits must be of ``runs`` with the same loss and box (Huber or least squares), the
    restricted one holding more parameters fixed.  ``block``: the clusters (default the
    (budget, r) cells, else single runs; see :meth:`phifit.runs.RunTable.cells`).
    :func:`wild_cluster_tests` runs several restrictions' tests side by side.
    """
    return wild_cluster_tests(
        runs,
        free,
        [restricted],
        n_boot=n_boot,
        block=block,
        seed=seed,
        n_jobs=n_jobs,
        backend=backend,
        scheduler=scheduler,
        adjust=adjust,
        weights=weights,
        stop=stop,
    )[0]


def wild_cluster_tests(
    runs: RunTable | pd.DataFrame,
    free: FitResult,
    restricted: Sequence[FitResult],
    *,
    n_boot: int = defaults.N_WILD,
    block: str | None = None,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    adjust: str = DEFAULT_ADJUST,
    weights: str = "auto",
    stop: StopRule | None = None,
) -> list[WildTest]:
    """:func:`wild_cluster_test` of each fit in ``restricted`` against ``free``, the tests' refits
    run side by side (:func:`run_wild_jobs`); each test is the one it would be alone (its own
    draws from ``seed``, its own stages)."""
    from ..runs.table import as_runs

    runs = as_runs(runs)
    if n_boot < defaults.N_WILD_MIN:
        raise ValueError(
            f"n_boot must be >= {defaults.N_WILD_MIN} for a p-value at the 5% level, got {n_boot}"
        )
    check_backend(backend, scheduler)
    codes, label = runs.cells(block)
    prepared = [
        _prepare_test(runs, free, res, codes, n_boot, seed, adjust, weights, stop) for res in restricted
    ]
    results = run_wild_jobs(
        [job for _, _, job in prepared], n_jobs=n_jobs, backend=backend, scheduler=scheduler
    )
    return [
        wild_test_result(
            name,
            observed,
            stats,
            ok,
            block=label,
            n_blocks=int(codes.max()) + 1,
            seed=seed,
            source="compare",
            weights=weights,
            adjust=adjust,
            n_max=n_boot,
            stop=stop,
        )
        for (name, observed, _), (stats, ok) in zip(prepared, results, strict=True)
    ]


def _prepare_test(
    runs: RunTable,
    free: FitResult,
    restricted: FitResult,
    codes: np.ndarray,
    n_boot: int,
    seed: int,
    adjust: str,
    weights: str,
    stop: StopRule | None,
) -> tuple[str, float, WildJob]:
    """(the restriction's name, the observed T, its drawn :class:`WildJob`) of one test."""
    spec1, delta = refit_settings(free)
    spec0, delta0 = refit_settings(restricted)
    if delta0 != delta or dict(spec0.bounds) != dict(spec1.bounds):
        raise ValueError("the restricted and the free fit must use the same loss and box")
    if not set(spec1.fixed) < set(spec0.fixed):
        raise ValueError("the restricted fit must hold fixed every parameter the free fit does, and more")
    from ..fitters.common import effective_spec

    spec1, _ = effective_spec(runs, spec1)
    design, y = runs.design, runs.log_loss
    theta0, theta1 = restricted.theta, free.theta
    y0 = log_loss(theta0, design)
    observed = float(_objective(y0, y, delta) - _objective(log_loss(theta1, design), y, delta))
    null = Refit(
        law_model(spec0, design), spec0.lower, spec0.upper, null_starts(spec0, theta0, theta1, design)
    )
    # the free law starts from the null solution (so its objective cannot exceed the null's)
    # and from its own estimate
    alternative = Refit(
        law_model(spec1, design), spec1.lower, spec1.upper, (theta0[spec1.free_mask], theta1[spec1.free_mask])
    )
    job = prepare_wild(
        y,
        y0,
        codes,
        null,
        alternative,
        delta,
        n_boot,
        np.random.default_rng(seed),
        adjust,
        weights,
        observed,
        stop,
    )
    name = LawSpec(fixed={k: v for k, v in restricted.fixed.items() if k not in free.fixed}).label()
    return name, observed, job
