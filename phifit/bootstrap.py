"""Block bootstrap of the joint-law fit: resample blocks of runs, refit, read intervals.

Procedure (the reference study's, paper-notes section 2, with more replicates):

1. Split the runs into blocks.  Default: one block per (budget, r) cell when the table
   has a ``budget`` column (24 cells for the study's 116 runs); otherwise single runs;
   or the cells of any columns the user names (``block=["size", "r"]``).
2. For each of ``n`` replicates draw G blocks with replacement from the G non-empty
   blocks and concatenate their runs.  Because the objective is a *sum* over runs, the
   resampled table is the original one with integer weights w_i = the number of times
   run i's block was drawn:

       objective*(theta) = sum_i w_i Huber_delta(log L_hat_i(theta) - log L_i)

   (delta = inf for the least-squares method).
3. Refit every replicate with the same law, spec and box.  Instead of 500 fresh random
   starts per replicate, each replicate starts from the point estimate (warm start) and
   from ``n_spread`` spread starts (half drawn around the estimate with a standard
   deviation of 10% of each box width, half uniform in the box as the study draws its
   starts).  All replicates and starts run together through the vectorised projected
   Levenberg-Marquardt of :func:`phifit.fitters.engine.batched_weighted_lm`; spread starts
   that are still more than twice the warm start's objective after a short exploration
   are dropped.  The best end point per replicate is kept.  A replicate whose best end
   point has not met the LM's convergence rule (long flat valleys, e.g. E sliding towards
   its bound when a resampled table does not pin E down) is finished by the point fit's
   least-squares polish on its weighted objective (exact: run i enters w_i times).
   Chunks of replicates run in parallel with joblib (threads: the work is NumPy array
   code that releases the GIL).
4. A replicate *fails* when even the polish does not converge, its
   objective is not finite, or its resampled table cannot identify phi (no looped runs,
   or a single value of r).  Failed replicates are kept as NaN rows, counted by reason,
   and excluded from the intervals; they are never dropped silently.

Intervals at level 1 - a (default 95%):

- **percentile** (the study's): the a/2 and 1 - a/2 quantiles of the replicate values;
- **BCa** (Efron 1987): quantiles at Phi(z0 + (z0 + z_q) / (1 - acc (z0 + z_q))) for
  z_q = Phi^-1(a/2), Phi^-1(1 - a/2); bias correction
  z0 = Phi^-1((#{v* < v_hat} + #{v* = v_hat} / 2) / B) and acceleration from the
  delete-one-*block* jackknife, acc = sum (m - v_(j))^3 / (6 [sum (m - v_(j))^2]^1.5),
  m the mean of the jackknife values v_(j).

Monte-Carlo error of the interval ends: the standard deviation of each end over 1000
resamples (with replacement) of the B replicate values, with the jackknife acceleration
held fixed.  It measures only the error from using finitely many replicates (for a 95%
end it is about sqrt(0.025 * 0.975 / B) / density at the end; with B = 1000 this
estimate itself scatters by ~25%, as any estimate of a tail quantile's error does).

What the block bootstrap does not cover: anything systematic (the law's form), and
training noise that no resampled block shows.

Measured coverage (``benchmarks/bootstrap_coverage.py``: 200 tables simulated on the study's design
with log-noise sd 0.004, R^2 ~ 0.997, 300 replicates each): the 95% percentile interval of
phi covered the true phi in 91.0% (+/- 2.0%) of the tables with the default (budget, r)
cells as blocks (BCa: 92.0%), and in 95.0% (+/- 1.5%) with single runs as blocks (a
difference of 1.6 standard errors: suggestive, not conclusive). The widths are the same on
average (bootstrap sd 0.020 vs a true sd of phi_hat of 0.019); the difference is that 24
cells give a noisier per-table estimate of the spread (its coefficient of variation across
tables 24% vs 19%), and the tables where it comes out small are the misses. Cells stay the
default (the study's choice, and robust to noise shared within a cell); when run noise is
independent, ``block="run"`` is better calibrated. Read a 95% cell interval as roughly a
90% one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from .cautions import Caution, caution, collect
from .fitters.common import effective_spec
from .fitters.engine import DELTA, identifiable_rows, refit_weighted
from .fitters.huber import HuberOptions, fit_huber
from .law import PARAM_NAMES, THETA_NAMES, THETA_TO_PARAM, LawSpec
from .plain import to_plain
from .result import FitResult
from .runs import RunTable

BOOT_METHODS = ("huber", "lsq")
INTERVAL_KINDS = ("percentile", "bca")
_MC_RESAMPLES = 1000


# -- blocks ---------------------------------------------------------------------------------


def block_codes(runs: RunTable, block: str | Sequence[str] | None) -> tuple[np.ndarray, str]:
    """Integer block code per run and the block label: :meth:`phifit.runs.RunTable.cells`."""
    return runs.cells(block)


def draw_weights(codes: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, n_runs) integer weights: each run's multiplicity when G blocks are drawn with
    replacement from the G blocks, n times."""
    g = int(codes.max()) + 1
    draws = rng.integers(0, g, size=(n, g))
    counts = np.zeros((n, g))
    np.add.at(counts, (np.repeat(np.arange(n), g), draws.ravel()), 1.0)
    return counts[:, codes]


