"""Serialisation of results: plain JSON-safe data, and JSON text and files.

- :func:`to_plain` converts NumPy scalars/arrays, tuples and nested results to JSON-safe Python
  types (NaN and inf become null); every result's ``to_dict`` uses it.
- :class:`JsonIO` gives a result ``to_json(path=None)`` / ``from_json(path_or_text)`` over its
  ``to_dict`` / ``from_dict``; every result type of phifit round-trips through it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

def to_plain(value: Any) -> Any:
    """Convert NumPy scalars/arrays and tuples to JSON-safe Python types (NaN -> None)."""
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return to_plain(value.to_dict())
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_plain(value.tolist())
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        x = float(value)
        return x if math.isfinite(x) else None
    return value


class JsonIO:
    """``to_json(path=None)`` writes/returns ``json.dumps(to_dict())``; ``from_json`` reads a
    path or a JSON string back through ``from_dict``."""

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def to_json(self, path: str | os.PathLike | None = None, *, indent: int = 2) -> str:
        """Serialise to JSON text (no NaN: missing numbers are null); also write it to ``path``."""
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        return text

    @classmethod
    def from_json(cls, source: str | os.PathLike):
        """Load from a JSON file path or a JSON string."""
        text = str(source)
        if not text.lstrip().startswith("{"):
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
        return cls.from_dict(json.loads(text))


__all__ = ["JsonIO", "to_plain"]
