"""Bayesian fit of the joint law with PyMC: posterior, diagnostics, PPC, PSIS-LOO.

Model (log space, the parameterisation of :mod:`phifit.law`, theta = (a, alpha, b, beta, e, phi)):

    log L_i  ~  Student-t(nu, mu_i, sigma)
    mu_i     =  LSE(a - alpha * log N_eff,i,  b - beta * log D_i,  e)
    log N_eff,i = logaddexp(log N_once,i,  phi * log r_i + log N_rec,i)

The formula is written once, in :func:`phifit.law.lse_log_loss`, which takes the math
namespace (``logaddexp``) as an argument: :func:`phifit.law.log_loss` evaluates it on NumPy
arrays and the PyMC model on PyTensor tensors (the tests check the two agree to 1e-10).

Priors (weakly informative, in internal coordinates, each truncated to the LawSpec box;
the defaults are the study's box a, b in [-5, 35], alpha, beta in [0, 2.5], e in [-3, 2],
phi in [-3, 3]):

=====  =========================  ============================================================
coord  prior                      why
=====  =========================  ============================================================
a      Normal(5, 5) on the box    log A: A from e^-5 to e^15 within 2 sd (Chinchilla: a = 6.0,
                                  the study: 3.3)
b      Normal(5, 5) on the box    log B, same reasoning (Chinchilla 6.0, the study 6.8)
alpha  Normal(0.3, 0.5) on box    published exponents lie in 0.2-0.5; 0 to 1.3 within 2 sd
beta   Normal(0.3, 0.5) on box    as alpha
e      Normal(0.5, 1) on box      log E: irreducible loss 0.6-4.5 nats within 1 sd (study 1.57)
phi    Normal(0.5, 1) on box      centred between the two reference values: equal prior
                                  density at phi = 0 and phi = 1, both within half a sd
sigma  HalfNormal(0.05)           scale of log-loss residuals; 0.05 is a 5% loss error, while
                                  the study's residuals are ~0.4-1% (its RMSE 0.010 nats)
nu     Gamma(2, 0.1)              degrees of freedom (Juarez & Steel 2010; Stan prior wiki):
                                  mean 20, lets the data choose between heavy and normal tails
=====  =========================  ============================================================

Fixed parameters (``LawSpec(fixed={"phi": 0.0})``) are constants in the law.

Why Student-t and not Normal.  The reference fit minimises a Huber loss with delta = 1e-3,
i.e. it deliberately down-weights runs with large residuals (one diverged or mislabelled
run must not drag phi).  The Student-t likelihood is the Bayesian counterpart: its
influence function is bounded (indeed redescending), so a bad run is down-weighted instead
of pulling the fit, and with nu estimated the data choose how heavy the tails are.  On
clean Gaussian noise nu's posterior stays away from small values (median ~20 on the
study's design), the t is then close to the Normal and little efficiency is lost; the
coverage study in the tests checks the intervals.  The scale sigma is estimated.

Sampling.  NUTS via nutpie (``sampler="auto"`` uses nutpie when importable, else PyMC's
own NUTS, which always works; ``extras["sampler"]`` records which ran).  In theta the
posterior is a curved, narrow ridge (corr(a, alpha) and corr(b, beta) exceed 0.999 on the
study's design, and E trades off against A and alpha), on which NUTS needs hundreds of
leapfrog steps per draw and still diverges.  The sampler therefore moves in

    v = (A_c, log alpha, B_c, log beta, E, phi),   A_c = A N_c^-alpha,  B_c = B D_c^-beta

(the power-law terms at the design's central size N_c and data D_c; see
:func:`theta_to_v`), in which the predicted loss is close to linear, whitened as
v = c + L z with c the Huber optimum and L the Cholesky factor of the Laplace covariance
there.  This is a change of variables only: the prior densities and the box are evaluated
on theta and the log-Jacobian log |d theta / d v| is added, so the posterior of theta is
exactly the model above (the tests check the model's log density against an independent
scipy evaluation).  On the study's design this takes NUTS from hundreds to ~7 leapfrog steps
per draw, with no divergences.

Compilation.  nutpie compiles the model with numba once per process and spec *structure*
(which parameters are free, and the box); the run table, the whitening and fixed values
are PyTensor shared data, so a new table, or phi = 1 after phi = 0, only swaps data
(nutpie's ``with_data``).  PyMC's own sampler instead caches compiled C code on disk.

Results (:func:`fit_bayes` returns a :class:`~phifit.result.FitResult`):

- ``params``: posterior medians (``ci``: 95% highest-density intervals, HDI);
- ``objective``: -ELPD-LOO (PSIS-LOO, ArviZ ``loo``), a sum over runs;
- ``r2``/``rmse``/``residuals``: at the posterior median, via ``build_result``;
- ``extras``: posterior mean, median, sd, 94% and 95% HDI per parameter (natural names;
  also sigma and nu), R-hat, bulk and tail ESS, divergences, sampler, compile and sampling
  times, the posterior predictive check per r, LOO summary, netCDF path;
- ``warnings``: R-hat > 1.01, bulk or tail ESS < 400, divergences > 0, Pareto k above
  ArviZ's threshold, extreme posterior predictive p-values.

PyTensor's compile cache is kept under the repository's ``.cache/`` (see
:mod:`phifit.cache`); this module sets ``PYTENSOR_FLAGS=base_compiledir=...`` before
PyTensor is first imported, unless the user already chose a compile directory.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings as _warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from ..cache import cache_dir
from ..law import (
    PARAM_NAMES,
    THETA_NAMES,
    THETA_TO_PARAM,
    LawSpec,
    log_loss,
    log_loss_and_jacobian,
    lse_log_loss,
)
from ..result import FitResult
from ..runs import RunTable
from .common import build_result, effective_spec


# --------------------------------------------------------------------------------------
# PyTensor compile cache: must be configured before the first ``import pytensor``.
def _configure_pytensor_cache() -> str | None:
    """Point PyTensor's base_compiledir at phifit's cache unless the user chose one.

    Appends ``base_compiledir=<cache>/pytensor`` to ``PYTENSOR_FLAGS`` (creating it when
    unset) and returns that path; leaves the flags alone (returns None) when they already
    name a ``base_compiledir`` or ``compiledir``.  Has no effect once PyTensor is imported.
    """
    flags = os.environ.get("PYTENSOR_FLAGS", "")
    keys = {part.split("=", 1)[0].strip() for part in flags.split(",") if part.strip()}
    if keys & {"base_compiledir", "compiledir"}:
        return None
    path = str(cache_dir("pytensor"))
    if "," in path:
        return None  # PYTENSOR_FLAGS cannot hold a comma; leave PyTensor's default
    entry = f"base_compiledir={path}"
    os.environ["PYTENSOR_FLAGS"] = f"{flags},{entry}" if flags.strip() else entry
    return path


_PYTENSOR_CACHE = None if "pytensor" in sys.modules else _configure_pytensor_cache()


# --------------------------------------------------------------------------------------
# The law, written once for any math namespace.
# --------------------------------------------------------------------------------------
# Priors and defaults.
#: Truncated-normal priors (mean, sd) per internal coordinate; truncation = the LawSpec box.
PRIORS: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        "a": (5.0, 5.0),
        "alpha": (0.3, 0.5),
        "b": (5.0, 5.0),
        "beta": (0.3, 0.5),
        "e": (0.5, 1.0),
        "phi": (0.5, 1.0),
    }
)
#: sigma ~ HalfNormal(SIGMA_PRIOR_SD): scale of the log-loss residuals.
SIGMA_PRIOR_SD = 0.05
#: nu ~ Gamma(alpha, beta) (shape, rate): degrees of freedom of the Student-t.
NU_PRIOR = (2.0, 0.1)
#: Diagnostic thresholds (Vehtari et al. 2021): R-hat, bulk/tail ESS.
RHAT_MAX = 1.01
ESS_MIN = 400
#: Posterior predictive p-values outside [PPC_P, 1 - PPC_P] are reported as warnings.
PPC_P = 0.005
#: log N = -inf (N_once = 0 or N_rec = 0) enters the PyTensor graph as this floor:
#: exp(-1e4) underflows to exactly 0, so logaddexp(x, floor) == x in float64.
LOG_FLOOR = -1.0e4
SAMPLERS = ("auto", "nutpie", "pymc")
_STORED = tuple(THETA_NAMES) + ("sigma", "nu")


def prior_description(spec: LawSpec | None = None) -> dict[str, str]:
    """Readable prior per parameter for ``spec`` (fixed parameters say so)."""
    spec = spec or LawSpec()
    out = {}
    for coord in THETA_NAMES:
        name = THETA_TO_PARAM[coord]
        if name in spec.fixed:
            out[coord] = f"fixed at {name} = {spec.fixed[name]:g}"
        else:
            mu, sd = PRIORS[coord]
            lo, hi = spec.bounds[coord]
            out[coord] = f"Normal({mu:g}, {sd:g}) truncated to [{lo:g}, {hi:g}]"
    out["sigma"] = f"HalfNormal({SIGMA_PRIOR_SD:g})"
    out["nu"] = f"Gamma({NU_PRIOR[0]:g}, rate {NU_PRIOR[1]:g})"
    return out


# --------------------------------------------------------------------------------------
# Model data (everything that changes between fits is data, not graph).
def _finite_log(x: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x), x, LOG_FLOOR)


def _centres(runs: RunTable, phi: float) -> tuple[float, float]:
    """c_N = mean log N_eff (at ``phi``) and c_D = mean log D over the runs."""
    from ..law import log_n_eff

    return float(np.mean(log_n_eff(phi, runs.design))), float(np.mean(runs.design.log_tokens))


def log_exponents(spec: LawSpec) -> np.ndarray:
    """(6,) flags: a free alpha / beta is sampled as log alpha / log beta when its box is >= 0."""
    flags = np.zeros(len(THETA_NAMES), dtype=bool)
    for i, c in enumerate(THETA_NAMES):
        flags[i] = c in ("alpha", "beta") and bool(spec.free_mask[i]) and spec.bounds[c][0] >= 0.0
    return flags


def theta_to_v(theta: np.ndarray, c_n: float, c_d: float, log_exp: np.ndarray) -> np.ndarray:
    """Sampling coordinates v from theta = (a, alpha, b, beta, e, phi):

        v = (A_c, log alpha, B_c, log beta, E, phi),
        A_c = exp(a - alpha c_N) = A N_c^-alpha,  B_c = exp(b - beta c_D) = B D_c^-beta,

    the two power-law terms at the central size N_c = e^c_N and data D_c = e^c_D.  In v the
    predicted loss at the centre, E + A_c + B_c, is linear and the exponents' right skew is
    removed, so the posterior is close to Gaussian.  ``log_exp`` (:func:`log_exponents`)
    says whether alpha and beta are logged (not when the box allows negative values).
    """
    a, alpha, b, beta, e, phi = (float(x) for x in theta)
    return np.array(
        [
            math.exp(a - alpha * c_n),
            math.log(alpha) if log_exp[1] else alpha,
            math.exp(b - beta * c_d),
            math.log(beta) if log_exp[3] else beta,
            math.exp(e),
            phi,
        ]
    )


def v_to_theta(v: np.ndarray, c_n: float, c_d: float, log_exp: np.ndarray) -> np.ndarray:
    """Inverse of :func:`theta_to_v`."""
    alpha = math.exp(v[1]) if log_exp[1] else float(v[1])
    beta = math.exp(v[3]) if log_exp[3] else float(v[3])
    return np.array(
        [math.log(v[0]) + alpha * c_n, alpha, math.log(v[2]) + beta * c_d, beta, math.log(v[4]), float(v[5])]
    )


def _dtheta_dv(v: np.ndarray, c_n: float, c_d: float, log_exp: np.ndarray) -> np.ndarray:
    """Jacobian d theta / d v (6 x 6).

    Its log-determinant is -log A_c - log B_c - log E (+ log alpha + log beta when those
    are logged): the ``log_jac`` term of :func:`build_model`.
    """
    m = np.eye(len(THETA_NAMES))
    d_alpha = math.exp(v[1]) if log_exp[1] else 1.0
    d_beta = math.exp(v[3]) if log_exp[3] else 1.0
    m[0, 0], m[0, 1], m[1, 1] = 1.0 / v[0], c_n * d_alpha, d_alpha
    m[2, 2], m[2, 3], m[3, 3] = 1.0 / v[2], c_d * d_beta, d_beta
    m[4, 4] = 1.0 / v[4]
    return m


def _whitening(runs: RunTable, spec: LawSpec) -> dict[str, Any]:
    """Centre and factor of the free sampling coordinates: v_free = centre + L z.

    centre = v at the Huber optimum (200 starts, moved 0.1% of the box inside it); L is the
    Cholesky factor of the Laplace covariance (J_v' J_v / s^2 + M' P M)^-1 over the free
    coordinates, with M = d theta / d v, J_v = J M (J the law's analytic Jacobian of
    log L_hat), s = 1.4826 MAD of the Huber residuals (floored at 1e-4) and P the diagonal
    prior precision on theta.  Only the sampler's efficiency depends on this; the posterior
    does not.
    """
    from .huber import HuberOptions, fit_huber

    mask = spec.free_mask
    log_exp = log_exponents(spec)
    huber = fit_huber(runs, spec=spec, options=HuberOptions(n_starts=200, seed=0))
    theta = np.asarray(huber.theta, dtype=float)
    lo, hi = spec.lower, spec.upper
    margin = 1e-3 * (hi - lo)
    theta[mask] = np.clip(theta[mask], lo + margin, hi - margin)
    c_n, c_d = _centres(runs, float(theta[5]))
    v = theta_to_v(theta, c_n, c_d, log_exp)
    pred, jac = log_loss_and_jacobian(theta, runs.design)
    resid = runs.log_loss - pred
    scale = max(1.4826 * float(np.median(np.abs(resid - np.median(resid)))), 1e-4)
    m = _dtheta_dv(v, c_n, c_d, log_exp)[np.ix_(mask, mask)]
    jv = jac[:, mask] @ m
    prior_prec = np.diag([1.0 / PRIORS[c][1] ** 2 for c, f in zip(THETA_NAMES, mask) if f])
    precision = jv.T @ jv / scale**2 + m.T @ prior_prec @ m
    cov = np.linalg.inv(precision)
    return {
        "centre": v[mask],
        "chol": np.linalg.cholesky(0.5 * (cov + cov.T)),
        "c_n": c_n,
        "c_d": c_d,
        "residual_scale": scale,
        "huber_theta": theta,
    }


def _truncnorm_log_norm(mu: float, sd: float, lo: float, hi: float) -> float:
    """log of the truncated normal's normaliser, sd sqrt(2 pi) (Phi(hi') - Phi(lo'))."""
    from scipy.special import log_ndtr

    u, l_ = (hi - mu) / sd, (lo - mu) / sd
    log_mass = log_ndtr(u) + math.log1p(-math.exp(min(log_ndtr(l_) - log_ndtr(u), 0.0)))
    return math.log(sd) + 0.5 * math.log(2 * math.pi) + float(log_mass)


def model_data(
    runs: RunTable, spec: LawSpec, whitening: Mapping[str, Any] | None = None
) -> dict[str, np.ndarray]:
    """The shared data of the PyMC model of ``spec`` for the table ``runs``.

    Everything that changes between tables is here (design, observed log-loss, the
    whitening, the fixed values); the spec's structure (which coordinates are free, the box,
    the priors) is in the graph (:func:`build_model`).  Without ``whitening`` it is computed
    from a Huber fit (:func:`_whitening`).
    """
    w = whitening if whitening is not None else _whitening(runs, spec)
    d = runs.design
    data = {
        "design": np.stack(
            [
                _finite_log(d.log_n_once),
                _finite_log(d.log_n_rec),
                np.asarray(d.log_r, float),
                np.asarray(d.log_tokens, float),
            ]
        ),
        "log_loss_obs": np.asarray(runs.log_loss, float),
        "centre": np.asarray(w["centre"], float),
        "chol": np.asarray(w["chol"], float),
        "c_n": np.asarray(w["c_n"], float),
        "c_d": np.asarray(w["c_d"], float),
    }
    fixed = spec.full_theta(np.zeros(int(spec.free_mask.sum())))
    for i, c in enumerate(THETA_NAMES):
        if not spec.free_mask[i]:
            data[f"fixed_{c}"] = np.asarray(fixed[i], float)
    return data


def _structure(spec: LawSpec) -> tuple:
    """What the compiled graph depends on: free coordinates, logged exponents, the box."""
    return (
        tuple(bool(f) for f in spec.free_mask),
        tuple(bool(f) for f in log_exponents(spec)),
        tuple((c, *spec.bounds[c]) for c in THETA_NAMES),
    )


def build_model(data: Mapping[str, np.ndarray], spec: LawSpec):
    """The PyMC model of the module docstring for ``spec``; inputs are ``pm.Data``.

    Free RVs: z (one per free coordinate, whitened), sigma, nu.  With v = centre + L z, the
    free sampling coordinates among (A_c, log alpha, B_c, log beta, E, phi) (see
    :func:`theta_to_v`), the law's coordinates are

        alpha = exp(v_alpha), beta = exp(v_beta), phi = v_phi,
        a = log A_c + alpha c_N,  b = log B_c + beta c_D,  e = log E

    (a fixed coordinate is the ``fixed_<name>`` datum instead).  The ``theta_prior``
    potential is the truncated-normal prior density of the free theta plus
    log |d theta / d v| = sum(log alpha, log beta) - sum(log A_c, log B_c, log E) over the
    free coordinates, and -inf outside the box or for A_c, B_c, E <= 0, so the posterior of
    theta is exactly the model's.  Deterministics: a, alpha, b, beta, e, phi and
    ``log_loss_hat`` (the law's log-loss per run).
    """
    import pymc as pm
    import pytensor.tensor as pt

    free = {c: bool(f) for c, f in zip(THETA_NAMES, spec.free_mask)}
    logged = {c: bool(f) for c, f in zip(THETA_NAMES, log_exponents(spec))}
    with pm.Model() as model:
        d = {k: pm.Data(k, np.asarray(v)) for k, v in data.items()}
        z = pm.Flat("z", shape=int(spec.free_mask.sum()))
        v_free = d["centre"] + pt.dot(d["chol"], z)
        v = {c: v_free[j] for j, c in enumerate(c for c in THETA_NAMES if free[c])}
        log_jac, valid, theta = 0.0, [], {}
        for c in ("alpha", "beta", "phi"):
            if not free[c]:
                theta[c] = d[f"fixed_{c}"]
            elif logged[c]:
                theta[c] = pt.exp(v[c])
                log_jac = log_jac + v[c]
            else:
                theta[c] = v[c]
        offsets = {"a": theta["alpha"] * d["c_n"], "b": theta["beta"] * d["c_d"], "e": 0.0}
        for c in ("a", "b", "e"):
            if not free[c]:
                theta[c] = d[f"fixed_{c}"]
                continue
            valid.append(pt.gt(v[c], 0.0))
            log_v = pt.log(pt.switch(valid[-1], v[c], 1.0))  # finite off the support
            theta[c] = log_v + offsets[c]
            log_jac = log_jac - log_v
        prior = 0.0
        for c in THETA_NAMES:
            if free[c]:
                mu, sd = PRIORS[c]
                lo, hi = spec.bounds[c]
                valid += [pt.ge(theta[c], lo), pt.le(theta[c], hi)]
                prior = prior - 0.5 * ((theta[c] - mu) / sd) ** 2 - _truncnorm_log_norm(mu, sd, lo, hi)
        inside = valid[0]
        for cond in valid[1:]:
            inside = pt.and_(inside, cond)
        pm.Potential("theta_prior", pt.switch(inside, prior + log_jac, -np.inf))
        parts = [pm.Deterministic(c, pt.as_tensor(theta[c])) for c in THETA_NAMES]
        sigma = pm.HalfNormal("sigma", sigma=SIGMA_PRIOR_SD)
        nu = pm.Gamma("nu", alpha=NU_PRIOR[0], beta=NU_PRIOR[1])
        x = d["design"]  # rows: log N_once, log N_rec, log r, log D
        mu = lse_log_loss(parts, (x[0], x[1], x[2], x[3]), logaddexp=pt.logaddexp)
        mu = pm.Deterministic("log_loss_hat", mu)
        pm.StudentT("log_loss", nu=nu, mu=mu, sigma=sigma, observed=d["log_loss_obs"])
    return model


# --------------------------------------------------------------------------------------
# Samplers.
_NUTPIE_CACHE: dict[str, Any] = {}


def nutpie_available() -> bool:
    """True when nutpie (and numba) can be imported."""
    try:
        import numba  # noqa: F401
        import nutpie  # noqa: F401
    except ImportError:
        return False
    return True


def _resolve_sampler(sampler: str) -> str:
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; expected one of {', '.join(SAMPLERS)}")
    if sampler == "auto":
        return "nutpie" if nutpie_available() else "pymc"
    if sampler == "nutpie" and not nutpie_available():
        raise ImportError(
            "sampler='nutpie' needs nutpie and numba: pip install nutpie numba (or use sampler='pymc')"
        )
    return sampler


def _sample_nutpie(data, spec, *, draws, tune, chains, seed, target_accept, progressbar):
    """Returns (posterior arrays, sample-stat arrays, compile_s, sampling_s, cached).

    The compiled model is kept per spec structure (:func:`_structure`) for the life of the
    process; a new table or new fixed values only swap its data (``with_data``).
    """
    import nutpie

    key = _structure(spec)
    cached = key in _NUTPIE_CACHE
    t0 = time.perf_counter()
    if not cached:
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")
            _NUTPIE_CACHE[key] = nutpie.compile_pymc_model(build_model(data, spec), var_names=list(_STORED))
    compiled = _NUTPIE_CACHE[key].with_data(**data)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    trace = nutpie.sample(
        compiled,
        draws=draws,
        tune=tune,
        chains=chains,
        seed=seed,
        target_accept=target_accept,
        progress_bar=progressbar,
        save_warmup=False,
        cores=min(chains, os.cpu_count() or 1),
    )
    sampling_s = time.perf_counter() - t0
    post, stats = _draws_and_stats(trace, lp="logp", tree_depth="depth")
    return post, stats, compile_s, sampling_s, cached


def _sample_pymc(data, spec, *, draws, tune, chains, seed, target_accept, progressbar):
    """PyMC's own NUTS; its compile time is the total minus PyMC's reported sampling time
    (PyTensor caches the compiled C code on disk, so later processes compile faster)."""
    import pymc as pm

    t0 = time.perf_counter()
    model = build_model(data, spec)
    with model, _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        trace = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            random_seed=seed,
            target_accept=target_accept,
            progressbar=progressbar,
            cores=min(chains, os.cpu_count() or 1),
            var_names=list(_STORED),
            compute_convergence_checks=False,
            return_inferencedata=True,
        )
    total = time.perf_counter() - t0
    sampling_s = float(trace.posterior.attrs.get("sampling_time", total))
    post, stats = _draws_and_stats(trace, lp="lp", tree_depth="tree_depth")
    return post, stats, max(total - sampling_s, 0.0), sampling_s, False


