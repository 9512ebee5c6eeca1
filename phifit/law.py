"""The joint iso-depth scaling law of looped language models, in one place.

    L(N_once, N_rec, D, r) = E + A * N_eff**(-alpha) + B * D**(-beta),
    N_eff = N_once + r**phi * N_rec

(Schwethelm, Rueckert, Kaissis 2026, arXiv 2604.21106, Eq. 3.)  Every fitter,
simulator, derived quantity and plot in phifit evaluates the law through this
module.

Fits work in log space with the log-sum-exp parameterisation of Hoffmann et al.
(2022), with a = log A, b = log B, e = log E:

    log L = LSE(a - alpha * log N_eff,  b - beta * log D,  e)
    log N_eff = logaddexp(log N_once, phi * log r + log N_rec)

The internal parameter vector ``theta`` is ordered as :data:`THETA_NAMES`:
``(a, alpha, b, beta, e, phi)``.  Users see the natural parameters
:data:`PARAM_NAMES` ``(E, A, alpha, B, beta, phi)``.  A :class:`LawSpec` says
which of them vary and which are held fixed (phi = 0, phi = 1, or anything).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from .study import REFERENCE_PARAMS  # the study's joint fit, re-exported for the law's users

#: Natural parameter names, in the order results print them.
PARAM_NAMES: tuple[str, ...] = ("E", "A", "alpha", "B", "beta", "phi")
#: Internal (log-space) parameter names, in the order of ``theta``.
THETA_NAMES: tuple[str, ...] = ("a", "alpha", "b", "beta", "e", "phi")
#: Natural name of each internal coordinate.
THETA_TO_PARAM: Mapping[str, str] = MappingProxyType(
    {"a": "A", "alpha": "alpha", "b": "B", "beta": "beta", "e": "E", "phi": "phi"}
)
_LOG_COORDS = frozenset({"a", "b", "e"})
#: How an internal coordinate is printed next to the natural parameters: "log A", not "a".
COORD_LABELS: Mapping[str, str] = MappingProxyType(
    {"a": "log A", "alpha": "alpha", "b": "log B", "beta": "beta", "e": "log E", "phi": "phi"}
)

#: The reference study's box (paper-notes section 1.2), in internal coordinates.
DEFAULT_BOUNDS: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        "a": (-5.0, 35.0),
        "alpha": (0.0, 2.5),
        "b": (-5.0, 35.0),
        "beta": (0.0, 2.5),
        "e": (-3.0, 2.0),
        "phi": (-3.0, 3.0),
    }
)


def params_to_theta(params: Mapping[str, float]) -> np.ndarray:
    """Natural parameters {E, A, alpha, B, beta, phi} -> theta (a, alpha, b, beta, e, phi)."""
    missing = [p for p in PARAM_NAMES if p not in params or params[p] is None]
    if missing:
        raise ValueError(f"missing parameter(s): {', '.join(missing)}")
    for name in ("E", "A", "B"):
        if not params[name] > 0:
            raise ValueError(f"{name} must be > 0 (it is a log-space parameter), got {params[name]}")
    return np.array(
        [
            math.log(params["A"]),
            float(params["alpha"]),
            math.log(params["B"]),
            float(params["beta"]),
            math.log(params["E"]),
            float(params["phi"]),
        ]
    )


def theta_to_params(theta: np.ndarray) -> dict[str, float]:
    """theta (a, alpha, b, beta, e, phi) -> natural parameters {E, A, alpha, B, beta, phi}."""
    a, alpha, b, beta, e, phi = (float(v) for v in theta)
    return {"E": math.exp(e), "A": math.exp(a), "alpha": alpha, "B": math.exp(b), "beta": beta, "phi": phi}


def to_internal(name: str, value: float) -> tuple[str, float]:
    """Map a natural parameter (``E=1.7``) to its internal coordinate (``e=log 1.7``)."""
    inverse = {v: k for k, v in THETA_TO_PARAM.items()}
    if name not in inverse:
        raise ValueError(f"unknown parameter {name!r}; expected one of {', '.join(PARAM_NAMES)}")
    coord = inverse[name]
    if coord in _LOG_COORDS:
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")
        return coord, math.log(value)
    return coord, float(value)


@dataclass(frozen=True)
class LawSpec:
    """Which parameters of the law vary in a fit, their box, and the fixed values.

    ``fixed`` maps natural parameter names to values, e.g. ``{"phi": 0.0}`` for the
    restricted "a recurrence is worth nothing" law.  ``bounds`` are in internal
    coordinates (a, b, e are logs); the defaults are the reference study's box.
    """

    fixed: Mapping[str, float] = field(default_factory=dict)
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_BOUNDS))

    def __post_init__(self) -> None:
        fixed = {}
        for name, value in dict(self.fixed).items():
            to_internal(name, value)  # validates name and value
            fixed[name] = float(value)
        object.__setattr__(self, "fixed", MappingProxyType(fixed))
        bounds = dict(DEFAULT_BOUNDS)
        for coord, (lo, hi) in dict(self.bounds).items():
            if coord not in DEFAULT_BOUNDS:
                raise ValueError(f"unknown bound {coord!r}; expected one of {', '.join(THETA_NAMES)}")
            if not lo < hi:
                raise ValueError(f"bound for {coord} must have lower < upper, got [{lo}, {hi}]")
            bounds[coord] = (float(lo), float(hi))
        object.__setattr__(self, "bounds", MappingProxyType(bounds))

    def __reduce__(self):
        """Pickle as plain dicts (mapping proxies do not pickle), for process pools."""
        return (LawSpec, (dict(self.fixed), dict(self.bounds)))

    @property
    def free_mask(self) -> np.ndarray:
        """Boolean mask over theta: True where the coordinate is fitted."""
        return np.array([THETA_TO_PARAM[c] not in self.fixed for c in THETA_NAMES])

    @property
    def free_names(self) -> tuple[str, ...]:
        """Natural names of the fitted parameters."""
        return tuple(THETA_TO_PARAM[c] for c, f in zip(THETA_NAMES, self.free_mask) if f)

    @property
    def lower(self) -> np.ndarray:
        """Lower bounds of the free coordinates."""
        return np.array([self.bounds[c][0] for c in self._free_coords])

    @property
    def upper(self) -> np.ndarray:
        """Upper bounds of the free coordinates."""
        return np.array([self.bounds[c][1] for c in self._free_coords])

    @property
    def _free_coords(self) -> list[str]:
        return [c for c, f in zip(THETA_NAMES, self.free_mask) if f]

    def full_theta(self, free: np.ndarray) -> np.ndarray:
        """Complete theta from free coordinates; ``free`` may be (k,) or (S, k)."""
        mask, fixed_at, fixed_values = self._layout
        if not len(fixed_at):  # every coordinate free: theta is a copy of them
            theta = np.array(free, dtype=float)
            if theta.shape[-1:] != (len(THETA_NAMES),):
                n = theta.shape[-1] if theta.ndim else 0
                raise ValueError(f"got {n} free coordinates; all {len(THETA_NAMES)} parameters are free")
            return theta
        free = np.asarray(free, dtype=float)
        theta = np.empty(free.shape[:-1] + (len(THETA_NAMES),))
        theta[..., mask] = free
        theta[..., fixed_at] = fixed_values
        return theta

    @cached_property
    def _layout(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(free mask, positions of the fixed coordinates, their internal values), computed once:
        :meth:`full_theta` runs on every evaluation of the refit engine."""
        names = [THETA_TO_PARAM[c] for c in THETA_NAMES]
        fixed_at = np.array([i for i, name in enumerate(names) if name in self.fixed], dtype=int)
        values = np.array([to_internal(names[i], self.fixed[names[i]])[1] for i in fixed_at])
        return self.free_mask, fixed_at, values

    def label(self) -> str:
        """Short label such as ``"free"`` or ``"phi=0"``."""
        if not self.fixed:
            return "free"
        return ",".join(f"{k}={v:g}" for k, v in self.fixed.items())


