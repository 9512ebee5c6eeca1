"""Fitters of the joint law.  Each takes a RunTable and returns a FitResult.

- ``huber``: summed Huber on log-loss residuals, multi-start (the reference method);
- ``lsq``: nonlinear least squares on log-loss with lmfit;
- ``bayes``: a PyMC posterior.

Every fit and refit runs through one engine:

- :mod:`~phifit.fitters.objective`: the summed Huber (or least-squares) objective on log-loss,
  its gradient, and the law as a model of free coordinates (:func:`~phifit.fitters.objective.law_model`);
- :mod:`~phifit.fitters.lm`: the batched projected Levenberg-Marquardt (its row state named in
  :class:`~phifit.fitters.lm.LMRows`);
- :mod:`~phifit.fitters.polish`: the ``least_squares`` finish at tight tolerances;
- :mod:`~phifit.fitters.refit`: refits of many weightings of one table (bootstrap, jackknife,
  recipes), in chunks;
- :mod:`~phifit.fitters.parallel`: where parallel work runs (workers and backend: joblib's
  processes, threads, this process, or a Dask cluster).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..law import LawSpec
    from ..result import FitResult
    from ..runs.table import RunTable

METHODS = ("huber", "lsq", "bayes")
#: fitter of each method: every one is called as fit_X(runs, *, spec=..., **options)
_FITTERS = {"huber": ("huber", "fit_huber"), "lsq": ("lsq", "fit_lsq"), "bayes": ("bayes", "fit_bayes")}


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
    the method (Huber: n_starts, seed, delta, ...; lsq: n_starts, seed, profile, level;
    bayes: draws, tune, chains, seed, ...).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if spec is not None and fix:
        raise ValueError("give either fix= or spec=, not both")
    from ..law import LawSpec

    spec = spec or LawSpec(fixed=dict(fix or {}))
    module, name = _FITTERS[method]
    fitter = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    return fitter(runs, spec=spec, **options)


def __getattr__(name: str) -> Any:
    if name in ("fit_huber", "huber_objective", "HuberOptions"):
        return getattr(importlib.import_module(f"{__name__}.huber"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["METHODS", "fit", "fit_huber", "huber_objective", "HuberOptions"]
