"""Search designs under a compute cap for the narrowest predicted interval of phi (or most power).

A simple, exhaustive search, scored by the asymptotic mode (:func:`phifit.plan.modes.asymptotic_plan`):

- budgets: every run of 2-4 consecutive budgets on a ladder of factor 2 spanning a quarter
  of the design's smallest budget to twice its largest;
- widths: k in {3, 4, 5} sizes per budget, spaced by a factor q in {1.25, 1.5}, centred on
  the geometric mean over r of the law's predicted compute-optimal sizes at that budget
  (:func:`phifit.plan.design.predicted_optimum`), snapped to the family's sizes (a multiple of
  head_dim for a sweep spec; at least 3 distinct per budget), at least ``MIN_STEPS_PLANNED``
  optimiser steps per run;
- r sets {1, 2, 4, 8}, {1, 2, 4}, {1, 2, 8}, {1, 4, 8}, {1, 8} (those the family allows);
- seeds per run 1, 2, 3.

Cost: training FLOPs (sum of F x D), and for a sweep spec the trainer's time: per run
F D / FLOP/s + overhead with the spec's recorded per-width speeds (interpolated in log
width), as ``phifit.spec.sweep_spec.estimate_seconds`` computes it for recorded speeds.
Candidates above the cap (default: the original design's FLOPs; ``max_hours`` caps the trainer's time),
with fewer than ``MIN_CELLS`` (budget, r) cells or fewer than ``min_runs`` runs are dropped, and so
are those the conditioning checks flag (:func:`rejected`: alpha/beta or phi/A not separated, runs
off their isoFLOP curve; counted in ``Optimized.n_rejected``); the best
score wins, ties going to the cheaper design.  The asymptotic width is a proxy where the
linearisation is untrusted: check the winner with the simulation mode (``--simulate``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .conditioning import conditioning
from .design import predicted_optimum
from .inputs import NoiseModel, PlanDesign, spec_speed
from .modes import AsymptoticPlan, asymptotic_plan

#: Fewest optimiser steps a planned sweep-spec run may take (the bundled spec keeps >= ~200).
MIN_STEPS_PLANNED = 200
#: Fewest (budget, r) cells of a candidate: below this the cell bootstrap and wild test are coarse.
MIN_CELLS = 12
R_SETS = ((1, 2, 4, 8), (1, 2, 4), (1, 2, 8), (1, 4, 8), (1, 8))


@dataclass(frozen=True)
class Optimized:
    """The chosen design, its asymptotic plan, its cost, and how many candidates were scored."""

    design: PlanDesign
    asymptotic: AsymptoticPlan
    flops: float
    seconds: float | None
    n_candidates: int
    n_within_cap: int
    budgets: dict[float, list[int]]
    r: tuple[int, ...]
    seeds: int
    n_rejected: int = 0


def rejected(cand: PlanDesign, params: Mapping[str, float]) -> list[str]:
    """The kinds of the conditioning checks a candidate fails (:mod:`phifit.plan.conditioning`:
    alpha/beta or phi/A not separated, runs off their isoFLOP curve); empty when it passes."""
    return [c.kind for c in conditioning(cand, params).warnings]


def _run_rows(design: PlanDesign, budget: float, r: int, size: float) -> dict[str, float] | None:
    """One planned run of the design's family: counts, tokens and FLOPs (None when too short)."""
    if design.kind == "spec":
        n_once, n_rec, f, per_step = design.arch.one(r, int(size))
        steps = max(1, round(budget / (f * per_step)))
        if steps < MIN_STEPS_PLANNED:
            return None
        tokens = steps * per_step
    else:
        a = design.arch.arch(r, np.array([size]))
        n_once, n_rec, f = (float(a[k][0]) for k in ("n_once", "n_rec", "flops_per_token"))
        tokens = budget / f
        if design.kind == "paper":
            from ..study import PAPER_BATCH_TOKENS

            tokens = max(1, round(tokens / PAPER_BATCH_TOKENS)) * PAPER_BATCH_TOKENS
    return {
        "budget": budget,
        "r": r,
        "size": size,
        "n_once": n_once,
        "n_rec": n_rec,
        "tokens": tokens,
        "flops": f * tokens,
    }


