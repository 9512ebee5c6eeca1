"""Refits of many weightings of one table: the bootstrap's, the jackknife's, the recipes' and the planner's.

A weighting w (n,) of a run table is the table with run i entered w_i times (integer
weights: a resampled table) or left out (w_i = 0); its refit minimises the objective of
:mod:`phifit.fitters.objective` with those weights, in the fit's own box and loss.
:func:`refit_weighted` refits m weightings:

1. every weighting starts from the point estimate (warm start) and from ``n_spread`` spread
   starts (:func:`spread_starts`), all drawn up front from one generator;
2. the warm starts run to convergence on the batched LM (:mod:`phifit.fitters.lm`); the spread
   starts explore for ``explore_iter`` iterations, and those still within ``prune_ratio`` of
   their warm start's objective run on to convergence;
3. the best end point per weighting is kept (a spread start replaces the warm one only when it
   is better by more than a relative 1e-9, and "switched" records it);
4. rows still unconverged are finished by :func:`polish_unconverged` (batched Newton steps with
   the exact Hessian, :mod:`phifit.fitters.newton`, then a batched active-set LM, then the
   least-squares polish of :mod:`phifit.fitters.polish` as the fallback).

Weightings are cut into chunks of ``chunk_size`` rows, refitted by :func:`refit_chunk` in worker
processes (forked from this one by default) or wherever :mod:`phifit.fitters.parallel` sends them.
Chunks and starts do not depend on the workers or the backend, so neither do the results.
:func:`identifiable_rows` says which weightings still identify phi.

This module and what it imports leave pandas and scipy.optimize out of fresh worker processes
(loky's: a fresh interpreter pays for every import before its first task, docs/benchmarks.md,
'Figures once kept in docstrings'; a forked worker has them already).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..law import Design, LawSpec, log_loss
from .lm import batched_weighted_lm, finish_lm
from .newton import batched_newton
from .objective import DELTA, law_model, loss_terms
from .parallel import check_backend, parallel_map
from .polish import polish

if TYPE_CHECKING:  # pandas stays out of the worker processes
    from ..runs.table import RunTable


@dataclass(frozen=True)
class RefitProblem:
    """Everything a worker needs to refit weighted tables (plain data): the design, the
    log-losses y, the spec's fixed values and box, the loss (delta), and the LM's budgets."""

    design: Design
    y: np.ndarray
    fixed: dict
    bounds: dict
    delta: float
    max_iter: int = 300
    explore_iter: int = 15
    prune_ratio: float = 2.0

    @property
    def spec(self) -> LawSpec:
        return LawSpec(fixed=self.fixed, bounds=self.bounds)


def refit_chunk(
    problem: RefitProblem, weights: np.ndarray, x_hat: np.ndarray, spread: np.ndarray
) -> dict[str, np.ndarray]:
    """Refit weighted tables: warm start plus spread starts, best end point per table (steps 2-4
    of the module docstring).

    ``weights`` (c, n), ``x_hat`` (k,) free coordinates of the point estimate (or (c, k): one
    warm start per table), ``spread`` (c, K, k) extra starts.  Returns per table: ``x`` (c, k), ``objective``,
    ``converged``, ``switched`` (a spread start beat the warm start by more than a
    relative 1e-9), ``n_iter`` (iterations of the best start), ``polished`` (finished by
    :func:`polish_unconverged`).
    """
    spec = problem.spec
    model = law_model(spec, problem.design)
    lo, hi = spec.lower, spec.upper
    c = len(weights)
    kw = {"delta": problem.delta}
    warm = batched_weighted_lm(
        model, warm_starts(x_hat, c), problem.y, weights, lo, hi, max_iter=problem.max_iter, **kw
    )
    best_x, best_obj = warm.x.copy(), warm.objective.copy()
    best_conv, best_it = warm.converged.copy(), warm.n_iter.copy()
    switched = search_spread(
        model,
        problem.y,
        weights,
        lo,
        hi,
        spread,
        (best_x, best_obj, best_conv, best_it),
        delta=problem.delta,
        explore_iter=problem.explore_iter,
        max_iter=problem.max_iter,
        prune_ratio=problem.prune_ratio,
    )
    switched &= best_obj < warm.objective * (1 - 1e-9)
    polished = polish_unconverged(problem, weights, best_x, best_obj, best_conv)
    return {
        "x": best_x,
        "objective": best_obj,
        "converged": best_conv,
        "switched": switched,
        "n_iter": best_it,
        "polished": polished,
    }


def search_spread(
    model: Any,
    y: np.ndarray,
    weights: np.ndarray | float,
    lower: np.ndarray,
    upper: np.ndarray,
    spread: np.ndarray,
    best: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None],
    *,
    delta: float,
    explore_iter: int = 15,
    max_iter: int = 300,
    prune_ratio: float = 2.0,
) -> np.ndarray:
    """Try the spread starts ``spread`` (m, K, k) of m rows against each row's best end so far.

    ``best`` = (x (m, k), objective (m,), converged (m,), iterations (m,) or None), updated in
    place.  Every spread start explores for ``explore_iter`` LM iterations; those still within
    ``prune_ratio`` times their row's best objective run on to ``max_iter``.  A spread end
    replaces the row's best only when lower by more than a relative 1e-9 and converged (or the
    best is not).  ``y`` (n,) shared or (m, n) per row, ``weights`` (m, n) or a scalar, as
    :func:`~phifit.fitters.lm.batched_weighted_lm` takes them.  Returns the (m,) mask of rows a
    spread start replaced."""
    best_x, best_obj, best_conv, best_it = best
    m = len(best_x)
    switched = np.zeros(m, dtype=bool)
    n_spread = spread.shape[1] if spread.ndim == 3 else 0
    if not n_spread:
        return switched
    owner = np.repeat(np.arange(m), n_spread)
    ys = y[owner] if np.ndim(y) == 2 else y
    ws = weights[owner] if np.ndim(weights) == 2 else weights
    explore = batched_weighted_lm(
        model, spread.reshape(-1, spread.shape[-1]), ys, ws, lower, upper, delta=delta, max_iter=explore_iter
    )
    ceiling = prune_ratio * np.where(np.isfinite(best_obj), best_obj, np.inf)[owner]
    carry = (~explore.converged) & (explore.objective <= ceiling)
    x_end, obj_end = explore.x.copy(), explore.objective.copy()
    conv_end, it_end = explore.converged.copy(), explore.n_iter.copy()
    if carry.any():
        more = batched_weighted_lm(
            model,
            explore.x[carry],
            ys[carry] if np.ndim(ys) == 2 else ys,
            ws[carry] if np.ndim(ws) == 2 else ws,
            lower,
            upper,
            delta=delta,
            max_iter=max_iter,
        )
        x_end[carry], obj_end[carry] = more.x, more.objective
        conv_end[carry], it_end[carry] = more.converged, more.n_iter + explore_iter
    obj_end = np.where(np.isfinite(obj_end), obj_end, np.inf)
    for j in range(n_spread):
        rows = np.arange(m) * n_spread + j
        cand = obj_end[rows]
        # a spread start replaces the best end only when it is clearly better
        better = cand < np.where(np.isfinite(best_obj), best_obj, np.inf) * (1 - 1e-9)
        better &= conv_end[rows] | ~best_conv
        switched |= better
        best_x[better], best_obj[better] = x_end[rows][better], cand[better]
        best_conv[better] = conv_end[rows][better]
        if best_it is not None:
            best_it[better] = it_end[rows][better]
    return switched


#: Iterations of the batched active-set finish of rows the refit's LM left unconverged.
FINISH_ITER = 3_000


def polish_unconverged(
    problem: RefitProblem,
    weights: np.ndarray,
    x: np.ndarray,
    objective: np.ndarray,
    converged: np.ndarray,
    far_drop: float = 0.05,
    finish_iter: int = FINISH_ITER,
) -> np.ndarray:
    """Finish, in place, the rows the vectorised LM left unconverged (finite objective).

    The LM stops unconverged after ``max_iter`` steps on long, flat valleys, typically
    log E sliding to its bound on a resampled table with a poorly determined E: its
    clipped full steps keep pushing E out of the box.  Three stages:

    0. All such rows continue together by projected Newton steps with the objective's exact
       Hessian (:func:`~phifit.fitters.newton.batched_newton`), which holds the curvature of
       the valleys a 10-run table leaves (log A against alpha) that the LM's matrix lacks; a
       row whose Newton decrement meets the LM's stopping rule is finished; the others go on
       from where the LM stopped.  Measured on the 1,000 replicates of a 10-run table at one
       token count (``benchmarks/report_speed_tables.py``'s table (a)): 422 rows reach this
       stage, 399 are finished by it (median 9 iterations), none above the objective stages
       1 and 2 reach from the same point, in a small fraction of their time (docs/benchmarks.md,
       'Where `phifit report` spends its time on table (a)'), and 49 replicates the polish left
       unconverged now converge.
    1. The rows still unfinished continue together from where they stopped in
       :func:`~phifit.fitters.lm.batched_weighted_lm` with ``active_set=True`` (coordinates
       pinned at a bound leave the linear system, the others keep stepping; the stopping rule
       is the reduced problem's decrement), for up to ``finish_iter`` iterations: a row
       creeping along the flat E valley needs thousands, and an iteration on a batch of rows
       costs far less than one least-squares polish.  It only accepts steps that lower the
       objective, so a row it finishes ends no higher than it started.
    2. A row that still fails (typically still creeping along the E valley after
       ``max_iter`` steps) is refined from where stage 1 left it by the point fit's
       least-squares polish (:func:`~phifit.fitters.polish.polish`, ``least_squares`` at
       tight tolerances on the weighted objective).  So is a row whose objective stage 1
       lowered by more than ``far_drop`` (it started far from a minimum and may have reached
       another basin than the polish would): the polish runs from stage 1's start and the
       lower of the two ends is kept.

    A row counts as converged when stage 0 or 1 meets its stopping rule, or when the polish
    meets a tolerance without raising the objective (relative 1e-9).  Returns the (c,)
    mask of rows finished by any stage.
    """
    spec = problem.spec
    finished = np.zeros(len(x), dtype=bool)
    rows = np.flatnonzero(~converged & np.isfinite(objective))
    if len(rows) == 0:
        return finished
    model = law_model(spec, problem.design)
    newton = batched_newton(
        model, x[rows], problem.y, weights[rows], spec.lower, spec.upper, delta=problem.delta
    )
    # a row Newton does not finish is left where the LM stopped (its steps may have carried it
    # onto a plateau, e.g. A -> 0, where the later stages would stay)
    done = newton.converged & (newton.objective <= objective[rows])  # always lower: a guard
    x[rows[done]], objective[rows[done]] = newton.x[done], newton.objective[done]
    converged[rows[done]] = finished[rows[done]] = True
    rows = rows[~done]
    if len(rows) == 0:
        return finished
    lm = finish_lm(
        model,
        x[rows],
        problem.y,
        weights[rows],
        spec.lower,
        spec.upper,
        delta=problem.delta,
        max_iter=finish_iter,
    )
    # a row that fell far (> far_drop of its objective) was not near a minimum: its path may
    # end in another basin than the polish's, so it also gets the polish (from where the first
    # LM stopped, as before) and keeps the better end (measured: 1 weighting in ~5,000)
    x_start, f_start = x[rows].copy(), objective[rows].copy()
    lower = lm.objective <= f_start  # always (accepted steps only lower F): a guard
    x[rows[lower]], objective[rows[lower]] = lm.x[lower], lm.objective[lower]
    done = lm.converged & lower
    converged[rows[done]] = finished[rows[done]] = True
    far = done & (lm.objective < (1 - far_drop) * f_start)
    for j in np.flatnonzero(~done | far):
        i = rows[j]
        x0 = x_start[j] if far[j] else x[i]
        sol = polish(x0, spec, problem.design, problem.y, problem.delta, weights[i])
        if sol is None or sol.status <= 0:
            continue
        res = log_loss(spec.full_theta(sol.x), problem.design) - problem.y
        obj = float(np.sum(weights[i] * loss_terms(res, problem.delta)))
        if obj < objective[i] * (1 - 1e-12) or (not far[j] and obj <= objective[i] * (1 + 1e-9) + 1e-300):
            x[i], objective[i], converged[i], finished[i] = sol.x, obj, True, True
    return finished


def warm_starts(x_hat: np.ndarray, m: int) -> np.ndarray:
    """(m, k) warm starts: ``x_hat`` (k,) repeated, or ``x_hat`` (m, k) itself (one per row)."""
    x_hat = np.asarray(x_hat, dtype=float)
    return x_hat.copy() if x_hat.ndim == 2 else np.tile(x_hat, (m, 1))


def spread_starts(
    x_hat: np.ndarray, spec: LawSpec, n_rows: int, n_spread: int, rng: np.random.Generator
) -> np.ndarray:
    """(n_rows, n_spread, k) starts: the first half around x_hat (sd 10% of each box width),
    the rest uniform in the box (:func:`spread_in_box` with the spec's box)."""
    return spread_in_box(x_hat, spec.lower, spec.upper, n_rows, n_spread, rng)


def spread_in_box(
    x_hat: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_rows: int, n_spread: int, rng: np.random.Generator
) -> np.ndarray:
    """(n_rows, n_spread, k) starts in the box [lo, hi]: the first half around x_hat (sd 10% of
    each box width, clipped; ``x_hat`` (k,), or (n_rows, k) with one centre per row), the rest
    uniform in the box."""
    k = len(lo)
    n_local = (n_spread + 1) // 2
    centre = np.asarray(x_hat, dtype=float)
    centre = centre[:, None, :] if centre.ndim == 2 else centre
    local = centre + 0.1 * (hi - lo) * rng.standard_normal((n_rows, n_local, k))
    uniform = lo + (hi - lo) * rng.random((n_rows, n_spread - n_local, k))
    return np.clip(np.concatenate([local, uniform], axis=1), lo, hi)


def identifiable_rows(runs: RunTable, weights: np.ndarray) -> np.ndarray:
    """Per weighting: True when the runs with w > 0 identify phi (looped runs, >= 2 values of r)."""
    r = runs.r
    looped = (r > 1) & (runs.n_rec > 0)
    present = weights > 0
    has_loop = (present & looped).any(axis=1)
    n_r = np.zeros(len(weights), dtype=int)
    for value in np.unique(r):
        n_r += (present & (r == value)).any(axis=1)
    return has_loop & (n_r >= 2)


def refit_weighted(
    runs: RunTable,
    spec: LawSpec,
    weights: np.ndarray,
    x_hat: np.ndarray,
    *,
    delta: float = DELTA,
    n_spread: int = 4,
    seed: int | np.random.Generator = 0,
    n_jobs: int | None = 1,
    backend: str | None = None,
    scheduler: str | None = None,
    chunk_size: int = 100,
    progress: bool = False,
    desc: str = "refits",
    skip: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Refit the law to many weightings of one table, warm-started from ``x_hat`` (module docstring).

    ``spec`` is the spec fitted (after :func:`phifit.fitters.common.effective_spec`);
    ``x_hat`` the free coordinates of the point estimate (k,), or (m, k) with one warm start per
    weighting (each leave-one-part-out bootstrap starts from its part's own estimate,
    :mod:`phifit.diagnostics.parts`); ``weights`` (m, n_runs).  Chunks of
    ``chunk_size`` weightings run as tasks of :func:`phifit.fitters.parallel.parallel_map`
    (``n_jobs`` workers of ``backend``; ``scheduler``: the Dask scheduler's address).  Results
    are independent of ``n_jobs``, ``backend`` and ``chunk_size`` (starts are drawn up front).
    ``skip`` (m,) marks weightings not to refit (a caller that knows from the weights alone that
    they fail: too few distinct runs, phi not identified); their starts are still drawn, so the
    others keep theirs, and their rows come back as not converged, objective NaN, x = their warm start.
    Returns arrays ``x`` (m, k), ``objective``, ``converged``, ``switched``, ``n_iter``,
    ``polished`` (finished by :func:`polish_unconverged`).  :func:`start_refit_weighted` starts
    the same refits and returns at once.
    """
    return start_refit_weighted(
        runs,
        spec,
        weights,
        x_hat,
        delta=delta,
        n_spread=n_spread,
        seed=seed,
        n_jobs=n_jobs,
        backend=backend,
        scheduler=scheduler,
        chunk_size=chunk_size,
        progress=progress,
        desc=desc,
        skip=skip,
    ).collect()


@dataclass
class PendingRefits:
    """Refits :func:`start_refit_weighted` started: the chunks of weightings, their results as
    :func:`phifit.fitters.parallel.parallel_map` yields them (on worker processes they are
    already running), and the rows of the skipped weightings."""

    chunks: list[np.ndarray]
    parts: Any
    out: dict[str, np.ndarray]
    progress: bool
    desc: str

    def collect(self) -> dict[str, np.ndarray]:
        """Wait for the chunks: :func:`refit_weighted`'s arrays."""
        bar = progress_bar(sum(len(ch) for ch in self.chunks), self.desc, self.progress)
        try:
            for ch, part in zip(self.chunks, self.parts):
                for key, value in part.items():
                    self.out[key][ch] = value
                bar.update(len(ch))
        finally:
            bar.close()
        return self.out


def start_refit_weighted(
    runs: RunTable,
    spec: LawSpec,
    weights: np.ndarray,
    x_hat: np.ndarray,
    *,
    delta: float = DELTA,
    n_spread: int = 4,
    seed: int | np.random.Generator = 0,
    n_jobs: int | None = 1,
    backend: str | None = None,
    scheduler: str | None = None,
    chunk_size: int = 100,
    progress: bool = False,
    desc: str = "refits",
    skip: np.ndarray | None = None,
) -> PendingRefits:
    """Start :func:`refit_weighted` (its arguments) and return at once: with worker processes the
    chunks run while the caller goes on; :meth:`PendingRefits.collect` waits for them."""
    check_backend(backend, scheduler)
    weights = np.asarray(weights, dtype=float)
    m = len(weights)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    spread = spread_starts(x_hat, spec, m, n_spread, rng)
    todo = np.arange(m) if skip is None else np.flatnonzero(~np.asarray(skip, dtype=bool))
    problem = RefitProblem(
        design=runs.design, y=runs.log_loss, fixed=dict(spec.fixed), bounds=dict(spec.bounds), delta=delta
    )
    chunks = [todo[i : i + chunk_size] for i in range(0, len(todo), chunk_size)]
    per_row = np.ndim(x_hat) == 2
    tasks = ((problem, weights[ch], x_hat[ch] if per_row else x_hat, spread[ch]) for ch in chunks)
    parts = parallel_map(refit_chunk, tasks, n_jobs=n_jobs, backend=backend, scheduler=scheduler)
    return PendingRefits(chunks, parts, _skipped_rows(x_hat, m), progress, desc)


def _skipped_rows(x_hat: np.ndarray, m: int) -> dict[str, np.ndarray]:
    """:func:`refit_chunk`'s arrays for ``m`` rows as a skipped row reads: x = the warm start,
    objective NaN, not converged, not switched, 0 iterations, not polished."""
    return {
        "x": warm_starts(x_hat, m),
        "objective": np.full(m, np.nan),
        "converged": np.zeros(m, dtype=bool),
        "switched": np.zeros(m, dtype=bool),
        "n_iter": np.zeros(m, dtype=int),
        "polished": np.zeros(m, dtype=bool),
    }


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str, progress: bool):
    """A tqdm bar on stderr; off when ``progress`` is False or stderr is not a terminal."""
    if not progress:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="rep", file=sys.stderr, disable=None, leave=False)


__all__ = [
    "FINISH_ITER",
    "PendingRefits",
    "RefitProblem",
    "identifiable_rows",
    "polish_unconverged",
    "refit_chunk",
    "refit_weighted",
    "search_spread",
    "spread_in_box",
    "spread_starts",
    "start_refit_weighted",
    "warm_starts",
]
