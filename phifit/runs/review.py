"""Cautions about a valid run table: what loads but deserves a look.

:func:`table_cautions` returns :class:`~phifit.cautions.Caution` records (source "runs"):

- "duplicate_rows": runs with the same r, n_once, n_rec, tokens, loss (and recipe) under
  different rows: the fit would count one run twice;
- "short_runs": runs the trainer finished in fewer than :data:`~phifit.runs.schema.MIN_STEPS`
  optimiser steps (a ``steps``/``iterations`` column, or the trainer's ``notes``);
- "no_budget" (a note): no ``budget`` column, so the bootstrap resamples single runs.

Every message lists a few rows and then "and N more": a
table of 232,000 copies of one run gets a note of one short line; the values keep every row.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ..cautions import Caution, caution
from .schema import MAX_LISTED, MIN_STEPS

#: Groups of duplicates, and rows within a group, a message names before "and N more".
SHOWN_GROUPS = 3
#: A run id longer than this is cut in messages (the values keep it whole).
MAX_ID_SHOWN = 60


def table_cautions(frame: pd.DataFrame, source: str, budget_hint: str | None) -> list[Caution]:
    """Cautions about a valid table: duplicate runs, short runs, no budget column."""
    out: list[Caution] = []
    name = os.path.basename(source)
    ids = frame["run_id"].astype(str).tolist() if "run_id" in frame else None

    def label(i: int) -> str:
        if not ids:
            return f"row {i + 1}"
        shown = ids[i] if len(ids[i]) <= MAX_ID_SHOWN else ids[i][: MAX_ID_SHOWN - 3] + "..."
        return f"row {i + 1} ({shown})"

    def group(rows: list[int]) -> str:
        more = len(rows) - MAX_LISTED
        return " = ".join(label(i) for i in rows[:MAX_LISTED]) + (
            f" (and {more} more copies)" if more > 0 else ""
        )

    # exact duplicates of the fitted quantities (and the recipe): the fit would count one run twice
    key_cols = [c for c in ("r", "n_once", "n_rec", "tokens", "loss", "variant") if c in frame]
    dup = frame.duplicated(subset=key_cols, keep=False)
    if dup.any():
        groups = frame[dup].groupby(key_cols, sort=False).groups
        pairs = [[int(i) for i in idx] for idx in groups.values()]
        shown = "; ".join(group(g) for g in pairs[:SHOWN_GROUPS])
        more = f"; and {len(pairs) - SHOWN_GROUPS} more" if len(pairs) > SHOWN_GROUPS else ""
        n_extra = sum(len(g) - 1 for g in pairs)
        out.append(
            caution(
                "runs",
                "duplicate_rows",
                f"{name}: {n_extra} duplicate run{'s' * (n_extra != 1)} (same r, n_once, n_rec, tokens "
                f"and loss under different rows{' and run ids' if ids else ''}): {shown}{more}; the fit "
                "counts each copy as another run: drop the copies unless they are real repeats",
                rows=[[i + 1 for i in g] for g in pairs],
                run_ids=[[ids[i] for i in g] for g in pairs] if ids else None,
            )
        )

    # runs the trainer finished in very few optimiser steps
    short: dict[int, str] = {}
    for col in ("steps", "iterations", "iters", "num_steps"):
        if col in frame:
            steps = pd.to_numeric(frame[col], errors="coerce").to_numpy(float)
            for i in np.flatnonzero(np.isfinite(steps) & (steps < MIN_STEPS)):
                short.setdefault(int(i), f"{int(steps[i])} steps")
            break
    if "notes" in frame:
        for i, note in enumerate(frame["notes"].astype(object).fillna("").astype(str).tolist()):  # NaN: empty
            if "short run" in note.lower():
                short.setdefault(i, "trainer note 'short run'")
    if short:
        rows = sorted(short)
        shown = ", ".join(f"{label(i)}: {short[i]}" for i in rows[:MAX_LISTED])
        more = f", and {len(rows) - MAX_LISTED} more" if len(rows) > MAX_LISTED else ""
        out.append(
            caution(
                "runs",
                "short_runs",
                f"{name}: {len(rows)} run{'s' * (len(rows) != 1)} finished in fewer than {MIN_STEPS} "
                f"optimiser steps ({shown}{more}); their loss says more about warm-up than about the model: "
                "train them longer or leave them out",
                rows=[i + 1 for i in rows],
                min_steps=MIN_STEPS,
            )
        )

    if "budget" not in frame:
        how = (
            f"map column {budget_hint!r} with columns={{'budget': {budget_hint!r}}} "
            f"(--columns budget={budget_hint})"
            if budget_hint
            else "add a 'budget' column (the FLOP budget of each isoFLOP curve)"
        )
        out.append(
            caution(
                "runs",
                "no_budget",
                f"{name}: no 'budget' column, so a bootstrap resamples single runs rather than the "
                f"study's (budget, r) cells, and noise shared within a cell is ignored; {how}, "
                "or choose blocks with block='COL' (--block COL)",
                level="note",
                candidate=budget_hint,
            )
        )
    return out
