"""Shared fixtures: simulated paper-design tables and the shared reference data."""

from __future__ import annotations

from pathlib import Path

import pytest

from phifit.law import REFERENCE_PARAMS
from phifit.runs import RunTable, table_from_frame
from phifit.simulation import simulate

#: ../shared beside the repository: reference data for tests (absent on some machines).
SHARED = Path(__file__).resolve().parents[2] / "shared"


def paper_table(noise: float = 0.0, seed: int = 0, **params: float) -> RunTable:
    """The study's 116-run design with losses from the law (study's fit unless overridden)."""
    frame = simulate("paper", params={**REFERENCE_PARAMS, **params}, noise=noise, seed=seed)
    return table_from_frame(frame, source=f"paper(noise={noise}, seed={seed})")


@pytest.fixture(scope="session")
def paper_clean() -> RunTable:
    return paper_table()


@pytest.fixture(scope="session")
def paper_noisy() -> RunTable:
    return paper_table(noise=0.005, seed=1)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"reference data folder {SHARED.name}/ beside the repository is absent")
    return SHARED
