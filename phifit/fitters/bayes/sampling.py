"""Sample the posterior of the joint law and return it as a FitResult (with the InferenceData).

:func:`fit_bayes` / :func:`sample_posterior` run, in order: the spec check (phi is held
fixed when the runs cannot identify it), the whitening from a Huber fit
(:mod:`.coords`), NUTS (:mod:`.backends`), the per-draw law and Student-t log-likelihood
(:mod:`.model`), the posterior predictive check and summaries (:mod:`.summary`),
PSIS-LOO (:mod:`.loo`), the checks (:mod:`.diagnostics`) and the InferenceData
(:mod:`.store`).

The FitResult: ``params`` = posterior medians; ``ci`` = HDIs at ``ci_level`` =
``hdi_prob``; ``stderr`` = posterior sd; ``objective`` = -ELPD-LOO (a sum over runs);
``r2``/``rmse``/``residuals`` at the posterior median; ``converged`` = every R-hat <= 1.01
and no divergences; ``warnings`` = Cautions of source "bayes"; ``extras`` = the per
parameter summary (``posterior``), diagnostics, sampler settings and times, PPC, LOO,
priors, whitening and the netCDF path.  :func:`.summary.bayes_summary` prints it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...cautions import Caution
from ...extras import MissingExtraError
from ...law import PARAM_NAMES, THETA_NAMES, THETA_TO_PARAM, LawSpec, log_loss
from ...result import FitResult
from ...runs.table import RunTable, as_runs
from ..common import build_result, check_information, effective_spec
from ..options import BayesOptions, resolve_options
from . import backends
from .diagnostics import (
    ESS_MIN,
    RHAT_MAX,
    cell_effect_cautions,
    cell_misfit_caution,
    convergence_cautions,
    ppc_cautions,
    sampler_fallback_caution,
)
from .loo import loo_extras, pareto_k_caution, psis_loo
from .model import (
    LIKELIHOODS,
    model_data,
    model_whitening,
    prior_description,
    resolve_noise,
    student_t_loglik,
)
from .store import inference_data, load_posterior, posterior_attrs, posterior_draws
from .summary import natural_params, posterior_predictive_check, recurrence_worth, summarise


@dataclass(frozen=True)
class BayesFit:
    """A Bayesian fit: the :class:`FitResult` and the ArviZ ``InferenceData`` behind it
    (groups in :mod:`.store`)."""

    result: FitResult
    idata: Any

    @property
    def draws(self) -> dict[str, np.ndarray]:
        """Per-draw natural parameters, flat arrays (see :func:`.store.posterior_draws`)."""
        return posterior_draws(self.idata)


def _check_options(draws, tune, chains, target_accept, seed, hdi_prob) -> None:
    problems = []
    for name, value, low in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            problems.append(f"{name} must be an integer >= {low}, got {value!r}")
    for name, value in (("target_accept", target_accept), ("hdi_prob", hdi_prob)):
        if not (isinstance(value, (int, float)) and 0.0 < value < 1.0):
            problems.append(f"{name} must be in (0, 1), got {value!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        problems.append(f"seed must be an integer >= 0, got {seed!r}")
    if problems:
        raise ValueError("; ".join(problems))


def _compiledir() -> str | None:
    """PyTensor's C-module compile directory in use (None when PyTensor was never imported)."""
    mod = sys.modules.get("pytensor")
    try:
        return str(mod.config.compiledir) if mod is not None else None
    except (AttributeError, ValueError):
        return None


def _finite_extreme(pick, values) -> float:
    """max or min of the finite values; NaN when there are none (e.g. R-hat of one chain)."""
    finite = [float(v) for v in values if np.isfinite(v)]
    return float(pick(finite)) if finite else float("nan")


def _cell_effects(
    cell_summary: dict[str, dict[str, Any]],
    cell: np.ndarray | None,
    labels: list[str] | None,
    tau: dict[str, Any] | None,
) -> dict[str, Any]:
    """The cell model's estimate of the law's misfit at the cell level (empty for ``noise="run"``).

    ``tau``: the posterior of the cell effects' sd; ``cells``: per (budget, r) cell its label,
    run count and the posterior median and HDI of its effect u_c (log-loss the cell's runs
    share beyond the law: negative = the cell sits below the law).
    """
    if cell is None or labels is None or tau is None:
        return {}
    counts = np.bincount(cell, minlength=len(labels))
    rows = []
    for j, lab in enumerate(labels):
        s = cell_summary[f"cell_effect[{lab}]"]
        rows.append({"cell": lab, "n": int(counts[j]), "median": s["median"], "hdi": s["hdi"]})
    return {
        "definition": "u_c: log-loss shared by the runs of (budget, r) cell c beyond the law; "
        "tau: their sd (the law's misfit at the cell level, with noise the cell's runs share)",
        "tau": {"median": tau["median"], "hdi": tau["hdi"]},
        "cells": rows,
    }


