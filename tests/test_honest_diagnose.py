"""diagnose prints only possible correlations, in separate columns, one reading of the
profile interval, and names the assumption behind its standard error of phi."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from phifit.diagnostics.identifiability import Identifiability, identifiability
from phifit.fitters import fit
from phifit.runs.table import table_from_frame

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def one_token_count():
    """10 runs (r = 1, 2) all at one token count: B, beta and E cannot be told apart."""
    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    rows = frame[frame["budget"] == 1e18].iloc[:10].drop(columns=["flops", "budget"]).assign(tokens=1e9)
    runs = table_from_frame(rows, source="one token count")
    result = fit(runs, n_starts=8, seed=0)
    return runs, result, identifiability(runs, result, profile_points=7, profile_starts=2)


def test_correlations_are_correlations(one_token_count):
    _, _, ident = one_token_count
    corr = np.asarray(ident.correlation, float)
    finite = corr[np.isfinite(corr)]
    assert np.all(np.abs(finite) <= 1.0)
    if not ident.correlation_reliable:
        assert "correlations_unreliable" in [w.kind for w in ident.warnings]
    for w in ident.warnings:
        if w.kind == "phi_correlated":
            assert abs(w.values["correlation"]) <= 1.0


def test_correlation_columns_never_run_together():
    ident = Identifiability(
        names=["a", "phi"],
        correlation=[[1.0, -167786.427], [-167786.427, 1.0]],
        condition_number=1e20,
        stderr={},
        profile=None,
        profile_interval=None,
        warnings=[],
    )
    lines = ident.summary().splitlines()
    start = lines.index("    correlations:") + 2  # after the header row
    rows = lines[start : start + 2]
    for row in rows:  # the last two fields are the two cells, each a number on its own
        assert [float(x) for x in row.split()[-2:]] == pytest.approx([float(x) for x in row.split()[-2:]])
        assert len(row.split()) == len(row[:11].split()) + 2


def test_profile_statements_agree(one_token_count):
    _, _, ident = one_token_count
    flat = [w for w in ident.warnings if w.kind == "phi_profile_flat"]
    text = ident.summary()
    assert flat  # this table barely constrains phi
    if flat:
        line = next(s for s in text.splitlines() if "approx. 95%" in s)
        assert "end of the profiled range" in line
        # the warning quotes the same interval as the summary line
        assert line.split("approx. 95%: ")[1] in flat[0].message


def test_se_of_phi_names_its_assumption(one_token_count):
    _, result, ident = one_token_count
    uncertain = [w for w in ident.warnings if w.kind == "phi_uncertain"]
    assert uncertain or "phi" not in ident.stderr or not np.isfinite(ident.stderr["phi"])
    for w in uncertain:
        assert "Gauss-Newton" in w.message and "independent runs" in w.message
        if result.stderr and result.stderr.get("phi") is not None:
            assert f"{result.stderr['phi']:.3g}" in w.message
