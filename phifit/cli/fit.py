"""``phifit fit``: fit the joint law to a run table and print its summary.

Modes:

- ``phifit fit RUNS.csv``: one fit (``--method huber|lsq|bayes``, ``--fix NAME=VALUE``);
- ``--bootstrap N [--block COL[,COL]]``: adds a block bootstrap; the JSON gains ``ci``
  (95% percentile), ``ci_bca`` and ``bootstrap: {n, n_failed, block, ...}``;
- ``--wild-ci`` (with ``--bootstrap N``): also phi's test-inverted set (:mod:`phifit.bootstrap.inverted`),
  printed beside the percentile interval; the JSON gains ``phi_inverted``;
- ``--by variant --baseline NAME [--bootstrap N]``: separate fits per recipe and Delta-phi
  against the baseline refit on the same budgets (default 1000 bootstrap replicates); the
  JSON has ``fits: {variant: fit JSON}`` and ``delta_phi: {variant: {estimate, ci,
  p_value}}``.

The summary follows lmfit's ``fit_report`` (runs, free parameters, degrees of freedom,
objective, R^2, RMSE, AIC/BIC, parameters, correlations, notes); the run table's own
cautions (duplicate or short runs, no budget column) join the fit's notes and its JSON
``warnings``, and the closing line names every caution.

Progress bars go to stderr, only when it is a terminal, and never with ``--quiet``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import TYPE_CHECKING

from .. import defaults
from ..fitters import METHODS
from ._common import (
    add_bayes_arguments,
    add_jobs_argument,
    add_parallel_arguments,
    add_recipe_argument,
    add_runs_argument,
    bayes_options,
    check_jobs,
    check_output_file,
    check_posterior_output,
    load_recipe_runs,
    load_runs_from_args,
    parallel_options,
    parse_fix,
    write_json,
)

if TYPE_CHECKING:
    from ..cautions import Caution
    from ..result import FitResult
    from ..runs.table import RunTable

BOOTSTRAP_METHODS = ("huber", "lsq")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit",
        help="fit the joint law (phi and the five Chinchilla parameters)",
        description="Fit L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta.",
    )
    add_runs_argument(p)
    p.add_argument(
        "--method",
        choices=METHODS,
        default="huber",
        help="huber (reference: summed Huber on log-loss, 500 starts), lsq (lmfit), bayes (PyMC)",
    )
    p.add_argument(
        "--fix",
        action="append",
        metavar="NAME=VALUE",
        help="hold a parameter fixed, e.g. --fix phi=0 (repeatable)",
    )
    p.add_argument(
        "--starts",
        type=int,
        default=defaults.N_STARTS,
        help=f"huber/lsq: random starts (default {defaults.N_STARTS})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=defaults.SEED,
        help=f"seed of starts and resampling (default {defaults.SEED})",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        metavar="N",
        default=None,
        help="block-bootstrap replicates (e.g. 1000): percentile and BCa intervals",
    )
    p.add_argument(
        "--block",
        metavar="COL[,COL]",
        default=None,
        help="bootstrap blocks: default (budget, r) cells when a budget column "
        "exists, else single runs; 'run' for single runs",
    )
    p.add_argument(
        "--by",
        metavar="COL",
        default=None,
        help="fit each recipe (value of COL, e.g. variant) separately and report "
        "Delta-phi against --baseline",
    )
    p.add_argument(
        "--baseline",
        metavar="NAME",
        default=None,
        help="with --by: the reference recipe (default 'baseline' or the first value)",
    )
    p.add_argument(
        "--wild-ci",
        action="store_true",
        help="with --bootstrap N: also the test-inverted set of phi (the phi_0 the restricted wild "
        "cluster bootstrap keeps at 5%%; may be a union of pieces)",
    )
    p.add_argument(
        "--wild-ci-boot",
        type=int,
        metavar="B",
        default=199,
        help="with --wild-ci: wild replicates per tested phi_0 (default 199)",
    )
    add_recipe_argument(p)
    add_jobs_argument(p, "parallel workers for the bootstrap refits")
    add_parallel_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", metavar="OUT", help="write the result as JSON")
    p.add_argument("--force", action="store_true", help="overwrite --json OUT if it exists")
    add_bayes_arguments(p)
    p.add_argument(
        "--save-posterior",
        metavar="PATH.nc",
        default=None,
        help="with --method bayes: save the posterior (ArviZ netCDF)",
    )
    p.set_defaults(func=run)


def method_options(args: argparse.Namespace) -> dict:
    """Keyword options for the chosen method from the parsed arguments."""
    if args.method in ("huber", "lsq"):
        if args.starts < 1:
            raise ValueError(f"--starts must be >= 1, got {args.starts}")
        return {"n_starts": args.starts, "seed": args.seed}
    return {**bayes_options(args), "save": args.save_posterior, "overwrite": bool(args.force)}


def _check(args: argparse.Namespace) -> None:
    if args.bootstrap is not None and args.bootstrap < 2:
        raise ValueError(f"--bootstrap must be >= 2 replicates, got {args.bootstrap}")
    check_jobs(args.n_jobs)
    if args.baseline is not None and args.by is None:
        raise ValueError("--baseline needs --by COL (the column naming each run's recipe)")
    if args.block is not None and args.bootstrap is None and args.by is None:
        raise ValueError("--block only applies with --bootstrap N or --by COL")
    if (args.bootstrap is not None or args.by) and args.method not in BOOTSTRAP_METHODS:
        raise ValueError(
            f"--bootstrap and --by work with --method {' or '.join(BOOTSTRAP_METHODS)}, not {args.method}"
        )
    if args.wild_ci and (args.bootstrap is None or args.by or args.fix):
        raise ValueError("--wild-ci needs --bootstrap N, phi free and no --by")
    if args.wild_ci and args.wild_ci_boot < defaults.N_WILD_MIN:
        raise ValueError(
            f"--wild-ci-boot must be >= {defaults.N_WILD_MIN} replicates, got {args.wild_ci_boot}"
        )
    if args.save_posterior and args.method != "bayes":
        raise ValueError("--save-posterior needs --method bayes")
    if args.by and args.variant is not None:
        raise ValueError("--variant picks one recipe; --by compares them all: use one of the two")
    if args.by and args.fix:
        raise ValueError("--fix cannot be combined with --by (Delta-phi needs phi free)")


def run(args: argparse.Namespace) -> int:
    from ..cautions import collect
    from ..fitters import fit

    _check(args)
    parallel = parallel_options(args)
    if args.json:
        check_output_file(args.json, args.force)
    if args.save_posterior:
        check_posterior_output(args.save_posterior, args.force)
    progress = not args.quiet
    if args.by:
        runs = load_runs_from_args(args)
        from ..recipes.delta import compare_recipes

        comparison = compare_recipes(
            runs,
            by=args.by,
            baseline=args.baseline,
            n_boot=defaults.N_BOOT if args.bootstrap is None else args.bootstrap,
            seed=args.seed,
            block=args.block,
            method=args.method,
            n_starts=args.starts,
            n_jobs=args.n_jobs,
            progress=progress,
            **parallel,
        )
        print(comparison.summary())
        if args.json:
            write_json(args.json, json.dumps(comparison.to_dict(), indent=2, allow_nan=False))
            print(f"\nwrote {args.json}")
        return 0
    from ..frontier import allocation, non_looped

    runs = load_recipe_runs(args, show=False)
    fixed = parse_fix(args.fix)
    if args.bootstrap is not None:
        from ..bootstrap.block import block_codes

        block_codes(runs, args.block)  # bad --block fails before the fit
    result = fit(runs, method=args.method, fix=fixed, **method_options(args))
    if args.bootstrap is not None:
        from ..bootstrap.block import block_bootstrap

        boot = block_bootstrap(
            runs,
            result,
            n_boot=args.bootstrap,
            block=args.block,
            seed=args.seed,
            n_jobs=args.n_jobs,
            progress=progress,
            **parallel,
        )
        result = boot.attach(result)
    offsets = _offset_flags(runs, result)
    result = result.with_updates(warnings=collect(runs.warnings, result.warnings, offsets))
    print(result.summary())
    if non_looped(runs) and not {"alpha", "beta"} & set(result.fixed):
        alloc = allocation(result, boot if args.bootstrap is not None else None)
        print("\n[[Non-looped table: Chinchilla's law L = E + A N^-alpha + B D^-beta, phi does not enter]]")
        print("    compute-optimal allocation " + alloc.summary().replace("∝", "~"))
    inverted = None
    if args.bootstrap is not None:
        print()
        print(boot.summary())
        if args.wild_ci and result.phi is not None and "phi" not in result.fixed:
            inverted = _inverted_line(runs, result, args)
    elif result.ci is None and result.loss in ("huber", "squares"):
        print(
            "\nno interval computed: add --bootstrap 1000 for percentile and BCa intervals that hold "
            "under noise shared within a (budget, r) cell"
        )
    if args.json:
        text = result.to_json()
        if inverted is not None:
            data = json.loads(text)
            data["phi_inverted"] = inverted.to_dict()
            text = json.dumps(data, indent=2, allow_nan=False)
        write_json(args.json, text)
        print(f"\nwrote {args.json}")
    print()
    print(closing_line(collect(result.warnings, inverted.warnings if inverted is not None else None)))
    return 0


def _inverted_line(runs: RunTable, result: FitResult, args: argparse.Namespace):
    """Print phi's test-inverted set beside its percentile interval; return the set."""
    from ..bootstrap.inverted import phi_confidence_set

    inverted = phi_confidence_set(
        runs, result, n_boot=args.wild_ci_boot, seed=args.seed, block=args.block, n_jobs=args.n_jobs
    )
    iv = (result.ci or {}).get("phi")
    pct = "none" if iv is None or None in iv else f"[{iv[0]:.3f}, {iv[1]:.3f}]"
    print(f"\n[[phi: percentile interval {pct}; test-inverted set {inverted.interval_text()}]]")
    print("    " + inverted.summary())
    return inverted


