"""The ``phifit`` command: the parser of every subcommand and the entry point.

Exit codes: 0 success, 2 bad input or arguments (a one-line message on stderr
that names the file, row and column where it applies; no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

from .. import __version__

# Subcommand modules of phifit.cli; each exposes register(subparsers) and imports its
# machinery only when it runs, so that ``phifit --help`` is instant.
_COMMANDS = ("fit", "compare", "diagnose", "report", "simulate", "equiv", "predict", "plan")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="phifit",
        description="How much is one recurrence worth? Fit L = E + A (N_once + r^phi N_rec)^-alpha"
        " + B D^-beta to run tables of looped language models.",
    )
    parser.add_argument("--version", action="version", version=f"phifit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        if importlib.util.find_spec(f"{__package__}.{name}") is not None:
            importlib.import_module(f"{__package__}.{name}").register(sub)
    try:
        from ..trainers import cli as trainer_cli
    except ImportError:  # trainer sources not installed
        trainer_cli = None
    if trainer_cli is not None:
        trainer_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``phifit`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (
        ValueError,
        FileNotFoundError,
        FileExistsError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
    ) as err:
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"phifit {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"phifit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
