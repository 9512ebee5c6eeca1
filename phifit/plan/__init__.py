"""Plan a sweep before training it: what a design can measure of phi, and at what cost.

- :mod:`~phifit.plan.inputs`: what a plan is made of (the planned design, its runs and cost; the
  noise model; the pilot's misfit);
- :mod:`~phifit.plan.modes`: the two predictions, asymptotic (cluster sandwich) and simulated
  (tables analysed as the reference method would);
- :mod:`~phifit.plan.design`: :func:`plan_design` and :func:`plan_from_fit`, which run them and
  return a :class:`PlanResult`;
- :mod:`~phifit.plan.pilot_law`: :func:`plan_law`, the law, noise and misfit a plan simulates (the
  study's, or a pilot's fit, with phi held at an assumed value and the pilot's law draws), and
  :func:`simulation_settings`, what every simulated table of a plan is made of;
- :mod:`~phifit.plan.optimize`: search designs under a compute cap; :mod:`~phifit.plan.optimized_plan`:
  :func:`optimize_plan` sets the optimised design beside the given one, :func:`write_optimized` writes it;
- :mod:`~phifit.plan.next_runs`: the next runs to train from a pool of candidates
  (:func:`~phifit.plan.candidate_pool.load_pool` reads one);
- :mod:`~phifit.plan.reproduction_rules`: :func:`check_reproduction`, whether a reproduction's design (planned
  or trained) stands on its whole design (every r at every budget, bracketed curves, budgets spanning 8x,
  the law's N a third of the compute);
- :mod:`~phifit.plan.rounds`: the round log of an adaptive sweep (``phifit sweep --adaptive``) and
  its per-round summary.

What a run and a sweep are (the run configuration, the sweep-spec format, the learning-rate
transfer) lives in :mod:`phifit.spec`, which the planner and the trainer both read.

The names below are imported on first use, so that ``phifit --help`` does not load the planner's
NumPy, SciPy and pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

from .. import _submodule

#: exported name -> module that defines it (imported on first access)
_EXPORTS = {
    "PlanResult": "design",
    "plan_design": "design",
    "plan_from_fit": "design",
    "PlanLaw": "pilot_law",
    "plan_law": "pilot_law",
    "law_with_phi_held": "pilot_law",
    "pilot_law_draws": "pilot_law",
    "simulation_settings": "pilot_law",
    "tables_to_simulate": "pilot_law",
    "optimize_plan": "optimized_plan",
    "write_optimized": "optimized_plan",
    "load_pool": "candidate_pool",
    "check_reproduction": "reproduction_rules",
}

__all__ = [
    "PlanResult",
    "plan_design",
    "plan_from_fit",
    "PlanLaw",
    "plan_law",
    "law_with_phi_held",
    "pilot_law_draws",
    "simulation_settings",
    "tables_to_simulate",
    "optimize_plan",
    "write_optimized",
    "check_reproduction",
    "load_pool",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    value = (
        getattr(importlib.import_module(f"{__name__}.{module}"), name)
        if module
        else _submodule(__name__, name)
    )
    if value is None:
        raise AttributeError(f"module 'phifit.plan' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names and the submodules imported so far (not this file's helpers)."""
    loaded = {k for k, v in globals().items() if getattr(v, "__name__", "").startswith(f"{__name__}.")}
    return sorted(set(__all__) | loaded)