def closing_line(cautions) -> str:
    """The last line of a fit: every caution by source and kind, a kind met n > 1 times once with
    its count ("13 low_ess (bayes)"); the [[Notes]] hold the text."""
    if not cautions:
        return "done: no warnings"
    warn = [c for c in cautions if c.level == "warning"]
    notes = [c for c in cautions if c.level != "warning"]
    parts = []
    for group, word in ((warn, "warning"), (notes, "note")):
        if group:
            counts = Counter(f"{c.kind} ({c.source})" for c in group)  # first-seen order
            kinds = ", ".join(f"{n} {kind}" if n > 1 else kind for kind, n in counts.items())
            parts.append(f"{len(group)} {word}{'s' * (len(group) != 1)}: {kinds}")
    return "done: " + "; ".join(parts) + " (see [[Notes]])"


#: R-hat above which a posterior's chains count as not mixed (Gelman & Rubin's classic 1.1; the
#: convergence check's stricter 1.01 also fails on chains that sit together but mix slowly, whose
#: medians still make one law): coordinate-wise medians then mix separate places of the posterior.
UNMIXED_R_HAT = 1.1


def _unmixed_law_parameters(result: FitResult) -> dict[str, float]:
    """Law parameters of a Bayesian fit whose R-hat exceeds :data:`UNMIXED_R_HAT` (empty for
    other methods and for a posterior whose chains mixed)."""
    if result.method != "bayes":
        return {}
    posterior = result.extras.get("posterior") or {}
    return {
        name: float(posterior[name]["r_hat"])
        for name in result.params
        if name in posterior and float(posterior[name].get("r_hat", 1.0)) > UNMIXED_R_HAT
    }


