"""Figures of a phifit analysis, drawn from numbers computed elsewhere.

One module on purpose: one small pure function per figure plus the shared style, so every
figure looks alike and none computes anything.

Every function takes result objects (or, for the figures without a public plot, the
numbers read from them) and returns a :class:`matplotlib.figure.Figure`; none fits or tests
anything.  The isoFLOP, frontier, bootstrap, multiplier and residual figures are the public
``phifit.plot.plot_*`` functions drawn into a figure of their own (typed results in: a
FitResult with its RunTable, the IsoflopCurves, the Frontier, the BootstrapResult, the
MultiplierFit, the ResidualDiagnostics), so a report figure and a notebook plot are one code
path; the others are drawn from :mod:`phifit.plot.panels` and matplotlib directly.  Figures
are built without pyplot (no global state; the Agg canvas renders them, once per PNG), so
they are safe in scripts, servers and tests.

Conventions: labelled axes with units; log axes for quantities spanning decades
(parameters, tokens, FLOPs); the Okabe-Ito colour-blind-safe palette for categories
(r, budgets, variants), with a distinct marker per category so that figures also read
in grey-scale print.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from .. import defaults
from ..plot import panels as draw
from ..plot.functions import (
    placed_compute,
    plot_bootstrap,
    plot_frontier,
    plot_isoflop,
    plot_multipliers,
    plot_residuals,
)
from ..plot.style import (
    LOSS_LABEL,
    OKABE_ITO,
    RESID_LABEL,
    category_index,
    color_for,
    log_x,
    marker_for,
)
from ..plot.style import style as _style
from .html import interval_text

__all__ = [
    "OKABE_ITO",
    "color_for",
    "marker_for",
    "isoflop_figure",
    "frontier_figure",
    "bootstrap_figure",
    "residual_figure",
    "influence_figure",
    "profile_figure",
    "posterior_figure",
    "recipes_figure",
    "comparison_figure",
    "multiplier_figure",
    "adaptive_figure",
    "save_figure",
    "figure_bytes",
]

_RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "svg.fonttype": "none",
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.5,
    "svg.hashsalt": "phifit",
}  # fixed ids: the same figure gives the same SVG bytes
# no creation dates in the files: a regenerated report differs only where its content does
_NO_DATE = {"png": {"Software": None}, "svg": {"Date": None}}


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _styled(func):
    """Build the figure under phifit's rc settings (fonts, grid, spines)."""
    import functools

    import matplotlib

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(_RC):
            return func(*args, **kwargs)

    return wrapper


_category_index = category_index
_log_x = log_x


# ------------------------------------------------------------------------------ isoFLOP
@_styled
def isoflop_figure(
    fit: Any,
    runs: Any,
    curves: Any,
    *,
    title: str = "isoFLOP curves: runs and the fitted law",
    looped: bool = True,
) -> Figure:
    """One panel per r: loss vs unique parameters, one colour per budget, fitted curves
    (``looped=False``, a non-looped table: one panel, not titled by r), with one legend below
    the panels: :func:`phifit.plot.plot_isoflop` in a figure of its own.

    ``fit``: the FitResult; ``runs``: the RunTable it was fitted on; ``curves``: its
    :class:`phifit.frontier.IsoflopCurves`.
    """
    r_values = sorted(set(np.asarray(runs.r, int).tolist()))
    budgets = sorted(set(np.asarray(runs.budget, object).tolist()))
    cols = min(len(r_values), 2) if len(r_values) > 1 else 1
    rows = math.ceil(len(r_values) / cols)
    fig = _figure(3.6 * cols + 0.4, 3.0 * rows + 0.5)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True).ravel()
    plot_isoflop(fit, runs, curves=curves, axes=axes[: len(r_values)])
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].get_legend().remove()  # one legend for the figure, below the panels
    for k, ax in enumerate(axes):
        if k >= len(r_values):
            ax.set_visible(False)
            continue
        if not looped:
            ax.set_title("")
        if k % cols:
            ax.set_ylabel("")
    if len(budgets) <= 10:
        fig.legend(
            handles,
            labels,
            loc="outside lower center",
            ncol=min(len(budgets), 3),
            frameon=False,
            title="points: runs; lines: fitted law at D = C / F",
        )
    fig.suptitle(title)
    return fig


