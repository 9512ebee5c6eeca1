"""Sections of the report page about the derived quantities: the isoFLOP curves, the
compute-optimal frontier (law and per-cell parabola minima) and the equivalent sizes.

Layout only: every number comes from the :class:`~phifit.report.analysis.Analysis`; interval
labels use the ``level`` of the frontier and of the equivalence table.
"""

from __future__ import annotations

from ..study import STUDY_GAP_RANGES, STUDY_PHI
from . import html as T
from .analysis import Analysis
from .format import Fig, caution_list, pct

#: The study's headline frontier gaps (per-cell parabola minima, paper §4.2), nats.


def section_isoflop(a: Analysis, fig: Fig) -> str:
    if a.non_looped:
        alt, caption = (
            "isoFLOP curves with the fitted law",
            "Loss vs unique parameters on each isoFLOP budget; lines: the fitted law at "
            "D = C / F along the architectures of the table.",
        )
    else:
        alt, caption = (
            "isoFLOP curves per r with the fitted law",
            "Loss vs unique parameters on each isoFLOP budget, one panel per r; lines: the "
            "fitted joint law at D = C / F along the architectures of the table.",
        )
    return fig("isoflop", alt, caption) or T.missing(
        "No isoFLOP curves: the table has no numeric 'budget' column."
    )


def section_frontier(a: Analysis, fig: Fig) -> str:
    f = a.frontier
    if f is None and not a.fit.d_term_identified:
        return T.missing(
            "No frontier: every run has the same token count, so B and beta (the data term the "
            "frontier trades size against) are not identified."
        )
    if f is None:
        return T.missing("No frontier: the table has no looped runs.")
    if a.non_looped:
        return section_frontier_non_looped(a, fig)
    level = pct(f.level)
    bands = f"bands: bootstrap {level} percentile intervals at the table's budgets" if f.gap_interval else ""
    html = fig(
        "frontier",
        "loss vs compute and frontier gap per r",
        "Left: runs and the law's compute-optimal frontier L*(C) per r. Right: the gap "
        f"L*(r) − L*(r = {f.base_r}); lines: the law{f' ({bands})' if bands else ''}; markers: "
        "per-cell parabola minima of loss vs log N (Chinchilla's approach 2, the study's estimator).",
    )
    html += (
        f"<p>Frontier: for each budget C and r, the architecture minimising the predicted "
        f"loss subject to C = F · D; architectures {T.esc(f.family)}.</p>"
    )
    html += caution_list(a.cautions_from("frontier"), "warnings")
    gaps = sorted(f.gap)
    header = ["C (FLOPs)", f"L*(r={f.base_r})"]
    for r in gaps:
        header += [f"gap r={r}: law", f"{level} interval", "parabola minima"]
    para = {}
    if a.parabola is not None:
        for r, items in a.parabola.gap.items():
            for x in items:
                if isinstance(x["budget"], (int, float)):
                    para[(int(r), float(x["budget"]))] = x["gap"]
    rows = []
    for i, c in enumerate(f.budgets):
        row = [T.num(c, 3), T.fixed(f.l_star[f.base_r][i])]
        for r in gaps:
            iv = f.gap_interval[r][i] if f.gap_interval else None
            row += [
                T.fixed(f.gap[r][i], 3),
                T.interval(iv, lambda v: T.fixed(v, 3)),
                T.fixed(para.get((r, float(c))), 3),
            ]
        rows.append(row)
    html += T.table(header, rows)
    left_out = a.cautions_from("isoflop")
    if left_out:
        html += "<p>Per-cell parabola minima left out:</p>" + caution_list(left_out)
    prange = a.parabola.gap_range if a.parabola is not None else {}
    rng_rows = []
    for r in gaps:
        lo, hi = f.gap_range[r]
        p, s = prange.get(r), STUDY_GAP_RANGES.get(r)
        rng_rows.append(
            [
                f"r = {r}",
                f"{lo:.3f} – {hi:.3f}",
                f"{p[0]:.3f} – {p[1]:.3f}" if p else "n/a",
                f"{s[0]:.2f} – {s[1]:.2f}" if s else "",
            ]
        )
    html += "<h3>Gap ranges across budgets (nats)</h3>"
    html += T.table(
        ["", "law (this fit)", "parabola minima (this data)", "study (parabola minima)"], rng_rows
    )
    exp_rows = [[f"r = {r}", f"{e['n']:.2f}", f"{e['d']:.2f}"] for r, e in f.exponents.items()]
    if exp_rows:
        html += "<h3>Compute-optimal scaling under the law</h3>"
        html += T.table(["", "N* ∝ C^a: a", "D* ∝ C^b: b"], exp_rows)
    return html


