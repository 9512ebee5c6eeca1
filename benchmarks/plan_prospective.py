"""Prospective calibration of `phifit plan`: pilots that lack part of what the design measures.

The retrospective calibration (``benchmarks/plan_real_calibration.py``) plans sub-designs from pilots
that had mostly seen their r values and cells.  Here every pilot lacks something the design measures:
a looped r (pilots with r in {1, 4}, {1, 2}, {1, 8}), the upper budgets, or both; the CPU tables are
planned from the pilots they grew from.  Each case runs the command a user runs,

    phifit plan --pilot PILOT.csv --design DESIGN.csv --simulate N --json PLAN.json

(its defaults: Huber fit of the pilot, its misfit carried, ``N`` simulated tables each with its cell
bootstrap), and compares:

- **predicted**: the median and the 10-90% range of the simulated tables' 95% interval widths of phi,
  and whether the plan gave a width (``width_is_precision``) or declined it with a caution;
- **realised**: the design's own runs fitted (Huber) and cell-bootstrapped (1000 replicates) under
  ``--boot-seeds`` seeds: the mean width and its Monte-Carlo standard error across seeds;
- **covered**: whether the realised width lies inside the predicted 10-90% range; **beyond every
  table**: whether it lies outside the range of all N simulated tables, and if so whether a caution
  (a ``pilot_*`` warning of the plan) said before the runs that the pilot could not see it.

The summary gives the coverage of the 10-90% ranges over all cases (aim about 80%) with its binomial
standard error, and the cases beyond every table without a caution (aim none).

    python benchmarks/plan_prospective.py --tables 50 --json prospective.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "data" / "looped_study_runs_digitized.csv"


def _budgets(lo: int, hi: int | None = None) -> Callable[[pd.DataFrame], np.ndarray]:
    return lambda f: f["budget"].isin(sorted(f["budget"].unique())[lo:hi]).to_numpy()


def _rs(*values: int) -> Callable[[pd.DataFrame], np.ndarray]:
    return lambda f: f["r"].isin(values).to_numpy()


def _both(a: Callable, b: Callable) -> Callable[[pd.DataFrame], np.ndarray]:
    return lambda f: a(f) & b(f)


def _every(f: pd.DataFrame) -> np.ndarray:
    return np.ones(len(f), bool)


def study_cases() -> list[tuple[str, Callable, Callable]]:
    """(name, pilot mask, design mask) over the study's runs: every pilot lacks a looped r, the upper
    budgets, or both."""
    return [
        ("all 116, from r in {1, 4} at the 2 lowest budgets", _both(_rs(1, 4), _budgets(0, 2)), _every),
        ("all 116, from r in {1, 4} at the 3 lowest budgets", _both(_rs(1, 4), _budgets(0, 3)), _every),
        (
            "4 highest budgets, from r in {1, 4} at the 2 lowest",
            _both(_rs(1, 4), _budgets(0, 2)),
            _budgets(2),
        ),
        (
            "3 highest budgets, from r in {1, 4} at the 3 lowest",
            _both(_rs(1, 4), _budgets(0, 3)),
            _budgets(3),
        ),
        ("all 116, from r in {1, 2} at the 2 lowest budgets", _both(_rs(1, 2), _budgets(0, 2)), _every),
        ("all 116, from r in {1, 2} at the 3 lowest budgets", _both(_rs(1, 2), _budgets(0, 3)), _every),
        ("all 116, from r in {1, 8} at the 3 lowest budgets", _both(_rs(1, 8), _budgets(0, 3)), _every),
        ("all 116, from r in {1, 2, 4} at the 2 lowest budgets", _both(_rs(1, 2, 4), _budgets(0, 2)), _every),
        ("all 116, from every r at the 2 lowest budgets", _budgets(0, 2), _every),
        ("all 116, from r in {1, 4} at every budget", _rs(1, 4), _every),
        ("all 116, from r in {1, 2, 4} at the 3 lowest budgets", _both(_rs(1, 2, 4), _budgets(0, 3)), _every),
    ]


def loop_pilot(table: Path, rounds: Path) -> pd.DataFrame:
    """The runs an adaptive loop's pilot held: every run of ``table`` not picked by a decision of
    the round log ``rounds``."""
    picked = set()
    for line in rounds.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("event") == "decision":
            picked |= {pick["run_id"] for pick in record.get("picks") or []}
    frame = pd.read_csv(table)
    return frame[~frame["run_id"].isin(picked)].reset_index(drop=True)


def cpu_cases() -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """(name, pilot, design) of the bundled CPU tables, each planned from the pilot it grew from."""
    data = ROOT / "data"
    bpe = pd.read_csv(data / "cpu_bpe_runs.csv")
    adaptive = pd.read_csv(data / "cpu_adaptive_runs.csv")
    return [
        ("cpu_bpe, from the regime study's 16 BPE runs", pd.read_csv(data / "regime" / "bpe_runs.csv"), bpe),
        (
            "cpu_bpe, from its loop's 32-run pilot",
            loop_pilot(data / "cpu_bpe_runs.csv", data / "cpu_bpe_rounds.jsonl"),
            bpe,
        ),
        (
            "cpu_planned, from cpu_small",
            pd.read_csv(data / "cpu_small_runs.csv"),
            pd.read_csv(data / "cpu_planned_runs.csv"),
        ),
        ("cpu_adaptive, from cpu_recipe", pd.read_csv(data / "cpu_recipe_runs.csv"), adaptive),
        (
            "cpu_adaptive, from its loop's pilot",
            loop_pilot(data / "cpu_adaptive_runs.csv", data / "cpu_adaptive_rounds.jsonl"),
            adaptive,
        ),
    ]


def baseline(frame: pd.DataFrame) -> pd.DataFrame:
    """The baseline recipe's runs of a table with a ``variant`` column (the plan's and the fit's)."""
    if "variant" in frame and frame["variant"].nunique() > 1:
        return frame[frame["variant"] == "baseline"].reset_index(drop=True)
    return frame


