"""The ``budget`` column: numbers, or labels, never a mix.

``budget`` names a run's isoFLOP curve, and (with ``r``) the cells the bootstrap resamples.  Read
as text, ``1e+18`` and ``1E18`` would be two cells; so the column is read as numbers whenever its
cells are numbers (``4.64e+17``, ``4,64e+17``, ``1.2B``).  A column of labels (``C1``, ``small``)
stays text.  A column where some cells read as numbers and others do not (one ``n/a`` or blank
among numbers, one number among labels) is refused, naming the cells of the smaller kind: reading
it as text would split equal budgets into different cells without a word.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .text import DECIMAL_COMMA_PATTERN, THOUSANDS_PATTERN, parse_count


def numbers_or_nan(values: pd.Series) -> np.ndarray:
    """Each cell as a finite number (counts such as ``1.2B``, a decimal comma such as
    ``4,64e+17``), NaN where it is not one (text, a blank, NaN or inf)."""
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values.tolist()):
        text = "" if v is None else str(v).strip()
        if DECIMAL_COMMA_PATTERN.match(text) and not THOUSANDS_PATTERN.match(text):
            text = text.replace(",", ".")
        try:
            x = parse_count(text)
        except ValueError:
            continue
        if np.isfinite(x):
            out[i] = x
    return out


def budget_numbers(values: pd.Series) -> tuple[pd.Series | None, np.ndarray, str]:
    """(the budgets as numbers, or None for a column of labels; the positions of the cells that
    do not fit the column; what those cells were expected to be).

    Every cell a finite number: the numbers (as ``pd.to_numeric`` reads them where it can, so
    integer budgets stay integers), no misfits.  No cell a number: None (labels), no misfits.  A
    mix: None, and the cells of the smaller kind (the non-numbers on a tie), with "a number" or
    "a label" as what was expected of them."""
    numeric = pd.to_numeric(values, errors="coerce")
    finite = np.isfinite(numeric.to_numpy(dtype=float, na_value=np.nan))
    if finite.all():
        return numeric, np.array([], int), ""
    numeric = pd.Series(numbers_or_nan(values), index=values.index)  # decimal commas, counts (1.2B)
    is_number = np.isfinite(numeric.to_numpy())
    if is_number.all():
        return numeric, np.array([], int), ""
    if not is_number.any():
        return None, np.array([], int), ""
    if is_number.sum() >= (~is_number).sum():
        return None, np.flatnonzero(~is_number), "a number"
    return None, np.flatnonzero(is_number), "a label"