@dataclass(frozen=True)
class Design:
    """The covariates of a set of runs, in log space, ready for the law.

    ``log_n_once`` may be ``-inf`` (a fully looped model has N_once = 0) and
    ``log_n_rec`` is ``-inf`` for non-looped runs (N_rec = 0).
    """

    log_n_once: np.ndarray
    log_n_rec: np.ndarray
    log_r: np.ndarray
    log_tokens: np.ndarray

    @classmethod
    def from_arrays(cls, r, n_once, n_rec, tokens) -> Design:
        """Build a design from raw counts (r >= 1, N_once >= 0, N_rec >= 0, D > 0)."""
        with np.errstate(divide="ignore"):
            return cls(
                log_n_once=np.log(np.asarray(n_once, dtype=float)),
                log_n_rec=np.log(np.asarray(n_rec, dtype=float)),
                log_r=np.log(np.asarray(r, dtype=float)),
                log_tokens=np.log(np.asarray(tokens, dtype=float)),
            )

    def __len__(self) -> int:
        return len(self.log_tokens)

    def subset(self, index) -> Design:
        """Rows selected by a boolean mask or integer index array."""
        return Design(
            self.log_n_once[index], self.log_n_rec[index], self.log_r[index], self.log_tokens[index]
        )


def log_n_eff(phi, design: Design) -> np.ndarray:
    """log N_eff = logaddexp(log N_once, phi * log r + log N_rec); phi broadcasts as (S, 1)."""
    return np.logaddexp(design.log_n_once, np.asarray(phi)[..., None] * design.log_r + design.log_n_rec)