def _checked_save_path(save: str | Path | None, overwrite: bool = False) -> Path | None:
    """``save`` as a Path; ``ValueError`` when it is a directory or its directory does not exist,
    ``FileExistsError`` when it is a file other than a posterior phifit saved
    (:func:`.store.load_posterior` reads it) and ``overwrite`` is False."""
    if save is None:
        return None
    save = Path(save)
    if save.is_dir():
        raise ValueError(f"save={str(save)!r} is a directory; expected a netCDF file path")
    if not save.parent.is_dir():
        raise ValueError(f"save: directory {str(save.parent)!r} does not exist")
    if save.exists() and not overwrite:
        try:
            load_posterior(save)
        except (ValueError, OSError):
            raise FileExistsError(
                f"save={str(save)!r}: exists and is not a posterior phifit saved; choose another "
                "path or pass overwrite=True to replace it (--force on the command line)"
            ) from None
    return save


def _sampling_spec(runs: RunTable, spec: LawSpec | None) -> tuple[LawSpec, list[Caution], bool]:
    """The spec to sample (``spec`` or all six free, with phi held fixed when the runs cannot identify
    it), the cautions saying so, and whether phi is identified; ``ValueError`` when nothing is free."""
    spec = spec or LawSpec()
    check_information(runs)
    fit_spec, cautions = effective_spec(runs, spec)
    phi_identified = "phi" not in fit_spec.fixed or "phi" in spec.fixed
    if fit_spec.free_mask.sum() == 0:
        raise ValueError("every parameter is fixed; nothing to sample")
    return fit_spec, cautions, phi_identified


def _sampler_settings(opts: BayesOptions) -> dict[str, Any]:
    """The NUTS settings as plain numbers: draws, tune and chains per chain, seed, target_accept."""
    return {
        "draws": int(opts.draws),
        "tune": int(opts.tune),
        "chains": int(opts.chains),
        "seed": int(opts.seed),
        "target_accept": float(opts.target_accept),
    }


def _sample(
    resolved: str, sampler: str, data: Any, fit_spec: LawSpec, progress: bool, settings: dict[str, Any]
) -> tuple[Any, str, list[Caution]]:
    """Run NUTS with the resolved backend; with ``sampler="auto"`` a failing nutpie falls back to PyMC.
    Returns the sampler output, the backend that produced it and the fallback's caution (if any)."""
    try:
        return backends.run_sampler(resolved, data, fit_spec, progressbar=progress, **settings), resolved, []
    except MissingExtraError:
        raise
    except Exception as err:  # noqa: BLE001 - "auto" must always produce a fit
        if sampler != "auto" or resolved != "nutpie":
            raise
        fallback = [sampler_fallback_caution(err)]
        out = backends.run_sampler("pymc", data, fit_spec, progressbar=progress, **settings)
        return out, "pymc", fallback


def _loglik_and_ppc(
    post: dict[str, np.ndarray],
    runs: RunTable,
    cell: np.ndarray | None,
    cell_labels: list[str] | None,
    seed: int,
) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:
    """Per draw and run: the Student-t log-likelihood of the observed log-loss given the law and the
    run's cell effect, (S, n); then the posterior predictive check's rows and replicated data."""
    # per-draw predictions from the law (the one numpy definition)
    theta_draws = np.stack([post[c].ravel() for c in THETA_NAMES], axis=1)
    mu = log_loss(theta_draws, runs.design)  # (S, n): the law alone
    y = runs.log_loss
    sigma, nu = post["sigma"].ravel(), post["nu"].ravel()
    tau = post["tau"].ravel() if cell is not None else None
    # pointwise log-likelihood given the cell effects: LOO then predicts a held-out run of a
    # cell whose other runs stay in (conditional on that cell's effect)
    cell_effect = post["cell_effect"].reshape(-1, len(cell_labels)) if cell is not None else None
    mu_cond = mu + cell_effect[:, cell] if cell is not None else mu
    loglik = student_t_loglik(y, mu_cond, sigma, nu)
    rng = np.random.default_rng([seed, 20260501])
    ppc_rows, y_rep = posterior_predictive_check(y, runs.r, mu, sigma, nu, rng, cell=cell, tau=tau)
    return loglik, ppc_rows, y_rep


