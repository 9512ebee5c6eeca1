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
  ``to_json(path)`` replaces only a file phifit wrote (:func:`written_by_phifit`) unless
  ``overwrite=True`` (:func:`check_replaceable`).
  It also gives every result its notebook views: a one-line ``repr`` of the scalar fields
  (:func:`short_repr`, under :data:`REPR_LIMIT` characters, unless the class writes its own),
  ``str`` = ``summary()`` where the result has one, and ``_repr_html_``, an HTML table
  (:func:`html_table`) of the result's summary: ``summary_frame()`` where the result has one
  (a bootstrap's intervals), else ``to_frame()`` up to :data:`HTML_ROWS` rows, else its scalar
  fields; never the replicates or draws.
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


#: the longest ``repr`` of a result, in characters
REPR_LIMIT = 300
#: the most rows of ``to_frame()`` a notebook's HTML display shows; a longer table (per run, per
#: simulated table) is summarised by the result's scalar fields
HTML_ROWS = 40


def _scalar_text(value: Any) -> str | None:
    """A short text of a scalar (bool, number, short string, None), or None for anything else."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(None if value is None else bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    return None


def scalar_fields(obj: Any) -> dict[str, str]:
    """The dataclass fields of ``obj`` that hold scalars, as short text, in field order (None
    left out); a field holding another result is given by its type's name, the ``warnings``
    list by its length (``n_warnings``)."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is None:
            continue
        text = _scalar_text(value)
        if text is not None:
            out[f.name] = text
        elif dataclasses.is_dataclass(value) and hasattr(value, "to_dict"):
            out[f.name] = type(value).__name__
        elif isinstance(value, (list, tuple, Mapping)) and f.name == "warnings":
            out["n_warnings"] = str(len(value))
    return out


def short_repr(obj: Any) -> str:
    """``ClassName(field=value, ...)`` over the scalar fields, cut to :data:`REPR_LIMIT`."""
    head = f"{type(obj).__name__}("
    parts: list[str] = []
    size = len(head) + 1
    for name, text in scalar_fields(obj).items():
        part = f"{name}={text}"
        if size + len(part) + 2 > REPR_LIMIT - 5:
            parts.append("...")
            break
        parts.append(part)
        size += len(part) + 2
    return head + ", ".join(parts) + ")"


def html_table(rows: Mapping[str, Any] | Any, *, caption: str = "") -> str:
    """An escaped HTML ``<table>`` of a DataFrame (``to_html``) or of {name: value} rows."""
    import html

    if hasattr(rows, "to_html"):
        body = rows.to_html(escape=True, na_rep="", float_format=lambda x: f"{x:.6g}")
    else:
        cells = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows.items()
        )
        body = f"<table>{cells}</table>"
    return (f"<p><strong>{html.escape(caption)}</strong></p>" if caption else "") + body


def written_by_phifit(path: str | os.PathLike, keys: set[str] | None = None) -> bool:
    """Whether the file at ``path`` is a result phifit wrote: a JSON object whose
    ``"generator"`` is ``"phifit"`` (fits, bootstraps, comparisons, reports, ...), or, given
    ``keys``, one holding exactly those keys (a result of the same kind that writes no
    generator).  False for anything else, a file that cannot be read included."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict):
        return False
    return data.get("generator") == "phifit" or (keys is not None and set(data) == set(keys))


def check_replaceable(path: str | os.PathLike, *, overwrite: bool, keys: set[str] | None = None) -> None:
    """Refuse to write ``path`` over a file phifit did not write (:func:`written_by_phifit`)
    unless ``overwrite``: ``FileExistsError`` naming the file and the way out.  A directory, or
    a folder that does not exist, is refused whatever ``overwrite`` says."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path}: is a directory; expected a file path")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"{path}: directory {parent} does not exist")
    if os.path.exists(path) and not overwrite and not written_by_phifit(path, keys):
        raise FileExistsError(
            f"{path}: exists and was not written by phifit; choose another path or pass "
            "overwrite=True to replace it (--force on the command line)"
        )


class JsonIO:
    """``to_json(path=None)`` writes/returns ``json.dumps(to_dict())``; ``from_json`` reads a
    path or a JSON string back through ``from_dict`` (by default :func:`from_plain`).

    Every subclass also gets the notebook views of the module docstring: a short ``repr``
    (unless it defines ``__repr__`` in its own body), ``str`` = ``summary()`` and ``_repr_html_``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # set before @dataclass runs, so the generated field dump does not replace it
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = short_repr

    def __str__(self) -> str:
        summary = getattr(self, "summary", None)
        if callable(summary):
            try:
                text = summary()
            except TypeError:
                text = None
            if isinstance(text, str):
                return text
        return repr(self)

    def _repr_html_(self) -> str:
        """The notebook display: the result's summary, never its draws.  ``summary_frame()``
        where the result has one (a bootstrap's intervals, not its replicates); else
        ``to_frame()`` when it has at most :data:`HTML_ROWS` rows; else the scalar fields, with
        a line saying how large ``to_frame()`` is."""
        summary_frame = getattr(self, "summary_frame", None)
        if callable(summary_frame):
            return html_table(summary_frame(), caption=repr(self))
        to_frame = getattr(self, "to_frame", None)
        frame = to_frame() if callable(to_frame) else None
        if frame is not None and len(frame) <= HTML_ROWS:
            return html_table(frame, caption=repr(self))
        out = html_table(scalar_fields(self), caption=type(self).__name__)
        if frame is not None:
            rows, cols = frame.shape
            out += f"<p>to_frame(): {rows} rows x {cols} columns, not shown</p>"
        return out

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Rebuild from :meth:`to_dict` output, field by field (:func:`from_plain`)."""
        return from_plain(cls, data)

    def to_json(
        self, path: str | os.PathLike | None = None, *, indent: int = 2, overwrite: bool = False
    ) -> str:
        """Serialise to JSON text (no NaN: missing numbers are null); also write it to ``path``.

        An existing ``path`` is replaced only when phifit wrote it (:func:`written_by_phifit`:
        a JSON object saying ``"generator": "phifit"``, or holding exactly the keys this kind of
        result writes) or with ``overwrite=True``; otherwise ``FileExistsError``, before
        anything is written (the command line's ``--force``).  The file is written whole or not
        at all (a temporary file, then a rename)."""
        data = self.to_dict()
        text = json.dumps(data, indent=indent, allow_nan=False)
        if path is not None:
            check_replaceable(path, overwrite=overwrite, keys=set(data))
            tmp = f"{os.fspath(path)}.tmp-{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            os.replace(tmp, path)
        return text

    @classmethod
    def from_json(cls, source: str | os.PathLike):
        """Load from a JSON file path or a JSON string."""
        text = str(source)
        if not text.lstrip().startswith("{"):
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
        return cls.from_dict(json.loads(text))


__all__ = [
    "HTML_ROWS",
    "REPR_LIMIT",
    "JsonIO",
    "check_replaceable",
    "from_plain",
    "html_table",
    "rebuild",
    "scalar_fields",
    "short_repr",
    "to_plain",
    "written_by_phifit",
]
