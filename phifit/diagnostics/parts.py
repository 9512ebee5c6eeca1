"""Does the answer rest on one part of the table?  Leave one size, budget or r out, refit, read phi.

A *part* is every run of one model size (the ``size`` column, else ``d_model``), of one budget
(the ``budget`` column) or of one recurrence count r.  For each part the law is refitted to the
table without it, and phi's cell-bootstrap interval is read again:

- **Point fit**: the fit's own method, starts and seed on the table without the part
  (:func:`phifit.fitters.fit`: for a Huber fit the 500-start fit ``phifit fit`` makes of that
  table).  A warm start at the full table's optimum is not enough: on the CPU tables, whose
  objective has several basins, it missed the leave-out table's best fit for 4 of 26 parts (and
  so did 128 spread starts for one of them).  One task per part, side by side on the workers.
- **Interval**: the (budget, r) cell bootstrap of the table without the part (its remaining
  cells drawn with replacement, ``n_boot`` replicates, :func:`phifit.bootstrap.block.draw_weights`):
  every replicate of every part is a weighting of the one table (the part's runs weighted 0), so
  they are refitted in one batch by :func:`phifit.fitters.refit.refit_weighted`, each from its
  part's estimate plus :data:`BOOT_SPREAD` spread starts.  Percentile interval at ``level``
  (:func:`phifit.intervals.bootstrap_interval`) with the Monte-Carlo error of each end.  A
  replicate fails as in the block bootstrap (phi not identified in its draw, no more distinct
  runs than free parameters, a refit that does not converge); with more than
  :data:`~phifit.bootstrap.result.MAX_FAILED_SHARE` failed no interval is given.
- **Reading** (:mod:`phifit.diagnostics.parts_result`): whether the interval lies inside (0, 1),
  excludes phi = 0 and excludes phi = 1, against the same reading of the full table's interval
  (the fit's attached bootstrap interval, else ``n_boot`` replicates drawn here).  "A restricted
  law stops being rejected" is read from the intervals, not from wild cluster tests: the wild
  tests of phi = 0 and phi = 1 cost about as much per part as the whole table's comparison.
- **Lack of fit** of r^phi (the wild cluster test of one phi against one free multiplier per r,
  :func:`phifit.diagnostics.phi_checks.multiplier_check`) costs seconds per part, so by default
  (``lack_of_fit="changed"``) it is rerun only for the parts whose removal already changes the
  reading of phi's interval beyond Monte-Carlo error and compared with the full table's test;
  ``"all"`` tests every part, ``"none"`` none.  A part whose fit puts phi on its search bound is
  not tested (no interval, and the test's one-phi law is not located).
- **No verdict to carry**: when the full table's interval already holds both phi = 0 and
  phi = 1, no part is left out (the result has no rows and its headline says why): a part can
  only change a reading the full table gives, and at :data:`PARTS_N_BOOT` replicates a part's
  interval cannot settle a new exclusion (below).  On tables where phi is not determined this
  also saves the refits that crawl along the box's bounds.
- **Not left out**: a part whose removal leaves phi unidentified (no looped run left, or a single
  value of r: r = 1 with one looped r, or two looped r, are needed), leaves no more runs than the
  law has free parameters, leaves the free law fewer than 2 cells of freedom
  (:func:`phifit.bootstrap.wild.too_few_clusters`), or leaves one token count (B and beta no
  longer identified).  Its row says why.

Monte-Carlo precision: with ``n_boot`` replicates a 95% percentile end sits among the few most
extreme replicates.  With :data:`PARTS_N_BOOT` = 39 the ends are about the smallest and largest
of 39 (a range whose expected coverage is 38/40 = 95%); each end's Monte-Carlo error is given
(0.01-0.05 on the study's table, up to 1 or more where the replicates spread over a second basin).
A change of reading counts only when it is beyond Monte-Carlo error on both sides
(:func:`settled`: the count of replicates beyond phi = 0 or 1 is improbable, P < 1%, under a tail
share of exactly 2.5%, for the part and for the full table): at 39 replicates a part's interval
settles an inclusion from 5 replicates beyond the value (13%) on, never an exclusion (that needs
182), so "phi = 0 no longer excluded" can be named and "phi = 0 now excluded" only reported as
within Monte-Carlo error.  Changes within it are listed apart (``unsure_flips``), not in the
headline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import defaults
from ..bootstrap.block import draw_weights
from ..bootstrap.result import intervals_withheld
from ..bootstrap.sequential import DEFAULT_RULE, StopRule
from ..bootstrap.wild import too_few_clusters
from ..fitters.common import effective_spec
from ..fitters.objective import refit_settings
from ..fitters.parallel import parallel_map
from ..fitters.refit import identifiable_rows, refit_weighted
from ..intervals import bootstrap_interval, param_bounds
from ..law import LawSpec
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from .parts_result import (
    FAMILIES,
    PartRow,
    PartsResult,
    flips,
    headline_text,
    interval_reading,
    no_verdict_text,
)

#: Bootstrap replicates per left-out part (the report's default; module docstring).
PARTS_N_BOOT = defaults.PARTS_N_BOOT
#: Spread starts of each leave-out bootstrap replicate besides its part's estimate.
BOOT_SPREAD = 2
#: Columns that name a model size, in order of preference.
SIZE_COLUMNS = ("size", "d_model")
#: What ``lack_of_fit`` may be: test the parts that change the reading, all parts, or none.
LACK_OF_FIT_MODES = ("changed", "all", "none")

__all__ = [
    "BOOT_SPREAD",
    "FAMILIES",
    "LACK_OF_FIT_MODES",
    "PARTS_N_BOOT",
    "Part",
    "PartRow",
    "PartsResult",
    "PendingParts",
    "far_count",
    "leave_one_part_out",
    "no_verdict",
    "reference_counts",
    "settled",
    "start_leave_one_part_out",
    "table_parts",
]


# ------------------------------------------------------------------------------ the parts
@dataclass(frozen=True)
class Part:
    """One part of a table: its family ("size", "budget" or "r"), the column that defines it, its
    value as text and the runs it holds (a mask over the table)."""

    family: str
    column: str
    label: str
    mask: np.ndarray

    @property
    def name(self) -> str:
        """How the part is named in text: "size 16", "budget 2e12", "r = 8"."""
        return f"r = {self.label}" if self.family == "r" else f"{self.family} {self.label}"


def _label(value: Any) -> str:
    """A part's value as short text: integers plainly, other numbers in 3 significant digits
    without the exponent's "+" and leading zeros (2e12), text as it is."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(x):
        return str(value)
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    text = f"{x:.3g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    return text