def realised(design: pd.DataFrame, boot_seeds: int, n_jobs: int) -> dict:
    """The design's own runs: Huber fit, 1000-replicate cell bootstrap under each seed; the mean
    width of phi's 95% percentile interval and its Monte-Carlo standard error across seeds."""
    from phifit.bootstrap.block import block_bootstrap
    from phifit.fitters.huber import fit_huber
    from phifit.runs.table import table_from_frame

    runs = table_from_frame(design, source="design")
    fit = fit_huber(runs)
    widths = []
    for seed in range(boot_seeds):
        boot = block_bootstrap(
            runs, fit, n_boot=1000, seed=seed, n_jobs=n_jobs, progress=False, jackknife=False
        )
        lo, hi = boot.ci["phi"]
        widths.append(float(hi - lo) if lo is not None and hi is not None else float("nan"))
    w = np.array(widths)
    se = float(w.std(ddof=1) / np.sqrt(len(w))) if len(w) > 1 else float("nan")
    return {"phi": float(fit.params["phi"]), "width": float(np.mean(w)), "width_mc_se": se, "widths": widths}


def plan(pilot: pd.DataFrame, design: pd.DataFrame, tables: int, seed: int, workdir: Path) -> dict:
    """``phifit plan --pilot --design --simulate`` as a user runs it; the parsed JSON."""
    pilot_csv, design_csv, out = workdir / "pilot.csv", workdir / "design.csv", workdir / "plan.json"
    pilot.to_csv(pilot_csv, index=False)
    design.to_csv(design_csv, index=False)
    command = [sys.executable, "-m", "phifit", "plan", "--pilot", str(pilot_csv), "--design", str(design_csv)]
    command += ["--simulate", str(tables), "--seed", str(seed), "--json", str(out), "--force"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"phifit plan failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


def read_case(name: str, pilot: pd.DataFrame, design: pd.DataFrame, args) -> dict:
    """One row of the calibration: the plan's prediction against the design's realised width."""
    with tempfile.TemporaryDirectory() as tmp:
        predicted = plan(pilot, design, args.tables, args.seed, Path(tmp))
    real = realised(baseline(design), args.boot_seeds, args.jobs)
    sim = predicted["simulation"]
    widths = np.array([t["width"] for t in sim["tables"] if t.get("width") is not None], float)
    cautions = sorted(
        {w["kind"] for w in predicted.get("warnings") or [] if str(w.get("kind", "")).startswith("pilot_")}
    )
    w = real["width"]
    return {
        "case": name,
        "n_pilot": len(baseline(pilot)),
        "n_design": len(baseline(design)),
        "pilot_r": sorted(int(r) for r in baseline(pilot)["r"].unique()),
        "predicted_median": sim["width_median"],
        "predicted_q10": sim["width_q10"],
        "predicted_q90": sim["width_q90"],
        "width_given": bool(predicted.get("width_is_precision")),
        "cautions": cautions,
        "realised": real,
        "covered": bool(sim["width_q10"] <= w <= sim["width_q90"]),
        "beyond_every_table": bool(len(widths) and (w > widths.max() or w < widths.min())),
        "ratio": sim["width_median"] / w,
    }


def summary(rows: list[dict]) -> str:
    """The coverage of the 10-90% ranges (with its binomial standard error) and the misses."""
    n = len(rows)
    covered = sum(r["covered"] for r in rows)
    share = covered / n
    se = np.sqrt(share * (1 - share) / n)
    silent = [r["case"] for r in rows if r["beyond_every_table"] and not r["cautions"]]
    given = [r for r in rows if r["width_given"]]
    covered_given = sum(r["covered"] for r in given)
    lines = [
        f"coverage of the predicted 10-90% ranges: {covered} of {n} cases "
        f"({share:.0%} +- {se:.0%} binomial se; aim about 80%)",
        f"  among the {len(given)} plans that gave a width: {covered_given} of {len(given)}",
        f"  a range that holds or a width declined with its reason: "
        f"{sum(r['covered'] or not r['width_given'] for r in rows)} of {n}",
        f"  realised width beyond every simulated table: {sum(r['beyond_every_table'] for r in rows)} cases, "
        f"{len(silent)} of them without a caution" + (f" ({'; '.join(silent)})" if silent else ""),
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tables", type=int, default=50, help="simulated tables per plan (phifit plan --simulate N)"
    )
    ap.add_argument(
        "--boot-seeds", type=int, default=3, dest="boot_seeds", help="bootstrap seeds per realised width"
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="seed of the plans' simulations")
    ap.add_argument("--only", default=None, help="run the cases whose name contains this text")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    study = pd.read_csv(STUDY)
    cases = [(name, study[pm(study)], study[dm(study)]) for name, pm, dm in study_cases()] + cpu_cases()
    rows = []
    print(
        f"{'case':54} {'pilot':>5} {'runs':>4} {'predicted [10%, 90%]':>24} {'realised (MC se)':>17} "
        f"{'in':>3} {'beyond':>6}  cautions"
    )
    for name, pilot, design in cases:
        if args.only and args.only not in name:
            continue
        row = read_case(name, pilot.reset_index(drop=True), design.reset_index(drop=True), args)
        rows.append(row)
        band = f"[{row['predicted_q10']:.3g}, {row['predicted_q90']:.3g}]"
        real = f"{row['realised']['width']:.3g} ({row['realised']['width_mc_se']:.2g})"
        given = "" if row["width_given"] else " (width declined)"
        print(
            f"{name:54} {row['n_pilot']:>5} {row['n_design']:>4} {row['predicted_median']:>8.3g} {band:>15} "
            f"{real:>17} {'yes' if row['covered'] else 'no':>3} "
            f"{'yes' if row['beyond_every_table'] else 'no':>6}  "
            f"{', '.join(row['cautions']) or '-'}{given}",
            flush=True,
        )
    if rows:
        print("\n" + summary(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "cases": rows}, f, indent=1, default=float)


if __name__ == "__main__":
    main()
