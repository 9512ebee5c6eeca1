"""The report's "Adaptive rounds" section: what each round of an adaptive sweep (``phifit sweep
--adaptive``) picked, the width of phi's interval it predicted, and the width the runs then gave.

Layout only: every number comes from the :class:`~phifit.plan.rounds.AdaptiveRounds` in
``Analysis.adaptive``, read from the sweep's round log.  :func:`figure_points` gives the figure its
points (:func:`phifit.report.figures.adaptive_figure`).
"""

from __future__ import annotations

from typing import Any

from . import html as T
from .analysis import Analysis
from .format import Fig


def _pick_label(p: dict[str, Any]) -> str:
    """r, width and budget of a pick, its reason as the hover text."""
    size = "" if p.get("size") is None else f" · {T.num(p['size'], 4)}"
    budget = "" if p.get("budget") is None else f" · {T.num(p['budget'], 3)}"
    return f'<span title="{T.esc(p.get("why") or "")}">r {T.esc(p.get("r"))}{size}{budget}</span>'


def _phi_text(row: Any) -> str:
    if row.phi is None:
        return "n/a"
    iv = T.interval(row.phi_ci)
    return f"{T.num(row.phi, 3)} {iv}" if iv else T.num(row.phi, 3)


def _paused_text(ad: Any) -> str:
    """The state of a log that ends after a round's outcome with no stop record: the loop was
    interrupted (or is deciding its next round) before any stop rule held; rerun, it resumes."""
    last = ad.rounds[-1]
    label = "the pilot" if last.round == 0 else f"round {last.round}"
    width = last.width_realised
    if width is not None and ad.target_width is not None:
        why = f"realised width {T.num(width, 3)} against the target {T.num(ad.target_width, 3)}"
        rule = f"no stop rule met ({why})"
    else:
        rule = "no stop rule met"
    return (
        f"the log ends after {label}'s outcome with {rule}: the loop was interrupted or is still "
        "running, and rerunning its command resumes it"
    )


def figure_points(adaptive: Any) -> list[dict[str, Any]]:
    """Per round: its number, the training FLOPs of the runs fitted after it (before it plus its picks'
    while its outcome is not recorded), the predicted and the realised width."""
    out = []
    for row in adaptive.rounds:
        flops = row.flops
        if not row.finished:
            flops += sum(float(p.get("flops") or 0.0) for p in row.picks)
        out.append(
            {
                "round": row.round,
                "flops": flops,
                "predicted": row.width_predicted,
                "realised": row.width_realised,
            }
        )
    return out


def section_adaptive(a: Analysis, fig: Fig) -> str:
    ad = a.adaptive
    if ad is None:
        return ""
    n = sum(1 for r in ad.rounds if r.round > 0)
    if ad.stop is not None:
        state = f"stopped after round {T.esc(ad.stop.get('round'))}: {T.esc(ad.stop.get('reason'))}"
    elif ad.rounds and not ad.rounds[-1].finished:
        state = f"round {ad.rounds[-1].round} is being trained (its outcome is not recorded yet)"
    elif ad.rounds:
        state = _paused_text(ad)
    else:
        state = "no round recorded yet"
    html = (
        f"<p>Sweep <code>{T.esc(ad.spec)}</code>, trained adaptively: a pilot and {n} round(s) "
        f"(round log <code>{T.esc(ad.source)}</code>); {state}.</p>"
    )
    rows, flags = [], []
    for r in ad.rounds:
        rows.append(
            [
                "pilot" if r.round == 0 else str(r.round),
                str(r.n_runs),
                T.num(r.flops, 3),
                T.num(r.width_predicted, 3) if r.width_predicted is not None else "–",
                T.num(r.width_realised, 3) if r.width_realised is not None else "n/a",
                _phi_text(r),
                "; ".join(_pick_label(p) for p in r.picks)
                + (f" (did not train: {T.esc(', '.join(r.failed))})" if r.failed else "")
                or "–",
            ]
        )
        flags.append(not r.finished)
    html += T.table(
        [
            "round",
            "runs",
            "training FLOPs",
            "predicted width",
            "realised width",
            "φ [95% interval]",
            "picked: r · width · budget",
        ],
        rows,
        flags=flags,
        left_last=True,
    )
    notes = [f"round {r.round}: {r.note}" for r in ad.rounds if r.note]
    html += (
        "<p>Runs and FLOPs: the runs fitted after the round (before it, for a round still training). "
        "Predicted: the asymptotic width (cluster sandwich, <code>phifit plan --next</code>) the "
        "round's decision expected once its picks are trained; realised: the width of φ's 95% "
        "cell-bootstrap percentile interval after the round. The asymptotic widths have run at "
        "0.65–1.1 × the bootstrap's on the study's tables and at 0.15 × on the CPU sweeps "
        "(docs/planning.md): compare the two columns' trends more than their levels. Hover over a pick "
        "for why it was chosen.</p>"
    )
    html += T.bullet_list(notes, "notes")
    html += fig(
        "adaptive",
        "Predicted and realised widths of phi's interval per round",
        "Width of φ's 95% interval against the training FLOPs fitted: predicted by each decision "
        "(open squares) and realised by the cell bootstrap (filled circles); labels are rounds.",
    )
    if ad.skipped_lines:
        html += f"<p>{ad.skipped_lines} torn line(s) of the round log were skipped.</p>"
    return html
