"""Cautions: the one type for "something here deserves a second look".

Every part of phifit that can find something suspect (a fitter, the bootstrap, the
restricted-fit comparison, the recipes, the diagnostics, the Bayesian sampler, the run
table) returns it as a :class:`Caution`: where it comes from (``source``), a short
machine-readable ``kind``, a plain-language ``message`` that says what to do, and the
offending ``values``.  Results keep their cautions as data; printing happens elsewhere
(the CLI, the report's headline, ``results.json["warnings"]``), and
:func:`collect` gathers them from several results into one list, in order, without
duplicates.

Levels: ``"warning"`` (the result may be wrong or misleading as it stands) and
``"note"`` (context a careful reader wants, e.g. "the chi-square p-value assumes
independent runs").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .serialize import JsonIO

LEVELS = ("warning", "note")


@dataclass(frozen=True)
class Caution(JsonIO):
    """One caution: ``source`` (e.g. "fit", "bootstrap", "compare", "recipes",
    "diagnostics", "bayes", "runs"), ``kind`` (e.g. "at_bound", "few_runs"),
    ``message`` (plain words, with what to do), ``values`` (the numbers behind it),
    ``level`` ("warning" or "note")."""

    source: str
    kind: str
    message: str
    values: Mapping[str, Any] = field(default_factory=dict)
    level: str = "warning"

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"unknown caution level {self.level!r}; expected one of {', '.join(LEVELS)}")
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        # the read-only view of ``values`` cannot be pickled; rebuild from a plain dict
        # (pickle, copy.deepcopy, joblib and multiprocessing all go through here)
        return (type(self), (self.source, self.kind, self.message, dict(self.values), self.level))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (values converted to plain Python types by the caller's encoder)."""
        return {
            "source": self.source,
            "kind": self.kind,
            "level": self.level,
            "message": self.message,
            "values": dict(self.values),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | str, *, source: str = "unknown") -> Caution:
        """Rebuild from :meth:`to_dict` output (a bare string from an older file becomes a warning)."""
        if isinstance(data, str):
            return cls(source=source, kind="message", message=data)
        return cls(
            source=str(data.get("source", source)),
            kind=str(data.get("kind", "message")),
            message=str(data["message"]),
            values=dict(data.get("values") or {}),
            level=str(data.get("level", "warning")),
        )


def caution(source: str, kind: str, message: str, level: str = "warning", **values: Any) -> Caution:
    """Shorthand: ``caution("fit", "at_bound", "phi at its bound", phi=3.0)``."""
    return Caution(source=source, kind=kind, message=message, values=values, level=level)


def collect(*groups: Iterable[Caution] | None) -> list[Caution]:
    """All cautions of several results, in order; an exact repeat (same source, kind and
    message) is kept once."""
    seen: set[tuple[str, str, str]] = set()
    out: list[Caution] = []
    for group in groups:
        for item in group or ():
            key = (item.source, item.kind, item.message)
            if key not in seen:
                seen.add(key)
                out.append(item)
    return out


def messages(cautions: Iterable[Caution], *, level: str | None = None) -> list[str]:
    """The messages, optionally of one level only."""
    return [c.message for c in cautions if level is None or c.level == level]
