"""Out-of-sample error of a law specification: leave-one-budget-out and extrapolation.

For a specification (phi free, or with fixed values) and a table with a ``budget`` column:

- ``cv_rmse``: for each budget, refit on the other budgets (full multi-start fit, same
  method, seed and starts) and predict the held-out runs; the RMSE in nats over all runs,
  each predicted once (``cv_rmse_by_budget``: the RMSE of each held-out budget);
- ``extrap_rmse``: fit on every budget but the largest, RMSE of the prediction on the largest
  (the leave-one-budget-out fold of the largest budget: it is fitted once).

A fold whose training runs cannot be fitted (:func:`fold_problems`: their losses do not vary,
they share one design, or they are no more than the free parameters) is not fitted: its budget
is left out of ``cv_rmse`` and a note (kind "fold_not_estimable") names the fold and the reason,
rather than an error that would describe those runs as the user's whole table.

Used by the restricted-fit comparison (:mod:`phifit.compare.restricted`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cautions import Caution, caution
from ..fitters import fit as fit_law
from ..fitters.common import check_run_count, effective_spec
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


def fold_problems(runs: RunTable, specs: Mapping[str, LawSpec], order: list[Any]) -> dict[str, str]:
    """{budget (as text): why its leave-one-budget-out fold cannot be fitted} for the folds whose
    training runs (every budget but that one) fail the checks every fit makes first
    (:func:`phifit.fitters.common.check_run_count` under the spec each fit would use): losses that
    do not vary, one design for every run, no more runs than some spec's free parameters.  The
    same folds are left out for every spec, so their errors stay comparable."""
    budget = runs.frame["budget"].to_numpy()
    prefix = f"{runs.source}: " if runs.source else ""
    out: dict[str, str] = {}
    for b in order:
        train = runs.subset(budget != b)
        for spec in specs.values():
            try:
                check_run_count(train, effective_spec(train, spec)[0])
            except ValueError as err:
                reason = str(err).removeprefix(prefix)
                out[str(b)] = f"without budget {b}, the other {len(train)} runs cannot be fitted: {reason}"
                break
    return out


def fold_note(budget: str, reason: str) -> Caution:
    """The note of a fold left out (:func:`fold_problems`)."""
    return caution(
        "compare",
        "fold_not_estimable",
        f"leave-one-budget-out fold of budget {budget} not estimated ({reason}); its runs are left out "
        "of the held-out errors",
        level="note",
        budget=budget,
    )


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

    Folds :func:`fold_problems` finds unfit are left out (a "fold_not_estimable" note each); the
    RMSE is then over the other budgets' runs, NaN when no fold is left (and the extrapolation
    RMSE NaN when the largest budget's fold is left out).

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
    skipped: Mapping[str, str] = dataclasses.field(default_factory=dict)


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
    skipped: Mapping[str, str] | None = None,
) -> PendingFolds:
    """Start the folds of :func:`out_of_sample_many` (its arguments) and return at once;
    ``skipped``: the folds to leave out ({budget: reason}; None: :func:`fold_problems`'s)."""
    from ..fitters.parallel import parallel_map

    skipped = fold_problems(runs, specs, order) if skipped is None else dict(skipped)
    budget = runs.frame["budget"].to_numpy()
    tasks = [
        (runs, budget == b, spec, method, seed, n_starts, delta)
        for spec in specs.values()
        for b in order
        if str(b) not in skipped
    ]
    folds = parallel_map(_fold, tasks, n_jobs=n_jobs, backend=backend, scheduler=scheduler)
    return PendingFolds(runs, specs, order, folds, skipped)


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
            if str(b) in pending.skipped:
                notes.append(fold_note(str(b), pending.skipped[str(b)]))
                continue
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
        predicted = sq[[str(v) not in pending.skipped for v in budget]]
        cv = float(np.sqrt(np.mean(predicted))) if len(predicted) else float("nan")
        out[label] = (cv, per, per.get(str(order[-1]), float("nan")), notes)
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
    "fold_note",
    "fold_problems",
    "out_of_sample_many",
    "predict",
    "spec_label",
    "start_out_of_sample",
]
