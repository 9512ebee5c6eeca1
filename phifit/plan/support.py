"""What a pilot cannot see of the design it plans: the r values, budgets and sizes it lacks.

A plan simulates the design under the pilot's law and misfit. Where the design measures something the pilot
never saw, the law there is extrapolated, and the simulated widths inherit whatever shape the law imposes.
Two gaps make a predicted width meaningless, and the plan then declines it (``PlanResult.width_is_precision``
is false, with the reason):

- **the bend of r^phi** (``pilot_bend_unseen``): with one looped r (say r in {1, 4}), the pilot measures one
  multiplier m_4 = 4^phi, so any phi fits it exactly and nothing in the pilot says how the loss moves between
  r = 2, 4 and 8. A design with other looped r then measures a curvature the pilot could not; the plan's
  tables all follow r^phi exactly at the pilot's phi. Measured on real tables: the regime study's BPE pilot
  (r in {1, 4}) planned ``cpu_bpe`` at a width of 0.10 [0.07, 0.14] and the table gave 0.319; pilots of
  the study's r in {1, 4} (or {1, 2}) at its lowest budgets planned the whole table at 0.050–0.076, and it
  gave 0.102; pilots with two looped r held (docs/planning.md).
- **the budget direction** (``pilot_one_budget``): a pilot at one budget has every run on one isoFLOP curve,
  so the law's D-term and its curvature across budgets are not measured, and a design over several budgets
  is extrapolated from the law's form alone.

Two more gaps are cautions without a decline: **few cells** (``pilot_few_cells``: under
:data:`MIN_CELLS` (budget, r) cells, the spread of whole cells about the law, the misfit that widens real
intervals, is estimated from too few to be trusted and may read as none) and **extrapolation**
(``pilot_extrapolates``: design budgets or sizes beyond the pilot's range by more than
:data:`EXTRAPOLATION_FACTOR`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..cautions import Caution, caution

#: Under this many (budget, r) cells, a pilot's cell-level misfit is not estimable.
MIN_CELLS = 6
#: Design budgets or N_once + N_rec this many times beyond the pilot's range are an extrapolation.
EXTRAPOLATION_FACTOR = 2.0
#: Gaps whose caution makes the plan decline a width.
DECLINING = ("pilot_bend_unseen", "pilot_one_budget")


def _fmt(values: Sequence[float]) -> str:
    return ", ".join(f"{v:g}" for v in sorted(values))


def pilot_support(pilot: Any, design: pd.DataFrame) -> list[Caution]:
    """The gaps between a pilot run table and a planned design (module docstring), as cautions.

    ``pilot``: a :class:`~phifit.runs.table.RunTable`; ``design``: the planned runs (``r``, ``budget``,
    ``n_once``, ``n_rec``). Returns an empty list when the pilot covers what the design measures.
    """
    frame = pilot.frame
    source = getattr(pilot, "source", "the pilot")
    out: list[Caution] = []
    pilot_looped = {int(r) for r in frame["r"].unique() if r > 1}
    design_looped = {int(r) for r in design["r"].unique() if r > 1}
    unseen = design_looped - pilot_looped
    if len(pilot_looped) == 1 and unseen:
        (seen,) = pilot_looped
        out.append(
            caution(
                "plan",
                "pilot_bend_unseen",
                f"{source} has one looped r ({seen}), so it measures one multiplier m_{seen} and cannot show "
                f"how r^phi bends across the design's r = {_fmt(unseen)}: every simulated table follows "
                f"r^phi exactly at the pilot's phi, and real tables have been 2-3x wider than such plans; no "
                f"width predicted. Add a second looped r to the pilot (e.g. r = {_fmt(sorted(unseen)[:1])})",
                seen=seen,
                unseen=sorted(unseen),
            )
        )
    pilot_budgets = set(frame["budget"].dropna().unique()) if "budget" in frame else set()
    design_budgets = set(design["budget"].dropna().unique())
    if len(pilot_budgets) == 1 and design_budgets - pilot_budgets:
        out.append(
            caution(
                "plan",
                "pilot_one_budget",
                f"{source} has one budget ({_fmt(pilot_budgets)}): its runs lie on one isoFLOP curve, so how "
                f"the loss moves between the design's budgets {_fmt(design_budgets - pilot_budgets)} is the "
                "law's form, not a measurement; no width predicted. Add a second budget to the pilot",
                budgets=sorted(float(b) for b in pilot_budgets),
            )
        )
    n_cells = int(frame.groupby(["budget", "r"]).ngroups) if pilot_budgets else 0
    if 0 < n_cells < MIN_CELLS:
        out.append(
            caution(
                "plan",
                "pilot_few_cells",
                f"{source} has {n_cells} (budget, r) cells: the spread of whole cells about the law (the "
                "misfit that widens real intervals) is estimated from too few cells and may read as none; "
                "the simulated range is then a lower bound on the realised width",
                n_cells=n_cells,
            )
        )
    out += _extrapolation(source, frame, design, pilot_budgets)
    return out


def _extrapolation(source: str, frame: pd.DataFrame, design: pd.DataFrame, budgets: set) -> list[Caution]:
    """A caution when the design's budgets or sizes reach beyond the pilot's by more than the factor."""
    parts = []
    if budgets:
        lo, hi = min(budgets), max(budgets)
        d_lo, d_hi = float(design["budget"].min()), float(design["budget"].max())
        if d_hi > EXTRAPOLATION_FACTOR * hi or d_lo < lo / EXTRAPOLATION_FACTOR:
            parts.append(f"budgets {d_lo:.3g}-{d_hi:.3g} against the pilot's {lo:.3g}-{hi:.3g}")
    n_pilot = frame["n_once"] + frame["n_rec"]
    n_design = design["n_once"] + design["n_rec"]
    if (
        float(n_design.max()) > EXTRAPOLATION_FACTOR * float(n_pilot.max())
        or float(n_design.min()) < float(n_pilot.min()) / EXTRAPOLATION_FACTOR
    ):
        parts.append(
            f"N_once + N_rec {float(n_design.min()):.3g}-{float(n_design.max()):.3g} against the pilot's "
            f"{float(n_pilot.min()):.3g}-{float(n_pilot.max()):.3g}"
        )
    if not parts:
        return []
    return [
        caution(
            "plan",
            "pilot_extrapolates",
            f"the design reaches beyond {source} ({'; '.join(parts)}): the law and its misfit there are "
            "extrapolated from the pilot",
        )
    ]


def declined_reasons(warnings: Sequence[Caution]) -> list[str]:
    """The messages of the cautions that make a plan decline its width (:data:`DECLINING`)."""
    return [w.message for w in warnings if w.kind in DECLINING]
