"""Griffe extension for the API page: lazily exported names, and reST roles in docstrings.

``phifit``, ``phifit.bootstrap``, ``phifit.plan`` and ``phifit.fitters`` import their public
names on first use (a module ``__getattr__``), so static analysis sees them only as strings:
``_EXPORTS`` maps each name to its module (a full path, or one relative to the package), and
``phifit.fitters.__all__`` lists names defined in a submodule.  This extension adds an alias for
each such name, so ``::: phifit`` renders the real objects without importing phifit.

phifit's docstrings name other objects with Sphinx roles (``:func:`~phifit.fit``` and the like),
which Markdown would print literally; the extension turns each into a code span of the name as
Sphinx would show it (the last component after ``~``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

import griffe


class LazyExports(griffe.Extension):
    """Alias every exported name that a package defines only through ``__getattr__``."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        packages = list(_packages(pkg))
        for module in packages:
            _alias_exports(module)
        loader.resolve_aliases(implicit=True, external=False)
        _plain_roles(pkg)


def _packages(module: griffe.Module) -> Iterator[griffe.Module]:
    yield module
    for sub in module.modules.values():
        if not sub.is_alias and sub.modules:
            yield from _packages(sub)


def _alias_exports(module: griffe.Module) -> None:
    targets: dict[str, str] = {}
    lazy = module.members.get("_EXPORTS")
    if lazy is not None and lazy.is_attribute and lazy.value is not None:
        table = ast.literal_eval(str(lazy.value))
        # a value names a module by its full path ("phifit.result") or relative to the package ("block")
        targets.update(
            {
                name: f"{path if path.startswith('phifit') else f'{module.path}.{path}'}.{name}"
                for name, path in table.items()
            }
        )
    exports = [str(name) for name in module.exports or []]
    for name in exports:
        if name in module.members or name in targets:
            continue
        for sub in module.modules.values():
            if name in sub.members:
                targets[name] = f"{sub.path}.{name}"
                break
    for name, target in targets.items():
        if name not in module.members:
            module.set_member(name, griffe.Alias(name, target, parent=module))
    if lazy is not None and not exports:
        module.exports = sorted(targets)


#: a Sphinx cross-reference role: :func:`name`, :class:`~path.Name`, :mod:`title <path>`, ...
ROLE = re.compile(r":(?:py:)?(?:func|mod|class|attr|data|meth|obj|exc|const):`([^`]+)`")


def _role_text(match: re.Match[str]) -> str:
    target = match.group(1).strip()
    titled = re.fullmatch(r"(.+?)\s*<[^>]+>", target)
    if titled:
        text = titled.group(1)
    elif target.startswith("~"):
        text = target[1:].rsplit(".", 1)[-1]
    else:
        text = target
    return f"`{text}`"


def _plain_roles(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = ROLE.sub(_role_text, obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _plain_roles(member)
