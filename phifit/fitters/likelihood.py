"""The Gaussian working likelihood, AIC/BIC and the likelihood-ratio test: defined once.

Used by the restricted-fit comparison (:mod:`phifit.compare.restricted`: phi free vs phi = 0, 1) and
by the recipes' joint fit (:mod:`phifit.recipes.shared_phi`: one phi per recipe vs one shared phi).

**Gaussian log-likelihood on log residuals, sigma profiled out.**  With
e_i = log L_i - log L_hat_i and RSS = sum e_i^2 over the n runs,

    sigma_hat^2 = RSS / n,   log lik = -n/2 (log(2 pi sigma_hat^2) + 1),

counting k = (free law parameters) + 1 (sigma).  AIC = -2 log lik + 2 k and
BIC = -2 log lik + k log n.  This is a *working* likelihood: the reference (Huber) fit
minimises a robust criterion, not this one, so for Huber fits these are Gaussian scores of
Huber fits and the likelihood-ratio test is approximate; a least-squares fit *is* this
likelihood's maximum.

**Likelihood ratio** of a null (restricted) fit against an alternative (larger) fit:
LR = 2 (log lik_alt - log lik_null) = n log(RSS_null / RSS_alt), referred to chi^2(df),
df = the number of parameters the null fixes.  When the null fixes a value *on* a bound of
its box (e.g. phi = 3) and df = 1, the reference is the mixture 0.5 chi^2(0) + 0.5 chi^2(1)
(Self and Liang 1987): the p-value is halved.  With Huber fits LR can come out negative
(the null's Huber fit may have the smaller RSS); it is then reported as 0 with a caution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cautions import Caution, caution
from ..serialize import JsonIO, to_plain

#: Significance level of the tests' verdicts (reject when p < SIGNIFICANCE).
SIGNIFICANCE = 0.05
LIKELIHOOD = "Gaussian on log-loss residuals, sigma profiled out"
APPROXIMATE = "LR from Gaussian scores of Huber fits (not ML): approximate"


def gaussian_log_lik(log_resid: np.ndarray) -> tuple[float, float]:
    """(log lik, RSS): Gaussian on log residuals with sigma^2 = RSS / n profiled out.

    log lik = -n/2 (log(2 pi RSS / n) + 1).  An exact fit (RSS = 0) gives +inf.
    """
    e = np.asarray(log_resid, dtype=float)
    n = len(e)
    rss = float(np.sum(e * e))
    if rss <= 0:
        return math.inf, 0.0
    return -0.5 * n * (math.log(2 * math.pi * rss / n) + 1.0), rss


@dataclass(frozen=True)
class GaussianScore(JsonIO):
    """Working-likelihood scores of one fit: ``log_lik``, ``rss`` (of log residuals),
    ``n_params`` k = free law parameters + 1 (sigma), ``n`` runs, ``aic``, ``bic``."""

    log_lik: float
    rss: float
    n_params: int
    n: int

    @classmethod
    def from_residuals(cls, log_resid: np.ndarray, n_law_params: int) -> GaussianScore:
        """Score of log residuals e = log L - log L_hat of a fit with ``n_law_params`` free."""
        ll, rss = gaussian_log_lik(log_resid)
        return cls(log_lik=ll, rss=rss, n_params=int(n_law_params) + 1, n=len(log_resid))

    @property
    def aic(self) -> float:
        """AIC = -2 log lik + 2 k."""
        return -2 * self.log_lik + 2 * self.n_params

    @property
    def bic(self) -> float:
        """BIC = -2 log lik + k log n."""
        return -2 * self.log_lik + self.n_params * math.log(self.n)

    def summary(self) -> str:
        return (
            f"log lik {self.log_lik:.4f} (n = {self.n}, k = {self.n_params}, RSS {self.rss:.6g}), "
            f"AIC {self.aic:.2f}, BIC {self.bic:.2f}"
        )

    def to_dict(self) -> dict[str, Any]:
        return to_plain(
            {"log_lik": self.log_lik, "rss": self.rss, "n_params": self.n_params, "n": self.n}
            | {"aic": self.aic, "bic": self.bic}
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GaussianScore:
        ll = data.get("log_lik")
        return cls(
            log_lik=math.inf if ll is None else float(ll),
            rss=float(data["rss"]),
            n_params=int(data["n_params"]),
            n=int(data["n"]),
        )


@dataclass(frozen=True)
class LRTest(JsonIO):
    """Likelihood-ratio test of a null fit within an alternative fit.

    ``statistic`` LR (clipped at 0), ``df``, ``p_value``, ``reference`` ("chi2(1)" or the
    boundary mixture), ``raw`` the unclipped LR, ``warnings`` (negative LR, boundary null).
    """

    statistic: float
    df: int
    p_value: float
    reference: str
    raw: float
    warnings: tuple[Caution, ...] = ()

    def summary(self) -> str:
        return f"LR = {self.statistic:.4g}, df = {self.df}, p = {p_text(self.p_value)} ({self.reference})"

    def to_dict(self) -> dict[str, Any]:
        return to_plain(
            {
                "statistic": self.statistic,
                "df": self.df,
                "p_value": self.p_value,
                "reference": self.reference,
                "raw": self.raw,
                "warnings": [w.to_dict() for w in self.warnings],
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "compare") -> LRTest:
        def num(key: str) -> float:
            return math.nan if data.get(key) is None else float(data[key])

        return cls(
            statistic=num("statistic"),
            df=int(data["df"]),
            p_value=num("p_value"),
            reference=str(data["reference"]),
            raw=num("raw"),
            warnings=tuple(Caution.from_dict(w, source=source) for w in data.get("warnings") or []),
        )


def lr_test(
    alt: GaussianScore,
    null: GaussianScore,
    df: int,
    *,
    on_boundary: Sequence[str] = (),
    source: str = "compare",
    label: str = "",
) -> LRTest:
    """LR = 2 (log lik_alt - log lik_null) against chi^2(df) (module docstring).

    ``on_boundary``: the parameters the null fixes on a bound of their box (mixture
    reference for df = 1, a conservative chi^2(df) otherwise).  ``label`` prefixes the cautions'
    messages (e.g. "phi=0: ").
    """
    warnings: list[Caution] = []
    if np.isfinite(alt.log_lik) and np.isfinite(null.log_lik):
        raw = 2.0 * (alt.log_lik - null.log_lik)
    else:
        raw = math.inf
    if np.isnan(raw):
        raw = 0.0
    prefix = f"{label}: " if label else ""
    if raw < 0:
        warnings.append(
            caution(
                source,
                "negative_lr",
                f"{prefix}LR = {raw:.3g} < 0 (the restricted fit has the smaller log-RSS: the fits "
                f"are not ML fits); reported as 0",
                level="note",
                lr=raw,
            )
        )
    stat = max(raw, 0.0)
    # the chi2 survival function itself (scipy.stats.chi2.sf calls it; scipy.special is loaded
    # with scipy.optimize, scipy.stats would add its own import: docs/benchmarks.md, 'Where
    # `phifit report` spends its time on table (a)')
    from scipy.special import chdtrc

    p = float(chdtrc(df, stat)) if df > 0 else math.nan
    reference = f"chi2({df})"
    if on_boundary:
        if df == 1:
            p *= 0.5
            reference = "0.5 chi2(0) + 0.5 chi2(1)"
            text = "the null is on the boundary, p from the 50:50 mixture 0.5 chi2(0) + 0.5 chi2(1)"
        else:
            text = f"the chi2({df}) reference is conservative there"
        warnings.append(
            caution(
                source,
                "boundary_null",
                f"{prefix}{', '.join(on_boundary)} is fixed at a bound of its box: {text}",
                level="note",
                parameters=list(on_boundary),
                df=df,
            )
        )
    return LRTest(
        statistic=stat, df=int(df), p_value=p, reference=reference, raw=raw, warnings=tuple(warnings)
    )


def p_text(p: float | None) -> str:
    """A p-value for print: 2 significant figures, ``<1e-16`` below that, ``-`` when absent."""
    if p is None or not np.isfinite(p):
        return "-"
    if p < 1e-16:
        return "<1e-16"
    return f"{p:.2g}"


__all__ = [
    "APPROXIMATE",
    "GaussianScore",
    "LIKELIHOOD",
    "LRTest",
    "SIGNIFICANCE",
    "gaussian_log_lik",
    "lr_test",
    "p_text",
]
