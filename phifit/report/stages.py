"""The stages of the report's analysis, one function each; :func:`phifit.report.analysis.analyse`
runs them in order.

Each stage calls the statistical modules (it computes nothing they compute), prints one progress
line when it runs, times itself into ``Stages.timings`` and adds the analysis' own notes (what it
skipped and why) to ``Stages.own``, in the order the stages run.  The free multipliers and the
drift of phi are :mod:`phifit.diagnostics.phi_checks`' (their guards are shared with ``phifit
compare`` and ``phifit diagnose``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import defaults
from ..cautions import Caution, caution
from ..result import FitResult
from ..runs.table import RunTable

if TYPE_CHECKING:
    from ..diagnostics.identifiability import ProfilePlan
    from .options import AnalysisOptions

#: Points of the dense budget grid of the frontier figure.
CURVE_POINTS = 48

#: The report's budget for the test-inverted set: the comparison's own replicates and seed per
#: tested phi_0 (so the set and the tests of phi = 0 / phi = 1 agree where both are tested), at
#: most 8 tested phi_0, ends placed to 0.25 where p hovers at the level (``phifit fit
#: --wild-ci`` searches further: :func:`phifit.bootstrap.inverted.phi_confidence_set`).
REPORT_INVERT = {"max_tests": 8, "flat_width": 0.25}


@dataclass
class Stages:
    """What every stage shares: the options, the progress line, the timings and the analysis'
    own cautions (notes on what it skipped, in the order the stages add them)."""

    options: AnalysisOptions
    say: Callable[[str], None] = lambda _msg: None
    timings: dict[str, float] = field(default_factory=dict)
    own: list[Caution] = field(default_factory=list)

    def note(self, kind: str, message: str, **values: Any) -> None:
        """Add a note of source "analysis"."""
        self.own.append(caution("analysis", kind, message, level="note", **values))

    def timed(self, key: str, func: Callable, *args, **kwargs):
        """``func(*args, **kwargs)``, its wall time in ``timings[key]`` (not when it returns None:
        a check whose guard says it does not apply)."""
        t0 = time.perf_counter()
        out = func(*args, **kwargs)
        if out is not None:
            self.timings[key] = round(time.perf_counter() - t0, 3)
        return out

    @property
    def check_options(self) -> dict[str, Any]:
        """The keywords of the phi checks (:mod:`phifit.diagnostics.phi_checks`): the analysis'
        replicates, seed, level and starts, in this process (``n_jobs=1``: on the study's table
        their refits take seconds, less than worker start-up costs)."""
        o = self.options
        return {
            "n_boot": o.n_boot,
            "n_wild": o.n_wild,
            "wild_stop": o.wild_stop,
            "seed": o.seed,
            "level": o.level,
            "n_starts": o.n_starts,
            "n_jobs": 1,
            "progress": self.say,
        }


def recipes_stage(runs: RunTable, st: Stages) -> tuple[RunTable, Any]:
    """(the runs the single-law stages analyse, the recipe comparison or None): a table with
    several recipes in its ``variant`` column is compared whole
    (:func:`phifit.recipes.compare_recipes`) and analysed at its baseline recipe."""
    if "variant" not in runs.frame or runs.frame["variant"].nunique() < 2:
        return runs, None
    from ..recipes.delta import compare_recipes, select_recipe

    o, n_recipes = st.options, runs.frame["variant"].nunique()
    st.say(f"recipes: joint fit and paired bootstrap of {n_recipes} recipes ({o.n_boot} replicates)")
    recipes = st.timed(
        "recipes",
        compare_recipes,
        runs,
        by="variant",
        baseline=o.baseline,
        n_boot=o.n_boot,
        seed=o.seed,
        n_starts=o.n_starts,
        **o.parallel,
        progress=False,
        level=o.level,
    )
    main_runs = select_recipe(runs, recipes.baseline).runs
    st.note(
        "recipe_selected",
        f"the table holds {n_recipes} recipes; the main sections analyse the baseline "
        f"'{recipes.baseline}' ({len(main_runs)} runs)",
        baseline=str(recipes.baseline),
        n_runs=len(main_runs),
    )
    return main_runs, recipes


def fit_stage(runs: RunTable, st: Stages) -> FitResult:
    """The Huber fit (:func:`phifit.fitters.huber.fit_huber`) with the analysis' starts and seed."""
    from ..fitters.huber import HuberOptions, fit_huber

    st.say(f"fitting the law to {len(runs)} runs ({st.options.n_starts} starts)")
    options = HuberOptions(n_starts=st.options.n_starts, seed=st.options.seed)
    return st.timed("fit", fit_huber, runs, options=options)


