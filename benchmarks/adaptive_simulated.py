"""The adaptive loop (``phifit sweep SPEC --adaptive``) on a simulated world: the real loop, its round log
and its design rules, with every "training" run answered by a law whose truth is known.

The world: the sweep spec's pool (its baseline runs, :func:`phifit.trainers.adaptive.pool_frame`) gets
losses from a joint law and a misfit read off a real table (default: the Huber fit of ``cpu_bpe``'s 60
runs, the per-run sd and the (budget, r) cell sd the planner reads from it,
:func:`phifit.plan.inputs.pilot_noise`),
drawn once per world seed, so a run's loss does not depend on when the loop asks for it
(:func:`phifit.simulation.simulate`: log L = log L_law + u_cell + e_run).  ``run_sweep`` is replaced by a
stand-in that appends those rows for the run ids the loop asks for; everything else is the loop as a user
runs it: the pilot, each round's decision (``choose_next`` with the design rules on unless
``--no-rules``), its predicted width, the cell-bootstrap outcome, the stop rule declared before round 1.

Printed per world: the round log (runs, FLOPs, the predicted and realised width of phi's 95% interval,
phi and its interval, and which picks a design rule forced), the stop reason, and the final design checked
afresh against the three rules (every r at every budget used, each (budget, r) curve with two or more
sizes bracketed under the *true* law, no r in a single cell) and the rules the loop itself recorded as not
met (``rule_notes``: e.g. a curve whose pool has no size beyond its edge).

    python benchmarks/adaptive_simulated.py --worlds 3 --target-width 0.3 --max-flops 2e14
    python benchmarks/adaptive_simulated.py --worlds 3 --no-rules      # the greedy batch alone
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import phifit.trainers.sweep as tsweep  # noqa: E402
from phifit.trainers import runlog  # noqa: E402
from phifit.trainers.adaptive import AdaptiveOptions, pool_frame, run_adaptive  # noqa: E402

import phifit  # noqa: E402
from phifit.law import Design, loss, params_to_theta  # noqa: E402
from phifit.plan.inputs import pilot_noise  # noqa: E402
from phifit.plan.rounds import load_rounds, rounds_path  # noqa: E402
from phifit.simulation import simulate  # noqa: E402


def world_law(table: str) -> tuple[dict[str, float], float, float]:
    """The law and misfit of the world: the Huber fit of ``table``, its per-run sd and its cell sd."""
    runs = phifit.load_runs(ROOT / table)
    fit = phifit.fit(runs)
    noise = pilot_noise(runs, fit)[0]  # the misfit carried: its cell levels' sd and the runs' sd
    return dict(fit.params), float(noise.per_run), float(noise.cell)


def world_rows(pool: pd.DataFrame, law: dict[str, float], sigma: float, tau: float, seed: int) -> dict:
    """Every pool run's row, its loss drawn once from the world (law, cell level, run noise)."""
    frame = simulate(pool.reset_index(drop=True), params=law, noise=sigma, cell_noise=tau, seed=seed)
    rows = {}
    for row in frame.to_dict("records"):
        rows[row["run_id"]] = {
            "run_id": row["run_id"],
            "r": int(row["r"]),
            "n_once": int(round(row["n_once"])),
            "n_rec": int(round(row["n_rec"])),
            "tokens": int(round(row["tokens"])),
            "loss": float(row["loss"]),
            "flops": float(row["flops"]),
            "budget": float(row["budget"]),
            "size": row["size"],
            "variant": "baseline",
            "seed": int(row["seed"]),
        }
    return rows


def true_loss(frame: pd.DataFrame, law: dict[str, float]) -> np.ndarray:
    design = Design.from_arrays(
        frame["r"].to_numpy(float), frame["n_once"], frame["n_rec"], frame["tokens"].to_numpy(float)
    )
    return loss(params_to_theta(law), design)


def rule_check(table: pd.DataFrame, law: dict[str, float]) -> list[str]:
    """The design rules checked afresh on the final table, bracketing under the true law."""
    broken = []
    rs = sorted(table["r"].unique())
    for b in sorted(table["budget"].unique()):
        have = set(table.loc[table["budget"] == b, "r"])
        broken += [f"r {r} missing at budget {b:.3g}" for r in rs if r not in have]
    for (b, r), curve in table.groupby(["budget", "r"]):
        if curve["size"].nunique() >= 2:
            by_size = curve.assign(law=true_loss(curve, law)).groupby("size")["law"].mean()
            if by_size.idxmin() in (by_size.index.min(), by_size.index.max()):
                broken.append(f"curve ({b:.3g}, r {r}) not bracketed under the true law")
    cells = table.groupby("r")["budget"].nunique()
    broken += [f"r {r} in a single (budget, r) cell" for r, n in cells.items() if n == 1]
    return broken


