"""Posterior summaries of a Bayesian fit: per-parameter statistics, PPC, and the text summary.

Per parameter (:func:`summarise`, the columns of ``arviz.summary``):

- ``mean``, ``median``, ``sd``: of the marginal posterior draws (sd with ddof = 1);
- ``hdi``: the highest-density interval at probability ``hdi_prob`` (the shortest
  interval holding that share of the draws; ArviZ ``hdi``);
- ``mcse_mean``, ``mcse_sd``: Monte Carlo standard errors of the mean and the sd, ArviZ's
  definitions: mcse_mean = sd / sqrt(ESS_mean(x)); with c = (x - mean x)^2,
  mcse_sd = sqrt(Var(c) / ESS_mean(c) / (4 mean c)) (the delta method for sd = sqrt(var));
  computed here because ``az.mcse(..., method="sd")`` fails under Numba in ArviZ 0.23;
- ``ess_bulk``, ``ess_tail``: bulk and tail effective sample sizes;
- ``r_hat``: rank-normalised split R-hat (Vehtari et al. 2021); NaN with fewer than
  2 chains or 4 draws.

A FitResult of the Bayesian fit reports the posterior *median* as ``params`` and the HDI
as ``ci`` (``ci_level`` = ``hdi_prob``); :func:`bayes_summary` prints all of the above
from the result alone, so it works after a JSON round trip.
"""

from __future__ import annotations

import warnings as _warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import defaults
from ...extras import import_optional
from ...result import FitResult, bayes_summary, natural_params  # noqa: F401 (re-exported: the text view lives with the record)


def hdi(x: np.ndarray, prob: float) -> list[float]:
    """Highest-density interval [lo, hi] of the draws ``x`` at probability ``prob``."""
    az = import_optional("arviz", "bayes", "the posterior summary (method 'bayes')")

    lo, hi = az.hdi(np.asarray(x, float).ravel(), hdi_prob=prob)
    return [float(lo), float(hi)]


def mcse(x: np.ndarray) -> tuple[float, float]:
    """Monte Carlo standard errors (of the mean, of the sd) of (chain, draw) draws ``x``."""
    az = import_optional("arviz", "bayes", "the posterior summary (method 'bayes')")

    x = np.asarray(x, float)
    if x.size < 4 or x.shape[-1] < 4:
        return float("nan"), float("nan")
    c = (x - x.mean()) ** 2
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        ess_x, ess_c = float(az.ess(x, method="mean")), float(az.ess(c, method="mean"))
    evar = float(c.mean())
    varvar = (float((c**2).mean()) - evar**2) / ess_c
    mcse_sd = float(np.sqrt(varvar / evar / 4)) if evar > 0 else float("nan")
    return float(x.std(ddof=1) / np.sqrt(ess_x)), mcse_sd


def summarise(
    draws: Mapping[str, np.ndarray], *, hdi_prob: float = defaults.LEVEL
) -> dict[str, dict[str, Any]]:
    """Per parameter: mean, median, sd, hdi, mcse_mean, mcse_sd, ess_bulk, ess_tail, r_hat.

    ``draws`` maps names to (chain, draw) arrays (see the module docstring).
    """
    az = import_optional("arviz", "bayes", "the posterior summary (method 'bayes')")

    out = {}
    for name, x in draws.items():
        x = np.asarray(x, float)
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")
            rhat = float(az.rhat(x)) if x.shape[0] >= 2 else float("nan")
            mcse_mean, mcse_sd = mcse(x)
            stats = {
                "mcse_mean": mcse_mean,
                "mcse_sd": mcse_sd,
                "ess_bulk": float(az.ess(x, method="bulk")),
                "ess_tail": float(az.ess(x, method="tail")),
            }
        out[name] = {
            "mean": float(x.mean()),
            "median": float(np.median(x)),
            "sd": float(x.std(ddof=1)) if x.size > 1 else float("nan"),
            "hdi": hdi(x, hdi_prob),
            **stats,
            "r_hat": rhat,
        }
    return out


def posterior_predictive_check(
    y: np.ndarray,
    r: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    nu: np.ndarray,
    rng: np.random.Generator,
    *,
    cell: np.ndarray | None = None,
    tau: np.ndarray | None = None,
) -> tuple[list[dict[str, float]], np.ndarray]:
    """Observed vs replicated log-loss per r.

    For each posterior draw s, y_rep,s ~ Student-t(nu_s, mu_s, sigma_s) (``mu`` is (S, n), the
    law's log-loss).  With the cell model (``cell``: each run's cell code, ``tau``: (S,)), each
    replicate also draws *new* cell effects, y_rep,s = mu_s + tau_s z_c + sigma_s t: the check
    asks whether the law plus noise shared within cells explains each r's runs, not whether
    the fitted cell effects do (they would absorb any misfit by construction).
    Per group of runs with the same r, two test quantities:

    - T(y) = mean log-loss of the group; p_mean = P(T(y_rep) >= T(y)) over draws;
    - the realised discrepancy D(y, theta) = RMS of y - mu over the group (Gelman, Meng &
      Stern 1996); p_rmse = P(D(y_rep, theta) >= D(y, theta)).

    p-values near 0 or 1 flag a misfit of that r (a wrong phi shifts whole groups).
    Returns (rows, y_rep).
    """
    t = rng.standard_t(nu[:, None], size=mu.shape)
    y_rep = mu + sigma[:, None] * t
    if cell is not None and tau is not None:
        cell = np.asarray(cell, int)
        z = rng.standard_normal((mu.shape[0], int(cell.max()) + 1))
        y_rep = y_rep + np.asarray(tau, float)[:, None] * z[:, cell]
    rows = []
    for value in np.unique(r):
        g = r == value
        t_obs = float(y[g].mean())
        t_rep = y_rep[:, g].mean(axis=1)
        d_obs = np.sqrt(np.mean((y[g] - mu[:, g]) ** 2, axis=1))
        d_rep = np.sqrt(np.mean((y_rep[:, g] - mu[:, g]) ** 2, axis=1))
        rows.append(
            {
                "r": float(value),
                "n": int(g.sum()),
                "obs_mean": t_obs,
                "rep_mean": float(t_rep.mean()),
                "rep_sd": float(t_rep.std(ddof=1)),
                "p_mean": float(np.mean(t_rep >= t_obs)),
                "obs_rmse": float(d_obs.mean()),
                "rep_rmse": float(d_rep.mean()),
                "p_rmse": float(np.mean(d_rep >= d_obs)),
            }
        )
    return rows, y_rep


def recurrence_worth(
    phi: np.ndarray, r: np.ndarray, *, hdi_prob: float = defaults.LEVEL
) -> dict[str, dict[str, Any]]:
    """Per r > 1 in the data: r^phi (how many unique blocks one shared block is worth) per draw,
    as its median and HDI."""
    out = {}
    for value in np.unique(r):
        if value <= 1:
            continue
        w = np.asarray(value, float) ** np.asarray(phi, float).ravel()
        out[f"{value:g}"] = {"median": float(np.median(w)), "hdi": hdi(w, hdi_prob)}
    return out
