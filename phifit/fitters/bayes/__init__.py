"""Bayesian fit of the joint law with PyMC: posterior, diagnostics, PPC, PSIS-LOO.

    log L_i ~ Student-t(nu, mu_i + u_c(i), sigma),  mu_i = log of the law
    L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta  at run i,
    u_c = tau z_c, z_c ~ Normal(0, 1): the effect every run of (budget, r) cell c shares

with weakly informative priors truncated to the LawSpec box.  One job per module:

- :mod:`.model`: likelihood, priors, the PyMC graph (:func:`build_model`, :func:`model_data`);
- :mod:`.coords`: the whitened sampling coordinates (a change of variables only);
- :mod:`.backends`: nutpie and PyMC's NUTS;
- :mod:`.sampling`: :func:`fit_bayes` / :func:`sample_posterior` (the FitResult);
- :mod:`.summary`: per-parameter posterior summary, PPC, :func:`bayes_summary` (text);
- :mod:`.diagnostics`: R-hat, ESS, divergence and PPC checks as Cautions;
- :mod:`.loo`: PSIS-LOO of one fit; :mod:`.loo_compare`: phi free vs phi = 0 vs phi = 1;
  :mod:`.noise_compare`: cell effects vs independent runs;
- :mod:`.store`: InferenceData, netCDF save/load, per-draw parameters.

Importing this package imports neither PyMC nor PyTensor and changes no environment
variable; PyTensor's compile cache is pointed at phifit's cache
(:func:`phifit.cache.use_pytensor_cache`) when a model is first built.
"""

from __future__ import annotations

from ...law import lse_log_loss
from .backends import SAMPLERS, nutpie_available
from .coords import (
    dtheta_dv,
    interval_bounds,
    level_shares,
    level_split,
    log_exponents,
    ridge_floor,
    theta_to_v,
    v_to_theta,
)
from .diagnostics import ESS_MIN, PPC_P, RHAT_MAX, convergence_cautions, ppc_cautions
from .loo import pareto_k_caution, psis_loo
from .loo_compare import MIN_DIFF, RULE, SE_MULT, LooComparison, compare_loo
from .model import (
    CELL_SLOTS,
    NOISE_MODELS,
    NU_PRIOR,
    PRIORS,
    SIGMA_PRIOR_SD,
    TAU_PRIOR_SD,
    build_model,
    cell_slots,
    model_data,
    prior_description,
    resolve_noise,
    student_t_loglik,
)
from .noise_compare import NoiseComparison, compare_noise
from .sampling import BayesFit, fit_bayes, sample_posterior
from .store import load_posterior, posterior_draws, posterior_spec, posterior_theta
from .summary import bayes_summary, posterior_predictive_check, summarise

__all__ = [
    "BayesFit",
    "CELL_SLOTS",
    "ESS_MIN",
    "LooComparison",
    "MIN_DIFF",
    "NoiseComparison",
    "NOISE_MODELS",
    "NU_PRIOR",
    "PPC_P",
    "PRIORS",
    "RHAT_MAX",
    "RULE",
    "SAMPLERS",
    "SE_MULT",
    "SIGMA_PRIOR_SD",
    "TAU_PRIOR_SD",
    "bayes_summary",
    "build_model",
    "cell_slots",
    "compare_loo",
    "compare_noise",
    "convergence_cautions",
    "dtheta_dv",
    "fit_bayes",
    "interval_bounds",
    "load_posterior",
    "log_exponents",
    "lse_log_loss",
    "model_data",
    "nutpie_available",
    "pareto_k_caution",
    "posterior_draws",
    "posterior_predictive_check",
    "posterior_spec",
    "posterior_theta",
    "ppc_cautions",
    "prior_description",
    "psis_loo",
    "resolve_noise",
    "level_shares",
    "level_split",
    "ridge_floor",
    "sample_posterior",
    "student_t_loglik",
    "summarise",
    "theta_to_v",
    "v_to_theta",
]