def _sorted_values(values: np.ndarray) -> list[Any]:
    """The distinct values, numerically when they all read as numbers, else as text."""
    distinct = pd.unique(pd.Series(values).dropna())
    try:
        return sorted(distinct, key=float)
    except (TypeError, ValueError):
        return sorted(distinct, key=str)


def table_parts(runs: RunTable, families: Sequence[str] = FAMILIES) -> tuple[list[Part], list[str]]:
    """(the parts of the table, notes on families it cannot split).

    Sizes: the ``size`` column, else ``d_model`` (what phifit's trainer and the study's table
    carry); a table with neither has no size parts (N_once + N_rec differs between r at one width,
    so it does not name a model size).  Budgets: the ``budget`` column.  r: the ``r`` column.  A
    family with a single value has no part to leave out."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown part families {', '.join(unknown)}; expected {', '.join(FAMILIES)}")
    frame = runs.frame
    parts: list[Part] = []
    notes: list[str] = []
    for family in [f for f in FAMILIES if f in families]:
        if family == "size":
            column = next((c for c in SIZE_COLUMNS if c in frame), None)
            if column is None:
                notes.append("no 'size' or 'd_model' column: model sizes are not left out")
                continue
        else:
            column = family
            if column not in frame:
                notes.append(f"no '{column}' column: {family}s are not left out")
                continue
        col = frame[column]
        values = _sorted_values(col.to_numpy())
        if len(values) < 2:
            notes.append(f"one {family} only: nothing to leave out")
            continue
        text = col.astype(str).to_numpy()
        for value in values:
            parts.append(Part(family, column, _label(value), text == str(value)))
    return parts, notes


# ------------------------------------------------------------------------------ the computation
def no_verdict(reference: Sequence[float | None] | None) -> bool:
    """Whether the full table's interval of phi (``reference``) holds both phi = 0 and phi = 1,
    so that it gives no verdict on phi for a part to carry (False without an interval)."""
    return interval_reading(reference) == (False, False, False)


def _why_not(runs: RunTable, keep: np.ndarray, fit_spec: LawSpec, codes: np.ndarray) -> str | None:
    """Why the table without a part (the runs ``keep``) cannot be refitted with the fit's law
    (None: it can); ``codes``: the table's (budget, r) cells."""
    if not identifiable_rows(runs, keep[None, :].astype(float))[0]:
        return "not identified without it: phi needs looped runs at two values of r (r = 1 counts)"
    n_free = int(fit_spec.free_mask.sum())
    if keep.sum() <= n_free:
        return f"not identified without it: {int(keep.sum())} runs for {n_free} free parameters"
    tokens = runs.tokens
    if len(np.unique(tokens[keep])) < 2 <= len(np.unique(tokens)):
        return "not identified without it: one token count left (B and beta not identified)"
    n_cells = len(np.unique(codes[keep]))
    if too_few_clusters(n_cells, n_free):
        return f"not identified without it: {n_cells} cells leave the free law ({n_free} parameters) too few"
    return None


