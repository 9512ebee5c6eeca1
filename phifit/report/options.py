"""What the report's analysis computes: :class:`AnalysisOptions`.

Its own module so that :mod:`phifit.report.analysis` (which runs the stages) and
:mod:`phifit.report.stages` (whose stages read the options) both import it without importing
each other; ``from phifit.report.analysis import AnalysisOptions`` still works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import defaults
from ..bootstrap.sequential import DEFAULT_RULE, StopRule
from ..fitters.parallel import check_backend
from ..serialize import JsonIO, to_plain

__all__ = ["AnalysisOptions"]


@dataclass(frozen=True)
class AnalysisOptions(JsonIO):
    """What the analysis computes.

    n_boot: block-bootstrap replicates (0: none); n_starts: random starts of the main
    Huber fit (and of the restricted fits); bayes: add the Bayesian posterior; seed: seeds
    every random step; n_jobs: workers for the bootstrap (None: the cores this process may
    use, :func:`phifit.defaults.workers`); baseline: the baseline recipe
    when the table has a ``variant`` column (default: chosen by :mod:`phifit.recipes.delta`);
    level: of every bootstrap interval (the fit's ``ci_level``, the frontier bands, the
    equivalence table, Δφ); n_wild: replicates of the restricted wild cluster bootstrap
    tests (phi = 0, phi = 1, a shared phi across recipes; 0: the chi-square tests decide);
    wild_all: run each to n_wild replicates (default False: a test stops once p's side of 0.05 is
    settled, :mod:`phifit.bootstrap.sequential`, also at each phi_0 of the test-inverted set).
    plan: also plan a design with the table as the pilot (:func:`phifit.plan.plan_from_fit`):
    "self" (the table's own runs, to see what its design could measure), "paper", a sweep spec
    or a CSV of planned runs; None: no plan.  plan_tables: simulated tables of the plan (0:
    the asymptotic prediction only); plan_misfit (default True): the plan carries the table's
    (budget, r) cell-mean residuals, the law's misfit (``phifit plan --misfit``).  backend,
    scheduler: where the bootstrap, the wild tests and the plan's simulated tables run
    (:mod:`phifit.fitters.parallel`; None: worker processes forked once for the whole analysis,
    :func:`~phifit.fitters.parallel.shared_workers`, or joblib's where fork is unavailable;
    "dask" with the scheduler's address for a cluster).  rounds: the round log of an adaptive sweep to show
    (None: the log beside the table, ``RUNS.csv.d/adaptive.jsonl``, when there is one).
    """

    n_boot: int = defaults.N_BOOT
    n_starts: int = defaults.N_STARTS
    bayes: bool = False
    seed: int = defaults.SEED
    n_jobs: int | None = None
    baseline: str | None = None
    level: float = defaults.LEVEL
    n_wild: int = defaults.N_WILD
    wild_all: bool = False
    plan: str | None = None
    plan_tables: int = 0
    plan_misfit: bool = True
    backend: str | None = None
    scheduler: str | None = None
    rounds: str | None = None

    def __post_init__(self) -> None:
        check_backend(self.backend, self.scheduler)
        if not 0 < self.level < 1:
            raise ValueError(f"interval level must be in (0, 1), got {self.level}")
        if self.n_boot < 0 or (0 < self.n_boot < 2):
            raise ValueError(f"bootstrap replicates must be 0 (none) or >= 2, got {self.n_boot}")
        if self.n_starts < 1:
            raise ValueError(f"starts must be >= 1, got {self.n_starts}")
        if self.n_wild and self.n_wild < defaults.N_WILD_MIN:
            raise ValueError(
                f"wild bootstrap replicates must be 0 (off) or >= {defaults.N_WILD_MIN}, got {self.n_wild}"
            )
        if self.plan_tables < 0 or self.plan_tables == 1:
            raise ValueError(f"plan tables must be 0 (asymptotic only) or >= 2, got {self.plan_tables}")

    @property
    def wild_stop(self) -> StopRule | None:
        """The stop rule of the wild tests (None: each runs all ``n_wild`` replicates)."""
        return None if self.wild_all else DEFAULT_RULE

    @property
    def parallel(self) -> dict[str, Any]:
        """Where parallel work runs, as the keywords every parallel call takes:
        ``n_jobs``, ``backend`` and ``scheduler``."""
        return {"n_jobs": self.n_jobs, "backend": self.backend, "scheduler": self.scheduler}

    def to_dict(self) -> dict[str, Any]:
        """The options as plain JSON types (``results.json["options"]``)."""
        return to_plain(dict(self.__dict__))
