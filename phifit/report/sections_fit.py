"""Sections of the report page about the fit: data and cautions, the fitted law, the
bootstrap, the restricted fits, the Bayesian posterior, the recipes and the file list
(the derived quantities are in :mod:`phifit.report.sections_derived`, the diagnostics in
:mod:`phifit.report.sections_diagnostics`), and what the headline reads from the results
(the verdicts of the restricted fits, the top warnings, the lines of a non-looped law).

The formatting helpers every section shares are in :mod:`phifit.report.format`.

Each ``section_*`` takes an :class:`~phifit.report.analysis.Analysis` (and ``fig``, which embeds a
drawn figure by name) and returns HTML.  Layout only: every number comes from the analysis.
Interval labels use the level the interval was computed at (``FitResult.ci_level``,
``RecipeComparison.level``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..bootstrap.result import MARK_FAILED_SHARE, MAX_FAILED_SHARE
from ..fitters.likelihood import SIGNIFICANCE, p_text
from ..intervals import censored_ends
from ..law import PARAM_NAMES
from ..result import FitResult
from ..study import REFERENCE_PARAMS, STUDY_PHI, STUDY_PHI_CI, STUDY_R2
from . import html as T
from .analysis import Analysis
from .format import Fig, budget_label, caution_list, pct
from .sections_parts import headline_item

# ----------------------------------------------------------- rows read from other results
#: The per-fit statistics a comparison row carries.
ROW_KEYS = ("r2", "rmse", "objective", "aic", "bic", "lr_p_value", "cv_rmse", "rejected", "undecided")


def comparison_rows(comparison: Any) -> list[dict[str, Any]]:
    """[{label, r2, objective, params, ...}] from a Comparison's dict (free fit first)."""
    if comparison is None:
        return []
    fits = comparison.to_dict().get("fits", [])
    rows = []
    items = fits.items() if isinstance(fits, dict) else ((None, f) for f in fits)
    for key, f in items:
        label = (
            f.get("label")
            or key
            or ",".join(f"{k}={v:g}" for k, v in (f.get("fixed") or {}).items())
            or "free"
        )
        rows.append(
            {
                "label": str(label),
                **{k: f.get(k) for k in ROW_KEYS},
                "params": f.get("params", {}),
                "fixed": f.get("fixed", {}),
            }
        )
    return [r for r in rows if r["r2"] is not None]


def recipe_rows(recipes: Any) -> list[dict[str, Any]]:
    """One row per variant: Δφ, its intervals and p-value, the two φ, the runs."""
    if recipes is None:
        return []
    rows = []
    for variant, value in (getattr(recipes, "delta_phi", None) or {}).items():
        rows.append(
            {
                "variant": variant,
                "delta_phi": value.get("estimate"),
                "interval": value.get("ci"),
                "interval_bca": value.get("ci_bca"),
                "p_value": value.get("p_value"),
                "variant_phi": value.get("variant_phi"),
                "baseline_phi": value.get("baseline_phi"),
                "budgets": value.get("budgets"),
                "n_runs": value.get("n_runs_variant"),
            }
        )
    return [r for r in rows if r["delta_phi"] is not None]


def phi_interval_kind(a: Analysis) -> str:
    """What the fit's phi interval is: "95% percentile block bootstrap (200 replicates over 12
    'budget,r' blocks)"; empty when there is none."""
    fit = a.fit
    boot = fit.bootstrap or {}
    iv = (fit.ci or {}).get("phi")
    if not iv or None in iv:
        return ""
    if fit.method == "bayes":
        return f"{pct(fit.ci_level)} highest-density interval"
    return (
        f"{pct(fit.ci_level)} percentile block bootstrap ({boot.get('n', '?')} replicates over "
        f"{boot.get('n_blocks', '?')} '{boot.get('block', '?')}' blocks)"
    )


