"""Resampling: the (budget, r) cell bootstrap, wild cluster bootstrap tests and draws of derived quantities.

- :mod:`~phifit.bootstrap.block`: :func:`block_bootstrap` resamples whole blocks (cells) of runs,
  refits the law through the engine and reads percentile and BCa intervals;
- :mod:`~phifit.bootstrap.result`: :class:`BootstrapResult`, the replicates and their bookkeeping;
- :mod:`~phifit.bootstrap.wild`: the restricted wild cluster bootstrap test of a restriction
  (phi = 0, phi = 1, any fixed value): one Rademacher sign per cell;
- :mod:`~phifit.bootstrap.draws`: quantities evaluated at bootstrap draws of the law, and their
  percentile intervals.

The interval maths (percentile, BCa, jackknife acceleration) is :mod:`phifit.intervals`.
"""

from __future__ import annotations

import importlib
from typing import Any

#: where each public name lives; imported on first use, so that a worker process unpickling a
#: wild test's refit (``phifit.bootstrap.wild``) does not import the block bootstrap's pandas
_EXPORTS = {
    "BootstrapResult": "result",
    "WildTest": "wild",
    "block_bootstrap": "block",
    "wild_cluster_test": "wild",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BootstrapResult", "WildTest", "block_bootstrap", "wild_cluster_test"]
