"""Plan a sweep before training it: the predicted interval, power and cost for phi.

phi is identified only through how the N-term of

    L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta

changes with r, so a design whose isoFLOP curves sit on one side of their optimum (the
D-term dominates) or whose runs are few and noisy cannot pin it, whatever the fitting.
Given a planned design (the study's grid, a sweep spec or a CSV of planned runs), a law to
plan under (the study's, or the Huber fit of a pilot table) and a noise model, this module
predicts what the reference analysis (Huber fit, (budget, r) cell bootstrap, wild cluster
tests) will report, two ways:

**Asymptotic** (:func:`asymptotic_plan`, well under a second).  The Huber M-estimator's
sandwich covariance at the assumed law (Huber 1981, *Robust Statistics* 7.6), with the
expectations taken under the noise model instead of estimated from residuals.  With
log-loss noise e_i = u_c + eps_i, u_c ~ N(0, tau^2) shared by the runs of cell c = (budget,
r), eps_i ~ N(0, sigma^2), psi(x) = clip(x, -delta, delta) and J the Jacobian of log L over
the six internal coordinates (a, alpha, b, beta, e, phi):

    cov = B^-1 M B^-1,        B = m J^T J,      m = P(|e_i| <= delta)
    M = (E psi(e)^2 - c) J^T J + c sum_c S_c S_c^T,   S_c = sum_{i in c} J_i,
    c = E[psi(e_i) psi(e_j)] for i != j in one cell = E_u[(E_eps psi(u + eps))^2]

(the cluster sandwich; c = 0 without shared noise).  The predicted width of phi's 95%
interval is 2 x 1.96 x se(phi); power against phi0 is that of the two-sided Wald test,
Phi(|phi - phi0| / se - 1.96) + Phi(-|phi - phi0| / se - 1.96).  It is a linearisation:
:attr:`AsymptoticPlan.trusted` is False (with the reasons) when a parameter lies within
3 se of the search box or when 1.96 se(phi) > 0.5.

**Simulation** (:func:`simulate_plan`).  ``n_tables`` tables drawn from the law and the
noise model (:func:`phifit.simulation.simulate`), each analysed as the reference method
would: Huber fit, percentile interval of phi from a (budget, r) cell block bootstrap
(``n_boot`` replicates), restricted fits phi = 0 and phi = 1 and their wild cluster
bootstrap tests (``n_wild`` replicates, rejection at p < 0.05).  Tables run in parallel
(joblib processes).  Reported: the median width and its 10-90% range over tables, the
share of tables whose interval reaches the box, and the rejection rates (with their
binomial Monte-Carlo error).  ``benchmarks/plan_calibration.py`` checks it against tables
analysed with full-size bootstraps.

Also: whether each planned (budget, r) isoFLOP curve brackets the optimum the law predicts
(:func:`bracketing`), the reasons a predicted interval is wide (:func:`wide_reasons`) and
the cost.  :mod:`phifit.plan_optimize` searches designs under a compute cap.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from .cautions import Caution, caution
from .fitters.engine import DELTA
from .law import (
    COORD_LABELS,
    DEFAULT_BOUNDS,
    THETA_NAMES,
    Design,
    log_loss,
    log_loss_and_jacobian,
    params_to_theta,
)
from .plain import to_plain
from .reference import REFERENCE_PARAMS, paper_architecture, paper_design

__all__ = [
    "PlanDesign",
    "NoiseModel",
    "AsymptoticPlan",
    "SimulatedPlan",
    "PlanResult",
    "design_from_paper",
    "design_from_spec",
    "design_from_table",
    "noise_from_pilot",
    "asymptotic_plan",
    "simulate_plan",
    "bracketing",
    "wide_reasons",
    "plan_design",
]

#: z of a two-sided 95% interval and the level of the tests.
Z95 = float(norm.ppf(0.975))
ALPHA_TEST = 0.05
#: Asymptotic and simulated widths further apart than this (relative) draw a warning.
AGREE_WIDTH_RTOL = 0.25
#: ... and powers further apart than this (absolute).
AGREE_POWER_ATOL = 0.15
#: The linearisation is not trusted when 1.96 se(phi) exceeds this.
MAX_LINEAR_HALF_WIDTH = 0.5


# -- architecture families: size -> (N_once, N_rec, FLOPs per token) -------------------------


class _PaperArch:
    """The study's architectures at width s (d = 64 s), any real s > 0."""

    size_name = "width s"

    def arch(self, r: int, sizes: np.ndarray) -> dict[str, np.ndarray]:
        a = paper_architecture(np.asarray(sizes, float), int(r))
        return {k: np.asarray(a[k], float) for k in ("n_once", "n_rec", "flops_per_token")}

    def candidates(self, r: int, lo: float, hi: float) -> np.ndarray:
        return np.unique(np.round(np.geomspace(max(lo, 1.0), hi, 60)).astype(int)).astype(float)