def restriction_verdicts(comparison: Any) -> list[tuple[str, str, str]]:
    """(restriction, verdict, evidence) for phi = 0 and phi = 1, read from the comparison's
    per-restriction statistics: its test (the wild cluster bootstrap when the comparison ran
    one, else the likelihood ratio) and the leave-one-budget-out RMSE against the free fit's.
    The verdict is "rejected", "not rejected", "undecided" (the comparison says why no test
    can be read, e.g. the free fit's phi on its bound; the evidence then leads with the
    reason) or "not tested"."""
    if comparison is None:
        return []
    stats = getattr(comparison, "stats", {}) or {}
    free = stats.get("free")
    out = []
    for label in ("phi=0", "phi=1"):
        st = stats.get(label)
        if st is None:
            continue
        wild = getattr(st, "wild", None)
        if wild is not None and getattr(wild, "p_value", None) is not None:
            used = f", {wild.replicates_text()}" if getattr(wild, "stopped_early", False) else ""
            evidence = [f"wild cluster bootstrap p = {p_text(wild.p_value)}{used}"]
        else:
            evidence = [f"likelihood-ratio p = {p_text(st.lr_p_value)}"]
        if st.cv_rmse is not None and free is not None and free.cv_rmse is not None:
            evidence.append(f"held-out-budget RMSE {st.cv_rmse:.4f} vs {free.cv_rmse:.4f} nats with φ free")
        undecided = getattr(st, "undecided", None)
        if undecided:
            verdict = "undecided"
            evidence = [undecided, *(f"{e}, not read as evidence" for e in evidence[:1])]
        else:
            verdict = "not tested" if st.rejected is None else ("rejected" if st.rejected else "not rejected")
            has_wild = wild is not None and getattr(wild, "p_value", None) is not None
            p = wild.p_value if has_wild else st.lr_p_value
            if st.rejected is False and p is not None and p < SIGNIFICANCE:
                # the verdict rule keeps a restriction that the test rejects but that predicts held-out
                # budgets better: say so first, so "not rejected" never sits beside a small p unexplained
                evidence = [
                    "in-sample evidence only: the test rejects at 5%, but the restricted law predicts "
                    "held-out budgets better",
                    *evidence,
                ]
        out.append((label.replace("phi", "φ ").replace("=", "= "), verdict, "; ".join(evidence)))
    return out


#: How the headline marks each verdict.
VERDICT_HTML = {
    "rejected": '<span class="bad">rejected</span>',
    "not rejected": '<span class="ok">not rejected</span>',
    "undecided": "<b>undecided</b>",
    "not tested": "not tested",
}


def top_warnings(a: Analysis, n: int = 4) -> list[str]:
    """The first warning of each (source, kind), up to ``n``, each saying how many alike follow."""
    groups: dict[tuple[str, str], list[str]] = {}
    for c in a.cautions_from(level="warning"):
        groups.setdefault((c.source, c.kind), []).append(c.message)
    out = []
    for msgs in list(groups.values())[:n]:
        more = len(msgs) - 1
        out.append(msgs[0] + (f" (and {more} more like it)" if more else ""))
    return out


def non_looped_lines(a: Analysis, *, html: bool) -> list[str]:
    """The headline of a non-looped table (:attr:`Analysis.allocation` set): what law was
    fitted, the exponents alpha, beta and E with their intervals, and the compute-optimal
    allocation N* ∝ C^a, D* ∝ C^b (a = beta / (alpha + beta), b = alpha / (alpha + beta))
    with its bootstrap interval.  Text lines, or HTML list items with ``html``."""
    fit, alloc = a.fit, a.allocation
    level = pct(fit.ci_level)

    def with_interval(label: str, value: float, iv, bounds=None) -> str:
        text = f"{label} = {T.fixed(value, 3)}"
        shown = T.interval(iv, lambda v: T.fixed(v, 3), bounds)
        return f"{text} {shown}" if shown and "n/a" not in shown else text

    params = ", ".join(
        with_interval(sym, fit.params[name], (fit.ci or {}).get(name), T.param_bounds(fit, name))
        for sym, name in (("α", "alpha"), ("β", "beta"), ("E", "E"))
    )
    what = f"{level} percentile bootstrap" if fit.ci else "no intervals: bootstrap off"
    split = (
        f"{with_interval('N* ∝ C^a, a', alloc.a, alloc.ci.get('a'))}; "
        f"{with_interval('D* ∝ C^b, b', alloc.b, alloc.ci.get('b'))}"
    )
    lines = [
        (
            "Non-looped table",
            "Chinchilla's law L = E + A N^−α + B D^−β (no looped runs, so φ does not enter)",
        ),
        ("Exponents", f"{params} ({what})"),
        ("Compute-optimal allocation", f"{split} (a = β/(α+β), b = α/(α+β), C = 6ND)"),
    ]
    if html:
        return [f"<b>{T.esc(k)}</b>: {T.esc(v)}" for k, v in lines]
    plain = {"α": "alpha", "β": "beta", "φ": "phi", "∝": "~", "−": "-"}
    out = []
    for k, v in lines:
        text = f"{k}: {v}"
        for u, ascii_ in plain.items():
            text = text.replace(u, ascii_)
        out.append(text)
    return out


def not_estimated(fit: FitResult) -> list[str]:
    """What the fit could not estimate and why, for the top of the headline: one line per
    ``d_term_unidentified`` caution (a single token count: B, beta and E not separated, and
    the frontier, allocation and predictions at another D withheld)."""
    out = []
    for c in fit.warnings:
        if c.kind == "d_term_unidentified":
            d = c.values.get("tokens")
            at = f" (D = {d:.4g})" if d is not None else ""
            out.append(
                f"B and beta, hence E on its own: every run has the same token count{at}, so the data "
                f"term B·D^-β is one constant; E is reported as E + B·D^-β at that D, and no "
                f"compute-optimal frontier, allocation or loss at another D is given"
            )
    return out


