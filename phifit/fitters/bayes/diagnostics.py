"""Checks of a Bayesian fit, returned as :class:`~phifit.cautions.Caution` records (source "bayes").

Thresholds (Vehtari, Gelman, Simpson, Carpenter & Buerkner 2021, "Rank-normalization,
folding, and localization: an improved R-hat", arXiv 1903.08008):

- ``r_hat``: rank-normalised split R-hat > :data:`RHAT_MAX` (1.01): the chains disagree;
- ``low_ess``: bulk or tail effective sample size < :data:`ESS_MIN` (400, i.e. 100 per
  chain for 4 chains): too few effective draws for stable means / interval ends;
- ``few_chains``: fewer than 2 chains, so R-hat cannot be computed;
- ``divergences``: divergent transitions after tuning: NUTS could not follow the
  posterior's curvature, and the draws may be biased (Betancourt 2017);
- ``ppc``: a posterior predictive p-value outside [:data:`PPC_P`, 1 - PPC_P] for a
  group of runs with the same r: the law misfits that group (see
  :func:`.summary.posterior_predictive_check`);
- ``cell_misfit``: with cell effects, a converged posterior whose HDI of phi excludes the
  pooled Huber estimate (located inside phi's box) (:func:`cell_misfit_caution`).

The cell effects' R-hat and ESS are checked together (:func:`cell_effect_cautions`): one
caution per check naming the worst cell, not one per cell.

Each check is a pure function; printing happens elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ...cautions import Caution, caution

#: R-hat above this is a convergence warning.
RHAT_MAX = 1.01
#: Bulk or tail ESS below this is a warning.
ESS_MIN = 400
#: Posterior predictive p-values outside [PPC_P, 1 - PPC_P] are warnings.
PPC_P = 0.005
SOURCE = "bayes"


def convergence_cautions(
    summary: Mapping[str, Mapping[str, float]], divergences: int, chains: int, target_accept: float
) -> list[Caution]:
    """R-hat, ESS, chain-count and divergence checks of a posterior summary.

    ``summary`` is :func:`.summary.summarise` output (per parameter ``r_hat``,
    ``ess_bulk``, ``ess_tail``).
    """
    out = []
    if chains < 2:
        out.append(
            caution(
                SOURCE,
                "few_chains",
                "R-hat needs at least 2 chains; convergence was not checked (sample 4 chains)",
                chains=chains,
            )
        )
    for name, s in summary.items():
        if s["r_hat"] > RHAT_MAX:
            out.append(
                caution(
                    SOURCE,
                    "r_hat",
                    f"R-hat of {name} is {s['r_hat']:.3f} > {RHAT_MAX}: the chains disagree; "
                    f"sample longer (more tune/draws) before trusting the posterior",
                    parameter=name,
                    r_hat=s["r_hat"],
                    threshold=RHAT_MAX,
                )
            )
        for kind in ("bulk", "tail"):
            ess = s[f"ess_{kind}"]
            if ess < ESS_MIN:
                what = "estimates" if kind == "bulk" else "intervals"
                out.append(
                    caution(
                        SOURCE,
                        "low_ess",
                        f"{kind} ESS of {name} is {ess:.0f} < {ESS_MIN}: too few effective "
                        f"draws for stable {what}; increase draws",
                        parameter=name,
                        ess_kind=kind,
                        ess=ess,
                        threshold=ESS_MIN,
                    )
                )
    if divergences:
        out.append(
            caution(
                SOURCE,
                "divergences",
                f"{divergences} divergent transitions after tuning: the posterior may be biased; "
                f"raise target_accept (now {target_accept:g}) or check parameters near the box",
                divergences=int(divergences),
                target_accept=float(target_accept),
            )
        )
    return out


def ppc_cautions(rows: Iterable[Mapping[str, float]]) -> list[Caution]:
    """Posterior predictive p-values outside [PPC_P, 1 - PPC_P], per r and test quantity."""
    out = []
    for row in rows:
        for key, label in (("p_mean", "mean log-loss"), ("p_rmse", "residual RMS")):
            if not PPC_P <= row[key] <= 1 - PPC_P:
                out.append(
                    caution(
                        SOURCE,
                        "ppc",
                        f"posterior predictive check: r={row['r']:g} {label} has Bayesian "
                        f"p = {row[key]:.3f}; the law misfits these runs",
                        r=row["r"],
                        statistic=key,
                        p=row[key],
                        threshold=PPC_P,
                    )
                )
    return out


def cell_effect_cautions(cell_summary: Mapping[str, Mapping[str, float]]) -> list[Caution]:
    """R-hat and ESS of the cell effects, one caution per check over all cells (not one per cell).

    ``cell_summary`` maps ``cell_effect[<cell>]`` to :func:`.summary.summarise` rows.
    """
    out = []
    high = {k: s["r_hat"] for k, s in cell_summary.items() if s["r_hat"] > RHAT_MAX}
    if high:
        worst = max(high, key=high.get)
        out.append(
            caution(
                SOURCE,
                "r_hat",
                f"R-hat > {RHAT_MAX} for {len(high)} of {len(cell_summary)} cell effects (worst "
                f"{high[worst]:.3f}, {worst}): the chains disagree; sample longer before trusting "
                f"the posterior",
                parameter="cell_effect",
                r_hat=high[worst],
                cells=high,
                threshold=RHAT_MAX,
            )
        )
    low = {k: min(s["ess_bulk"], s["ess_tail"]) for k, s in cell_summary.items()}
    low = {k: v for k, v in low.items() if v < ESS_MIN}
    if low:
        worst = min(low, key=low.get)
        out.append(
            caution(
                SOURCE,
                "low_ess",
                f"bulk or tail ESS < {ESS_MIN} for {len(low)} of {len(cell_summary)} cell effects (lowest "
                f"{low[worst]:.0f}, {worst}): too few effective draws; increase draws",
                parameter="cell_effect",
                ess=low[worst],
                cells=low,
                threshold=ESS_MIN,
            )
        )
    return out


def cell_misfit_caution(
    phi_hdi: list[float] | None, pooled_phi: float, tau: float, sigma: float, hdi_prob: float
) -> Caution | None:
    """The cell model's HDI of phi excludes the pooled (Huber, independent-runs) estimate.

    Where the law holds, both estimate the same phi (on law-true tables of the study's design
    with cell-shared noise the cell model's median is unbiased).  Where whole cells sit off the
    law, the cell effects absorb the levels of whole isoFLOP curves, so phi rests on the
    curves' shapes, while the pooled fit also uses the levels between curves: the two then
    answer different questions, and their disagreement is itself a sign of misfit.
    """
    if not phi_hdi or not np.all(np.isfinite(phi_hdi)) or not np.isfinite(pooled_phi):
        return None
    lo, hi = phi_hdi
    if lo <= pooled_phi <= hi:
        return None
    pct = f"{100 * hdi_prob:g}%"
    return caution(
        SOURCE,
        "cell_misfit",
        f"phi's {pct} HDI [{lo:.3f}, {hi:.3f}] with cell effects excludes the pooled Huber estimate "
        f"{pooled_phi:.3f}: whole (budget, r) cells sit off the law (tau = {tau:.4g} against "
        f"sigma = {sigma:.4g} within a cell), so the curves' shapes and their levels disagree about "
        f"phi; read phi with the lack-of-fit test of r^phi (phifit compare), not as one measurement",
        hdi=[float(lo), float(hi)],
        pooled_phi=float(pooled_phi),
        tau=float(tau),
        sigma=float(sigma),
    )


def sampler_fallback_caution(error: BaseException) -> Caution:
    """nutpie failed under ``sampler="auto"`` and PyMC's NUTS ran instead."""
    return caution(
        SOURCE,
        "sampler_fallback",
        f"nutpie failed ({type(error).__name__}: {error}); sampled with PyMC's NUTS instead",
        level="note",
        error=f"{type(error).__name__}: {error}",
    )
