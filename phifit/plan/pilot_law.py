"""The law and noise a plan is made under, and what a pilot run table gives it.

Without a pilot a plan simulates the study's joint fit (:data:`phifit.study.REFERENCE_PARAMS`)
with a per-run log-loss noise of 0.005 unless one is given.  With a pilot, the law is the
pilot's Huber fit, which must identify all six parameters of

    L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta

(phi may be left to an assumed value); its residuals give the noise and, by default, the
misfit each simulated table carries (:func:`phifit.plan.inputs.design_misfit`); its (budget,
r) cell-bootstrap replicates may give one law per simulated table (``--law-uncertainty``).
An assumed phi holds phi there in the pilot's fit (:func:`law_with_phi_held`) and in every
law draw.  :func:`plan_law` puts these together as ``phifit plan`` does; :func:`simulation_settings`
gathers what every simulated table of one plan is made of.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import defaults
from .inputs import Misfit, NoiseModel, design_misfit, pilot_noise, resolve_design

#: per-run log-loss sd of a plan given neither a pilot nor ``noise`` (the study-like noise of data/README)
DEFAULT_NOISE = 0.005


@dataclass(frozen=True)
class PlanLaw:
    """What a plan simulates: the law ``params`` (named by ``source``), the ``noise`` model, the
    pilot's ``misfit`` carried into every table (None: none), and one law per simulated table
    (``laws``, named by ``laws_source``; None: every table uses ``params``)."""

    params: dict[str, float]
    source: str
    noise: NoiseModel
    misfit: Misfit | None = None
    laws: list[dict[str, float]] | None = None
    laws_source: str = ""


def check_identified(pilot: Any, params: Mapping[str, float | None], *, phi_given: bool = False) -> None:
    """Raise ``ValueError`` naming the parameters the pilot's fit ``params`` leaves unestimated
    (None) and what runs would identify them; phi may be missing when ``phi_given`` (an assumed
    phi replaces it).  A plan simulates tables from all six parameters."""
    missing = [k for k, v in params.items() if v is None and not (k == "phi" and phi_given)]
    if not missing:
        return
    why = []
    if {"B", "beta"} & set(missing):
        why.append("B and beta need runs at two or more token counts")
    if "phi" in missing:
        why.append("phi needs looped runs (r > 1) at two or more values of r, or --phi")
    raise ValueError(
        f"{pilot.source}: the pilot's fit does not identify {', '.join(missing)}, and a plan "
        f"simulates tables from all six parameters: {'; '.join(why)}"
    )


def law_with_phi_held(pilot: Any, phi: float) -> tuple[dict[str, float], str]:
    """The pilot's Huber fit with phi held at ``phi`` (its profile point there), and its source:
    the law a plan at an assumed phi should simulate, since the other five parameters then still
    fit the pilot; the noise and misfit stay those of the pilot's free fit."""
    from ..fitters.huber import fit_huber
    from ..law import DEFAULT_BOUNDS, LawSpec

    held = fit_huber(pilot, spec=LawSpec(fixed={"phi": float(phi)}, bounds=DEFAULT_BOUNDS))
    return dict(held.params), f"Huber fit of the pilot {pilot.source} with phi held at {phi:g}"


def pilot_law_draws(
    pilot: Any,
    fit: Any,
    n_tables: int,
    *,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
) -> tuple[list[dict[str, float]], str]:
    """One law per simulated table, and their source: ``n_tables`` (budget, r) cell-bootstrap
    replicates of the pilot's Huber ``fit`` (the same resampling as ``phifit fit --bootstrap``),
    seeded by ``seed``.  A replicate whose fit failed is replaced by a repeat of the first ones,
    which the source says."""
    import numpy as np

    from ..bootstrap.block import block_bootstrap

    boot = block_bootstrap(
        pilot,
        fit,
        n_boot=n_tables,
        seed=seed,
        n_jobs=n_jobs,
        progress=False,
        jackknife=False,
        backend=backend,
        scheduler=scheduler,
    )
    names = list(fit.params)
    columns = {k: np.asarray(boot.params[k], dtype=float) for k in names}
    ok = np.all([np.isfinite(columns[k]) for k in names], axis=0)
    draws = [{k: float(columns[k][i]) for k in names} for i in np.flatnonzero(ok)]
    if len(draws) < n_tables:
        draws += draws[: n_tables - len(draws)]
    note = "" if ok.all() else f", {int((~ok).sum())} failed replicate(s) replaced"
    return draws, f"the pilot's cell-bootstrap replicates (seed {seed}{note})"


def tables_to_simulate(simulate: int | None, *, pilot: bool) -> int:
    """The tables a plan simulates: ``simulate`` when given (``--simulate N``, whose tables also run
    the wild tests), else :data:`phifit.defaults.PLAN_TABLES` for a plan with a pilot, for the widths
    alone (the misfit's effect on a cell bootstrap is not linear), and none without one."""
    if simulate is not None:
        return simulate
    return defaults.PLAN_TABLES if pilot else 0


