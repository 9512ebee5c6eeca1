"""Where phifit keeps its caches (PyTensor's compiled C/Numba code, and the like).

Nothing is written to a user's home directory by surprise.  The cache root is, in order:

1. ``$PHIFIT_CACHE_DIR`` when that environment variable is set (and not empty);
2. ``<source checkout>/.cache`` when phifit runs from a source checkout, i.e. when the
   directory above the ``phifit`` package holds a ``pyproject.toml`` (the repository's
   ``.gitignore`` ignores ``.cache/``);
3. ``./.cache/phifit`` in the current working directory otherwise (an installed phifit).

:func:`cache_dir` returns ``<root>/<sub>`` and creates it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable that overrides the cache root.
ENV_VAR = "PHIFIT_CACHE_DIR"


def cache_root() -> Path:
    """The cache root (see the module docstring for the order of precedence); not created."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser().resolve()
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache"
    return (Path.cwd() / ".cache" / "phifit").resolve()


def cache_dir(sub: str) -> Path:
    """``<cache root>/<sub>``, created if missing.

    ``sub`` is a relative folder name such as ``"pytensor"``; absolute paths and ``..``
    are rejected so that a cache never lands outside the root.
    """
    if not sub or Path(sub).is_absolute() or ".." in Path(sub).parts:
        raise ValueError(f"cache sub-folder must be a relative name without '..', got {sub!r}")
    path = cache_root() / sub
    path.mkdir(parents=True, exist_ok=True)
    return path
