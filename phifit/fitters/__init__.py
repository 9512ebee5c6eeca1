"""Fitters of the joint law.  Each takes a RunTable and returns a FitResult.

- ``huber``: summed Huber on log-loss residuals, multi-start (the reference method);
- ``lsq``: nonlinear least squares on log-loss with lmfit;
- ``bayes``: a PyMC posterior.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..law import LawSpec
from ..result import FitResult
from ..runs import RunTable
from .huber import HuberOptions, fit_huber, huber_objective

METHODS = ("huber", "lsq", "bayes")


def fit(
    runs: RunTable,
    *,
    method: str = "huber",
    fix: Mapping[str, float] | None = None,
    spec: LawSpec | None = None,
    **options: Any,
) -> FitResult:
    """Fit the joint law with the chosen method.

    ``fix`` holds parameters fixed by natural name ({"phi": 0}); ``spec`` gives the
    full specification instead (bounds included).  Remaining keyword options go to
    the method (Huber: n_starts, seed, delta, ...).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if spec is not None and fix:
        raise ValueError("give either fix= or spec=, not both")
    spec = spec or LawSpec(fixed=dict(fix or {}))
    if method == "huber":
        return fit_huber(runs, spec=spec, options=HuberOptions(**options))
    if method == "lsq":
        from .lsq import fit_lsq

        return fit_lsq(runs, spec=spec, **options)
    from .bayes import fit_bayes

    return fit_bayes(runs, spec=spec, **options)


__all__ = ["METHODS", "fit", "fit_huber", "huber_objective", "HuberOptions"]
