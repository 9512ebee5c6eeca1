"""Compute-optimal allocation of a Chinchilla-law fit: N* ∝ C^a, D* ∝ C^b.

For L(N, D) = E + A N^-alpha + B D^-beta under the compute estimate C = 6 N D, minimising
L at fixed C gives (Hoffmann et al. 2022, App. D.2)

    N*(C) = G (C / 6)^a,   D*(C) = G^-1 (C / 6)^b,
    a = beta / (alpha + beta),   b = alpha / (alpha + beta),   G = (alpha A / (beta B))^(1 / (alpha + beta))

so a + b = 1, and a = b = 1/2 exactly when alpha = beta (equal scaling).  The intervals are
percentile intervals of a and b computed on every bootstrap replicate's (alpha, beta), at the
fit's interval level, so they carry the exponents' correlation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import defaults
from .serialize import JsonIO, to_plain

__all__ = ["Allocation", "allocation", "allocation_exponents", "non_looped"]


def non_looped(runs: Any) -> bool:
    """True when no run of the table is looped (none has r > 1 with N_rec > 0): the joint
    law is Chinchilla's L = E + A N^-alpha + B D^-beta and phi does not enter."""
    return not bool(((np.asarray(runs.r) > 1) & (np.asarray(runs.n_rec) > 0)).any())


def allocation_exponents(alpha: Any, beta: Any) -> tuple[Any, Any]:
    """(a, b) = (beta / (alpha + beta), alpha / (alpha + beta)); vectorised over arrays."""
    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    total = alpha + beta
    return beta / total, alpha / total


@dataclass(frozen=True)
class Allocation(JsonIO):
    """The compute-optimal exponents of a fit: N* ∝ C^a, D* ∝ C^b (see the module docstring).

    ``ci``: {"a": [lo, hi], "b": [lo, hi]} percentile bootstrap intervals at ``level``
    (empty without a bootstrap); ``n_boot``: replicates used.
    """

    a: float
    b: float
    ci: dict[str, list[float]]
    level: float = defaults.LEVEL
    n_boot: int = 0

    def to_dict(self) -> dict[str, Any]:
        return to_plain(dict(self.__dict__))

    def summary(self) -> str:
        """Two lines: N* ∝ C^a and D* ∝ C^b with their intervals."""

        def one(name: str, value: float) -> str:
            iv = self.ci.get(name)
            text = f"{value:.3f}"
            if iv and None not in iv and all(np.isfinite(iv)):
                text += f" ({self.level:.0%} bootstrap [{iv[0]:.3f}, {iv[1]:.3f}])"
            return text

        return (
            f"N* ∝ C^{one('a', self.a)}, D* ∝ C^{one('b', self.b)}  "
            "(a = beta/(alpha+beta), b = alpha/(alpha+beta), C = 6ND)"
        )


def allocation(fit: Any, bootstrap: Any | None = None, *, level: float | None = None) -> Allocation:
    """The allocation exponents of ``fit`` (a FitResult) with intervals from ``bootstrap``
    (a :class:`~phifit.bootstrap.result.BootstrapResult`, its replicates' alpha and beta)."""
    a, b = allocation_exponents(fit.params["alpha"], fit.params["beta"])
    level = float(level if level is not None else (fit.ci_level or defaults.LEVEL))
    ci: dict[str, list[float]] = {}
    n_used = 0
    if bootstrap is not None:
        for name, index in (("a", 0), ("b", 1)):
            iv = bootstrap.interval(
                lambda p, i=index: allocation_exponents(p["alpha"], p["beta"])[i], level=level
            )
            ci[name] = [float(iv.lo), float(iv.hi)]
            n_used = int(iv.n_used)
    return Allocation(a=float(a), b=float(b), ci=ci, level=level, n_boot=n_used)
