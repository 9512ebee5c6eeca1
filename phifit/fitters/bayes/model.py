"""The Bayesian model of the joint law: likelihood, priors, and its PyMC graph.

Model (log space, theta = (a, alpha, b, beta, e, phi) as in :mod:`phifit.law`):

    log L_i  ~  Student-t(nu, mu_i + u_c(i), sigma)
    mu_i     =  LSE(a - alpha * log N_eff,i,  b - beta * log D_i,  e)
    log N_eff,i = logaddexp(log N_once,i,  phi * log r_i + log N_rec,i)
    u_c      =  tau * z_c,   z_c ~ Normal(0, 1)   (one per (budget, r) cell c)

The cell effect u_c is what every run of cell c shares and the law does not explain: one
data order, one seed, one learning-rate choice per cell, and the law's own misfit at that
cell.  It is the Bayesian counterpart of the cell bootstrap (which resamples whole cells):
without it, runs that share noise count as independent evidence and the posterior is too
narrow.  tau, the sd of the cell effects, is a direct estimate of the law's misfit at the
cell level (with the noise the cell's runs share).  ``noise="run"`` drops u_c (every run
independent, the model before cell effects); ``noise="cell"`` is the default where the
table has cells ((budget, r), with at least one cell of two or more runs).  The cell
effects are non-centred (u_c = tau z_c): with 3-5 runs a cell the data inform each u_c
weakly, where the centred form makes a funnel in (tau, u).

The formula is written once, in :func:`phifit.law.lse_log_loss`, which takes the math
namespace (``logaddexp``) as an argument: NumPy for :func:`phifit.law.log_loss`, PyTensor
here (the tests check the two agree to 1e-10).

Priors (weakly informative, in internal coordinates, each truncated to the LawSpec box;
the defaults are the study's box a, b in [-5, 35], alpha, beta in [0, 2.5], e in [-3, 2],
phi in [-3, 3]):

=====  =========================  ============================================================
coord  prior                      why
=====  =========================  ============================================================
a      Normal(5, 5) on the box    log A: A from e^-5 to e^15 within 2 sd (Chinchilla: a = 6.0,
                                  the study: 3.3)
b      Normal(5, 5) on the box    log B, same reasoning (Chinchilla 6.0, the study 6.8)
alpha  LogNormal(log 0.3, 0.5)     median 0.3, 0.11-0.82 within 2 sd: published exponents lie
       on box                     in 0.2-0.5 (Chinchilla 0.34, the study 0.20); see below
beta   LogNormal(log 0.3, 0.5)     as alpha (Chinchilla 0.28, the study 0.37)
       on box
e      Normal(0.5, 1) on box      log E: irreducible loss 0.6-4.5 nats within 1 sd (study 1.57)
phi    Normal(0.5, 1) on box      centred between the two reference values: equal prior
                                  density at phi = 0 and phi = 1, both within half a sd
sigma  HalfNormal(0.05)           scale of log-loss residuals; 0.05 is a 5% loss error, while
                                  the study's residuals are ~0.4-1% (its RMSE 0.010 nats)
tau    HalfNormal(0.05)           sd of the cell effects, on the same scale as sigma: the real
                                  tables' cell-level departures are 0.006-0.02 in log-loss
nu     Gamma(2, 0.1)              degrees of freedom (Juarez & Steel 2010; Stan prior wiki):
                                  mean 20, lets the data choose between heavy and normal tails
=====  =========================  ============================================================

Fixed parameters (``LawSpec(fixed={"phi": 0.0})``) are constants in the law.

Why log-normal exponents.  Where the budgets span little compute (the 12-cell CPU design),
the data fix the N-term's level and slope at the centre but hardly its curvature, so the
posterior runs along a ridge on which E takes nearly the whole level while A_c falls and
alpha = G / A_c rises; only the prior on alpha ends it.  The sampler moves along that ridge
in log alpha (:mod:`.coords`), where a Normal prior on alpha is a wall that steepens as
exp(2 log alpha): NUTS's step, tuned in the bulk, diverges there.  A log-normal prior on
alpha is a Normal in log alpha, a tail of constant curvature.  (Likewise beta and the
D-term's ridge.)  Where an exponent's box reaches below 0 it is sampled linearly
(:func:`.coords.log_exponents`) and its prior is Normal(0.3, 0.5) on the box instead.

Why Student-t and not Normal.  The reference fit minimises a Huber loss with delta = 1e-3:
it deliberately down-weights runs with large residuals.  The Student-t likelihood is the
Bayesian counterpart: its influence function is bounded (indeed redescending), so a bad
run is down-weighted instead of pulling the fit, and with nu estimated the data choose how
heavy the tails are.  On clean Gaussian noise nu's posterior stays away from small values
(median ~20 on the study's design) and little efficiency is lost.

The sampler moves in whitened coordinates z (:mod:`.coords`); the prior densities and the
box are evaluated on theta and log |d theta / d v| is added, so the posterior of theta is
exactly the model above (the tests check the log density against scipy).

Everything that changes between fits (the table, the whitening, fixed values) is
``pm.Data`` (:func:`model_data`); the graph depends only on the spec's structure
(:func:`model_structure`), so nutpie compiles once per structure and swaps data.  The cell
model's z_cell has :func:`cell_slots` entries (32, or the next doubling above the table's
cells): the entries beyond the table's cells are N(0, 1) that no run's mean uses, so every
table of up to 32 cells shares one compiled model, and the posterior of the rest is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from ...cache import use_pytensor_cache
from ...extras import import_optional
from ...law import THETA_NAMES, THETA_TO_PARAM, LawSpec, lse_log_loss
from ...runs.table import SINGLE_RUNS, RunTable
from .coords import INTERVAL_INDEX, interval_bounds, level_split, log_exponents, ridge_floor, whitening

#: Priors per internal coordinate, truncated to the LawSpec box: Normal(mean, sd), except alpha
#: and beta where sampled in log (:func:`.coords.log_exponents`, the default box):
#: LogNormal(log mean, sd), i.e. log alpha ~ Normal(log 0.3, 0.5).
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
#: log N = -inf (N_once = 0 or N_rec = 0) enters the PyTensor graph as this floor:
#: exp(-1e4) underflows to exactly 0, so logaddexp(x, floor) == x in float64.
LOG_FLOOR = -1.0e4
#: tau ~ HalfNormal(TAU_PRIOR_SD): sd of the (budget, r) cell effects on log-loss.
TAU_PRIOR_SD = 0.05
#: The fewest cell-effect slots of a compiled cell model (:func:`cell_slots`).
CELL_SLOTS = 32
#: The variables kept from the sampler: theta, sigma, nu (the cell model adds :data:`CELL_VARS`).
STORED_VARS = tuple(THETA_NAMES) + ("sigma", "nu")
#: The cell model's extra variables: tau (a scalar) and cell_effect (one per cell).
CELL_VARS = ("tau", "cell_effect")
#: The noise models: "cell" (runs of a (budget, r) cell share an effect) and "run" (independent).
NOISE_MODELS = ("cell", "run")
#: The likelihood in words per noise model (stored with every fit).
LIKELIHOODS: Mapping[str, str] = MappingProxyType(
    {
        "cell": "Student-t(nu, mu = law log-loss + u_cell, sigma) on log-loss; "
        "u_cell = tau z_cell, z_cell ~ Normal(0, 1) per (budget, r) cell",
        "run": "Student-t(nu, mu = law log-loss, sigma) on log-loss; runs independent",
    }
)
#: The likelihood of the independent-runs model (kept for readers of older results).
LIKELIHOOD = LIKELIHOODS["run"]


def n_cells(data: Mapping[str, Any]) -> int:
    """Number of cell effects in the model of ``data``: 0 for the independent-runs model."""
    return int(np.max(data["cell"])) + 1 if "cell" in data else 0


def cell_slots(data: Mapping[str, Any]) -> int:
    """Length of the model's z_cell: :func:`n_cells` rounded up to :data:`CELL_SLOTS` times a power
    of 2 (0 for the independent-runs model).

    The sampler's dimension is fixed when nutpie compiles, so a model sized to its table's cells
    would be compiled again for every other number of cells.  With the slots rounded up, every
    table of up to 32 cells (the study's 24, the CPU tables' 6-16) shares one compiled model per
    structure (:func:`model_structure`).  The slots beyond the table's cells are N(0, 1) draws that
    no run's mean uses: they leave the posterior of everything else exactly as it was, cost NUTS
    a few well-scaled dimensions, and are dropped from the stored draws
    (:func:`phifit.fitters.bayes.backends.draws_and_stats`)."""
    n = n_cells(data)
    if n == 0:
        return 0
    slots = CELL_SLOTS
    while slots < n:
        slots *= 2
    return slots


def stored_vars(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The variables kept from the sampler for the model of ``data``."""
    return STORED_VARS + (CELL_VARS if n_cells(data) else ())


