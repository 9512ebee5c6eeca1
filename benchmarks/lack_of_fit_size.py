"""Size and power of the lack-of-fit test of r^phi (free multipliers m_r against one phi).

:func:`phifit.diagnostics.multipliers.fit_multipliers` tests the joint law's r^phi against one
free multiplier per looped r with the restricted wild cluster bootstrap over (budget, r)
cells.  This study simulates tables of the study's design (116 runs, 24 cells) from its
fitted law (phi = 0.459) with noise sd 0.003 shared per cell plus 0.003 per run, and records
the test's p-value:

- ``--offset 0``: the law holds (size: rejections at 5% should be ~5%);
- ``--offset -0.0064``: the r = 4 runs sit 0.0064 nats lower in log-loss, the study's own
  departure (power against the misfit seen in the real table).

One JSON line per table in ``--out`` (resumable); ``--summary`` prints rejection rates with
their binomial standard errors.

    python benchmarks/lack_of_fit_size.py --tables 400 --offset 0 --n-jobs 2
    python benchmarks/lack_of_fit_size.py --tables 100 --offset -0.0064 --n-jobs 2
    python benchmarks/lack_of_fit_size.py --summary
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
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "lack_of_fit.jsonl"
NOISE, CELL_NOISE, TRUE_PHI = 0.003, 0.003, 0.459


def one_table(offset: float, index: int, n_wild: int) -> dict:
    """Simulate one table (r = 4 runs shifted by ``offset`` in log-loss), fit, test r^phi."""
    from phifit.diagnostics.multipliers import fit_multipliers
    from phifit.fitters.huber import fit_huber
    from phifit.runs.table import table_from_frame
    from phifit.simulation import simulate

    seed = 9_000_011 + 100_003 * int(round(-offset * 1e4)) + index
    frame = simulate("paper", params={"phi": TRUE_PHI}, noise=NOISE, cell_noise=CELL_NOISE, seed=seed)
    frame["loss"] = frame["loss"] * np.exp(np.where(frame["r"] == 4, offset, 0.0))
    runs = table_from_frame(frame, source=f"table {index}")
    law = fit_huber(runs, n_starts=100, seed=index)
    mult = fit_multipliers(runs, law, n_boot=0, n_wild=n_wild, seed=index, n_starts=100, n_jobs=1)
    return {"offset": offset, "table": index, "p": mult.p_value, "phi_hat": law.phi}


def run(args: argparse.Namespace) -> None:
    from joblib import Parallel, delayed

    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done.add((row["offset"], row["table"]))
    todo = [i for i in range(args.tables) if (args.offset, i) not in done]
    print(f"{len(todo)} tables to go -> {path}", flush=True)
    start = time.perf_counter()
    jobs = (delayed(one_table)(args.offset, i, args.wild_replicates) for i in todo)
    with path.open("a", encoding="utf-8") as fh:
        for k, row in enumerate(Parallel(n_jobs=args.n_jobs, return_as="generator")(jobs), 1):
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            if k % 20 == 0 or k == len(todo):
                print(f"  {k}/{len(todo)} tables, {(time.perf_counter() - start) / k:.1f} s each", flush=True)


def summarise(path: Path) -> str:
    rows: dict = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[(row["offset"], row["table"])] = row
    lines = [f"{'r = 4 offset':>12} {'tables':>6} {'rejects at 5%':>15}  p-value deciles (% of tables)"]
    for offset in sorted({k[0] for k in rows}, reverse=True):
        p = np.array([r["p"] for k, r in rows.items() if k[0] == offset and r["p"] is not None], float)
        rej = float(np.mean(p < 0.05))
        se = math.sqrt(rej * (1 - rej) / len(p))
        dec = np.histogram(p, bins=np.linspace(0, 1, 11))[0]
        lines.append(
            f"{offset:>12.4f} {len(p):>6} {100 * rej:>7.1f} ± {100 * se:.1f}%  "
            + " ".join(f"{100 * d / len(p):.0f}" for d in dec)
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=400)
    parser.add_argument("--offset", type=float, default=0.0, help="log-loss shift of the r = 4 runs")
    parser.add_argument("--wild-replicates", type=int, default=199)
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
