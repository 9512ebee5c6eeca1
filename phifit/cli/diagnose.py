"""``phifit diagnose``: the residual tests, per-r and per-budget offsets, identifiability and
influence of a fit, as text (the same numbers the HTML report shows).

    phifit diagnose RUNS.csv [--method huber|lsq] [--fix NAME=VALUE] [--significance 0.01] [--json OUT]
                             [--skip influence,consistency,multipliers,drift,parts] [--parts N]

Fits the table (Huber by default), then runs :func:`phifit.diagnostics.diagnose`: residuals
per r and per budget with the systematic-offset rule, Jarque-Bera, Breusch-Pagan and trend
tests on log residuals, the conditioning and correlations of the fit with the profile of
phi, leave-one-run/cell-out influence on phi and phi on subsets (budget halves, pairs of r),
and the free multipliers m_r (one per looped r, with cell-bootstrap intervals) against r^phi
with the wild cluster bootstrap test of r^phi (:mod:`phifit.diagnostics.multipliers`;
``--skip multipliers`` leaves it out), and the drift of phi with compute, phi(C) = phi_0 +
phi_1 log(C / C_ref), with cell-bootstrap intervals and the wild cluster bootstrap test of
phi_1 = 0 (:mod:`phifit.diagnostics.drift`; ``--skip drift`` leaves it out).  Both run where
the report runs them (:mod:`phifit.diagnostics.phi_checks`: phi identifiable; the multipliers
with phi free, holding any other held parameter in both laws; the drift with nothing held).
Last, whether the answer rests on one part of the table
(:func:`phifit.diagnostics.parts.leave_one_part_out`: the table refitted without each size, budget
and r in turn, with phi's cell-bootstrap interval per refit, ``--parts N`` replicates per part;
``--skip parts`` or ``--parts 0`` leaves it out; it needs phi free and identified).
``--json OUT`` writes ``{"fit": fit JSON, "diagnostics": ..., "multipliers": ..., "drift": ...,
"parts": ...}``.
"""

from __future__ import annotations

import argparse
import json

from .. import defaults
from ._common import (
    add_parts_argument,
    add_recipe_argument,
    add_runs_argument,
    add_wild_all_argument,
    check_output_file,
    check_parts,
    leave_parts_out,
    load_recipe_runs,
    parse_fix,
    wild_stop,
    write_json,
)

