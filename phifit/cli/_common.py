"""Argument helpers shared by the subcommands: column mapping, --fix, parallel work, safe outputs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from .. import defaults

if TYPE_CHECKING:
    from ..runs.table import RunTable


def add_runs_argument(parser: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """The RUNS.csv positional argument (or ``--runs``), the --columns mapping, --sep and
    --non-looped."""
    if positional:
        parser.add_argument("runs", metavar="RUNS.csv", help="run table, one row per finished run")
    add_table_options(parser)


def add_table_options(parser: argparse.ArgumentParser) -> None:
    """How to read a run table, the same on every subcommand that reads one: --columns, --sep,
    --non-looped, --where, --loss, --loss-unit, --bytes-per-token, --flops-unit, --skip-rows
    (:func:`phifit.runs.load_runs` documents each)."""
    group = parser.add_argument_group("reading the run table")
    group.add_argument(
        "--columns",
        metavar="MAP",
        default=None,
        help="map canonical names onto your columns, e.g. r=num_recur,loss=val_loss",
    )
    group.add_argument(
        "--sep",
        metavar="SEP",
        default=None,
        help="field separator of the run table: ',', ';' or 'tab' (default: detected from the header)",
    )
    group.add_argument(
        "--non-looped",
        action="store_true",
        dest="non_looped",
        help="the table has no r/n_rec on purpose: fit the non-looped law even when a column "
        "looks like a loop count",
    )
    group.add_argument(
        "--where",
        metavar="EXPR",
        default=None,
        help="keep only these rows: COLUMN OP VALUE[,VALUE...] joined by 'and', OP one of "
        "== != < <= > >= (e.g. 'variant==baseline and tokens>=1e9'); rows kept/dropped are reported",
    )
    group.add_argument("--loss", metavar="COLUMN", default=None, help="the column holding the loss")
    group.add_argument(
        "--loss-unit",
        choices=("nats", "bits"),
        default=None,
        dest="loss_unit",
        help="unit of the loss column (default nats per token, but a loss column whose name says "
        "bits, such as val_bpb, is refused until the unit is given); bits are converted: x ln 2",
    )
    group.add_argument(
        "--bytes-per-token",
        type=float,
        metavar="F",
        default=None,
        dest="bytes_per_token",
        help="with --loss-unit bits: the loss is bits per byte; nats/token = bits/byte x ln 2 x F",
    )
    group.add_argument(
        "--flops-unit",
        choices=("FLOP", "GFLOP", "TFLOP", "PFLOP"),
        default="FLOP",
        dest="flops_unit",
        help="unit of the flops and budget columns (default FLOP); converted to FLOPs",
    )
    group.add_argument(
        "--skip-rows",
        type=int,
        metavar="N",
        default=0,
        dest="skip_rows",
        help="skip N preamble lines before the header ('#' comment lines before it are always skipped)",
    )


def table_options(args: argparse.Namespace) -> dict:
    """Keyword options of :func:`phifit.runs.load_runs` from the arguments of
    :func:`add_table_options` (absent ones take the loader's defaults)."""
    from ..runs.table import parse_column_mapping, parse_separator

    return {
        "columns": parse_column_mapping(getattr(args, "columns", None)),
        "sep": parse_separator(getattr(args, "sep", None)),
        "non_looped": bool(getattr(args, "non_looped", False)),
        "where": getattr(args, "where", None),
        "loss": getattr(args, "loss", None),
        "loss_unit": getattr(args, "loss_unit", None),
        "bytes_per_token": getattr(args, "bytes_per_token", None),
        "flops_unit": getattr(args, "flops_unit", "FLOP"),
        "skip_rows": getattr(args, "skip_rows", 0) or 0,
    }


def add_jobs_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--jobs``/``--n-jobs N`` (dest ``n_jobs``): worker processes for ``what``; default None,
    the cores this process may use (:func:`phifit.defaults.workers`)."""
    parser.add_argument(
        "--jobs",
        "--n-jobs",
        type=int,
        default=None,
        dest="n_jobs",
        metavar="N",
        help=f"{what}; -1: all cores (default: the cores this process may use)",
    )


def check_jobs(n_jobs: int | None) -> None:
    """Refuse a worker count that is neither None, >= 1 nor -1."""
    if n_jobs is not None and (n_jobs == 0 or n_jobs < -1):
        raise ValueError(f"--n-jobs must be >= 1 or -1 (all cores), got {n_jobs}")


def table_cautions_text(cautions) -> list[str]:
    """One line per run-table caution: ``warning [duplicate_rows]: message``."""
    return [f"{c.level} [{c.kind}]: {c.message}" for c in cautions]


def load_runs_from_args(args: argparse.Namespace, *, show: bool = True, path: str | None = None) -> RunTable:
    """The run table named by ``path`` (default ``args.runs``), read with the options of
    :func:`add_table_options`; its cautions (rows selected, units converted, duplicate or
    short runs, no budget column) go to stderr unless ``show=False`` (the caller prints them
    itself)."""
    from ..runs.table import load_runs

    runs = load_runs(args.runs if path is None else path, **table_options(args))
    if show:
        for line in table_cautions_text(runs.warnings):
            print(line, file=sys.stderr)
    return runs


def add_recipe_argument(parser: argparse.ArgumentParser) -> None:
    """--variant NAME: which recipe of a table with several ('variant' column) to analyse."""
    parser.add_argument(
        "--variant",
        metavar="NAME",
        default=None,
        help="when the table's 'variant' column holds several recipes: the one to "
        "analyse (default 'baseline'); a loop-only recipe without r = 1 runs "
        "borrows the baseline's",
    )


def load_recipe_runs(args: argparse.Namespace, *, show: bool = True, path: str | None = None) -> RunTable:
    """The run table (``path``, default ``args.runs``), narrowed to one recipe when it holds
    several; the choice goes to stderr."""
    import dataclasses

    from ..runs.recipes import select_recipe

    runs = load_runs_from_args(args, show=show, path=path)
    selection = select_recipe(runs, getattr(args, "variant", None))
    if selection.note:
        print(f"note: {selection.note}", file=sys.stderr)
    if selection.runs.warnings != runs.warnings:  # the table's cautions stay with the selection
        return dataclasses.replace(selection.runs, warnings=list(runs.warnings))
    return selection.runs


def add_parallel_arguments(parser: argparse.ArgumentParser) -> None:
    """--backend and --scheduler: where the bootstrap refits, wild tests and simulated tables run."""
    from ..defaults import BACKEND, BACKENDS

    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help=f"where parallel work runs (default {BACKEND}): fork = worker processes forked from this "
        "one (loky off Linux or beside other threads), loky = joblib's fresh worker processes, threading = "
        "threads, sequential = this process alone, dask = a Dask cluster (--scheduler); the numbers "
        "do not depend on it",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="with --backend dask: the scheduler's address, e.g. tcp://host:8786 (default: a "
        "local Dask cluster)",
    )


def parallel_options(args: argparse.Namespace) -> dict:
    """{"backend", "scheduler"} from parsed arguments, checked before any work starts (a
    missing dask.distributed is a one-line error naming the install)."""
    from ..fitters.parallel import check_backend

    backend, scheduler = getattr(args, "backend", None), getattr(args, "scheduler", None)
    if scheduler is not None and backend != "dask":
        raise ValueError("--scheduler needs --backend dask")
    try:
        check_backend(backend, scheduler)
    except ImportError as err:
        raise ValueError(str(err)) from None
    return {"backend": backend, "scheduler": scheduler}


def parse_fix(items: list[str] | None) -> dict[str, float]:
    """Parse repeated ``--fix phi=0`` (or ``--fix phi=0,E=1.7``) into {name: value}."""
    fixed: dict[str, float] = {}
    for item in items or []:
        for part in item.split(","):
            if "=" not in part:
                raise ValueError(f"--fix: expected NAME=VALUE such as phi=0, got {part!r}")
            name, value = (s.strip() for s in part.split("=", 1))
            try:
                fixed[name] = float(value)
            except ValueError:
                raise ValueError(f"--fix: value of {name} must be a number, got {value!r}") from None
    return fixed


def is_phifit_output(path: str) -> bool:
    """True when ``path`` is a JSON file that phifit itself wrote (safe to replace)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh).get("generator") == "phifit"
    except (OSError, ValueError, AttributeError):
        return False