def _posterior_summaries(
    post: dict[str, np.ndarray],
    mask: np.ndarray,
    cell_labels: list[str] | None,
    has_cells: bool,
    hdi_prob: float,
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The natural-parameter draws, the summary (median, sd, HDI, R-hat, ESS) of the free law
    parameters, sigma, nu (and tau), and the summary of each cell effect (empty without cells)."""
    natural = natural_params(post)
    free_names = [THETA_TO_PARAM[c] for c, f in zip(THETA_NAMES, mask) if f]
    reported = {k: natural[k] for k in PARAM_NAMES if k in free_names}
    reported.update(sigma=natural["sigma"], nu=natural["nu"])
    if has_cells:
        reported["tau"] = post["tau"]
    summary = summarise(reported, hdi_prob=hdi_prob)
    cell_summary = (
        summarise(
            {f"cell_effect[{lab}]": post["cell_effect"][..., j] for j, lab in enumerate(cell_labels)},
            hdi_prob=hdi_prob,
        )
        if has_cells
        else {}
    )
    return natural, summary, cell_summary


def _sampler_cautions(
    summary: dict[str, dict[str, Any]],
    cell_summary: dict[str, dict[str, Any]],
    n_div: int,
    chains: int,
    target_accept: float,
    loo: Any,
    run_ids: Any,
    ppc_rows: list[dict[str, Any]],
) -> list[Caution]:
    """Cautions on convergence (R-hat, ESS, divergences), the cell effects, Pareto k and the PPC."""
    cautions = list(convergence_cautions(summary, n_div, chains, target_accept))
    cautions += cell_effect_cautions(cell_summary)
    k_caution = pareto_k_caution(loo, run_ids)
    cautions += [k_caution] if k_caution is not None else []
    cautions += ppc_cautions(ppc_rows)
    return cautions


def _misfit_cautions(
    summary: dict[str, dict[str, Any]], white: dict[str, Any], fit_spec: LawSpec, hdi_prob: float
) -> list[Caution]:
    """The cell misfit caution when phi's HDI excludes the pooled (Huber) phi, checked only when that
    phi lies inside its box (away from both bounds by 1% of the box)."""
    pooled_phi = float(white["huber_theta"][5])
    lo_phi, hi_phi = fit_spec.bounds["phi"]
    located = lo_phi + 0.01 * (hi_phi - lo_phi) < pooled_phi < hi_phi - 0.01 * (hi_phi - lo_phi)
    if not located:
        return []
    misfit = cell_misfit_caution(
        summary["phi"]["hdi"],
        pooled_phi,
        summary["tau"]["median"],
        summary["sigma"]["median"],
        hdi_prob,
    )
    return [misfit] if misfit is not None else []


def _diagnostics(checked: dict[str, dict[str, Any]], n_div: int) -> dict[str, Any]:
    """Worst R-hat, lowest bulk and tail ESS over every summarised quantity, divergences, thresholds."""
    return {
        "max_r_hat": _finite_extreme(max, [s["r_hat"] for s in checked.values()]),
        "min_ess_bulk": _finite_extreme(min, [s["ess_bulk"] for s in checked.values()]),
        "min_ess_tail": _finite_extreme(min, [s["ess_tail"] for s in checked.values()]),
        "divergences": n_div,
        "r_hat_max": RHAT_MAX,
        "ess_min": ESS_MIN,
    }


def _whitening_extras(white: dict[str, Any]) -> dict[str, Any]:
    """The sampling coordinates' description, their centring of log N and log D, and the residual scale."""
    return {
        "coordinates": "v = (A N_c^-alpha, log alpha, B D_c^-beta, log beta, E, phi) = centre + L z "
        "(Laplace at the Huber optimum)",
        "log_n_c": white["c_n"],
        "log_d_c": white["c_d"],
        "residual_scale": white["residual_scale"],
    }


def _extras(
    *,
    runs: RunTable,
    fit_spec: LawSpec,
    white: dict[str, Any],
    noise: str,
    hdi_prob: float,
    summary: dict[str, dict[str, Any]],
    cell_summary: dict[str, dict[str, Any]],
    natural: dict[str, np.ndarray],
    n_div: int,
    sampler: str,
    resolved: str,
    settings: dict[str, Any],
    out: Any,
    ppc_rows: list[dict[str, Any]],
    loo: Any,
    phi_identified: bool,
    save: Path | None,
    cell: np.ndarray | None,
    cell_labels: list[str] | None,
) -> dict[str, Any]:
    """The FitResult's ``extras``: kinds of value and interval, the posterior summary, diagnostics,
    sampler settings and times, PPC, LOO, recurrence worth, priors, cell effects and whitening."""
    pct = f"{100 * hdi_prob:g}%"
    checked = {**summary, **cell_summary}
    return {
        "value_kind": "posterior median",
        "ci_kind": f"{pct} highest-density interval (HDI) of the marginal posterior",
        "stderr_kind": "posterior standard deviation",
        "hdi_prob": float(hdi_prob),
        "posterior": summary,
        "diagnostics": _diagnostics(checked, n_div),
        "divergences": n_div,
        "sampler": resolved,
        "sampler_requested": sampler,
        **settings,
        "compile_s": float(out.compile_s),
        "compile_cached": bool(out.compile_cached),
        "compile": out.compile_info,
        "sampling_s": float(out.sampling_s),
        "ppc": {
            "by_r": ppc_rows,
            "definition": "y_rep ~ Student-t(nu, mu, sigma) per draw; p_mean = P(mean_r y_rep >= mean_r y); "
            "p_rmse = P(RMS(y_rep - mu) >= RMS(y - mu)) per r",
        },
        "loo": loo_extras(loo),
        "recurrence_worth": (
            recurrence_worth(natural["phi"], runs.r, hdi_prob=hdi_prob) if phi_identified else {}
        ),
        "netcdf": None if save is None else str(save),
        "priors": prior_description(fit_spec, noise=noise),
        "likelihood": LIKELIHOODS[noise],
        "noise": noise,
        "cell_effects": _cell_effects(cell_summary, cell, cell_labels, summary.get("tau")),
        "whitening": _whitening_extras(white),
        "pytensor_compiledir": _compiledir(),
    }


def _fit_result(
    runs: RunTable,
    fit_spec: LawSpec,
    post: dict[str, np.ndarray],
    loo: Any,
    summary: dict[str, dict[str, Any]],
    *,
    cautions: list[Caution],
    extras: dict[str, Any],
    converged: bool,
    phi_identified: bool,
    hdi_prob: float,
) -> FitResult:
    """The FitResult: posterior medians as ``params``, HDIs as ``ci``, posterior sd as ``stderr``,
    -ELPD-LOO as ``objective`` (phi's entries left out when the runs do not identify it)."""
    theta_med = np.array([float(np.median(post[c])) for c in THETA_NAMES])
    ci = {k: summary[k]["hdi"] for k in PARAM_NAMES if k in summary and (phi_identified or k != "phi")}
    stderr = {k: summary[k]["sd"] for k in PARAM_NAMES if k in summary and (phi_identified or k != "phi")}
    # converged=True here: build_result's "optimiser did not converge" caution does not fit a
    # sampler, whose own R-hat / divergence cautions are already in the list
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
        warnings=cautions,
        extras=extras,
        phi_identified=phi_identified,
        ci_level=float(hdi_prob),
    )
    return result.with_updates(ci=ci, converged=converged, stderr=stderr)


