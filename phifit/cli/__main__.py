"""``python -m phifit.cli``: the ``phifit`` command."""

import sys

from .main import main

sys.exit(main())
