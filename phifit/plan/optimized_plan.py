"""A plan's optimised design (``phifit plan --optimize``), set beside the design it replaces.

:func:`optimize_plan` searches the best design within the caps (:func:`phifit.plan.optimize.optimize_design`)
under the plan's law and noise, and records in the plan's ``optimized`` field the before/after
width, power, FLOPs and hours, the search's counts and the chosen budgets, r values and seeds.  With
tables to simulate, the optimised design is simulated with the same settings as the given one
(:func:`phifit.plan.pilot_law.simulation_settings`: replicates, seed, and the pilot's law draws and
misfit), so that the simulated widths compare like with like.  :func:`write_optimized` writes the
optimised design as a sweep spec (a spec design) or a CSV of runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .design import PlanResult, simulate_plan
from .inputs import NoiseModel, PlanDesign
from .optimize import Optimized, optimize_design, write_spec


def optimize_plan(
    result: PlanResult,
    design: PlanDesign,
    params: Mapping[str, float],
    noise: NoiseModel,
    *,
    max_flops: float | None = None,
    max_hours: float | None = None,
    objective: str = "width",
    min_runs: int = 0,
    n_tables: int = 0,
    simulation: Mapping[str, Any] | None = None,
) -> tuple[PlanResult, Optimized]:
    """``result`` (the plan of ``design``) with its ``optimized`` field filled in, and the optimised
    design: the best design within ``max_flops`` / ``max_hours`` for ``objective`` ("width" or
    "power") with at least ``min_runs`` runs, and with ``n_tables`` > 0 its simulation under
    ``simulation`` (:func:`phifit.plan.pilot_law.simulation_settings`)."""
    opt = optimize_design(
        design,
        params,
        noise,
        max_flops=max_flops,
        max_hours=max_hours,
        objective=objective,
        min_runs=min_runs,
    )
    before = result.asymptotic
    info = {
        "line": opt.design.summary_line().replace("optimised", "optimised design", 1)
        + f"; budgets/widths {', '.join(f'{b:.3g}: {ws}' for b, ws in sorted(opt.budgets.items()))}",
        "width_before": before.width,
        "width_after": opt.asymptotic.width,
        "power_phi0_before": before.power["phi=0"],
        "power_phi0_after": opt.asymptotic.power["phi=0"],
        "flops_before": design.flops,
        "flops_after": opt.flops,
        "hours_before": None if design.seconds is None else design.seconds / 3600,
        "hours_after": None if opt.seconds is None else opt.seconds / 3600,
        "n_candidates": opt.n_candidates,
        "n_within_cap": opt.n_within_cap,
        "n_rejected": opt.n_rejected,
        "budgets": {str(b): ws for b, ws in opt.budgets.items()},
        "r": list(opt.r),
        "seeds": opt.seeds,
    }
    if n_tables:
        sim = simulate_plan(opt.design, params, noise, n_tables=n_tables, progress=True, **(simulation or {}))
        info["sim_width_before"] = result.simulation.width_median
        info["sim_width_after"] = sim.width_median
        info["sim_power_phi0_after"] = sim.power.get("phi=0")
        info["sim_misfit_after"] = sim.misfit
        info["sim_law_draws_after"] = sim.law_draws_source
    return dataclasses.replace(result, optimized=info), opt


def write_optimized(
    result: PlanResult, opt: Optimized, design: PlanDesign, path: str, *, source: str
) -> PlanResult:
    """Write the optimised design ``opt`` of ``design`` to ``path`` (a sweep spec whose header
    names ``source``, the design as given, and the predicted gain, when ``design`` is a spec;
    else a CSV of runs), and return ``result`` with ``optimized["written"]`` set to ``path``."""
    header = (
        f"written by phifit plan --optimize from {source} "
        f"({opt.n_candidates} candidates, "
        f"{opt.n_within_cap} within the cap)\npredicted 95% width of phi (asymptotic): "
        f"{result.asymptotic.width:.3g} -> {opt.asymptotic.width:.3g}; "
        f"training FLOPs {design.flops:.3g} -> {opt.flops:.3g}"
    )
    if design.kind == "spec":
        write_spec(opt, design.spec, path, header=header)
    else:
        opt.design.frame.to_csv(path, index=False)
    return dataclasses.replace(result, optimized={**result.optimized, "written": path})
