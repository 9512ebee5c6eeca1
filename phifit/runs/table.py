"""Run tables: load a CSV of finished training runs and validate it, once.

:class:`RunTable` and the one validation every row goes through (:func:`table_from_frame`);
the column names are in :mod:`phifit.runs.schema`, reading a file in :mod:`phifit.runs.reader`,
the checks of every cell in :mod:`phifit.runs.cells`, the cautions about a valid table in
:mod:`phifit.runs.review`.

One row per finished run.  Canonical columns:

========  ==========================================================  ========
column    meaning                                                     required
========  ==========================================================  ========
r         recurrences of the shared block (integer >= 1; 1 = plain)   looped
n_once    parameters applied once per token                           yes
n_rec     parameters of the shared block, applied r times             looped
tokens    training tokens D                                           yes
loss      validation loss, nats per token                             yes
run_id    unique run name                                             no
flops     training FLOPs of the run                                   no
budget    FLOP-budget label (one isoFLOP curve)                       no
variant   training recipe                                             no
size      width / size label                                          no
seed      training seed                                               no
========  ==========================================================  ========

A table without ``r`` and ``n_rec`` is a non-looped table: every run has r = 1,
N_rec = 0 and the law reduces to Chinchilla's E + A N^-alpha + B D^-beta with
N = ``n_once``.  Other column names map onto these through ``columns``
(``{"r": "num_recur", "loss": "val_loss"}``).  Any other column is kept.

This is the only module that knows column names.  Every problem is reported
with the file, the row (1-based data row and the line in the file) and the
column, and nothing is dropped silently.

Input conveniences (each stated, none silent):

- the separator is detected from the header line (``,``, ``;`` as in Excel exports
  with a decimal comma, or a tab as in TSV), or given (``sep``);
- count columns (``n_once``, ``n_rec``, ``tokens``, ``flops``) accept K/M/B/T suffixes
  (``200M``, ``20B``, as ``phifit equiv`` does on the command line) and thousands
  separators (``1,000,000`` quoted in a CSV, ``1_000_000``); ``loss`` and ``r`` accept
  a decimal comma (``2,85``) in a ``;`` or tab separated file;
- a table without ``r``/``n_rec`` but with columns that look like them (a loop-count
  name such as ``num_loops`` with integer values >= 1) is refused with the
  ``--columns`` to use, unless ``non_looped=True`` says it is non-looped on purpose;
- ``where`` keeps the rows an expression selects (:mod:`phifit.runs.select`), reported
  as a note with the rows kept and dropped; ``loss``/``loss_unit``/``bytes_per_token``
  convert a loss in bits (per token or per byte) to nats per token, ``flops_unit`` a
  ``flops``/``budget`` column in GFLOP, TFLOP or PFLOP to FLOPs;
- trackers' exports: ``skip_rows`` preamble lines are skipped; ``#`` comment lines (before
  the header, or without a separator after it) and blank lines are skipped with a note;
  all-empty rows, blank ``n_rec`` on r = 1 rows (read as 0), blank ``variant`` cells (the
  baseline) and a decimal-comma ``budget`` are read, each with a note;
- gzip, bzip2, xz and zip files, Parquet and JSON lines are read like the CSV
  (:mod:`phifit.runs.formats`).

Refused besides bad cells: a ``budget`` column that mixes numbers and text, a loss above 20
nats per token, a loss column whose name says bits while no unit was declared
(:mod:`phifit.runs.plausibility`).

Things that load but deserve a look are :class:`~phifit.cautions.Caution` records
(source "runs") in :attr:`RunTable.warnings`: exact duplicate runs (kind
"duplicate_rows"), runs the trainer finished in fewer than :data:`MIN_STEPS` optimiser
steps ("short_runs", from a ``steps``/``iterations`` column or the trainer's ``notes``),
no ``budget`` column ("no_budget": the bootstrap then resamples single runs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..cautions import Caution, caution
from ..law import Design
from .budget import numbers_or_nan
from .cells import (  # noqa: F401 (R_MAX re-exported for users of phifit.runs.table)
    R_MAX,
    Cells,
    cell_text,
    checked_budget,
    checked_values,
    hash_rows_hint,
    plausible_losses,
)
from .plausibility import loss_unit_problem, per_byte_caution_text
from .reader import read_raw
from .review import table_cautions
from .schema import (  # noqa: F401 (the schema's names, re-exported for users of phifit.runs.table)
    CANONICAL,
    COUNT_COLUMNS,
    LOOP_COLUMNS,
    MAX_LISTED,
    MIN_STEPS,
    OPTIONAL,
    REQUIRED,
    SEPARATORS,
    RunTableError,
    listed,
)
from .select import WHERE, flops_scale, loss_scale, where_mask
from .text import (  # noqa: F401 (parse_* re-exported for the command line)
    DECIMAL_COMMA_PATTERN,
    THOUSANDS_PATTERN,
    as_numbers,
    budget_hint,
    detect_separator,
    looped_hint,
    parse_column_mapping,
    parse_count,
    parse_separator,
)

#: Reserved block name: every run is its own block.
SINGLE_RUNS = "run"


@dataclass(frozen=True)
class RunTable:
    """A validated table of runs.

    ``frame`` holds the canonical columns (``r``, ``n_once``, ``n_rec``, ``tokens``,
    ``loss`` always present, as numbers) plus every other column of the file.
    ``looped`` is False for a table that had no ``r``/``n_rec`` columns.
    ``warnings`` are :class:`~phifit.cautions.Caution` records (source "runs") about a
    table that loads but deserves a look (duplicate runs, short runs, no budget column).
    """

    frame: pd.DataFrame
    source: str = "<table>"
    looped: bool = True
    warnings: list[Caution] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.frame)

    def __repr__(self) -> str:
        r = sorted({float(x) for x in self.frame["r"]}) if "r" in self.frame else []
        shown = ", ".join(f"{x:g}" for x in r[:8]) + (", ..." if len(r) > 8 else "")
        source = self.source if len(self.source) <= 60 else "..." + self.source[-57:]
        return (
            f"RunTable({len(self)} runs, r=[{shown}], {self.n_token_counts} token counts, "
            f"source={source!r}, n_warnings={len(self.warnings)})"
        )

    def _repr_html_(self) -> str:
        """The runs as an escaped HTML table (the first and last 10 rows of a longer table)."""
        import html

        frame = self.frame if len(self) <= 20 else pd.concat([self.frame.head(10), self.frame.tail(10)])
        head = f"<p><strong>{html.escape(repr(self))}</strong></p>"
        return head + frame.to_html(escape=True, na_rep="", float_format=lambda x: f"{x:.6g}")

    @property
    def r(self) -> np.ndarray:
        return self.frame["r"].to_numpy(dtype=float)

    @property
    def n_once(self) -> np.ndarray:
        return self.frame["n_once"].to_numpy(dtype=float)

    @property
    def n_rec(self) -> np.ndarray:
        return self.frame["n_rec"].to_numpy(dtype=float)

    @property
    def tokens(self) -> np.ndarray:
        return self.frame["tokens"].to_numpy(dtype=float)

    @property
    def loss(self) -> np.ndarray:
        return self.frame["loss"].to_numpy(dtype=float)

    @property
    def run_ids(self) -> list[str]:
        """Run names: the ``run_id`` column, else ``row<k>`` (1-based)."""
        if "run_id" in self.frame:
            return [str(v) for v in self.frame["run_id"]]
        return [f"row{i + 1}" for i in range(len(self))]

    @property
    def design(self) -> Design:
        """Log-space covariates for the law."""
        return Design.from_arrays(self.r, self.n_once, self.n_rec, self.tokens)

    @property
    def log_loss(self) -> np.ndarray:
        return np.log(self.loss)

    @property
    def phi_identifiable(self) -> bool:
        """True when some runs are looped (r > 1, N_rec > 0) and r takes >= 2 values."""
        looped = (self.r > 1) & (self.n_rec > 0)
        return bool(looped.any()) and len(np.unique(self.r)) >= 2

    @property
    def n_token_counts(self) -> int:
        """Distinct token counts D among the runs.

        Identifiability rule: with a single D the data term B D^-beta is one constant over
        the table, so B, beta and E are not separately identified; only E + B D^-beta is.
        """
        return len(np.unique(self.tokens))

    @property
    def d_term_identifiable(self) -> bool:
        """True when the runs have at least two distinct token counts (:attr:`n_token_counts`)."""
        return self.n_token_counts >= 2

    # -- the schema's derived quantities ----------------------------------------------------

    @property
    def has_flops(self) -> bool:
        """True when the table records each run's training FLOPs (a ``flops`` column)."""
        return "flops" in self.frame

    @property
    def flops_per_token(self) -> np.ndarray:
        """Training FLOPs per token F: ``flops / tokens`` when recorded, else the estimate
        F = 6 (N_once + r N_rec) (forward + backward matmuls of the executed parameters; it
        leaves out attention and the embeddings, so it underestimates small models)."""
        if self.has_flops:
            return self.frame["flops"].to_numpy(dtype=float) / self.tokens
        return 6.0 * (self.n_once + self.r * self.n_rec)

    @property
    def compute(self) -> np.ndarray:
        """Training compute of each run, C = F D in FLOPs (see :attr:`flops_per_token`)."""
        if self.has_flops:
            return self.frame["flops"].to_numpy(dtype=float)
        return self.flops_per_token * self.tokens

    @property
    def compute_source(self) -> str:
        """Where :attr:`compute` comes from, in words."""
        return "the flops column" if self.has_flops else "the estimate 6 (N_once + r N_rec) D"

    @property
    def budget(self) -> np.ndarray | None:
        """The isoFLOP curve label of each run (the ``budget`` column), or None."""
        return self.frame["budget"].to_numpy() if "budget" in self.frame else None

    def cells(self, block: str | Sequence[str] | None = None) -> tuple[np.ndarray, str]:
        """Integer block code per run (0 .. G-1) and the block label, for resampling.

        ``block=None``: (budget, r) cells when a ``budget`` column exists (the study's
        bootstrap blocks), else single runs.  ``block="run"``: single runs.  Otherwise one
        or more column names (a list, or a comma-separated string such as ``"budget,r"``).
        """
        if block is None:
            cols = ["budget", "r"] if "budget" in self.frame.columns else [SINGLE_RUNS]
        elif isinstance(block, str):
            cols = [c.strip() for c in block.split(",") if c.strip()]
        else:
            cols = [str(c).strip() for c in block]
        if not cols:
            raise ValueError("block: give at least one column name (or 'run' for single runs)")
        if cols == [SINGLE_RUNS]:
            return np.arange(len(self)), SINGLE_RUNS
        if SINGLE_RUNS in cols:
            raise ValueError(f"block: {SINGLE_RUNS!r} (single runs) cannot be combined with columns")
        missing = [c for c in cols if c not in self.frame.columns]
        if missing:
            raise ValueError(
                f"block: no column(s) {', '.join(map(repr, missing))} in the run table; "
                f"columns: {', '.join(map(str, self.frame.columns))}"
            )
        frame = self.frame[cols].astype(str) if len(cols) > 1 else self.frame[cols[0]].astype(str)
        codes = (frame.agg("\x1f".join, axis=1) if len(cols) > 1 else frame).to_numpy()
        _, inverse = np.unique(codes, return_inverse=True)
        return inverse.astype(int), ",".join(cols)

    def subset(self, mask) -> RunTable:
        """The runs selected by a boolean mask or integer positions (order kept)."""
        frame = self.frame.iloc[np.flatnonzero(mask) if np.asarray(mask).dtype == bool else np.asarray(mask)]
        return RunTable(
            frame.reset_index(drop=True), source=self.source, looped=self.looped, warnings=list(self.warnings)
        )

    def groups(self, column: str) -> dict[object, RunTable]:
        """Split into sub-tables by the values of ``column``, in sorted order."""
        if column not in self.frame:
            raise RunTableError(
                self.source,
                [f"no column {column!r} to group by; columns: {', '.join(map(str, self.frame.columns))}"],
            )
        keys = self.frame[column]
        return {k: self.subset((keys == k).to_numpy()) for k in sorted(keys.unique(), key=str)}