def block_label(a: Analysis, block: Any) -> str:
    """The bootstrap's block key as the page names it: on a non-looped table every run has
    r = 1, so a (budget, r) block is a budget."""
    text = str(block)
    return text.replace(",r", "") if a.non_looped else text


def exponent_quantities(a: Analysis) -> list[dict[str, Any]]:
    """What the bootstrap estimates of a non-looped table, in reading order: alpha and beta
    (those with a percentile interval) and the allocation exponent a = beta / (alpha + beta)
    (when the allocation has an interval).  Each {"name", "symbol", "label", "estimate",
    "ci", "bca"}; ``name`` is the parameter (or "a") the draws are read from."""
    fit, alloc = a.fit, a.allocation
    out = []
    for name, symbol in (("alpha", "α"), ("beta", "β")):
        if (fit.ci or {}).get(name) is not None:
            out.append(
                {
                    "name": name,
                    "symbol": symbol,
                    "label": f"{symbol} ({'parameter' if name == 'alpha' else 'data'} exponent)",
                    "estimate": fit.params[name],
                    "ci": fit.ci[name],
                    "bca": (fit.ci_bca or {}).get(name),
                }
            )
    if alloc is not None and alloc.ci.get("a") is not None:
        out.append(
            {
                "name": "a",
                "symbol": "a",
                "label": "a = β/(α+β) (N* ∝ C^a)",
                "estimate": alloc.a,
                "ci": alloc.ci["a"],
                "bca": None,
            }
        )
    return out


# ---------------------------------------------------------------------------- sections
def misfit_line(a: Analysis) -> str | None:
    """Plain text, when the lack-of-fit test rejects r^phi (p < 0.05): that r^phi does not
    describe the table's recurrences, with the m_r that show it; None otherwise."""
    mult = a.multipliers
    if mult is None or not mult.testable or not mult.rejected:
        return None
    shown = "; ".join(
        f"m_{row['r']:g} = {row['m']:.2f}"
        + ("" if None in row["m_ci"] else f" [{row['m_ci'][0]:.2f}, {row['m_ci'][1]:.2f}]")
        + f" vs r^phi = {row['r_phi']:.2f}"
        for row in mult.rows()
    )
    return (
        f"r^phi does not describe this table's recurrences (lack-of-fit wild cluster bootstrap "
        f"p = {mult.p_value:.2g}): one free multiplier per r gives {shown}; phi = {mult.phi:.3f} "
        "summarises a law that does not hold here"
    )


def phi_undetermined(a: Analysis) -> str | None:
    """Plain text, when nothing about phi is determined: phi's test-inverted set (the phi_0 the
    wild cluster test keeps) or its percentile interval spans the whole search box.  The headline
    then says so first, and the best-fitting phi that follows is no estimate.  None otherwise."""
    fit = a.fit
    if fit.phi is None or "phi" in fit.fixed:
        return None
    box = T.param_bounds(fit, "phi")
    span = f"[{box[0]:g}, {box[1]:g}]" if box else "its search box"
    inv = getattr(a, "phi_inverted", None)
    iv = (fit.ci or {}).get("phi")
    if inv is not None and len(inv.pieces) == 1 and all(inv.censored[0]):
        why = (
            f"the wild cluster test keeps every phi_0 in the search box {span} (the "
            f"{pct(inv.level)} test-inverted set is the whole box)"
        )
    elif iv and None not in iv and box and all(censored_ends(iv[0], iv[1], *box)):
        why = f"its {pct(fit.ci_level)} percentile interval spans the whole search box {span}"
    else:
        return None
    return f"phi is not determined by this table: {why}, so the best-fitting phi below is not an estimate"


def interval_disagreement(a: Analysis) -> str | None:
    """One line when phi's percentile interval and its test-inverted set disagree (the set is
    a union, or the percentile interval holds phi = 0 while the test rejects it): what each
    answers, with the share of resampled tables outside the set."""
    inv, fit = getattr(a, "phi_inverted", None), a.fit
    iv = (fit.ci or {}).get("phi")
    if inv is None or not iv or None in iv:
        return None
    zero_inside = iv[0] <= 0.0 <= iv[1] and not inv.contains(0.0)
    if len(inv.pieces) < 2 and not zero_inside:
        return None
    share = ""
    if a.bootstrap is not None:
        from ..bootstrap.inverted import outside_share

        draws = a.bootstrap.params["phi"][~a.bootstrap.failed]
        main = next(((lo, hi) for lo, hi in inv.pieces if lo <= fit.phi <= hi), None)
        below = float(np.mean(draws < main[0])) if main is not None and len(draws) else float("nan")
        share = (
            f" {outside_share(draws, inv):.0%} of resampled tables put φ outside the test-inverted set"
            + (f" ({below:.0%} below {main[0]:.2f}, a second basin)" if below > 0 else "")
            + ";"
        )
    p0 = inv.p_value(0.0)
    zero = f" φ = 0 itself is {'rejected' if not inv.contains(0.0) else 'kept'}" + (
        f" (wild p = {p0:.3g})" if p0 is not None else ""
    )
    return (
        "The percentile interval says where resampled tables put φ; the test-inverted set says which φ₀ "
        f"the wild cluster test keeps:{share}{zero}."
    )


