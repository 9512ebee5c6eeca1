"""Shared fixtures: simulated paper-design tables and the reference data shipped in tests/data/."""

from __future__ import annotations

from pathlib import Path

import pytest

from phifit.law import REFERENCE_PARAMS
from phifit.runs.table import RunTable, table_from_frame
from phifit.simulation import simulate

#: Reference data shipped with the tests (attribution in tests/data/README.md).
TEST_DATA = Path(__file__).resolve().parent / "data"


def paper_table(noise: float = 0.0, seed: int = 0, **params: float) -> RunTable:
    """The study's 116-run design with losses from the law (study's fit unless overridden)."""
    frame = simulate("paper", params={**REFERENCE_PARAMS, **params}, noise=noise, seed=seed)
    return table_from_frame(frame, source=f"paper(noise={noise}, seed={seed})")


def play_text(n: int) -> str:
    """``n`` words of a deterministic pseudo-play: a tiny training corpus for real trainer steps."""
    words = "to be or not to be that is the question whether tis nobler in the mind to suffer".split()
    return " ".join(words[(i * 7 + i // 13) % len(words)] for i in range(n))


def pytest_configure(config: pytest.Config) -> None:
    """Import ArviZ once in the controlling process, before any worker of ``pytest -n`` starts
    (where it is installed): its first import of the day writes a stamp file, and two workers
    collecting Bayesian tests at once (nutpie imports it directly) race on that file
    (:func:`phifit.extras.import_module`).  With today's stamp written, no worker writes one."""
    if hasattr(config, "workerinput"):
        return
    from phifit.extras import MissingExtraError, import_optional

    try:
        import_optional("arviz", "bayes", "the test suite")
    except MissingExtraError:
        pass


@pytest.fixture(scope="session")
def paper_clean() -> RunTable:
    return paper_table()


@pytest.fixture(scope="session")
def paper_noisy() -> RunTable:
    return paper_table(noise=0.005, seed=1)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The folder holding ``reference/`` (the Epoch Chinchilla points): tests/data, always present."""
    return TEST_DATA
