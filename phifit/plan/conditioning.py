"""How well a planned design can determine the law, before training.

For a design (:class:`phifit.plan.inputs.PlanDesign`) and a law (a pilot's fit, else the
study's constants :data:`phifit.law.REFERENCE_PARAMS`), :func:`conditioning` reports:

- the spread of tokens per parameter t = D / (N_once + N_rec), over the design and within
  each budget (min, max, log-range ln(max / min));
- the r values and the spread of the loop's share of the effective size,
  s = r^phi N_rec / N_eff with N_eff = N_once + r^phi N_rec;
- the condition number of the law's unit-diagonal information matrix on the design, at the
  law's predicted losses (:func:`phifit.fitters.standard_errors.information`, the matrix the
  fit reads), and the correlations of (alpha, beta) and (phi, a) it implies (iid noise);
- each run's training FLOPs against its budget label.

Three checks, each a :class:`~phifit.cautions.Caution` (source "plan"):

``alpha_beta_not_separated``
    A single tokens-per-parameter ratio makes the D-term a function of N alone, so the
    exponents alpha and beta are told apart only by the curvature of one 1-D curve.  This is
    the case arXiv 2605.08541 ("Tokens-per-Parameter Coverage Is Critical for Robust LLM
    Scaling Law Extrapolation") describes, as summarised in issue 40; its closed-form threshold
    was not available when this was written and is **not** used.  The threshold used,
    :data:`TPP_MIN_LOG_RANGE`, is derived from the information matrix itself: on the study's
    116-run grid under the study's law, shrinking every run's ln t towards the grid's mean
    (keeping the sizes) raises the condition number from 3.7e5 to over ten times that once
    ln(max t / min t) falls below ~1 (r = 1 runs alone: 5.1e6 at 0.98; all r: 4.9e6 at 0.88,
    where phi's variance inflation starts to rise), and to 6.5e6 (all r) or 1.9e11 (r = 1
    alone) at a single ratio (``benchmarks/plan_conditioning_threshold.py``, docs/planning.md).  A
    condition number with phi known above :data:`~phifit.fitters.standard_errors.MAX_CONDITION`
    is flagged too (phi known, so that a phi/A confounding is not reported as this one).
    Spread is necessary, not sufficient: D a power of N other than 1 spreads t and is still
    one curve.

``phi_a_not_separated``
    phi acts through r^phi N_rec in N_eff; with one r value (or a share s that does not vary)
    a change of phi is a change of A.  Flagged with a single r, a range of s below
    :data:`SHARE_MIN_RANGE`, or |corr(phi, a)| above :data:`MAX_PHI_A_CORRELATION` (one-r
    designs of the study's grid reach 1.0000; the grid itself 0.06).

``off_isoflop``
    A run whose FLOPs differ from its ``budget`` by more than :data:`FLOP_RTOL` (relative) is
    not on its isoFLOP curve.  FLOPs per run: ``train_flops_per_token`` x tokens when the design
    carries it, else the design's ``flops`` (F x D for the study's grid and a sweep spec; a
    table's ``flops`` column, else 6 (N_once + r N_rec) D, as :attr:`phifit.runs.RunTable.compute`).
    :func:`phifit.plan.design.bracketing` does not call such a curve "bracketed".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..cautions import Caution, caution
from ..fitters.objective import DELTA
from ..fitters.standard_errors import MAX_CONDITION, information
from ..law import REFERENCE_PARAMS, LawSpec, log_loss, params_to_theta
from ..runs.table import RunTable
from ..serialize import JsonIO, to_plain
from .modes import design_of

#: Fewest ln(max / min) of tokens per parameter over a design before alpha and beta are called
#: not separated (derived from the information matrix on the study's grid: module docstring).
TPP_MIN_LOG_RANGE = 1.0
#: Ratios within this log-range are "a single tokens-per-parameter ratio".
TPP_SINGLE_LOG_RANGE = 0.01
#: Fewest range (max - min) of r^phi N_rec / N_eff before phi and A are called not separated.
SHARE_MIN_RANGE = 0.01
#: |corr(phi_hat, a_hat)| from the information matrix above this: phi and A are not separated.
MAX_PHI_A_CORRELATION = 0.99
#: A run's FLOPs more than this far (relative) from its budget: off its isoFLOP curve.
FLOP_RTOL = 0.10


def _spread(values: np.ndarray) -> dict[str, float]:
    lo, hi = float(np.min(values)), float(np.max(values))
    return {"min": lo, "max": hi, "log_range": math.log(hi / lo) if lo > 0 else math.inf}


def run_flops(frame: pd.DataFrame) -> tuple[np.ndarray, str]:
    """Each planned run's training FLOPs and where they come from (module docstring)."""
    if "train_flops_per_token" in frame:
        fpt = frame["train_flops_per_token"].to_numpy(float)
        return fpt * frame["tokens"].to_numpy(float), "train_flops_per_token x tokens"
    return frame["flops"].to_numpy(float), "the design's flops (F x D, or 6 (N_once + r N_rec) D)"