def sample_posterior(
    runs: RunTable | pd.DataFrame,
    *,
    spec: LawSpec | None = None,
    options: BayesOptions | None = None,
    **settings: Any,
) -> BayesFit:
    """Sample the posterior of the joint law; returns the FitResult and the InferenceData.

    Same arguments as :func:`fit_bayes`.
    """
    opts = resolve_options("bayes", options, settings)
    draws, tune, chains, seed = opts.draws, opts.tune, opts.chains, opts.seed
    sampler, target_accept, hdi_prob = opts.sampler, opts.target_accept, opts.hdi_prob
    _check_options(draws, tune, chains, target_accept, seed, hdi_prob)
    backends.require_backends()  # a missing PyMC / ArviZ: one line naming pip install 'phifit[bayes]'
    runs = as_runs(runs)
    noise, cell, cell_labels = resolve_noise(runs, opts.noise)
    resolved = backends.resolve_sampler(sampler)
    save = _checked_save_path(opts.save, opts.overwrite)
    fit_spec, cautions, phi_identified = _sampling_spec(runs, spec)

    white = model_whitening(runs, fit_spec)
    data = model_data(runs, fit_spec, white, cell=cell)
    run_settings = _sampler_settings(opts)
    out, resolved, fallback = _sample(resolved, sampler, data, fit_spec, opts.progress, run_settings)
    cautions += fallback
    post, stats = out.posterior, out.stats
    loglik, ppc_rows, y_rep = _loglik_and_ppc(post, runs, cell, cell_labels, seed)
    natural, summary, cell_summary = _posterior_summaries(
        post, fit_spec.free_mask, cell_labels, cell is not None, hdi_prob
    )
    checked = {**summary, **cell_summary}
    n_div = int(stats["diverging"].sum())

    attrs = posterior_attrs(
        runs,
        fit_spec,
        {
            **run_settings,
            "sampler": resolved,
            "sampler_requested": sampler,
            "hdi_prob": float(hdi_prob),
            "noise": noise,
        },
        noise=noise,
    )
    attrs["phifit_phi_identified"] = int(phi_identified)
    idata = inference_data(runs, post, stats, loglik, y_rep, attrs, cell_labels=cell_labels)
    loo = psis_loo(idata)

    cautions += _sampler_cautions(
        summary, cell_summary, n_div, chains, target_accept, loo, runs.run_ids, ppc_rows
    )
    converged = bool(all(s["r_hat"] <= RHAT_MAX for s in checked.values()) and n_div == 0)
    if cell is not None and phi_identified and "phi" in summary and converged:
        cautions += _misfit_cautions(summary, white, fit_spec, hdi_prob)

    if save is not None:
        idata.to_netcdf(str(save))
    extras = _extras(
        runs=runs,
        fit_spec=fit_spec,
        white=white,
        noise=noise,
        hdi_prob=hdi_prob,
        summary=summary,
        cell_summary=cell_summary,
        natural=natural,
        n_div=n_div,
        sampler=sampler,
        resolved=resolved,
        settings=run_settings,
        out=out,
        ppc_rows=ppc_rows,
        loo=loo,
        phi_identified=phi_identified,
        save=save,
        cell=cell,
        cell_labels=cell_labels,
    )
    result = _fit_result(
        runs,
        fit_spec,
        post,
        loo,
        summary,
        cautions=cautions,
        extras=extras,
        converged=converged,
        phi_identified=phi_identified,
        hdi_prob=hdi_prob,
    ).with_updates(idata=idata)
    return BayesFit(result=result, idata=idata)


