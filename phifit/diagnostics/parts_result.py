"""The result of the leave-one-part-out analysis (:mod:`phifit.diagnostics.parts`) and its words.

:class:`PartRow` is the table without one part (its phi, interval and reading), :class:`PartsResult`
all of them with the full table's reading and the headline sentence; :func:`interval_reading`,
:func:`flips` and :func:`headline_text` turn intervals into that reading and those words.  An
interval is read three ways: inside (0, 1) (lo > 0 and hi < 1), excludes phi = 0 (lo > 0 or
hi < 0), excludes phi = 1 (hi < 1 or lo > 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..intervals import interval_text
from ..serialize import JsonIO, to_plain

#: The families of parts, in the order they are left out.
FAMILIES = ("size", "budget", "r")
#: How the reading is made, as every output states it.
READING = (
    "each part's phi interval (cell bootstrap of the table without it) is read against (0, 1), "
    "phi = 0 and phi = 1 as the full table's interval is; a restricted law 'stops being rejected' "
    "when the interval no longer excludes it (intervals, not wild tests, per part)"
)

__all__ = [
    "FAMILIES",
    "READING",
    "PartRow",
    "PartsResult",
    "flips",
    "headline_text",
    "interval_reading",
    "no_verdict_text",
    "reading_text",
]


@dataclass(frozen=True)
class PartRow(JsonIO):
    """The table without one part: its fit of phi, interval and reading (None where not computed).

    ``ci``: percentile interval at the result's level from ``n_boot`` cell-bootstrap replicates of
    the leave-out table ([None, None] when not identified or withheld); ``mc_error``: the
    Monte-Carlo error of each end; ``share_le0`` / ``share_ge1``: shares of successful replicates
    with phi <= 0 / >= 1.  ``inside_01``, ``excludes_0``, ``excludes_1``: the interval's reading.
    ``lack_of_fit_p``: the wild cluster p-value of r^phi against one free multiplier per r on the
    leave-out table (None: not tested; ``lack_of_fit_note`` says why).  ``flips``: how the reading
    differs from the full table's, in words (empty: it does not), where the difference is beyond
    the Monte-Carlo error of the part's replicates; ``unsure_flips``: differences within it."""

    family: str
    column: str
    label: str
    name: str
    n_left_out: int
    n_runs: int
    identified: bool
    reason: str | None
    phi: float | None
    delta_phi: float | None
    ci: list[float | None]
    mc_error: list[float | None]
    n_boot: int
    n_failed: int
    share_le0: float | None
    share_ge1: float | None
    inside_01: bool | None
    excludes_0: bool | None
    excludes_1: bool | None
    lack_of_fit_p: float | None = None
    lack_of_fit_rejected: bool | None = None
    lack_of_fit_note: str | None = None
    flips: list[str] = field(default_factory=list)
    unsure_flips: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(dict(self.__dict__))