class _SpecArch:
    """The trainer's architectures of a sweep spec at d_model = width (a multiple of head_dim)."""

    size_name = "d_model"

    def __init__(self, settings: Mapping[str, Any]):
        self.settings = dict(settings)
        self.head_dim = int(self.settings.get("head_dim", 16))
        self._cache: dict[tuple[int, int], tuple[float, float, float, int]] = {}

    def one(self, r: int, width: int) -> tuple[float, float, float, int]:
        """(n_once, n_rec, flops per token, tokens per optimiser step) of one width."""
        key = (int(r), int(width))
        if key not in self._cache:
            from .trainers.config import make_train_config
            from .trainers.flops import flops_per_token, param_counts

            cfg = make_train_config(**self.settings, budget=1e12, width=int(width), r=int(r), seed=0)
            pc = param_counts(cfg.model)
            per_step = cfg.batch_size * cfg.model.seq_len * cfg.grad_accum
            self._cache[key] = (
                float(pc.n_once),
                float(pc.n_rec),
                float(flops_per_token(cfg.model)),
                per_step,
            )
        return self._cache[key]

    def arch(self, r: int, sizes: np.ndarray) -> dict[str, np.ndarray]:
        rows = np.array([self.one(r, int(round(w)))[:3] for w in np.atleast_1d(sizes)])
        return {"n_once": rows[:, 0], "n_rec": rows[:, 1], "flops_per_token": rows[:, 2]}

    def candidates(self, r: int, lo: float, hi: float) -> np.ndarray:
        h = self.head_dim
        return np.arange(max(h, h * math.floor(lo / h)), h * math.ceil(hi / h) + 1, h, dtype=float)


class _TableArch:
    """Architectures interpolated from a table (:class:`phifit.frontier.TableFamily`); size = N_unique."""

    size_name = "N_unique"

    def __init__(self, family: Any):
        self.family = family

    def arch(self, r: int, sizes: np.ndarray) -> dict[str, np.ndarray]:
        a = self.family.at(int(r), np.log(np.asarray(sizes, float)))
        return {k: a[k] for k in ("n_once", "n_rec", "flops_per_token")}

    def candidates(self, r: int, lo: float, hi: float) -> np.ndarray:
        return np.geomspace(lo, hi, 60)


# -- designs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanDesign:
    """A planned design: one row per planned run (``budget``, ``r``, ``size``, ``n_once``,
    ``n_rec``, ``tokens``, ``flops``, ``seed``), where it came from, how sizes map to
    architectures (``arch``), and the trainer's time estimate when known (``seconds``)."""

    frame: pd.DataFrame
    source: str
    kind: str  # "paper", "spec", "table"
    arch: Any = field(repr=False)
    seconds: float | None = None
    seconds_note: str = ""
    spec: Any = field(default=None, repr=False)

    @property
    def n_runs(self) -> int:
        return len(self.frame)

    @property
    def flops(self) -> float:
        """Training FLOPs of the whole design (sum over runs of F per token x D)."""
        return float(self.frame["flops"].sum())

    @property
    def n_cells(self) -> int:
        return int(self.frame.groupby(["budget", "r"]).ngroups)

    @property
    def seeds(self) -> int:
        return int(self.frame["seed"].nunique()) if "seed" in self.frame else 1

    def with_seeds(self, seeds: int) -> PlanDesign:
        """The same runs, each repeated with ``seeds`` seeds (0 .. seeds - 1)."""
        if seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {seeds}")
        base = self.frame.drop_duplicates(["budget", "r", "size"]).drop(columns="seed", errors="ignore")
        frame = pd.concat([base.assign(seed=s) for s in range(seeds)], ignore_index=True)
        scale = len(frame) / max(len(self.frame), 1)
        seconds = None if self.seconds is None else self.seconds * scale
        return PlanDesign(frame, self.source, self.kind, self.arch, seconds, self.seconds_note, self.spec)

    def summary_line(self) -> str:
        budgets = sorted(self.frame["budget"].unique())
        rs = sorted(int(r) for r in self.frame["r"].unique())
        cost = f"{self.flops:.3g} training FLOPs"
        if self.seconds is not None:
            cost += f", ~{self.seconds / 3600:.2f} h ({self.seconds_note})"
        return (
            f"{self.source}: {self.n_runs} runs, {len(budgets)} budgets "
            f"({', '.join(f'{b:.3g}' for b in budgets)}), r in {{{', '.join(map(str, rs))}}}, "
            f"{self.n_cells} (budget, r) cells, {self.seeds} seed(s) per run; {cost}"
        )


def design_from_paper() -> PlanDesign:
    """The study's 116-run grid (:func:`phifit.reference.paper_design`)."""
    frame = paper_design()[["budget", "r", "size", "n_once", "n_rec", "tokens", "flops"]].assign(seed=0)
    return PlanDesign(frame, "paper design", "paper", _PaperArch())