def fit_bayes(
    runs: RunTable | pd.DataFrame,
    *,
    spec: LawSpec | None = None,
    options: BayesOptions | None = None,
    **settings: Any,
) -> FitResult:
    """Bayesian fit of the joint law (model and priors: :mod:`phifit.fitters.bayes.model`).

    Parameters
    ----------
    runs
        Run table (a :class:`RunTable`, or a DataFrame validated like a run CSV).
    spec
        Which parameters vary and the box (truncation of the priors); default all six free.
    options, settings
        A :class:`~phifit.fitters.options.BayesOptions` or its fields as keywords (as every
        fitter takes them), checked before anything is sampled (an unknown name raises
        ``ValueError`` listing the valid ones):
    draws, tune, chains
        Posterior draws per chain after ``tune`` warm-up steps (default 4 x 2000 after 1000).
    seed
        Seed of the sampler (chain initialisation and transitions) and of the replicated
        data of the posterior predictive check; the same seed gives the same draws.
    sampler
        ``"auto"`` (nutpie when importable, else PyMC; PyMC also when nutpie fails),
        ``"nutpie"`` or ``"pymc"``.
    target_accept
        NUTS target acceptance rate (default 0.99).
    noise
        ``"cell"``: an effect shared by the runs of each (budget, r) cell (its sd tau is the
        law's misfit at the cell level); ``"run"``: independent runs; ``"auto"`` (default):
        ``"cell"`` when some cell holds two or more runs (:func:`.model.resolve_noise`).
    hdi_prob
        Probability of the highest-density intervals in ``ci`` (= the result's ``ci_level``).
    progress
        Show the sampler's progress bar.
    save
        netCDF path for the posterior (ArviZ InferenceData); reload with
        :func:`.store.load_posterior`, per-draw parameters with :func:`.store.posterior_draws`.
        An existing file is replaced only when it is a posterior phifit saved, or with
        ``overwrite=True``; otherwise ``FileExistsError`` before anything is sampled.
    overwrite
        Replace a file at ``save`` that phifit did not write.

    Returns
    -------
    FitResult with ``params`` = posterior medians, ``ci`` = HDIs, ``objective`` = -ELPD-LOO;
    details in ``extras`` (module docstring); print it with :func:`.summary.bayes_summary`.
    Its ``idata`` is the posterior as ArviZ InferenceData (``az.summary(fit.idata)``;
    ``fit.draws_frame()`` per draw); the JSON leaves it out, and :func:`phifit.load` reads it
    back from ``save``'s file.
    """
    return sample_posterior(runs, spec=spec, options=resolve_options("bayes", options, settings)).result
