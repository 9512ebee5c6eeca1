"""Bootstrap interval maths: percentile and BCa intervals, jackknife acceleration,
Monte-Carlo error of the interval ends, and the bootstrap p-value.

From B replicate values v*_1..v*_B of a quantity (NaN = a failed replicate, excluded) and
its point estimate v_hat, at level 1 - a (default 95%):

- **percentile** (the reference study's): the a/2 and 1 - a/2 quantiles of the v* (NumPy's
  default linear interpolation);
- **BCa** (Efron 1987): the quantiles at levels Phi(z0 + (z0 + z_q) / (1 - acc (z0 + z_q)))
  for z_q = Phi^-1(a/2), Phi^-1(1 - a/2), with bias correction
  z0 = Phi^-1((#{v* < v_hat} + #{v* = v_hat} / 2) / B) and the acceleration acc from the
  delete-one-block jackknife values v_(j) (:func:`jackknife_acceleration`);
- **Monte-Carlo error** of each end: its standard deviation over 1000 resamples (with
  replacement) of the B values, the acceleration held fixed.  It measures only the error
  from using finitely many replicates (for a 95% percentile end about
  sqrt(0.025 * 0.975 / B) / density at the end; with B = 1000 this estimate itself scatters
  by ~25%, as any estimate of a tail quantile's error does).
- **bootstrap p-value** of "the quantity is 0": the smallest level at which a percentile
  interval excludes 0, p = min(1, 2 min((1 + #{v* <= 0}) / (B + 1), (1 + #{v* >= 0}) / (B + 1))).

The BCa core reproduces ``scipy.stats.bootstrap(method="BCa")`` given the same replicates and
jackknife (tests/test_bootstrap.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import defaults
from .serialize import JsonIO, to_plain

INTERVAL_KINDS = ("percentile", "bca")
#: Resamples of the replicate values behind the Monte-Carlo error of an interval's ends.
MC_RESAMPLES = 1000


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


def bca_levels(values: np.ndarray, estimate: float, acc: float, level: float) -> np.ndarray:
    """Adjusted quantile levels of BCa for each row of ``values`` (R, B) -> (R, 2)."""
    values = np.atleast_2d(values)
    b = values.shape[1]
    prop = (np.sum(values < estimate, axis=1) + 0.5 * np.sum(values == estimate, axis=1)) / b
    # the normal quantile and distribution functions themselves (scipy.stats.norm.ppf / .cdf
    # call these; scipy.special is loaded with scipy.optimize, scipy.stats would add its own
    # import to the report's start: docs/benchmarks.md, 'Where `phifit report` spends its time
    # on table (a)')
    from scipy.special import ndtr, ndtri

    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = ndtri(prop)
        zq = ndtri(np.array([(1 - level) / 2, (1 + level) / 2]))
        num = z0[:, None] + zq[None, :]
        return ndtr(z0[:, None] + num / (1 - acc * num))


def quantile_rows(sorted_values: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Linear-interpolation quantiles (NumPy's default) per row, q (R, 2) in [0, 1]."""
    b = sorted_values.shape[1]
    pos = np.clip(q, 0, 1) * (b - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, b - 1)
    frac = pos - lo
    rows = np.arange(len(sorted_values))[:, None]
    return sorted_values[rows, lo] * (1 - frac) + sorted_values[rows, hi] * frac


@dataclass(frozen=True)
class Interval(JsonIO):
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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Interval:
        def num(v: Any) -> float:
            return math.nan if v is None else float(v)

        mc = data.get("mc_error") or [None, None]
        return cls(
            lo=num(data["lo"]),
            hi=num(data["hi"]),
            level=float(data["level"]),
            kind=str(data["kind"]),
            mc_error=(num(mc[0]), num(mc[1])),
            n_used=int(data["n_used"]),
        )

    def summary(self) -> str:
        """One line: ``95% percentile interval [lo, hi] (Monte-Carlo error of the ends ...)``."""
        return (
            f"{self.level:.0%} {self.kind} interval [{self.lo:.6g}, {self.hi:.6g}] "
            f"(Monte-Carlo error of the ends {self.mc_error[0]:.2g}, {self.mc_error[1]:.2g}; "
            f"{self.n_used} replicates)"
        )

    def __str__(self) -> str:
        return self.summary()


