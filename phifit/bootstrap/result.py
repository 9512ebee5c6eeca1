"""The result of a block bootstrap: replicates, intervals, bookkeeping and cautions.

:class:`BootstrapResult` holds the refitted parameters of every replicate (NaN rows for
failed ones), the delete-one-block jackknife refits, and the percentile and BCa intervals
read from them by :mod:`phifit.intervals`; :meth:`BootstrapResult.interval` gives an
interval for any quantity computed per replicate, and :meth:`BootstrapResult.attach` puts
the intervals on the point fit.  The procedure is in :mod:`phifit.bootstrap.block`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import defaults
from ..cautions import Caution, caution, collect
from ..intervals import INTERVAL_KINDS, Interval, bootstrap_interval, censored_ends, interval_text
from ..law import PARAM_NAMES, THETA_NAMES, THETA_TO_PARAM
from ..result import FitResult
from ..serialize import JsonIO, to_plain

#: Above this share of failed replicates no interval is given.  The replicates that fail are
#: not a random subset: they are the resampled tables that differ most from the data (too few
#: distinct runs, a single r, a degenerate optimum), so the survivors' spread understates the
#: bootstrap distribution, and more so the more of them fail.  Up to a tenth failing, the
#: quantiles of the other nine tenths still say roughly where the distribution lies; beyond
#: it they can be arbitrarily narrow (zero width when every survivor repeats the point fit).
MAX_FAILED_SHARE = 0.10
#: From this share of failed replicates (and up to :data:`MAX_FAILED_SHARE`) the intervals are
#: given but marked approximate: the "failed_replicates" caution says so and names the share.
#: Below it (fewer than 1 in 100) the exclusion moves a 95% end by less than its own
#: Monte-Carlo error at B = 1000, and only the count is reported.
MARK_FAILED_SHARE = 0.01


def failed_share(n_failed: int, n_boot: int) -> float:
    """The share of bootstrap replicates that failed (1.0 when there are none)."""
    return n_failed / n_boot if n_boot else 1.0


def intervals_withheld(n_failed: int, n_boot: int) -> bool:
    """Whether so many replicates failed (more than :data:`MAX_FAILED_SHARE`) that no
    interval is given."""
    return failed_share(n_failed, n_boot) > MAX_FAILED_SHARE


def failed_refit_cautions(
    source: str, subject: str, quantities: str, n_failed: int, n_boot: int, reasons: Mapping[str, int]
) -> list[Caution]:
    """The cautions of a cell bootstrap of a side analysis (``subject``: e.g. "free multipliers";
    ``quantities``: what its intervals are of, e.g. "m_r") whose refits failed ``n_failed`` of
    ``n_boot`` times, for ``reasons`` {why: count}: intervals withheld beyond
    :data:`MAX_FAILED_SHARE` (:func:`intervals_withheld`), marked approximate from
    :data:`MARK_FAILED_SHARE`, a note below it (under 1% moves an end by less than its
    Monte-Carlo error)."""
    if not n_failed:
        return []
    why = "; ".join(f"{k}: {v}" for k, v in reasons.items())
    share = n_failed / n_boot
    head = f"{subject}: {n_failed} of {n_boot} cell-bootstrap refits failed ({why})"
    if intervals_withheld(n_failed, n_boot):
        text = (
            f"{head}: no interval of {quantities} is given (more than {MAX_FAILED_SHARE:.0%} failed; the "
            "survivors would understate the uncertainty)"
        )
        return [caution(source, "intervals_withheld", text, n_failed=n_failed, n_boot=n_boot, share=share)]
    marked = share >= MARK_FAILED_SHARE
    text = head + (" and the intervals are approximate" if marked else "")
    return [
        caution(
            source,
            "failed_replicates",
            text,
            level="warning" if marked else "note",
            n_failed=n_failed,
            n_boot=n_boot,
            share=share,
        )
    ]


def natural_params(thetas: np.ndarray) -> dict[str, np.ndarray]:
    """Natural parameters per row of theta (a, alpha, b, beta, e, phi)."""
    t = np.asarray(thetas, dtype=float)
    t = t[None, :] if t.ndim == 1 else t
    out = {}
    for i, coord in enumerate(THETA_NAMES):
        name = THETA_TO_PARAM[coord]
        out[name] = np.exp(t[:, i]) if coord in ("a", "b", "e") else t[:, i].copy()
    return {name: out[name] for name in PARAM_NAMES}


def in_param_order(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` keyed by natural parameter, in the order E, A, alpha, B, beta, phi (any other
    key after them, in its own order)."""
    first = {k: values[k] for k in PARAM_NAMES if k in values}
    return {**first, **{k: v for k, v in values.items() if k not in first}}


