"""Block bootstrap of the joint-law fit: resample blocks of runs, refit, read intervals.

Procedure (the reference study's, paper-notes section 2, with more replicates):

1. Split the runs into blocks.  Default: one block per (budget, r) cell when the table
   has a ``budget`` column (24 cells for the study's 116 runs); otherwise single runs;
   or the cells of any columns the user names (``block=["size", "r"]``).
2. For each of ``n_boot`` replicates draw G blocks with replacement from the G non-empty
   blocks and concatenate their runs.  Because the objective is a *sum* over runs, the
   resampled table is the original one with integer weights w_i = the number of times
   run i's block was drawn:

       objective*(theta) = sum_i w_i Huber_delta(log L_hat_i(theta) - log L_i)

   (delta = inf for the least-squares method).
3. Refit every replicate with the same law, spec and box.  Instead of 500 fresh random
   starts per replicate, each replicate starts from the point estimate (warm start) and
   from ``n_spread`` spread starts (half drawn around the estimate with a standard
   deviation of 10% of each box width, half uniform in the box as the study draws its
   starts).  All replicates and starts run together through the vectorised projected
   Levenberg-Marquardt of :func:`phifit.fitters.lm.batched_weighted_lm`; spread starts
   that are still more than twice the warm start's objective after a short exploration
   are dropped.  The best end point per replicate is kept.  A replicate whose best end
   point has not met the LM's convergence rule (long flat valleys, e.g. E sliding towards
   its bound when a resampled table does not pin E down) is finished by the point fit's
   least-squares polish on its weighted objective (exact: run i enters w_i times).
   Chunks of replicates run in parallel (:mod:`phifit.fitters.parallel`: joblib's worker
   processes by default, since the LM's many small NumPy calls hold the GIL and threads would
   barely overlap; threads, this process alone, or a Dask cluster when asked); the starts are
   drawn up front, so the results depend neither on the number of workers nor on the backend.
4. A replicate *fails* when even the polish does not converge, its
   objective is not finite, or its resampled table cannot identify phi (no looped runs,
   or a single value of r).  Failed replicates are kept as NaN rows, counted by reason,
   and excluded from the intervals; they are never dropped silently.

Intervals at level 1 - a (default 95%), from :mod:`phifit.intervals`: percentile (the
study's) and BCa with the delete-one-*block* jackknife acceleration, each end with its
Monte-Carlo error.  The result type is :class:`phifit.bootstrap.result.BootstrapResult`.

What the block bootstrap does not cover: anything systematic (the law's form), and
training noise that no resampled block shows.

Coverage: ``benchmarks/bootstrap_coverage.py`` measures the intervals' coverage on
simulated tables with independent, Student-t and cell-shared noise (the README's Methods
section quotes its results, with the command and seeds).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .. import defaults
from ..cautions import Caution, caution
from ..fitters.common import effective_spec
from ..fitters.parallel import check_backend
from ..fitters.refit import PendingRefits, identifiable_rows, refit_weighted, start_refit_weighted
from ..intervals import Interval, bootstrap_interval, jackknife_acceleration, mc_resamples
from ..law import THETA_NAMES, THETA_TO_PARAM, LawSpec
from ..result import FitResult
from ..runs.table import RunTable
from .result import (
    MARK_FAILED_SHARE,
    MAX_FAILED_SHARE,
    BootstrapResult,
    intervals_withheld,
    natural_params,
)

BOOT_METHODS = ("huber", "lsq")


# -- blocks ---------------------------------------------------------------------------------


def block_codes(runs: RunTable, block: str | Sequence[str] | None) -> tuple[np.ndarray, str]:
    """Integer block code per run and the block label: :meth:`phifit.runs.RunTable.cells`."""
    return runs.cells(block)


def draw_weights(codes: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n_runs) integer weights: each run's multiplicity when G blocks are drawn with
    replacement from the G blocks, n_boot times."""
    g = int(codes.max()) + 1
    draws = rng.integers(0, g, size=(n_boot, g))
    counts = np.zeros((n_boot, g))
    np.add.at(counts, (np.repeat(np.arange(n_boot), g), draws.ravel()), 1.0)
    return counts[:, codes]


# -- the public entry point -----------------------------------------------------------------