def given_noise(noise: float | None, cell_noise: float | None = None) -> NoiseModel:
    """The noise model of a plan given ``noise`` (per-run log-loss sd) or, when None, the default
    :data:`DEFAULT_NOISE`; ``cell_noise`` is the sd shared by the runs of a (budget, r) cell."""
    per_run = noise if noise is not None else DEFAULT_NOISE
    src = "given" if noise is not None else "default 0.005 (the study-like noise of data/README)"
    return NoiseModel(per_run, cell_noise or 0.0, src)


def plan_law(
    design: str | None = None,
    *,
    pilot: Any = None,
    phi: float | None = None,
    noise: float | None = None,
    cell_noise: float | None = None,
    misfit: bool = True,
    misfit_model: str = defaults.PLAN_MISFIT_MODEL,
    optimize: bool = False,
    law_draws: int = 0,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
) -> PlanLaw:
    """The law, noise and misfit a plan of ``design`` (as :func:`phifit.plan.inputs.resolve_design`
    reads it) simulates, as ``phifit plan`` chooses them.

    Without ``pilot``: the study's joint fit.  With a ``pilot`` run table: its Huber fit, which must
    identify every parameter but phi when ``phi`` is given (:func:`check_identified`); its noise with
    the misfit carried in ``misfit_model`` (:func:`phifit.plan.inputs.design_misfit`; with ``optimize``,
    ``auto`` is the level, since a searched design is not the one the curves were checked on), or
    with ``misfit=False`` the noise of its residuals alone; and with ``law_draws`` > 0 that many laws
    from its cell bootstrap (:func:`pilot_law_draws`, on ``n_jobs`` workers of ``backend``).

    An assumed ``phi`` holds phi there: in the pilot's fit (:func:`law_with_phi_held`) when it
    estimates phi, else in the law as given, and in every law draw.  A given ``noise`` (per-run sd)
    replaces the pilot's, and a plan without either gets :data:`DEFAULT_NOISE` (:func:`given_noise`).
    """
    from ..study import REFERENCE_PARAMS

    params: dict[str, Any] = dict(REFERENCE_PARAMS)
    source = "the study's joint fit"
    model, carried = None, None
    laws, laws_source = None, ""
    if pilot is not None:
        from ..fitters.huber import fit_huber

        fit = fit_huber(pilot)
        params = dict(fit.params)
        check_identified(pilot, params, phi_given=phi is not None)
        source = f"Huber fit of the pilot {pilot.source}"
        if phi is not None and params.get("phi") is not None:
            params, source = law_with_phi_held(pilot, phi)
        if misfit:
            how = "level" if optimize and misfit_model == "auto" else misfit_model
            frame = resolve_design(design, pilot).frame
            model, carried = design_misfit(pilot, fit, frame, model=how, cell_noise=cell_noise)
        else:
            model, carried = pilot_noise(pilot, fit, cell_noise=cell_noise, misfit=False)
        if law_draws:
            laws, laws_source = pilot_law_draws(
                pilot, fit, law_draws, seed=seed, n_jobs=n_jobs, backend=backend, scheduler=scheduler
            )
    if phi is not None:
        if params.get("phi") != phi:  # no pilot, or one whose fit leaves phi unestimated
            params["phi"] = phi
            source += f", phi set to {phi:g}"
        if laws is not None:
            laws = [dict(law, phi=phi) for law in laws]
            laws_source += f", phi set to {phi:g}"
    if noise is not None or model is None:
        model = given_noise(noise, cell_noise)
    return PlanLaw(params, source, model, carried, laws, laws_source)


def simulation_settings(
    law: PlanLaw,
    *,
    n_boot: int = defaults.PLAN_N_BOOT,
    n_wild: int = defaults.PLAN_N_WILD,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    tests: bool = True,
) -> dict[str, Any]:
    """What every simulated table of one plan is made of, as keyword arguments of
    :func:`phifit.plan.design.plan_design` and :func:`phifit.plan.modes.simulate_plan`: the
    replicates (``n_boot`` cell-bootstrap, ``n_wild`` wild per test), the seed, the workers, the
    law draws and misfit of ``law``, and whether the wild tests run (``tests``).  The given design
    and an optimised one are simulated with the same settings, so that their widths compare like
    with like."""
    return {
        "n_boot": n_boot,
        "n_wild": n_wild,
        "seed": seed,
        "n_jobs": n_jobs,
        "backend": backend,
        "scheduler": scheduler,
        "laws": law.laws,
        "laws_source": law.laws_source,
        "misfit": law.misfit,
        "tests": tests,
    }