@dataclass(frozen=True)
class BootstrapResult(JsonIO):
    """Replicates of a block bootstrap and the intervals read from them.

    Attributes
    ----------
    thetas : (n_boot, 6) internal parameters (a, alpha, b, beta, e, phi) per replicate; NaN rows
        for failed replicates.
    params : natural parameter name -> (n_boot,) array (NaN for failed replicates).
    failed : (n_boot,) bool, True for replicates excluded from the intervals.
    failure_reasons : reason -> count.
    n_boot, n_failed, block, n_blocks, seed, level, method.  ``n`` is ``n_boot`` (older name).
    estimate : natural parameters of the point estimate the replicates started from.
    theta_hat : its internal parameters (6,).
    jackknife_thetas : (n_blocks, 6) delete-one-block refits (for BCa accelerations).
    fixed : parameters held fixed (no interval).
    bounds : the search box, internal coordinates {a, alpha, b, beta, e, phi: [lo, hi]}; an
        interval end on it is censored (see :meth:`censored`).
    ci, ci_bca : {param: [lo, hi]} at ``level`` for every free parameter.
    mc_error : {"percentile": {param: [se_lo, se_hi]}, "bca": {...}}.
    n_switched : replicates where a spread start beat the warm start (another basin).
    n_polished : replicates the vectorised LM left unconverged and the least-squares polish
        finished (counted as converged).
    warnings : :class:`~phifit.cautions.Caution` records (source "bootstrap"): failed
        replicates, failed jackknife refits, undefined BCa, several basins, replicates at a
        box bound, few blocks.
    """

    thetas: np.ndarray
    params: dict[str, np.ndarray]
    failed: np.ndarray
    failure_reasons: dict[str, int]
    n_boot: int
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
    warnings: list[Caution] = field(default_factory=list)
    bounds: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # one parameter order everywhere (E, A, alpha, B, beta, phi), whatever order built them
        for name in ("params", "ci", "ci_bca"):
            object.__setattr__(self, name, in_param_order(getattr(self, name)))
        mc = {k: in_param_order(v) if isinstance(v, Mapping) else v for k, v in self.mc_error.items()}
        object.__setattr__(self, "mc_error", mc)

    # -- derived quantities -------------------------------------------------------------
    @property
    def n(self) -> int:
        """Replicates: the older name of :attr:`n_boot`."""
        return self.n_boot

    @property
    def jackknife_params(self) -> dict[str, np.ndarray]:
        return natural_params(self.jackknife_thetas)

    def interval(
        self,
        values_per_draw: np.ndarray | Callable[[Mapping[str, np.ndarray]], Any],
        level: float = defaults.LEVEL,
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
        delete-one-block refits, :attr:`jackknife_params`).  When more than
        :data:`MAX_FAILED_SHARE` of the replicates failed the interval is withheld (NaN ends).
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
        values = np.broadcast_to(values, (self.n_boot,)) if values.ndim == 0 else values
        if values.shape != (self.n_boot,):
            raise ValueError(
                f"values_per_draw must have one value per replicate ({self.n_boot}), got shape {values.shape}"
            )
        values = np.where(self.failed, np.nan, values)
        if intervals_withheld(self.n_failed, self.n_boot):
            nan = float("nan")  # too many failed replicates for any interval (MAX_FAILED_SHARE)
            return Interval(nan, nan, level, kind, (nan, nan), int(self.n_boot - self.n_failed))
        return bootstrap_interval(
            values, level=level, kind=kind, estimate=estimate, jackknife=jackknife, mc_seed=self.seed + 1
        )

    def natural_bounds(self, name: str) -> tuple[float, float] | None:
        """The box of a natural parameter (exp of the log coordinates for A, B, E)."""
        coord = {v: k for k, v in THETA_TO_PARAM.items()}[name]
        if coord not in self.bounds:
            return None
        lo, hi = self.bounds[coord]
        return (math.exp(lo), math.exp(hi)) if coord in ("a", "b", "e") else (float(lo), float(hi))

    def censored(self, name: str, kind: str = "percentile") -> tuple[bool, bool]:
        """(lower, upper): whether each end of the interval of ``name`` is on the search box."""
        if kind not in INTERVAL_KINDS:
            raise ValueError(f"unknown interval kind {kind!r}; expected one of {', '.join(INTERVAL_KINDS)}")
        ci = (self.ci if kind == "percentile" else self.ci_bca).get(name)
        box = self.natural_bounds(name)
        if ci is None or box is None or None in ci:
            return (False, False)
        return censored_ends(ci[0], ci[1], *box)

    @property
    def phi_regions(self) -> dict[str, float]:
        """Where the replicates' phi lies: shares of successful replicates at the lower box
        bound, at or below 0 (bound included), in (0, 1), at or above 1 (bound included),
        and at the upper box bound.  A share at or below 0 well away from the estimate's
        side means part of the replicates found a second minimum there."""
        box = self.natural_bounds("phi")
        v = self.params["phi"][~self.failed]
        if not len(v) or box is None or "phi" not in self.ci:
            return {}
        tol = 1e-6 * (box[1] - box[0])
        return {
            "at lower bound": float(np.mean(v <= box[0] + tol)),
            "phi <= 0": float(np.mean(v <= 0)),
            "0 < phi < 1": float(np.mean((v > 0) & (v < 1))),
            "phi >= 1": float(np.mean(v >= 1)),
            "at upper bound": float(np.mean(v >= box[1] - tol)),
        }

    def share(self, name: str, predicate: Callable[[np.ndarray], np.ndarray]) -> float:
        """Share of successful replicates where ``predicate(params[name])`` holds."""
        v = self.params[name][~self.failed]
        return float(np.mean(predicate(v))) if len(v) else float("nan")

    # -- views --------------------------------------------------------------------------
    def bootstrap_info(self) -> dict[str, Any]:
        """The ``bootstrap`` block of a FitResult (JSON contract: n, n_failed, block, ...;
        ``n`` is the number of replicates, the key FitResult's JSON has always used)."""
        return to_plain(
            {
                "n": self.n_boot,
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
                "censored": {
                    name: {"percentile": self.censored(name), "bca": self.censored(name, "bca")}
                    for name in self.ci
                },
                "phi_regions": self.phi_regions,
            }
        )

    def attach(self, fit_result: FitResult, *, draws: bool = False) -> FitResult:
        """A copy of ``fit_result`` with ci, ci_bca and the bootstrap bookkeeping filled in.

        The fit must be the point estimate the bootstrap started from (same runs, same
        fixed parameters, same parameter values to a relative 1e-6).  ``draws=True`` also puts
        the replicates' natural parameters in ``bootstrap["draws"]`` ({param: list}, null for a
        failed replicate), so the fit carries them to JSON and back
        (:meth:`~phifit.result.FitResult.draws_frame`); off by default, which keeps files small.
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
            bootstrap={**self.bootstrap_info(), **({"draws": self.draws()} if draws else {})},
            warnings=collect(fit_result.warnings, self.warnings),
        )

    def draws(self) -> dict[str, list[float | None]]:
        """The replicates' natural parameters {param: list} in the order E, A, alpha, B, beta,
        phi (None for a failed replicate and for a parameter held fixed)."""
        nat = natural_params(self.thetas)
        return {
            k: [None if k in self.fixed or not math.isfinite(x) else float(x) for x in nat[k]]
            for k in PARAM_NAMES
        }

    def to_frame(self):
        """The replicates as a DataFrame, one row each: the natural parameters E, A, alpha, B,
        beta, phi (mapped from the internal ``thetas``: A = exp(a), B = exp(b), E = exp(e);
        NaN for a failed replicate) and ``failed``."""
        import pandas as pd

        nat = natural_params(self.thetas)
        frame = pd.DataFrame({k: nat[k] for k in PARAM_NAMES})
        frame["failed"] = np.asarray(self.failed, dtype=bool)
        frame.index.name = "replicate"
        return frame

    def summary_frame(self):
        """The intervals, one row per free parameter in the order E, A, alpha, B, beta, phi:
        ``estimate`` (the point estimate the replicates started from), ``sd`` (of the successful
        replicates), ``ci_lo``, ``ci_hi`` (percentile) and ``bca_lo``, ``bca_hi`` at ``level``
        (NaN where withheld).  What a notebook shows (:meth:`to_frame` holds the replicates)."""
        import pandas as pd

        def num(x: Any) -> float:
            return math.nan if x is None else float(x)

        rows = []
        for name in PARAM_NAMES:
            if name not in self.ci:
                continue
            ok = self.params[name][~self.failed]
            ci, bca = self.ci.get(name) or [None, None], self.ci_bca.get(name) or [None, None]
            rows.append(
                {
                    "param": name,
                    "estimate": num(self.estimate.get(name)),
                    "sd": float(np.std(ok, ddof=1)) if len(ok) > 1 else math.nan,
                    "ci_lo": num(ci[0]),
                    "ci_hi": num(ci[1]),
                    "bca_lo": num(bca[0]),
                    "bca_hi": num(bca[1]),
                }
            )
        return pd.DataFrame(rows).set_index("param")

    def __repr__(self) -> str:
        phi = self.ci.get("phi")
        ci = "" if not phi or None in phi else f", phi_ci=[{phi[0]:.4g}, {phi[1]:.4g}]"
        return (
            f"BootstrapResult(method={self.method!r}, n_boot={self.n_boot}, n_failed={self.n_failed}, "
            f"block={self.block!r}, n_blocks={self.n_blocks}, level={self.level:g}{ci}, "
            f"n_warnings={len(self.warnings)})"
        )

    def summary(self) -> str:
        lines = [
            f"[[phifit: block bootstrap, {self.n_boot} replicates of {self.n_blocks} blocks "
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
            box = self.natural_bounds(name)
            short = lambda v: f"{v:.5g}"  # noqa: E731

            def text(iv: list, box=box, short=short) -> str:
                return "withheld" if iv[0] is None or iv[1] is None else interval_text(*iv, box, fmt=short)

            lines.append(
                f"    {name:<6} {fmt(est):>11}   {text(p):>24}   {text(b):>24}   {fmt(mc[0])} {fmt(mc[1])}"
            )
        censored = [name for name in self.ci if any(self.censored(name)) or any(self.censored(name, "bca"))]
        if censored:
            lines += [
                "",
                f"    an end on the search box ({', '.join(censored)}) is not an estimate: the "
                "replicates ran into the bound and the true end lies at or beyond it",
            ]
        regions = self.phi_regions
        if regions:
            lines.append("")
            lines.append(
                "    where the replicates' phi lies: "
                + ", ".join(f"{k} {100 * v:.1f}%" for k, v in regions.items())
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
                "n_boot": self.n_boot,
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
                "warnings": [w.to_dict() for w in self.warnings],
                "theta_names": list(THETA_NAMES),
                "theta_hat": self.theta_hat,
                "thetas": self.thetas,
                "failed": self.failed,
                "jackknife_thetas": self.jackknife_thetas,
                "bounds": self.bounds,
                "phi_regions": self.phi_regions,
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
            params=natural_params(thetas),
            failed=np.array(data["failed"], dtype=bool),
            failure_reasons=dict(data["failure_reasons"]),
            n_boot=int(data["n_boot"] if "n_boot" in data else data["n"]),
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
            warnings=[Caution.from_dict(w, source="bootstrap") for w in data.get("warnings") or []],
            bounds={k: [float(v[0]), float(v[1])] for k, v in (data.get("bounds") or {}).items()},
        )


__all__ = ["BootstrapResult", "in_param_order", "natural_params"]
