"""The package's layout: a small top level, rooms as subpackages in an order, and no import circle.

The import graph is read from the source with ``ast``: every ``import`` and ``from ... import``
of a phifit module, at module level or inside a function (those run too, only later), except
imports under ``if TYPE_CHECKING:`` (never executed).  Importing ``phifit.a.b`` also runs
``phifit/a/__init__.py``, so an edge to a module is an edge to each package above it too.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import phifit

ROOT = Path(__file__).resolve().parents[1]
#: the installed package name of each source folder (pyproject maps trainers/ to phifit.trainers)
SOURCES = {"phifit": ROOT / "phifit", "phifit.trainers": ROOT / "trainers"}
MAX_TOP_LEVEL_MODULES = 15
#: the rooms, each importing only rooms before it (the top-level modules are outside the order): what a
#: run and a sweep are (spec) first, read by the planner and the trainer alike; the trainer last
ROOMS = (
    "spec",
    "runs",
    "fitters",
    "bootstrap",
    "compare",
    "recipes",
    "diagnostics",
    "plan",
    "plot",
    "report",
    "cli",
    "trainers",
)


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = path
    return mods


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def import_graph() -> dict[str, set[str]]:
    """module -> the phifit modules it imports (and the packages above them)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    targets.add(sub if sub in mods else target)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        edges = set()
        for target in targets:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                up = ".".join(parts[:i])
                if up in mods and up != name and not name.startswith(up + "."):
                    edges.add(up)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_top_level_is_small():
    top = [m.name for m in pkgutil.iter_modules(phifit.__path__) if not m.ispkg]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, sorted(top)


def test_the_rooms_are_subpackages_with_a_docstring():
    rooms = [m.name for m in pkgutil.iter_modules(phifit.__path__) if m.ispkg]
    for room in ROOMS[:-1]:
        assert room in rooms
        doc = ast.get_docstring(ast.parse((ROOT / "phifit" / room / "__init__.py").read_text()))
        assert doc and len(doc.split()) >= 8, f"phifit/{room}/__init__.py should say what the room owns"


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else None


def test_no_arrow_back_up_the_rooms():
    """A room imports only rooms before it in ``ROOMS`` (so the spec room reads none, and nothing
    in phifit imports the trainer)."""
    back = sorted(
        f"{a} -> {b}"
        for a, targets in import_graph().items()
        for b in targets
        if _room(a) and _room(b) and ROOMS.index(_room(b)) > ROOMS.index(_room(a))
    )
    assert back == []


def test_no_import_circle():
    graph = import_graph()
    assert "phifit.result" in graph and graph["phifit.fitters.huber"], "the graph was not read"
    assert circles(graph) == []


def test_the_circle_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