def block_bootstrap(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    n_boot: int = defaults.N_BOOT,
    block: str | Sequence[str] | None = None,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    level: float = defaults.LEVEL,
    n_spread: int = 4,
    chunk_size: int = 250,
    jackknife: bool = True,
    recipe: str | None = None,
) -> BootstrapResult:
    """Block bootstrap of the joint-law fit (see the module docstring for the procedure).

    Parameters
    ----------
    runs
        The run table ``fit`` was fitted to (a RunTable, or a DataFrame validated like a CSV).
    fit
        The point estimate: a Huber or least-squares :class:`FitResult` of ``runs``.  Every
        replicate is refitted with its method, spec (fixed values, box) and loss (Huber
        threshold ``delta``, or squares).
    n_boot
        Replicates (default :data:`phifit.defaults.N_BOOT`; the study used 200).
    block
        None: (budget, r) cells when a ``budget`` column exists, else single runs;
        ``"run"``: single runs; or column name(s), a list or ``"COL1,COL2"``.
    seed
        Seeds the block draws, the spread starts and the Monte-Carlo error (one
        independent stream each); results do not depend on ``n_jobs`` or ``backend``.
    n_jobs
        Worker processes for the refits (None: the cores this process may use,
        :func:`phifit.defaults.workers`); 1 refits in this process.
    backend, scheduler
        Where the refits run (:mod:`phifit.fitters.parallel`): ``"fork"`` (default, worker
        processes forked from this one), ``"loky"`` (fresh worker processes kept for later
        calls), ``"threading"``, ``"sequential"`` or ``"dask"``
        (the cluster whose scheduler listens at ``scheduler``, e.g. ``"tcp://host:8786"``).
    progress
        Show a tqdm bar on stderr (only when stderr is a terminal).
    level
        Interval level (default :data:`phifit.defaults.LEVEL`).
    n_spread
        Spread starts per replicate besides the warm start.
    chunk_size
        Replicates refitted together (one task of a worker process).  Results do not depend
        on it; larger chunks mean fewer, larger array operations per iteration (250: about
        a fifth less CPU than 125 on 1,000 replicates of the CPU baseline, with two workers
        still sharing the chunks).
    jackknife
        Compute the delete-one-block jackknife (needed for BCa; n_blocks extra refits).
    recipe
        When the table's ``variant`` column holds several recipes: the one to resample (default
        the one ``fit`` was fitted to, else "baseline", as ``--variant`` picks it;
        :func:`phifit.recipes.pairing.recipe_runs`).  A table of several recipes is never pooled.
    """
    return start_block_bootstrap(
        runs,
        fit,
        n_boot=n_boot,
        block=block,
        seed=seed,
        n_jobs=n_jobs,
        backend=backend,
        scheduler=scheduler,
        progress=progress,
        level=level,
        n_spread=n_spread,
        chunk_size=chunk_size,
        jackknife=jackknife,
        recipe=recipe,
    ).result()


@dataclass
class PendingBootstrap:
    """A block bootstrap :func:`start_block_bootstrap` started: its refits (on worker processes
    already running) and what finishing it needs; :meth:`result` waits for them, computes the
    jackknife and returns the :class:`BootstrapResult`."""

    runs: RunTable
    fit: FitResult
    fit_spec: LawSpec
    weights: np.ndarray
    refits: PendingRefits
    codes: np.ndarray
    label: str
    x_hat: np.ndarray
    refit: dict[str, Any]
    streams: list[np.random.SeedSequence]
    check_phi: bool
    phi_identified: bool
    jackknife: bool
    level: float
    seed: int
    workers: int

    def result(self) -> BootstrapResult:
        out = self.refits.collect()
        runs, fit_spec, check_phi = self.runs, self.fit_spec, self.check_phi
        replicates = _replicates(runs, fit_spec, self.weights, out, check_phi=check_phi)
        if self.jackknife:
            stream = self.streams[2]
            jack = _jackknife_thetas(
                runs, fit_spec, self.codes, self.x_hat, self.refit, stream=stream, check_phi=check_phi
            )
        else:
            jack = np.full((int(self.codes.max()) + 1, len(THETA_NAMES)), np.nan)
        return _bootstrap_result(
            runs,
            self.fit,
            fit_spec,
            replicates,
            jack,
            jackknife=self.jackknife,
            block=self.label,
            seed=self.seed,
            level=self.level,
            mc_seed=int(self.streams[2].generate_state(1)[0]),
            workers=self.workers,
            phi_identified=self.phi_identified,
        )


