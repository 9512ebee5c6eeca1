"""Fits that say what is wrong: outlying runs named by run id, and a low R^2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from phifit.fitters import fit
from phifit.runs.table import table_from_frame

DATA = Path(__file__).resolve().parents[1] / "data"


def study_rows(budgets: list[float], sizes: list[int], r_values: list[int]) -> pd.DataFrame:
    """Rows of the study's digitised table at the given budgets, sizes and r."""
    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    return frame[frame["budget"].isin(budgets) & frame["size"].isin(sizes) & frame["r"].isin(r_values)]


@pytest.fixture(scope="module")
def one_bad_run():
    """The study's two smallest budgets (36 runs) with one run's loss set to 9.7 nats."""
    frame = study_rows([4.64e17, 1e18], [6, 8, 10, 12, 14], [1, 2, 4, 8]).copy()
    frame.loc[frame["run_id"] == "C1e+18_r2_s10", "loss"] = 9.7
    runs = table_from_frame(frame, source="one bad run")
    return runs, fit(runs, n_starts=10, seed=0)


def test_fit_names_outlying_run_and_low_r2(one_bad_run):
    runs, result = one_bad_run
    kinds = {c.kind: c for c in result.warnings}
    assert "outlying_runs" in kinds
    assert kinds["outlying_runs"].values["run_ids"] == ["C1e+18_r2_s10"]
    assert "C1e+18_r2_s10" in kinds["outlying_runs"].message
    assert result.r2 < 0.5 and "low_r2" in kinds
    from phifit.cli.fit import closing_line

    assert "no warnings" not in closing_line(result.warnings)


def test_diagnose_names_outlying_run(one_bad_run):
    from phifit.diagnostics.residuals import residual_diagnostics

    runs, result = one_bad_run
    res = residual_diagnostics(runs, result)
    flagged = {c.kind: c for c in res.flags}
    assert flagged["outlying_runs"].values["run_ids"] == ["C1e+18_r2_s10"]
    assert "low_r2" in flagged
    assert "C1e+18_r2_s10" in res.summary()


def test_clean_table_has_no_outlier_caution():
    from phifit.fitters.common import fit_quality_cautions

    rng = np.random.default_rng(0)
    e = rng.normal(0, 0.01, 200)
    assert fit_quality_cautions(e, [f"run{i}" for i in range(200)], 0.95, 6) == []
    e[17] = 0.2  # 20 sd
    hit = fit_quality_cautions(e, [f"run{i}" for i in range(200)], 0.95, 6)
    assert [c.kind for c in hit] == ["outlying_runs"] and hit[0].values["run_ids"] == ["run17"]
    # residuals at rounding level, or too few runs beyond the parameters: nothing to flag
    assert fit_quality_cautions(np.full(20, 1e-12), [str(i) for i in range(20)], 1.0, 6) == []
    assert fit_quality_cautions(e[:8], [str(i) for i in range(8)], 0.95, 6) == []
