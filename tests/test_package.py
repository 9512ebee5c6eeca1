"""The package's shape: exported names never shadow submodules, imports stay lazy and fast."""

from __future__ import annotations

import subprocess
import sys
import types

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
        "print(sorted(m for m in ('numpy', 'pandas', 'scipy', 'torch', 'pymc') if m in sys.modules))"
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
