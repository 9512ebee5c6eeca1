"""Property-based fuzz of the input layer: mutations of the shipped run tables, fed to every
subcommand that reads one.

Each case starts from rows of ``data/looped_study_runs_digitized.csv`` or
``data/cpu_small_runs.csv`` and applies mutations a user's export can carry: encodings and
byte-order marks, separators, quoting, line endings, missing and extra cells, numbers with
units or thousands separators, NaN/inf, huge, zero and negative values, duplicated or renamed
headers, empty rows, blank and comment lines, trailing garbage; and the classes of the reader's
defects: a first cell starting with ``#``, line-separator characters in a cell (U+2028, U+0085,
form feed, ...), comment lines before an overlong row, budgets spelled differently or not
numbers, losses 100x too large, a loss column named in bits, a row copied hundreds of times, and
the table compressed (gzip, bzip2, xz, zip) or saved as Parquet or JSON lines.  The contract
(:func:`outcome`):

- exit 0, and every line accounted for: the runs the loader kept plus the all-empty rows it
  skipped with a note, the lines read into quoted cells that run over lines (named in a
  "multiline_cells" warning) and the comment and blank lines skipped with a note
  ("skipped_lines") equal the lines below the header, and a command that narrows the table to
  one recipe names every recipe's count (the runs ``phifit fit`` prints are those of the recipe);
  nothing silently changed: a ``budget`` column with a number in it is numeric, no loss above
  20 nats per token, no loss column named in bits read as nats, no note over
  :data:`MAX_MESSAGE` characters;
- or exit 2 with a one-line message that names the file (a row with too many cells by its true
  line; a file that is not UTF-8 with the hint to save it as UTF-8);
- never a traceback (exit 1, or any exception out of :func:`phifit.cli.main`).

``fit``, ``predict --runs``, ``equiv --runs`` and ``plan --pilot`` run in full, in process
(``fit --starts 8``, ``equiv --bootstrap 2``, ``plan --simulate 0``).  ``compare``,
``diagnose`` and ``report`` spend minutes on bootstraps after reading, so they run up to the
table they read (the loader is wrapped to stop there): their reading options and loading are
the shared ones the full commands exercise.

The suite runs 200 cases (50 of ``fit`` and 15 of ``predict``/``equiv``/``plan`` in full, 135
over every subcommand up to its table); :func:`test_fuzz_study` (``slow``) runs 10,000 and counts failures
(docs/run-tables.md quotes its counts).
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import gzip
import io
import json
import lzma
import math
import os
import re
import tempfile
import traceback
import zipfile
from collections import Counter
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import phifit.cli._common as common
import phifit.cli.compare as compare_cli
import phifit.cli.diagnose as diagnose_cli
import phifit.cli.report as report_cli
from phifit.cli import main
from phifit.runs.formats import unwrap
from phifit.runs.lines import split_lines
from phifit.runs.plausibility import MAX_LOSS_NATS, bits_in_name
from phifit.runs.reader import detect_encoding
from phifit.runs.text import detect_separator

DATA = Path(__file__).resolve().parents[1] / "data"
SOURCES = ("looped_study_runs_digitized.csv", "cpu_small_runs.csv")

#: the command line of each table-reading subcommand (RUNS: the table, OUT: a fresh directory)
COMMANDS = {
    "fit": ["fit", "RUNS", "--starts", "8", "--quiet"],
    "predict": ["predict", "--runs", "RUNS", "--compute", "1e20"],
    "equiv": ["equiv", "--runs", "RUNS", "--n-once", "100", "--n-rec", "200", "--r", "2", "--bootstrap", "2"],
    "plan": ["plan", "--pilot", "RUNS", "--design", "paper", "--simulate", "0"],
    "compare": ["compare", "RUNS"],
    "diagnose": ["diagnose", "RUNS"],
    "report": ["report", "RUNS", "--out", "OUT"],
}
#: commands stopped once their table is read (their analysis takes minutes)
READ_ONLY = ("compare", "diagnose", "report")
#: commands run in full by default
FULL = ("fit", "predict", "equiv", "plan")


def _read(name: str) -> tuple[list[str], list[list[str]]]:
    with open(DATA / name, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


TABLES = {name: _read(name) for name in SOURCES}

#: what a cell can become: text a user's table may hold
CELL_VALUES = (
    "",
    " ",
    "nan",
    "NaN",
    "NA",
    "inf",
    "-inf",
    "1e400",
    "-1e400",
    "1e300",
    "1e-300",
    "0",
    "-3",
    "-0.5",
    "2.8 nats",
    "3.1nats",
    "1,234,567",
    "12,345",
    "2,85",
    "200M",
    "1.5B",
    "20 B",
    "7T",
    "1_000_000",
    "4.5",
    "abc",
    "n/a",
    "?",
    "'3.0",
    '"',
    "１２",
    "2.8 µ",
    "é",
    "\x00",
    "0x1F",
    "1e",
    "--1",
    "+2",
    "2.9e+00",
    "True",
)
#: characters str.splitlines() breaks at but a CSV does not
LINE_BREAKERS = ("\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e")
#: loss columns named in bits (mapped with --loss NAME)
BITS_NAMES = ("val_bpb", "bits_per_byte", "loss_bits", "bpc")
#: how the table is stored: plain text most of the time, else compressed, Parquet or JSON lines
CONTAINERS = ("gzip", "bzip2", "xz", "zip", "parquet", "jsonl")
#: the mutation classes of :func:`cases`, by number (each case lists the ones it applied)
MUTATIONS = (
    "cell_value",
    "short_row",
    "extra_cell",
    "duplicated_row",
    "empty_row",
    "blank_line",
    "comment_line",
    "trailing_garbage",
    "header_name_twice",
    "header_name_spacing",
    "column_dropped",
    "separator_in_cell",
    "hash_first_cell",
    "line_separator_in_cell",
    "comment_then_long_row",
    "budget_spelling",
    "loss_x100",
    "loss_named_in_bits",
    "row_copies",
    "container",
)
#: longest note or error line a command may print
MAX_MESSAGE = 3000
GARBAGE = ("Total", "Average,,,,", "\x1a", "=SUM(F2:F9)", "-- end of export --", "garbage;;;", "\ufeffx")
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "cp1252")
SEPARATORS = (",", ";", "\t")


@st.composite
def cases(draw, commands=tuple(COMMANDS)):
    """A mutated table and the command that reads it."""
    source = draw(st.sampled_from(SOURCES))
    header, rows = TABLES[source]
    n = len(rows)
    start = draw(st.integers(0, n - 1))
    length = draw(st.integers(1, min(40, n)))
    picked = [list(r) for r in (rows[start : start + length] + rows[: max(0, start + length - n)])]
    header = list(header)
    lines: list[tuple[str, object]] = [("row", r) for r in picked]  # ("row", cells) or ("text", line)
    n_cols = len(header)
    container = "plain"

    extra_args: list[str] = []
    mutations = draw(st.lists(st.integers(0, 19), max_size=6))
    applied: list[str] = []
    for kind in mutations:
        data = [i for i, (k, _) in enumerate(lines) if k == "row"]
        before = repr((header, lines, extra_args, container))
        if kind == 0 and data:  # a cell becomes something else
            i = draw(st.sampled_from(data))
            c = draw(st.integers(0, max(0, len(lines[i][1]) - 1)))
            lines[i][1][c : c + 1] = [draw(st.sampled_from(CELL_VALUES))]
        elif kind == 1 and data:  # a short row
            i = draw(st.sampled_from(data))
            cut = draw(st.integers(1, max(1, len(lines[i][1]) - 1)))
            lines[i] = ("row", lines[i][1][:cut])
        elif kind == 2 and data:  # an extra cell
            i = draw(st.sampled_from(data))
            lines[i] = ("row", lines[i][1] + [draw(st.sampled_from(CELL_VALUES))])
        elif kind == 3 and data:  # a duplicated row
            i = draw(st.sampled_from(data))
            lines.insert(i + 1, ("row", list(lines[i][1])))
        elif kind == 4:  # an all-empty row
            lines.insert(draw(st.integers(0, len(lines))), ("row", [""] * n_cols))
        elif kind == 5:  # a blank or whitespace-only line
            lines.insert(draw(st.integers(0, len(lines))), ("text", draw(st.sampled_from(("", "  ")))))
        elif kind == 6:  # a comment line
            lines.insert(draw(st.integers(0, len(lines))), ("text", "# exported by a tracker"))
        elif kind == 7:  # trailing garbage
            lines.append(("garbage", draw(st.sampled_from(GARBAGE))))
        elif kind == 8:  # a header names a column twice (a note renamed 'loss', or any two)
            a, b = draw(st.integers(0, n_cols - 1)), draw(st.integers(0, n_cols - 1))
            header[b] = "loss" if draw(st.booleans()) else header[a]
        elif kind == 9:  # whitespace or case in a header name
            c = draw(st.integers(0, n_cols - 1))
            header[c] = draw(st.sampled_from((f" {header[c]} ", header[c].upper(), f"{header[c]}\t")))
        elif kind == 10:  # a column dropped
            c = draw(st.integers(0, len(header) - 1))
            del header[c]
            lines = [(k, v[:c] + v[c + 1 :]) if k == "row" else (k, v) for k, v in lines]
            n_cols -= 1
        elif kind == 11 and data:  # a cell with the separator or a quote in it
            i = draw(st.sampled_from(data))
            c = draw(st.integers(0, max(0, len(lines[i][1]) - 1)))
            lines[i][1][c : c + 1] = [draw(st.sampled_from(('a "quoted" note', "x, y", "p; q", "tab\there")))]
        elif kind == 12 and data:  # a first cell starting with '#' (a run_id such as #C4.64e+17_r2_s8)
            i = draw(st.sampled_from(data))
            lines[i][1][:1] = ["#" + (lines[i][1][0] if lines[i][1] else "")]
        elif kind == 13 and data:  # a line-separator character (not a CSV line break) in a cell
            i = draw(st.sampled_from(data))
            c = draw(st.integers(0, max(0, len(lines[i][1]) - 1)))
            mark = draw(st.sampled_from(LINE_BREAKERS))
            old = lines[i][1][c] if lines[i][1] else ""
            lines[i][1][c : c + 1] = [draw(st.sampled_from((f"a{mark}b", old + mark, mark)))]
        elif kind == 14:  # comment and blank lines, then a row with an extra cell below them
            at = draw(st.integers(0, len(lines)))
            lines[at:at] = [("text", "# filtered export"), ("text", "")]
            below = [i for i, (k, _) in enumerate(lines) if k == "row" and i > at + 1]
            if below:
                i = draw(st.sampled_from(below))
                lines[i] = ("row", lines[i][1] + ["extra"])
        elif kind == 15 and data and "budget" in header:  # a budget spelled differently, or not a number
            c = header.index("budget")
            for i in draw(st.lists(st.sampled_from(data), min_size=1, max_size=8)):
                if c < len(lines[i][1]):
                    lines[i][1][c] = _respelled(draw, lines[i][1][c])
        elif kind == 16 and data and "loss" in header:  # losses 100x too large (some rows, or all)
            c = header.index("loss")
            for i in data if draw(st.booleans()) else [draw(st.sampled_from(data))]:
                if c < len(lines[i][1]):
                    lines[i][1][c] = _times_100(lines[i][1][c])
        elif kind == 17 and "loss" in header:  # the loss column named in bits, mapped with --loss
            name = draw(st.sampled_from(BITS_NAMES))
            header[header.index("loss")] = name
            extra_args = ["--loss", name]
        elif kind == 18 and data:  # one run copied hundreds of times (under run ids of their own)
            i = draw(st.sampled_from(data))
            k = header.index("run_id") if "run_id" in header else None
            copies = [list(lines[i][1]) for _ in range(draw(st.integers(20, 300)))]
            for j, copy in enumerate(copies):
                if k is not None and k < len(copy):
                    copy[k] = f"{copy[k]}-copy{j}"
            lines[i + 1 : i + 1] = [("row", copy) for copy in copies]
        elif kind == 19:  # stored compressed, as Parquet or as JSON lines
            container = draw(st.sampled_from(CONTAINERS))
        if repr((header, lines, extra_args, container)) != before:
            applied.append(MUTATIONS[kind] if kind != 19 else f"{MUTATIONS[kind]}:{container}")
        if n_cols == 0:
            break
    sep = draw(st.sampled_from(SEPARATORS))
    quoting = draw(st.sampled_from(("minimal", "all", "none")))
    decimal_comma = sep != "," and draw(st.booleans())
    return {
        "source": source,
        "header": header,
        "lines": lines,
        "sep": sep,
        "quoting": quoting,
        "decimal_comma": decimal_comma,
        "newline": draw(st.sampled_from(("\n", "\r\n"))),
        "encoding": draw(st.sampled_from(ENCODINGS)),
        "command": draw(st.sampled_from(commands)),
        "container": container,
        "extra_args": extra_args,
        "mutations": applied,
    }


def _respelled(draw, text: str) -> str:
    """A budget cell written another way (``1e+18`` as ``1E+18``, ``1.000000e+18``, ``1E18``), or
    a cell that is not a number."""
    try:
        x = float(text)
    except ValueError:
        return draw(st.sampled_from(("n/a", "", "?")))
    spellings = (f"{x:E}", f"{x:.6e}", f"{x:g}".upper().replace("+", ""), "n/a", "")
    return draw(st.sampled_from(spellings))


def _times_100(text: str) -> str:
    try:
        return repr(float(text) * 100)
    except ValueError:
        return text


_FLOAT = re.compile(r"^-?\d+\.\d+([eE][+-]?\d+)?$")


def render(case: dict) -> tuple[bytes, int]:
    """The table's bytes and its number of lines below the header (every one must be accounted
    for: a run, an empty row, a line of a quoted cell, a comment or blank line; a Parquet file
    has its rows only, JSON lines have no header)."""
    sep, quoting = case["sep"], case["quoting"]
    container = case.get("container", "plain")
    if container == "parquet":
        return _parquet(case)
    if container == "jsonl":
        return _json_lines(case)

    def cell(text: str) -> str:
        if case["decimal_comma"] and _FLOAT.match(text):
            text = text.replace(".", ",")
        return text

    def line(cells: list[str]) -> str:
        cells = [cell(c) for c in cells]
        if quoting == "none":
            return sep.join(cells)
        buf = io.StringIO()
        csv.writer(
            buf,
            delimiter=sep,
            lineterminator="",
            quoting=csv.QUOTE_ALL if quoting == "all" else csv.QUOTE_MINIMAL,
        ).writerow(cells)
        return buf.getvalue()

    out = [line(case["header"])]
    for kind, value in case["lines"]:
        out.append(line(value) if kind == "row" else str(value))
    text = case["newline"].join(out) + case["newline"]
    data = text.encode(case["encoding"], errors="replace")
    return _compressed(data, container), len(out) - 1


def _compressed(data: bytes, container: str) -> bytes:
    """``data`` compressed as ``container`` says (as is for "plain")."""
    if container == "gzip":
        return gzip.compress(data, mtime=0)
    if container == "bzip2":
        return bz2.compress(data)
    if container == "xz":
        return lzma.compress(data)
    if container == "zip":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as archive:
            archive.writestr("runs.csv", data)
        return buf.getvalue()
    return data


def _json_value(text: str) -> object:
    """A cell as a JSON value: an integer or a finite number where it reads as one, else text."""
    if re.fullmatch(r"-?\d{1,15}", text):
        return int(text)
    try:
        x = float(text)
    except ValueError:
        return text
    return x if math.isfinite(x) and _FLOAT.match(text) else text


def _json_lines(case: dict) -> tuple[bytes, int]:
    """The case as JSON lines: one object per row (keys: the header's names, a repeated name
    written twice; extra cells under ``extra_K``), text lines as they are."""
    header = case["header"]
    out = []
    for kind, value in case["lines"]:
        if kind != "row":
            out.append(str(value))
            continue
        keys = [header[k] if k < len(header) else f"extra_{k}" for k in range(len(value))]
        pairs = ", ".join(f"{json.dumps(k)}: {json.dumps(_json_value(v))}" for k, v in zip(keys, value))
        out.append("{" + pairs + "}")
    text = case["newline"].join(out) + case["newline"]
    return text.encode(case["encoding"], errors="replace"), len(out)


def _parquet(case: dict) -> tuple[bytes, int]:
    """The case's rows as a Parquet file (short rows padded with nulls, extra cells left out, a
    repeated name suffixed; a column of numbers typed as numbers)."""
    names: list[str] = []
    for name in case["header"]:
        names.append(name if name not in names else f"{name}_{len(names)}")
    rows = [list(v)[: len(names)] + [None] * (len(names) - len(v)) for k, v in case["lines"] if k == "row"]
    columns = {}
    for j, name in enumerate(names):
        values = [r[j] for r in rows]
        try:
            columns[name] = pd.array([None if v in (None, "") else float(v) for v in values], dtype="Float64")
        except ValueError:
            columns[name] = pd.array(values, dtype=object)
    buf = io.BytesIO()
    pd.DataFrame(columns, index=range(len(rows))).to_parquet(buf, index=False)
    return buf.getvalue(), len(rows)


class _Loaded(Exception):
    """Raised by the wrapped loader of a read-only command once its table is read."""


def outcome(case: dict, full: tuple[str, ...] = FULL) -> tuple[str, str]:
    """("ok" | "refused" | a failure kind, detail) for one case; commands not in ``full`` stop
    once their table is read."""
    data, n_data = render(case)
    return table_outcome(data, n_data, case["command"], full, tuple(case.get("extra_args", ())))


def argv_of(command: str, path: str, out: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The command line of ``command`` on the table at ``path`` (``out``: its output folder),
    with the reading options ``extra``."""
    return [path if a == "RUNS" else out if a == "OUT" else a for a in COMMANDS[command]] + list(extra)


