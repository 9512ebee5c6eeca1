"""How much of the study's compute an order of its runs that sees their losses needs: a greedy oracle.

The retrospective benchmark (``sequential_design.py``) asks how much compute a policy needs to
bring phi's 95% interval to 1.1 x the whole pool's width, choosing runs before their losses are
known.  This script asks what choosing *with* the losses reaches: from a pilot, it adds one run
at a time, the pool run whose addition narrows the measured width the most per FLOP.  Every
candidate is fitted and cell-bootstrapped (:func:`sequential_design.measure`: the Huber fit, a
block bootstrap over (budget, r) cells, the width of the percentile interval) with the same
bootstrap seed and ``--boot`` replicates (common random numbers: candidates differ by their runs,
not by their draws).  To keep a step to seconds the candidates are one run per (budget, r) cell:
of the cell's runs not yet added, the one whose size ranks nearest the middle of the cell's curve
(within a cell every run costs the cell's budget in FLOPs; its size decides where on the curve it
sits).

Greedy choice on noisy widths favours the oracle: it keeps the candidates whose bootstrap draws
happened to come out narrow.  So every state of its path is measured again with
``--boot-final`` replicates at other seeds (mean over ``--final-seeds``), against the target of
the retrospective benchmark (1.1 x the whole pool's width, 2000 replicates, mean over 5 seeds).
The result is a reference, not a proof: a greedy path with revealed losses, one run at a time,
from the benchmark's own pilots (``sequential_design.draw_pilots``, seed 0).

    python benchmarks/sequential_oracle.py --pilots 3 --jobs 2 --max-share 0.2 --json oracle.json

A path takes minutes to tens of minutes, so ``--keep DIR`` writes each finished pilot (and the
whole pool's widths) to ``DIR`` as it ends, and a later run with the same settings reads them back
instead of recomputing: 20 pilots can be gathered over several runs, e.g. ``--pilots 20 --keep
oracle.d``, stopped and started again.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sequential_design as S  # noqa: E402

#: The shares of the pool's FLOPs at which the oracle's width is read.
READ_SHARES = (0.10, 0.12, 0.15, 0.20)


def candidates(pool, rows: set[int]) -> list[int]:
    """One pool row per (budget, r) cell with runs left: the one whose size rank in its cell is
    nearest the middle of the cell's curve."""
    left = pool.loc[[i for i in pool.index if i not in rows]]
    out = []
    for _, cell in left.groupby(["budget", "r"], sort=True):
        full = pool[(pool["budget"] == cell["budget"].iloc[0]) & (pool["r"] == cell["r"].iloc[0])]
        rank = full["size"].rank(method="first")
        middle = (len(full) + 1) / 2
        out.append(int((rank.loc[cell.index] - middle).abs().idxmin()))
    return out


def oracle_path(pool, pilot: list[int], n_boot: int, max_share: float) -> list[dict[str, Any]]:
    """The greedy path from ``pilot`` up to ``max_share`` of the pool's FLOPs: per state its rows,
    share and screening width (``n_boot`` replicates, seed 0)."""
    flops = pool["flops"].to_numpy(float)
    total = flops.sum()
    rows = list(pilot)
    width = S.measure(pool, rows, n_boot)["width"]
    states = [{"rows": list(rows), "share": flops[rows].sum() / total, "width": width}]
    while True:
        spent = flops[rows].sum()
        options = [i for i in candidates(pool, set(rows)) if (spent + flops[i]) / total <= max_share + 1e-12]
        if not options:
            break
        scores = []
        for i in options:
            w = S.measure(pool, rows + [i], n_boot)["width"]
            gain = (width - w) if math.isfinite(width) else (0.0 if not math.isfinite(w) else 1.0 / w)
            scores.append((gain / flops[i], w, i))
        _, width, best = max(scores)
        rows.append(best)
        states.append({"rows": list(rows), "share": flops[rows].sum() / total, "width": width})
    return states


def final_widths(pool, states: list[dict[str, Any]], n_boot: int, seeds: int) -> None:
    """Each state's width again: ``n_boot`` replicates, mean over seeds 1..``seeds``."""
    for s in states:
        ws = [S.measure(pool, s["rows"], n_boot, seed=k)["width"] for k in range(1, seeds + 1)]
        s["width_final"] = float(np.mean(ws))