def section_frontier_non_looped(a: Analysis, fig: Fig) -> str:
    """A non-looped table's frontier: L*(C) at the table's budgets and its scaling exponents
    along the table's architectures (one r: no gap between recurrences to show)."""
    f = a.frontier
    html = fig(
        "frontier",
        "loss vs compute and the compute-optimal frontier",
        "Runs and the law's compute-optimal frontier L*(C).",
    )
    family = f.family.replace("per r, ", "").replace(" at that r", "")
    html += (
        "<p>Frontier: for each budget C, the architecture minimising the predicted loss "
        f"subject to C = F · D; architectures {T.esc(family)}.</p>"
    )
    html += caution_list(a.cautions_from("frontier"), "warnings")
    line = f.l_star[f.base_r]
    html += T.table(["C (FLOPs)", "L*"], [[T.num(c, 3), T.fixed(line[i])] for i, c in enumerate(f.budgets)])
    exp_rows = [
        ["along the table's architectures", f"{e['n']:.2f}", f"{e['d']:.2f}"] for e in f.exponents.values()
    ]
    if exp_rows:
        html += "<h3>Compute-optimal scaling under the law</h3>"
        html += T.table(["", "N* ∝ C^a: a", "D* ∝ C^b: b"], exp_rows)
        html += (
            "<p>Read off the frontier above, with F per token from the table; the allocation in the "
            "fitted-law section assumes C = 6ND instead.</p>"
        )
    return html


def section_equivalence(a: Analysis) -> str:
    if a.equivalence is None and a.non_looped:
        return T.missing(
            "No equivalent sizes: they translate a looped model into a non-looped one, and this "
            "table has no looped runs."
        )
    if a.equivalence is None:
        return T.missing("No equivalence table: φ is not identified.")
    html = (
        "<p>A looped model with N<sub>once</sub> once-applied and N<sub>rec</sub> shared "
        "parameters looped r times matches a non-looped model of N<sub>eff</sub> = "
        "N<sub>once</sub> + r<sup>φ</sup> N<sub>rec</sub> parameters, and costs per token "
        "what a non-looped model of N<sub>once</sub> + r N<sub>rec</sub> parameters costs "
        f"(φ = {a.fit.phi:.3f}).</p>"
    )
    if a.example is not None:
        e, w = a.example["blocks_only"], a.example["with_injection"]
        html += (
            f"<p>The study's example (its F.4), with this fit's φ: the r = 4 iso-depth twin "
            f"of a 1B non-looped model has {T.count(w.n_unique)} unique parameters (with the "
            f"injection layer; {T.count(e.n_unique)} without), is worth a "
            f"{T.count(e.n_eff)} non-looped model ({T.count(w.n_eff)} counting the "
            f"injection layer in N<sub>rec</sub>), at the training cost of a "
            f"{T.count(e.n_unrolled)}–{T.count(w.n_unrolled)} one. The study (φ = {STUDY_PHI}): "
            f"410M ≈ 580M at the cost of 1B.</p>"
        )
    rows = [
        [
            str(e.r),
            T.count(e.n_once),
            T.count(e.n_rec),
            T.count(e.n_unique),
            T.count(e.n_eff),
            T.interval(e.n_eff_interval, T.count),
            T.count(e.n_unrolled),
            T.fixed(e.eff_over_unrolled, 3),
        ]
        for e in a.equivalence.rows
    ]
    header = ["r", "N_once", "N_rec", "unique", "N_eff", f"{pct(a.equivalence.level)} interval"]
    html += T.table(header + ["unrolled cost", "N_eff / unrolled"], rows)
    return html