def _seconds(design: PlanDesign, frame: pd.DataFrame) -> float | None:
    if design.kind != "spec" or design.spec is None:
        return None
    total = 0.0
    for width, flops in zip(frame["size"], frame["flops"]):
        speed = spec_speed(design.spec, int(width))
        if speed is None:
            return None
        total += flops / speed.flops_per_second + speed.overhead_s
    return total


def optimize_design(
    design: PlanDesign,
    params: Mapping[str, float],
    noise: NoiseModel,
    *,
    max_flops: float | None = None,
    max_hours: float | None = None,
    objective: str = "width",
    min_runs: int = 0,
) -> Optimized:
    """The best candidate design under the cap (module docstring); ``objective`` "width"
    (narrowest asymptotic 95% interval) or "power" (most power against phi = 0, then width);
    candidates with fewer than ``min_runs`` runs (seeds included) are dropped."""
    if objective not in ("width", "power"):
        raise ValueError(f"objective {objective!r}: expected 'width' or 'power'")
    if max_hours is not None and design.kind != "spec":
        raise ValueError("--max-hours needs a sweep spec (its throughput); give --max-flops instead")
    cap_flops = max_flops if max_flops is not None else (None if max_hours is not None else design.flops)
    cap_seconds = None if max_hours is None else 3600.0 * max_hours
    budgets0 = sorted(design.frame["budget"].unique())
    lo, hi = budgets0[0] / 4, budgets0[-1] * 2
    ladder = [lo * 2**i for i in range(int(math.floor(math.log2(hi / lo) + 1e-9)) + 1)]
    ladder = sorted(set(ladder) | set(budgets0))
    sizes0 = design.frame["size"].astype(float)
    s_lo, s_hi = float(sizes0.min()) / 4, float(sizes0.max()) * 4
    r_allowed = set(int(r) for r in design.frame["r"].unique()) | {1, 2, 4, 8}
    r_sets = [rs for rs in R_SETS if set(rs) <= r_allowed]
    centre: dict[float, float] = {}
    for b in ladder:
        opts = [predicted_optimum(design, params, b, r, s_lo, s_hi) for r in (1, 2, 4, 8)]
        centre[b] = float(np.exp(np.mean(np.log(opts))))
    cache: dict[tuple[float, int, float], dict[str, float] | None] = {}
    best: tuple[tuple[float, float], Any] | None = None
    n_cand = n_ok = n_rej = 0
    for n_b in (2, 3, 4):
        for start in range(len(ladder) - n_b + 1):
            bset = ladder[start : start + n_b]
            for k, q in itertools.product((3, 4, 5), (1.25, 1.5)):
                widths: dict[float, list[float]] = {}
                for b in bset:
                    cands = design.arch.candidates(1, s_lo, s_hi)
                    targets = centre[b] * q ** (np.arange(k) - (k - 1) / 2)
                    snapped = sorted({float(cands[np.argmin(np.abs(np.log(cands / t)))]) for t in targets})
                    widths[b] = snapped
                if any(len(ws) < 3 for ws in widths.values()):
                    continue  # an isoFLOP curve needs >= 3 sizes to show its minimum
                for rs, seeds in itertools.product(r_sets, (1, 2, 3)):
                    n_cand += 1
                    for b in bset:
                        for r, w in itertools.product(rs, widths[b]):
                            if (b, r, w) not in cache:
                                cache[(b, r, w)] = _run_rows(design, b, r, w)
                    kept = {b: [w for w in widths[b] if all(cache[(b, r, w)] for r in rs)] for b in bset}
                    if any(len(ws) < 3 for ws in kept.values()):
                        continue  # a width too short to train (< MIN_STEPS_PLANNED) at some r
                    rows = []
                    for b in bset:
                        for r in rs:
                            for w in kept[b]:
                                key = (b, r, w)
                                if key not in cache:
                                    cache[key] = _run_rows(design, b, r, w)
                                if cache[key] is not None:
                                    rows.append(cache[key])
                    if not rows:
                        continue
                    frame = pd.DataFrame(rows)
                    flops = float(frame["flops"].sum()) * seeds
                    if cap_flops is not None and flops > cap_flops * (1 + 1e-9):
                        continue
                    seconds = _seconds(design, frame)
                    seconds = None if seconds is None else seconds * seeds
                    if cap_seconds is not None and (seconds is None or seconds > cap_seconds):
                        continue
                    frame = pd.concat([frame.assign(seed=s) for s in range(seeds)], ignore_index=True)
                    if frame.groupby(["budget", "r"]).ngroups < MIN_CELLS or frame["r"].nunique() < 2:
                        continue
                    if len(frame) < min_runs:
                        continue
                    cand = PlanDesign(
                        frame,
                        "optimised",
                        design.kind,
                        design.arch,
                        seconds,
                        design.seconds_note,
                        design.spec,
                    )
                    if rejected(cand, params):
                        n_rej += 1
                        continue
                    asym = asymptotic_plan(cand, params, noise)
                    n_ok += 1
                    score = (
                        (asym.width, flops) if objective == "width" else (-asym.power["phi=0"], asym.width)
                    )
                    if best is None or score < best[0]:
                        best = (score, (cand, asym, flops, seconds, kept, rs, seeds))
    if best is None:
        raise ValueError("no candidate design fits under the cap; raise --max-flops / --max-hours")
    cand, asym, flops, seconds, widths, rs, seeds = best[1]
    return Optimized(
        design=cand,
        asymptotic=asym,
        flops=flops,
        seconds=seconds,
        n_candidates=n_cand,
        n_within_cap=n_ok,
        budgets={b: [int(round(w)) if design.kind != "table" else w for w in ws] for b, ws in widths.items()},
        r=tuple(rs),
        seeds=seeds,
        n_rejected=n_rej,
    )


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise ValueError(f"cannot write {v!r} to a sweep spec")