def bootstrap_interval(
    values: np.ndarray,
    *,
    level: float = defaults.LEVEL,
    kind: str = "percentile",
    estimate: float | None = None,
    jackknife: np.ndarray | None = None,
    mc_seed: int = defaults.SEED,
    resampled: np.ndarray | None = None,
) -> Interval:
    """Percentile or BCa interval from replicate values (NaN = failed, excluded).

    BCa needs the point ``estimate`` and the delete-one-block ``jackknife`` values.  The
    Monte-Carlo error resamples the B values 1000 times (seeded by ``mc_seed``); pass
    ``resampled`` (:func:`mc_resamples` of the same values and seed) to share those sorted
    resamples between the percentile and the BCa interval of one quantity.
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
    if resampled is None:
        resampled = mc_resamples(ok, mc_seed)
    elif resampled.shape != (MC_RESAMPLES, len(ok)):
        raise ValueError(f"resampled has shape {resampled.shape}; expected ({MC_RESAMPLES}, {len(ok)})")
    base = np.sort(ok)[None, :]
    if kind == "percentile":
        q = np.array([[(1 - level) / 2, (1 + level) / 2]])
        ends = quantile_rows(base, q)[0]
        mc = quantile_rows(resampled, np.repeat(q, MC_RESAMPLES, axis=0)).std(axis=0, ddof=1)
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
        q = bca_levels(base, float(estimate), acc, level)
        if not np.all(np.isfinite(q)):  # every replicate on one side of the estimate
            return Interval(nan, nan, level, kind, (nan, nan), len(ok))
        ends = quantile_rows(base, q)[0]
        qr = bca_levels(resampled, float(estimate), acc, level)
        good = np.all(np.isfinite(qr), axis=1)
        mc = (
            quantile_rows(resampled[good], qr[good]).std(axis=0, ddof=1)
            if good.sum() > 1
            else np.array([nan, nan])
        )
    return Interval(float(ends[0]), float(ends[1]), level, kind, (float(mc[0]), float(mc[1])), len(ok))


def mc_resamples(values: np.ndarray, mc_seed: int = defaults.SEED) -> np.ndarray:
    """The finite replicate ``values`` resampled with replacement ``MC_RESAMPLES`` times
    (seeded by ``mc_seed``), each row sorted: what the Monte-Carlo errors of the interval ends
    are computed over."""
    values = np.asarray(values, dtype=float).ravel()
    ok = values[np.isfinite(values)]
    rng = np.random.default_rng(mc_seed)
    return np.sort(ok[rng.integers(0, len(ok), size=(MC_RESAMPLES, len(ok)))], axis=1)


def bootstrap_p_value(values: np.ndarray) -> float:
    """Two-sided bootstrap p-value of 0 (module docstring); NaN values are ignored."""
    d = np.asarray(values, dtype=float)
    d = d[np.isfinite(d)]
    b = len(d)
    if b == 0:
        return float("nan")
    lo = (1 + np.sum(d <= 0)) / (b + 1)
    hi = (1 + np.sum(d >= 0)) / (b + 1)
    return float(min(1.0, 2 * min(lo, hi)))


__all__ = [
    "INTERVAL_KINDS",
    "Interval",
    "MC_RESAMPLES",
    "bca_levels",
    "bootstrap_interval",
    "bootstrap_p_value",
    "jackknife_acceleration",
    "quantile_rows",
]


#: An interval end within this (relative, for bounds beyond +-1) distance of the box is on it.
BOUND_TOL = 1e-6


def _at(value: float, bound: float) -> bool:
    return math.isfinite(bound) and abs(value - bound) <= BOUND_TOL * max(1.0, abs(bound))


def _minus(text: str) -> str:
    return text.replace("-", "\u2212")


def bound_end(value: float, bounds: Sequence[float] | None, *, fmt=None) -> str:
    """One interval end as text: ``"≤ −3 (search bound: not determined)"`` when it lies within
    :data:`BOUND_TOL` of the lower bound of ``bounds`` (``"≥ 3 (...)"`` at the upper one), else
    the number (``fmt``, default 3 decimals)."""
    fmt = fmt or (lambda v: f"{v:.3f}")
    if bounds is not None and value is not None and math.isfinite(float(value)):
        lo, hi = float(bounds[0]), float(bounds[1])
        if _at(float(value), lo):
            return f"\u2264 {_minus(f'{lo:g}')} (search bound: not determined)"
        if _at(float(value), hi):
            return f"\u2265 {_minus(f'{hi:g}')} (search bound: not determined)"
    return fmt(value)


def interval_text(lo: float, hi: float, bounds: Sequence[float] | None = None, *, fmt=None) -> str:
    """An interval as plain text, ``"[0.070, 0.844]"``; an end at a bound of the box searched
    (``bounds``, e.g. ``FitResult.bounds["phi"]`` = [-3, 3]) prints as
    ``"[≤ −3 (search bound: not determined), 0.793]"``: the resamples ran into the box, so that
    end is not determined by the data.  ``fmt`` formats the other ends (default 3 decimals).
    Plain text (not HTML-escaped): the report, the figures and the CLI all print it."""
    return f"[{bound_end(lo, bounds, fmt=fmt)}, {bound_end(hi, bounds, fmt=fmt)}]"


def param_bounds(fit: Any, name: str) -> tuple[float, float] | None:
    """The box of a law parameter in its own units, from ``FitResult.bounds`` (internal
    coordinates: log E, log A, log B are mapped back with exp); None when unknown."""
    bounds = getattr(fit, "bounds", None) or {}
    key = {"E": "e", "A": "a", "B": "b"}.get(name, name)
    if key not in bounds:
        return None
    lo, hi = (float(v) for v in bounds[key])
    if key != name:
        lo, hi = math.exp(lo), math.exp(hi)
    return lo, hi


def censored_ends(lo: float, hi: float, bound_lo: float, bound_hi: float) -> tuple[bool, bool]:
    """Whether each end of an interval sits on the search box (see :data:`BOUND_TOL`).

    An end on the box is not an estimate: the replicates (or the profile) ran into the
    bound, and the true end lies at or beyond it ("censored")."""
    return (
        bool(lo is not None and math.isfinite(lo) and _at(float(lo), float(bound_lo))),
        bool(hi is not None and math.isfinite(hi) and _at(float(hi), float(bound_hi))),
    )
