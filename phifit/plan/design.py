"""Plan a sweep before training it: the predicted interval, power and cost for phi.

phi is identified only through how the N-term of

    L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta

changes with r, so a design whose isoFLOP curves sit on one side of their optimum (the
D-term dominates) or whose runs are few and noisy cannot pin it, whatever the fitting.
Given a planned design (the study's grid, a sweep spec or a CSV of planned runs), a law to
plan under (the study's, or the Huber fit of a pilot table) and a noise model, this module
predicts what the reference analysis (Huber fit, (budget, r) cell bootstrap, wild cluster
tests) will report, two ways:

**Asymptotic** (:func:`asymptotic_plan`, well under a second).  The Huber M-estimator's
sandwich covariance at the assumed law (Huber 1981, *Robust Statistics* 7.6), with the
expectations taken under the noise model instead of estimated from residuals.  With
log-loss noise e_i = u_c + eps_i, u_c ~ N(0, tau^2) shared by the runs of cell c = (budget,
r), eps_i ~ N(0, sigma^2), psi(x) = clip(x, -delta, delta) and J the Jacobian of log L over
the six internal coordinates (a, alpha, b, beta, e, phi):

    cov = B^-1 M B^-1,        B = m J^T J,      m = P(|e_i| <= delta)
    M = (E psi(e)^2 - c) J^T J + c sum_c S_c S_c^T,   S_c = sum_{i in c} J_i,
    c = E[psi(e_i) psi(e_j)] for i != j in one cell = E_u[(E_eps psi(u + eps))^2]

(the cluster sandwich; c = 0 without shared noise).  The predicted width of phi's 95%
interval is 2 x 1.96 x se(phi); power against phi0 is that of the two-sided Wald test,
Phi(|phi - phi0| / se - 1.96) + Phi(-|phi - phi0| / se - 1.96).  It is a linearisation:
:attr:`AsymptoticPlan.trusted` is False (with the reasons) when a parameter lies within
3 se of the search box or when 1.96 se(phi) > 0.5.

**Simulation** (:func:`simulate_plan`).  ``n_tables`` tables drawn from the law and the
noise model (:func:`phifit.simulation.simulate`), each analysed as the reference method
would: Huber fit, percentile interval of phi from a (budget, r) cell block bootstrap
(``n_boot`` replicates), restricted fits phi = 0 and phi = 1 and their wild cluster
bootstrap tests (``n_wild`` replicates, rejection at p < 0.05).  Tables run in parallel
(:mod:`phifit.fitters.parallel`: joblib processes, or a Dask cluster with ``backend="dask"``).
Reported: the median width and its 10-90% range over tables, the share of tables whose
interval reaches the box, and the rejection rates (with their binomial Monte-Carlo error).
``benchmarks/plan_calibration.py`` checks it against tables analysed with full-size bootstraps.

Also: whether each planned (budget, r) isoFLOP curve brackets the optimum the law predicts
(:func:`bracketing`, which leaves out curves whose runs are off them), how well the design
conditions the law (:func:`phifit.plan.conditioning.conditioning`: tokens-per-parameter and r
spread, the information matrix's condition number, runs off their isoFLOP curve), the reasons
a predicted interval is wide (:func:`wide_reasons`) and the cost.  :mod:`phifit.plan.optimize`
searches designs under a compute cap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import defaults
from ..cautions import Caution, caution
from ..law import (
    DEFAULT_BOUNDS,
    Design,
    log_loss,
    params_to_theta,
)
from ..serialize import JsonIO, to_plain
from ..study import REFERENCE_PARAMS
from .conditioning import FLOP_RTOL, Conditioning, conditioning, off_isoflop
from .inputs import (
    AGREE_POWER_ATOL,
    AGREE_WIDTH_RTOL,
    NoiseModel,
    PlanDesign,
    design_from_paper,
    design_from_spec,
    design_from_table,
    design_misfit,
    noise_from_pilot,
    pilot_noise,
    resolve_design,
)
from .modes import (
    AsymptoticPlan,
    SimulatedPlan,
    asymptotic_plan,
    simulate_plan,
)
from .support import declined_reasons, pilot_support

__all__ = [
    "PlanDesign",
    "NoiseModel",
    "AsymptoticPlan",
    "SimulatedPlan",
    "PlanResult",
    "design_from_paper",
    "design_from_spec",
    "design_from_table",
    "noise_from_pilot",
    "pilot_noise",
    "resolve_design",
    "plan_from_fit",
    "asymptotic_plan",
    "simulate_plan",
    "bracketing",
    "conditioning",
    "wide_reasons",
    "plan_design",
]


# -- isoFLOP bracketing --------------------------------------------------------------------------

#: The status of a (budget, r) curve whose runs are not on their budget's isoFLOP curve.
OFF_CURVE = f"runs off the isoFLOP curve (FLOPs > {FLOP_RTOL:.0%} from the budget)"


def predicted_optimum(
    design: PlanDesign, params: Mapping[str, float], budget: float, r: int, lo: float, hi: float
) -> float:
    """The size minimising the law's loss on the isoFLOP curve (budget, r) among the family's
    candidate sizes in [lo, hi] (D = C / F, continuous)."""
    theta = params_to_theta(params)
    sizes = design.arch.candidates(r, lo, hi)
    a = design.arch.arch(r, sizes)
    d = Design.from_arrays(
        np.full(len(sizes), float(r)), a["n_once"], a["n_rec"], budget / a["flops_per_token"]
    )
    return float(sizes[int(np.argmin(log_loss(theta, d)))])


def bracketing(design: PlanDesign, params: Mapping[str, float]) -> list[dict[str, Any]]:
    """Per (budget, r) curve of the design: its sizes, the predicted optimum size (searched
    from a quarter of the smallest to four times the largest size), and ``status``:
    "bracketed" when the optimum lies strictly between the smallest and the largest size,
    else "optimum at or below the smallest size" / "... at or above the largest size"; and
    "runs off the isoFLOP curve" when any of its runs' FLOPs is more than
    :data:`~phifit.plan.conditioning.FLOP_RTOL` from the budget (the curve the optimum is
    read on is not the one the runs sit on, :func:`phifit.plan.conditioning.off_isoflop`)."""
    out = []
    off = pd.Series(off_isoflop(design.frame), index=design.frame.index)
    for (budget, r), cell in design.frame.groupby(["budget", "r"], sort=True):
        sizes = sorted(set(cell["size"].astype(float)))
        opt = predicted_optimum(design, params, float(budget), int(r), sizes[0] / 4, sizes[-1] * 4)
        if off.loc[cell.index].any():
            status = OFF_CURVE
        elif opt <= sizes[0]:
            status = "optimum at or below the smallest size"
        elif opt >= sizes[-1]:
            status = "optimum at or above the largest size"
        else:
            status = "bracketed"
        out.append({"budget": float(budget), "r": int(r), "sizes": sizes, "optimum": opt, "status": status})
    return out


def wide_reasons(
    design: PlanDesign,
    noise: NoiseModel,
    asym: AsymptoticPlan,
    brackets: list[dict[str, Any]],
    sim: SimulatedPlan | None = None,
) -> list[str]:
    """Plain reasons why phi's interval is predicted wide (empty when neither mode predicts it)."""
    reasons = []
    narrow_sim = sim is None or (sim.width_median < 0.3 and sim.p_box < 0.05)
    if asym.width < 0.3 and asym.p_box < 0.05 and narrow_sim:
        return reasons
    off = [b for b in brackets if b["status"] == OFF_CURVE]
    if off:
        reasons.append(
            f"{len(off)} of {len(brackets)} (budget, r) curves have runs off their isoFLOP curve: the "
            "budget labels do not describe the runs, so bracketing is not checked there"
        )
    unb = [b for b in brackets if b["status"] not in ("bracketed", OFF_CURVE)]
    if unb:
        budgets = sorted({b["budget"] for b in unb})
        below = sum(b["status"].endswith("smallest size") for b in unb)
        reasons.append(
            f"{len(unb)} of {len(brackets)} isoFLOP curves do not bracket their predicted optimum "
            f"(budgets {', '.join(f'{x:.3g}' for x in budgets)}; {below} with the optimum below the smallest "
            "size, where the D-term dominates and the N-term, which carries phi, is barely seen)"
        )
    ratio = asym.signal / asym.noise_eff if asym.noise_eff > 0 else math.inf
    reasons.append(
        f"noise vs the r-effect: a change of 0.1 in phi moves the predicted log-loss "
        f"by {asym.signal_raw:.2g} "
        f"(rms over runs), of which {asym.signal:.2g} is not absorbed by the other parameters, against a "
        f"per-run noise of {asym.noise_eff:.2g} as the Huber fit sees it (sd {noise.per_run:.2g}"
        + (f", plus {noise.cell:.2g} shared per cell" if noise.cell else "")
        + f"): signal/noise {ratio:.2g} per run over {design.n_runs} runs"
    )
    if design.seed_range()[1] == 1:
        reasons.append(
            "one seed per run: repeated seeds average the per-run noise (se falls as 1/sqrt(seeds))"
        )
    strong = {k: v for k, v in asym.correlation_phi.items() if abs(v) > 0.9}
    if strong:
        reasons.append(
            "phi is nearly confounded with "
            + ", ".join(f"{k} (correlation {v:+.2f})" for k, v in strong.items())
        )
    if design.n_cells < 12:
        reasons.append(
            f"only {design.n_cells} (budget, r) cells: the cell bootstrap and wild test are coarse"
        )
    if sim is not None and sim.misfit:
        offsets = np.array([o["offset"] for o in sim.misfit["offsets"]])
        reasons.append(
            f"the law's misfit at these cells: the pilot's (budget, r) cell means sit {np.std(offsets):.2g} "
            f"(sd; up to {np.max(np.abs(offsets)):.2g}) off the law, fixed in every table, against "
            f"{asym.signal:.2g} of log-loss per 0.1 of phi: the fit bends phi (and E, alpha, beta) to "
            "absorb them, table after table"
        )
    return reasons


