"""The tables Delta-phi compares, and the blocks its paired bootstrap resamples.

A *recipe* is one value of a column (``variant`` by default).  For a variant v and the
baseline, the *paired tables* are v's runs and the baseline's runs on the budgets both have
(all runs when there is no ``budget`` column); a variant without r = 1 runs borrows the
baseline's r = 1 runs on those budgets (a loop-only change leaves r = 1 unchanged, as in the
study).  :func:`select_recipe` picks one recipe out of a mixed table for the single-law
analyses, and :func:`recipe_runs` is how every single-law entry point of the Python path
(``recipe=``) and the command line (``--variant``) applies it; :func:`paired_block_weights`
draws bootstrap weights that resample the same (budget, r) cells in both tables, and
:func:`shared_delta_phi` refits the baseline table once and every variant paired with it on
one such draw (:func:`refit_phi`) and reads the interval and p-value of each Delta-phi
(:mod:`phifit.intervals`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..fitters.common import effective_spec
from ..fitters.refit import identifiable_rows, refit_weighted
from ..intervals import bootstrap_interval, bootstrap_p_value
from ..law import LawSpec
from ..result import FitResult
from ..runs.recipes import (  # noqa: F401  (the selection lives with the runs; its old home re-exports it)
    PairedTables,
    RecipeSelection,
    borrowing_recipe,
    pair_tables,
    recipe_runs,
    recipe_table,
    select_recipe,
)
from ..runs.table import SINGLE_RUNS, RunTable


def cell_labels(table: RunTable, cols: list[str]) -> np.ndarray:
    """One text label per run naming its block: its values of ``cols``, or, for single-run
    blocks, the run itself (its ``run_id``, else all its values), so that a run present in
    several tables (a borrowed r = 1 run) has the same label in each."""
    if cols == [SINGLE_RUNS]:
        if "run_id" in table.frame.columns:
            return table.frame["run_id"].astype(str).to_numpy().astype(object)
        cols = list(table.frame.columns)
    parts = [table.frame[c].astype(str).to_numpy() for c in cols]
    return np.array(["\x1f".join(p) for p in zip(*parts)], dtype=object)


def block_columns(runs: RunTable, block: str | Sequence[str] | None) -> list[str]:
    """The block columns: (budget, r) by default (single runs without a budget column)."""
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


def paired_block_weights(
    tables: Sequence[RunTable], cols: list[str], n_boot: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Bootstrap weights that resample the same blocks in every table.

    The blocks are the cells of ``cols`` (e.g. budget, r), pooled over the tables: G cells
    in the union are drawn with replacement and each table's run gets the number of times
    its cell was drawn, so a cell present in several tables (and runs shared between
    them, such as borrowed r = 1 runs) moves together.  Returns the (n_boot, n_runs) weights per
    table, and the delete-one-cell jackknife weights (G, n_runs) per table.  With
    ``cols == ["run"]`` the blocks are single runs, paired the same way: a run in both
    tables gets the same weight in each.
    """
    labels = [cell_labels(t, cols) for t in tables]
    cells = np.unique(np.concatenate(labels))
    codes = [np.searchsorted(cells, lab) for lab in labels]
    g = len(cells)
    draws = rng.integers(0, g, size=(n_boot, g))
    counts = np.zeros((n_boot, g))
    np.add.at(counts, (np.repeat(np.arange(n_boot), g), draws.ravel()), 1.0)
    jack = np.ones((g, g)) - np.eye(g)
    return [counts[:, c] for c in codes], [jack[:, c] for c in codes]


def refit_phi(
    table: RunTable,
    point: FitResult,
    weights: np.ndarray,
    seed: np.random.Generator,
    n_jobs: int | None,
    progress: bool,
    desc: str,
    *,
    backend: str | None = None,
    scheduler: str | None = None,
) -> np.ndarray:
    """phi per weighting of ``table`` (NaN where the refit failed or phi is unidentifiable),
    refitting with the point fit's own loss (:attr:`FitResult.loss_delta`) on ``n_jobs``
    workers of ``backend`` (:mod:`phifit.fitters.parallel`)."""
    spec, _ = effective_spec(table, LawSpec())
    if "phi" in spec.fixed:
        raise ValueError(f"{table.source}: phi is not identifiable (no looped runs or a single r)")
    x_hat = point.theta[spec.free_mask]
    out = refit_weighted(
        table,
        spec,
        weights,
        x_hat,
        delta=point.loss_delta,
        seed=seed,
        n_jobs=n_jobs,
        backend=backend,
        scheduler=scheduler,
        progress=progress,
        desc=desc,
    )
    ok = out["converged"] & np.isfinite(out["objective"]) & identifiable_rows(table, weights)
    ok &= (weights > 0).sum(axis=1) > int(spec.free_mask.sum())
    phi = spec.full_theta(out["x"])[:, 5]
    return np.where(ok, phi, np.nan)


