"""Does a second table's Bayesian fit compile again?  Old code against new, in fresh processes.

    python benchmarks/bayes_second_table.py [--old-ref REF] [--first CSV] [--second CSV]

A user fits one table, then another with a different number of (budget, r) cells.  Each fit is one
new process (``phifit fit CSV --method bayes --draws 200 --tune 200 --chains 2 --json``), both
sharing one empty cache folder (``PHIFIT_CACHE_DIR``), so the first pays every compile and the
second finds what the first left.  Printed per code: each fit's wall time (imports included), its
compile seconds and whether nutpie's compiled model came from the cache (``hit``) or was compiled
(``miss``), read from the fit's JSON.

"old" is the ``phifit`` package of ``--old-ref`` (default: the commit before the cell model's z_cell
was padded to 32 slots), run from a temporary folder; "new" is this tree.  The defaults are the
study's runs (24 cells) and then ``cpu_bpe`` (60 runs, 13 cells).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The commit before the cell-effect slots.
OLD_REF = "e0b11bd"
SETTINGS = ["--draws", "200", "--tune", "200", "--chains", "2", "--quiet"]


def _fit(root: Path, csv: Path, cache: Path, out: Path) -> dict:
    env = {**os.environ, "PHIFIT_CACHE_DIR": str(cache), "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "phifit", "fit", str(csv), "--method", "bayes", *SETTINGS]
    cmd += ["--json", str(out)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    extras = json.loads(out.read_text(encoding="utf-8"))["extras"]
    return {
        "wall_s": round(wall, 1),
        "compile_s": round(extras["compile_s"], 1),
        "cache": extras["compile"]["cache"],
        "cells": len((extras.get("cell_effects") or {}).get("cells") or []) or None,
        "phi_median": round(extras["posterior"]["phi"]["median"], 4),
    }


def _old_tree(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", ref, "phifit"], cwd=REPO, capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref} failed: {archive.stderr.decode()[-500:]}")
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-ref", default=OLD_REF)
    parser.add_argument("--first", type=Path, default=REPO / "data" / "looped_study_runs_digitized.csv")
    parser.add_argument("--second", type=Path, default=REPO / "data" / "cpu_bpe_runs.csv")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        old_root = _old_tree(args.old_ref, tmp_path / "old")
        for name, root in (("old", old_root), ("new", REPO)):
            cache = tmp_path / f"cache-{name}"
            first = _fit(root, args.first, cache, tmp_path / f"{name}-1.json")
            second = _fit(root, args.second, cache, tmp_path / f"{name}-2.json")
            print(f"{name}: first  {args.first.name}: {first}")
            print(f"{name}: second {args.second.name}: {second}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