def check_output_file(path: str, force: bool) -> None:
    """Refuse to overwrite a file phifit did not write, unless ``--force`` was given."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: is a directory; expected a file path")
    if os.path.exists(path) and not force and not is_phifit_output(path):
        raise FileExistsError(
            f"{path}: exists and was not written by phifit; "
            f"choose another path or pass --force to overwrite it"
        )
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"{path}: directory {parent} does not exist")


def write_json(path: str, text: str) -> None:
    """Write JSON text atomically (temporary file, then rename)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
    os.replace(tmp, path)


BAYES_SAMPLERS = ("auto", "nutpie", "pymc")


def add_bayes_arguments(parser: argparse.ArgumentParser) -> None:
    """Sampler settings of --method bayes (defaults from :mod:`phifit.defaults`: 4 chains x 2000
    draws after 1000 tuning steps, target_accept 0.99)."""
    group = parser.add_argument_group("Bayesian fit (--method bayes)")
    group.add_argument(
        "--draws",
        type=int,
        default=defaults.N_DRAWS,
        help=f"posterior draws per chain (default {defaults.N_DRAWS})",
    )
    group.add_argument(
        "--tune",
        type=int,
        default=defaults.N_TUNE,
        help=f"tuning steps per chain (default {defaults.N_TUNE})",
    )
    group.add_argument(
        "--chains", type=int, default=defaults.N_CHAINS, help=f"chains (default {defaults.N_CHAINS})"
    )
    group.add_argument(
        "--sampler",
        choices=BAYES_SAMPLERS,
        default="auto",
        help="NUTS implementation: nutpie when installed (auto), or PyMC's own",
    )
    group.add_argument(
        "--noise",
        choices=("auto", "cell", "run"),
        default="auto",
        help="noise model: 'cell' adds an effect shared by the runs of each (budget, r) cell, whose sd "
        "tau estimates the law's misfit at the cell level; 'run' treats every run as independent; "
        "auto (default): 'cell' when some cell holds two or more runs",
    )
    group.add_argument(
        "--target-accept",
        type=float,
        default=defaults.TARGET_ACCEPT,
        dest="target_accept",
        help=f"NUTS target acceptance rate (default {defaults.TARGET_ACCEPT:g})",
    )


