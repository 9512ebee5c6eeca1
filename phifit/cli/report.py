"""``phifit report``: fit, bootstrap, compare, diagnose, and write an HTML report folder.

    phifit report RUNS.csv --out DIR [--bootstrap N] [--level 0.95] [--bayes] [--seed S] [--columns MAP]
                                     [--plan [DESIGN]] [--plan-tables N] [--no-plan-misfit]
                                     [--rounds ADAPTIVE.jsonl]

writes ``DIR/index.html`` (opens offline: figures embedded), ``DIR/results.json`` and
``DIR/figures/*.png`` (and ``*.svg`` with ``--svg``).  Each stage prints a progress line to
stderr as it starts; the closing lines give phi, the verdicts and what the warnings are.  DIR must be absent,
empty, or hold a previous phifit report, unless ``--force``.

The folder is written whole or not at all (:mod:`phifit.report.folder`).  SIGTERM (what
``timeout``, ``kill`` and job schedulers send) stops the command as SIGINT does: its workers are
ended, the partial folder deleted, and it exits with 143 (128 + SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .. import defaults
from ._common import (
    add_jobs_argument,
    add_parallel_arguments,
    add_runs_argument,
    add_wild_all_argument,
    check_jobs,
    load_runs_from_args,
    parallel_options,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write an HTML report (fit, intervals, diagnostics, figures)",
        description="Fit the joint law, bootstrap it, compare restricted laws, "
        "diagnose the residuals and write DIR/index.html, "
        "DIR/results.json and DIR/figures/.",
    )
    add_runs_argument(p)
    p.add_argument(
        "--wild",
        type=int,
        default=defaults.N_WILD,
        metavar="N",
        help="replicates of the wild cluster bootstrap tests of phi = 0, phi = 1 and of a shared phi "
        f"across recipes (default {defaults.N_WILD}; 0: the chi-square tests, which assume independent runs)",
    )
    add_wild_all_argument(p)
    p.add_argument("--out", required=True, metavar="DIR", help="report folder")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=defaults.N_BOOT,
        metavar="N",
        help=f"block-bootstrap replicates (default {defaults.N_BOOT}; 0 turns it off)",
    )
    p.add_argument(
        "--starts",
        type=int,
        default=defaults.N_STARTS,
        help=f"random starts of each fit (default {defaults.N_STARTS})",
    )
    p.add_argument(
        "--level",
        type=float,
        default=defaults.LEVEL,
        help=f"level of the bootstrap intervals (default {defaults.LEVEL})",
    )
    p.add_argument("--bayes", action="store_true", help="add the Bayesian posterior (slow)")
    p.add_argument("--baseline", default=None, help="baseline recipe when the table has a 'variant' column")
    p.add_argument(
        "--seed", type=int, default=defaults.SEED, help=f"seed of every random step (default {defaults.SEED})"
    )
    add_jobs_argument(p, "bootstrap workers")
    add_parallel_arguments(p)
    p.add_argument(
        "--plan",
        nargs="?",
        const="self",
        default=None,
        metavar="DESIGN",
        help="add a section planning what a design can measure of phi, with this table as the pilot "
        "(its fit gives the law and the noise): the table's own runs (--plan alone), 'paper', a sweep "
        "spec or a CSV of planned runs, as phifit plan --design takes them",
    )
    p.add_argument(
        "--plan-tables",
        type=int,
        default=0,
        dest="plan_tables",
        metavar="N",
        help="simulated tables of the plan (default 0: the asymptotic prediction only; 100 takes minutes)",
    )
    p.add_argument(
        "--plan-misfit",
        action=argparse.BooleanOptionalAction,
        default=True,
        dest="plan_misfit",
        help="the plan carries this table's (budget, r) cell-mean residuals, the law's misfit "
        "(default; phifit plan --misfit); --no-plan-misfit: the noise of its residuals alone",
    )
    p.add_argument(
        "--rounds",
        metavar="PATH",
        default=None,
        help="the round log of an adaptive sweep to show in an 'Adaptive rounds' section (default: "
        "RUNS.csv.d/adaptive.jsonl, which phifit sweep --adaptive keeps beside the table, when it exists)",
    )
    p.add_argument(
        "--svg", action="store_true", help="also write each figure as SVG (the page embeds the PNGs)"
    )
    p.add_argument(
        "--force", action="store_true", help="write into DIR even if it holds files phifit did not write"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..report.analysis import AnalysisOptions
    from ..report.write import build_report, check_report_dir

    check_jobs(args.n_jobs)
    options = AnalysisOptions(
        n_boot=args.bootstrap,
        n_starts=args.starts,
        bayes=args.bayes,
        seed=args.seed,
        n_jobs=args.n_jobs,
        baseline=args.baseline,
        level=args.level,
        n_wild=args.wild,
        wild_all=args.wild_all,
        plan=args.plan,
        plan_tables=args.plan_tables,
        plan_misfit=args.plan_misfit,
        rounds=args.rounds,
        **parallel_options(args),
    )
    check_report_dir(args.out, args.force)
    runs = load_runs_from_args(args)
    t0 = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f} s] {message}", file=sys.stderr, flush=True)

    try:
        with _sigterm_as_interrupt():
            files = build_report(
                runs, args.out, options=options, force=args.force, svg=args.svg, progress=progress
            )
    except Terminated:
        print("phifit report: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    print(files.headline)
    print(f"wrote {files.index} and {len(files.files) - 1} other files in {time.perf_counter() - t0:.1f} s")
    return 0


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt (:func:`_sigterm_as_interrupt`)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A block in which SIGTERM raises :class:`Terminated`, a KeyboardInterrupt: the workers and
    the partial report are cleaned up as on Ctrl-C, instead of the process ending on the spot
    (its forked workers would end with it, but the partial folder would stay until the next
    report into the same folder).  Only in the main thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
