"""A confidence set for phi by inverting the restricted wild cluster bootstrap test over phi_0.

The set is every phi_0 in phi's box that the test of :mod:`phifit.bootstrap.wild` does not
reject at level 1 - ``level`` (Roodman, MacKinnon, Nielsen and Webb 2019, "Fast and wild",
Stata J. 19(1), the confidence sets of ``boottest``):

    C = {phi_0 : p(phi_0) >= 1 - level},
    p(phi_0) = (1 + #{b : T*_b(phi_0) >= T(phi_0)}) / (1 + B'(phi_0)),
    T(phi_0) = F(phi_0) - F_free,

F(phi_0) the fit's own objective (summed Huber on log-loss residuals) with phi held at phi_0,
F_free the free fit's.  T*_b(phi_0) is the same drop on the table y*_b = y0(phi_0) + v_bc e~(phi_0)
built from the fit at phi_0, with **one weight matrix v shared by every phi_0** (the same seed
draws it each time), so p(phi_0) moves smoothly with phi_0 and the set agrees, point by point,
with the test of phi = phi_0 that ``phifit compare`` reports.  Unlike the percentile interval of
the block bootstrap, the set answers "which phi_0 does the test keep?": it may be a union of
pieces (two basins of the objective) or reach a bound of the box, and says so.

Cost.  A bootstrap evaluation at one phi_0 refits both laws to B tables; the profile F(phi_0)
alone is one warm-started fit, far cheaper (docs/benchmarks.md, 'Figures once kept in
docstrings').  So:

1. the profile T(phi_0) on a fine grid (``fine_step``), each fit warm-started from its
   neighbour and from the free estimate;
2. the test at phi_hat and at a coarse grid over the box (``coarse_step``);
3. the critical value c(phi_0) (the smallest T the test rejects at phi_0, read from its T*) is
   interpolated linearly between tested points; the predicted boundary is where the exact
   profile T(phi_0) crosses the interpolated c(phi_0).  The test is run at the predicted
   crossing of each bracket (two tested neighbours on opposite sides) until each bracket is
   at most ``tol`` wide, and where the prediction says a piece hides between two tested
   points on the same side;
4. each end of a piece is the predicted crossing inside its final bracket; an end at a bound
   of the box is censored (the set may continue beyond what the box tests).

A piece narrower than ``fine_step`` between two tested points that both reject can be
missed; every tested phi_0 is inside the set exactly when its p >= 1 - level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import defaults
from ..cautions import Caution, caution, collect
from ..fitters.lm import batched_weighted_lm, finish_lm
from ..fitters.objective import law_model, loss_terms, refit_settings
from ..law import THETA_NAMES, LawSpec, log_loss
from ..result import FitResult
from ..serialize import JsonIO, to_plain
from . import wild
from .sequential import StopRule

if TYPE_CHECKING:
    import pandas as pd

    from ..runs.table import RunTable

SOURCE = "interval"
#: Replicates per tested phi_0 (p-values in steps of 1/200).
N_WILD_INVERT = 199


@dataclass(frozen=True)
class InvertedSet(JsonIO):
    """The test-inverted confidence set of phi (module docstring).

    ``grid``: the tested phi_0 (sorted) with ``p_values``, ``statistics`` T(phi_0),
    ``critical`` c(phi_0) and ``n_failed`` (replicates whose refits did not converge);
    ``profile_grid`` / ``profile``: T(phi_0) on the fine grid; ``pieces``: the set as
    [lo, hi] pieces, ``censored``: per piece, whether each end sits at a bound of ``box``;
    ``min_p``: the smallest p the test can report; ``n_used``: the replicates each tested phi_0's
    test refitted (fewer than ``n_boot`` where a stop rule settled p's side of alpha sooner,
    :mod:`phifit.bootstrap.sequential`; empty: all ``n_boot`` at every phi_0).
    """

    estimate: float
    level: float
    n_boot: int
    seed: int
    box: tuple[float, float]
    grid: list[float]
    p_values: list[float]
    statistics: list[float]
    critical: list[float]
    n_failed: list[int]
    pieces: list[tuple[float, float]]
    censored: list[tuple[bool, bool]]
    profile_grid: list[float] = field(default_factory=list)
    profile: list[float] = field(default_factory=list)
    weights: str = "rademacher"
    adjust: str = "none"
    block: str = ""
    n_blocks: int = 0
    min_p: float | None = None
    tol: float = 0.01
    warnings: list[Caution] = field(default_factory=list)
    n_used: list[int] = field(default_factory=list)

    @property
    def alpha(self) -> float:
        """The test's level: phi_0 is kept when p(phi_0) >= alpha = 1 - level."""
        return round(1.0 - self.level, 12)

    @property
    def is_interval(self) -> bool:
        """One piece, inside the box at both ends."""
        return len(self.pieces) == 1 and not any(self.censored[0])

    @property
    def total_failed(self) -> int:
        return int(sum(self.n_failed))

    def contains(self, phi0: float) -> bool:
        """Whether phi_0 lies in a piece of the set."""
        return any(lo <= phi0 <= hi for lo, hi in self.pieces)

    def p_value(self, phi0: float) -> float | None:
        """The tested p-value at phi_0 (None when phi_0 was not tested)."""
        for x, p in zip(self.grid, self.p_values, strict=True):
            if math.isclose(x, phi0, abs_tol=1e-12):
                return p
        return None

    def interval_text(self, digits: int = 3) -> str:
        """The pieces as "[lo, hi] ∪ [lo, hi]"; a censored end reads "<= -3" / ">= 3"."""
        if not self.pieces:
            return "empty"
        parts = []
        for (lo, hi), (clo, chi) in zip(self.pieces, self.censored, strict=True):
            left = f"({lo:.{digits}f}" if clo else f"[{lo:.{digits}f}"
            right = f"{hi:.{digits}f})" if chi else f"{hi:.{digits}f}]"
            parts.append(f"{left}, {right}")
        return " ∪ ".join(parts)

    def describe(self) -> str:
        """What the set is: one interval, a union of pieces, and/or cut by the box."""
        words = []
        if len(self.pieces) > 1:
            words.append(f"a union of {len(self.pieces)} pieces")
        if any(c for pair in self.censored for c in pair):
            words.append(
                f"unbounded within the box [{self.box[0]:g}, {self.box[1]:g}] (a round end is a bound)"
            )
        return "; ".join(words)

    def to_frame(self):
        """One row per tested phi_0 (sorted): ``phi0``, ``p_value``, ``statistic`` T(phi_0),
        ``critical`` c(phi_0), ``n_failed`` and ``kept`` (p >= 1 - level: phi_0 is in the set)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "phi0": self.grid,
                "p_value": self.p_values,
                "statistic": self.statistics,
                "critical": self.critical,
                "n_failed": self.n_failed,
                "kept": [p is not None and p >= self.alpha for p in self.p_values],
            }
        )

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "warnings"}
        if not self.n_used:  # every phi_0 ran all n_boot: the file reads as it always did
            del out["n_used"]
        out["warnings"] = [w.to_dict() for w in self.warnings]
        out["pieces"] = [list(p) for p in self.pieces]
        out["censored"] = [list(c) for c in self.censored]
        out["box"] = list(self.box)
        out["method"] = "inverted restricted wild cluster bootstrap test (one weight draw for every phi_0)"
        return to_plain(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InvertedSet:
        names = set(cls.__dataclass_fields__)
        kw = {k: v for k, v in data.items() if k in names}
        kw["warnings"] = [Caution.from_dict(w, source=SOURCE) for w in data.get("warnings") or []]
        kw["pieces"] = [(float(lo), float(hi)) for lo, hi in data.get("pieces") or []]
        kw["censored"] = [(bool(a), bool(b)) for a, b in data.get("censored") or []]
        kw["box"] = (float(data["box"][0]), float(data["box"][1]))
        for key in ("grid", "p_values", "statistics", "critical", "profile_grid", "profile"):
            # a critical value is infinite (JSON null) only when the test keeps every T
            missing = math.inf if key == "critical" else math.nan
            kw[key] = [missing if v is None else float(v) for v in data.get(key) or []]
        kw["n_failed"] = [int(v) for v in data.get("n_failed") or []]
        kw["n_used"] = [int(v) for v in data.get("n_used") or []]
        return cls(**kw)

    def summary(self) -> str:
        """Two lines: the set, then how it was computed."""
        extra = self.describe()
        floor = f", smallest attainable p {self.min_p:.2g}" if self.min_p is not None else ""
        failed = f", {self.total_failed} failed replicates" if self.total_failed else ""
        stopped = sum(n < self.n_boot for n in self.n_used)
        each = (
            f"at most {self.n_boot} replicates each ({stopped} stopped after {min(self.n_used)}-"
            f"{max(n for n in self.n_used if n < self.n_boot)} once p's side of {self.alpha:.2g} was settled)"
            if stopped
            else f"{self.n_boot} replicates each"
        )
        return (
            f"phi {100 * self.level:g}% test-inverted set: {self.interval_text()}"
            + (f" ({extra})" if extra else "")
            + f"\n    the phi_0 the restricted wild cluster bootstrap keeps at p >= {self.alpha:.2g} "
            f"({len(self.grid)} tested phi_0, {each} with one shared draw of "
            f"{self.weights} weights per {self.block} block, {self.n_blocks} blocks{floor}{failed})"
        )


def _objective(pred: np.ndarray, y: np.ndarray, delta: float) -> float:
    return float(loss_terms(pred - y, delta).sum())


class _Profile:
    """F(phi_0): the law fitted with phi held at phi_0, warm-started from the nearest fitted
    phi_0 and from the free estimate (the lower end of the two is kept)."""

    def __init__(self, spec: LawSpec, design, y: np.ndarray, delta: float, theta_free: np.ndarray):
        self.spec, self.design, self.y, self.delta = spec, design, y, delta
        self.theta_free = theta_free
        self.theta: dict[float, np.ndarray] = {}
        self.value: dict[float, float] = {}

    def null_spec(self, phi0: float) -> LawSpec:
        return LawSpec(fixed={**dict(self.spec.fixed), "phi": float(phi0)}, bounds=dict(self.spec.bounds))

    def fit(self, phi0: float) -> tuple[np.ndarray, float]:
        """(full theta, objective) of the fit at phi_0."""
        phi0 = float(phi0)
        if phi0 in self.value:
            return self.theta[phi0], self.value[phi0]
        spec0 = self.null_spec(phi0)
        mask = spec0.free_mask
        starts = [self.theta_free[mask]]
        if self.theta:
            near = min(self.theta, key=lambda v: abs(v - phi0))
            starts.append(self.theta[near][mask])
        model = law_model(spec0, self.design)
        x0 = np.clip(np.array(starts), spec0.lower, spec0.upper)
        end = batched_weighted_lm(model, x0, self.y, 1.0, spec0.lower, spec0.upper, delta=self.delta)
        if not end.converged.all():
            more = finish_lm(
                model,
                end.x,
                self.y,
                1.0,
                spec0.lower,
                spec0.upper,
                delta=self.delta,
                max_iter=wild.FINISH_ITER,
            )
            better = np.isfinite(more.objective) & (more.objective <= end.objective)
            x = np.where(better[:, None], more.x, end.x)
            obj = np.where(better, more.objective, end.objective)
        else:
            x, obj = end.x, end.objective
        obj = np.where(np.isfinite(obj), obj, np.inf)
        best = int(np.argmin(obj))
        theta = spec0.full_theta(x[best])
        value = _objective(log_loss(theta, self.design), self.y, self.delta)
        self.theta[phi0], self.value[phi0] = theta, value
        return theta, value

    def sweep(self, grid: np.ndarray, start: float) -> None:
        """Fit every grid point, outwards from ``start`` so each starts from its neighbour."""
        self.fit(start)
        for phi0 in grid[grid >= start]:
            self.fit(phi0)
        for phi0 in grid[grid < start][::-1]:
            self.fit(phi0)


@dataclass
class _Tested:
    p: float
    statistic: float
    critical: float
    n_failed: int
    test: wild.WildTest

    def keeps(self, alpha: float) -> bool:
        return self.p >= alpha * (1 - 1e-9)  # 1 - 0.95 is a hair above 0.05


def _critical(stats: np.ndarray, ok: np.ndarray, alpha: float) -> float:
    """The largest T the test keeps at level alpha: the k-th largest valid T*, k the fewest
    exceedances with (1 + k) / (1 + B') >= alpha (inf when every T is kept, -inf when none)."""
    valid = np.sort(stats[ok])[::-1]
    n_ok = len(valid)
    k = max(0, math.ceil(alpha * (1 + n_ok) - 1 - 1e-9))
    if k == 0:
        return math.inf
    if k > n_ok:
        return -math.inf
    return float(valid[k - 1])


def phi_confidence_set(
    runs: RunTable | pd.DataFrame,
    free: FitResult,
    *,
    level: float = 0.95,
    n_boot: int = N_WILD_INVERT,
    seed: int = defaults.SEED,
    block: str | None = None,
    coarse_step: float = 1.0,
    fine_step: float = 0.05,
    tol: float = 0.01,
    max_tests: int = 40,
    flat_width: float = 0.1,
    adjust: str | None = None,
    weights: str = "auto",
    n_jobs: int | None = 1,
    stop: bool = False,
    recipe: str | None = None,
) -> InvertedSet:
    """The ``level`` confidence set of phi by inverting the restricted wild cluster bootstrap
    test of phi = phi_0 against ``free`` (module docstring), with one weight draw (``seed``)
    for every phi_0.

    ``free``: a Huber or least-squares fit of ``runs`` with phi free.  ``block``: the clusters
    (default the (budget, r) cells).  ``coarse_step``: spacing of the first tested grid over
    phi's box; ``fine_step``: spacing of the profile; ``tol``: width of the final bracket of
    each end (or ``flat_width`` where p stays within one replicate step of the level across the
    bracket); ``max_tests``: most bootstrap evaluations.  ``adjust``, ``weights``: as
    :func:`phifit.bootstrap.wild.wild_cluster_statistics` takes them (``adjust`` None: its
    default).  ``n_jobs``: workers of each evaluation's refits.  ``stop``: each phi_0's test may
    stop before ``n_boot`` replicates once p's side of 1 - ``level`` is settled
    (:class:`phifit.bootstrap.sequential.StopRule` at that level); the tests near the set's ends,
    whose p lies near the level, run all ``n_boot``, and c(phi_0) of a stopped test comes from
    the replicates it used.  ``recipe``: the recipe of a table whose ``variant`` column holds
    several (default the one ``free`` was fitted to, else "baseline";
    :func:`phifit.recipes.pairing.recipe_runs`).
    """
    from ..fitters.common import effective_spec
    from ..runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=free)  # one recipe of a mixed table, as --variant picks it
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_boot < defaults.N_WILD_MIN:
        raise ValueError(
            f"n_boot must be >= {defaults.N_WILD_MIN} for a p-value at the 5% level, got {n_boot}"
        )
    if free.phi is None or "phi" in free.fixed:
        raise ValueError("the test-inverted set needs a fit with phi free")
    adjust = wild.DEFAULT_ADJUST if adjust is None else adjust
    spec, delta = refit_settings(free)
    spec, _ = effective_spec(runs, spec)
    if "phi" in spec.fixed:
        raise ValueError("phi is not identifiable from these runs: no confidence set to invert")
    lo_box, hi_box = (float(v) for v in spec.bounds["phi"])
    phi_hat = float(np.clip(free.phi, lo_box, hi_box))
    codes, label = runs.cells(block)
    search = _Search(
        runs,
        spec,
        delta,
        free.theta,
        codes=codes,
        alpha=round(1.0 - level, 12),
        n_boot=n_boot,
        seed=seed,
        test_options={
            "block": label,
            "adjust": adjust,
            "weights": weights,
            "n_jobs": n_jobs,
            "stop": StopRule(level=round(1.0 - level, 12)) if stop else None,
        },
        flat_width=flat_width,
    )
    n_fine = max(2, int(round((hi_box - lo_box) / fine_step)) + 1)
    fine = np.linspace(lo_box, hi_box, n_fine)
    search.profile.sweep(fine, phi_hat)
    exhausted = search.run(fine, phi_hat, coarse_step=coarse_step, tol=tol, max_tests=max_tests)
    pieces, censored = search.pieces(exhausted)
    cautions = search.cautions(pieces, censored, exhausted=exhausted, max_tests=max_tests, tol=tol)
    tested = search.tested
    xs = sorted(tested)
    per_point = [w for x in xs for w in tested[x].test.warnings if w.kind != "wild_failed"]
    first = tested[xs[0]].test
    profile = search.profile.value
    return InvertedSet(
        estimate=float(free.phi),
        level=level,
        n_boot=n_boot,
        seed=seed,
        box=(lo_box, hi_box),
        grid=[float(x) for x in xs],
        p_values=[tested[x].p for x in xs],
        statistics=[tested[x].statistic for x in xs],
        critical=[tested[x].critical for x in xs],
        n_failed=[tested[x].n_failed for x in xs],
        pieces=pieces,
        censored=censored,
        profile_grid=[float(x) for x in sorted(profile)],
        profile=[max(profile[x] - search.f_free, 0.0) for x in sorted(profile)],
        weights=first.weights,
        adjust=adjust,
        block=label,
        n_blocks=search.n_blocks,
        min_p=min((tested[x].test.min_p for x in xs if tested[x].test.min_p is not None), default=None),
        tol=tol,
        warnings=collect(cautions, per_point[:1]),
        n_used=[tested[x].test.n_boot for x in xs] if stop else [],
    )


