"""Does phi rest on a few runs, or on one part of the data?  Influence and consistency.

Both refit the fit's OWN objective in its own box (:func:`phifit.fitters.objective.refit_settings`:
Huber with the fit's delta, or least squares) through the refit engine, never a private
optimiser.  Leaving runs out is weighting them 0 in the summed objective, so every refit
is a row of :func:`phifit.fitters.refit.refit_weighted`: warm-started from the full-data
optimum, plus spread starts, best end point kept, unconverged rows polished.  A Bayesian
fit has no objective to refit: both functions raise ``ValueError`` for it.

Influence (:func:`influence`)
    delta_i = phi_hat(without run i) - phi_hat, and the same for each (budget, r) cell
    (the study's bootstrap unit).  With runs that are exchangeable these centre on 0.

Consistency (:func:`consistency`)
    phi refitted on the lower and upper halves of the budgets (the study: 0.44 on
    C <= 2.15e18, 0.49 on C >= 4.64e18) and on each pair {1, r}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import defaults
from ..fitters.common import goodness_of_fit
from ..fitters.objective import refit_settings
from ..fitters.refit import identifiable_rows, refit_weighted
from ..law import PARAM_NAMES, log_loss, theta_to_params
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from ..serialize import JsonIO, to_plain
from .residuals import budget_labels, check_fit, scalar, sorted_unique

__all__ = ["Influence", "influence", "Consistency", "consistency"]


def _refit_spec(fit: FitResult, what: str):
    """(spec, delta) of the fit's own objective; ValueError when phi is not free or there is none."""
    if fit.phi is None:
        raise ValueError(f"{what}: phi is not identified in this fit (no looped runs or one r)")
    if "phi" in fit.fixed:
        raise ValueError(
            f"{what}: phi is fixed at {fit.fixed['phi']:g} in this fit; pass the fit with phi free"
        )
    try:
        return refit_settings(fit)
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from err


