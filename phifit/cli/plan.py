"""``phifit plan``: before training, the predicted interval, power and cost for phi of a design."""

from __future__ import annotations

import argparse
import os
import sys

from .. import defaults
from ._common import (
    add_jobs_argument,
    add_parallel_arguments,
    add_table_options,
    check_jobs,
    load_recipe_runs,
    parallel_options,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="can my planned runs measure phi? predicted interval width, power and cost",
        description="Predict, before training, the width of phi's 95%% interval, the power against "
        "phi = 0 / phi = 1 (and a delta phi) and the cost of a planned design, asymptotically "
        "(sandwich covariance, < 1 s) and, with --simulate, by simulating and analysing tables.",
    )
    p.add_argument(
        "--design",
        default=None,
        help="paper | a sweep spec (.toml, or a bundled name such as cpu_small) | a CSV of planned runs "
        "(r, n_once, n_rec, tokens, budget); default: the pilot's own runs, else paper",
    )
    p.add_argument(
        "--pilot", metavar="RUNS.csv", help="pilot run table: its Huber fit gives the law and the noise"
    )
    p.add_argument("--variant", default=None, help="recipe of the pilot table (default baseline)")
    add_table_options(p)
    p.add_argument("--phi", type=float, default=None, help="assumed phi (default: the law's)")
    p.add_argument(
        "--delta-phi", type=float, default=None, dest="delta_phi", help="delta phi of a second recipe"
    )
    p.add_argument(
        "--noise", type=float, default=None, help="per-run log-loss sd (default: pilot's, else 0.005)"
    )
    p.add_argument(
        "--cell-noise", type=float, default=None, dest="cell_noise", help="log-loss sd shared per cell"
    )
    p.add_argument("--seeds", type=int, default=None, help="seeds per planned run (default: the design's)")
    p.add_argument(
        "--simulate",
        type=int,
        nargs="?",
        const=defaults.PLAN_TABLES,
        default=0,
        metavar="N",
        help=f"also simulate N tables (default {defaults.PLAN_TABLES} when given without N)",
    )
    p.add_argument(
        "--law-uncertainty",
        action="store_true",
        dest="law_uncertainty",
        help="with --pilot and --simulate: draw each simulated table's law from the pilot's (budget, r) "
        "cell-bootstrap replicates, so the prediction carries the pilot's uncertainty about the law",
    )
    p.add_argument(
        "--misfit",
        action="store_true",
        help="with --pilot and --simulate: add the pilot's (budget, r) cell-mean residuals "
        "(the law's misfit) to every simulated table as fixed offsets, with the within-cell "
        "residual sd as the per-run noise",
    )
    p.add_argument(
        "--boot",
        type=int,
        default=defaults.PLAN_N_BOOT,
        help=f"cell-bootstrap replicates per simulated table (default {defaults.PLAN_N_BOOT})",
    )
    p.add_argument(
        "--wild",
        type=int,
        default=defaults.PLAN_N_WILD,
        help=f"wild cluster replicates per test per table (default {defaults.PLAN_N_WILD})",
    )
    add_jobs_argument(p, "parallel processes for --simulate")
    add_parallel_arguments(p)
    p.add_argument("--seed", type=int, default=defaults.SEED, help="seed of the simulation")
    p.add_argument("--optimize", action="store_true", help="search a better design under the cap")
    p.add_argument("--max-flops", type=float, default=None, dest="max_flops", help="cap in training FLOPs")
    p.add_argument(
        "--max-hours", type=float, default=None, dest="max_hours", help="cap in trainer hours (spec)"
    )
    p.add_argument(
        "--min-runs",
        type=int,
        default=0,
        dest="min_runs",
        help="fewest runs (seeds included) an optimised design may have",
    )
    p.add_argument("--objective", choices=("width", "power"), default="width")
    p.add_argument("--out-spec", default=None, dest="out_spec", help="where --optimize writes its spec / CSV")
    p.add_argument("--json", default=None, metavar="PATH", help="write the plan as JSON ('-' for stdout)")
    p.add_argument("--figure", default=None, metavar="PATH", help="write a figure (png/pdf/svg)")
    p.add_argument("--force", action="store_true", help="overwrite outputs")
    p.set_defaults(func=run)


def _check_out(path: str | None, force: bool) -> None:
    if path and path != "-" and os.path.exists(path) and not force:
        raise FileExistsError(f"{path}: exists; choose another path or pass --force")


