"""One panel each, drawn from plain arrays into a given Axes: the single code path under both the
public ``plot_*`` functions (which read typed results) and the report's figures.

No panel creates a figure, sets a font size or computes a statistic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.ticker import NullFormatter

from ..intervals import interval_text
from .style import LOSS_LABEL, OKABE_ITO, RESID_LABEL, color_for, fmt_budget, log_x, marker_for, style


def finite(values: Sequence[Any]) -> np.ndarray:
    """The finite values of ``values`` (None and NaN dropped), as floats."""
    return np.asarray([v for v in values if v is not None and math.isfinite(v)], float)


def isoflop_panel(
    ax,
    n: np.ndarray,
    loss: np.ndarray,
    groups: np.ndarray,
    curves: Sequence[Mapping[str, Any]],
    colour: Mapping[Any, int],
    *,
    curve_key: str = "budget",
    label: bool = True,
) -> None:
    """Runs (loss against unique parameters, one colour per group: budget or r) and the law's
    curves ``curves`` ({n_unique, loss, and ``curve_key``}), on a log size axis."""
    for g, i in colour.items():
        m = groups == g
        if not m.any():
            continue
        ax.scatter(
            n[m],
            loss[m],
            s=22,
            color=color_for(i),
            marker=marker_for(i),
            edgecolor="white",
            linewidth=0.4,
            zorder=3,
            label=(fmt_budget(g) if curve_key == "budget" else f"r = {g}") if label else None,
        )
    for cell in curves:
        if cell[curve_key] in colour:
            ax.plot(
                cell["n_unique"],
                cell["loss"],
                color=color_for(colour[cell[curve_key]]),
                linewidth=1.2,
                zorder=2,
            )
    log_x(ax)
    ax.set_xlabel("unique non-embedding parameters N (log)")
    style(ax)


def histogram_panel(
    ax,
    draws: Sequence[float],
    estimate: float,
    interval: Sequence[float] | None,
    *,
    interval_bca: Sequence[float] | None = None,
    reference_interval: Sequence[float] | None = None,
    level: float = 0.95,
    bounds: Sequence[float] | None = None,
    xlabel: str = "φ",
) -> None:
    """Histogram of bootstrap draws, the estimate, and the percentile (and BCa) intervals
    labelled at their ``level``; an interval end on ``bounds`` (the box searched) says so."""
    pct = f"{100 * level:g}%"
    x = finite(draws)
    bins = max(10, min(60, int(math.sqrt(len(x)) * 2))) if len(x) else 10
    ax.hist(x, bins=bins, color=OKABE_ITO[2], edgecolor="white", linewidth=0.4)
    ax.axvline(estimate, color=OKABE_ITO[0], linewidth=1.5, label=f"estimate {estimate:.3f}")
    if interval is not None and all(v is not None and math.isfinite(v) for v in interval):  # not withheld
        for v in interval:
            ax.axvline(v, color=OKABE_ITO[5], linestyle="--", linewidth=1.2)
        text = interval_text(interval[0], interval[1], bounds)
        ax.plot([], [], color=OKABE_ITO[5], linestyle="--", label=f"{pct} percentile {text}")
    if interval_bca is not None and all(v is not None and math.isfinite(v) for v in interval_bca):
        for v in interval_bca:
            ax.axvline(v, color=OKABE_ITO[4], linestyle=":", linewidth=1.2)
        text = interval_text(interval_bca[0], interval_bca[1], bounds)
        ax.plot([], [], color=OKABE_ITO[4], linestyle=":", label=f"{pct} BCa {text}")
    if reference_interval is not None:
        lo, hi = reference_interval
        ax.axvspan(lo, hi, color=OKABE_ITO[1], alpha=0.12, label=f"study [{lo:.2f}, {hi:.2f}]")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("bootstrap resamples")
    ax.legend(frameon=False, fontsize="small")
    style(ax)


def multiplier_panel(
    ax,
    rows: Sequence[Mapping[str, Any]],
    phi: float,
    *,
    phi_draws: Sequence[float] | None = None,
    level: float = 0.95,
    p_value: float | None = None,
) -> None:
    """The free multiplier m_r of each looped r (rows: r, m, m_ci) against r on log-log axes,
    with the law's r^phi through m_1 = 1 and, from ``phi_draws``, its band at ``level``."""
    r_max = max(float(row["r"]) for row in rows)
    grid = np.geomspace(1.0, r_max * 1.15, 64)
    draws = None if phi_draws is None else finite(phi_draws)
    if draws is not None and len(draws) >= 2:
        lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
        ax.fill_between(
            grid,
            grid**lo,
            grid**hi,
            color=color_for(0),
            alpha=0.18,
            linewidth=0,
            label=f"r^φ, {100 * level:g}% bootstrap band of φ",
        )
    ax.plot(grid, grid**phi, color=color_for(0), linewidth=1.4, label=f"law: r^φ, φ = {phi:.3f}")
    ax.scatter([1.0], [1.0], color="0.3", marker="s", s=24, zorder=3, label="r = 1: m = 1 (definition)")
    for i, row in enumerate(rows):
        col = color_for(i + 1)
        r, m = float(row["r"]), float(row["m"])
        iv = row.get("m_ci")
        if iv is not None and None not in iv:
            ax.errorbar([r], [m], yerr=[[m - iv[0]], [iv[1] - m]], color=col, capsize=3, linewidth=1.4)
        ax.scatter([r], [m], color=col, marker=marker_for(i + 1), s=40, zorder=4)
        ax.annotate(f"m = {m:.2f}", (r, m), xytext=(6, -3), textcoords="offset points", fontsize="x-small")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks([1, *[float(row["r"]) for row in rows]], ["1", *[f"{float(row['r']):g}" for row in rows]])
    lo, hi = ax.get_ylim()
    ticks = [t for t in (0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 3, 4, 6, 8, 12, 16) if lo <= t <= hi]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(lo, hi)
    ax.set_xlabel("recurrences r")
    ax.set_ylabel("effective multiplier m_r of N_rec")
    test = "" if p_value is None else f" (lack of fit of r^φ: p = {p_value:.2g})"
    ax.set_title("one free multiplier per r against r^φ" + test)
    ax.legend(fontsize="x-small", frameon=False, loc="upper left")
    style(ax)


