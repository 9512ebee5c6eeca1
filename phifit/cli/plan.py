"""``phifit plan``: before training, the predicted interval, power and cost for phi of a design."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .. import defaults
from ..defaults import PLAN_MISFIT_MODEL, PLAN_MISFIT_MODELS
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
    add = p.add_argument
    add("--design", help=HELP["design"])
    add("--pilot", metavar="RUNS.csv", help="pilot run table: its Huber fit gives the law and the noise")
    add("--variant", help="recipe of the pilot table (default baseline)")
    add_table_options(p)
    add("--phi", type=float, help=HELP["phi"])
    add("--delta-phi", type=float, help="delta phi of a second recipe")
    add("--noise", type=float, help="per-run log-loss sd (default: pilot's, else 0.005)")
    add("--cell-noise", type=float, help="log-loss sd shared per cell")
    add("--seeds", type=int, help="seeds per planned run (default: the design's)")
    add("--simulate", type=int, nargs="?", const=defaults.PLAN_TABLES, metavar="N", help=HELP["simulate"])
    add("--law-uncertainty", action="store_true", help=HELP["law_uncertainty"])
    add("--misfit", action=argparse.BooleanOptionalAction, help=HELP["misfit"])
    add("--misfit-model", choices=PLAN_MISFIT_MODELS, default=PLAN_MISFIT_MODEL, help=HELP["misfit_model"])
    add("--misfit-shape", action="store_true", help="the same as --misfit-model shape")
    add("--boot", type=int, default=defaults.PLAN_N_BOOT, help=HELP["boot"])
    add("--wild", type=int, default=defaults.PLAN_N_WILD, help=HELP["wild"])
    add_jobs_argument(p, "parallel processes for --simulate")
    add_parallel_arguments(p)
    add("--seed", type=int, default=defaults.SEED, help="seed of the simulation")
    add("--optimize", action="store_true", help="search a better design under the cap")
    add("--max-flops", type=float, help="cap in training FLOPs")
    add("--max-hours", type=float, help="cap in trainer hours (spec)")
    add("--min-runs", type=int, default=0, help="fewest runs (seeds included) an optimised design may have")
    add("--objective", choices=("width", "power"), default="width")
    add("--next", type=int, metavar="K", help=HELP["next"])
    add("--pool", help=HELP["pool"])
    add("--out-spec", help=HELP["out_spec"])
    add("--json", metavar="PATH", help="write the plan as JSON ('-' for stdout)")
    add("--figure", metavar="PATH", help="write a figure (png/pdf/svg)")
    add("--force", action="store_true", help="overwrite outputs")
    p.set_defaults(func=run)


#: the help of the options whose text is longer than a line
HELP = {
    "design": "paper | a sweep spec (.toml, or a bundled name such as cpu_small) | a CSV of planned runs "
    "(r, n_once, n_rec, tokens, budget); default: the pilot's own runs, else paper",
    "phi": "assumed phi (default: the law's); with --pilot, the pilot's fit with phi held there",
    "simulate": f"also simulate N tables, each with its cell bootstrap and wild tests (default "
    f"{defaults.PLAN_TABLES} when given without N; 0: none).  Without the option, a plan with "
    f"--pilot simulates {defaults.PLAN_TABLES} tables for the widths alone (power: asymptotic)",
    "law_uncertainty": "with --pilot and --simulate: draw each simulated table's law from the pilot's "
    "(budget, r) cell-bootstrap replicates, so the prediction carries the pilot's uncertainty about the law",
    "misfit": "with --pilot (the default): carry the pilot's (budget, r) cell-mean residuals, the "
    "law's misfit: fixed offsets in every simulated table (drawn from their spread for cells the "
    "pilot lacks), a cell term in the asymptotic plan, the within-cell residual sd per run; "
    "--no-misfit: the noise of the pilot's residuals alone",
    "misfit_model": "with the misfit carried, how: 'shape' carries each pilot cell's curve in model size "
    "(level, slope and curvature of its residuals along the isoFLOP curve; the simulated tables "
    "take each seen cell's curve at the planned sizes and draw unseen cells' curves from the "
    "pilot's spread), 'level' a level per cell, 'auto' (the default) the curves when they cover "
    "every planned run (a cell the pilot ran, a size within its runs'), else the level; with "
    "--optimize, auto is the level (see docs/planning.md)",
    "boot": f"cell-bootstrap replicates per simulated table (default {defaults.PLAN_N_BOOT})",
    "wild": f"wild cluster replicates per test per table (default {defaults.PLAN_N_WILD})",
    "next": "with --pilot (the runs so far) and --pool: the K candidate runs that most narrow phi's "
    "predicted interval per training FLOP (or raise power, --objective power), within --max-flops",
    "pool": "candidate runs for --next: a sweep spec (.toml or a bundled name; its runs carry their "
    "run ids) or a CSV of runs with budget, r, n_once, n_rec, tokens, flops (any other columns are kept)",
    "out_spec": "where --optimize writes its spec / CSV, and --next the CSV of its picks "
    "(`phifit sweep SPEC --runs-from` trains them)",
}


def write_json(path: str, data: dict) -> None:
    """``--json PATH``: the result as indented JSON, on stdout for "-"."""
    text = json.dumps(data, indent=2)
    if path == "-":
        print(text)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _options(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The parsed options ``names``, as keyword arguments of the planner's functions."""
    return {name: getattr(args, name) for name in names}


