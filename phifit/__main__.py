"""``python -m phifit``: the ``phifit`` command."""

import sys

from .cli import main

sys.exit(main())
