"""Predictions of a fitted joint law: the loss at given architectures, and the compute-optimal
allocation at given FLOP budgets, per r.

    L(N_once, N_rec, D, r) = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta     (paper Eq. 3)

**Loss at a point** (r, N_once, N_rec, D): the law at the fitted parameters; with bootstrap
draws theta_s the percentile interval of L over the draws (:mod:`phifit.bootstrap.draws`).

**Compute-optimal allocation** at a budget C and recurrence r: the size minimising the
predicted loss with D = C / F (F = training FLOPs per token), found by
:func:`phifit.frontier.frontier` over a family of architectures:

- from a run table (:class:`~phifit.frontier.TableFamily`: per r, the once-applied share and
  log F interpolated in log N; F from the ``flops`` column, else 6 (N_once + r N_rec)); the
  search spans the sizes trained at that r widened by ``widen`` decades each way, and an
  optimum outside the trained sizes is a caution (kind "extrapolated");
- without a table, the study's architectures (:class:`~phifit.frontier.PaperFamily`).

The result, :class:`Prediction`, prints :meth:`Prediction.summary`, gives its rows as a
DataFrame (:meth:`Prediction.to_frame`) and saves :meth:`Prediction.to_dict` (plain JSON types).

The module itself is callable: ``phifit.predict(fit, points=...)`` is :func:`predict`.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import defaults
from .bootstrap.draws import clean_thetas, law_theta, percentile_interval
from .bootstrap.result import MAX_FAILED_SHARE, BootstrapResult, intervals_withheld
from .cautions import Caution, caution, collect
from .frontier import PaperFamily, TableFamily, frontier
from .law import Design, JointLaw, log_loss
from .result import FitResult
from .runs.table import RunTable, as_runs
from .serialize import JsonIO, to_plain
from .study import paper_architecture

__all__ = ["EXTRAPOLATION_FACTOR", "Prediction", "predict", "predict_loss", "table_family"]

#: A point is extrapolated when its r, N_eff or D lies more than this factor beyond the range
#: of the fitted runs (below min / factor or above max * factor).  Within a factor of 2 the
#: law's power terms are read over a span comparable to the spacing of a typical sweep
#: (sizes and budgets about 2x apart); beyond it the prediction rests on the law's form,
#: not on the runs, and phi in particular is extrapolated in r.
EXTRAPOLATION_FACTOR = 2.0


def fitted_range(runs: RunTable, phi: float | None) -> dict[str, list[float]]:
    """{r, n_eff, tokens: [min, max]} over the fitted runs (N_eff at the fitted phi, 0 when
    phi was not identified)."""
    from .law import log_n_eff

    lne = log_n_eff(0.0 if phi is None else float(phi), runs.design)
    return {
        "r": [float(runs.r.min()), float(runs.r.max())],
        "n_eff": [float(np.exp(lne.min())), float(np.exp(lne.max()))],
        "tokens": [float(runs.tokens.min()), float(runs.tokens.max())],
    }


def range_cautions(rows: Sequence[Mapping[str, Any]], span: Mapping[str, Sequence[float]]) -> list[Caution]:
    """A caution per quantity (r, N_eff, D) for the points beyond ``EXTRAPOLATION_FACTOR`` of
    the fitted ``span``."""
    labels = {"r": "r", "n_eff": "N_eff", "tokens": "D (tokens)"}
    out = []
    for key, label in labels.items():
        lo, hi = span[key]
        far = [
            i
            for i, row in enumerate(rows)
            if row[key] > hi * EXTRAPOLATION_FACTOR or row[key] < lo / EXTRAPOLATION_FACTOR
        ]
        if far:
            values = [float(rows[i][key]) for i in far]
            out.append(
                caution(
                    "predict",
                    "outside_fitted_range",
                    f"{len(far)} point{'s' * (len(far) != 1)} with {label} "
                    f"{', '.join(_count(v) for v in values[:5])}{' ...' if len(far) > 5 else ''} "
                    f"beyond {EXTRAPOLATION_FACTOR:g}x the fitted range [{_count(lo)}, {_count(hi)}]: "
                    f"the prediction extrapolates the law's form, not the runs",
                    quantity=key,
                    points=far,
                    values=values,
                    fitted_range=[lo, hi],
                    factor=EXTRAPOLATION_FACTOR,
                )
            )
    return out


def predict_loss(
    law: JointLaw | FitResult | Mapping[str, float],
    *,
    r: Sequence[float],
    n_once: Sequence[float],
    n_rec: Sequence[float],
    tokens: Sequence[float],
    thetas: np.ndarray | None = None,
    level: float = defaults.LEVEL,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Predicted loss (nats) at each point and, with bootstrap draws ``thetas`` (S, 6), its
    percentile interval at ``level`` as an (m, 2) array (None without draws).  Every argument
    after ``law`` is keyword-only (``r=``, ``n_once=``, ``n_rec=``, ``tokens=``)."""
    design = Design.from_arrays(
        np.asarray(r, float), np.asarray(n_once, float), np.asarray(n_rec, float), np.asarray(tokens, float)
    )
    loss = np.exp(log_loss(law_theta(law), design))
    draws = clean_thetas(thetas)
    if draws is None:
        return loss, None
    at_draws = np.exp(log_loss(draws, design))  # (S, m)
    return loss, np.asarray(percentile_interval(at_draws, level)).T


