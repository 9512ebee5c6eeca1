"""Restricted fits and the tests between them: is phi = 0 (worth nothing) or phi = 1 (worth a block) enough?

- :mod:`~phifit.compare.restricted`: :func:`compare_fits` refits the law with phi (or any
  parameter) fixed, and compares by R², the Gaussian working likelihood (AIC, BIC, LR), wild cluster
  bootstrap tests and out-of-sample error; :class:`Comparison` holds the verdict;
- :mod:`~phifit.compare.holdout`: leave-one-budget-out and extrapolation error of a law specification.
"""

from __future__ import annotations

from .restricted import Comparison, FitStats, compare_fits

__all__ = ["Comparison", "FitStats", "compare_fits"]
