"""Fitters of the joint law.  Each takes a RunTable and returns a FitResult.

- ``huber``: summed Huber on log-loss residuals, multi-start (the reference method);
- ``lsq``: nonlinear least squares on log-loss with lmfit;
- ``bayes``: a PyMC posterior.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

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
    bayes: draws, tune, chains, seed, ...).  The result's warnings add the checks of
    :func:`phifit.fitters.common.fit_quality_cautions`: outlying runs by name and a low R^2.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if spec is not None and fix:
        raise ValueError("give either fix= or spec=, not both")
    from ..law import LawSpec

    spec = spec or LawSpec(fixed=dict(fix or {}))
    module, name = _FITTERS[method]
    fitter = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    result = fitter(runs, spec=spec, **options)
    from ..cautions import collect
    from .common import fit_quality_cautions

    n_free = sum(1 for k, v in result.params.items() if v is not None and k not in result.fixed)
    quality = fit_quality_cautions(
        np.asarray(result.residuals), list(result.run_ids), result.r2, n_free, source=method
    )
    return result.with_updates(warnings=collect(result.warnings, quality)) if quality else result


def __getattr__(name: str) -> Any:
    if name in ("fit_huber", "huber_objective", "HuberOptions"):
        return getattr(importlib.import_module(f"{__name__}.huber"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["METHODS", "fit", "fit_huber", "huber_objective", "HuberOptions"]
