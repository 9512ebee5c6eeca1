"""Plots of phifit's results in the ArviZ manner: one function per picture, a result in, Axes out.

Every ``plot_*`` function takes typed results (FitResult with its RunTable, the block bootstrap,
the free multipliers, the drift of phi, the frontier), an optional ``ax=`` to draw into, and
returns the matplotlib Axes; sizes follow ``rcParams``.  The report's figures are built from the
same panels (:mod:`phifit.plot.panels`).
"""

from __future__ import annotations

from .functions import (
    plot_bootstrap,
    plot_drift,
    plot_frontier,
    plot_isoflop,
    plot_multipliers,
    plot_residuals,
)
from .style import OKABE_ITO, color_for, marker_for

__all__ = [
    "plot_isoflop",
    "plot_bootstrap",
    "plot_multipliers",
    "plot_residuals",
    "plot_frontier",
    "plot_drift",
    "OKABE_ITO",
    "color_for",
    "marker_for",
]
