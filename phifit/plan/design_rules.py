"""Design rules of the next runs: what a design needs for the cell bootstrap to measure phi.

The report's interval comes from a bootstrap that resamples (budget, r) cells with replacement, and the
law's phi is read off how the isoFLOP curves of the looped r values sit against those of r = 1.  A
design that narrows the asymptotic interval may still be one the bootstrap cannot measure well; three
rules keep the next runs (:func:`phifit.plan.next_runs.choose_next`) away from that:

1. **every r at every budget used** (``"every_r"``): for each budget that the runs so far plus the picks
   use, every r of the rules (the r values the runs so far use, r = 1 included) has at least one run
   there; otherwise an r is compared with the others at some budgets only;
2. **bracketed isoFLOP curves** (``"bracket"``): a (budget, r) cell with runs at two or more sizes has
   its minimum loss under the law inside the sizes trained, not at the smallest or the largest one;
   otherwise the curve's optimum is extrapolated, not measured;
3. **no lone cell** (``"no_lone_cell"``): no r lives in a single (budget, r) cell; otherwise a bootstrap
   resample that does not draw that cell (with n cells, a given one is missing from a resample with
   probability (1 - 1/n)^n, 0.35 to 0.37 for 12 cells or more) has no run of that r at all.

Each rule is a function of the design (the runs so far plus the picks; columns ``budget``, ``r``,
``n_once``, ``n_rec``, ``tokens``) that returns the runs it still needs, as :class:`Need` records;
:func:`unmet` runs the three in that order, and :func:`meets` says which pool rows would meet a need.
Which of those rows to take (the one that narrows phi's interval most per FLOP) and whether it fits the
batch is :mod:`phifit.plan.next_runs`'s choice.  A run's size is its unique parameter count,
N_once + N_rec.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..law import Design, log_loss

#: The rules, in the order they are applied.
RULES = ("every_r", "bracket", "no_lone_cell")
#: Columns a design (and a pool) must have for the rules.
RULE_COLUMNS = ("budget", "r", "n_once", "n_rec", "tokens")
#: Relative tolerance under which two budgets (or two sizes) are the same.
REL_TOL = 1e-9


@dataclass(frozen=True)
class Need:
    """One run a rule still needs.

    ``rule``: one of :data:`RULES`; ``budget`` and ``r``: for ``"every_r"`` the (budget, r) cell that has
    no run, for ``"bracket"`` the cell whose isoFLOP curve is not bracketed, for ``"no_lone_cell"`` the
    single cell r lives in (the run is needed at another budget); ``side``: for ``"bracket"``, the edge
    where the law's minimum sits ("smallest" or "largest"); ``edge``: the size (N_once + N_rec) at
    that edge."""

    rule: str
    budget: float
    r: int
    side: str = ""
    edge: float = float("nan")

    @property
    def key(self) -> tuple[str, float, int, str]:
        """What identifies the need across picks (a bracket's edge moves as sizes are added)."""
        return (self.rule, self.budget, self.r, self.side)

    def why(self) -> str:
        """The sentence a forced pick's ``why`` opens with: the rule that added it."""
        cell = f"({self.budget:.3g}, r {self.r})"
        if self.rule == "every_r":
            return (
                f"design rule every_r: r {self.r} had no run at budget {self.budget:.3g}, "
                "which the design uses"
            )
        if self.rule == "bracket":
            return f"design rule bracket: brackets the isoFLOP curve of {cell} at its {self.side} size"
        return (
            f"design rule no_lone_cell: r {self.r} lived in the single cell {cell}; a run at another "
            "budget keeps it in the cell-bootstrap resamples that miss that cell"
        )

    def text(self) -> str:
        """The need, as a note says it when it is not met."""
        cell = f"({self.budget:.3g}, r {self.r})"
        if self.rule == "every_r":
            return f"every_r: r {self.r} has no run at budget {self.budget:.3g}"
        if self.rule == "bracket":
            return f"bracket: the law's minimum of {cell} sits at its {self.side} size ({self.edge:.4g})"
        return f"no_lone_cell: r {self.r} lives in the single cell {cell}"


def sizes(frame: pd.DataFrame) -> np.ndarray:
    """A run's size: its unique parameter count, N_once + N_rec."""
    return frame["n_once"].to_numpy(float) + frame["n_rec"].to_numpy(float)


def rule_rs(runs: pd.DataFrame, pool: pd.DataFrame) -> list[int]:
    """The r values the rules cover: those the runs so far use, and r = 1 when the pool has it."""
    rs = set(runs["r"].astype(int))
    if (pool["r"].astype(int) == 1).any():
        rs.add(1)
    return sorted(rs)


def _same(values: np.ndarray, value: float) -> np.ndarray:
    return np.isclose(values, value, rtol=REL_TOL, atol=0.0)


def _budgets(frame: pd.DataFrame) -> list[float]:
    """The distinct budgets of a frame, ascending (budgets equal to :data:`REL_TOL` are one)."""
    out: list[float] = []
    for b in sorted(frame["budget"].astype(float)):
        if not out or not np.isclose(b, out[-1], rtol=REL_TOL, atol=0.0):
            out.append(b)
    return out


def missing_r(design: pd.DataFrame, rs: Iterable[int]) -> list[Need]:
    """Rule 1: the (budget, r) cells with no run, for every budget the design uses and every r of
    ``rs``."""
    budget, r_of = design["budget"].to_numpy(float), design["r"].to_numpy(int)
    needs = []
    for b in _budgets(design):
        have = set(r_of[_same(budget, b)].tolist())
        needs += [Need("every_r", b, int(r)) for r in rs if int(r) not in have]
    return needs


def frame_design(frame: pd.DataFrame) -> Design:
    """The law's design (r, N_once, N_rec, D) of a frame of runs."""
    return Design.from_arrays(
        frame["r"].to_numpy(float),
        frame["n_once"].to_numpy(float),
        frame["n_rec"].to_numpy(float),
        frame["tokens"].to_numpy(float),
    )


def law_log_loss(frame: pd.DataFrame, theta: np.ndarray) -> np.ndarray:
    """Each run's log loss under the law ``theta`` (internal coordinates)."""
    return log_loss(theta, frame_design(frame))


def curve_minimum(size: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, int]:
    """The distinct sizes of one isoFLOP curve, ascending, and the index of the one with the lowest
    predicted log loss ``pred`` (a size's runs averaged)."""
    distinct: list[float] = []
    for s in np.sort(size):
        if not distinct or not np.isclose(s, distinct[-1], rtol=REL_TOL, atol=0.0):
            distinct.append(float(s))
    means = [float(pred[_same(size, s)].mean()) for s in distinct]
    return np.array(distinct), int(np.argmin(means))


def unbracketed(design: pd.DataFrame, theta: np.ndarray) -> list[Need]:
    """Rule 2: the (budget, r) curves with two or more sizes whose lowest loss under the law ``theta``
    sits at their smallest or largest size."""
    needs = []
    budget, r_of, size = design["budget"].to_numpy(float), design["r"].to_numpy(int), sizes(design)
    pred = law_log_loss(design, theta) if len(design) else np.zeros(0)
    for b in _budgets(design):
        at_b = _same(budget, b)
        for r in sorted(set(r_of[at_b].tolist())):
            cell = at_b & (r_of == r)
            distinct, best = curve_minimum(size[cell], pred[cell])
            if len(distinct) < 2:
                continue
            if best == 0:
                needs.append(Need("bracket", b, int(r), "smallest", float(distinct[0])))
            elif best == len(distinct) - 1:
                needs.append(Need("bracket", b, int(r), "largest", float(distinct[-1])))
    return needs


def lone_cells(design: pd.DataFrame) -> list[Need]:
    """Rule 3: the r values whose runs all sit in one (budget, r) cell."""
    budget, r_of = design["budget"].to_numpy(float), design["r"].to_numpy(int)
    needs = []
    for r in sorted(set(r_of.tolist())):
        at = budget[r_of == r]
        if np.allclose(at, at[0], rtol=REL_TOL, atol=0.0):
            needs.append(Need("no_lone_cell", float(at[0]), int(r)))
    return needs


def unmet(design: pd.DataFrame, theta: np.ndarray, rs: Sequence[int]) -> list[Need]:
    """The needs of the three rules (module docstring), rule 1 first, then 2, then 3."""
    return missing_r(design, rs) + unbracketed(design, theta) + lone_cells(design)


def meets(need: Need, design: pd.DataFrame, pool: pd.DataFrame) -> np.ndarray:
    """Mask of the pool rows that would meet ``need``: for ``"every_r"`` the rows of its cell; for
    ``"bracket"`` the rows of its cell at the pool's next size beyond the edge (the largest size below a
    smallest edge, the smallest above a largest one); for ``"no_lone_cell"`` the rows of its r at
    another budget the design uses, else at the pool's other budget nearest to the cell's (in log
    budget)."""
    budget = pool["budget"].to_numpy(float)
    r = pool["r"].to_numpy(int)
    if need.rule == "every_r":
        return _same(budget, need.budget) & (r == need.r)
    if need.rule == "bracket":
        cell = _same(budget, need.budget) & (r == need.r)
        size = sizes(pool)
        beyond = cell & ((size < need.edge) if need.side == "smallest" else (size > need.edge))
        beyond &= ~_same(size, need.edge)
        if not beyond.any():
            return beyond
        nearest = size[beyond].max() if need.side == "smallest" else size[beyond].min()
        return beyond & _same(size, nearest)
    other = (r == need.r) & ~_same(budget, need.budget)
    used = np.zeros(len(pool), bool)
    for b in _budgets(design):
        used |= _same(budget, b)
    if (other & used).any():
        return other & used
    if not other.any():
        return other
    distance = np.abs(np.log(budget) - np.log(need.budget))
    return other & _same(distance, distance[other].min())