def lse_log_loss(
    theta: Sequence[Any], design: Sequence[Any], *, logaddexp: Callable[[Any, Any], Any] = np.logaddexp
) -> Any:
    """The law itself: log L = LSE(a - alpha log N_eff, b - beta log D, e).

    ``theta`` is the sequence (a, alpha, b, beta, e, phi) and ``design`` the sequence
    (log N_once, log N_rec, log r, log D).  They may be NumPy arrays (broadcasting) or
    PyTensor tensors with the matching ``logaddexp`` (``pytensor.tensor.logaddexp``):
    the Bayesian model evaluates this same function, so the formula exists once.
    log N_eff = logaddexp(log N_once, phi log r + log N_rec).
    """
    a, alpha, b, beta, e, phi = theta
    log_n_once, log_n_rec, log_r, log_tokens = design
    log_n_eff = logaddexp(log_n_once, phi * log_r + log_n_rec)
    return logaddexp(logaddexp(a - alpha * log_n_eff, b - beta * log_tokens), e)


def log_loss(theta: np.ndarray, design: Design) -> np.ndarray:
    """Predicted log L for a design; ``theta`` is (6,) or (S, 6), the result (n,) or (S, n)."""
    theta = np.asarray(theta, dtype=float)
    return lse_log_loss(
        [theta[..., i, None] for i in range(6)],
        (design.log_n_once, design.log_n_rec, design.log_r, design.log_tokens),
    )


def loss(theta: np.ndarray, design: Design) -> np.ndarray:
    """Predicted loss in nats, L = E + A N_eff^-alpha + B D^-beta."""
    return np.exp(log_loss(theta, design))


def vanished(sq_norms: np.ndarray) -> np.ndarray:
    """Which Jacobian columns have vanished: squared norms (k,) (or an information matrix's
    diagonal) at rounding level beside the largest, <= k eps max.  The loss does not move with
    such a coordinate at all (log A at -5 with alpha at 2.5: A N^-alpha ~ 1e-20 of the loss);
    all of them when no norm is finite and positive."""
    sq_norms = np.asarray(sq_norms, dtype=float)
    if not np.all(np.isfinite(sq_norms)) or sq_norms.max(initial=0.0) <= 0:
        return np.ones(sq_norms.shape, dtype=bool)
    return sq_norms <= np.finfo(float).eps * len(sq_norms) * sq_norms.max()


