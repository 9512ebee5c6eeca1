"""Defaults of every analysis, in one place: starts, replicates, draws, level and workers.

Every function and CLI flag that takes one of these reads it from here, so a user (or a test)
sees one number and changes it in one place.

- ``N_STARTS = 500``: random starts of the multi-start Huber fit, uniform in the box (the
  reference study: 500, L-BFGS-B);
- ``N_BOOT = 1000``: block-bootstrap replicates for an interval (the study used 200);
- ``N_WILD = 999``: wild cluster bootstrap replicates of a test (p-values in steps of 1/1000);
- ``N_WILD_MIN = 19``: the fewest wild replicates a test accepts (0 turns a test off): with B
  replicates p = (1 + #{T* >= T}) / (1 + B) is at least 1 / (1 + B), 0.05 at B = 19, the
  least that reaches the 5% level (a rejection, p < 0.05, needs B >= 20);
- ``LEVEL = 0.95``: the level of every interval;
- ``SEED = 0``: the seed when none is given (results are reproducible by default);
- ``N_DRAWS = 2000``, ``N_TUNE = 1000``, ``N_CHAINS = 4``: posterior draws and warm-up steps
  per chain, and chains, of the Bayesian fit (2000 draws: with the cell effects, 1000 left the
  bulk or tail ESS below 400 on 3 of 8 tables of the 12-cell CPU design, 2000 on none of 10);
- ``TARGET_ACCEPT = 0.99``: NUTS target acceptance rate of the Bayesian fit (on tables of the
  12-cell CPU design with cell-shared noise, 0.9 left divergences on 6 of 8, 0.97 on 8 of 58;
  0.99 removed them on 5 of 6 of those with 1-5, though over 150 tables convergence stayed
  at 85%, as at 0.97: docs/calibration.md);
- ``CONSISTENCY_STARTS = 100``: random starts of each subset refit of the consistency diagnostic;
- ``PARTS_N_BOOT = 39``: cell-bootstrap replicates per left-out part of the leave-one-part-out
  analysis (:mod:`phifit.diagnostics.parts`: few, since each of the table's parts is refitted
  and bootstrapped in turn, as timed in docs/benchmarks.md, 'Figures once kept in docstrings';
  its 95% ends are then about the extremes of 39, each with its Monte-Carlo error);
- ``PLAN_TABLES = 100``, ``PLAN_N_BOOT = 100``, ``PLAN_N_WILD = 39``, ``PLAN_N_STARTS = 200``: a
  planner simulation's tables, and each table's bootstrap replicates, wild replicates and starts
  (smaller than an analysis's: many tables are analysed, and only their spread is read);
- ``PLAN_MISFIT_MODEL = "auto"``: how a plan carries a pilot's misfit (one of
  ``PLAN_MISFIT_MODELS``): the pilot's cell curves in model size where they cover every planned
  run, else a level per (budget, r) cell (:func:`phifit.plan.inputs.design_misfit`);
- ``HUBER_DELTA = 1e-3``: the Huber threshold on log-loss residuals of the reference objective
  (the study's delta; :data:`phifit.fitters.objective.DELTA` is the same number);
- ``BACKEND = "fork"``: refits run in worker processes forked from this one (joblib's loky
  processes where fork is unavailable or other threads run: :mod:`phifit.fitters.parallel`);
- :func:`workers`: the worker processes parallel work uses by default, the cores this process
  may run on (``os.sched_getaffinity`` where the platform has it, else ``os.cpu_count()``).
"""

from __future__ import annotations

import os

N_STARTS = 500
N_BOOT = 1000
N_WILD = 999
N_WILD_MIN = 19
LEVEL = 0.95
SEED = 0
N_DRAWS = 2000
N_TUNE = 1000
TARGET_ACCEPT = 0.99
N_CHAINS = 4
HUBER_DELTA = 1e-3
CONSISTENCY_STARTS = 100
PARTS_N_BOOT = 39
PLAN_TABLES = 100
PLAN_N_BOOT = 100
PLAN_N_WILD = 39
PLAN_N_STARTS = 200
PLAN_MISFIT_MODEL = "auto"
PLAN_MISFIT_MODELS = ("auto", "level", "shape")
BACKEND = "fork"
#: the backends phifit accepts (``dask`` needs ``dask.distributed`` and a running cluster)
BACKENDS = ("fork", "loky", "threading", "sequential", "dask")


def workers() -> int:
    """The cores this process may use: ``len(os.sched_getaffinity(0))`` (Linux; respects
    ``taskset`` and container CPU sets), else ``os.cpu_count()``, at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        n = os.cpu_count() or 1
    return max(1, int(n))


def resolve_workers(n_jobs: int | None) -> int:
    """``n_jobs`` as a worker count: None -> :func:`workers`; a positive count as given;
    a negative count as joblib reads it (-1 = all cores, -2 = all but one)."""
    if n_jobs is None:
        return workers()
    n = int(n_jobs)
    if n == 0:
        raise ValueError("n_jobs must be a positive worker count, a negative joblib count, or None")
    return n if n > 0 else max(1, workers() + 1 + n)


__all__ = [
    "BACKEND",
    "BACKENDS",
    "CONSISTENCY_STARTS",
    "HUBER_DELTA",
    "LEVEL",
    "N_BOOT",
    "N_CHAINS",
    "N_DRAWS",
    "N_STARTS",
    "N_TUNE",
    "TARGET_ACCEPT",
    "N_WILD",
    "N_WILD_MIN",
    "PLAN_N_BOOT",
    "PLAN_N_STARTS",
    "PLAN_N_WILD",
    "PLAN_TABLES",
    "SEED",
    "resolve_workers",
    "workers",
]