#: the source name of a run table validated from a DataFrame given in code
FRAME_SOURCE = "<DataFrame>"


def as_runs(runs: RunTable | pd.DataFrame, *, source: str = FRAME_SOURCE) -> RunTable:
    """The run table every entry point works on: a :class:`RunTable` as given, a DataFrame
    validated exactly like a run CSV (:func:`table_from_frame`; problems name ``source``).

    Raises ``TypeError`` for anything else, ``RunTableError`` for an invalid frame.
    """
    if isinstance(runs, RunTable):
        return runs
    if isinstance(runs, pd.DataFrame):
        return table_from_frame(runs, source=source)
    raise TypeError(f"expected a RunTable or a pandas DataFrame of runs, got {type(runs).__name__}")


def load_runs(
    path: str | os.PathLike | pd.DataFrame,
    *,
    columns: Mapping[str, str] | None = None,
    sep: str | None = None,
    non_looped: bool = False,
    where: str | None = None,
    loss: str | None = None,
    loss_unit: str | None = None,
    bytes_per_token: float | None = None,
    flops_unit: str = "FLOP",
    skip_rows: int = 0,
) -> RunTable:
    """Load and validate a run CSV, or a DataFrame of runs.

    Parameters
    ----------
    path
        CSV file, one row per finished run (or the same compressed with gzip, bzip2, xz or zip,
        a Parquet file, JSON lines: :mod:`phifit.runs.reader`); or a DataFrame with the same
        columns, validated exactly like the file (problems name the frame as ``<DataFrame>``).
    columns
        Optional mapping canonical name -> column name in the file.
    sep
        Field separator (``","``, ``";"``, ``"\\t"``); None detects it from the header line.
    non_looped
        The table is non-looped on purpose: do not refuse it when it has no ``r``/``n_rec``
        but columns that look like them.
    where
        Keep only the rows this expression selects (:mod:`phifit.runs.select` grammar,
        e.g. ``"variant==baseline and tokens>=1e9"``); the rows kept and dropped are a
        "rows_selected" note in :attr:`RunTable.warnings`.
    loss
        The column holding the loss (the same as ``columns={"loss": loss}``).
    loss_unit
        ``"nats"`` (per token) or ``"bits"``: bits are converted, L_nats = L_bits ln 2.  None
        (the default) reads nats, but refuses a loss column whose name says bits (``val_bpb``):
        say ``"bits"``, or ``"nats"`` if it holds nats (:mod:`phifit.runs.plausibility`).
    bytes_per_token
        With ``loss_unit="bits"``: the loss is bits per byte, and
        L_nats/token = L_bits/byte x ln 2 x ``bytes_per_token``.
    flops_unit
        Unit of the ``flops`` and (numeric) ``budget`` columns: ``FLOP``, ``GFLOP``,
        ``TFLOP`` or ``PFLOP``; converted to FLOPs.
    skip_rows
        Lines of a preamble to skip before the header (``#`` comment lines before the header,
        and those without a separator after it, are always skipped, with a note).

    Raises
    ------
    RunTableError
        (a ``ValueError``) listing every problem with file, row and column.
    """
    options = dict(
        columns=columns,
        non_looped=non_looped,
        where=where,
        loss=loss,
        loss_unit=loss_unit,
        bytes_per_token=bytes_per_token,
        flops_unit=flops_unit,
    )
    if isinstance(path, pd.DataFrame):
        if sep is not None or skip_rows:
            raise ValueError("sep and skip_rows apply to a CSV file, not to a DataFrame")
        return table_from_frame(path, source=FRAME_SOURCE, **options)
    source = os.fspath(path)
    raw = read_raw(
        source, sep, "expected a CSV header with columns r, n_once, n_rec, tokens, loss", skip_rows=skip_rows
    )
    return table_from_frame(
        raw.frame,
        source=source,
        decimal_comma=raw.sep not in (",", None),
        line_numbers=raw.lines,
        read_notes=raw.notes,
        file_format=raw.file_format,
        **options,
    )