def log_loss_and_jacobian(theta: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray]:
    """Predicted log L and its analytic Jacobian with respect to theta.

    With p = softmax(u) over the three terms and w = r^phi N_rec / N_eff,

        d/da = p1,  d/dalpha = -p1 log N_eff,  d/db = p2,  d/dbeta = -p2 log D,
        d/de = p3,  d/dphi = -alpha p1 w log r.

    Returns (log L of shape (..., n), J of shape (..., n, 6)).
    """
    out, jac_t = log_loss_and_jacobian_t(theta, design)
    return out, np.swapaxes(jac_t, -1, -2)


def log_loss_and_jacobian_t(theta: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`log_loss_and_jacobian`, with the Jacobian transposed: shape (..., 6, n).

    The transposed layout keeps each parameter's row contiguous, which makes the
    batched normal equations J^T W J of the vectorised fitters fast.
    """
    out, parts = log_loss_parts(theta, design)
    return out, jacobian_t_from_parts(parts, design)


def log_loss_parts(theta: np.ndarray, design: Design) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The first half of :func:`log_loss_and_jacobian_t`: log L and what its Jacobian needs.

    Returns (log L of shape (..., n), parts); :func:`jacobian_t_from_parts` turns parts (or
    the same rows of every part, selected along the first axis) into the transposed
    Jacobian.  Together they do exactly the arithmetic of :func:`log_loss_and_jacobian_t`,
    so a solver that only needs the Jacobian where it accepts a step can skip it elsewhere.
    """
    theta = np.asarray(theta, dtype=float)
    a, alpha, b, beta, e, phi = (theta[..., i, None] for i in range(6))
    rec = phi * design.log_r + design.log_n_rec
    lne = np.logaddexp(design.log_n_once, rec)
    u1 = a - alpha * lne
    u2 = b - beta * design.log_tokens
    m = np.maximum(np.maximum(u1, u2), e)
    e1, e2, e3 = np.exp(u1 - m), np.exp(u2 - m), np.exp(e - m)
    total = e1 + e2 + e3
    out = m + np.log(total)
    return out, (alpha, rec, lne, e1, e2, e3, total)


def jacobian_t_from_parts(
    parts: tuple[np.ndarray, ...], design: Design, out: np.ndarray | None = None
) -> np.ndarray:
    """The second half of :func:`log_loss_and_jacobian_t`: the (..., 6, n) Jacobian.

    With p = softmax(u) and w = r^phi N_rec / N_eff (see :func:`log_loss_and_jacobian`).
    ``out``: an array of that shape to write it into (a solver reusing one buffer).
    """
    alpha, rec, lne, e1, e2, e3, total = parts
    with np.errstate(over="ignore"):
        w = 1.0 / (1.0 + np.exp(design.log_n_once - rec))  # r^phi N_rec / N_eff
    jac = np.empty(total.shape[:-1] + (6, total.shape[-1])) if out is None else out
    p1 = np.divide(e1, total, out=jac[..., 0, :])
    np.multiply(p1, -lne, out=jac[..., 1, :])
    p2 = np.divide(e2, total, out=jac[..., 2, :])
    np.multiply(p2, -design.log_tokens, out=jac[..., 3, :])
    np.divide(e3, total, out=jac[..., 4, :])
    np.multiply(-alpha * p1 * w, design.log_r, out=jac[..., 5, :])
    return jac


def weighted_hessian_from_parts(
    parts: tuple[np.ndarray, ...], design: Design, jac_t: np.ndarray, coef: np.ndarray
) -> np.ndarray:
    """sum_i c_i d^2 log L_i / d theta^2: the second derivatives of the predicted log-losses,
    weighted by ``coef`` (m, n) and summed over runs; returns (m, 6, 6).

    With log L = log(e^u1 + e^u2 + e^u3), u1 = a - alpha log N_eff, u2 = b - beta log D,
    u3 = e, p = softmax(u) and g_j = grad u_j,

        d^2 log L = sum_j p_j (g_j g_j^T + d^2 u_j) - J J^T,   J = sum_j p_j g_j,

    where d^2 u1 has d^2/dalpha dphi = -w log r and d^2/dphi^2 = -alpha w (1 - w) (log r)^2
    (w = r^phi N_rec / N_eff) and d^2 u2 = d^2 u3 = 0.  ``parts`` and ``jac_t`` (m, 6, n) as
    :func:`log_loss_parts` and :func:`jacobian_t_from_parts` give them.
    """
    alpha, rec, lne, e1, e2, e3, total = parts
    m, n = total.shape
    with np.errstate(over="ignore"):
        w = 1.0 / (1.0 + np.exp(design.log_n_once - rec))
    c1, c2, c3 = coef * e1 / total, coef * e2 / total, coef * e3 / total
    g1 = np.zeros((m, 3, n))  # grad u1 over (a, alpha, phi)
    g1[:, 0], g1[:, 1], g1[:, 2] = 1.0, -lne, -alpha * w * design.log_r
    h1 = np.matmul(g1 * c1[:, None, :], np.swapaxes(g1, 1, 2))
    g2 = np.zeros((m, 2, n))  # grad u2 over (b, beta)
    g2[:, 0], g2[:, 1] = 1.0, -design.log_tokens
    h2 = np.matmul(g2 * c2[:, None, :], np.swapaxes(g2, 1, 2))
    hess = -np.matmul(jac_t * coef[:, None, :], np.swapaxes(jac_t, 1, 2))
    one = np.ix_(np.arange(m), (0, 1, 5), (0, 1, 5))
    hess[one] += h1
    hess[np.ix_(np.arange(m), (2, 3), (2, 3))] += h2
    hess[:, 4, 4] += c3.sum(-1)
    cross = -(c1 * w * design.log_r).sum(-1)
    hess[:, 1, 5] += cross
    hess[:, 5, 1] += cross
    hess[:, 5, 5] -= (c1 * alpha * w * (1.0 - w) * design.log_r**2).sum(-1)
    return hess


@dataclass(frozen=True)
class JointLaw:
    """A fully specified joint law, L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta.

    Plain value object: holds the six natural parameters and evaluates the law.
    """

    E: float
    A: float
    alpha: float
    B: float
    beta: float
    phi: float

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> JointLaw:
        return cls(**{k: float(params[k]) for k in PARAM_NAMES})

    @classmethod
    def reference(cls) -> JointLaw:
        """The reference study's joint fit (phi = 0.459)."""
        return cls.from_params(REFERENCE_PARAMS)

    @property
    def params(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in PARAM_NAMES}

    @property
    def theta(self) -> np.ndarray:
        return params_to_theta(self.params)

    def n_eff(self, *, r, n_once, n_rec) -> np.ndarray:
        """Effective non-looped size N_eff = N_once + r^phi N_rec (arguments by name: r, N_once and
        N_rec are all numbers, and their order is easy to confuse)."""
        return np.asarray(n_once, float) + np.asarray(r, float) ** self.phi * np.asarray(n_rec, float)

    def loss(self, *, r, n_once, n_rec, tokens) -> np.ndarray:
        """Predicted loss (nats) for the given runs: ``law.loss(r=4, n_once=2e8, n_rec=2e8,
        tokens=2e10)``.  The arguments are keyword-only: four numbers in a row are easy to pass
        in the formula's order (N_once, N_rec, D, r), which would give a loss without a check."""
        return loss(self.theta, Design.from_arrays(r, n_once, n_rec, tokens))