def start_block_bootstrap(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    n_boot: int = defaults.N_BOOT,
    block: str | Sequence[str] | None = None,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    level: float = defaults.LEVEL,
    n_spread: int = 4,
    chunk_size: int = 250,
    jackknife: bool = True,
    recipe: str | None = None,
) -> PendingBootstrap:
    """Start :func:`block_bootstrap` (its arguments; the same checks, raised here) and return at
    once: with worker processes the refits run while the caller goes on, and
    :meth:`PendingBootstrap.result` finishes it (the same result)."""
    from ..runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=fit)  # one recipe of a mixed table, as --variant picks it
    workers = _checked_workers(runs, fit, n_boot, n_jobs, backend, scheduler, n_spread, level)
    codes, label = block_codes(runs, block)
    n_blocks = int(codes.max()) + 1
    if n_blocks < 2:
        raise ValueError(
            f"block {label!r}: the table has a single block; the bootstrap needs "
            f"at least 2 (choose another: block= in Python, --block on the command line)"
        )
    fit_spec, _ = effective_spec(runs, fit.spec)
    phi_identified = "phi" not in fit_spec.fixed or "phi" in fit.spec.fixed
    check_phi = phi_identified and "phi" not in fit_spec.fixed
    x_hat = fit.theta[fit_spec.free_mask]
    refit = {"delta": fit.loss_delta, "n_spread": n_spread}

    streams = np.random.SeedSequence(seed).spawn(3)
    weights = draw_weights(codes, n_boot, np.random.default_rng(streams[0]))
    ident, too_few = _drawn_failures(runs, fit_spec, weights, check_phi=check_phi)
    refits = start_refit_weighted(
        runs,
        fit_spec,
        weights,
        x_hat,
        **refit,
        seed=np.random.default_rng(streams[1]),
        n_jobs=workers,
        backend=backend,
        scheduler=scheduler,
        chunk_size=chunk_size,
        progress=progress,
        desc="bootstrap",
        skip=~ident | too_few,  # failed by their draw alone: not refitted (a 7-run table: 998 of 1,000)
    )
    return PendingBootstrap(
        runs=runs,
        fit=fit,
        fit_spec=fit_spec,
        weights=weights,
        refits=refits,
        codes=codes,
        label=label,
        x_hat=x_hat,
        refit=refit,
        streams=streams,
        check_phi=check_phi,
        phi_identified=phi_identified,
        jackknife=jackknife,
        level=level,
        seed=seed,
        workers=workers,
    )


# -- the steps of block_bootstrap -------------------------------------------------------------


