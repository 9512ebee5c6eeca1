"""The whole analysis of a run table, as plain results: :func:`analyse` -> :class:`Analysis`.

One call runs every step the report shows, by calling the statistical modules (nothing is
computed here that they compute):

1. recipes (a ``variant`` column with several values): :func:`phifit.recipes.compare_recipes`
   on the whole table; the other steps analyse the baseline recipe
   (:func:`phifit.recipes.select_recipe`);
2. the Huber fit (:func:`phifit.fitters.huber.fit_huber`), then the block bootstrap
   (:func:`phifit.bootstrap.block_bootstrap`) attached to it (its intervals at
   ``FitResult.ci_level``);
3. restricted fits (:func:`phifit.compare.compare_fits`) when phi is identifiable, and the
   free multipliers m_r against r^phi with the lack-of-fit test of r^phi
   (:func:`phifit.diagnostics.multipliers.fit_multipliers`, the same ``n_boot`` and ``n_wild``,
   refitted in this process), and the drift of phi with compute, phi(C) = phi_0 + phi_1
   log(C / C_ref), with its cell-bootstrap intervals and the test of phi_1 = 0
   (:func:`phifit.diagnostics.drift.fit_drift`, the same ``n_boot`` and ``n_wild``);
4. diagnostics (:func:`phifit.diagnostics.diagnose`);
5. derived quantities: the equivalence table and the study's example
   (:mod:`phifit.equivalence`), the compute-optimal frontier at the table's budgets (with
   bootstrap bands) and on a dense grid of budgets (:mod:`phifit.frontier`), the per-cell
   parabola minima and the law along the isoFLOP curves (:mod:`phifit.isoflop`);
6. the Bayesian posterior (:mod:`phifit.fitters.bayes`, PyMC) when asked;
7. the rounds of an adaptive sweep (``phifit sweep --adaptive``), read from its round log
   (:func:`phifit.plan.rounds.load_rounds`): ``AnalysisOptions.rounds``, or the log beside the
   table (``RUNS.csv.d/adaptive.jsonl``) when there is one.

Every caution of every step (the fit, the bootstrap, the comparison, the recipes, the
diagnostics, the frontier and the parabola minima, the Bayesian fit, and the analysis' own
notes on what it skipped) is gathered once, in order and without repeats, in
:attr:`Analysis.cautions` (:func:`phifit.cautions.collect`); ``results.json["warnings"]``
is that list.  :mod:`phifit.report.write` renders an Analysis and computes nothing.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__, defaults
from ..bootstrap.block import block_bootstrap
from ..cautions import Caution, caution, collect
from ..compare.restricted import compare_fits
from ..diagnostics.suite import Diagnostics, diagnose
from ..diagnostics.drift import fit_drift
from ..diagnostics.multipliers import fit_multipliers
from ..equivalence import Equivalence, EquivalenceTable, equivalence_table, paper_example
from ..fitters.huber import HuberOptions, fit_huber
from ..fitters.parallel import check_backend
from ..frontier import (
    Allocation,
    Frontier,
    IsoflopCurves,
    TableFamily,
    allocation,
    frontier,
    isoflop_curves,
    non_looped,
)
from ..isoflop import ParabolaMinima, parabola_minima, table_budgets
from ..recipes.delta import compare_recipes, select_recipe
from ..result import GENERATOR, FitResult
from ..runs.table import RunTable, as_runs
from ..serialize import JsonIO, to_plain

__all__ = ["AnalysisOptions", "Analysis", "analyse"]

#: Points of the dense budget grid of the frontier figure.
CURVE_POINTS = 48


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
    tests (phi = 0, phi = 1, a shared phi across recipes; 0: the chi-square tests decide).
    plan: also plan a design with the table as the pilot (:func:`phifit.plan.plan_from_fit`):
    "self" (the table's own runs, to see what its design could measure), "paper", a sweep spec
    or a CSV of planned runs; None: no plan.  plan_tables: simulated tables of the plan (0:
    the asymptotic prediction only); plan_misfit (default True): the plan carries the table's
    (budget, r) cell-mean residuals, the law's misfit (``phifit plan --misfit``).  backend,
    scheduler: where the bootstrap, the wild tests and the plan's simulated tables run
    (:mod:`phifit.fitters.parallel`; None: joblib's worker processes; "dask" with the
    scheduler's address for a cluster).  rounds: the round log of an adaptive sweep to show
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
        if self.n_wild and self.n_wild < 19:
            raise ValueError(f"wild bootstrap replicates must be 0 (off) or >= 19, got {self.n_wild}")
        if self.plan_tables < 0 or self.plan_tables == 1:
            raise ValueError(f"plan tables must be 0 (asymptotic only) or >= 2, got {self.plan_tables}")

    @property
    def parallel(self) -> dict[str, Any]:
        """Where parallel work runs, as the keywords every parallel call takes:
        ``n_jobs``, ``backend`` and ``scheduler``."""
        return {"n_jobs": self.n_jobs, "backend": self.backend, "scheduler": self.scheduler}

    def to_dict(self) -> dict[str, Any]:
        """The options as plain JSON types (``results.json["options"]``)."""
        return to_plain(dict(self.__dict__))


@dataclass(frozen=True)
class Analysis(JsonIO):
    """Every result of :func:`analyse` (None where a step does not apply).

    ``table`` is the input table; ``runs`` the runs the single-law steps analyse (the whole
    table, or its baseline recipe when it holds several).  ``points``: per analysed run
    {r, budget, n_unique = N_once + N_rec, compute, loss} for the figures, and
    ``compute_source`` saying which compute they are placed at (:func:`plotted_compute`).
    ``phi_shares``: the shares of bootstrap replicates with phi <= 0 and phi >= 1.
    ``cautions``: every caution of every step, in order, without repeats.
    ``allocation``: for a non-looped table (no run with r > 1 and N_rec > 0), the
    compute-optimal exponents N* ∝ C^a, D* ∝ C^b with bootstrap intervals
    (:func:`phifit.frontier.allocation`); None for a looped table.  ``adaptive``: the rounds
    of the adaptive sweep that trained the table (:class:`phifit.plan.rounds.AdaptiveRounds`),
    None without a round log.

    An Analysis reloaded from ``results.json`` (:meth:`from_dict`) holds every result the
    file holds, rebuilt as its type, but not the tables (``table`` and ``runs`` are None;
    ``points``, ``phi_shares`` and the posterior draws are not saved): ``saved`` keeps what
    the file says of the table and of the dump (``created``, ``phifit_version``, ``source``,
    ``n_table_runs``, ``runs_per_recipe``), so :meth:`to_dict` writes the same content again.
    It cannot be rendered into a report again (that needs the table).
    """

    table: RunTable | None
    runs: RunTable | None
    options: AnalysisOptions
    fit: FitResult
    diagnostics: Diagnostics
    bootstrap: Any | None = None
    comparison: Any | None = None
    multipliers: Any | None = None
    drift: Any | None = None
    recipes: Any | None = None
    bayes: FitResult | None = None
    bayes_draws: dict[str, Any] | None = None
    bayes_posterior: Any | None = None
    equivalence: EquivalenceTable | None = None
    example: dict[str, Equivalence] | None = None
    frontier: Frontier | None = None
    frontier_curve: Frontier | None = None
    parabola: ParabolaMinima | None = None
    isoflop: IsoflopCurves | None = None
    points: dict[str, list[Any]] = field(default_factory=dict)
    phi_shares: dict[str, float] | None = None
    plan: Any | None = None
    allocation: Allocation | None = None
    phi_inverted: Any | None = None
    adaptive: Any | None = None
    cautions: list[Caution] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    saved: dict[str, Any] | None = None

    def cautions_from(self, *sources: str, level: str | None = None) -> list[Caution]:
        """The cautions of some sources (all sources when none is named), optionally of one level."""
        return [
            c
            for c in self.cautions
            if (not sources or c.source in sources) and (level is None or c.level == level)
        ]

    @property
    def non_looped(self) -> bool:
        """True for a non-looped table (no analysed run with r > 1 and N_rec > 0): its law is
        Chinchilla's and its page speaks of N, D, alpha and beta, never of phi or of r.  A
        reloaded Analysis (no tables) is non-looped when it holds an allocation."""
        if self.runs is None:
            return self.allocation is not None
        return non_looped(self.runs)

    def recipe_counts(self) -> dict[str, int] | None:
        """Runs per recipe of the input table, when its ``variant`` column holds several."""
        if self.table is None:
            return None if self.saved is None else self.saved.get("runs_per_recipe")
        frame = self.table.frame
        if "variant" not in frame or frame["variant"].nunique() < 2:
            return None
        return {str(k): int(v) for k, v in frame["variant"].astype(str).value_counts().sort_index().items()}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: the content of ``results.json`` (the report adds its files)."""

        def d(x):
            return None if x is None else x.to_dict()

        boot = None
        if self.bootstrap is not None:
            boot = self.bootstrap.to_dict()
            boot["phi_draws"] = boot["thetas"] and [row[5] for row in boot["thetas"]]
        saved = self.saved or {}
        derived = {
            "equivalence": d(self.equivalence),
            "paper_example": None
            if self.example is None
            else {k: v.to_dict() for k, v in self.example.items()},
            "frontier": d(self.frontier),
            "frontier_curve": d(self.frontier_curve),
            "parabola_minima": d(self.parabola),
            "isoflop_curves": d(self.isoflop),
        }
        if self.allocation is not None:  # non-looped tables only: a looped report's file is unchanged
            derived["allocation"] = self.allocation.to_dict()
        extra = {}
        if self.adaptive is not None:  # a table without a round log: results.json is unchanged
            extra["adaptive"] = self.adaptive.to_dict()
        return to_plain(
            {
                "generator": GENERATOR,
                "kind": "report",
                "phifit_version": saved.get("phifit_version", __version__),
                "created": saved.get("created")
                or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "source": saved.get("source") if self.table is None else self.table.source,
                "n_table_runs": saved.get("n_table_runs") if self.table is None else len(self.table),
                "runs_per_recipe": self.recipe_counts(),
                "options": self.options.to_dict(),
                "data": self.diagnostics.data,
                "warnings": [c.to_dict() for c in self.cautions],
                "fit": self.fit.to_dict(),
                "bootstrap": boot,
                "comparison": d(self.comparison),
                "multipliers": d(self.multipliers),
                "drift": d(self.drift),
                "diagnostics": self.diagnostics.to_dict(),
                "derived": derived,
                "recipes": d(self.recipes),
                "plan": d(self.plan),
                "bayes": d(self.bayes),
                "phi_inverted": d(self.phi_inverted),
                **extra,
                "timings": self.timings,
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Analysis:
        """Rebuild from :meth:`to_dict` output (``results.json``): every result as its own
        type; the tables are not in the file (see the class docstring)."""
        from ..bootstrap.inverted import InvertedSet
        from ..bootstrap.result import BootstrapResult
        from ..compare.restricted import Comparison
        from ..diagnostics.drift_result import DriftFit
        from ..diagnostics.multiplier_result import MultiplierFit
        from ..plan.design import PlanResult
        from ..plan.rounds import AdaptiveRounds
        from ..recipes.delta import RecipeComparison

        def load(kind, value):
            return None if value is None else kind.from_dict(value)

        derived = data.get("derived") or {}
        example = derived.get("paper_example")
        return cls(
            table=None,
            runs=None,
            options=AnalysisOptions.from_dict(data["options"]),
            fit=FitResult.from_dict(data["fit"]),
            diagnostics=Diagnostics.from_dict(data["diagnostics"]),
            bootstrap=load(BootstrapResult, data.get("bootstrap")),
            comparison=load(Comparison, data.get("comparison")),
            multipliers=load(MultiplierFit, data.get("multipliers")),
            drift=load(DriftFit, data.get("drift")),
            recipes=load(RecipeComparison, data.get("recipes")),
            bayes=load(FitResult, data.get("bayes")),
            equivalence=load(EquivalenceTable, derived.get("equivalence")),
            example=None if example is None else {k: Equivalence.from_dict(v) for k, v in example.items()},
            frontier=load(Frontier, derived.get("frontier")),
            frontier_curve=load(Frontier, derived.get("frontier_curve")),
            parabola=load(ParabolaMinima, derived.get("parabola_minima")),
            isoflop=load(IsoflopCurves, derived.get("isoflop_curves")),
            plan=load(PlanResult, data.get("plan")),
            allocation=load(Allocation, derived.get("allocation")),
            phi_inverted=load(InvertedSet, data.get("phi_inverted")),
            adaptive=load(AdaptiveRounds, data.get("adaptive")),
            cautions=[Caution.from_dict(w, source="report") for w in data.get("warnings") or []],
            timings=dict(data.get("timings") or {}),
            saved={
                k: data.get(k)
                for k in ("created", "phifit_version", "source", "n_table_runs", "runs_per_recipe")
            },
        )


# ------------------------------------------------------------------------------ cautions
def _diagnostic_cautions(diag: Diagnostics) -> list[Caution]:
    """The diagnostics' cautions, and the influence and consistency notes (kept as text by
    :mod:`phifit.diagnostics.influence`) as notes of source "diagnostics"."""
    notes = [] if diag.influence is None else list(diag.influence.notes)
    notes += [] if diag.consistency is None else list(diag.consistency.notes)
    return list(diag.warnings) + [
        n if isinstance(n, Caution) else caution("diagnostics", "influence", str(n), level="note")
        for n in notes
    ]


# ------------------------------------------------------------------------------ analysis
def plotted_compute(runs: RunTable) -> tuple[np.ndarray, str]:
    """The training compute at which the figures place each run, and where it comes from.

    The ``flops`` column when there is one; else a numeric ``budget`` column (the isoFLOP
    budget the run was trained at: the estimate 6 (N_once + r N_rec) D omits attention and
    the embedding, and puts a small model's runs well left of its budget); else the estimate
    (:attr:`phifit.runs.RunTable.compute`).
    """
    if runs.has_flops:
        return runs.compute, runs.compute_source
    budget = runs.budget
    if budget is not None:
        try:
            values = np.asarray(budget, dtype=float)
        except (TypeError, ValueError):
            values = None
        if values is not None and np.all(np.isfinite(values)) and np.all(values > 0):
            return values, "the budget column (no flops column)"
    return runs.compute, runs.compute_source


def rounds_beside(runs: RunTable) -> str | None:
    """The round log beside the table's file (``RUNS.csv.d/adaptive.jsonl``, written by
    ``phifit sweep --adaptive``), None when there is none (or the table is not a file)."""
    from ..plan.rounds import rounds_path

    source = runs.source
    if not source or not os.path.isfile(source):
        return None
    path = rounds_path(source)
    return str(path) if path.is_file() else None


def _timed(timings: dict[str, float], key: str, func: Callable, *args, **kwargs):
    t0 = time.perf_counter()
    try:
        return func(*args, **kwargs)
    finally:
        timings[key] = round(time.perf_counter() - t0, 3)


#: The report's budget for the test-inverted set: the comparison's own replicates and seed per
#: tested phi_0 (so the set and the tests of phi = 0 / phi = 1 agree where both are tested), at
#: most 8 tested phi_0, ends placed to 0.25 where p hovers at the level (``phifit fit
#: --wild-ci`` searches further: :func:`phifit.bootstrap.inverted.phi_confidence_set`).
REPORT_INVERT = {"max_tests": 8, "flat_width": 0.25}


def _interval_and_tests_disagree(fit: FitResult, comparison: Any) -> str | None:
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


def analyse(
    runs: RunTable | pd.DataFrame,
    options: AnalysisOptions | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> Analysis:
    """Run every step of the analysis (see the module docstring) and gather its cautions;
    ``progress`` receives one line as each stage starts (the CLI prints them to stderr)."""
    runs = as_runs(runs)
    options = options or AnalysisOptions()
    timings: dict[str, float] = {}
    own: list[Caution] = []
    say = progress or (lambda _msg: None)

    def note(kind: str, message: str, **values: Any) -> None:
        own.append(caution("analysis", kind, message, level="note", **values))

    main_runs, recipes = runs, None
    if "variant" in runs.frame and runs.frame["variant"].nunique() > 1:
        say(
            f"recipes: joint fit and paired bootstrap of {runs.frame['variant'].nunique()} recipes "
            f"({options.n_boot} replicates)"
        )
        recipes = _timed(
            timings,
            "recipes",
            compare_recipes,
            runs,
            by="variant",
            baseline=options.baseline,
            n_boot=options.n_boot,
            seed=options.seed,
            n_starts=options.n_starts,
            **options.parallel,
            progress=False,
            level=options.level,
        )
        main_runs = select_recipe(runs, recipes.baseline).runs
        note(
            "recipe_selected",
            f"the table holds {runs.frame['variant'].nunique()} recipes; the main sections "
            f"analyse the baseline '{recipes.baseline}' ({len(main_runs)} runs)",
            baseline=str(recipes.baseline),
            n_runs=len(main_runs),
        )

    say(f"fitting the law to {len(main_runs)} runs ({options.n_starts} starts)")
    fit = _timed(
        timings,
        "fit",
        fit_huber,
        main_runs,
        options=HuberOptions(n_starts=options.n_starts, seed=options.seed),
    )
    free_fit = fit  # the comparison's free fit: the point estimate, without the bootstrap's intervals
    boot = None
    phi_on_bound = fit.phi is not None and "phi" in fit.at_bounds
    if options.n_boot and phi_on_bound:
        note(
            "phi_on_bound",
            f"phi sits on the bound of its search box (phi = {fit.phi:.3g}): the table does not locate "
            "phi, and the bootstrap of an estimate on its boundary is not a valid interval (Andrews 2000, "
            "Econometrica 68(2)), so none was run; the diagnostics' profile bounds phi from one side",
            phi=fit.phi,
        )
    elif options.n_boot and all(name in fit.unidentified for name in fit.fixed):
        workers = defaults.resolve_workers(options.n_jobs)
        say(f"block bootstrap ({options.n_boot} replicates, {workers} workers)")
        boot = _timed(
            timings,
            "bootstrap",
            block_bootstrap,
            main_runs,
            fit,
            n_boot=options.n_boot,
            seed=options.seed,
            **options.parallel,
            progress=False,
            level=options.level,
        )
        fit = boot.attach(fit)
    elif not options.n_boot:
        note("no_bootstrap", "bootstrap turned off (n_boot = 0): no intervals")
    thetas = None if boot is None else boot.thetas
    phi_shares = None
    if boot is not None and fit.phi is not None:
        phi_shares = {"le0": boot.share("phi", lambda v: v <= 0), "ge1": boot.share("phi", lambda v: v >= 1)}
    comparison = None
    if main_runs.phi_identifiable:
        n_budgets = main_runs.frame["budget"].nunique() if "budget" in main_runs.frame else 0
        say(
            "restricted fits phi = 0 and phi = 1, "
            + (
                "with leave-one-budget-out refits"
                if n_budgets >= 3
                else f"without leave-one-budget-out refits ({n_budgets} budget(s); they need 3)"
            )
        )
        comparison = _timed(
            timings,
            "comparison",
            compare_fits,
            main_runs,
            free_fit,
            seed=options.seed,
            n_starts=options.n_starts,
            n_wild=options.n_wild,
            **options.parallel,
        )

    phi_inverted = None
    disagree = _interval_and_tests_disagree(fit, comparison)
    if boot is not None and disagree and "phi" not in fit.fixed and options.n_wild:
        from ..bootstrap.inverted import phi_confidence_set

        say(
            f"test-inverted set of phi ({options.n_wild} wild replicates per tested phi_0, at most "
            f"{REPORT_INVERT['max_tests']} phi_0): {disagree}"
        )
        phi_inverted = _timed(
            timings,
            "phi_inverted",
            phi_confidence_set,
            main_runs,
            fit,
            seed=options.seed,
            n_jobs=options.n_jobs,
            n_boot=options.n_wild,
            **REPORT_INVERT,
        )

    multipliers = None
    if main_runs.phi_identifiable and not fit.fixed:
        say(
            f"free multipliers m_r against r^phi ({options.n_boot} cell-bootstrap replicates, "
            f"{options.n_wild} wild replicates of the lack-of-fit test)"
        )
        multipliers = _timed(
            timings,
            "multipliers",
            fit_multipliers,
            main_runs,
            free_fit,
            n_boot=options.n_boot,
            n_wild=options.n_wild,
            seed=options.seed,
            level=options.level,
            n_starts=options.n_starts,
            n_jobs=1,  # ~10 s of refits on the study's table: less than worker start-up costs
        )

    drift = None
    if main_runs.phi_identifiable and not fit.fixed:
        say(
            f"drift of phi with compute ({options.n_boot} cell-bootstrap replicates, "
            f"{options.n_wild} wild replicates of the test of phi_1 = 0)"
        )
        drift = _timed(
            timings,
            "drift",
            fit_drift,
            main_runs,
            free_fit,
            n_boot=options.n_boot,
            n_wild=options.n_wild,
            seed=options.seed,
            level=options.level,
            n_starts=options.n_starts,
            n_jobs=1,  # a few seconds of refits on the study's table: less than worker start-up costs
        )

    say("diagnostics: residuals, leave-one-out influence, the phi profile")
    diag = _timed(timings, "diagnostics", diagnose, main_runs, fit, seed=options.seed)

    say("derived quantities: equivalence, frontier, isoFLOP curves")
    equiv = example = parab = iso = None
    if fit.phi is not None:
        equiv = _timed(timings, "equivalence", equivalence_table, main_runs, fit, thetas=thetas)
        example = paper_example(fit.phi)
    alloc = None
    front = curve = None
    if not fit.d_term_identified:
        # the frontier, its allocation and the law along isoFLOP curves trade size against
        # tokens: with B and beta unidentified (one token count) none of them is an estimate
        own.append(
            caution(
                "analysis",
                "derived_suppressed",
                "no compute-optimal frontier, allocation or isoFLOP curves: they trade model size "
                "against tokens, and with one token count B and beta are not identified",
            )
        )
    else:
        if non_looped(main_runs):
            alloc = allocation(fit, boot, level=fit.ci_level)
        family = TableFamily.from_runs(main_runs)
        budgets = table_budgets(main_runs)
        front = _timed(timings, "frontier", frontier, fit, family, budgets, thetas=thetas)
        dense = np.geomspace(min(budgets), max(budgets), CURVE_POINTS) if len(budgets) > 1 else budgets
        curve = frontier(fit, family, dense)
    if "budget" in main_runs.frame:
        try:
            parab = parabola_minima(main_runs)
        except ValueError as err:
            note("parabola_skipped", f"per-cell parabola minima skipped: {err}")
    if "budget" in main_runs.frame and fit.d_term_identified:
        try:
            iso = isoflop_curves(fit, main_runs, family=family)
        except ValueError as err:
            note("isoflop_skipped", f"isoFLOP curves skipped: {err}")
    elif "budget" not in main_runs.frame:
        note("no_budget", "no 'budget' column: isoFLOP curves and per-cell parabola minima need one")

    plan = None
    if options.plan is not None:
        from ..plan.design import plan_from_fit

        tables = f", {options.plan_tables} simulated tables" if options.plan_tables else ""
        say(f"plan: what the design {options.plan!r} can measure, with this table as the pilot{tables}")
        plan = _timed(
            timings,
            "plan",
            plan_from_fit,
            main_runs,
            fit,
            None if options.plan == "self" else options.plan,
            n_tables=options.plan_tables,
            seed=options.seed,
            **options.parallel,
            misfit=options.plan_misfit,
        )

    adaptive = None
    rounds_file = options.rounds or rounds_beside(runs)
    if rounds_file is not None:
        from ..plan.rounds import load_rounds

        say(f"adaptive rounds: {rounds_file}")
        adaptive = load_rounds(rounds_file)
        if adaptive.skipped_lines:
            note(
                "rounds_torn",
                f"{rounds_file}: {adaptive.skipped_lines} torn line(s) skipped (a loop killed while "
                "writing a record)",
                skipped=adaptive.skipped_lines,
            )

    bayes = bayes_draws = idata = None
    if options.bayes:
        from ..fitters.bayes import sample_posterior  # PyMC: imported only when asked

        say("Bayesian posterior: compiling the model (about half a minute), then sampling")

        sampled = _timed(
            timings,
            "bayes",
            sample_posterior,
            main_runs,
            seed=options.seed,
            hdi_prob=options.level,
            progress=False,
        )
        bayes, idata, bayes_draws = sampled.result, sampled.idata, sampled.draws

    compute, compute_source = plotted_compute(main_runs)
    if not main_runs.has_flops:
        ratio = main_runs.compute / compute
        where = (
            f"the runs are placed at their budget; the estimate would put them at "
            f"{ratio.min():.2f}-{ratio.max():.2f}x it"
            if compute_source.startswith("the budget")
            else "the runs are placed at that estimate (it omits attention and the embedding)"
        )
        note(
            "compute_estimated",
            f"no 'flops' column: training compute in the figures is {compute_source}; {where}. "
            "Record each run's FLOPs in a 'flops' column for exact placement",
            compute_source=compute_source,
        )
    points = {
        "r": main_runs.r.astype(int).tolist(),
        "budget": None if main_runs.budget is None else main_runs.budget.tolist(),
        "n_unique": (main_runs.n_once + main_runs.n_rec).tolist(),
        "compute": compute.tolist(),
        "compute_source": compute_source,
        "loss": main_runs.loss.tolist(),
    }
    cautions = collect(
        fit.warnings,  # the bootstrap's too, once attached
        None if boot is None else boot.warnings,
        None if comparison is None else comparison.warnings,
        None if multipliers is None else multipliers.warnings,
        None if drift is None else drift.warnings,
        None if recipes is None else recipes.warnings,  # the joint fit's included
        _diagnostic_cautions(diag),
        None if front is None else front.warnings,
        None if parab is None else parab.warnings,
        None if bayes is None else bayes.warnings,
        None if plan is None else plan.warnings,
        own,
    )
    return Analysis(
        table=runs,
        runs=main_runs,
        options=options,
        fit=fit,
        diagnostics=diag,
        bootstrap=boot,
        comparison=comparison,
        multipliers=multipliers,
        drift=drift,
        recipes=recipes,
        plan=plan,
        bayes=bayes,
        bayes_draws=bayes_draws,
        bayes_posterior=idata,
        equivalence=equiv,
        example=example,
        frontier=front,
        frontier_curve=curve,
        parabola=parab,
        isoflop=iso,
        points=points,
        allocation=alloc,
        phi_shares=phi_shares,
        phi_inverted=phi_inverted,
        adaptive=adaptive,
        cautions=cautions,
        timings=timings,
    )