# -- intervals ------------------------------------------------------------------------------


def jackknife_acceleration(jack: np.ndarray) -> float:
    """acc = sum (m - v_j)^3 / (6 [sum (m - v_j)^2]^1.5), m = mean(v_j); NaN values ignored.

    Returns 0 when the jackknife values do not vary (the acceleration is then irrelevant).
    """
    jack = np.asarray(jack, dtype=float)
    jack = jack[np.isfinite(jack)]
    if len(jack) < 3:
        return float("nan")
    d = jack.mean() - jack
    ss = float(np.sum(d * d))
    if ss <= 0 or not np.isfinite(ss):
        return 0.0
    return float(np.sum(d**3) / (6.0 * ss**1.5))


def _bca_levels(values: np.ndarray, estimate: float, acc: float, level: float) -> np.ndarray:
    """Adjusted quantile levels of BCa for each row of ``values`` (R, B) -> (R, 2)."""
    values = np.atleast_2d(values)
    b = values.shape[1]
    prop = (np.sum(values < estimate, axis=1) + 0.5 * np.sum(values == estimate, axis=1)) / b
    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = norm.ppf(prop)
        zq = norm.ppf([(1 - level) / 2, (1 + level) / 2])
        num = z0[:, None] + zq[None, :]
        return norm.cdf(z0[:, None] + num / (1 - acc * num))


