"""Moved: the PSIS-LOO comparison of phi lives in :mod:`phifit.fitters.bayes.loo_compare`.

This module only re-exports it for existing imports (``phifit.cli.compare``); import
``compare_loo`` / ``LooComparison`` from :mod:`phifit.fitters.bayes` instead.
"""

from __future__ import annotations

from .fitters.bayes.loo_compare import MIN_DIFF, RULE, SE_MULT, LooComparison, compare_loo

__all__ = ["LooComparison", "MIN_DIFF", "RULE", "SE_MULT", "compare_loo"]
