"""Optional backends: which extra provides each, and the one error a missing one raises.

The base install (NumPy, SciPy, pandas, statsmodels, lmfit, Matplotlib, joblib, tqdm) fits, bootstraps,
compares, diagnoses, plans and reports. Four extras add backends (``pip install 'phifit[NAME]'``; ``all`` is
the four together):

    bayes     pymc, arviz, nutpie (PyTensor comes with PyMC)   method "bayes", its LOO, posterior files
    train     torch, tokenizers, pyarrow                        phifit train, phifit sweep
    cluster   submitit                                          phifit sweep --launcher slurm|submitit-local
    parquet   pyarrow                                           run tables saved as Parquet

Every import of these on a user path goes through :func:`import_optional`, so that a missing one fails the
same way: :class:`MissingExtraError`, an ``ImportError`` whose message is one line naming the feature, the
package and the install, e.g.

    method 'bayes' (the Bayesian fit) needs PyMC: pip install 'phifit[bayes]'

The ``phifit`` command prints that line and exits with status 2.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: extra -> the top-level packages it installs (pyproject.toml's optional dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "bayes": ("pymc", "arviz", "nutpie", "pytensor"),
    "train": ("torch", "tokenizers", "pyarrow"),
    "cluster": ("submitit",),
    "parquet": ("pyarrow",),
}

#: top-level package -> the name users know it by
DISPLAY_NAMES: dict[str, str] = {
    "pymc": "PyMC",
    "arviz": "ArviZ",
    "nutpie": "nutpie",
    "pytensor": "PyTensor",
    "torch": "PyTorch",
    "tokenizers": "tokenizers",
    "pyarrow": "pyarrow",
    "submitit": "submitit",
}


class MissingExtraError(ImportError):
    """An optional backend is not installed (or does not import); the message is one line:
    ``{feature} needs {package}[ ({why})]: pip install 'phifit[{extra}]'``.

    ``module`` is the package that is missing (the one asked for, or another package of the same extra
    that it imports). ``why`` is given only when the import failed for another reason (a dependency
    outside the extra missing, a broken binary), so that the line still says what went wrong.
    """

    def __init__(self, feature: str, module: str, extra: str, why: str = "") -> None:
        self.feature, self.module, self.extra = feature, module, extra
        package = DISPLAY_NAMES.get(module.partition(".")[0], module)
        detail = f" ({why})" if why else ""
        super().__init__(f"{feature} needs {package}{detail}: pip install 'phifit[{extra}]'", name=module)


def import_module(module: str) -> ModuleType:
    """``importlib.import_module(module)``, importing it a second time where ArviZ's once-a-day
    notice lost a race.

    ArviZ 0.23 writes a stamp file at its first import of the day (``<user cache>/arviz/
    daily_warning``, through ``daily_warning.tmp`` and a rename).  Two processes importing it at
    the same moment (the test suite's workers, a user's parallel jobs) can both write the
    temporary file, and the one that renames second fails with ``FileNotFoundError``.  The
    winner has written the stamp by then, so a second import reads it and writes nothing."""
    try:
        return importlib.import_module(module)
    except FileNotFoundError as err:
        if "arviz" not in str(err.filename or ""):
            raise
        return importlib.import_module(module)


def import_optional(module: str, extra: str, feature: str) -> ModuleType:
    """``importlib.import_module(module)``, or :class:`MissingExtraError` naming ``feature`` and the
    install of ``extra`` (chained from the original ``ImportError``).

    ``module`` must belong to ``extra`` (its top-level package is in :data:`EXTRAS`); ``feature`` says what
    needs it, in the words a user typed ("phifit train", "method 'bayes' (the Bayesian fit)"). The error
    names the package that is missing (``module``'s, or another package of ``extra`` that it imports, e.g.
    ArviZ for PyMC); an import that fails for another reason adds that reason to the line.
    """
    top = module.partition(".")[0]
    if top not in EXTRAS.get(extra, ()):
        raise ValueError(f"import_optional: {module!r} is not a package of extra {extra!r} (see EXTRAS)")
    try:
        return import_module(module)
    except ImportError as err:
        missing = (getattr(err, "name", None) or "").partition(".")[0]
        if isinstance(err, ModuleNotFoundError) and missing in EXTRAS[extra]:
            # the package itself is absent, or another package of the same extra that it needs
            raise MissingExtraError(feature, missing, extra) from err
        why = " ".join(str(err).split())[:200]
        raise MissingExtraError(feature, module, extra, why) from err
