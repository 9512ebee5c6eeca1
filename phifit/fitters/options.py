"""Typed options of each fitter, and the one check every fitter runs on them.

Each method has a frozen dataclass of its settings (:class:`HuberOptions`, :class:`LsqOptions`,
:class:`BayesOptions`); their defaults come from :mod:`phifit.defaults`.  Every fitter takes
them the same way, ``fit_X(runs, *, spec=None, options=None, **settings)``: either a dataclass
(``options=HuberOptions(n_starts=200)``) or its fields as keywords (``n_starts=200``), not
both.  :func:`resolve_options` turns either into the dataclass and refuses an unknown name
with a ``ValueError`` listing the valid ones, before any work is done.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .. import defaults


@dataclass(frozen=True)
class HuberOptions:
    """Settings of the Huber fit (defaults reproduce the reference protocol)."""

    n_starts: int = defaults.N_STARTS  # random starts, uniform in the box (the study: 500)
    seed: int = defaults.SEED  # seed of the starts
    delta: float = defaults.HUBER_DELTA  # Huber threshold on log-loss residuals
    explore_iter: int = 8  # vectorised LM iterations on every start
    n_refine: int = 32  # best starts carried on after exploration
    prune_after: int = 2  # exploration iterations before hopeless starts stop
    prune_ratio: float = 3.0  # hopeless: objective > prune_ratio x the n_refine-th best
    refine_iter: int = 40  # further vectorised LM iterations on those
    n_polish: int = 3  # distinct candidates refined with least_squares
    basin_rtol: float = 1e-3  # a start "reached the best" if within this relative objective


@dataclass(frozen=True)
class LsqOptions:
    """Settings of the least-squares fit (lmfit on log-loss)."""

    n_starts: int = defaults.N_STARTS  # uniform random starts in the box
    seed: int = defaults.SEED  # seed of the starts
    n_refine: int = 50  # starts carried to convergence after a short exploration
    profile: bool = True  # lmfit's profile-likelihood interval for phi
    level: float = defaults.LEVEL  # level of the profile interval


@dataclass(frozen=True)
class BayesOptions:
    """Settings of the Bayesian fit (PyMC / nutpie NUTS)."""

    draws: int = defaults.N_DRAWS  # posterior draws per chain
    tune: int = defaults.N_TUNE  # warm-up steps per chain
    chains: int = defaults.N_CHAINS  # independent chains
    seed: int = defaults.SEED  # seed of the sampler and of the predictive check
    sampler: str = "auto"  # "auto" (nutpie when importable, else PyMC), "nutpie" or "pymc"
    noise: str = "auto"  # "cell" (a shared effect per (budget, r) cell), "run" (independent runs), "auto"
    target_accept: float = defaults.TARGET_ACCEPT  # NUTS target acceptance rate
    hdi_prob: float = defaults.LEVEL  # probability of the highest-density intervals
    progress: bool = True  # show the sampler's progress bar
    save: str | os.PathLike | None = None  # netCDF path for the posterior
    overwrite: bool = False  # replace a file at ``save`` that is not a posterior phifit saved


#: options type of each method
OPTIONS: dict[str, type] = {"huber": HuberOptions, "lsq": LsqOptions, "bayes": BayesOptions}


def option_names(method: str) -> list[str]:
    """The option names ``method`` accepts, sorted."""
    return sorted(f.name for f in fields(OPTIONS[method]))


def resolve_options(method: str, options: Any = None, settings: Mapping[str, Any] | None = None) -> Any:
    """The typed options of ``method`` from a dataclass (``options``) or keywords (``settings``).

    Raises ``ValueError`` for an unknown method, an options object of another method, both
    forms at once, or an unknown option name (listing the valid ones).
    """
    if method not in OPTIONS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(OPTIONS)}")
    cls = OPTIONS[method]
    settings = dict(settings or {})
    if options is not None:
        if not isinstance(options, cls):
            raise ValueError(
                f"options for method {method!r} must be a {cls.__name__}, got {type(options).__name__}"
            )
        if settings:
            raise ValueError(f"give either options={cls.__name__}(...) or its fields as keywords, not both")
        return options
    unknown = sorted(set(settings) - set(option_names(method)))
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise ValueError(
            f"unknown option{plural} {', '.join(map(repr, unknown))} for method {method!r}; "
            f"valid: {', '.join(option_names(method))}"
        )
    return cls(**settings)


__all__ = ["OPTIONS", "BayesOptions", "HuberOptions", "LsqOptions", "option_names", "resolve_options"]
