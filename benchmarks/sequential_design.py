"""Retrospective benchmark of the "next runs" policy: how much compute each order of a real
pool of runs needs to measure phi.

Each pool is a table of runs that were really trained; a run "costs" its ``flops`` and
"training" it reveals its ``loss``.  Every policy starts from the same pilot (a subset of the
pool) and adds K runs per round (``--k``, default 4) until the pool is exhausted:

- ``phifit``: :func:`phifit.plan.next_runs.choose_next` with the pilot's misfit carried
  (``misfit=True``), at the Huber fit of the runs so far;
- ``noise-only``: the same with ``misfit=False``;
- ``random``: a random order of the rest of the pool, seeded per pilot;
- ``cheapest``: ascending ``flops``, ties in file order;
- ``study-order``: budget by budget ascending, file order within a budget.

When ``choose_next`` picks fewer than K runs (it stops when no candidate narrows the predicted
interval) or fails, the batch is filled cheapest-first; each state records how many runs were
filled so.

After every round the runs so far are fitted and cell-bootstrapped as ``phifit report`` does:
:func:`phifit.fitters.huber.fit_huber`, then :func:`phifit.bootstrap.block.block_bootstrap`
(seed 0, no jackknife); the *realised* width is the 95% percentile interval's width of phi (inf
when the fit or the bootstrap fails or phi is not identified).  Widths are measured in two
stages, because a percentile width from few replicates is noisy (on the study's tables its
Monte-Carlo sd is about 10% of the width at 400 replicates, as large as the target's slack):

1. while the policies run, each state gets a quick width (``--boot`` replicates, default 400),
   used only to stop a trajectory early: once it has reached the quick target and its next
   batch would take it past the largest reported share of the pool's compute (50%);
2. afterwards every state that enters the metrics (share within 50%, and beyond that up to the
   first state within the target) is re-measured with ``--boot-final`` replicates (default
   2000, Monte-Carlo sd about 4%); the metrics read these widths.  The target is 1.1 x the
   whole pool's width at ``--boot-final`` replicates, averaged over ``--target-seeds`` seeds
   (default 5).

The policies' choices do not depend on the widths (only on the fits), so
``--trajectories-from RESULTS.json`` re-measures the trajectories of an earlier run (same
pools, pilots and K) without replaying the policies.

Reported per pool and policy, over the pilots: the share of the pool's FLOPs at the first state
whose width is within the target (median, 10-90%; "not reached" counted: possible only with
``--max-share`` below 1), and the width at 10%, 25% and 50% of the pool's compute (the last
state whose cumulative FLOPs are within that share; median, 10-90%).

Pools:

- ``study``: the 116 digitized runs of the study (6 budgets, r in {1, 2, 4, 8}).  Pilot: from
  each (budget, r) cell of the two lowest budgets, a random half of its runs rounded up (2 of
  4, 3 of 5): 20 runs, every cell of those budgets with at least two sizes, about 2% of the
  pool's FLOPs.  The rest of the two budgets stays in the pool.
- ``study-sim``: the study's 116 runs with simulated losses (:func:`simulated_study_pool`: its
  Huber fit, a level per cell and per-run noise of the study's sizes); pilots as ``study``'s.  A
  pool where the policies can be ranked against a known phi.  ``study-sim:SEED`` is another
  realisation of it (``study-sim`` is seed 1), and ``--sim-seeds N`` runs realisations 1..N and
  pools their (realisation, pilot) pairs.  ``--truth N`` also reads every trajectory on such a
  pool with *true* widths: 2 x 1.96 x the sd of phi's Huber estimate over N fresh realisations
  of the state's runs (:func:`truth`, the same realisations for every state), against 1.1 x the
  full pool's true width.  A cell bootstrap of one realisation estimates that width with a bias
  that depends on the design (few cells, or cells of one run, absorb or inflate it), so the two
  readings can rank policies differently; the truth is what a design's precision is.
- ``cpu``: the baseline-recipe runs of ``data/cpu_small_runs.csv`` and all of
  ``data/cpu_planned_runs.csv`` as one pool of 132 runs (3 budgets).  20 configurations appear
  in both tables (same ``run_id``, trained twice, bit-identical losses); both rows are kept as
  separate runs, their ``run_id`` prefixed by the table (``small:`` / ``planned:``) to keep
  them distinct.  Pilot: from each r of the lowest budget, a random half of its runs rounded
  up (5 of 9): 20 runs, about 6% of the pool's FLOPs.

Pilots are drawn with ``numpy.random.default_rng([--seed, i])`` (distinct subsets); the random
order of pilot i uses the stream ``[--seed, i, 1]``.  Pilots run in parallel (``--jobs``), each
bootstrap in its pilot's process.

    python benchmarks/sequential_design.py --pools study cpu --pilots 20 --jobs 2 --json results.json
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

STUDY = "data/looped_study_runs_digitized.csv"
CPU_SMALL = "data/cpu_small_runs.csv"
CPU_PLANNED = "data/cpu_planned_runs.csv"
POLICIES = ("phifit", "noise-only", "random", "cheapest", "study-order")
SHARES = (0.10, 0.25, 0.50)
TARGET_FACTOR = 1.1
#: (pool, number of lowest budgets the pilot is drawn from)
PILOT_BUDGETS = {"study": 2, "study-sim": 2, "cpu": 1}


# ---------------------------------------------------------------------------------------------
# pools and pilots


def study_pool() -> pd.DataFrame:
    """The study's 116 digitized runs, in file order."""
    return pd.read_csv(STUDY)


