"""Row selection (``--where``) and loss/FLOP units of a run table.

The ``where`` grammar is deliberately small (no code is evaluated)::

    EXPR      := CONDITION ( " and " CONDITION )*
    CONDITION := COLUMN OP VALUE ( "," VALUE )*
    OP        := "==" | "!=" | "<" | "<=" | ">" | ">="

``COLUMN`` is a canonical name (after ``columns`` mapping) or any column of the file.  With
``==`` a comma list keeps rows equal to any value (``variant==baseline,wide``), with ``!=``
rows equal to none of them.  A value that reads as a number (``1e18``, ``200M``) compares
numerically with the cells; any other value compares as text (``==``/``!=`` only).
Anything else (parentheses, ``or``, function calls, an unknown column) is refused with
a message naming the expression.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .schema import RunTableError
from .text import DECIMAL_COMMA_PATTERN, THOUSANDS_PATTERN, parse_count

#: comparison operators of ``where``, longest first so ``<=`` is not read as ``<``
OPERATORS = ("==", "!=", "<=", ">=", "<", ">")
#: How messages name the selection: the Python argument (``load_runs(where=...)``) and the flag.
WHERE = "where= / --where"
_CONDITION = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(==|!=|<=|>=|<|>)\s*(\S.*?)\s*$")
#: loss units a table may declare; the table is converted to nats per token
LOSS_UNITS = ("nats", "bits")
#: FLOP units of the ``flops`` and ``budget`` columns, as multipliers to FLOPs
FLOPS_UNITS = {"FLOP": 1.0, "GFLOP": 1e9, "TFLOP": 1e12, "PFLOP": 1e15}


@dataclass(frozen=True)
class Condition:
    """One ``COLUMN OP VALUE[,VALUE...]`` term of a ``where`` expression."""

    column: str
    op: str
    values: tuple[str, ...]

    def numbers(self) -> tuple[float, ...] | None:
        """The values as numbers, or None when any of them is not a number."""
        try:
            out = tuple(parse_count(v) for v in self.values)
        except ValueError:
            return None
        return out if all(math.isfinite(x) for x in out) else None


def parse_where(text: str) -> list[Condition]:
    """Parse a ``where`` expression (module docstring) into its conditions.

    Raises ``ValueError`` naming the part that does not follow the grammar."""
    if not text or not text.strip():
        raise ValueError(f"{WHERE}: empty expression; expected COLUMN OP VALUE, e.g. 'r<=4 and tokens>1e9'")
    out: list[Condition] = []
    for part in re.split(r"\s+and\s+", text.strip()):
        m = _CONDITION.match(part)
        if m is None:
            raise ValueError(
                f"{WHERE}: cannot read {part!r}; expected COLUMN OP VALUE[,VALUE...] joined by 'and', "
                f"with OP one of {' '.join(OPERATORS)} (e.g. 'variant==baseline and r<=4')"
            )
        column, op, rest = m.groups()
        values = tuple(v.strip().strip("'\"") for v in rest.split(","))
        if any(not v for v in values) or any(re.search(r"[()\s]", v) for v in values):
            raise ValueError(
                f"{WHERE}: cannot read the value(s) of {part!r}; expected plain numbers or words"
            )
        cond = Condition(column, op, values)
        if op not in ("==", "!=") and (len(values) != 1 or cond.numbers() is None):
            raise ValueError(f"{WHERE}: {part!r}: {op} needs one number, got {rest!r}")
        out.append(cond)
    return out


def where_mask(raw: pd.DataFrame, text: str, source: str, rows: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``raw`` (cells as text) that satisfy ``text``.

    ``rows`` are the 1-based data rows of the file, for messages.  Raises ``RunTableError``
    for an unknown column or a cell that a numeric comparison cannot read."""
    keep = np.ones(len(raw), bool)
    problems: list[str] = []
    try:
        conditions = parse_where(text)
    except ValueError as err:
        raise RunTableError(source, [str(err)]) from None
    for cond in conditions:
        if cond.column not in raw.columns:
            problems.append(
                f"{WHERE}: no column {cond.column!r}; columns: {', '.join(map(str, raw.columns))}"
            )
            continue
        cells = ["" if v is None else str(v).strip() for v in raw[cond.column].tolist()]
        targets = cond.numbers()
        if targets is None:  # text comparison
            hit = np.array([c in cond.values for c in cells])
        else:
            x = np.full(len(cells), np.nan)
            for i, c in enumerate(cells):
                try:
                    x[i] = parse_count(
                        c.replace(",", ".")
                        if DECIMAL_COMMA_PATTERN.match(c) and not THOUSANDS_PATTERN.match(c)
                        else c
                    )
                except ValueError:
                    problems.append(
                        f"row {rows[i]}, column {cond.column!r}: {WHERE} {cond.column}{cond.op}"
                        f"{','.join(cond.values)} compares numbers, got {c!r}"
                    )
            t = np.asarray(targets)
            hit = {
                "==": np.isin(x, t),
                "!=": ~np.isin(x, t),
                "<": x < t[0],
                "<=": x <= t[0],
                ">": x > t[0],
                ">=": x >= t[0],
            }[cond.op]
        keep &= ~hit if (cond.op == "!=" and targets is None) else hit
    if problems:
        raise RunTableError(source, problems)
    return keep


def loss_scale(loss_unit: str, bytes_per_token: float | None) -> float:
    """Factor taking the table's loss to nats per token: 1 for nats, ln 2 for bits per token,
    ln 2 x F for bits per byte with F bytes per token (``bytes_per_token``)."""
    if loss_unit not in LOSS_UNITS:
        raise ValueError(f"loss_unit: expected one of {', '.join(LOSS_UNITS)}, got {loss_unit!r}")
    if bytes_per_token is not None:
        if loss_unit != "bits":
            raise ValueError("bytes_per_token converts bits per byte: give it with loss_unit='bits'")
        if not (math.isfinite(bytes_per_token) and bytes_per_token > 0):
            raise ValueError(f"bytes_per_token must be a number > 0, got {bytes_per_token!r}")
    if loss_unit == "nats":
        return 1.0
    return math.log(2.0) * (1.0 if bytes_per_token is None else float(bytes_per_token))


def flops_scale(flops_unit: str) -> float:
    """Multiplier from ``flops_unit`` (``FLOP``, ``GFLOP``, ``TFLOP``, ``PFLOP``) to FLOPs."""
    key = str(flops_unit).upper().removesuffix("S")
    if key not in FLOPS_UNITS:
        raise ValueError(f"flops_unit: expected one of {', '.join(FLOPS_UNITS)}, got {flops_unit!r}")
    return FLOPS_UNITS[key]