def table_outcome(
    data: bytes, n_data: int, command: str, full: tuple[str, ...] = FULL, extra: tuple[str, ...] = ()
) -> tuple[str, str]:
    """:func:`outcome` of a table's bytes with ``n_data`` lines below its header read by
    ``command`` with the reading options ``extra`` (a saved case replays through this,
    :func:`replay`)."""
    loaded: list = []
    real = common.load_runs_from_args

    def recording(args, **kwargs):
        runs = real(args, **kwargs)
        loaded.append(runs)
        return runs

    def stopping(args, **kwargs):
        loaded.append(real(args, **kwargs))
        raise _Loaded

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "runs.csv")
        with open(path, "wb") as fh:
            fh.write(data)
        argv = argv_of(command, path, os.path.join(tmp, "out"), extra)
        out, err = io.StringIO(), io.StringIO()
        patches = [mock.patch.object(common, "load_runs_from_args", recording)]
        if command not in full and command not in READ_ONLY:
            patches = [mock.patch.object(common, "load_runs_from_args", stopping)]
        elif command == "compare":
            patches.append(
                mock.patch.object(compare_cli, "load_recipe_runs", lambda a, **k: stopping(a, **k))
            )
        elif command == "diagnose":
            patches.append(
                mock.patch.object(diagnose_cli, "load_recipe_runs", lambda a, **k: stopping(a, **k))
            )
        elif command == "report":
            patches.append(mock.patch.object(report_cli, "load_runs_from_args", stopping))
        try:
            with contextlib.ExitStack() as stack:
                for p in patches:
                    stack.enter_context(p)
                stack.enter_context(contextlib.redirect_stdout(out))
                stack.enter_context(contextlib.redirect_stderr(err))
                try:
                    code = main(argv)
                except _Loaded:
                    code = 0
        except BaseException as exc:  # noqa: BLE001 (any escape is the failure this test counts)
            tb = traceback.format_exc().strip().splitlines()
            return "traceback", f"{command}: {type(exc).__name__}: {exc} | {tb[-3:]}"
    stdout, stderr = out.getvalue(), err.getvalue()
    if code == 2:
        errors = [line for line in stderr.splitlines() if ": error: " in line]
        if len(errors) != 1:
            return "bad_message", f"{command}: {stderr[-500:]!r}"
        if "runs.csv" not in errors[0]:
            return "no_file_named", f"{command}: {errors[0]!r}"
        return refusal_outcome(data, errors[0], command)
    if code != 0:
        return "exit_code", f"{command}: exit {code}: {stderr[-500:]!r}"
    if not loaded:
        return "not_loaded", command
    table = loaded[0]
    skipped = sum(len(c.values.get("rows", [])) for c in table.warnings if c.kind == "empty_rows")
    held = sum(c.values.get("extra_lines", 0) for c in table.warnings if c.kind == "multiline_cells")
    lines = sum(
        len(c.values.get("comment_lines", [])) + len(c.values.get("blank_lines", []))
        for c in table.warnings
        if c.kind == "skipped_lines"
    )
    if len(table) + skipped + held + lines != n_data:
        return (
            "rows_lost",
            f"{command}: {len(table)} runs + {skipped} skipped + {held} lines in multi-line cells + "
            f"{lines} comment or blank lines != {n_data} lines below the header",
        )
    changed = silent_change(table, extra, stdout + stderr)
    if changed:
        return changed
    recipes = re.search(r"holds several recipes \(([^)]*)\)", stderr)
    if recipes:
        counts = [int(x) for x in re.findall(r" (\d+)(?:,| runs)", recipes.group(1))]
        if sum(counts) != len(table):
            return "rows_lost", f"{command}: recipes {recipes.group(1)!r} do not sum to {len(table)} runs"
    if command == "fit" and "fit" in full:
        used = re.search(r"^\s+runs\s+(\d+)\s*$", stdout, re.MULTILINE)
        chosen = re.search(r"this analysis uses '[^']*' \((\d+) runs\)", stderr)
        expected = int(chosen.group(1)) if chosen else len(table)
        if used is None or int(used.group(1)) != expected:
            return "rows_lost", f"fit printed {used and used.group(1)} runs, expected {expected}"
    return "ok", ""


