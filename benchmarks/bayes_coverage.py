"""Coverage of the posterior's 95% HDI for phi and the sampler's convergence, per noise model.

A rerunnable Monte-Carlo study of the Bayesian fit (:mod:`phifit.fitters.bayes`) on tables
simulated from a known law with noise shared within (budget, r) cells, the noise real sweeps
have (one data order, one seed, one learning-rate choice per cell):

- ``paper-cell-shared``: the study's 116-run design (24 cells), its fitted law with
  phi = 0.459, log-noise sd 0.003 shared per cell plus 0.003 per run (the coverage
  benchmark's ``cell-shared`` condition, same seeds);
- ``small-cell-shared``: the 44-run, 12-cell design of the bundled CPU table, phi = 0.459,
  sd 0.010 per cell plus 0.013 per run (the coverage benchmark's ``small-cell-shared``).

Per table and noise model (``--noise cell run``): the default fit (4 chains x 2000 draws
after 1000 tuning steps, target_accept 0.99, nutpie), and whether its 95% HDI of phi covers 0.459, its width,
the divergences, the largest R-hat and the smallest bulk and tail ESS over every sampled
quantity (law, sigma, nu, tau and each cell effect), and "converged" = no divergence,
R-hat <= 1.01 and ESS >= 400.  One JSON line per table and model in ``--out`` (resumable).

    python benchmarks/bayes_coverage.py --tables 200 --conditions paper-cell-shared
    python benchmarks/bayes_coverage.py --tables 200 --conditions small-cell-shared
    python benchmarks/bayes_coverage.py --summary

Tables are numbered from 0 and table i uses seed i, so a study can be extended with fresh tables
(``--first 200 --tables 400`` fits tables 200-399) and its JSON lines concatenated.
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
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "bayes_coverage.jsonl"
TRUE_PHI = 0.459
#: condition -> (the coverage benchmark's condition whose design, law, noise and seeds it uses)
CONDITIONS = {"paper-cell-shared": "cell-shared", "small-cell-shared": "small-cell-shared"}


def _table(condition: str, index: int):
    """The coverage benchmark's table ``index`` of the twin condition (same design and seed)."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bootstrap_coverage as cov

    from phifit.runs.table import table_from_frame

    return table_from_frame(cov.table_frame(CONDITIONS[condition], index), source=f"{condition} {index}")


def one_fit(condition: str, index: int, noise: str, **settings: float | int) -> dict:
    """Fit table ``index`` of ``condition`` with the default sampler settings and ``noise``, and
    any of ``target_accept``, ``draws``, ``tune`` in ``settings`` in place of the default's."""
    from phifit.fitters.bayes import sample_posterior
    from phifit.fitters.bayes.diagnostics import ESS_MIN, RHAT_MAX

    runs = _table(condition, index)
    start = time.perf_counter()
    res = sample_posterior(runs, noise=noise, seed=index, progress=False, **settings).result
    d = res.extras["diagnostics"]
    lo, hi = res.ci.get("phi", [math.nan, math.nan])
    tau = (res.extras.get("cell_effects") or {}).get("tau", {})
    return {
        "condition": condition,
        "table": index,
        "noise": noise,
        "phi": res.params["phi"],
        "hdi": [lo, hi],
        "covers": bool(lo <= TRUE_PHI <= hi),
        "divergences": d["divergences"],
        "max_r_hat": d["max_r_hat"],
        "min_ess_bulk": d["min_ess_bulk"],
        "min_ess_tail": d["min_ess_tail"],
        "converged": bool(
            d["divergences"] == 0
            and d["max_r_hat"] <= RHAT_MAX
            and min(d["min_ess_bulk"], d["min_ess_tail"]) >= ESS_MIN
        ),
        "tau": tau.get("median"),
        "seconds": time.perf_counter() - start,
    }


def _rows(path: Path) -> dict[tuple, dict]:
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[(row["condition"], row["table"], row["noise"])] = row
    return rows


def run(args: argparse.Namespace) -> None:
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _rows(path)
    todo = [
        (c, i, m)
        for i in range(args.first, args.tables)
        for c in args.conditions
        for m in args.noise
        if (c, i, m) not in done
    ]
    settings = {
        key: value
        for key, value in (("target_accept", args.target_accept), ("draws", args.draws), ("tune", args.tune))
        if value is not None
    }
    print(f"{len(todo)} fits to go -> {path}", flush=True)
    start = time.perf_counter()
    with path.open("a", encoding="utf-8") as fh:
        # one process: nutpie runs the 4 chains in parallel and the compiled model is reused
        for k, (c, i, m) in enumerate(todo, 1):
            row = one_fit(c, i, m, **settings)
            row.update(settings)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            if k % 10 == 0 or k == len(todo):
                print(f"  {k}/{len(todo)} fits, {(time.perf_counter() - start) / k:.1f} s each", flush=True)


def _share(hits) -> str:
    hits = np.asarray(hits, bool)
    n = len(hits)
    if not n:
        return "n/a"
    p = float(hits.mean())
    return f"{100 * p:5.1f} ± {100 * math.sqrt(p * (1 - p) / n):.1f}%"


def summarise(path: Path) -> str:
    rows = list(_rows(path).values())
    lines = [
        f"{'condition':<18} {'noise':<5} {'tables':>6} {'HDI covers 0.459':>17} {'median width':>12} "
        f"{'converged':>14} {'no divergence':>14} {'R-hat <= 1.01':>14} {'ESS >= 400':>14} {'median tau':>10}"
    ]
    for condition in CONDITIONS:
        for noise in ("cell", "run"):
            sub = [r for r in rows if r["condition"] == condition and r["noise"] == noise]
            if not sub:
                continue
            width = np.median([r["hdi"][1] - r["hdi"][0] for r in sub])
            taus = [r["tau"] for r in sub if r["tau"] is not None]
            lines.append(
                f"{condition:<18} {noise:<5} {len(sub):>6} {_share([r['covers'] for r in sub]):>17} "
                f"{width:>12.3f} {_share([r['converged'] for r in sub]):>14} "
                f"{_share([r['divergences'] == 0 for r in sub]):>14} "
                f"{_share([r['max_r_hat'] <= 1.01 for r in sub]):>14} "
                f"{_share([min(r['min_ess_bulk'], r['min_ess_tail']) >= 400 for r in sub]):>14} "
                f"{(np.median(taus) if taus else float('nan')):>10.4f}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200, help="tables per condition (default 200)")
    parser.add_argument(
        "--first",
        type=int,
        default=0,
        help="first table index (default 0): --first 200 --tables 400 fits tables 200-399, fresh seeds",
    )
    parser.add_argument("--conditions", nargs="*", default=list(CONDITIONS), choices=list(CONDITIONS))
    parser.add_argument("--noise", nargs="*", default=["cell", "run"], choices=["cell", "run"])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="JSON lines, one per fit (resumable)")
    parser.add_argument(
        "--target-accept",
        type=float,
        default=None,
        help="NUTS target acceptance in place of the default fit's (its own --out, as for --draws, --tune)",
    )
    parser.add_argument("--draws", type=int, default=None, help="draws per chain in place of the default's")
    parser.add_argument("--tune", type=int, default=None, help="tuning steps per chain, not the default")
    parser.add_argument("--summary", action="store_true", help="only summarise what --out holds")
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if not args.summary:
        run(args)
    print(summarise(Path(args.out)))


if __name__ == "__main__":
    main()