# -- everything together --------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanResult(JsonIO):
    """A design's plan: the design and its cost, the law and noise planned under, the
    asymptotic and (optionally) simulated predictions, isoFLOP bracketing, reasons for a
    wide interval, cautions (including where the two modes disagree, and the design's
    conditioning checks) and the design's ``conditioning``."""

    design: dict[str, Any]
    law: dict[str, float]
    law_source: str
    noise: NoiseModel
    delta_phi: float | None
    asymptotic: AsymptoticPlan
    simulation: SimulatedPlan | None
    bracketing: list[dict[str, Any]]
    reasons: list[str]
    warnings: list[Caution]
    optimized: dict[str, Any] | None = None
    conditioning: Conditioning | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(
            {
                "design": self.design,
                "law": self.law,
                "law_source": self.law_source,
                "noise": self.noise.to_dict(),
                "delta_phi": self.delta_phi,
                "asymptotic": self.asymptotic.to_dict(),
                "simulation": None if self.simulation is None else self.simulation.to_dict(),
                "bracketing": self.bracketing,
                "reasons": self.reasons,
                "warnings": [c.to_dict() for c in self.warnings],
                "optimized": self.optimized,
                "conditioning": None if self.conditioning is None else self.conditioning.to_dict(),
                "width_is_precision": self.width_is_precision,
            }
        )

    @property
    def width_is_precision(self) -> bool:
        """False when the law planned under has phi on an end of its box (:func:`law_at_box`: the
        predicted widths are then cut by the box and say nothing of how precisely the design
        measures phi) or when the pilot cannot see what the design measures
        (:mod:`phifit.plan.support`: one looped r, one budget); the plan then gives the widths as
        what the simulated tables did, not as a prediction."""
        return not phi_on_box(self.law) and not declined_reasons(self.warnings)

    @property
    def width_declined_because(self) -> list[str]:
        """Why no width is predicted (empty when one is): the pilot's gaps, then the box."""
        reasons = declined_reasons(self.warnings)
        if phi_on_box(self.law):
            reasons.append(f"the law's phi = {self.law['phi']:g} lies on the end of its box")
        return reasons

    def summary(self) -> str:
        """The plan as text: design and cost, both predictions, bracketing, reasons, cautions."""
        lines = self._header_lines() + [""]
        lines += [f"(!) {w}" for w in declined_reasons(self.warnings)]
        lines += self._prediction_lines()
        lines.append(self._se_line())
        lines += self._simulation_notes()
        a = self.asymptotic
        if not a.trusted:
            lines.append("(!) the asymptotic mode cannot be trusted here:")
            lines += [f"    - {r}" for r in a.reasons]
        if self.conditioning is not None:
            lines += ["", "[[Design conditioning]]"] + self.conditioning.lines()
        lines.append("")
        lines += self._bracketing_lines()
        if self.reasons:
            lines += ["", "[[Why the interval is wide]]"] + [
                f"{i}. {r}" for i, r in enumerate(self.reasons, 1)
            ]
        if self.optimized:
            lines += [""] + self._optimized_lines()
        if self.warnings:
            lines += ["", "[[Cautions]]"] + [f"{c.level} [{c.kind}]: {c.message}" for c in self.warnings]
        return "\n".join(lines)

    def _header_lines(self) -> list[str]:
        """The summary's [[Plan]] block: the design's line, the law planned under and the noise model."""
        lines = ["[[Plan]]", f"design   {self.design['line']}"]
        law = ", ".join(f"{k} {v:.4g}" for k, v in self.law.items())
        lines += [
            f"law      {law} ({self.law_source})",
            f"noise    log-loss sd {self.noise.per_run:.4g} per run"
            + (f" + {self.noise.cell:.4g} per (budget, r) cell" if self.noise.cell else "")
            + f" ({self.noise.source})",
        ]
        if self.noise.note:
            lines.append(f"         {self.noise.note}")
        return lines

    def _prediction_lines(self) -> list[str]:
        """The [[Predicted for phi]] table: the 95% width, P(interval reaches box) and the powers,
        asymptotic beside simulated ("-" without a simulation, "n/a" where it gave no number)."""
        a, s = self.asymptotic, self.simulation
        lines = ["[[Predicted for phi]]", f"{'':28} {'asymptotic':>14} {'simulation':>24}"]
        sim_w = (
            f"{s.width_median:.3g} [{s.width_q10:.3g}, {s.width_q90:.3g}]"
            if s is not None and np.isfinite(s.width_median)
            else ("n/a" if s is not None else "-")
        )
        trust = "" if a.trusted else " (!)"
        on_box = phi_on_box(self.law)
        label = "95% interval width" + (
            "" if self.width_is_precision else " (box)" if on_box else " (no pred.)"
        )
        lines.append(f"{label:28} {a.width:>14.3g}{trust:<4} {sim_w:>20}")
        if on_box:
            lo, hi = DEFAULT_BOUNDS["phi"]
            lines.append(
                f"(box) no width predicted: the law's phi = {self.law['phi']:g} is on the end of its box "
                f"[{lo:g}, {hi:g}], so these widths are cut by the box, not phi's precision; the realised "
                f"width can be anything up to {hi - lo:g} (caution law_at_box)"
            )
        lines.append(
            f"{'P(interval reaches box)':28} {a.p_box:>14.2f}     "
            f"{(f'{s.p_box:.2f}' if s and np.isfinite(s.p_box) else ('n/a' if s else '-')):>20}"
        )
        for key, label in (
            ("phi=0", "power: reject phi = 0"),
            ("phi=1", "power: reject phi = 1"),
            ("delta_phi", "power: detect delta phi"),
        ):
            if key not in a.power:
                continue
            sim = f"{s.power[key]:.2f} +- {s.power_mc_se[key]:.2f}" if s and key in s.power else "-"
            lines.append(f"{label:28} {a.power[key]:>14.2f}     {sim:>20}")
        return lines

    def _se_line(self) -> str:
        """The asymptotic se(phi), then the simulation's size (tables, bootstrap and wild replicates),
        seed, time and failed tables."""
        a, s = self.asymptotic, self.simulation
        return f"se(phi) asymptotic {a.se['phi']:.3g}" + (
            f"; simulation: {s.n_tables} tables x {s.n_boot} bootstrap"
            + (
                f" / {s.n_wild} wild replicates"
                if s.tests
                else " replicates (widths only; --simulate N adds the wild tests' power)"
            )
            + f", seed {s.seed}, {s.seconds:.0f} s"
            + (
                f", {s.n_failed} of {s.n_tables} tables failed (rates over the "
                f"{s.n_tables - s.n_failed} that finished)"
                if s.n_failed
                else ""
            )
            if s
            else ""
        )

    def _simulation_notes(self) -> list[str]:
        """What the simulated tables carry beyond the noise: laws drawn per table, the pilot's misfit."""
        s = self.simulation
        lines = []
        if s is not None and s.law_draws:
            lines.append(
                f"simulation: each table's law drawn from {s.law_draws_source} ({s.law_draws} draws): "
                "its width and P(box) include the law's uncertainty, its power is an assurance "
                "(averaged over the plausible laws)"
            )
        if s is not None and s.misfit and s.misfit.get("shapes"):
            m = s.misfit
            unseen = m["cells_without_offset"]
            lines.append(
                f"misfit carried with its shape: every simulated table carries {m['source']}, each seen "
                f"(budget, r) cell's curve taken at the planned sizes, with per-run noise of sd "
                f"{m['shape_sd']:.3g} on top"
                + (
                    f"; the {unseen} planned cell(s) the pilot did not see draw a level from "
                    f"N(0, {m['tau']:.3g}^2), a slope from N({m.get('mean_b', 0.0):.3g}, {m['tau_b']:.3g}^2) "
                    f"and a curvature from N({m.get('mean_c', 0.0):.3g}, {m['tau_c']:.3g}^2) per unit of "
                    "ln N in each table"
                    if unseen
                    else ""
                )
                + f"; the asymptotic mode sees a cell term of sd {m['tau']:.3g} (levels only)"
                + (f"; carried as {m['choice']}" if m.get("choice") else "")
            )
        elif s is not None and s.misfit:
            m = s.misfit
            unseen = m["cells_without_offset"]
            lines.append(
                f"misfit carried: every simulated table carries {m['source']} as fixed (budget, r) "
                "offsets"
                + (
                    f"; the {unseen} planned cell(s) the pilot did not see draw theirs from "
                    f"N(0, {m.get('tau', 0.0):.3g}^2) in each table"
                    if unseen
                    else ""
                )
                + f"; the asymptotic mode sees them as a cell term of sd {m.get('tau', 0.0):.3g}"
                + (f"; carried as {m['choice']}" if m.get("choice") else "")
                + " (--no-misfit: the noise alone)"
            )
        return lines

    def _bracketing_lines(self) -> list[str]:
        """Per (budget, r) isoFLOP curve: its planned sizes, the predicted optimum and its status."""
        lines = ["[[IsoFLOP curves: predicted optimum vs planned sizes]]"]
        for b in self.bracketing:
            sizes = ", ".join(f"{x:.4g}" for x in b["sizes"])
            lines.append(
                f"budget {b['budget']:<9.3g} r {b['r']}  sizes {sizes:<32} "
                f"optimum {b['optimum']:<9.4g} {b['status']}"
            )
        return lines

    def _optimized_lines(self) -> list[str]:
        """The [[Optimised design]] block: its line, predicted width and cost before -> after (asymptotic,
        and simulated when it was simulated) and the spec written."""
        o = self.optimized
        lines = ["[[Optimised design]]", o["line"]]
        if not self.width_is_precision:
            lines.append(
                "(box) the law's phi is on the end of its box: the widths below are cut by the box, so "
                "the optimiser compared truncated widths, not phi's precision"
            )
        lines.append(
            f"predicted width (asymptotic) {o['width_before']:.3g} -> {o['width_after']:.3g}; "
            f"cost {o['flops_before']:.3g} -> {o['flops_after']:.3g} FLOPs"
            + (
                f", {o['hours_before']:.2f} h -> {o['hours_after']:.2f} h"
                if o.get("hours_after") is not None
                else ""
            )
        )
        if o.get("sim_width_after") is not None:
            carried = [
                what
                for what, key in (
                    ("the pilot's misfit", "sim_misfit_after"),
                    ("law draws", "sim_law_draws_after"),
                )
                if o.get(key)
            ]
            lines.append(
                f"predicted width (simulation) {o.get('sim_width_before', math.nan):.3g} "
                f"-> {o['sim_width_after']:.3g}"
                + (f" (both carrying {' and '.join(carried)})" if carried else "")
            )
        if o.get("written"):
            lines.append(f"wrote {o['written']}")
        return lines


