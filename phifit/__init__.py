"""phifit: how much is one recurrence of a looped transformer worth?

Fits the joint iso-depth scaling law of looped language models,

    L = E + A * (N_once + r**phi * N_rec)**(-alpha) + B * D**(-beta),

to tables of training runs, with honest uncertainty and model comparison.

- :func:`load_runs` validates a run CSV into a :class:`RunTable`;
- :func:`fit` fits the law (``method="huber"`` the reference protocol, ``"lsq"``, ``"bayes"``)
  and returns a :class:`FitResult` (the fitters live in :mod:`phifit.fitters`);
- :func:`block_bootstrap`, :func:`compare_fits`, :func:`compare_recipes` give intervals,
  restricted-fit comparisons and Delta-phi between recipes;
- :mod:`phifit.diagnostics`, :mod:`phifit.equivalence`, :mod:`phifit.frontier`,
  :mod:`phifit.predict`, :mod:`phifit.plan` and :mod:`phifit.report` judge the fit, answer
  "what is my looped model worth", plan runs and write the HTML report;
- :func:`answer` runs what the report's headline needs (fit, bootstrap, tests of phi = 0 and
  phi = 1, lack of fit of r^phi) and returns an :class:`Answer` whose ``summary()`` leads with
  the report's sentence;
- :func:`load` reads any result JSON back as its own type (:mod:`phifit.report.loader`);
- :func:`simulate` draws run tables from a known law (:mod:`phifit.simulation`);
- :func:`plot_isoflop`, :func:`plot_bootstrap`, :func:`plot_multipliers`, :func:`plot_residuals`,
  :func:`plot_frontier`, :func:`plot_drift` draw results into matplotlib Axes (:mod:`phifit.plot`);
- :mod:`phifit.trainers` (torch, imported only on demand) produces run tables.

The names above, and the submodules (``phifit.compare.compare_fits``,
``phifit.equivalence.equivalence``, ...), are imported on first use, so ``import phifit`` (and
``phifit --help``) stays fast; no exported name shadows a submodule.  ``phifit.predict`` is the
module :mod:`phifit.predict`, and calling it calls :func:`phifit.predict.predict`.
"""

from __future__ import annotations

import importlib as _importlib
import importlib.util as _importlib_util

#: the version of phifit (one place; read by the CLI and written into every result file)
__version__ = "0.1.0"

#: exported name -> module that defines it (imported on first access)
_EXPORTS = {
    "FitResult": "phifit.result",
    "Caution": "phifit.cautions",
    "JointLaw": "phifit.law",
    "LawSpec": "phifit.law",
    "RunTable": "phifit.runs",
    "RunTableError": "phifit.runs",
    "load_runs": "phifit.runs",
    "fit": "phifit.fitters",
    "block_bootstrap": "phifit.bootstrap",
    "compare_fits": "phifit.compare",
    "compare_recipes": "phifit.recipes",
    "simulate": "phifit.simulation",
    "plot_isoflop": "phifit.plot",
    "plot_bootstrap": "phifit.plot",
    "plot_multipliers": "phifit.plot",
    "plot_residuals": "phifit.plot",
    "plot_frontier": "phifit.plot",
    "plot_drift": "phifit.plot",
    "answer": "phifit.report.honest",
    "Answer": "phifit.report.honest",
    "load": "phifit.report.loader",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> object:
    """An exported name, or a submodule (``phifit.compare``, ``phifit.predict``, ...), imported on
    first access, so that every dotted name the documentation gives resolves after ``import phifit``."""
    module = _EXPORTS.get(name)
    value = getattr(_importlib.import_module(module), name) if module else _submodule(__name__, name)
    if value is None:
        raise AttributeError(f"module 'phifit' has no attribute {name!r}")
    globals()[name] = value
    return value


def _submodule(package: str, name: str) -> object | None:
    """The submodule ``package.name``, imported, or None when the package has none: the lazy
    packages' ``__getattr__`` falls back on it, so ``phifit.plan.next_runs.choose_next`` resolves
    after ``import phifit``."""
    if name.startswith("_") or _importlib_util.find_spec(f"{package}.{name}") is None:
        return None
    return _importlib.import_module(f"{package}.{name}")


def __dir__() -> list[str]:
    """The public names (``__all__``) and the submodules imported so far; not the helpers of
    this file (``annotations``, the import machinery)."""
    loaded = {k for k, v in globals().items() if getattr(v, "__name__", "").startswith("phifit.")}
    return sorted(set(__all__) | loaded)
