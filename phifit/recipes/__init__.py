"""Delta-phi between training recipes: does a recipe change raise phi, and is the change significant?

- :mod:`~phifit.recipes.pairing`: the tables a Delta-phi compares (matched (budget, r) cells) and the
  paired blocks its bootstrap resamples;
- :mod:`~phifit.recipes.shared_phi`: the fit with one phi per recipe and everything else shared,
  against the shared-phi null (wild cluster bootstrap);
- :mod:`~phifit.recipes.delta`: :func:`compare_recipes`, which runs both and returns a
  :class:`RecipeComparison`.
"""

from __future__ import annotations

import importlib
from typing import Any

from .. import _submodule

__all__ = ["RecipeComparison", "compare_recipes"]


def __getattr__(name: str) -> Any:
    """:func:`compare_recipes` and :class:`RecipeComparison` on first use: a fit of one recipe reads
    only :mod:`~phifit.recipes.pairing` and does not load the Delta-phi machinery."""
    value = (
        getattr(importlib.import_module(".delta", __name__), name)
        if name in __all__
        else _submodule(__name__, name)
    )
    if value is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
