"""NumPy's public calls in the LM against the shortcuts it once used, in one process, interleaved.

The batched LM (:mod:`phifit.fitters.lm`) and the projected Newton finish
(:mod:`phifit.fitters.newton`) call ``np.linalg.solve``, ``np.clip`` and ``np.linalg.norm``.  Until
issue 59 they called shortcuts instead: LAPACK's solve gufunc from the private
``numpy.linalg._umath_linalg`` (without the public function's checks and error-state block; the
public function only where a result was not finite), ``np.minimum(np.maximum(x, lo), hi)`` for the
clip and ``sqrt(add.reduce(v * v, axis=1))`` for the row norms.  Both give the same numbers; this
script measures what the public calls cost:

- per call: the solve of a (s, 6, 6) stack, the clip and the row norms of an (s, 6) array, s = 1,
  3, 50 and 500 (a crawling finish solves a few systems, a multi-start fit 500);
- the hot path: ``batched_weighted_lm`` with the active set and the geodesic acceleration (a
  finish) on 4 rows from random starts, on the study's 116 runs and on a 12-run subset of them
  (every 10th run: a small table's arrays), about 100-500 iterations each;
- a whole fit: ``phifit.fit(phifit.load_runs("data/looped_study_runs_digitized.csv"))``.

The shortcuts are swapped in by giving the two modules a copy of the ``numpy`` module whose
``linalg.solve``, ``clip`` and ``linalg.norm`` are the shortcuts; the public variant uses NumPy
itself.  Each repeat times
both variants, alternating which goes first; reported: the median of each over the repeats and the
median of the per-repeat ratios (shortcuts / public), with their spread.  The end points of the hot
path and the fit's parameters are checked bit-identical between the variants.

Run:  python benchmarks/lm_public_calls.py [--repeats 9] [--calls 2000]
"""

from __future__ import annotations

import argparse
import time
import types
from collections.abc import Callable

import numpy as np

import phifit
import phifit.fitters.lm as lm
import phifit.fitters.newton as newton
from phifit.fitters.objective import law_model
from phifit.law import LawSpec

try:  # the gufunc np.linalg.solve calls (numpy 1.x and 2.x keep it here)
    from numpy.linalg._umath_linalg import solve as _lapack_solve
except ImportError:  # pragma: no cover - another numpy layout: nothing to compare
    _lapack_solve = None

TABLE = "data/looped_study_runs_digitized.csv"


def shortcut_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The LM's former ``stacked_solve``: the LAPACK gufunc, the public function where some
    result is not finite (so its ``LinAlgError`` and numbers are kept)."""
    if a.dtype == b.dtype == np.float64:
        with np.errstate(all="ignore"):
            out = _lapack_solve(a, b, signature="dd->d")
        if np.isfinite(out).all():
            return out
    return np.linalg.solve(a, b)


def shortcut_clip(x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The former ``clip_to_box``: two ufunc calls."""
    return np.minimum(np.maximum(x, lower), upper)


def shortcut_norm(v: np.ndarray, axis: int = 1) -> np.ndarray:
    """The former ``row_norms`` (the LM only ever asks for axis 1 of a real array)."""
    return np.sqrt(np.add.reduce(v * v, axis=axis))


def numpy_with(shortcuts: tuple[str, ...]) -> types.ModuleType:
    """A copy of the ``numpy`` module (same attribute lookups) whose solve, clip and/or norm (the
    names in ``shortcuts``) are the shortcuts."""
    linalg = types.ModuleType("numpy.linalg")
    linalg.__dict__.update(np.linalg.__dict__)
    module = types.ModuleType("numpy")
    module.__dict__.update(np.__dict__)
    module.linalg = linalg
    if "solve" in shortcuts:
        linalg.solve = shortcut_solve
    if "clip" in shortcuts:
        module.clip = shortcut_clip
    if "norm" in shortcuts:
        linalg.norm = shortcut_norm
    return module


#: The variants timed: which calls are the shortcuts (public: none, NumPy itself).
VARIANTS = {
    "public": (),
    "solve only": ("solve",),
    "clip only": ("clip",),
    "norm only": ("norm",),
    "all three": ("solve", "clip", "norm"),
}
MODULES = {name: numpy_with(calls) if calls else np for name, calls in VARIANTS.items()}


