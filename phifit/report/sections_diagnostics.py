"""Sections of the report page about the diagnostics: residuals; influence, identifiability
and consistency of phi.

Layout only: every number comes from :attr:`phifit.report.analysis.Analysis.diagnostics`.
:func:`profile_band` chooses the interval drawn on the phi-profile figure and names it for
what it is: the fit's percentile bootstrap interval when there is one, else the profile
interval (which assumes independent runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from . import html as T
from .analysis import Analysis
from .format import Fig, budget_label, caution_list, pct


def profile_band(a: Analysis) -> tuple[Sequence[float] | None, str]:
    """(interval, label) of phi for the profile figure and its caption."""
    fit, ident = a.fit, a.diagnostics.identifiability
    boot = (fit.ci or {}).get("phi") if fit.method != "bayes" else None
    if boot is not None and None not in boot:
        return boot, f"{pct(fit.ci_level)} percentile bootstrap interval"
    if ident.profile_interval:
        return ident.profile_interval, ident.profile_interval_label
    return None, ""


def influence_title(a: Analysis) -> str:
    """The influence section's heading: a non-looped table has only the identifiability part
    (influence and consistency are of phi)."""
    return "Identifiability" if a.non_looped else "Influence, identifiability and consistency"


def section_residuals(a: Analysis, fig: Fig) -> str:
    res = a.diagnostics.residuals
    caption = (
        "Residuals (actual − predicted, nats) vs fitted loss, unique parameters and tokens, "
        "by budget, and the normal QQ plot of the log residuals."
        if a.non_looped
        else "Residuals (actual − predicted, nats) vs fitted loss, effective size and tokens, "
        "by r and by budget, and the normal QQ plot of the log residuals."
    )
    html = fig("residuals", "residual panels", caption)
    html += _pooled_table(res) if a.non_looped else _per_r_table(res)
    html += _per_budget_table(res)
    html += "<h3>Residual tests (log residuals)</h3>"
    html += _tests_table(res, non_looped=a.non_looped)
    html += caution_list(res.flags, "warnings")
    return html


def _row(label: str, g) -> list[str]:
    """A residual-summary row: label, n, mean, max |resid|, RMSE, t."""
    return [
        label,
        str(g.n),
        T.fixed(g.mean, 4, signed=True),
        T.fixed(g.max_abs, 4),
        T.fixed(g.rmse, 4),
        T.fixed(g.t, 1),
    ]


def _per_r_table(res) -> str:
    """The per-r residual table (the study's Table 7) and its flag rule."""
    html = "<h3>Per r (the study's Table 7)</h3>"
    html += T.table(
        ["", "n", "mean", "max |resid|", "RMSE", "t = mean / SE"],
        [_row(f"r = {g.group}", g) for g in res.by_r] + [_row("pooled", res.pooled)],
        flags=[g.flagged for g in res.by_r] + [False],
    )
    rule = res.offset_rule
    return html + (
        f"<p>Flag rule: r is systematically off when |mean| &gt; {rule['k']:g} SE and "
        f"|mean| &gt; max({rule['floor']:g} nats, {rule['rel_floor']:g} × pooled RMSE) = "
        f"{rule['threshold']:.4f} nats.</p>"
    )


def _pooled_table(res) -> str:
    """The residual summary over all runs (a non-looped table's one r, so no per-r rows)."""
    return "<h3>All runs</h3>" + T.table(
        ["", "n", "mean", "max |resid|", "RMSE", "t = mean / SE"], [_row("all runs", res.pooled)]
    )


def _per_budget_table(res) -> str:
    """The per-budget residual table ('' without budgets)."""
    if not res.by_budget:
        return ""
    return "<h3>Per budget</h3>" + T.table(
        ["C", "n", "mean", "max |resid|", "RMSE"],
        [_row(budget_label(g.group), g)[:5] for g in res.by_budget],
    )


def _tests_table(res, *, non_looped: bool) -> str:
    """The residual tests; on a non-looped table the size regressor log N_eff is log N."""
    return T.table(
        ["test", "against", "statistic", "p-value", "result", "note"],
        [
            [
                T.esc(t.name),
                T.esc("log_n" if non_looped and t.against == "log_n_eff" else t.against),
                T.num(t.statistic, 4),
                T.num(t.pvalue, 3),
                '<span class="ok">pass</span>' if t.passed else '<span class="bad">reject</span>',
                T.esc(t.note),
            ]
            for t in res.tests
        ],
        left=2,
        left_last=True,
    )


def section_influence(a: Analysis, fig: Fig) -> str:
    d = a.diagnostics
    html = (
        "<p>Influence and consistency are measured on φ, which does not enter a non-looped "
        "table's law; the identifiability of its parameters follows.</p>"
        if a.non_looped
        else ""
    )
    if d.influence is not None:
        infl = d.influence
        html += fig(
            "influence",
            "leave-one-out change in phi",
            "Change in φ when one run (left) or one (budget, r) cell (right) is left "
            "out; refits warm-started from the full-data optimum.",
        )
        html += "<h3>Runs that move φ most</h3>"
        html += T.table(
            ["run", "r", "φ without it", "Δφ"],
            [
                [T.esc(x["run_id"]), str(x["r"]), T.fixed(x["phi"]), T.fixed(x["delta_phi"], 4, signed=True)]
                for x in infl.top
            ],
            left=1,
        )
        if infl.cells:
            worst = sorted(
                (c for c in infl.cells if _finite(c["delta_phi"])), key=lambda c: -abs(c["delta_phi"])
            )[:5]
            html += "<h3>Cells that move φ most</h3>"
            html += T.table(
                ["cell", "runs", "φ without it", "Δφ"],
                [
                    [
                        T.esc(c["cell"]),
                        str(c["n"]),
                        T.fixed(c["phi"]),
                        T.fixed(c["delta_phi"], 4, signed=True),
                    ]
                    for c in worst
                ],
            )
        html += T.bullet_list([str(n) for n in infl.notes], "notes")
    ident = d.identifiability
    interval, label = profile_band(a)
    deviance = (ident.profile or {}).get("deviance_name", "n log(SSR(φ)/SSR_min)")
    band = f"; band: {T.esc(label)}" if interval is not None else ""
    html += fig(
        "phi_profile",
        "profile of the objective along phi and subset refits",
        f"Left: profile deviance {T.esc(deviance)} with the other parameters refitted at each φ; "
        f"the restricted laws φ = 0 and φ = 1 lie on this curve{band}. "
        "Right: φ refitted on budget halves and on pairs of r.",
    )
    if d.consistency is not None:
        html += "<h3>Consistency of φ</h3>"
        html += T.table(
            ["subset", "runs", "φ", "R²"],
            [
                [T.esc(x["label"]), str(x["n"]), T.fixed(x["phi"]), T.fixed(x["r2"], 4)]
                for x in d.consistency.halves + d.consistency.pairs
            ],
            left=1,
        )
        html += (
            "<p>The study reports φ = 0.44 on its lower budgets (C ≤ 2.15e18) and 0.49 on "
            "the upper ones (C ≥ 4.64e18).</p>"
        )
        html += T.bullet_list([str(n) for n in d.consistency.notes], "notes")
    html += "<h3>Identifiability at the optimum</h3>"
    names = [_coordinate(n) for n in ident.names]
    html += T.table(
        [""] + names, [[names[i]] + [T.fixed(c, 3) for c in row] for i, row in enumerate(ident.correlation)]
    )
    html += f"<p>Condition number of the unit-diagonal information matrix: {ident.condition_number:.3g}."
    if ident.profile_interval:
        lo, hi = ident.profile_interval
        iv = T.interval_text(lo, hi, T.param_bounds(a.fit, "phi"))
        html += f" φ {T.esc(ident.profile_interval_label)}, approx. 95%: {T.esc(iv)}."
    html += "</p>"
    html += caution_list(ident.warnings, "warnings")
    return html


def _coordinate(name: str) -> str:
    return {"a": "log A", "b": "log B", "e": "log E", "phi": "φ"}.get(name, name)


def _finite(x: Any) -> bool:
    return x is not None and math.isfinite(float(x))


def section_multipliers(a: Analysis, fig: Fig) -> str:
    """The free multipliers m_r against r^phi: the figure, the table and the lack-of-fit test."""
    mult = a.multipliers
    if mult is None:
        return T.missing("No free-multiplier check: phi is not identifiable from these runs.")
    if not mult.testable:
        return T.missing(f"r^φ cannot be tested against free multipliers: {mult.reason}.")
    html = fig(
        "multipliers",
        "effective multiplier per r against r^phi",
        "One free multiplier per recurrence count, N_eff = N_once + m_r N_rec (m_1 = 1; E, A, α, B, "
        "β shared), against the law's r^φ (log-log axes: r^φ is a straight line of slope φ). Bars: "
        f"{pct(mult.level)} percentile intervals of m_r from the (budget, r) cell bootstrap"
        + ("; band: r^φ over the law's bootstrap draws of φ." if a.bootstrap is not None else "."),
    )
    rows = [
        [
            f"r = {row['r']:g}",
            T.fixed(row["m"], 3),
            T.interval(row["m_ci"], lambda v: T.fixed(v, 3)) or "withheld",
            T.fixed(row["r_phi"], 3),
            T.fixed(row["phi_r"], 3),
            T.interval(row["phi_r_ci"], lambda v: T.fixed(v, 3)) or "withheld",
        ]
        for row in mult.rows()
    ]
    html += T.table(["", "m_r", f"{pct(mult.level)} interval", "r^φ", "φ_r", "interval of φ_r"], rows)
    test = (
        f"Lack of fit of r^φ: T = {mult.statistic:.3g} (drop of the Huber objective from one φ to one "
        f"φ per r), restricted wild cluster bootstrap p = {mult.p_value:.2g} ({_replicates(mult.wild)}, "
        f"signs per {T.esc(mult.wild.block)} cell)."
        if mult.wild is not None
        else "Lack of fit of r^φ: not tested (wild bootstrap off)."
    )
    html += (
        f"<p>{test} {T.esc(mult.verdict)}. Cell bootstrap: {mult.n_boot} replicates, "
        f"{mult.n_failed} failed.</p>"
    )
    html += caution_list(mult.warnings) if mult.warnings else ""
    return html


def drift_reading(drift: Any) -> str:
    """One plain sentence reading phi_1 and its test (the drift section and its tests)."""
    if drift.on_bound:
        return (
            f"Undecided: φ_1 sits on the edge of its box ({drift.phi_1:+.2g} per e-fold of compute), so "
            "these runs do not locate a drift of φ."
        )
    if drift.wild is None:
        return "Not tested (wild bootstrap off)."
    p = f"p = {drift.p_value:.2g}"
    if not drift.rejected:
        return f"No evidence that φ changes with compute ({p})."
    lo, hi = drift.budgets[0], drift.budgets[-1]
    way = "grows" if drift.phi_1 > 0 else "falls"
    borderline = (
        " Borderline: the cell-bootstrap interval of φ_1 still includes 0."
        if drift.interval_holds_zero
        else ""
    )
    return (
        f"φ {way} with compute ({p}): by about {abs(drift.phi_1):.2g} per e-fold of C, from "
        f"{drift.phi_at(lo):.2f} at C = {budget_label(lo)} to {drift.phi_at(hi):.2f} at C = "
        f"{budget_label(hi)}; the law's single φ is then an average over these budgets.{borderline}"
    )


def section_drift(a: Analysis) -> str:
    """Does phi drift with scale?  phi_1 of phi(C) = phi_0 + phi_1 log(C / C_ref) with its interval
    and the wild test, one sentence reading it, and phi on the budget halves (the diagnostics')."""
    drift = a.drift
    if drift is None:
        return T.missing("No drift check: φ is not identifiable from these runs.")
    if not drift.testable:
        return T.missing(f"A drift of φ with compute cannot be tested: {drift.reason}.")
    html = (
        "<p>φ with a compute-dependent term, φ(C) = φ_0 + φ_1 log(C / C_ref), C the run's budget and "
        f"C_ref = {budget_label(drift.c_ref)} FLOPs the geometric mean of the {len(drift.budgets)} budgets "
        f"(E, A, α, B, β shared); φ_1 is the change of φ per e-fold of compute, its box "
        f"[{drift.phi_1_bounds[0]:g}, {drift.phi_1_bounds[1]:g}].</p>"
    )
    test = "not tested" if drift.wild is None else f"{drift.p_value:.2g}"
    rows = [
        [
            "φ_1 (per e-fold of C)",
            T.fixed(drift.phi_1, 3, signed=True),
            T.interval(drift.phi_1_ci, lambda v: T.fixed(v, 3, signed=True), bounds=drift.phi_1_bounds)
            or "withheld",
            test,
        ],
        [
            "φ_0 (φ at C_ref)",
            T.fixed(drift.phi_0, 3),
            T.interval(drift.phi_0_ci, lambda v: T.fixed(v, 3)) or "withheld",
            "",
        ],
    ]
    html += T.table(["", "estimate", f"{pct(drift.level)} interval", "wild p (φ_1 = 0)"], rows, left=1)
    html += f"<p><strong>{T.esc(drift_reading(drift))}</strong></p>"
    cons = a.diagnostics.consistency
    halves = [] if cons is None else [x for x in cons.halves if x.get("phi") is not None]
    detail = ", ".join(
        f"{row['phi']:.3f}"
        + (f" [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}]" if row.get("ci") else "")
        + f" at {budget_label(row['budget'])}"
        for row in drift.phi_by_budget
    )
    worth = _worth_by_budget(drift)
    with_ci = f" with {pct(drift.level)} intervals" if drift.phi_budget_ci else ""
    halves_text = "; ".join(f"{T.esc(x['label'])}: φ = {x['phi']:.3f}" for x in halves)
    html += (
        f"<p>φ(C) of the fitted line{with_ci}: "
        f"{detail} (one φ for every budget: {drift.phi:.3f}). {T.esc(worth)}"
        + (f"Separate refits of the budget halves: {halves_text}. " if halves else "")
        + f"Interval: (budget, r) cell bootstrap, {drift.n_boot} replicates, {drift.n_failed} failed"
        + (
            f"; test: restricted wild cluster bootstrap, {_replicates(drift.wild)}, "
            f"signs per {T.esc(drift.wild.block)} cell."
            if drift.wild is not None
            else "."
        )
        + "</p>"
    )
    html += caution_list(drift.warnings) if drift.warnings else ""
    return html


def _replicates(wild) -> str:
    """The replicates a wild test used, as it ran (`WildTest.replicates_text`)."""
    if wild.stopped_early:
        return T.esc(wild.replicates_text())
    return f"{wild.n_ok} of {wild.n_boot} replicates"


def _worth_by_budget(drift) -> str:
    """Where a recurrence is worth more than a unique block along the drift line: m_r = r^phi(C)
    exceeds 1 for every r > 1 exactly where phi(C) > 0; read from the per-budget intervals."""
    rows = drift.phi_by_budget
    if not rows or not all(row.get("ci") for row in rows):
        return ""
    above = [row for row in rows if row["ci"][0] > 0]
    below = [row for row in rows if row["ci"][1] < 0]
    if len(above) == len(rows):
        text = (
            "At every budget of the table φ(C) > 0: a recurrence is worth more than a unique block "
            "(m_r = r^φ(C) > 1)"
        )
    elif len(below) == len(rows):
        text = (
            "At every budget of the table φ(C) < 0: a recurrence is worth less than a unique block (m_r < 1)"
        )
    else:
        text = "The intervals of φ(C) do not keep to one side of 0 at every budget"
    if drift.phi_1 and drift.rejected:
        cross = drift.c_ref * math.exp(-drift.phi_0 / drift.phi_1)
        text += f"; the fitted line crosses φ = 0 (m_r = 1) at C ≈ {cross:.2g} FLOPs"
    elif drift.testable:
        text += "; with no drift shown, the line gives no crossing of m_r = 1 to trust"
    return text + ". "