def _spec_speed(spec: Any, width: int) -> Any:
    """The trainer's throughput for a width: the spec's recorded speeds (interpolated in log
    width between recorded widths), else its calibrated constant; None when it has neither."""
    from .trainers.sweep import Throughput

    if spec.recorded:
        w = np.log([x[0] for x in spec.recorded])
        f = np.log([x[1] for x in spec.recorded])
        o = np.array([x[2] for x in spec.recorded])
        lw = math.log(width)
        return Throughput(float(np.exp(np.interp(lw, w, f))), float(np.interp(lw, w, o)), "table")
    if spec.flops_per_second:
        return Throughput(float(spec.flops_per_second), 2.0, "constant")
    return None


def spec_seconds(spec: Any, runs: Sequence[Any]) -> tuple[float | None, str]:
    """Sum of :func:`phifit.trainers.sweep.estimate_seconds` over planned runs, with the
    spec's recorded per-width speeds (or its constant): no probing."""
    from .trainers.sweep import estimate_seconds

    total = 0.0
    for run in runs:
        speed = _spec_speed(spec, run.width)
        if speed is None:
            return None, "no [estimate] in the spec"
        total += estimate_seconds(run, speed)
    note = "the spec's recorded speeds" if spec.recorded else "the spec's calibrated constant"
    return total, f"trainer's estimate from {note}"


def design_from_spec(path: str, *, grids: list[str] | None = None, variant: str = "baseline") -> PlanDesign:
    """The runs a sweep spec plans (``phifit.trainers.sweep.plan``), one recipe (``variant``)."""
    from .trainers.flops import flops_per_token, param_counts, tokens_for_budget
    from .trainers.sweep import load_spec, plan

    spec = load_spec(path)
    planned = [p for p in plan(spec, grids) if p.variant == variant]
    if not planned:
        raise ValueError(f"{path}: the spec plans no runs of variant {variant!r}")
    rows = []
    for p in planned:
        cfg = p.config
        pc = param_counts(cfg.model)
        f = flops_per_token(cfg.model)
        _, tokens = tokens_for_budget(
            cfg.model, p.budget, cfg.batch_size * cfg.model.seq_len * cfg.grad_accum
        )
        rows.append(
            {
                "budget": p.budget,
                "r": p.r,
                "size": p.width,
                "n_once": pc.n_once,
                "n_rec": pc.n_rec,
                "tokens": tokens,
                "flops": f * tokens,
                "seed": p.seed,
            }
        )
    seconds, note = spec_seconds(spec, planned)
    return PlanDesign(
        pd.DataFrame(rows), str(spec.path), "spec", _SpecArch(spec.settings), seconds, note, spec
    )


def design_from_table(runs: Any, source: str | None = None) -> PlanDesign:
    """The design of a run table or a CSV of planned runs (its ``loss`` is ignored).

    Needs a numeric ``budget`` column (the isoFLOP curves); FLOPs are the table's ``flops``
    or 6 (N_once + r N_rec) D; size is N_unique = N_once + N_rec (or the ``size`` column
    when present, for display only)."""
    from .frontier import TableFamily

    frame = runs.frame
    if "budget" not in frame or not pd.api.types.is_numeric_dtype(frame["budget"]):
        raise ValueError(f"{runs.source}: planning needs a numeric 'budget' column (the FLOP budget C)")
    out = pd.DataFrame(
        {
            "budget": frame["budget"].to_numpy(float),
            "r": runs.r.astype(int),
            "size": runs.n_once + runs.n_rec,
            "n_once": runs.n_once,
            "n_rec": runs.n_rec,
            "tokens": runs.tokens,
            "flops": runs.compute,
            "seed": frame["seed"].to_numpy() if "seed" in frame else 0,
        }
    )
    return PlanDesign(out, source or runs.source, "table", _TableArch(TableFamily.from_runs(runs)))


# -- noise --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseModel:
    """Log-loss noise: ``per_run`` sd of the part independent per run, ``cell`` sd of the part
    shared by the runs of a (budget, r) cell; ``source`` and ``note`` say where they came from."""

    per_run: float
    cell: float = 0.0
    source: str = "given"
    note: str = ""

    def __post_init__(self) -> None:
        if not (self.per_run >= 0 and self.cell >= 0) or self.per_run + self.cell == 0:
            raise ValueError(f"noise sds must be >= 0 and not both 0, got {self.per_run} and {self.cell}")

    def to_dict(self) -> dict[str, Any]:
        return {"per_run": self.per_run, "cell": self.cell, "source": self.source, "note": self.note}


