"""``phifit compare``: phi free against phi = 0, phi = 1 and any --fix, with a verdict.

Prints each fit's R^2 and RMSE (raw nats), AIC, BIC and the likelihood-ratio test against
the free fit (Gaussian on log-loss residuals, sigma profiled out), the leave-one-budget-out
and largest-budget extrapolation RMSE, and a verdict line.  ``--json OUT`` writes
``fits: {"free": ..., "phi=0": ..., "phi=1": ...}`` (each a fit JSON plus ``aic, bic,
lr_stat, lr_p_value, cv_rmse``) and ``verdict``.

A table where phi is identifiable also gets the lack-of-fit test of r^phi against one free
multiplier per r (:func:`phifit.diagnostics.phi_checks.multiplier_check`, the report's and
``phifit diagnose``'s guard; parameters the free fit holds, such as B and beta at one token
count, held in both laws): the m_r with their cell-bootstrap intervals and the wild cluster
bootstrap p-value, printed after the comparison and written as ``multipliers`` in the JSON
(``--no-multipliers`` skips it; it needs three distinct r, and says so otherwise).

It also asks whether the answer rests on one part of the table
(:func:`phifit.diagnostics.parts.leave_one_part_out`): the table refitted without each size, budget
and r in turn, with phi's cell-bootstrap interval per refit (``--parts N`` replicates per part,
default :data:`phifit.defaults.PARTS_N_BOOT`; 0 skips it), read against the full table's interval
from ``--bootstrap`` cell-bootstrap replicates (the parts' intervals, not wild tests, say whether
phi = 0 or phi = 1 is still excluded), printed last and written as ``parts`` in the JSON.

A non-looped table (no run with r > 1 and n_rec > 0) has no phi to restrict: there only the
``--fix`` restrictions of E, A, alpha, B or beta are compared, and without one the command
exits 2 saying so (:func:`non_looped_fixes`).
"""

from __future__ import annotations

import argparse
import json

from .. import defaults
from ._common import (
    add_bayes_arguments,
    add_parallel_arguments,
    add_parts_argument,
    add_recipe_argument,
    add_runs_argument,
    add_wild_all_argument,
    bayes_options,
    check_output_file,
    check_parts,
    leave_parts_out,
    load_recipe_runs,
    parallel_options,
    parse_fix,
    wild_stop,
    write_json,
)

DEFAULT_FIXES = ({"phi": 0.0}, {"phi": 1.0})


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="phi free vs phi = 0 and phi = 1: tests, AIC/BIC, out-of-sample error, verdict",
        description="Fit phi free, phi = 0, phi = 1 (and each --fix) and compare.",
    )
    add_runs_argument(p)
    add_recipe_argument(p)
    p.add_argument(
        "--fix",
        action="append",
        metavar="NAME=VALUE[,NAME=VALUE]",
        help="an extra restricted fit, e.g. --fix phi=0.5 (repeatable; each occurrence "
        "is one restriction; phi = 0 and phi = 1 are always included)",
    )
    p.add_argument(
        "--method",
        choices=("huber", "lsq", "bayes"),
        default="huber",
        help="huber (the study's objective), lsq (least squares on log-loss) or bayes "
        "(PSIS-LOO between posteriors)",
    )
    p.add_argument(
        "--starts",
        type=int,
        default=defaults.N_STARTS,
        help=f"random starts per fit (default {defaults.N_STARTS})",
    )
    p.add_argument(
        "--seed", type=int, default=defaults.SEED, help=f"seed of the starts (default {defaults.SEED})"
    )
    p.add_argument(
        "--no-cv",
        action="store_true",
        help="skip the out-of-sample errors (leave-one-budget-out, extrapolation)",
    )
    p.add_argument("--json", metavar="OUT", help="write the comparison as JSON")
    p.add_argument("--force", action="store_true", help="overwrite --json OUT if it exists")
    p.add_argument(
        "--wild",
        type=int,
        default=defaults.N_WILD,
        metavar="N",
        help="replicates of the restricted wild cluster bootstrap test of each restriction, which "
        f"holds when runs share noise within (budget, r) cells (default {defaults.N_WILD}; 0: only the "
        "chi-square likelihood-ratio test, which assumes independent runs)",
    )
    add_wild_all_argument(p)
    p.add_argument(
        "--block",
        metavar="COL[,COL]",
        default=None,
        help="clusters of the wild bootstrap: default (budget, r) cells when a budget column exists",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=defaults.N_BOOT,
        metavar="N",
        help=f"cell-bootstrap replicates of the free multipliers' intervals and of phi's interval that "
        f"the left-out parts are read against (default {defaults.N_BOOT}; 0: no intervals)",
    )
    p.add_argument(
        "--no-multipliers",
        action="store_true",
        help="skip the lack-of-fit test of r^phi against one free multiplier per r",
    )
    add_parts_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_parallel_arguments(p)
    add_bayes_arguments(p)
    p.set_defaults(func=run)