# ----------------------------------------------------------------------------- frontier
@_styled
def frontier_figure(curve: Any, runs: Any, *, at_budgets: Any, parabola: Any = None) -> Figure:
    """Left: loss vs training compute with the law's frontier per r.  Right: frontier
    gap to the base r vs compute: the law (line, bootstrap band) and the per-cell
    parabola minima (markers); the legends sit outside the axes, clear of the markers.
    :func:`phifit.plot.plot_frontier` twice, in a figure of its own.

    ``curve``: a :class:`~phifit.frontier.Frontier` over a dense grid of budgets; ``runs``: the
    RunTable, placed at their training compute (:func:`phifit.plot.functions.placed_compute`,
    named under the left axis); ``at_budgets``: the Frontier at the table's budgets (its
    bootstrap band is shaded); ``parabola``: the :class:`~phifit.isoflop.ParabolaMinima`.
    """
    fig = _figure(9.0, 4.3)
    ax1, ax2 = fig.subplots(1, 2)
    plot_frontier(curve, runs, kind="loss", ax=ax1)
    ax1.legend(frameon=False, loc="lower left", bbox_to_anchor=(1.0, 0.0), handlelength=1.5)
    plot_frontier(curve, runs, kind="gap", band=at_budgets, parabola=parabola, ax=ax2)
    r_values = set(np.asarray(runs.r, int).tolist()) | {int(r) for r in curve.r_values}
    if len(r_values) > 1:
        ax2.legend(frameon=False, fontsize="x-small", ncol=1, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    elif ax2.get_legend() is not None:
        ax2.get_legend().remove()
    return fig


@_styled
def chinchilla_frontier_figure(curve: Any, runs: Any) -> Figure:
    """A non-looped table's frontier: loss vs training compute, the runs and the law's
    compute-optimal loss L*(C) (one panel; with a single r there is no gap to draw).

    ``curve``: a :class:`~phifit.frontier.Frontier` over a dense grid of budgets (its one
    ``l_star`` line is drawn); ``runs``: the RunTable, placed at their training compute
    (:func:`phifit.plot.functions.placed_compute`)."""
    compute, compute_source = placed_compute(runs)
    fig = _figure(5.6, 4.3)
    ax = fig.subplots()
    ax.scatter(
        compute,
        np.asarray(runs.loss, float),
        s=14,
        color=color_for(0),
        marker=marker_for(0),
        alpha=0.55,
        edgecolor="none",
        zorder=2,
        label="runs",
    )
    for line in list(curve.l_star.values())[:1]:
        ax.plot(curve.budgets, line, color=color_for(0), linewidth=1.6, label="law: L*(C)", zorder=3)
    _log_x(ax)
    where = f"\nruns placed by {compute_source}" if compute_source else ""
    ax.set_xlabel(f"training compute C (FLOPs, log){where}")
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title("runs and the compute-optimal frontier L*(C)")
    ax.legend(frameon=False)
    _style(ax)
    return fig


# ---------------------------------------------------------------------------- bootstrap
@_styled
def bootstrap_figure(boot: Any) -> Figure:
    """Histogram of the block bootstrap's distribution of phi, with the estimate and the
    percentile and BCa intervals at the bootstrap's level; an interval end on the box searched
    is labelled as such: :func:`phifit.plot.plot_bootstrap` in a figure of its own."""
    fig = _figure(6.0, 3.2)
    plot_bootstrap(boot, "phi", ax=fig.subplots())
    return fig


@_styled
def exponent_bootstrap_figure(
    panels: Sequence[Mapping[str, Any]], *, level: float = defaults.LEVEL
) -> Figure:
    """Histograms of the bootstrap distributions of a non-looped table's exponents, one
    panel each: ``panels`` holds {"label", "draws", "estimate", "interval"} (the interval
    may be None), e.g. alpha, beta and the allocation exponent a = beta / (alpha + beta)."""
    fig = _figure(3.0 * max(1, len(panels)) + 0.4, 3.0)
    axes = np.atleast_1d(fig.subplots(1, max(1, len(panels))))
    n_draws = 0
    for ax, panel in zip(axes, panels):
        x = draw.finite(panel["draws"])
        n_draws = max(n_draws, len(x))
        draw.histogram_panel(
            ax, x, panel["estimate"], panel.get("interval"), level=level, xlabel=panel["label"]
        )
        ax.set_ylabel("")
    axes[0].set_ylabel("bootstrap resamples")
    fig.suptitle(f"block bootstrap of the exponents ({n_draws} resamples)")
    return fig


# ---------------------------------------------------------------------------- residuals
@_styled
def residual_figure(res: Any, *, looped: bool = True) -> Figure:
    """Six panels from a :class:`~phifit.diagnostics.residuals.ResidualDiagnostics`: residuals
    vs fitted, vs log N_eff, vs log D, by r, by budget (:func:`phifit.plot.plot_residuals` for
    each), and the normal QQ plot of the log residuals.  With ``looped=False`` (a non-looped
    table: N_eff is N, and there is one r) the size axis is N, the runs carry no r legend and
    the by-r panel is left out."""
    fig = _figure(10.0, 6.4)
    axes = fig.subplots(2, 3)
    for ax, against in zip(axes[0], ("fitted", "size", "tokens")):
        plot_residuals(res, against=against, ax=ax)
        ax.get_legend().remove()
    axes[0][1].set_xlabel(
        "effective size N_eff = N_once + r^φ N_rec (log)" if looped else "unique parameters N (log)"
    )
    if looped:
        axes[0][0].legend(frameon=False, fontsize=7)
    else:
        axes[0][1].set_title("vs parameters")

    plot_residuals(res, against="r", ax=axes[1][0])
    axes[1][0].set_visible(looped)
    if res.budget is not None:
        plot_residuals(res, against="budget", ax=axes[1][1])
    else:
        ax = axes[1][1]
        ax.text(0.5, 0.5, "no 'budget' column", ha="center", va="center", transform=ax.transAxes)
        ax.set_title("by budget")
        ax.set_ylabel(RESID_LABEL)
        _style(ax)

    ax = axes[1][2]
    theo = np.asarray(res.qq_theoretical, float)
    samp = np.asarray(res.qq_sample, float)
    ax.scatter(theo, samp, s=12, color=OKABE_ITO[4], edgecolor="none")
    lim = [min(theo.min(), samp.min(), -2.5), max(theo.max(), samp.max(), 2.5)]
    ax.plot(lim, lim, color="0.3", linewidth=0.8)
    ax.set_xlabel("standard normal quantile")
    ax.set_ylabel("standardised log residual")
    ax.set_title("normal QQ plot")
    _style(ax)
    if res.numerically_exact:
        fig.suptitle("residuals are at numerical precision (noise-free table)")
    return fig


# ---------------------------------------------------------------------------- influence
@_styled
def influence_figure(infl: Mapping[str, Any]) -> Figure:
    """Leave-one-run-out (left) and leave-one-cell-out (right) change in phi."""
    runs = infl["runs"]
    cells = [
        c for c in infl.get("cells") or [] if c.get("delta_phi") is not None and math.isfinite(c["delta_phi"])
    ]
    fig = _figure(10.0, 3.6)
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[2, 1] if cells else [1, 0.001])
    r = np.array([x["r"] for x in runs], int)
    d = np.array([x["delta_phi"] if x["delta_phi"] is not None else np.nan for x in runs], float)
    r_values = sorted(set(r.tolist()))
    idx = _category_index(r_values)
    pos = np.arange(len(runs))
    for rv in r_values:
        m = r == rv
        ax1.vlines(pos[m], 0, d[m], colors=color_for(idx[rv]), linewidth=1.2)
        ax1.scatter(
            pos[m],
            d[m],
            s=12,
            color=color_for(idx[rv]),
            marker=marker_for(idx[rv]),
            label=f"r = {rv}",
            zorder=3,
        )
    # the runs that move phi most: numbered at their stems, named in a key below the axes
    # (run ids are long and the largest moves often sit next to each other)
    key = []
    for k, x in enumerate(infl.get("top", [])[:3]):
        i = next(j for j, y in enumerate(runs) if y["run_id"] == x["run_id"])
        if not math.isfinite(d[i]):
            continue
        ax1.annotate(
            str(k + 1),
            (i, d[i]),
            fontsize=7,
            fontweight="bold",
            xytext=(5, 0),
            textcoords="offset points",
            ha="left",
            va="center",
        )
        key.append(f"{k + 1}: {x['run_id']} (Δφ {d[i]:+.3f})")
    ax1.axhline(0, color="0.3", linewidth=0.8)
    ax1.set_xlabel("run (table order)" + ("\n" + "\n".join(key) if key else ""))
    ax1.set_ylabel("Δφ when the run is left out")
    ax1.set_title("leave-one-run-out", pad=20)
    ax1.legend(
        frameon=False,
        fontsize=7,
        ncol=len(r_values),
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        borderaxespad=0.1,
    )
    _style(ax1)
    if cells:
        order = sorted(range(len(cells)), key=lambda i: cells[i]["delta_phi"])
        y = np.arange(len(cells))
        vals = [cells[i]["delta_phi"] for i in order]
        cols = [color_for(idx.get(cells[i]["r"], 0)) for i in order]
        ax2.barh(y, vals, color=cols, height=0.7)
        ax2.set_yticks(y, [cells[i]["cell"] for i in order], fontsize=6)
        ax2.axvline(0, color="0.3", linewidth=0.8)
        ax2.set_xlabel("Δφ when the cell is left out")
        ax2.set_title("leave-one-(budget, r)-cell-out")
        _style(ax2)
    else:
        ax2.set_visible(False)
    return fig


