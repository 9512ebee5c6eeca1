"""The result of the free-multiplier check of r^phi: :class:`MultiplierFit`.

The law values a recurrence count r by one exponent, N_eff = N_once + r^phi N_rec.  The free
law gives each looped r its own multiplier, N_eff = N_once + m_r N_rec (m_1 = 1), i.e. its own
exponent phi_r = log m_r / log r.  The record holds the m_r with their cell-bootstrap
intervals, the phi of the r^phi curve (the one-phi fit on the same runs), and the restricted
wild cluster bootstrap test of "one phi for every r" against one phi per r.  The procedure is
in :mod:`phifit.diagnostics.multipliers`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..bootstrap.wild import WildTest
from ..cautions import Caution
from ..fitters.likelihood import SIGNIFICANCE, p_text
from ..serialize import JsonIO, to_plain

SOURCE = "multipliers"


def _ends(pair: Any) -> list[float | None]:
    if pair is None:
        return [None, None]
    return [None if v is None else float(v) for v in pair]


@dataclass(frozen=True)
class MultiplierFit(JsonIO):
    """One effective multiplier per recurrence count against the law's r^phi.

    Attributes
    ----------
    r : the looped recurrence counts (r > 1), ascending; r = 1 has m_1 = 1 by definition.
    phi_r, multiplier : phi_r and m_r = r^phi_r of the free-multiplier fit, one per ``r``.
    phi_r_ci, multiplier_ci : their percentile intervals at ``level`` from the (budget, r) cell
        bootstrap ([None, None] when withheld: more than 10% of the refits failed).
    phi : the phi of the fitted r^phi curve (the one-phi law refitted on the same runs and box).
    free_params : E, A, alpha, B, beta of the free-multiplier fit.
    statistic : T = F_one_phi - F_free (drop of the summed Huber objective on log-loss).
    wild : the restricted wild cluster bootstrap of one phi against one phi per r (None: not run).
    n_boot, n_failed, failure_reasons : cell-bootstrap replicates, failed refits and why.
    testable : False when the table cannot test r^phi (``reason`` says why; no numbers then).
    verdict : one line of plain words.
    """

    r: list[float]
    phi_r: list[float]
    multiplier: list[float]
    phi_r_ci: list[list[float | None]]
    multiplier_ci: list[list[float | None]]
    phi: float | None
    free_params: dict[str, float]
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

    # -- the numbers, by name -----------------------------------------------------------------
    @property
    def p_value(self) -> float | None:
        """Wild cluster bootstrap p-value of r^phi (None when not tested)."""
        return None if self.wild is None else self.wild.p_value

    @property
    def rejected(self) -> bool | None:
        """True when r^phi is rejected at :data:`~phifit.fitters.likelihood.SIGNIFICANCE`."""
        p = self.p_value
        return None if p is None or p != p else bool(p < SIGNIFICANCE)

    @property
    def n_wild(self) -> int:
        return 0 if self.wild is None else self.wild.n_boot

    @property
    def n_wild_failed(self) -> int:
        return 0 if self.wild is None else self.wild.n_failed

    @property
    def curve(self) -> list[float | None]:
        """r^phi of the one-phi fit at each looped r (what m_r would be if the law held)."""
        return [None if self.phi is None else float(r**self.phi) for r in self.r]

    def rows(self) -> list[dict[str, Any]]:
        """One row per looped r: r, m_r, its interval, r^phi, phi_r and its interval."""
        return [
            {
                "r": r,
                "m": m,
                "m_ci": ci,
                "r_phi": c,
                "phi_r": p,
                "phi_r_ci": pci,
            }
            for r, m, ci, c, p, pci in zip(
                self.r, self.multiplier, self.multiplier_ci, self.curve, self.phi_r, self.phi_r_ci
            )
        ]

    def to_frame(self):
        """The free multipliers as a DataFrame, one row per looped r: ``m`` (m_r) with ``m_lo``,
        ``m_hi`` (its interval at ``level``, NaN when withheld), ``r_phi`` (r^phi of the one-phi
        fit), ``phi_r`` with ``phi_r_lo``, ``phi_r_hi``."""
        import pandas as pd

        def num(x: Any) -> float:
            return math.nan if x is None else float(x)

        rows = [
            {
                "r": row["r"],
                "m": num(row["m"]),
                "m_lo": num(row["m_ci"][0]),
                "m_hi": num(row["m_ci"][1]),
                "r_phi": num(row["r_phi"]),
                "phi_r": num(row["phi_r"]),
                "phi_r_lo": num(row["phi_r_ci"][0]),
                "phi_r_hi": num(row["phi_r_ci"][1]),
            }
            for row in self.rows()
        ]
        columns = ["r", "m", "m_lo", "m_hi", "r_phi", "phi_r", "phi_r_lo", "phi_r_hi"]
        return pd.DataFrame(rows, columns=columns).set_index("r")

    def table_text(self) -> list[str]:
        """The m_r table as text lines (for ``phifit diagnose`` and ``phifit compare``)."""
        if not self.testable:
            return [f"    r^phi cannot be tested: {self.reason}"]
        pct = f"{100 * self.level:g}%"
        lines = [
            f"    {'r':>4} {'m_r':>9} {pct + ' interval':>22} {'r^phi':>9} {'phi_r':>8}",
        ]

        def iv(pair: list[float | None], spec: str) -> str:
            if pair[0] is None or pair[1] is None:
                return "withheld"
            return f"[{format(pair[0], spec)}, {format(pair[1], spec)}]"

        for row in self.rows():
            lines.append(
                f"    {row['r']:>4g} {row['m']:>9.4f} {iv(row['m_ci'], '.4f'):>22} "
                f"{row['r_phi']:>9.4f} {row['phi_r']:>8.4f}"
            )
        return lines

    def summary(self) -> str:
        head = "    Free multipliers (N_eff = N_once + m_r N_rec, m_1 = 1) against r^phi"
        if not self.testable:
            return "\n".join([head, *self.table_text()])
        phi = "-" if self.phi is None else f"{self.phi:.4f}"
        lines = [head + f" (phi = {phi}):", *self.table_text()]
        boot = f"      cell bootstrap: {self.n_boot} replicates, {self.n_failed} failed"
        if self.failure_reasons:
            boot += " (" + "; ".join(f"{k}: {v}" for k, v in self.failure_reasons.items()) + ")"
        lines.append(boot)
        if self.wild is not None:
            lines.append(
                f"      lack of fit of r^phi: T = {self.statistic:.4g}, wild cluster bootstrap "
                f"p = {p_text(self.p_value)} ({self.wild.n_ok} of {self.wild.n_boot} replicates, "
                f"signs per {self.wild.block} block, {self.wild.n_blocks} blocks)"
            )
        lines.append(f"      {self.verdict}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON: every field, plus p_value, rejected, n_wild, n_wild_failed and r_phi (the curve)."""
        return to_plain(
            {
                "kind": "multipliers",
                "r": self.r,
                "phi_r": self.phi_r,
                "multiplier": self.multiplier,
                "phi_r_ci": self.phi_r_ci,
                "multiplier_ci": self.multiplier_ci,
                "phi": self.phi,
                "r_phi": self.curve,
                "free_params": self.free_params,
                "statistic": self.statistic,
                "wild": None if self.wild is None else self.wild.to_dict(),
                "p_value": self.p_value,
                "rejected": self.rejected,
                "n_wild": self.n_wild,
                "n_wild_failed": self.n_wild_failed,
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
    def from_dict(cls, data: Mapping[str, Any]) -> MultiplierFit:
        return cls(
            r=[float(v) for v in data.get("r") or []],
            phi_r=[float(v) for v in data.get("phi_r") or []],
            multiplier=[float(v) for v in data.get("multiplier") or []],
            phi_r_ci=[_ends(p) for p in data.get("phi_r_ci") or []],
            multiplier_ci=[_ends(p) for p in data.get("multiplier_ci") or []],
            phi=None if data.get("phi") is None else float(data["phi"]),
            free_params={k: float(v) for k, v in (data.get("free_params") or {}).items()},
            statistic=None if data.get("statistic") is None else float(data["statistic"]),
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


__all__ = ["MultiplierFit", "SOURCE"]