def table_family(
    runs: RunTable | pd.DataFrame, *, widen: float = 1.0, r_values: Sequence[int] | None = None
) -> TableFamily:
    """The table's architecture family, its search widened by ``widen`` decades of N each way
    (0: only the sizes trained), restricted to ``r_values`` when given."""
    runs = as_runs(runs)
    base = TableFamily.from_runs(runs)
    pad = widen * math.log(10.0)
    coef = {}
    for r, c in base.coef.items():
        if r_values is not None and r not in r_values:
            continue
        c = dict(c)
        c["trained_x_range"] = list(c["x_range"])
        c["x_range"] = [c["x_range"][0] - pad, c["x_range"][1] + pad]
        coef[r] = c
    if r_values is not None:
        missing = sorted(set(int(r) for r in r_values) - set(coef))
        if missing:
            raise ValueError(
                f"no runs with r = {', '.join(map(str, missing))} in {runs.source}; "
                f"the table has r = {', '.join(map(str, sorted(base.coef)))}"
            )
    source = "flops / tokens" if runs.has_flops else "6 (n_once + r n_rec)"
    span = (
        f"the sizes trained at that r and {widen:g} decade(s) of N beyond" if widen else "the sizes trained"
    )
    return TableFamily(
        coef=coef,
        description=f"the table's architectures (F per token = {source}; per r, N_once/N linear and "
        f"log F quadratic in log N), searching {span}",
    )