def _refuse(message: str) -> int:
    """A CLI-only refusal: the message on stderr, exit code 2."""
    print(f"phifit plan: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    check_jobs(args.n_jobs)
    from ..plan import optimize_plan, plan_law, simulation_settings, tables_to_simulate, write_optimized
    from ..plan.design import plan_design, plan_figure, resolve_design

    for path in (args.json, args.figure, args.out_spec):
        if path and path != "-" and os.path.exists(path) and not args.force:
            raise FileExistsError(f"{path}: exists; choose another path or pass --force")
    if args.next is not None:
        return _next(args)
    if args.pool:
        return _refuse("--pool is read by --next K")
    parallel = parallel_options(args)
    n_tables = tables_to_simulate(args.simulate, pilot=bool(args.pilot))
    if args.misfit and not args.pilot:
        return _refuse("--misfit needs --pilot (whose residuals it carries)")
    args.misfit = args.misfit is not False
    args.misfit_model = "shape" if args.misfit_shape else args.misfit_model
    if args.misfit_model == "shape" and not (args.pilot and args.misfit):
        return _refuse("--misfit-model shape needs --pilot and the misfit carried")
    if args.law_uncertainty and not (args.pilot and n_tables):
        return _refuse("--law-uncertainty needs --pilot (whose fit is uncertain) and tables to simulate")
    pilot = load_recipe_runs(args, path=args.pilot) if args.pilot else None
    law_draws = n_tables if args.law_uncertainty else 0
    names = ("phi", "noise", "cell_noise", "misfit", "misfit_model", "optimize", "seed", "n_jobs")
    law = plan_law(args.design, pilot=pilot, law_draws=law_draws, **_options(args, *names), **parallel)
    design = resolve_design(args.design, pilot)
    if args.seeds is not None:
        design = design.with_seeds(args.seeds)
    tests = args.simulate is not None
    simulation = simulation_settings(
        law, n_boot=args.boot, n_wild=args.wild, seed=args.seed, n_jobs=args.n_jobs, tests=tests, **parallel
    )
    result = plan_design(
        design,
        params=law.params,
        noise=law.noise,
        law_source=law.source,
        delta_phi=args.delta_phi,
        n_tables=n_tables,
        progress=sys.stderr.isatty(),
        pilot=pilot,
        **simulation,
    )
    if args.optimize:
        caps = _options(args, "max_flops", "max_hours", "objective", "min_runs")
        result, opt = optimize_plan(
            result, design, law.params, law.noise, n_tables=n_tables, simulation=simulation, **caps
        )
        if args.out_spec:
            result = write_optimized(result, opt, design, args.out_spec, source=args.design or design.source)
    print(result.summary())
    if args.json:
        write_json(args.json, result.to_dict())
    if args.figure:
        plan_figure(result).savefig(args.figure, dpi=150)
    return 0


def _next(args: argparse.Namespace) -> int:
    """``--next K``: the K pool runs to train next (:func:`phifit.plan.next_runs.choose_next`)."""
    from ..plan import load_pool
    from ..plan.next_runs import choose_next

    args.misfit = args.misfit is not False
    if not (args.pilot and args.pool):
        return _refuse("--next K needs --pilot RUNS.csv (the runs so far) and --pool (the candidates)")
    if args.next < 1:
        return _refuse(f"--next K needs K >= 1, got {args.next}")
    runs = load_recipe_runs(args, path=args.pilot)
    pool, source = load_pool(args.pool)
    options = _options(args, "max_flops", "objective", "misfit", "cell_noise")
    result = choose_next(runs, pool, args.next, pool_source=source, **options)
    print(result.summary())
    if args.out_spec:
        result.frame.to_csv(args.out_spec, index=False)
        print(f"wrote {args.out_spec} ({len(result.picks)} runs)")
        if "run_id" in result.frame and not source.endswith(".csv"):
            print(f"train them: phifit sweep {source} --out RUNS.csv --runs-from {args.out_spec}")
    if args.json:
        write_json(args.json, result.to_dict())
    return 0
