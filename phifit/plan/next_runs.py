"""The next runs to train: the K candidates that most narrow phi's interval per training FLOP.

Given the runs so far (a run table, the pilot) and candidate runs (a pool: a sweep spec's runs or
a CSV of planned runs with their costs), :func:`choose_next` picks K of them greedily.  Every
prediction is the asymptotic plan of :mod:`phifit.plan.modes`, evaluated at the pilot's Huber
fit and with the pilot's noise, its misfit carried (:func:`phifit.plan.inputs.pilot_noise`):
for the runs so far plus a set of picks, the cluster sandwich

    V = B^-1 [(E psi^2 - c) M + c sum_cells s_c s_c^T + E psi^2 s^2 P] B^-1,
    B = m (M + s^2 P),  M = sum_i j_i j_i^T,  s_c = sum_{i in cell c} j_i,

with j_i the gradient of run i's predicted log-loss in the law's internal coordinates, (m,
E psi^2, c) the Huber moments of the noise (per run sd sigma, per (budget, r) cell sd tau: the
misfit), s^2 = E psi^2 / m^2 the noise variance as the Huber fit feels it, and P = diag(1 /
h_k^2) a weak prior that the box gives (h_k half the width of coordinate k's search box),
entered as pseudo-runs of independent noise: with no runs V = P^-1, with many the prior
vanishes.  A pilot that does not yet identify phi thus still ranks the candidates (its width
is then about the box's).  The predicted width is 2 x 1.96 sqrt(V_phi,phi).

Greedy batch: at each of K steps every remaining candidate within the FLOP cap is scored by
the drop in the predicted se(phi) it brings, divided by its FLOPs (``objective="width"``), or
by the rise in the smaller Wald power against phi = 0 and phi = 1 per FLOP (``"power"``);
the best joins the batch and the sums are updated (rank-one, so a step over P candidates is one
batched 6 x 6 solve).  Candidates that change nothing stop the batch early, and the reason is
recorded.  Each pick says why: its (budget, r) cell (new to the table or not), where its size
sits on the isoFLOP curve (below the optimum, where the parameter term dominates and phi is
seen, or above it, where the data term dominates), and the width before and after.

Design rules (``rules=True``, the default; :mod:`phifit.plan.design_rules`): the batch must also be
one the cell bootstrap can measure: every r at every budget used, bracketed isoFLOP curves, no r in
a single (budget, r) cell.  The runs the runs so far need for that are picked first; then each
greedy step takes the best candidate whose own needs (the runs the rules then ask for) fit what is
left of the batch and the FLOP cap (a need no pool run can meet counts as not fitting), and those
needs after it (when no candidate's do, the best one and what fits of its needs).  Each forced pick
is the candidate meeting its need that narrows the width most per FLOP, and its ``why`` opens with
the rule that added it ("design rule bracket: brackets the isoFLOP curve of (budget, r) at its
smallest size").  A need the caps or the pool leave unmet is said in ``rule_notes``.  With
``rules=False`` the batch is the greedy one alone.

The asymptotic plan is calibrated against cell-bootstrap widths on real tables by
``benchmarks/plan_real_calibration.py``; the policy against the study's own order and simple
baselines by ``benchmarks/sequential_design.py``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..fitters.objective import DELTA
from ..law import DEFAULT_BOUNDS, THETA_NAMES, log_loss_and_jacobian, params_to_theta
from ..serialize import JsonIO, to_plain
from . import design_rules
from .inputs import Z95, NoiseModel, huber_moments
from .modes import wald_power

#: Columns a candidate pool must have (with ``budget`` for the cells and ``flops`` for the cost).
POOL_COLUMNS = ("budget", "r", "n_once", "n_rec", "tokens", "flops")
#: Columns that identify a run when the pool and the table share no ``run_id``.
MATCH_COLUMNS = ("r", "n_once", "n_rec", "tokens")
OBJECTIVES = ("width", "power")
REFERENCE_PARAMS_KEYS = ("E", "A", "alpha", "B", "beta", "phi")
#: Fewer residual degrees of freedom than this (runs minus the law's 6 parameters) leave the pilot's
#: noise unmeasured: the widths are then flagged.
MIN_NOISE_DOF = 10


def box_precision() -> np.ndarray:
    """P = diag(1 / h_k^2), h_k half the width of coordinate k's default box (internal
    coordinates): the weak prior that keeps a not-yet-identified law's sandwich finite."""
    half = []
    for name in THETA_NAMES:
        lo, hi = DEFAULT_BOUNDS[name]
        half.append((hi - lo) / 2)
    return np.diag(1.0 / np.square(half))


