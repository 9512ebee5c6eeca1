"""Where phifit keeps its caches (PyTensor's compiled C/Numba code, and the like).

Nothing is written to a user's home directory by surprise.  The cache root is, in order:

1. ``$PHIFIT_CACHE_DIR`` when that environment variable is set (and not empty);
2. ``<source checkout>/.cache`` when phifit runs from a source checkout, i.e. when the
   directory above the ``phifit`` package holds a ``pyproject.toml`` (the repository's
   ``.gitignore`` ignores ``.cache/``);
3. ``./.cache/phifit`` in the current working directory otherwise (an installed phifit).

:func:`cache_dir` returns ``<root>/<sub>`` and creates it.  :func:`use_pytensor_cache`
points PyTensor's compile directory at ``<root>/pytensor``; the Bayesian fitter calls it
just before it builds a model, never at import.  The Bayesian fitter keeps nutpie's
compiled models in ``<root>/nutpie`` (one file per model structure and versions; see
:mod:`phifit.fitters.bayes.backends`; ``PHIFIT_BAYES_CACHE=0`` turns that off).
:func:`write_atomic` writes a cache file so that readers never see half of it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Environment variable that overrides the cache root.
ENV_VAR = "PHIFIT_CACHE_DIR"
#: PyTensor's own settings that name a compile directory; a user who set one keeps it.
PYTENSOR_DIR_FLAGS = ("base_compiledir", "compiledir")


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


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename.

    Concurrent writers of the same entry each rename a complete file; a reader sees the
    old file or a new one, never a partial one.
    """
    import tempfile

    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _flag_keys(flags: str) -> set[str]:
    return {part.split("=", 1)[0].strip() for part in flags.split(",") if part.strip()}


def use_pytensor_cache() -> str | None:
    """Point PyTensor's compile cache at ``<cache root>/pytensor`` unless the user chose one.

    Call it just before PyTensor is needed (phifit's Bayesian model builder does); it is
    idempotent.  PyTensor reads ``PYTENSOR_FLAGS`` once, at its first import, and its
    ``base_compiledir`` cannot change afterwards, so:

    - PyTensor not yet imported: ``base_compiledir=<root>/pytensor`` is appended to
      ``PYTENSOR_FLAGS`` (created when unset).  It stays set, so the processes PyMC
      starts for its chains compile into the same place.  This covers PyTensor's C
      modules and its Numba cache (``<base_compiledir>/numba``, used by nutpie).
    - PyTensor already imported (the caller imported PyMC first): only ``compiledir``,
      PyTensor's C-module directory, can still be set, and only while nothing has
      compiled yet; it becomes ``<root>/pytensor/<PyTensor's platform folder name>``.

    Returns the directory phifit set, or None when it left PyTensor alone: the user named
    ``base_compiledir`` or ``compiledir`` (``PYTENSOR_FLAGS`` or ``.pytensorrc``), the path
    holds a comma (which ``PYTENSOR_FLAGS`` cannot carry), or PyTensor already compiled.
    """
    mod = sys.modules.get("pytensor")
    if mod is None:
        flags = os.environ.get("PYTENSOR_FLAGS", "")
        if _flag_keys(flags) & set(PYTENSOR_DIR_FLAGS):
            return None
        path = str(cache_dir("pytensor"))
        if "," in path:
            return None
        entry = f"base_compiledir={path}"
        os.environ["PYTENSOR_FLAGS"] = f"{flags},{entry}" if flags.strip() else entry
        return path
    return _set_compiledir_after_import(mod.config)


def _set_compiledir_after_import(config) -> str | None:
    """The already-imported case of :func:`use_pytensor_cache` (see there)."""
    params = type(config).__dict__
    base, comp = params.get("base_compiledir"), params.get("compiledir")
    if base is None or comp is None:
        return None
    root = cache_dir("pytensor")
    if Path(config.base_compiledir).resolve() == root.resolve():
        return str(root)  # configured before the import: nothing to do
    if not getattr(base, "is_default", True) or hasattr(comp, "val"):
        return None  # the user's choice, or compiledir already read (fixed from then on)
    try:
        config.fetch_val_for_key("compiledir")
        return None  # the user named a compiledir; PyTensor has not read it yet
    except KeyError:
        pass
    try:
        from pytensor.configdefaults import _default_compiledirname

        name = _default_compiledirname()
    except (ImportError, AttributeError):
        name = "compiledir"
    path = root / name
    config.compiledir = str(path)
    return str(path)