def cpu_pool() -> pd.DataFrame:
    """The baseline runs of the CPU pilot sweep followed by every run of the planned sweep;
    ``run_id`` prefixed by the table (``small:``, ``planned:``) so that runs trained in both
    stay distinct rows."""
    small = pd.read_csv(CPU_SMALL)
    small = small[small["variant"] == "baseline"].assign(run_id=lambda f: "small:" + f["run_id"])
    planned = pd.read_csv(CPU_PLANNED).assign(run_id=lambda f: "planned:" + f["run_id"])
    pool = pd.concat([small, planned], ignore_index=True)
    if not pool["run_id"].is_unique:
        raise ValueError("the CPU pool's run_id values are not unique")
    return pool


def simulated_study_pool(seed: int = 1) -> pd.DataFrame:
    """The study's 116 runs (design, budgets and FLOPs) with losses simulated from the Huber fit
    of its digitized runs, a level per (budget, r) cell (sd tau) and per-run noise (sd sigma),
    both read off the study's residuals as the planner reads a pilot's
    (:func:`phifit.plan.inputs.pilot_noise`: tau 0.0020, sigma 0.0034): a pool whose phi is
    known (0.431) and whose whole table measures it.  ``seed`` picks the realisation (the
    ``study-sim:SEED`` pool; ``study-sim`` is seed 1, whose whole pool fits phi = 0.441): one
    realisation's cell levels are fixed for every policy, so a ranking on one realisation is
    partly that realisation's luck, and ``--sim-seeds`` averages over several."""
    from phifit.simulation import simulate

    params, per_run, cell = study_law()
    frame = pd.read_csv(STUDY)
    design = frame.drop(columns=["loss"])
    simulated = simulate(design, params=params, noise=per_run, cell_noise=cell, seed=seed)
    return frame.assign(loss=simulated["loss"].to_numpy())


@functools.cache
def study_law() -> tuple[dict[str, float], float, float]:
    """The simulated pools' truth: the Huber fit of the study's digitized runs, and the per-run
    and per-cell noise sds the planner reads off its residuals."""
    from phifit.fitters.huber import fit_huber
    from phifit.plan.inputs import pilot_noise
    from phifit.runs.table import load_runs

    study = load_runs(STUDY)
    fit = fit_huber(study)
    noise, _ = pilot_noise(study, fit)
    return dict(fit.params), noise.per_run, noise.cell


def pool_kind(name: str) -> str:
    """The kind of a pool name: ``study-sim:SEED`` is a ``study-sim`` realisation."""
    return name.split(":", 1)[0]


def load_pool(name: str) -> pd.DataFrame:
    """A pool by name (``study``, ``study-sim``, ``study-sim:SEED`` or ``cpu``), index 0..n-1 in
    file order; empty free-text cells (``note``, ``notes``) as empty strings, as a CSV file gives
    them to ``load_runs``."""
    pools: dict[str, Callable[[], pd.DataFrame]] = {
        "study": study_pool,
        "study-sim": simulated_study_pool,
        "cpu": cpu_pool,
    }
    kind, _, seed = name.partition(":")
    if kind not in pools or (seed and kind != "study-sim"):
        raise ValueError(f"unknown pool {name!r}; expected study, study-sim, study-sim:SEED or cpu")
    pool = (simulated_study_pool(int(seed)) if seed else pools[kind]()).reset_index(drop=True)
    for col in ("note", "notes"):
        if col in pool:
            pool[col] = pool[col].astype(object).fillna("").astype(str)
    return pool