def table_from_frame(
    raw: pd.DataFrame,
    *,
    source: str = "<table>",
    columns: Mapping[str, str] | None = None,
    decimal_comma: bool = False,
    non_looped: bool = True,
    line_numbers: np.ndarray | None = None,
    where: str | None = None,
    loss: str | None = None,
    loss_unit: str | None = None,
    bytes_per_token: float | None = None,
    flops_unit: str = "FLOP",
    read_notes: Sequence[Caution] = (),
    file_format: str = "csv",
) -> RunTable:
    """Validate a frame of raw values (strings or numbers) into a :class:`RunTable`.

    ``decimal_comma``: accept ``2,85`` in ``loss`` and ``r`` (a ``;`` or tab separated
    file).  ``non_looped=False`` refuses a table without ``r``/``n_rec`` that has columns
    looking like them (:func:`load_runs` passes the user's choice; frames built in code
    default to accepting it).  ``line_numbers``: the file line of each row (messages name
    it; 0: a row without a line, as in a Parquet file).  ``where``, ``loss``, ``loss_unit``,
    ``bytes_per_token``, ``flops_unit``: as in :func:`load_runs`.  ``read_notes``: what
    reading the file skipped (comment and blank lines), first among the table's cautions;
    ``file_format``: "csv" (quoted cells over lines are named in a warning), "jsonl" or
    "parquet" (:class:`~phifit.runs.reader.RawTable`).

    Tracker quirks, each a "note" caution in :attr:`RunTable.warnings`: rows whose cells are
    all empty are skipped; a blank ``n_rec`` on an r = 1 row is read as 0; blank
    ``variant`` cells are the baseline recipe (``"baseline"``).

    The steps, in order: the header (:func:`_mapped_columns`), the rows kept
    (:func:`_skip_empty_rows`, :func:`_select_rows`), the columns present
    (:func:`_check_columns`), blank cells with a meaning (:func:`_fill_blank_cells`), every
    cell's value (:mod:`phifit.runs.cells`: :func:`~phifit.runs.cells.checked_values`, the budget
    column, the losses' magnitude; all problems raised together), then the canonical frame
    in the canonical units (:func:`_canonical_frame`)."""
    columns = dict(columns or {})
    scale_loss = loss_scale(loss_unit or "nats", bytes_per_token)
    scale_flops = flops_scale(flops_unit)
    if loss is not None:
        if columns.get("loss", loss) != loss:
            raise ValueError(f"loss={loss!r} and columns loss={columns['loss']!r} disagree: give one")
        if loss != "loss":
            columns["loss"] = loss
    notes: list[Caution] = list(read_notes)
    name = os.path.basename(source)
    unit_problem = loss_unit_problem(columns.get("loss"), loss_unit)
    if unit_problem:
        raise RunTableError(source, [unit_problem])
    raw = _mapped_columns(raw, columns, source)
    rows = np.arange(1, len(raw) + 1)
    lines = np.asarray(line_numbers, int) if line_numbers is not None else rows + 1
    if line_numbers is not None and file_format == "csv":
        _multiline_cells(raw, rows, lines, name, notes)
    raw, rows, lines = _skip_empty_rows(raw, rows, lines, name, notes)
    if where is not None:
        raw, rows, lines = _select_rows(raw, rows, lines, where, source, name, notes)
    has_r, has_rec = "r" in raw.columns, "n_rec" in raw.columns
    _check_columns(raw, source, looped=has_r or has_rec, non_looped=non_looped, where=where)
    raw = _fill_blank_cells(raw, rows, name, notes, has_r=has_r, has_rec=has_rec)
    cells = Cells(raw, rows, lines, decimal_comma)
    values = checked_values(cells, has_r=has_r, has_rec=has_rec)
    plausible_losses(cells, values["loss"] * scale_loss, columns.get("loss", "loss"))
    budget = checked_budget(cells)
    if cells.problems:
        raise RunTableError(source, cells.problems + hash_rows_hint(cells))
    per_byte = per_byte_caution_text(columns.get("loss"), loss_unit, bytes_per_token)
    if per_byte:
        notes.append(caution("runs", "loss_unit_name", f"{name}: {per_byte}", column=columns.get("loss")))
    frame = _canonical_frame(
        raw,
        values,
        name,
        notes,
        scale_loss=scale_loss,
        loss_unit=loss_unit,
        bytes_per_token=bytes_per_token,
        scale_flops=scale_flops,
        flops_unit=flops_unit,
        budget=budget,
    )
    warnings = notes + table_cautions(frame, source, budget_hint(raw))
    return RunTable(frame, source=source, looped=has_r or has_rec, warnings=warnings)


