"""Every cell of a run table checked, with the problems found named by row, line and column.

:class:`Cells` holds the rows being validated and the problems found so far; the checks add to
them and :func:`phifit.runs.table_from_frame` raises them together:

- :func:`checked_values`: the law's columns as finite numbers (counts with K/M/B/T suffixes and
  thousands separators, a decimal comma where the file uses one), tokens and losses > 0,
  parameter counts >= 0, ``r`` an integer in [1, 2^53), ``n_rec`` > 0 where r > 1
  (:func:`check_loops`), ``run_id`` non-empty and unique (:func:`check_run_ids`), FLOPs > 0;
- :func:`plausible_losses`: no loss above 20 nats per token (:mod:`phifit.runs.plausibility`);
- :func:`checked_budget`: ``budget`` numbers or labels, not a mix (:mod:`phifit.runs.budget`);
- :func:`hash_rows_hint`: when a row that starts with ``#`` was read as a run and the table is
  refused, the rule for comment lines.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .budget import budget_numbers
from .plausibility import implausible_loss_text, implausible_losses
from .schema import COUNT_COLUMNS, LOOP_COLUMNS, MAX_LISTED, listed
from .text import DECIMAL_COMMA_PATTERN, THOUSANDS_PATTERN, parse_count

#: r must stay below this (2^53): every integer below it is exact in float64 and fits in int64.
R_MAX = 2.0**53


def cell_text(raw: pd.DataFrame, col: str) -> pd.Series:
    """The cells of ``col`` as stripped text (None and NaN as "")."""
    return raw[col].map(
        lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip()
    )


class Cells:
    """The rows being validated, with their row and line numbers, and the problems found so
    far (each message names row, line and column)."""

    def __init__(self, raw: pd.DataFrame, rows: np.ndarray, lines: np.ndarray, decimal_comma: bool):
        self.raw, self.rows, self.lines, self.decimal_comma = raw, rows, lines, decimal_comma
        self.problems: list[str] = []

    def where(self, i: int) -> str:
        """Where row i is, in words: its row and its line (none for a row without one, line 0)."""
        line = f" (line {self.lines[i]})" if self.lines[i] > 0 else ""
        return f"row {self.rows[i]}{line}"

    def at(self, i: int, col: str) -> str:
        """Where cell (i, col) is, in words."""
        return f"{self.where(i)}, column {col!r}"

    def cell(self, col: str, i: int) -> object:
        """The raw value of cell (i, col), for messages."""
        return self.raw[col].iloc[i]

    def numbers(self, col: str) -> np.ndarray:
        """Column ``col`` as finite numbers (NaN where a cell is not one, with a problem
        recorded): counts with K/M/B/T suffixes and thousands separators in count columns,
        a decimal comma where the file uses one."""
        out = np.full(len(self.raw), np.nan)
        count = col in COUNT_COLUMNS
        decimal_comma = self.decimal_comma
        for i, v in enumerate(self.raw[col].tolist()):
            text = "" if v is None else str(v).strip()
            try:
                if (
                    count
                    and decimal_comma
                    and DECIMAL_COMMA_PATTERN.match(text)
                    and not THOUSANDS_PATTERN.match(text)
                ):
                    x = parse_count(text.replace(",", "."))
                elif count:
                    x = parse_count(text)
                elif decimal_comma and DECIMAL_COMMA_PATTERN.match(text):
                    x = float(text.replace(",", "."))
                else:
                    x = float(text)
            except ValueError:
                self.problems.append(
                    f"{self.at(i, col)}: expected a number, got {text!r}"
                    if text
                    else f"{self.at(i, col)}: empty cell, expected a number"
                )
                continue
            if not math.isfinite(x):
                self.problems.append(f"{self.at(i, col)}: expected a finite number, got {text!r}")
                continue
            out[i] = x
        return out


def checked_values(cells: Cells, *, has_r: bool, has_rec: bool) -> dict[str, np.ndarray]:
    """{column: numbers} for the law's columns (``r`` = 1 and ``n_rec`` = 0 when absent) and
    ``flops``, every out-of-range value a problem in ``cells.problems``."""
    raw = cells.raw
    values: dict[str, np.ndarray] = {}
    for col in ("n_once", "tokens", "loss") + tuple(c for c in LOOP_COLUMNS if c in raw.columns):
        values[col] = cells.numbers(col)
    for col, label in (("tokens", "tokens"), ("loss", "loss (nats)")):
        for i in np.flatnonzero(values[col] <= 0):
            cells.problems.append(f"{cells.at(i, col)}: {label} must be > 0, got {cells.cell(col, i)!r}")
    for col in ("n_once", "n_rec"):
        if col in values:
            for i in np.flatnonzero(values[col] < 0):
                cells.problems.append(
                    f"{cells.at(i, col)}: parameter count must be >= 0, got {cells.cell(col, i)!r}"
                )
    check_loops(cells, values, has_r=has_r, has_rec=has_rec)
    check_run_ids(cells)
    if "flops" in raw.columns:
        flops = cells.numbers("flops")
        for i in np.flatnonzero(flops <= 0):
            cells.problems.append(
                f"{cells.at(i, 'flops')}: FLOPs must be > 0, got {cells.cell('flops', i)!r}"
            )
        values["flops"] = flops
    return values


def check_loops(cells: Cells, values: dict[str, np.ndarray], *, has_r: bool, has_rec: bool) -> None:
    """Check r (an integer in [1, 2^53)) and n_rec (> 0 where r > 1), filling in r = 1 and
    n_rec = 0 when the table lacks them, and that every run has parameters."""
    raw = cells.raw
    if has_r:
        r = values["r"]
        bad = np.isfinite(r) & ((r < 1) | (r != np.round(r)))
        for i in np.flatnonzero(bad):
            cells.problems.append(f"{cells.at(i, 'r')}: expected an integer >= 1, got {cells.cell('r', i)!r}")
        # beyond 2^53 a float no longer holds every integer (and 2^63 wraps to a negative int64)
        for i in np.flatnonzero(np.isfinite(r) & ~bad & (r >= R_MAX)):
            cells.problems.append(
                f"{cells.at(i, 'r')}: expected an integer below 2^53, got {cells.cell('r', i)!r}"
            )
    else:
        values["r"] = np.ones(len(raw))
    if not has_rec:
        values["n_rec"] = np.zeros(len(raw))
        looped = np.flatnonzero(values["r"] > 1)
        if len(looped):
            cells.problems.append(
                f"column 'n_rec' is missing but {len(looped)} row(s) have r > 1 "
                f"(first: row {looped[0] + 1}); a looped table needs n_rec"
            )
    else:
        for i in np.flatnonzero((values["r"] > 1) & (values["n_rec"] == 0)):
            cells.problems.append(
                f"{cells.at(i, 'n_rec')}: r = {raw['r'].iloc[i]} > 1 needs n_rec > 0 "
                f"(the shared block's parameters), got {raw['n_rec'].iloc[i]!r}"
            )
    with np.errstate(over="ignore"):  # two counts near float's limit sum to inf, which is not 0
        total = values["n_once"] + values["n_rec"]
    for i in np.flatnonzero(total == 0):
        cells.problems.append(
            f"{cells.at(i, 'n_once')}: n_once + n_rec must be > 0 (model has no parameters)"
        )


def check_run_ids(cells: Cells) -> None:
    """Every ``run_id`` (when the column exists) non-empty and unique."""
    if "run_id" not in cells.raw.columns:
        return
    ids = cells.raw["run_id"].astype(str).str.strip()
    for i in np.flatnonzero(ids.to_numpy() == ""):
        cells.problems.append(f"{cells.at(i, 'run_id')}: empty run_id")
    first_seen: dict[str, int] = {}
    for i, v in enumerate(ids.tolist()):
        if v and v in first_seen:
            cells.problems.append(
                f"{cells.at(i, 'run_id')}: duplicate run_id {v!r} (first at row {first_seen[v] + 1})"
            )
        first_seen.setdefault(v, i)


def plausible_losses(cells: Cells, loss_nats: np.ndarray, column: str) -> None:
    """One problem naming the losses above :data:`~phifit.runs.plausibility.MAX_LOSS_NATS` nats
    per token (after any unit conversion; the first few by row, line and value): no per-token
    loss in nats is that large."""
    high = implausible_losses(loss_nats)
    if not len(high):
        return
    shown = []
    for i in high[:MAX_LISTED]:
        value = str(cells.cell("loss", i)).strip()
        converted = f" = {loss_nats[i]:.4g} nats" if _as_float(value) != loss_nats[i] else ""
        shown.append(f"{cells.where(i)}: {value!r}{converted}")
    cells.problems.insert(0, implausible_loss_text(shown, len(high), column))


def _as_float(text: str) -> float:
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return math.nan


def checked_budget(cells: Cells) -> pd.Series | None:
    """The ``budget`` column as numbers (None: no column, or a column of labels); a column that
    mixes numbers and text is a problem per cell of the smaller kind
    (:func:`~phifit.runs.budget.budget_numbers`), and an infinite cell one of its own."""
    if "budget" not in cells.raw.columns:
        return None
    values = cells.raw["budget"]
    # an infinite budget (inf, -inf, 1e999) is neither a number of FLOPs nor a label: refused as such,
    # and the rest of the column read without it
    infinite = np.isinf(pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan))
    for i in np.flatnonzero(infinite):
        text = cell_text(cells.raw, "budget").iloc[i]
        cells.problems.append(
            f"{cells.at(i, 'budget')}: expected a finite number of FLOPs (or a label), got {text!r}"
        )
    kept = np.flatnonzero(~infinite)
    numbers, misfits, expected = budget_numbers(values.iloc[kept])
    misfits = kept[misfits]
    others = len(kept) - len(misfits)
    for i in misfits:
        text = cell_text(cells.raw, "budget").iloc[i]
        got = f"got {text!r}" if text else "got an empty cell"
        cells.problems.append(
            f"{cells.at(i, 'budget')}: expected {expected} like the column's {others} other cells, {got} "
            "(a budget column holds numbers or labels, not both: equal budgets written differently would "
            "be different isoFLOP curves and bootstrap cells)"
        )
    return numbers


def hash_rows_hint(cells: Cells) -> list[str]:
    """One more problem when rows that start with ``#`` were read as runs and some problem was
    found: after the header only a ``#`` line without a separator is a comment."""
    if not len(cells.raw.columns):
        return []
    first = cell_text(cells.raw, cells.raw.columns[0])
    hashed = np.flatnonzero(first.str.startswith("#").to_numpy())
    if not len(hashed):
        return []
    where = listed([cells.where(i) for i in hashed])
    return [
        f"{where} start(s) with '#' and was read as a run: after the header, a line starting with '#' "
        "is a comment only when it holds no separator; move comment lines above the header"
    ]
