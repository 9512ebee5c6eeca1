"""Small versions of the statistical studies behind docs/calibration.md (the full ones are
rerunnable scripts under benchmarks/; their numbers, commands and seeds are on that page)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from phifit.fitters.huber import fit_huber
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_huber_standard_error_matches_the_spread_of_phi_hat():
    """The analytic SE of phi (Huber's M-estimator sandwich) is the sd of phi_hat across
    tables when runs are independent (benchmarks/stderr_calibration.py: 0.99 +- 0.05 over
    300 tables); 40 tables bound the ratio to about +-25%."""
    phis, ses = [], []
    for seed in range(40):
        fit = fit_huber(table_from_frame(simulate("paper", noise=0.004, seed=5000 + seed)), n_starts=100)
        phis.append(fit.phi)
        ses.append(fit.stderr["phi"])
    ratio = np.mean(ses) / np.std(phis, ddof=1)
    assert 0.7 < ratio < 1.35, ratio
    assert "assumes independent runs" in fit.extras["stderr_method"]


@pytest.mark.slow
def test_a_small_coverage_study_runs_and_tells_the_tests_apart():
    """benchmarks/bootstrap_coverage.py on 30 tables of independent and of cell-shared noise:
    the default cell interval covers phi in most tables, the wild test holds its size where
    the chi-square test, which assumes independent runs, does not."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from bootstrap_coverage import TRUE_PHI, one_table
    finally:
        sys.path.remove(str(BENCHMARKS))
    rows = [one_table(c, i, 99, 49) for c in ("independent", "cell-shared") for i in range(30)]
    for condition in ("independent", "cell-shared"):
        sub = [r for r in rows if r["condition"] == condition]
        cover = np.mean([r["cell_percentile"][0] <= TRUE_PHI <= r["cell_percentile"][1] for r in sub])
        wild = np.mean([r["wild_p"] < 0.05 for r in sub])
        assert cover >= 0.8 and wild <= 0.2, (condition, cover, wild)
    shared = [r for r in rows if r["condition"] == "cell-shared"]
    assert np.mean([r["chi2_p"] < 0.05 for r in shared]) > np.mean([r["wild_p"] < 0.05 for r in shared])