def silent_change(table, extra: tuple[str, ...], printed: str) -> tuple[str, str] | None:
    """(failure kind, detail) when a table that loaded was changed without a word, else None: a
    ``budget`` column kept as text although a cell of it is a number (1e+18 and 1E18 would be two
    cells), a loss above 20 nats per token, a loss column named in bits read as nats with no unit
    given, or a printed line (a note) longer than :data:`MAX_MESSAGE`."""
    if "budget" in table.frame and table.frame["budget"].dtype.kind not in "iuf":
        numeric = pd.to_numeric(table.frame["budget"], errors="coerce")
        if numeric.notna().any():
            return "budget_text", f"budget kept as text with {int(numeric.notna().sum())} numeric cells"
    if len(table) and float(table.loss.max()) > MAX_LOSS_NATS:
        return "implausible_loss", f"a loss of {float(table.loss.max()):.4g} nats per token was accepted"
    if "--loss" in extra and "--loss-unit" not in extra and bits_in_name(extra[extra.index("--loss") + 1]):
        return "bits_as_nats", f"column {extra[extra.index('--loss') + 1]!r} read as nats"
    longest = max((len(line) for line in printed.splitlines()), default=0)
    if longest > MAX_MESSAGE:
        return "long_message", f"a printed line of {longest} characters"
    return None


