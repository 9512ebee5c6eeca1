"""The two checks of phi after a fit, with the guards that decide whether they run.

- :func:`multiplier_check`: one free multiplier per looped r against r^phi, with the lack-of-fit
  test of r^phi (:func:`phifit.diagnostics.multipliers.fit_multipliers`);
- :func:`drift_check`: the drift of phi with compute, phi(C) = phi_0 + phi_1 log(C / C_ref),
  with the test of phi_1 = 0 (:func:`phifit.diagnostics.drift.fit_drift`).

The report (:mod:`phifit.report.analysis`), ``phifit compare`` and ``phifit diagnose`` call these,
so a table gets the same checks, or the same absence of them, from all three.  Each returns None
when its guard says the check does not apply; a check that applies but cannot be read on the
table (too few r, budgets, runs or cells) returns its result with ``testable`` False and the
reason.

:func:`multiplier_setup` and :func:`drift_setup` are their first parts (the same guards): the
point fits and the bootstrap's weights, whose refits (the cell bootstrap's chunks and the wild
test) a caller with workers runs as tasks of its own, as the report does; ``setup.finish``
gathers them, with the numbers of the one-piece check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .. import defaults

if TYPE_CHECKING:  # the checks' modules load when a check runs
    from ..bootstrap.sequential import StopRule
    from ..result import FitResult
    from ..runs.table import RunTable
    from .drift import DriftSetup
    from .drift_result import DriftFit
    from .multiplier_result import MultiplierFit
    from .multipliers import MultiplierSetup

__all__ = ["CheckSetup", "drift_check", "drift_setup", "multiplier_check", "multiplier_setup"]


@runtime_checkable
class CheckSetup(Protocol):
    """What :func:`multiplier_setup` and :func:`drift_setup` return when the check can run
    (:class:`~phifit.diagnostics.multipliers.MultiplierSetup`,
    :class:`~phifit.diagnostics.drift.DriftSetup`): the point fits done, the refits still to run.
    ``boot_tasks()``: the cell bootstrap's chunks, as argument tuples of
    :func:`~phifit.diagnostics.multipliers.refit_weighted_rows`; ``wild_test()``: the test
    (``n_wild`` replicates; none when 0); ``finish(chunks, wild)``: the check's result from their
    results, those of the one-piece check.
    :func:`~phifit.diagnostics.multipliers.finish_check` runs the rest in one call."""

    n_wild: int

    def boot_tasks(self) -> list[tuple]: ...

    def wild_test(self, parallel: dict[str, Any] | None = None) -> Any: ...

    def finish(self, chunk_results: list[tuple], wild: Any) -> Any: ...


def _finished(setup: Any, **where: Any) -> Any:
    """A check's result from what its setup returned: None (the check does not apply) and a
    result (untestable on the table) as they are; a :class:`CheckSetup` run to its end by
    :func:`~phifit.diagnostics.multipliers.finish_check` on ``where`` (n_jobs, backend, scheduler)."""
    if not isinstance(setup, CheckSetup):
        return setup
    from .multipliers import finish_check

    return finish_check(setup, **where)


def multiplier_check(
    runs: RunTable,
    law: FitResult,
    *,
    method: str = "huber",
    n_boot: int = defaults.N_BOOT,
    n_wild: int = defaults.N_WILD,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    n_starts: int = defaults.N_STARTS,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    wild_stop: StopRule | None = None,
    progress: Callable[[str], None] | None = None,
) -> MultiplierFit | None:
    """The free multipliers m_r against r^phi and the lack-of-fit test of r^phi, or None.

    Guard: the check runs when ``runs.phi_identifiable`` (some looped runs, r taking two values
    or more) and ``law`` does not hold phi fixed.  Why these two and no other:

    - phi identifiable, not merely "the table is looped": a looped table at a single r has no
      r^phi curve to test, and a law fitted to it has no phi; the check would only add a note
      that it cannot be tested, beside the fit's own note that phi is not identified.  The
      report required this and ``phifit diagnose`` too; ``phifit compare`` asked only for a
      looped table, and now asks the same.
    - phi free in the law: the test is of r^phi against one phi per r; with phi held (``phifit
      diagnose --fix phi=...``) there is no fitted r^phi to test.
    - other held parameters do not stop it: both laws hold them at the law's values
      (:func:`~phifit.diagnostics.multipliers.fit_multipliers`, held parameters).  The report
      and ``phifit diagnose`` skipped the check whenever the law held anything, which on a
      table at one token count (B and beta held) meant no lack-of-fit test at all.

    ``progress`` receives one line when the check runs.  The other keywords are
    :func:`~phifit.diagnostics.multipliers.fit_multipliers`'.
    """
    setup = multiplier_setup(
        runs,
        law,
        method=method,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        level=level,
        n_starts=n_starts,
        wild_stop=wild_stop,
        progress=progress,
    )
    return _finished(setup, n_jobs=n_jobs, backend=backend, scheduler=scheduler)


def multiplier_setup(
    runs: RunTable,
    law: FitResult,
    *,
    method: str = "huber",
    n_boot: int = defaults.N_BOOT,
    n_wild: int = defaults.N_WILD,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    n_starts: int = defaults.N_STARTS,
    wild_stop: StopRule | None = None,
    progress: Callable[[str], None] | None = None,
) -> MultiplierSetup | MultiplierFit | None:
    """The first part of :func:`multiplier_check` (same guard, same keywords): None when the
    check does not apply; else :func:`phifit.diagnostics.multipliers.setup_multipliers`' point
    fits and bootstrap weights (a :class:`~phifit.diagnostics.multipliers.MultiplierSetup`, whose
    refits a caller with workers runs as tasks of its own), or the untestable
    :class:`MultiplierFit`."""
    if not runs.phi_identifiable or "phi" in law.fixed:
        return None
    from .multipliers import setup_multipliers

    if progress is not None:
        progress(
            f"free multipliers m_r against r^phi ({n_boot} cell-bootstrap replicates, "
            f"{n_wild} wild replicates of the lack-of-fit test)"
        )
    return setup_multipliers(
        runs,
        law,
        method=method,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        level=level,
        n_starts=n_starts,
        wild_stop=wild_stop,
    )


def drift_check(
    runs: RunTable,
    law: FitResult,
    *,
    method: str = "huber",
    n_boot: int = defaults.N_BOOT,
    n_wild: int = defaults.N_WILD,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    n_starts: int = defaults.N_STARTS,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    wild_stop: StopRule | None = None,
    progress: Callable[[str], None] | None = None,
) -> DriftFit | None:
    """The drift of phi with compute and the test of phi_1 = 0, or None.

    Guard: the check runs when ``runs.phi_identifiable`` and ``law`` holds no parameter fixed.

    - phi identifiable, as for :func:`multiplier_check`: without a phi there is no drift of it
      to estimate.  ``phifit diagnose`` did not ask this and printed a drift that "cannot be
      tested" on such tables; the report did ask it.
    - nothing held: the drift law is fitted with every parameter free
      (:func:`~phifit.diagnostics.drift.fit_drift` refuses a law with held parameters), so a
      law with any held parameter (B and beta at one token count, or a ``--fix``) gets no drift
      check.  A table at one token count rarely spans the three budgets a drift needs; holding
      parameters in the drift law, as the multipliers do, is left for when one does.

    ``progress`` receives one line when the check runs.  The other keywords are
    :func:`~phifit.diagnostics.drift.fit_drift`'.
    """
    setup = drift_setup(
        runs,
        law,
        method=method,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        level=level,
        n_starts=n_starts,
        wild_stop=wild_stop,
        progress=progress,
    )
    return _finished(setup, n_jobs=n_jobs, backend=backend, scheduler=scheduler)


def drift_setup(
    runs: RunTable,
    law: FitResult,
    *,
    method: str = "huber",
    n_boot: int = defaults.N_BOOT,
    n_wild: int = defaults.N_WILD,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    n_starts: int = defaults.N_STARTS,
    wild_stop: StopRule | None = None,
    progress: Callable[[str], None] | None = None,
) -> DriftSetup | DriftFit | None:
    """The first part of :func:`drift_check` (same guard, same keywords): None when the check
    does not apply; else :func:`phifit.diagnostics.drift.setup_drift`'s point fits and bootstrap
    weights (a :class:`~phifit.diagnostics.drift.DriftSetup`, whose refits a caller with
    workers runs as tasks of its own), or the untestable :class:`DriftFit`."""
    if not runs.phi_identifiable or law.fixed:
        return None
    from .drift import setup_drift

    if progress is not None:
        progress(
            f"drift of phi with compute ({n_boot} cell-bootstrap replicates, "
            f"{n_wild} wild replicates of the test of phi_1 = 0)"
        )
    return setup_drift(
        runs,
        law,
        method=method,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        level=level,
        n_starts=n_starts,
        wild_stop=wild_stop,
    )