def prior_description(spec: LawSpec | None = None, *, noise: str = "run") -> dict[str, str]:
    """Readable prior per parameter for ``spec`` (fixed parameters say so) and ``noise``."""
    spec = spec or LawSpec()
    logged = {c for c, f in zip(THETA_NAMES, log_exponents(spec)) if f}
    out = {}
    for coord in THETA_NAMES:
        name = THETA_TO_PARAM[coord]
        if name in spec.fixed:
            out[coord] = f"fixed at {name} = {spec.fixed[name]:g}"
        else:
            mu, sd = PRIORS[coord]
            lo, hi = spec.bounds[coord]
            kind = f"LogNormal(log {mu:g}, {sd:g})" if coord in logged else f"Normal({mu:g}, {sd:g})"
            out[coord] = f"{kind} truncated to [{lo:g}, {hi:g}]"
    out["sigma"] = f"HalfNormal({SIGMA_PRIOR_SD:g})"
    out["nu"] = f"Gamma({NU_PRIOR[0]:g}, rate {NU_PRIOR[1]:g})"
    if noise == "cell":
        out["tau"] = f"HalfNormal({TAU_PRIOR_SD:g})"
        out["cell_effect"] = "tau * Normal(0, 1), one per (budget, r) cell"
    return out


def resolve_noise(runs: RunTable, noise: str) -> tuple[str, np.ndarray | None, list[str] | None]:
    """The noise model for ``runs``: (name, cell code per run or None, cell labels or None).

    ``noise="auto"`` is ``"cell"`` when the table has (budget, r) cells and at least one holds
    two or more runs (otherwise a cell effect is indistinguishable from a run's own noise),
    else ``"run"``.  ``"cell"`` on a table without a ``budget`` column, or whose cells all
    hold one run, raises ``ValueError`` saying why.
    """
    choices = ("auto", *NOISE_MODELS)
    if noise not in choices:
        raise ValueError(f"unknown noise model {noise!r}; expected one of {', '.join(choices)}")
    if noise == "run":
        return "run", None, None
    codes, label = runs.cells()
    has_cells = label != SINGLE_RUNS
    shared = has_cells and int(np.bincount(codes).max()) >= 2
    if noise == "auto":
        noise = "cell" if shared else "run"
    elif not has_cells:
        raise ValueError("noise='cell' needs a budget column: the cells are (budget, r)")
    elif not shared:
        raise ValueError("noise='cell' needs a (budget, r) cell with two or more runs; every cell has one")
    if noise == "run":
        return "run", None, None
    first = [int(np.flatnonzero(codes == c)[0]) for c in range(int(codes.max()) + 1)]
    budget, r = runs.budget, runs.r
    labels = [f"budget={_label(budget[i])}, r={r[i]:g}" for i in first]
    return "cell", codes, labels


