"""The modules of :mod:`phifit.report` import one another without a circle, counting the imports
made only for type checking (``if TYPE_CHECKING:``): a circle there still ties two modules
together for a reader and for the type checker, and becomes a run-time circle once such an
import is needed at run time."""

from __future__ import annotations

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parents[1] / "phifit" / "report"


def report_imports() -> dict[str, set[str]]:
    """Module name -> the phifit.report modules it imports anywhere in its file (at the top, in
    functions or under ``TYPE_CHECKING``)."""
    names = {path.stem for path in REPORT.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(REPORT.glob("*.py")):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module:  # from .x import ...
                    found.add(node.module.split(".")[0])
                elif node.level == 1:  # from . import x, y
                    found.update(alias.name for alias in node.names)
                elif node.level == 0 and (node.module or "").startswith("phifit.report."):
                    found.add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                found.update(
                    alias.name.split(".")[2]
                    for alias in node.names
                    if alias.name.startswith("phifit.report.")
                )
        graph[path.stem] = (found & names) - {path.stem}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports in ``graph`` (its modules in order, the first repeated at the end),
    or None.  ``__init__`` is left out: the package re-exports its modules' names, and a module
    that imports its own package's ``__init__`` is not what this checks."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], _ = 1, path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt == "__init__":
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if state.get(nxt) is None and (found := visit(nxt)):
                return found
        state[node], _ = 2, path.pop()
        return None

    for node in sorted(graph):
        if node != "__init__" and state.get(node) is None and (found := visit(node)):
            return found
    return None


def test_the_circle_finder_finds_a_type_only_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_report_modules_import_each_other_without_a_circle():
    graph = report_imports()
    assert "options" in graph["stages"] and "options" in graph["analysis"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
