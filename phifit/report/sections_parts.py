"""The report's section "Does the answer rest on one part of the table?" and its headline line.

Layout only: every number comes from :attr:`phifit.report.analysis.Analysis.parts`
(:class:`phifit.diagnostics.parts_result.PartsResult`): one row per size, budget and r left out,
with phi, its cell-bootstrap interval and the interval's reading against the full table's.
"""

from __future__ import annotations

from . import html as T
from .analysis import Analysis
from .format import pct

TITLE = "Does the answer rest on one part of the table?"


def headline_line(a: Analysis) -> str | None:
    """Plain text for the headline when removing one part changes phi's reading beyond Monte-Carlo
    error (the part named), else None."""
    parts = a.parts
    return parts.headline if parts is not None and parts.carrying else None


def headline_item(a: Analysis) -> str | None:
    """The headline's HTML item for :func:`headline_line`, or None."""
    line = headline_line(a)
    return None if line is None else f'<span class="bad"><b>One part carries it</b></span>: {T.esc(line)}'


def section_parts(a: Analysis) -> str:
    """The table of leave-one-part-out refits, its headline sentence and how it is read."""
    parts = a.parts
    if parts is None:
        fit = a.fit
        why = (
            "phi is fixed or not identified"
            if fit.phi is None or "phi" in fit.fixed
            else "phi sits on the bound of its search box"
            if "phi" in fit.at_bounds
            else "the bootstrap did not run, so there is no interval to read the parts against"
        )
        return T.missing(f"Not run: {why}.")
    bounds = parts.bounds
    html = f"<p><b>{T.esc(parts.headline)}</b></p>"
    if not parts.rows:  # no verdict on phi to carry: nothing was left out
        return html + (T.bullet_list(parts.notes, "notes") if parts.notes else "")
    header = [
        "left out",
        "runs",
        "φ",
        "Δφ",
        f"{pct(parts.level)} interval",
        "MC error",
        "φ ≤ 0",
        "φ ≥ 1",
        "reading",
        "what changes",
    ]
    rows, flags = [], []
    for row in parts.rows:
        runs = f"{row.n_left_out} of {row.n_left_out + row.n_runs}"
        if not row.identified:
            rows.append([T.esc(row.name), runs, *["" for _ in range(7)], T.esc(row.reason or "")])
            flags.append(False)
            continue
        changes = "; ".join(row.flips + [f"{f} (within Monte-Carlo error)" for f in row.unsure_flips])
        if row.lack_of_fit_p is not None and not any("lack-of-fit" in f for f in row.flips):
            changes += f"{'; ' if changes else ''}lack of fit p = {row.lack_of_fit_p:.2g}"
        rows.append(
            [
                T.esc(row.name),
                runs,
                T.fixed(row.phi, 3),
                T.fixed(row.delta_phi, 3, signed=True),
                T.interval(row.ci, lambda v: T.fixed(v, 3), bounds) or "—",
                "—" if None in row.mc_error else "±" + T.fixed(max(row.mc_error), 3),
                "—" if row.share_le0 is None else f"{row.share_le0:.0%}",
                "—" if row.share_ge1 is None else f"{row.share_ge1:.0%}",
                T.esc(_reading(row)),
                T.esc(changes) or "—",
            ]
        )
        flags.append(bool(row.flips))
    ref = T.interval(parts.reference_ci, lambda v: T.fixed(v, 3), bounds) or "none"
    html += T.table(header, rows, flags=flags, left_last=True)
    lof = (
        "tested only where removing the part changes phi's reading (a wild test per part costs seconds)"
        if parts.lack_of_fit == "changed"
        else "tested for every part"
        if parts.lack_of_fit == "all"
        else "not tested per part"
    )
    html += (
        f"<p>Full table: φ = {T.fixed(parts.phi_hat, 3)}, interval {ref} ({T.esc(parts.reference_source)}). "
        f"Each row refits the table without one size, budget or r: {T.esc(parts.method)}. "
        f"Reading: {T.esc(parts.reading)}. A change is within Monte-Carlo error when the count of "
        f"replicates beyond φ = 0 or 1 is within 2 binomial standard deviations of the interval's "
        f"tail share; MC error: the larger Monte-Carlo error of the two ends. Lack of fit of r^φ: "
        f"{lof}.</p>"
    )
    if parts.notes:
        html += T.bullet_list(parts.notes, "notes")
    return html


def _reading(row) -> str:
    """A row's reading in words, or that phi is on its search bound."""
    from ..diagnostics.parts_result import reading_text

    if row.inside_01 is None and row.phi is not None:
        return "φ on its search bound" if row.flips and "search bound" in row.flips[0] else "no interval"
    return reading_text(row.inside_01, row.excludes_0, row.excludes_1)


__all__ = ["TITLE", "headline_item", "headline_line", "section_parts"]
