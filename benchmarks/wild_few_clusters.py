"""Size and power of the restricted wild cluster bootstrap on a few-cluster design, per correction.

The bundled CPU sweep has 12 (budget, r) cells.  Under phi = 0 the restricted law keeps 5 free
parameters, which absorb much of the noise its cells share, so sign flips of its raw residuals
generate too little noise and the test over-rejects.  This study simulates tables of that
design (the 44 baseline runs of ``data/cpu_small_runs.csv``, their fitted law, log-noise sd
0.010 shared per cell plus 0.013 per run, as the real table's residuals) and tests phi = 0 on
each with every correction of :mod:`phifit.bootstrap.wild` from the same seed:

- weights: Rademacher signs or Webb's six points;
- residuals: raw, rescaled by sqrt(G / (G - k0)), only their cell means rescaled so, only
  their cell means divided by sqrt(1 - h_c) (the default; h_c the null fit's share of a shift
  common to the cell), or CR2 leverage-adjusted.

``--phi 0`` measures size (rejections at 5% of a true restriction), ``--phi 0.583`` power
(the CPU table's own fit).  One JSON line per table in ``--out`` (resumable); ``--summary``
prints rejection rates with their binomial standard errors and the p-value deciles.

    python benchmarks/wild_few_clusters.py --tables 400 --phi 0 --n-jobs 2
    python benchmarks/wild_few_clusters.py --tables 200 --phi 0.583 --n-jobs 2
    python benchmarks/wild_few_clusters.py --summary
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "wild_few_clusters.jsonl"
VARIANTS = {
    "rademacher raw": ("rademacher", "none"),
    "rademacher rescaled": ("rademacher", "rescale"),
    "rademacher CR2": ("rademacher", "cr2"),
    "rademacher means rescaled": ("rademacher", "rescale-means"),
    "rademacher cell leverage": ("rademacher", "cell-leverage"),
    "webb rescaled": ("webb", "rescale"),
    "webb CR2": ("webb", "cr2"),
}
DEFAULT_VARIANTS = ["rademacher raw", "rademacher cell leverage"]
NOISE, CELL_NOISE = 0.013, 0.010


def _design():
    from phifit import defaults
    from phifit.fitters.huber import fit_huber
    from phifit.recipes.pairing import select_recipe
    from phifit.runs.table import load_runs

    runs = select_recipe(load_runs(ROOT / "data" / "cpu_small_runs.csv")).runs
    params = dict(fit_huber(runs, n_starts=defaults.N_STARTS).params)
    frame = runs.frame[["run_id", "budget", "r", "n_once", "n_rec", "tokens"]].copy()
    return frame, params


def one_table(phi: float, index: int, n_wild: int, variants: list[str]) -> dict:
    """Simulate one table with true ``phi``, fit free and phi = 0, test with every variant."""
    from phifit.bootstrap.wild import wild_cluster_test
    from phifit.fitters.huber import fit_huber
    from phifit.law import LawSpec
    from phifit.runs.table import table_from_frame
    from phifit.simulation import simulate

    design, params = _design()
    seed = 7_000_003 + 1009 * int(round(1000 * phi)) + index
    frame = simulate(design, params={**params, "phi": phi}, noise=NOISE, cell_noise=CELL_NOISE, seed=seed)
    runs = table_from_frame(frame, source=f"table {index}")
    free = fit_huber(runs, n_starts=100, seed=index)
    null = fit_huber(runs, n_starts=100, seed=index, spec=LawSpec(fixed={"phi": 0.0}))
    out: dict = {"phi": phi, "table": index, "phi_hat": free.phi}
    for name in variants:
        weights, adjust = VARIANTS[name]
        test = wild_cluster_test(
            runs, free, null, n_boot=n_wild, seed=index, n_jobs=1, weights=weights, adjust=adjust
        )
        out[name] = test.p_value
    return out


def run(args: argparse.Namespace) -> None:
    from joblib import Parallel, delayed

    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done.add((row["phi"], row["table"]))
    todo = [i for i in range(args.tables) if (args.phi, i) not in done]
    print(f"{len(todo)} tables to go -> {path}", flush=True)
    start = time.perf_counter()
    jobs = (delayed(one_table)(args.phi, i, args.wild_replicates, args.variants) for i in todo)
    with path.open("a", encoding="utf-8") as fh:
        for k, row in enumerate(Parallel(n_jobs=args.n_jobs, return_as="generator")(jobs), 1):
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            if k % 20 == 0 or k == len(todo):
                print(f"  {k}/{len(todo)} tables, {(time.perf_counter() - start) / k:.1f} s each", flush=True)


def summarise(path: Path) -> str:
    rows = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[(row["phi"], row["table"])] = row
    lines = [
        f"{'true phi':>8} {'tables':>6} {'variant':<22} {'rejects at 5%':>15}  p-value deciles (% of tables)"
    ]
    for phi in sorted({k[0] for k in rows}):
        sub = [r for k, r in rows.items() if k[0] == phi]
        for name in VARIANTS:
            p = np.array([r[name] for r in sub if name in r], float)
            if not len(p):
                continue
            rej = float(np.mean(p < 0.05))
            se = math.sqrt(rej * (1 - rej) / len(p))
            dec = np.histogram(p, bins=np.linspace(0, 1, 11))[0]
            lines.append(
                f"{phi:>8.3f} {len(p):>6} {name:<22} {100 * rej:>7.1f} ± {100 * se:.1f}%  "
                + " ".join(f"{100 * d / len(p):.0f}" for d in dec)
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=400)
    parser.add_argument("--phi", type=float, default=0.0, help="true phi (0: size; else power)")
    parser.add_argument("--wild-replicates", type=int, default=199)
    parser.add_argument("--variants", nargs="*", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--summary", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if not args.summary:
        run(args)
    print(summarise(Path(args.out)))


if __name__ == "__main__":
    main()