def section_headline(a: Analysis) -> str:
    """The answer first: phi with its interval (and what kind), the verdicts on phi = 0 and
    phi = 1, Δφ per recipe, R² and RMSE, and the top warnings."""
    fit = a.fit
    items = [f"<b>Not estimated</b>: {T.esc(text)}" for text in not_estimated(fit)]
    misfit = misfit_line(a)
    if misfit is not None:  # first: phi below summarises a law that does not hold
        items.insert(0, f'<span class="bad"><b>r^φ does not hold</b></span>: {T.esc(misfit)}')
    undetermined = phi_undetermined(a)
    if undetermined is not None:  # before all: nothing about phi is determined
        what = undetermined.removeprefix("phi is not determined ").replace("phi", "φ")
        items.insert(0, f'<span class="bad"><b>φ is not determined</b></span> {T.esc(what)}')
    if a.allocation is not None:
        items += non_looped_lines(a, html=True)
    elif fit.phi is None:
        items.append("<b>φ is not identified</b> by these runs (it needs looped runs at two or more r).")
    else:
        iv = (fit.ci or {}).get("phi")
        text = (
            f"best-fitting φ = {fit.phi:.3f} (not an estimate: see above)"
            if undetermined is not None
            else f'<span class="phi">φ = {fit.phi:.3f}</span>'
        )
        boot = fit.bootstrap or {}
        n_boot, n_failed = int(boot.get("n") or 0), int(boot.get("n_failed") or 0)
        if iv and None in iv:
            text += (
                f" (<b>no interval</b>: {n_failed} of {n_boot} bootstrap replicates failed, more "
                f"than {MAX_FAILED_SHARE:.0%})"
            )
        elif iv:
            bounds = T.param_bounds(fit, "phi")
            text += (
                f", {T.esc(phi_interval_kind(a))}: <b>{T.interval(iv, lambda v: T.fixed(v, 3), bounds)}</b>"
            )
            bca = (fit.ci_bca or {}).get("phi")
            if bca and None not in bca:
                text += f" (BCa {T.interval(bca, lambda v: T.fixed(v, 3), bounds)})"
            if n_boot and n_failed / n_boot >= MARK_FAILED_SHARE:
                text += f" <b>approximate</b>: {n_failed} of {n_boot} bootstrap replicates failed"
            inv = getattr(a, "phi_inverted", None)
            if inv is not None:
                kept = "the φ₀ the wild cluster test keeps at 5%"
                text += f"; test-inverted set ({kept}): <b>{T.esc(inv.interval_text())}</b>"
        elif "phi" in fit.at_bounds:
            text += (
                " <b>on the bound of its search box</b>: the table does not locate φ, so no bootstrap "
                "interval was run (the profile under Influence bounds it from one side)"
            )
        else:
            text += " (no interval: bootstrap off)"
        items.append(text)
        disagree = interval_disagreement(a)
        if disagree:
            items.append(T.esc(disagree))
    verdicts = restriction_verdicts(a.comparison)
    for label, verdict, evidence in verdicts:
        word = VERDICT_HTML[verdict]
        items.append(f"<b>{T.esc(label)}</b>: {word} ({T.esc(evidence)})")
    if not verdicts and fit.phi is not None:
        items.append("φ = 0 and φ = 1: not tested (no restricted-fit comparison).")
    part = headline_item(a)  # removing one part of the table changes φ's reading: named
    if part is not None:
        items.append(part)
    rows = recipe_rows(a.recipes)
    if rows:
        parts = [
            f"{T.esc(r['variant'])} {T.fixed(r['delta_phi'], 3, signed=True)} "
            f"{T.interval(r['interval'], lambda v: T.fixed(v, 3, signed=True))}"
            for r in rows
        ]
        items.append(
            f"<b>Δφ</b> against '{T.esc(a.recipes.baseline)}' ({pct(a.recipes.level)} bootstrap): "
            + "; ".join(parts)
        )
    items.append(
        f"R² {T.fixed(fit.r2, 4)}, RMSE {T.fixed(fit.rmse, 4)} nats ({fit.n_runs} runs"
        + (f" of '{T.esc(a.recipes.baseline)}'" if a.recipes is not None else "")
        + ")"
    )
    html = '<div class="headline" id="headline"><ul>' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
    warns = top_warnings(a)
    n_warn = len(a.cautions_from(level="warning"))
    if warns:
        html += f'<p class="hw">Warnings ({n_warn}; all under <a href="#data">Data and warnings</a>):</p>'
        html += T.bullet_list(warns, "warnings")
    else:
        html += '<p class="ok">No warnings.</p>'
    return html + "</div>"


