"""The public plotting functions: typed phifit results in, matplotlib Axes out.

Each takes an optional ``ax=`` (drawn into; no new figure), else draws into a new pyplot figure
(``plt.subplots``), and returns the Axes (an array of Axes for the multi-panel isoFLOP plot).
Font sizes follow ``rcParams``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..diagnostics.residuals import ResidualDiagnostics, residual_diagnostics
from ..frontier import Frontier, IsoflopCurves, isoflop_curves
from . import panels
from .style import OKABE_ITO, category_index

if TYPE_CHECKING:
    from ..isoflop import ParabolaMinima

__all__ = [
    "plot_isoflop",
    "plot_bootstrap",
    "plot_multipliers",
    "plot_residuals",
    "plot_frontier",
    "plot_drift",
    "placed_compute",
]

_PARAM_LABELS = {
    "phi": "φ (value of one recurrence; 0 = none, 1 = a unique block)",
    "alpha": "α (size exponent)",
    "beta": "β (data exponent)",
    "E": "E (irreducible loss, nats)",
    "A": "A (size coefficient)",
    "B": "B (data coefficient)",
}


def _axes(ax):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(layout="constrained")[1]


def plot_isoflop(
    fit: Any,
    runs: Any,
    *,
    by: str = "r",
    only: Any = None,
    curves: IsoflopCurves | None = None,
    ax=None,
    axes: Sequence[Any] | None = None,
):
    """isoFLOP curves: runs (loss against unique parameters) and the fitted law along D = C / F.

    Parameters
    ----------
    fit : FitResult (or any law :func:`phifit.frontier.isoflop_curves` takes).
    runs : the RunTable fitted; needs a numeric ``budget`` column (the FLOP budget C).
    by : ``"r"`` (one panel per r, colours by budget) or ``"budget"`` (one panel per budget,
        colours by r).
    only : draw the one panel of this r (or budget) into ``ax`` and return that Axes.
    curves : precomputed :class:`~phifit.frontier.IsoflopCurves` (else computed from ``fit``).
    ax : with ``only``, or on a table with one panel: the Axes to draw into.  Without ``only``
        on several panels, every run and curve is drawn into it (colour by the other key).
    axes : a sequence of Axes, one per panel (at least as many as panels).

    Returns
    -------
    The Axes drawn into (``only`` or ``ax``), else a numpy array of Axes, one per panel.
    """
    if by not in ("r", "budget"):
        raise ValueError(f"unknown by={by!r}, expected 'r' or 'budget'")
    curves = curves if curves is not None else isoflop_curves(fit, runs)
    key, other = ("r", "budget") if by == "r" else ("budget", "r")
    data = {"r": np.asarray(runs.r, int), "budget": np.asarray(runs.budget, object)}
    n = np.asarray(runs.n_once + runs.n_rec, float)
    loss = np.asarray(runs.loss, float)
    panel_values = sorted(set(data[key].tolist()))
    colour = category_index(sorted(set(data[other].tolist())))
    if only is not None:
        if only not in panel_values:
            raise ValueError(f"{by} = {only!r} is not in the table ({panel_values})")
        panel_values = [only]
    if ax is not None and len(panel_values) > 1:  # everything into one Axes
        panels.isoflop_panel(ax, n, loss, data[other], curves.cells, colour, curve_key=other)
        ax.set_ylabel(panels.LOSS_LABEL)
        return ax
    if ax is not None or axes is not None:
        targets = [ax] if ax is not None else list(np.ravel(np.asarray(axes, dtype=object)))
        if len(targets) < len(panel_values):
            raise ValueError(f"{len(panel_values)} panels need {len(panel_values)} axes, got {len(targets)}")
    else:
        import matplotlib.pyplot as plt

        cols = min(len(panel_values), 2)
        rows = math.ceil(len(panel_values) / cols)
        _, grid = plt.subplots(
            rows,
            cols,
            squeeze=False,
            sharey=by == "r",
            layout="constrained",
            figsize=(3.6 * cols + 0.4, 3.0 * rows + 0.5),
        )
        targets = list(grid.ravel())
        for extra in targets[len(panel_values) :]:
            extra.set_visible(False)
    for value, target in zip(panel_values, targets):
        m = data[key] == value
        cells = [c for c in curves.cells if c[key] == value]
        panels.isoflop_panel(target, n[m], loss[m], data[other][m], cells, colour, curve_key=other)
        target.set_title(f"r = {value}" if by == "r" else panels.fmt_budget(value))
        target.set_ylabel(panels.LOSS_LABEL)
    targets[0].legend(frameon=False, fontsize="small")
    if ax is not None:
        return ax
    return np.asarray(targets[: len(panel_values)], dtype=object)


def plot_bootstrap(boot: Any, param: str = "phi", *, bca: bool = True, ax=None):
    """The bootstrap distribution of one parameter (``boot``: a block bootstrap's result), its
    estimate and its percentile (and, with ``bca``, BCa) intervals at the bootstrap's level; an
    interval end on the box the parameter was searched in is labelled as such."""
    if param not in boot.params:
        raise ValueError(f"unknown param={param!r}, expected one of {sorted(boot.params)}")
    ax = _axes(ax)
    draws = np.asarray(boot.params[param], float)[~np.asarray(boot.failed, bool)]
    panels.histogram_panel(
        ax,
        draws.tolist(),
        float(boot.estimate[param]),
        (boot.ci or {}).get(param),
        interval_bca=(boot.ci_bca or {}).get(param) if bca else None,
        level=boot.level,
        bounds=boot.natural_bounds(param),
        xlabel=_PARAM_LABELS.get(param, param),
    )
    symbol = {"phi": "φ", "alpha": "α", "beta": "β"}.get(param, param)
    ax.set_title(f"block bootstrap of {symbol} ({len(draws)} resamples)")
    return ax


def plot_multipliers(mult: Any, *, bootstrap: Any = None, ax=None):
    """The free multiplier m_r of each looped r against r^phi (``mult``:
    :func:`phifit.diagnostics.multipliers.fit_multipliers`), with phi's bootstrap band when
    ``bootstrap`` (a block bootstrap) is given."""
    if not mult.testable or mult.phi is None:
        raise ValueError(f"the multipliers were not fitted: {mult.reason}")
    ax = _axes(ax)
    draws = None
    if bootstrap is not None:
        draws = np.asarray(bootstrap.params["phi"], float)[~np.asarray(bootstrap.failed, bool)].tolist()
    panels.multiplier_panel(
        ax, mult.rows(), mult.phi, phi_draws=draws, level=mult.level, p_value=mult.p_value
    )
    return ax


def plot_residuals(result: Any, runs: Any = None, *, against: str = "r", ax=None):
    """Residuals L - L̂ against ``against``: ``"r"`` or ``"budget"`` (strips with a bar at each
    group's mean; red: a flagged r), ``"size"`` (N_eff), ``"tokens"`` or ``"fitted"``.

    ``result``: a :class:`~phifit.diagnostics.residuals.ResidualDiagnostics`, or a FitResult
    with its ``runs``."""
    choices = ("r", "budget", "size", "tokens", "fitted")
    if against not in choices:
        raise ValueError(f"unknown against={against!r}, expected one of {choices}")
    res = result if isinstance(result, ResidualDiagnostics) else None
    if res is None:
        if runs is None:
            raise ValueError("plot_residuals(fit, runs): a FitResult needs the runs it was fitted on")
        res = residual_diagnostics(runs, result)
    ax = _axes(ax)
    r = np.asarray(res.r, int)
    resid = np.asarray(res.resid, float)
    if against == "r":
        values = sorted(set(r.tolist()))
        flagged = [row.flagged for row in res.by_r]
        cols = [panels.color_for(i) for i in range(len(values))]
        panels.strip_panel(ax, [resid[r == v] for v in values], [str(v) for v in values], cols, flagged)
        ax.set_xlabel("recurrences r")
        ax.set_title("by r (bar: mean; red: flagged)")
    elif against == "budget":
        if res.budget is None:
            raise ValueError("the table has no 'budget' column")
        budget = np.asarray(res.budget, object)
        levels = [g.group for g in res.by_budget]
        labels = [f"{b:.2g}" if isinstance(b, (int, float)) else str(b) for b in levels]
        groups = [resid[budget == b] for b in levels]
        panels.strip_panel(ax, groups, labels, [OKABE_ITO[4]] * len(levels), [False] * len(levels))
        ax.set_xlabel("FLOP budget C")
        ax.tick_params(axis="x", rotation=30)
        ax.set_title("by budget")
    else:
        x, label, log = {
            "size": (
                np.exp(np.asarray(res.log_n_eff, float)),
                "N_eff = N_once + r^φ N_rec (log)",
                True,
            ),
            "tokens": (np.exp(np.asarray(res.log_tokens, float)), "training tokens D (log)", True),
            "fitted": (np.asarray(res.predicted, float), "fitted loss L̂ (nats/token)", False),
        }[against]
        panels.residual_scatter(ax, x, resid, r, xlabel=label, log=log, legend=True)
        ax.legend(frameon=False, fontsize="small")
        ax.set_title(
            {"size": "vs effective size", "tokens": "vs training tokens", "fitted": "vs fitted values"}[
                against
            ]
        )
    return ax


def placed_compute(runs: Any) -> tuple[np.ndarray, str]:
    """The training compute at which the frontier places each run, and where it comes from.

    The ``flops`` column when there is one; else a numeric ``budget`` column (the isoFLOP budget
    the run was trained at: the estimate 6 (N_once + r N_rec) D omits attention and the
    embedding, and puts a small model's runs well left of its budget); else the estimate
    (:attr:`phifit.runs.RunTable.compute`).  The report places its runs by the same rule.
    """
    if runs.has_flops:
        return np.asarray(runs.compute, float), runs.compute_source
    budget = runs.budget
    if budget is not None:
        try:
            values = np.asarray(budget, dtype=float)
        except (TypeError, ValueError):
            values = None
        if values is not None and np.all(np.isfinite(values)) and np.all(values > 0):
            return values, "the budget column (no flops column)"
    return np.asarray(runs.compute, float), runs.compute_source


def plot_frontier(
    front: Frontier,
    runs: Any = None,
    *,
    kind: str = "loss",
    band: Frontier | None = None,
    parabola: ParabolaMinima | None = None,
    ax=None,
):
    """The compute-optimal frontier: ``kind="loss"``, L*_r(C) per r (with the ``runs`` placed at
    their training compute when given, :func:`placed_compute`); ``kind="gap"``, the gap to the
    base r with its bootstrap band (when the frontier was computed with bootstrap draws).

    ``band``: with ``kind="gap"``, the frontier whose bootstrap band is shaded, e.g. one at the
    table's budgets beside a dense ``front`` (default: ``front`` itself); ``parabola``: the
    per-cell parabola minima (:func:`phifit.isoflop.parabola_minima`), drawn as markers."""
    if kind not in ("loss", "gap"):
        raise ValueError(f"unknown kind={kind!r}, expected 'loss' or 'gap'")
    ax = _axes(ax)
    budgets = np.asarray(front.budgets, float)
    r_run = np.asarray([], int) if runs is None else np.asarray(runs.r, int)
    r_values = sorted(set(r_run.tolist()) | {int(r) for r in front.r_values})
    if kind == "loss":
        compute, source = (np.asarray([], float), None) if runs is None else placed_compute(runs)
        loss = np.asarray([], float) if runs is None else np.asarray(runs.loss, float)
        panels.frontier_loss_panel(
            ax, r_run, compute, loss, budgets, front.l_star, r_values, compute_source=source
        )
    else:
        band = front if band is None else band
        panels.frontier_gap_panel(
            ax,
            budgets,
            front.gap,
            r_values,
            int(front.base_r),
            band_budgets=np.asarray(band.budgets, float),
            band=band.gap_interval,
            parabola_gap=None if parabola is None else parabola.gap,
        )
    ax.legend(frameon=False, fontsize="small")
    return ax


def plot_drift(drift: Any, *, ax=None):
    """The drift of phi with the budget (``drift``: :func:`phifit.diagnostics.drift.fit_drift`):
    phi(C) = phi_0 + phi_1 log(C / C_ref), the fan of phi_1's interval, and one phi for all."""
    if not drift.testable or drift.phi_0 is None:
        raise ValueError(f"the drift was not fitted: {drift.reason}")
    ax = _axes(ax)
    panels.drift_panel(
        ax,
        drift.budgets,
        drift.c_ref,
        drift.phi_0,
        drift.phi_1,
        phi_1_ci=drift.phi_1_ci,
        phi=drift.phi,
        level=drift.level,
        p_value=drift.p_value,
    )
    return ax