def draw_pilot(pool: pd.DataFrame, n_budgets: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted pool rows of one pilot: from each (budget, r) cell of the ``n_budgets`` lowest
    budgets, a random half of its runs (rounded up)."""
    budgets = sorted(pool["budget"].unique())[:n_budgets]
    rows: list[int] = []
    for _, cell in pool[pool["budget"].isin(budgets)].groupby(["budget", "r"], sort=True):
        take = math.ceil(len(cell) / 2)
        rows.extend(int(i) for i in rng.choice(cell.index.to_numpy(), size=take, replace=False))
    return np.sort(np.array(rows, dtype=int))


def draw_pilots(pool: pd.DataFrame, n_budgets: int, n: int, seed: int) -> list[np.ndarray]:
    """``n`` distinct pilots; pilot i from ``default_rng([seed, i])`` (the next stream on a
    repeat)."""
    pilots: list[np.ndarray] = []
    seen: set[tuple[int, ...]] = set()
    attempt = 0
    while len(pilots) < n:
        rows = draw_pilot(pool, n_budgets, np.random.default_rng([seed, attempt]))
        attempt += 1
        if tuple(rows) in seen:
            continue
        seen.add(tuple(rows))
        pilots.append(rows)
    return pilots


# ---------------------------------------------------------------------------------------------
# the realised width


def table(pool: pd.DataFrame, rows: Sequence[int]):
    """The run table of the given pool rows (in that order)."""
    from phifit.runs.table import table_from_frame

    return table_from_frame(pool.loc[list(rows)].reset_index(drop=True), source="runs so far")


def measure(
    pool: pd.DataFrame, rows: Sequence[int], n_boot: int, n_jobs: int = 1, seed: int = 0
) -> dict[str, Any]:
    """Huber fit and cell bootstrap of the rows: ``width`` of phi's 95% percentile interval (inf
    when the fit or bootstrap fails or phi is not identified), ``phi``, and ``fit`` (None on
    failure; for the planners)."""
    from phifit.bootstrap.block import block_bootstrap
    from phifit.fitters.huber import fit_huber

    runs = table(pool, rows)
    try:
        fit = fit_huber(runs)
    except Exception:  # noqa: BLE001 - a failed fit is an infinitely wide interval
        return {"width": math.inf, "phi": None, "fit": None}
    if not fit.phi_identified:
        return {"width": math.inf, "phi": None, "fit": fit}
    try:
        boot = block_bootstrap(
            runs, fit, n_boot=n_boot, seed=seed, n_jobs=n_jobs, progress=False, jackknife=False
        )
        lo, hi = boot.ci["phi"]
        width = float(hi - lo)
    except Exception:  # noqa: BLE001
        width = math.inf
    return {"width": width if math.isfinite(width) else math.inf, "phi": float(fit.phi), "fit": fit}


# ---------------------------------------------------------------------------------------------
# policies


def static_order(policy: str, pool: pd.DataFrame, left: Sequence[int], rng: np.random.Generator) -> list[int]:
    """The order of the rows ``left`` under a policy that ignores the losses: ``random``
    (a permutation from ``rng``), ``cheapest`` (ascending flops, ties in file order) or
    ``study-order`` (ascending budget, file order within one)."""
    left = sorted(int(i) for i in left)
    if policy == "random":
        return [left[i] for i in rng.permutation(len(left))]
    key = "flops" if policy == "cheapest" else "budget"
    frame = pool.loc[left]
    return frame.sort_values(key, kind="stable").index.astype(int).tolist()


def planner_picks(
    runs: Any, candidates: pd.DataFrame, k: int, fit: Any, misfit: bool
) -> tuple[list[dict], float]:
    """phifit's policy (``misfit``) or the noise-only planner: :func:`choose_next`'s picks of the
    ``candidates`` for ``runs`` (at their ``fit``), and its predicted width with them."""
    from phifit.plan.next_runs import choose_next

    nxt = choose_next(runs, candidates, k, fit=fit, misfit=misfit)
    return nxt.picks, float(nxt.width_after)


def planner_batch(
    pool: pd.DataFrame, rows: Sequence[int], k: int, fit: Any, misfit: bool, picker: Callable = planner_picks
) -> tuple[list[int], int, float | None]:
    """Up to ``k`` new pool rows from ``picker`` (:func:`planner_picks`: :func:`choose_next`) for the
    runs ``rows`` (at their fit), topped up cheapest-first when it picks fewer; how many were topped
    up; and the planner's predicted (asymptotic) width with its picks (None when it failed)."""
    left = [i for i in range(len(pool)) if i not in set(rows)]
    picks: list[int] = []
    predicted = None
    try:
        chosen, predicted = picker(table(pool, rows), pool.loc[left], k, fit, misfit)
        index = {rid: i for i, rid in zip(left, pool.loc[left, "run_id"].astype(str))}
        picks = [index[str(p["run_id"])] for p in chosen]
    except Exception:  # noqa: BLE001 - a planner failure is topped up like an early stop
        picks, predicted = [], None
    rest = [i for i in static_order("cheapest", pool, left, np.random.default_rng(0)) if i not in picks]
    filled = max(0, min(k, len(left)) - len(picks))
    return picks + rest[:filled], filled, predicted


