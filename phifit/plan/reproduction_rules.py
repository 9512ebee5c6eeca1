"""Does a reproduction stand on its whole design?  The design rules of a reproduction table.

A reproduction of the study measures phi from how the isoFLOP curves of the looped r values sit against
those of r = 1.  Its answer can rest on one corner of the table when some r lives at a few budgets or
sizes only, when a curve's optimum is extrapolated rather than measured, or when at some sizes the law's
N is a small part of what the runs compute (`cpu_bpe`: docs/cpu-runs.md).  The rules, each read off a
design (planned or trained) and a law:

1. **every_r**: every r of ``rs`` (default 1, 2, 4, 8) has a run at every budget;
2. **bracketed**: every (budget, r) isoFLOP curve has at least ``min_sizes`` sizes (N_once + N_rec), and
   its lowest loss under the law lies at an interior size, not at the smallest or the largest one
   (:func:`phifit.plan.design_rules.curve_minimum`, the adaptive loop's bracket rule);
3. **budgets**: at least ``min_budgets`` budgets, the largest at least ``min_span`` times the smallest;
4. **compute_share**: every run's law N, N_once + r N_rec, is at least ``min_share`` of its compute per
   token F / 6 (F: the trainer's FLOPs per token, head and attention included: docs/compute-accounting.md).

Whether the prediction of record and the stop rule were committed before the first run is a fact of the
repository's history, not of the table, and is not checked here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .design_rules import REL_TOL, _budgets, _same, curve_minimum, law_log_loss, sizes

#: The rules, in the order they are read.
REPRODUCTION_RULES = ("every_r", "bracketed", "budgets", "compute_share")
#: The r values a reproduction of the study trains at every budget.
STUDY_RS = (1, 2, 4, 8)


@dataclass(frozen=True)
class RuleReading:
    """One rule on one design: ``holds``, what was measured (``measured``) and each failure."""

    rule: str
    holds: bool
    measured: str
    failures: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DesignCheck:
    """The readings of :data:`REPRODUCTION_RULES` on one design (:func:`check_reproduction`)."""

    readings: list[RuleReading]
    n_runs: int

    @property
    def holds(self) -> bool:
        """Every rule holds."""
        return all(r.holds for r in self.readings)

    @property
    def failed(self) -> list[str]:
        """The rules that do not hold, in order."""
        return [r.rule for r in self.readings if not r.holds]

    def reading(self, rule: str) -> RuleReading:
        """The reading of ``rule`` (one of :data:`REPRODUCTION_RULES`)."""
        for r in self.readings:
            if r.rule == rule:
                return r
        raise KeyError(f"unknown rule {rule!r}; expected one of {', '.join(REPRODUCTION_RULES)}")

    def to_frame(self) -> pd.DataFrame:
        """One row per rule: ``rule``, ``holds``, ``measured``, ``failures`` (joined by '; ')."""
        return pd.DataFrame(
            {
                "rule": [r.rule for r in self.readings],
                "holds": [r.holds for r in self.readings],
                "measured": [r.measured for r in self.readings],
                "failures": ["; ".join(r.failures) for r in self.readings],
            }
        )

    def summary(self) -> str:
        """One line per rule, then the verdict."""
        lines = []
        for r in self.readings:
            mark = "holds" if r.holds else "FAILS"
            listed = "; ".join(r.failures[:6]) + (" ..." if len(r.failures) > 6 else "")
            more = "" if r.holds else f": {listed}"
            lines.append(f"{r.rule:<14} {mark:<6} {r.measured}{more}")
        verdict = "every rule holds" if self.holds else f"fails {', '.join(self.failed)}"
        return "\n".join([*lines, f"{self.n_runs} runs: {verdict}"])


def flops_per_token(frame: pd.DataFrame) -> np.ndarray:
    """Each run's training FLOPs per token: the ``flops_per_token`` column, else ``flops`` / ``tokens``."""
    if "flops_per_token" in frame:
        return pd.to_numeric(frame["flops_per_token"], errors="coerce").to_numpy(float)
    if "flops" in frame:
        return frame["flops"].to_numpy(float) / frame["tokens"].to_numpy(float)
    raise ValueError("the compute share needs a 'flops_per_token' column, or 'flops' and 'tokens'")