def bootstrap_stage(runs: RunTable, fit: FitResult, st: Stages) -> Any:
    """The block bootstrap of the fit (:func:`phifit.bootstrap.block_bootstrap`), or None: when
    it is turned off, when phi sits on its search bound (no valid interval: a note says so) or
    when the fit holds a parameter the table does identify."""
    return finish_bootstrap(start_bootstrap(runs, fit, st), st)


@dataclass
class PendingStage:
    """A stage started on the workers: its result-to-be (an object with ``result()``) and when it
    started (for its timing)."""

    pending: Any
    started: float


def start_bootstrap(runs: RunTable, fit: FitResult, st: Stages) -> PendingStage | None:
    """Start :func:`bootstrap_stage`'s block bootstrap
    (:func:`phifit.bootstrap.block.start_block_bootstrap`: with workers its refits run while this
    process goes on), or say why there is none and return None; :func:`finish_bootstrap` ends it."""
    o = st.options
    if o.n_boot and fit.phi is not None and "phi" in fit.at_bounds:
        st.note(
            "phi_on_bound",
            f"phi sits on the bound of its search box (phi = {fit.phi:.3g}): the table does not locate "
            "phi, and the bootstrap of an estimate on its boundary is not a valid interval (Andrews 2000, "
            "Econometrica 68(2)), so none was run; the diagnostics' profile bounds phi from one side",
            phi=fit.phi,
        )
    elif o.n_boot and all(name in fit.unidentified for name in fit.fixed):
        from ..bootstrap.block import start_block_bootstrap

        st.say(f"block bootstrap ({o.n_boot} replicates, {defaults.resolve_workers(o.n_jobs)} workers)")
        t0 = time.perf_counter()
        pending = start_block_bootstrap(
            runs, fit, n_boot=o.n_boot, seed=o.seed, **o.parallel, progress=False, level=o.level
        )
        return PendingStage(pending, t0)
    elif not o.n_boot:
        st.note("no_bootstrap", "bootstrap turned off (n_boot = 0): no intervals")
    return None


def finish_bootstrap(started: PendingStage | None, st: Stages) -> Any:
    """The bootstrap :func:`start_bootstrap` started (None: none), once its refits are done; its
    timing runs from its start (other stages may have run beside it)."""
    if started is None:
        return None
    boot = started.pending.result()
    st.timings["bootstrap"] = round(time.perf_counter() - started.started, 3)
    return boot


def phi_shares(fit: FitResult, boot: Any) -> dict[str, float] | None:
    """The shares of bootstrap replicates with phi <= 0 and phi >= 1 (None without them)."""
    if boot is None or fit.phi is None:
        return None
    return {"le0": boot.share("phi", lambda v: v <= 0), "ge1": boot.share("phi", lambda v: v >= 1)}


def comparison_stage(runs: RunTable, free_fit: FitResult, st: Stages) -> Any:
    """The restricted fits phi = 0 and phi = 1 with their tests
    (:func:`phifit.compare.compare_fits`) when phi is identifiable, else None."""
    if not runs.phi_identifiable:
        return None
    from ..compare.restricted import compare_fits

    o = st.options
    n_budgets = runs.frame["budget"].nunique() if "budget" in runs.frame else 0
    st.say(
        "restricted fits phi = 0 and phi = 1, "
        + (
            "with leave-one-budget-out refits"
            if n_budgets >= 3
            else f"without leave-one-budget-out refits ({n_budgets} budget(s); they need 3)"
        )
    )
    return st.timed(
        "comparison",
        compare_fits,
        runs,
        free_fit,
        seed=o.seed,
        n_starts=o.n_starts,
        n_wild=o.n_wild,
        wild_stop=o.wild_stop,
        **o.parallel,
    )


