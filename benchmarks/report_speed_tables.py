"""Wall time of ``phifit report`` on every shipped table and on three degenerate tables, old
code against new code side by side in one run, and the numbers that moved.

The degenerate tables are built here, deterministically (no files to ship):

a. ``one_token_count``: 10 looped runs at one token count, no ``budget`` column (every run
   is its own cluster), loss U-shaped in r (the law's loss at phi = 0.5 times
   exp(0.02 (ln r - ln 4)^2): looping helps up to r = 4, then hurts, as a real third-party
   sweep does);
b. ``two_budgets``: 7 runs of the study's table at its two smallest budgets (4 + 3);
c. ``outlier``: 12 runs of the study's table (two per budget, r = 1 and r = 4, the
   smallest size), one loss raised by 5 %.

"Old" is the code at ``--old REV`` (default: the commit before this benchmark's first
change), checked out in a temporary git worktree and run in a fresh process with
``PYTHONPATH`` pointing at it; "new" is this checkout.  Each report runs in its own process
(``python -m phifit report TABLE --out DIR``), so the times are whole-process wall times.
Then every number of the two ``results.json`` is compared; those that differ are listed with
old, new and the difference.  Every table gets the plain command with its defaults (1000
block-bootstrap replicates, 999 wild replicates); the shipped ``reports/cpu_adaptive`` and
``reports/cpu_planned`` were written with ``--plan self`` as well, which is not timed here.

Run:  python benchmarks/report_speed_tables.py [--old REV] [--only NAME ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The commit before the report's speed work (the "old" code).
OLD_REV = "a363127"
STUDY = os.path.join(ROOT, "data", "looped_study_runs_digitized.csv")


def one_token_count() -> pd.DataFrame:
    """Table (a): 10 runs at one token count, no budget column, loss U-shaped in r."""
    from phifit.simulation import simulate

    r = np.array([1, 2, 3, 4, 5, 6, 8, 10, 12, 16])
    n_once = np.full(r.size, 4.0e6)
    n_rec = np.full(r.size, 3.0e7)
    design = pd.DataFrame(
        {
            "run_id": [f"r{k}" for k in r],
            "r": r,
            "n_once": n_once,
            "n_rec": n_rec,
            "tokens": np.full(r.size, 2.0e9),
        }
    )
    frame = simulate(design, params={"phi": 0.5}, noise=0.0, seed=0)
    frame["loss"] = frame["loss"] * np.exp(0.02 * (np.log(r) - np.log(4.0)) ** 2)
    return frame[["run_id", "r", "n_once", "n_rec", "tokens", "loss"]]


def two_budgets() -> pd.DataFrame:
    """Table (b): 7 runs of the study's table at its two smallest budgets."""
    study = pd.read_csv(STUDY)
    low = sorted(study["budget"].unique())[:2]
    rows = []
    for budget, take in zip(low, ((1, 2, 4, 8), (1, 4, 8)), strict=True):
        cell = study[study["budget"] == budget]
        for r in take:
            rows.append(cell[cell["r"] == r].iloc[0])
    return pd.DataFrame(rows).reset_index(drop=True)


def outlier() -> pd.DataFrame:
    """Table (c): 12 runs of the study's table, one loss raised by 5 %."""
    study = pd.read_csv(STUDY)
    rows = []
    for budget in sorted(study["budget"].unique()):
        for r in (1, 4):
            cell = study[(study["budget"] == budget) & (study["r"] == r)]
            rows.append(cell.iloc[0])
    frame = pd.DataFrame(rows).reset_index(drop=True)
    frame.loc[5, "loss"] = frame.loc[5, "loss"] * 1.05
    return frame


DEGENERATE = {"one_token_count": one_token_count, "two_budgets": two_budgets, "outlier": outlier}


def shipped_tables() -> dict[str, str]:
    """The tables behind ``reports/*/`` (``reports/NAME`` comes from ``data/NAME_runs*.csv``)."""
    out = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "reports"))):
        for cand in (f"{name}_runs.csv", f"{name}_runs_digitized.csv", f"{name}.csv"):
            path = os.path.join(ROOT, "data", cand)
            if os.path.exists(path):
                out[name] = path
                break
    return out


def run_report(code_root: str, table: str, out: str) -> float:
    env = dict(os.environ, PYTHONPATH=code_root)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "phifit", "report", table, "--out", out, "--force"],
        env=env,
        cwd=code_root,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"report failed ({code_root}, {table}):\n{proc.stderr[-2000:]}")
    return wall


#: Keys of results.json that are not results: wall-clock times (the plan's "seconds"), provenance.
SKIP = {
    "timings",
    "seconds",
    "created",
    "generator",
    "version",
    "python",
    "platform",
    "command",
    "source",
    "out",
}


def moved(old, new, path="", tol=1e-12):
    """Every number that differs between two JSON trees: (path, old, new)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key in SKIP:
                continue
            if key not in old or key not in new:
                yield f"{path}/{key}", old.get(key, "absent"), new.get(key, "absent")
            else:
                yield from moved(old[key], new[key], f"{path}/{key}", tol)
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            yield f"{path}[len]", len(old), len(new)
        for k, (a, b) in enumerate(zip(old, new, strict=False)):
            yield from moved(a, b, f"{path}[{k}]", tol)
    elif isinstance(old, bool) or isinstance(new, bool) or isinstance(old, str) or isinstance(new, str):
        if old != new:
            yield path, old, new
    elif isinstance(old, (int, float)) and isinstance(new, (int, float)):
        if not (math.isclose(old, new, rel_tol=tol, abs_tol=tol) or (math.isnan(old) and math.isnan(new))):
            yield path, old, new
    elif old != new:
        yield path, old, new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=OLD_REV, help="revision of the old code")
    parser.add_argument("--only", nargs="*", default=None, help="table names to run")
    parser.add_argument("--keep", default=None, help="keep the reports under this folder")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="report_speed_")
    old_root = os.path.join(work, "old_code")
    if not os.path.exists(old_root):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", old_root, args.old], check=True)
    tables = shipped_tables()
    for name, build in DEGENERATE.items():
        path = os.path.join(work, f"{name}.csv")
        build().to_csv(path, index=False)
        tables[name] = path
    if args.only:
        tables = {k: v for k, v in tables.items() if k in args.only}
    print(f"CPUs visible: {os.cpu_count()}; old = {args.old}, new = this checkout")
    print(f"{'table':<24}{'runs':>6}{'old s':>9}{'new s':>9}  numbers moved")
    for name, path in tables.items():
        n = len(pd.read_csv(path))
        old_out, new_out = os.path.join(work, name, "old"), os.path.join(work, name, "new")
        t_old = run_report(old_root, path, old_out)
        t_new = run_report(ROOT, path, new_out)
        with open(os.path.join(old_out, "results.json")) as f:
            a = json.load(f)
        with open(os.path.join(new_out, "results.json")) as f:
            b = json.load(f)
        diffs = list(moved(a, b))
        print(f"{name:<24}{n:>6}{t_old:>9.1f}{t_new:>9.1f}  {len(diffs)}", flush=True)
        for key, x, y in diffs[:40]:
            delta = f" ({y - x:+.3g})" if isinstance(x, (int, float)) and isinstance(y, (int, float)) else ""
            print(f"    {key}: {x} -> {y}{delta}")
    if not args.keep:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", old_root], check=False)


if __name__ == "__main__":
    main()
