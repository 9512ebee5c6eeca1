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
from dataclasses import dataclass
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


def out_of_sample_many(
    runs: RunTable,
    specs: Mapping[str, LawSpec],
    method: str,
    seed: int,
    n_starts: int,
    order: list[Any],
    *,
    delta: float | None = None,
    n_jobs: int | None = 1,
    backend: str | None = None,
    scheduler: str | None = None,
) -> dict[str, tuple[float, dict[str, float], float, list[Caution]]]:
    """{label: (cv_rmse, per-budget RMSE, extrapolation RMSE, cautions)} for each of ``specs``.

    Every (spec, held-out budget) fold is one task of :func:`phifit.fitters.parallel.parallel_map`
    (``n_jobs``, ``backend``, ``scheduler``): each fold's refit is a pure function of its training
    runs, spec, method, seed and starts, so the errors do not depend on where the folds run.
    :func:`start_out_of_sample` starts the folds and :func:`collect_out_of_sample` reads them, so
    that a caller can go on meanwhile.
    """
    where = {"n_jobs": n_jobs, "backend": backend, "scheduler": scheduler}
    pending = start_out_of_sample(runs, specs, method, seed, n_starts, order, delta=delta, **where)
    return collect_out_of_sample(pending)


@dataclass
class PendingFolds:
    """The folds of :func:`start_out_of_sample`: their results as
    :func:`phifit.fitters.parallel.parallel_map` yields them (on worker processes they are
    already running), and what reading them needs."""

    runs: RunTable
    specs: Mapping[str, LawSpec]
    order: list[Any]
    folds: Any


def start_out_of_sample(
    runs: RunTable,
    specs: Mapping[str, LawSpec],
    method: str,
    seed: int,
    n_starts: int,
    order: list[Any],
    *,
    delta: float | None = None,
    n_jobs: int | None = 1,
    backend: str | None = None,
    scheduler: str | None = None,
) -> PendingFolds:
    """Start the folds of :func:`out_of_sample_many` (its arguments) and return at once."""
    from ..fitters.parallel import parallel_map

    budget = runs.frame["budget"].to_numpy()
    tasks = [
        (runs, budget == b, spec, method, seed, n_starts, delta) for spec in specs.values() for b in order
    ]
    folds = parallel_map(_fold, tasks, n_jobs=n_jobs, backend=backend, scheduler=scheduler)
    return PendingFolds(runs, specs, order, folds)


def collect_out_of_sample(
    pending: PendingFolds,
) -> dict[str, tuple[float, dict[str, float], float, list[Caution]]]:
    """:func:`out_of_sample_many`'s result from the folds :func:`start_out_of_sample` started."""
    runs, order = pending.runs, pending.order
    budget = runs.frame["budget"].to_numpy()
    folds = iter(pending.folds)
    out: dict[str, tuple[float, dict[str, float], float, list[Caution]]] = {}
    for label, spec in pending.specs.items():
        sq = np.full(len(runs), np.nan)
        per: dict[str, float] = {}
        notes: list[Caution] = []
        for b in order:
            held = budget == b
            err, phi_identified = next(folds)
            if not phi_identified and "phi" not in spec.fixed:
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
            sq[held] = err**2
            per[str(b)] = float(np.sqrt(np.mean(err**2)))
        # the extrapolation fit (every budget but the largest) is the largest budget's fold
        out[label] = (float(np.sqrt(np.mean(sq))), per, per[str(order[-1])], notes)
    return out


def _fold(
    runs: RunTable,
    held: np.ndarray,
    spec: LawSpec,
    method: str,
    seed: int,
    n_starts: int,
    delta: float | None,
) -> tuple[np.ndarray, bool]:
    """One fold: refit ``spec`` without the ``held`` runs; (held runs' loss minus its prediction,
    whether the refit identified phi)."""
    res = fit_spec(runs.subset(~held), spec, method, seed, n_starts, profile=False, delta=delta)
    return runs.loss[held] - predict(res, runs.subset(held)), bool(res.phi_identified)


__all__ = [
    "PendingFolds",
    "budget_order",
    "collect_out_of_sample",
    "fit_spec",
    "out_of_sample_many",
    "predict",
    "spec_label",
    "start_out_of_sample",
]