def non_looped_fixes(runs, extra: list[dict[str, float]]) -> list[dict[str, float]]:
    """The restrictions a non-looped table can test: only the ``--fix`` ones, none on phi.

    phi does not enter Chinchilla's law L = E + A N^-alpha + B D^-beta, so phi = 0 and phi = 1
    are not compared; fixed values of E, A, alpha, B or beta are, by the same likelihood-ratio
    and wild cluster bootstrap tests.  Raises ``ValueError`` (exit 2) naming what can be compared
    when nothing, or phi, is asked."""
    where = f"{runs.source}: " if runs.source else ""
    what = (
        "compare fixed values of the law's own parameters instead, e.g. --fix alpha=0.34 or "
        "--fix alpha=0.34,beta=0.28 (any of E, A, alpha, B, beta; repeatable)"
    )
    if not extra or any("phi" in fx for fx in extra):
        raise ValueError(
            f"{where}non-looped table (no run with r > 1 and n_rec > 0): phi does not enter the law, "
            f"so phi = 0 and phi = 1 cannot be compared; {what}"
        )
    return extra


def run(args: argparse.Namespace) -> int:
    from ..compare.restricted import compare_fits
    from ..frontier import non_looped

    if args.starts < 1:
        raise ValueError(f"--starts must be >= 1, got {args.starts}")
    if args.wild and args.wild < defaults.N_WILD_MIN:
        raise ValueError(f"--wild must be 0 (off) or >= {defaults.N_WILD_MIN} replicates, got {args.wild}")
    check_parts(args.parts)
    parallel = parallel_options(args)
    extra = [parse_fix([item]) for item in (args.fix or [])]
    if args.json:
        check_output_file(args.json, args.force)
    runs = load_recipe_runs(args)
    fixes = non_looped_fixes(runs, extra) if non_looped(runs) else list(DEFAULT_FIXES) + extra
    if args.method == "bayes":
        from ..fitters.bayes import compare_loo

        comparison = compare_loo(runs, fixes=fixes, **bayes_options(args))
    else:
        from ..fitters import fit

        free = fit(runs, method=args.method, n_starts=args.starts, seed=args.seed)
        comparison = compare_fits(
            runs,
            free,
            fixes=fixes,
            seed=args.seed,
            cv=not args.no_cv,
            n_starts=args.starts,
            n_wild=args.wild,
            block=args.block,
            wild_stop=wild_stop(args),
            **parallel,
        )
    multipliers = None
    if args.method != "bayes" and not args.no_multipliers:
        from ..diagnostics.phi_checks import multiplier_check

        multipliers = multiplier_check(
            runs,
            free,
            method=args.method,
            n_boot=args.bootstrap,
            n_wild=args.wild,
            seed=args.seed,
            n_starts=args.starts,
            wild_stop=wild_stop(args),
            **parallel,
        )
    parts = None if args.method == "bayes" else leave_parts_out(runs, free, args, multipliers, **parallel)
    print(comparison.summary())
    if multipliers is not None:
        print()
        print(multipliers.summary())
    if parts is not None:
        print()
        print(parts.summary())
    if args.json:
        out = comparison.to_dict()
        if multipliers is not None:
            out["multipliers"] = multipliers.to_dict()
        if parts is not None:
            out["parts"] = parts.to_dict()
        write_json(args.json, json.dumps(out, indent=2, allow_nan=False))
        print(f"\nwrote {args.json}")
    return 0