#: More than this share of simulated tables failing is a caution (and the asymptotic and
#: simulated modes are then not compared: the simulation's rates come from the tables that
#: finished, which are the easier ones).  Matches the bootstrap's MAX_FAILED_SHARE.
SIM_FAILED_SHARE = 0.10
#: Below this many finished tables the simulated rates are too coarse to read (a rate's
#: Monte-Carlo se is up to 0.5 / sqrt(n): 0.16 at 10 tables).
SIM_MIN_TABLES = 10


def agreement(asym: AsymptoticPlan, sim: SimulatedPlan, *, widths: bool = True) -> list[Caution]:
    """Cautions where the asymptotic and simulated predictions disagree (width by more than
    25% relative, a power by more than 0.15); when more than :data:`SIM_FAILED_SHARE` of the
    simulated tables failed, a caution saying so instead.  ``widths=False`` (the law's phi on
    its box, :func:`law_at_box`) compares the powers only: neither width is then a precision."""
    out = []
    n_done = sim.n_tables - sim.n_failed
    if sim.n_failed > SIM_FAILED_SHARE * sim.n_tables:
        out.append(
            caution(
                "plan",
                "simulation_failed_tables",
                f"{sim.n_failed} of {sim.n_tables} simulated tables failed (their fit, bootstrap or "
                f"tests gave no answer); the simulated width, P(box) and powers are over the "
                f"{n_done} that finished"
                + (", too few to read" if n_done < SIM_MIN_TABLES else "")
                + ": failures are not a random subset (they are the hardest tables), so the "
                "simulation is optimistic; a design whose simulated tables fail this often is "
                "too small for the analysis",
                n_failed=sim.n_failed,
                n_tables=sim.n_tables,
                share_limit=SIM_FAILED_SHARE,
            )
        )
        return out  # the simulation is not the one to trust here
    if widths and np.isfinite(sim.width_median) and sim.width_median > 0:
        ratio = asym.width / sim.width_median
        if abs(ratio - 1) > AGREE_WIDTH_RTOL:
            out.append(
                caution(
                    "plan",
                    "modes_disagree",
                    f"the asymptotic width {asym.width:.3g} is {ratio:.2f} x the simulated median "
                    f"{sim.width_median:.3g}: trust the simulation"
                    + ("" if asym.trusted else " (the asymptotic mode's conditions fail, see above)"),
                    ratio=ratio,
                )
            )
    for key, p in sim.power.items():
        if key in asym.power and abs(asym.power[key] - p) > AGREE_POWER_ATOL:
            out.append(
                caution(
                    "plan",
                    "modes_disagree",
                    f"power ({key}): asymptotic {asym.power[key]:.2f} vs simulated {p:.2f}; "
                    "trust the simulation",
                )
            )
    return out