def off_isoflop(frame: pd.DataFrame, rtol: float = FLOP_RTOL) -> np.ndarray:
    """Boolean per run: FLOPs (:func:`run_flops`) more than ``rtol`` from the ``budget`` label."""
    flops, _ = run_flops(frame)
    return np.abs(flops / frame["budget"].to_numpy(float) - 1.0) > rtol


def _information(frame: pd.DataFrame, params: Mapping[str, float]) -> tuple[Any, Any, np.ndarray]:
    """The information matrix on the design at the law's predicted losses (phi free when some
    r differs from 1), the same with phi known (the alpha/beta check's: a phi/A confounding
    must not read as one of alpha and beta), and the correlations of the estimates the first
    implies (pseudo-inverse of the unit-diagonal matrix; NaN when singular)."""
    theta = params_to_theta(params)
    design = design_of(frame)
    runs = RunTable(
        pd.DataFrame(
            {
                "r": frame["r"].to_numpy(float),
                "n_once": frame["n_once"].to_numpy(float),
                "n_rec": frame["n_rec"].to_numpy(float),
                "tokens": frame["tokens"].to_numpy(float),
                "loss": np.exp(log_loss(theta, design)),
            }
        ),
        source="planned design",
    )
    phi_free = bool(np.any(frame["r"].to_numpy(float) != 1))
    info, _ = information(runs, LawSpec(), theta, DELTA, phi_free=phi_free)
    known_phi, _ = information(runs, LawSpec(), theta, DELTA, phi_free=False)
    if info.singular:
        return info, known_phi, np.full(info.unit.shape, math.nan)
    cov = np.linalg.pinv(info.unit)
    sd = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    return info, known_phi, cov / np.outer(sd, sd)


@dataclass(frozen=True)
class Conditioning(JsonIO):
    """A design's conditioning (module docstring): ``tpp`` and ``tpp_by_budget`` (min, max,
    log_range of D / (N_once + N_rec)), ``r_values``, ``share`` (min, max, log_range of
    r^phi N_rec / N_eff), ``condition`` (NaN when singular), ``condition_known_phi`` (the
    same with phi known: the alpha/beta check's), ``corr_alpha_beta`` and
    ``corr_phi_a``, ``flops_source``, ``off_isoflop`` (one dict per run off its curve: index,
    budget, r, size, flops, ratio), ``n_runs``, and the ``warnings`` of the three checks."""

    law_source: str
    tpp: dict[str, float]
    tpp_by_budget: list[dict[str, float]]
    r_values: list[int]
    share: dict[str, float]
    condition: float
    singular: bool
    condition_known_phi: float
    corr_alpha_beta: float
    corr_phi_a: float
    flops_source: str
    off_isoflop: list[dict[str, Any]]
    n_runs: int
    warnings: list[Caution] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        """True when any check fired (the optimiser rejects such candidates)."""
        return bool(self.warnings)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "warnings"}
        return to_plain({**d, "warnings": [c.to_dict() for c in self.warnings]})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Conditioning:
        kw = {k: v for k, v in data.items() if k != "warnings"}
        for k in ("condition", "condition_known_phi", "corr_alpha_beta", "corr_phi_a"):
            kw[k] = math.nan if kw.get(k) is None else float(kw[k])
        return cls(**kw, warnings=[Caution.from_dict(c, source="plan") for c in data.get("warnings", [])])

    def lines(self) -> list[str]:
        """The "Design conditioning" block of :meth:`phifit.plan.PlanResult.summary`."""
        t, s = self.tpp, self.share
        per_budget = "; ".join(
            f"{b['budget']:.3g}: {b['min']:.3g}-{b['max']:.3g}" for b in self.tpp_by_budget
        )
        cond = "singular" if self.singular else f"{self.condition:.3g}"
        n_off = len(self.off_isoflop)
        return [
            f"tokens/param  {t['min']:.3g}-{t['max']:.3g} (ln range {t['log_range']:.2f}); "
            f"per budget {per_budget}",
            f"r {{{', '.join(map(str, self.r_values))}}}; r^phi N_rec / N_eff {s['min']:.3g}-{s['max']:.3g}",
            f"information condition number {cond} ({self.condition_known_phi:.3g} with phi known; "
            f"unit diagonal, at {self.law_source}); corr(alpha, beta) {self.corr_alpha_beta:+.2f}, "
            f"corr(phi, A) {self.corr_phi_a:+.2f}",
            f"FLOPs vs budget: {n_off} of {self.n_runs} runs off their isoFLOP curve by > {FLOP_RTOL:.0%} "
            f"({self.flops_source})",
        ]