def bayes_options(args: argparse.Namespace) -> dict:
    """Keyword options of :func:`phifit.fitters.bayes.fit_bayes` from parsed arguments."""
    for name in ("draws", "tune", "chains"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not 0 < args.target_accept < 1:
        raise ValueError(f"--target-accept must be in (0, 1), got {args.target_accept}")
    return {
        "draws": args.draws,
        "tune": args.tune,
        "chains": args.chains,
        "sampler": args.sampler,
        "target_accept": args.target_accept,
        "noise": args.noise,
        "seed": args.seed,
        "progress": not getattr(args, "quiet", False),
    }


def check_posterior_output(path: str, force: bool) -> None:
    """Refuse to overwrite a file that is not a posterior phifit saved, unless --force."""
    if os.path.exists(path) and not force:
        from ..fitters.bayes import load_posterior

        try:
            load_posterior(path)
        except (ValueError, OSError):
            raise FileExistsError(
                f"{path}: exists and is not a posterior phifit saved; choose "
                f"another path or pass --force to overwrite it"
            ) from None
    check_output_file(path, force=True)


def add_wild_all_argument(p: argparse.ArgumentParser) -> None:
    """``--wild-all``: run every wild test to its full replicate count."""
    from ..bootstrap.sequential import DEFAULT_RULE

    looks = ", ".join(str(n) for n in DEFAULT_RULE.looks)
    risk = DEFAULT_RULE.error_bound(len(DEFAULT_RULE.looks))
    p.add_argument(
        "--wild-all",
        action="store_true",
        help="run every wild test to its --wild replicates (default: a test stops after "
        f"{looks} replicates once its p is settled on one side of {DEFAULT_RULE.level:g}, "
        f"a decision that differs from all replicates' with chance <= {risk:.2%})".replace("%", "%%"),
    )


def wild_stop(args: argparse.Namespace):
    """The stop rule of the wild tests: None with ``--wild-all``, else the default rule."""
    from ..bootstrap.sequential import DEFAULT_RULE

    return None if getattr(args, "wild_all", False) else DEFAULT_RULE


def add_parts_argument(p: argparse.ArgumentParser) -> None:
    """``--parts N``: replicates per left-out part of the leave-one-part-out analysis (0: none)."""
    p.add_argument(
        "--parts",
        type=int,
        default=defaults.PARTS_N_BOOT,
        metavar="N",
        help="does the answer rest on one part of the table? refit without each size, budget and r in "
        f"turn, with N cell-bootstrap replicates of phi per part (default {defaults.PARTS_N_BOOT}; "
        "0: skip; else >= 2)",
    )


def leave_parts_out(runs, fit, args: argparse.Namespace, multipliers, **parallel):
    """The leave-one-part-out analysis of ``fit`` for ``phifit compare`` and ``phifit diagnose``
    (:func:`phifit.diagnostics.parts.leave_one_part_out`), read against phi's interval from
    ``--bootstrap`` cell-bootstrap replicates of the full table (the parts' own ``--parts`` when
    that is 0) and compared with the lack-of-fit test ``multipliers`` (None: not tested per part);
    None where it does not apply: ``--parts 0``, phi fixed, not identified or on its search bound,
    or a fit without an objective to refit (Bayes)."""
    if not args.parts or fit.phi is None or "phi" in fit.fixed or "phi" in fit.at_bounds:
        return None
    if fit.method not in ("huber", "lsq"):
        return None
    from ..diagnostics.parts import leave_one_part_out

    reference = fit
    if args.bootstrap >= 2:
        from ..bootstrap.block import block_bootstrap

        boot = block_bootstrap(
            runs,
            fit,
            n_boot=args.bootstrap,
            seed=args.seed,
            progress=not getattr(args, "quiet", False),
            **parallel,
        )
        reference = boot.attach(fit)
    return leave_one_part_out(
        runs,
        reference,
        n_boot=args.parts,
        seed=args.seed,
        lack_of_fit="changed" if multipliers is not None else "none",
        reference_lack_of_fit=multipliers,
        n_wild=args.wild,
        wild_stop=wild_stop(args),
        n_starts=args.starts,
        **parallel,
    )


def check_parts(n: int) -> None:
    """``ValueError`` (exit 2) unless ``--parts`` is 0 or at least 2."""
    if n < 0 or n == 1:
        raise ValueError(f"--parts must be 0 (skip) or >= 2 replicates per part, got {n}")