class _Sandwich:
    """Running sums M, sum_c s_c s_c^T and the cell sums s_c of a set of runs (module docstring)."""

    def __init__(self, noise: NoiseModel, delta: float):
        self.m, e_psi2, self.c = huber_moments(noise.per_run, noise.cell, delta)
        self.a = e_psi2 - self.c
        k = len(THETA_NAMES)
        s2 = e_psi2 / self.m**2
        self.prior_bread = self.m * s2 * box_precision()
        self.prior_meat = e_psi2 * s2 * box_precision()
        self.M = np.zeros((k, k))
        self.Q = np.zeros((k, k))
        self.S: dict[Any, np.ndarray] = {}

    def add(self, j: np.ndarray, cell: Any) -> None:
        s = self.S.get(cell, np.zeros_like(j))
        self.M += np.outer(j, j)
        self.Q += np.outer(s + j, s + j) - np.outer(s, s)
        self.S[cell] = s + j

    def variances(self, M: np.ndarray, Q: np.ndarray) -> np.ndarray:
        """V_phi,phi for stacked (..., k, k) sums."""
        bread = np.linalg.inv(self.m * M + self.prior_bread)
        meat = self.a * M + self.c * Q + self.prior_meat
        i = THETA_NAMES.index("phi")
        v = np.einsum("...j,...jk,...k->...", bread[..., i, :], meat, bread[..., :, i])
        return np.maximum(v, 0.0)

    def se(self) -> float:
        return float(math.sqrt(self.variances(self.M, self.Q)))

    def se_with(self, J: np.ndarray, cells: list[Any]) -> np.ndarray:
        """se(phi) after adding each candidate row of J (P, k) on its own."""
        S = np.stack([self.S.get(c, np.zeros(J.shape[1])) for c in cells])
        outer = np.einsum("pi,pj->pij", J, J)
        M = self.M + outer
        Q = self.Q + np.einsum("pi,pj->pij", S, J) + np.einsum("pi,pj->pij", J, S) + outer
        return np.sqrt(self.variances(M, Q))


def _jacobian(frame: pd.DataFrame, theta: np.ndarray) -> np.ndarray:
    return log_loss_and_jacobian(theta, design_rules.frame_design(frame))[1]


def _cells(frame: pd.DataFrame) -> list[tuple[float, int]]:
    return list(zip(frame["budget"].astype(float), frame["r"].astype(int)))


def curve_side(row: Mapping[str, Any], params: Mapping[str, float]) -> str:
    """Where a run sits on its isoFLOP curve under the law: at the compute-optimal size the
    parameter term's and the data term's elasticities balance, alpha A N_eff^-alpha = beta B
    D^-beta (N_eff = N_once + r^phi N_rec, D the tokens, FLOPs per token ~ size); a run with the
    parameter term's elasticity larger is smaller than the optimum ("below the optimum:
    parameter term dominates") and the other way round."""
    n_eff = row["n_once"] + float(row["r"]) ** params["phi"] * row["n_rec"]
    n_term = params["alpha"] * params["A"] * n_eff ** -params["alpha"]
    d_term = params["beta"] * params["B"] * float(row["tokens"]) ** -params["beta"]
    ratio = n_term / d_term
    if 0.8 <= ratio <= 1.25:
        return "near the optimum"
    return (
        "below the optimum (the parameter term dominates)"
        if ratio > 1
        else ("above the optimum (the data term dominates)")
    )


