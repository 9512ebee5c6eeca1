"""``python -m phifit``: the ``phifit`` command."""

from .cli import entry

entry()