@_styled
def profile_figure(
    profile: Mapping[str, Sequence[float]],
    phi_hat: float,
    interval: Sequence[float] | None,
    consistency: Mapping[str, Any] | None = None,
    *,
    interval_label: str = "interval",
    bounds: Sequence[float] | None = None,
) -> Figure:
    """Profile deviance of phi (left) and phi refitted on subsets (right).

    ``interval`` is drawn as a band on both panels and named in the legend by
    ``interval_label``, which says what it is (e.g. "profile interval (assumes independent
    runs)" or "95% bootstrap interval").  The deviance axis is named by the profile's
    ``deviance_name`` when it has one; an interval end on ``bounds`` (the box searched) is
    labelled as such.
    """
    fig = _figure(10.0, 3.4)
    ax1, ax2 = fig.subplots(1, 2)
    phi = np.asarray(profile["phi"], float)
    dev = np.asarray(profile["deviance"], float)
    finite = np.isfinite(dev)
    ax1.plot(phi[finite], dev[finite], color=OKABE_ITO[4], linewidth=1.5)
    ax1.axhline(3.84, color=OKABE_ITO[5], linestyle="--", linewidth=1, label="χ²₁(0.95) = 3.84")
    ax1.axvline(phi_hat, color="black", linewidth=1, label=f"φ̂ = {phi_hat:.3f}")
    if interval is not None:
        ax1.axvspan(
            interval[0],
            interval[1],
            color=OKABE_ITO[2],
            alpha=0.2,
            label=f"{interval_label}\n{interval_text(interval[0], interval[1], bounds)}",
        )
    if finite.any():
        ax1.set_yscale("symlog", linthresh=10)
        ax1.set_ylim(bottom=0)
    ax1.set_xlabel("φ (fixed; other parameters refitted)")
    ax1.set_ylabel(f"profile deviance {profile.get('deviance_name', 'n log(SSR/SSR_min)')}")
    ax1.set_title("profile of the objective along φ")
    ax1.legend(frameon=False, fontsize=7)
    _style(ax1)
    if consistency:
        items = [
            x
            for x in consistency.get("halves", []) + consistency.get("pairs", [])
            if x.get("phi") is not None
        ]
        y = np.arange(len(items))
        ax2.scatter(
            [x["phi"] for x in items],
            y,
            color=OKABE_ITO[1],
            s=30,
            zorder=3,
            marker="D",
            edgecolor="black",
            linewidth=0.5,
        )
        ax2.axvline(phi_hat, color="black", linewidth=1)
        if interval is not None:
            ax2.axvspan(interval[0], interval[1], color=OKABE_ITO[2], alpha=0.2)
        ax2.set_yticks(y, [f"{x['label']} (n={x['n']})" for x in items], fontsize=7)
        ax2.set_xlabel("φ refitted on the subset")
        ax2.set_title("consistency of φ across the data")
        _style(ax2)
    else:
        ax2.set_visible(False)
    return fig


