"""Reading run tables from text: separators, counts as people write them, unmapped columns.

- :func:`detect_separator` / :func:`parse_separator`: ``,``, ``;`` (Excel exports with a decimal
  comma) or a tab, detected from the header line or given;
- :func:`parse_count`: ``200M``, ``1.5B``, ``1,000,000``, ``1_000_000``;
- :func:`parse_column_mapping`: ``--columns r=num_recur,loss=val_loss``;
- :func:`read_raw`: every cell of a CSV as text, with a :class:`~phifit.schema.RunTableError`
  naming the file when it cannot be read;
- :func:`looped_hint` / :func:`budget_hint`: columns that look like the loop count, the shared
  block's parameters or the FLOP budget in a table that did not map them.

Validation of the values (rows, columns, ranges) is :func:`phifit.runs.table_from_frame`'s job.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
import re

import numpy as np
import pandas as pd

from .schema import CANONICAL, RunTableError


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


#: Byte-order marks, longest first: a spreadsheet's "Unicode text" export is UTF-16 with a BOM.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def detect_encoding(data: bytes) -> str:
    """The encoding of a table's bytes: from its byte-order mark (UTF-8, UTF-16 or UTF-32, as
    spreadsheets and Windows tools write them), UTF-16 without one when every other byte of the
    first line is zero (ASCII text in UTF-16), else UTF-8."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    head = data[:200]
    if len(head) >= 4 and head.count(0) * 3 >= len(head):
        if head[1::2].count(0) * 2 >= len(head[1::2]) and head[0] != 0:
            return "utf-16-le"
        if head[0::2].count(0) * 2 >= len(head[0::2]) and head[1] != 0:
            return "utf-16-be"
    return "utf-8"


def check_header(source: str, header: tuple[int, str], sep: str) -> None:
    """Refuse a header that names a column twice (a ``note`` column renamed ``loss`` beside the
    real one): which of the two holds the values is ambiguous, and reading would silently keep
    one.  The error names both columns by position and the header's line."""
    line, text = header
    try:
        names = [n.strip() for n in next(csv.reader([text], delimiter=sep, skipinitialspace=True), [])]
    except csv.Error:  # pandas reports a header it cannot parse
        return
    seen: dict[str, int] = {}
    problems = []
    for k, name in enumerate(names, start=1):
        if not name:
            continue
        if name in seen:
            problems.append(
                f"line {line}: columns {seen[name]} and {k} are both named {name!r}; rename or drop one "
                "(which one holds the values is ambiguous)"
            )
        else:
            seen[name] = k
    if problems:
        raise RunTableError(source, problems)