def fit_without(runs: RunTable, method: str, fixed: dict[str, float], n_starts: int, seed: int) -> FitResult:
    """The point fit of a table without one part (a task of :func:`start_leave_one_part_out`)."""
    from ..fitters import fit

    return fit(runs, method=method, fix=fixed or None, n_starts=n_starts, seed=seed)


#: A reading of phi = 0 or 1 is settled when its count of replicates beyond the value would arise
#: with probability below this from a tail share of exactly (1 - level) / 2 (one-sided).
SETTLE_P = 0.01


def far_count(draws: np.ndarray, value: float) -> int:
    """Replicates on the far side of ``value``: the smaller of #{phi <= value} and #{phi >= value}
    (a percentile interval at level excludes ``value`` when this is below n (1 - level) / 2)."""
    return min(int(np.sum(draws <= value)), int(np.sum(draws >= value)))


def settled(k: int, n: int, level: float) -> bool:
    """Whether ``k`` of ``n`` replicates beyond a value settle the interval's reading of it beyond
    Monte-Carlo error: under a tail share of exactly a = (1 - level) / 2, K ~ Binomial(n, a), and
    the reading is settled when P(K >= k) < :data:`SETTLE_P` (inside the interval) or P(K <= k) <
    :data:`SETTLE_P` (outside).  At n = 39 and level 0.95 an inclusion is settled from k = 5 (13%)
    on and an exclusion never is (0 of n needs n >= 182); at n = 1000, k >= 38 or k <= 13."""
    if n <= 0:
        return False
    a = (1 - level) / 2

    def pmf(i: int) -> float:
        return math.exp(
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * math.log(a)
            + (n - i) * math.log1p(-a)
        )

    below = sum(pmf(i) for i in range(0, k + 1))
    above = 1.0 - below + pmf(k)
    return above < SETTLE_P or below < SETTLE_P


def reference_counts(fit: FitResult) -> tuple[tuple[int, int], int] | None:
    """(far counts of phi = 0 and phi = 1, successful replicates) of the bootstrap attached to
    ``fit`` (its ``phi_regions`` shares), or None when the fit does not say."""
    boot = fit.bootstrap or {}
    regions = boot.get("phi_regions") or {}
    n = int(boot.get("n") or 0) - int(boot.get("n_failed") or 0)
    if n <= 0 or "phi <= 0" not in regions or "phi >= 1" not in regions:
        return None
    le0, ge1 = float(regions["phi <= 0"]), float(regions["phi >= 1"])
    return (round(n * min(le0, 1 - le0)), round(n * min(ge1, 1 - ge1))), n


def _tails(draws: np.ndarray, phi: float) -> tuple[str, str]:
    """The share of replicates beyond phi = 0 and beyond phi = 1, on the far side from ``phi``,
    as text for :func:`~phifit.diagnostics.parts_result.flips`."""
    out = []
    for value in (0, 1):
        below = phi > value
        share = float(np.mean(draws <= value if below else draws >= value)) if len(draws) else math.nan
        out.append(f" ({share:.0%} of replicates at phi {'<=' if below else '>='} {value})")
    return out[0], out[1]