# ------------------------------------------------------------------- optional sections
@_styled
def posterior_figure(
    draws: Mapping[str, Sequence[float]], *, point: Mapping[str, float] | None = None
) -> Figure:
    """Marginal posterior histograms of the parameters (one panel each)."""
    names = [n for n in ("phi", "alpha", "beta", "E", "A", "B") if n in draws]
    cols = 3
    rows = max(1, math.ceil(len(names) / cols))
    fig = _figure(9.0, 2.6 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, name in enumerate(names):
        ax = axes[k // cols][k % cols]
        x = np.asarray(draws[name], float)
        x = x[np.isfinite(x)]
        ax.hist(x, bins=40, color=OKABE_ITO[3], edgecolor="white", linewidth=0.3)
        if point and point.get(name) is not None:
            ax.axvline(point[name], color="black", linewidth=1.2, label="Huber estimate")
        ax.set_xlabel("φ" if name == "phi" else name)
        ax.set_ylabel("posterior draws")
        _style(ax)
    for k in range(len(names), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    if point:
        axes[0][0].legend(frameon=False, fontsize=7)
    fig.suptitle("Bayesian posterior (marginals)")
    return fig


@_styled
def recipes_figure(rows: Sequence[Mapping[str, Any]], *, baseline: str, level: float | None = None) -> Figure:
    """Δφ of each recipe against the baseline with its interval (one row per variant; the
    x label names the interval's ``level`` when given)."""
    fig = _figure(6.0, 0.6 + 0.45 * max(len(rows), 2))
    ax = fig.subplots()
    for i, row in enumerate(rows):
        col = color_for(i + 1)
        ax.scatter([row["delta_phi"]], [i], color=col, marker=marker_for(i + 1), s=36, zorder=3)
        iv = row.get("interval")
        if iv is not None and None not in iv:
            ax.hlines(i, iv[0], iv[1], colors=col, linewidth=2)
            ax.annotate(
                f"{row['delta_phi']:+.3f} [{iv[0]:+.3f}, {iv[1]:+.3f}]",
                (row["delta_phi"], i),
                xytext=(0, 9),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [str(r["variant"]) for r in rows])
    ax.set_ylim(-0.6, len(rows) - 0.2)
    ax.set_xlabel(f"Δφ against '{baseline}' refitted on the same budgets (> 0: each recurrence worth more)")
    ax.set_title("recipes compared by φ" + (f" ({100 * level:g}% bootstrap intervals)" if level else ""))
    _style(ax)
    return fig


@_styled
def comparison_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """How much worse each restricted fit is than the free one: the drop in R² (raw nats),
    R²(restricted) - R²(free), as horizontal bars from zero (the free fit), each labelled with
    its R².  ``rows``: the free fit first (label "free"), then the restricted fits."""
    free = next((r for r in rows if str(r["label"]) == "free"), rows[0])
    others = [r for r in rows if r is not free]
    n = max(len(others), 1)
    fig = _figure(6.0, 0.9 + 0.45 * max(n, 2))
    ax = fig.subplots()
    base = float(free["r2"])
    labels = [str(r["label"]).replace("phi", "φ ").replace("=", "= ") for r in others]
    drops = [float(r["r2"]) - base for r in others]
    ax.barh(range(len(others)), drops, color=[color_for(i + 1) for i in range(len(others))], height=0.6)
    worst = min(drops + [-1e-4])
    ax.set_xlim(1.45 * worst, -0.02 * worst)
    for i, (r, v) in enumerate(zip(others, drops)):
        ax.annotate(
            f"{v:+.4f} (R² {float(r['r2']):.4f})",
            (v, i),
            xytext=(-4, 0),
            textcoords="offset points",
            ha="right",
            va="center",
            fontsize=8,
        )
    ax.axvline(0, color="0.2", linewidth=1.0)
    ax.set_yticks(range(len(others)), labels)
    ax.invert_yaxis()
    ax.set_ylim(len(others) - 0.4, -0.6)
    ax.set_xlabel(f"R² (raw nats) minus the free fit's R² = {base:.4f}")
    ax.set_title("loss of fit when φ is held fixed (0 = as good as φ free)")
    _style(ax)
    return fig


@_styled
def multiplier_figure(mult: Any, *, bootstrap: Any = None) -> Figure:
    """The free multiplier m_r of each looped r against r^phi (a
    :class:`~phifit.diagnostics.multiplier_result.MultiplierFit`), with phi's band from the
    block ``bootstrap`` when given: :func:`phifit.plot.plot_multipliers` in a figure of its own."""
    fig = _figure(5.6, 3.8)
    ax = plot_multipliers(mult, bootstrap=bootstrap, ax=fig.subplots())
    ax.title.set_fontsize(9)  # the long title fits the figure's width
    return fig


@_styled
def adaptive_figure(points: Sequence[Mapping[str, Any]], *, target_width: float | None = None) -> Figure:
    """The widths of φ's 95% interval round by round of an adaptive sweep, against the training
    FLOPs of the runs fitted after the round: the width each decision predicted (asymptotic, open
    markers) and the width the cell bootstrap realised (filled, joined); a dashed line at the
    target width when the loop had one.  ``points``: round, flops, predicted, realised (None where
    missing).  Log y when the widths span more than a factor 10."""
    fig = _figure(5.6, 3.4)
    ax = fig.subplots()
    real = [
        (float(p["flops"]), float(p["realised"]), p["round"]) for p in points if p.get("realised") is not None
    ]
    pred = [
        (float(p["flops"]), float(p["predicted"]), p["round"])
        for p in points
        if p.get("predicted") is not None
    ]
    if real:
        ax.plot(
            [x for x, _, _ in real],
            [y for _, y, _ in real],
            color=color_for(4),
            marker="o",
            linewidth=1.3,
            label="realised (cell bootstrap)",
        )
    if pred:
        ax.plot(
            [x for x, _, _ in pred],
            [y for _, y, _ in pred],
            color=color_for(5),
            marker="s",
            markerfacecolor="white",
            linestyle="none",
            label="predicted at the decision (asymptotic)",
        )
    labelled = {k for _, _, k in real}
    for x, y, k in real + [p for p in pred if p[2] not in labelled]:
        ax.annotate(str(k), (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7, color="0.35")
    if target_width is not None:
        ax.axhline(target_width, color="0.3", linestyle="--", linewidth=1.0, label=f"target {target_width:g}")
    ys = [y for _, y, _ in real + pred] + ([target_width] if target_width else [])
    if ys and min(ys) > 0 and max(ys) / min(ys) > 10:
        ax.set_yscale("log")
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    ax.set_xlabel("training FLOPs of the runs fitted (after each round)")
    ax.set_ylabel("width of φ's 95% interval")
    ax.set_title("adaptive rounds: predicted and realised widths (labels: round; 0 = pilot)", fontsize=9)
    ax.legend(fontsize=7, frameon=False)
    _style(ax)
    return fig


# ------------------------------------------------------------------------------- output
def _png(fig: Figure) -> bytes:
    """The figure as a PNG at 150 dpi on white, drawn once: the Agg canvas's draw runs the
    constrained layout first (``savefig`` draws twice, once to lay the figure out and once to
    render it; the bytes are the same).  The figure's dpi and face colour are restored."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    dpi, face = fig.get_dpi(), fig.get_facecolor()
    buf = io.BytesIO()
    try:
        fig.set_dpi(150)
        fig.set_facecolor("white")
        FigureCanvasAgg(fig).print_png(buf, metadata=_NO_DATE["png"])
    finally:
        fig.set_dpi(dpi)
        fig.set_facecolor(face)
    return buf.getvalue()


@_styled
def save_figure(fig: Figure, stem: str, *, svg: bool = True, png: bytes | None = None) -> dict[str, str]:
    """Write ``stem.png`` (150 dpi; ``png``: the figure's PNG already rendered by
    :func:`figure_bytes`) and, with ``svg``, ``stem.svg``; returns their paths."""
    paths = {"png": f"{stem}.png"}
    with open(paths["png"], "wb") as out:
        out.write(_png(fig) if png is None else png)
    if svg:
        paths["svg"] = f"{stem}.svg"
        fig.savefig(paths["svg"], facecolor="white", metadata=_NO_DATE["svg"])
    return paths


@_styled
def figure_bytes(fig: Figure, fmt: str = "png") -> bytes:
    """The figure rendered in memory (PNG at 150 dpi, or SVG)."""
    if fmt == "png":
        return _png(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=150, facecolor="white", metadata=_NO_DATE.get(fmt))
    return buf.getvalue()