def read_raw(
    source: str, sep: str | None, empty_hint: str, *, skip_rows: int = 0
) -> tuple[pd.DataFrame, str, np.ndarray | None]:
    """Read every cell as text; returns (frame, separator used, file line of each data row).

    The first ``skip_rows`` lines (a tracker's preamble) are skipped, then every line whose
    first non-blank character is ``#`` (comment lines) and blank lines (in a tab-separated
    table a line of tabs alone is a row of empty cells, which the validation skips with a note).
    A quoted cell may span lines (a note over several lines; the rows are then paired with their
    first lines), but one that holds a line with the separator (rows an unbalanced quote
    swallowed) is refused (:func:`multiline_lines`)."""
    if not os.path.exists(source):
        raise RunTableError(source, ["file not found"])
    if os.path.isdir(source):
        raise RunTableError(source, ["is a directory; expected a CSV file"])
    if skip_rows < 0:
        raise ValueError(f"skip_rows must be >= 0, got {skip_rows}")
    try:
        with open(source, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise RunTableError(source, [f"cannot read ({err.strerror})"]) from None
    encoding = detect_encoding(data)
    try:
        lines = data.decode(encoding).splitlines()
    except UnicodeDecodeError as err:
        line = data[: err.start].decode(encoding, errors="replace").count("\n") + 1
        raise RunTableError(
            source,
            [f"line {line}: not a readable CSV file ({err.reason} at byte {err.start}; read as {encoding})"],
        ) from None
    kept = [
        (k + 1, line)
        for k, line in enumerate(lines)
        if k >= skip_rows and line.strip() and not line.lstrip().startswith("#")
    ]
    if sep is None:
        sep = detect_separator(kept[0][1] if kept else "")
    if sep.isspace():  # a row of empty cells ("\t\t\t") is a row, not a blank line: it gets its note
        kept = [
            (k + 1, line)
            for k, line in enumerate(lines)
            if k >= skip_rows and (line.strip() or sep in line) and not line.lstrip().startswith("#")
        ]
    if kept:
        check_header(source, kept[0], sep)
    try:
        raw = pd.read_csv(
            io.StringIO("\n".join(line for _, line in kept)),
            sep=sep,
            dtype=str,
            keep_default_na=False,
            skipinitialspace=True,
        )
    except pd.errors.EmptyDataError:
        raise RunTableError(source, [f"file is empty; {empty_hint}"]) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        msg = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise RunTableError(source, [f"not a readable CSV file ({msg})"]) from None
    if not isinstance(raw.index, pd.RangeIndex) and len(raw.columns) >= 2:
        # (a header of one name: the separator splits nothing there, and the missing columns say it)
        raise RunTableError(source, overlong_rows(kept, sep, len(raw.columns)))
    numbers = np.array([k for k, _ in kept[1:]], int) if len(kept) - 1 == len(raw) else None
    if numbers is None:
        numbers = multiline_lines(source, raw, kept, sep)
    return raw, sep, numbers


def overlong_rows(kept: list[tuple[int, str]], sep: str, n_names: int) -> list[str]:
    """The problem of a table whose data rows hold more cells than its header names.

    pandas reads such a table with its first column as row labels, every other column moved one
    name to the left (``r`` would get ``n_once``'s values): it is refused instead, naming the lines.
    The usual cause is a separator at the end of every data line (a spreadsheet's trailing empty
    column) or a header that lost a name.
    """
    delimiter = " " if sep.isspace() else sep
    cells = {k: len(next(csv.reader([line], delimiter=delimiter), [])) for k, line in kept[1:]}
    longer = [k for k, n in cells.items() if n > n_names]
    most = max(cells.values(), default=n_names + 1)
    where = ", ".join(f"line {k}" for k in longer[:5]) + (
        f" and {len(longer) - 5} more" if len(longer) > 5 else ""
    )
    return [
        f"{where}: {most} cells under a header of {n_names} names (a separator {sep!r} at the end of "
        f"each data line, or a column without a name); remove the extra cells or name the column"
    ]


def _breaks(value: object) -> int:
    """The line breaks in a cell (0 for a missing one)."""
    return value.count("\n") if isinstance(value, str) else 0


def multiline_lines(
    source: str, raw: pd.DataFrame, kept: list[tuple[int, str]], sep: str
) -> np.ndarray | None:
    """The file line of each row of a table where quoted cells span lines (None when the rows
    cannot be paired with lines).

    A quoted cell may hold a note written over several lines; but when a line it holds contains
    the separator, that line is a row swallowed by an unbalanced quote (a ``"`` that opens a cell
    and the next ``"``, rows below, that closes it) and reading on would drop those rows
    silently: the table is refused, naming the row, its lines and the column (every such cell).
    So is a header whose column name runs over lines."""
    header_breaks = sum(_breaks(str(c)) for c in raw.columns)
    breaks = np.array([[_breaks(v) for v in row] for row in raw.itertuples(index=False)], int).reshape(
        len(raw), len(raw.columns)
    )
    per_row = breaks.sum(axis=1)
    first = (
        1 + header_breaks + np.arange(len(raw)) + np.concatenate([[0], np.cumsum(per_row)[:-1]]).astype(int)
    )
    paired = len(raw) == 0 or first[-1] + per_row[-1] == len(kept) - 1
    problems = []
    for k, col in enumerate(raw.columns):
        if _breaks(str(col)):
            problems.append(
                f"line {kept[0][0]}: the header's column {k + 1} ({str(col).splitlines()[0].strip()!r}) is "
                f"a quoted cell over {_breaks(str(col)) + 1} lines (an unbalanced '\"' reads the rows below "
                "it into the header); a column name is one line: close or remove the quote"
            )
    for i, k in zip(*np.nonzero(breaks)):
        swallowed = [piece for piece in str(raw.iat[i, k]).split("\n")[1:] if sep in piece]
        if not swallowed:
            continue
        where = f"row {i + 1}"
        if paired:
            start, end = kept[first[i]][0], kept[first[i] + per_row[i]][0]
            where += f" (lines {start}-{end})"
        problems.append(
            f"{where}, column {str(raw.columns[k]).strip()!r}: a quoted cell runs over "
            f"{breaks[i, k] + 1} lines and holds {len(swallowed)} line(s) with the separator {sep!r}, "
            "rows read as text (an unbalanced '\"' opens the cell and a later one closes it); close "
            "or remove the quote"
        )
    if problems:
        raise RunTableError(source, problems)
    return np.array([kept[j][0] for j in first], int) if paired else None


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
