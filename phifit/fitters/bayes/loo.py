"""PSIS-LOO of one Bayesian fit: the expected log predictive density and its Pareto-k check.

Pareto-smoothed importance-sampling leave-one-out cross-validation (Vehtari, Gelman &
Gabry 2017), computed by ArviZ (``az.loo``) from the pointwise log-likelihood
log p(y_i | theta_s):

    elpd_loo = sum_i log p(y_i | y_-i),   y_i = log L_i (one run left out at a time)

``se`` is its standard error (sqrt(n var_i)), ``p_loo`` the effective number of
parameters.  Each run's importance weights get a Pareto-k shape estimate; above ArviZ's
threshold min(1 - 1/log10 S, 0.7) (S = posterior draws) that run's leave-one-out estimate
is unreliable (an influential run), which :func:`pareto_k_caution` reports.
"""

from __future__ import annotations

import warnings as _warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...cautions import Caution, caution
from ...extras import import_optional


def psis_loo(idata) -> dict[str, Any]:
    """elpd_loo, se, p_loo, the Pareto-k threshold ``good_k``, and per run ``loo_i`` and ``pareto_k``."""
    az = import_optional("arviz", "bayes", "PSIS-LOO (method 'bayes')")

    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        res = az.loo(idata, pointwise=True)
    k = np.asarray(res.pareto_k.values, float)
    good_k = float(getattr(res, "good_k", 0.7))
    return {
        "elpd_loo": float(res.elpd_loo),
        "se": float(res.se),
        "p_loo": float(res.p_loo),
        "good_k": good_k,
        "n_high_pareto_k": int(np.sum(k > good_k)),
        "max_pareto_k": float(np.max(k)) if k.size else float("nan"),
        "loo_i": np.asarray(res.loo_i.values, float),
        "pareto_k": k,
    }


def pareto_k_caution(loo: dict[str, Any], run_ids: Sequence[str], *, model: str = "") -> Caution | None:
    """A ``pareto_k`` caution naming the runs with k above ``good_k`` (None when there are none)."""
    k = np.asarray(loo["pareto_k"], float)
    high = np.flatnonzero(k > loo["good_k"])
    if not high.size:
        return None
    ids = [str(run_ids[i]) for i in high]
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    prefix = f"{model}: " if model else ""
    return caution(
        "bayes",
        "pareto_k",
        f"{prefix}PSIS-LOO: {high.size} of {k.size} runs have Pareto k > {loo['good_k']:.2f} "
        f"(max {k.max():.2f}; {shown}); their LOO estimates are unreliable (influential runs)",
        model=model,
        n_high=int(high.size),
        good_k=float(loo["good_k"]),
        max_k=float(k.max()),
        runs=ids,
    )


def loo_extras(loo: dict[str, Any]) -> dict[str, float]:
    """The JSON-safe scalars of :func:`psis_loo` kept in a FitResult's extras."""
    keys = ("elpd_loo", "se", "p_loo", "good_k", "n_high_pareto_k", "max_pareto_k")
    return {k: loo[k] for k in keys}