#: a refusal of a row with too many cells: the row, its line and its cells
_OVERLONG = re.compile(r"row (\d+) \(line (\d+)\): (\d+) cells, expected (\d+)")


def refusal_outcome(data: bytes, error: str, command: str) -> tuple[str, str]:
    """("refused", the error) for a refusal that says what it should; else a failure kind: a
    file that is not UTF-8 refused without the hint to save it as UTF-8 ("no_utf8_hint"), a row
    with too many cells named by a line that does not hold that many ("wrong_line", checked on
    lines without quotes)."""
    if "read as utf-8" in error and "save it as 'CSV UTF-8'" not in error:
        return "no_utf8_hint", f"{command}: {error!r}"
    found = _OVERLONG.search(error)
    if found:
        text = unwrap("runs.csv", data)
        lines = split_lines(text.decode(detect_encoding(text), errors="replace"))
        line, cells = int(found.group(2)), int(found.group(3))
        header = next((t for t in lines if t.strip() and not t.lstrip().startswith("#")), "")
        sep = detect_separator(header)
        if line > len(lines):
            return "wrong_line", f"{command}: line {line} of {len(lines)}: {error!r}"
        if '"' not in lines[line - 1]:
            got = len(next(csv.reader([lines[line - 1]], delimiter=sep, skipinitialspace=True), []))
            if got != cells:
                return "wrong_line", f"{command}: line {line} holds {got} cells, not {cells}: {error!r}"
    return "refused", error