def _power(phi: float, se: float) -> float:
    return min(wald_power(phi, se), wald_power(phi - 1.0, se))


@dataclass(frozen=True)
class NextRuns(JsonIO):
    """The K runs :func:`choose_next` picked (module docstring).

    ``picks``: one record per chosen run, in the order chosen: its pool row (every column of
    the pool), ``cost`` (FLOPs), ``width_before``/``width_after`` (predicted 95% width of phi),
    ``cell`` ("new" or "seen"), ``side`` (on its isoFLOP curve) and ``why`` (a sentence).
    ``width_now`` / ``width_after``: the predicted width for the runs so far and with the picks;
    ``power_now`` / ``power_after``: Wald powers against phi = 0 and phi = 1; ``flops_now`` the
    runs' training FLOPs, ``flops_added`` the picks'; ``stopped``: why fewer than ``k`` were
    picked ("" when all were).  ``law`` and ``noise``: what the predictions assume.  ``rules``:
    whether the design rules chose with the greedy batch (a pick one of them forced has ``rule``,
    its name); ``rule_notes``: each rule the picks could not meet, and why (the caps, or a pool
    without the run).
    """

    k: int
    objective: str
    max_flops: float | None
    n_runs: int
    n_candidates: int
    law: dict[str, float]
    law_note: str
    noise: NoiseModel
    misfit_carried: bool
    width_now: float
    width_after: float
    power_now: dict[str, float]
    power_after: dict[str, float]
    flops_now: float
    flops_added: float
    picks: list[dict[str, Any]]
    stopped: str = ""
    warnings: list[str] = field(default_factory=list)
    rules: bool = False
    rule_notes: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """The picks, one row each in the order chosen: the pool row's columns, then ``cost``,
        ``width_before``, ``width_after``, ``cell``, ``side`` and ``why``
        (:attr:`frame` holds the pool columns alone, to train from)."""
        return pd.DataFrame(self.picks)

    def to_dict(self) -> dict[str, Any]:
        return to_plain({**self.__dict__, "noise": self.noise.to_dict()})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NextRuns:
        return cls(**{**data, "noise": NoiseModel(**data["noise"])})

    @property
    def frame(self) -> pd.DataFrame:
        """The chosen pool rows (their own columns), in the order chosen."""
        keep = [k for k in self.picks[0] if k not in PICK_FIELDS] if self.picks else list(POOL_COLUMNS)
        return pd.DataFrame([{k: p[k] for k in keep} for p in self.picks], columns=keep)

    def summary(self) -> str:
        lines = [f"WARNING: {w}" for w in self.warnings] + [
            "[[Next runs]]",
            f"runs so far  {self.n_runs} ({self.flops_now:.3g} training FLOPs); "
            f"candidates {self.n_candidates}"
            + (f"; cap {self.max_flops:.3g} FLOPs" if self.max_flops else ""),
            "law          " + ", ".join(f"{k} {v:.4g}" for k, v in self.law.items()) + f" ({self.law_note})",
            f"noise        log-loss sd {self.noise.per_run:.3g} per run + {self.noise.cell:.3g} "
            "per (budget, r) cell" + (" (misfit carried)" if self.misfit_carried else " (noise only)"),
            "objective    "
            + ("narrowest interval" if self.objective == "width" else "power against phi = 0 and 1")
            + " per training FLOP (asymptotic, greedy in batches of one)",
            "rules        "
            + (
                "every r at every budget used, bracketed isoFLOP curves, no lone (budget, r) cell"
                if self.rules
                else "off (the greedy batch alone)"
            ),
            "",
            f"{'#':>2} {'budget':>9} {'r':>3} {'N_unique':>10} {'FLOPs':>9} {'width':>15}  why",
        ]
        for i, p in enumerate(self.picks, 1):
            size = p["n_once"] + p["n_rec"]
            lines.append(
                f"{i:>2} {p['budget']:>9.3g} {int(p['r']):>3} {size:>10.4g} {p['cost']:>9.3g} "
                f"{p['width_before']:>6.3g} -> {p['width_after']:<6.3g}  {p['why']}"
            )
        lines += [
            "",
            f"predicted 95% width of phi: {self.width_now:.3g} now -> {self.width_after:.3g} with these "
            f"{len(self.picks)} runs (+{self.flops_added:.3g} FLOPs, "
            f"{100 * self.flops_added / self.flops_now if self.flops_now else math.inf:.0f}% "
            "of the runs so far)",
            "power (Wald) against phi = 0 / phi = 1: "
            f"{self.power_now['phi=0']:.2f} / {self.power_now['phi=1']:.2f} now -> "
            f"{self.power_after['phi=0']:.2f} / {self.power_after['phi=1']:.2f}",
            "these widths are asymptotic (the cluster sandwich): on the study's tables they ran at "
            "0.65-1.1 x the cell bootstrap's, on the CPU sweeps at 0.15 x (docs/planning.md); "
            "`phifit plan --pilot RUNS --design PICKS+RUNS` simulates the widths the report will show",
        ]
        if self.stopped:
            lines.append(f"stopped after {len(self.picks)} of {self.k}: {self.stopped}")
        lines += [f"design rule not met: {note}" for note in self.rule_notes]
        return "\n".join(lines)