def one_world(args: argparse.Namespace, law: dict, sigma: float, tau: float, seed: int) -> dict[str, Any]:
    spec = tsweep.load_spec(args.spec)
    pool = pool_frame(spec, None)
    rows = world_rows(pool, law, sigma, tau, seed)

    def answered(spec, out, grids=None, file=None, run_ids=None, jobs=1) -> int:
        runlog.append_rows(out, [rows[i] for i in run_ids])
        return 0

    tsweep.run_sweep = answered
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "runs.csv")
        options = AdaptiveOptions(
            batch=args.batch,
            target_width=args.target_width,
            max_flops=args.max_flops,
            max_rounds=args.max_rounds,
            n_boot=args.n_boot,
            n_jobs=args.jobs,
            design_rules=not args.no_rules,
        )
        t0 = time.perf_counter()
        run_adaptive(spec, out, options=options, file=io.StringIO())
        seconds = time.perf_counter() - t0
        log = load_rounds(rounds_path(out))
        records = [json.loads(line) for line in rounds_path(out).read_text().splitlines() if line.strip()]
        table = pd.read_csv(out)
    decisions = [r for r in records if r["event"] == "decision"]
    forced = {r["round"]: sum(1 for p in r["picks"] if p.get("rule")) for r in decisions}
    unmet = sorted({note for r in decisions for note in r.get("rule_notes") or []})
    stop = next((r for r in records if r["event"] == "stop"), None)
    declared = next(r for r in records if r["event"] == "outcome" and r["round"] == 0)
    return {
        "seed": seed,
        "rounds": log.to_frame().assign(forced=lambda f: f["round"].map(forced).fillna(0).astype(int)),
        "stop_rule": declared.get("stop_rule"),
        "stop": stop["reason"] if stop else "",
        "broken": rule_check(table, law),
        "unmet": unmet,
        "n_runs": len(table),
        "cells": table.groupby(["budget", "r"]).size().unstack(fill_value=0),
        "seconds": seconds,
    }


def fmt(x: Any, spec: str = ".3f") -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "trainers/sweeps/cpu_bpe.toml"))
    ap.add_argument(
        "--world", default="data/cpu_bpe_runs.csv", help="the real table the world's law comes from"
    )
    ap.add_argument("--worlds", type=int, default=3, help="world seeds 1..N")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--target-width", type=float, default=None, dest="target_width")
    ap.add_argument("--max-flops", type=float, default=None, dest="max_flops")
    ap.add_argument("--max-rounds", type=int, default=None, dest="max_rounds")
    ap.add_argument("--n-boot", type=int, default=400, dest="n_boot")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--no-rules", action="store_true", dest="no_rules")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    law, sigma, tau = world_law(args.world)
    print(
        f"world: the Huber fit of {args.world} (phi {law['phi']:.3f}, alpha {law['alpha']:.3f}, beta "
        f"{law['beta']:.3f}), per-run sd {sigma:.4f}, cell sd {tau:.4f}; pool: {args.spec}; design rules "
        f"{'off' if args.no_rules else 'on'}"
    )
    for seed in range(1, args.worlds + 1):
        w = one_world(args, law, sigma, tau, seed)
        print(
            f"\n## world {seed}: {w['n_runs']} runs, {w['seconds']:.0f} s; "
            f"stop rule (declared before round 1): "
            f"{w['stop_rule']}"
        )
        print(
            "| round | runs | FLOPs | width predicted | width realised | phi [95%] | picks forced by a rule |"
        )
        print("|---|---|---|---|---|---|---|")
        for row in w["rounds"].to_dict("records"):
            ci = f"[{fmt(row.get('phi_lo'))}, {fmt(row.get('phi_hi'))}]"
            print(
                f"| {row['round']} | {row['n_runs']} | {row['flops']:.3g} | "
                f"{fmt(row.get('width_predicted'))} | {fmt(row.get('width_realised'))} | "
                f"{fmt(row.get('phi'))} {ci} | {row['forced']} |"
            )
        print(f"stop: {w['stop']}")
        print("runs per (budget, r):")
        print(w["cells"].to_string())
        print(
            "design rules on the final table: " + ("all kept" if not w["broken"] else "; ".join(w["broken"]))
        )
        print("rules the loop recorded as not met: " + ("none" if not w["unmet"] else "; ".join(w["unmet"])))


if __name__ == "__main__":
    main()
