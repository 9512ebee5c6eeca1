"""Refits of 1,000 bootstrap weightings: the committed engine against the working tree, in one run.

Problem: a run table (default: the bundled CPU baseline, 44 runs; ``--table paper`` or
``--table digitized`` for the study-size 116-run tables; ``--table hc``, ``tbptt`` or
``baseline2`` for the CPU table's recipe pairs on their two common budgets), its Huber point fit (500 starts,
seed 0), and 1,000 block-bootstrap weightings of its (budget, r) cells drawn as
:func:`phifit.bootstrap.block.block_bootstrap` draws them (seed 0).  Both engines refit the
*same* weightings from the *same* spread starts with ``refit_weighted`` (4 spread starts,
chunks of 125, ``--n-jobs`` workers), exactly as the bootstrap calls it.

- old: the refit engine and ``phifit/law.py`` at ``--old-rev`` (default: the commit before the
  same-path speed-ups of the LM), loaded as separate modules: ``phifit/fitters/engine.py`` at
  revisions that have it, else ``phifit/fitters/{objective,lm,polish,parallel,refit}.py``;
- new: the working tree's engine (:mod:`phifit.fitters.refit`).

Reported: wall time of each (median of ``--repeats``, interleaved, old first in even repeats), the replicates
left unconverged by the vectorised LM and how many of them went to the scipy polish (old:
all; new: the fallback only), and per replicate the objective difference new - old:
counts worse / better beyond a relative 1e-12, the largest relative worsening, how many
replicates end bit-identical (objective and parameters) and the largest parameter change.

Run:  python benchmarks/refit_speed.py [--table cpu|paper|digitized] [--repeats 3] [--n-jobs 2]
"""

from __future__ import annotations

import argparse
import inspect
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

import phifit.fitters.refit as engine
from phifit import defaults
from phifit.bootstrap.block import block_bootstrap, draw_weights
from phifit.fitters.common import effective_spec
from phifit.fitters.huber import HuberOptions, fit_huber
from phifit.law import LawSpec
from phifit.recipes.delta import select_recipe
from phifit.runs.table import load_runs

ROOT = Path(__file__).resolve().parents[1]
OLD_REV = "244158f"  # engine.py before the same-path speed-ups (skipped Jacobians of rejected steps)
TABLES = {
    "cpu": "data/cpu_small_runs.csv",
    "paper": "data/paper_design_simulated.csv",
    "digitized": "data/looped_study_runs_digitized.csv",
}
#: The CPU table's recipe pairs (``--table hc`` ...): (variant, which side of the pair).
PAIRED = {"hc": ("hc", "variant"), "tbptt": ("tbptt", "variant"), "baseline2": ("hc", "baseline")}


def _git_show(rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def _has(rev: str, path: str) -> bool:
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", rev, path], cwd=ROOT, capture_output=True, text=True
    )
    return listed.returncode == 0 and bool(listed.stdout.strip())


