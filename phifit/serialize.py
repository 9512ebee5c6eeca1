"""Serialisation of results: plain JSON-safe data, and JSON text and files.

- :func:`to_plain` converts NumPy scalars/arrays, tuples and nested results to JSON-safe Python
  types (NaN and inf become null); every result's ``to_dict`` uses it.
- :func:`from_plain` rebuilds a frozen result dataclass from such data, field by field, guided by
  the field types: ``float`` fields turn null back into NaN (so +-inf, which JSON cannot hold,
  comes back as NaN too), ``float | None`` fields keep null as None, ``np.ndarray`` fields
  become float arrays, ``dict[int, ...]`` keys (strings in JSON) become ints again, tuples
  become tuples, and nested results (anything with ``from_dict``, e.g. a
  :class:`~phifit.cautions.Caution`) are rebuilt as their own types.  Keys a ``to_dict``
  adds for readers (derived properties such as ``gap_range``, ``generator``, ``kind``) are
  ignored; a missing key leaves the field's default.
- :class:`JsonIO` gives a result ``to_json(path=None)`` / ``from_json(path_or_text)`` over its
  ``to_dict`` / ``from_dict`` (``from_dict`` defaults to :func:`from_plain`); every result
  type of phifit round-trips through it, and nothing else in phifit writes or reads result JSON.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Union

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


def from_plain(cls: type, data: Mapping[str, Any]) -> Any:
    """Rebuild the dataclass ``cls`` from ``to_plain`` data of its fields (module docstring)."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.init and f.name in data:
            try:
                kwargs[f.name] = rebuild(hints[f.name], data[f.name])
            except (TypeError, ValueError, KeyError) as err:
                raise ValueError(f"{cls.__name__}.{f.name}: {err}") from err
    return cls(**kwargs)


def rebuild(tp: Any, value: Any) -> Any:
    """``value`` (plain JSON data) as the type ``tp`` of the field that held it."""
    if tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return rebuild(options[0], value)
        if float in options and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return value
    if value is None:
        return math.nan if tp is float else None
    if tp is float:
        return float(value)
    if tp in (int, bool, str):
        return tp(value)
    if tp is np.ndarray:
        return np.array(value, dtype=float)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(rebuild(args[0], v) for v in value)
        return tuple(rebuild(a, v) for a, v in zip(args, value)) if args else tuple(value)
    if origin in (list, Sequence):
        item = args[0] if args else Any
        return [rebuild(item, v) for v in value]
    if origin in (dict, Mapping):
        key, item = args if args else (Any, Any)
        return {_key(key, k): rebuild(item, v) for k, v in value.items()}
    if isinstance(tp, type) and hasattr(tp, "from_dict"):
        return tp.from_dict(value)
    return value


def _key(tp: Any, key: str) -> Any:
    """A dict key written as text, back as the key type (int and float keys)."""
    return tp(key) if tp in (int, float) else key


class JsonIO:
    """``to_json(path=None)`` writes/returns ``json.dumps(to_dict())``; ``from_json`` reads a
    path or a JSON string back through ``from_dict`` (by default :func:`from_plain`)."""

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Rebuild from :meth:`to_dict` output, field by field (:func:`from_plain`)."""
        return from_plain(cls, data)

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


__all__ = ["JsonIO", "from_plain", "rebuild", "to_plain"]