@dataclass(frozen=True)
class PartsResult(JsonIO):
    """Leave-one-part-out refits of a fit (module docstring): one :class:`PartRow` per part.

    ``reference_ci``: the full table's interval the parts are read against, and
    ``reference_source`` where it comes from; ``reference_lack_of_fit_p``: the full table's
    lack-of-fit p-value (None: not tested).  ``headline``: the sentence naming the part(s) whose
    removal changes the reading, or saying that no single part does.  ``notes``: families not
    split, parts not identified, refits that failed."""

    phi_hat: float
    level: float
    reference_ci: list[float | None]
    reference_source: str
    reference_inside_01: bool | None
    reference_excludes_0: bool | None
    reference_excludes_1: bool | None
    reference_lack_of_fit_p: float | None
    rows: list[PartRow]
    n_boot: int
    seed: int
    lack_of_fit: str
    method: str
    headline: str
    n_runs: int
    bounds: list[float] | None = None
    reading: str = READING
    notes: list[str] = field(default_factory=list)

    @property
    def carrying(self) -> list[PartRow]:
        """The parts whose removal changes the reading of phi beyond the Monte-Carlo error of their
        replicates (in table order)."""
        return [row for row in self.rows if row.flips]

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["rows"] = [row.to_dict() for row in self.rows]
        return to_plain({"kind": "parts", **out})

    def to_frame(self) -> pd.DataFrame:
        """One row per left-out part: family, part, runs left out and kept, phi and its change,
        the interval's ends and their Monte-Carlo errors, the shares of replicates at phi <= 0 and
        >= 1, the reading (inside (0, 1), excludes phi = 0, excludes phi = 1), the lack-of-fit
        p-value where tested, and the flips in words ("" where none; "not identified without it:
        ..." where the part was not left out), beyond and within the Monte-Carlo error."""

        def num(x: Any) -> float:
            return np.nan if x is None else float(x)

        records = [
            {
                "family": row.family,
                "part": row.label,
                "runs_left_out": row.n_left_out,
                "runs_left": row.n_runs,
                "phi": num(row.phi),
                "delta_phi": num(row.delta_phi),
                "ci_lo": num(row.ci[0]),
                "ci_hi": num(row.ci[1]),
                "mc_error_lo": num(row.mc_error[0]),
                "mc_error_hi": num(row.mc_error[1]),
                "share_le0": num(row.share_le0),
                "share_ge1": num(row.share_ge1),
                "inside_01": row.inside_01,
                "excludes_0": row.excludes_0,
                "excludes_1": row.excludes_1,
                "lack_of_fit_p": num(row.lack_of_fit_p),
                "flips": "; ".join(row.flips) if row.identified else row.reason or "",
                "within_mc_error": "; ".join(row.unsure_flips),
            }
            for row in self.rows
        ]
        return pd.DataFrame.from_records(records)

    def summary(self) -> str:
        """The headline, the table (one line per part) and how it is read."""
        lines = [
            f"[[Leave one part out: phi = {self.phi_hat:.4f}, {pct(self.level)} interval "
            f"{_iv_text(self.reference_ci, self.bounds)} ({self.reference_source})]]",
            f"    {self.headline}",
        ]
        if not self.rows:  # no verdict on phi to carry: nothing was left out
            return "\n".join(lines + [f"    note: {n}" for n in self.notes])
        lines += [
            "",
            f"    {'part':<16} {'runs':>7} {'phi':>8} {'interval':>24} {'MC err':>11}  {'reading':<24} flips",
        ]
        for row in self.rows:
            runs = f"-{row.n_left_out}/{row.n_runs + row.n_left_out}"
            if not row.identified:
                lines.append(f"    {row.name:<16} {runs:>7}  {row.reason}")
                continue
            mc = "-" if None in row.mc_error else f"±{max(row.mc_error):.3f}"
            tested = row.lack_of_fit_p is not None and not any("lack-of-fit" in f for f in row.flips)
            lof = f" (lack of fit p = {row.lack_of_fit_p:.2g})" if tested else ""
            lines.append(
                f"    {row.name:<16} {runs:>7} {row.phi:>8.3f} {_iv_text(row.ci, self.bounds):>24} "
                f"{mc:>11}  {reading_text(row.inside_01, row.excludes_0, row.excludes_1):<24} "
                + ("; ".join(row.flips + [f"{f} (within MC error)" for f in row.unsure_flips]) or "-")
                + lof
            )
        lines += ["", f"    reading: {self.reading}", f"    refits: {self.method}"]
        if self.lack_of_fit == "changed":
            lines.append(
                "    lack of fit of r^phi: tested only for parts whose removal changes the reading "
                "(a wild test per part costs seconds)"
            )
        elif self.lack_of_fit == "none":
            lines.append("    lack of fit of r^phi: not tested per part")
        lines += [f"    note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def pct(level: float) -> str:
    return f"{100 * level:g}%"


def _iv_text(iv: Sequence[float | None], bounds: Sequence[float] | None) -> str:
    return "-" if iv is None or None in iv else interval_text(iv[0], iv[1], bounds)


def reading_text(inside: bool | None, ex0: bool | None, ex1: bool | None) -> str:
    """The reading of an interval in words: "inside (0, 1)", "excludes 0", ... or "-"."""
    if inside is None:
        return "-"
    if inside:
        return "inside (0, 1)"
    said = [w for w, b in (("excludes 0", ex0), ("excludes 1", ex1)) if b]
    return ", ".join(said) if said else "holds 0 and 1"


def interval_reading(iv: Sequence[float | None] | None) -> tuple[bool | None, bool | None, bool | None]:
    """(inside (0, 1), excludes phi = 0, excludes phi = 1) of an interval; Nones without one."""
    if iv is None or None in iv or not all(math.isfinite(v) for v in iv):
        return None, None, None
    lo, hi = float(iv[0]), float(iv[1])
    return lo > 0 and hi < 1, lo > 0 or hi < 0, hi < 1 or lo > 1


def flips(
    ref: tuple[bool | None, bool | None, bool | None],
    part: tuple[bool | None, bool | None, bool | None],
    settled: tuple[bool, bool] = (True, True),
    tails: tuple[str, str] = ("", ""),
    ref_lof: bool | None = None,
    part_lof: tuple[bool | None, float | None] = (None, None),
) -> tuple[list[str], list[str]]:
    """How a part's reading differs from the full table's, in words: (the changes beyond the
    Monte-Carlo error of the part's replicates, those within it).

    ``ref`` and ``part``: :func:`interval_reading` of the full table's and the part's interval;
    ``settled``: whether the part's and the full table's readings of phi = 0 and of phi = 1 are
    beyond their Monte-Carlo error (:func:`phifit.diagnostics.parts.settled`); ``tails``: the
    share of replicates beyond 0 and 1 as text (" (21% of replicates at phi <= 0)"), added to a
    change of that reading.  The
    lack-of-fit test of r^phi (``ref_lof``: the full table's rejection; ``part_lof``: the part's
    (rejected, p)) counts as settled (its own stop rule decides its side of 5%)."""
    firm: list[str] = []
    unsure: list[str] = []
    if None not in ref and None not in part:
        if ref[0] and not part[0]:  # leaving (0, 1): settled when the end it crosses is
            out_of = [i for i in (0, 1) if not part[1 + i]]
            (firm if any(settled[i] for i in out_of) else unsure).append("interval leaves (0, 1)")
        elif part[0] and not ref[0]:
            (firm if all(settled) else unsure).append("interval now inside (0, 1)")
        for i in (0, 1):
            if ref[1 + i] and not part[1 + i]:
                (firm if settled[i] else unsure).append(f"phi = {i} no longer excluded{tails[i]}")
            elif part[1 + i] and not ref[1 + i]:
                (firm if settled[i] else unsure).append(f"phi = {i} now excluded{tails[i]}")
    rejected, p = part_lof
    if rejected is not None and ref_lof is not None and rejected != ref_lof:
        firm.append(f"r^phi {'fails' if rejected else 'passes'} its lack-of-fit test (p = {p:.2g})")
    return firm, unsure


def no_verdict_text(reference: Sequence[float | None], bounds: Sequence[float] | None, level: float) -> str:
    """The headline when no part is left out because the full table's interval (``reference``)
    holds both phi = 0 and phi = 1."""
    return (
        f"No part is left out: the full table's {pct(level)} interval of phi, "
        f"{_iv_text(reference, bounds)}, holds both phi = 0 and phi = 1, so the table gives no "
        "verdict on phi for one part of it to carry."
    )


def headline_text(
    rows: list[PartRow], reference: Sequence[float | None], bounds: Sequence[float] | None
) -> str:
    """The sentence naming the part(s) whose removal changes phi's reading beyond the Monte-Carlo
    error of their replicates (:func:`flips`), or saying that no single part does (and which
    change it only within that error); ``reference``: the full table's interval."""
    carrying = [row for row in rows if row.flips]
    unsure = [row for row in rows if not row.flips and row.unsure_flips]
    fitted = [row for row in rows if row.identified]
    if not fitted:
        return "No part could be left out: without any single size, budget or r phi is not identified."
    n_boot = max(row.n_boot for row in fitted)
    maybe = (
        f" Leaving out {_join([row.name for row in unsure])} changes the reading only within the "
        f"Monte-Carlo error of {n_boot} replicates per part."
        if unsure
        else ""
    )
    if carrying:
        said = [
            f"without {row.name} ({row.n_left_out} of {row.n_left_out + row.n_runs} runs) "
            + (
                _join(row.flips)  # phi on its search bound: no interval
                if None in row.ci
                else f"phi = {row.phi:.3f} {_iv_text(row.ci, bounds)}: {_join(row.flips)}"
            )
            for row in carrying
        ]
        return (
            f"The answer rests on {_join([row.name for row in carrying])}: "
            + "; ".join(said)
            + f" ({n_boot}-replicate cell bootstrap{'s' if len(carrying) > 1 else ''}; the full table's "
            f"interval is {_iv_text(reference, bounds)})." + maybe
        )
    families = []
    for family in FAMILIES:
        n = sum(1 for row in fitted if row.family == family)
        if n:
            families.append(f"{n} {_plural(family, n)}")
    phis = [row.phi for row in fitted]
    skipped = [row.name for row in rows if not row.identified]
    if None in reference:
        kept = "phi's interval is not compared (the full table has none)"
    elif unsure:
        kept = "no interval changes the full table's reading beyond Monte-Carlo error"
    else:
        kept = f"every interval keeps the full table's reading ({reading_text(*interval_reading(reference))})"
    return (
        f"No single part carries the answer: leaving out each of {_join(families)} in turn, phi stays "
        f"within [{min(phis):.3f}, {max(phis):.3f}] and {kept}"
        + (f"; not left out ({_join(skipped)}): phi is not identified without it" if skipped else "")
        + "."
        + maybe
    )


def _plural(family: str, n: int) -> str:
    word = {"size": "size", "budget": "budget", "r": "value"}[family]
    text = word if n == 1 else word + "s"
    return text + " of r" if family == "r" else text


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
