"""Should I believe the fit?  Residual tests, identifiability and influence, in one call.

- :mod:`~phifit.diagnostics.residuals`: tests of the residuals (normality, trends, per-r and
  per-budget offsets) of a joint-law fit;
- :mod:`~phifit.diagnostics.identifiability`: can the design and the fit pin phi down (design
  checks, conditioning, the profile of phi)?
- :mod:`~phifit.diagnostics.influence`: does phi rest on a few runs or one part of the data?
- :mod:`~phifit.diagnostics.parts`: does the answer rest on one part of the table?
  :func:`leave_one_part_out` refits without each size, budget and r in turn and reads phi's
  interval again (:class:`PartsResult`);
- :mod:`~phifit.diagnostics.suite`: :func:`diagnose` runs every check that applies and returns
  :class:`Diagnostics`.
"""

from __future__ import annotations

import importlib
from typing import Any

from .. import _submodule

#: exported name -> the submodule that defines it (imported on first access)
_EXPORTS = {
    "Diagnostics": "suite",
    "diagnose": "suite",
    "PartsResult": "parts_result",
    "leave_one_part_out": "parts",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """:func:`diagnose`, :class:`Diagnostics`, :func:`leave_one_part_out` and :class:`PartsResult`
    on first use: importing one check (``phifit fit`` reads :mod:`~phifit.diagnostics.residuals`)
    does not load them all (statsmodels, scipy.stats)."""
    value = (
        getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        if name in _EXPORTS
        else _submodule(__name__, name)
    )
    if value is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names and the submodules imported so far (not this file's helpers)."""
    loaded = {k for k, v in globals().items() if getattr(v, "__name__", "").startswith(f"{__name__}.")}
    return sorted(set(__all__) | loaded)
