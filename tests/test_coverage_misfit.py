"""The misfit conditions of benchmarks/bootstrap_coverage.py: each table is its law-true twin's
table (same noise) with fixed log-loss offsets, the same in every table; the law-true
conditions' tables are those the study was run on."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
try:
    import bootstrap_coverage as bc
finally:
    sys.path.remove(str(BENCHMARKS))

#: log-loss of the first and last run and the sum over the table, from the study's code before
#: the misfit conditions were added: (condition, table, size table) -> (first, last, sum)
BEFORE = {
    ("independent", 3, False): (1.0624220387647152, 0.8725948110810442, 111.98740827226204),
    ("cell-shared", 0, False): (1.0661631943949983, 0.870427705992906, 111.95993238233615),
    ("cell-shared", 0, True): (1.0574602452645419, 0.8914550063424249, 113.4944274813577),
    ("t3", 3, True): (1.0658606006264786, 0.8913425694605308, 113.53858809606552),
    ("small-cell-shared", 3, False): (0.6248011332360522, 0.6476680147572528, 27.423901202592816),
    ("small", 0, True): (0.6150583214697305, 0.6854317944206364, 28.001628642967578),
}


@pytest.fixture(scope="module")
def cache():
    return {}


def _log_loss(condition, index, size, cache):
    frame = bc.table_frame(condition, index, size=size, design_cache=cache)
    return frame, np.log(frame["loss"].to_numpy())


#: The study's design simulates from fixed constants, to the last digit; the CPU design ("small"
#: conditions) from a law fitted to the CPU table at run time, whose last digits follow the
#: installed numpy / scipy (two installs differed by 1.8e-10 relative).  A changed noise draw
#: moves a log-loss by about 1e-2, so 1e-8 still tells a changed table from the same one.
REL_TOL = {"small": 1e-8, "small-cell-shared": 1e-8}


@pytest.mark.parametrize("key", list(BEFORE), ids=lambda k: f"{k[0]}-{k[1]}-{'size' if k[2] else 'cov'}")
def test_law_true_tables_are_unchanged(key, cache):
    _, y = _log_loss(*key, cache)
    first, last, total = BEFORE[key]
    rel = REL_TOL.get(key[0], 1e-13)
    assert y[0] == pytest.approx(first, rel=rel)
    assert y[-1] == pytest.approx(last, rel=rel)
    assert y.sum() == pytest.approx(total, rel=rel)


@pytest.mark.parametrize(
    "condition, shifts",
    [
        ("misfit-r4", {1: 0.0, 2: 0.0, 4: -0.0064, 8: 0.0}),
        ("small-misfit-r", {1: -0.021, 2: 0.017, 4: 0.0, 8: 0.0}),
    ],
)
def test_a_per_r_misfit_table_is_its_twin_shifted_by_the_offsets(condition, shifts, cache):
    twin = bc.CONDITIONS[condition]["twin"]
    for index in (0, 5):
        for size in (False, True):
            frame, y = _log_loss(condition, index, size, cache)
            _, y_twin = _log_loss(twin, index, size, cache)
            want = frame["r"].map(shifts).to_numpy(dtype=float)
            np.testing.assert_allclose(y - y_twin, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "condition, sd, n_cells, draw",
    [
        ("misfit-cells", 0.003, 24, (0.004500434224882814, 0.0012538475834129688, 0.003681751372603664)),
        (
            "small-misfit-cells",
            0.010,
            12,
            (-0.002303083696060125, 0.009735401710053986, 0.0034443057056348365),
        ),
    ],
)
def test_per_cell_offsets_are_fixed_per_cell_with_the_stated_spread(condition, sd, n_cells, draw, cache):
    twin = bc.CONDITIONS[condition]["twin"]
    seen = []
    for index, size in ((0, False), (7, False), (7, True)):
        frame, y = _log_loss(condition, index, size, cache)
        _, y_twin = _log_loss(twin, index, size, cache)
        diff = pd.Series(y - y_twin).groupby([frame["budget"].astype(float), frame["r"].astype(float)])
        # one value per (budget, r) cell, shared by its runs
        assert (diff.max() - diff.min()).max() < 1e-12
        per_cell = diff.mean()
        assert len(per_cell) == n_cells
        assert per_cell.mean() == pytest.approx(0.0, abs=1e-12)
        assert per_cell.std(ddof=0) == pytest.approx(sd, rel=1e-9)
        # the draw itself (cells in sorted (budget, r) order): the first, second and last cell's
        assert tuple(per_cell.iloc[[0, 1, -1]]) == pytest.approx(draw, abs=1e-12)
        seen.append(per_cell.to_numpy())
    # a property of the condition: the same offsets in every table, coverage and size alike
    np.testing.assert_allclose(seen[0], seen[1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(seen[0], seen[2], rtol=0, atol=1e-12)


def test_offsets_reject_an_unknown_kind():
    frame = bc.table_frame("independent", 0)
    assert not bc.log_offsets(frame, None).any()
    with pytest.raises(ValueError, match="unknown offsets"):
        bc.log_offsets(frame, {"cells": 0.003})


def test_every_misfit_condition_has_a_law_true_twin_and_every_part_a_done_key():
    for name, spec in bc.CONDITIONS.items():
        if "offsets" in spec:
            assert spec["twin"] in bc.LAW_TRUE, name
    assert set(bc.PART_KEYS) == set(bc.PARTS)


def test_covered_or_flagged_counts_only_unflagged_misses():
    """A table counts as a failure only when its interval misses the generating phi and nothing
    warns: neither the lack-of-fit test (p < 0.05) nor an interval end at phi's box (-3, 3)."""
    true = bc.TRUE_PHI
    rows = [
        {"cell_percentile": [true - 0.1, true + 0.1], "lof_p": 0.5},  # covers
        {"cell_percentile": [true + 0.01, true + 0.2], "lof_p": 0.01},  # misses, flagged by lack of fit
        {"cell_percentile": [-3.0, true - 0.01], "lof_p": 0.3},  # misses, an end at the box
        {"cell_percentile": [true + 0.01, true + 0.2], "lof_p": 0.05},  # misses, p not below 0.05
        {"cell_percentile": [true - 0.3, true - 0.01], "lof_p": None},  # misses, untestable
    ]
    text = bc._covered_or_flagged(rows)
    assert text.startswith("covered or flagged 60.0 ± ")
    assert "lack of fit rejects: 1, an end at the box: 1, neither and missed: 2 of 5" in text