def check_reproduction(
    frame: pd.DataFrame,
    theta: np.ndarray,
    *,
    rs: Sequence[int] = STUDY_RS,
    min_sizes: int = 3,
    min_budgets: int = 4,
    min_span: float = 8.0,
    min_share: float = 1.0 / 3.0,
) -> DesignCheck:
    """Read the rules of the module docstring on ``frame`` (one row per run: ``budget``, ``r``,
    ``n_once``, ``n_rec``, ``tokens`` and ``flops_per_token`` or ``flops``) under the law ``theta``
    (internal coordinates, :func:`phifit.law.params_to_theta`)."""
    missing = [c for c in ("budget", "r", "n_once", "n_rec", "tokens") if c not in frame]
    if missing:
        raise ValueError(f"a design needs the columns {', '.join(missing)}")
    budgets = _budgets(frame)
    budget, r_of, size = frame["budget"].to_numpy(float), frame["r"].to_numpy(int), sizes(frame)

    absent = []
    for b in budgets:
        have = set(r_of[_same(budget, b)].tolist())
        absent += [f"r {r} has no run at budget {b:.3g}" for r in rs if r not in have]
    every_r = RuleReading(
        "every_r", not absent, f"r in {{{', '.join(map(str, rs))}}} at {len(budgets)} budgets", absent
    )

    pred = law_log_loss(frame, np.asarray(theta, float))
    open_curves, n_curves = [], 0
    for b in budgets:
        at_b = _same(budget, b)
        for r in sorted(set(r_of[at_b].tolist())):
            n_curves += 1
            cell = at_b & (r_of == r)
            distinct, best = curve_minimum(size[cell], pred[cell])
            where = f"({b:.3g}, r {r})"
            if len(distinct) < min_sizes:
                open_curves.append(f"{where} has {len(distinct)} size(s), fewer than {min_sizes}")
            elif best in (0, len(distinct) - 1):
                edge = "smallest" if best == 0 else "largest"
                at = f"{distinct[best]:.4g}"
                open_curves.append(f"{where}: the law's lowest loss is at its {edge} size ({at})")
    bracketed = RuleReading(
        "bracketed",
        not open_curves,
        f"{n_curves - len(open_curves)} of {n_curves} (budget, r) curves with >= {min_sizes} sizes and the "
        "law's lowest loss inside",
        open_curves,
    )

    span = budgets[-1] / budgets[0] if budgets else float("nan")
    too_few = []
    if len(budgets) < min_budgets:
        too_few.append(f"{len(budgets)} budget(s), fewer than {min_budgets}")
    if not span >= min_span * (1 - REL_TOL):
        too_few.append(f"the budgets span {span:.3g}x, less than {min_span:g}x")
    budget_rule = RuleReading("budgets", not too_few, f"{len(budgets)} budgets spanning {span:.3g}x", too_few)

    n_law = frame["n_once"].to_numpy(float) + r_of * frame["n_rec"].to_numpy(float)
    share = n_law / (flops_per_token(frame) / 6.0)
    low = np.flatnonzero(~(share >= min_share))
    names = frame["run_id"].astype(str).to_numpy() if "run_id" in frame else np.arange(len(frame)).astype(str)
    share_rule = RuleReading(
        "compute_share",
        len(low) == 0,
        f"law's N / (F / 6) from {np.nanmin(share):.0%} to {np.nanmax(share):.0%} (at least {min_share:.0%})",
        [f"{names[i]}: {share[i]:.0%}" for i in low],
    )
    return DesignCheck([every_r, bracketed, budget_rule, share_rule], len(frame))


__all__ = [
    "REPRODUCTION_RULES",
    "STUDY_RS",
    "DesignCheck",
    "RuleReading",
    "check_reproduction",
    "flops_per_token",
]
