"""Delta-phi between training recipes: does a recipe change raise phi, and is the change significant?

- :mod:`~phifit.recipes.pairing`: the tables a Delta-phi compares (matched (budget, r) cells) and the
  paired blocks its bootstrap resamples;
- :mod:`~phifit.recipes.shared_phi`: the fit with one phi per recipe and everything else shared,
  against the shared-phi null (wild cluster bootstrap);
- :mod:`~phifit.recipes.delta`: :func:`compare_recipes`, which runs both and returns a
  :class:`RecipeComparison`.
"""

from __future__ import annotations

from .delta import RecipeComparison, compare_recipes

__all__ = ["RecipeComparison", "compare_recipes"]
