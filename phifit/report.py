"""The phifit report: one folder with ``index.html``, ``results.json`` and the figures.

``build_report(runs, out_dir)`` runs the analysis (:func:`analyse`) and writes it
(:func:`write_report`).  The analysis only *calls* the statistical modules (the fit,
:mod:`phifit.bootstrap`, :mod:`phifit.compare`, :mod:`phifit.diagnostics`,
:mod:`phifit.derived`, :mod:`phifit.recipes`, :mod:`phifit.fitters.bayes`); this module
computes no statistic itself, it lays results out.

Folder layout::

    DIR/index.html          self-contained page (figures embedded as base64 PNG; no JS)
    DIR/results.json        every number shown, "generator": "phifit"
    DIR/figures/NAME.png    each figure at 150 dpi
    DIR/figures/NAME.svg    and as SVG

Sections: data summary and warnings; fitted law with intervals; isoFLOP curves;
compute-optimal frontier and gaps (law and per-cell parabola minima); bootstrap
distribution of phi; restricted-fit comparison; residuals; influence, identifiability
and consistency; the equivalence table; and, when their inputs exist, the Bayesian
posterior (``bayes=True``) and the Δφ between recipes (a ``variant`` column).

A folder is written only when it is absent, empty, or holds a previous phifit report
(its ``results.json`` says ``"generator": "phifit"``), unless ``force=True``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import report_template as T
from ._version import __version__
from .bootstrap import block_bootstrap
from .compare import compare_fits
from .diagnostics import Diagnostics, diagnose
from .equivalence import Equivalence, EquivalenceTable, equivalence_table, paper_example
from .fitters.huber import HuberOptions, fit_huber
from .frontier import Frontier, IsoflopCurves, TableFamily, frontier, isoflop_curves
from .isoflop import ParabolaMinima, parabola_minima, table_budgets
from .law import PARAM_NAMES
from .plain import to_plain
from .recipes import compare_recipes, select_recipe
from .reference import REFERENCE_PARAMS
from .result import GENERATOR, FitResult
from .runs import RunTable

__all__ = [
    "ReportOptions",
    "Analysis",
    "ReportFiles",
    "analyse",
    "write_report",
    "build_report",
    "check_report_dir",
    "STUDY_GAP_RANGES",
]

#: The study's headline frontier gaps (per-cell parabola minima, paper §4.2), nats.
STUDY_GAP_RANGES = {2: (0.03, 0.06), 4: (0.05, 0.08), 8: (0.09, 0.12)}
#: The study's 95% block-bootstrap interval of phi (paper Table 2).
STUDY_PHI_CI = (0.41, 0.53)


@dataclass(frozen=True)
class ReportOptions:
    """What the report computes.

    n_boot: block-bootstrap replicates (0: none); n_starts: random starts of the main
    Huber fit; bayes: add the Bayesian posterior; seed: seeds every random step;
    n_jobs: workers for the bootstrap; baseline: the baseline recipe when the table
    has a ``variant`` column (default: chosen by :mod:`phifit.recipes`).
    """

    n_boot: int = 1000
    n_starts: int = 500
    bayes: bool = False
    seed: int = 0
    n_jobs: int = 2
    baseline: str | None = None

    def __post_init__(self) -> None:
        if self.n_boot < 0 or (0 < self.n_boot < 2):
            raise ValueError(f"bootstrap replicates must be 0 (none) or >= 2, got {self.n_boot}")
        if self.n_starts < 1:
            raise ValueError(f"starts must be >= 1, got {self.n_starts}")


@dataclass(frozen=True)
class Analysis:
    """Every result the report shows (None where a section does not apply).

    ``runs`` are the runs the main sections analyse: the whole input ``table``, or its
    baseline recipe when the table holds several (the Δφ section uses them all).
    """

    runs: RunTable
    options: ReportOptions
    fit: FitResult
    diagnostics: Diagnostics
    bootstrap: Any | None = None
    comparison: Any | None = None
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
    compute: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    table: RunTable | None = None

    @property
    def input_table(self) -> RunTable:
        """The table the report was made from (``runs`` unless a recipe was selected)."""
        return self.runs if self.table is None else self.table

    def recipe_counts(self) -> dict[str, int] | None:
        """Runs per recipe of the input table, when its ``variant`` column holds several."""
        frame = self.input_table.frame
        if "variant" not in frame or frame["variant"].nunique() < 2:
            return None
        return {str(k): int(v) for k, v in frame["variant"].astype(str).value_counts().sort_index().items()}

    def to_dict(self) -> dict[str, Any]:
        """The content of ``results.json`` (plain JSON types)."""

        def d(x):
            return None if x is None else x.to_dict()

        boot = None
        if self.bootstrap is not None:
            boot = self.bootstrap.to_dict()
            boot["phi_draws"] = boot["thetas"] and [row[5] for row in boot["thetas"]]
        return to_plain(
            {
                "generator": GENERATOR,
                "kind": "report",
                "phifit_version": __version__,
                "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "source": self.input_table.source,
                "n_table_runs": len(self.input_table),
                "runs_per_recipe": self.recipe_counts(),
                "options": dict(self.options.__dict__),
                "data": self.diagnostics.data,
                "warnings": self.warnings(),
                "fit": self.fit.to_dict(),
                "bootstrap": boot,
                "comparison": d(self.comparison),
                "diagnostics": self.diagnostics.to_dict(),
                "derived": {
                    "equivalence": d(self.equivalence),
                    "paper_example": None
                    if self.example is None
                    else {k: v.to_dict() for k, v in self.example.items()},
                    "frontier": d(self.frontier),
                    "frontier_curve": d(self.frontier_curve),
                    "parabola_minima": d(self.parabola),
                    "isoflop_curves": d(self.isoflop),
                },
                "recipes": d(self.recipes),
                "bayes": d(self.bayes),
                "notes": self.notes,
                "timings": self.timings,
            }
        )

    def warnings(self) -> list[dict[str, Any]]:
        """Every warning of the analysis: {source, kind, message}."""
        out = [w.to_dict() for w in self.fit.warnings]
        out += [{"source": "diagnostics", **w.to_dict()} for w in self.diagnostics.warnings]
        if self.frontier is not None:
            out += [w.to_dict() for w in self.frontier.warnings]
        for name, obj in (("comparison", self.comparison), ("recipes", self.recipes), ("bayes", self.bayes)):
            for w in getattr(obj, "warnings", None) or []:
                out.append({"source": name, "kind": name, "message": str(w)})
        return out


# ------------------------------------------------------------------------------ analysis
def _timed(timings: dict[str, float], key: str, func: Callable, *args, **kwargs):
    t0 = time.perf_counter()
    try:
        return func(*args, **kwargs)
    finally:
        timings[key] = round(time.perf_counter() - t0, 3)


def analyse(runs: RunTable, options: ReportOptions | None = None) -> Analysis:
    """Run every analysis the report shows, by calling the statistical modules."""
    options = options or ReportOptions()
    timings: dict[str, float] = {}
    notes: list[str] = []
    main_runs = runs
    recipes = None
    if "variant" in runs.frame and runs.frame["variant"].nunique() > 1:
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
            n_jobs=options.n_jobs,
            progress=False,
        )
        main_runs = select_recipe(runs, recipes.baseline).runs
        notes.append(
            f"the table holds {runs.frame['variant'].nunique()} recipes; the main "
            f"sections analyse the baseline '{recipes.baseline}' ({len(main_runs)} runs)"
        )

    fit = _timed(
        timings,
        "fit",
        fit_huber,
        main_runs,
        options=HuberOptions(n_starts=options.n_starts, seed=options.seed),
    )
    phi_free = fit.phi is not None and not fit.fixed

    boot = None
    if options.n_boot and (phi_free or fit.phi is None) and not fit.fixed:
        boot = _timed(
            timings,
            "bootstrap",
            block_bootstrap,
            main_runs,
            n=options.n_boot,
            seed=options.seed,
            point=fit,
            n_jobs=options.n_jobs,
            progress=False,
        )
        fit = boot.attach(fit)
    elif not options.n_boot:
        notes.append("bootstrap turned off (n_boot = 0): no intervals")
    thetas = None if boot is None else boot.thetas

    comparison = None
    if main_runs.phi_identifiable:
        comparison = _timed(
            timings, "comparison", compare_fits, main_runs, seed=options.seed, n_starts=options.n_starts
        )

    diag = _timed(timings, "diagnostics", diagnose, main_runs, fit, seed=options.seed)

    equiv = example = front = curve = parab = iso = None
    if fit.phi is not None:
        equiv = _timed(timings, "equivalence", equivalence_table, main_runs, fit, thetas=thetas)
        example = paper_example(fit.phi)
    family = TableFamily.from_runs(main_runs)
    budgets = table_budgets(main_runs)
    front = _timed(timings, "frontier", frontier, fit, family, budgets, thetas=thetas)
    dense = np.geomspace(min(budgets), max(budgets), 48) if len(budgets) > 1 else budgets
    curve = frontier(fit, family, dense)
    has_budget = "budget" in main_runs.frame
    if has_budget:
        try:
            parab = parabola_minima(main_runs)
        except ValueError as err:
            notes.append(f"per-cell parabola minima skipped: {err}")
        try:
            iso = isoflop_curves(fit, main_runs, family=family)
        except ValueError as err:
            notes.append(f"isoFLOP curves skipped: {err}")
    else:
        notes.append("no 'budget' column: isoFLOP curves and per-cell parabola minima need one")

    bayes = bayes_draws = idata = None
    if options.bayes:
        from .fitters.bayes import posterior_draws, sample_posterior  # PyMC: imported only when asked

        sampled = _timed(timings, "bayes", sample_posterior, main_runs, seed=options.seed, progressbar=False)
        bayes, idata = sampled.result, sampled.idata
        bayes_draws = {k: np.asarray(v) for k, v in posterior_draws(sampled).items()}

    return Analysis(
        runs=main_runs,
        options=options,
        fit=fit,
        diagnostics=diag,
        bootstrap=boot,
        comparison=comparison,
        recipes=recipes,
        bayes=bayes,
        bayes_draws=bayes_draws,
        bayes_posterior=idata,
        equivalence=equiv,
        example=example,
        frontier=front,
        frontier_curve=curve,
        parabola=parab,
        isoflop=iso,
        compute=main_runs.compute.tolist(),
        notes=notes,
        timings=timings,
        table=runs,
    )


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
    """Refuse a non-empty folder that does not hold a previous phifit report (unless force)."""
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{path}: exists and is not a directory")
    if not path.exists() or force or not any(path.iterdir()):
        return  # a new folder (parents included) is created when the report is written
    try:
        previous = json.loads((path / "results.json").read_text(encoding="utf-8"))
        ok = previous.get("generator") == GENERATOR
    except (OSError, ValueError, AttributeError):
        ok = False
    if not ok:
        raise FileExistsError(
            f"{path}: not empty and holds no phifit report (no results.json "
            f"written by phifit); choose another folder or pass --force"
        )


def _clear_previous(path: Path) -> None:
    """Remove the figures and posterior file a previous phifit report in ``path`` listed."""
    try:
        previous = json.loads((path / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if previous.get("generator") != GENERATOR:
        return
    for rel in previous.get("files", []):
        p = (path / rel).resolve()
        figure = p.parent == (path / "figures").resolve() and p.suffix in (".png", ".svg")
        if (figure or p == (path / "posterior.nc").resolve()) and p.is_file():
            p.unlink()


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def build_report(
    runs: RunTable, out_dir: str | os.PathLike, *, options: ReportOptions | None = None, force: bool = False
) -> ReportFiles:
    """Analyse ``runs`` and write the report folder (see the module docstring)."""
    check_report_dir(out_dir, force)
    analysis = analyse(runs, options)
    return write_report(analysis, out_dir, force=force)


def write_report(analysis: Analysis, out_dir: str | os.PathLike, *, force: bool = False) -> ReportFiles:
    """Draw the figures and write ``index.html``, ``results.json`` and ``figures/``."""
    from . import plots

    check_report_dir(out_dir, force)
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    _clear_previous(path)
    (path / "figures").mkdir(exist_ok=True)
    timings = dict(analysis.timings)
    t0 = time.perf_counter()
    figures: dict[str, dict[str, str]] = {}
    pngs: dict[str, bytes] = {}

    def save(name: str, fig) -> None:
        stem = path / "figures" / name
        plots.save_figure(fig, str(stem))
        figures[name] = {"png": f"figures/{name}.png", "svg": f"figures/{name}.svg"}
        pngs[name] = (path / "figures" / f"{name}.png").read_bytes()

    for name, fig in _figures(analysis, plots):
        save(name, fig)
    timings["figures"] = round(time.perf_counter() - t0, 3)

    results = analysis.to_dict()
    files = ["index.html", "results.json"] + [p for f in figures.values() for p in f.values()]
    if analysis.bayes_posterior is not None:  # the posterior, reloadable with ArviZ
        posterior = path / "posterior.nc"
        if posterior.exists():
            posterior.unlink()
        analysis.bayes_posterior.to_netcdf(str(posterior))
        files.append("posterior.nc")
    results["figures"] = figures
    results["files"] = files
    results["timings"] = timings
    _write_text(path / "results.json", json.dumps(results, indent=1, allow_nan=False) + "\n")
    _write_text(path / "index.html", render_html(analysis, pngs, figures))
    return ReportFiles(
        out_dir=str(path), files=files, figures=figures, timings=timings, headline=_headline(analysis)
    )


def _headline(a: Analysis) -> str:
    """One line: phi with its interval, R^2, RMSE, warnings count."""
    fit = a.fit
    phi = "phi not identified" if fit.phi is None else f"phi = {fit.phi:.4f}"
    iv = (fit.ci or {}).get("phi")
    if iv:
        phi += f" (95% percentile [{iv[0]:.3f}, {iv[1]:.3f}])"
    return f"{phi}, R^2 = {fit.r2:.4f}, RMSE = {fit.rmse:.4f} nats, {len(a.warnings())} warning(s)"


# ------------------------------------------------------------------------------ figures
def _figures(a: Analysis, plots) -> list[tuple[str, Any]]:
    """(name, Figure) for every figure that applies."""
    runs, fit, diag = a.runs, a.fit, a.diagnostics
    out = []
    n_unique = (runs.n_once + runs.n_rec).tolist()
    if a.isoflop is not None:
        out.append(
            (
                "isoflop",
                plots.isoflop_figure(
                    {
                        "r": runs.r.astype(int).tolist(),
                        "budget": runs.frame["budget"].tolist(),
                        "n_unique": n_unique,
                        "loss": runs.loss.tolist(),
                    },
                    a.isoflop.cells,
                ),
            )
        )
    if a.frontier is not None and a.frontier_curve is not None:
        out.append(
            (
                "frontier",
                plots.frontier_figure(
                    {"r": runs.r.astype(int).tolist(), "compute": a.compute, "loss": runs.loss.tolist()},
                    a.frontier_curve.to_dict(),
                    a.frontier.to_dict(),
                    None if a.parabola is None else a.parabola.to_dict(),
                ),
            )
        )
    if a.bootstrap is not None and fit.phi is not None and "phi" in (fit.ci or {}):
        out.append(
            (
                "bootstrap_phi",
                plots.bootstrap_figure(
                    a.bootstrap.params["phi"][~a.bootstrap.failed].tolist(),
                    fit.phi,
                    (fit.ci or {}).get("phi"),
                    interval_bca=(fit.ci_bca or {}).get("phi"),
                ),
            )
        )
    cmp_rows = _comparison_rows(a.comparison)
    if cmp_rows:
        out.append(("comparison", plots.comparison_figure(cmp_rows)))
    out.append(("residuals", plots.residual_figure(diag.residuals.to_dict())))
    if diag.influence is not None:
        out.append(("influence", plots.influence_figure(diag.influence.to_dict())))
    ident = diag.identifiability
    if ident.profile is not None:
        out.append(
            (
                "phi_profile",
                plots.profile_figure(
                    ident.profile,
                    fit.phi,
                    (fit.ci or {}).get("phi") or ident.profile_interval,
                    None if diag.consistency is None else diag.consistency.to_dict(),
                ),
            )
        )
    if a.bayes_draws:
        out.append(("posterior", plots.posterior_figure(a.bayes_draws, point=fit.params)))
    rec_rows = _recipe_rows(a.recipes)
    if rec_rows:
        out.append(
            (
                "recipes",
                plots.recipes_figure(rec_rows, baseline=str(getattr(a.recipes, "baseline", "baseline"))),
            )
        )
    return out


# ----------------------------------------------------------- adapters to other modules
def _comparison_rows(comparison: Any) -> list[dict[str, Any]]:
    """[{label, r2, objective, params, ...}] from a Comparison (free fit first)."""
    if comparison is None:
        return []
    data = comparison.to_dict()
    fits = data.get("fits", [])
    rows = []
    items = fits.items() if isinstance(fits, dict) else ((None, f) for f in fits)
    for key, f in items:
        label = (
            f.get("label")
            or key
            or ",".join(f"{k}={v:g}" for k, v in (f.get("fixed") or {}).items())
            or "free"
        )
        rows.append(
            {
                "label": str(label),
                "r2": f.get("r2"),
                "rmse": f.get("rmse"),
                "objective": f.get("objective"),
                "params": f.get("params", {}),
                "fixed": f.get("fixed", {}),
                "aic": f.get("aic"),
                "bic": f.get("bic"),
                "lr_p_value": f.get("lr_p_value"),
                "cv_rmse": f.get("cv_rmse"),
                "rejected": f.get("rejected"),
            }
        )
    return [r for r in rows if r["r2"] is not None]


def _recipe_rows(recipes: Any) -> list[dict[str, Any]]:
    if recipes is None:
        return []
    rows = []
    for variant, value in (getattr(recipes, "delta_phi", None) or {}).items():
        rows.append(
            {
                "variant": variant,
                "delta_phi": value.get("estimate"),
                "interval": value.get("ci"),
                "interval_bca": value.get("ci_bca"),
                "p_value": value.get("p_value"),
                "variant_phi": value.get("variant_phi"),
                "baseline_phi": value.get("baseline_phi"),
                "budgets": value.get("budgets"),
                "n_runs": value.get("n_runs_variant"),
            }
        )
    return [r for r in rows if r["delta_phi"] is not None]


# --------------------------------------------------------------------------------- HTML
def render_html(a: Analysis, pngs: dict[str, bytes], figures: dict[str, dict[str, str]]) -> str:
    """The report page (sections in reading order)."""

    def fig(name: str, alt: str, caption: str) -> str:
        if name not in pngs:
            return ""
        return T.figure(pngs[name], alt=alt, caption=caption, files=figures[name])

    sections = [
        ("data", "Data and warnings", _section_data(a)),
        ("law", "Fitted law", _section_law(a)),
        (
            "isoflop",
            "isoFLOP curves",
            fig(
                "isoflop",
                "isoFLOP curves per r with the fitted law",
                "Loss vs unique parameters on each isoFLOP budget, one panel per r; lines: the "
                "fitted joint law at D = C / F along the architectures of the table.",
            )
            or T.missing("No isoFLOP curves: the table has no numeric 'budget' column."),
        ),
        ("frontier", "Compute-optimal frontier", _section_frontier(a, fig)),
        ("bootstrap", "Bootstrap distribution of φ", _section_bootstrap(a, fig)),
        ("comparison", "Restricted fits", _section_comparison(a, fig)),
        ("residuals", "Residuals", _section_residuals(a, fig)),
        ("influence", "Influence, identifiability and consistency", _section_influence(a, fig)),
        ("equivalence", "Equivalent sizes", _section_equivalence(a)),
    ]
    if a.options.bayes:
        sections.append(("bayes", "Bayesian posterior", _section_bayes(a, fig)))
    if a.recipes is not None:
        sections.append(("recipes", "Δφ between recipes", _section_recipes(a, fig)))
    sections.append(("files", "Files", _section_files(figures)))
    created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = a.input_table
    analysed = "" if table is a.runs else f" ({len(a.runs)} analysed)"
    meta = (
        f"{T.esc(table.source)} · {len(table)} runs{analysed} · phifit {T.esc(__version__)} · "
        f"{created} · bootstrap {a.options.n_boot} · seed {a.options.seed}"
    )
    return T.page(f"phifit report: {Path(table.source).name}", meta, sections)


def _section_data(a: Analysis) -> str:
    d = a.diagnostics.data
    rows = []
    counts = a.recipe_counts()
    if counts:
        rows.append(
            [
                "table",
                T.esc(
                    f"{len(a.input_table)} runs in {len(counts)} recipes ("
                    + ", ".join(f"{k}: {v}" for k, v in counts.items())
                    + f"); this section and the ones up to the Δφ section analyse the "
                    f"{a.recipes.baseline if a.recipes is not None else 'baseline'} recipe"
                ),
            ]
        )
    rows += [
        ["runs", str(d["n_runs"])],
        ["runs per r", T.esc(", ".join(f"r={k}: {v}" for k, v in d["runs_per_r"].items()))],
    ]
    if "runs_per_budget" in d:
        rows.append(
            [
                "runs per budget",
                T.esc(", ".join(f"{_budget_label(k)}: {v}" for k, v in d["runs_per_budget"].items())),
            ]
        )
        rows.append(["(budget, r) cells", str(d["n_cells"])])
    if "runs_per_variant" in d:
        rows.append(
            ["runs per variant", T.esc(", ".join(f"{k}: {v}" for k, v in d["runs_per_variant"].items()))]
        )
    rows += [
        ["unique parameters N", f"{T.count(d['n_unique_range'][0])} – {T.count(d['n_unique_range'][1])}"],
        ["training tokens D", f"{T.count(d['tokens_range'][0])} – {T.count(d['tokens_range'][1])}"],
        ["loss (nats/token)", f"{T.fixed(d['loss_range'][0])} – {T.fixed(d['loss_range'][1])}"],
        ["columns", T.esc(", ".join(d["columns"]))],
    ]
    html = T.table(["", "value"], rows, left=2)
    warns = [f"[{w['source']}] {w['message']}" for w in a.warnings()]
    html += "<h3>Warnings</h3>" + (
        T.bullet_list(warns, "warnings") if warns else '<p class="ok">No warnings.</p>'
    )
    if a.notes:
        html += "<h3>Notes</h3>" + T.bullet_list(a.notes, "notes")
    return html


def _budget_label(key: Any) -> str:
    try:
        return f"{float(key):.3g}"
    except (TypeError, ValueError):
        return str(key)


def _section_law(a: Analysis) -> str:
    fit = a.fit
    se = a.diagnostics.identifiability.stderr
    html = (
        '<p class="formula">L = E + A · (N<sub>once</sub> + r<sup>φ</sup> N<sub>rec</sub>)'
        "<sup>−α</sup> + B · D<sup>−β</sup></p>"
    )
    html += (
        "<p>Summed Huber (δ = 10<sup>−3</sup>) on log-loss residuals, best of "
        f"{T.esc(fit.extras.get('n_starts', '?'))} random starts "
        f"({T.esc(fit.extras.get('n_starts_at_best', '?'))} of the refined starts reached "
        "the best objective). Intervals: block bootstrap over (budget, r) cells "
        f"({T.esc((fit.bootstrap or {}).get('n', 0))} replicates); SE: Gauss-Newton "
        "approximation at the optimum.</p>"
    )
    rows = []
    for name in PARAM_NAMES:
        v = fit.params.get(name)
        rows.append(
            [
                T.esc("φ" if name == "phi" else name),
                "n/a" if v is None else T.num(v, 5) + (" (fixed)" if name in fit.fixed else ""),
                T.interval((fit.ci or {}).get(name)),
                T.interval((fit.ci_bca or {}).get(name)),
                T.num(se.get(name), 3),
                T.num(REFERENCE_PARAMS[name], 5),
            ]
        )
    html += T.table(
        ["parameter", "estimate", "95% percentile", "95% BCa", "approx. SE", "reference study"], rows
    )
    resid = np.abs(fit.residuals) if fit.residuals else np.array([np.nan])
    html += T.table(
        ["", "value"],
        [
            ["runs", str(fit.n_runs)],
            ["R² (raw nats)", T.fixed(fit.r2, 5)],
            ["RMSE (nats)", T.fixed(fit.rmse, 5)],
            ["max |residual| (nats)", T.fixed(resid.max(), 4)],
            ["objective", T.esc(f"{fit.objective:.6g} ({fit.objective_name})")],
            ["converged", str(fit.converged)],
        ],
        left=2,
    )
    html += (
        "<p>The reference column is the study's joint fit (φ = 0.459, 95% CI "
        f"[{STUDY_PHI_CI[0]}, {STUDY_PHI_CI[1]}], R² 0.9972), for orientation only: φ from "
        "different baselines is not comparable.</p>"
    )
    return html


def _section_frontier(a: Analysis, fig) -> str:
    f = a.frontier
    if f is None:
        return T.missing("No frontier: the table has no looped runs.")
    html = fig(
        "frontier",
        "loss vs compute and frontier gap per r",
        "Left: runs and the law's compute-optimal frontier L*(C) per r. Right: the gap "
        f"L*(r) − L*(r = {f.base_r}); lines: the law (bands: bootstrap 95% percentile "
        "intervals at the table's budgets); markers: per-cell parabola minima of loss vs "
        "log N (Chinchilla's approach 2, the study's estimator).",
    )
    html += (
        f"<p>Frontier: for each budget C and r, the architecture minimising the predicted "
        f"loss subject to C = F · D; architectures {T.esc(f.family)}.</p>"
    )
    header = ["C (FLOPs)", f"L*(r={f.base_r})"]
    gaps = sorted(f.gap)
    for r in gaps:
        header += [f"gap r={r}: law", "95% interval", "parabola minima"]
    para = {}
    if a.parabola is not None:
        for r, items in a.parabola.gap.items():
            for x in items:
                if isinstance(x["budget"], (int, float)):
                    para[(int(r), float(x["budget"]))] = x["gap"]
    rows = []
    for i, c in enumerate(f.budgets):
        row = [T.num(c, 3), T.fixed(f.l_star[f.base_r][i])]
        for r in gaps:
            iv = f.gap_interval[r][i] if f.gap_interval else None
            row += [
                T.fixed(f.gap[r][i], 3),
                T.interval(iv, lambda v: T.fixed(v, 3)),
                T.fixed(para.get((r, float(c))), 3),
            ]
        rows.append(row)
    html += T.table(header, rows)
    rng_rows = []
    prange = a.parabola.gap_range if a.parabola is not None else {}
    if a.parabola is not None and a.parabola.warnings:
        html += "<p>Per-cell parabola minima left out:</p>" + T.bullet_list(
            [w.message for w in a.parabola.warnings], "notes"
        )
    for r in gaps:
        lo, hi = f.gap_range[r]
        p = prange.get(r)
        s = STUDY_GAP_RANGES.get(r)
        rng_rows.append(
            [
                f"r = {r}",
                f"{lo:.3f} – {hi:.3f}",
                f"{p[0]:.3f} – {p[1]:.3f}" if p else "n/a",
                f"{s[0]:.2f} – {s[1]:.2f}" if s else "",
            ]
        )
    html += "<h3>Gap ranges across budgets (nats)</h3>"
    html += T.table(
        ["", "law (this fit)", "parabola minima (this data)", "study (parabola minima)"], rng_rows
    )
    exp_rows = [[f"r = {r}", f"{e['n']:.2f}", f"{e['d']:.2f}"] for r, e in f.exponents.items()]
    if exp_rows:
        html += "<h3>Compute-optimal scaling under the law</h3>"
        html += T.table(["", "N* ∝ C^a: a", "D* ∝ C^b: b"], exp_rows)
    return html


def _section_bootstrap(a: Analysis, fig) -> str:
    b = a.bootstrap
    if b is None:
        return T.missing(
            "No bootstrap: "
            + ("turned off." if not a.options.n_boot else "phi is not free or phifit.bootstrap is missing.")
        )
    fit = a.fit
    if fit.phi is None or "phi" not in (fit.ci or {}):
        return T.missing(
            f"φ is not identified, so it has no bootstrap distribution; the "
            f"{b.n}-replicate block bootstrap of the other parameters is in the "
            f"fitted-law table."
        )
    html = fig(
        "bootstrap_phi",
        "bootstrap distribution of phi",
        f"φ refitted on {b.n - b.n_failed} block-bootstrap resamples of the "
        f"{b.n_blocks} '{T.esc(b.block)}' blocks; dashed: 95% percentile interval, dotted: "
        f"BCa.",
    )
    rows = [
        ["replicates (failed)", f"{b.n} ({b.n_failed})"],
        ["95% percentile interval", T.interval(fit.ci.get("phi"), lambda v: T.fixed(v, 3))],
        ["95% BCa interval", T.interval(fit.ci_bca.get("phi"), lambda v: T.fixed(v, 3))],
        ["share of replicates with φ ≤ 0", T.fixed(b.share("phi", lambda v: v <= 0), 3)],
        ["share of replicates with φ ≥ 1", T.fixed(b.share("phi", lambda v: v >= 1), 3)],
        ["study (200 resamples, percentile)", f"[{STUDY_PHI_CI[0]}, {STUDY_PHI_CI[1]}]"],
    ]
    html += T.table(["", "value"], rows, left=2)
    html += T.bullet_list(b.warnings, "notes")
    return html


def _section_comparison(a: Analysis, fig) -> str:
    rows = _comparison_rows(a.comparison)
    if not rows:
        return T.missing(
            "No restricted-fit comparison: phi is not identifiable from these runs "
            "(it needs looped runs, r > 1 with N_rec > 0, and at least two values of r)."
        )
    html = fig(
        "comparison",
        "R squared of free and restricted fits",
        "R² on raw nats of the free fit and of the restricted laws (the study: 0.9972 "
        "free, 0.9858 φ = 0, 0.9552 φ = 1).",
    )
    table_rows = []
    for r in rows:
        p = r["params"] or {}
        verdict = (
            ""
            if r["rejected"] is None
            else ('<span class="bad">rejected</span>' if r["rejected"] else "not rejected")
        )
        table_rows.append(
            [
                T.esc(r["label"]),
                T.fixed(r["r2"], 5),
                T.fixed(r["rmse"], 5),
                T.num(r["aic"], 5),
                T.num(r["bic"], 5),
                T.num(r["lr_p_value"], 3),
                T.fixed(r["cv_rmse"], 5),
                verdict,
            ]
            + [T.num(p.get(n), 4) for n in PARAM_NAMES]
        )
    html += T.table(
        ["fit", "R²", "RMSE", "AIC", "BIC", "LR p", "CV RMSE", ""]
        + ["φ" if n == "phi" else n for n in PARAM_NAMES],
        table_rows,
    )
    html += (
        "<p>AIC, BIC and the likelihood-ratio p-value use a Gaussian working likelihood "
        "of the log-loss residuals; CV RMSE: leave-one-budget-out prediction error "
        "(nats).</p>"
    )
    verdict = getattr(a.comparison, "verdict", None)
    if verdict:
        html += f"<p><b>Verdict:</b> {T.esc(verdict)}</p>"
    rule = getattr(a.comparison, "rule", None)
    if rule:
        html += f"<p>Rule: {T.esc(rule)}.</p>"
    html += T.bullet_list(list(getattr(a.comparison, "notes", []) or []), "notes")
    return html


def _section_residuals(a: Analysis, fig) -> str:
    res = a.diagnostics.residuals
    html = fig(
        "residuals",
        "residual panels",
        "Residuals (actual − predicted, nats) vs fitted loss, effective size and tokens, "
        "by r and by budget, and the normal QQ plot of the log residuals.",
    )
    rows = [
        [
            f"r = {g.group}",
            str(g.n),
            T.fixed(g.mean, 4, signed=True),
            T.fixed(g.max_abs, 4),
            T.fixed(g.rmse, 4),
            T.fixed(g.t, 1),
        ]
        for g in res.by_r
    ]
    p = res.pooled
    rows.append(
        [
            "pooled",
            str(p.n),
            T.fixed(p.mean, 4, signed=True),
            T.fixed(p.max_abs, 4),
            T.fixed(p.rmse, 4),
            T.fixed(p.t, 1),
        ]
    )
    html += "<h3>Per r (the study's Table 7)</h3>"
    html += T.table(
        ["", "n", "mean", "max |resid|", "RMSE", "t = mean / SE"],
        rows,
        flags=[g.flagged for g in res.by_r] + [False],
    )
    rule = res.offset_rule
    html += (
        f"<p>Flag rule: r is systematically off when |mean| &gt; {rule['k']:g} SE and "
        f"|mean| &gt; max({rule['floor']:g} nats, {rule['rel_floor']:g} × pooled RMSE) = "
        f"{rule['threshold']:.4f} nats.</p>"
    )
    if res.by_budget:
        html += "<h3>Per budget</h3>"
        html += T.table(
            ["C", "n", "mean", "max |resid|", "RMSE"],
            [
                [
                    _budget_label(g.group),
                    str(g.n),
                    T.fixed(g.mean, 4, signed=True),
                    T.fixed(g.max_abs, 4),
                    T.fixed(g.rmse, 4),
                ]
                for g in res.by_budget
            ],
        )
    html += "<h3>Residual tests (log residuals)</h3>"
    html += T.table(
        ["test", "against", "statistic", "p-value", "result", "note"],
        [
            [
                T.esc(t.name),
                T.esc(t.against),
                T.num(t.statistic, 4),
                T.num(t.pvalue, 3),
                '<span class="ok">pass</span>' if t.passed else '<span class="bad">reject</span>',
                T.esc(t.note),
            ]
            for t in res.tests
        ],
        left=2,
        left_last=True,
    )
    html += T.bullet_list([f.message for f in res.flags], "warnings")
    return html


def _section_influence(a: Analysis, fig) -> str:
    d = a.diagnostics
    html = ""
    if d.influence is not None:
        infl = d.influence
        html += fig(
            "influence",
            "leave-one-out change in phi",
            "Change in φ when one run (left) or one (budget, r) cell (right) is left "
            "out; refits warm-started from the full-data optimum.",
        )
        html += "<h3>Runs that move φ most</h3>"
        html += T.table(
            ["run", "r", "φ without it", "Δφ"],
            [
                [T.esc(x["run_id"]), str(x["r"]), T.fixed(x["phi"]), T.fixed(x["delta_phi"], 4, signed=True)]
                for x in infl.top
            ],
            left=1,
        )
        if infl.cells:
            worst = sorted(
                (c for c in infl.cells if _finite(c["delta_phi"])), key=lambda c: -abs(c["delta_phi"])
            )[:5]
            html += "<h3>Cells that move φ most</h3>"
            html += T.table(
                ["cell", "runs", "φ without it", "Δφ"],
                [
                    [
                        T.esc(c["cell"]),
                        str(c["n"]),
                        T.fixed(c["phi"]),
                        T.fixed(c["delta_phi"], 4, signed=True),
                    ]
                    for c in worst
                ],
            )
        html += T.bullet_list(infl.notes, "notes")
    ident = d.identifiability
    html += fig(
        "phi_profile",
        "profile of the objective along phi and subset refits",
        "Left: profile deviance n log(SSR(φ)/SSR_min) with the other parameters "
        "refitted at each φ; the restricted laws φ = 0 and φ = 1 lie on this curve. "
        "Right: φ refitted on budget halves and on pairs of r (band: 95% interval).",
    )
    if d.consistency is not None:
        html += "<h3>Consistency of φ</h3>"
        html += T.table(
            ["subset", "runs", "φ", "R²"],
            [
                [T.esc(x["label"]), str(x["n"]), T.fixed(x["phi"]), T.fixed(x["r2"], 4)]
                for x in d.consistency.halves + d.consistency.pairs
            ],
            left=1,
        )
        html += (
            "<p>The study reports φ = 0.44 on its lower budgets (C ≤ 2.15e18) and 0.49 on "
            "the upper ones (C ≥ 4.64e18).</p>"
        )
        html += T.bullet_list(d.consistency.notes, "notes")
    html += "<h3>Identifiability at the optimum</h3>"
    names = [
        "log A" if n == "a" else "log B" if n == "b" else "log E" if n == "e" else ("φ" if n == "phi" else n)
        for n in ident.names
    ]
    html += T.table(
        [""] + names, [[names[i]] + [T.fixed(c, 3) for c in row] for i, row in enumerate(ident.correlation)]
    )
    html += f"<p>Condition number of the unit-diagonal information matrix: {ident.condition_number:.3g}."
    if ident.profile_interval:
        lo, hi = ident.profile_interval
        html += f" Profile-deviance 95% interval of φ: [{lo:.3f}, {hi:.3f}]."
    html += "</p>"
    html += T.bullet_list([w.message for w in ident.warnings], "warnings")
    return html


def _section_equivalence(a: Analysis) -> str:
    if a.equivalence is None:
        return T.missing("No equivalence table: φ is not identified.")
    fit = a.fit
    html = (
        "<p>A looped model with N<sub>once</sub> once-applied and N<sub>rec</sub> shared "
        "parameters looped r times matches a non-looped model of N<sub>eff</sub> = "
        "N<sub>once</sub> + r<sup>φ</sup> N<sub>rec</sub> parameters, and costs per token "
        "what a non-looped model of N<sub>once</sub> + r N<sub>rec</sub> parameters costs "
        f"(φ = {fit.phi:.3f}).</p>"
    )
    if a.example is not None:
        e, w = a.example["blocks_only"], a.example["with_injection"]
        html += (
            f"<p>The study's example (its F.4), with this fit's φ: the r = 4 iso-depth twin "
            f"of a 1B non-looped model has {T.count(w.n_unique)} unique parameters (with the "
            f"injection layer; {T.count(e.n_unique)} without), is worth a "
            f"{T.count(e.n_eff)} non-looped model ({T.count(w.n_eff)} counting the "
            f"injection layer in N<sub>rec</sub>), at the training cost of a "
            f"{T.count(e.n_unrolled)}–{T.count(w.n_unrolled)} one. The study (φ = 0.459): "
            f"410M ≈ 580M at the cost of 1B.</p>"
        )
    rows = []
    for e in a.equivalence.rows:
        rows.append(
            [
                str(e.r),
                T.count(e.n_once),
                T.count(e.n_rec),
                T.count(e.n_unique),
                T.count(e.n_eff),
                T.interval(e.n_eff_interval, T.count),
                T.count(e.n_unrolled),
                T.fixed(e.eff_over_unrolled, 3),
            ]
        )
    html += T.table(
        ["r", "N_once", "N_rec", "unique", "N_eff", "95% interval", "unrolled cost", "N_eff / unrolled"], rows
    )
    return html


def _section_bayes(a: Analysis, fig) -> str:
    if a.bayes is None:
        return T.missing("No posterior was sampled.")
    b = a.bayes
    ex = b.extras or {}
    post = ex.get("posterior", {})
    html = fig(
        "posterior",
        "posterior marginals",
        "Marginal posterior draws (Student-t likelihood on log-loss, weakly informative "
        "priors on the study's box); line: the Huber estimate.",
    )
    rows = []
    for n in PARAM_NAMES:
        s = post.get(n, {})
        rows.append(
            [
                T.esc("φ" if n == "phi" else n),
                T.num(b.params.get(n), 5),
                T.num(s.get("sd"), 3),
                T.interval((b.ci or {}).get(n)),
                T.num(a.fit.params.get(n), 5),
                T.num(s.get("r_hat"), 4),
                T.num(s.get("ess_bulk"), 4),
            ]
        )
    html += T.table(
        ["parameter", "posterior median", "sd", "95% HDI", "Huber estimate", "R-hat", "bulk ESS"], rows
    )
    diag = ex.get("diagnostics", {})
    loo = ex.get("loo", {})
    html += T.table(
        ["", "value"],
        [
            [
                "sampler",
                T.esc(
                    f"{ex.get('sampler')} ({ex.get('chains')} chains × {ex.get('draws')} "
                    f"draws after {ex.get('tune')} tuning steps)"
                ),
            ],
            ["divergences", T.esc(diag.get("divergences", ex.get("divergences")))],
            [
                "max R-hat / min bulk ESS",
                f"{T.num(diag.get('max_r_hat'), 4)} / {T.num(diag.get('min_ess_bulk'), 4)}",
            ],
            ["ELPD-LOO", T.num(loo.get("elpd_loo"), 6)],
            ["converged", T.esc(b.converged)],
            ["posterior file", '<a href="posterior.nc">posterior.nc</a> (ArviZ InferenceData)'],
        ],
        left=2,
    )
    ppc = (ex.get("ppc") or {}).get("by_r") or []
    if ppc:
        html += "<h3>Posterior predictive check per r</h3>"
        html += T.table(
            ["r", "p (mean log-loss)", "p (residual RMS)"],
            [[T.esc(row.get("r")), T.num(row.get("p_mean"), 3), T.num(row.get("p_rmse"), 3)] for row in ppc],
        )
    html += T.bullet_list(list(b.warnings), "warnings")
    return html


def _section_recipes(a: Analysis, fig) -> str:
    rec = a.recipes
    html = fig(
        "recipes",
        "delta phi between recipes",
        "Δφ of each recipe against the baseline, with its bootstrap interval.",
    )
    rows = _recipe_rows(rec)
    html += (
        f"<p>Each recipe is compared with the baseline '{T.esc(rec.baseline)}' refitted on "
        "the same budgets (the study's lesson: its baseline refit on the four lower budgets "
        "gives φ = 0.453, not 0.459); intervals from a paired block bootstrap.</p>"
    )
    html += T.table(
        [
            "variant",
            "runs",
            "φ variant",
            "φ baseline (same budgets)",
            "Δφ",
            "95% percentile",
            "95% BCa",
            "p-value",
        ],
        [
            [
                T.esc(r["variant"]),
                str(r["n_runs"]),
                T.fixed(r["variant_phi"], 3),
                T.fixed(r["baseline_phi"], 3),
                T.fixed(r["delta_phi"], 3, signed=True),
                T.interval(r["interval"], lambda v: T.fixed(v, 3, signed=True)),
                T.interval(r["interval_bca"], lambda v: T.fixed(v, 3, signed=True)),
                T.num(r["p_value"], 3),
            ]
            for r in rows
        ],
    )
    summary = getattr(rec, "summary", None)
    if callable(summary):
        html += f"<pre>{T.esc(summary())}</pre>"
    return html


def _section_files(figures: dict[str, dict[str, str]]) -> str:
    items = ['<li><a href="results.json">results.json</a>: every number in this report</li>']
    for name, paths in figures.items():
        items.append(
            f"<li>{T.esc(name)}: "
            + ", ".join(f'<a href="{T.esc(p)}">{T.esc(p)}</a>' for p in paths.values())
            + "</li>"
        )
    return "<ul>" + "".join(items) + "</ul>"


def _finite(x: Any) -> bool:
    return x is not None and math.isfinite(float(x))
