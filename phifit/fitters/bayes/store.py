"""The posterior as ArviZ InferenceData: building it, saving it as netCDF, reading draws back.

Groups: ``posterior`` (a, alpha, b, beta, e, phi, sigma, nu and E, A, B; (chain, draw)),
``sample_stats``, ``log_likelihood`` and ``posterior_predictive`` (``log_loss`` per run),
``observed_data`` and ``constant_data`` (the design).  phifit's spec, priors and sampler
settings are attributes of the posterior group (``generator = "phifit"``), which is how
:func:`load_posterior` recognises its own files.
"""

from __future__ import annotations

import json
import os
import warnings as _warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import __version__
from ...extras import import_optional
from ...law import THETA_NAMES, LawSpec
from ...result import load_posterior, natural_params  # noqa: F401 (load_posterior re-exported)
from ...runs.table import RunTable
from .model import CELL_VARS, STORED_VARS, prior_description


def posterior_attrs(
    runs: RunTable, spec: LawSpec, settings: Mapping[str, Any], *, noise: str = "run"
) -> dict[str, Any]:
    """Attributes of the posterior group: generator, version, spec, priors (of the ``noise``
    model), source, sampler settings."""
    return {
        "generator": "phifit",
        "phifit_version": __version__,
        "phifit_spec": json.dumps(
            {"fixed": dict(spec.fixed), "bounds": {k: list(v) for k, v in spec.bounds.items()}}
        ),
        "phifit_priors": json.dumps(prior_description(spec, noise=noise)),
        "phifit_source": runs.source,
        **dict(settings),
    }


def inference_data(
    runs: RunTable,
    post: Mapping[str, np.ndarray],
    stats: Mapping[str, np.ndarray],
    loglik: np.ndarray,
    y_rep: np.ndarray,
    attrs: Mapping[str, Any],
    cell_labels: list[str] | None = None,
):
    """ArviZ InferenceData of a fit; ``loglik`` and ``y_rep`` are (chains x draws, runs).

    ``cell_labels`` names the cells of the cell model's ``cell_effect`` (dimension ``cell``)."""
    az = import_optional("arviz", "bayes", "method 'bayes' (the Bayesian fit)")

    n_chain, n_draw = post["a"].shape
    posterior = dict(post)
    posterior.update(E=np.exp(post["e"]), A=np.exp(post["a"]), B=np.exp(post["b"]))
    n = len(runs)
    dims = {"log_loss": ["run"], "r": ["run"], "n_once": ["run"], "n_rec": ["run"], "tokens": ["run"]}
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        idata = az.from_dict(
            posterior=posterior,
            sample_stats=dict(stats),
            log_likelihood={"log_loss": loglik.reshape(n_chain, n_draw, n)},
            posterior_predictive={"log_loss": y_rep.reshape(n_chain, n_draw, n)},
            observed_data={"log_loss": runs.log_loss},
            constant_data={"r": runs.r, "n_once": runs.n_once, "n_rec": runs.n_rec, "tokens": runs.tokens},
            coords={"run": runs.run_ids, **({"cell": list(cell_labels)} if cell_labels else {})},
            dims={**dims, **({"cell_effect": ["cell"]} if cell_labels else {})},
        )
    idata.posterior.attrs.update(attrs)
    return idata


def as_idata(source):
    """InferenceData from a BayesFit (anything with ``.idata``), an InferenceData or a netCDF path."""
    if isinstance(source, (str, os.PathLike)):
        return load_posterior(source)
    idata = getattr(source, "idata", None)
    if idata is not None:
        return idata
    if hasattr(source, "posterior"):
        return source
    raise ValueError(f"expected a BayesFit, an InferenceData or a netCDF path, got {type(source).__name__}")


def posterior_draws(source) -> dict[str, np.ndarray]:
    """Per-draw natural parameters as flat arrays {E, A, alpha, B, beta, phi, sigma, nu} (and tau,
    the sd of the cell effects, for the cell model).

    ``source``: a BayesFit, an InferenceData from this module or a netCDF path.  Arrays
    are chain-major (chain 0's draws first), length chains x draws; fixed parameters are
    constant arrays.  A derived quantity per draw is a vectorised expression, e.g. the
    worth of a shared block at r = 4: ``4 ** draws["phi"]``; a whole law per draw via
    :func:`posterior_theta` and :func:`phifit.law.log_loss`.
    """
    idata = as_idata(source)
    names = STORED_VARS + CELL_VARS[:1]
    post = {k: np.asarray(idata.posterior[k].values, float) for k in names if k in idata.posterior}
    return {k: v.ravel() for k, v in natural_params(post).items()}


def posterior_theta(source) -> np.ndarray:
    """Per-draw internal parameters, (S, 6) in the order (a, alpha, b, beta, e, phi)."""
    idata = as_idata(source)
    return np.stack([np.asarray(idata.posterior[c].values, float).ravel() for c in THETA_NAMES], axis=1)


def posterior_spec(source) -> LawSpec:
    """The LawSpec a saved posterior was sampled under."""
    idata = as_idata(source)
    raw = json.loads(idata.posterior.attrs["phifit_spec"])
    return LawSpec(fixed=raw["fixed"], bounds={k: tuple(v) for k, v in raw["bounds"].items()})