def interval_and_tests_disagree(fit: FitResult, comparison: Any) -> str | None:
    """Why phi's percentile interval and the wild tests of phi = 0 / phi = 1 read differently
    (None: they agree), which is when the report computes the test-inverted set of phi
    (:func:`phifit.bootstrap.inverted.phi_confidence_set`): a restriction rejected although the
    interval contains it, one not rejected although the interval excludes it, or an interval
    reaching phi's search box."""
    iv = (fit.ci or {}).get("phi")
    if comparison is None or not iv or None in iv:
        return None
    lo, hi = iv
    box = fit.bounds.get("phi") if isinstance(fit.bounds, dict) else None
    if box is not None and (lo <= box[0] + 1e-6 or hi >= box[1] - 1e-6):
        return "the percentile interval reaches phi's search box"
    for label, value in (("phi=0", 0.0), ("phi=1", 1.0)):
        st = comparison.stats.get(label)
        if st is None or st.undecided or st.rejected is None:
            continue
        inside = lo <= value <= hi
        if st.rejected and inside:
            return f"phi = {value:g} is rejected although the percentile interval contains it"
        if not st.rejected and not inside:
            return f"phi = {value:g} is not rejected although the percentile interval excludes it"
    return None


def inverted_stage(runs: RunTable, fit: FitResult, boot: Any, comparison: Any, st: Stages) -> Any:
    """The test-inverted set of phi (:func:`phifit.bootstrap.inverted.phi_confidence_set`, at
    :data:`REPORT_INVERT`) when the percentile interval and the wild tests disagree
    (:func:`interval_and_tests_disagree`), phi is free and wild tests run; else None."""
    o = st.options
    disagree = interval_and_tests_disagree(fit, comparison)
    if boot is None or not disagree or "phi" in fit.fixed or not o.n_wild:
        return None
    from ..bootstrap.inverted import phi_confidence_set

    st.say(
        f"test-inverted set of phi ({'' if o.wild_all else 'up to '}{o.n_wild} wild replicates per "
        f"tested phi_0, at most "
        f"{REPORT_INVERT['max_tests']} phi_0): {disagree}"
    )
    return st.timed(
        "phi_inverted",
        phi_confidence_set,
        runs,
        fit,
        seed=o.seed,
        n_jobs=o.n_jobs,
        n_boot=o.n_wild,
        stop=not o.wild_all,
        **REPORT_INVERT,
    )


def _run_check(func: Callable, args: tuple, kwargs: dict[str, Any]) -> tuple[Any, float, list[str]]:
    """``func(*args, **kwargs)`` with its wall time and the progress lines it said (a task of
    :func:`checks_stage`, in a worker process or in this one)."""
    lines: list[str] = []
    if "progress" in kwargs:
        kwargs = {**kwargs, "progress": lines.append}
    t0 = time.perf_counter()
    out = func(*args, **kwargs)
    return out, time.perf_counter() - t0, lines


def checks_stage(runs: RunTable, free_fit: FitResult, fit: FitResult, st: Stages) -> tuple[Any, Any, Any]:
    """:func:`start_phi_checks`, :func:`start_diagnostics` and :func:`continue_phi_checks`, then
    :func:`collect_checks`: (free multipliers, drift of phi, diagnostics)."""
    setups = start_phi_checks(runs, free_fit, st)
    diagnostics = start_diagnostics(runs, fit, st)
    return collect_checks(diagnostics, continue_phi_checks(setups, st), st)