def save_case(folder: Path, case: dict, full: tuple[str, ...], kind: str, detail: str) -> Path:
    """Write a failing case to a new folder under ``folder``: ``runs.csv`` (the table's bytes, as
    the command read them) and ``case.json`` (the command, its argv with ``RUNS``/``OUT`` for the
    table and output folder, the commands run in full, the outcome, the data rows counted and the
    drawn case), so that :func:`replay` runs it again."""
    data, n_data = render(case)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"case-{len(list(folder.glob('case-*'))) + 1:04d}-{kind}-{case['command']}"
    target.mkdir()
    (target / "runs.csv").write_bytes(data)
    saved = {
        "command": case["command"],
        "argv": argv_of(case["command"], "RUNS", "OUT", tuple(case.get("extra_args", ()))),
        "full": list(full),
        "outcome": kind,
        "detail": detail,
        "n_data": n_data,
        "case": case,
    }
    (target / "case.json").write_text(json.dumps(saved, indent=2, ensure_ascii=True))
    return target


def replay(target: str | os.PathLike) -> tuple[str, str]:
    """The outcome now of a case :func:`save_case` wrote (a folder holding ``runs.csv`` and
    ``case.json``), e.g. from ``tests/``: ``python -c "from test_input_fuzz import replay; print(replay('DIR'))"``."""
    target = Path(target)
    saved = json.loads((target / "case.json").read_text())
    data = (target / "runs.csv").read_bytes()
    extra = tuple(saved["case"].get("extra_args", ()))
    return table_outcome(data, saved["n_data"], saved["command"], tuple(saved["full"]), extra)