def conditioning(
    design: Any, params: Mapping[str, float] | None = None, *, law_source: str = "the study's joint fit"
) -> Conditioning:
    """The conditioning of ``design`` (a :class:`~phifit.plan.inputs.PlanDesign`) under
    ``params`` (default :data:`phifit.law.REFERENCE_PARAMS`): module docstring."""
    p = {**REFERENCE_PARAMS, **(params or {})}
    frame = design.frame
    n = frame["n_once"].to_numpy(float) + frame["n_rec"].to_numpy(float)
    tpp = frame["tokens"].to_numpy(float) / n
    r = frame["r"].to_numpy(float)
    loop = r ** float(p["phi"]) * frame["n_rec"].to_numpy(float)
    share = loop / (frame["n_once"].to_numpy(float) + loop)
    by_budget = [
        {"budget": float(b), **_spread(tpp[idx])}
        for b, idx in frame.groupby("budget", sort=True).indices.items()
    ]
    info, known_phi, corr = _information(frame, p)
    names = info.names
    c_ab = float(corr[names.index("alpha"), names.index("beta")])
    c_pa = float(corr[names.index("phi"), names.index("a")]) if "phi" in names else math.nan
    flops, source = run_flops(frame)
    off = off_isoflop(frame)
    off_runs = [
        {
            "index": int(i),
            "budget": float(frame["budget"].iloc[i]),
            "r": int(r[i]),
            "size": float(frame["size"].iloc[i]) if "size" in frame else float(n[i]),
            "flops": float(flops[i]),
            "ratio": float(flops[i] / frame["budget"].iloc[i]),
        }
        for i in np.flatnonzero(off)
    ]
    result = Conditioning(
        law_source=law_source,
        tpp=_spread(tpp),
        tpp_by_budget=by_budget,
        r_values=sorted({int(x) for x in r}),
        share=_spread(share),
        condition=info.condition if math.isfinite(info.condition) else math.nan,
        singular=bool(info.singular),
        condition_known_phi=known_phi.condition if math.isfinite(known_phi.condition) else math.nan,
        corr_alpha_beta=c_ab,
        corr_phi_a=c_pa,
        flops_source=source,
        off_isoflop=off_runs,
        n_runs=len(frame),
    )
    warnings = _alpha_beta(result) + _phi_a(result) + _off(result)
    return Conditioning(**{**result.__dict__, "warnings": warnings})


def _alpha_beta(c: Conditioning) -> list[Caution]:
    t = c.tpp["log_range"]
    known = c.condition_known_phi
    ill = not known <= MAX_CONDITION  # NaN (singular) included
    if t >= TPP_MIN_LOG_RANGE and not ill:
        return []
    what = (
        "a single tokens-per-parameter ratio"
        if t < TPP_SINGLE_LOG_RANGE
        else f"tokens per parameter varies by ln(max/min) = {t:.2f}"
    )
    cond = "singular" if math.isnan(known) else f"{known:.3g}"
    return [
        caution(
            "plan",
            "alpha_beta_not_separated",
            f"the design cannot separate alpha from beta: {what} ({c.tpp['min']:.3g}-{c.tpp['max']:.3g}), "
            f"condition number {cond} with phi known; thresholds ln range >= {TPP_MIN_LOG_RANGE:g} (from "
            f"the information matrix on the study's grid, docs/planning.md; not arXiv 2605.08541's own) "
            f"and condition <= {MAX_CONDITION:.0e}; spread D/N within and across budgets",
            tpp_log_range=t,
            threshold=TPP_MIN_LOG_RANGE,
            condition_known_phi=known,
        )
    ]


def _phi_a(c: Conditioning) -> list[Caution]:
    rng = c.share["max"] - c.share["min"]
    one_r = len(c.r_values) < 2
    corr = abs(c.corr_phi_a)
    if not (one_r or rng < SHARE_MIN_RANGE or corr > MAX_PHI_A_CORRELATION):
        return []
    why = (
        f"one r value ({c.r_values[0]})"
        if one_r
        else f"r^phi N_rec / N_eff spans {c.share['min']:.3g}-{c.share['max']:.3g}"
    )
    return [
        caution(
            "plan",
            "phi_a_not_separated",
            f"the design cannot separate phi from A: {why}, |corr(phi, A)| "
            + ("n/a (phi not identified)" if math.isnan(corr) else f"{corr:.4f}")
            + f"; thresholds two or more r, share range >= {SHARE_MIN_RANGE:g}, |corr| <= "
            f"{MAX_PHI_A_CORRELATION:g} (from the information matrix, docs/planning.md); plan several r",
            share_range=rng,
            corr_phi_a=c.corr_phi_a,
            threshold=MAX_PHI_A_CORRELATION,
        )
    ]


def _off(c: Conditioning) -> list[Caution]:
    if not c.off_isoflop:
        return []
    ratios = [o["ratio"] for o in c.off_isoflop]
    return [
        caution(
            "plan",
            "off_isoflop",
            f"{len(ratios)} of {c.n_runs} runs are off their budget's isoFLOP curve: FLOPs "
            f"{min(ratios):.3g}-{max(ratios):.3g} x the budget label (tolerance {FLOP_RTOL:.0%}, FLOPs "
            f"from {c.flops_source}), so bracketing is not checked: set tokens = budget / FLOPs per token",
            n_off=len(ratios),
            rtol=FLOP_RTOL,
        )
    ]
