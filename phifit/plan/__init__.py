"""Plan a sweep before training it: what a design can measure of phi, and at what cost.

- :mod:`~phifit.plan.inputs`: what a plan is made of (the planned design, its runs and cost; the
  noise model; the pilot's misfit);
- :mod:`~phifit.plan.modes`: the two predictions, asymptotic (cluster sandwich) and simulated
  (tables analysed as the reference method would);
- :mod:`~phifit.plan.design`: :func:`plan_design` and :func:`plan_from_fit`, which run them and
  return a :class:`PlanResult`;
- :mod:`~phifit.plan.optimize`: search designs under a compute cap.
"""

from __future__ import annotations

from .design import PlanResult, plan_design, plan_from_fit

__all__ = ["PlanResult", "plan_design", "plan_from_fit"]