@dataclass
class PendingChecks:
    """Checks' tasks (key, function, arguments, keywords), their results as
    :func:`phifit.fitters.parallel.parallel_map` yields them (already running on the workers),
    the plan of the phi profile whose two sides are among the tasks (None: no profile tasks), and
    the checks of phi whose parts the tasks are, by key: each check's setup
    (:func:`continue_phi_checks`), its result when nothing is left to run, or None when it does
    not apply."""

    tasks: list[tuple[str, Callable, tuple, dict[str, Any]]]
    results: Any
    profile: ProfilePlan | None = None
    setups: dict[str, Any] = field(default_factory=dict)


def _start(tasks: list[tuple[str, Callable, tuple, dict[str, Any]]], st: Stages, what: str) -> Any:
    """Start ``tasks`` on up to one worker each (:func:`phifit.fitters.parallel.parallel_map`),
    saying ``what`` runs; with one worker they run when collected."""
    from ..fitters.parallel import parallel_map

    o = st.options
    workers = min(len(tasks), defaults.resolve_workers(o.n_jobs))
    st.say(what + (f", side by side on {workers} workers" if workers > 1 else ""))
    return parallel_map(
        _run_check,
        [(func, args, kwargs) for _, func, args, kwargs in tasks],
        n_jobs=workers,
        backend=o.backend,
        scheduler=o.scheduler,
    )


def start_phi_checks(runs: RunTable, free_fit: FitResult, st: Stages) -> PendingChecks:
    """Start the setups of the two checks of phi (:mod:`phifit.diagnostics.phi_checks`), the
    free multipliers and the drift of phi, on the point fit: their point fits and bootstrap
    weights, a task each (:func:`~phifit.diagnostics.phi_checks.multiplier_setup`,
    :func:`~phifit.diagnostics.phi_checks.drift_setup`).  :func:`continue_phi_checks` then starts
    their refits as tasks of their own, and :func:`collect_checks` gathers them.

    :func:`phifit.report.analysis.analyse` starts them with the diagnostics
    (:func:`start_diagnostics`), whose figures are then drawn while these run.  Started right
    after the fit instead, beside the bootstrap and the comparison, they compete with those two
    for the cores and delay the diagnostics' figures: a small table's report gained, the study's
    lost (measured in docs/benchmarks.md, 'Geodesic finishes'), so they wait.

    Why cut: in one piece, a check whose refits crawl along flat valleys (a 12-run table's
    drift, the study's free multipliers) ran on one worker after the phi profile while the
    other had nothing left to do; cut into the setup, the wild test and the cell bootstrap's
    chunks, they spread over the workers (docs/benchmarks.md, 'The checks of phi cut into
    tasks').  Each task is a pure function of the
    table, the fit and its own seeded draws, so the numbers are those of the one-piece checks
    (:func:`~phifit.diagnostics.phi_checks.multiplier_check`,
    :func:`~phifit.diagnostics.phi_checks.drift_check`)."""
    from ..diagnostics.phi_checks import drift_setup, multiplier_setup

    kw = {k: v for k, v in st.check_options.items() if k != "n_jobs"}
    tasks: list[tuple[str, Callable, tuple, dict[str, Any]]] = [
        ("multipliers", multiplier_setup, (runs, free_fit), kw),
        ("drift", drift_setup, (runs, free_fit), kw),
    ]
    done = _start(tasks, st, "point fits of the free multipliers m_r against r^phi and of the drift of phi")
    return PendingChecks(tasks=tasks, results=done)


def continue_phi_checks(setups: PendingChecks, st: Stages) -> PendingChecks:
    """The setups :func:`start_phi_checks` started, once done, and their refits started: each
    check's wild test and its cell bootstrap's chunks, a task each.  A check that does not apply
    (None) or cannot be tested on the table (its result) has nothing left to run."""
    from ..diagnostics.multipliers import refit_weighted_rows
    from ..diagnostics.phi_checks import CheckSetup

    outs = _collect(setups, st)
    checks = {key: setup for key, setup in outs.items() if isinstance(setup, CheckSetup)}
    # every check's wild test first: they are the longest tasks, and the bootstrap's chunks
    # after them even out the two workers' ends
    tasks: list[tuple[str, Callable, tuple, dict[str, Any]]] = [
        (f"{key}{PART}wild", setup.wild_test, (), {}) for key, setup in checks.items() if setup.n_wild
    ]
    tasks += [
        (f"{key}{PART}boot_{i}", refit_weighted_rows, args, {})
        for key, setup in checks.items()
        for i, args in enumerate(setup.boot_tasks())
    ]
    done = (
        _start(tasks, st, "refits of the free multipliers and the drift (cell bootstraps, wild tests)")
        if tasks
        else iter(())
    )
    return PendingChecks(tasks=tasks, results=done, setups=outs)