def _draws_and_stats(trace, *, lp: str, tree_depth: str) -> tuple[dict, dict]:
    """Posterior arrays of the stored variables and the sampler statistics phifit reports.

    The two backends name two statistics differently (nutpie: ``logp``, ``depth``)."""
    post = {k: np.asarray(trace.posterior[k].values, float) for k in _STORED}
    st = trace.sample_stats
    names = {
        "diverging": ("diverging", bool),
        "lp": (lp, float),
        "tree_depth": (tree_depth, int),
        "energy": ("energy", float),
        "step_size": ("step_size", float),
        "n_steps": ("n_steps", int),
    }
    stats = {key: np.asarray(st[name].values, kind) for key, (name, kind) in names.items()}
    return post, stats


# --------------------------------------------------------------------------------------
# Posterior summaries.
def _natural(post: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """(chain, draw) arrays of E, A, alpha, B, beta, phi (+ sigma, nu) from internal ones."""
    out = {
        "E": np.exp(post["e"]),
        "A": np.exp(post["a"]),
        "alpha": post["alpha"],
        "B": np.exp(post["b"]),
        "beta": post["beta"],
        "phi": post["phi"],
    }
    for k in ("sigma", "nu"):
        if k in post:
            out[k] = post[k]
    return out


def _hdi(x: np.ndarray, prob: float) -> list[float]:
    import arviz as az

    lo, hi = az.hdi(np.asarray(x, float).ravel(), hdi_prob=prob)
    return [float(lo), float(hi)]


def summarise(draws: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Per parameter: mean, median, sd, 94% and 95% HDI, R-hat, bulk and tail ESS.

    ``draws`` maps names to (chain, draw) arrays.  R-hat is ArviZ's rank-normalised split
    R-hat, ESS its bulk and tail ESS (Vehtari et al. 2021); NaN with fewer than 2 chains
    or 4 draws.
    """
    import arviz as az

    out = {}
    for name, x in draws.items():
        x = np.asarray(x, float)
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")
            rhat = float(az.rhat(x)) if x.shape[0] >= 2 else float("nan")
            ess_bulk = float(az.ess(x, method="bulk"))
            ess_tail = float(az.ess(x, method="tail"))
        out[name] = {
            "mean": float(x.mean()),
            "median": float(np.median(x)),
            "sd": float(x.std(ddof=1)) if x.size > 1 else float("nan"),
            "hdi_94": _hdi(x, 0.94),
            "hdi_95": _hdi(x, 0.95),
            "r_hat": rhat,
            "ess_bulk": ess_bulk,
            "ess_tail": ess_tail,
        }
    return out


def posterior_predictive_check(
    y: np.ndarray, r: np.ndarray, mu: np.ndarray, sigma: np.ndarray, nu: np.ndarray, rng: np.random.Generator
) -> tuple[list[dict[str, float]], np.ndarray]:
    """Observed vs replicated log-loss per r.

    For each posterior draw s, y_rep,s ~ Student-t(nu_s, mu_s, sigma_s) (``mu`` is (S, n)).
    Per group of runs with the same r, two test quantities:

    - T(y) = mean log-loss of the group; p_mean = P(T(y_rep) >= T(y)) over draws;
    - the realised discrepancy D(y, theta) = RMS of y - mu over the group (Gelman, Meng &
      Stern 1996); p_rmse = P(D(y_rep, theta) >= D(y, theta)).

    p-values near 0 or 1 flag a misfit of that r (a wrong phi shifts whole groups).
    Returns (rows, y_rep).
    """
    t = rng.standard_t(nu[:, None], size=mu.shape)
    y_rep = mu + sigma[:, None] * t
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


def student_t_loglik(y: np.ndarray, mu: np.ndarray, sigma: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """Pointwise log p(y_i | theta_s): Student-t(nu_s, mu_si, sigma_s) log density, (S, n).

    The same density as the model's likelihood (the tests compare it with PyMC's
    ``compute_log_likelihood``).
    """
    from scipy import stats

    return stats.t.logpdf(y[None, :], df=nu[:, None], loc=mu, scale=sigma[:, None])


# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BayesFit:
    """A Bayesian fit: the :class:`FitResult` and the ArviZ ``InferenceData`` behind it.

    ``idata`` holds the groups posterior (a, alpha, b, beta, e, phi, sigma, nu, E, A, B),
    sample_stats, log_likelihood and posterior_predictive (``log_loss`` per run),
    observed_data and constant_data (the design), with phifit's spec and settings in the
    attributes of the posterior group.
    """

    result: FitResult
    idata: Any

    @property
    def draws(self) -> dict[str, np.ndarray]:
        """Per-draw natural parameters, flat arrays (see :func:`posterior_draws`)."""
        return posterior_draws(self.idata)


def _check_options(draws, tune, chains, target_accept, seed) -> None:
    problems = []
    for name, value, low in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            problems.append(f"{name} must be an integer >= {low}, got {value!r}")
    if not (isinstance(target_accept, (int, float)) and 0.0 < target_accept < 1.0):
        problems.append(f"target_accept must be in (0, 1), got {target_accept!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        problems.append(f"seed must be an integer >= 0, got {seed!r}")
    if problems:
        raise ValueError("; ".join(problems))


def sample_posterior(
    runs: RunTable,
    *,
    spec: LawSpec | None = None,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    seed: int = 0,
    sampler: str = "auto",
    target_accept: float = 0.9,
    progressbar: bool = True,
    save: str | os.PathLike | None = None,
) -> BayesFit:
    """Sample the posterior of the joint law; returns the FitResult and the InferenceData.

    Same arguments as :func:`fit_bayes`.
    """
    _check_options(draws, tune, chains, target_accept, seed)
    resolved = _resolve_sampler(sampler)
    if save is not None:
        save = Path(save)
        if save.is_dir():
            raise ValueError(f"save={str(save)!r} is a directory; expected a netCDF file path")
        if not save.parent.is_dir():
            raise ValueError(f"save: directory {str(save.parent)!r} does not exist")
    spec = spec or LawSpec()
    fit_spec, notes = effective_spec(runs, spec)
    phi_identified = "phi" not in fit_spec.fixed or "phi" in spec.fixed
    mask = fit_spec.free_mask
    if mask.sum() == 0:
        raise ValueError("every parameter is fixed; nothing to sample")

    whitening = _whitening(runs, fit_spec)
    data = model_data(runs, fit_spec, whitening)
    settings = {
        "draws": draws,
        "tune": tune,
        "chains": chains,
        "seed": int(seed),
        "target_accept": float(target_accept),
        "progressbar": progressbar,
    }
    if resolved == "nutpie":
        try:
            post, stats, compile_s, sampling_s, cached = _sample_nutpie(data, fit_spec, **settings)
        except Exception as err:  # noqa: BLE001 - "auto" must always produce a fit
            if sampler != "auto":
                raise
            notes.append(f"nutpie failed ({type(err).__name__}: {err}); sampled with PyMC's NUTS instead")
            resolved = "pymc"
    if resolved == "pymc":
        post, stats, compile_s, sampling_s, cached = _sample_pymc(data, fit_spec, **settings)

    # per-draw predictions from the law (the one numpy definition)
    n_chain, n_draw = post["a"].shape
    theta_draws = np.stack([post[c].ravel() for c in THETA_NAMES], axis=1)
    mu = log_loss(theta_draws, runs.design)  # (S, n)
    y = runs.log_loss
    sigma, nu = post["sigma"].ravel(), post["nu"].ravel()
    loglik = student_t_loglik(y, mu, sigma, nu)
    rng = np.random.default_rng([int(seed), 20260501])
    ppc_rows, y_rep = posterior_predictive_check(y, runs.r, mu, sigma, nu, rng)

    natural = _natural(post)
    free_names = [THETA_TO_PARAM[c] for c, f in zip(THETA_NAMES, mask) if f]
    reported = {k: natural[k] for k in PARAM_NAMES if k in free_names}
    reported.update(sigma=natural["sigma"], nu=natural["nu"])
    summary = summarise(reported)
    n_div = int(stats["diverging"].sum())

    idata = _inference_data(
        runs,
        fit_spec,
        post,
        stats,
        loglik,
        y_rep,
        (n_chain, n_draw),
        attrs=_attrs(
            runs, fit_spec, resolved, sampler, draws, tune, chains, seed, target_accept, phi_identified
        ),
    )
    loo = _loo_summary(idata)

    msgs = list(notes) + _diagnostic_warnings(summary, n_div, chains, target_accept)
    if loo["n_high_pareto_k"]:
        bad = [runs.run_ids[i] for i in loo["high_k_runs"]]
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        msgs.append(
            f"PSIS-LOO: {loo['n_high_pareto_k']} of {len(runs)} runs have Pareto k > "
            f"{loo['good_k']:.2f} (max {loo['max_pareto_k']:.2f}; {shown}); their LOO "
            f"estimates are unreliable (influential runs)"
        )
    for row in ppc_rows:
        for key, label in (("p_mean", "mean log-loss"), ("p_rmse", "residual RMS")):
            if not PPC_P <= row[key] <= 1 - PPC_P:
                msgs.append(
                    f"posterior predictive check: r={row['r']:g} {label} has "
                    f"Bayesian p = {row[key]:.3f}; the law misfits these runs"
                )

    theta_med = np.array([float(np.median(post[c])) for c in THETA_NAMES])
    converged = bool(all(s["r_hat"] <= RHAT_MAX for s in summary.values()) and n_div == 0)
    netcdf = None
    if save is not None:
        idata.to_netcdf(str(save))
        netcdf = str(save)
    ci = {k: summary[k]["hdi_95"] for k in PARAM_NAMES if k in summary}
    if not phi_identified:
        ci.pop("phi", None)
    extras = {
        "ci_kind": "95% highest-density interval (HDI) of the marginal posterior",
        "stderr_kind": "posterior standard deviation",
        "posterior": summary,
        "diagnostics": {
            "max_r_hat": _nanmax([s["r_hat"] for s in summary.values()]),
            "min_ess_bulk": _nanmin([s["ess_bulk"] for s in summary.values()]),
            "min_ess_tail": _nanmin([s["ess_tail"] for s in summary.values()]),
            "divergences": n_div,
            "r_hat_max": RHAT_MAX,
            "ess_min": ESS_MIN,
        },
        "divergences": n_div,
        "sampler": resolved,
        "sampler_requested": sampler,
        "draws": int(draws),
        "tune": int(tune),
        "chains": int(chains),
        "seed": int(seed),
        "target_accept": float(target_accept),
        "compile_s": float(compile_s),
        "compile_cached": bool(cached),
        "sampling_s": float(sampling_s),
        "ppc": {
            "by_r": ppc_rows,
            "definition": "y_rep ~ Student-t(nu, mu, sigma) per draw; p_mean = "
            "P(mean_r y_rep >= mean_r y); p_rmse = P(RMS(y_rep - mu) >= "
            "RMS(y - mu)) per r",
        },
        "loo": {k: v for k, v in loo.items() if k != "high_k_runs"},
        "recurrence_worth": _recurrence_worth(natural["phi"], runs.r) if phi_identified else {},
        "netcdf": netcdf,
        "priors": prior_description(fit_spec),
        "likelihood": "Student-t(nu, mu = law log-loss, sigma) on log-loss",
        "whitening": {
            "coordinates": "v = (A N_c^-alpha, log alpha, B D_c^-beta, log beta, E, "
            "phi) = centre + L z (Laplace at the Huber optimum)",
            "log_n_c": whitening["c_n"],
            "log_d_c": whitening["c_d"],
            "residual_scale": whitening["residual_scale"],
        },
        "pytensor_compiledir": _compiledir(),
    }
    result = build_result(
        runs,
        fit_spec,
        theta_med,
        method="bayes",
        loss="student_t",
        objective=-loo["elpd_loo"],
        objective_name="-ELPD-LOO: minus the PSIS-LOO expected log predictive density of the "
        "observed log-losses (sum over runs)",
        converged=True,
        warnings=msgs,
        extras=extras,
        phi_identified=phi_identified,
    )
    # converged is set afterwards: build_result's "optimiser" message does not fit a sampler,
    # whose own R-hat / divergence warnings are already in msgs
    stderr = {k: summary[k]["sd"] for k in PARAM_NAMES if k in summary}
    if not phi_identified:
        stderr.pop("phi", None)
    result = result.with_updates(ci=ci, converged=converged, stderr=stderr)
    return BayesFit(result=result, idata=idata)


def fit_bayes(
    runs: RunTable,
    *,
    spec: LawSpec | None = None,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    seed: int = 0,
    sampler: str = "auto",
    target_accept: float = 0.9,
    progressbar: bool = True,
    save: str | os.PathLike | None = None,
) -> FitResult:
    """Bayesian fit of the joint law (see the module docstring for model and priors).

    Parameters
    ----------
    runs
        Validated run table.
    spec
        Which parameters vary and the box (truncation of the priors); default all six free.
    draws, tune, chains
        Posterior draws per chain after ``tune`` warm-up steps (default 4 x 1000 after 1000).
    seed
        Seed of the sampler (chain initialisation and transitions) and of the replicated
        data of the posterior predictive check; the same seed gives the same draws.
    sampler
        ``"auto"`` (nutpie when importable, else PyMC), ``"nutpie"`` or ``"pymc"``.
    target_accept
        NUTS target acceptance rate.
    progressbar
        Show the sampler's progress bar.
    save
        netCDF path for the posterior (ArviZ InferenceData; an existing file is replaced);
        reload with :func:`load_posterior`, per-draw parameters with :func:`posterior_draws`.

    Returns
    -------
    FitResult with ``params`` = posterior medians, ``ci`` = 95% HDIs,
    ``objective`` = -ELPD-LOO; details in ``extras`` (module docstring).
    """
    return sample_posterior(
        runs,
        spec=spec,
        draws=draws,
        tune=tune,
        chains=chains,
        seed=seed,
        sampler=sampler,
        target_accept=target_accept,
        progressbar=progressbar,
        save=save,
    ).result


# --------------------------------------------------------------------------------------
def _nanmax(values) -> float:
    arr = np.asarray(values, float)
    return float(np.nanmax(arr)) if np.isfinite(arr).any() else float("nan")


def _nanmin(values) -> float:
    arr = np.asarray(values, float)
    return float(np.nanmin(arr)) if np.isfinite(arr).any() else float("nan")


def _diagnostic_warnings(
    summary: Mapping[str, Mapping[str, float]], n_div: int, chains: int, target_accept: float
) -> list[str]:
    """Plain messages for R-hat > 1.01, bulk/tail ESS < 400 and divergences > 0."""
    msgs = []
    if chains < 2:
        msgs.append("R-hat needs at least 2 chains; convergence was not checked")
    for name, s in summary.items():
        if s["r_hat"] > RHAT_MAX:
            msgs.append(
                f"R-hat of {name} is {s['r_hat']:.3f} > {RHAT_MAX}: the chains disagree; "
                f"sample longer (more tune/draws) before trusting the posterior"
            )
        for kind in ("bulk", "tail"):
            ess = s[f"ess_{kind}"]
            if ess < ESS_MIN:
                msgs.append(
                    f"{kind} ESS of {name} is {ess:.0f} < {ESS_MIN}: too few effective "
                    f"draws for stable {'estimates' if kind == 'bulk' else 'intervals'}; "
                    f"increase draws"
                )
    if n_div:
        msgs.append(
            f"{n_div} divergent transitions after tuning: the posterior may be biased; "
            f"raise target_accept (now {target_accept:g}) or check parameters near the "
            f"box"
        )
    return msgs


def _recurrence_worth(phi: np.ndarray, r: np.ndarray) -> dict[str, dict[str, Any]]:
    """Per r > 1 in the data: r^phi (how many unique blocks one shared block is worth), per draw."""
    out = {}
    for value in np.unique(r):
        if value <= 1:
            continue
        w = np.asarray(value, float) ** np.asarray(phi, float).ravel()
        out[f"{value:g}"] = {"median": float(np.median(w)), "hdi_95": _hdi(w, 0.95)}
    return out


def _compiledir() -> str | None:
    mod = sys.modules.get("pytensor")
    try:
        return str(mod.config.base_compiledir) if mod is not None else _PYTENSOR_CACHE
    except AttributeError:
        return _PYTENSOR_CACHE


def _attrs(
    runs, spec, sampler, requested, draws, tune, chains, seed, target_accept, phi_identified
) -> dict[str, Any]:
    from .._version import __version__

    return {
        "generator": "phifit",
        "phifit_version": __version__,
        "phifit_spec": json.dumps(
            {"fixed": dict(spec.fixed), "bounds": {k: list(v) for k, v in spec.bounds.items()}}
        ),
        "phifit_phi_identified": int(phi_identified),
        "phifit_priors": json.dumps(prior_description(spec)),
        "phifit_source": runs.source,
        "sampler": sampler,
        "sampler_requested": requested,
        "draws": int(draws),
        "tune": int(tune),
        "chains": int(chains),
        "seed": int(seed),
        "target_accept": float(target_accept),
    }


def _inference_data(runs, spec, post, stats, loglik, y_rep, shape, attrs):
    import arviz as az

    n_chain, n_draw = shape
    posterior = dict(post)
    posterior.update(E=np.exp(post["e"]), A=np.exp(post["a"]), B=np.exp(post["b"]))
    n = len(runs)
    coords = {"run": runs.run_ids}
    dims = {"log_loss": ["run"], "r": ["run"], "n_once": ["run"], "n_rec": ["run"], "tokens": ["run"]}
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        idata = az.from_dict(
            posterior=posterior,
            sample_stats=stats,
            log_likelihood={"log_loss": loglik.reshape(n_chain, n_draw, n)},
            posterior_predictive={"log_loss": y_rep.reshape(n_chain, n_draw, n)},
            observed_data={"log_loss": runs.log_loss},
            constant_data={"r": runs.r, "n_once": runs.n_once, "n_rec": runs.n_rec, "tokens": runs.tokens},
            coords=coords,
            dims=dims,
        )
    idata.posterior.attrs.update(attrs)
    return idata


def _loo_summary(idata) -> dict[str, Any]:
    """PSIS-LOO of the fit: elpd_loo, se, p_loo, Pareto-k threshold and the runs above it."""
    import arviz as az

    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        res = az.loo(idata, pointwise=True)
    k = np.asarray(res.pareto_k.values, float)
    good_k = float(getattr(res, "good_k", 0.7))
    high = np.flatnonzero(k > good_k)
    return {
        "elpd_loo": float(res.elpd_loo),
        "se": float(res.se),
        "p_loo": float(res.p_loo),
        "good_k": good_k,
        "n_high_pareto_k": int(high.size),
        "max_pareto_k": float(np.max(k)) if k.size else float("nan"),
        "high_k_runs": high.tolist(),
    }


# --------------------------------------------------------------------------------------
# Reading posteriors back.
def load_posterior(path: str | os.PathLike):
    """Reload a posterior saved by :func:`fit_bayes` (``save=``) as ArviZ InferenceData."""
    import arviz as az

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such posterior file")
    try:
        idata = az.from_netcdf(str(path))
    except Exception as err:  # noqa: BLE001 - any reader failure means "not a posterior"
        raise ValueError(f"{path}: not a readable netCDF posterior ({err})") from None
    if "posterior" not in idata.groups() or idata.posterior.attrs.get("generator") != "phifit":
        raise ValueError(f"{path}: not a phifit posterior (no phifit attributes in its posterior group)")
    return idata


def _as_idata(source):
    if isinstance(source, BayesFit):
        return source.idata
    if isinstance(source, (str, os.PathLike)):
        return load_posterior(source)
    if hasattr(source, "posterior"):
        return source
    raise ValueError(f"expected a BayesFit, an InferenceData or a netCDF path, got {type(source).__name__}")


def posterior_draws(source) -> dict[str, np.ndarray]:
    """Per-draw natural parameters as flat arrays {E, A, alpha, B, beta, phi, sigma, nu}.

    ``source`` is a :class:`BayesFit`, an InferenceData from this module or a netCDF path.
    Arrays are chain-major (chain 0's draws first), length chains x draws; fixed
    parameters are constant arrays.  A derived quantity per draw is then a vectorised
    expression, e.g. the worth of a shared block at r = 4: ``4 ** draws["phi"]``; or a
    whole law per draw via :func:`posterior_theta` and :func:`phifit.law.log_loss`.
    """
    idata = _as_idata(source)
    post = {k: np.asarray(idata.posterior[k].values, float) for k in _STORED if k in idata.posterior}
    return {k: v.ravel() for k, v in _natural(post).items()}


def posterior_theta(source) -> np.ndarray:
    """Per-draw internal parameters, (S, 6) in the order (a, alpha, b, beta, e, phi)."""
    idata = _as_idata(source)
    return np.stack([np.asarray(idata.posterior[c].values, float).ravel() for c in THETA_NAMES], axis=1)


def posterior_spec(source) -> LawSpec:
    """The LawSpec a saved posterior was sampled under."""
    idata = _as_idata(source)
    raw = json.loads(idata.posterior.attrs["phifit_spec"])
    return LawSpec(fixed=raw["fixed"], bounds={k: tuple(v) for k, v in raw["bounds"].items()})


__all__ = [
    "BayesFit",
    "PRIORS",
    "SAMPLERS",
    "build_model",
    "fit_bayes",
    "load_posterior",
    "lse_log_loss",
    "model_data",
    "posterior_draws",
    "posterior_predictive_check",
    "posterior_spec",
    "posterior_theta",
    "prior_description",
    "sample_posterior",
    "student_t_loglik",
    "summarise",
]
