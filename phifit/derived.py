"""Re-exports, for scripts written before the split (README, users' notebooks).

The derived quantities live in modules named for their question:

- :mod:`phifit.equivalence`: what non-looped size a looped model is worth
  (N_eff = N_once + r^phi N_rec, unique and unrolled sizes, the study's 410M/580M/1B example);
- :mod:`phifit.frontier`: the law's compute-optimal frontier per r, architecture families,
  the law along isoFLOP curves;
- :mod:`phifit.isoflop`: per-cell parabola minima of the data (Chinchilla's approach 2) and
  a table's budgets;
- :mod:`phifit.draws`: percentile intervals of quantities over bootstrap draws.

The compute of a run is :attr:`phifit.runs.RunTable.compute`.
"""

from __future__ import annotations

from .draws import percentile_interval
from .equivalence import Equivalence, EquivalenceTable, equivalence, equivalence_table, paper_example
from .frontier import (
    Frontier,
    IsoflopCurves,
    PaperFamily,
    TableFamily,
    frontier,
    isoflop_curves,
    paper_budgets,
)
from .isoflop import ParabolaMinima, parabola_minima, table_budgets

__all__ = [
    "Equivalence",
    "equivalence",
    "paper_example",
    "EquivalenceTable",
    "equivalence_table",
    "PaperFamily",
    "TableFamily",
    "Frontier",
    "frontier",
    "IsoflopCurves",
    "isoflop_curves",
    "paper_budgets",
    "ParabolaMinima",
    "parabola_minima",
    "table_budgets",
    "percentile_interval",
]
