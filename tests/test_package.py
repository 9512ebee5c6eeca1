"""The package's shape: exported names never shadow submodules, imports stay lazy and fast."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import phifit


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_submodules_are_modules_and_api_names_are_functions():
    # a fresh interpreter: the order of imports must not matter
    code = (
        "import phifit, phifit.fitters.huber, phifit.simulation, phifit.fitters.refit\n"
        "import types\n"
        "print(isinstance(phifit.simulation, types.ModuleType), isinstance(phifit.fitters, types.ModuleType),\n"
        "      callable(phifit.fit) and not isinstance(phifit.fit, types.ModuleType),\n"
        "      callable(phifit.simulate) and not isinstance(phifit.simulate, types.ModuleType))"
    )
    assert _run(code) == "True True True True"


def test_every_exported_name_resolves():
    for name in phifit.__all__:
        assert getattr(phifit, name) is not None, name
        assert not isinstance(getattr(phifit, name), types.ModuleType) or name == "__version__"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        phifit.nope  # noqa: B018


def test_import_phifit_and_the_cli_parser_are_lazy():
    # `import phifit` pulls in nothing heavy; building the CLI parser (phifit --help) imports
    # neither NumPy nor pandas nor torch, so the help text appears at once
    code = (
        "import sys, phifit\n"
        "from phifit.cli import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in ('numpy', 'pandas', 'scipy', 'torch', 'pymc', 'arviz') if m in sys.modules))"
    )
    assert _run(code) == "[]"


def test_the_refit_workers_import_neither_pandas_nor_scipy_optimize():
    # a bootstrap's and a wild test's worker processes unpickle functions of these modules;
    # pandas and scipy.optimize (~1.5 s together on 2 cores) would be imported again in each
    code = (
        "import sys\n"
        "import phifit.fitters.refit, phifit.fitters.lm, phifit.fitters.parallel, phifit.bootstrap.wild\n"
        "print(sorted(m for m in ('pandas', 'scipy.optimize', 'torch', 'pymc') if m in sys.modules))"
    )
    assert _run(code) == "[]"


PACKAGE = Path(phifit.__file__).resolve().parent


def _imported_modules(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """(line, absolute name) of every import in a module's tree, function-level ones included;
    relative imports are resolved against ``module`` (the dotted name of the file)."""
    found = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found += [(node.lineno, name)] + [(node.lineno, f"{name}.{a.name}") for a in node.names]
    return found


def test_the_fitting_side_never_imports_the_trainer():
    # every module of phifit/ (the trainer's sources are a separate folder, installed as
    # phifit.trainers): no import of phifit.trainers, at module or function level
    offending = []
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50  # the scan sees the whole package
    for path in files:
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if rel.name == "__init__":
            module += ".__init__"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in _imported_modules(tree, module):
            if name == "phifit.trainers" or name.startswith("phifit.trainers."):
                offending.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name}")
    assert not offending, offending


def test_the_import_scan_sees_relative_and_function_level_imports():
    code = "def f():\n    from ..trainers import cli\n    from .. import trainers\nimport phifit.trainers.flops\n"
    names = [n for _, n in _imported_modules(ast.parse(code), "phifit.cli.main")]
    assert "phifit.trainers.cli" in names and "phifit.trainers" in names and "phifit.trainers.flops" in names


def test_top_level_modules_stay_few():
    modules = [m.name for m in pkgutil.iter_modules(phifit.__path__) if not m.ispkg]
    assert len(modules) <= 15, modules


def test_help_lists_the_trainer_commands_without_torch_pymc_or_arviz():
    # the trainer's subcommands come through entry points and are listed even when torch
    # cannot be imported; building the parser imports no heavy backend
    code = (
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.partition('.')[0] in ('torch', 'pymc', 'arviz'):\n"
        "            raise ImportError(name + ' is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from phifit.cli import build_parser\n"
        "text = build_parser().format_help()\n"
        "print('train' in text.split(), 'sweep' in text.split(), 'unavailable' in text,\n"
        "      sorted(m for m in ('torch', 'pymc', 'arviz', 'numpy') if m in sys.modules))"
    )
    assert _run(code) == "True True False []"


def test_an_import_that_lost_arvizs_stamp_race_is_retried_once_and_nothing_else_is(monkeypatch):
    """ArviZ 0.23's first import of the day writes a stamp through a temporary file and a
    rename; the process that renames second fails with FileNotFoundError on that file.  The
    import is tried again (the stamp exists by then); any other missing file still raises."""
    import importlib

    from phifit import extras

    calls = []

    def racing(name):
        calls.append(name)
        if len(calls) == 1:
            raise FileNotFoundError(2, "No such file", "/home/u/.cache/arviz/daily_warning.tmp")
        return types.ModuleType(name)

    monkeypatch.setattr(importlib, "import_module", racing)
    assert extras.import_module("arviz").__name__ == "arviz" and calls == ["arviz", "arviz"]

    def missing(name):
        raise FileNotFoundError(2, "No such file", "/data/model.bin")

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(FileNotFoundError):
        extras.import_module("pymc")
