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
   starts, :func:`phifit.fitters.refit.refit_weighted`) and records
   Delta* = phi_v* - phi_base*; a replicate fails when either refit fails.
   Variants whose pairs have the same cells (hence the same baseline table, e.g. every
   variant probed on the same budgets) share one draw of the cells and the baseline's
   replicates: the cells are drawn once, the baseline is refitted once per replicate, and
   each variant is refitted on the same draws (:func:`phifit.recipes.pairing.shared_delta_phi`).
   Each Delta-phi is still its own pair's paired cell bootstrap; the variants' intervals
   then come from common draws (``shared_draws`` in the entry names the others).
   Intervals: percentile (and BCa with a delete-one-cell jackknife).  Without a budget
   column and without ``block`` every run is its own block and the two recipes are
   resampled independently (nothing pairs them).
   The p-value inverts the percentile interval (:func:`phifit.intervals.bootstrap_p_value`):
   p = min(1, 2 min((1 + #{Delta* <= 0}) / (B + 1), (1 + #{Delta* >= 0}) / (B + 1))),
   the smallest level at which a percentile interval excludes 0.
4. A **joint fit** (:mod:`phifit.recipes.shared_phi`): E, A, alpha, B, beta shared by all
   recipes and one phi per recipe, against the same law with one shared phi, by the
   Gaussian likelihood ratio and AIC/BIC (:mod:`phifit.fitters.likelihood`).

The paired tables, :func:`select_recipe` and the paired weights are in :mod:`phifit.recipes.pairing`;
every caution is a :class:`~phifit.cautions.Caution` of source "recipes" in
:attr:`RecipeComparison.warnings`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .. import defaults
from ..cautions import Caution, caution, collect
from ..fitters import fit as fit_law
from ..fitters.parallel import check_backend
from ..result import FitResult
from ..runs.table import SINGLE_RUNS, RunTable, as_runs
from ..serialize import JsonIO, to_plain
from .pairing import (
    PairedTables,
    RecipeSelection,
    block_columns,
    pair_cells,
    pair_tables,
    paired_block_weights,
    select_recipe,
    shared_delta_phi,
)
from .shared_phi import JointFit, fit_recipes_jointly

METHODS = ("huber", "lsq")
LESSON = (
    "Delta-phi compares each variant with the baseline refitted on the same budgets "
    "(the study's lesson: its baseline refit on the four lower budgets gives phi = 0.453, "
    "not the full-grid 0.459)"
)


@dataclass(frozen=True)
class RecipeComparison(JsonIO):
    """Separate fits per recipe, Delta-phi against the baseline, and the joint fit.

    ``fits`` {recipe: FitResult}: the baseline on all its runs, each variant on its paired
    table.  ``baseline_refits`` {variant: FitResult}: the baseline on that variant's
    budgets (the like-for-like reference).  ``delta_phi`` {variant: {estimate, ci, ci_bca,
    p_value, mc_error, n_boot, n_failed, variant_phi, baseline_phi, budgets, borrowed_r1,
    ...}}.  ``joint`` the joint fit (:class:`~phifit.recipes.shared_phi.JointFit`) or None.
    ``warnings`` every caution (source "recipes", the joint fit's included), ``level`` the
    interval level.
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
    warnings: list[Caution] = field(default_factory=list)

    @property
    def notes(self) -> list[str]:
        """The cautions' messages (the older, text-only view of :attr:`warnings`)."""
        return [w.message for w in self.warnings]

    def summary(self) -> str:
        lines = [
            f"[[phifit recipes: {self.by}, baseline {self.baseline!r}, method={self.method}"
            f", {self.n_boot} bootstrap replicates of blocks '{self.block}']]",
            "",
            f"    {'recipe':<16} {'runs':>5} {'phi':>8} {'R^2':>8}",
        ]
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
            lines += ["", self.joint.summary()]
        notes = [LESSON] + [w.message for w in self.warnings]
        lines += ["", "[[Notes]]"] + [f"    [{i}] {n}" for i, n in enumerate(notes, 1)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> pd.DataFrame:
        """One row per variant (index ``variant``): ``delta_phi`` (phi_variant - phi_baseline on
        the same budgets), ``ci_lo``, ``ci_hi`` (percentile interval at ``level``), ``p_value``,
        ``variant_phi``, ``baseline_phi``, ``runs`` (the variant's fit) and ``n_failed``
        (failed bootstrap replicates); NaN where no bootstrap ran."""

        def num(x: Any) -> float:
            return math.nan if x is None else float(x)

        rows = []
        for name, d in self.delta_phi.items():
            ci = d.get("ci") or [None, None]
            fit = self.fits.get(name)
            rows.append(
                {
                    "variant": name,
                    "delta_phi": num(d.get("estimate")),
                    "ci_lo": num(ci[0]),
                    "ci_hi": num(ci[1]),
                    "p_value": num(d.get("p_value")),
                    "variant_phi": num(d.get("variant_phi")),
                    "baseline_phi": num(d.get("baseline_phi")),
                    "runs": fit.n_runs if fit is not None else None,
                    "n_failed": d.get("n_failed"),
                }
            )
        return pd.DataFrame(rows).set_index("variant")

    def to_dict(self) -> dict[str, Any]:
        """JSON contract: fits {recipe: fit JSON}, delta_phi {variant: {estimate, ci, p_value,
        ...}}, plus baseline_refits, joint, warnings [caution], method."""
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
                "method_note": LESSON,
                "warnings": [w.to_dict() for w in self.warnings],
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecipeComparison:
        # files written before cautions hold plain-text "notes" (the first one the LESSON)
        raw = data.get("warnings", [n for n in data.get("notes", []) if n != LESSON])
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
            warnings=[Caution.from_dict(w, source="recipes") for w in raw],
        )


# -- the public entry point -----------------------------------------------------------------


def _note(kind: str, message: str, level: str = "note", **values: Any) -> Caution:
    return caution("recipes", kind, message, level=level, **values)


def compare_recipes(
    runs: RunTable | pd.DataFrame,
    *,
    by: str = "variant",
    baseline: Any = None,
    n_boot: int = defaults.N_BOOT,
    seed: int = defaults.SEED,
    block: str | Sequence[str] | None = None,
    method: str = "huber",
    n_starts: int = defaults.N_STARTS,
    n_jobs: int | None = None,
    progress: bool = False,
    level: float = defaults.LEVEL,
    joint: bool = True,
    n_wild: int = defaults.N_WILD,
    backend: str | None = None,
    scheduler: str | None = None,
) -> RecipeComparison:
    """Separate fits per recipe, Delta-phi against ``baseline`` with a paired block bootstrap,
    and the joint fit with shared E, A, alpha, B, beta (see the module docstring).

    Parameters
    ----------
    runs
        Run table (a RunTable, or a DataFrame validated like a CSV) with a ``by`` column
        naming each run's recipe.
    by
        Recipe column (default "variant").
    baseline
        The reference recipe; default: the value "baseline" when present, else the first
        value in sorted order (the choice is recorded in ``warnings`` as a note).
    n_boot, seed, block, n_jobs, progress, level
        Bootstrap settings (:func:`phifit.bootstrap.block_bootstrap`); ``n_boot = 0`` skips
        the bootstrap (no interval or p-value); ``n_jobs`` None: the cores this process may use.
    backend, scheduler
        Where the bootstrap's refits run (:mod:`phifit.fitters.parallel`; the intervals do
        not depend on it).
    method, n_starts
        Fitting method ("huber" or "lsq") and its random starts.
    joint, n_wild
        Also fit the joint law with one phi per recipe (:mod:`phifit.recipes.shared_phi`), and test a
        shared phi by the wild cluster bootstrap with ``n_wild`` replicates (0: the chi-square
        test alone, which assumes independent runs).
    """
    runs = as_runs(runs)
    n_jobs = defaults.resolve_workers(n_jobs)
    _check_settings(method=method, n_boot=n_boot, backend=backend, scheduler=scheduler, level=level)
    by_text = _recipes(runs, by)
    notes: list[Caution] = []
    baseline_key = _baseline_key(by_text, baseline, by, notes)
    cols = block_columns(runs, block)
    block_label = ",".join(cols)
    if cols == [SINGLE_RUNS]:
        notes.append(
            _note(
                "unpaired",
                "no budget column (or block='run'): the two recipes of each Delta-phi are "
                "resampled independently, run by run",
            )
        )

    fit_one = partial(_fit_recipe, method=method, seed=seed, n_starts=n_starts)
    fits = {baseline_key: fit_one(runs.subset((runs.frame[by] == by_text[baseline_key]).to_numpy()))}
    if not fits[baseline_key].phi_identified:
        raise ValueError(
            f"recipes: phi is not identifiable from the baseline {baseline_key!r} "
            f"(it needs looped runs and at least two values of r)"
        )
    pairs, deltas, baseline_refits, variant_notes = _variant_pairs(
        runs, by, by_text, baseline_key, fits, fit_one
    )
    if n_boot:
        _paired_bootstraps(
            pairs,
            deltas,
            cols,
            n_boot=n_boot,
            seeds=np.random.SeedSequence(seed).spawn(len(by_text)),
            n_jobs=n_jobs,
            progress=progress,
            level=level,
            seed=seed,
            baseline_key=baseline_key,
            backend=backend,
            scheduler=scheduler,
        )
    _bootstrap_notes(deltas, variant_notes, n_boot=n_boot, block_label=block_label)
    for own in variant_notes.values():
        notes += own

    joint_fit = None
    if joint:
        joint_fit = fit_recipes_jointly(
            runs,
            by=by,
            recipes=by_text,
            baseline=baseline_key,
            method=method,
            seed=seed,
            n_starts=n_starts,
            starts=fits,
            n_wild=n_wild,
        )
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
        warnings=collect(notes, joint_fit.warnings if joint_fit is not None else []),
    )


# -- the steps of compare_recipes -------------------------------------------------------------


def _fit_recipe(table: RunTable, *, method: str, seed: int, n_starts: int) -> FitResult:
    """The fit of one recipe's table (least squares without profiling out E, A, B)."""
    opts: dict[str, Any] = {"seed": seed, "n_starts": n_starts}
    if method == "lsq":
        opts["profile"] = False
    return fit_law(table, method=method, **opts)


def _check_settings(
    *, method: str, n_boot: int, backend: str | None, scheduler: str | None, level: float
) -> None:
    """Raise a ``ValueError`` for the first of :func:`compare_recipes`' settings that is wrong."""
    if method not in METHODS:
        raise ValueError(f"recipes: unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0 or n_boot == 1:
        raise ValueError(f"n_boot must be 0 (no bootstrap) or an integer >= 2, got {n_boot!r}")
    check_backend(backend, scheduler)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _recipes(runs: RunTable, by: str) -> dict[str, Any]:
    """{text: value} of the recipes in column ``by``, in sorted order of their text; raises
    when the column is missing or holds a single recipe."""
    if by not in runs.frame.columns:
        raise ValueError(
            f"recipes: no column {by!r} in the run table; columns: {', '.join(map(str, runs.frame.columns))}"
        )
    values = sorted(runs.frame[by].unique(), key=str)
    if len(values) < 2:
        raise ValueError(
            f"recipes: column {by!r} has a single value ({values[0]!r}); Delta-phi needs at least two recipes"
        )
    return {str(v): v for v in values}


def _baseline_key(by_text: dict[str, Any], baseline: Any, by: str, notes: list[Caution]) -> str:
    """The baseline recipe's text: ``baseline`` when given (it must be a recipe), else
    "baseline" when present or the first recipe, with a note in ``notes`` saying so."""
    if baseline is None:
        baseline_key = "baseline" if "baseline" in by_text else next(iter(by_text))
        notes.append(_note("baseline_default", f"baseline not given: using {baseline_key!r}"))
        return baseline_key
    baseline_key = str(baseline)
    if baseline_key not in by_text:
        raise ValueError(
            f"recipes: baseline {baseline_key!r} is not a value of {by!r}; values: {', '.join(by_text)}"
        )
    return baseline_key


class _Pair(NamedTuple):
    """A variant's paired tables with both fits; ``index``: the recipe's place in sorted
    order, which picks its bootstrap stream."""

    index: int
    tables: PairedTables
    variant_fit: FitResult
    baseline_fit: FitResult


def _variant_pairs(
    runs: RunTable,
    by: str,
    by_text: dict[str, Any],
    baseline_key: str,
    fits: dict[str, FitResult],
    fit_one: Callable[[RunTable], FitResult],
) -> tuple[dict[str, _Pair], dict[str, dict[str, Any]], dict[str, FitResult], dict[str, list[Caution]]]:
    """Pair every variant with the baseline (steps 1-2) and fit both tables, adding each
    variant's fit to ``fits``.  Returns, per variant: its :class:`_Pair`, its Delta-phi entry
    (the point estimate), the baseline refitted on its budgets where those differ from the
    baseline's own (one fit per set of budgets), and the notes about its pairing."""
    base_value = by_text[baseline_key]
    base_budgets = (
        set(map(str, runs.frame.loc[runs.frame[by] == base_value, "budget"]))
        if "budget" in runs.frame.columns
        else None
    )
    base_fits: dict[tuple[str, ...] | None, FitResult] = {}
    pairs: dict[str, _Pair] = {}
    deltas: dict[str, dict[str, Any]] = {}
    baseline_refits: dict[str, FitResult] = {}
    variant_notes: dict[str, list[Caution]] = {}
    for i, key in enumerate(by_text):
        if key == baseline_key:
            continue
        pair = pair_tables(runs, by, by_text[key], base_value)
        if not (pair.variant.r > 1).any():
            raise ValueError(f"recipes: variant {key!r} has no looped runs (r > 1): phi is undefined for it")
        fv = fit_one(pair.variant)
        same = base_budgets is None or set(pair.budgets or []) == base_budgets
        budgets_key = None if pair.budgets is None else tuple(pair.budgets)
        if same:
            fb = fits[baseline_key]
        else:
            if budgets_key not in base_fits:
                base_fits[budgets_key] = fit_one(pair.baseline)
            fb = base_fits[budgets_key]
            baseline_refits[key] = fb
        fits[key] = fv
        pairs[key] = _Pair(i, pair, fv, fb)
        deltas[key] = {
            "estimate": fv.phi - fb.phi,
            "variant_phi": fv.phi,
            "baseline_phi": fb.phi,
            "budgets": pair.budgets,
            "borrowed_r1": pair.borrowed_r1,
            "n_runs_variant": len(pair.variant),
            "n_runs_baseline": len(pair.baseline),
        }
        variant_notes[key] = _pairing_notes(key, pair)
    return pairs, deltas, baseline_refits, variant_notes


def _pairing_notes(key: str, pair: PairedTables) -> list[Caution]:
    """Notes on variant ``key``'s pairing: r = 1 runs borrowed from the baseline, runs left out."""
    own = []
    if pair.borrowed_r1:
        own.append(
            _note(
                "borrowed_r1",
                f"{key}: no r = 1 runs of its own; borrowed the baseline's "
                f"{pair.borrowed_r1} r = 1 runs on the same budgets",
                recipe=key,
                n_runs=pair.borrowed_r1,
            )
        )
    if pair.dropped_variant_runs:
        own.append(
            _note(
                "dropped_runs",
                f"{key}: {pair.dropped_variant_runs} runs on budgets the baseline lacks "
                f"were left out of the comparison",
                recipe=key,
                n_runs=pair.dropped_variant_runs,
            )
        )
    return own


def _paired_bootstraps(
    pairs: dict[str, _Pair],
    deltas: dict[str, dict[str, Any]],
    cols: list[str],
    *,
    n_boot: int,
    seeds: list[np.random.SeedSequence],
    n_jobs: int,
    progress: bool,
    level: float,
    seed: int,
    baseline_key: str,
    backend: str | None,
    scheduler: str | None,
) -> None:
    """Add each variant's paired block bootstrap (step 3) to its entry in ``deltas``.

    Variants whose pairs have the same baseline table and the same cells share one draw of
    the cells and the baseline's replicates (``shared_draws`` names the others); each
    variant's draws come from ``seeds[pair.index]``."""
    groups: dict[tuple[Any, frozenset[str]], list[str]] = {}
    for key, pair in pairs.items():
        budgets_key = None if pair.tables.budgets is None else tuple(pair.tables.budgets)
        groups.setdefault((budgets_key, pair_cells(pair.tables, cols)), []).append(key)
    for members in groups.values():
        first = pairs[members[0]]
        shared = shared_delta_phi(
            first.tables.baseline,
            first.baseline_fit,
            [(key, pairs[key].tables.variant, pairs[key].variant_fit) for key in members],
            cols,
            n_boot,
            [np.random.default_rng(seeds[pairs[key].index]) for key in members],
            n_jobs,
            progress,
            level,
            seed,
            baseline_key,
            backend=backend,
            scheduler=scheduler,
        )
        for key in members:
            deltas[key].update(shared[key])
            if len(members) > 1:
                deltas[key]["shared_draws"] = [k for k in members if k != key]


def _bootstrap_notes(
    deltas: dict[str, dict[str, Any]],
    variant_notes: dict[str, list[Caution]],
    *,
    n_boot: int,
    block_label: str,
) -> None:
    """Without a bootstrap, mark every entry of ``deltas`` as having none; with one, add to
    each variant's notes a warning when it resampled fewer than 10 blocks or replicates failed."""
    for key, entry in deltas.items():
        if not n_boot:
            entry.update({"ci": None, "ci_bca": None, "p_value": None, "n_boot": 0, "n_failed": 0})
            continue
        n_blocks, n_failed = entry["n_blocks"], entry["n_failed"]
        if n_blocks < 10:
            variant_notes[key].append(
                _note(
                    "few_blocks",
                    f"{key}: the paired bootstrap resamples only {n_blocks} blocks "
                    f"'{block_label}'; with this few blocks its interval is rough",
                    level="warning",
                    recipe=key,
                    n_blocks=n_blocks,
                )
            )
        if n_failed:
            variant_notes[key].append(
                _note(
                    "failed_replicates",
                    f"{key}: {n_failed} of {n_boot} bootstrap replicates failed (either "
                    f"refit unconverged or phi unidentifiable) and are excluded",
                    level="warning",
                    recipe=key,
                    n_failed=n_failed,
                    n_boot=int(n_boot),
                )
            )


__all__ = [
    "JointFit",
    "LESSON",
    "RecipeComparison",
    "RecipeSelection",
    "compare_recipes",
    "paired_block_weights",
    "select_recipe",
]