def section_data(a: Analysis) -> str:
    d = a.diagnostics.data
    rows = []
    counts = a.recipe_counts()
    if counts:
        baseline = a.recipes.baseline if a.recipes is not None else "baseline"
        rows.append(
            [
                "table",
                T.esc(
                    f"{len(a.table)} runs in {len(counts)} recipes ("
                    + ", ".join(f"{k}: {v}" for k, v in counts.items())
                    + f"); this section and the ones up to the Δφ section analyse the {baseline} recipe"
                ),
            ]
        )
    rows.append(["runs", str(d["n_runs"])])
    if not a.non_looped:  # one r: the per-r count is the run count, and a cell is a budget
        rows.append(["runs per r", T.esc(", ".join(f"r={k}: {v}" for k, v in d["runs_per_r"].items()))])
    if "runs_per_budget" in d:
        per_budget = ", ".join(f"{budget_label(k)}: {v}" for k, v in d["runs_per_budget"].items())
        rows.append(["runs per budget", T.esc(per_budget)])
        if not a.non_looped:
            rows.append(["(budget, r) cells", str(d["n_cells"])])
    if "runs_per_variant" in d:
        rows.append(
            ["runs per variant", T.esc(", ".join(f"{k}: {v}" for k, v in d["runs_per_variant"].items()))]
        )
    rows += [
        ["unique parameters N", f"{T.count(d['n_unique_range'][0])} – {T.count(d['n_unique_range'][1])}"],
        ["training tokens D", f"{T.count(d['tokens_range'][0])} – {T.count(d['tokens_range'][1])}"],
        ["loss (nats/token)", f"{T.fixed(d['loss_range'][0])} – {T.fixed(d['loss_range'][1])}"],
        ["training compute C", T.esc(a.runs.compute_source)],
        ["columns", T.esc(", ".join(d["columns"]))],
    ]
    html = T.table(["", "value"], rows, left=2)
    warns = a.cautions_from(level="warning")
    html += "<h3>Warnings</h3>" + (
        caution_list(warns, "warnings", with_source=True) if warns else '<p class="ok">No warnings.</p>'
    )
    notes = a.cautions_from(level="note")
    if notes:
        html += "<h3>Notes</h3>" + caution_list(notes, with_source=True)
    return html