@dataclass(frozen=True)
class Prediction(JsonIO):
    """Predicted losses at points and compute-optimal allocations.

    ``points``: per point {r, n_once, n_rec, tokens, n_eff, loss, interval ([lo, hi] or
    None)}.  ``optimal``: per (budget C, r) {compute, r, n_once, n_rec, n_unique, n_eff,
    tokens, tokens_per_param, loss, interval, at_edge}.  ``level`` and ``n_draws``: the
    intervals' level and the bootstrap draws behind them (0: no interval); ``n_boot`` and
    ``n_failed``: the bootstrap replicates run and how many failed (0 when none was run).  ``law``: the
    parameters used; ``source``: where they come from; ``family``: the architectures searched.
    """

    law: dict[str, float | None]
    source: str
    points: list[dict[str, Any]] = field(default_factory=list)
    optimal: list[dict[str, Any]] = field(default_factory=list)
    family: str | None = None
    level: float = defaults.LEVEL
    n_draws: int = 0
    warnings: list[Caution] = field(default_factory=list)
    n_boot: int = 0
    n_failed: int = 0

    def to_frame(self) -> pd.DataFrame:
        """One row per point, then one per (budget, r) allocation: ``kind`` ("point" or
        "optimal"), ``r``, ``n_once``, ``n_rec``, ``tokens``, ``n_eff``, ``loss`` and, with
        bootstrap draws, ``lo`` and ``hi`` (the percentile interval at ``level``); the allocation
        rows add ``compute``, ``n_unique``, ``tokens_per_param`` and ``at_edge``."""
        rows = []
        for kind, items in (("point", self.points), ("optimal", self.optimal)):
            for row in items:
                iv = row.get("interval") or [math.nan, math.nan]
                rows.append(
                    {
                        "kind": kind,
                        **{k: v for k, v in row.items() if k != "interval"},
                        "lo": iv[0],
                        "hi": iv[1],
                    }
                )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        out = {"generator": "phifit", "kind": "prediction", **self.__dict__}
        out["warnings"] = [w.to_dict() for w in self.warnings]
        return to_plain(out)

    def summary(self) -> str:
        p = self.law

        def value(name: str) -> str:
            return "n/a" if p.get(name) is None else f"{p[name]:.4g}"

        lines = [
            "[[phifit predict]]",
            f"    law from {self.source}: E = {value('E')}, A = {value('A')}, alpha = {value('alpha')}, "
            f"B = {value('B')}, beta = {value('beta')}, phi = {value('phi')}",
        ]
        pct = f"{100 * self.level:g}%"
        if self.n_draws:
            interval = f"{pct} percentile interval over {self.n_draws} bootstrap draws"
            if self.n_failed:
                interval += f" ({self.n_failed} of {self.n_boot} replicates failed)"
        elif self.n_boot:
            interval = (
                f"none: {self.n_failed} of {self.n_boot} bootstrap replicates failed, more than "
                f"{MAX_FAILED_SHARE:.0%} (see [[Notes]])"
            )
        else:
            interval = (
                "no interval (no bootstrap draws: pass bootstrap=phifit.block_bootstrap(...) in Python, "
                "--runs RUNS.csv --bootstrap N on the command line)"
            )
        lines.append(f"    interval: {interval}")
        if self.points:
            lines += ["", "[[Loss at given points]]"]
            head = f"    {'r':>3} {'N_once':>10} {'N_rec':>10} {'D':>10} {'N_eff':>10} {'loss':>8}"
            if self.n_draws:
                head += f"   {pct + ' interval':>20}"
            lines.append(head)
            for row in self.points:
                text = (
                    f"    {row['r']:>3} {_count(row['n_once']):>10} {_count(row['n_rec']):>10} "
                    f"{_count(row['tokens']):>10} {_count(row['n_eff']):>10} {row['loss']:>8.4f}"
                )
                if row.get("interval"):
                    lo, hi = row["interval"]
                    text += f"   [{lo:>8.4f}, {hi:>8.4f}]"
                lines.append(text)
        if self.optimal:
            lines += ["", f"[[Compute-optimal allocation per r: {self.family}]]"]
            head = (
                f"    {'C (FLOPs)':>10} {'r':>3} {'N_once':>10} {'N_rec':>10} {'N_unique':>10} "
                f"{'N_eff':>10} {'D':>10} {'D/N':>7} {'loss':>8}"
            )
            if self.n_draws:
                head += f"   {pct + ' interval':>20}"
            lines.append(head)
            for row in self.optimal:
                text = (
                    f"    {row['compute']:>10.3g} {row['r']:>3} {_count(row['n_once']):>10} "
                    f"{_count(row['n_rec']):>10} {_count(row['n_unique']):>10} {_count(row['n_eff']):>10} "
                    f"{_count(row['tokens']):>10} {row['tokens_per_param']:>7.1f} {row['loss']:>8.4f}"
                )
                if row.get("interval"):
                    lo, hi = row["interval"]
                    text += f"   [{lo:>8.4f}, {hi:>8.4f}]"
                if row["at_edge"]:
                    text += "  (edge)"
                lines.append(text)
        if self.warnings:
            lines += ["", "[[Notes]]"] + [f"    [{i}] {w}" for i, w in enumerate(self.warnings, 1)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _count(x: float) -> str:
    """4.1e8 -> '410M'; 2e10 -> '20B'."""
    x = float(x)
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def _split(family: PaperFamily | TableFamily, r: int, n_unique: float, size: float) -> tuple[float, float]:
    """(N_once, N_rec) of the family's architecture at the optimum."""
    if isinstance(family, TableFamily):
        arch = family.at(r, np.array([math.log(n_unique)]))
        return float(arch["n_once"][0]), float(arch["n_rec"][0])
    arch = paper_architecture(size, int(r))
    return float(arch["n_once"]), float(arch["n_rec"])


def predict(
    law: FitResult | JointLaw | Mapping[str, float],
    *,
    points: Mapping[str, Sequence[float]] | None = None,
    budgets: Sequence[float] | None = None,
    family: PaperFamily | TableFamily | None = None,
    thetas: np.ndarray | None = None,
    level: float | None = None,
    source: str = "",
    bootstrap: BootstrapResult | None = None,
    runs: RunTable | None = None,
    recipe: str | None = None,
) -> Prediction:
    """Loss at ``points`` (a mapping with ``r, n_once, n_rec, tokens`` arrays) and the
    compute-optimal allocation per r at each of ``budgets`` (FLOPs) over ``family``
    (default: the study's architectures).  ``thetas``: bootstrap draws (S, 6) for percentile
    intervals at ``level`` (default the fit's ``ci_level``, else 0.95).  ``bootstrap``: the
    block bootstrap the draws come from (its ``thetas`` when ``thetas`` is not given); when
    more than :data:`~phifit.bootstrap.result.MAX_FAILED_SHARE` of its replicates failed no
    interval is given, and its cautions join the prediction's.  ``runs``: the table the law
    was fitted to; points beyond :data:`EXTRAPOLATION_FACTOR` of its range of r, N_eff or D
    get a caution; when its ``variant`` column holds several recipes, ``recipe`` names the one
    the law describes (default the one a FitResult was fitted to, else "baseline";
    :func:`phifit.recipes.pairing.recipe_runs`).  A FitResult's own warnings are carried into the
    prediction's."""
    if runs is not None:
        from .runs.recipes import recipe_runs

        runs = recipe_runs(runs, recipe, fit=law if isinstance(law, FitResult) else None)
    if points is None and not budgets:
        raise ValueError("predict: give points (r, n_once, n_rec, tokens) or budgets (FLOPs), or both")
    if isinstance(law, FitResult) and not law.d_term_identified:
        _check_one_token_count(law, points, budgets)
    if level is None:
        level = law.ci_level if isinstance(law, FitResult) else 0.95
    theta = law_theta(law)
    jl = theta_law(theta)
    params = dict(law.params) if isinstance(law, FitResult) else dict(jl.params)
    # the fit's own warnings travel with its predictions; its note that phi was not
    # identified is said below for the prediction itself (phi = 0 at looped points)
    warnings: list[Caution] = (
        [w for w in law.warnings if w.kind != "phi_unidentified"] if isinstance(law, FitResult) else []
    )
    n_boot = n_failed = 0
    if bootstrap is not None:
        n_boot, n_failed = int(bootstrap.n_boot), int(bootstrap.n_failed)
        warnings += list(bootstrap.warnings)
        if thetas is None:
            thetas = bootstrap.thetas
        if intervals_withheld(n_failed, n_boot):
            thetas = None
    draws = clean_thetas(thetas)
    if isinstance(law, FitResult) and law.phi is None:
        warnings.append(
            caution(
                "predict",
                "phi_not_identified",
                "the fit did not identify phi (no looped runs, or one r): looped points are "
                "predicted with phi = 0, i.e. N_eff = N_once + N_rec",
                level="warning",
            )
        )
    point_rows = _point_rows(jl, points, draws, level) if points is not None else []
    if runs is not None and point_rows:
        warnings += range_cautions(point_rows, fitted_range(runs, params.get("phi")))
    optimal: list[dict[str, Any]] = []
    family_text = None
    if budgets:
        family = family or PaperFamily()
        family_text = family.description
        optimal, found = _optimal_rows(jl, family, budgets, draws, level)
        warnings += found
    warnings = collect(warnings)
    return Prediction(
        law=params,
        source=source,
        points=point_rows,
        optimal=optimal,
        family=family_text,
        level=level,
        n_draws=0 if draws is None else len(draws),
        warnings=warnings,
        n_boot=n_boot,
        n_failed=n_failed,
    )


def _point_rows(
    jl: JointLaw, points: Mapping[str, Sequence[float]], draws: np.ndarray | None, level: float
) -> list[dict[str, Any]]:
    """One row per point: its covariates, N_eff, the predicted loss and (with ``draws``) its
    percentile interval at ``level``."""
    point_rows: list[dict[str, Any]] = []
    r = np.asarray(points["r"], float)
    n_once, n_rec, tokens = (np.asarray(points[k], float) for k in ("n_once", "n_rec", "tokens"))
    loss, iv = predict_loss(jl, r=r, n_once=n_once, n_rec=n_rec, tokens=tokens, thetas=draws, level=level)
    n_eff = jl.n_eff(r=r, n_once=n_once, n_rec=n_rec)
    for i in range(len(loss)):
        point_rows.append(
            {
                "r": int(r[i]),
                "n_once": float(n_once[i]),
                "n_rec": float(n_rec[i]),
                "tokens": float(tokens[i]),
                "n_eff": float(np.asarray(n_eff)[i]),
                "loss": float(loss[i]),
                "interval": None if iv is None else [float(iv[i, 0]), float(iv[i, 1])],
            }
        )
    return point_rows


def _optimal_rows(
    jl: JointLaw,
    family: PaperFamily | TableFamily,
    budgets: Sequence[float],
    draws: np.ndarray | None,
    level: float,
) -> tuple[list[dict[str, Any]], list[Caution]]:
    """The compute-optimal allocation per budget and r over ``family`` (:func:`frontier`), one
    row each, and the cautions: the frontier's, and an "extrapolated" one per r whose optimal
    size lies outside the sizes a table family trained at that r."""
    front = frontier(jl, family, budgets, thetas=draws, level=level)
    warnings: list[Caution] = list(front.warnings)
    optimal: list[dict[str, Any]] = []
    outside: dict[int, list[float]] = {}
    for i, c in enumerate(front.budgets):
        for r in front.r_values:
            n_unique = front.n_unique_star[r][i]
            n_once_r, n_rec_r = _split(family, r, n_unique, front.size_star[r][i])
            iv = front.l_star_interval[r][i] if front.l_star_interval else None
            optimal.append(
                {
                    "compute": c,
                    "r": r,
                    "n_once": n_once_r,
                    "n_rec": n_rec_r,
                    "n_unique": n_unique,
                    "n_eff": front.n_eff_star[r][i],
                    "tokens": front.tokens_star[r][i],
                    "tokens_per_param": front.tokens_star[r][i] / n_unique,
                    "loss": front.l_star[r][i],
                    "interval": iv,
                    "at_edge": bool(front.at_edge[r][i]),
                }
            )
            trained = family.coef[r].get("trained_x_range") if isinstance(family, TableFamily) else None
            if trained and not (trained[0] - 1e-9 <= math.log(n_unique) <= trained[1] + 1e-9):
                outside.setdefault(r, []).append(c)
    for r, cs in outside.items():
        warnings.append(
            caution(
                "predict",
                "extrapolated",
                f"r = {r}: at C = {', '.join(f'{c:.3g}' for c in cs)} the optimal size lies outside "
                "the sizes trained at that r: the law and the architecture family are extrapolated",
                r=r,
                budgets=cs,
            )
        )
    return optimal, warnings


def _check_one_token_count(
    fit: FitResult, points: Mapping[str, Sequence[float]] | None, budgets: Sequence[float] | None
) -> None:
    """Refuse what a fit on a single token count D cannot predict.

    Rule: such a fit measured E + B D^-beta at that D only (B and beta are not identified),
    so a loss at another D, and the compute-optimal allocation (which trades size against
    tokens), are not estimates; a loss at the fitted D is.
    """
    held = [c for c in fit.warnings if c.kind == "d_term_unidentified"]
    d = held[0].values.get("tokens") if held else None
    why = "the fit did not identify B and beta (every run has the same token count"
    why += f", D = {d:.4g})" if d is not None else ")"
    if budgets:
        raise ValueError(f"predict: no compute-optimal allocation: {why}")
    if points is not None:
        tokens = np.asarray(points["tokens"], float)
        if d is None or not np.allclose(tokens, d, rtol=1e-9):
            raise ValueError(f"predict: a loss at another token count is not an estimate: {why}")


def theta_law(theta: np.ndarray) -> JointLaw:
    """The law at internal parameters theta (a, alpha, b, beta, e, phi)."""
    from .law import theta_to_params

    return JointLaw.from_params(theta_to_params(theta))


class _CallableModule(types.ModuleType):
    """The module :mod:`phifit.predict`, callable as its function :func:`predict`.

    ``phifit.predict`` names this module (a submodule of a package always wins its name once it
    is imported), and the README's ``phifit.predict(fit, points=..., budgets=...)`` calls the
    function through it."""

    def __call__(self, *args: Any, **kwargs: Any) -> Prediction:
        return predict(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
