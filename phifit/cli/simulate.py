"""``phifit simulate``: a run table from a known joint law on a design."""

from __future__ import annotations

import argparse
import os

from ..study import DESIGNS, REFERENCE_PARAMS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate a run table from a known law",
        description="Simulate losses L = E + A N_eff^-alpha + B D^-beta (times "
        "log-normal noise) on a design. Defaults: the study's fit.",
    )
    p.add_argument(
        "--design",
        default="paper",
        help=f"{' | '.join(DESIGNS)} or a CSV with r, n_once, n_rec, tokens (default paper)",
    )
    for name, value in REFERENCE_PARAMS.items():
        p.add_argument(f"--{name}", type=float, default=value, help=f"true {name} (default {value})")
    p.add_argument(
        "--noise",
        type=float,
        default=0.0,
        help="sd of multiplicative log-normal noise on the loss (default 0)",
    )
    p.add_argument("--seed", type=int, default=0, help="noise seed (default 0)")
    p.add_argument("--out", required=True, metavar="RUNS.csv", help="output CSV")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..runs.table import load_design
    from ..simulation import simulate

    if os.path.exists(args.out) and not args.force:
        raise FileExistsError(f"{args.out}: exists; choose another path or pass --force")
    design = args.design
    if design not in DESIGNS:
        design = load_design(design).frame
    params = {name: getattr(args, name) for name in REFERENCE_PARAMS}
    frame = simulate(design, params=params, noise=args.noise, seed=args.seed)
    tmp = f"{args.out}.tmp-{os.getpid()}"
    frame.to_csv(tmp, index=False)
    os.replace(tmp, args.out)
    print(f"wrote {len(frame)} runs to {args.out} (phi = {params['phi']:g}, noise = {args.noise:g})")
    return 0
