"""Formatting helpers every section of the report page shares.

Small and pure: a level as a percentage, a budget as a label, a list of cautions as HTML, and
``Fig``, the type of the callable a section receives to embed a drawn figure by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import html as T

#: embeds a drawn figure: fig(name, alt, caption) -> the HTML of the figure
Fig = Callable[[str, str, str], str]


def pct(level: float) -> str:
    """0.95 -> '95%', 0.9 -> '90%', 0.683 -> '68.3%'."""
    return f"{100 * level:g}%"


def budget_label(key: Any) -> str:
    """A budget key as a short label: 4.64e+17 -> '4.64e+17', 1e18 -> '1e+18'; a key that is
    not a number is shown as it is."""
    try:
        return f"{float(key):.3g}"
    except (TypeError, ValueError):
        return str(key)


def caution_list(cautions, css: str = "notes", *, with_source: bool = False) -> str:
    """The cautions' messages as an HTML bullet list (``with_source``: each prefixed by its
    source in brackets)."""
    items = [f"[{c.source}] {c.message}" if with_source else c.message for c in cautions]
    return T.bullet_list(items, css)