def section_law(a: Analysis) -> str:
    fit = a.fit
    level = pct(fit.ci_level)
    se = a.diagnostics.identifiability.stderr
    boot = fit.bootstrap or {}
    loss = (
        f"Summed Huber (δ = {fit.delta:g}) on log-loss residuals"
        if fit.loss == "huber"
        else T.esc(fit.objective_name)
    )
    intervals = (
        f"Intervals: {level} block bootstrap over {T.esc(boot.get('n_blocks', '?'))} "
        f"'{T.esc(block_label(a, boot.get('block', '?')))}' blocks ({T.esc(boot.get('n', 0))} replicates)"
        if boot
        else "No intervals (no bootstrap)"
    )
    chinchilla = a.allocation is not None  # a non-looped table: the study's numbers are no reference
    formula = (
        '<p class="formula">L = E + A · N<sup>−α</sup> + B · D<sup>−β</sup></p>'
        "<p>A non-looped table: Chinchilla's law (the looped law with r = 1; φ does not enter).</p>"
        if chinchilla
        else '<p class="formula">L = E + A · (N<sub>once</sub> + r<sup>φ</sup> N<sub>rec</sub>)'
        "<sup>−α</sup> + B · D<sup>−β</sup></p>"
    )
    html = (
        formula + f"<p>{loss}, best of {T.esc(fit.extras.get('n_starts', '?'))} random starts "
        f"({T.esc(fit.extras.get('n_starts_at_best', '?'))} of the refined starts reached the best "
        f"objective). {intervals}; SE: Gauss-Newton approximation at the optimum.</p>"
    )
    rows = []
    for name in PARAM_NAMES:
        v = fit.params.get(name)
        if chinchilla and name == "phi":
            continue
        row = [
            T.esc("φ" if name == "phi" else name),
            "n/a" if v is None else T.num(v, 5) + (" (fixed)" if name in fit.fixed else ""),
            T.interval((fit.ci or {}).get(name), bounds=T.param_bounds(fit, name)),
            T.interval((fit.ci_bca or {}).get(name), bounds=T.param_bounds(fit, name)),
            T.num(se.get(name), 3),
        ]
        rows.append(row if chinchilla else row + [T.num(REFERENCE_PARAMS[name], 5)])
    header = ["parameter", "estimate", f"{level} percentile", f"{level} BCa", "approx. SE"]
    html += T.table(header if chinchilla else header + ["reference study"], rows)
    if chinchilla:
        alloc = a.allocation
        html += "<h3>Compute-optimal allocation</h3>"
        html += T.table(
            ["", "exponent", f"{pct(alloc.level)} percentile bootstrap"],
            [
                ["N* ∝ C<sup>a</sup>, a = β/(α+β)", T.fixed(alloc.a, 4), T.interval(alloc.ci.get("a"))],
                ["D* ∝ C<sup>b</sup>, b = α/(α+β)", T.fixed(alloc.b, 4), T.interval(alloc.ci.get("b"))],
            ],
        )
        html += (
            "<p>Minimising the law at fixed compute C = 6ND; the intervals are read from every "
            "bootstrap replicate's (α, β).</p>"
        )
    html += T.table(
        ["", "value"],
        [
            ["runs", str(fit.n_runs)],
            ["R² (raw nats)", T.fixed(fit.r2, 5)],
            ["RMSE (nats)", T.fixed(fit.rmse, 5)],
            ["max |residual| (nats)", T.fixed(a.diagnostics.residuals.pooled.max_abs, 4)],
            ["objective", T.esc(f"{fit.objective:.6g} ({fit.objective_name})")],
            ["converged", str(fit.converged)],
        ],
        left=2,
    )
    if chinchilla:
        return html
    html += (
        f"<p>The reference column is the study's joint fit (φ = {STUDY_PHI}, 95% CI "
        f"[{STUDY_PHI_CI[0]}, {STUDY_PHI_CI[1]}], R² {STUDY_R2['free']}), for orientation only: φ from "
        "different baselines is not comparable.</p>"
    )
    return html


def bootstrap_title(a: Analysis) -> str:
    """The bootstrap section's heading: of phi, or of a non-looped table's exponents."""
    return "Bootstrap distribution of the exponents" if a.non_looped else "Bootstrap distribution of φ"


def section_bootstrap_exponents(a: Analysis, fig: Fig) -> str:
    """A non-looped table's bootstrap: the distributions of alpha, beta and the allocation
    exponent a = beta / (alpha + beta), with their intervals (phi does not enter its law)."""
    b, fit = a.bootstrap, a.fit
    if b is None:
        why = "turned off." if not a.options.n_boot else "a parameter is held fixed."
        return T.missing(f"No bootstrap: {why}")
    quantities = exponent_quantities(a)
    if not quantities:
        return T.missing(
            f"The {b.n_boot}-replicate block bootstrap gave no interval for the exponents."
        ) + caution_list(a.cautions_from("bootstrap"))
    level = pct(fit.ci_level)
    html = fig(
        "bootstrap_exponents",
        "bootstrap distributions of the exponents",
        f"α and β refitted on {b.n_boot - b.n_failed} block-bootstrap resamples of the {b.n_blocks} "
        f"'{T.esc(block_label(a, b.block))}' blocks (a = β/(α+β) from each resample's pair); "
        f"dashed: {level} percentile interval.",
    )
    rows = [_exponent_row(fit, q) for q in quantities]
    html += T.table(["", "estimate", f"{level} percentile", f"{level} BCa"], rows, left=1)
    html += (
        f"<p>{b.n_boot} replicates ({b.n_failed} failed). D* ∝ C<sup>b</sup> with b = 1 − a; "
        "the intervals of E, A and B are in the fitted-law table.</p>"
    )
    html += caution_list(a.cautions_from("bootstrap"))
    return html


def _exponent_row(fit: FitResult, q: dict[str, Any]) -> list[str]:
    """One row of the exponents' bootstrap table: label, estimate, percentile and BCa
    interval (an end on the search box says so; the allocation exponent has no box)."""

    def three(v):
        return T.fixed(v, 3)

    box = None if q["name"] == "a" else T.param_bounds(fit, q["name"])
    return [
        T.esc(q["label"]),
        three(q["estimate"]),
        T.interval(q["ci"], three, box),
        T.interval(q["bca"], three, box),
    ]


