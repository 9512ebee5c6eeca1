"""``phifit.load(path)``: any result JSON back as its own result type.

Every result of phifit saves with ``to_json`` and reloads with its class's ``from_json``; this
module is for when the class is not known in advance (a folder of saved results, a notebook
opening a colleague's file).  The type is read, in this order, from a ``"result_type"`` key
(the class name), from the ``"kind"`` key most results write (``"bootstrap"``,
``"comparison"``, ``"multipliers"``, ``"drift"``, ``"recipes"``, ``"parts"``, ``"report"``, ...;
:data:`KINDS`), else from the keys, as the class whose fields the file's keys match best
(every field without a default present; then the most fields present, then the smallest share
of keys the class does not know), trying the next best when a class cannot rebuild the data.
A ``results.json`` of ``phifit report`` loads as an :class:`~phifit.report.analysis.Analysis`.

It lives in ``report/`` because it must import every room that defines a result type.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from collections.abc import Mapping
from typing import Any

from ..serialize import JsonIO

#: the modules that define result types (imported on the first :func:`load`)
RESULT_MODULES = (
    "phifit.cautions",
    "phifit.intervals",
    "phifit.result",
    "phifit.isoflop",
    "phifit.equivalence",
    "phifit.frontier",
    "phifit.predict",
    "phifit.fitters.likelihood",
    "phifit.bootstrap.result",
    "phifit.bootstrap.wild",
    "phifit.bootstrap.inverted",
    "phifit.compare.restricted",
    "phifit.recipes.delta",
    "phifit.recipes.shared_phi",
    "phifit.diagnostics.residuals",
    "phifit.diagnostics.suite",
    "phifit.diagnostics.identifiability",
    "phifit.diagnostics.influence",
    "phifit.diagnostics.multiplier_result",
    "phifit.diagnostics.drift_result",
    "phifit.diagnostics.parts_result",
    "phifit.plan.inputs",
    "phifit.plan.modes",
    "phifit.plan.design",
    "phifit.plan.next_runs",
    "phifit.plan.rounds",
    "phifit.report.analysis",
)
#: modules that need an optional extra; skipped when it is not installed
OPTIONAL_MODULES = ("phifit.fitters.bayes.noise_compare", "phifit.fitters.bayes.loo_compare")


#: the ``"kind"`` a result's ``to_dict`` writes -> its class name
KINDS = {
    "bootstrap": "BootstrapResult",
    "comparison": "Comparison",
    "multipliers": "MultiplierFit",
    "drift": "DriftFit",
    "recipes": "RecipeComparison",
    "parts": "PartsResult",
    "report": "Analysis",
    "prediction": "Prediction",
    "noise_comparison": "NoiseComparison",
    "loo_comparison": "LooComparison",
}


def result_types() -> dict[str, type]:
    """Every result type phifit saves, by class name."""
    for name in RESULT_MODULES:
        importlib.import_module(name)
    for name in OPTIONAL_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    found: dict[str, type] = {}
    todo = list(JsonIO.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if dataclasses.is_dataclass(cls):
            found[cls.__name__] = cls
    return found


def _candidates(data: Mapping[str, Any], types: Mapping[str, type]) -> list[type]:
    """The types that could have written ``data``, best match first (module docstring)."""
    keys = set(data)
    scored = []
    for cls in types.values():
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = {f.name for f in fields}
        required = {
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        if not names or not required <= keys or not keys & names:
            continue
        unknown = len(keys - names) / len(keys)
        scored.append((-len(keys & names), unknown, cls.__name__, cls))
    return [item[-1] for item in sorted(scored, key=lambda item: item[:3])]


def load(source: str | os.PathLike | Mapping[str, Any]) -> Any:
    """A result saved by phifit (a JSON file path, JSON text, or the parsed dict), rebuilt as its
    own type: a :class:`~phifit.result.FitResult`, a
    :class:`~phifit.bootstrap.result.BootstrapResult`, a
    :class:`~phifit.compare.restricted.Comparison`, a report's ``results.json`` as an
    :class:`~phifit.report.analysis.Analysis`, ...

    A Bayesian fit comes back with its posterior as ArviZ InferenceData (``fit.idata``) when
    the netCDF file it was saved to (``save=``) still exists, as written or beside the JSON file.

    Raises ``ValueError`` naming the file when no result type matches its keys.
    """
    where = "the data"
    if isinstance(source, Mapping):
        data = source
    else:
        text = str(source)
        if not text.lstrip().startswith("{"):
            where = text
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
        data = json.loads(text)
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: a phifit result is a JSON object, got {type(data).__name__}")
    folder = None if where == "the data" else os.path.dirname(os.path.abspath(where))
    return _with_posterior(_rebuild(data, where), folder)


def _rebuild(data: Mapping[str, Any], where: str) -> Any:
    """``data`` as the result type that wrote it (module docstring)."""
    types = result_types()
    marker = data.get("result_type")
    if isinstance(marker, str) and marker in types:
        return types[marker].from_dict({k: v for k, v in data.items() if k != "result_type"})
    kind = data.get("kind")
    if isinstance(kind, str) and KINDS.get(kind) in types:
        return types[KINDS[kind]].from_dict(data)
    errors = []
    for cls in _candidates(data, types):
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError, KeyError) as err:
            errors.append(f"{cls.__name__}: {err}")
    tried = f" (tried {'; '.join(errors[:3])})" if errors else ""
    raise ValueError(f"{where}: no phifit result type matches its keys {sorted(data)[:12]}{tried}")


def _with_posterior(result: Any, folder: str | None) -> Any:
    """A Bayesian FitResult with its posterior read back (``idata``) from the netCDF file it was
    saved to (``extras["netcdf"]``: as written, else beside the JSON file), when that file exists
    and is a phifit posterior; any other result unchanged."""
    from ..result import FitResult

    path = result.extras.get("netcdf") if isinstance(result, FitResult) and result.method == "bayes" else None
    if not path:
        return result
    for candidate in (path, os.path.join(folder, os.path.basename(path)) if folder else None):
        if candidate and os.path.isfile(candidate):
            from ..fitters.bayes.store import load_posterior

            try:
                return result.with_updates(idata=load_posterior(candidate))
            except (ValueError, OSError):
                return result
    return result


__all__ = ["load", "result_types"]
