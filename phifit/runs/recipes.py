"""Which runs of a table a single-law analysis takes: one recipe (``variant``) at a time.

The joint law holds for one training recipe, so a table of several is never pooled: :func:`select_recipe`
picks one (default "baseline"), borrowing the baseline's r = 1 runs for a loop-only recipe that has none
(:func:`pair_tables`, as Delta-phi does), and :func:`recipe_runs` is how every entry point with a
``recipe=`` keyword (and the command line's ``--variant``) reads a table through it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..cautions import Caution, caution
from .table import RunTable, as_runs


def recipe_table(frame: pd.DataFrame, source: str, looped: bool) -> RunTable:
    """A run table of some rows of a validated table (index reset)."""
    return RunTable(frame.reset_index(drop=True), source=source, looped=looped)


@dataclass(frozen=True)
class PairedTables:
    """A variant's and the baseline's runs on their common budgets (see the module docstring):
    ``budgets`` (None without a budget column), ``borrowed_r1`` the baseline's r = 1 runs the
    variant borrowed, ``dropped_variant_runs`` its runs on budgets the baseline lacks."""

    variant: RunTable
    baseline: RunTable
    budgets: list[str] | None
    borrowed_r1: int
    dropped_variant_runs: int


def pair_tables(runs: RunTable, by: str, variant: Any, baseline: Any) -> PairedTables:
    frame = runs.frame
    v = frame[frame[by] == variant]
    b = frame[frame[by] == baseline]
    budgets = None
    dropped = 0
    if "budget" in frame.columns:
        common = sorted(set(v["budget"]) & set(b["budget"]), key=lambda x: (str(type(x)), x))
        if not common:
            raise ValueError(
                f"recipes: variant {variant!r} and baseline {baseline!r} share no "
                f"budget; a like-for-like Delta-phi needs common budgets"
            )
        dropped = int((~v["budget"].isin(common)).sum())
        v = v[v["budget"].isin(common)]
        b = b[b["budget"].isin(common)]
        budgets = [str(x) for x in common]
    borrowed = 0
    if not (v["r"] == 1).any():
        r1 = b[b["r"] == 1]
        borrowed = len(r1)
        v = pd.concat([v, r1], ignore_index=True)
    src = runs.source
    return PairedTables(
        variant=recipe_table(v, f"{src}[{by}={variant}]", runs.looped),
        baseline=recipe_table(b, f"{src}[{by}={baseline}]", runs.looped),
        budgets=budgets,
        borrowed_r1=borrowed,
        dropped_variant_runs=dropped,
    )


@dataclass(frozen=True)
class RecipeSelection:
    """The runs of one recipe picked out of a table that holds several, and why."""

    runs: RunTable
    recipe: str | None  # None: the table holds a single recipe (or has no ``by`` column)
    note: str | None  # what was selected, from how many runs, and how to choose otherwise

    @property
    def caution(self) -> Caution | None:
        """The note as a :class:`~phifit.cautions.Caution` (source "recipes", a note)."""
        if self.note is None:
            return None
        return caution("recipes", "recipe_selected", self.note, level="note", recipe=self.recipe)


def select_recipe(
    runs: RunTable | pd.DataFrame, recipe: Any = None, *, by: str = "variant"
) -> RecipeSelection:
    """The runs of one recipe, for single-law analyses (fit, compare, equivalence) of a mixed table.

    The joint law holds for one training recipe; pooling recipes with different phi fits
    neither.  When column ``by`` holds several values, ``recipe`` picks one (default: the
    value "baseline"; an error when there is none).  A recipe other than the baseline that
    has no r = 1 runs borrows the baseline's r = 1 runs on its budgets, as in Delta-phi
    (a loop-only change leaves r = 1 unchanged).  A table with one recipe is returned whole, and
    so is such a table: one recipe's looped runs beside another's r = 1 runs alone
    (:func:`borrowing_recipe`), which is what a selection returns (selecting again changes nothing).
    """
    runs = as_runs(runs)
    borrowed = borrowing_recipe(runs.frame, by)
    if borrowed is not None and (recipe is None or str(recipe) == borrowed):
        return RecipeSelection(runs=runs, recipe=None, note=None)
    if by not in runs.frame.columns or runs.frame[by].nunique() < 2:
        if recipe is not None:
            present = sorted(map(str, runs.frame[by].unique())) if by in runs.frame else []
            if str(recipe) not in present:
                raise ValueError(
                    f"{runs.source}: recipe {str(recipe)!r} asked for, but column {by!r} "
                    + (f"holds only {', '.join(map(repr, present))}" if present else "is absent")
                )
        return RecipeSelection(runs=runs, recipe=None, note=None)
    counts = runs.frame[by].astype(str).value_counts().sort_index()
    listing = ", ".join(f"{k} {v}" for k, v in counts.items())
    key = "baseline" if recipe is None else str(recipe)
    if key not in counts:
        raise ValueError(
            f"{runs.source}: column {by!r} holds several recipes ({listing} runs) and "
            + ("none is named 'baseline'" if recipe is None else f"none is {key!r}")
            + f"; pick one with --variant NAME (recipe='NAME' in Python), or compare them with --by {by} "
            + f"(phifit.compare_recipes(runs, by={by!r}))"
        )
    values = {str(v): v for v in runs.frame[by].unique()}
    frame = runs.frame[runs.frame[by].astype(str) == key]
    borrowed = 0
    if key != "baseline" and not (frame["r"] == 1).any() and "baseline" in values:
        pair = pair_tables(runs, by, values[key], values["baseline"])
        frame, borrowed = pair.variant.frame, pair.borrowed_r1
    selected = recipe_table(frame, f"{runs.source}[{by}={key}]", runs.looped)
    note = (
        f"{runs.source}: column {by!r} holds several recipes ({listing} runs); this analysis "
        f"uses {key!r} ({len(selected)} runs"
        + (f", {borrowed} of them the baseline's r = 1 runs" if borrowed else "")
        + f"); --variant NAME (recipe='NAME') picks another, --by {by} (compare_recipes) compares them"
    )
    return RecipeSelection(runs=selected, recipe=key, note=note)


def borrowing_recipe(frame: pd.DataFrame, by: str = "variant") -> str | None:
    """The recipe of a table that is one loop-only recipe with another recipe's r = 1 runs
    borrowed (two values of ``by``: one with no r = 1 run, the other with r = 1 runs alone, as
    :func:`select_recipe` and :func:`pair_tables` build it); None for any other table."""
    if by not in frame.columns or "r" not in frame.columns:
        return None
    values = frame[by].astype(str)
    names = list(values.unique())
    if len(names) != 2:
        return None
    r1 = (frame["r"] == 1).to_numpy()
    for looped, lender in (names, names[::-1]):
        if r1[(values == lender).to_numpy()].all() and not r1[(values == looped).to_numpy()].any():
            return looped
    return None


def recipe_runs(
    runs: RunTable | pd.DataFrame, recipe: Any = None, *, fit: Any = None, by: str = "variant"
) -> RunTable:
    """The runs a single-law analysis takes from ``runs``, chosen as the command line chooses
    them (``--variant NAME``): the table whole when it holds one recipe, else the runs of
    ``recipe`` (default: the recipe ``fit`` was fitted to, ``fit.extras["recipe"]``, as
    :func:`phifit.fit` records it, else "baseline"; ``ValueError`` when none is named so), through
    :func:`select_recipe`.  Every entry point that takes a run table (``fit``, ``answer``,
    ``block_bootstrap``, ``compare_fits``, ``diagnose``, ``predict``, ``equivalence_table``,
    ``plan_from_fit``, ...) reads it through this, with its ``recipe=`` keyword.  The table's
    cautions stay with the runs chosen."""
    runs = as_runs(runs)
    if recipe is None and fit is not None and by in runs.frame.columns:
        fitted = (getattr(fit, "extras", None) or {}).get("recipe")
        if fitted is not None and str(fitted) in set(runs.frame[by].astype(str)):
            recipe = fitted
    selection = select_recipe(runs, recipe, by=by)
    if selection.runs is runs or selection.runs.warnings == runs.warnings:
        return selection.runs
    return dataclasses.replace(selection.runs, warnings=list(runs.warnings))
