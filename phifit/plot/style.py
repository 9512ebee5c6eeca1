"""The look shared by every phifit figure: palette, markers, log axes with readable minor labels.

Nothing here sets a font size: sizes come from matplotlib's rcParams (the report sets its own in
an ``rc_context``), and annotations use relative sizes ("small", "x-small") that follow them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from matplotlib.ticker import Formatter, LogFormatterSciNotation, LogLocator

#: Okabe & Ito (2008) colour-universal palette (yellow last: weak on white paper).
OKABE_ITO: tuple[str, ...] = (
    "#000000",
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#0072B2",
    "#D55E00",
    "#CC79A7",
    "#F0E442",
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

LOSS_LABEL = "validation loss L (nats/token)"
RESID_LABEL = "residual L - L̂ (nats)"


def color_for(i: int) -> str:
    """The i-th Okabe-Ito colour (cycling)."""
    return OKABE_ITO[i % len(OKABE_ITO)]


def marker_for(i: int) -> str:
    """The i-th marker (cycling), so that categories also read in grey-scale print."""
    return MARKERS[i % len(MARKERS)]


def style(ax) -> None:
    """Open axes (no top and right spines) with a faint grid."""
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.grid(True, alpha=0.25, linewidth=0.5)


def fmt_budget(c: Any) -> str:
    """A budget label: ``C = 2e18 FLOPs`` for a number, the value itself otherwise."""
    if isinstance(c, (int, float)):
        exp = int(math.floor(math.log10(c)))
        mant = c / 10**exp
        return f"C = {mant:.3g}e{exp} FLOPs"
    return str(c)


def category_index(values: Sequence[Any]) -> dict[Any, int]:
    return {v: i for i, v in enumerate(values)}


class MinorLogLabels(Formatter):
    """Labels for the minor ticks of a log axis that never overlap: at draw time it takes the
    axis' length and span and labels the densest of the mantissa sets {2..9}, {2, 3, 5},
    {2, 5}, {3}, {} whose labels (about ``label_pt`` points wide) fit between their neighbours
    and the decade labels.  A narrow range (under a decade) so still gets numbers."""

    SETS = ((2, 3, 4, 5, 6, 7, 8, 9), (2, 3, 4, 6, 8), (2, 3, 5), (2, 5), (3,), ())

    def __init__(self, label_pt: float = 36.0):
        self.label_pt = label_pt

    def _subs(self) -> tuple[int, ...]:
        axis = self.axis
        lo, hi = sorted(axis.get_view_interval())
        if not (lo > 0 and hi > lo):
            return ()
        ax = axis.axes
        length_pt = (ax.bbox.width if axis.axis_name == "x" else ax.bbox.height) * 72.0 / ax.figure.dpi
        per_decade = length_pt / max(math.log10(hi / lo), 1e-9)
        for subs in self.SETS:
            marks = sorted({1, 10, *subs})
            gap = min(math.log10(b / a) for a, b in zip(marks, marks[1:]))
            if gap * per_decade >= self.label_pt:
                return subs
        return ()

    def __call__(self, x: float, pos: int | None = None) -> str:
        if x <= 0:
            return ""
        exp = math.floor(math.log10(x) + 1e-9)
        mant = round(x / 10**exp)
        if mant in (1, 10) or mant not in self._subs():
            return ""
        return f"${mant}\\times10^{{{exp}}}$"


def log_x(ax) -> None:
    """Log x axis whose minor ticks are labelled where the labels fit (:class:`MinorLogLabels`)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(LogFormatterSciNotation())
    ax.xaxis.set_minor_locator(LogLocator(subs="all"))
    ax.xaxis.set_minor_formatter(MinorLogLabels())
