"""Coverage of phi's intervals and size of its tests, under real sweeps' noise and where the law misfits.

A rerunnable Monte-Carlo study.  Conditions where the law holds (tables simulated from it):

- ``independent``: the study's 116-run design (24 (budget, r) cells), its fitted law
  (phi = 0.459), log-noise sd 0.004 per run (R^2 ~ 0.997, as in the study);
- ``cell-shared``: the same, with sd 0.003 shared by each (budget, r) cell plus 0.003 per
  run (one data order, one seed, one learning-rate choice per cell, as real sweeps have);
- ``t3``: Student-t noise with 3 degrees of freedom, sd 0.004 per run;
- ``small``: a 44-run, 12-cell design like the bundled CPU table (its budgets, r values and
  parameter counts; the baseline recipe of ``data/cpu_small_runs.csv``), phi = 0.459 and the
  other parameters from that table's fit, log-noise sd 0.004;
- ``small-cell-shared``: the same 12-cell design with the noise the real CPU table has,
  sd 0.010 shared by each (budget, r) cell plus 0.013 per run: few clusters, and a null fit
  (5 free parameters) that absorbs much of the noise they share.

Conditions where the law misfits: a law-true condition (its *twin*: design, law, noise and
seeds, so table i of both has the same noise) whose log-losses are shifted by fixed offsets,
a property of the condition, the same in every table (:func:`log_offsets`):

- ``misfit-r4``: ``cell-shared`` with the r = 4 runs 0.0064 nats lower in log-loss, the
  study's own departure from r^phi;
- ``misfit-cells``: ``cell-shared`` with one fixed offset per (budget, r) cell, drawn once
  (seed 24) from N(0, 1), centred and scaled to sd 0.003: the cell-level spread of the study's
  residuals read as misfit, on top of the cell-shared noise of the same size;
- ``small-misfit-r``: ``small-cell-shared`` with the r = 1 runs 0.021 lower and the r = 2 runs
  0.017 higher, the pattern of the bundled CPU sweeps;
- ``small-misfit-cells``: ``small-cell-shared`` with fixed per-cell offsets of sd 0.010 (seed
  12), the CPU table's cell-level spread read as misfit.

Under misfit the target is still the phi of the law the tables were generated from (0.459 for
coverage, 0 for the size half): the offsets are misfit around that law, and a fit of the law
to them may settle elsewhere even without noise.  ``--summary`` prints that noiseless fit's phi
(the fit's own limit on this design), so a loss of coverage can be read as a shift of the
target or as intervals too narrow for the spread.  Likewise the "size" of the phi = 0 tests
under misfit is their rejection rate on tables generated with phi = 0 plus the offsets.

Per table, the same simulated table for every method (coverage, at the true phi):

- the reference Huber fit;
- the (budget, r) cell bootstrap: 95% percentile interval (the default) and BCa;
- the single-run bootstrap: 95% percentile interval.

Per table, for size (a second table from the same condition with true phi = 0):

- the chi-square likelihood-ratio test of phi = 0 (``phifit compare``'s, assumes
  independent runs) and the restricted wild cluster bootstrap test (:mod:`phifit.bootstrap.wild`),
  each rejecting at the 5% level.

Optional parts, on the coverage table (``--parts``):

- ``lack-of-fit``: the p of the wild test of r^phi against one free multiplier per r
  (:func:`phifit.diagnostics.multipliers.fit_multipliers`, ``--wild-replicates`` replicates,
  no cell bootstrap of the m_r): its size where the law holds, its power where it misfits;
- ``inverted``: the test-inverted set of phi (:func:`phifit.bootstrap.inverted.phi_confidence_set`)
  with the report's budget (:data:`INVERT`: 99 replicates per tested phi_0, at most 8 tested
  phi_0, ends placed to 0.25 where p hovers at the level): does it contain the true phi, is it
  one interval inside phi's box, its width.  The settings are recorded in each row.

Reported per condition: coverage +- its binomial standard error, the mean width against the
ideal 3.92 x sd(phi_hat) (the width of a normal interval with the true spread), the mean
phi_hat with a flag when its bias exceeds 2 standard errors, intervals that reach the search
box, the size of each test +- its binomial standard error, the lack-of-fit test's rejections
+- their binomial standard error, and the test-inverted set's coverage, how many sets are not
one bounded interval (censored by the box, or a union of pieces) and the mean width of those
that are.

``--parts`` picks what a table computes (default ``coverage size``; ``size`` alone is much
cheaper).  Results are appended, one JSON line per table, to ``--out`` (default
``benchmarks/results/coverage.jsonl``, not tracked); a rerun skips the parts of tables already
there, so the study resumes where it stopped.  Tables run in parallel processes (joblib).
Without ``--conditions`` a run does the law-true conditions and ``--summary`` every condition
``--out`` holds.

    python benchmarks/bootstrap_coverage.py --tables 600 --n-jobs 2            # the study
    python benchmarks/bootstrap_coverage.py --conditions small-cell-shared --parts size --tables 400
    python benchmarks/bootstrap_coverage.py --conditions misfit-r4 misfit-cells small-misfit-r \\
        small-misfit-cells --parts coverage size lack-of-fit --tables 400 --n-jobs 2
    python benchmarks/bootstrap_coverage.py --summary                         # print the table
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np

CONDITIONS = {
    "independent": {"design": "paper", "noise": 0.004},
    "cell-shared": {"design": "paper", "noise": 0.003, "cell_noise": 0.003},
    "t3": {"design": "paper", "noise": 0.004, "noise_df": 3.0},
    "small": {"design": "small", "noise": 0.004},
    "small-cell-shared": {"design": "small", "noise": 0.013, "cell_noise": 0.010},
    # where the law misfits: a law-true twin (design, law, noise, seeds) plus fixed log-loss offsets
    "misfit-r4": {"twin": "cell-shared", "offsets": {"r": {4: -0.0064}}},
    "misfit-cells": {"twin": "cell-shared", "offsets": {"cell_sd": 0.003, "seed": 24}},
    "small-misfit-r": {"twin": "small-cell-shared", "offsets": {"r": {1: -0.021, 2: 0.017}}},
    "small-misfit-cells": {"twin": "small-cell-shared", "offsets": {"cell_sd": 0.010, "seed": 12}},
}
#: The conditions where the law holds (the default of a run).
LAW_TRUE = tuple(c for c in CONDITIONS if "offsets" not in CONDITIONS[c])
#: What a table can compute; a run computes DEFAULT_PARTS unless ``--parts`` says otherwise.
PARTS = ("coverage", "size", "lack-of-fit", "inverted")
DEFAULT_PARTS = ("coverage", "size")
#: The budget of the test-inverted set: the report's (``phifit.report.analysis.REPORT_INVERT``)
#: with 99 wild replicates per tested phi_0.
INVERT = {"n_boot": 99, "max_tests": 8, "flat_width": 0.25}
TRUE_PHI = 0.459
LEVEL = 0.95
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "coverage.jsonl"


def _design(name: str):
    """(design frame, true params) of a condition."""
    from phifit import defaults
    from phifit.fitters.huber import fit_huber
    from phifit.recipes.pairing import select_recipe
    from phifit.runs.table import load_runs
    from phifit.study import REFERENCE_PARAMS

    if name == "paper":
        return "paper", dict(REFERENCE_PARAMS)
    runs = select_recipe(load_runs(ROOT / "data" / "cpu_small_runs.csv")).runs
    params = dict(fit_huber(runs, n_starts=defaults.N_STARTS).params)
    params["phi"] = TRUE_PHI
    frame = runs.frame[["run_id", "budget", "r", "n_once", "n_rec", "tokens"]].copy()
    return frame, params


def log_offsets(frame, offsets: dict | None) -> np.ndarray:
    """Each run's fixed log-loss offset under a condition's ``offsets`` (zeros for None).

    ``{"r": {r: d}}``: every run with that r is shifted by d (other r: 0);
    ``{"cell_sd": s, "seed": k}``: one offset per (budget, r) cell, cells in sorted (budget, r)
    order, drawn once from N(0, 1) with seed k, centred and scaled to standard deviation s
    (ddof 0), the same in every table of the condition.
    """
    n = len(frame)
    if not offsets:
        return np.zeros(n)
    if set(offsets) == {"r"}:
        r = frame["r"].to_numpy(dtype=float)
        out = np.zeros(n)
        for value, shift in offsets["r"].items():
            out[np.isclose(r, float(value))] = float(shift)
        return out
    if set(offsets) == {"cell_sd", "seed"}:
        keys = np.column_stack([frame["budget"].to_numpy(dtype=float), frame["r"].to_numpy(dtype=float)])
        cells, cell = np.unique(keys, axis=0, return_inverse=True)
        z = np.random.default_rng(offsets["seed"]).standard_normal(len(cells))
        return float(offsets["cell_sd"]) * ((z - z.mean()) / z.std())[cell.ravel()]
    raise ValueError(
        f"unknown offsets {offsets!r}; expected {{'r': {{r: d}}}} or {{'cell_sd': s, 'seed': k}}"
    )


def table_frame(condition: str, index: int, *, size: bool = False, design_cache: dict | None = None):
    """Simulated run table ``index`` of ``condition`` as a frame: the coverage table (true phi
    TRUE_PHI) or, with ``size``, the size table (true phi 0).  The noise and seed are the twin's
    (a law-true condition is its own twin), then the condition's fixed offsets are added to the
    log-losses (:func:`log_offsets`)."""
    from phifit.simulation import simulate

    spec = CONDITIONS[condition]
    noise_of = spec.get("twin", condition)
    settings = dict(CONDITIONS[noise_of])
    name = settings.pop("design")
    if design_cache is None:
        design_cache = {}
    if name not in design_cache:
        design_cache[name] = _design(name)
    design, params = design_cache[name]
    seed = 1_000_003 * (list(CONDITIONS).index(noise_of) + 1) + index + (500_000 if size else 0)
    frame = simulate(design, params={**params, "phi": 0.0 if size else TRUE_PHI}, seed=seed, **settings)
    if spec.get("offsets"):
        frame["loss"] = frame["loss"] * np.exp(log_offsets(frame, spec["offsets"]))
    return frame


def one_table(
    condition: str,
    index: int,
    replicates: int,
    wild_replicates: int,
    parts: tuple[str, ...] = DEFAULT_PARTS,
) -> dict:
    """Simulate, fit, bootstrap and test one table pair of ``condition`` (``parts``: what to
    compute); plain numbers."""
    from phifit.bootstrap.block import block_bootstrap
    from phifit.bootstrap.wild import wild_cluster_test
    from phifit.fitters.huber import fit_huber
    from phifit.fitters.likelihood import GaussianScore, lr_test
    from phifit.law import LawSpec, log_loss
    from phifit.runs.table import table_from_frame

    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"unknown parts {unknown}; expected some of {', '.join(PARTS)}")
    out: dict = {"condition": condition, "table": index}
    cache: dict = {}

    if {"coverage", "lack-of-fit", "inverted"} & set(parts):  # everything on the table at the true phi
        runs = table_from_frame(
            table_frame(condition, index, design_cache=cache), source=f"{condition} {index}"
        )
        point = fit_huber(runs, n_starts=200, seed=index)
    if "coverage" in parts:  # coverage at the true phi: every method on the same table
        out["phi_hat"] = point.phi
        for label, block in (("cell", None), ("run", "run")):
            boot = block_bootstrap(
                runs,
                point,
                n_boot=replicates,
                block=block,
                seed=index,
                n_jobs=1,
                progress=False,
                jackknife=label == "cell",
            )
            out[f"{label}_percentile"] = boot.ci["phi"]
            if label == "cell":
                out["cell_bca"] = boot.ci_bca["phi"]
            out[f"{label}_failed"] = boot.n_failed
    if "lack-of-fit" in parts:
        out.update(_lack_of_fit(runs, point, index, wild_replicates))
    if "inverted" in parts:
        out.update(_inverted(runs, point, index))
    if "size" not in parts:
        return out

    # size at phi = 0: a table where phi = 0 is true (plus the condition's offsets)
    runs0 = table_from_frame(
        table_frame(condition, index, size=True, design_cache=cache), source=f"{condition} {index} (phi = 0)"
    )
    free = fit_huber(runs0, n_starts=200, seed=index)
    null = fit_huber(runs0, n_starts=200, seed=index, spec=LawSpec(fixed={"phi": 0.0}))
    scores = [
        GaussianScore.from_residuals(runs0.log_loss - log_loss(f.theta, runs0.design), 6 - len(f.spec.fixed))
        for f in (free, null)
    ]
    out["chi2_p"] = lr_test(scores[0], scores[1], 1).p_value
    wild = wild_cluster_test(runs0, free, null, n_boot=wild_replicates, seed=index, n_jobs=1)
    out["wild_p"] = wild.p_value
    out["wild_weights"], out["wild_adjust"] = wild.weights, wild.adjust
    return out


def _number(value) -> float | None:
    return None if value is None or value != value else float(value)


def _lack_of_fit(runs, point, index: int, wild_replicates: int) -> dict:
    """The wild test of r^phi against free multipliers on the coverage table (no m_r intervals)."""
    from phifit.diagnostics.multipliers import fit_multipliers

    mult = fit_multipliers(runs, point, n_boot=0, n_wild=wild_replicates, seed=index, n_starts=100, n_jobs=1)
    return {
        "lof_p": _number(mult.p_value),
        "lof_statistic": _number(mult.statistic),
        "lof_testable": mult.testable,
        "lof_n_wild": wild_replicates,
    }


def _inverted(runs, point, index: int) -> dict:
    """The test-inverted set of phi on the coverage table, with the :data:`INVERT` budget."""
    from phifit.bootstrap.inverted import phi_confidence_set

    inv = phi_confidence_set(runs, point, level=LEVEL, seed=index, n_jobs=1, **INVERT)
    return {
        "inv_pieces": [list(p) for p in inv.pieces],
        "inv_censored": [list(c) for c in inv.censored],
        "inv_covers": inv.contains(TRUE_PHI),
        "inv_interval": inv.is_interval,
        "inv_n_tested": len(inv.grid),
        "inv_resolved": not any(w.kind == "inverted_not_resolved" for w in inv.warnings),
        "inv_failed": inv.total_failed,
        "inv_settings": dict(INVERT),
    }


#: The key a row holds when it has computed each part (a lack-of-fit p may be None: untestable).
PART_KEYS = {"coverage": "phi_hat", "size": "wild_p", "lack-of-fit": "lof_p", "inverted": "inv_pieces"}


def _done(path: Path) -> set[tuple[str, int, str]]:
    if not path.exists():
        return set()
    keys = set()
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            for part, key in PART_KEYS.items():
                if key in row:
                    keys.add((row["condition"], row["table"], part))
    return keys


def run(args: argparse.Namespace) -> None:
    from joblib import Parallel, delayed

    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _done(path)
    # conditions interleaved, so that a study stopped early has every condition at a similar count;
    # a table computes only the parts it still lacks
    todo = []
    for i in range(args.tables):
        for c in args.conditions:
            missing = tuple(part for part in args.parts if (c, i, part) not in done)
            if missing:
                todo.append((c, i, missing))
    print(f"{len(todo)} tables to go -> {path}", flush=True)
    start = time.perf_counter()
    jobs = (delayed(one_table)(c, i, args.replicates, args.wild_replicates, parts) for c, i, parts in todo)
    with path.open("a", encoding="utf-8") as fh:
        for k, row in enumerate(Parallel(n_jobs=args.n_jobs, return_as="generator")(jobs), 1):
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            if k % 20 == 0 or k == len(todo):
                rate = (time.perf_counter() - start) / k
                print(f"  {k}/{len(todo)} tables, {rate:.1f} s each", flush=True)


def noiseless_phi(condition: str) -> float:
    """phi of the law fitted to the condition's table without noise (its design, the true phi
    and its offsets): where the fit settles on this design when only the misfit moves it."""
    from phifit.fitters.huber import fit_huber
    from phifit.runs.table import table_from_frame
    from phifit.simulation import simulate

    spec = CONDITIONS[condition]
    settings = dict(CONDITIONS[spec.get("twin", condition)])
    design, params = _design(settings["design"])
    frame = simulate(design, params={**params, "phi": TRUE_PHI})
    frame["loss"] = frame["loss"] * np.exp(log_offsets(frame, spec.get("offsets")))
    return float(fit_huber(table_from_frame(frame, source=f"{condition} noiseless"), n_starts=200).phi)


def _share(hits: np.ndarray) -> str:
    n = len(hits)
    p = float(np.mean(hits)) if n else math.nan
    return f"{100 * p:5.1f} ± {100 * math.sqrt(p * (1 - p) / n):.1f}%" if n else "n/a"


def _interval_array(sub: list[dict], key: str) -> np.ndarray:
    return np.array([r[key] if r[key] and None not in r[key] else [np.nan, np.nan] for r in sub], float)


def _covered_or_flagged(rows: list[dict]) -> str:
    """Where the law misfits, how often a user is either covered or told: the cell percentile
    interval covers the generating phi, or the report flags the table (the lack-of-fit test of
    r^phi rejects at 5%, or an end of the interval sits at phi's box and prints as "search bound:
    not determined").  A miss that nothing flags is the failure that matters."""
    ci = _interval_array(rows, "cell_percentile")
    covers = (ci[:, 0] <= TRUE_PHI) & (TRUE_PHI <= ci[:, 1])
    lof = np.array([r["lof_p"] is not None and r["lof_p"] < 0.05 for r in rows])
    at_box = (ci[:, 0] <= -3 + 1e-6) | (ci[:, 1] >= 3 - 1e-6)
    return (
        f"covered or flagged {_share(covers | lof | at_box).strip()} (lack of fit rejects: "
        f"{int(lof.sum())}, an end at the box: {int(at_box.sum())}, neither and missed: "
        f"{int((~covers & ~lof & ~at_box).sum())} of {len(rows)})"
    )


def summarise(path: Path, conditions: list[str] | None = None) -> str:
    """The study's table: every condition ``path`` holds (or ``conditions``), in CONDITIONS order."""
    merged: dict[tuple[str, int], dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            # a table's parts may come from separate runs (--parts); a part written twice counts once
            merged.setdefault((row["condition"], row["table"]), {}).update(row)
    rows = list(merged.values())
    if conditions is None:
        present = {r["condition"] for r in rows}
        conditions = [c for c in CONDITIONS if c in present]
    lines = [
        f"{'condition':<18} {'tables':>6} {'method':<16} {'coverage':>14} {'width/ideal':>11} "
        f"{'at bound':>8}",
    ]
    size_lines = [f"{'condition':<18} {'tables':>6} {'chi2 LR size':>14} {'wild size':>14}"]
    lof_lines = [f"{'condition':<18} {'tables':>6} {'testable':>8} {'rejects at 5%':>14}  reads as"]
    inv_lines = [
        f"{'condition':<18} {'tables':>6} {'coverage':>14} {'censored':>8} {'union':>5} {'empty':>5} "
        f"{'unresolved':>10} {'mean width (intervals)':>24}  settings"
    ]
    for condition in conditions:
        every = [r for r in rows if r["condition"] == condition]
        misfit = "offsets" in CONDITIONS[condition]
        tested = [r for r in every if "wild_p" in r]
        sub = [r for r in every if "phi_hat" in r]
        lof = [r for r in every if "lof_p" in r]
        inv = [r for r in every if "inv_pieces" in r]
        if tested:
            chi2 = np.array([r["chi2_p"] < 0.05 for r in tested])
            wild = np.array([r["wild_p"] < 0.05 for r in tested])
            size_lines.append(f"{condition:<18} {len(tested):>6} {_share(chi2):>14} {_share(wild):>14}")
        if lof:
            p = np.array([r["lof_p"] for r in lof if r["lof_p"] is not None], float)
            lof_lines.append(
                f"{condition:<18} {len(lof):>6} {len(p):>8} {_share(p < 0.05):>14}  "
                + ("power (the law misfits)" if misfit else "size (the law holds)")
            )
        ideal = math.nan
        if len(sub) > 1:
            phi_hat = np.array([r["phi_hat"] for r in sub])
            sd = float(np.std(phi_hat, ddof=1))
            ideal = 2 * 1.959964 * sd
            bias = float(np.mean(phi_hat) - TRUE_PHI)
            bias_se = sd / math.sqrt(len(sub))
            flag = "  BIAS > 2 SE" if abs(bias) > 2 * bias_se else ""
            for key, label in (
                ("cell_percentile", "cell percentile"),
                ("cell_bca", "cell BCa"),
                ("run_percentile", "run percentile"),
            ):
                ci = _interval_array(sub, key)
                cover = (ci[:, 0] <= TRUE_PHI) & (TRUE_PHI <= ci[:, 1])
                width = float(np.nanmean(ci[:, 1] - ci[:, 0]))
                at_bound = int(np.sum((ci[:, 0] <= -3 + 1e-6) | (ci[:, 1] >= 3 - 1e-6)))
                lines.append(
                    f"{condition:<18} {len(sub):>6} {label:<16} {_share(cover):>14} "
                    f"{width / ideal:>11.2f} {at_bound:>8}"
                )
            lines.append(
                f"{'':<18} {'':>6} mean phi_hat {np.mean(phi_hat):.4f} (bias {bias:+.4f} ± {bias_se:.4f}), "
                f"sd(phi_hat) {sd:.4f}{flag}"
            )
            if misfit:
                target = noiseless_phi(condition)
                ci = _interval_array(sub, "cell_percentile")
                lines.append(
                    f"{'':<18} {'':>6} noiseless fit's phi {target:.4f}: the cell percentile interval "
                    f"covers it in {_share((ci[:, 0] <= target) & (target <= ci[:, 1])).strip()}"
                )
                both = [r for r in sub if "lof_p" in r]
                if both:
                    lines.append(f"{'':<18} {'':>6} {_covered_or_flagged(both)}")
        if inv:
            covers = np.array([bool(r["inv_covers"]) for r in inv])
            censored = sum(any(c for pair in r["inv_censored"] for c in pair) for r in inv)
            union = sum(len(r["inv_pieces"]) > 1 for r in inv)
            empty = sum(not r["inv_pieces"] for r in inv)
            unresolved = sum(not r["inv_resolved"] for r in inv)
            widths = np.array(
                [
                    r["inv_pieces"][0][1] - r["inv_pieces"][0][0]
                    for r in inv
                    if len(r["inv_pieces"]) == 1 and not any(r["inv_censored"][0])
                ]
            )
            if len(widths) > 1:
                se = float(np.std(widths, ddof=1)) / math.sqrt(len(widths))
                width = f"{np.mean(widths):.4f} ± {se:.4f}" + (
                    f" ({np.mean(widths) / ideal:.2f}× ideal)" if ideal == ideal else ""
                )
            else:
                width = "n/a"
            kinds = {json.dumps(r.get("inv_settings"), sort_keys=True) for r in inv}
            settings = kinds.pop() if len(kinds) == 1 else "mixed"
            inv_lines.append(
                f"{condition:<18} {len(inv):>6} {_share(covers):>14} {censored:>8} {union:>5} {empty:>5} "
                f"{unresolved:>10} {width:>24}  {settings}"
            )
    out = lines + [
        "",
        "size at 5% of the tests of phi = 0 (tables where phi = 0 is true; misfit conditions: "
        "phi = 0 plus their offsets):",
        *size_lines,
    ]
    if len(lof_lines) > 1:
        out += [
            "",
            "lack-of-fit test of r^phi against free multipliers (on the coverage tables):",
            *lof_lines,
        ]
    if len(inv_lines) > 1:
        out += [
            "",
            "test-inverted set of phi (coverage of the true phi; censored: reaches phi's box; union: "
            "several pieces; width of the sets that are one bounded interval ± its SE):",
            *inv_lines,
        ]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=600, help="tables per condition (default 600)")
    parser.add_argument("--replicates", type=int, default=300, help="bootstrap replicates per interval")
    parser.add_argument(
        "--wild-replicates",
        type=int,
        default=199,
        help="wild bootstrap replicates per test (and lack of fit)",
    )
    parser.add_argument(
        "--conditions",
        nargs="*",
        default=None,
        choices=list(CONDITIONS),
        help="default: a run does the law-true conditions, --summary every condition --out holds",
    )
    parser.add_argument(
        "--parts", nargs="*", default=list(DEFAULT_PARTS), choices=PARTS, help="what to compute"
    )
    parser.add_argument("--n-jobs", type=int, default=2, help="tables in parallel (processes)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="JSON lines, one per table (resumable)")
    parser.add_argument("--summary", action="store_true", help="only summarise what --out holds")
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if not args.summary:
        run(argparse.Namespace(**{**vars(args), "conditions": args.conditions or list(LAW_TRUE)}))
    print(summarise(Path(args.out), args.conditions))


if __name__ == "__main__":
    main()
