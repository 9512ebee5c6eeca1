"""Run tables: the only room that knows column names, aliases, units and what a design can identify.

A run CSV (or DataFrame) becomes a validated :class:`RunTable` through :func:`load_runs`, once;
everything downstream reads the table's canonical columns (``r``, ``n_once``, ``n_rec``, ``tokens``,
``loss`` and the optional ``run_id``, ``flops``, ``budget``, ``variant``, ``size``, ``seed``).

- :mod:`~phifit.runs.schema`: the canonical columns and :class:`RunTableError`;
- :mod:`~phifit.runs.reader`: a file to text cells with the file line of every row (CSV, TSV,
  compressed, Parquet and JSON lines through :mod:`~phifit.runs.formats`; comment, blank and
  record lines through :mod:`~phifit.runs.lines`);
- :mod:`~phifit.runs.text`: separators, counts such as ``200M``, column mappings and hints;
- :mod:`~phifit.runs.cells`: every cell checked (with :mod:`~phifit.runs.budget` and
  :mod:`~phifit.runs.plausibility` for the budget and the loss);
- :mod:`~phifit.runs.review`: the cautions about a valid table (duplicates, short runs, no budget);
- :mod:`~phifit.runs.select`: the ``where`` row filter's grammar and the loss/FLOP unit factors;
- :mod:`~phifit.runs.table`: :class:`RunTable`, :func:`load_runs`, :func:`load_design`, and
  :func:`as_runs`, the one conversion every entry point applies (a RunTable, or a DataFrame
  validated like a CSV).
"""

from __future__ import annotations

from .schema import CANONICAL, OPTIONAL, REQUIRED, RunTableError
from .table import FRAME_SOURCE, RunTable, as_runs, load_design, load_runs, table_from_frame

__all__ = [
    "CANONICAL",
    "FRAME_SOURCE",
    "OPTIONAL",
    "REQUIRED",
    "RunTable",
    "RunTableError",
    "as_runs",
    "load_design",
    "load_runs",
    "table_from_frame",
]