#: What separates a check's key from its parts' in the keys of :func:`continue_phi_checks`' tasks.
PART = ":"


def start_diagnostics(runs: RunTable, fit: FitResult, st: Stages) -> PendingChecks:
    """Start the diagnostics (:func:`phifit.diagnostics.diagnose`, on the fit with its intervals;
    its influence refits as a task of their own,
    :func:`~phifit.diagnostics.suite.influence_if_applies`, and the two sides of its phi profile
    as two more, :func:`~phifit.diagnostics.identifiability.profile_side`: on small tables the
    profile and the influence refits are each several seconds).

    Each task is a pure function of the table, the fit and its own seeded draws (the profile's
    starts are drawn here, in the order the one-piece profile draws them), so with two or more
    workers they run side by side (the same numbers as one after the other, which is what one
    worker does).  With workers they start at once and run while this process goes on
    (:func:`collect_checks` waits for them); with one worker they run when collected.  Each
    task's own wall time goes to the timings; the progress lines they say come when they are
    collected."""
    from ..diagnostics.identifiability import PROFILE_SIDES, profile_plan_for, profile_side
    from ..diagnostics.suite import diagnose, influence_if_applies

    o = st.options
    plan = profile_plan_for(runs, fit, seed=o.seed)  # None: the diagnostics draw no profile
    profile_tasks = (
        []
        if plan is None
        else [(f"phi_profile_{side}", profile_side, (plan, side), {}) for side in PROFILE_SIDES]
    )
    skip = ("influence",) if plan is None else ("influence", "profile")
    tasks = [
        *profile_tasks,
        ("diagnostics", diagnose, (runs, fit), {"seed": o.seed, "skip": skip}),
        ("influence", influence_if_applies, (runs, fit), {"seed": o.seed}),
    ]
    done = _start(tasks, st, "diagnostics (residuals, leave-one-out influence, the phi profile)")
    return PendingChecks(tasks=tasks, results=done, profile=plan)


def _collect(pending: PendingChecks, st: Stages) -> dict[str, Any]:
    """The results of ``pending``'s tasks by key, once done (their timings and progress lines
    recorded)."""
    outs: dict[str, Any] = {}
    results = iter(pending.results)
    for key, *_ in pending.tasks:
        out, seconds, lines = next(results)
        for line in lines:
            st.say(line)
        if out is not None:
            st.timings[key] = round(seconds, 3)
        outs[key] = out
    return outs


def collect_checks(
    diagnostics: PendingChecks,
    phi_checks: PendingChecks,
    st: Stages,
    on_diagnostics: Callable[[Any], None] | None = None,
) -> tuple[Any, Any, Any]:
    """(free multipliers, drift of phi, diagnostics) of :func:`start_diagnostics`' and
    :func:`continue_phi_checks`' tasks, once done (the diagnostics with their influence refits and
    phi profile attached).  The diagnostics come first: ``on_diagnostics(diagnostics)`` is called
    as soon as they are complete, while the free multipliers and the drift may still be running."""
    from ..diagnostics.identifiability import attach_profile

    outs = _collect(diagnostics, st)
    diag = dataclasses.replace(outs["diagnostics"], influence=outs["influence"])
    if diagnostics.profile is not None:
        sides = [outs[k] for k in outs if k.startswith("phi_profile_")]
        ident = attach_profile(diag.identifiability, diagnostics.profile, sides)
        diag = dataclasses.replace(diag, identifiability=ident)
    if on_diagnostics is not None:
        on_diagnostics(diag)
    parts = _collect(phi_checks, st)
    checks = {key: _finish_check(key, setup, parts, st) for key, setup in phi_checks.setups.items()}
    return checks["multipliers"], checks["drift"], diag