def noise_from_pilot(runs: Any, fit: Any, *, cell_noise: float | None = None) -> NoiseModel:
    """Noise of a pilot's own fit.

    The residual sd s = sqrt(SSR / (n - k)) of log-loss around the Huber fit.  When some
    configuration (budget, r, size) was trained with several seeds, the pooled variance
    between its seeds estimates the per-run part sigma^2 and the rest, tau^2 = max(0, s^2 -
    sigma^2), is taken as shared within (budget, r) cells (it also holds any misfit of the
    law).  With one seed per run the two cannot be separated: all of s is per-run noise,
    unless ``cell_noise`` is given (then sigma^2 = max(0, s^2 - cell_noise^2)).
    """
    res = np.log(runs.loss) - log_loss(fit.theta, runs.design)
    k = int(np.sum(fit.spec.free_mask)) if hasattr(fit, "spec") else 6
    s2 = float(np.sum(res**2) / max(len(res) - k, 1))
    frame = runs.frame
    keys = [c for c in ("budget", "r", "size") if c in frame]
    if len(keys) == 3 and "seed" in frame and frame["seed"].nunique() > 1:
        logl = pd.Series(np.log(runs.loss), index=frame.index)
        groups = logl.groupby([frame[c] for c in keys])
        dev = logl - groups.transform("mean")
        dof = int((groups.size() - 1).sum())
        if dof > 0:
            sigma2 = float(np.sum(dev.to_numpy() ** 2) / dof)
            tau2 = max(0.0, s2 - sigma2)
            return NoiseModel(
                math.sqrt(sigma2),
                math.sqrt(tau2),
                "pilot",
                f"residual sd {math.sqrt(s2):.4g} of the pilot's fit, split by its repeated seeds "
                f"({dof} degrees of freedom) into per-run {math.sqrt(sigma2):.4g} "
                f"and cell {math.sqrt(tau2):.4g}",
            )
    if cell_noise:
        sigma2 = max(0.0, s2 - cell_noise**2)
        note = (
            f"residual sd {math.sqrt(s2):.4g} of the pilot's fit; one seed per run, so the cell-shared part "
            f"is the given {cell_noise:.4g} and the per-run part the rest"
        )
        return NoiseModel(math.sqrt(sigma2), float(cell_noise), "pilot + --cell-noise", note)
    note = (
        f"residual sd {math.sqrt(s2):.4g} of log-loss around the pilot's Huber fit; the pilot has one seed "
        "per run, so a part shared within (budget, r) cells cannot be separated: planned as per-run "
        "noise (--cell-noise adds one)"
    )
    hint = _cell_share_hint(res, frame)
    if hint is not None:
        note += (
            f"; the residuals' cell means suggest a shared part of ~{hint:.2g} (random-effects ANOVA over "
            f"the cells: imprecise, and it includes misfit of the law; try --cell-noise {hint:.2g})"
        )
    return NoiseModel(math.sqrt(s2), 0.0, "pilot", note)


def _cell_share_hint(res: np.ndarray, frame: pd.DataFrame) -> float | None:
    """Method-of-moments (one-way random effects ANOVA) sd of a cell-shared part of residuals:
    tau^2 = var(cell means) - sigma_w^2 / n_bar, sigma_w^2 the pooled within-cell variance;
    None without budget or when the estimate is not positive."""
    if "budget" not in frame or "r" not in frame:
        return None
    df = pd.DataFrame({"res": res, "budget": frame["budget"].to_numpy(), "r": frame["r"].to_numpy()})
    g = df.groupby(["budget", "r"])["res"]
    n, n_cells = len(df), g.ngroups
    if n_cells < 3 or n <= n_cells:
        return None
    within = float(((df["res"] - g.transform("mean")) ** 2).sum() / (n - n_cells))
    tau2 = float(g.mean().var()) - within / (n / n_cells)
    return math.sqrt(tau2) if tau2 > 0 else None


def _huber_moments(sigma: float, tau: float, delta: float) -> tuple[float, float, float]:
    """(m, E psi(e)^2, c) for e = u + eps, u ~ N(0, tau^2), eps ~ N(0, sigma^2) (module docstring)."""
    s = math.hypot(sigma, tau)
    if not math.isfinite(delta):
        return 1.0, s * s, tau * tau
    a = delta / s
    m = 2 * norm.cdf(a) - 1
    e_psi2 = s * s * (m - 2 * a * norm.pdf(a)) + 2 * delta * delta * norm.sf(a)
    if tau == 0:
        return m, e_psi2, 0.0
    if sigma == 0:
        return m, e_psi2, e_psi2
    nodes, weights = np.polynomial.hermite_e.hermegauss(201)
    u = tau * nodes
    lo, hi = (-delta - u) / sigma, (delta - u) / sigma
    # E clip(X, -delta, delta) for X ~ N(u, sigma^2)
    g = (
        -delta * norm.cdf(lo)
        + delta * norm.sf(hi)
        + u * (norm.cdf(hi) - norm.cdf(lo))
        - sigma * (norm.pdf(hi) - norm.pdf(lo))
    )
    c = float(np.sum(weights * g * g) / np.sum(weights))
    return m, e_psi2, c


# -- the asymptotic plan -----------------------------------------------------------------------


def _cells(frame: pd.DataFrame) -> np.ndarray:
    return frame.groupby(["budget", "r"], sort=True).ngroup().to_numpy()


def _design_of(frame: pd.DataFrame) -> Design:
    return Design.from_arrays(
        frame["r"].to_numpy(float),
        frame["n_once"].to_numpy(float),
        frame["n_rec"].to_numpy(float),
        frame["tokens"].to_numpy(float),
    )


def _wald_power(diff: float, se: float) -> float:
    if not se > 0:
        return 1.0 if diff else ALPHA_TEST
    z = abs(diff) / se
    return float(norm.cdf(z - Z95) + norm.cdf(-z - Z95))