#: Keys a pick adds to its pool row (``rule`` only on a pick a design rule forced).
PICK_FIELDS = ("cost", "width_before", "width_after", "cell", "side", "why", "rule")


def check_pool(pool: pd.DataFrame, source: str) -> pd.DataFrame:
    """The pool with its required columns numeric and finite, and positive FLOPs; a clear
    ``ValueError`` naming the file, the row and the column otherwise."""
    missing = [c for c in POOL_COLUMNS if c not in pool]
    if missing:
        raise ValueError(
            f"{source}: the candidate pool needs columns {', '.join(POOL_COLUMNS)}; "
            f"missing {', '.join(missing)}"
        )
    out = pool.reset_index(drop=True).copy()
    for col in POOL_COLUMNS:
        values = pd.to_numeric(out[col], errors="coerce")
        bad = np.flatnonzero(~np.isfinite(values.to_numpy(float)) | (values.to_numpy(float) < 0))
        if col in ("flops", "tokens", "budget", "r"):
            bad = np.union1d(bad, np.flatnonzero(values.to_numpy(float) <= 0))
        if len(bad):
            i = int(bad[0])
            raise ValueError(
                f"{source}: row {i + 2}, column {col!r}: expected a positive number, "
                f"got {pool[col].iloc[i]!r}"
            )
        out[col] = values.astype(float)
    out["r"] = out["r"].astype(int)
    return out


def untrained(pool: pd.DataFrame, runs_frame: pd.DataFrame) -> np.ndarray:
    """Mask of pool rows not already among the runs: by ``run_id`` when both have one, else by
    (r, n_once, n_rec, tokens[, seed]) equal to 1e-9 relative."""
    if "run_id" in pool and "run_id" in runs_frame:
        return ~pool["run_id"].astype(str).isin(set(runs_frame["run_id"].astype(str))).to_numpy()
    cols = list(MATCH_COLUMNS) + (["seed"] if "seed" in pool and "seed" in runs_frame else [])
    a = pool[cols].to_numpy(float)
    b = runs_frame[cols].to_numpy(float)
    if not len(b):
        return np.ones(len(a), bool)
    same = np.isclose(a[:, None, :], b[None, :, :], rtol=1e-9, atol=0).all(-1)
    return ~same.any(1)


def _wald_powers(phi: float, se: float) -> dict[str, float]:
    """Powers of the two-sided Wald test against phi = 0 and phi = 1 at the planned phi and se(phi)."""
    return {"phi=0": wald_power(phi, se), "phi=1": wald_power(phi - 1.0, se)}