def _finish_check(key: str, setup: Any, parts: dict[str, Any], st: Stages) -> Any:
    """The check ``key`` from its setup and its parts' results (:func:`continue_phi_checks`);
    its timing is its setup's and its parts' seconds together, the work of the one-piece check
    (the parts' own timings are dropped)."""
    from ..diagnostics.phi_checks import CheckSetup

    mine = {k: v for k, v in parts.items() if k.startswith(key + PART)}
    seconds = sum(st.timings.pop(k, 0.0) for k in mine)
    if not isinstance(setup, CheckSetup):
        return setup
    st.timings[key] = round(st.timings.get(key, 0.0) + seconds, 3)
    chunks = [v for k, v in mine.items() if k != f"{key}{PART}wild"]
    return setup.finish(chunks, mine.get(f"{key}{PART}wild"))


def start_parts(runs: RunTable, fit: FitResult, boot: Any, st: Stages) -> PendingStage | None:
    """Start the leave-one-part-out refits (:func:`phifit.diagnostics.parts.start_leave_one_part_out`:
    each size, budget and r left out in turn, :data:`~phifit.diagnostics.parts.PARTS_N_BOOT`
    cell-bootstrap replicates per part, fewer when the analysis' own bootstrap has fewer): the
    point refits here, the replicates' chunks queued on the workers behind the checks' refits.
    None (and no note: the section says why) without a bootstrap interval of phi to read the
    parts against, or when phi is not free."""
    from ..diagnostics.parts import PARTS_N_BOOT, start_leave_one_part_out

    o = st.options
    iv = (fit.ci or {}).get("phi")
    if boot is None or fit.phi is None or "phi" in fit.fixed or not iv or None in iv or o.n_boot < 2:
        return None
    n_boot = min(PARTS_N_BOOT, o.n_boot)
    st.say(f"leave one part out: each size, budget and r in turn ({n_boot} replicates per part)")
    t0 = time.perf_counter()
    pending = start_leave_one_part_out(
        runs,
        fit,
        n_boot=n_boot,
        seed=o.seed,
        level=o.level,
        n_wild=o.n_wild,
        wild_stop=o.wild_stop,
        n_starts=o.n_starts,
        **o.parallel,
    )
    return PendingStage(pending, t0)


def finish_parts(started: PendingStage | None, multipliers: Any, st: Stages) -> Any:
    """The leave-one-part-out analysis :func:`start_parts` started (None: none), read against the
    full table's interval and its lack-of-fit test (``multipliers``); the wild lack-of-fit test
    reruns on the parts whose removal changes phi's reading.  Timed from its start."""
    if started is None:
        return None
    parts = started.pending.result(multipliers)
    st.timings["parts"] = round(time.perf_counter() - started.started, 3)
    return parts


def derived_stage(runs: RunTable, fit: FitResult, boot: Any, st: Stages) -> dict[str, Any]:
    """The derived quantities, as :class:`~phifit.report.analysis.Analysis` fields: the
    equivalence table and the study's example (:mod:`phifit.equivalence`), then the frontier,
    allocation, parabola minima and isoFLOP curves (:func:`frontier_stage`)."""
    from ..equivalence import equivalence_table, paper_example

    st.say("derived quantities: equivalence, frontier, isoFLOP curves")
    thetas = None if boot is None else boot.thetas
    out: dict[str, Any] = {"equivalence": None, "example": None}
    if fit.phi is not None:
        out["equivalence"] = st.timed("equivalence", equivalence_table, runs, fit, thetas=thetas)
        out["example"] = paper_example(fit.phi)
    return {**out, **frontier_stage(runs, fit, boot, st)}


