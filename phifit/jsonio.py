"""JSON text and files for result records: ``to_json`` / ``from_json`` over ``to_dict`` / ``from_dict``.

The results of the uncertainty and comparison modules (intervals, bootstrap, comparisons,
recipes, likelihood scores) inherit :class:`JsonIO`; each defines ``to_dict`` (plain JSON
types, NaN and inf as null) and ``from_dict``.
"""

from __future__ import annotations

import json
import os
from typing import Any


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


__all__ = ["JsonIO"]