def _module(name: str, label: str, source: str, package: str | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = label
    if package is not None:  # relative imports resolve inside the synthetic package
        module.__package__ = package
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


#: The engine's modules (after engine.py was split), in import order.
ENGINE_MODULES = ("objective", "lm", "polish", "parallel", "refit")


def load_engine(rev: str) -> types.ModuleType:
    """The refit engine at git revision ``rev`` as standalone modules of a synthetic package
    ``phifit_at_<rev>``, with the law (``phifit/law.py``) at the same revision, so that the old
    engine computes exactly as it did then; the rest of phifit (results, run tables, defaults) is
    the working tree's.  Returns the module holding ``refit_weighted`` and ``polish``: engine.py,
    or refit.py where engine.py was split.  Its modules are pickled by value, so that worker
    processes, which cannot import them, receive them with the tasks."""
    import cloudpickle

    import phifit.defaults
    import phifit.result
    import phifit.runs.table
    import phifit.study

    pkg = f"phifit_at_{rev}"
    root = _module(pkg, f"<phifit at {rev}>", "", package=pkg)
    root.__path__ = []
    fitters = _module(f"{pkg}.fitters", f"<phifit/fitters at {rev}>", "", package=f"{pkg}.fitters")
    fitters.__path__ = []
    for name, module in (
        ("study", phifit.study),
        ("reference", phifit.study),
        ("result", phifit.result),
        ("runs", phifit.runs),
        ("defaults", phifit.defaults),
    ):
        sys.modules[f"{pkg}.{name}"] = module
        setattr(root, name, module)
    sys.modules[f"{pkg}.runs.table"] = phifit.runs.table
    root.fitters = fitters
    root.law = _module(f"{pkg}.law", f"<law.py at {rev}>", _git_show(rev, "phifit/law.py"), package=pkg)
    cloudpickle.register_pickle_by_value(root)
    if _has(rev, "phifit/fitters/engine.py"):
        source = _git_show(rev, "phifit/fitters/engine.py")
        return _module(f"{pkg}.fitters.engine", f"<engine.py at {rev}>", source, package=f"{pkg}.fitters")
    for name in ENGINE_MODULES:
        source = _git_show(rev, f"phifit/fitters/{name}.py")
        module = _module(f"{pkg}.fitters.{name}", f"<{name}.py at {rev}>", source, package=f"{pkg}.fitters")
        setattr(fitters, name, module)
    return fitters.refit


def load_table(name: str):
    if name in PAIRED:  # a recipe's table as the recipes' paired bootstrap refits it
        from phifit.recipes.pairing import pair_tables

        variant, side = PAIRED[name]
        pair = pair_tables(load_runs(ROOT / TABLES["cpu"]), "variant", variant, "baseline")
        return getattr(pair, side)
    runs = load_runs(ROOT / TABLES[name])
    return select_recipe(runs).runs if name == "cpu" else runs


class CountingPolish:
    """Wraps a module's ``polish`` and counts its calls (the scipy polishes)."""

    def __init__(self, module: types.ModuleType):
        self.module, self.inner, self.calls = module, module.polish, 0

    def __enter__(self):
        def counted(*args, **kwargs):
            self.calls += 1
            return self.inner(*args, **kwargs)

        self.module.polish = counted
        return self

    def __exit__(self, *exc):
        self.module.polish = self.inner


def refit(module, runs, spec, weights, x_hat, n_jobs: int, chunk_size: int) -> tuple[dict, float, float, int]:
    """refit_weighted as block_bootstrap calls it; returns (output, wall seconds, CPU seconds
    of the process, scipy polishes)."""
    rng = np.random.default_rng(np.random.SeedSequence(0).spawn(3)[1])
    with CountingPolish(module) as counter:
        t0, c0 = time.perf_counter(), time.process_time()
        out = module.refit_weighted(
            runs, spec, weights, x_hat, n_spread=4, seed=rng, n_jobs=n_jobs, chunk_size=chunk_size
        )
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return out, seconds, cpu, counter.calls


def load_bootstrap(rev: str, engine_module: types.ModuleType) -> types.ModuleType:
    """``phifit/bootstrap.py`` at ``rev`` as a standalone module calling ``engine_module``."""
    source = _git_show(rev, "phifit/bootstrap.py")
    source = source.replace("from .fitters.engine import", f"from {engine_module.__name__} import")
    source = source.replace("from .", "from phifit.")
    return _module(f"phifit_bootstrap_{rev}", f"<bootstrap.py at {rev}>", source)


def whole_bootstrap(old: types.ModuleType, runs, fit, args) -> None:
    """``block_bootstrap`` as committed at --old-rev (its bootstrap.py with its engine, its
    default chunks; the point estimate given as ``point=fit`` there, as the second argument
    here) against the working tree's, interleaved; the intervals of both are compared."""
    import phifit.bootstrap.block as bootstrap

    modules = {"old": load_bootstrap(args.old_rev, old), "new": bootstrap}
    times: dict[str, list[float]] = {"old": [], "new": []}
    intervals: dict[str, dict] = {}
    for _ in range(args.repeats):
        for name, module in modules.items():
            t0 = time.perf_counter()
            given = {"point": fit} if name == "old" else {}
            point = () if name == "old" else (fit,)
            boot = module.block_bootstrap(
                runs, *point, n_boot=args.replicates, seed=0, n_jobs=args.n_jobs, progress=False, **given
            )
            times[name].append(time.perf_counter() - t0)
            intervals[name] = {"percentile": boot.ci, "bca": boot.ci_bca, "mc": boot.mc_error}
    t_old, t_new = np.median(times["old"]), np.median(times["new"])
    runs_old, runs_new = (", ".join(f"{s:.2f}" for s in times[name]) for name in ("old", "new"))
    print(
        f"block_bootstrap, whole: old median {t_old:.2f} s (runs {runs_old}), "
        f"new median {t_new:.2f} s (runs {runs_new}); "
        f"speed-up {t_old / t_new:.2f}x; intervals identical: {intervals['old'] == intervals['new']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=sorted(TABLES) + sorted(PAIRED), default="cpu")
    parser.add_argument("--replicates", type=int, default=defaults.N_BOOT)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--old-rev", default=OLD_REV)
    parser.add_argument("--old-chunk-size", type=int, default=125, help="the old bootstrap's chunk size")
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=inspect.signature(block_bootstrap).parameters["chunk_size"].default,
        help="the new engine's chunk size (default: block_bootstrap's)",
    )
    parser.add_argument("--save", help="write per-replicate objectives of both engines to this .npz")
    parser.add_argument(
        "--whole",
        action="store_true",
        help="also time the whole block_bootstrap (jackknife and intervals included), old against new",
    )
    args = parser.parse_args()

    old = load_engine(args.old_rev)
    runs = load_table(args.table)
    fit = fit_huber(runs, options=HuberOptions(n_starts=defaults.N_STARTS, seed=defaults.SEED))
    spec, _ = effective_spec(runs, LawSpec())
    x_hat = fit.theta[spec.free_mask]
    codes, label = runs.cells(None)
    weights = draw_weights(
        codes, args.replicates, np.random.default_rng(np.random.SeedSequence(0).spawn(3)[0])
    )
    print(
        f"table {args.table} ({len(runs)} runs, {int(codes.max()) + 1} blocks of {label}), "
        f"{args.replicates} replicates, n_jobs={args.n_jobs}, old = engine.py at {args.old_rev}"
    )

    times: dict[str, list[float]] = {"old": [], "new": []}
    cpus: dict[str, list[float]] = {"old": [], "new": []}
    results: dict[str, tuple[dict, int]] = {}
    engines = (("old", old, args.old_chunk_size), ("new", engine, args.chunk_size))
    for rep in range(args.repeats):
        # the order alternates between repeats: the second of a pair runs in a warmer process
        for name, module, chunk_size in engines if rep % 2 == 0 else engines[::-1]:
            out, seconds, cpu, n_scipy = refit(module, runs, spec, weights, x_hat, args.n_jobs, chunk_size)
            times[name].append(seconds)
            cpus[name].append(cpu)
            results[name] = (out, n_scipy)
    for name, _, chunk_size in engines:
        out, n_scipy = results[name]
        t, c = times[name], cpus[name]
        print(
            f"{name} (chunks of {chunk_size}): median {np.median(t):.2f} s "
            f"(runs {', '.join(f'{s:.2f}' for s in t)}), CPU median {np.median(c):.2f} s; "
            f"finished after the LM {int(out['polished'].sum())}, scipy polishes {n_scipy}, "
            f"unconverged {int((~out['converged']).sum())}"
        )
    print(
        f"speed-up old/new: wall {np.median(times['old']) / np.median(times['new']):.2f}x, "
        f"CPU {np.median(cpus['old']) / np.median(cpus['new']):.2f}x "
        f"(per repeat, wall: {', '.join(f'{o / n:.2f}' for o, n in zip(times['old'], times['new']))})"
    )

    f_old, f_new = results["old"][0]["objective"], results["new"][0]["objective"]
    x_old, x_new = results["old"][0]["x"], results["new"][0]["x"]
    rel = (f_new - f_old) / np.abs(f_old)
    worse, better = rel > 1e-12, rel < -1e-12
    print(
        f"objective new - old per replicate: worse (rel > 1e-12) {int(worse.sum())}, "
        f"better (rel < -1e-12) {int(better.sum())}, equal {int((~worse & ~better).sum())}; "
        f"max relative worse {max(float(rel.max()), 0.0):.3g}, "
        f"max relative better {max(float(-rel.min()), 0.0):.3g}"
    )
    identical = (f_new == f_old) & np.all(x_new == x_old, axis=1)
    dx = np.max(np.abs(x_new - x_old), axis=1)
    print(
        f"bit-identical (objective and parameters) {int(identical.sum())} of {len(f_old)}; "
        f"largest parameter difference {float(dx.max()):.3g}; "
        f"parameters differ by > 1e-8: {int((dx > 1e-8).sum())}"
    )
    touched = results["old"][0]["polished"] | results["new"][0]["polished"]
    moved = dx > 1e-4
    print(
        f"replicates finished after the LM (either engine) {int(touched.sum())}; "
        f"end points moved by > 1e-4 in some coordinate: {int(moved.sum())} "
        f"(of which worse {int((moved & worse).sum())}, better {int((moved & better).sum())})"
    )
    if args.whole:
        whole_bootstrap(old, runs, fit, args)
    if args.save:
        np.savez(
            args.save, f_old=f_old, f_new=f_new, x_old=results["old"][0]["x"], x_new=results["new"][0]["x"]
        )


if __name__ == "__main__":
    main()
