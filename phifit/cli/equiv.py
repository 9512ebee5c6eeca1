"""``phifit equiv``: the effective non-looped size and unrolled cost of a looped model.

    N_eff = N_once + r^phi N_rec,  N_unique = N_once + N_rec,  N_unrolled = N_once + r N_rec

phi comes from exactly one source:

- ``--phi P``: a value you give (no interval);
- ``--reference``: the study's joint fit, phi = 0.459, with its 95% block-bootstrap
  interval [0.41, 0.53] mapped onto N_eff (N_eff is monotone in phi);
- ``--fit FIT.json``: a saved ``phifit fit --json`` result; its percentile interval of phi
  (present when it was fitted with ``--bootstrap``) is mapped the same way;
- ``--runs RUNS.csv``: fit the table here and block-bootstrap it (``--bootstrap N``,
  default 1000), giving percentile intervals from the draws.

Counts accept K/M/B/T suffixes: ``phifit equiv --reference --r 4 --n-once 200M --n-rec 200M``
reproduces the study's example (a 400M-unique r = 4 model ~ a 578M non-looped one at the
training cost of a 1B one; 408M unique, i.e. "410M", with the 2 d^2 injection layer).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from .. import defaults
from ..study import STUDY_PHI_CI
from ._common import add_recipe_argument, add_table_options, check_output_file, load_recipe_runs, write_json


def parse_count(text: str) -> float:
    """'410M' -> 4.1e8, '1.2B' -> 1.2e9, '3e8' -> 3e8, '1,000,000' -> 1e6 (the run-table rule,
    :func:`phifit.runs.text.parse_count`)."""
    from ..runs.table import parse_count as parse

    try:
        value = parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count such as 4.1e8 or 410M, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "equiv",
        help="effective non-looped size and unrolled cost of a looped model",
        description="N_eff = N_once + r^phi N_rec (effective non-looped size), N_once + N_rec "
        "(unique parameters), N_once + r N_rec (unrolled training cost).",
    )
    p.add_argument(
        "--n-once",
        type=parse_count,
        required=True,
        metavar="N",
        help="parameters applied once per token (e.g. 200M)",
    )
    p.add_argument(
        "--n-rec",
        type=parse_count,
        required=True,
        metavar="N",
        help="parameters of the shared block, applied r times (e.g. 200M)",
    )
    p.add_argument("--r", type=int, required=True, help="recurrences of the shared block")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--phi", type=float, help="use this phi (no interval)")
    src.add_argument(
        "--reference", action="store_true", help="the study's phi = 0.459 with its 95%% interval [0.41, 0.53]"
    )
    src.add_argument("--fit", metavar="FIT.json", help="phi (and its interval) from a saved fit")
    src.add_argument("--runs", metavar="RUNS.csv", help="fit and bootstrap this run table")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=defaults.N_BOOT,
        metavar="N",
        help=f"with --runs: block-bootstrap replicates (default {defaults.N_BOOT})",
    )
    p.add_argument(
        "--seed", type=int, default=defaults.SEED, help=f"with --runs: seed (default {defaults.SEED})"
    )
    add_table_options(p)
    add_recipe_argument(p)
    p.add_argument("--json", metavar="OUT", help="write the result as JSON")
    p.add_argument("--force", action="store_true", help="overwrite --json OUT if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..equivalence import equivalence, paper_example
    from ..law import JointLaw
    from ..result import FitResult
    from ..serialize import to_plain

    if args.json:
        check_output_file(args.json, args.force)
    if args.r < 1:
        raise ValueError(f"--r must be an integer >= 1, got {args.r}")
    source = ""
    if args.phi is not None:
        law = dataclasses.replace(JointLaw.reference(), phi=args.phi)
        result = equivalence(law, n_once=args.n_once, n_rec=args.n_rec, r=args.r)
        source = f"phi = {args.phi:g} (given)"
    elif args.reference:
        result = equivalence(
            JointLaw.reference(), n_once=args.n_once, n_rec=args.n_rec, r=args.r, phi_interval=STUDY_PHI_CI
        )
        source = "the reference study's joint fit (phi = 0.459, 95% block-bootstrap interval [0.41, 0.53])"
    elif args.fit:
        fit = FitResult.from_json(args.fit)
        result = equivalence(fit, n_once=args.n_once, n_rec=args.n_rec, r=args.r)
        source = f"{args.fit}" + ("" if result.phi_interval else " (no bootstrap interval saved)")
    else:
        from ..bootstrap.block import block_bootstrap
        from ..fitters.huber import fit_huber

        if args.bootstrap < 2:
            raise ValueError(f"--bootstrap must be >= 2, got {args.bootstrap}")
        runs_path = args.runs
        runs = load_recipe_runs(args)
        fit = fit_huber(runs)
        if fit.phi is None:
            raise ValueError(f"{runs_path}: phi is not identifiable from these runs")
        boot = block_bootstrap(runs, fit, n_boot=args.bootstrap, seed=args.seed, progress=True)
        result = equivalence(fit, n_once=args.n_once, n_rec=args.n_rec, r=args.r, thetas=boot.thetas)
        source = f"fit of {runs_path} ({boot.n_boot - boot.n_failed} bootstrap replicates)"
    print(f"phi from {source}")
    print(result.summary())
    if args.json:
        out = {"generator": "phifit", "kind": "equivalence", "phi_source": source, **result.to_dict()}
        if args.reference and args.r == 4:
            out["paper_example"] = {k: v.to_dict() for k, v in paper_example().items()}
        write_json(args.json, json.dumps(to_plain(out), indent=2))
        print(f"\nwrote {args.json}")
    return 0
