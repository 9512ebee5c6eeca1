"""``phifit predict``: the loss a fitted law predicts, and the compute-optimal allocation per r.

    phifit predict --fit FIT.json --r 4 --n-once 200M --n-rec 200M --tokens 20B
    phifit predict --runs RUNS.csv --bootstrap 200 --points points.csv --compute 1e20

The law comes from ``--fit FIT.json`` (a saved ``phifit fit --json``), ``--runs RUNS.csv``
(fitted here; with ``--fit`` too, the table only supplies architectures and bootstrap
draws) or ``--reference`` (the study's fit).  Intervals need bootstrap draws, which a fit
JSON does not hold: ``--runs RUNS.csv --bootstrap N`` resamples the table here (around the
``--fit`` when given) and reports percentile intervals over the replicates' parameters.

Points: ``--r R --n-once N --n-rec N --tokens D`` (counts take K/M/B/T suffixes) or
``--points FILE`` with columns r, n_once, n_rec, tokens.  ``--compute C`` (repeatable, or
comma-separated) adds the compute-optimal N and D per r at C FLOPs: over the table's
architectures when a table is given, else the study's (``phifit.predict``).
"""

from __future__ import annotations

import argparse
import json

from .. import defaults
from ._common import (
    add_jobs_argument,
    add_recipe_argument,
    add_table_options,
    check_jobs,
    check_output_file,
    write_json,
)


def _count(text: str) -> float:
    from .equiv import parse_count

    return parse_count(text)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict",
        help="predicted loss at given N_once, N_rec, r, D, and the compute-optimal N, D per r",
        description="Loss predicted by a fitted law at given architectures and token counts "
        "(with a bootstrap interval when draws exist), and the compute-optimal allocation at "
        "given FLOP budgets per r.",
    )
    src = p.add_argument_group("the law")
    src.add_argument("--fit", metavar="FIT.json", help="a saved phifit fit --json result")
    src.add_argument("--runs", metavar="RUNS.csv", help="fit this table (and bootstrap it with --bootstrap)")
    src.add_argument("--reference", action="store_true", help="the study's joint fit (phi = 0.459)")
    src.add_argument(
        "--bootstrap",
        type=int,
        metavar="N",
        default=None,
        help="with --runs: block-bootstrap replicates for percentile intervals",
    )
    src.add_argument("--method", choices=("huber", "lsq"), default="huber", help="with --runs: fit method")
    src.add_argument(
        "--level", type=float, default=defaults.LEVEL, help=f"interval level (default {defaults.LEVEL})"
    )
    src.add_argument(
        "--seed",
        type=int,
        default=defaults.SEED,
        help=f"seed of the fit and bootstrap (default {defaults.SEED})",
    )
    add_jobs_argument(src, "bootstrap workers")
    add_table_options(p)
    add_recipe_argument(p)
    pts = p.add_argument_group("points")
    pts.add_argument("--r", type=int, default=None, help="recurrences of the shared block (default 1)")
    pts.add_argument("--n-once", type=_count, metavar="N", help="parameters applied once (e.g. 200M)")
    pts.add_argument("--n-rec", type=_count, metavar="N", help="shared-block parameters (default 0)")
    pts.add_argument("--tokens", type=_count, metavar="D", help="training tokens (e.g. 20B)")
    pts.add_argument("--points", metavar="FILE", help="CSV of points: r, n_once, n_rec, tokens")
    opt = p.add_argument_group("compute-optimal allocation")
    opt.add_argument(
        "--compute",
        action="append",
        metavar="C",
        help="FLOP budget(s), e.g. 1e20 (repeatable or comma-separated)",
    )
    opt.add_argument("--r-values", metavar="R[,R]", default=None, help="r values to optimise (default: all)")
    opt.add_argument(
        "--widen",
        type=float,
        default=1.0,
        help="with a table: decades of N searched beyond the trained sizes (default 1)",
    )
    p.add_argument("--json", metavar="OUT", help="write the prediction as JSON")
    p.add_argument("--force", action="store_true", help="overwrite --json OUT if it exists")
    p.set_defaults(func=run)


def _budgets(items: list[str] | None) -> list[float]:
    out = []
    for item in items or []:
        for part in item.split(","):
            try:
                value = _count(part)
            except argparse.ArgumentTypeError:
                raise ValueError(f"--compute: expected FLOPs such as 1e20, got {part!r}") from None
            if not value > 0:
                raise ValueError(f"--compute: FLOPs must be > 0, got {part!r}")
            out.append(value)
    return out


def _load_fit(path: str):
    import os

    from ..result import FitResult

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: file not found; expected a phifit fit --json result")
    try:
        return FitResult.from_json(path)
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: not a phifit fit JSON ({type(err).__name__}: {err})") from None


