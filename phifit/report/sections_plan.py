"""The report's planning section (``phifit report --plan``): what a design can measure of phi,
with the analysed table as the pilot.

Layout only: every number comes from the :class:`~phifit.plan.PlanResult` in
``Analysis.plan``.  When the planned design is the table's own (``--plan`` alone), the section
puts the realised bootstrap interval next to the prediction, so a reader sees whether the
table turned out as its design let one expect.
"""

from __future__ import annotations

import math

from ..intervals import param_bounds
from . import html as T
from .analysis import Analysis
from .format import Fig, caution_list

_POWER_LABELS = {
    "phi=0": "power: reject φ = 0",
    "phi=1": "power: reject φ = 1",
    "delta_phi": "power: detect Δφ",
}


def _prediction_rows(plan) -> list[list[str]]:
    from ..plan.design import phi_on_box  # scipy.stats stays out of the report's imports

    a, s = plan.asymptotic, plan.simulation
    mark = "" if a.trusted else " (untrusted)"
    box = (
        ""
        if plan.width_is_precision
        else " (cut by the box: not a precision of φ)"
        if phi_on_box(plan.law)
        else " (not a prediction: the pilot cannot see the design)"
    )
    rows = [
        [
            "width of φ's 95% interval" + box,
            T.num(a.width, 3) + mark,
            "–"
            if s is None
            else f"{T.num(s.width_median, 3)} (10–90%: {T.num(s.width_q10, 3)}–{T.num(s.width_q90, 3)})",
        ],
        [
            "P(interval reaches the search box)",
            T.fixed(a.p_box, 2),
            "–" if s is None else T.fixed(s.p_box, 2),
        ],
    ]
    for key, label in _POWER_LABELS.items():
        if key not in a.power:
            continue
        sim = "–"
        if s is not None and key in s.power:
            sim = f"{T.fixed(s.power[key], 2)} ± {T.fixed(s.power_mc_se[key], 2)}"
        rows.append([label, T.fixed(a.power[key], 2), sim])
    return rows


def _realised(a: Analysis) -> str:
    """The table's own interval for phi, when the plan is of its own design."""
    iv = (a.fit.ci or {}).get("phi")
    if a.options.plan != "self" or not iv:
        return ""
    bounds = param_bounds(a.fit, "phi")
    width = float(iv[1] - iv[0])
    at_box = bool(bounds is not None and (iv[0] <= bounds[0] + 1e-6 or iv[1] >= bounds[1] - 1e-6))
    text = (
        f"<p><b>Realised on these runs:</b> φ's {round(100 * a.fit.ci_level)}% bootstrap interval "
        f"{T.interval(iv, bounds=bounds)}, width {T.num(width, 3)}"
        + (" (it reaches the search box)" if at_box else "")
        + ".</p>"
    )
    from ..plan.design import phi_on_box  # scipy.stats stays out of the report's imports

    s = a.plan.simulation
    if not a.plan.width_is_precision and phi_on_box(a.plan.law):
        text += (
            f"<p>No width was predicted: the law's φ = {T.num(a.plan.law['phi'], 3)} lies on the end of "
            "its search box, so the simulated tables' intervals are cut by the box and their widths "
            "are not a precision of φ.</p>"
        )
    elif not a.plan.width_is_precision:
        text += "".join(
            f"<p>No width was predicted: {T.esc(reason)}</p>" for reason in a.plan.width_declined_because
        )
    elif s is not None and math.isfinite(s.width_q10):
        inside = s.width_q10 <= width <= s.width_q90
        text += (
            f"<p>The realised width is {'inside' if inside else 'outside'} the predicted 10–90% range "
            f"({T.num(s.width_q10, 3)}–{T.num(s.width_q90, 3)}). "
            + (
                "The simulated tables carry this table's (budget, r) cell-mean residuals: the law's "
                "misfit here, not only its noise.</p>"
                if s.misfit
                else "The prediction assumes the law fitted here holds exactly, with noise of the "
                "residuals' size (<code>--no-plan-misfit</code>): misfit of the law and the fit's own "
                "uncertainty (<code>phifit plan --law-uncertainty</code>) widen real intervals "
                "beyond it.</p>"
            )
        )
    return text


def section_plan(a: Analysis, fig: Fig) -> str:
    plan = a.plan
    if plan is None:
        return T.missing("No plan: run <code>phifit report RUNS.csv --plan</code> to add one.")
    d = plan.design
    html = (
        f"<p>Design planned: {T.esc(d['line'])}. Law: {T.esc(plan.law_source)}. Noise: log-loss sd "
        f"{T.num(plan.noise.per_run, 3)} per run"
        + (f" + {T.num(plan.noise.cell, 3)} shared per (budget, r) cell" if plan.noise.cell else "")
        + (f" ({T.esc(plan.noise.note)})" if plan.noise.note else "")
        + ".</p>"
    )
    html += T.table(["predicted for φ", "asymptotic", "simulation"], _prediction_rows(plan))
    s = plan.simulation
    if s is not None:
        html += (
            f"<p>Simulation: {s.n_tables} tables, each fitted, cell-bootstrapped ({s.n_boot} replicates) "
            f"and wild-tested ({s.n_wild} replicates) as this report does; seed {s.seed}.</p>"
        )
        html += fig(
            "plan",
            "Predicted widths of phi's interval and powers",
            "Left: the widths of φ's 95% interval over the simulated tables, with the asymptotic "
            "width; right: the power of each test, asymptotic and simulated.",
        )
    elif not plan.asymptotic.trusted:
        html += "<p>The asymptotic prediction cannot be trusted here:</p>" + T.bullet_list(
            list(plan.asymptotic.reasons), "notes"
        )
        html += (
            "<p>Add simulated tables (<code>--plan-tables 100</code>) for a prediction that "
            "does not rely on the linearisation.</p>"
        )
    html += _realised(a)
    curves = plan.bracketing
    if curves:
        off: dict[str, list[str]] = {}
        for c in curves:
            if c["status"] != "bracketed":
                off.setdefault(c["status"], []).append(f"{c['budget']:.3g}/r{c['r']}")
        parts = [f"{len(v)} with their {k} ({', '.join(v)})" for k, v in off.items()]
        html += (
            f"<p>isoFLOP curves: {len(curves) - sum(map(len, off.values()))} of {len(curves)} (budget, r) "
            "curves bracket the optimum the law predicts for them"
            + ("; " + "; ".join(T.esc(p) for p in parts) if parts else "")
            + ".</p>"
        )
    if plan.reasons:
        html += "<p><b>Why the interval is wide:</b></p>" + T.bullet_list(list(plan.reasons), "notes")
    html += caution_list(plan.warnings)
    return html