def write_spec(opt: Optimized, original: Any, path: str, *, header: str = "") -> None:
    """A sweep spec (the layout of ``trainers/sweeps/cpu_small.toml``) for the optimised design:
    the original spec's [settings] and [estimate], the chosen budgets, widths, r and seeds."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [
        "",
        "[sweep]",
        f"name = {_toml_value(original.name + '_planned')}",
        f"seeds = {_toml_value(list(range(opt.seeds)))}",
        "",
        "[settings]",
    ]
    lines += [f"{k} = {_toml_value(v)}" for k, v in original.settings.items()]
    if original.flops_per_second or original.recorded:
        lines += ["", "[estimate]"]
        if original.flops_per_second:
            lines.append(f"flops_per_second = {_toml_value(float(original.flops_per_second))}")
        if original.recorded:
            lines += [
                "",
                "[estimate.recorded]",
                f"source = {_toml_value(original.recorded_source)}",
                f"device = {_toml_value(original.recorded_device)}",
                f"widths = {_toml_value([w for w, _, _ in original.recorded])}",
                f"flops_per_second = {_toml_value([f for _, f, _ in original.recorded])}",
                f"overhead_s = {_toml_value([o for _, _, o in original.recorded])}",
            ]
    for b, ws in sorted(opt.budgets.items()):
        lines += [
            "",
            "[[budgets]]",
            f"flops = {_toml_value(float(b))}",
            f"widths = {_toml_value([int(w) for w in ws])}",
        ]
    lines += [
        "",
        "[[grids]]",
        'name = "main"',
        f"r = {_toml_value(list(opt.r))}",
        'variants = ["baseline"]',
        "",
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
