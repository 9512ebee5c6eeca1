"""Run tables: the only room that knows column names, aliases, units and what a design can identify.

A run CSV (or DataFrame) becomes a validated :class:`RunTable` through :func:`load_runs`, once;
everything downstream reads the table's canonical columns (``r``, ``n_once``, ``n_rec``, ``tokens``,
``loss`` and the optional ``run_id``, ``flops``, ``budget``, ``variant``, ``size``, ``seed``).

- :mod:`~phifit.runs.schema`: the canonical columns and :class:`RunTableError`;
- :mod:`~phifit.runs.text`: reading text tables (separators, counts such as ``200M``, column hints);
- :mod:`~phifit.runs.table`: :class:`RunTable`, :func:`load_runs`, :func:`load_design`.
"""

from __future__ import annotations

from .schema import CANONICAL, OPTIONAL, REQUIRED, RunTableError
from .table import RunTable, load_design, load_runs, table_from_frame

__all__ = ["CANONICAL", "OPTIONAL", "REQUIRED", "RunTable", "RunTableError", "load_design", "load_runs",
           "table_from_frame"]