def frontier_stage(runs: RunTable, fit: FitResult, boot: Any, st: Stages) -> dict[str, Any]:
    """The compute-optimal frontier at the table's budgets (with bootstrap bands) and on a dense
    grid (:mod:`phifit.frontier`), a non-looped table's allocation, the per-cell parabola minima
    and the law along the isoFLOP curves (:mod:`phifit.isoflop`); with one token count (B and
    beta unidentified) none of those that trade size against tokens, and a caution saying so."""
    from ..frontier import TableFamily, allocation, frontier, isoflop_curves, non_looped
    from ..isoflop import parabola_minima, table_budgets

    out: dict[str, Any] = dict.fromkeys(("frontier", "frontier_curve", "allocation", "parabola", "isoflop"))
    has_budget = "budget" in runs.frame
    if not fit.d_term_identified:
        st.own.append(
            caution(
                "analysis",
                "derived_suppressed",
                "no compute-optimal frontier, allocation or isoFLOP curves: they trade model size "
                "against tokens, and with one token count B and beta are not identified",
            )
        )
    else:
        if non_looped(runs):
            out["allocation"] = allocation(fit, boot, level=fit.ci_level)
        family = TableFamily.from_runs(runs)
        budgets = table_budgets(runs)
        thetas = None if boot is None else boot.thetas
        out["frontier"] = st.timed("frontier", frontier, fit, family, budgets, thetas=thetas)
        dense = np.geomspace(min(budgets), max(budgets), CURVE_POINTS) if len(budgets) > 1 else budgets
        out["frontier_curve"] = frontier(fit, family, dense)
    if has_budget:
        try:
            out["parabola"] = parabola_minima(runs)
        except ValueError as err:
            st.note("parabola_skipped", f"per-cell parabola minima skipped: {err}")
    if has_budget and fit.d_term_identified:
        try:
            out["isoflop"] = isoflop_curves(fit, runs, family=family)
        except ValueError as err:
            st.note("isoflop_skipped", f"isoFLOP curves skipped: {err}")
    elif not has_budget:
        st.note("no_budget", "no 'budget' column: isoFLOP curves and per-cell parabola minima need one")
    return out


def plan_stage(runs: RunTable, fit: FitResult, st: Stages) -> Any:
    """The plan of a design with the table as the pilot (:func:`phifit.plan.plan_from_fit`)
    when ``options.plan`` asks for one, else None."""
    o = st.options
    if o.plan is None:
        return None
    from ..plan.design import plan_from_fit

    tables = f", {o.plan_tables} simulated tables" if o.plan_tables else ""
    st.say(f"plan: what the design {o.plan!r} can measure, with this table as the pilot{tables}")
    return st.timed(
        "plan",
        plan_from_fit,
        runs,
        fit,
        None if o.plan == "self" else o.plan,
        n_tables=o.plan_tables,
        seed=o.seed,
        **o.parallel,
        misfit=o.plan_misfit,
    )


def rounds_beside(runs: RunTable) -> str | None:
    """The round log beside the table's file (``RUNS.csv.d/adaptive.jsonl``, written by
    ``phifit sweep --adaptive``), None when there is none (or the table is not a file)."""
    from ..plan.rounds import rounds_path

    source = runs.source
    if not source or not os.path.isfile(source):
        return None
    path = rounds_path(source)
    return str(path) if path.is_file() else None


def rounds_stage(table: RunTable, st: Stages) -> Any:
    """The rounds of the adaptive sweep that trained the table (:func:`phifit.plan.rounds.load_rounds`):
    ``options.rounds`` or the log beside the table; None without one."""
    rounds_file = st.options.rounds or rounds_beside(table)
    if rounds_file is None:
        return None
    from ..plan.rounds import load_rounds

    st.say(f"adaptive rounds: {rounds_file}")
    adaptive = load_rounds(rounds_file)
    if adaptive.skipped_lines:
        st.note(
            "rounds_torn",
            f"{rounds_file}: {adaptive.skipped_lines} torn line(s) skipped (a loop killed while "
            "writing a record)",
            skipped=adaptive.skipped_lines,
        )
    return adaptive