def section_bootstrap(a: Analysis, fig: Fig) -> str:
    if a.non_looped:
        return section_bootstrap_exponents(a, fig)
    b, fit = a.bootstrap, a.fit
    if b is None:
        why = "turned off." if not a.options.n_boot else "φ is held fixed."
        return T.missing(f"No bootstrap: {why}")
    if fit.phi is None or "phi" not in (fit.ci or {}):
        return T.missing(
            f"φ is not identified, so it has no bootstrap distribution; the {b.n_boot}-replicate block "
            "bootstrap of the other parameters is in the fitted-law table."
        )
    level = pct(fit.ci_level)
    html = fig(
        "bootstrap_phi",
        "bootstrap distribution of phi",
        f"φ refitted on {b.n_boot - b.n_failed} block-bootstrap resamples of the {b.n_blocks} "
        f"'{T.esc(b.block)}' blocks; dashed: {level} percentile interval, dotted: BCa.",
    )
    shares = a.phi_shares or {}
    box = T.param_bounds(fit, "phi")

    def three(v):
        return T.fixed(v, 3)

    rows = [
        ["replicates (failed)", f"{b.n_boot} ({b.n_failed})"],
        [f"{level} percentile interval", T.interval(fit.ci.get("phi"), three, box)],
        [f"{level} BCa interval", T.interval((fit.ci_bca or {}).get("phi"), three, box)],
        ["share of replicates with φ ≤ 0", T.fixed(shares.get("le0"), 3)],
        ["share of replicates with φ ≥ 1", T.fixed(shares.get("ge1"), 3)],
        ["the study's interval (95%, 200 resamples)", f"[{STUDY_PHI_CI[0]}, {STUDY_PHI_CI[1]}]"],
    ]
    html += T.table(["", "value"], rows, left=2)
    html += caution_list(a.cautions_from("bootstrap"))
    return html


def section_comparison(a: Analysis, fig: Fig) -> str:
    rows = comparison_rows(a.comparison)
    if not rows and a.allocation is not None:
        return T.missing(
            "No restricted fits here: φ does not enter a non-looped table's law. Fixed exponents "
            "can be tested with phifit compare --fix alpha=0.34 (or beta, E, A, B; repeatable)."
        )
    if not rows:
        return T.missing(
            "No restricted-fit comparison: phi is not identifiable from these runs "
            "(it needs looped runs, r > 1 with N_rec > 0, and at least two values of r)."
        )
    html = fig(
        "comparison",
        "R squared of free and restricted fits",
        f"R² on raw nats of the free fit and of the restricted laws (the study: {STUDY_R2['free']} "
        f"free, {STUDY_R2['phi=0']} φ = 0, {STUDY_R2['phi=1']} φ = 1).",
    )
    table_rows = []
    for r in rows:
        p = r["params"] or {}
        verdict = (
            ""
            if r["rejected"] is None
            else "<b>undecided</b>"
            if r.get("undecided")
            else ('<span class="bad">rejected</span>' if r["rejected"] else "not rejected")
        )
        table_rows.append(
            [
                T.esc(r["label"]),
                T.fixed(r["r2"], 5),
                T.fixed(r["rmse"], 5),
                T.num(r["aic"], 5),
                T.num(r["bic"], 5),
                T.num(r["lr_p_value"], 3),
                T.fixed(r["cv_rmse"], 5),
                verdict,
            ]
            + [T.num(p.get(n), 4) for n in PARAM_NAMES]
        )
    html += T.table(
        ["fit", "R²", "RMSE", "AIC", "BIC", "LR p", "CV RMSE", ""]
        + ["φ" if n == "phi" else n for n in PARAM_NAMES],
        table_rows,
    )
    html += (
        "<p>AIC, BIC and the likelihood-ratio p-value use a Gaussian working likelihood "
        "of the log-loss residuals; CV RMSE: leave-one-budget-out prediction error (nats).</p>"
    )
    verdict = getattr(a.comparison, "verdict", None)
    if verdict:
        html += f"<p><b>Verdict:</b> {T.esc(verdict)}</p>"
    rule = getattr(a.comparison, "rule", None)
    if rule:
        html += f"<p>Rule: {T.esc(rule)}.</p>"
    html += caution_list(a.cautions_from("compare"))
    return html