def _planning_law(fit: Any, source: str) -> tuple[dict[str, float], str]:
    """The law the predictions assume: the fit's estimated parameters, with phi at the study's value when
    the runs do not estimate it, and a note saying which; ``ValueError`` when another parameter is
    missing."""
    params = {name: float(v) for name, v in fit.params.items() if v is not None}
    law_note = "the runs' Huber fit"
    if "phi" not in params:  # r = 1 runs alone (or a fit that fixed it away): the study's phi
        from ..study import REFERENCE_PARAMS

        params["phi"] = float(REFERENCE_PARAMS["phi"])
        law_note += f"; phi not estimated by these runs, planned at the study's {params['phi']:.3g}"
    missing = [k for k in REFERENCE_PARAMS_KEYS if k not in params]
    if missing:
        raise ValueError(f"{source}: the runs' fit leaves {', '.join(missing)} unestimated; cannot plan")
    return params, law_note


def _gains(
    sand: _Sandwich, J: np.ndarray, cells: list[Any], se: float, phi: float, objective: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate row of ``J``: se(phi) with it added, and its gain: the drop in se(phi)
    (``"width"``) or the rise in the smaller Wald power against phi = 0 and 1 (``"power"``)."""
    se_new = sand.se_with(J, cells)
    if objective == "width":
        gain = se - se_new
    else:
        gain = np.array([_power(phi, s) for s in se_new]) - _power(phi, se)
    return se_new, gain


def _pick_record(
    row: dict[str, Any],
    cost: float,
    before: float,
    after: float,
    new_cell: bool,
    side: str,
    need: design_rules.Need | None = None,
) -> dict[str, Any]:
    """A pick: its pool row plus :data:`PICK_FIELDS` (cost, predicted widths before and after, whether
    its cell is new, its side of the isoFLOP curve, and the sentence ``why``); a pick that the design
    rule ``need`` forced also has ``rule``, and its ``why`` opens with that rule."""
    if need is None:
        why = (
            f"{'a new' if new_cell else 'adds to its'} (budget, r) cell "
            f"{row['budget']:.3g}, r {int(row['r'])}"
            f"; {side}; narrows the width by {before - after:.3g} for {cost:.3g} FLOPs"
        )
    else:
        change = (
            f"narrows the width by {before - after:.3g}"
            if after <= before
            else (f"widens the width by {after - before:.3g}")
        )
        why = f"{need.why()}; {side}; {change} for {cost:.3g} FLOPs"
    record = {
        **row,
        "cost": float(cost),
        "width_before": before,
        "width_after": after,
        "cell": "new" if new_cell else "seen",
        "side": side,
        "why": why,
    }
    if need is not None:
        record["rule"] = need.rule
    return record


def _greedy_picks(
    sand: _Sandwich,
    cand: pd.DataFrame,
    J: np.ndarray,
    seen: set[Any],
    k: int,
    *,
    params: Mapping[str, float],
    se: float,
    max_flops: float | None,
    objective: str,
) -> tuple[list[dict[str, Any]], float, float, str]:
    """Greedy batch (module docstring): up to ``k`` candidates, each the one with the largest gain per
    FLOP within the cap; ``sand`` and ``seen`` take in every pick.  Returns the picks, se(phi) after
    them, their summed FLOPs and why fewer than ``k`` were picked ("" when all were)."""
    cells = _cells(cand)
    cost = cand["flops"].to_numpy(float)
    phi = params["phi"]
    picks: list[dict[str, Any]] = []
    left = np.ones(len(cand), bool)
    spent, stopped = 0.0, ""
    for _ in range(k):
        room = left & (cost <= (max_flops - spent if max_flops is not None else np.inf) * (1 + 1e-12))
        if not room.any():
            stopped = "no candidate left within the FLOP cap" if left.any() else "the pool is exhausted"
            break
        idx = np.flatnonzero(room)
        se_new, gain = _gains(sand, J[idx], [cells[i] for i in idx], se, phi, objective)
        score = gain / cost[idx]
        best = int(np.argmax(score))
        if not gain[best] > 1e-12 * max(se, 1e-300):
            stopped = (
                "no remaining candidate narrows the predicted interval"
                if objective == "width"
                else "no remaining candidate raises the power (it may already be 1)"
            )
            break
        i = int(idx[best])
        row = {key: (v.item() if hasattr(v, "item") else v) for key, v in cand.iloc[i].items()}
        before, after = 2 * Z95 * se, 2 * Z95 * float(se_new[best])
        picks.append(_pick_record(row, cost[i], before, after, cells[i] not in seen, curve_side(row, params)))
        sand.add(J[i], cells[i])
        seen.add(cells[i])
        se = float(se_new[best])
        spent += float(cost[i])
        left[i] = False
    return picks, se, spent, stopped


# ---- the greedy batch under the design rules (module docstring; phifit.plan.design_rules) ------------------
#: Why a need is left unmet when no pool row would meet it (any other reason is the caps').
POOL_LACKS = "the pool has no run that meets it"


@dataclass(frozen=True)
class _Candidates:
    """The untrained pool rows and what every step needs of them: their gradients ``J`` (internal
    coordinates), cells and FLOPs, the planning law, the batch size, the FLOP cap and the objective."""

    frame: pd.DataFrame
    J: np.ndarray
    cells: list[Any]
    cost: np.ndarray
    params: Mapping[str, float]
    k: int
    max_flops: float | None
    objective: str


@dataclass
class _Batch:
    """The picks so far and what they change: the sandwich, the candidates left, the pool rows' cells
    seen, the design (runs so far plus picks, for the rules), se(phi) and the FLOPs spent."""

    sand: _Sandwich
    design: pd.DataFrame
    left: np.ndarray
    seen: set[Any]
    se: float
    spent: float = 0.0
    picks: list[dict[str, Any]] = field(default_factory=list)

    def copy(self) -> _Batch:
        return _Batch(
            copy.deepcopy(self.sand),
            self.design,
            self.left.copy(),
            set(self.seen),
            self.se,
            self.spent,
            list(self.picks),
        )

    def room(self, cand: _Candidates) -> np.ndarray:
        """Mask of the candidates left that fit what is left of the FLOP cap (none once the batch is full)."""
        if len(self.picks) >= cand.k:
            return np.zeros(len(self.left), bool)
        cap = np.inf if cand.max_flops is None else cand.max_flops - self.spent
        return self.left & (cand.cost <= cap * (1 + 1e-12))


def _add(batch: _Batch, cand: _Candidates, i: int, se_new: float, need: design_rules.Need | None) -> None:
    """Add candidate ``i`` (se(phi) ``se_new`` with it) to the batch, recorded by :func:`_pick_record`."""
    row = {key: (v.item() if hasattr(v, "item") else v) for key, v in cand.frame.iloc[i].items()}
    before, after = 2 * Z95 * batch.se, 2 * Z95 * se_new
    side = curve_side(row, cand.params)
    batch.picks.append(
        _pick_record(row, cand.cost[i], before, after, cand.cells[i] not in batch.seen, side, need)
    )
    batch.sand.add(cand.J[i], cand.cells[i])
    batch.seen.add(cand.cells[i])
    batch.se = se_new
    batch.spent += float(cand.cost[i])
    batch.left[i] = False
    rules_row = cand.frame.iloc[[i]][list(design_rules.RULE_COLUMNS)]
    batch.design = pd.concat([batch.design, rules_row], ignore_index=True)


def _best(batch: _Batch, cand: _Candidates, mask: np.ndarray) -> tuple[int, float]:
    """The row of ``mask`` that narrows the width most per FLOP (or raises the power most, as the
    objective says), and se(phi) with it."""
    idx = np.flatnonzero(mask)
    se_new, gain = _gains(
        batch.sand, cand.J[idx], [cand.cells[i] for i in idx], batch.se, cand.params["phi"], cand.objective
    )
    best = int(np.argmax(gain / cand.cost[idx]))
    return int(idx[best]), float(se_new[best])


def _fund(
    batch: _Batch, cand: _Candidates, theta: np.ndarray, rs: Sequence[int], skip: set[Any]
) -> list[design_rules.Need]:
    """Add the runs the design still needs (:func:`phifit.plan.design_rules.unmet`, needs in ``skip``
    left aside), one need at a time, while they fit the batch and the cap.  Returns the needs left
    unmet: no pool run meets them, or none that does fits."""
    skipped = set(skip)
    unfunded: list[design_rules.Need] = []
    for _ in range(len(cand.frame) + 4 * len(design_rules.RULES) * max(len(rs), 1) + 10):
        needs = [n for n in design_rules.unmet(batch.design, theta, rs) if n.key not in skipped]
        if not needs:
            break
        need = needs[0]
        fits = design_rules.meets(need, batch.design, cand.frame) & batch.room(cand)
        if not fits.any():
            skipped.add(need.key)
            unfunded.append(need)
            continue
        i, se_new = _best(batch, cand, fits)
        _add(batch, cand, i, se_new, need)
    return unfunded


def _ruled_picks(
    batch: _Batch, cand: _Candidates, theta: np.ndarray, rs: Sequence[int]
) -> tuple[_Batch, str]:
    """The greedy batch under the design rules (module docstring): the runs so far's own needs first,
    then at each step the best candidate (gain per FLOP) whose needs can all be met within the batch and
    the cap, with them (a candidate that leaves a need of its own unmet, even one no pool run could
    meet, waits behind every candidate that does not).  Returns the batch and why fewer than ``k`` were
    picked ("" when all were)."""
    skip = {need.key for need in _fund(batch, cand, theta, rs, set())}
    stopped = ""
    while len(batch.picks) < cand.k:
        room = batch.room(cand)
        if not room.any():
            stopped = "no candidate left within the FLOP cap" if batch.left.any() else "the pool is exhausted"
            break
        idx = np.flatnonzero(room)
        se_new, gain = _gains(
            batch.sand,
            cand.J[idx],
            [cand.cells[i] for i in idx],
            batch.se,
            cand.params["phi"],
            cand.objective,
        )
        useful = gain > 1e-12 * max(batch.se, 1e-300)
        if not useful.any():
            stopped = (
                "no remaining candidate narrows the predicted interval"
                if cand.objective == "width"
                else "no remaining candidate raises the power (it may already be 1)"
            )
            break
        order = np.argsort(-(gain / cand.cost[idx]), kind="stable")
        order = [int(o) for o in order if useful[o]]
        chosen = None
        for o in order:
            trial = batch.copy()
            _add(trial, cand, int(idx[o]), float(se_new[o]), None)
            if not _fund(trial, cand, theta, rs, skip):
                chosen = trial
                break
        if chosen is None:  # no candidate's needs fit: the best one, and what fits of its needs
            chosen = batch.copy()
            _add(chosen, cand, int(idx[order[0]]), float(se_new[order[0]]), None)
            _fund(chosen, cand, theta, rs, skip)
        batch = chosen
    return batch, stopped


def _rule_notes(batch: _Batch, cand: _Candidates, theta: np.ndarray, rs: Sequence[int]) -> list[str]:
    """One note per need the runs so far plus the picks leave unmet, with why: the pool has no run
    that meets it, the batch of ``k`` is full, or no such run fits what is left of the FLOP cap."""
    notes = []
    for need in design_rules.unmet(batch.design, theta, rs):
        meets = design_rules.meets(need, batch.design, cand.frame) & batch.left
        if not meets.any():
            why = POOL_LACKS
        elif len(batch.picks) >= cand.k:
            why = f"the batch of {cand.k} runs is full"
        else:
            why = "no run that meets it fits what is left of the FLOP cap"
        notes.append(f"{need.text()}: {why}")
    return notes


def _noise_warnings(n_runs: int, n_params: int, noise: NoiseModel) -> list[str]:
    """A warning when the runs leave fewer than :data:`MIN_NOISE_DOF` residual degrees of freedom
    (runs minus parameters): their noise, and so every predicted width, is then a guess."""
    dof = n_runs - n_params
    if dof >= MIN_NOISE_DOF:
        return []
    return [
        f"the runs so far leave {dof} residual degree(s) of freedom for 6 parameters: their noise "
        f"({noise.per_run:.2g} per run) is not measured, and every width below is only as small as that "
        "guess; plan from a larger pilot, or give the noise of a comparable sweep (--cell-noise)"
    ]


def choose_next(
    runs: Any,
    pool: pd.DataFrame,
    k: int,
    *,
    fit: Any = None,
    max_flops: float | None = None,
    objective: str = "width",
    misfit: bool = True,
    cell_noise: float | None = None,
    pool_source: str = "the pool",
    delta: float = DELTA,
    recipe: str | None = None,
    rules: bool = True,
) -> NextRuns:
    """The ``k`` pool runs that most narrow phi's predicted interval per FLOP (module docstring).

    ``runs``: the runs so far (a run table with a ``budget`` column); ``fit``: their Huber fit
    (fitted here when None); ``pool``: candidates with columns :data:`POOL_COLUMNS` (rows already
    among the runs are left out); ``max_flops``: cap on the picks' summed FLOPs; ``misfit``,
    ``cell_noise``: the noise, as ``phifit plan --pilot`` takes it.  ``recipe``: the recipe of a table whose
    ``variant`` column holds several (default the one ``fit`` was fitted to, else "baseline";
    :func:`phifit.recipes.pairing.recipe_runs`).  ``rules``: apply the design rules
    (:mod:`phifit.plan.design_rules`; module docstring); False leaves the greedy batch alone."""
    from ..fitters.huber import fit_huber
    from .inputs import design_from_table, pilot_noise

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    from ..runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=fit)  # one recipe of a mixed table, as --variant picks it
    fit = fit if fit is not None else fit_huber(runs)
    noise, carried = pilot_noise(runs, fit, cell_noise=cell_noise, misfit=misfit)
    params, law_note = _planning_law(fit, runs.source)
    theta = params_to_theta(params)
    now = design_from_table(runs).frame
    pool = check_pool(pool, pool_source)
    fresh = untrained(pool, runs.frame.assign(**{c: now[c] for c in MATCH_COLUMNS}))
    cand = pool[fresh].reset_index(drop=True)
    sand = _Sandwich(noise, delta)
    for j, cell in zip(_jacobian(now, theta), _cells(now)):
        sand.add(j, cell)
    J = _jacobian(cand, theta) if len(cand) else np.zeros((0, len(THETA_NAMES)))
    se_now = sand.se()
    notes: list[str] = []
    if rules:
        context = _Candidates(
            cand, J, _cells(cand), cand["flops"].to_numpy(float), params, k, max_flops, objective
        )
        start = _Batch(
            sand,
            now[list(design_rules.RULE_COLUMNS)].reset_index(drop=True),
            np.ones(len(cand), bool),
            set(_cells(now)),
            se_now,
        )
        rs = design_rules.rule_rs(now, pool)
        batch, stopped = _ruled_picks(start, context, theta, rs)
        picks, se, spent = batch.picks, batch.se, batch.spent
        notes = _rule_notes(batch, context, theta, rs)
    else:
        picks, se, spent, stopped = _greedy_picks(
            sand,
            cand,
            J,
            set(_cells(now)),
            k,
            params=params,
            se=se_now,
            max_flops=max_flops,
            objective=objective,
        )
    return NextRuns(
        warnings=_noise_warnings(len(now), len(params), noise),
        k=k,
        objective=objective,
        max_flops=max_flops,
        n_runs=len(now),
        n_candidates=int(len(cand)),
        law=params,
        law_note=law_note,
        noise=noise,
        misfit_carried=carried is not None,
        width_now=2 * Z95 * se_now,
        width_after=2 * Z95 * se,
        power_now=_wald_powers(params["phi"], se_now),
        power_after=_wald_powers(params["phi"], se),
        flops_now=float(now["flops"].sum()),
        flops_added=spent,
        picks=picks,
        stopped=stopped,
        rules=rules,
        rule_notes=notes,
    )