def run_pilot(args: tuple) -> dict[str, Any]:
    pool_name, pilot, n_boot, n_final, final_seeds, max_share = args
    warnings.simplefilter("ignore")
    pool = S.load_pool(pool_name)
    t0 = time.perf_counter()
    states = oracle_path(pool, [int(i) for i in pilot], n_boot, max_share)
    final_widths(pool, states, n_final, final_seeds)
    return {"pilot": [int(i) for i in pilot], "states": states, "seconds": time.perf_counter() - t0}


def _settings_tag(args: argparse.Namespace) -> str:
    """The settings a kept result depends on, as part of its file name."""
    return f"{args.pool}-b{args.boot}-f{args.boot_final}x{args.final_seeds}-m{args.max_share:g}"


def _read_kept(path: str) -> Any:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_kept(path: str, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` whole or not at all (a temporary file moved in)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(tmp, path)


def width_at(states: list[dict[str, Any]], share: float) -> float:
    """The re-measured width of the last state within ``share`` of the pool's FLOPs."""
    within = [s for s in states if s["share"] <= share + 1e-12]
    return within[-1]["width_final"] if within else math.inf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", default="study", choices=("study", "study-sim"))
    ap.add_argument("--pilots", type=int, default=3)
    ap.add_argument("--boot", type=int, default=400, help="replicates of the screening widths")
    ap.add_argument("--boot-final", type=int, default=2000, dest="boot_final")
    ap.add_argument("--final-seeds", type=int, default=2, dest="final_seeds")
    ap.add_argument("--target-seeds", type=int, default=5, dest="target_seeds")
    ap.add_argument("--max-share", type=float, default=0.2, dest="max_share")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", default=None, help="folder of finished pilots, read back by a later run")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    pool = S.load_pool(args.pool)
    whole = list(range(len(pool)))
    keep = args.keep
    if keep:
        os.makedirs(keep, exist_ok=True)
    tag = _settings_tag(args)
    whole_name = f"whole-{args.pool}-f{args.boot_final}x{args.target_seeds}.json"
    target_path = os.path.join(keep, whole_name) if keep else ""
    widths = _read_kept(target_path) if keep else None
    if widths is None:
        widths = [S.measure(pool, whole, args.boot_final, seed=k)["width"] for k in range(args.target_seeds)]
        if keep:
            _write_kept(target_path, widths)
    target = S.TARGET_FACTOR * float(np.mean(widths))
    pilots = S.draw_pilots(pool, S.PILOT_BUDGETS[args.pool], args.pilots, 0)
    paths = [os.path.join(keep, f"pilot{i:03d}-{tag}.json") if keep else "" for i in range(len(pilots))]
    results: list[Any] = [_read_kept(path) if keep else None for path in paths]
    same = [r is not None and r["pilot"] == [int(i) for i in p] for r, p in zip(results, pilots)]
    results = [r if ok else None for r, ok in zip(results, same)]
    todo = [i for i, r in enumerate(results) if r is None]
    if keep:
        print(f"{len(pilots) - len(todo)} of {len(pilots)} pilots read from {keep}", flush=True)
    settings = (args.boot, args.boot_final, args.final_seeds, args.max_share)
    tasks = [(args.pool, pilots[i], *settings) for i in todo]
    with ProcessPoolExecutor(max_workers=args.jobs) as ex:
        futures = {ex.submit(run_pilot, task): i for i, task in zip(todo, tasks)}
        for done in as_completed(futures):  # each pilot kept as soon as it ends
            i = futures[done]
            results[i] = done.result()
            if keep:
                _write_kept(paths[i], results[i])
    print(
        f"pool {args.pool}: whole-pool width {np.mean(widths):.4f} ({args.target_seeds} seeds), "
        f"target {target:.4f}"
    )
    head = " ".join(f"{100 * s:>6.0f}%" for s in READ_SHARES)
    print(f"{'pilot':>5} {'share to target':>16}  width at {head}   seconds")
    for i, res in enumerate(results):
        states = res["states"]
        hit = next((s["share"] for s in states if s["width_final"] <= target), None)
        res["share_to_target"] = hit
        cells = " ".join(f"{width_at(states, s):>7.4f}" for s in READ_SHARES)
        hit_text = f"{100 * hit:.1f}%" if hit is not None else f"> {100 * args.max_share:.0f}%"
        print(f"{i:>5} {hit_text:>16}  {cells}   {res['seconds']:.0f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "target": target, "whole_widths": widths, "pilots": results}, f)


if __name__ == "__main__":
    main()
