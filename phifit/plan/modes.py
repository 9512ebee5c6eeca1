"""The two ways :mod:`phifit.plan.design` predicts what the reference analysis will report.

- :func:`asymptotic_plan`: the Huber M-estimator's (cluster) sandwich covariance at the assumed
  law, with expectations under the noise model (formula in :mod:`phifit.plan.design`), well under a
  second;
- :func:`simulate_plan`: tables drawn from the law and the noise, each analysed as the
  reference method would (Huber fit, (budget, r) cell bootstrap, wild cluster tests of
  phi = 0 and phi = 1), one table per task of :func:`phifit.fitters.parallel.parallel_map`
  (worker processes by default, a Dask cluster when asked).  Given ``laws`` (e.g. a pilot's cell-bootstrap
  replicates), table j is drawn from ``laws[j]`` instead of the one law: the prediction then
  averages over what the pilot leaves uncertain about the law (its "power" is an *assurance*,
  the probability of rejecting averaged over the plausible laws).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from .. import defaults
from ..fitters.objective import DELTA
from ..fitters.parallel import check_backend, parallel_map
from ..law import (
    COORD_LABELS,
    DEFAULT_BOUNDS,
    THETA_NAMES,
    Design,
    log_loss_and_jacobian,
    params_to_theta,
)
from ..serialize import JsonIO, to_plain
from .inputs import (
    ALPHA_TEST,
    MAX_LINEAR_HALF_WIDTH,
    Z95,
    NoiseModel,
    PlanDesign,
    huber_moments,
)

# -- the asymptotic plan -----------------------------------------------------------------------


def plan_cells(frame: pd.DataFrame) -> np.ndarray:
    return frame.groupby(["budget", "r"], sort=True).ngroup().to_numpy()


def design_of(frame: pd.DataFrame) -> Design:
    return Design.from_arrays(
        frame["r"].to_numpy(float),
        frame["n_once"].to_numpy(float),
        frame["n_rec"].to_numpy(float),
        frame["tokens"].to_numpy(float),
    )


def wald_power(diff: float, se: float) -> float:
    if not se > 0:
        return 1.0 if diff else ALPHA_TEST
    z = abs(diff) / se
    return float(norm.cdf(z - Z95) + norm.cdf(-z - Z95))


@dataclass(frozen=True)
class AsymptoticPlan(JsonIO):
    """The sandwich prediction at the assumed law (module docstring).

    ``se`` {coordinate: se} (internal coordinates), ``width`` = 2 x 1.96 x se(phi)
    (uncapped), ``p_box`` the probability that phi +- 1.96 se reaches the box, ``power``
    {"phi=0", "phi=1", "delta_phi"} Wald powers, ``trusted`` and ``reasons`` (why not),
    ``signal`` the phi-specific signal: rms change of predicted log-loss across the design
    per 0.1 change of phi after the other five parameters absorb what they can, next to
    ``noise_eff`` = sqrt(E psi^2) / m, the per-run noise as the Huber fit feels it.
    """

    se: dict[str, float]
    width: float
    p_box: float
    power: dict[str, float]
    trusted: bool
    reasons: list[str]
    signal: float
    signal_raw: float
    noise_eff: float
    correlation_phi: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)


def _sandwich(
    frame: pd.DataFrame, theta: np.ndarray, noise: NoiseModel, delta: float
) -> tuple[np.ndarray, np.ndarray]:
    """(cov, J): the cluster sandwich covariance of theta_hat (internal coordinates) and the Jacobian.

    A misfit's cell curves (:mod:`phifit.plan.cell_shapes`) are not in it: as random effects (per-run
    noise after the curves, slopes and curvatures of second moment mean^2 + tau^2 per cell) they
    narrowed every real sub-design's prediction (ratios 0.54-1.09 against 0.65-1.12 with the level
    alone, docs/planning.md), so the asymptotic mode keeps the level's cluster term.
    """
    _, jac = log_loss_and_jacobian(theta, design_of(frame))
    m, e_psi2, c = huber_moments(noise.per_run, noise.cell, delta)
    jtj = jac.T @ jac
    meat = (e_psi2 - c) * jtj
    if c > 0:
        cells = plan_cells(frame)
        s = np.zeros((cells.max() + 1, jac.shape[1]))
        np.add.at(s, cells, jac)
        meat = meat + c * s.T @ s
    bread = np.linalg.pinv(m * jtj)
    return bread @ meat @ bread, jac


def box_probability(phi: float, se_phi: float, half: float, lo: float, hi: float) -> float:
    """P(the interval phi_hat +- half reaches the box [lo, hi]) for phi_hat ~ N(phi, se_phi^2).

    The interval reaches the box when phi_hat <= lo + half (event A) or phi_hat >= hi - half
    (event B).  When the interval is at least as wide as the box (lo + half >= hi - half)
    every phi_hat does one or the other and the probability is 1; otherwise A and B are
    disjoint and P = P(A) + P(B).  (Adding the two ends' probabilities without this check
    counts the tables whose interval reaches both ends twice, and can exceed 1.)"""
    if not se_phi > 0:
        return 0.0
    if lo + half >= hi - half:
        return 1.0
    return float(min(1.0, norm.cdf((lo + half - phi) / se_phi) + norm.sf((hi - half - phi) / se_phi)))


def asymptotic_plan(
    design: PlanDesign,
    params: Mapping[str, float],
    noise: NoiseModel,
    *,
    delta_phi: float | None = None,
    delta: float = DELTA,
) -> AsymptoticPlan:
    """Predicted se, interval width and power for phi from the sandwich at ``params``."""
    frame = design.frame
    theta = params_to_theta(params)
    cov, jac = _sandwich(frame, theta, noise, delta)
    var = np.diag(cov)
    se = {name: float(math.sqrt(max(v, 0.0))) for name, v in zip(THETA_NAMES, var)}
    i_phi = THETA_NAMES.index("phi")
    se_phi = se["phi"]
    phi = float(params["phi"])
    lo, hi = DEFAULT_BOUNDS["phi"]
    half = Z95 * se_phi
    p_box = box_probability(phi, se_phi, half, lo, hi)
    power = {"phi=0": wald_power(phi, se_phi), "phi=1": wald_power(phi - 1.0, se_phi)}
    if delta_phi is not None:
        other = dict(params, phi=phi + delta_phi)
        cov2, _ = _sandwich(frame, params_to_theta(other), noise, delta)
        se_d = math.sqrt(se_phi**2 + max(cov2[i_phi, i_phi], 0.0))
        power["delta_phi"] = wald_power(delta_phi, se_d)
    reasons = []
    for name, value in zip(THETA_NAMES, theta):
        b_lo, b_hi = DEFAULT_BOUNDS[name]
        if value - 3 * se[name] < b_lo or value + 3 * se[name] > b_hi:
            reasons.append(
                f"{COORD_LABELS[name]} = {value:.3g} lies within 3 se ({se[name]:.3g}) of its bound "
                f"[{b_lo:g}, {b_hi:g}]: the box truncates what the linearisation assumes"
            )
    if half > MAX_LINEAR_HALF_WIDTH:
        reasons.append(
            f"1.96 se(phi) = {half:.3g} > {MAX_LINEAR_HALF_WIDTH}: the law is far from linear in phi "
            "over such a range; use the simulation mode"
        )
    # phi's own signal: its Jacobian column after projecting out the other five
    j_phi = jac[:, i_phi]
    others = np.delete(jac, i_phi, axis=1)
    coef, *_ = np.linalg.lstsq(others, j_phi, rcond=None)
    resid = j_phi - others @ coef
    n = len(frame)
    m, e_psi2, _ = huber_moments(noise.per_run, noise.cell, delta)
    sd = np.sqrt(np.clip(var, 1e-300, None))
    corr = cov[i_phi] / (sd[i_phi] * sd)
    return AsymptoticPlan(
        se=se,
        width=2 * half,
        p_box=p_box,
        power=power,
        trusted=not reasons,
        reasons=reasons,
        signal=float(0.1 * np.linalg.norm(resid) / math.sqrt(n)),
        signal_raw=float(0.1 * np.linalg.norm(j_phi) / math.sqrt(n)),
        noise_eff=float(math.sqrt(e_psi2) / m) if m > 0 else math.inf,
        correlation_phi={COORD_LABELS[k]: float(v) for k, v in zip(THETA_NAMES, corr) if k != "phi"},
    )


# -- the simulation plan -----------------------------------------------------------------------


@dataclass(frozen=True)
class SimulatedPlan(JsonIO):
    """What the reference analysis reported on ``n_tables`` simulated tables.

    Per table (``tables``): ``phi_hat``, ``ci`` (95% percentile cell-bootstrap interval, its
    quantiles by :func:`simulated_interval`),
    ``width``, ``at_box`` (an end within 1e-6 of the box), ``p0``/``p1`` (wild cluster
    p-values of phi = 0 / phi = 1), and ``delta_ci`` when a second recipe was simulated.
    Summaries: ``width_median``, ``width_q10``/``width_q90``, ``p_box``, ``power``
    {restriction: rejection rate at p < 0.05}, ``power_mc_se`` (binomial MC error).
    ``law_draws``: how many distinct laws the tables were drawn from (0: the one law), and
    ``law_draws_source`` where they came from; each table then records its ``phi_true``.
    ``misfit``: the pilot's cell offsets added to every table (None: the law alone).
    ``tests``: whether each table also ran the wild cluster tests of phi = 0 and phi = 1 (False:
    widths and P(box) only, and ``power`` is empty).
    """

    n_tables: int
    n_boot: int
    n_wild: int
    seed: int
    tables: list[dict[str, Any]]
    width_median: float
    width_q10: float
    width_q90: float
    p_box: float
    power: dict[str, float]
    power_mc_se: dict[str, float]
    n_failed: int
    seconds: float
    law_draws: int = 0
    law_draws_source: str = ""
    misfit: dict[str, Any] | None = None
    tests: bool = True

    def to_frame(self) -> pd.DataFrame:
        """One row per simulated table (its ``phi_hat``, ``width``, ``at_box``, ``p0``, ``p1``,
        ...), the interval split into ``ci_lo`` and ``ci_hi``."""
        rows = []
        for t in self.tables:
            ci = t.get("ci") or [None, None]
            rows.append({**{k: v for k, v in t.items() if k != "ci"}, "ci_lo": ci[0], "ci_hi": ci[1]})
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)


def simulated_interval(draws: Any, level: float = defaults.LEVEL) -> list[float]:
    """The percentile interval of phi a simulated table's few replicates predict for a report's
    1,000: the ``level`` quantiles of the draws by the median-unbiased rule (Hyndman and Fan 1996,
    type 8), not linear interpolation.

    From B draws the linear rule's 2.5% and 97.5% quantiles sit inward of the distribution's by
    an order statistic or so: on normal draws the 95% width comes out 4.4% narrow from B = 100
    (median over 20,000 sets; 0.5% from B = 1000, the report's), so a plan whose simulated tables
    bootstrap 100 times predicted widths about 4% narrower than the report then measured.  Type 8
    is median-unbiased for any continuous distribution: +0.6% from B = 100 on the same draws.
    Failed replicates (NaN) are left out; [nan, nan] with fewer than two draws."""
    values = np.asarray(draws if draws is not None else [], dtype=float)
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return [math.nan, math.nan]
    tail = (1 - level) / 2
    lo, hi = np.quantile(values, [tail, 1 - tail], method="median_unbiased")
    return [float(lo), float(hi)]


def analyse_table(
    frame: pd.DataFrame,
    params: dict[str, float],
    noise: tuple[float, float],
    seed: int,
    n_boot: int,
    n_wild: int,
    delta_phi: float | None,
    n_starts: int,
    offsets: np.ndarray | None = None,
    tests: bool = True,
) -> dict[str, Any]:
    """One simulated table through the reference analysis (see :class:`SimulatedPlan`);
    ``offsets`` (one per row of ``frame``) are added to the simulated log-losses (the pilot's
    misfit, :class:`phifit.plan.inputs.Misfit`); ``tests=False`` skips the wild cluster tests."""
    import warnings

    from ..bootstrap.block import block_bootstrap
    from ..bootstrap.result import intervals_withheld
    from ..bootstrap.wild import wild_cluster_test
    from ..fitters.huber import fit_huber
    from ..law import LawSpec
    from ..runs.table import table_from_frame
    from ..simulation import simulate

    ss = np.random.SeedSequence(seed).spawn(4)
    seeds = [int(s.generate_state(1)[0] % 2**31) for s in ss]
    lo, hi = DEFAULT_BOUNDS["phi"]
    out: dict[str, Any] = {"seed": seed}

    def fit_and_boot(p: dict[str, float], s_sim: int, s_boot: int) -> tuple[Any, Any, Any]:
        table = simulate(frame, params=p, noise=noise[0], cell_noise=noise[1], seed=s_sim)
        if offsets is not None:
            table["loss"] = table["loss"].to_numpy() * np.exp(offsets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = table_from_frame(table, source="simulated")
            fit = fit_huber(runs, n_starts=n_starts, seed=s_sim)
            boot = block_bootstrap(
                runs, fit, n_boot=n_boot, seed=s_boot, n_jobs=1, progress=False, jackknife=False
            )
        return runs, fit, boot

    out["phi_true"] = float(params["phi"])
    try:
        runs, fit, boot = fit_and_boot(params, seeds[0], seeds[1])
        ci = simulated_interval(boot.params.get("phi"))
        if intervals_withheld(boot.n_failed, boot.n_boot) or None in ci or not np.all(np.isfinite(ci)):
            out["error"] = (
                f"bootstrap: {boot.n_failed} of {boot.n_boot} replicates failed, no interval for phi"
            )
            return out
        out.update(
            phi_hat=fit.params["phi"],
            ci=list(ci),
            width=float(ci[1] - ci[0]),
            at_box=bool(ci[0] <= lo + 1e-6 or ci[1] >= hi - 1e-6),
        )
        for name, value in (("p0", 0.0), ("p1", 1.0)) if tests else ():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                restricted = fit_huber(
                    runs, spec=LawSpec(fixed={"phi": value}), n_starts=max(50, n_starts // 4)
                )
                test = wild_cluster_test(runs, fit, restricted, n_boot=n_wild, seed=seeds[2], n_jobs=1)
            # a test whose replicates mostly failed has no p-value (never a rejection)
            failed = intervals_withheld(test.n_failed, test.n_boot) or not np.isfinite(test.p_value)
            out[name] = None if failed else test.p_value
        if delta_phi is not None:
            _, _, boot2 = fit_and_boot(dict(params, phi=params["phi"] + delta_phi), seeds[3], seeds[3] + 1)
            a, b = np.asarray(boot.params["phi"]), np.asarray(boot2.params["phi"])
            d = (b - a)[np.isfinite(a) & np.isfinite(b)]
            usable = len(d) and not intervals_withheld(boot2.n_failed, boot2.n_boot)
            out["delta_ci"] = [float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975))] if usable else None
    except (RuntimeError, ValueError, np.linalg.LinAlgError) as err:
        out["error"] = f"{type(err).__name__}: {err}"
    return out


def simulate_plan(
    design: PlanDesign,
    params: Mapping[str, float],
    noise: NoiseModel,
    *,
    n_tables: int = defaults.PLAN_TABLES,
    n_boot: int = defaults.PLAN_N_BOOT,
    n_wild: int = defaults.PLAN_N_WILD,
    delta_phi: float | None = None,
    seed: int = defaults.SEED,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    n_starts: int = defaults.PLAN_N_STARTS,
    progress: bool = True,
    laws: Sequence[Mapping[str, float]] | None = None,
    laws_source: str = "",
    misfit: Any | None = None,
    tests: bool = True,
) -> SimulatedPlan:
    """Simulate ``n_tables`` tables and analyse each as the reference method would (module docstring).

    Table j uses the j-th child of ``SeedSequence(seed)`` and is analysed in one task (its own
    bootstrap and wild tests run inside that task): results do not depend on ``n_jobs`` (None:
    the cores this process may use) or on where the tasks run (``backend``, ``scheduler``:
    :mod:`phifit.fitters.parallel`).
    With ``laws`` (at least ``n_tables`` of them), table j is drawn from ``params`` updated
    with ``laws[j]``.  With ``misfit`` (:class:`phifit.plan.inputs.Misfit`), every table also
    carries the pilot's (budget, r) cell-mean residuals as fixed offsets, and a draw from
    N(0, tau^2) in each planned cell the pilot did not see (:meth:`Misfit.table_offsets`); the
    noise is then ``noise.per_run`` per run plus the misfit's ``cell_noise`` (not ``noise.cell``,
    which carries tau for the asymptotic plan).  ``tests=False``: widths and P(box) only (about
    a third of the time).
    """
    import time

    if n_tables < 2:
        raise ValueError(f"n_tables must be >= 2, got {n_tables}")
    if n_wild < 20:
        raise ValueError(f"n_wild must be >= 20 (p = 1 / (1 + n_wild) must fall below 0.05), got {n_wild}")
    check_backend(backend, scheduler)
    frame = design.frame[["budget", "r", "size", "n_once", "n_rec", "tokens", "flops"]].copy()
    p = {k: float(v) for k, v in params.items()}
    if laws is not None and len(laws) < n_tables:
        raise ValueError(f"{len(laws)} law draws for {n_tables} tables: need one per table")
    table_laws = [
        p if laws is None else {**p, **{k: float(v) for k, v in laws[j].items()}} for j in range(n_tables)
    ]
    seeds = [int(s.generate_state(1)[0] % 2**31) for s in np.random.SeedSequence(seed).spawn(n_tables)]
    cell_noise = (
        noise.per_run if misfit is None or not misfit.shapes else misfit.per_run_sd,
        noise.cell if misfit is None else misfit.cell_noise,
    )

    def offsets(s: int) -> np.ndarray | None:
        if misfit is None:
            return None
        return misfit.table_offsets(frame, np.random.default_rng([s, 1]))

    start = time.perf_counter()
    tables: list[dict[str, Any]] = []
    tasks = (
        (frame, law, cell_noise, s, n_boot, n_wild, delta_phi, n_starts, offsets(s), tests)
        for law, s in zip(table_laws, seeds)
    )
    results = parallel_map(analyse_table, tasks, n_jobs=n_jobs, backend=backend, scheduler=scheduler)
    for i, res in enumerate(results, 1):
        tables.append(res)
        if progress:
            print(f"\rplan: simulated table {i}/{n_tables}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    ok = [t for t in tables if "error" not in t and np.isfinite(t["width"])]
    widths = np.array([t["width"] for t in ok])
    power, mc = {}, {}
    for key, name in (("p0", "phi=0"), ("p1", "phi=1")):
        ps = np.array([t[key] for t in ok if t.get(key) is not None and np.isfinite(t[key])])
        if len(ps):
            power[name] = float(np.mean(ps < ALPHA_TEST))
            mc[name] = math.sqrt(power[name] * (1 - power[name]) / len(ps))
    if delta_phi is not None:
        d = [t["delta_ci"] for t in ok if t.get("delta_ci")]
        if d:
            power["delta_phi"] = float(np.mean([lo > 0 or hi < 0 for lo, hi in d]))
            mc["delta_phi"] = math.sqrt(power["delta_phi"] * (1 - power["delta_phi"]) / len(d))
    nan = math.nan
    return SimulatedPlan(
        n_tables=n_tables,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        tables=tables,
        width_median=float(np.median(widths)) if len(widths) else nan,
        width_q10=float(np.quantile(widths, 0.1)) if len(widths) else nan,
        width_q90=float(np.quantile(widths, 0.9)) if len(widths) else nan,
        p_box=float(np.mean([t["at_box"] for t in ok])) if ok else nan,
        power=power,
        power_mc_se=mc,
        n_failed=len(tables) - len(ok),
        seconds=time.perf_counter() - start,
        law_draws=0 if laws is None else n_tables,
        law_draws_source=laws_source if laws is not None else "",
        misfit=None
        if misfit is None
        else {**misfit.to_dict(), "cells_without_offset": misfit.missing(frame)},
        tests=tests,
    )
