"""The result of the drift check of phi: :class:`DriftFit`.

The law gives every budget one phi.  The drift law lets it move with compute,

    phi(C) = phi_0 + phi_1 log(C / C_ref),

C the run's FLOP budget and C_ref the geometric mean of the table's budgets (phi_0 is phi at
the table's centre, phi_1 the change per e-fold of C).  The record holds phi_0 and phi_1 with
their (budget, r) cell-bootstrap percentile intervals and the restricted wild cluster bootstrap
test of phi_1 = 0.  The procedure is in :mod:`phifit.diagnostics.drift`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..bootstrap.wild import WildTest
from ..cautions import Caution
from ..fitters.likelihood import SIGNIFICANCE, p_text
from ..intervals import interval_text
from ..serialize import JsonIO, to_plain

SOURCE = "drift"


def _ends(pair: Any) -> list[float | None]:
    if pair is None:
        return [None, None]
    return [None if v is None else float(v) for v in pair]


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class DriftFit(JsonIO):
    """phi(C) = phi_0 + phi_1 log(C / C_ref) against one phi for every budget.

    Attributes
    ----------
    phi_0, phi_1 : the drift law's fit: phi at C = C_ref, and its change per e-fold of C.
    phi_0_ci, phi_1_ci : percentile intervals at ``level`` from the (budget, r) cell bootstrap
        ([None, None] when withheld: more than 10% of the refits failed, or no bootstrap).
    c_ref : C_ref in FLOPs, the geometric mean of the distinct budgets ``budgets``.
    phi : the one-phi law's phi on the same runs (the null fit).
    params : E, A, alpha, B, beta of the drift fit.
    phi_1_bounds : the box of phi_1 (per e-fold); ``on_bound``: phi_1 sits on it (undecided).
    statistic : T = F_one_phi - F_drift (drop of the summed Huber objective on log-loss).
    wild : the restricted wild cluster bootstrap of phi_1 = 0 (None: not run).
    n_boot, n_failed, failure_reasons : cell-bootstrap replicates, failed refits and why.
    testable : False when the table cannot test a drift (``reason`` says why; no numbers then).
    verdict : one line of plain words.
    phi_budget_ci : per budget (``budgets``' order), the percentile interval of phi(C) at that
        budget from the same replicates' (phi_0, phi_1) pairs (empty: not computed, or withheld).
    """

    phi_0: float | None
    phi_1: float | None
    phi_0_ci: list[float | None]
    phi_1_ci: list[float | None]
    c_ref: float | None
    budgets: list[float]
    phi: float | None
    params: dict[str, float]
    phi_1_bounds: list[float]
    on_bound: bool
    statistic: float | None
    wild: WildTest | None
    n_boot: int
    n_failed: int
    failure_reasons: dict[str, int]
    level: float
    n_runs: int
    testable: bool
    reason: str
    verdict: str
    seed: int = 0
    warnings: list[Caution] = field(default_factory=list)
    phi_budget_ci: list[list[float | None]] = field(default_factory=list)

    def to_frame(self):
        """One row per budget (FLOPs): ``budget`` and phi(C) = phi_0 + phi_1 log(C / C_ref) there,
        with ``ci_lo``, ``ci_hi`` (percentile interval from the cell bootstrap; NaN when not
        computed).  Empty when the drift was not testable."""
        import pandas as pd

        if not self.testable or self.phi_0 is None or self.phi_1 is None or not self.c_ref:
            return pd.DataFrame(columns=["budget", "phi", "ci_lo", "ci_hi"])
        phi = [self.phi_0 + self.phi_1 * math.log(c / self.c_ref) for c in self.budgets]
        cis = self.phi_budget_ci or [[None, None]] * len(self.budgets)
        return pd.DataFrame(
            {
                "budget": self.budgets,
                "phi": phi,
                "ci_lo": [math.nan if ci[0] is None else ci[0] for ci in cis],
                "ci_hi": [math.nan if ci[1] is None else ci[1] for ci in cis],
            }
        )

    # -- the numbers, by name -----------------------------------------------------------------
    @property
    def p_value(self) -> float | None:
        """Wild cluster bootstrap p-value of phi_1 = 0 (None when not tested)."""
        return None if self.wild is None else self.wild.p_value

    @property
    def rejected(self) -> bool | None:
        """True when phi_1 = 0 is rejected at :data:`~phifit.fitters.likelihood.SIGNIFICANCE`
        (None when untested, or undecided because phi_1 sits on its bound)."""
        p = self.p_value
        if p is None or p != p or self.on_bound:
            return None
        return bool(p < SIGNIFICANCE)

    @property
    def n_wild(self) -> int:
        return 0 if self.wild is None else self.wild.n_boot

    def phi_at(self, budget: float) -> float | None:
        """phi(C) of the drift fit at a budget C in FLOPs."""
        if self.phi_0 is None or self.phi_1 is None or self.c_ref is None:
            return None
        return float(self.phi_0 + self.phi_1 * math.log(budget / self.c_ref))

    @property
    def phi_by_budget(self) -> list[dict[str, Any]]:
        """phi(C) of the drift fit at each of the table's budgets, ascending, with its interval
        (``ci``) when the bootstrap gave one."""
        rows: list[dict[str, Any]] = [{"budget": b, "phi": self.phi_at(b)} for b in self.budgets]
        if len(self.phi_budget_ci) == len(rows):
            for row, ci in zip(rows, self.phi_budget_ci, strict=True):
                row["ci"] = ci
        return rows

    @property
    def interval_holds_zero(self) -> bool | None:
        """Whether the interval of phi_1 includes 0 (None when withheld)."""
        lo, hi = self.phi_1_ci
        return None if lo is None or hi is None else bool(lo <= 0.0 <= hi)

    def interval_text(self, pair: list[float | None], spec: str = ".3f", bounds: Any = None) -> str:
        """An interval as text; with ``bounds`` (phi_1's box) an end on the box says it is not
        determined (:func:`phifit.intervals.interval_text`)."""
        if pair[0] is None or pair[1] is None:
            return "withheld"
        return interval_text(pair[0], pair[1], bounds, fmt=lambda v: format(v, spec))

    def summary(self) -> str:
        head = "    Drift of phi with compute: phi(C) = phi_0 + phi_1 log(C / C_ref)"
        if not self.testable:
            return "\n".join([head, f"    not testable: {self.reason}"])
        pct = f"{100 * self.level:g}%"
        lines = [
            head + f" (C_ref = {self.c_ref:.3g} FLOPs, {len(self.budgets)} budgets):",
            f"      phi_1 = {self.phi_1:+.4f} per e-fold of C, {pct} interval "
            f"{self.interval_text(self.phi_1_ci, '+.4f', self.phi_1_bounds)} (box [{self.phi_1_bounds[0]:g}, "
            f"{self.phi_1_bounds[1]:g}])",
            f"      phi_0 = {self.phi_0:.4f} (phi at C_ref), {pct} interval "
            f"{self.interval_text(self.phi_0_ci, '.4f')}; one phi for every budget: {self.phi:.4f}",
        ]
        if self.budgets:
            lo, hi = self.budgets[0], self.budgets[-1]
            lines.append(
                f"      phi(C) from {self.phi_at(lo):.4f} at C = {lo:.3g} to {self.phi_at(hi):.4f} "
                f"at C = {hi:.3g}"
            )
            if len(self.phi_budget_ci) == len(self.budgets):
                per = ", ".join(
                    f"{row['phi']:.3f} {self.interval_text(row['ci'])} at {row['budget']:.3g}"
                    for row in self.phi_by_budget
                )
                lines.append(f"      phi(C) by budget, {pct} intervals: {per}")
        boot = f"      cell bootstrap: {self.n_boot} replicates, {self.n_failed} failed"
        if self.failure_reasons:
            boot += " (" + "; ".join(f"{k}: {v}" for k, v in self.failure_reasons.items()) + ")"
        lines.append(boot)
        if self.wild is not None:
            lines.append(
                f"      test of phi_1 = 0: T = {self.statistic:.4g}, wild cluster bootstrap "
                f"p = {p_text(self.p_value)} ({self.wild.n_ok} of {self.wild.n_boot} replicates, "
                f"signs per {self.wild.block} block, {self.wild.n_blocks} blocks)"
            )
        lines.append(f"      {self.verdict}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON: every field, plus p_value, rejected, n_wild and phi_by_budget."""
        return to_plain(
            {
                "kind": "drift",
                "phi_0": self.phi_0,
                "phi_1": self.phi_1,
                "phi_0_ci": self.phi_0_ci,
                "phi_1_ci": self.phi_1_ci,
                "c_ref": self.c_ref,
                "budgets": self.budgets,
                "phi_by_budget": self.phi_by_budget,
                "phi": self.phi,
                "params": self.params,
                "phi_1_bounds": self.phi_1_bounds,
                "on_bound": self.on_bound,
                "statistic": self.statistic,
                "wild": None if self.wild is None else self.wild.to_dict(),
                "p_value": self.p_value,
                "rejected": self.rejected,
                "n_wild": self.n_wild,
                "n_boot": self.n_boot,
                "n_failed": self.n_failed,
                "failure_reasons": self.failure_reasons,
                "level": self.level,
                "n_runs": self.n_runs,
                "testable": self.testable,
                "reason": self.reason,
                "verdict": self.verdict,
                "seed": self.seed,
                "warnings": [w.to_dict() for w in self.warnings],
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DriftFit:
        return cls(
            phi_0=_opt(data.get("phi_0")),
            phi_1=_opt(data.get("phi_1")),
            phi_0_ci=_ends(data.get("phi_0_ci")),
            phi_1_ci=_ends(data.get("phi_1_ci")),
            phi_budget_ci=[_ends(row["ci"]) for row in data.get("phi_by_budget") or [] if "ci" in row],
            c_ref=_opt(data.get("c_ref")),
            budgets=[float(v) for v in data.get("budgets") or []],
            phi=_opt(data.get("phi")),
            params={k: float(v) for k, v in (data.get("params") or {}).items()},
            phi_1_bounds=[float(v) for v in data.get("phi_1_bounds") or []],
            on_bound=bool(data.get("on_bound")),
            statistic=_opt(data.get("statistic")),
            wild=WildTest.from_dict(data["wild"]) if data.get("wild") else None,
            n_boot=int(data.get("n_boot") or 0),
            n_failed=int(data.get("n_failed") or 0),
            failure_reasons={str(k): int(v) for k, v in (data.get("failure_reasons") or {}).items()},
            level=float(data["level"]),
            n_runs=int(data["n_runs"]),
            testable=bool(data["testable"]),
            reason=str(data.get("reason") or ""),
            verdict=str(data.get("verdict") or ""),
            seed=int(data.get("seed") or 0),
            warnings=[Caution.from_dict(w, source=SOURCE) for w in data.get("warnings") or []],
        )


__all__ = ["DriftFit", "SOURCE"]