class _Search:
    """One inversion (module docstring, steps 1-4): the profile T(phi_0) = F(phi_0) - F_free,
    the phi_0 tested so far with their bootstrap tests, the critical value c(phi_0)
    interpolated between them, and the phi_0 to test next.

    Every profile fit is warm-started from the nearest phi_0 fitted before it, so the order of
    the calls below is part of the result."""

    def __init__(
        self,
        runs: RunTable,
        spec: LawSpec,
        delta: float,
        theta_free: np.ndarray,
        *,
        codes: np.ndarray,
        alpha: float,
        n_boot: int,
        seed: int,
        test_options: dict[str, Any],
        flat_width: float,
    ):
        self.design, self.y = runs.design, runs.log_loss
        self.spec, self.delta, self.theta_free = spec, delta, theta_free
        self.box = tuple(float(v) for v in spec.bounds["phi"])
        self.f_free = _objective(log_loss(theta_free, self.design), self.y, delta)
        self.codes, self.n_blocks = codes, int(codes.max()) + 1
        self.alpha, self.n_boot, self.seed, self.flat_width = alpha, n_boot, seed, flat_width
        self.test_options = test_options
        self.alt_model = law_model(spec, self.design)
        self.profile = _Profile(spec, self.design, self.y, delta, theta_free)
        self.tested: dict[float, _Tested] = {}

    def drop(self, phi0: float) -> float:
        """T(phi_0) = F(phi_0) - F_free (not clipped at 0)."""
        return self.profile.fit(phi0)[1] - self.f_free

    def test(self, phi0: float) -> None:
        """Run the restricted wild cluster bootstrap test of phi = phi_0 (once per phi_0)."""
        self.test_many([phi0])

    def test_many(self, points: Sequence[float]) -> None:
        """Test each phi_0 of ``points`` not tested yet: first their profile fits, in this order
        (each warm-starts from the nearest fitted before it), then their bootstrap tests side
        by side (:func:`phifit.bootstrap.wild.run_wild_jobs`: each test's numbers are those it
        gives alone)."""
        design, spec, opts = self.design, self.spec, self.test_options
        todo: list[float] = []
        for phi0 in (float(x) for x in points):
            if phi0 not in self.tested and phi0 not in todo:
                self.profile.fit(phi0)
                todo.append(phi0)
        jobs, observed = [], []
        for phi0 in todo:
            theta0, f0 = self.profile.fit(phi0)
            spec0 = self.profile.null_spec(phi0)
            observed.append(max(f0 - self.f_free, 0.0))
            live = self.theta_free.copy()
            live[THETA_NAMES.index("phi")] = phi0  # the free estimate with the null's phi_0
            null = wild.Refit(
                law_model(spec0, design),
                spec0.lower,
                spec0.upper,
                wild.null_starts(spec0, theta0, live, design),
            )
            alternative = wild.Refit(
                self.alt_model,
                spec.lower,
                spec.upper,
                (theta0[spec.free_mask], self.theta_free[spec.free_mask]),
            )
            jobs.append(
                wild.prepare_wild(
                    self.y,
                    log_loss(theta0, design),
                    self.codes,
                    null,
                    alternative,
                    self.delta,
                    self.n_boot,
                    np.random.default_rng(self.seed),  # one weight draw for every phi_0
                    adjust=opts["adjust"],
                    weights=opts["weights"],
                    observed=observed[-1],
                    stop=opts["stop"],
                )
            )
        results = wild.run_wild_jobs(jobs, n_jobs=opts["n_jobs"])
        for phi0, t, (stats, ok) in zip(todo, observed, results, strict=True):
            result = wild.wild_test_result(
                self.profile.null_spec(phi0).label(),
                t,
                stats,
                ok,
                block=opts["block"],
                n_blocks=self.n_blocks,
                seed=self.seed,
                source=SOURCE,
                weights=opts["weights"],
                adjust=opts["adjust"],
                n_max=self.n_boot,
                stop=opts["stop"],
            )
            critical = _critical(stats, ok, self.alpha)
            self.tested[phi0] = _Tested(result.p_value, t, critical, result.n_failed, result)

    def margin(self, phi0: float) -> float:
        """Predicted T - c at phi_0 (<= 0: kept).  Between two tested neighbours c is
        interpolated linearly in T (the critical value grows with the drop T itself, about
        linearly; linearly in phi_0 where T hardly changes between them); beyond the outermost
        tested point the ratio c / T is held."""
        t = max(self.drop(phi0), 0.0)
        xs = sorted(self.tested)
        ts = [self.tested[x].statistic for x in xs]
        cs = [self.tested[x].critical for x in xs]
        k = int(np.searchsorted(xs, phi0))
        if k < len(xs) and xs[k] == phi0:
            return ts[k] * (1 - 1e-9) - cs[k]
        if k == 0 or k == len(xs):
            near = 0 if k == 0 else len(xs) - 1
            if not math.isfinite(cs[near]):
                return -1.0 if cs[near] > 0 else 1.0
            c = cs[near] * t / ts[near] if ts[near] > 0 else cs[near]
            return t - c
        a, b = k - 1, k
        if not (math.isfinite(cs[a]) and math.isfinite(cs[b])):
            return -1.0 if min(cs[a], cs[b]) > 0 else 1.0
        if abs(ts[b] - ts[a]) > 1e-3 * max(ts[a], ts[b], 1e-300):
            w = (t - ts[a]) / (ts[b] - ts[a])
        else:
            w = (phi0 - xs[a]) / (xs[b] - xs[a])
        return t - (cs[a] + w * (cs[b] - cs[a]))

    def crossing(self, a: float, b: float) -> float:
        """The predicted boundary between tested a < b on opposite sides: the first sign
        change of T(phi_0) - c(phi_0) on a subdivision, then bisection (each T a warm-started
        profile fit)."""
        kept_a = self.tested[a].keeps(self.alpha)
        lo, hi = a, b
        for x in np.linspace(a, b, 9)[1:-1]:
            if (self.margin(x) <= 0) != kept_a:
                hi = x
                break
            lo = x
        for _ in range(12):
            mid = 0.5 * (lo + hi)
            if (self.margin(mid) <= 0) == kept_a:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    def flat(self, a: float, b: float) -> bool:
        """Whether a bracket is as resolved as the p-values allow: both ends within one
        replicate step of the level and at most ``flat_width`` apart (T and c run side by
        side there, and the crossing moves with the draws more than the search could place it)."""
        tested, alpha = self.tested, self.alpha
        steps = [1.0 / (1.0 + tested[x].test.n_ok) for x in (a, b)]
        near = all(abs(tested[x].p - alpha) <= 1.5 * st for x, st in zip((a, b), steps, strict=True))
        return near and b - a <= self.flat_width

    def run(
        self, fine: np.ndarray, phi_hat: float, *, coarse_step: float, tol: float, max_tests: int
    ) -> bool:
        """Test phi_hat and a coarse grid, then the proposals of :meth:`proposals` round by
        round until none is left (a round that would pass ``max_tests`` is cut to fit); whether
        the search was stopped by ``max_tests``.

        The box's ends are tested only where the prediction says the set may reach them:
        refits with phi held at a bound are slow and the test there is seldom in doubt."""
        lo_box, hi_box = self.box
        n_coarse = max(3, int(round((hi_box - lo_box) / coarse_step)) + 1)
        self.test_many([phi_hat, *np.linspace(lo_box, hi_box, n_coarse)[1:-1]])
        exhausted = False
        while True:
            proposals = self.proposals(fine, tol)
            if not proposals:
                break
            if len(self.tested) + len(proposals) > max_tests:
                exhausted = True
                proposals = proposals[: max(0, max_tests - len(self.tested))]
                if not proposals:
                    break
            self.test_many(proposals)
        return exhausted

    def proposals(self, fine: np.ndarray, tol: float) -> list[float]:
        """The phi_0 to test next: the predicted crossing inside each bracket wider than ``tol``
        whose ends disagree (unless :meth:`flat`); a fine-grid point where the prediction says
        a piece hides between two tested points that agree; and, beyond the outermost tested
        points, a fine-grid point (or the box's end) where the set may continue or reappear."""
        tested, alpha = self.tested, self.alpha
        xs = sorted(tested)
        proposals: list[float] = []
        for a, b in zip(xs[:-1], xs[1:], strict=True):
            if b - a <= tol:
                continue
            ka, kb = tested[a].keeps(alpha), tested[b].keeps(alpha)
            if ka != kb:
                if self.flat(a, b):
                    continue
                x = self.crossing(a, b)
                proposals.append(float(np.clip(x, a + tol / 2, b - tol / 2)))
                continue
            inner = fine[(fine > a + tol / 2) & (fine < b - tol / 2)]
            if not len(inner):
                continue
            m = np.array([self.margin(x) for x in inner])
            if ka and m.max() > 0:
                proposals.append(float(inner[int(np.argmax(m))]))
            elif not ka and m.min() <= 0:
                proposals.append(float(inner[int(np.argmin(m))]))
        lo_box, hi_box = self.box
        for edge, near, outer in (
            (lo_box, xs[0], fine[fine < xs[0] - tol / 2]),
            (hi_box, xs[-1], fine[fine > xs[-1] + tol / 2]),
        ):
            if not len(outer) or abs(near - edge) <= tol / 2:
                continue
            m = np.array([self.margin(x) for x in outer])
            if tested[near].keeps(alpha):
                proposals.append(float(outer[int(np.argmax(m))]) if m.max() > 0 else edge)
            elif m.min() <= 0:
                proposals.append(float(outer[int(np.argmin(m))]))
        return proposals

    def pieces(self, exhausted: bool) -> tuple[list[tuple[float, float]], list[tuple[bool, bool]]]:
        """The set as [lo, hi] pieces (runs of kept tested phi_0, each end the predicted
        crossing inside its final bracket) and, per piece, whether each end sits at a bound of
        the box (censored).  A search stopped by ``max_tests`` (``exhausted``) may leave a
        kept outermost point short of the box: the set reaches at least that far, and is
        reported as running to the box, censored."""
        lo_box, hi_box = self.box
        xs = sorted(self.tested)
        kept = [self.tested[x].keeps(self.alpha) for x in xs]
        pieces: list[tuple[float, float]] = []
        censored: list[tuple[bool, bool]] = []
        i = 0
        while i < len(xs):
            if not kept[i]:
                i += 1
                continue
            j = i
            while j + 1 < len(xs) and kept[j + 1]:
                j += 1
            if i == 0:
                lo = xs[0]
            else:
                lo = min(max(self.crossing(xs[i - 1], xs[i]), xs[i - 1] + 1e-12), xs[i])
            if j == len(xs) - 1:
                hi = xs[-1]
            else:
                hi = max(min(self.crossing(xs[j], xs[j + 1]), xs[j + 1] - 1e-12), xs[j])
            open_lo, open_hi = i == 0 and xs[0] > lo_box, j == len(xs) - 1 and xs[-1] < hi_box
            if (open_lo or open_hi) and not exhausted:
                raise RuntimeError("the search left a kept end untested")  # run() tests it
            lo, hi = (lo_box if open_lo else lo), (hi_box if open_hi else hi)
            pieces.append((float(lo), float(hi)))
            censored.append((i == 0 and lo <= lo_box, j == len(xs) - 1 and hi >= hi_box))
            i = j + 1
        return pieces, censored

    def cautions(
        self,
        pieces: list[tuple[float, float]],
        censored: list[tuple[bool, bool]],
        *,
        exhausted: bool,
        max_tests: int,
        tol: float,
    ) -> list[Caution]:
        """The set's cautions: the free fit is not the profile's minimum, the search stopped at
        ``max_tests``, the set is a union or reaches the box, replicates failed."""
        cautions: list[Caution] = []
        lo_box, hi_box = self.box
        values, f_free = self.profile.value, self.f_free
        best_profile = min(values.values())
        if best_profile < f_free * (1 - 1e-9) - 1e-12:
            where = min(values, key=values.get)
            cautions.append(
                caution(
                    SOURCE,
                    "free_fit_not_minimum",
                    f"the fit with phi held at {where:.3g} has a lower objective than the free fit "
                    f"({best_profile:.6g} < {f_free:.6g}): the free fit missed a basin; "
                    "refit with more starts",
                    phi=where,
                )
            )
        if exhausted:
            cautions.append(
                caution(
                    SOURCE,
                    "inverted_not_resolved",
                    f"the search stopped at {max_tests} tested phi_0: some ends of the set are "
                    f"located less precisely than {tol:g}",
                    max_tests=max_tests,
                )
            )
        if len(pieces) > 1:
            cautions.append(
                caution(
                    SOURCE,
                    "inverted_union",
                    f"the test-inverted set of phi is a union of {len(pieces)} pieces: the test keeps "
                    "phi_0 in separate basins of the objective",
                    level="note",
                    n_pieces=len(pieces),
                )
            )
        if any(c for pair in censored for c in pair):
            cautions.append(
                caution(
                    SOURCE,
                    "inverted_unbounded",
                    f"the test-inverted set of phi reaches a bound of phi's box [{lo_box:g}, {hi_box:g}]: "
                    "the test keeps phi_0 there and the set may continue beyond it",
                    level="note",
                )
            )
        xs = sorted(self.tested)
        failed = [x for x in xs if self.tested[x].n_failed]
        if failed:
            worst = max(self.tested[x].n_failed for x in failed)
            cautions.append(
                caution(
                    SOURCE,
                    "wild_failed",
                    f"{len(failed)} of {len(xs)} tested phi_0 had replicates whose refits did not "
                    f"converge (at most {worst} of {self.n_boot}); they were left out of those p-values",
                    n_points=len(failed),
                    max_failed=worst,
                )
            )
        return cautions


def outside_share(draws: Sequence[float], inverted: InvertedSet) -> float:
    """Share of bootstrap draws of phi outside the test-inverted set (NaN draws left out)."""
    values = np.asarray([d for d in draws if d is not None and np.isfinite(d)], dtype=float)
    if not len(values):
        return math.nan
    return float(np.mean([not inverted.contains(v) for v in values]))