def phi_on_box(params: Mapping[str, float]) -> bool:
    """Whether the law's phi lies on an end of phi's box (:data:`~phifit.law.DEFAULT_BOUNDS`)."""
    lo, hi = DEFAULT_BOUNDS["phi"]
    phi = float(params["phi"])
    return bool(phi <= lo + 1e-6 or phi >= hi - 1e-6)


def law_at_box(params: Mapping[str, float], sim: SimulatedPlan | None) -> list[Caution]:
    """A caution when the planning law's phi sits on an end of phi's box: every table simulated
    from it is fitted near that end, so its interval is cut by the box and a predicted width says
    how far intervals reach into the box, not how precisely the design measures phi (the realised
    width can be anything up to the box's).  Simulating from an estimate on the boundary of its
    parameter space is the case where the parametric bootstrap is inconsistent (Andrews 2000,
    Econometrica 68, 399-405), so the plan declines to read its width as a precision
    (:attr:`PlanResult.width_is_precision`)."""
    lo, hi = DEFAULT_BOUNDS["phi"]
    phi = float(params["phi"])
    if not phi_on_box(params):
        return []
    reach = "" if sim is None else f" (P(box) {sim.p_box:.2f} in the simulation)"
    return [
        caution(
            "plan",
            "law_at_box",
            f"the planning law's phi = {phi:g} lies on the end of its box [{lo:g}, {hi:g}]: the tables "
            f"simulated from it are fitted near that end and their intervals cut by the box{reach}, so "
            f"the simulated width is not a prediction of phi's precision (a bootstrap from a law on the "
            f"box's end is inconsistent) and the realised one can be anything up to the box's {hi - lo:g}; "
            f"read P(box), or plan with a phi inside the box (--phi)",
            phi=phi,
            lo=lo,
            hi=hi,
        )
    ]


