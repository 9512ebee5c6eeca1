"""The whole analysis of a run table, as plain results: :func:`analyse` -> :class:`Analysis`.

One call runs every step the report shows, by calling the statistical modules (nothing is
computed here that they compute):

1. recipes (a ``variant`` column with several values): :func:`phifit.recipes.compare_recipes`
   on the whole table; the other steps analyse the baseline recipe
   (:func:`phifit.runs.recipes.select_recipe`);
2. the Huber fit (:func:`phifit.fitters.huber.fit_huber`), then the block bootstrap
   (:func:`phifit.bootstrap.block_bootstrap`) attached to it (its intervals at
   ``FitResult.ci_level``);
3. restricted fits (:func:`phifit.compare.compare_fits`) when phi is identifiable, and the
   free multipliers m_r against r^phi with the lack-of-fit test of r^phi
   (:func:`phifit.diagnostics.phi_checks.multiplier_check`: phi identifiable and free; parameters
   the fit holds, such as B and beta at one token count, held in both laws), and the drift of
   phi with compute, phi(C) = phi_0 + phi_1 log(C / C_ref), with its cell-bootstrap intervals
   and the test of phi_1 = 0 (:func:`phifit.diagnostics.phi_checks.drift_check`: phi
   identifiable, nothing held); both with the same ``n_boot`` and ``n_wild``;
4. diagnostics (:func:`phifit.diagnostics.diagnose`), and whether the answer rests on one part
   of the table: each size, budget and r left out in turn, with phi's cell-bootstrap interval per
   refit (:mod:`phifit.diagnostics.parts`; its notes stay in its own result, not among the
   cautions);
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

Each step is one function of :mod:`phifit.report.stages`; :func:`analyse` runs them in this
order, except that with workers (forked once for the whole analysis by default,
:func:`phifit.fitters.parallel.shared_workers`, and ended before the Bayesian fit) some run side
by side: the block bootstrap starts on the
workers right after the fit, while the comparison runs here; once the bootstrap is attached,
the setups of the free multipliers and of the drift (their point fits) and the diagnostics start
on the workers while the derived quantities are computed here, then the checks' refits (their
wild tests and their cell bootstraps' chunks, a task each) follow on the workers while the
figures are drawn here.  Every task is a pure function of its inputs and its own seeded draws,
so the numbers do not depend on where or when it runs.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from .. import __version__
from ..cautions import Caution, collect
from ..diagnostics.suite import Diagnostics
from ..equivalence import Equivalence, EquivalenceTable
from ..fitters.parallel import shared_workers
from ..frontier import Allocation, Frontier, IsoflopCurves, non_looped
from ..isoflop import ParabolaMinima
from ..result import GENERATOR, FitResult
from ..runs.table import RunTable, as_runs
from ..serialize import JsonIO, to_plain
from . import stages
from .options import AnalysisOptions
from .stages import CURVE_POINTS, REPORT_INVERT, plotted_compute, rounds_beside

__all__ = [
    "AnalysisOptions",
    "Analysis",
    "analyse",
    "CURVE_POINTS",
    "REPORT_INVERT",
    "plotted_compute",
    "rounds_beside",
]


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
    None without a round log.  ``parts``: the leave-one-part-out refits
    (:class:`phifit.diagnostics.parts.PartsResult`), None without a bootstrap interval of a free
    phi.

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
    parts: Any | None = None
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
        if self.parts is not None:  # none without a bootstrap interval of a free phi
            extra["parts"] = self.parts.to_dict()
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
        from ..diagnostics.parts import PartsResult
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
            parts=load(PartsResult, data.get("parts")),
            cautions=[Caution.from_dict(w, source="report") for w in data.get("warnings") or []],
            timings=dict(data.get("timings") or {}),
            saved={
                k: data.get(k)
                for k in ("created", "phifit_version", "source", "n_table_runs", "runs_per_recipe")
            },
        )


# ------------------------------------------------------------------------------ analysis
def _with_diagnostics(
    while_checks: Callable[[Analysis], None], so_far: Analysis
) -> Callable[[Diagnostics], None]:
    """What :func:`analyse` calls once the diagnostics are done: ``while_checks`` of the analysis
    so far with them set."""
    return lambda diag: while_checks(replace(so_far, diagnostics=diag))


def analyse(
    runs: RunTable | pd.DataFrame,
    options: AnalysisOptions | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    while_checks: Callable[[Analysis], None] | None = None,
) -> Analysis:
    """Run every step of the analysis (see the module docstring) and gather its cautions;
    ``progress`` receives one line as each stage starts (the CLI prints them to stderr).
    ``while_checks`` is called with the analysis so far while the checks (free multipliers,
    drift, diagnostics) run on the workers: first after the derived quantities (the fit,
    bootstrap, comparison, test-inverted set and derived quantities set, ``diagnostics`` None),
    then once the diagnostics are done (``diagnostics`` set); never with the checks of phi or
    the cautions (the report draws the figures that need only what is set there,
    :func:`phifit.report.write.build_report`).
    The stages are :mod:`phifit.report.stages`'; the free multipliers and the drift of phi are
    :mod:`phifit.diagnostics.phi_checks`' (the guards ``phifit compare`` and ``phifit diagnose``
    share)."""
    runs = as_runs(runs)
    st = stages.Stages(options=options or AnalysisOptions(), say=progress or (lambda _msg: None))
    # one set of forked workers for every parallel step (phifit.fitters.parallel.shared_workers),
    # ended before the Bayesian fit, whose sampler runs its own
    with shared_workers(**st.options.parallel):
        main_runs, recipes = stages.recipes_stage(runs, st)
        free_fit = stages.fit_stage(main_runs, st)  # the point estimate, without the bootstrap's intervals
        # the comparison needs only the point fit: it runs here and on the workers beside the bootstrap
        bootstrap = stages.start_bootstrap(main_runs, free_fit, st)
        comparison = stages.comparison_stage(main_runs, free_fit, st)
        boot = stages.finish_bootstrap(bootstrap, st)
        fit = free_fit if boot is None else boot.attach(free_fit)
        phi_inverted = stages.inverted_stage(main_runs, fit, boot, comparison, st)
        # on the workers, while the next runs here: the setups of the checks of phi, then the
        # diagnostics, then the checks' refits (the diagnostics' figures are drawn while these run)
        setups = stages.start_phi_checks(main_runs, free_fit, st)
        diagnostics = stages.start_diagnostics(main_runs, fit, st)
        derived = stages.derived_stage(main_runs, fit, boot, st)
        phi_checks = stages.continue_phi_checks(setups, st)  # the checks' refits, behind the diagnostics
        parts = stages.start_parts(main_runs, fit, boot, st)  # its replicates behind the checks' refits
        on_diagnostics = None
        if while_checks is not None:  # the analysis so far: no checks, no cautions yet
            so_far = Analysis(
                table=runs,
                runs=main_runs,
                options=st.options,
                fit=fit,
                diagnostics=None,  # type: ignore[arg-type]  # still running: see the docstring
                bootstrap=boot,
                comparison=comparison,
                recipes=recipes,
                **derived,
                phi_inverted=phi_inverted,
            )
            while_checks(so_far)
            on_diagnostics = _with_diagnostics(while_checks, so_far)
        multipliers, drift, diag = stages.collect_checks(
            diagnostics, phi_checks, st, on_diagnostics=on_diagnostics
        )
        parts = stages.finish_parts(parts, multipliers, st)
        plan = stages.plan_stage(main_runs, fit, st)
        adaptive = stages.rounds_stage(runs, st)
    bayes, bayes_draws, idata = stages.bayes_stage(main_runs, st)
    points = stages.points_stage(main_runs, st)
    cautions = collect(
        fit.warnings,  # the bootstrap's too, once attached
        *stages.step_warnings(boot, comparison, multipliers, drift, recipes),  # recipes: the joint fit's too
        stages.diagnostic_cautions(diag),
        *stages.step_warnings(derived["frontier"], derived["parabola"], bayes, plan),
        st.own,
    )
    return Analysis(
        table=runs,
        runs=main_runs,
        options=st.options,
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
        **derived,
        points=points,
        phi_shares=stages.phi_shares(fit, boot),
        phi_inverted=phi_inverted,
        adaptive=adaptive,
        parts=parts,
        cautions=cautions,
        timings=st.timings,
    )