def residual_scatter(
    ax, x: np.ndarray, resid: np.ndarray, r: np.ndarray, *, xlabel: str, log: bool, legend: bool
) -> None:
    """Residuals against a per-run quantity ``x``, one colour and marker per r."""
    r_values = sorted(set(r.tolist()))
    for i, rv in enumerate(r_values):
        m = r == rv
        ax.scatter(
            x[m],
            resid[m],
            s=14,
            color=color_for(i),
            marker=marker_for(i),
            edgecolor="none",
            alpha=0.8,
            label=f"r = {rv}" if legend else None,
        )
    ax.axhline(0, color="0.3", linewidth=0.8)
    if log:
        log_x(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(RESID_LABEL)
    style(ax)


def strip_panel(
    ax, groups: Sequence[np.ndarray], labels: Sequence[str], colours: Sequence[str], flagged: Sequence[bool]
) -> None:
    """Residuals by group as jittered strips, each with a bar at its mean (red: flagged)."""
    rng = np.random.default_rng(0)
    for i, (g, col, flag) in enumerate(zip(groups, colours, flagged)):
        jitter = rng.uniform(-0.18, 0.18, len(g))
        ax.scatter(i + jitter, g, s=11, color=col, edgecolor="none", alpha=0.8)
        if len(g):
            ax.hlines(
                np.mean(g),
                i - 0.3,
                i + 0.3,
                colors="#D55E00" if flag else "black",
                linewidth=2.2 if flag else 1.4,
            )
    ax.axhline(0, color="0.3", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel(RESID_LABEL)
    style(ax)


def frontier_loss_panel(
    ax,
    r: np.ndarray,
    compute: np.ndarray,
    loss: np.ndarray,
    budgets: np.ndarray,
    l_star: Mapping[int, Sequence[float]],
    r_values: Sequence[int],
    *,
    compute_source: str | None = None,
) -> None:
    """Runs (loss against training compute) and the law's compute-optimal loss L*_r(C) per r."""
    for i, rv in enumerate(r_values):
        m = r == rv
        ax.scatter(
            compute[m], loss[m], s=14, color=color_for(i), marker=marker_for(i), alpha=0.55, edgecolor="none"
        )
        line = lookup(l_star, rv)
        if line is not None:
            ax.plot(budgets, line, color=color_for(i), linewidth=1.6, label=f"r = {rv}", zorder=3)
    log_x(ax)
    where = f"\nruns placed by {compute_source}" if compute_source else ""
    ax.set_xlabel(f"training compute C (FLOPs, log){where}")
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title("runs and the compute-optimal frontier L*(C)")
    style(ax)


def frontier_gap_panel(
    ax,
    budgets: np.ndarray,
    gap: Mapping[int, Sequence[float]],
    r_values: Sequence[int],
    base: int,
    *,
    band_budgets: np.ndarray | None = None,
    band: Mapping[int, Sequence[Sequence[float]]] | None = None,
    reference_gaps: Mapping[int, Sequence[float]] | None = None,
    parabola_gap: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
) -> None:
    """The frontier gap L*_r(C) - L*_base(C) per looped r (line), its bootstrap band over
    ``band_budgets``, optional reference ranges and per-cell parabola minima (markers)."""
    for i, rv in enumerate(r_values):
        line = lookup(gap, rv)
        if rv == base or line is None:
            continue
        col = color_for(i)
        ax.plot(budgets, line, color=col, linewidth=1.6, label=f"r = {rv}: law")
        iv = lookup(band, rv)
        if iv is not None:
            iv = np.asarray(iv, float)
            ax.fill_between(band_budgets, iv[:, 0], iv[:, 1], color=col, alpha=0.18, linewidth=0)
        if reference_gaps and rv in reference_gaps:
            lo, hi = reference_gaps[rv]
            ax.hlines([lo, hi], budgets.min(), budgets.max(), colors=col, linestyles=":", linewidth=0.9)
        minima = lookup(parabola_gap, rv) or []
        g = [x for x in minima if isinstance(x["budget"], (int, float))]
        if g:
            ax.scatter(
                [x["budget"] for x in g],
                [x["gap"] for x in g],
                color=col,
                marker=marker_for(i),
                s=26,
                edgecolor="black",
                linewidth=0.5,
                zorder=4,
                label=f"r = {rv}: parabola minima",
            )
    log_x(ax)
    ax.set_xlabel("training compute C (FLOPs, log)")
    ax.set_ylabel(f"frontier gap L*(r) - L*(r={base}) (nats)")
    ax.set_title("loss cost of looping at matched compute")
    if len(r_values) <= 1:
        ax.text(
            0.5, 0.5, f"a single r = {base}: no gap to show", ha="center", va="center", transform=ax.transAxes
        )
    style(ax)


def drift_panel(
    ax,
    budgets: Sequence[float],
    c_ref: float,
    phi_0: float,
    phi_1: float,
    *,
    phi_1_ci: Sequence[float | None] = (None, None),
    phi: float | None = None,
    level: float = 0.95,
    p_value: float | None = None,
) -> None:
    """phi(C) = phi_0 + phi_1 log(C / C_ref) over the budgets, the fan of phi_1's interval
    pivoting at C_ref, one phi for every budget (dashed), and ticks at the trained budgets."""
    b = np.asarray(budgets, float)
    grid = np.geomspace(b.min() / 1.3, b.max() * 1.3, 64)
    t = np.log(grid / c_ref)
    ax.plot(grid, phi_0 + phi_1 * t, color=color_for(4), linewidth=1.6, label="φ(C) = φ₀ + φ₁ log(C / C_ref)")
    if None not in phi_1_ci:
        lo, hi = (phi_0 + s * t for s in phi_1_ci)
        ax.fill_between(
            grid,
            np.minimum(lo, hi),
            np.maximum(lo, hi),
            color=color_for(4),
            alpha=0.18,
            linewidth=0,
            label=f"φ₁ in its {100 * level:g}% interval [{phi_1_ci[0]:+.3f}, {phi_1_ci[1]:+.3f}]",
        )
    if phi is not None:
        ax.axhline(phi, color=color_for(0), linestyle="--", linewidth=1.0, label=f"one φ = {phi:.3f}")
    ax.scatter(
        b,
        phi_0 + phi_1 * np.log(b / c_ref),
        color=color_for(5),
        marker="o",
        s=24,
        zorder=3,
        label="trained budgets",
    )
    ax.scatter([c_ref], [phi_0], color="black", marker="x", s=30, zorder=4, label=f"C_ref: φ₀ = {phi_0:.3f}")
    log_x(ax)
    ax.set_xlabel("training compute C (FLOPs, log)")
    ax.set_ylabel("φ at budget C")
    test = "" if p_value is None else f" (φ₁ = 0: p = {p_value:.2g})"
    ax.set_title("drift of φ with the budget" + test)
    ax.legend(frameon=False, fontsize="x-small")
    style(ax)


def lookup(mapping: Mapping | None, r: int):
    """``mapping[r]`` keyed by int or by str (after a JSON round trip); None when absent."""
    if not mapping:
        return None
    for k in (r, str(r)):
        if k in mapping:
            return mapping[k]
    return None