def plan_design(
    design: PlanDesign,
    *,
    params: Mapping[str, float] | None = None,
    noise: NoiseModel,
    law_source: str = "the study's joint fit",
    delta_phi: float | None = None,
    n_tables: int = 0,
    n_boot: int = defaults.PLAN_N_BOOT,
    n_wild: int = defaults.PLAN_N_WILD,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    laws: Sequence[Mapping[str, float]] | None = None,
    laws_source: str = "",
    misfit: Any | None = None,
    tests: bool = True,
    pilot: Any | None = None,
) -> PlanResult:
    """Plan ``design`` under ``params`` (default the study's law) and ``noise``: the
    asymptotic prediction always, the simulation with ``n_tables`` > 0 (each table's law drawn
    from ``laws`` when given, and carrying a pilot's ``misfit`` when given:
    :func:`phifit.plan.modes.simulate_plan`, which runs the tables on ``n_jobs`` workers of
    ``backend``, a Dask cluster at ``scheduler`` for ``backend="dask"``; ``tests=False``: the
    simulated tables give widths and P(box), not the wild tests' power). With the ``pilot`` run
    table, the plan says what of the design the pilot cannot see (:func:`pilot_support`) and
    declines a width where that makes it meaningless."""
    p = {**REFERENCE_PARAMS, **(params or {})}
    asym = asymptotic_plan(design, p, noise, delta_phi=delta_phi)
    sim = None
    if n_tables:
        sim = simulate_plan(
            design,
            p,
            noise,
            n_tables=n_tables,
            n_boot=n_boot,
            n_wild=n_wild,
            delta_phi=delta_phi,
            seed=seed,
            n_jobs=n_jobs,
            backend=backend,
            scheduler=scheduler,
            progress=progress,
            laws=laws,
            laws_source=laws_source,
            misfit=misfit,
            tests=tests,
        )
    brackets = bracketing(design, p)
    cond = conditioning(design, p, law_source=law_source)
    gaps = [] if pilot is None else pilot_support(pilot, design.frame)
    warnings = gaps + list(cond.warnings) + law_at_box(p, sim)
    if sim is not None:
        warnings += agreement(asym, sim, widths=not phi_on_box(p) and not declined_reasons(gaps))
    elif not asym.trusted:
        warnings.append(
            caution(
                "plan",
                "asymptotic_untrusted",
                "the asymptotic prediction is unreliable here; run --simulate N",
            )
        )
    return PlanResult(
        design={
            "source": design.source,
            "kind": design.kind,
            "n_runs": design.n_runs,
            "n_cells": design.n_cells,
            "seeds": design.seeds,
            "flops": design.flops,
            "seconds": design.seconds,
            "seconds_note": design.seconds_note,
            "line": design.summary_line(),
            "runs": design.frame.to_dict(orient="list"),
        },
        law={k: float(v) for k, v in p.items()},
        law_source=law_source,
        noise=noise,
        delta_phi=delta_phi,
        asymptotic=asym,
        simulation=sim,
        bracketing=brackets,
        reasons=wide_reasons(design, noise, asym, brackets, sim),
        warnings=warnings,
        conditioning=cond,
    )


