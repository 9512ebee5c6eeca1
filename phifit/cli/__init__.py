"""The ``phifit`` command line: thin argument parsing over the Python API.

One module per subcommand (``fit``, ``compare``, ``diagnose``, ``report``, ``simulate``,
``equiv``, ``predict``; ``train`` and ``sweep`` come from :mod:`phifit.trainers`), wired
together in :mod:`phifit.cli.main`.  Exit codes: 0 success, 2 bad input or arguments (a
one-line message on stderr that names the file, row and column where it applies; no
traceback).
"""

from .main import build_parser, entry, main

__all__ = ["build_parser", "entry", "main"]
