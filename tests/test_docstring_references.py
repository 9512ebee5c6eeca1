"""Every Sphinx-style cross-reference to a phifit name in the package's docstrings resolves.

``:func:`phifit.x.y```, ``:mod:``, ``:class:``, ``:data:``, ``:attr:`` and ``:meth:`` references name a
module and then attributes; a reference to a module that was moved or a function that was renamed
points a reader nowhere.  A dataclass field counts as an attribute of its class.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "phifit"
REFERENCE = re.compile(r":(?:func|mod|class|data|attr|meth):`~?(phifit(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")


def resolves(name: str) -> bool:
    """Whether the dotted ``name`` is an importable module followed by attributes (or dataclass
    fields, or annotated class attributes) of what it names."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            fields = getattr(obj, "__dataclass_fields__", {}) or {}
            annotated = getattr(obj, "__annotations__", {}) if isinstance(obj, type) else {}
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif attr in fields or attr in annotated:
                obj = None  # a field: nothing further to resolve on an instance attribute
            else:
                return False
        return True
    return False


def test_every_docstring_reference_resolves():
    unresolved = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in REFERENCE.finditer(text):
            if not resolves(match.group(1)):
                line = text[: match.start()].count("\n") + 1
                unresolved.append(f"{path.relative_to(PACKAGE.parent)}:{line} {match.group(1)}")
    assert not unresolved, "references to names that do not exist:\n" + "\n".join(unresolved)
