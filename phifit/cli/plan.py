"""``phifit plan``: before training, the predicted interval, power and cost for phi of a design."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

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
    p.add_argument(
        "--phi",
        type=float,
        default=None,
        help="assumed phi (default: the law's); with --pilot, the pilot's fit with phi held there",
    )
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
        default=None,
        metavar="N",
        help=f"also simulate N tables, each with its cell bootstrap and wild tests (default "
        f"{defaults.PLAN_TABLES} when given without N; 0: none).  Without the option, a plan with "
        f"--pilot simulates {defaults.PLAN_TABLES} tables for the widths alone (power: asymptotic)",
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
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --pilot (the default): carry the pilot's (budget, r) cell-mean residuals, the "
        "law's misfit: fixed offsets in every simulated table (drawn from their spread for cells the "
        "pilot lacks), a cell term in the asymptotic plan, the within-cell residual sd per run; "
        "--no-misfit: the noise of the pilot's residuals alone",
    )
    p.add_argument(
        "--misfit-model",
        choices=defaults.PLAN_MISFIT_MODELS,
        default=defaults.PLAN_MISFIT_MODEL,
        dest="misfit_model",
        help="with the misfit carried, how: 'shape' carries each pilot cell's curve in model size "
        "(level, slope and curvature of its residuals along the isoFLOP curve; the simulated tables "
        "take each seen cell's curve at the planned sizes and draw unseen cells' curves from the "
        "pilot's spread), 'level' a level per cell, 'auto' (the default) the curves when they cover "
        "every planned run (a cell the pilot ran, a size within its runs'), else the level; with "
        "--optimize, auto is the level (see docs/planning.md)",
    )
    p.add_argument(
        "--misfit-shape",
        action="store_true",
        dest="misfit_shape",
        help="the same as --misfit-model shape",
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
    p.add_argument(
        "--next",
        type=int,
        default=None,
        metavar="K",
        help="with --pilot (the runs so far) and --pool: the K candidate runs that most narrow phi's "
        "predicted interval per training FLOP (or raise power, --objective power), within --max-flops",
    )
    p.add_argument(
        "--pool",
        default=None,
        help="candidate runs for --next: a sweep spec (.toml or a bundled name; its runs carry their "
        "run ids) or a CSV of runs with budget, r, n_once, n_rec, tokens, flops (any other columns are kept)",
    )
    p.add_argument(
        "--out-spec",
        default=None,
        dest="out_spec",
        help="where --optimize writes its spec / CSV, and --next the CSV of its picks "
        "(`phifit sweep SPEC --runs-from` trains them)",
    )
    p.add_argument("--json", default=None, metavar="PATH", help="write the plan as JSON ('-' for stdout)")
    p.add_argument("--figure", default=None, metavar="PATH", help="write a figure (png/pdf/svg)")
    p.add_argument("--force", action="store_true", help="overwrite outputs")
    p.set_defaults(func=run)


def write_json(path: str, data: dict) -> None:
    """``--json PATH``: the result as indented JSON, on stdout for "-"."""
    import json

    text = json.dumps(data, indent=2)
    if path == "-":
        print(text)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _check_out(path: str | None, force: bool) -> None:
    if path and path != "-" and os.path.exists(path) and not force:
        raise FileExistsError(f"{path}: exists; choose another path or pass --force")


def run(args: argparse.Namespace) -> int:

    check_jobs(args.n_jobs)
    from ..plan.design import (
        NoiseModel,
        design_misfit,
        pilot_noise,
        plan_design,
        resolve_design,
    )
    from ..study import REFERENCE_PARAMS

    for path in (args.json, args.figure, args.out_spec):
        _check_out(path, args.force)
    if args.next is not None:
        return _next(args)
    if args.pool:
        print("phifit plan: --pool is read by --next K", file=sys.stderr)
        return 2
    parallel = parallel_options(args)
    params = dict(REFERENCE_PARAMS)
    law_source = "the study's joint fit"
    noise = None
    pilot = None
    laws, laws_source, misfit = None, "", None
    # without --simulate, a pilot's plan simulates tables for the widths (the misfit's effect
    # on a cell bootstrap is not linear); --simulate N adds the wild tests
    tests = args.simulate is not None
    n_tables = args.simulate if args.simulate is not None else (defaults.PLAN_TABLES if args.pilot else 0)
    if args.misfit and not args.pilot:
        print("phifit plan: --misfit needs --pilot (whose residuals it carries)", file=sys.stderr)
        return 2
    args.misfit = args.misfit is not False
    if args.misfit_shape:
        args.misfit_model = "shape"
    if args.misfit_model == "shape" and not (args.pilot and args.misfit):
        print("phifit plan: --misfit-model shape needs --pilot and the misfit carried", file=sys.stderr)
        return 2
    if args.law_uncertainty and not (args.pilot and n_tables):
        print(
            "phifit plan: --law-uncertainty needs --pilot (whose fit is uncertain) and tables to simulate",
            file=sys.stderr,
        )
        return 2
    if args.pilot:
        from ..fitters.huber import fit_huber

        pilot = load_recipe_runs(args, path=args.pilot)
        fit = fit_huber(pilot)
        params = dict(fit.params)
        missing = [k for k, v in params.items() if v is None and not (k == "phi" and args.phi is not None)]
        if missing:
            why = []
            if {"B", "beta"} & set(missing):
                why.append("B and beta need runs at two or more token counts")
            if "phi" in missing:
                why.append("phi needs looped runs (r > 1) at two or more values of r, or --phi")
            raise ValueError(
                f"{pilot.source}: the pilot's fit does not identify {', '.join(missing)}, and a plan "
                f"simulates tables from all six parameters: {'; '.join(why)}"
            )
        law_source = f"Huber fit of the pilot {pilot.source}"
        if args.phi is not None and params.get("phi") is not None:
            params, law_source = _law_with_phi_held(pilot, args.phi)
        if args.misfit:
            model = "level" if args.optimize and args.misfit_model == "auto" else args.misfit_model
            frame = resolve_design(args.design, pilot).frame
            noise, misfit = design_misfit(pilot, fit, frame, model=model, cell_noise=args.cell_noise)
        else:
            noise, misfit = pilot_noise(pilot, fit, cell_noise=args.cell_noise, misfit=False)
        if args.law_uncertainty:
            laws, laws_source = _pilot_law_draws(pilot, fit, args, n_tables)
    if args.phi is not None:
        if params.get("phi") != args.phi:  # no pilot, or one whose fit leaves phi unestimated
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
        "tests": tests,
    }
    result = plan_design(
        design,
        params=params,
        noise=noise,
        law_source=law_source,
        delta_phi=args.delta_phi,
        n_tables=n_tables,
        progress=sys.stderr.isatty(),
        pilot=pilot,
        **simulation,
    )
    if args.optimize:
        result = _optimize(args, design, params, noise, result, simulation, n_tables)
    print(result.summary())
    if args.json:
        write_json(args.json, result.to_dict())
    if args.figure:
        from ..plan.design import plan_figure

        plan_figure(result).savefig(args.figure, dpi=150)
    return 0


def load_pool(pool: str) -> tuple[Any, str]:
    """The candidate runs of ``--pool``: a sweep spec's planned runs (with run ids) or a CSV."""
    import pandas as pd

    from ..plan.inputs import design_from_spec

    if pool.endswith(".csv"):
        if not os.path.isfile(pool):
            raise FileNotFoundError(f"{pool}: no such file (--pool)")
        return pd.read_csv(pool), pool
    return design_from_spec(pool).frame, pool


