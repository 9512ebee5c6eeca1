"""Where users wait on the bundled CPU table: the code at ``--old-rev`` against the working tree, in one run.

Workloads (``--what``, any of):

- ``bootstrap``: ``phifit fit RUNS --bootstrap 1000`` (the baseline recipe, 1,000 block-bootstrap
  replicates, 2 workers) in a fresh process, as a user runs it: the command's work after its
  imports (start-up: ``startup_speed.py``) and, inside it, the
  :func:`phifit.bootstrap.block.block_bootstrap` call (the first of its process, so it includes
  whatever starting the worker processes still costs once the point fit is done);
- ``recipes``: :func:`phifit.recipes.delta.compare_recipes` on the bundled CPU table with 1,000
  paired bootstrap replicates and the 999-replicate wild test of a shared phi (what
  ``phifit fit RUNS --by variant --bootstrap 1000`` runs);
- ``compare``: :func:`phifit.compare.restricted.compare_fits` on its baseline (the report's restricted
  fits: phi = 0 and phi = 1, two 999-replicate wild cluster tests, leave-one-budget-out);
- ``report``: :func:`phifit.report.write.build_report` on the whole table (1,000 replicates).

Each run is a fresh Python process that imports phifit either from ``git archive`` of
``--old-rev`` or from the working tree; old and new alternate (``--repeats`` pairs), so a
shared machine loads both alike.  Reported: wall time of each (median), the ratio
old / new, the load average, and the numbers each run produced (Delta-phi, its interval,
the wild p-values) side by side: the new code draws the paired cells once for the variants
that share them, so a variant after the first may move within its Monte Carlo error.

Run:  python benchmarks/recipes_speed.py [--what bootstrap recipes compare report] [--repeats 1]
      [--old-rev REV] [--new-rev REV (default: the working tree)] [--csv RUNS.csv]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_REV = "fcc40f8"  # before shared paired draws and the batched finish of wild refits
CSV = "data/cpu_small_runs.csv"


def child(what: str, csv: str) -> None:
    """Run one workload in this process and print its time and numbers as JSON."""
    import phifit
    from phifit.runs.table import load_runs

    runs = load_runs(csv)
    out: dict = {"phifit": str(Path(phifit.__file__).parent)}
    t0 = time.perf_counter()
    if what == "bootstrap":
        import contextlib
        import io

        import phifit.bootstrap.block
        from phifit.cli.main import main as cli

        real = phifit.bootstrap.block.block_bootstrap

        def timed(*args, **kwargs):
            t = time.perf_counter()
            boot = real(*args, **kwargs)
            out["bootstrap seconds"] = time.perf_counter() - t
            out["numbers"] = {"phi 95% percentile": boot.ci["phi"], "failed": boot.n_failed}
            return boot

        phifit.bootstrap.block.block_bootstrap = timed
        t0 = time.perf_counter()  # the table is loaded by the command, as a user's is
        with contextlib.redirect_stdout(io.StringIO()):
            cli(["fit", csv, "--bootstrap", "1000", "--quiet"])
    elif what == "recipes":
        from phifit.recipes.delta import compare_recipes

        res = compare_recipes(runs, n_boot=1000)
        out["numbers"] = {
            **{
                f"dphi {k}": [d["estimate"], *(d["ci"] or []), d["p_value"], d["n_failed"]]
                for k, d in res.delta_phi.items()
            },
            "shared-phi wild p": res.joint.wild.p_value,
        }
    elif what == "compare":
        from phifit.compare.restricted import compare_fits
        from phifit.fitters import fit
        from phifit.recipes.delta import select_recipe

        main = select_recipe(runs).runs
        res = compare_fits(main, fit(main))
        out["numbers"] = {
            f"{k} wild p": [st.wild.p_value, st.wild.n_failed] for k, st in res.stats.items() if st.wild
        }
    elif what == "report":
        from phifit.report.analysis import AnalysisOptions
        from phifit.report.write import build_report

        with tempfile.TemporaryDirectory() as tmp:
            files = build_report(runs, os.path.join(tmp, "report"), options=AnalysisOptions(n_boot=1000))
        out["stages"] = files.timings
    else:
        raise SystemExit(f"unknown workload {what!r}")
    out["seconds"] = time.perf_counter() - t0
    print(json.dumps(out))


def run_child(tree: Path, what: str, csv: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, __file__, "--child", what, "--csv", csv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if Path(out["phifit"]).resolve() != (tree / "phifit").resolve():
        raise SystemExit(f"imported phifit from {out['phifit']}, expected {tree / 'phifit'}")
    return out


def extract(rev: str, dest: Path) -> Path:
    command = ["git", "archive", rev, "phifit"]
    archive = subprocess.run(command, cwd=ROOT, check=True, capture_output=True).stdout
    dest.mkdir(parents=True)
    path = dest / "archive.tar"
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(dest, filter="data")
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", nargs="+", default=["recipes", "compare"])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--old-rev", default=OLD_REV)
    parser.add_argument("--new-rev", default=None, help="a git revision instead of the working tree")
    parser.add_argument("--csv", default=CSV)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.csv)
        return
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = extract(args.old_rev, Path(tmp) / "old")
        new_tree = ROOT if args.new_rev is None else extract(args.new_rev, Path(tmp) / "new")
        new_name = "the working tree" if args.new_rev is None else f"phifit at {args.new_rev}"
        print(f"old: phifit at {args.old_rev}; new: {new_name}; CPUs visible: {os.cpu_count()}")
        for what in args.what:
            times: dict[str, list[float]] = {"old": [], "new": []}
            inner: dict[str, list[float]] = {"old": [], "new": []}
            last: dict[str, dict] = {}
            for _ in range(args.repeats):
                for label, tree in (("old", old_tree), ("new", new_tree)):
                    out = run_child(tree, what, args.csv)
                    times[label].append(out["seconds"])
                    if "bootstrap seconds" in out:
                        inner[label].append(out["bootstrap seconds"])
                    last[label] = out
            old, new = statistics.median(times["old"]), statistics.median(times["new"])
            load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
            ratio = old / new
            print(f"\n{what}: old {old:.1f} s, new {new:.1f} s, old/new {ratio:.2f}x (load average {load})")
            if inner["new"]:
                o, n = statistics.median(inner["old"]), statistics.median(inner["new"])
                each = "; ".join(f"{k} " + " ".join(f"{t:.2f}" for t in v) for k, v in inner.items())
                call = f"old {o:.2f} s, new {n:.2f} s, old/new {o / n:.2f}x"
                print(f"    block_bootstrap call: {call} ({each})")
            for key in last["old"].get("numbers", {}):
                print(f"    {key}: old {last['old']['numbers'][key]}  new {last['new']['numbers'].get(key)}")
            for label in ("old", "new"):
                if "stages" in last[label]:
                    stages = ", ".join(f"{k} {v:.1f}" for k, v in last[label]["stages"].items())
                    print(f"    {label} stages (s): {stages}")


if __name__ == "__main__":
    main()