def trajectory(
    pool: pd.DataFrame,
    pilot: Sequence[int],
    policy: str,
    *,
    k: int,
    n_boot: int,
    target: float,
    rng: np.random.Generator,
    max_rounds: int | None = None,
    stop_share: float = max(SHARES),
    max_share: float = 1.0,
    cache: dict[frozenset, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The states of one policy from one pilot: state 0 is the pilot; each later state adds a
    batch (``added``, pool rows in the order picked).  Per state: ``n_runs``, cumulative
    ``flops``, ``share`` of the pool's FLOPs, realised ``width`` and ``phi``, ``filled``
    (picks topped up cheapest-first) and, for the planners, ``predicted``: choose_next's
    asymptotic width for this state.  Stops when the pool is exhausted, after ``max_rounds``,
    before a batch that would pass ``max_share``, or once the target is reached and the next
    batch would pass ``stop_share``.  ``cache``: widths by set of rows (shared by policies)."""
    cache = {} if cache is None else cache
    total = float(pool["flops"].sum())
    flops = pool["flops"].to_numpy(float)
    rows = [int(i) for i in pilot]
    order = None
    if policy not in ("phifit", "noise-only"):
        order = static_order(policy, pool, [i for i in range(len(pool)) if i not in set(rows)], rng)

    def state(added: list[int], filled: int) -> dict[str, Any]:
        key = frozenset(rows)
        if key not in cache:
            cache[key] = measure(pool, rows, n_boot)
        m = cache[key]
        spent = float(flops[rows].sum())
        return {
            "n_runs": len(rows),
            "flops": spent,
            "share": spent / total,
            "width": m["width"],
            "phi": m["phi"],
            "added": added,
            "filled": filled,
            "_fit": m["fit"],
        }

    states = [{**state([], 0), "predicted": None}]
    reached = states[0]["width"] <= target
    while len(rows) < len(pool) and (max_rounds is None or len(states) <= max_rounds):
        if order is not None:
            batch, filled, predicted = order[:k], 0, None
            order = order[k:]
        else:
            batch, filled, predicted = planner_batch(
                pool, rows, k, states[-1]["_fit"], misfit=policy == "phifit"
            )
        share_after = (states[-1]["flops"] + float(flops[batch].sum())) / total
        if share_after > max_share * (1 + 1e-12) or (reached and share_after > stop_share):
            break
        rows = rows + batch
        states.append({**state(batch, filled), "predicted": predicted})
        reached = reached or states[-1]["width"] <= target
    for s in states:
        s.pop("_fit")
    return states


# ---------------------------------------------------------------------------------------------
# metrics


def share_to_target(states: Sequence[dict[str, Any]], target: float) -> float | None:
    """Cumulative share of the pool's FLOPs at the first state whose width is within ``target``
    (None: not reached)."""
    for s in states:
        if s["width"] is not None and s["width"] <= target:
            return float(s["share"])
    return None


def width_at(states: Sequence[dict[str, Any]], share: float) -> float | None:
    """Width of the last state whose cumulative share is within ``share`` (None when even the
    pilot costs more)."""
    within = [s for s in states if s["share"] <= share * (1 + 1e-12)]
    return float(within[-1]["width"]) if within else None


def quantiles(values: Sequence[float | None]) -> dict[str, float | int]:
    """Median and 10%/90% quantiles of the values, None counted as +inf (``n_none`` of them)."""
    x = np.array([math.inf if v is None else v for v in values], dtype=float)
    if not len(x):
        return {"median": math.nan, "q10": math.nan, "q90": math.nan, "n_none": 0}
    q = np.quantile(x, [0.5, 0.1, 0.9], method="inverted_cdf")
    return {"median": float(q[0]), "q10": float(q[1]), "q90": float(q[2]), "n_none": int(np.sum(np.isinf(x)))}


def summarise(trajectories: dict[str, list[list[dict]]], target: float) -> dict[str, dict[str, Any]]:
    """Per policy: the share of FLOPs to the target and the widths at :data:`SHARES` over the
    pilots (:func:`quantiles`), with the per-pilot values."""
    out: dict[str, dict[str, Any]] = {}
    for policy, runs in trajectories.items():
        to_target = [share_to_target(t, target) for t in runs]
        widths = {f"{s:g}": [width_at(t, s) for t in runs] for s in SHARES}
        out[policy] = {
            "to_target": quantiles(to_target),
            "to_target_per_pilot": to_target,
            "not_reached": sum(v is None for v in to_target),
            "width_at": {s: quantiles(v) for s, v in widths.items()},
            "width_at_per_pilot": widths,
        }
    return out


def paired_wins(trajectories: dict[str, list[list[dict]]], target: float, policy: str = "phifit") -> dict:
    """Per other policy: pilots where ``policy`` reached the target with less / the same / more
    compute (not reached counts as more than any share)."""
    mine = [share_to_target(t, target) for t in trajectories[policy]]
    out = {}
    for other, runs in trajectories.items():
        if other == policy:
            continue
        theirs = [share_to_target(t, target) for t in runs]
        a = np.array([math.inf if v is None else v for v in mine])
        b = np.array([math.inf if v is None else v for v in theirs])
        out[other] = {"less": int(np.sum(a < b)), "same": int(np.sum(a == b)), "more": int(np.sum(a > b))}
    return out


# ---------------------------------------------------------------------------------------------
# the precise widths


def state_rows(pilot: Sequence[int], states: Sequence[dict[str, Any]]) -> list[list[int]]:
    """The pool rows of each state of a trajectory: the pilot, then each batch added."""
    rows = [int(i) for i in pilot]
    out = []
    for s in states:
        rows = rows + [int(i) for i in s["added"]]
        out.append(rows)
    return out


def _width(pool: pd.DataFrame, rows: Sequence[int], n_boot: int) -> float:
    warnings.simplefilter("ignore")
    return measure(pool, rows, n_boot)["width"]


def remeasure(
    pool: pd.DataFrame,
    pilots: Sequence[Sequence[int]],
    trajectories: dict[str, list[list[dict[str, Any]]]],
    *,
    n_boot: int,
    target: float,
    stop_share: float = max(SHARES),
    n_jobs: int = 1,
) -> int:
    """Replace each state's ``width`` by a measurement with ``n_boot`` replicates (seed 0, rows
    in pool order), in place; the quick width moves to ``width_quick``.  Measured: every state
    within ``stop_share`` of the pool's FLOPs, and beyond it, state by state, those up to the
    first within ``target``; the others keep ``width`` None.  Returns the number of distinct
    sets of runs measured."""
    from joblib import Parallel, delayed

    widths: dict[frozenset, float] = {}

    def measure_all(sets: Sequence[frozenset]) -> None:
        todo = [key for key in dict.fromkeys(sets) if key not in widths]
        got = Parallel(n_jobs=n_jobs)(delayed(_width)(pool, sorted(key), n_boot) for key in todo)
        widths.update(zip(todo, got))

    items = []
    for runs in trajectories.values():
        for pilot, states in zip(pilots, runs):
            for s in states:
                s["width_quick"] = s.get("width_quick", s["width"])
                s["width"] = None
            items.append(list(zip(state_rows(pilot, states), states)))
    within = [(r, s) for item in items for r, s in item if s["share"] <= stop_share * (1 + 1e-12)]
    measure_all([frozenset(r) for r, _ in within])
    for r, s in within:
        s["width"] = widths[frozenset(r)]
    while True:
        pending = []
        for item in items:
            if share_to_target([s for _, s in item], target) is not None:
                continue
            nxt = next(((r, s) for r, s in item if s["width"] is None), None)
            if nxt is not None:
                pending.append(nxt)
        if not pending:
            return len(widths)
        measure_all([frozenset(r) for r, _ in pending])
        for r, s in pending:
            s["width"] = widths[frozenset(r)]


# ---------------------------------------------------------------------------------------------
# the true width, on a simulated pool

#: Seeds of the fresh realisations that measure a state's true width (far from the pools' own).
TRUTH_SEED = 10_000


def truth_losses(n: int) -> np.ndarray:
    """(n, runs) losses of ``n`` fresh realisations of the simulated study pool (seeds
    TRUTH_SEED + 1 ... + n): the same law and noise, new cell levels and per-run noise."""
    return np.stack([simulated_study_pool(TRUTH_SEED + i)["loss"].to_numpy() for i in range(1, n + 1)])


def true_width(pool: pd.DataFrame, rows: Sequence[int], losses: np.ndarray) -> float:
    """2 x 1.96 x the sd of phi's Huber estimate over the realisations ``losses`` of the rows: the
    width a design's interval should have, where a cell bootstrap of one realisation only
    estimates it (inf when a fit fails in more than 5% of the realisations)."""
    from phifit.fitters.huber import fit_huber

    warnings.simplefilter("ignore")
    rows = sorted(int(i) for i in rows)
    phis = []
    for loss in losses:
        try:
            phi = fit_huber(table(pool.assign(loss=loss), rows)).params.get("phi")
        except Exception:  # a failed fit counts against the design
            phi = None
        phis.append(math.nan if phi is None else float(phi))
    x = np.array(phis)
    ok = np.isfinite(x)
    if ok.mean() < 0.95:
        return math.inf
    return float(2 * 1.959964 * x[ok].std(ddof=1))


def truth(
    pool: pd.DataFrame,
    pilots: Sequence[Sequence[int]],
    trajectories: dict[str, list[list[dict[str, Any]]]],
    *,
    realisations: int,
    n_jobs: int = 1,
) -> dict[str, Any]:
    """The benchmark read with true widths (:func:`true_width` over ``realisations`` fresh
    realisations, the same ones for every state: common random numbers): the full pool's true
    width, the target (1.1 x it), and per trajectory the states walked in order until one is
    within the target (its share to target; not reached when none is).  Per policy the share to
    target over the pilots and phifit's paired wins, as with the bootstrap widths."""
    from joblib import Parallel, delayed

    losses = truth_losses(realisations)
    full = true_width(pool, range(len(pool)), losses)
    target = TARGET_FACTOR * full
    widths: dict[frozenset, float] = {}
    walks = {p: [[] for _ in runs] for p, runs in trajectories.items()}
    items = [
        (p, i, list(zip(state_rows(pilot, states), states)))
        for p, runs in trajectories.items()
        for i, (pilot, states) in enumerate(zip(pilots, runs))
    ]
    while True:
        pending = []
        for p, i, item in items:
            walk = walks[p][i]
            if len(walk) == len(item) or (walk and walk[-1]["width"] <= target):
                continue
            pending.append((p, i, item[len(walk)]))
        if not pending:
            break
        todo = list(dict.fromkeys(frozenset(r) for _, _, (r, _) in pending if frozenset(r) not in widths))
        got = Parallel(n_jobs=n_jobs)(delayed(true_width)(pool, sorted(key), losses) for key in todo)
        widths.update(zip(todo, got))
        for p, i, (r, st) in pending:
            walks[p][i].append({"share": st["share"], "width": widths[frozenset(r)]})
    to_target = {p: [share_to_target(w, target) for w in ws] for p, ws in walks.items()}
    return {
        "realisations": realisations,
        "full_width": full,
        "target": target,
        "to_target": {p: quantiles(v) for p, v in to_target.items()},
        "to_target_per_pilot": to_target,
        "phifit_vs": paired_wins(walks, target) if "phifit" in walks else {},
        "walks": walks,
        "states_measured": len(widths),
    }


# ---------------------------------------------------------------------------------------------
# running


def run_pilot(
    pool: pd.DataFrame,
    pilot: Sequence[int],
    index: int,
    *,
    policies: Sequence[str],
    k: int,
    n_boot: int,
    target: float,
    seed: int,
    max_rounds: int | None = None,
    max_share: float = 1.0,
) -> dict[str, list[dict[str, Any]]]:
    """Every policy's trajectory from one pilot (one process; widths shared across policies)."""
    warnings.simplefilter("ignore")
    cache: dict[frozenset, dict[str, Any]] = {}
    return {
        p: trajectory(
            pool,
            pilot,
            p,
            k=k,
            n_boot=n_boot,
            target=target,
            rng=np.random.default_rng([seed, index, 1]),
            max_rounds=max_rounds,
            max_share=max_share,
            cache=cache,
        )
        for p in policies
    }


def run_pool(
    name: str,
    *,
    n_pilots: int,
    k: int,
    n_boot: int,
    n_boot_final: int,
    target_seeds: int,
    seed: int,
    n_jobs: int,
    policies: Sequence[str] = POLICIES,
    max_rounds: int | None = None,
    max_share: float = 1.0,
    previous: dict[str, Any] | None = None,
    truth_realisations: int = 0,
) -> dict[str, Any]:
    """The benchmark on one pool: reference width, pilots, every trajectory (replayed, or taken
    from ``previous``, an earlier result of this pool), the precise widths, the summary."""
    from joblib import Parallel, delayed

    t0 = time.perf_counter()
    pool = load_pool(name)
    pilots = draw_pilots(pool, PILOT_BUDGETS[pool_kind(name)], n_pilots, seed)
    if previous is None:
        full_quick = measure(pool, range(len(pool)), n_boot, n_jobs=n_jobs)["width"]
        kwargs = dict(policies=policies, k=k, n_boot=n_boot, target=TARGET_FACTOR * full_quick, seed=seed)
        kwargs.update(max_rounds=max_rounds, max_share=max_share)
        jobs = (delayed(run_pilot)(pool, p, i, **kwargs) for i, p in enumerate(pilots))
        results = Parallel(n_jobs=n_jobs)(jobs)
        trajectories = {p: [r[p] for r in results] for p in policies}
    else:
        if previous["pilots"] != [p.tolist() for p in pilots]:
            raise ValueError(f"--trajectories-from: pool {name!r} was run with other pilots")
        missing = [p for p in policies if p not in previous["trajectories"]]
        if missing:
            raise ValueError(f"--trajectories-from: pool {name!r} lacks the policies {missing}")
        full_quick = previous.get("full_width_quick", previous["full_width"])
        trajectories = {p: previous["trajectories"][p] for p in policies}
    replayed = time.perf_counter() - t0
    every = range(len(pool))
    full = [measure(pool, every, n_boot_final, n_jobs=n_jobs, seed=i)["width"] for i in range(target_seeds)]
    target = TARGET_FACTOR * float(np.mean(full))
    n_sets = remeasure(pool, pilots, trajectories, n_boot=n_boot_final, target=target, n_jobs=n_jobs)
    true = None
    if truth_realisations and pool_kind(name) == "study-sim":
        true = truth(pool, pilots, trajectories, realisations=truth_realisations, n_jobs=n_jobs)
    return {
        "truth": true,
        "pool": name,
        "n_runs": len(pool),
        "total_flops": float(pool["flops"].sum()),
        "full_width": float(np.mean(full)),
        "full_widths": full,
        "full_width_quick": full_quick,
        "full_phi": float(fit_phi(pool)),
        "target": target,
        "n_boot": n_boot,
        "n_boot_final": n_boot_final,
        "pilots": [p.tolist() for p in pilots],
        "pilot_share": [float(pool.loc[p, "flops"].sum() / pool["flops"].sum()) for p in pilots],
        "summary": summarise(trajectories, target),
        "phifit_vs": paired_wins(trajectories, target) if "phifit" in policies else {},
        "trajectories": trajectories,
        "states_measured": n_sets,
        "seconds_policies": replayed,
        "seconds": time.perf_counter() - t0,
    }


def wins_line(reading: str, wins: dict[str, dict[str, int]]) -> str:
    """phifit's paired wins against each policy as one line (``reading``: per what they were counted)."""
    return f"phifit vs each policy, {reading} (less / same / more compute to the target): " + "; ".join(
        f"{o} {v['less']}/{v['same']}/{v['more']}" for o, v in wins.items()
    )


def _share_rows(to_target: dict[str, dict[str, Any]], means: dict[str, float] | None = None) -> list[str]:
    """A header and one row per policy: its share of FLOPs to the target (:func:`_share_cell`), its
    mean share when ``means`` are given, and how many pilots did not reach the target."""
    mean_head = f" {'mean':>6}" if means is not None else ""
    rows = [f"{'policy':12} {'% FLOPs to target, median [10%, 90%]':>38}{mean_head} {'n/r':>4}"]
    for policy, t in to_target.items():
        mean = f" {_pct(means[policy]):>6}" if means is not None else ""
        rows.append(f"{policy:12} {_share_cell(t):>38}{mean} {t['n_none']:>4}")
    return rows


def format_truth(true: dict[str, Any]) -> str:
    """A readable table of :func:`truth` (or its pooled form)."""
    lines = [
        f"true widths (2 x 1.96 sd of phi over {true['realisations']} fresh realisations): full pool "
        f"{true['full_width']:.4f}, target {true['target']:.4f}",
        *_share_rows(true["to_target"]),
    ]
    if true["phifit_vs"]:
        lines.append(wins_line("by true width", true["phifit_vs"]))
    return "\n".join(lines)


def _pooled_wins(tallies: Sequence[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    wins: dict[str, dict[str, int]] = {}
    for tally in tallies:
        for other, v in tally.items():
            total = wins.setdefault(other, {"less": 0, "same": 0, "more": 0})
            for key in total:
                total[key] += v[key]
    return wins


def _pooled_shares(per_pilot: Sequence[dict[str, list[float | None]]]) -> dict[str, list[float | None]]:
    """Each policy's shares to the target, one per pilot, concatenated over the results."""
    shares: dict[str, list[float | None]] = {}
    for result in per_pilot:
        for policy, values in result.items():
            shares.setdefault(policy, []).extend(values)
    return shares


def over_realisations(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The benchmark pooled over several realisations of a simulated pool: per policy, the share
    of FLOPs to the target over every (realisation, pilot) pair (each against its realisation's
    own target; :func:`quantiles`), and phifit's paired wins summed over the pairs."""
    shares = _pooled_shares(
        [{p: v["to_target_per_pilot"] for p, v in result["summary"].items()} for result in results]
    )
    out = {
        "pools": [r["pool"] for r in results],
        "pairs": len(next(iter(shares.values()))) if shares else 0,
        "to_target": {p: quantiles(v) for p, v in shares.items()},
        "to_target_mean": {
            p: float(np.mean([math.inf if x is None else x for x in v])) for p, v in shares.items()
        },
        "phifit_vs": _pooled_wins([r["phifit_vs"] for r in results]),
        "truth": None,
    }
    trues = [r["truth"] for r in results if r.get("truth")]
    if trues and len(trues) == len(results):
        true_shares = _pooled_shares([t["to_target_per_pilot"] for t in trues])
        out["truth"] = {
            "realisations": trues[0]["realisations"],
            "full_width": float(np.mean([t["full_width"] for t in trues])),
            "target": float(np.mean([t["target"] for t in trues])),
            "to_target": {p: quantiles(v) for p, v in true_shares.items()},
            "phifit_vs": _pooled_wins([t["phifit_vs"] for t in trues]),
        }
    return out


def format_realisations(pooled: dict[str, Any]) -> str:
    """A readable table of :func:`over_realisations`."""
    lines = [
        f"over {len(pooled['pools'])} realisations ({', '.join(pooled['pools'])}), "
        f"{pooled['pairs']} (realisation, pilot) pairs:",
        *_share_rows(pooled["to_target"], pooled["to_target_mean"]),
    ]
    if pooled["phifit_vs"]:
        lines.append(wins_line("per pair", pooled["phifit_vs"]))
    if pooled.get("truth"):
        lines += ["", format_truth(pooled["truth"]) + " (full pool and target: means over the realisations)"]
    return "\n".join(lines)


def fit_phi(pool: pd.DataFrame) -> float:
    """phi of the Huber fit of the whole pool."""
    from phifit.fitters.huber import fit_huber

    return float(fit_huber(table(pool, range(len(pool)))).phi)


def _pct(v: float) -> str:
    return "  n/r" if not math.isfinite(v) else f"{100 * v:5.1f}"


def _share_cell(t: dict[str, Any]) -> str:
    """A share-to-target summary (:func:`quantiles`) as "median [10%, 90%]" in per cent."""
    return f"{_pct(t['median'])} [{_pct(t['q10'])}, {_pct(t['q90'])}]"


def _w(v: float) -> str:
    return "  inf" if not math.isfinite(v) else f"{v:5.3f}"


def format_pool(result: dict[str, Any]) -> str:
    """A readable table of one pool's summary."""
    lines = [
        f"pool {result['pool']}: {result['n_runs']} runs, {result['total_flops']:.3g} FLOPs; "
        f"{len(result['pilots'])} pilots of {np.median([len(p) for p in result['pilots']]):.0f} runs "
        f"({100 * np.median(result['pilot_share']):.1f}% of the FLOPs); full-pool width "
        f"{result['full_width']:.4f} ({result['n_boot_final']} replicates, mean of "
        f"{len(result['full_widths'])} seeds: "
        f"{min(result['full_widths']):.4f}-{max(result['full_widths']):.4f}; "
        f"phi {result['full_phi']:.3f}), target {result['target']:.4f}",
        "",
        f"{'policy':12} {'% FLOPs to target':>24} {'n/r':>4}"
        + "".join(f" {'width at ' + format(s, '.0%'):>24}" for s in SHARES),
        f"{'':12} {'median [10%, 90%]':>24} {'':>4}" + "".join(f" {'median [10%, 90%]':>24}" for _ in SHARES),
    ]
    for policy, s in result["summary"].items():
        t = s["to_target"]
        line = f"{policy:12} {_share_cell(t):>24} {s['not_reached']:>4}"
        for share in SHARES:
            w = s["width_at"][f"{share:g}"]
            line += f" {_w(w['median']) + ' [' + _w(w['q10']) + ', ' + _w(w['q90']) + ']':>24}"
        lines.append(line)
    if result["phifit_vs"]:
        lines += ["", wins_line("per pilot", result["phifit_vs"])]
    true = result.get("truth")
    if true:
        lines += ["", format_truth(true)]
    lines.append(
        f"({result['seconds']:.0f} s: policies {result['seconds_policies']:.0f} s, "
        f"{result['states_measured']} sets of runs measured at {result['n_boot_final']} replicates)"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--pools",
        nargs="+",
        default=["study", "cpu"],
        help="study, study-sim (one realisation, seed 1), study-sim:SEED, cpu",
    )
    ap.add_argument(
        "--sim-seeds",
        type=int,
        default=None,
        metavar="N",
        help="run study-sim as its realisations 1..N and pool them (a ranking on one realisation "
        "is partly its luck)",
    )
    ap.add_argument("--pilots", type=int, default=20, help="pilots per pool")
    ap.add_argument("--k", type=int, default=4, help="runs added per round")
    ap.add_argument("--boot", type=int, default=400, help="replicates of the quick widths (early stop)")
    ap.add_argument("--boot-final", type=int, default=2000, help="replicates of the widths the metrics read")
    ap.add_argument("--target-seeds", type=int, default=5, help="seeds averaged for the full pool's width")
    ap.add_argument(
        "--trajectories-from",
        default=None,
        metavar="RESULTS.json",
        help="re-measure the trajectories of an earlier --json instead of replaying the policies",
    )
    ap.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    ap.add_argument(
        "--max-share", type=float, default=1.0, help="stop each trajectory at this share of FLOPs"
    )
    ap.add_argument(
        "--truth",
        type=int,
        default=0,
        metavar="N",
        help="on study-sim pools, also read every trajectory with true widths: the sd of phi over N "
        "fresh realisations of each state's runs (the simulated pool's known law and noise)",
    )
    ap.add_argument("--max-rounds", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.sim_seeds:
        expanded = [f"study-sim:{i}" for i in range(1, args.sim_seeds + 1)]
        args.pools = [q for p in args.pools for q in (expanded if p == "study-sim" else [p])]
    for name in args.pools:
        if pool_kind(name) not in PILOT_BUDGETS:
            ap.error(f"--pools: unknown pool {name!r}; expected study, study-sim, study-sim:SEED or cpu")
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    out = {"args": vars(args), "pools": {}}
    previous = None
    if args.trajectories_from:
        with open(args.trajectories_from, encoding="utf-8") as f:
            previous = json.load(f)
        if previous["args"]["k"] != args.k or previous["args"]["seed"] != args.seed:
            raise SystemExit(f"{args.trajectories_from}: run with another --k or --seed")
    for name in args.pools:
        if previous is not None and name not in previous["pools"]:
            raise SystemExit(f"{args.trajectories_from}: no pool {name!r}")
        result = run_pool(
            name,
            n_pilots=args.pilots,
            k=args.k,
            n_boot=args.boot,
            n_boot_final=args.boot_final,
            target_seeds=args.target_seeds,
            seed=args.seed,
            n_jobs=args.jobs,
            policies=args.policies,
            max_rounds=args.max_rounds,
            max_share=args.max_share,
            previous=None if previous is None else previous["pools"][name],
            truth_realisations=args.truth,
        )
        out["pools"][name] = result
        print(format_pool(result) + "\n", flush=True)
    realisations = [r for n, r in out["pools"].items() if ":" in n]
    if len(realisations) > 1:
        out["over_realisations"] = over_realisations(realisations)
        print(format_realisations(out["over_realisations"]) + "\n", flush=True)
    out["seconds"] = time.perf_counter() - t0
    print(f"total {out['seconds']:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1, default=float)


if __name__ == "__main__":
    main()