def _next(args: argparse.Namespace) -> int:
    """``--next K``: the K pool runs to train next (:func:`phifit.plan.next_runs.choose_next`)."""

    from ..plan.next_runs import choose_next

    args.misfit = args.misfit is not False
    if not (args.pilot and args.pool):
        print(
            "phifit plan: --next K needs --pilot RUNS.csv (the runs so far) and --pool (the candidates)",
            file=sys.stderr,
        )
        return 2
    if args.next < 1:
        print(f"phifit plan: --next K needs K >= 1, got {args.next}", file=sys.stderr)
        return 2
    runs = load_recipe_runs(args, path=args.pilot)
    pool, source = load_pool(args.pool)
    result = choose_next(
        runs,
        pool,
        args.next,
        max_flops=args.max_flops,
        objective=args.objective,
        misfit=args.misfit,
        cell_noise=args.cell_noise,
        pool_source=source,
    )
    print(result.summary())
    if args.out_spec:
        result.frame.to_csv(args.out_spec, index=False)
        print(f"wrote {args.out_spec} ({len(result.picks)} runs)")
        if "run_id" in result.frame and not source.endswith(".csv"):
            print(f"train them: phifit sweep {source} --out RUNS.csv --runs-from {args.out_spec}")
    if args.json:
        write_json(args.json, result.to_dict())
    return 0


def _law_with_phi_held(pilot: Any, phi: float) -> tuple[dict[str, float], str]:
    """The pilot's Huber fit with phi held at ``phi`` (its profile point there): the law a plan at an
    assumed phi should simulate, since the other five parameters then still fit the pilot; the
    noise and misfit stay those of the pilot's free fit."""
    from ..fitters.huber import fit_huber
    from ..law import DEFAULT_BOUNDS, LawSpec

    held = fit_huber(pilot, spec=LawSpec(fixed={"phi": float(phi)}, bounds=DEFAULT_BOUNDS))
    return dict(held.params), f"Huber fit of the pilot {pilot.source} with phi held at {phi:g}"


def _pilot_law_draws(
    pilot, fit, args: argparse.Namespace, n_tables: int
) -> tuple[list[dict[str, float]], str]:
    """One law per simulated table: the pilot's (budget, r) cell-bootstrap replicates of its
    Huber fit (the same resampling as ``phifit fit --bootstrap``), seeded by ``--seed``."""
    import numpy as np

    from ..bootstrap.block import block_bootstrap

    boot = block_bootstrap(
        pilot,
        fit,
        n_boot=n_tables,
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
    if len(draws) < n_tables:  # a replicate that failed: reuse the first ones, said in the source
        draws += draws[: n_tables - len(draws)]
    note = "" if ok.all() else f", {int((~ok).sum())} failed replicate(s) replaced"
    return draws, f"the pilot's cell-bootstrap replicates (seed {args.seed}{note})"


def _optimize(args, design, params, noise, result, simulation: dict, n_tables: int):
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
        "n_rejected": opt.n_rejected,
        "budgets": {str(b): ws for b, ws in opt.budgets.items()},
        "r": list(opt.r),
        "seeds": opt.seeds,
    }
    if n_tables:
        sim = simulate_plan(
            opt.design,
            params,
            noise,
            n_tables=n_tables,
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
