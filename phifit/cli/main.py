"""The ``phifit`` command: the parser of every subcommand and the entry point.

Exit codes: 0 success, 2 bad input or arguments (a one-line message on stderr
that names the file, row and column where it applies; no traceback), and 2 as well
when an optional backend is missing (:class:`phifit.extras.MissingExtraError`: one
line naming the feature and ``pip install 'phifit[EXTRA]'``).

Subcommands come from two places: phifit's own modules (``_COMMANDS``) and the entry
points of the group ``phifit.commands`` (``PLUGIN_GROUP``), through which the trainer
adds ``train`` and ``sweep`` (declared in ``pyproject.toml``), so that the fitting side
never imports the trainer.  A command whose registration cannot be loaded is still
listed; running it prints why.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..extras import MissingExtraError

# Subcommand modules of phifit.cli; each exposes register(subparsers) and imports its
# machinery only when it runs, so that ``phifit --help`` is instant.
_COMMANDS = ("fit", "compare", "diagnose", "report", "simulate", "equiv", "predict", "plan")

#: Entry-point group of subcommands defined outside phifit's own modules; each entry point
#: names a function ``register(subparsers)`` that adds the subcommand of the entry's name.
PLUGIN_GROUP = "phifit.commands"


def _plugin_entry_points() -> list[Any]:
    """The entry points of ``PLUGIN_GROUP`` of the installed distributions, by name."""
    from importlib.metadata import entry_points

    return sorted(entry_points(group=PLUGIN_GROUP), key=lambda ep: ep.name)


def _register_unloadable(sub: Any, name: str, err: BaseException) -> None:
    """List a subcommand whose registration failed to import; running it reports the error."""
    reason = " ".join(str(err).split()) or type(err).__name__
    p = sub.add_parser(name, help=f"(unavailable: {reason})", add_help=True)
    p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def fail(args: argparse.Namespace) -> int:
        if isinstance(err, MissingExtraError):
            raise err
        raise ValueError(f"the {name} command could not be loaded: {reason}")

    p.set_defaults(func=fail)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``phifit`` parser with every subcommand; with ``only`` (one of phifit's own commands),
    that subcommand alone, so that running it imports neither the other commands nor the
    trainer's (entry points); its parsing, help and errors are the same."""
    parser = argparse.ArgumentParser(
        prog="phifit",
        description="How much is one recurrence worth? Fit L = E + A (N_once + r^phi N_rec)^-alpha"
        " + B D^-beta to run tables of looped language models.",
    )
    parser.add_argument("--version", action="version", version=f"phifit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    if only is not None:
        importlib.import_module(f"{__package__}.{only}").register(sub)
        return parser
    for name in _COMMANDS:
        if importlib.util.find_spec(f"{__package__}.{name}") is not None:
            importlib.import_module(f"{__package__}.{name}").register(sub)
    plugins = _plugin_entry_points()
    for ep in plugins:
        try:
            register = ep.load()
        except ImportError as err:  # listed all the same: never drop a command silently
            _register_unloadable(sub, ep.name, err)
            continue
        register(sub)
    if not plugins:
        parser.epilog = (
            f"No subcommands are registered under the entry points '{PLUGIN_GROUP}' (train, sweep): "
            "phifit's installed metadata is missing or stale; reinstall it (pip install -e . in a checkout)."
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``phifit`` command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv else None
    own = command in _COMMANDS and importlib.util.find_spec(f"{__package__}.{command}") is not None
    parser = build_parser(only=command if own else None)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except MissingExtraError as err:
        print(f"phifit {args.command}: error: {err}", file=sys.stderr)
        return 2
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
    except BrokenPipeError:
        # the reader of stdout went away (``phifit fit T.csv | head``): no traceback; stdout is
        # pointed at devnull so that the interpreter's final flush does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"phifit {args.command}: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """The ``phifit`` console script (and ``python -m phifit``): :func:`main`, then exit.

    Before exiting it moves every object to the garbage collector's permanent generation
    (``gc.freeze()``), so the interpreter's shutdown does not walk them all once more (measured in
    docs/benchmarks.md, 'Fitting', ``startup_speed.py``).
    Nothing a command writes depends on that pass: files are closed when the command returns, and
    atexit handlers (the worker pool's shutdown) still run.  :func:`main` itself, called from
    Python, leaves the collector alone.
    """
    import gc

    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
