"""From a run table's file to its cells as text, with the file line of every row.

:func:`read_raw` reads a CSV (``,``, ``;`` or tab separated; UTF-8, UTF-16 or UTF-32 as the
byte-order mark says), the same compressed with gzip, bzip2, xz or zip, a Parquet file, or JSON
lines (:mod:`phifit.runs.formats`).  What it checks, each refusal a
:class:`~phifit.runs.schema.RunTableError` naming the file and the line (or row):

- bytes that are not text in their encoding (a Windows-1252 export: save as UTF-8);
- a header that names a column twice (:func:`check_header`);
- a data row with more cells than the header has names (:func:`overlong_rows`);
- a quoted cell that never closes, or that holds lines with the separator (rows swallowed by an
  unbalanced ``"``: :func:`multiline_lines`).

Lines are split at ``\\n``, ``\\r\\n`` and ``\\r`` only, so a cell holding U+2028, U+0085, a form
feed or a vertical tab stays one cell and line numbers match the file.  Comment and blank lines
(:mod:`phifit.runs.lines` states the rule) are skipped and listed in a note (kind
``skipped_lines``); nothing else is left out.

Validation of the values is :func:`phifit.runs.table_from_frame`'s job.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..cautions import Caution, caution
from . import formats
from .lines import Scan, header_index, scan_records, split_lines
from .schema import RunTableError, listed
from .text import detect_separator

#: Byte-order marks, longest first: a spreadsheet's "Unicode text" export is UTF-16 with a BOM.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


@dataclass(frozen=True)
class RawTable:
    """A table read as text cells.

    ``frame``: every cell as text, under the header's names; ``sep``: the separator (None for
    Parquet and JSON lines); ``lines``: the file line of each row (None where rows could not be
    paired with lines; zeros for a Parquet file, which has none); ``notes``: what the reading
    skipped (comment and blank lines); ``file_format``: "csv", "jsonl" or "parquet"."""

    frame: pd.DataFrame
    sep: str | None
    lines: np.ndarray | None
    notes: list[Caution] = field(default_factory=list)
    file_format: str = "csv"


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


def skipped_note(source: str, comments: list[int], blanks: list[int]) -> list[Caution]:
    """The note (kind "skipped_lines") listing the comment and blank lines a reading skipped
    (none when it skipped nothing)."""
    if not comments and not blanks:
        return []
    parts = []
    if comments:
        parts.append(
            f"{len(comments)} comment line(s) starting with '#' "
            f"(line(s) {listed([str(k) for k in comments])})"
        )
    if blanks:
        parts.append(f"{len(blanks)} blank line(s) (line(s) {listed([str(k) for k in blanks])})")
    return [
        caution(
            "runs",
            "skipped_lines",
            f"{os.path.basename(source)}: skipped {' and '.join(parts)}; after the header a line "
            "starting with '#' is a comment only when it holds no separator",
            level="note",
            comment_lines=list(comments),
            blank_lines=list(blanks),
        )
    ]


def read_raw(source: str, sep: str | None, empty_hint: str, *, skip_rows: int = 0) -> RawTable:
    """Read every cell of the table at ``source`` as text (module docstring).

    The first ``skip_rows`` lines (a tracker's preamble) are skipped; then comment and blank
    lines (:mod:`phifit.runs.lines`), each listed in a "skipped_lines" note.  A quoted cell may
    span lines (a note over several lines; the rows are then paired with their first lines), but
    one that holds a line with the separator (rows an unbalanced quote swallowed) is refused
    (:func:`multiline_lines`)."""
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
    data = formats.unwrap(source, data)
    if formats.is_parquet(data):
        if sep is not None or skip_rows:
            raise RunTableError(source, ["a Parquet file: sep and skip_rows apply to a CSV"])
        frame = formats.read_parquet(source, data)
        return RawTable(frame, None, np.zeros(len(frame), int), [], "parquet")
    encoding = detect_encoding(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        raise RunTableError(source, [formats.not_utf8_problem(data, err, encoding)]) from None
    if sep is None and not skip_rows and formats.looks_like_json(text):
        frame, lines, blanks = formats.read_json_lines(source, text)
        return RawTable(frame, None, np.asarray(lines, int), skipped_note(source, [], blanks), "jsonl")
    return _read_csv(source, split_lines(text), sep, empty_hint, skip_rows)


def _read_csv(source: str, lines: list[str], sep: str | None, empty_hint: str, skip_rows: int) -> RawTable:
    """:func:`read_raw` for the lines of a CSV."""
    start, comments, blanks = header_index(lines, skip_rows)
    if start is None:
        raise RunTableError(source, [f"file is empty; {empty_hint}"])
    if sep is None:
        sep = detect_separator(lines[start])
    scan = scan_records(lines, sep, start, comments, blanks)
    kept = scan.kept
    check_header(source, (scan.header.first, scan.header.text), sep)
    problems = overlong_rows(scan, sep) + unclosed_quote(scan)
    if problems:
        raise RunTableError(source, problems)
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
        raise RunTableError(source, [_parser_problem(msg, scan)]) from None
    notes = skipped_note(source, scan.comments, scan.blanks)
    numbers = None
    if any(r.first != r.last for r in [scan.header, *scan.records]):  # quoted cells over lines
        numbers = multiline_lines(source, raw, kept, sep)
    if len(scan.records) == len(raw):
        numbers = np.array([r.first for r in scan.records], int)
    return RawTable(raw, sep, numbers, notes)


def overlong_rows(scan: Scan, sep: str) -> list[str]:
    """The problem of a table whose data rows hold more cells than its header names (none when
    every row fits), naming each such row and its line.

    pandas reads such a table with its first column as row labels, every other column moved one
    name to the left (``r`` would get ``n_once``'s values), or refuses it naming a line of its
    own count (not the file's once comment or blank lines were skipped).  The usual cause is a
    separator at the end of every data line (a spreadsheet's trailing empty column), a header
    that lost a name, or a cell holding the separator without quotes.  A header of one name is
    left to the missing columns' error: the separator splits nothing there (``--sep ,`` on a
    ``;`` file whose numbers have decimal commas).
    """
    n_names = scan.header.cells if scan.header else 0
    longer = [(i, rec) for i, rec in enumerate(scan.records, start=1) if rec.cells > n_names]
    if not longer or n_names < 2:  # a header of one name: the separator is wrong, the columns say so
        return []
    where = listed([f"row {i} (line {rec.first})" for i, rec in longer])
    most = max(rec.cells for _, rec in longer)
    cells = f"{most} cells" if all(rec.cells == most for _, rec in longer) else f"up to {most} cells"
    return [
        f"{where}: {cells}, expected {n_names} (one per name of the header, line {scan.header.first}); "
        f"a separator {sep!r} at the end of each data line, a column without a name or a cell with "
        f"{sep!r} and no quotes: remove the extra cells, name the column or quote the cell"
    ]


#: pandas' message for a row with more fields than the header: its "line" counts records
_PANDAS_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def _parser_problem(msg: str, scan: Scan) -> str:
    """The problem of a table pandas cannot parse; a row with more cells than the header is
    named by its row and its line in the file (pandas counts records of the text it was given,
    without the comment and blank lines, header included)."""
    found = _PANDAS_FIELDS.search(msg)
    if found and 2 <= int(found.group(2)) <= len(scan.records) + 1:
        expected, record, saw = (int(g) for g in found.groups())
        line = scan.records[record - 2].first
        return (
            f"row {record - 1} (line {line}): {saw} cells, expected {expected} (one per name of the "
            f"header, line {scan.header.first}); check the separator (--sep) and the row's cells"
        )
    return f"not a readable CSV file ({msg})"


def unclosed_quote(scan: Scan) -> list[str]:
    """The problem of a table whose last record opens a quoted cell that no ``"`` closes."""
    if not scan.open_quote:
        return []
    last = scan.records[-1] if scan.records else scan.header
    what = f"row {len(scan.records)}" if scan.records else "the header"
    return [
        f"{what} (line {last.first}): a quoted cell opens and no '\"' closes it before the end of the "
        f"file (lines {last.first}-{last.last}); close or remove the quote"
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