@dataclass(frozen=True)
class AsymptoticPlan:
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
    """(cov, J): the cluster sandwich covariance of theta_hat (internal coordinates) and the Jacobian."""
    _, jac = log_loss_and_jacobian(theta, _design_of(frame))
    m, e_psi2, c = _huber_moments(noise.per_run, noise.cell, delta)
    jtj = jac.T @ jac
    meat = (e_psi2 - c) * jtj
    if c > 0:
        cells = _cells(frame)
        s = np.zeros((cells.max() + 1, jac.shape[1]))
        np.add.at(s, cells, jac)
        meat = meat + c * s.T @ s
    bread = np.linalg.pinv(m * jtj)
    return bread @ meat @ bread, jac


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
    if se_phi > 0:
        p_box = float(norm.cdf((lo + half - phi) / se_phi) + norm.sf((hi - half - phi) / se_phi))
    else:
        p_box = 0.0
    power = {"phi=0": _wald_power(phi, se_phi), "phi=1": _wald_power(phi - 1.0, se_phi)}
    if delta_phi is not None:
        other = dict(params, phi=phi + delta_phi)
        cov2, _ = _sandwich(frame, params_to_theta(other), noise, delta)
        se_d = math.sqrt(se_phi**2 + max(cov2[i_phi, i_phi], 0.0))
        power["delta_phi"] = _wald_power(delta_phi, se_d)
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
    m, e_psi2, _ = _huber_moments(noise.per_run, noise.cell, delta)
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
class SimulatedPlan:
    """What the reference analysis reported on ``n_tables`` simulated tables.

    Per table (``tables``): ``phi_hat``, ``ci`` (95% percentile cell-bootstrap interval),
    ``width``, ``at_box`` (an end within 1e-6 of the box), ``p0``/``p1`` (wild cluster
    p-values of phi = 0 / phi = 1), and ``delta_ci`` when a second recipe was simulated.
    Summaries: ``width_median``, ``width_q10``/``width_q90``, ``p_box``, ``power``
    {restriction: rejection rate at p < 0.05}, ``power_mc_se`` (binomial MC error).
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

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)


def _analyse_table(
    frame: pd.DataFrame,
    params: dict[str, float],
    noise: tuple[float, float],
    seed: int,
    n_boot: int,
    n_wild: int,
    delta_phi: float | None,
    n_starts: int,
) -> dict[str, Any]:
    """One simulated table through the reference analysis (see :class:`SimulatedPlan`)."""
    import warnings

    from .bootstrap import block_bootstrap
    from .fitters.huber import fit_huber
    from .law import LawSpec
    from .runs import table_from_frame
    from .simulation import simulate
    from .wild import wild_cluster_test

    ss = np.random.SeedSequence(seed).spawn(4)
    seeds = [int(s.generate_state(1)[0] % 2**31) for s in ss]
    lo, hi = DEFAULT_BOUNDS["phi"]
    out: dict[str, Any] = {"seed": seed}

    def fit_and_boot(p: dict[str, float], s_sim: int, s_boot: int) -> tuple[Any, Any, Any]:
        table = simulate(frame, params=p, noise=noise[0], cell_noise=noise[1], seed=s_sim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = table_from_frame(table, source="simulated")
            fit = fit_huber(runs, n_starts=n_starts, seed=s_sim)
            boot = block_bootstrap(
                runs, n_boot=n_boot, point=fit, seed=s_boot, n_jobs=1, progress=False, jackknife=False
            )
        return runs, fit, boot

    try:
        runs, fit, boot = fit_and_boot(params, seeds[0], seeds[1])
        ci = boot.ci.get("phi", [math.nan, math.nan])
        out.update(
            phi_hat=fit.params["phi"],
            ci=list(ci),
            width=float(ci[1] - ci[0]),
            at_box=bool(ci[0] <= lo + 1e-6 or ci[1] >= hi - 1e-6),
        )
        for name, value in (("p0", 0.0), ("p1", 1.0)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                restricted = fit_huber(
                    runs, spec=LawSpec(fixed={"phi": value}), n_starts=max(50, n_starts // 4)
                )
                test = wild_cluster_test(runs, fit, restricted, n_boot=n_wild, seed=seeds[2])
            out[name] = test.p_value
        if delta_phi is not None:
            _, _, boot2 = fit_and_boot(dict(params, phi=params["phi"] + delta_phi), seeds[3], seeds[3] + 1)
            a, b = np.asarray(boot.params["phi"]), np.asarray(boot2.params["phi"])
            d = (b - a)[np.isfinite(a) & np.isfinite(b)]
            out["delta_ci"] = [float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975))] if len(d) else None
    except (RuntimeError, ValueError, np.linalg.LinAlgError) as err:
        out["error"] = f"{type(err).__name__}: {err}"
    return out


def simulate_plan(
    design: PlanDesign,
    params: Mapping[str, float],
    noise: NoiseModel,
    *,
    n_tables: int = 100,
    n_boot: int = 100,
    n_wild: int = 39,
    delta_phi: float | None = None,
    seed: int = 0,
    n_jobs: int = 2,
    n_starts: int = 200,
    progress: bool = True,
) -> SimulatedPlan:
    """Simulate ``n_tables`` tables and analyse each as the reference method would (module docstring).

    Table j uses the j-th child of ``SeedSequence(seed)``: results do not depend on ``n_jobs``.
    """
    import time

    if n_tables < 2:
        raise ValueError(f"n_tables must be >= 2, got {n_tables}")
    if n_wild < 20:
        raise ValueError(f"n_wild must be >= 20 (p = 1 / (1 + n_wild) must fall below 0.05), got {n_wild}")
    frame = design.frame[["budget", "r", "size", "n_once", "n_rec", "tokens", "flops"]].copy()
    p = {k: float(v) for k, v in params.items()}
    seeds = [int(s.generate_state(1)[0] % 2**31) for s in np.random.SeedSequence(seed).spawn(n_tables)]
    args = (p, (noise.per_run, noise.cell))
    start = time.perf_counter()
    tables: list[dict[str, Any]] = []
    if n_jobs == 1:
        results = (_analyse_table(frame, *args, s, n_boot, n_wild, delta_phi, n_starts) for s in seeds)
    else:
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=n_jobs, return_as="generator")(
            delayed(_analyse_table)(frame, *args, s, n_boot, n_wild, delta_phi, n_starts) for s in seeds
        )
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
    )


# -- isoFLOP bracketing --------------------------------------------------------------------------


def predicted_optimum(
    design: PlanDesign, params: Mapping[str, float], budget: float, r: int, lo: float, hi: float
) -> float:
    """The size minimising the law's loss on the isoFLOP curve (budget, r) among the family's
    candidate sizes in [lo, hi] (D = C / F, continuous)."""
    theta = params_to_theta(params)
    sizes = design.arch.candidates(r, lo, hi)
    a = design.arch.arch(r, sizes)
    d = Design.from_arrays(
        np.full(len(sizes), float(r)), a["n_once"], a["n_rec"], budget / a["flops_per_token"]
    )
    return float(sizes[int(np.argmin(log_loss(theta, d)))])


def bracketing(design: PlanDesign, params: Mapping[str, float]) -> list[dict[str, Any]]:
    """Per (budget, r) curve of the design: its sizes, the predicted optimum size (searched
    from a quarter of the smallest to four times the largest size), and ``status``:
    "bracketed" when the optimum lies strictly between the smallest and the largest size,
    else "optimum at or below the smallest size" / "... at or above the largest size"."""
    out = []
    for (budget, r), cell in design.frame.groupby(["budget", "r"], sort=True):
        sizes = sorted(set(cell["size"].astype(float)))
        opt = predicted_optimum(design, params, float(budget), int(r), sizes[0] / 4, sizes[-1] * 4)
        if opt <= sizes[0]:
            status = "optimum at or below the smallest size"
        elif opt >= sizes[-1]:
            status = "optimum at or above the largest size"
        else:
            status = "bracketed"
        out.append({"budget": float(budget), "r": int(r), "sizes": sizes, "optimum": opt, "status": status})
    return out


def wide_reasons(
    design: PlanDesign,
    noise: NoiseModel,
    asym: AsymptoticPlan,
    brackets: list[dict[str, Any]],
) -> list[str]:
    """Plain reasons why phi's interval is predicted wide (empty when it is not)."""
    reasons = []
    if asym.width < 0.3 and asym.p_box < 0.05:
        return reasons
    unb = [b for b in brackets if b["status"] != "bracketed"]
    if unb:
        budgets = sorted({b["budget"] for b in unb})
        below = sum(b["status"].endswith("smallest size") for b in unb)
        reasons.append(
            f"{len(unb)} of {len(brackets)} isoFLOP curves do not bracket their predicted optimum "
            f"(budgets {', '.join(f'{x:.3g}' for x in budgets)}; {below} with the optimum below the smallest "
            "size, where the D-term dominates and the N-term, which carries phi, is barely seen)"
        )
    ratio = asym.signal / asym.noise_eff if asym.noise_eff > 0 else math.inf
    reasons.append(
        f"noise vs the r-effect: a change of 0.1 in phi moves the predicted log-loss "
        f"by {asym.signal_raw:.2g} "
        f"(rms over runs), of which {asym.signal:.2g} is not absorbed by the other parameters, against a "
        f"per-run noise of {asym.noise_eff:.2g} as the Huber fit sees it (sd {noise.per_run:.2g}"
        + (f", plus {noise.cell:.2g} shared per cell" if noise.cell else "")
        + f"): signal/noise {ratio:.2g} per run over {design.n_runs} runs"
    )
    if design.seeds == 1:
        reasons.append(
            "one seed per run: repeated seeds average the per-run noise (se falls as 1/sqrt(seeds))"
        )
    strong = {k: v for k, v in asym.correlation_phi.items() if abs(v) > 0.9}
    if strong:
        reasons.append(
            "phi is nearly confounded with "
            + ", ".join(f"{k} (correlation {v:+.2f})" for k, v in strong.items())
        )
    if design.n_cells < 12:
        reasons.append(
            f"only {design.n_cells} (budget, r) cells: the cell bootstrap and wild test are coarse"
        )
    return reasons


