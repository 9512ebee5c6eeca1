"""The phifit report: one folder with ``index.html``, ``results.json`` and the figures.

``build_report(runs, out_dir)`` runs the analysis (:func:`phifit.report.analysis.analyse`) and
writes it (:func:`write_report`).  This module and the section modules it uses
(:mod:`phifit.report.sections_fit`, :mod:`phifit.report.sections_derived`,
:mod:`phifit.report.sections_diagnostics`, :mod:`phifit.report.sections_plan`) only render an
:class:`~phifit.report.analysis.Analysis`; they compute no statistic.

Folder layout::

    DIR/index.html          self-contained page (figures embedded as base64 PNG; no JS)
    DIR/results.json        every number shown (Analysis.to_dict(), plus the files written)
    DIR/figures/NAME.png    each figure at 150 dpi
    DIR/figures/NAME.svg    and as SVG, with ``svg=True`` (``--svg``)
    DIR/posterior.nc        the Bayesian posterior (ArviZ InferenceData), with ``bayes=True``

``results.json["warnings"]`` is :attr:`Analysis.cautions`, every caution of every step
({source, kind, level, message, values}); the page lists them under "Data and warnings".

The page opens with the answer (:func:`phifit.report.sections_fit.section_headline`); when the
lack-of-fit test rejects r^phi against one free multiplier per r, that comes first (phi then
summarises a law that does not hold); then phi with
its interval and what kind it is, the verdicts on phi = 0 and phi = 1, Δφ per recipe,
R² / RMSE and the top warnings; for a non-looped table, its exponents α, β, E and the
compute-optimal allocation with their intervals instead of φ.  An interval end on the box searched prints as
"≤ −3 (search bound: not determined)" (:func:`phifit.intervals.interval_text`).

Sections: data summary and cautions; fitted law with intervals; isoFLOP curves;
compute-optimal frontier and gaps (law and per-cell parabola minima); bootstrap
distribution of phi; restricted-fit comparison; the free multipliers m_r against r^phi;
the drift of phi with compute (phi_1 of phi_0 + phi_1 log(C / C_ref) and its test);
residuals; influence, identifiability and consistency; the equivalence table; and, when
their inputs exist, the Bayesian posterior (``bayes=True``), the Δφ between recipes (a
``variant`` column) and a plan of what a design can measure of phi with the table as the
pilot (``AnalysisOptions.plan``, ``--plan``), and the rounds of an adaptive sweep when the table
has a round log (``RUNS.csv.d/adaptive.jsonl``, or ``AnalysisOptions.rounds``, ``--rounds``;
:mod:`phifit.report.sections_adaptive`).  A non-looped table's page
(:attr:`Analysis.non_looped`) speaks of its own law: the bootstrap section shows alpha, beta
and the allocation exponent instead of phi, the influence section only identifiability, and
nothing is listed or drawn per r.

A folder is written only when it is absent, empty, or holds a previous phifit report
(its ``results.json`` says ``"generator": "phifit"``) or only the figures of one stopped before
its ``results.json``, unless ``force=True``.  The report is written whole or not at all: into a
folder beside the target, moved into place once complete (:mod:`phifit.report.folder`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from ..runs.table import RunTable, as_runs
from . import folder
from . import html as T
from . import sections_adaptive as A
from . import sections_derived as R
from . import sections_diagnostics as D
from . import sections_fit as S
from . import sections_parts as L
from . import sections_plan as P
from .analysis import Analysis, AnalysisOptions, analyse
from .format import pct

__all__ = [
    "ReportFiles",
    "write_report",
    "build_report",
    "check_report_dir",
    "render_html",
    "headline",
    # re-exported from phifit.report.analysis
    "Analysis",
    "AnalysisOptions",
    "analyse",
]


# ------------------------------------------------------------------------------- folder
@dataclass(frozen=True)
class ReportFiles:
    """Paths written by :func:`write_report` (relative to ``out_dir``) and timings."""

    out_dir: str
    files: list[str]
    figures: dict[str, dict[str, str]]
    timings: dict[str, float]
    headline: str = ""

    @property
    def index(self) -> str:
        return os.path.join(self.out_dir, "index.html")


def check_report_dir(out_dir: str | os.PathLike, force: bool = False) -> None:
    """Refuse a non-empty folder that holds neither a previous phifit report nor only the partial
    output of one (unless force): :func:`phifit.report.folder.check_report_dir`."""
    folder.check_report_dir(out_dir, FIGURE_ORDER, force)


def build_report(
    runs: RunTable | pd.DataFrame,
    out_dir: str | os.PathLike,
    *,
    options: AnalysisOptions | None = None,
    force: bool = False,
    svg: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ReportFiles:
    """Analyse ``runs`` and write the report folder (see the module docstring); ``progress``
    receives one line per stage as it starts (the CLI prints them to stderr).

    The figures that need only the fit, the bootstrap, the comparison and the derived
    quantities (:func:`_early_figures`) are drawn while the checks still run on the workers
    (:func:`~phifit.report.analysis.analyse`'s ``while_checks``); the same figures, the same
    bytes, as drawing them afterwards."""
    runs = as_runs(runs)
    check_report_dir(out_dir, force)
    drawn = DrawnFigures()
    analysis = analyse(runs, options, progress=progress, while_checks=drawn.draw_ready)
    return write_report(analysis, out_dir, force=force, svg=svg, progress=progress, drawn=drawn)


@dataclass
class DrawnFigures:
    """Figures drawn before the report is written: (name, Figure, PNG bytes) in drawing order,
    the groups of :data:`FIGURE_GROUPS` they are, and the seconds spent drawing them."""

    figures: list[tuple[str, Any, bytes]] = field(default_factory=list)
    groups: set[str] = field(default_factory=set)
    seconds: float = 0.0

    def draw_ready(self, so_far: Analysis) -> None:
        """Draw and render (PNG) the groups of figures not drawn yet whose inputs the analysis
        so far holds: "early" at once, "diagnostics" once ``so_far.diagnostics`` is set."""
        from . import figures as plots

        t0 = time.perf_counter()
        ready = ["early"] if so_far.diagnostics is None else ["early", "diagnostics"]
        for group in ready:
            if group in self.groups:
                continue
            for name, fig in FIGURE_GROUPS[group](so_far, plots):
                self.figures.append((name, fig, plots.figure_bytes(fig)))
            self.groups.add(group)
        self.seconds += time.perf_counter() - t0


def write_report(
    analysis: Analysis,
    out_dir: str | os.PathLike,
    *,
    force: bool = False,
    svg: bool = False,
    progress: Callable[[str], None] | None = None,
    drawn: DrawnFigures | None = None,
) -> ReportFiles:
    """Draw the figures and write ``index.html``, ``results.json`` and ``figures/`` (PNG; SVG
    too with ``svg=True``); figures in ``drawn`` (:func:`build_report`) are written as drawn,
    the others are drawn here.

    The report is written whole or not at all: into a folder beside ``out_dir``, moved into place
    once complete, the files in ``out_dir`` that phifit did not write carried over
    (:mod:`phifit.report.folder`)."""
    check_report_dir(out_dir, force)
    say = progress or (lambda _msg: None)
    with folder.staged(out_dir, FIGURE_ORDER) as path:
        return _write_files(analysis, path, Path(out_dir), svg=svg, say=say, drawn=drawn)


def _write_files(
    analysis: Analysis,
    path: Path,
    out_dir: Path,
    *,
    svg: bool,
    say: Callable[[str], None],
    drawn: DrawnFigures | None,
) -> ReportFiles:
    """Write the report's files into the empty folder ``path`` (:func:`write_report`);
    :class:`ReportFiles` names ``out_dir``, where ``path`` is moved."""
    from . import figures as plots

    (path / "figures").mkdir()
    timings = dict(analysis.timings)
    t0 = time.perf_counter()
    figures: dict[str, dict[str, str]] = {}
    pngs: dict[str, bytes] = {}
    say("drawing the figures" + (" (PNG and SVG)" if svg else ""))
    ready = list(drawn.figures) if drawn else []
    ready += [(name, fig, None) for name, fig in _figures(analysis, plots, drawn.groups if drawn else ())]
    for name, fig, png in sorted(ready, key=lambda item: FIGURE_ORDER.index(item[0])):
        written = plots.save_figure(fig, str(path / "figures" / name), svg=svg, png=png)
        figures[name] = {kind: os.path.relpath(p, path).replace(os.sep, "/") for kind, p in written.items()}
        pngs[name] = (path / "figures" / f"{name}.png").read_bytes()
    timings["figures"] = round(time.perf_counter() - t0 + (drawn.seconds if drawn else 0.0), 3)
    say("writing index.html and results.json")

    results = analysis.to_dict()
    files = ["index.html", "results.json"] + [p for f in figures.values() for p in f.values()]
    if analysis.bayes_posterior is not None:  # the posterior, reloadable with ArviZ
        analysis.bayes_posterior.to_netcdf(str(path / "posterior.nc"))
        files.append("posterior.nc")
    results["figures"] = figures
    results["files"] = files
    results["timings"] = timings
    folder.write_text(path / "results.json", json.dumps(results, indent=1, allow_nan=False) + "\n")
    folder.write_text(path / "index.html", render_html(analysis, pngs, figures))
    return ReportFiles(
        out_dir=str(out_dir), files=files, figures=figures, timings=timings, headline=headline(analysis)
    )


def headline(a: Analysis) -> str:
    """Plain text: phi with its interval (at the fit's level; an end on the box says so), R^2,
    RMSE, led by "phi is not determined" when its test-inverted set or interval spans the box
    (:func:`phifit.report.sections_fit.phi_undetermined`; the point is then the best-fitting phi,
    not an estimate); the verdicts on phi = 0 and phi = 1; then what the warnings are (the first
    of each kind) and how many notes there are.  A non-looped table (``a.allocation`` set) leads
    instead with its law: alpha, beta, E with their intervals and the compute-optimal allocation
    N* ~ C^a, D* ~ C^b, a = beta / (alpha + beta), b = alpha / (alpha + beta)
    (:func:`phifit.report.sections_fit.non_looped_lines`)."""
    fit = a.fit
    lines = [f"not estimated: {text}".replace("·", " ").replace("β", "beta") for text in S.not_estimated(fit)]
    misfit = S.misfit_line(a)
    if misfit is not None:  # first: phi summarises a law that does not hold
        lines.insert(0, misfit)
    if a.allocation is not None:  # non-looped: the law's exponents and allocation lead
        lines += S.non_looped_lines(a, html=False)
        lines.append(f"R^2 = {fit.r2:.4f}, RMSE = {fit.rmse:.4f} nats")
    else:
        undetermined = S.phi_undetermined(a)
        if undetermined is not None:  # first: nothing about phi is determined
            lines.insert(0, undetermined)
        phi = "phi not identified" if fit.phi is None else f"phi = {fit.phi:.4f}"
        if undetermined is not None and fit.phi is not None:
            phi = f"best-fitting phi = {fit.phi:.4f} (not an estimate)"
        iv = (fit.ci or {}).get("phi")
        if iv and None not in iv:  # an interval withheld (too many failed replicates) has None ends
            phi += (
                f" ({pct(fit.ci_level)} percentile "
                f"{T.interval_text(iv[0], iv[1], T.param_bounds(fit, 'phi'))})"
            )
        elif fit.phi is not None and "phi" in fit.at_bounds:
            phi += " (on the bound of its search box: not located by the table; no interval)"
        lines.append(f"{phi}, R^2 = {fit.r2:.4f}, RMSE = {fit.rmse:.4f} nats")
    for label, verdict, evidence in S.restriction_verdicts(a.comparison):
        lines.append(f"{label}: {verdict} ({evidence})".replace("φ", "phi"))
    part = L.headline_line(a)  # removing one part of the table changes phi's reading: named
    if part is not None:
        lines.append(part)
    warns = a.cautions_from(level="warning")
    n_note = len(a.cautions_from(level="note"))
    if warns:
        lines.append(f"{len(warns)} warning(s), {n_note} note(s) (all in the report); the warnings:")
        lines += [f"  - {w}" for w in S.top_warnings(a, n=len(warns))]
    else:
        lines.append(f"no warnings, {n_note} note(s) (in the report)")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ figures
#: The figures in the order the report lists them.
FIGURE_ORDER = (
    "isoflop",
    "frontier",
    "bootstrap_phi",
    "bootstrap_exponents",
    "multipliers",
    "comparison",
    "residuals",
    "influence",
    "phi_profile",
    "posterior",
    "recipes",
    "plan",
    "adaptive",
)


def _figures(a: Analysis, plots, drawn: Collection[str] = ()) -> list[tuple[str, Any]]:
    """(name, Figure) for every figure that applies, in :data:`FIGURE_ORDER`, but those of the
    groups named in ``drawn`` (:data:`FIGURE_GROUPS`; already drawn, :class:`DrawnFigures`)."""
    out = [item for name, group in FIGURE_GROUPS.items() if name not in drawn for item in group(a, plots)]
    return sorted(out, key=lambda item: FIGURE_ORDER.index(item[0]))


def _early_figures(a: Analysis, plots) -> list[tuple[str, Any]]:
    """The figures that need only the fit, the bootstrap, the comparison and the derived
    quantities (not the checks): isoFLOP curves, frontier, bootstrap histograms, comparison."""
    fit = a.fit
    out = []
    if a.isoflop is not None:
        out.append(("isoflop", plots.isoflop_figure(fit, a.runs, a.isoflop, looped=not a.non_looped)))
    if a.frontier_curve is not None and a.non_looped:
        out.append(("frontier", plots.chinchilla_frontier_figure(a.frontier_curve, a.runs)))
    elif a.frontier is not None and a.frontier_curve is not None:
        fig = plots.frontier_figure(a.frontier_curve, a.runs, at_budgets=a.frontier, parabola=a.parabola)
        out.append(("frontier", fig))
    if a.bootstrap is not None and fit.phi is not None and "phi" in (fit.ci or {}):
        out.append(("bootstrap_phi", plots.bootstrap_figure(a.bootstrap)))
    if a.bootstrap is not None and a.non_looped and S.exponent_quantities(a):
        out.append(("bootstrap_exponents", _exponent_figure(a, plots)))
    cmp_rows = S.comparison_rows(a.comparison)
    if cmp_rows:
        out.append(("comparison", plots.comparison_figure(cmp_rows)))
    return out


def _diagnostic_figures(a: Analysis, plots) -> list[tuple[str, Any]]:
    """The diagnostics' figures: residuals, leave-one-out influence, phi profile."""
    fit, diag = a.fit, a.diagnostics
    out = [("residuals", plots.residual_figure(diag.residuals, looped=not a.non_looped))]
    if diag.influence is not None:
        out.append(("influence", plots.influence_figure(diag.influence.to_dict())))
    ident = diag.identifiability
    if ident.profile is not None:
        interval, label = D.profile_band(a)
        consistency = None if diag.consistency is None else diag.consistency.to_dict()
        fig = plots.profile_figure(
            ident.profile,
            fit.phi,
            interval,
            consistency,
            interval_label=label,
            bounds=T.param_bounds(fit, "phi"),
        )
        out.append(("phi_profile", fig))
    return out


def _final_figures(a: Analysis, plots) -> list[tuple[str, Any]]:
    """The figures of the checks of phi and the later stages: free multipliers, posterior,
    recipes, plan, adaptive rounds."""
    fit = a.fit
    out = []
    mult = a.multipliers
    if mult is not None and mult.testable and fit.phi is not None:
        fig = plots.multiplier_figure(mult, bootstrap=a.bootstrap)
        out.append(("multipliers", fig))
    if a.bayes_draws:
        out.append(("posterior", plots.posterior_figure(a.bayes_draws, point=fit.params)))
    rec_rows = S.recipe_rows(a.recipes)
    if rec_rows:
        baseline = str(a.recipes.baseline)
        out.append(("recipes", plots.recipes_figure(rec_rows, baseline=baseline, level=a.recipes.level)))
    if a.plan is not None and a.plan.simulation is not None:
        from ..plan.design import plan_figure

        out.append(("plan", plan_figure(a.plan)))
    if a.adaptive is not None:
        points = A.figure_points(a.adaptive)
        if any(p["predicted"] is not None or p["realised"] is not None for p in points):
            out.append(("adaptive", plots.adaptive_figure(points, target_width=a.adaptive.target_width)))
    return out


#: The figures by what they need: the fit, bootstrap, comparison and derived quantities
#: ("early"), the diagnostics, and the rest ("final").
FIGURE_GROUPS: dict[str, Callable[[Analysis, Any], list[tuple[str, Any]]]] = {
    "early": _early_figures,
    "diagnostics": _diagnostic_figures,
    "final": _final_figures,
}


def _exponent_figure(a: Analysis, plots) -> Any:
    """The non-looped table's bootstrap figure: one histogram per estimated exponent
    (alpha, beta, and the allocation exponent a read from each replicate's alpha and beta)."""
    from ..frontier import allocation_exponents

    boot = a.bootstrap
    draws = {name: boot.params[name][~boot.failed] for name in ("alpha", "beta")}
    draws["a"] = allocation_exponents(draws["alpha"], draws["beta"])[0]
    panels = [
        {
            "label": q["label"],
            "draws": draws[q["name"]].tolist(),
            "estimate": q["estimate"],
            "interval": q["ci"],
        }
        for q in S.exponent_quantities(a)
    ]
    return plots.exponent_bootstrap_figure(panels, level=a.fit.ci_level)


# --------------------------------------------------------------------------------- HTML
def render_html(a: Analysis, pngs: dict[str, bytes], figures: dict[str, dict[str, str]]) -> str:
    """The report page (sections in reading order)."""

    def fig(name: str, alt: str, caption: str) -> str:
        if name not in pngs:
            return ""
        return T.figure(pngs[name], alt=alt, caption=caption, files=figures[name])

    sections = [
        ("data", "Data and warnings", S.section_data(a)),
        ("law", "Fitted law", S.section_law(a)),
        ("isoflop", "isoFLOP curves", R.section_isoflop(a, fig)),
        ("frontier", "Compute-optimal frontier", R.section_frontier(a, fig)),
        ("bootstrap", S.bootstrap_title(a), S.section_bootstrap(a, fig)),
        ("comparison", "Restricted fits", S.section_comparison(a, fig)),
        *(
            []  # phi does not enter a non-looped table's law: nothing to say of its recurrences
            if a.non_looped
            else [
                ("multipliers", "Is one φ enough? Free multipliers per r", D.section_multipliers(a, fig)),
                ("drift", "Does φ drift with scale?", D.section_drift(a)),
            ]
        ),
        ("residuals", "Residuals", D.section_residuals(a, fig)),
        ("influence", D.influence_title(a), D.section_influence(a, fig)),
        *([] if a.non_looped else [("parts", L.TITLE, L.section_parts(a))]),
        ("equivalence", "Equivalent sizes", R.section_equivalence(a)),
    ]
    if a.options.bayes:
        sections.append(("bayes", "Bayesian posterior", S.section_bayes(a, fig)))
    if a.recipes is not None:
        sections.append(("recipes", "Δφ between recipes", S.section_recipes(a, fig)))
    if a.plan is not None:
        sections.append(("plan", "Planning: what a design can measure of φ", P.section_plan(a, fig)))
    if a.adaptive is not None:
        sections.append(("adaptive", "Adaptive rounds", A.section_adaptive(a, fig)))
    sections.append(("files", "Files", S.section_files(figures)))
    created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = a.table
    analysed = "" if table is a.runs else f" ({len(a.runs)} analysed)"
    meta = (
        f"{T.esc(table.source)} · {len(table)} runs{analysed} · phifit {T.esc(__version__)} · "
        f"{created} · bootstrap {a.options.n_boot} · seed {a.options.seed}"
    )
    return T.page(f"phifit report: {Path(table.source).name}", meta, sections, lead=S.section_headline(a))