def _check(args: argparse.Namespace) -> None:
    sources = sum(bool(x) for x in (args.fit, args.reference)) + (bool(args.runs) and not args.fit)
    if args.reference and (args.fit or args.runs):
        raise ValueError("--reference uses the study's law: do not combine it with --fit or --runs")
    if sources != 1:
        raise ValueError("give the law: --fit FIT.json, --runs RUNS.csv (or both) or --reference")
    if args.bootstrap is not None and not args.runs:
        raise ValueError("--bootstrap N resamples a table: add --runs RUNS.csv")
    if args.bootstrap is not None and args.bootstrap < 2:
        raise ValueError(f"--bootstrap must be >= 2 replicates, got {args.bootstrap}")
    if not 0 < args.level < 1:
        raise ValueError(f"--level must be in (0, 1), got {args.level}")
    given = [n for n in ("r", "n_once", "n_rec", "tokens") if getattr(args, n) is not None]
    if given and args.points:
        raise ValueError("give points either as --r/--n-once/--n-rec/--tokens or as --points FILE")
    if given and (args.n_once is None or args.tokens is None):
        raise ValueError("a point needs at least --n-once and --tokens (--r defaults to 1, --n-rec to 0)")
    if not given and not args.points and not args.compute:
        raise ValueError(
            "nothing to predict: give a point (--n-once, --tokens, ...), --points FILE or --compute C"
        )
    if args.r is not None and args.r < 1:
        raise ValueError(f"--r must be an integer >= 1, got {args.r}")
    if args.widen < 0:
        raise ValueError(f"--widen must be >= 0, got {args.widen}")


def run(args: argparse.Namespace) -> int:
    from ..predict import predict, table_family
    from ..study import REFERENCE_PARAMS

    _check(args)
    check_jobs(args.n_jobs)
    budgets = _budgets(args.compute)
    r_values = None
    if args.r_values:
        try:
            r_values = [int(x) for x in args.r_values.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--r-values: expected integers such as 1,2,4, got {args.r_values!r}") from None
    if args.json:
        check_output_file(args.json, args.force)

    points = None
    if args.points:
        from ..runs.table import load_design, parse_separator

        design = load_design(args.points, sep=parse_separator(args.sep))
        points = {k: design.frame[k].to_numpy(float) for k in ("r", "n_once", "n_rec", "tokens")}
    elif args.n_once is not None:
        n_rec = args.n_rec or 0.0
        r = args.r or 1
        if r > 1 and not n_rec > 0:
            raise ValueError(f"--r {r} > 1 needs --n-rec > 0 (the shared block's parameters)")
        points = {"r": [r], "n_once": [args.n_once], "n_rec": [n_rec], "tokens": [args.tokens]}

    runs = boot = None
    if args.runs:
        from ._common import load_recipe_runs

        runs = load_recipe_runs(args)
    if args.reference:
        law, source = dict(REFERENCE_PARAMS), "the reference study's joint fit"
    elif args.fit:
        law, source = _load_fit(args.fit), args.fit
        if runs is not None and law.n_runs != len(runs):
            raise ValueError(
                f"{args.fit}: fitted to {law.n_runs} runs but {args.runs} has {len(runs)}; "
                "pass the table the fit was made on"
            )
    else:
        from ..fitters import fit

        law = fit(runs, method=args.method, seed=args.seed)
        source = f"a {args.method} fit of {args.runs}"
    if args.bootstrap is not None:
        from ..bootstrap.block import block_bootstrap

        if law.method not in ("huber", "lsq"):
            raise ValueError(f"--bootstrap resamples Huber or lsq fits, not a {law.method} fit")

        boot = block_bootstrap(
            runs, law, n_boot=args.bootstrap, seed=args.seed, n_jobs=args.n_jobs, progress=False
        )
        source += f" ({args.bootstrap} block-bootstrap replicates, {boot.n_failed} failed)"
    family = None
    if budgets:
        if runs is not None:
            family = table_family(runs, widen=args.widen, r_values=r_values)
        else:
            from ..frontier import PaperFamily
            from ..study import PAPER_RECURRENCES

            family = PaperFamily(r_values=tuple(r_values) if r_values else PAPER_RECURRENCES)
    result = predict(
        law,
        points=points,
        budgets=budgets,
        family=family,
        bootstrap=boot,
        level=args.level,
        source=source,
        runs=runs,
    )
    print(result.summary())
    if args.json:
        write_json(args.json, json.dumps(result.to_dict(), indent=2, allow_nan=False))
        print(f"\nwrote {args.json}")
    return 0