def _label(x: Any) -> str:
    """A budget as text: numbers to 4 significant digits."""
    try:
        return f"{float(x):.4g}"
    except (TypeError, ValueError):
        return str(x)


def model_whitening(runs: RunTable, spec: LawSpec) -> dict[str, Any]:
    """:func:`.coords.whitening` with this model's prior scales."""
    return whitening(runs, spec, {c: sd for c, (_, sd) in PRIORS.items()})


def model_data(
    runs: RunTable,
    spec: LawSpec,
    white: Mapping[str, Any] | None = None,
    *,
    cell: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The shared data of the PyMC model of ``spec`` for the table ``runs``.

    The design (log N_once, log N_rec, log r, log D, with log 0 as :data:`LOG_FLOOR`), the
    observed log-loss, the whitening (``white``; computed by :func:`model_whitening` when
    None), the fixed values ``fixed_<coord>`` and, for the cell model, ``cell``: the cell
    code of each run (0 .. G-1; None: the independent-runs model).
    """
    w = white if white is not None else model_whitening(runs, spec)
    d = runs.design
    rows = [d.log_n_once, d.log_n_rec, d.log_r, d.log_tokens]
    design = np.stack([np.asarray(x, float) for x in rows])
    data = {
        "design": np.where(np.isfinite(design), design, LOG_FLOOR),
        "log_loss_obs": np.asarray(runs.log_loss, float),
        "centre": np.asarray(w["centre"], float),
        "chol": np.asarray(w["chol"], float),
        "c_n": np.asarray(w["c_n"], float),
        "c_d": np.asarray(w["c_d"], float),
    }
    if cell is not None:
        data["cell"] = np.asarray(cell, dtype=np.int64)
    fixed = spec.full_theta(np.zeros(int(spec.free_mask.sum())))
    for i, c in enumerate(THETA_NAMES):
        if not spec.free_mask[i]:
            data[f"fixed_{c}"] = np.asarray(fixed[i], float)
    return data


def model_structure(spec: LawSpec, data: Mapping[str, Any]) -> tuple:
    """What the compiled graph depends on: free coordinates, logged exponents, the box and
    the cell-effect slots (:func:`cell_slots`; 0: the independent-runs model)."""
    return (
        tuple(bool(f) for f in spec.free_mask),
        tuple(bool(f) for f in log_exponents(spec)),
        tuple((c, *spec.bounds[c]) for c in THETA_NAMES),
        cell_slots(data),
    )


def _truncnorm_log_norm(mu: float, sd: float, lo: float, hi: float) -> float:
    """log of the truncated normal's normaliser, sd sqrt(2 pi) (Phi(hi') - Phi(lo'))."""
    from scipy.special import log_ndtr

    u, l_ = (hi - mu) / sd, (lo - mu) / sd
    log_mass = log_ndtr(u) + math.log1p(-math.exp(min(log_ndtr(l_) - log_ndtr(u), 0.0)))
    return math.log(sd) + 0.5 * math.log(2 * math.pi) + float(log_mass)


def build_model(data: Mapping[str, np.ndarray], spec: LawSpec):
    """The PyMC model of the module docstring for ``spec``; inputs are ``pm.Data``.

    Free RVs: z (one per free coordinate, whitened), sigma, nu; with ``cell`` in ``data``
    also tau and z_cell (one per cell), with the deterministic cell_effect = tau z_cell.
    With v = centre + L z, the free sampling coordinates among (A_c, log alpha, B_c,
    log beta, E, w_phi), where phi = lo + (hi - lo) sigmoid(w_phi)
    (:func:`.coords.interval_bounds`) and, with a, alpha, e free, (A_c, log alpha, E) come from
    the ridge coordinates (S, log G, w) (:func:`.coords.ridge_floor`), or, with b and beta free
    too, (A_c, log alpha, B_c, log beta, E) from the level split (T, log G, w_B, log H, w_A)
    (:func:`.coords.level_split`), the law's coordinates are

        alpha = exp(v_alpha), beta = exp(v_beta), phi = v_phi,
        a = log A_c + alpha c_N,  b = log B_c + beta c_D,  e = log E

    (a fixed coordinate is the ``fixed_<name>`` datum instead).  The ``theta_prior``
    potential is the truncated-normal prior density of the free theta plus
    log |d theta / d v| = sum(log alpha, log beta) - sum(log A_c, log B_c, log E)
    + log((hi - lo) s (1 - s)) for phi (s = sigmoid(w_phi)) + log((S - lo) s (1 - s)) for
    the ridge (s = sigmoid(w)) or log((T - lo)^2 s_E s_A s_B) for the level split, and -inf
    outside the box, for B_c <= 0 or S (T) <= lo.
    Deterministics: a, alpha, b, beta, e, phi and ``log_loss_hat`` (the law's log-loss per run).

    PyTensor is imported here, first pointed at phifit's compile cache
    (:func:`phifit.cache.use_pytensor_cache`).
    """
    use_pytensor_cache()
    pm = import_optional("pymc", "bayes", "method 'bayes' (the Bayesian fit)")
    pt = import_optional("pytensor.tensor", "bayes", "method 'bayes' (the Bayesian fit)")

    free = {c: bool(f) for c, f in zip(THETA_NAMES, spec.free_mask)}
    logged = {c: bool(f) for c, f in zip(THETA_NAMES, log_exponents(spec))}
    with pm.Model() as model:
        d = {k: pm.Data(k, np.asarray(v)) for k, v in data.items()}
        z = pm.Flat("z", shape=int(spec.free_mask.sum()))
        v_free = d["centre"] + pt.dot(d["chol"], z)
        v = {c: v_free[j] for j, c in enumerate(c for c in THETA_NAMES if free[c])}
        log_jac, valid, theta = 0.0, [], {}
        intervals = interval_bounds(spec)
        for c, k in INTERVAL_INDEX.items():  # w -> lo + (hi - lo) sigmoid(w): the box is never crossed
            if k in intervals:
                lo, hi = intervals[k]
                w = v[c]
                v[c] = lo + (hi - lo) * pt.sigmoid(w)
                log_jac = log_jac + math.log(hi - lo) - pt.softplus(-w) - pt.softplus(w)
        floor = ridge_floor(spec)
        if floor is not None and level_split(spec):
            # (T, log G, w_B, log H, w_A) -> (A_c, log alpha, B_c, log beta, E): both ridges are axes
            valid.append(pt.gt(v["a"], floor))
            span = pt.switch(valid[-1], v["a"], floor + 1.0) - floor  # finite off the support
            w_a, w_b = v["e"], v["b"]
            log_s_e = -pt.logsumexp(pt.stack([pt.zeros_like(w_a), -w_a, -w_b]))
            log_s_a, log_s_b = log_s_e - w_a, log_s_e - w_b
            log_span = pt.log(span)
            v["a"], v["b"] = span * pt.exp(log_s_a), span * pt.exp(log_s_b)
            v["e"] = floor + span * pt.exp(log_s_e)
            v["alpha"] = v["alpha"] - log_span - log_s_a
            v["beta"] = v["beta"] - log_span - log_s_b
            log_jac = log_jac + 2.0 * log_span + log_s_e + log_s_a + log_s_b
        elif floor is not None:  # (S, log G, w) -> (A_c, log alpha, E): the N-term ridge is the w axis
            valid.append(pt.gt(v["a"], floor))
            span = pt.switch(valid[-1], v["a"], floor + 1.0) - floor  # finite off the support
            w = v["e"]
            a_c = span * pt.sigmoid(-w)
            v["a"], v["alpha"], v["e"] = a_c, v["alpha"] - pt.log(a_c), floor + span * pt.sigmoid(w)
            log_jac = log_jac + pt.log(span) - pt.softplus(-w) - pt.softplus(w)
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
                if logged[c]:  # LogNormal(log mu, sd): Normal in log theta = v[c], times 1 / theta
                    log_lo = math.log(lo) if lo > 0 else -math.inf
                    prior = prior - 0.5 * ((v[c] - math.log(mu)) / sd) ** 2 - v[c]
                    prior = prior - _truncnorm_log_norm(math.log(mu), sd, log_lo, math.log(hi))
                else:
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
        if "cell" in d:
            tau = pm.HalfNormal("tau", sigma=TAU_PRIOR_SD)
            z_cell = pm.Normal("z_cell", 0.0, 1.0, shape=cell_slots(data))  # padded: cell_slots
            cell_effect = pm.Deterministic("cell_effect", tau * z_cell)
            mu = mu + cell_effect[d["cell"]]
        pm.StudentT("log_loss", nu=nu, mu=mu, sigma=sigma, observed=d["log_loss_obs"])
    return model


def student_t_loglik(y: np.ndarray, mu: np.ndarray, sigma: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """Pointwise log p(y_i | theta_s): Student-t(nu_s, mu_si, sigma_s) log density, (S, n).

    The same density as the model's likelihood (the tests compare it with PyMC's).
    """
    from scipy import stats

    return stats.t.logpdf(y[None, :], df=nu[:, None], loc=mu, scale=sigma[:, None])