def bayes_stage(runs: RunTable, st: Stages) -> tuple[Any, Any, Any]:
    """(the Bayesian fit, its draws, its InferenceData) when ``options.bayes`` asks for them
    (:mod:`phifit.fitters.bayes`, PyMC, imported only then), else (None, None, None)."""
    if not st.options.bayes:
        return None, None, None
    from ..fitters.bayes import sample_posterior

    st.say("Bayesian posterior: compiling the model (about half a minute), then sampling")
    sampled = st.timed(
        "bayes",
        sample_posterior,
        runs,
        seed=st.options.seed,
        hdi_prob=st.options.level,
        progress=False,
    )
    return sampled.result, sampled.draws, sampled.idata


def plotted_compute(runs: RunTable) -> tuple[np.ndarray, str]:
    """The training compute at which the figures place each run, and where it comes from: the
    one rule of :func:`phifit.plot.functions.placed_compute` (``flops``, else a numeric
    ``budget``, else the estimate), imported when called so that matplotlib stays out of an
    analysis that draws nothing."""
    from ..plot.functions import placed_compute

    return placed_compute(runs)
    budget = runs.budget
    if budget is not None:
        try:
            values = np.asarray(budget, dtype=float)
        except (TypeError, ValueError):
            values = None
        if values is not None and np.all(np.isfinite(values)) and np.all(values > 0):
            return values, "the budget column (no flops column)"
    return runs.compute, runs.compute_source


def points_stage(runs: RunTable, st: Stages) -> dict[str, Any]:
    """Per analysed run {r, budget, n_unique, compute, compute_source, loss} for the figures, at
    :func:`plotted_compute`; without a ``flops`` column a note says where the runs are placed."""
    compute, compute_source = plotted_compute(runs)
    if not runs.has_flops:
        ratio = runs.compute / compute
        where = (
            f"the runs are placed at their budget; the estimate would put them at "
            f"{ratio.min():.2f}-{ratio.max():.2f}x it"
            if compute_source.startswith("the budget")
            else "the runs are placed at that estimate (it omits attention and the embedding)"
        )
        st.note(
            "compute_estimated",
            f"no 'flops' column: training compute in the figures is {compute_source}; {where}. "
            "Record each run's FLOPs in a 'flops' column for exact placement",
            compute_source=compute_source,
        )
    return {
        "r": runs.r.astype(int).tolist(),
        "budget": None if runs.budget is None else runs.budget.tolist(),
        "n_unique": (runs.n_once + runs.n_rec).tolist(),
        "compute": compute.tolist(),
        "compute_source": compute_source,
        "loss": runs.loss.tolist(),
    }


def step_warnings(*steps: Any) -> list[list[Caution] | None]:
    """Each step's ``warnings`` (None for a step that did not run), for :func:`phifit.cautions.collect`."""
    return [None if step is None else step.warnings for step in steps]


def diagnostic_cautions(diag: Any) -> list[Caution]:
    """The diagnostics' cautions, and the influence and consistency notes (kept as text by
    :mod:`phifit.diagnostics.influence`) as notes of source "diagnostics"."""
    notes = [] if diag.influence is None else list(diag.influence.notes)
    notes += [] if diag.consistency is None else list(diag.consistency.notes)
    return list(diag.warnings) + [
        n if isinstance(n, Caution) else caution("diagnostics", "influence", str(n), level="note")
        for n in notes
    ]


__all__ = [
    "CURVE_POINTS",
    "REPORT_INVERT",
    "Stages",
    "bayes_stage",
    "bootstrap_stage",
    "comparison_stage",
    "derived_stage",
    "diagnostic_cautions",
    "checks_stage",
    "continue_phi_checks",
    "finish_parts",
    "fit_stage",
    "frontier_stage",
    "interval_and_tests_disagree",
    "inverted_stage",
    "start_parts",
    "start_phi_checks",
    "start_diagnostics",
    "collect_checks",
    "PendingChecks",
    "phi_shares",
    "plan_stage",
    "plotted_compute",
    "points_stage",
    "recipes_stage",
    "rounds_beside",
    "rounds_stage",
    "step_warnings",
]
