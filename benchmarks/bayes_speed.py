"""Wall time of the default Bayesian fit on the study's 116-run design.

    python benchmarks/bayes_speed.py [--no-baseline] [--json OUT]

Fits the paper design simulated with phi = 0.46 and log-noise sd 0.005 with
``fit_bayes`` at its defaults (4 chains x 1000 draws after 1000 tuning steps, seed 0,
sampler "auto"), in this fresh process, and reports separately:

- import: ``import pymc, arviz`` (paid once per process);
- compile: building and compiling the model (nutpie: once per process, then reused);
- sampling: the sampler itself;
- total: the whole ``fit_bayes`` call (Huber start, compile, sampling, LOO, PPC, summaries).

Then a second fit in the same process (other seed), whose compile is the cached one, and
unless ``--no-baseline`` the same fit with PyMC's own NUTS (``sampler="pymc"``) as the
baseline of the speed ratio.  The target of issue 4 is total <= 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

TARGET_S = 60.0


def _fit(runs, **kwargs) -> dict:
    from phifit.fitters.bayes import fit_bayes

    t0 = time.perf_counter()
    res = fit_bayes(runs, progressbar=False, **kwargs)
    total = time.perf_counter() - t0
    ex, diag = res.extras, res.extras["diagnostics"]
    return {
        "sampler": ex["sampler"],
        "seed": ex["seed"],
        "compile_s": ex["compile_s"],
        "compile_cached": ex["compile_cached"],
        "sampling_s": ex["sampling_s"],
        "total_s": total,
        "phi_median": res.params["phi"],
        "phi_hdi95": res.ci["phi"],
        "max_r_hat": diag["max_r_hat"],
        "min_ess_bulk": diag["min_ess_bulk"],
        "min_ess_tail": diag["min_ess_tail"],
        "divergences": diag["divergences"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-baseline", action="store_true", help="skip the PyMC-NUTS baseline fit")
    parser.add_argument("--json", metavar="OUT", help="also write the numbers as JSON")
    args = parser.parse_args(argv)

    from phifit.cache import use_pytensor_cache

    use_pytensor_cache()  # before PyMC imports PyTensor, as fit_bayes itself does: the cache in .cache/

    t0 = time.perf_counter()
    import arviz  # noqa: F401
    import pymc  # noqa: F401

    import_s = time.perf_counter() - t0

    from phifit.runs import table_from_frame
    from phifit.simulation import simulate

    runs = table_from_frame(
        simulate("paper", params={"phi": 0.46}, noise=0.005, seed=1),
        source="paper design, phi=0.46, noise=0.005, seed=1",
    )
    rows = [
        ("default fit (fresh process)", _fit(runs, seed=0)),
        ("second fit (same process)", _fit(runs, seed=1)),
    ]
    if not args.no_baseline:
        rows.append(("baseline: PyMC NUTS", _fit(runs, seed=0, sampler="pymc")))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"phifit Bayesian fit: {len(runs)} runs, 4 chains x 1000 draws after 1000 tuning "
        f"steps; {os.cpu_count()} CPU cores, load average {load:.1f}; python "
        f"{sys.version.split()[0]}"
    )
    print(f"import pymc+arviz: {import_s:.1f} s (once per process)")
    head = (
        f"{'run':<28} {'sampler':<7} {'compile s':>9} {'sampling s':>10} {'total s':>8} "
        f"{'phi':>6} {'95% HDI':>16} {'R-hat':>6} {'ESS b/t':>11} {'div':>4}"
    )
    print(head)
    print("-" * len(head))
    for name, r in rows:
        compile_txt = f"{r['compile_s']:.1f}" + ("*" if r["compile_cached"] else "")
        print(
            f"{name:<28} {r['sampler']:<7} {compile_txt:>9} {r['sampling_s']:>10.1f} "
            f"{r['total_s']:>8.1f} {r['phi_median']:>6.3f} "
            f"[{r['phi_hdi95'][0]:.3f}, {r['phi_hdi95'][1]:.3f}] {r['max_r_hat']:>6.3f} "
            f"{r['min_ess_bulk']:>5.0f}/{r['min_ess_tail']:<5.0f} {r['divergences']:>4}"
        )
    print("* compiled model reused from the first fit")
    first = rows[0][1]
    verdict = "meets" if first["total_s"] <= TARGET_S else "MISSES"
    other = first["total_s"] - first["compile_s"] - first["sampling_s"]
    print(
        f"default fit total {first['total_s']:.1f} s ({first['compile_s']:.1f} s compile + "
        f"{first['sampling_s']:.1f} s sampling + {other:.1f} s other): {verdict} the target "
        f"of <= {TARGET_S:.0f} s"
    )
    if not args.no_baseline:
        base = rows[-1][1]
        print(
            f"speed ratio, PyMC NUTS / default: total {base['total_s'] / first['total_s']:.2f}x, "
            f"sampling {base['sampling_s'] / first['sampling_s']:.2f}x"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "import_s": import_s,
                    "cpu_count": os.cpu_count(),
                    "load_average": load,
                    "target_s": TARGET_S,
                    "runs": dict(rows),
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