@dataclass
class PendingParts:
    """A leave-one-part-out analysis :func:`start_leave_one_part_out` started: the parts, why some
    are not left out, and their point fits (tasks already running on the workers);
    :meth:`result` waits for them, refits the bootstrap replicates and reads the intervals."""

    runs: RunTable
    fit: FitResult
    spec: LawSpec
    delta: float
    parts: list[Part]
    reasons: list[str | None]
    point_fits: Any
    options: dict[str, Any]
    notes: list[str]

    def result(self, reference_lack_of_fit: Any = None) -> PartsResult:
        """The :class:`PartsResult`.  ``reference_lack_of_fit``: the full table's free-multiplier
        check (:class:`~phifit.diagnostics.multiplier_result.MultiplierFit`) the parts' lack-of-fit
        tests are compared with; None: computed here when a part is tested."""
        o = self.options
        free = self.spec.free_mask
        reference = (self.fit.ci or {}).get("phi")
        own = reference is None or None in reference  # the full table's interval is drawn here
        streams = np.random.SeedSequence(o["seed"]).spawn(4)
        draw_rng = np.random.default_rng(streams[0])
        mc_seed = int(streams[2].generate_state(1)[0])
        level = o["level"]
        if own:  # first, so that a table with no verdict on phi refits no part
            weights = self._draws([-1], draw_rng)
            starts = np.repeat(self.fit.theta[free][None, :], o["n_boot"], axis=0)
            draws = self._refit(weights, starts, streams[3])
            iv = bootstrap_interval(draws, level=level, mc_seed=mc_seed)
            reference = [None, None] if not math.isfinite(iv.lo) else iv.to_list()
            source = f"{o['n_boot']}-replicate cell bootstrap of the full table, drawn here"
            ok = draws[np.isfinite(draws)]
            counts = (far_count(ok, 0.0), far_count(ok, 1.0)), len(ok)
        else:
            source = f"the fit's {int((self.fit.bootstrap or {}).get('n') or 0)}-replicate cell bootstrap"
            counts = reference_counts(self.fit)
        if no_verdict(reference):
            return self._without_parts(reference, source)
        laws = self._point_fits()
        todo = [j for j, law in enumerate(laws) if law is not None and "phi" not in law.at_bounds]
        starts = [laws[j].theta[free] for j in todo]
        weights = self._draws(todo, draw_rng)
        phis = self._refit(
            weights,
            np.repeat(np.array(starts).reshape(len(todo), int(free.sum())), o["n_boot"], axis=0),
            streams[1],
        )
        owner = np.repeat(np.array(todo, dtype=int), o["n_boot"])
        # the full table's reading of phi = 0 and 1 beyond Monte-Carlo error (an interval given
        # without its replicates' counts is taken as settled)
        ref_settled = (
            (True, True) if counts is None else tuple(settled(k, counts[1], level) for k in counts[0])
        )
        ref = interval_reading(reference)
        rows = [
            self._row(j, laws[j], phis[owner == j], ref, ref_settled, mc_seed) for j in range(len(self.parts))
        ]
        ref_lof, rows = self._lack_of_fit(rows, laws, ref, reference_lack_of_fit)
        bounds = param_bounds(self.fit, "phi")
        method = (
            f"each table without a part fitted as the full table was ({self.fit.method}, "
            f"{o['n_starts']} starts, seed {o['seed']}); its {o['n_boot']} cell-bootstrap "
            f"replicates refitted in one batch of 0-weighted tables, each from its part's estimate "
            f"and {BOOT_SPREAD} spread starts"
        )
        lof_p = None if ref_lof is None else ref_lof.p_value
        return self._assemble(reference, source, rows, lof_p, method, headline_text(rows, reference, bounds))

    def _without_parts(self, reference: list[float | None], source: str) -> PartsResult:
        """The result when the full table's interval holds both phi = 0 and phi = 1: no rows, the
        headline saying why (:func:`no_verdict`); the parts' point fits are not waited for."""
        bounds = param_bounds(self.fit, "phi")
        method = "no part left out: the full table's interval holds both phi = 0 and phi = 1"
        return self._assemble(
            reference, source, [], None, method, no_verdict_text(reference, bounds, self.options["level"])
        )

    def _assemble(
        self,
        reference: list[float | None],
        source: str,
        rows: list[PartRow],
        lack_of_fit_p: float | None,
        method: str,
        headline: str,
    ) -> PartsResult:
        """The :class:`PartsResult` of these rows, read against the full table's ``reference``."""
        o = self.options
        bounds = param_bounds(self.fit, "phi")
        ref = interval_reading(reference)
        return PartsResult(
            phi_hat=float(self.fit.phi),
            level=o["level"],
            reference_ci=list(reference),
            reference_source=source,
            reference_inside_01=ref[0],
            reference_excludes_0=ref[1],
            reference_excludes_1=ref[2],
            reference_lack_of_fit_p=lack_of_fit_p,
            rows=rows,
            n_boot=o["n_boot"],
            seed=o["seed"],
            lack_of_fit=o["lack_of_fit"],
            method=method,
            headline=headline,
            n_runs=len(self.runs),
            bounds=None if bounds is None else list(bounds),
            notes=list(self.notes),
        )

    def _point_fits(self) -> list[FitResult | None]:
        """Each part's point fit (None where the part is not left out, or its fit did not
        converge: the reason is then recorded)."""
        results = iter(self.point_fits)
        laws: list[FitResult | None] = []
        for j, part in enumerate(self.parts):
            law = None if self.reasons[j] is not None else next(results)
            if law is not None and (not law.converged or law.phi is None):
                self.reasons[j] = "not read: the fit without it did not converge"
                self.notes.append(f"without {part.name}: the fit did not converge; not read")
                law = None
            laws.append(law)
        return laws

    def _draws(self, owners: list[int], rng: np.random.Generator) -> np.ndarray:
        """(len(owners) * n_boot, n_runs) weights: for each owner (a part's index, -1 for the full
        table) ``n_boot`` draws of its remaining (budget, r) cells with replacement."""
        n_boot, n = self.options["n_boot"], len(self.runs)
        codes, _ = self.runs.cells(None)
        blocks = []
        for j in owners:
            keep = np.ones(n, dtype=bool) if j == -1 else ~self.parts[j].mask
            _, sub_codes = np.unique(codes[keep], return_inverse=True)
            w = np.zeros((n_boot, n))
            w[:, keep] = draw_weights(sub_codes, n_boot, rng)
            blocks.append(w)
        return np.concatenate(blocks) if blocks else np.zeros((0, n))

    def _refit(self, weights: np.ndarray, starts: np.ndarray, stream: np.random.SeedSequence) -> np.ndarray:
        """phi of every replicate (NaN where it failed: phi not identified in its draw, no more
        distinct runs than free parameters, a refit that did not converge)."""
        phis = np.full(len(weights), np.nan)
        if not len(weights):
            return phis
        o = self.options
        skip = ~identifiable_rows(self.runs, weights)
        skip |= (weights > 0).sum(axis=1) <= int(self.spec.free_mask.sum())
        out = refit_weighted(
            self.runs,
            self.spec,
            weights,
            starts,
            delta=self.delta,
            n_spread=BOOT_SPREAD,
            seed=np.random.default_rng(stream),
            chunk_size=max(50, -(-len(weights) // (2 * defaults.resolve_workers(o["parallel"]["n_jobs"])))),
            desc="leave one part out",
            skip=skip,
            **o["parallel"],
        )
        ok = out["converged"] & np.isfinite(out["objective"]) & ~skip
        phis[ok] = self.spec.full_theta(out["x"][ok])[:, 5]
        return phis

    def _row(
        self, j: int, law: FitResult | None, draws: np.ndarray, ref: tuple, ref_settled: tuple, mc_seed: int
    ) -> PartRow:
        """The row of part ``j`` from its point fit and its replicates' phi (NaN: failed)."""
        part, o = self.parts[j], self.options
        n_left = int(part.mask.sum())
        row: dict[str, Any] = {
            "family": part.family,
            "column": part.column,
            "label": part.label,
            "name": part.name,
            "n_left_out": n_left,
            "n_runs": len(self.runs) - n_left,
            "identified": law is not None,
            "reason": self.reasons[j],
            "phi": None,
            "delta_phi": None,
            "ci": [None, None],
            "mc_error": [None, None],
            "n_boot": 0,
            "n_failed": 0,
            "share_le0": None,
            "share_ge1": None,
            "inside_01": None,
            "excludes_0": None,
            "excludes_1": None,
        }
        if law is None:
            return PartRow(**row)
        if "phi" in law.at_bounds:  # not located: no bootstrap of an estimate on its boundary
            phi = float(law.phi)
            row.update(phi=phi, delta_phi=phi - float(self.fit.phi))
            return PartRow(**row, flips=[f"phi on its search bound ({phi:g}): not located by the table"])
        ok = draws[np.isfinite(draws)]
        n_failed = len(draws) - len(ok)
        if not intervals_withheld(n_failed, len(draws)) and len(ok) >= 2:
            iv = bootstrap_interval(ok, level=o["level"], mc_seed=mc_seed)
            row["ci"], row["mc_error"] = iv.to_list(), list(iv.mc_error)
        reading = interval_reading(row["ci"])
        marks = tuple(
            ref_settled[i] and settled(far_count(ok, value), len(ok), o["level"])
            for i, value in enumerate((0.0, 1.0))
        )
        row.update(
            phi=float(law.phi),
            delta_phi=float(law.phi) - float(self.fit.phi),
            n_boot=len(draws),
            n_failed=n_failed,
            share_le0=float(np.mean(ok <= 0)) if len(ok) else None,
            share_ge1=float(np.mean(ok >= 1)) if len(ok) else None,
            inside_01=reading[0],
            excludes_0=reading[1],
            excludes_1=reading[2],
        )
        firm, unsure = flips(ref, reading, marks, _tails(ok, float(law.phi)))
        return PartRow(**row, flips=firm, unsure_flips=unsure)

    def _lack_of_fit(
        self, rows: list[PartRow], laws: list[FitResult | None], ref: tuple, reference: Any
    ) -> tuple[Any, list[PartRow]]:
        """The rows with the lack-of-fit test of r^phi on the tables without the parts the mode
        asks for (their flips updated), and the full table's check they are compared with."""
        o = self.options
        mode = o["lack_of_fit"]
        # a part whose fit puts phi on its search bound is not tested: the one-phi law the test
        # starts from is not located there (and its refits crawl along the bound)
        todo = [
            i
            for i, row in enumerate(rows)
            if row.identified and None not in row.ci and (mode == "all" or (mode == "changed" and row.flips))
        ]
        if not todo or not o["n_wild"]:
            return reference, rows
        from .phi_checks import multiplier_check

        check = {
            "method": self.fit.method,
            "n_boot": 0,
            "n_wild": o["n_wild"],
            "seed": o["seed"],
            "n_starts": o["n_starts"],
            "wild_stop": o["wild_stop"],
            **o["parallel"],
        }
        if reference is None:
            reference = multiplier_check(self.runs, self.fit, **check)
        ref_lof = None if reference is None or not reference.testable else reference.rejected
        out = list(rows)
        for i in todo:
            row = rows[i]
            mult = multiplier_check(self.runs.subset(~self.parts[i].mask), laws[i], **check)
            p = rejected = note = None
            if mult is None or not mult.testable:
                note = "lack of fit not testable without it" + ("" if mult is None else f": {mult.reason}")
            else:
                p, rejected = mult.p_value, mult.rejected
            lof = flips((None, None, None), (None, None, None), ref_lof=ref_lof, part_lof=(rejected, p))[0]
            out[i] = PartRow(
                **{
                    **row.__dict__,
                    "lack_of_fit_p": p,
                    "lack_of_fit_rejected": rejected,
                    "lack_of_fit_note": note,
                    "flips": row.flips + lof,
                }
            )
        return reference, out


def start_leave_one_part_out(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    n_boot: int = PARTS_N_BOOT,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    families: Sequence[str] = FAMILIES,
    lack_of_fit: str = "changed",
    n_wild: int = defaults.N_WILD,
    wild_stop: StopRule | None = DEFAULT_RULE,
    n_starts: int = defaults.N_STARTS,
    n_jobs: int | None = 1,
    backend: str | None = None,
    scheduler: str | None = None,
) -> PendingParts:
    """Start :func:`leave_one_part_out` (its arguments; the same checks, raised here): the parts'
    point fits start as tasks on the workers; :meth:`PendingParts.result` finishes it."""
    runs = as_runs(runs)
    if fit.phi is None or "phi" in fit.fixed:
        raise ValueError("leave one part out: phi must be free and identified in the fit")
    if fit.n_runs != len(runs) or list(fit.run_ids) != runs.run_ids:
        raise ValueError("fit: the given fit was not fitted to these runs")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot (replicates per part) must be an integer >= 2, got {n_boot!r}")
    if lack_of_fit not in LACK_OF_FIT_MODES:
        raise ValueError(f"lack_of_fit must be one of {', '.join(LACK_OF_FIT_MODES)}, got {lack_of_fit!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    spec, delta = refit_settings(fit)
    fit_spec, _ = effective_spec(runs, spec)
    parts, notes = table_parts(runs, families)
    if no_verdict((fit.ci or {}).get("phi")):  # nothing for a part to carry: nothing to refit
        parts = []
    codes, _ = runs.cells(None)
    reasons = [_why_not(runs, ~p.mask, fit_spec, codes) for p in parts]
    fixed = {k: v for k, v in fit.spec.fixed.items() if k != "phi"}
    parallel = {"n_jobs": n_jobs, "backend": backend, "scheduler": scheduler}
    tasks = [
        (runs.subset(~p.mask), fit.method, fixed, n_starts, seed)
        for p, why in zip(parts, reasons)
        if why is None
    ]
    return PendingParts(
        runs=runs,
        fit=fit,
        spec=fit_spec,
        delta=delta,
        parts=parts,
        reasons=reasons,
        point_fits=parallel_map(fit_without, tasks, **parallel),
        options={
            "n_boot": int(n_boot),
            "seed": seed,
            "level": level,
            "lack_of_fit": lack_of_fit,
            "n_wild": n_wild,
            "wild_stop": wild_stop,
            "n_starts": n_starts,
            "parallel": parallel,
        },
        notes=notes,
    )


def leave_one_part_out(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    n_boot: int = PARTS_N_BOOT,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    families: Sequence[str] = FAMILIES,
    lack_of_fit: str = "changed",
    reference_lack_of_fit: Any = None,
    n_wild: int = defaults.N_WILD,
    wild_stop: StopRule | None = DEFAULT_RULE,
    n_starts: int = defaults.N_STARTS,
    n_jobs: int | None = 1,
    backend: str | None = None,
    scheduler: str | None = None,
) -> PartsResult:
    """Refit ``fit`` leaving out, in turn, each model size, each budget and each r, with phi's
    cell-bootstrap interval per refit, and say which part's removal changes the reading of phi
    (its interval against (0, 1), phi = 0 and phi = 1; the lack of fit of r^phi where tested).
    The module docstring gives the procedure and its Monte-Carlo precision.

    ``runs``: the table ``fit`` (Huber or least squares, phi free) was fitted to.  ``n_boot``:
    replicates per part.  The full table's interval is the fit's attached one (``fit.ci``, e.g.
    ``boot.attach(fit)``), else one of ``n_boot`` replicates drawn here.  ``families``: which of
    "size", "budget", "r" to leave out.  ``lack_of_fit``: "changed" (the wild test of r^phi on the
    tables without the parts whose removal changes the reading), "all" or "none";
    ``reference_lack_of_fit``: the full table's
    :func:`~phifit.diagnostics.phi_checks.multiplier_check` (computed when needed and not given);
    ``n_wild``, ``wild_stop``: those tests' replicates and stop rule.  ``n_starts``, ``seed``: of
    every point fit (as the full table's).  ``n_jobs``, ``backend``, ``scheduler``: where the fits
    and refits run (:mod:`phifit.fitters.parallel`); the results do not depend on them.

    Examples
    --------
    >>> import phifit
    >>> from phifit.diagnostics import leave_one_part_out
    >>> runs = phifit.load_runs("data/cpu_bpe_runs.csv")
    >>> parts = leave_one_part_out(runs, phifit.fit(runs))  # doctest: +SKIP
    >>> print(parts.headline)  # doctest: +SKIP
    >>> parts.to_frame()  # doctest: +SKIP
    """
    pending = start_leave_one_part_out(
        runs,
        fit,
        n_boot=n_boot,
        seed=seed,
        level=level,
        families=families,
        lack_of_fit=lack_of_fit,
        n_wild=n_wild,
        wild_stop=wild_stop,
        n_starts=n_starts,
        n_jobs=n_jobs,
        backend=backend,
        scheduler=scheduler,
    )
    return pending.result(reference_lack_of_fit)