# -- the steps of table_from_frame ------------------------------------------------------------


def _mapped_columns(raw: pd.DataFrame, columns: dict[str, str], source: str) -> pd.DataFrame:
    """A copy of ``raw`` with stripped header names and the user's columns renamed to the
    canonical ones; a name given twice, a mapped column that is missing, a mapping onto an
    existing canonical column or one column mapped twice raises (every problem at once)."""
    raw = raw.copy()
    raw.columns = [str(c).strip() for c in raw.columns]
    dupes = sorted({c for c in raw.columns if list(raw.columns).count(c) > 1})
    if dupes:
        raise RunTableError(source, [f"duplicate column name(s) {', '.join(map(repr, dupes))}"])
    problems: list[str] = []
    for canon, src in columns.items():
        if src not in raw.columns:
            problems.append(
                f"mapped column {src!r} (for {canon!r}) not found; columns: {', '.join(raw.columns)}"
            )
        elif canon in raw.columns and canon != src:
            problems.append(f"column {canon!r} exists and {src!r} is also mapped onto it")
    for src in sorted({src for src in columns.values() if list(columns.values()).count(src) > 1}):
        both = [canon for canon, s in columns.items() if s == src]
        problems.append(f"column {src!r} is mapped onto {' and '.join(map(repr, both))}: map it once")
    if problems:
        raise RunTableError(source, problems)
    return raw.rename(columns={src: canon for canon, src in columns.items()})


