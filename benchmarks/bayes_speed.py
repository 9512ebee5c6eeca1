"""Wall time of ``phifit fit RUNS --method bayes`` in fresh processes: cold vs warm cache, old vs new.

    python benchmarks/bayes_speed.py [--runs CSV] [--repeats N] [--old-ref REF] [--json OUT]

Each measurement is one new process running the default Bayesian fit (4 chains x 1000
draws after 1000 tuning steps, nutpie) on the 116-run ``data/paper_design_simulated.csv``,
timed from the outside (imports included):

- cold: an empty cache folder (``PHIFIT_CACHE_DIR`` = a new temporary folder);
- warm: the same folder again, as a second ``--method bayes`` finds it.

"old" is today's code before the disk cache of nutpie's compiled model: with ``--old-ref
REF`` the ``phifit`` package of that git commit (``git archive``, run from a temporary
folder), else this tree with the cache off (``PHIFIT_BAYES_CACHE=0``, the same code path
as before: PyTensor's caches only, Numba compiles nutpie's callbacks every time).  "new"
is this tree.  Old and new are interleaved per repeat; medians are reported, and the
issue's targets (warm <= 10 s, cold <= 45 s) are checked on the new medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"warm": 10.0, "cold": 45.0}


def _run(cmd_root: Path, csv: Path, cache: Path, extra_env: dict[str, str]) -> float:
    env = {**os.environ, "PHIFIT_CACHE_DIR": str(cache), **extra_env}
    env["PYTHONPATH"] = str(cmd_root)
    cmd = [sys.executable, "-m", "phifit", "fit", str(csv), "--method", "bayes", "--quiet"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cmd_root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return wall


def _old_tree(ref: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", ref, "phifit", "pyproject.toml"], cwd=REPO, capture_output=True
    )
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref} failed: {archive.stderr.decode()[-500:]}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=str(REPO / "data" / "paper_design_simulated.csv"))
    parser.add_argument("--repeats", type=int, default=1, help="cold+warm pairs per variant (default 1)")
    parser.add_argument("--old-ref", help="git commit of the old code (default: this tree, cache off)")
    parser.add_argument("--json", metavar="OUT", help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    csv = Path(args.runs).resolve()

    work = Path(tempfile.mkdtemp(prefix="phifit-bayes-speed-"))
    try:
        if args.old_ref:
            old = (_old_tree(args.old_ref, work / "old"), {})
            old_name = f"old ({args.old_ref})"
        else:
            old = (REPO, {"PHIFIT_BAYES_CACHE": "0"})
            old_name = "old (cache off)"
        variants = {old_name: old, "new": (REPO, {"PHIFIT_BAYES_CACHE": "1"})}
        times: dict[str, dict[str, list[float]]] = {v: {"cold": [], "warm": []} for v in variants}
        for rep in range(args.repeats):
            for name, (root, env) in variants.items():
                cache = work / f"cache-{rep}-{len(times[name]['cold'])}-{name.split()[0]}"
                cache.mkdir()
                for phase in ("cold", "warm"):
                    wall = _run(root, csv, cache, env)
                    times[name][phase].append(wall)
                    print(f"repeat {rep + 1}: {name:<22} {phase}: {wall:6.1f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    med = {v: {p: statistics.median(t) for p, t in ph.items()} for v, ph in times.items()}
    print(
        f"\nphifit fit {csv.name} --method bayes, fresh processes; {os.cpu_count()} CPU cores, "
        f"load average {load:.1f}; medians of {args.repeats}"
    )
    print(f"{'variant':<24} {'cold s':>8} {'warm s':>8}")
    for v, m in med.items():
        print(f"{v:<24} {m['cold']:>8.1f} {m['warm']:>8.1f}")
    new = med["new"]
    base = med[old_name]
    print(f"speed-up old/new: cold {base['cold'] / new['cold']:.2f}x, warm {base['warm'] / new['warm']:.2f}x")
    for phase, target in TARGETS.items():
        verdict = "meets" if new[phase] <= target else "MISSES"
        print(f"new {phase} {new[phase]:.1f} s: {verdict} the target of <= {target:.0f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"times": times, "medians": med, "load_average": load, "targets": TARGETS}, indent=2)
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