def run(args: argparse.Namespace) -> int:
    import json

    check_jobs(args.n_jobs)
    from ..plan.design import (
        NoiseModel,
        pilot_noise,
        plan_design,
        resolve_design,
    )
    from ..study import REFERENCE_PARAMS

    for path in (args.json, args.figure, args.out_spec):
        _check_out(path, args.force)
    parallel = parallel_options(args)
    params = dict(REFERENCE_PARAMS)
    law_source = "the study's joint fit"
    noise = None
    pilot = None
    laws, laws_source, misfit = None, "", None
    for flag, given, what in (
        ("--misfit", args.misfit, "whose residuals it carries"),
        ("--law-uncertainty", args.law_uncertainty, "whose fit is uncertain"),
    ):
        if given and not (args.pilot and args.simulate):
            print(f"phifit plan: {flag} needs --pilot ({what}) and --simulate N", file=sys.stderr)
            return 2
    if args.pilot:
        from ..fitters.huber import fit_huber

        pilot = load_recipe_runs(args, path=args.pilot)
        fit = fit_huber(pilot)
        params = dict(fit.params)
        law_source = f"Huber fit of the pilot {pilot.source}"
        noise, misfit = pilot_noise(pilot, fit, cell_noise=args.cell_noise, misfit=args.misfit)
        if args.law_uncertainty:
            laws, laws_source = _pilot_law_draws(pilot, fit, args)
    if args.phi is not None:
        params["phi"] = args.phi
        law_source += f", phi set to {args.phi:g}"
        if laws is not None:
            laws = [dict(law, phi=args.phi) for law in laws]
            laws_source += f", phi set to {args.phi:g}"
    if args.noise is not None or noise is None:
        per_run = args.noise if args.noise is not None else 0.005
        src = "given" if args.noise is not None else "default 0.005 (the study-like noise of data/README)"
        noise = NoiseModel(per_run, args.cell_noise or 0.0, src)
    design = resolve_design(args.design, pilot)
    if args.seeds is not None:
        design = design.with_seeds(args.seeds)
    # what every simulated table of this run is made of: the given design's and, with
    # --optimize, the optimised design's (so that their widths compare like with like)
    simulation = {
        "n_boot": args.boot,
        "n_wild": args.wild,
        "seed": args.seed,
        "n_jobs": args.n_jobs,
        **parallel,
        "laws": laws,
        "laws_source": laws_source,
        "misfit": misfit,
    }
    result = plan_design(
        design,
        params=params,
        noise=noise,
        law_source=law_source,
        delta_phi=args.delta_phi,
        n_tables=args.simulate,
        progress=sys.stderr.isatty() or bool(args.simulate),
        **simulation,
    )
    if args.optimize:
        result = _optimize(args, design, params, noise, result, simulation)
    print(result.summary())
    if args.json:
        text = json.dumps(result.to_dict(), indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w", encoding="utf-8") as f:
                f.write(text)
    if args.figure:
        from ..plan.design import plan_figure

        plan_figure(result).savefig(args.figure, dpi=150)
    return 0


def _pilot_law_draws(pilot, fit, args: argparse.Namespace) -> tuple[list[dict[str, float]], str]:
    """One law per simulated table: the pilot's (budget, r) cell-bootstrap replicates of its
    Huber fit (the same resampling as ``phifit fit --bootstrap``), seeded by ``--seed``."""
    import numpy as np

    from ..bootstrap.block import block_bootstrap

    boot = block_bootstrap(
        pilot,
        fit,
        n_boot=args.simulate,
        seed=args.seed,
        n_jobs=args.n_jobs,
        progress=False,
        jackknife=False,
        **parallel_options(args),
    )
    names = list(fit.params)
    columns = {k: np.asarray(boot.params[k], dtype=float) for k in names}
    ok = np.all([np.isfinite(columns[k]) for k in names], axis=0)
    draws = [{k: float(columns[k][i]) for k in names} for i in np.flatnonzero(ok)]
    if len(draws) < args.simulate:  # a replicate that failed: reuse the first ones, said in the source
        draws += draws[: args.simulate - len(draws)]
    note = "" if ok.all() else f", {int((~ok).sum())} failed replicate(s) replaced"
    return draws, f"the pilot's cell-bootstrap replicates (seed {args.seed}{note})"


def _optimize(args, design, params, noise, result, simulation: dict):
    """``--optimize``: the best design within the caps; with ``--simulate`` it is simulated with the
    same inputs as the given design (``simulation``: replicates, seed, and the pilot's law draws
    and misfit when given), so that the before/after widths compare like with like."""
    import dataclasses

    from ..plan.design import simulate_plan
    from ..plan.optimize import optimize_design, write_spec

    opt = optimize_design(
        design,
        params,
        noise,
        max_flops=args.max_flops,
        max_hours=args.max_hours,
        objective=args.objective,
        min_runs=args.min_runs,
    )
    before = result.asymptotic
    info = {
        "line": opt.design.summary_line().replace("optimised", "optimised design", 1)
        + f"; budgets/widths {', '.join(f'{b:.3g}: {ws}' for b, ws in sorted(opt.budgets.items()))}",
        "width_before": before.width,
        "width_after": opt.asymptotic.width,
        "power_phi0_before": before.power["phi=0"],
        "power_phi0_after": opt.asymptotic.power["phi=0"],
        "flops_before": design.flops,
        "flops_after": opt.flops,
        "hours_before": None if design.seconds is None else design.seconds / 3600,
        "hours_after": None if opt.seconds is None else opt.seconds / 3600,
        "n_candidates": opt.n_candidates,
        "n_within_cap": opt.n_within_cap,
        "budgets": {str(b): ws for b, ws in opt.budgets.items()},
        "r": list(opt.r),
        "seeds": opt.seeds,
    }
    if args.simulate:
        sim = simulate_plan(
            opt.design,
            params,
            noise,
            n_tables=args.simulate,
            progress=True,
            **simulation,
        )
        info["sim_width_before"] = result.simulation.width_median
        info["sim_width_after"] = sim.width_median
        info["sim_power_phi0_after"] = sim.power.get("phi=0")
        info["sim_misfit_after"] = sim.misfit
        info["sim_law_draws_after"] = sim.law_draws_source
    if args.out_spec:
        header = (
            f"written by phifit plan --optimize from {args.design or design.source} "
            f"({opt.n_candidates} candidates, "
            f"{opt.n_within_cap} within the cap)\npredicted 95% width of phi (asymptotic): "
            f"{before.width:.3g} -> {opt.asymptotic.width:.3g}; "
            f"training FLOPs {design.flops:.3g} -> {opt.flops:.3g}"
        )
        if design.kind == "spec":
            write_spec(opt, design.spec, args.out_spec, header=header)
        else:
            opt.design.frame.to_csv(args.out_spec, index=False)
        info["written"] = args.out_spec
    return dataclasses.replace(result, optimized=info)
