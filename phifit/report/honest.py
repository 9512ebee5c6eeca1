"""The honest answer in one call: ``phifit.answer(runs)`` -> :class:`Answer`.

:func:`answer` runs the report's analysis (:func:`phifit.report.analysis.analyse`: the Huber
fit, the cell block bootstrap, the tests of phi = 0 and phi = 1, the free multipliers m_r with
the lack-of-fit test of r^phi, the drift of phi, the diagnostics and the derived quantities)
without drawing a figure or writing a file, and words its result with the report's own
:func:`phifit.report.write.headline`.  So :meth:`Answer.summary` leads with the sentence the
report's page opens with, for the same table and settings: when phi's test-inverted set (or its
percentile interval) spans the whole search box, that phi is not determined, before any number
(:func:`answer_headline`); when the lack-of-fit test rejects
r^phi, that phi summarises a law that does not hold here; then, when one token count leaves B,
beta and E unseparated, that (the lack-of-fit test runs there too, with B and beta held in both
of its laws); then phi with its interval, R^2, RMSE, the verdicts on phi = 0 and phi = 1, and
every warning of every step.

Every step runs, not only those the headline quotes, because the headline lists every warning
(the diagnostics' and the drift's included) and a lighter analysis would word a different
answer.  It costs what the report's analysis costs (the default settings: 1000 replicates, 999
wild replicates, 500 starts); small settings (``n_boot=50``, ``n_wild`` at its minimum
:data:`phifit.defaults.N_WILD_MIN`, ``n_starts=50``, one worker) cut it down (timings in
docs/benchmarks.md, 'Figures once kept in docstrings').
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from .. import defaults
from ..runs.recipes import select_recipe
from ..runs.table import RunTable, as_runs
from .analysis import Analysis, AnalysisOptions, analyse
from .write import headline

__all__ = ["Answer", "answer", "answer_headline"]


@dataclass(frozen=True)
class Answer:
    """What the table says, as the report's headline words it, with the results behind it.

    ``headline``: the report's headline (:func:`phifit.report.write.headline`), one statement per
    line; ``analysis``: every result of the analysis (:class:`phifit.report.analysis.Analysis`;
    ``write_report(answer.analysis, DIR)`` writes the report page from it without recomputing).
    ``fit``, ``bootstrap``, ``comparison``, ``lack_of_fit`` and ``cautions`` are the analysis'
    (None where a step did not apply: no bootstrap with phi on its search bound, no comparison
    or lack-of-fit test when phi is not identifiable; on one token count the lack-of-fit test
    holds B and beta where the fit holds them).
    """

    analysis: Analysis
    headline: str

    @property
    def fit(self):
        """The Huber fit, with the bootstrap's intervals attached when one ran (FitResult)."""
        return self.analysis.fit

    @property
    def bootstrap(self):
        """The cell block bootstrap (BootstrapResult), or None."""
        return self.analysis.bootstrap

    @property
    def comparison(self):
        """The restricted fits phi = 0 and phi = 1 with their tests (Comparison), or None."""
        return self.analysis.comparison

    @property
    def lack_of_fit(self):
        """The free multipliers m_r against r^phi and the lack-of-fit test of r^phi
        (MultiplierFit: ``p_value``, ``rejected``, ``testable``, ``rows()``), or None."""
        return self.analysis.multipliers

    @property
    def parts(self):
        """Does the answer rest on one part of the table? The leave-one-part-out refits
        (PartsResult: ``headline``, ``carrying``, ``to_frame()``), or None without a bootstrap
        interval of a free phi."""
        return self.analysis.parts

    @property
    def cautions(self):
        """Every caution of every step, in order, without repeats."""
        return self.analysis.cautions

    def summary(self) -> str:
        """The headline, then the fit's summary (:meth:`phifit.FitResult.summary`)."""
        return f"{self.headline}\n\n{self.fit.summary()}"

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        first = self.headline.split("\n", 1)[0]
        first = first if len(first) <= 120 else first[:117] + "..."
        return f"Answer(n_runs={self.fit.n_runs}, headline={first!r})"

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.summary())}</pre>"


def answer(
    runs: RunTable | pd.DataFrame,
    *,
    n_boot: int = defaults.N_BOOT,
    seed: int = defaults.SEED,
    n_starts: int = defaults.N_STARTS,
    n_wild: int = defaults.N_WILD,
    level: float = defaults.LEVEL,
    n_jobs: int | None = None,
    recipe: str | None = None,
    baseline: str | None = None,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> Answer:
    """Fit, bootstrap, test phi = 0 / phi = 1 and the lack of fit of r^phi, and say what it means.

    ``runs`` is a :class:`~phifit.RunTable` or a DataFrame of runs.  The keywords are the
    report's (``phifit report --bootstrap --seed --starts --wild --level --jobs --baseline``):
    n_boot block-bootstrap replicates (0: none), the seed of every random step, random starts
    of each fit, n_wild wild cluster bootstrap replicates of each test (0: chi-square tests),
    the interval level and workers (None: the cores this process may use); any other keyword is a
    field of :class:`~phifit.report.analysis.AnalysisOptions` (``backend``, ``scheduler``,
    ``plan``, ...).  ``progress`` receives one line as each stage starts.

    A table whose ``variant`` column holds several recipes is never pooled into one law: the
    single-law steps analyse ``recipe`` and the other recipes are compared with it (Δφ, as the
    report's ``--baseline``).  By default that is the recipe "baseline", and a table with none
    is refused with ``ValueError``, as the command line's ``--variant`` refuses it
    (:func:`phifit.recipes.pairing.select_recipe`).  ``baseline`` is the older name of
    ``recipe``.

    Returns an :class:`Answer` whose :meth:`~Answer.summary` leads with the report's headline
    for the same table and settings.

    Examples
    --------
    >>> import phifit
    >>> runs = phifit.load_runs("data/looped_study_runs_digitized.csv")
    >>> print(phifit.answer(runs, n_boot=1000, seed=0).summary())  # doctest: +SKIP
    """
    named = {"n_boot", "seed", "n_starts", "n_wild", "level", "n_jobs", "baseline"}
    known = sorted({f.name for f in fields(AnalysisOptions)} - named)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; expected one of {', '.join(known)}")
    if recipe is not None and baseline is not None and str(recipe) != str(baseline):
        raise ValueError(
            f"recipe={recipe!r} and baseline={baseline!r}: give one (baseline is its older name)"
        )
    baseline = recipe if recipe is not None else baseline
    runs = as_runs(runs)
    select_recipe(runs, baseline)  # a mixed table without the recipe asked for is refused here
    opts = AnalysisOptions(
        n_boot=n_boot,
        seed=seed,
        n_starts=n_starts,
        n_wild=n_wild,
        level=level,
        n_jobs=n_jobs,
        baseline=baseline,
        **options,
    )
    analysis = analyse(runs, opts, progress=progress)
    return Answer(analysis=analysis, headline=answer_headline(analysis))


def answer_headline(analysis: Analysis) -> str:
    """The report's headline (:func:`phifit.report.write.headline`, the lines ``phifit report``
    prints): led, when nothing about phi is determined (its test-inverted set or its percentile
    interval spans the search box: :func:`phifit.report.sections_fit.phi_undetermined`), by the
    line that says so, the best-fitting phi then named as such, not as the answer."""
    return headline(analysis)
