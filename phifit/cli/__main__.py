"""``python -m phifit.cli``: the ``phifit`` command."""

import sys

from . import main

sys.exit(main())