def _multiline_cells(
    raw: pd.DataFrame, rows: np.ndarray, lines: np.ndarray, name: str, notes: list[Caution]
) -> None:
    """A "multiline_cells" warning in ``notes`` naming each quoted cell of a file that runs over
    lines (its row, first line and column; ``extra_lines``: the lines they hold beyond their
    rows' first), so that lines read into a cell are never lost unseen: an unbalanced ``"``
    makes the rows below it part of a cell (rows with the separator in them are refused by
    :func:`~phifit.runs.reader.read_raw`)."""
    found = []
    for col in raw.columns:
        breaks = raw[col].map(lambda v: v.count("\n") if isinstance(v, str) else 0).to_numpy()
        found += [(int(i), col, int(breaks[i])) for i in np.flatnonzero(breaks)]
    if not found:
        return
    found.sort(key=lambda f: f[0])
    shown = [f"row {rows[i]} (line {lines[i]}), column {col!r}: {n + 1} lines" for i, col, n in found]
    notes.append(
        caution(
            "runs",
            "multiline_cells",
            f"{name}: {len(found)} quoted cell(s) run over several lines, each read as one cell "
            f"({'; '.join(shown[:MAX_LISTED])}{'; ...' if len(found) > MAX_LISTED else ''}); check that "
            "no '\"' is unbalanced: the lines below one are read into its cell",
            rows=[int(rows[i]) for i, _, _ in found],
            columns=[str(col) for _, col, _ in found],
            extra_lines=sum(n for _, _, n in found),
        )
    )