def _checked_workers(
    runs: RunTable,
    fit: FitResult,
    n_boot: int,
    n_jobs: int | None,
    backend: str | None,
    scheduler: str | None,
    n_spread: int,
    level: float,
) -> int:
    """The number of workers for the refits, after checking the arguments of
    :func:`block_bootstrap` (a ``ValueError`` for the first one that is wrong)."""
    if fit.method not in BOOT_METHODS:
        raise ValueError(
            f"the bootstrap refits a {' or '.join(BOOT_METHODS)} fit, not a {fit.method} fit; "
            f"expected one of {', '.join(BOOT_METHODS)}"
        )
    if fit.n_runs != len(runs) or list(fit.run_ids) != runs.run_ids:
        raise ValueError("fit: the given fit was not fitted to these runs")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot (bootstrap replicates) must be an integer >= 2, got {n_boot!r}")
    workers = defaults.resolve_workers(n_jobs)
    check_backend(backend, scheduler)
    if n_spread < 0:
        raise ValueError(f"n_spread must be >= 0, got {n_spread}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return workers


class _Replicates(NamedTuple):
    """The bootstrap replicates' refits: ``thetas`` (n_boot, 6), NaN rows where ``failed``;
    ``reasons`` {reason: count} over the reasons that occur; ``n_switched`` / ``n_polished``:
    successful replicates whose best end came from a spread start / from the polish."""

    thetas: np.ndarray
    failed: np.ndarray
    reasons: dict[str, int]
    n_switched: int
    n_polished: int


def _drawn_failures(
    runs: RunTable, fit_spec: LawSpec, weights: np.ndarray, *, check_phi: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(identifies phi, too few distinct runs) per resampled table, read off its weights alone: a
    table fails when (``check_phi``) its runs cannot identify phi, or when it holds no more
    distinct runs than the law has free parameters."""
    ident = identifiable_rows(runs, weights) if check_phi else np.ones(len(weights), dtype=bool)
    too_few = (weights > 0).sum(axis=1) <= int(fit_spec.free_mask.sum())
    return ident, too_few


def _replicates(
    runs: RunTable, fit_spec: LawSpec, weights: np.ndarray, out: dict[str, np.ndarray], *, check_phi: bool
) -> _Replicates:
    """Read the replicates off the refits ``out`` of the resampled tables ``weights``.

    A replicate fails, under the first reason that applies, when (``check_phi``) its table
    cannot identify phi, it has fewer distinct runs than free parameters, its objective is
    not finite, or its refit did not converge."""
    n_boot = len(weights)
    ident, too_few = _drawn_failures(runs, fit_spec, weights, check_phi=check_phi)
    failure = {
        "phi not identifiable in the resampled table": ~ident,
        "fewer distinct runs than free parameters": ident & too_few,
        "objective not finite": ident & ~too_few & ~np.isfinite(out["objective"]),
        "did not converge": ident & ~too_few & np.isfinite(out["objective"]) & ~out["converged"],
    }
    failed = np.zeros(n_boot, dtype=bool)
    for mask in failure.values():
        failed |= mask
    reasons = {k: int(v.sum()) for k, v in failure.items() if v.any()}
    thetas = fit_spec.full_theta(out["x"])
    thetas[failed] = np.nan
    return _Replicates(
        thetas, failed, reasons, int(out["switched"][~failed].sum()), int(out["polished"][~failed].sum())
    )


def _jackknife_thetas(
    runs: RunTable,
    fit_spec: LawSpec,
    codes: np.ndarray,
    x_hat: np.ndarray,
    refit: dict[str, float],
    *,
    stream: np.random.SeedSequence,
    check_phi: bool,
) -> np.ndarray:
    """(n_blocks, 6) thetas of the delete-one-block refits (in this process, spread starts
    from ``stream``, ``refit`` the loss threshold and spread starts); NaN rows for refits that
    did not converge, whose objective is not finite, or (``check_phi``) whose table cannot
    identify phi."""
    n_blocks = int(codes.max()) + 1
    jw = np.ones((n_blocks, len(runs)))
    jw[codes[None, :] == np.arange(n_blocks)[:, None]] = 0.0
    jout = refit_weighted(runs, fit_spec, jw, x_hat, **refit, seed=np.random.default_rng(stream), n_jobs=1)
    jack_ok = jout["converged"] & np.isfinite(jout["objective"])
    if check_phi:
        jack_ok &= identifiable_rows(runs, jw)
    jack = fit_spec.full_theta(jout["x"])
    jack[~jack_ok] = np.nan
    return jack


def _bootstrap_result(
    runs: RunTable,
    fit: FitResult,
    fit_spec: LawSpec,
    replicates: _Replicates,
    jack: np.ndarray,
    *,
    jackknife: bool,
    block: str,
    seed: int,
    level: float,
    mc_seed: int,
    workers: int,
    phi_identified: bool,
) -> BootstrapResult:
    """The :class:`BootstrapResult`: the replicates and the delete-one-block ``jack`` thetas
    with the intervals read from them (:func:`_intervals`) and the cautions they call for."""
    thetas, failed = replicates.thetas, replicates.failed
    n_boot, n_blocks, n_failed = len(thetas), len(jack), int(failed.sum())
    params = natural_params(thetas)
    estimate = dict(fit.params)
    free_names = [name for name in fit_spec.free_names]
    ci, ci_bca, mc, bca_undefined = _intervals(
        params,
        natural_params(jack),
        estimate,
        free_names,
        level=level,
        mc_seed=mc_seed,
        workers=workers,
        withheld=intervals_withheld(n_failed, n_boot),
    )
    warnings = _cautions(
        n_boot=n_boot,
        n_failed=n_failed,
        reasons=replicates.reasons,
        n_jack_failed=int((~np.all(np.isfinite(jack[:, fit_spec.free_mask]), axis=1)).sum())
        if jackknife
        else 0,
        n_blocks=n_blocks,
        bca_undefined=bca_undefined,
        switched=replicates.n_switched,
        at_bounds=_bound_counts(thetas[~failed], fit_spec, free_names),
    )
    return BootstrapResult(
        thetas=thetas,
        params=params,
        failed=failed,
        failure_reasons=replicates.reasons,
        n_boot=int(n_boot),
        n_failed=n_failed,
        block=block,
        n_blocks=n_blocks,
        seed=int(seed),
        level=float(level),
        method=fit.method,
        estimate=estimate,
        theta_hat=fit.theta,
        jackknife_thetas=jack,
        fixed={k: v for k, v in fit_spec.fixed.items() if phi_identified or k != "phi"},
        bounds={k: [float(lo), float(hi)] for k, (lo, hi) in fit_spec.bounds.items()},
        ci=ci,
        ci_bca=ci_bca,
        mc_error=mc,
        n_switched=replicates.n_switched,
        n_polished=replicates.n_polished,
        phi_identified=phi_identified,
        n_runs=len(runs),
        warnings=warnings,
    )


def _intervals(
    params: dict[str, np.ndarray],
    jack_params: dict[str, np.ndarray],
    estimate: dict[str, float],
    free_names: list[str],
    *,
    level: float,
    mc_seed: int,
    workers: int,
    withheld: bool,
) -> tuple[dict, dict, dict[str, dict[str, list]], list[str]]:
    """Percentile and BCa intervals of every free parameter with their Monte-Carlo errors:
    (ci, ci_bca, {"percentile": errors, "bca": errors}, parameters whose BCa is undefined).
    When ``withheld`` every end is None and no BCa is reported undefined."""
    ci, ci_bca = {}, {}
    mc: dict[str, dict[str, list[float]]] = {"percentile": {}, "bca": {}}
    bca_undefined = []

    def both_intervals(name: str) -> tuple[Interval, Interval]:
        """Percentile and BCa interval of one parameter, over one set of sorted MC resamples."""
        resampled = mc_resamples(params[name], mc_seed) if np.isfinite(params[name]).sum() >= 2 else None
        pct = bootstrap_interval(params[name], level=level, mc_seed=mc_seed, resampled=resampled)
        bca = bootstrap_interval(
            params[name],
            level=level,
            kind="bca",
            estimate=estimate[name],
            jackknife=jack_params[name],
            mc_seed=mc_seed,
            resampled=resampled,
        )
        return pct, bca

    if workers > 1:
        # the Monte-Carlo errors sort large arrays (NumPy releases the GIL there): in threads
        with ThreadPoolExecutor(max_workers=workers) as pool:
            pairs = list(pool.map(both_intervals, free_names))
    else:
        pairs = [both_intervals(name) for name in free_names]
    for name, (p, b) in zip(free_names, pairs):
        ci[name], ci_bca[name] = p.to_list(), b.to_list()
        mc["percentile"][name], mc["bca"][name] = list(p.mc_error), list(b.mc_error)
        if not np.all(np.isfinite(b.to_list())):
            bca_undefined.append(name)
    if withheld:
        # the survivors are not a sample of the bootstrap distribution: no interval at all
        for name in free_names:
            ci[name], ci_bca[name] = [None, None], [None, None]
            mc["percentile"][name], mc["bca"][name] = [None, None], [None, None]
        bca_undefined = []
    return ci, ci_bca, mc, bca_undefined


def _bound_counts(thetas: np.ndarray, spec: LawSpec, free_names: list[str]) -> dict[str, int]:
    """{parameter: successful replicates with it at a box bound (within 1e-9)}."""
    counts = {}
    for i, coord in enumerate(THETA_NAMES):
        name = THETA_TO_PARAM[coord]
        if name not in free_names:
            continue
        lo_b, hi_b = spec.bounds[coord]
        values = thetas[:, i]
        count = int(
            np.sum(np.isclose(values, lo_b, rtol=0, atol=1e-9) | np.isclose(values, hi_b, rtol=0, atol=1e-9))
        )
        if count:
            counts[name] = count
    return counts


def _cautions(
    *,
    n_boot: int,
    n_failed: int,
    reasons: dict[str, int],
    n_jack_failed: int,
    n_blocks: int,
    bca_undefined: list[str],
    switched: int,
    at_bounds: dict[str, int],
) -> list[Caution]:
    """The bootstrap's cautions, each with the numbers behind it (source "bootstrap")."""
    out = []
    why = "; ".join(f"{k}: {v}" for k, v in reasons.items())
    share = n_failed / n_boot
    if intervals_withheld(n_failed, n_boot):
        out.append(
            caution(
                "bootstrap",
                "intervals_withheld",
                f"{n_failed} of {n_boot} bootstrap replicates failed ({why}): no interval is given. "
                f"With more than {MAX_FAILED_SHARE:.0%} failed, the replicates that finished are "
                f"not a sample of the bootstrap distribution (the failures are the resampled "
                f"tables least like the data), so their spread would understate the uncertainty; "
                f"the table has too few runs or blocks for a block bootstrap (add runs, or resample "
                f"single runs: block='run', --block run on the command line)",
                n_failed=n_failed,
                n_boot=n_boot,
                share=share,
                max_share=MAX_FAILED_SHARE,
                reasons=dict(reasons),
            )
        )
    elif share >= MARK_FAILED_SHARE:
        out.append(
            caution(
                "bootstrap",
                "failed_replicates",
                f"{n_failed} of {n_boot} bootstrap replicates ({share:.1%}) failed and are excluded "
                f"from the intervals ({why}): the intervals are approximate and likely too narrow "
                f"(at most {MAX_FAILED_SHARE:.0%} may fail before none is given)",
                n_failed=n_failed,
                n_boot=n_boot,
                share=share,
                approximate=True,
                max_share=MAX_FAILED_SHARE,
                reasons=dict(reasons),
            )
        )
    elif n_failed:
        out.append(
            caution(
                "bootstrap",
                "failed_replicates",
                f"{n_failed} of {n_boot} bootstrap replicates failed and are excluded from the "
                f"intervals ({why}); if many failed, the intervals may be too narrow",
                n_failed=n_failed,
                n_boot=n_boot,
                reasons=dict(reasons),
            )
        )
    if n_jack_failed:
        out.append(
            caution(
                "bootstrap",
                "jackknife_failed",
                f"{n_jack_failed} of {n_blocks} delete-one-block refits failed; BCa acceleration "
                f"uses the rest",
                n_failed=n_jack_failed,
                n_blocks=n_blocks,
            )
        )
    if bca_undefined:
        out.append(
            caution(
                "bootstrap",
                "bca_undefined",
                f"BCa interval undefined for {', '.join(bca_undefined)} (every replicate "
                f"on one side of the estimate, or no jackknife); use the percentile one",
                parameters=list(bca_undefined),
            )
        )
    if switched:
        out.append(
            caution(
                "bootstrap",
                "several_basins",
                f"in {switched} replicate{'s' if switched != 1 else ''} a spread start found a better "
                f"optimum than the warm start: the objective has several basins on resampled tables",
                n_switched=switched,
            )
        )
    if at_bounds:
        out.append(
            caution(
                "bootstrap",
                "replicates_at_bound",
                f"replicates with a parameter at its box bound: "
                f"{', '.join(f'{k} in {v}' for k, v in at_bounds.items())} "
                f"(the resampled tables do not pin it down)",
                counts=dict(at_bounds),
            )
        )
    if n_blocks < 10:
        out.append(
            caution(
                "bootstrap",
                "few_blocks",
                f"only {n_blocks} blocks: a block bootstrap with this few blocks "
                f"understates uncertainty; read the intervals as rough",
                n_blocks=n_blocks,
            )
        )
    return out


__all__ = [
    "BOOT_METHODS",
    "BootstrapResult",
    "Interval",
    "PendingBootstrap",
    "block_bootstrap",
    "block_codes",
    "bootstrap_interval",
    "draw_weights",
    "jackknife_acceleration",
    "refit_weighted",
    "start_block_bootstrap",
]