def section_bayes(a: Analysis, fig: Fig) -> str:
    if a.bayes is None:
        return T.missing("No posterior was sampled.")
    b = a.bayes
    ex = b.extras or {}
    post = ex.get("posterior", {})
    cells = ex.get("cell_effects") or {}
    noise = (
        "an effect shared by the runs of each (budget, r) cell" if cells.get("cells") else "runs independent"
    )
    html = fig(
        "posterior",
        "posterior marginals",
        f"Marginal posterior draws (Student-t likelihood on log-loss, {noise}, weakly informative "
        "priors on the study's box); line: the Huber estimate.",
    )
    rows = []
    for n in PARAM_NAMES:
        s = post.get(n, {})
        rows.append(
            [
                T.esc("φ" if n == "phi" else n),
                T.num(b.params.get(n), 5),
                T.num(s.get("sd"), 3),
                T.interval((b.ci or {}).get(n)),
                T.num(a.fit.params.get(n), 5),
                T.num(s.get("r_hat"), 4),
                T.num(s.get("ess_bulk"), 4),
            ]
        )
    html += T.table(
        ["parameter", "posterior median", "sd", f"{pct(b.ci_level)} HDI", "Huber estimate", "R-hat"]
        + ["bulk ESS"],
        rows,
    )
    diag, loo = ex.get("diagnostics", {}), ex.get("loo", {})
    sampler = (
        f"{ex.get('sampler')} ({ex.get('chains')} chains × {ex.get('draws')} draws after "
        f"{ex.get('tune')} tuning steps)"
    )
    html += T.table(
        ["", "value"],
        [
            ["sampler", T.esc(sampler)],
            ["divergences", T.esc(diag.get("divergences", ex.get("divergences")))],
            [
                "max R-hat / min bulk ESS",
                f"{T.num(diag.get('max_r_hat'), 4)} / {T.num(diag.get('min_ess_bulk'), 4)}",
            ],
            ["ELPD-LOO", T.num(loo.get("elpd_loo"), 6)],
            ["converged", T.esc(b.converged)],
            ["posterior file", '<a href="posterior.nc">posterior.nc</a> (ArviZ InferenceData)'],
        ],
        left=2,
    )
    if cells.get("cells"):
        tau = cells["tau"]

        def three(x):
            return T.num(x, 3)

        html += "<h3>Cell effects: the law's misfit at the cell level</h3>"
        html += (
            f"<p>u<sub>c</sub> is the log-loss the runs of (budget, r) cell c share beyond the law; "
            f"their sd τ = {three(tau['median'])} {T.interval(tau['hdi'], three)} measures how far whole "
            f"cells sit off the law (with the noise a cell's runs share), against "
            f"σ = {T.num(post.get('sigma', {}).get('median'), 3)} for a run within its cell. "
            f"A cell whose interval excludes 0 sits off the law.</p>"
        )
        html += T.table(
            ["cell", "runs", "u (posterior median)", f"{pct(b.ci_level)} HDI"],
            [
                [T.esc(row["cell"]), T.esc(row["n"]), three(row["median"]), T.interval(row["hdi"], three)]
                for row in cells["cells"]
            ],
        )
    ppc = (ex.get("ppc") or {}).get("by_r") or []
    if ppc:
        html += "<h3>Posterior predictive check per r</h3>"
        html += T.table(
            ["r", "p (mean log-loss)", "p (residual RMS)"],
            [[T.esc(row.get("r")), T.num(row.get("p_mean"), 3), T.num(row.get("p_rmse"), 3)] for row in ppc],
        )
    html += caution_list(b.warnings, "warnings")
    return html


def section_recipes(a: Analysis, fig: Fig) -> str:
    rec = a.recipes
    rows = recipe_rows(rec)
    level = pct(rec.level)
    html = fig(
        "recipes",
        "delta phi between recipes",
        f"Δφ of each recipe against the baseline, with its {level} bootstrap interval.",
    )
    html += (
        f"<p>Each recipe is compared with the baseline '{T.esc(rec.baseline)}' refitted on "
        "the same budgets (the study's lesson: its baseline refit on the four lower budgets "
        "gives φ = 0.453, not 0.459); intervals from a paired block bootstrap.</p>"
    )
    header = ["variant", "runs", "φ variant", "φ baseline (same budgets)", "Δφ"]
    html += T.table(
        header + [f"{level} percentile", f"{level} BCa", "p-value"],
        [
            [
                T.esc(r["variant"]),
                str(r["n_runs"]),
                T.fixed(r["variant_phi"], 3),
                T.fixed(r["baseline_phi"], 3),
                T.fixed(r["delta_phi"], 3, signed=True),
                T.interval(r["interval"], lambda v: T.fixed(v, 3, signed=True)),
                T.interval(r["interval_bca"], lambda v: T.fixed(v, 3, signed=True)),
                T.num(r["p_value"], 3),
            ]
            for r in rows
        ],
    )
    html += caution_list(a.cautions_from("recipes"))
    summary = getattr(rec, "summary", None)
    if callable(summary):
        html += f"<pre>{T.esc(summary())}</pre>"
    return html


def section_files(figures: dict[str, dict[str, str]]) -> str:
    items = ['<li><a href="results.json">results.json</a>: every number in this report</li>']
    for name, paths in figures.items():
        links = ", ".join(f'<a href="{T.esc(p)}">{T.esc(p)}</a>' for p in paths.values())
        items.append(f"<li>{T.esc(name)}: {links}</li>")
    return "<ul>" + "".join(items) + "</ul>"