def pair_cells(pair: PairedTables, cols: list[str]) -> frozenset[str]:
    """The blocks (``cols`` cells, or runs) of a pair's two tables, pooled: what its bootstrap
    resamples.  Variants whose pairs have the same cells share their draws
    (:func:`shared_delta_phi`)."""
    return frozenset(cell_labels(pair.variant, cols)) | frozenset(cell_labels(pair.baseline, cols))


def shared_delta_phi(
    baseline: RunTable,
    fb: FitResult,
    variants: Sequence[tuple[str, RunTable, FitResult]],
    cols: list[str],
    n_boot: int,
    rngs: Sequence[np.random.Generator],
    n_jobs: int | None,
    progress: bool,
    level: float,
    seed: int,
    baseline_key: str,
    *,
    backend: str | None = None,
    scheduler: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Delta-phi replicates of several variants paired with one baseline table, on one draw.

    Every variant's pair (its table, ``baseline``) must have the same cells (:func:`pair_cells`).
    The cells are drawn once (:func:`paired_block_weights`, with ``rngs[0]``), the baseline is
    refitted once per replicate (and per delete-one-cell jackknife weighting), and each
    variant is refitted on the same draws: Delta*_v = phi_v* - phi_base*.  For each variant
    this is the paired cell bootstrap of its own pair (same cells, each drawn with replacement
    G times); the variants' intervals are computed from common draws, so they are dependent.
    Refits of variant j use ``rngs[j]`` for their spread starts; the first variant's sequence
    of draws is exactly the one-variant bootstrap's (draws, variant refits, baseline refits,
    jackknife).  The replicates' refits run on ``n_jobs`` workers of ``backend``
    (:func:`refit_phi`).  Returns {variant: the entry's interval fields} (see
    :func:`delta_phi_fields`).
    """
    tables = [t for _, t, _ in variants]
    weights, jack = paired_block_weights([*tables, baseline], cols, n_boot, rngs[0])
    w_b, jw_b = weights[-1], jack[-1]
    where = {"backend": backend, "scheduler": scheduler}
    phi_v: list[np.ndarray] = []
    jack_v: list[np.ndarray] = []
    phi_b = jack_b = None
    for j, (key, table, fv) in enumerate(variants):
        rng = rngs[j]
        phi_v.append(refit_phi(table, fv, weights[j], rng, n_jobs, progress, f"bootstrap {key}", **where))
        if j == 0:
            phi_b = refit_phi(baseline, fb, w_b, rng, n_jobs, progress, f"bootstrap {baseline_key}", **where)
        jack_v.append(refit_phi(table, fv, jack[j], rng, 1, False, ""))
        if j == 0:
            jack_b = refit_phi(baseline, fb, jw_b, rng, 1, False, "")
    n_blocks = len(set(cell_labels(baseline, cols)).union(*(cell_labels(t, cols) for t in tables)))
    return {
        key: delta_phi_fields(
            phi_v[j] - phi_b, jack_v[j] - jack_b, fv.phi - fb.phi, n_blocks, n_boot, level, seed
        )
        for j, (key, _, fv) in enumerate(variants)
    }


def delta_phi_fields(d, jack_d, estimate, n_blocks, n_boot, level, seed) -> dict[str, Any]:
    """Interval fields of one Delta-phi from its replicates ``d`` (NaN: failed) and delete-one-
    cell jackknife values: {ci (percentile), ci_bca, n_blocks, p_value, mc_error, n_boot,
    n_failed, bootstrap_sd}."""
    pct = bootstrap_interval(d, level=level, kind="percentile", mc_seed=seed)
    bca = (
        bootstrap_interval(d, level=level, kind="bca", estimate=estimate, jackknife=jack_d, mc_seed=seed)
        if jack_d is not None
        else None
    )
    return {
        "ci": pct.to_list(),
        "ci_bca": bca.to_list() if bca else None,
        "n_blocks": n_blocks,
        "p_value": bootstrap_p_value(d),
        "mc_error": list(pct.mc_error),
        "n_boot": int(n_boot),
        "n_failed": int(np.sum(~np.isfinite(d))),
        "bootstrap_sd": float(np.nanstd(d, ddof=1)),
    }


def paired_delta_phi(pair, fv, fb, cols, n_boot, rng, n_jobs, progress, level, seed, key, baseline_key):
    """Delta-phi replicates of one variant (:func:`shared_delta_phi` with one variant): the
    entry's interval fields {ci, ci_bca, n_blocks, p_value, mc_error, n_boot, n_failed,
    bootstrap_sd}."""
    return shared_delta_phi(
        pair.baseline,
        fb,
        [(key, pair.variant, fv)],
        cols,
        n_boot,
        [rng],
        n_jobs,
        progress,
        level,
        seed,
        baseline_key,
    )[key]


__all__ = [
    "PairedTables",
    "RecipeSelection",
    "block_columns",
    "borrowing_recipe",
    "cell_labels",
    "pair_tables",
    "paired_block_weights",
    "pair_cells",
    "paired_delta_phi",
    "refit_phi",
    "recipe_runs",
    "recipe_table",
    "select_recipe",
    "shared_delta_phi",
]
