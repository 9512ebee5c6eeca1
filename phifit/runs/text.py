"""Reading run tables from text: separators, counts as people write them, unmapped columns.

- :func:`detect_separator` / :func:`parse_separator`: ``,``, ``;`` (Excel exports with a decimal
  comma) or a tab, detected from the header line or given;
- :func:`parse_count`: ``200M``, ``1.5B``, ``1,000,000``, ``1_000_000``;
- :func:`parse_column_mapping`: ``--columns r=num_recur,loss=val_loss``;
- :func:`looped_hint` / :func:`budget_hint`: columns that look like the loop count, the shared
  block's parameters or the FLOP budget in a table that did not map them.

Reading a file into cells is :mod:`phifit.runs.reader`'s job; validation of the values (rows,
columns, ranges) is :func:`phifit.runs.table_from_frame`'s.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .schema import CANONICAL


def parse_column_mapping(text: str | None) -> dict[str, str]:
    """Parse ``"r=num_recur,loss=val_loss"`` into ``{"r": "num_recur", "loss": "val_loss"}``."""
    if not text:
        return {}
    mapping: dict[str, str] = {}
    for item in text.split(","):
        if "=" not in item:
            raise ValueError(f"--columns: expected CANONICAL=COLUMN pairs such as r=num_recur, got {item!r}")
        key, value = (s.strip() for s in item.split("=", 1))
        if key not in CANONICAL:
            raise ValueError(
                f"--columns: unknown canonical column {key!r}; expected one of {', '.join(CANONICAL)}"
            )
        if not value:
            raise ValueError(f"--columns: empty source column for {key!r}")
        mapping[key] = value
    return mapping


#: Multipliers of the count suffixes (B and G are both 1e9).
_SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
#: "1,000,000": a comma as thousands separator.
THOUSANDS_PATTERN = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$")
#: "2,85": a decimal comma (in a ";" or tab separated file).
DECIMAL_COMMA_PATTERN = re.compile(r"^[+-]?\d+,\d+([eE][+-]?\d+)?$")


def parse_count(text: str) -> float:
    """A count as people write it: ``'410M'`` -> 4.1e8, ``'1.2B'`` -> 1.2e9, ``'20B'``,
    ``'3e8'``, ``'1,000,000'``, ``'1_000_000'`` (K = 1e3, M = 1e6, B = G = 1e9, T = 1e12).

    Raises ``ValueError`` for anything else (the caller names file, row and column)."""
    t = str(text).strip().replace("_", "").replace("\u202f", "").replace("\u2009", "")
    if THOUSANDS_PATTERN.match(t):
        t = t.replace(",", "")
    scale = 1.0
    if t and t[-1].upper() in _SUFFIX and not t[-2:-1].isalpha():
        scale = _SUFFIX[t[-1].upper()]
        t = t[:-1].strip()
    return float(t) * scale


def parse_separator(text: str | None) -> str | None:
    """``--sep`` value to the separator: ``,``, ``;``, ``tab`` or ``\\t``; None = detect."""
    if text is None or text == "":
        return None
    if text in ("tab", "\\t", "\t", "TAB"):
        return "\t"
    if text in (",", ";", "|"):
        return text
    raise ValueError(f"--sep: expected ',', ';', '|' or 'tab', got {text!r}")


def detect_separator(header: str) -> str:
    """The separator of a table from its header line: the most frequent of ``,``, ``;``,
    tab outside quotes (a comma when none occurs)."""
    counts = {sep: 0 for sep in (",", ";", "\t")}
    quoted = False
    for ch in header:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in counts:
            counts[ch] += 1
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] > 0 else ","


# -- hints for tables whose columns are not mapped ------------------------------------------
_R_NAME = re.compile(r"loop|recur|repeat|iter_block|^r_|_r$|^num_r$|^n_r$|^rr$", re.IGNORECASE)
_REC_NAME = re.compile(r"shared|rec|loop|tied|block", re.IGNORECASE)
_BUDGET_NAME = re.compile(r"budget|compute|flop_budget|^c$|isoflop", re.IGNORECASE)


def as_numbers(values: pd.Series) -> np.ndarray | None:
    out = []
    for v in values.tolist():
        try:
            out.append(parse_count(v))
        except ValueError:
            return None
    arr = np.asarray(out, float)
    return arr if np.all(np.isfinite(arr)) else None


def looped_hint(raw: pd.DataFrame) -> tuple[str, str | None] | None:
    """(r column, n_rec column or None) when a table without r/n_rec has a column that looks
    like a loop count: a loop/recurrence name and integer values >= 1, several distinct."""
    r_col = None
    for col in raw.columns:
        if col in CANONICAL or not _R_NAME.search(col):
            continue
        x = as_numbers(raw[col])
        if x is not None and np.all(x >= 1) and np.all(x == np.round(x)) and len(np.unique(x)) >= 2:
            r_col = col
            break
    if r_col is None:
        return None
    rec_col = None
    for col in raw.columns:
        if col in CANONICAL or col == r_col or not _REC_NAME.search(col):
            continue
        x = as_numbers(raw[col])
        if x is not None and np.all(x >= 0) and np.any(x > 0):
            rec_col = col
            break
    return r_col, rec_col


def budget_hint(raw: pd.DataFrame) -> str | None:
    for col in raw.columns:
        if col not in CANONICAL and _BUDGET_NAME.search(col):
            return col
    return None