def _check(case: dict, full: tuple[str, ...] = FULL) -> None:
    kind, detail = outcome(case, full)
    assert kind in ("ok", "refused"), f"{kind}: {detail}"


_SUITE = settings(
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failing case prints as drawn
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(_SUITE, max_examples=50)
@given(case=cases(commands=("fit",)))
def test_fuzz_fit(case):
    """phifit fit, run in full: exit 0 with every row accounted for, or exit 2 naming the file."""
    _check(case)


@settings(_SUITE, max_examples=15)
@given(case=cases(commands=("predict", "equiv", "plan")))
def test_fuzz_predict_equiv_plan(case):
    """predict --runs, equiv --runs and plan --pilot, run in full."""
    _check(case)


@settings(_SUITE, max_examples=135)
@given(case=cases())
def test_fuzz_reading_stage(case):
    """Every table-reading subcommand up to the table it reads (loader and reading options)."""
    _check(case, full=())


def test_unbalanced_quote_case():
    """The study's one failure in 10,000 (rows_lost, "compare: 1 runs + 0 skipped != 6 data
    rows"), made minimal: unquoted cells, a lone '"' in the last cell of the first row and of the
    last, so the quote swallowed the rows between into one note.  Now refused naming the row."""
    header, rows = TABLES["looped_study_runs_digitized.csv"]
    picked = [list(r) for r in rows[:2]]
    picked[0][-1] = picked[1][-1] = '"'
    case = {
        "source": "looped_study_runs_digitized.csv",
        "header": list(header),
        "lines": [("row", r) for r in picked],
        "sep": ",",
        "quoting": "none",
        "decimal_comma": False,
        "newline": "\n",
        "encoding": "utf-8",
    }
    for command in COMMANDS:
        kind, detail = outcome({**case, "command": command}, full=())
        assert kind == "refused" and "row 1 (lines 2-3), column 'note'" in detail, (command, kind, detail)


#: cases of the study (PHIFIT_FUZZ_CASES overrides, e.g. to run it in shards with --hypothesis-seed)
STUDY_CASES = int(os.environ.get("PHIFIT_FUZZ_CASES", "10000"))
#: one study case in this many runs fit, predict, equiv and plan in full; the rest stop after reading
STUDY_FULL_EVERY = 10


@pytest.mark.slow
def test_fuzz_study(tmp_path):
    """10,000 cases over every table-reading subcommand; counts every outcome and keeps going
    after a failure.  Writes the counts to fuzz_study.json in the test's directory (or
    ``PHIFIT_FUZZ_OUT``), and every failing case to a folder of its own under ``fuzz_failures``
    beside it (:func:`save_case`; :func:`replay` runs one again)."""
    counts: Counter = Counter()
    examples: dict[str, str] = {}
    out = os.environ.get("PHIFIT_FUZZ_OUT")  # a file for the running counts, if given
    failures_dir = (Path(out).resolve().parent if out else tmp_path) / "fuzz_failures"
    saved: list[str] = []

    @settings(
        max_examples=STUDY_CASES,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    @given(case=cases())
    def study(case):
        n = sum(v for k, v in counts.items() if k.startswith("command:"))
        full = FULL if n % STUDY_FULL_EVERY == 0 else ()
        kind, detail = outcome(case, full=full)
        counts[kind] += 1
        counts[f"command:{case['command']}"] += 1
        for name in sorted(set(case["mutations"])) or ["none"]:
            counts[f"class:{name}:{kind if kind in ('ok', 'refused') else 'failure'}"] += 1
        if kind not in ("ok", "refused"):
            examples.setdefault(kind, detail)
            saved.append(str(save_case(failures_dir, case, full, kind, detail)))
        if out and (n % 250 == 0 or kind not in ("ok", "refused")):
            Path(out).write_text(
                json.dumps({"cases": n + 1, **counts, "examples": examples, "saved": saved}, indent=2)
            )

    study()
    failures = {
        k: v
        for k, v in counts.items()
        if k not in ("ok", "refused") and not k.startswith(("command:", "class:"))
    }
    by_class: dict[str, dict[str, int]] = {}
    for key, v in counts.items():
        if key.startswith("class:"):
            name, kind = key.removeprefix("class:").rsplit(":", 1)
            by_class.setdefault(name, {"cases": 0, "ok": 0, "refused": 0, "failure": 0})
            by_class[name][kind] += v
            by_class[name]["cases"] += v
    summary = {
        "cases": counts["ok"] + counts["refused"] + sum(failures.values()),
        "ok": counts["ok"],
        "refused": counts["refused"],
        "failures": sum(failures.values()),
        "by_failure": failures,
        "tracebacks": failures.get("traceback", 0),
        "rows_lost": failures.get("rows_lost", 0),
        "by_command": {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("command:")},
        "by_mutation": dict(sorted(by_class.items())),
        "examples": examples,
        "saved": saved,
    }
    Path(out or tmp_path / "fuzz_study.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    assert summary["failures"] == 0, summary