# -- everything together --------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanResult:
    """A design's plan: the design and its cost, the law and noise planned under, the
    asymptotic and (optionally) simulated predictions, isoFLOP bracketing, reasons for a
    wide interval, and cautions (including where the two modes disagree)."""

    design: dict[str, Any]
    law: dict[str, float]
    law_source: str
    noise: NoiseModel
    delta_phi: float | None
    asymptotic: AsymptoticPlan
    simulation: SimulatedPlan | None
    bracketing: list[dict[str, Any]]
    reasons: list[str]
    warnings: list[Caution]
    optimized: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_plain(
            {
                "design": self.design,
                "law": self.law,
                "law_source": self.law_source,
                "noise": self.noise.to_dict(),
                "delta_phi": self.delta_phi,
                "asymptotic": self.asymptotic.to_dict(),
                "simulation": None if self.simulation is None else self.simulation.to_dict(),
                "bracketing": self.bracketing,
                "reasons": self.reasons,
                "warnings": [c.to_dict() for c in self.warnings],
                "optimized": self.optimized,
            }
        )

    def to_json(self, path: str) -> None:
        import json

        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2)

    def summary(self) -> str:
        """The plan as text: design and cost, both predictions, bracketing, reasons, cautions."""
        a, s = self.asymptotic, self.simulation
        lines = ["[[Plan]]", f"design   {self.design['line']}"]
        law = ", ".join(f"{k} {v:.4g}" for k, v in self.law.items())
        lines += [
            f"law      {law} ({self.law_source})",
            f"noise    log-loss sd {self.noise.per_run:.4g} per run"
            + (f" + {self.noise.cell:.4g} per (budget, r) cell" if self.noise.cell else "")
            + f" ({self.noise.source})",
        ]
        if self.noise.note:
            lines.append(f"         {self.noise.note}")
        lines.append("")
        lines.append("[[Predicted for phi]]")
        lines.append(f"{'':28} {'asymptotic':>14} {'simulation':>24}")
        sim_w = f"{s.width_median:.3g} [{s.width_q10:.3g}, {s.width_q90:.3g}]" if s is not None else "-"
        trust = "" if a.trusted else " (!)"
        lines.append(f"{'95% interval width':28} {a.width:>14.3g}{trust:<4} {sim_w:>20}")
        lines.append(
            f"{'P(interval reaches box)':28} {a.p_box:>14.2f}     {(f'{s.p_box:.2f}' if s else '-'):>20}"
        )
        for key, label in (
            ("phi=0", "power: reject phi = 0"),
            ("phi=1", "power: reject phi = 1"),
            ("delta_phi", "power: detect delta phi"),
        ):
            if key not in a.power:
                continue
            sim = f"{s.power[key]:.2f} +- {s.power_mc_se[key]:.2f}" if s and key in s.power else "-"
            lines.append(f"{label:28} {a.power[key]:>14.2f}     {sim:>20}")
        lines.append(
            f"se(phi) asymptotic {a.se['phi']:.3g}"
            + (
                f"; simulation: {s.n_tables} tables x {s.n_boot} bootstrap / {s.n_wild} wild replicates, "
                f"seed {s.seed}, {s.seconds:.0f} s" + (f", {s.n_failed} failed" if s.n_failed else "")
                if s
                else ""
            )
        )
        if not a.trusted:
            lines.append("(!) the asymptotic mode cannot be trusted here:")
            lines += [f"    - {r}" for r in a.reasons]
        lines.append("")
        lines.append("[[IsoFLOP curves: predicted optimum vs planned sizes]]")
        for b in self.bracketing:
            sizes = ", ".join(f"{x:.4g}" for x in b["sizes"])
            lines.append(
                f"budget {b['budget']:<9.3g} r {b['r']}  sizes {sizes:<32} "
                f"optimum {b['optimum']:<9.4g} {b['status']}"
            )
        if self.reasons:
            lines += ["", "[[Why the interval is wide]]"] + [
                f"{i}. {r}" for i, r in enumerate(self.reasons, 1)
            ]
        if self.optimized:
            o = self.optimized
            lines += ["", "[[Optimised design]]", o["line"]]
            lines.append(
                f"predicted width (asymptotic) {o['width_before']:.3g} -> {o['width_after']:.3g}; "
                f"cost {o['flops_before']:.3g} -> {o['flops_after']:.3g} FLOPs"
                + (
                    f", {o['hours_before']:.2f} h -> {o['hours_after']:.2f} h"
                    if o.get("hours_after") is not None
                    else ""
                )
            )
            if o.get("sim_width_after") is not None:
                lines.append(
                    f"predicted width (simulation) {o.get('sim_width_before', math.nan):.3g} "
                    f"-> {o['sim_width_after']:.3g}"
                )
            if o.get("written"):
                lines.append(f"wrote {o['written']}")
        if self.warnings:
            lines += ["", "[[Cautions]]"] + [f"{c.level} [{c.kind}]: {c.message}" for c in self.warnings]
        return "\n".join(lines)