SKIPPABLE = ("influence", "consistency", "multipliers", "drift", "parts")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diagnose",
        help="residual tests, per-r/per-budget offsets, identifiability and influence as text",
        description="Fit the joint law and print its diagnostics: residuals per r and per budget, "
        "residual tests, identifiability of phi, influence of runs and cells, phi on subsets.",
    )
    add_runs_argument(p)
    add_recipe_argument(p)
    p.add_argument(
        "--method", choices=("huber", "lsq"), default="huber", help="fit to diagnose (default huber)"
    )
    p.add_argument("--fix", action="append", metavar="NAME=VALUE", help="hold a parameter fixed (repeatable)")
    p.add_argument(
        "--starts",
        type=int,
        default=defaults.N_STARTS,
        help=f"random starts of the fit (default {defaults.N_STARTS})",
    )
    p.add_argument(
        "--seed", type=int, default=defaults.SEED, help=f"seed of the starts (default {defaults.SEED})"
    )
    p.add_argument(
        "--significance",
        type=float,
        default=0.01,
        help="significance level of the residual tests (default 0.01)",
    )
    p.add_argument(
        "--skip",
        metavar="WHAT[,WHAT]",
        default=None,
        help="skip the slower refit-based checks: influence, consistency, multipliers, drift, parts",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=defaults.N_BOOT,
        metavar="N",
        help="cell-bootstrap replicates of the free multipliers m_r, of the drift of phi and of phi's "
        f"interval that the left-out parts are read against (default {defaults.N_BOOT}; 0: no intervals)",
    )
    p.add_argument(
        "--wild",
        type=int,
        default=defaults.N_WILD,
        metavar="N",
        help="wild cluster bootstrap replicates of the lack-of-fit test of r^phi and of the test "
        f"of phi_1 = 0 (default {defaults.N_WILD}; 0: no test; else >= {defaults.N_WILD_MIN})",
    )
    add_wild_all_argument(p)
    add_parts_argument(p)
    p.add_argument("--json", metavar="OUT", help="write the fit and its diagnostics as JSON")
    p.add_argument("--force", action="store_true", help="overwrite --json OUT if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..cautions import collect
    from ..diagnostics.phi_checks import drift_check, multiplier_check
    from ..diagnostics.suite import diagnose
    from ..fitters import fit
    from ..serialize import to_plain
    from .fit import closing_line

    if args.starts < 1:
        raise ValueError(f"--starts must be >= 1, got {args.starts}")
    if not 0 < args.significance < 1:
        raise ValueError(f"--significance must be in (0, 1), got {args.significance}")
    skip = [s.strip() for s in (args.skip or "").split(",") if s.strip()]
    unknown = [s for s in skip if s not in SKIPPABLE]
    if unknown:
        raise ValueError(f"--skip: unknown {', '.join(unknown)}; expected {' or '.join(SKIPPABLE)}")
    check_parts(args.parts)
    if args.json:
        check_output_file(args.json, args.force)
    runs = load_recipe_runs(args, show=False)  # the table's cautions go to [[Notes]]
    result = fit(runs, method=args.method, fix=parse_fix(args.fix), n_starts=args.starts, seed=args.seed)
    diag = diagnose(
        runs,
        result,
        significance=args.significance,
        seed=args.seed,
        skip=[s for s in skip if s not in ("multipliers", "drift", "parts")],
    )
    checks = {
        "method": args.method,
        "n_boot": args.bootstrap,
        "n_wild": args.wild,
        "seed": args.seed,
        "n_starts": args.starts,
        "wild_stop": wild_stop(args),
    }
    multipliers = drift = None
    if "multipliers" not in skip:
        multipliers = multiplier_check(runs, result, **checks)
    if "drift" not in skip:
        drift = drift_check(runs, result, **checks)
    parts = None if "parts" in skip else leave_parts_out(runs, result, args, multipliers, n_jobs=None)
    phi = "n/a" if result.phi is None else f"{result.phi:.4f}"
    fixed = f", fixed {', '.join(f'{k} = {v:g}' for k, v in result.fixed.items())}" if result.fixed else ""
    print(
        f"[[phifit diagnose: {runs.source}, {len(runs)} runs, method={result.method}{fixed}]]\n"
        f"    phi = {phi}, R^2 = {result.r2:.5f}, RMSE = {result.rmse:.5f} nats, "
        f"converged = {result.converged}"
    )
    print()
    print(diag.summary())
    if multipliers is not None:
        print()
        print(multipliers.summary())
    if drift is not None:
        print()
        print(drift.summary())
    if parts is not None:
        print()
        print(parts.summary())
    cautions = collect(
        runs.warnings,
        result.warnings,
        diag.warnings,
        None if multipliers is None else multipliers.warnings,
        None if drift is None else drift.warnings,
    )
    if cautions:
        print()
        print("[[Notes]]")
        for i, c in enumerate(cautions, 1):
            print(f"    [{i}] {c}")
    if args.json:
        out = {
            "generator": "phifit",
            "kind": "diagnostics",
            "fit": result.to_dict(),
            "diagnostics": diag.to_dict(),
            "multipliers": None if multipliers is None else multipliers.to_dict(),
            "drift": None if drift is None else drift.to_dict(),
            "parts": None if parts is None else parts.to_dict(),
            "warnings": [c.to_dict() for c in cautions],
        }
        write_json(args.json, json.dumps(to_plain(out), indent=2, allow_nan=False))
        print(f"\nwrote {args.json}")
    print()
    print(closing_line(cautions))
    return 0
