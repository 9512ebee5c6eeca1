"""Out-of-sample error of a law specification: leave-one-budget-out and extrapolation.

For a specification (phi free, or with fixed values) and a table with a ``budget`` column:

- ``cv_rmse``: for each budget, refit on the other budgets (full multi-start fit, same
  method, seed and starts) and predict the held-out runs; the RMSE in nats over all runs,
  each predicted once (``cv_rmse_by_budget``: the RMSE of each held-out budget);
- ``extrap_rmse``: fit on every budget but the largest, RMSE of the prediction on the largest
  (the leave-one-budget-out fold of the largest budget: it is fitted once).

Used by the restricted-fit comparison (:mod:`phifit.compare.restricted`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..cautions import Caution, caution
from ..fitters import fit as fit_law
from ..law import LawSpec, log_loss
from ..result import FitResult
from ..runs.table import RunTable


def budget_order(runs: RunTable) -> list[Any]:
    """Budgets from smallest to largest (numeric order, or by mean FLOPs for labels)."""
    col = runs.frame["budget"]
    values = list(col.unique())
    numeric = [v for v in values if isinstance(v, (int, float, np.integer, np.floating))]
    if len(numeric) == len(values):
        return sorted(values)
    if "flops" in runs.frame.columns:
        means = runs.frame.groupby("budget")["flops"].mean()
        return sorted(values, key=lambda v: float(means[v]))
    return sorted(values, key=str)


def predict(result: FitResult, runs: RunTable) -> np.ndarray:
    """Predicted loss (nats) of ``runs`` under a fitted law."""
    return np.exp(log_loss(result.theta, runs.design))


def spec_label(fixed: Mapping[str, float]) -> str:
    return LawSpec(fixed=dict(fixed)).label()


def fit_spec(
    runs: RunTable,
    spec: LawSpec,
    method: str,
    seed: int,
    n_starts: int,
    profile: bool = True,
    *,
    delta: float | None = None,
) -> FitResult:
    """The fit of ``spec`` (lsq: ``profile`` its interval profiles; huber: threshold ``delta``,
    None for the default)."""
    options: dict[str, Any] = {"seed": seed, "n_starts": n_starts}
    if method == "lsq":
        options["profile"] = profile
    if method == "huber" and delta is not None:
        options["delta"] = delta
    return fit_law(runs, method=method, spec=spec, **options)


def out_of_sample(
    runs: RunTable,
    spec: LawSpec,
    method: str,
    seed: int,
    n_starts: int,
    order: list[Any],
    *,
    delta: float | None = None,
) -> tuple[float, dict[str, float], float, list[str]]:
    """(cv_rmse, per-budget RMSE, extrapolation RMSE, cautions) for one specification
    (Huber refits at threshold ``delta``)."""
    budget = runs.frame["budget"].to_numpy()
    sq = np.full(len(runs), np.nan)
    per: dict[str, float] = {}
    notes: list[Caution] = []
    for b in order:
        held = budget == b
        train = runs.subset(~held)
        res = fit_spec(train, spec, method, seed, n_starts, profile=False, delta=delta)
        if not res.phi_identified and "phi" not in spec.fixed:
            notes.append(
                caution(
                    "compare",
                    "fold_phi_unidentified",
                    f"{spec_label(spec.fixed)}: without budget {b} phi is not identifiable; "
                    f"that fold used phi = 0",
                    level="note",
                    budget=str(b),
                )
            )
        err = runs.loss[held] - predict(res, runs.subset(held))
        sq[held] = err**2
        per[str(b)] = float(np.sqrt(np.mean(err**2)))
    cv = float(np.sqrt(np.mean(sq)))
    # the extrapolation fit (every budget but the largest) is the largest budget's fold
    return cv, per, per[str(order[-1])], notes


__all__ = ["budget_order", "fit_spec", "out_of_sample", "predict", "spec_label"]