def _skip_empty_rows(
    raw: pd.DataFrame, rows: np.ndarray, lines: np.ndarray, name: str, notes: list[Caution]
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """``raw``, its row and line numbers without the rows whose cells are all empty (an
    "empty_rows" note in ``notes`` lists them)."""
    empty = np.ones(len(raw), bool)
    for col in raw.columns:
        empty &= (cell_text(raw, col) == "").to_numpy()
    if not (empty.any() and len(raw.columns)):
        return raw, rows, lines
    dropped = rows[empty].tolist()
    notes.append(
        caution(
            "runs",
            "empty_rows",
            f"{name}: skipped {len(dropped)} row(s) with every cell empty (row(s) "
            f"{', '.join(map(str, dropped[:MAX_LISTED]))}{', ...' if len(dropped) > MAX_LISTED else ''})",
            level="note",
            rows=dropped,
        )
    )
    return raw[~empty].reset_index(drop=True), rows[~empty], lines[~empty]


def _select_rows(
    raw: pd.DataFrame,
    rows: np.ndarray,
    lines: np.ndarray,
    where: str,
    source: str,
    name: str,
    notes: list[Caution],
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """``raw``, its row and line numbers restricted to the rows ``where`` selects (a
    "rows_selected" note in ``notes`` counts the rows kept and dropped)."""
    keep = where_mask(raw, where, source, rows)
    n_drop = int((~keep).sum())
    notes.append(
        caution(
            "runs",
            "rows_selected",
            f"{name}: {WHERE} {where!r} kept {int(keep.sum())} of {len(keep)} rows (dropped {n_drop})",
            level="note",
            kept=int(keep.sum()),
            dropped=n_drop,
            dropped_rows=rows[~keep].tolist(),
        )
    )
    return raw[keep].reset_index(drop=True), rows[keep], lines[keep]


def _check_columns(
    raw: pd.DataFrame, source: str, *, looped: bool, non_looped: bool, where: str | None
) -> None:
    """Raise when the table cannot be read as runs: no ``r``/``n_rec`` but columns that look
    like them (unless ``non_looped``), a required column missing, or no rows left."""
    if not looped and not non_looped:
        hint = looped_hint(raw)
        if hint is not None:
            r_col, rec_col = hint
            mapping = f"r={r_col},n_rec={rec_col or 'SHARED_PARAMS_COLUMN'}"
            raise RunTableError(
                source,
                [
                    f"no 'r'/'n_rec' columns, but column {r_col!r} looks like the loop count"
                    + (f" and {rec_col!r} like the shared block's parameters" if rec_col else "")
                    + f"; map them with columns= (--columns {mapping}), or pass non_looped=True "
                    "(--non-looped) to fit a non-looped law on purpose"
                ],
            )
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise RunTableError(
            source,
            [
                f"missing required column(s) {', '.join(map(repr, missing))}; found: "
                f"{', '.join(map(repr, raw.columns)) or 'none'} (map names with "
                f"columns={{canonical: yours}}, --columns canonical=yours)"
            ],
        )
    if len(raw) == 0:
        if where is not None:
            raise RunTableError(source, [f"{WHERE} {where!r} selects no rows"])
        raise RunTableError(source, ["no rows: the file has a header but no runs"])


def _fill_blank_cells(
    raw: pd.DataFrame, rows: np.ndarray, name: str, notes: list[Caution], *, has_r: bool, has_rec: bool
) -> pd.DataFrame:
    """``raw`` with the blanks trackers leave filled in, each fill a note in ``notes``: a blank
    ``n_rec`` on an r = 1 row is 0, a blank ``variant`` is the baseline recipe."""
    if has_r and has_rec:  # trackers leave n_rec blank on the plain (r = 1) runs
        r_text, rec_text = cell_text(raw, "r"), cell_text(raw, "n_rec")
        blank = ((rec_text == "") & r_text.isin(["1", "1.0"])).to_numpy()
        if blank.any():
            raw["n_rec"] = raw["n_rec"].where(~blank, "0")
            notes.append(
                caution(
                    "runs",
                    "blank_n_rec",
                    f"{name}: {int(blank.sum())} r = 1 row(s) with a blank n_rec read as n_rec = 0 "
                    f"(row(s) {', '.join(map(str, rows[blank][:MAX_LISTED]))})",
                    level="note",
                    rows=rows[blank].tolist(),
                )
            )
    if "variant" in raw.columns:
        blank = (cell_text(raw, "variant") == "").to_numpy()
        if blank.any():
            raw["variant"] = raw["variant"].where(~blank, "baseline")
            notes.append(
                caution(
                    "runs",
                    "blank_variant",
                    f"{name}: {int(blank.sum())} row(s) with a blank variant read as the baseline "
                    f"recipe 'baseline' (row(s) {', '.join(map(str, rows[blank][:MAX_LISTED]))})",
                    level="note",
                    rows=rows[blank].tolist(),
                )
            )
    return raw


def _canonical_frame(
    raw: pd.DataFrame,
    values: dict[str, np.ndarray],
    name: str,
    notes: list[Caution],
    *,
    scale_loss: float,
    loss_unit: str,
    bytes_per_token: float | None,
    scale_flops: float,
    flops_unit: str,
    budget: pd.Series | None,
) -> pd.DataFrame:
    """The validated frame: ``raw`` with the checked numbers, the loss in nats per token and
    FLOPs in FLOP (each conversion a note in ``notes``), ``budget`` the numbers
    :func:`~phifit.runs.cells.checked_budget` read (None: labels, kept as text), a numeric
    ``seed`` where every cell is a number, and the canonical columns first."""
    frame = raw.copy()
    if scale_loss != 1.0:
        values["loss"] = values["loss"] * scale_loss
        per = "byte" if bytes_per_token is not None else "token"
        notes.append(
            caution(
                "runs",
                "loss_unit",
                f"{name}: loss read in bits per {per} and converted to nats per token (x {scale_loss:.6g})",
                level="note",
                loss_unit=loss_unit,
                bytes_per_token=bytes_per_token,
                factor=scale_loss,
            )
        )
    if "flops" in values and scale_flops != 1.0:
        values["flops"] = values["flops"] * scale_flops
    for col, arr in values.items():
        frame[col] = arr
    frame["r"] = frame["r"].astype(int)
    if budget is not None:
        frame["budget"] = budget * scale_flops if scale_flops != 1.0 else budget
    if "seed" in frame.columns:
        numeric = pd.to_numeric(frame["seed"], errors="coerce")
        if not numeric.notna().all():  # decimal commas and counts (1.2B)
            numeric = pd.Series(numbers_or_nan(frame["seed"]), index=frame.index)
        if numeric.notna().all():
            frame["seed"] = numeric
    if scale_flops != 1.0 and ("flops" in values or "budget" in frame.columns):
        notes.append(
            caution(
                "runs",
                "flops_unit",
                f"{name}: flops/budget read in {flops_unit} and converted to FLOPs (x {scale_flops:g})",
                level="note",
                flops_unit=flops_unit,
            )
        )
    ordered = [c for c in CANONICAL if c in frame.columns]
    return frame[ordered + [c for c in frame.columns if c not in ordered]].reset_index(drop=True)


def load_design(
    path: str | os.PathLike, *, columns: Mapping[str, str] | None = None, sep: str | None = None
) -> RunTable:
    """Load a design (r, n_once, n_rec, tokens; ``loss`` optional) for simulation.

    Validated like a run table; when the file has no ``loss`` column the returned
    table carries a placeholder loss of 1.0 that the caller replaces.
    """
    source = os.fspath(path)
    if not os.path.isfile(source):
        raise RunTableError(source, ["file not found"])
    raw = read_raw(source, sep, "expected columns r, n_once, n_rec, tokens")
    frame, mapped = raw.frame, dict(columns or {})
    if "loss" not in frame.columns and "loss" not in mapped:
        frame["loss"] = "1.0"
    return table_from_frame(
        frame,
        source=source,
        columns=mapped,
        decimal_comma=raw.sep not in (",", None),
        line_numbers=raw.lines,
        read_notes=raw.notes,
        file_format=raw.file_format,
    )
