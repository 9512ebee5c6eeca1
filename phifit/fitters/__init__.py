"""Fitters of the joint law.  Each takes a run table (a RunTable or a DataFrame) and returns a FitResult.

- ``huber``: summed Huber on log-loss residuals, multi-start (the reference method);
- ``lsq``: nonlinear least squares on log-loss with lmfit;
- ``bayes``: a PyMC posterior.

Every fitter is called the same way, ``fit_X(runs, *, spec=None, options=None, **settings)``:
its typed options (:mod:`phifit.fitters.options`) as a dataclass or as keywords.

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
    import pandas as pd

    from ..law import LawSpec
    from ..result import FitResult
    from ..runs.table import RunTable

METHODS = ("huber", "lsq", "bayes")
#: fitter of each method: every one is called as fit_X(runs, *, spec=..., options=XOptions(...))
_FITTERS = {"huber": ("huber", "fit_huber"), "lsq": ("lsq", "fit_lsq"), "bayes": ("bayes", "fit_bayes")}


def fit(
    runs: RunTable | pd.DataFrame,
    *,
    method: str = "huber",
    fix: Mapping[str, float] | None = None,
    spec: LawSpec | None = None,
    recipe: str | None = None,
    **options: Any,
) -> FitResult:
    """Fit the joint law with the chosen method.

    ``runs`` is a :class:`RunTable` or a DataFrame of runs (validated like a run CSV, e.g.
    the output of :func:`phifit.simulate`).  A table whose ``variant`` column holds several
    recipes is never pooled into one law: ``recipe`` names the one to fit (the command line's
    ``--variant NAME``); by default the recipe "baseline", and ``ValueError`` when there is none
    (:func:`phifit.recipes.pairing.select_recipe`).  The fit then records the recipe in
    ``extras["recipe"]``, which the entry points given the fit (``block_bootstrap``,
    ``compare_fits``, ...) follow, and says so in a note.  ``fix`` holds parameters fixed by natural name
    ({"phi": 0}); ``spec`` gives the full specification instead (bounds included).  The
    remaining keywords are the method's typed options (:mod:`phifit.fitters.options`:
    :class:`HuberOptions`, :class:`LsqOptions`, :class:`BayesOptions`), or ``options=`` one
    of those; an unknown name raises ``ValueError`` listing the valid ones, before any fit.
    The result's warnings add the checks of
    :func:`phifit.fitters.common.fit_quality_cautions` (outlying runs by name and R^2 below
    :data:`~phifit.fitters.common.LOW_R2` = 0.9) and of
    :func:`phifit.fitters.common.conditioning_cautions` (a singular or ill-conditioned
    information matrix, whose standard errors then mean nothing).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if spec is not None and fix:
        raise ValueError("give either fix= or spec=, not both")
    from ..law import LawSpec
    from ..runs.table import as_runs
    from .options import resolve_options

    resolved = resolve_options(method, options.pop("options", None), options)
    from ..runs.recipes import select_recipe

    selection = select_recipe(as_runs(runs), recipe)  # one recipe, as --variant picks it
    runs = selection.runs
    spec = spec or LawSpec(fixed=dict(fix or {}))
    module, name = _FITTERS[method]
    fitter = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    result = fitter(runs, spec=spec, options=resolved)
    import numpy as np

    from ..cautions import collect
    from .common import conditioning_cautions, fit_quality_cautions

    n_free = sum(1 for k, v in result.params.items() if v is not None and k not in result.fixed)
    quality = fit_quality_cautions(
        np.asarray(result.residuals), list(result.run_ids), result.r2, n_free, source=method
    ) + conditioning_cautions(runs, result, source=method)
    if selection.recipe is not None:
        return result.with_updates(
            extras={**result.extras, "recipe": selection.recipe},
            warnings=collect([selection.caution], result.warnings, quality),
        )
    return result.with_updates(warnings=collect(result.warnings, quality)) if quality else result


def __getattr__(name: str) -> Any:
    if name in ("fit_huber", "huber_objective"):
        return getattr(importlib.import_module(f"{__name__}.huber"), name)
    if name in ("HuberOptions", "LsqOptions", "BayesOptions"):
        return getattr(importlib.import_module(f"{__name__}.options"), name)
    from .. import _submodule

    module = _submodule(__name__, name)  # phifit.fitters.bayes, ... on first use
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return module


__all__ = ["METHODS", "BayesOptions", "HuberOptions", "LsqOptions", "fit", "fit_huber", "huber_objective"]