def _offset_flags(runs: RunTable, result: FitResult) -> list[Caution]:
    """The per-r offset flags of :func:`phifit.diagnostics.residuals.residual_diagnostics`
    (:func:`~phifit.diagnostics.residuals.r_offset_flags`: no refit, no residual tests, so no
    statsmodels or scipy.stats), so that ``phifit fit`` on a table whose runs at one r sit off the
    law (loss U-shaped in r, say) does not end "no warnings" beside a tight phi."""
    if result.phi is None or "phi" in result.fixed:
        return []
    unmixed = _unmixed_law_parameters(result)
    medians_unfit = result.method == "bayes" and result.r2 is not None and result.r2 < 0
    if unmixed or medians_unfit:
        from ..cautions import Caution

        if unmixed:
            worst = max(unmixed, key=unmixed.get)
            why = f"the chains have not mixed (R-hat of {worst} {unmixed[worst]:.3g} > {UNMIXED_R_HAT}), so"
        else:  # e.g. 7 runs at one budget: heavy-tailed marginals whose medians do not fit together
            why = "the law at the posterior medians fits worse than the runs' mean loss, so"
        return [
            Caution(
                "diagnostics",
                "residuals_not_checked",
                f"per-r residual checks not run: {why} the posterior medians of the parameters "
                f"are not one law's fit (R^2 {result.r2:.3f} there) and residuals against them would "
                "read as misfit; sample longer, or read the Huber fit's residuals (phifit diagnose)",
                {"r_hat": dict(unmixed), "r2_at_median": result.r2},
            )
        ]
    from ..diagnostics.residuals import r_offset_flags

    return r_offset_flags(runs, result)