def agreement(asym: AsymptoticPlan, sim: SimulatedPlan) -> list[Caution]:
    """Cautions where the asymptotic and simulated predictions disagree (width by more than
    25% relative, a power by more than 0.15)."""
    out = []
    if np.isfinite(sim.width_median) and sim.width_median > 0:
        ratio = asym.width / sim.width_median
        if abs(ratio - 1) > AGREE_WIDTH_RTOL:
            out.append(
                caution(
                    "plan",
                    "modes_disagree",
                    f"the asymptotic width {asym.width:.3g} is {ratio:.2f} x the simulated median "
                    f"{sim.width_median:.3g}: trust the simulation"
                    + ("" if asym.trusted else " (the asymptotic mode's conditions fail, see above)"),
                    ratio=ratio,
                )
            )
    for key, p in sim.power.items():
        if key in asym.power and abs(asym.power[key] - p) > AGREE_POWER_ATOL:
            out.append(
                caution(
                    "plan",
                    "modes_disagree",
                    f"power ({key}): asymptotic {asym.power[key]:.2f} vs simulated {p:.2f}; "
                    "trust the simulation",
                )
            )
    return out


def plan_design(
    design: PlanDesign,
    *,
    params: Mapping[str, float] | None = None,
    noise: NoiseModel,
    law_source: str = "the study's joint fit",
    delta_phi: float | None = None,
    n_tables: int = 0,
    n_boot: int = 100,
    n_wild: int = 39,
    seed: int = 0,
    n_jobs: int = 2,
    progress: bool = True,
) -> PlanResult:
    """Plan ``design`` under ``params`` (default the study's law) and ``noise``: the
    asymptotic prediction always, the simulation with ``n_tables`` > 0."""
    p = {**REFERENCE_PARAMS, **(params or {})}
    asym = asymptotic_plan(design, p, noise, delta_phi=delta_phi)
    sim = None
    if n_tables:
        sim = simulate_plan(
            design,
            p,
            noise,
            n_tables=n_tables,
            n_boot=n_boot,
            n_wild=n_wild,
            delta_phi=delta_phi,
            seed=seed,
            n_jobs=n_jobs,
            progress=progress,
        )
    brackets = bracketing(design, p)
    warnings = []
    if sim is not None:
        warnings += agreement(asym, sim)
    elif not asym.trusted:
        warnings.append(
            caution(
                "plan",
                "asymptotic_untrusted",
                "the asymptotic prediction is unreliable here; run --simulate N",
            )
        )
    return PlanResult(
        design={
            "source": design.source,
            "kind": design.kind,
            "n_runs": design.n_runs,
            "n_cells": design.n_cells,
            "seeds": design.seeds,
            "flops": design.flops,
            "seconds": design.seconds,
            "seconds_note": design.seconds_note,
            "line": design.summary_line(),
            "runs": design.frame.to_dict(orient="list"),
        },
        law={k: float(v) for k, v in p.items()},
        law_source=law_source,
        noise=noise,
        delta_phi=delta_phi,
        asymptotic=asym,
        simulation=sim,
        bracketing=brackets,
        reasons=wide_reasons(design, noise, asym, brackets),
        warnings=warnings,
    )


