"""Resampling: the (budget, r) cell bootstrap, wild cluster bootstrap tests and draws of derived quantities.

- :mod:`~phifit.bootstrap.block`: :func:`block_bootstrap` resamples whole blocks (cells) of runs,
  refits the law through the engine and reads percentile and BCa intervals;
- :mod:`~phifit.bootstrap.result`: :class:`BootstrapResult`, the replicates and their bookkeeping;
- :mod:`~phifit.bootstrap.wild`: the restricted wild cluster bootstrap test of a restriction
  (phi = 0, phi = 1, any fixed value): one Rademacher sign per cell; several restrictions' tests
  side by side (:func:`wild_cluster_tests`);
- :mod:`~phifit.bootstrap.draws`: quantities evaluated at bootstrap draws of the law, and their
  percentile intervals.

The interval maths (percentile, BCa, jackknife acceleration) is :mod:`phifit.intervals`.


The names below are imported on first use: the worker processes of a bootstrap or a wild test
unpickle functions of :mod:`~phifit.bootstrap.wild` and the refit engine, and must not pay for
importing pandas through :mod:`~phifit.bootstrap.block` each time.
"""

from __future__ import annotations

import importlib
from typing import Any

from .. import _submodule

#: exported name -> submodule that defines it
_EXPORTS = {
    "block_bootstrap": "block",
    "BootstrapResult": "result",
    "WildTest": "wild",
    "wild_cluster_test": "wild",
    "wild_cluster_tests": "wild",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    value = (
        getattr(importlib.import_module(f"{__name__}.{module}"), name)
        if module
        else _submodule(__name__, name)
    )
    if value is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
