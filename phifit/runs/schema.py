"""The run table's columns and the error it raises: the schema every other module reads.

Canonical columns (``phifit.runs.table`` documents their meaning): ``r``, ``n_once``, ``n_rec``,
``tokens``, ``loss`` and the optional ones below; :class:`RunTableError` lists every problem of
an unusable table with its file, row and column; :func:`listed` bounds every list a message holds.
"""

from __future__ import annotations

REQUIRED = ("n_once", "tokens", "loss")
LOOP_COLUMNS = ("r", "n_rec")
OPTIONAL = ("run_id", "flops", "budget", "variant", "size", "seed")
CANONICAL = ("r", "n_once", "n_rec", "tokens", "loss") + OPTIONAL
#: Columns holding counts (parameters, tokens, FLOPs): K/M/B/T suffixes and thousands separators allowed.
COUNT_COLUMNS = ("n_once", "n_rec", "tokens", "flops")
#: Separators a run table may use (detected from the header line unless given).
SEPARATORS = {",": "comma", ";": "semicolon", "\t": "tab"}
#: A run the trainer finished in fewer optimiser steps than this is flagged (kind "short_runs"):
#: its loss reflects the warm-up more than the model (the trainer's own threshold).
MIN_STEPS = 20
MAX_LISTED = 5


def listed(items: list[str], limit: int = MAX_LISTED, sep: str = ", ") -> str:
    """The first ``limit`` items joined by ``sep``, then "and N more": a note or an error stays
    one short line however many rows it is about."""
    shown = sep.join(items[:limit])
    more = len(items) - limit
    return f"{shown}{sep}and {more} more" if more > 0 else shown


class RunTableError(ValueError):
    """A run table that cannot be used, with every problem found (file, row, column)."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = list(problems)
        shown = "; ".join(self.problems[:MAX_LISTED])
        more = len(self.problems) - MAX_LISTED
        suffix = f"; and {more} more problem(s)" if more > 0 else ""
        super().__init__(f"{source}: {shown}{suffix}")
