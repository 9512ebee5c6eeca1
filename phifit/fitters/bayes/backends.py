"""The two NUTS implementations behind the Bayesian fit: nutpie and PyMC's own.

``sampler="auto"`` uses nutpie when importable, else PyMC's NUTS, which always works.

- nutpie compiles the model with Numba once per process and spec *structure*
  (:func:`~.model.model_structure`: which parameters are free, and the box); the run
  table, the whitening and the fixed values are data, so a new table, or phi = 1 after
  phi = 0, only swaps data (nutpie's ``with_data``).
- PyMC's sampler compiles C code, cached on disk in PyTensor's compile directory
  (phifit's cache, :func:`phifit.cache.use_pytensor_cache`), so later processes compile
  faster.

Each backend returns :class:`SamplerOutput`: posterior arrays of
:data:`~.model.STORED_VARS`, (chain, draw) each, and the sampler statistics phifit reports.
"""

from __future__ import annotations

import os
import time
import warnings as _warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...cache import use_pytensor_cache
from ...law import LawSpec
from .model import STORED_VARS, build_model, model_structure

SAMPLERS = ("auto", "nutpie", "pymc")
_NUTPIE_CACHE: dict[tuple, Any] = {}


@dataclass(frozen=True)
class SamplerOutput:
    """Draws and statistics of one sampler run.

    ``posterior``: {a, alpha, b, beta, e, phi, sigma, nu} -> (chain, draw) arrays;
    ``stats``: {diverging, lp, tree_depth, energy, step_size, n_steps} -> (chain, draw);
    ``compile_s`` / ``sampling_s``: seconds; ``compile_cached``: the compiled model was
    reused from earlier in this process.
    """

    posterior: dict[str, np.ndarray]
    stats: dict[str, np.ndarray]
    compile_s: float
    sampling_s: float
    compile_cached: bool


def nutpie_available() -> bool:
    """True when nutpie (and numba) can be imported."""
    try:
        import numba  # noqa: F401
        import nutpie  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_sampler(sampler: str) -> str:
    """The backend ``sampler`` names: "nutpie" or "pymc" (``"auto"``: nutpie when installed)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; expected one of {', '.join(SAMPLERS)}")
    if sampler == "auto":
        return "nutpie" if nutpie_available() else "pymc"
    if sampler == "nutpie" and not nutpie_available():
        raise ImportError(
            "sampler='nutpie' needs nutpie and numba: pip install nutpie numba (or use sampler='pymc')"
        )
    return sampler


def sample_nutpie(
    data: Mapping[str, np.ndarray], spec: LawSpec, *, draws, tune, chains, seed, target_accept, progressbar
) -> SamplerOutput:
    """nutpie's NUTS; the compiled model is kept per spec structure for the life of the process."""
    import nutpie

    key = model_structure(spec)
    cached = key in _NUTPIE_CACHE
    t0 = time.perf_counter()
    if not cached:
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")
            _NUTPIE_CACHE[key] = nutpie.compile_pymc_model(
                build_model(data, spec), var_names=list(STORED_VARS)
            )
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
    post, stats = draws_and_stats(trace, lp="logp", tree_depth="depth")
    return SamplerOutput(post, stats, compile_s, sampling_s, cached)


def sample_pymc(
    data: Mapping[str, np.ndarray], spec: LawSpec, *, draws, tune, chains, seed, target_accept, progressbar
) -> SamplerOutput:
    """PyMC's own NUTS; compile time is the total minus PyMC's reported sampling time."""
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
            var_names=list(STORED_VARS),
            compute_convergence_checks=False,
            return_inferencedata=True,
        )
    total = time.perf_counter() - t0
    sampling_s = float(trace.posterior.attrs.get("sampling_time", total))
    post, stats = draws_and_stats(trace, lp="lp", tree_depth="tree_depth")
    return SamplerOutput(post, stats, max(total - sampling_s, 0.0), sampling_s, False)


def draws_and_stats(trace, *, lp: str, tree_depth: str) -> tuple[dict, dict]:
    """Posterior arrays of the stored variables and the sampler statistics phifit reports.

    The two backends name two statistics differently (nutpie: ``logp``, ``depth``)."""
    post = {k: np.asarray(trace.posterior[k].values, float) for k in STORED_VARS}
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


def run_sampler(name: str, data: Mapping[str, np.ndarray], spec: LawSpec, **settings: Any) -> SamplerOutput:
    """Dispatch to :func:`sample_nutpie` or :func:`sample_pymc` by resolved ``name``.

    First points PyTensor at phifit's compile cache (importing PyMC imports PyTensor).
    """
    use_pytensor_cache()
    if name == "nutpie":
        return sample_nutpie(data, spec, **settings)
    if name == "pymc":
        return sample_pymc(data, spec, **settings)
    raise ValueError(f"unknown sampler backend {name!r}; expected 'nutpie' or 'pymc'")
