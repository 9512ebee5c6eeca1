"""The lines of a text table and which of them are records, comments or blank.

- :func:`split_lines`: a table's text split at the CSV line terminators only (``\\n``,
  ``\\r\\n``, ``\\r``); ``str.splitlines`` also breaks at U+2028, U+2029, U+0085, form feed,
  vertical tab and the file/group/record separators, which a note cell may hold: a valid CSV
  (one that Python's ``csv`` module and pandas read) would lose its cell and its line numbers;
- :func:`scan_records`: which lines are the header, the records (a record is one line, or more
  where a quoted cell holds a line break), comment lines and blank lines, with the number of
  cells of each record.

Comment lines (the rule ``docs/run-tables.md`` states): before the header, a line whose first
non-blank character is ``#``; after it, such a line only when it holds no separator (one cell,
which cannot be a run).  A line after the header that starts with ``#`` and has separators is a
row (a ``run_id`` such as ``#C4.64e+17_r2_s8``).  A line inside a quoted cell is part of the
cell, whatever it starts with.  Every comment and blank line skipped is listed
(:class:`Scan`), so that the reader can say so in a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: The line terminators of a CSV (Python's csv module and pandas end a record at these only).
TERMINATORS = re.compile(r"\r\n|\r|\n")
#: The quote character of a CSV cell (doubled inside a quoted cell: ``""``).
QUOTE = '"'


def split_lines(text: str) -> list[str]:
    """``text`` split at ``\\n``, ``\\r\\n`` and ``\\r`` (a final terminator ends the last line
    and adds none)."""
    lines = TERMINATORS.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


@dataclass(frozen=True)
class Record:
    """One record of the table: its first and last line in the file (1-based), its text (the
    lines joined by ``\\n``) and its number of cells (separators outside quotes, plus one)."""

    first: int
    last: int
    text: str
    cells: int


@dataclass
class Scan:
    """What :func:`scan_records` found: the header and data records, and the lines skipped."""

    header: Record | None = None
    records: list[Record] = field(default_factory=list)
    comments: list[int] = field(default_factory=list)
    blanks: list[int] = field(default_factory=list)
    #: True when the text ends inside a quoted cell (an unbalanced ``"``)
    open_quote: bool = False

    @property
    def kept(self) -> list[tuple[int, str]]:
        """(file line, text) of every line of the header and the records, in order."""
        out: list[tuple[int, str]] = []
        for rec in ([self.header] if self.header else []) + self.records:
            out += [(rec.first + k, piece) for k, piece in enumerate(rec.text.split("\n"))]
        return out


def _scan_line(line: str, sep: str, inside: bool) -> tuple[bool, int]:
    """(whether a quoted cell is open at the end of ``line``, separators outside quotes in it),
    for a line that starts inside a quoted cell or not.

    A ``"`` opens a quoted cell only at the start of a cell (after any spaces: the reader skips
    initial spaces); inside one, ``""`` is a quote and a lone ``"`` closes it; elsewhere a
    ``"`` is a character of the cell (pandas' and the csv module's rules)."""
    seps = 0
    at_start = not inside
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if inside:
            if ch == QUOTE:
                if i + 1 < n and line[i + 1] == QUOTE:
                    i += 2
                    continue
                inside = False
            i += 1
            continue
        if at_start and ch == " " and sep != " ":
            i += 1
            continue
        if at_start and ch == QUOTE:
            inside, at_start = True, False
            i += 1
            continue
        at_start = ch == sep
        seps += ch == sep
        i += 1
    return inside, seps


def header_index(lines: list[str], skip_rows: int) -> tuple[int | None, list[int], list[int]]:
    """(index of the header line or None, comment lines, blank lines before it): the first line
    after the ``skip_rows`` preamble that is neither blank nor a ``#`` comment."""
    comments: list[int] = []
    blanks: list[int] = []
    for k in range(skip_rows, len(lines)):
        stripped = lines[k].strip()
        if not stripped:
            blanks.append(k + 1)
        elif stripped.startswith("#"):
            comments.append(k + 1)
        else:
            return k, comments, blanks
    return None, comments, blanks


def scan_records(lines: list[str], sep: str, start: int, comments: list[int], blanks: list[int]) -> Scan:
    """The header (line index ``start``) and every record after it, with the comment and blank
    lines skipped (``comments`` and ``blanks``: those before the header, file lines).

    At the start of a record, a blank line is skipped, except in a tab-separated table where a
    line of tabs is a row of empty cells (the validation skips it with its own note); a line
    starting with ``#`` and holding no separator is a comment.  Lines inside a quoted cell
    belong to it."""
    scan = Scan(comments=list(comments), blanks=list(blanks))
    k, n = start, len(lines)
    while k < n:
        line = lines[k]
        if scan.header is not None:
            stripped = line.strip()
            if not stripped and not (sep.isspace() and sep in line):
                scan.blanks.append(k + 1)
                k += 1
                continue
            if stripped.startswith("#") and sep not in line:
                scan.comments.append(k + 1)
                k += 1
                continue
        first, pieces = k, [line]
        inside, seps = _scan_line(line, sep, False)
        while inside and k + 1 < n:
            k += 1
            pieces.append(lines[k])
            inside, more = _scan_line(lines[k], sep, True)
            seps += more
        record = Record(first + 1, k + 1, "\n".join(pieces), seps + 1)
        if scan.header is None:
            scan.header = record
        else:
            scan.records.append(record)
        scan.open_quote = inside
        k += 1
    return scan