def _quantile_rows(sorted_values: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Linear-interpolation quantiles (NumPy's default) per row, q (R, 2) in [0, 1]."""
    b = sorted_values.shape[1]
    pos = np.clip(q, 0, 1) * (b - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, b - 1)
    frac = pos - lo
    rows = np.arange(len(sorted_values))[:, None]
    return sorted_values[rows, lo] * (1 - frac) + sorted_values[rows, hi] * frac


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval for one quantity.

    ``lo, hi`` the ends; ``mc_error`` the Monte-Carlo standard error of (lo, hi) from the
    finite number of replicates; ``n_used`` the replicates used (failed ones excluded).
    Iterating yields ``lo, hi``.
    """

    lo: float
    hi: float
    level: float
    kind: str
    mc_error: tuple[float, float]
    n_used: int

    def __iter__(self):
        return iter((self.lo, self.hi))

    def to_list(self) -> list[float]:
        return [self.lo, self.hi]

    def contains(self, value: float) -> bool:
        return bool(self.lo <= value <= self.hi)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(
            {
                "lo": self.lo,
                "hi": self.hi,
                "level": self.level,
                "kind": self.kind,
                "mc_error": list(self.mc_error),
                "n_used": self.n_used,
            }
        )


def bootstrap_interval(
    values: np.ndarray,
    *,
    level: float = 0.95,
    kind: str = "percentile",
    estimate: float | None = None,
    jackknife: np.ndarray | None = None,
    mc_seed: int = 0,
) -> Interval:
    """Percentile or BCa interval from replicate values (NaN = failed, excluded).

    BCa needs the point ``estimate`` and the delete-one-block ``jackknife`` values.  The
    Monte-Carlo error resamples the B values 1000 times (seeded by ``mc_seed``).
    """
    if kind not in INTERVAL_KINDS:
        raise ValueError(f"unknown interval kind {kind!r}; expected one of {', '.join(INTERVAL_KINDS)}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    values = np.asarray(values, dtype=float).ravel()
    ok = values[np.isfinite(values)]
    nan = float("nan")
    if len(ok) < 2:
        return Interval(nan, nan, level, kind, (nan, nan), len(ok))
    rng = np.random.default_rng(mc_seed)
    resampled = np.sort(ok[rng.integers(0, len(ok), size=(_MC_RESAMPLES, len(ok)))], axis=1)
    base = np.sort(ok)[None, :]
    if kind == "percentile":
        q = np.array([[(1 - level) / 2, (1 + level) / 2]])
        ends = _quantile_rows(base, q)[0]
        mc = _quantile_rows(resampled, np.repeat(q, _MC_RESAMPLES, axis=0)).std(axis=0, ddof=1)
    else:
        if estimate is None or jackknife is None:
            raise ValueError(
                "a BCa interval needs the point estimate and the jackknife values "
                "(estimate=..., jackknife=...), or pass a function of the params"
            )
        if np.ptp(ok) <= 1e-9 * max(1.0, float(np.median(np.abs(ok)))):
            # no spread (a noise-free table): BCa's bias correction is undefined and the
            # interval is the common value of the replicates
            return Interval(float(ok.min()), float(ok.max()), level, kind, (0.0, 0.0), len(ok))
        acc = jackknife_acceleration(jackknife)
        if not np.isfinite(acc) or not np.isfinite(estimate):
            return Interval(nan, nan, level, kind, (nan, nan), len(ok))
        q = _bca_levels(base, float(estimate), acc, level)
        if not np.all(np.isfinite(q)):  # every replicate on one side of the estimate
            return Interval(nan, nan, level, kind, (nan, nan), len(ok))
        ends = _quantile_rows(base, q)[0]
        qr = _bca_levels(resampled, float(estimate), acc, level)
        good = np.all(np.isfinite(qr), axis=1)
        mc = (
            _quantile_rows(resampled[good], qr[good]).std(axis=0, ddof=1)
            if good.sum() > 1
            else np.array([nan, nan])
        )
    return Interval(float(ends[0]), float(ends[1]), level, kind, (float(mc[0]), float(mc[1])), len(ok))


# -- the result -----------------------------------------------------------------------------


def _natural(thetas: np.ndarray) -> dict[str, np.ndarray]:
    """Natural parameters per row of theta (a, alpha, b, beta, e, phi)."""
    t = np.asarray(thetas, dtype=float)
    t = t[None, :] if t.ndim == 1 else t
    out = {}
    for i, coord in enumerate(THETA_NAMES):
        name = THETA_TO_PARAM[coord]
        out[name] = np.exp(t[:, i]) if coord in ("a", "b", "e") else t[:, i].copy()
    return out


@dataclass(frozen=True)
class BootstrapResult:
    """Replicates of a block bootstrap and the intervals read from them.

    Attributes
    ----------
    thetas : (n, 6) internal parameters (a, alpha, b, beta, e, phi) per replicate; NaN rows
        for failed replicates.
    params : natural parameter name -> (n,) array (NaN for failed replicates).
    failed : (n,) bool, True for replicates excluded from the intervals.
    failure_reasons : reason -> count.
    n, n_failed, block, n_blocks, seed, level, method.
    estimate : natural parameters of the point estimate the replicates started from.
    theta_hat : its internal parameters (6,).
    jackknife_thetas : (n_blocks, 6) delete-one-block refits (for BCa accelerations).
    fixed : parameters held fixed (no interval).
    ci, ci_bca : {param: [lo, hi]} at ``level`` for every free parameter.
    mc_error : {"percentile": {param: [se_lo, se_hi]}, "bca": {...}}.
    n_switched : replicates where a spread start beat the warm start (another basin).
    n_polished : replicates the vectorised LM left unconverged and the least-squares polish
        finished (counted as converged).
    warnings : plain-language notes.
    """

    thetas: np.ndarray
    params: dict[str, np.ndarray]
    failed: np.ndarray
    failure_reasons: dict[str, int]
    n: int
    n_failed: int
    block: str
    n_blocks: int
    seed: int
    level: float
    method: str
    estimate: dict[str, float | None]
    theta_hat: np.ndarray
    jackknife_thetas: np.ndarray
    fixed: dict[str, float]
    ci: dict[str, list[float]]
    ci_bca: dict[str, list[float]]
    mc_error: dict[str, dict[str, list[float]]]
    n_switched: int = 0
    n_polished: int = 0
    phi_identified: bool = True
    n_runs: int = 0
    warnings: list[str] = field(default_factory=list)

    # -- derived quantities -------------------------------------------------------------
    @property
    def jackknife_params(self) -> dict[str, np.ndarray]:
        return _natural(self.jackknife_thetas)

    def interval(
        self,
        values_per_draw: np.ndarray | Callable[[Mapping[str, np.ndarray]], Any],
        level: float = 0.95,
        kind: str = "percentile",
        jackknife: np.ndarray | None = None,
        estimate: float | None = None,
    ) -> Interval:
        """Interval for any quantity computed per replicate.

        ``values_per_draw`` is either an (n,) array aligned with the replicates (values on
        failed replicates are ignored), or a function ``f(params) -> array`` vectorised over
        a dict of natural-parameter arrays; with a function the point estimate and the
        jackknife values needed by BCa are computed for you.  With an array, BCa needs
        ``estimate`` (the quantity at the point estimate) and ``jackknife`` (at the
        delete-one-block refits, :attr:`jackknife_params`).
        """
        if callable(values_per_draw):
            func = values_per_draw
            values = np.asarray(func(self.params), dtype=float)
            if estimate is None:
                est = {k: np.array([v if v is not None else np.nan]) for k, v in self.estimate.items()}
                estimate = float(np.asarray(func(est), dtype=float).ravel()[0])
            if jackknife is None:
                jackknife = np.asarray(func(self.jackknife_params), dtype=float)
        else:
            values = np.asarray(values_per_draw, dtype=float)
        values = np.broadcast_to(values, (self.n,)) if values.ndim == 0 else values
        if values.shape != (self.n,):
            raise ValueError(
                f"values_per_draw must have one value per replicate ({self.n}), got shape {values.shape}"
            )
        values = np.where(self.failed, np.nan, values)
        return bootstrap_interval(
            values, level=level, kind=kind, estimate=estimate, jackknife=jackknife, mc_seed=self.seed + 1
        )

    def share(self, name: str, predicate: Callable[[np.ndarray], np.ndarray]) -> float:
        """Share of successful replicates where ``predicate(params[name])`` holds."""
        v = self.params[name][~self.failed]
        return float(np.mean(predicate(v))) if len(v) else float("nan")

    # -- views --------------------------------------------------------------------------
    def bootstrap_info(self) -> dict[str, Any]:
        """The ``bootstrap`` block of a FitResult (JSON contract: n, n_failed, block, ...)."""
        return to_plain(
            {
                "n": self.n,
                "n_failed": self.n_failed,
                "block": self.block,
                "n_blocks": self.n_blocks,
                "seed": self.seed,
                "level": self.level,
                "method": self.method,
                "failure_reasons": self.failure_reasons,
                "n_switched": self.n_switched,
                "n_polished": self.n_polished,
                "mc_error": self.mc_error,
                "interval": "percentile (ci) and BCa (ci_bca)",
            }
        )

    def attach(self, fit_result: FitResult) -> FitResult:
        """A copy of ``fit_result`` with ci, ci_bca and the bootstrap bookkeeping filled in.

        The fit must be the point estimate the bootstrap started from (same runs, same
        fixed parameters, same parameter values to a relative 1e-6).
        """
        if fit_result.n_runs != self.n_runs:
            raise ValueError("attach: the fit and the bootstrap use different run tables")
        if dict(fit_result.fixed) != dict(self.fixed):
            raise ValueError(
                f"attach: the fit holds {fit_result.fixed or 'nothing'} fixed but the "
                f"bootstrap held {self.fixed or 'nothing'} fixed"
            )
        for name in PARAM_NAMES:
            a, b = fit_result.params.get(name), self.estimate.get(name)
            if (a is None) != (b is None) or (
                a is not None and not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
            ):
                raise ValueError(
                    f"attach: the fit's {name} = {a} differs from the bootstrap's "
                    f"point estimate {b}; bootstrap around this fit instead"
                )
        return fit_result.with_updates(
            ci=dict(self.ci),
            ci_bca=dict(self.ci_bca),
            ci_level=self.level,
            bootstrap=self.bootstrap_info(),
            warnings=collect(
                fit_result.warnings,
                [
                    w if isinstance(w, Caution) else caution("bootstrap", "bootstrap", w)
                    for w in self.warnings
                ],
            ),
        )

    def summary(self) -> str:
        lines = [
            f"[[phifit: block bootstrap, {self.n} replicates of {self.n_blocks} blocks "
            f"'{self.block}', method={self.method}, seed={self.seed}]]",
            f"    failed replicates: {self.n_failed}"
            + (
                f" ({', '.join(f'{k}: {v}' for k, v in self.failure_reasons.items())})"
                if self.n_failed
                else ""
            ),
            f"    replicates where a spread start found a better basin: {self.n_switched}",
            f"    replicates finished by the least-squares polish: {self.n_polished}",
            "",
            f"    {'':<6} {'estimate':>11}   {'percentile ' + format(self.level, '.0%'):>24}"
            f"   {'BCa':>24}   {'MC error of ends (pct)':>22}",
        ]
        for name in PARAM_NAMES:
            if name not in self.ci:
                continue
            est = self.estimate.get(name)
            p, b = self.ci[name], self.ci_bca.get(name, [None, None])
            mc = self.mc_error["percentile"].get(name, [None, None])
            fmt = lambda v: f"{v:>10.5g}" if v is not None and np.isfinite(v) else f"{'n/a':>10}"  # noqa: E731
            lines.append(
                f"    {name:<6} {fmt(est):>11}   [{fmt(p[0])}, {fmt(p[1])}]   "
                f"[{fmt(b[0])}, {fmt(b[1])}]   {fmt(mc[0])} {fmt(mc[1])}"
            )
        if "phi" in self.ci and self.block == "budget,r":
            lines.append("")
            lines.append(
                "    note: on simulated study-like tables the 95% percentile interval of "
                "phi from (budget, r) cells"
            )
            lines.append(
                "    covered the truth in 91% of tables (95% with single-run blocks); "
                "see benchmarks/bootstrap_coverage.py"
            )
        if "phi" in self.ci:
            lines.append("")
            lines.append(
                f"    share of replicates with phi <= 0: "
                f"{self.share('phi', lambda v: v <= 0):.3f}; with phi >= 1: "
                f"{self.share('phi', lambda v: v >= 1):.3f}"
            )
        if self.warnings:
            lines += ["", "[[Notes]]"] + [f"    [{i}] {w}" for i, w in enumerate(self.warnings, 1)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (NaN -> null); :meth:`from_dict` reloads it."""
        return to_plain(
            {
                "generator": "phifit",
                "kind": "bootstrap",
                "n": self.n,
                "n_failed": self.n_failed,
                "failure_reasons": self.failure_reasons,
                "block": self.block,
                "n_blocks": self.n_blocks,
                "seed": self.seed,
                "level": self.level,
                "method": self.method,
                "estimate": self.estimate,
                "fixed": self.fixed,
                "ci": self.ci,
                "ci_bca": self.ci_bca,
                "mc_error": self.mc_error,
                "n_switched": self.n_switched,
                "n_polished": self.n_polished,
                "phi_identified": self.phi_identified,
                "n_runs": self.n_runs,
                "warnings": self.warnings,
                "theta_names": list(THETA_NAMES),
                "theta_hat": self.theta_hat,
                "thetas": self.thetas,
                "failed": self.failed,
                "jackknife_thetas": self.jackknife_thetas,
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BootstrapResult:
        def arr(key):
            return np.array(
                [[np.nan if v is None else v for v in row] for row in data[key]], dtype=float
            ).reshape(-1, len(THETA_NAMES))

        thetas = arr("thetas")
        return cls(
            thetas=thetas,
            params=_natural(thetas),
            failed=np.array(data["failed"], dtype=bool),
            failure_reasons=dict(data["failure_reasons"]),
            n=int(data["n"]),
            n_failed=int(data["n_failed"]),
            block=data["block"],
            n_blocks=int(data["n_blocks"]),
            seed=int(data["seed"]),
            level=float(data["level"]),
            method=data["method"],
            estimate=dict(data["estimate"]),
            theta_hat=np.array([np.nan if v is None else v for v in data["theta_hat"]], float),
            jackknife_thetas=arr("jackknife_thetas"),
            fixed=dict(data["fixed"]),
            ci={k: list(v) for k, v in data["ci"].items()},
            ci_bca={k: list(v) for k, v in data["ci_bca"].items()},
            mc_error={k: {p: list(v) for p, v in d.items()} for k, d in data["mc_error"].items()},
            n_switched=int(data.get("n_switched", 0)),
            n_polished=int(data.get("n_polished", 0)),
            phi_identified=bool(data.get("phi_identified", True)),
            n_runs=int(data.get("n_runs", 0)),
            warnings=list(data.get("warnings", [])),
        )


# -- the public entry point -----------------------------------------------------------------


def _point_fit(runs: RunTable, spec: LawSpec, method: str, seed: int) -> FitResult:
    if method == "huber":
        return fit_huber(runs, spec=spec, options=HuberOptions(seed=seed))
    from .fitters.lsq import fit_lsq

    return fit_lsq(runs, spec=spec, seed=seed)


def block_bootstrap(
    runs: RunTable,
    *,
    spec: LawSpec | None = None,
    n: int = 1000,
    block: str | Sequence[str] | None = None,
    seed: int = 0,
    n_jobs: int = 2,
    progress: bool = True,
    method: str = "huber",
    point: FitResult | None = None,
    level: float = 0.95,
    n_spread: int = 4,
    chunk_size: int = 125,
    jackknife: bool = True,
) -> BootstrapResult:
    """Block bootstrap of the joint-law fit (see the module docstring for the procedure).

    Parameters
    ----------
    runs
        Validated run table.
    spec
        Law specification (default: all six parameters free, the study's box).
    n
        Replicates (default 1000; the study used 200).
    block
        None: (budget, r) cells when a ``budget`` column exists, else single runs;
        ``"run"``: single runs; or column name(s), a list or ``"COL1,COL2"``.
    seed
        Seeds the block draws, the spread starts and the Monte-Carlo error (one
        independent stream each); results do not depend on ``n_jobs``.
    n_jobs
        Worker threads for the refits (joblib); 1 runs in this thread.
    progress
        Show a tqdm bar on stderr (only when stderr is a terminal).
    method
        "huber" (the study's objective) or "lsq" (least squares on log-loss).
    point
        The point estimate to start from (a FitResult of the same method and spec);
        fitted here when omitted.
    level
        Interval level (default 0.95).
    n_spread
        Spread starts per replicate besides the warm start.
    jackknife
        Compute the delete-one-block jackknife (needed for BCa; n_blocks extra refits).
    """
    if method not in BOOT_METHODS:
        raise ValueError(f"unknown bootstrap method {method!r}; expected one of {', '.join(BOOT_METHODS)}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n (bootstrap replicates) must be an integer >= 2, got {n!r}")
    if not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be a positive integer or -1 (all cores), got {n_jobs!r}")
    if n_spread < 0:
        raise ValueError(f"n_spread must be >= 0, got {n_spread}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    spec = spec or LawSpec()
    codes, label = block_codes(runs, block)
    n_blocks = int(codes.max()) + 1
    if n_blocks < 2:
        raise ValueError(
            f"block {label!r}: the table has a single block; the bootstrap needs "
            f"at least 2 (choose another --block)"
        )
    fit_spec, _ = effective_spec(runs, spec)
    phi_identified = "phi" not in fit_spec.fixed or "phi" in spec.fixed
    if point is None:
        point = _point_fit(runs, spec, method, seed)
    elif point.n_runs != len(runs) or dict(point.fixed) != dict(
        {k: v for k, v in fit_spec.fixed.items() if phi_identified or k != "phi"}
    ):
        raise ValueError("point: the given fit does not match these runs and this spec")
    elif point.method != method:
        raise ValueError(f"point: the given fit used method {point.method!r}, the bootstrap {method!r}")
    theta_hat = point.theta
    x_hat = theta_hat[fit_spec.free_mask]
    delta = DELTA if method == "huber" else math.inf
    if method == "huber" and "delta" in point.extras:
        delta = float(point.extras["delta"])

    streams = np.random.SeedSequence(seed).spawn(3)
    weights = draw_weights(codes, n, np.random.default_rng(streams[0]))
    ident = (
        identifiable_rows(runs, weights)
        if phi_identified and "phi" not in fit_spec.fixed
        else np.ones(n, dtype=bool)
    )
    too_few = (weights > 0).sum(axis=1) <= int(fit_spec.free_mask.sum())
    out = refit_weighted(
        runs,
        fit_spec,
        weights,
        x_hat,
        delta=delta,
        n_spread=n_spread,
        seed=np.random.default_rng(streams[1]),
        n_jobs=n_jobs,
        chunk_size=chunk_size,
        progress=progress,
        desc="bootstrap",
    )
    failure = {
        "phi not identifiable in the resampled table": ~ident,
        "fewer distinct runs than free parameters": ident & too_few,
        "objective not finite": ident & ~too_few & ~np.isfinite(out["objective"]),
        "did not converge": ident & ~too_few & np.isfinite(out["objective"]) & ~out["converged"],
    }
    failed = np.zeros(n, dtype=bool)
    for mask in failure.values():
        failed |= mask
    reasons = {k: int(v.sum()) for k, v in failure.items() if v.any()}
    thetas = fit_spec.full_theta(out["x"])
    thetas[failed] = np.nan
    params = _natural(thetas)

    if jackknife:
        jw = np.ones((n_blocks, len(runs)))
        jw[codes[None, :] == np.arange(n_blocks)[:, None]] = 0.0
        jout = refit_weighted(
            runs,
            fit_spec,
            jw,
            x_hat,
            delta=delta,
            n_spread=n_spread,
            seed=np.random.default_rng(streams[2]),
            n_jobs=1,
        )
        jack_ok = jout["converged"] & np.isfinite(jout["objective"])
        if phi_identified and "phi" not in fit_spec.fixed:
            jack_ok &= identifiable_rows(runs, jw)
        jack = fit_spec.full_theta(jout["x"])
        jack[~jack_ok] = np.nan
    else:
        jack = np.full((n_blocks, len(THETA_NAMES)), np.nan)
    jack_params = _natural(jack)

    estimate = dict(point.params)
    fixed = {k: v for k, v in fit_spec.fixed.items() if phi_identified or k != "phi"}
    free_names = [name for name in fit_spec.free_names]
    ci, ci_bca = {}, {}
    mc: dict[str, dict[str, list[float]]] = {"percentile": {}, "bca": {}}
    mc_seed = int(streams[2].generate_state(1)[0])
    bca_undefined = []
    for name in free_names:
        vals = params[name]
        p = bootstrap_interval(vals, level=level, kind="percentile", mc_seed=mc_seed)
        b = bootstrap_interval(
            vals,
            level=level,
            kind="bca",
            estimate=estimate[name],
            jackknife=jack_params[name],
            mc_seed=mc_seed,
        )
        ci[name], ci_bca[name] = p.to_list(), b.to_list()
        mc["percentile"][name], mc["bca"][name] = list(p.mc_error), list(b.mc_error)
        if not np.all(np.isfinite(b.to_list())):
            bca_undefined.append(name)

    warnings: list[str] = []
    n_failed = int(failed.sum())
    if n_failed:
        warnings.append(
            f"{n_failed} of {n} bootstrap replicates failed and are excluded from the "
            f"intervals ({'; '.join(f'{k}: {v}' for k, v in reasons.items())}); "
            f"if many failed, the intervals may be too narrow"
        )
    if jackknife and not np.all(np.isfinite(jack[:, fit_spec.free_mask])):
        warnings.append(
            f"{int((~np.all(np.isfinite(jack), axis=1)).sum())} of {n_blocks} "
            f"delete-one-block refits failed; BCa acceleration uses the rest"
        )
    if bca_undefined:
        warnings.append(
            f"BCa interval undefined for {', '.join(bca_undefined)} (every replicate "
            f"on one side of the estimate, or no jackknife); use the percentile one"
        )
    switched = int(out["switched"][~failed].sum())
    if switched:
        warnings.append(
            f"in {switched} replicates a spread start found a better optimum than "
            f"the warm start: the objective has several basins on resampled tables"
        )
    at_bounds = []
    for i, coord in enumerate(THETA_NAMES):
        name = THETA_TO_PARAM[coord]
        if name not in free_names:
            continue
        lo_b, hi_b = fit_spec.bounds[coord]
        values = thetas[~failed, i]
        count = int(
            np.sum(np.isclose(values, lo_b, rtol=0, atol=1e-9) | np.isclose(values, hi_b, rtol=0, atol=1e-9))
        )
        if count:
            at_bounds.append(f"{name} in {count}")
    if at_bounds:
        warnings.append(
            f"replicates with a parameter at its box bound: {', '.join(at_bounds)} "
            f"(the resampled tables do not pin it down)"
        )
    if n_blocks < 10:
        warnings.append(
            f"only {n_blocks} blocks: a block bootstrap with this few blocks "
            f"understates uncertainty; read the intervals as rough"
        )

    result = BootstrapResult(
        thetas=thetas,
        params=params,
        failed=failed,
        failure_reasons=reasons,
        n=int(n),
        n_failed=n_failed,
        block=label,
        n_blocks=n_blocks,
        seed=int(seed),
        level=float(level),
        method=method,
        estimate=estimate,
        theta_hat=theta_hat,
        jackknife_thetas=jack,
        fixed=dict(fixed),
        ci=ci,
        ci_bca=ci_bca,
        mc_error=mc,
        n_switched=switched,
        n_polished=int(out["polished"][~failed].sum()),
        phi_identified=phi_identified,
        n_runs=len(runs),
        warnings=warnings,
    )
    return result


__all__ = [
    "BootstrapResult",
    "Interval",
    "block_bootstrap",
    "block_codes",
    "bootstrap_interval",
    "draw_weights",
    "jackknife_acceleration",
    "refit_weighted",
]