def plan_from_fit(
    runs: Any,
    fit: Any,
    design: str | None = None,
    *,
    cell_noise: float | None = None,
    n_tables: int = 0,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    misfit: bool = True,
    tests: bool = True,
    misfit_shape: bool = False,
    misfit_model: str = defaults.PLAN_MISFIT_MODEL,
    recipe: str | None = None,
) -> PlanResult:
    """Plan ``design`` (default: the runs' own) with a fitted table as the pilot: the fit's
    law and the noise of its residuals (:func:`noise_from_pilot`), as ``phifit plan --pilot``
    does; with ``misfit`` (the default) the plan carries the runs' cell-mean residuals
    (:func:`pilot_noise`; ``misfit=False`` is ``--no-misfit``), as ``misfit_model``
    (``--misfit-model``, :func:`phifit.plan.inputs.design_misfit`): ``auto`` each cell's curve in
    model size (:mod:`phifit.plan.cell_shapes`) where the curves cover every planned run, else a
    level per cell; ``misfit_shape=True`` is ``misfit_model="shape"``.
    ``n_jobs``, ``backend``, ``scheduler``: where the simulated tables run (:func:`plan_design`).
    What ``phifit report --plan`` adds to a report.  ``recipe``: the recipe of a pilot whose
    ``variant`` column holds several (default the one ``fit`` was fitted to, else "baseline", as
    ``phifit plan --variant`` picks it; :func:`phifit.recipes.pairing.recipe_runs`)."""
    from ..runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=fit)  # one recipe of a mixed table, as --variant picks it
    planned = resolve_design(design, runs)
    if misfit:
        model = "shape" if misfit_shape else misfit_model
        noise, carried = design_misfit(runs, fit, planned.frame, model=model, cell_noise=cell_noise)
    else:
        noise, carried = pilot_noise(runs, fit, cell_noise=cell_noise, misfit=False)
    return plan_design(
        planned,
        params=dict(fit.params),
        noise=noise,
        law_source=f"Huber fit of {runs.source}",
        n_tables=n_tables,
        seed=seed,
        n_jobs=n_jobs,
        backend=backend,
        scheduler=scheduler,
        progress=progress,
        misfit=carried,
        tests=tests,
        pilot=runs,
    )