def plan_figure(result: PlanResult) -> Any:
    """Two panels: the simulated widths of phi's interval (histogram, with the asymptotic
    width as a line) and the powers (asymptotic and simulated bars)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    a, s = result.asymptotic, result.simulation
    if s is not None:
        widths = [t["width"] for t in s.tables if "error" not in t and np.isfinite(t["width"])]
        ax1.hist(widths, bins=20, color="#0072B2", alpha=0.7, label=f"simulated ({len(widths)} tables)")
        ax1.axvline(s.width_median, color="#0072B2", linestyle="--", label=f"median {s.width_median:.3g}")
    ax1.axvline(
        a.width, color="#D55E00", label=f"asymptotic {a.width:.3g}" + ("" if a.trusted else " (untrusted)")
    )
    ax1.set_xlabel("width of phi's 95% interval")
    ax1.set_ylabel("tables")
    ax1.legend(fontsize=7)
    keys = list(a.power)
    x = np.arange(len(keys))
    ax2.bar(x - 0.2, [a.power[k] for k in keys], 0.4, color="#D55E00", label="asymptotic")
    if s is not None:
        ax2.bar(x + 0.2, [s.power.get(k, np.nan) for k in keys], 0.4, color="#0072B2", label="simulated")
    ax2.set_xticks(x, [f"reject {k}" if k != "delta_phi" else "detect delta phi" for k in keys], fontsize=8)
    ax2.set_ylim(0, 1.05)
    ax2.set_ylabel("power (p < 0.05)")
    ax2.legend(fontsize=7)
    fig.suptitle(result.design["source"], fontsize=9)
    return fig
