"""``phifit fit``: fit the joint law to a run table and print its summary."""

from __future__ import annotations

import argparse

from ..fit import METHODS, fit
from ._common import (
    add_runs_argument,
    check_output_file,
    load_runs_from_args,
    parse_fix,
    write_json,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help="fit the joint law (phi and the five Chinchilla parameters)",
                       description="Fit L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta.")
    add_runs_argument(p)
    p.add_argument("--method", choices=METHODS, default="huber",
                   help="huber (reference: summed Huber on log-loss, 500 starts), lsq (lmfit), "
                        "bayes (PyMC)")
    p.add_argument("--fix", action="append", metavar="NAME=VALUE",
                   help="hold a parameter fixed, e.g. --fix phi=0 (repeatable)")
    p.add_argument("--starts", type=int, default=500, help="Huber: random starts (default 500)")
    p.add_argument("--seed", type=int, default=0, help="seed of starts and resampling (default 0)")
    p.add_argument("--json", metavar="OUT", help="write the result as JSON")
    p.add_argument("--force", action="store_true", help="overwrite --json OUT if it exists")
    p.set_defaults(func=run)


def method_options(args: argparse.Namespace) -> dict:
    """Keyword options for the chosen method from the parsed arguments."""
    if args.method == "huber":
        if args.starts < 1:
            raise ValueError(f"--starts must be >= 1, got {args.starts}")
        return {"n_starts": args.starts, "seed": args.seed}
    return {"seed": args.seed}


def run(args: argparse.Namespace) -> int:
    if args.json:
        check_output_file(args.json, args.force)
    runs = load_runs_from_args(args)
    result = fit(runs, method=args.method, fix=parse_fix(args.fix), **method_options(args))
    print(result.summary())
    if args.json:
        write_json(args.json, result.to_json())
        print(f"\nwrote {args.json}")
    return 0