def plan_figure(result: PlanResult) -> Any:
    """Two panels: the simulated widths of phi's interval (histogram, with the asymptotic
    width as a line) and the powers (asymptotic and simulated bars)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    a, s = result.asymptotic, result.simulation
    if s is not None:
        widths = [t["width"] for t in s.tables if "error" not in t and np.isfinite(t["width"])]
        ax1.hist(widths, bins=20, color="#0072B2", alpha=0.7, label=f"simulated ({len(widths)} tables)")
        ax1.axvline(s.width_median, color="#0072B2", linestyle="--", label=f"median {s.width_median:.3g}")
    ax1.axvline(
        a.width, color="#D55E00", label=f"asymptotic {a.width:.3g}" + ("" if a.trusted else " (untrusted)")
    )
    ax1.set_xlabel(
        "width of phi's 95% interval"
        + (
            ""
            if result.width_is_precision
            else " (cut by phi's box: not a precision)"
            if phi_on_box(result.law)
            else " (not a prediction: the pilot cannot see the design)"
        )
    )
    ax1.set_ylabel("tables")
    ax1.legend(fontsize=7)
    keys = list(a.power)
    x = np.arange(len(keys))
    ax2.bar(x - 0.2, [a.power[k] for k in keys], 0.4, color="#D55E00", label="asymptotic")
    if s is not None:
        ax2.bar(x + 0.2, [s.power.get(k, np.nan) for k in keys], 0.4, color="#0072B2", label="simulated")
    ax2.set_xticks(x, [f"reject {k}" if k != "delta_phi" else "detect delta phi" for k in keys], fontsize=8)
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel("power (p < 0.05)")
    ax2.legend(fontsize=7)
    fig.suptitle(result.design["source"], fontsize=9)
    return fig
