"""Per-cell parabola minima of the isoFLOP curves (Chinchilla's approach 2), and a table's budgets.

In each (budget, r) cell, fit L = c0 + c1 x + c2 x^2 with x = log N_unique; the minimum is

    N* = exp(-c1 / (2 c2)),   L* = c0 - c1^2 / (4 c2).

The gap is L*_r - L*_1 per budget (the study: 0.03-0.06, 0.05-0.08, 0.09-0.12 nats).  This
estimate comes from the data alone, not from the law.  Cells left out (too few sizes, not
convex, minimum outside the sizes trained) are :class:`~phifit.cautions.Caution` notes,
source "isoflop".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .cautions import Caution, caution
from .runs.table import RunTable, as_runs
from .serialize import JsonIO, to_plain

__all__ = ["ParabolaMinima", "parabola_minima", "table_budgets"]


@dataclass(frozen=True)
class ParabolaMinima(JsonIO):
    """Per-(budget, r) parabola minima of loss vs log N_unique (Chinchilla approach 2).

    ``cells``: {budget, r, n, n_star, l_star, curvature, in_range, ok}; ``gap[r]``:
    per budget {budget, gap} for budgets where both r and the base r have a valid
    (convex, in-range) minimum; ``warnings``: the cells left out and why, as
    :class:`~phifit.cautions.Caution` notes (source "isoflop").
    """

    cells: list[dict[str, Any]]
    base_r: int
    gap: dict[int, list[dict[str, float]]]
    warnings: list[Caution]

    @property
    def gap_range(self) -> dict[int, list[float]]:
        return {r: [min(x["gap"] for x in g), max(x["gap"] for x in g)] for r, g in self.gap.items() if g}

    def to_frame(self) -> pd.DataFrame:
        """One row per (budget, r) cell: ``budget``, ``r``, ``n`` (runs), ``n_star``, ``l_star``,
        ``curvature``, ``in_range``, ``ok`` (a valid minimum) and ``gap`` to the base r on that
        budget (NaN where not computed)."""
        gaps = {(g["budget"], r): g["gap"] for r, items in self.gap.items() for g in items}
        rows = [{**c, "gap": gaps.get((c["budget"], c["r"]), math.nan)} for c in self.cells]
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["gap_range"] = self.gap_range
        out["warnings"] = [w.to_dict() for w in self.warnings]
        return to_plain(out)

    def summary(self) -> str:
        lines = ["[[Per-cell parabola minima (loss vs log N, approach 2)]]"]
        for r, (lo, hi) in self.gap_range.items():
            lines.append(
                f"    r = {r}: gap to r = {self.base_r} {lo:.3f} - {hi:.3f} nats "
                f"over {len(self.gap[r])} budgets"
            )
        lines += [f"    note: {w}" for w in self.warnings]
        return "\n".join(lines)


def parabola_minima(runs: RunTable | pd.DataFrame, *, base_r: int | None = None) -> ParabolaMinima:
    """Fit L = c0 + c1 x + c2 x^2 (x = log N_unique) in each (budget, r) cell with >= 3 sizes.

    A cell is ``ok`` when c2 > 0 (convex) and N* lies within the sizes trained there
    (``in_range``) or beyond the outermost size by at most half the mean spacing of the
    sizes in log N; otherwise its minimum is reported but not used for gaps.
    """
    runs = as_runs(runs)
    if "budget" not in runs.frame:
        raise ValueError("per-cell parabola minima need a 'budget' column (one isoFLOP curve per budget)")
    frame = runs.frame
    r_all = frame["r"].to_numpy(int)
    r_values = sorted(set(r_all.tolist()))
    base = r_values[0] if base_r is None else int(base_r)
    x_all = np.log(runs.n_once + runs.n_rec)
    budgets = frame["budget"].to_numpy()
    cells: list[dict[str, Any]] = []
    warnings: list[Caution] = []
    levels = list(dict.fromkeys(budgets.tolist()))
    try:
        levels = sorted(levels)
    except TypeError:
        levels = sorted(levels, key=str)
    for b in levels:
        for r in r_values:
            m = (budgets == b) & (r_all == r)
            x, y = x_all[m], runs.loss[m]
            n_sizes = len(np.unique(np.round(x, 9)))
            if n_sizes < 3:
                if m.any():
                    warnings.append(
                        caution(
                            "isoflop",
                            "too_few_sizes",
                            f"C = {_label(b)}, r = {r}: {n_sizes} size(s), a parabola needs 3",
                            level="note",
                            budget=_py(b),
                            r=int(r),
                            n_sizes=n_sizes,
                        )
                    )
                continue
            xc = x.mean()
            c2, c1, c0 = np.polyfit(x - xc, y, 2)
            convex = c2 > 0
            xs = xc - c1 / (2 * c2) if convex else float("nan")
            ls = c0 - c1**2 / (4 * c2) if convex else float("nan")
            # a nearly flat parabola puts its vertex far away: exp(xs) is then inf, not an error
            n_star = float(np.exp(np.clip(xs, -745.0, 709.0))) if convex and xs < 709.0 else math.inf
            in_range = bool(convex and x.min() <= xs <= x.max())
            # a minimum just beyond the last size is still usable: allow half the mean
            # spacing of the sizes (in log N) on either side
            slack = 0.5 * np.ptp(x) / (n_sizes - 1)
            usable = bool(convex and x.min() - slack <= xs <= x.max() + slack)
            if not convex:
                warnings.append(
                    caution(
                        "isoflop",
                        "not_convex",
                        f"C = {_label(b)}, r = {r}: the isoFLOP points are not convex in log N; no minimum",
                        level="note",
                        budget=_py(b),
                        r=int(r),
                        curvature=float(c2),
                    )
                )
            elif not usable:
                warnings.append(
                    caution(
                        "isoflop",
                        "minimum_outside",
                        f"C = {_label(b)}, r = {r}: the parabola minimum N* = {n_star:.3g} "
                        f"lies outside the sizes trained; not used for gaps",
                        level="note",
                        budget=_py(b),
                        r=int(r),
                        n_star=n_star,
                    )
                )
            cells.append(
                {
                    "budget": _py(b),
                    "r": int(r),
                    "n": int(m.sum()),
                    "n_star": n_star if convex else float("nan"),
                    "l_star": float(ls),
                    "curvature": float(c2),
                    "in_range": in_range,
                    "ok": usable,
                }
            )
    gap: dict[int, list[dict[str, float]]] = {}
    ok = {(c["budget"], c["r"]): c for c in cells if c["ok"]}
    for r in r_values:
        if r == base:
            continue
        gap[r] = [
            {"budget": _py(b), "gap": ok[(_py(b), r)]["l_star"] - ok[(_py(b), base)]["l_star"]}
            for b in levels
            if (_py(b), r) in ok and (_py(b), base) in ok
        ]
    return ParabolaMinima(cells=cells, base_r=base, gap=gap, warnings=warnings)


def _py(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _label(budget: Any) -> str:
    """A budget as people write it: 2e+12 for a number, the label itself otherwise."""
    return f"{budget:.3g}" if isinstance(budget, (int, float, np.number)) else str(budget)


def table_budgets(runs: RunTable | pd.DataFrame, *, n_default: int = 6) -> list[float]:
    """The FLOP budgets of a table: its numeric ``budget`` labels; without them,
    ``n_default`` budgets evenly spaced in log compute between the smallest and the
    largest training compute of the runs (:attr:`phifit.runs.RunTable.compute`), rounded
    to 3 significant figures."""
    runs = as_runs(runs)
    if "budget" in runs.frame:
        values = runs.frame["budget"]
        if pd.api.types.is_numeric_dtype(values):
            return sorted(float(v) for v in values.unique())
    compute = runs.compute
    grid = np.geomspace(compute.min(), compute.max(), n_default if compute.max() > compute.min() else 1)
    return sorted({float(f"{c:.3g}") for c in grid})