def _left_out_thetas(
    runs: RunTable, fit: FitResult, keep: np.ndarray, *, n_spread: int, seed: int, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Full theta refitted on the runs of each row of ``keep`` (m, n); NaN rows where the
    kept runs do not identify phi or the refit did not converge.  Returns (thetas, ok)."""
    spec, delta = _refit_spec(fit, what)
    weights = keep.astype(float)
    ident = identifiable_rows(runs, weights)
    thetas = np.full((len(keep), 6), np.nan)
    ok = np.zeros(len(keep), dtype=bool)
    rows = np.flatnonzero(ident)
    if len(rows):
        out = refit_weighted(
            runs, spec, weights[rows], fit.theta[spec.free_mask], delta=delta, n_spread=n_spread, seed=seed
        )
        good = out["converged"] & np.isfinite(out["objective"])
        thetas[rows[good]] = spec.full_theta(out["x"][good])
        ok[rows[good]] = True
    return thetas, ok


# ------------------------------------------------------------------------- influence
@dataclass(frozen=True)
class Influence(JsonIO):
    """Change in phi when one run, or one (budget, r) cell, is left out.

    ``runs``: per run {run_id, r, budget, phi, delta_phi} in table order;
    ``cells``: per cell {cell, budget, r, n, phi, delta_phi}, or None without a budget
    column; ``top``: the ``n_top`` runs with the largest |delta_phi|; ``method``: how the
    refits were made; ``notes``: what was skipped or failed.
    """

    phi_hat: float
    runs: list[dict[str, Any]]
    cells: list[dict[str, Any]] | None
    top: list[dict[str, Any]]
    method: str
    notes: list[str]

    @property
    def max_abs_delta(self) -> float:
        """max |delta_phi| over runs (refits that failed are ignored)."""
        values = [abs(x["delta_phi"]) for x in self.runs if math.isfinite(x["delta_phi"])]
        return max(values) if values else float("nan")

    def to_frame(self) -> pd.DataFrame:
        """One row per run, in table order: ``run_id``, ``r``, ``budget``, ``phi`` (refitted without
        the run) and ``delta_phi`` (that phi minus ``phi_hat``); the cells are in :attr:`cells`."""
        return pd.DataFrame(self.runs)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)

    def summary(self) -> str:
        lines = [f"[[Influence on phi = {self.phi_hat:.4f}]]", "    runs that move phi most:"]
        for x in self.top:
            lines.append(
                f"      {x['run_id']:<28} r={x['r']:<3} phi_(-i) = {x['phi']:.4f}  "
                f"delta = {x['delta_phi']:+.4f}"
            )
        if self.cells:
            worst = sorted(
                (c for c in self.cells if math.isfinite(c["delta_phi"])), key=lambda c: -abs(c["delta_phi"])
            )[:3]
            lines.append("    cells that move phi most:")
            for c in worst:
                lines.append(
                    f"      {c['cell']:<28} n={c['n']:<3} phi = {c['phi']:.4f}  delta = {c['delta_phi']:+.4f}"
                )
        lines += [f"    note: {n}" for n in self.notes]
        return "\n".join(lines)


def influence(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    n_top: int = 5,
    n_spread: int = 4,
    seed: int = defaults.SEED,
) -> Influence:
    """Leave-one-run-out and leave-one-cell-out change in phi, refitting the fit's own objective.

    delta_i = phi_hat(without run i) - phi_hat.  Cells are (budget, r) blocks, the
    study's bootstrap unit; without a ``budget`` column only runs are left out.  Each
    refit starts from the full-data optimum and from ``n_spread`` spread starts.
    """
    runs = as_runs(runs)
    check_fit(runs, fit)
    phi_hat = float(fit.theta[5])
    n = len(runs)
    ids, r = runs.run_ids, runs.r.astype(int)
    budgets = budget_labels(runs)
    notes: list[str] = []
    out_masks = [np.eye(n, dtype=bool)[i] for i in range(n)]
    cell_keys: list[tuple[Any, int]] = []
    if budgets is None:
        notes.append("no 'budget' column: leave-one-cell-out needs (budget, r) cells; skipped")
    else:
        for b in sorted_unique(budgets):
            for value in np.unique(r):
                mask = (budgets == b) & (r == value)
                if mask.any():
                    cell_keys.append((b, int(value)))
                    out_masks.append(mask)
    left_out = np.array(out_masks)
    thetas, ok = _left_out_thetas(runs, fit, ~left_out, n_spread=n_spread, seed=seed, what="influence")
    phis = thetas[:, 5]
    failed = int((identifiable_rows(runs, (~left_out).astype(float)) & ~ok).sum())
    if failed:
        notes.append(f"{failed} leave-out refit(s) did not converge; their phi is reported as null")
    per_run = [
        {
            "run_id": ids[i],
            "r": int(r[i]),
            "budget": None if budgets is None else scalar(budgets[i]),
            "phi": float(phis[i]),
            "delta_phi": float(phis[i] - phi_hat),
        }
        for i in range(n)
    ]
    cells = None
    if budgets is not None:
        cells = []
        for k, (b, value) in enumerate(cell_keys):
            phi = float(phis[n + k])
            label = f"C={b:.3g}, r={value}" if isinstance(scalar(b), (int, float)) else f"{b}, r={value}"
            cells.append(
                {
                    "cell": label,
                    "budget": scalar(b),
                    "r": value,
                    "n": int(out_masks[n + k].sum()),
                    "phi": phi,
                    "delta_phi": phi - phi_hat,
                }
            )
    finite = [x for x in per_run if math.isfinite(x["delta_phi"])]
    top = sorted(finite, key=lambda x: -abs(x["delta_phi"]))[:n_top]
    loss = "Huber" if fit.loss == "huber" else "least-squares"
    return Influence(
        phi_hat=phi_hat,
        runs=per_run,
        cells=cells,
        top=top,
        method=f"{loss} refits in the fit's box, warm-started from the full-data optimum plus "
        f"{n_spread} spread starts (refit engine, 0/1-weighted tables)",
        notes=notes,
    )


# ----------------------------------------------------------------------- consistency
@dataclass(frozen=True)
class Consistency(JsonIO):
    """phi refitted on subsets: budget halves and pairs {1, r}.

    Each entry: {label, n, phi, r2, params} where ``n`` counts the runs kept.
    The study reports 0.44 (C <= 2.15e18, n = 56) and 0.49 (C >= 4.64e18, n = 60).
    """

    phi_hat: float
    halves: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    notes: list[str]

    @property
    def spread(self) -> float:
        """max - min of phi over all subsets (NaN when none)."""
        values = [
            x["phi"] for x in self.halves + self.pairs if x["phi"] is not None and math.isfinite(x["phi"])
        ]
        return float(max(values) - min(values)) if values else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self.__dict__)

    def summary(self) -> str:
        lines = [f"[[Consistency of phi (all runs: {self.phi_hat:.4f})]]"]
        for x in self.halves + self.pairs:
            phi = "n/a" if x["phi"] is None or not math.isfinite(x["phi"]) else f"{x['phi']:.4f}"
            lines.append(f"    {x['label']:<34} n = {x['n']:<4} phi = {phi:<8} R^2 = {x['r2']:.4f}")
        lines += [f"    note: {n}" for n in self.notes]
        return "\n".join(lines)


def _subsets(runs: RunTable, notes: list[str]) -> list[tuple[str, str, np.ndarray]]:
    """(kind, label, mask) of the budget halves and the pairs {base r, r}."""
    subsets: list[tuple[str, str, np.ndarray]] = []
    budgets = budget_labels(runs)
    if budgets is not None:
        levels = sorted_unique(budgets)
        if len(levels) >= 2:
            low = levels[: len(levels) // 2]
            m = np.isin(budgets, low)
            fmt = (lambda b: f"{b:.3g}") if isinstance(levels[0], (int, float)) else str
            subsets.append(("halves", f"lower budgets (C <= {fmt(low[-1])})", m))
            subsets.append(("halves", f"upper budgets (C >= {fmt(levels[len(low)])})", ~m))
        else:
            notes.append("a single budget: no budget halves")
    else:
        compute = (
            runs.frame["flops"].to_numpy(float)
            if "flops" in runs.frame
            else 6.0 * (runs.n_once + runs.r * runs.n_rec) * runs.tokens
        )
        med = float(np.median(compute))
        m = compute <= med
        subsets.append(("halves", f"lower compute (C <= {med:.3g})", m))
        subsets.append(("halves", f"upper compute (C > {med:.3g})", ~m))
        notes.append("no 'budget' column: halves split at the median training compute")
    r = runs.r.astype(int)
    rs = np.unique(r)
    base = int(rs[0])
    if base != 1:
        notes.append(f"no r = 1 runs: pairs use the smallest r = {base} as the base")
    for value in rs[1:]:
        subsets.append(("pairs", f"r in {{{base}, {int(value)}}}", np.isin(r, [base, value])))
    return subsets


def consistency(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    n_starts: int = defaults.CONSISTENCY_STARTS,
    seed: int = defaults.SEED,
) -> Consistency:
    """phi refitted on the lower and upper halves of the budgets and on each pair {r0, r}.

    Halves: the sorted distinct budgets split into the lower floor(k/2) and the upper
    rest (the study's six budgets: 3 / 3); without a ``budget`` column, the runs are
    split at the median of their training compute (``flops`` or 6 (n_once + r n_rec) D).
    Pairs: the smallest r (normally 1) with each other r.  Each subset of at least 7 runs
    that identifies phi is refitted with the fit's own objective and box, from the
    full-data optimum and ``n_starts`` spread starts (half near it, half uniform in the box).
    """
    runs = as_runs(runs)
    check_fit(runs, fit)
    _refit_spec(fit, "consistency")
    notes: list[str] = []
    subsets = _subsets(runs, notes)
    keep = np.array([mask for _, _, mask in subsets]).reshape(len(subsets), len(runs))
    big = keep.sum(axis=1) >= 7
    thetas = np.full((len(subsets), 6), np.nan)
    if big.any():
        thetas[big], _ = _left_out_thetas(
            runs, fit, keep[big], n_spread=n_starts, seed=seed, what="consistency"
        )
    halves, pairs = [], []
    for (kind, label, mask), t in zip(subsets, thetas):
        entry: dict[str, Any] = {"label": label, "n": int(mask.sum()), "phi": None, "r2": float("nan")}
        entry["params"] = None
        if np.all(np.isfinite(t)):
            sub = runs.subset(mask)
            r2, _, _ = goodness_of_fit(sub.loss, np.exp(log_loss(t, sub.design)))
            params = theta_to_params(t)
            entry.update(phi=float(t[5]), r2=r2, params={k: float(params[k]) for k in PARAM_NAMES})
        else:
            notes.append(f"{label}: too few runs, phi not identifiable or the refit failed; not refitted")
        (halves if kind == "halves" else pairs).append(entry)
    return Consistency(phi_hat=float(fit.theta[5]), halves=halves, pairs=pairs, notes=notes)