def counting() -> tuple[types.ModuleType, dict[str, int]]:
    """A copy of ``numpy`` whose public solve, clip and norm count their calls (by name)."""
    counts = {"solve": 0, "clip": 0, "norm": 0}

    def counted(name, fn):
        def call(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return call

    module = numpy_with(())
    module.linalg.solve = counted("solve", np.linalg.solve)
    module.linalg.norm = counted("norm", np.linalg.norm)
    module.clip = counted("clip", np.clip)
    return module, counts


def use(variant: str | types.ModuleType) -> None:
    """Point the LM and the Newton finish at a variant's calls (a name of ``VARIANTS``, or a module)."""
    module = MODULES[variant] if isinstance(variant, str) else variant
    lm.np = newton.np = module


def calls_of(fn: Callable[[], object]) -> dict[str, int]:
    """How many times ``fn`` calls solve, clip and norm in the LM and the Newton finish."""
    module, counts = counting()
    use(module)
    fn()
    use("public")
    return counts


def seconds(fn: Callable[[], object], number: int = 1) -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds) per call of ``fn``, over ``number`` calls.  The
    CPU time is the steadier of the two on a loaded machine (time spent waiting for a core is not
    in it)."""
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(number):
        fn()
    return (time.process_time() - c0) / number, (time.perf_counter() - t0) / number


def paired(
    name: str,
    run: Callable[[str], tuple[float, float]],
    variants: list[str],
    repeats: int,
    unit: str,
    scale: float,
) -> None:
    """Time ``run(variant)`` for each variant, ``repeats`` times, the order reversed every other
    repeat; print per variant the median CPU and wall time and the median (and quartiles) of the
    per-repeat ratio of its CPU time to the public calls'."""
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    wall: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(repeats):
        for variant in variants if r % 2 == 0 else variants[::-1]:
            c, w = run(variant)
            cpu[variant].append(c)
            wall[variant].append(w)
    base = np.array(cpu["public"])
    for variant in variants:
        ratio = np.array(cpu[variant]) / base
        q1, q3 = np.percentile(ratio, [25, 75])
        print(
            f"{name:<30} {variant:<10} cpu {np.median(cpu[variant]) * scale:8.2f} {unit}"
            f"  wall {np.median(wall[variant]) * scale:8.2f} {unit}"
            f"  cpu ratio to public {np.median(ratio):.3f} [{q1:.3f}, {q3:.3f}]  ({repeats} repeats)"
        )


def per_call(repeats: int, calls: int) -> None:
    rng = np.random.default_rng(0)
    for s in (1, 3, 50, 500):
        a = rng.normal(size=(s, 6, 6))
        a = a @ np.swapaxes(a, 1, 2) + 1e-3 * np.eye(6)
        b = rng.normal(size=(s, 6, 1))
        x = rng.normal(size=(s, 6)) * 3
        lo, hi = np.full(6, -2.0), np.full(6, 2.5)
        assert np.array_equal(shortcut_solve(a, b), np.linalg.solve(a, b))
        assert np.array_equal(shortcut_clip(x, lo, hi), np.clip(x, lo, hi))
        assert np.array_equal(shortcut_norm(x), np.linalg.norm(x, axis=1))
        cases = {
            "solve": (np.linalg.solve, shortcut_solve, (a, b)),
            "clip": (np.clip, shortcut_clip, (x, lo, hi)),
            "row norms": (lambda v: np.linalg.norm(v, axis=1), shortcut_norm, (x,)),
        }
        for what, (public, short, args) in cases.items():

            def run(variant, public=public, short=short, args=args):
                fn = public if variant == "public" else short
                return seconds(lambda: fn(*args), calls)

            paired(f"per call: {what}, s = {s}", run, ["public", "shortcut"], repeats, "us", 1e6)


def hot_path(repeats: int) -> None:
    full = phifit.load_runs(TABLE)
    spec = LawSpec()
    starts = np.random.default_rng(0).uniform(spec.lower, spec.upper, size=(4, len(spec.lower)))
    small = full.subset(np.arange(len(full.log_loss)) % 10 == 0)
    for label, runs in (("116 runs", full), ("12 runs", small)):
        model = law_model(spec, runs.design)

        def finish(runs=runs, model=model):
            return lm.batched_weighted_lm(
                model, starts, runs.log_loss, 1.0, spec.lower, spec.upper,
                max_iter=2000, active_set=True, geodesic=True,
            )  # fmt: skip

        ends = {}
        for variant in VARIANTS:
            use(variant)
            ends[variant] = finish()
        same = all(
            np.array_equal(end.x, ends["public"].x)
            and np.array_equal(end.objective, ends["public"].objective)
            for end in ends.values()
        )
        iters = int(ends["public"].n_iter.sum())
        calls = calls_of(finish)
        print(f"finish, {label}: {iters} row-iterations, calls {calls}, bit-identical ends: {same}")

        def run(variant, finish=finish):
            use(variant)
            return seconds(finish)

        paired(f"finish of 4 rows, {label}", run, list(VARIANTS), repeats, "ms", 1e3)


def whole_fit(repeats: int) -> None:
    runs = phifit.load_runs(TABLE)
    results = {}
    for variant in ("public", "all three"):
        use(variant)
        results[variant] = phifit.fit(runs)
    pub, short = results["public"].params, results["all three"].params
    same = all(pub[p] == short[p] for p in pub)
    print(f"whole fit: calls {calls_of(lambda: phifit.fit(runs))}, parameters bit-identical: {same}")

    def run(variant):
        use(variant)
        return seconds(lambda: phifit.fit(runs))

    paired("phifit.fit, study's 116 runs", run, ["public", "all three"], repeats, "ms", 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000, help="calls per timing of one function")
    parser.add_argument("--skip-per-call", action="store_true", help="only the finish and the whole fit")
    args = parser.parse_args()
    if _lapack_solve is None:
        raise SystemExit("this NumPy has no numpy.linalg._umath_linalg.solve: nothing to compare")
    print(f"numpy {np.__version__}")
    if not args.skip_per_call:
        per_call(args.repeats, args.calls)
    hot_path(args.repeats)
    whole_fit(args.repeats)
    use("public")


if __name__ == "__main__":
    main()
