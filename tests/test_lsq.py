"""Least squares with lmfit: recovery, agreement with Huber, errors, profile interval."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import paper_table
from scipy.stats import f as f_dist

from phifit import fit
from phifit.fitters.lsq import OBJECTIVE_NAME, fit_lsq
from phifit.law import PARAM_NAMES, REFERENCE_PARAMS, LawSpec, log_loss
from phifit.result import FitResult
from phifit.runs.table import table_from_frame


@pytest.fixture(scope="module")
def noisy_lsq(paper_noisy):
    return fit_lsq(paper_noisy, n_starts=200)


def test_recovers_the_truth_without_noise(paper_clean):
    res = fit(paper_clean, method="lsq", n_starts=200)
    assert res.method == "lsq" and res.converged and res.objective_name == OBJECTIVE_NAME
    for name in PARAM_NAMES:
        assert res.params[name] == pytest.approx(REFERENCE_PARAMS[name], rel=1e-6)
    assert res.objective < 1e-20 and res.r2 == pytest.approx(1.0)
    assert res.extras["profile_ci"]["phi"] == pytest.approx([res.phi, res.phi])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_phi_agrees_with_huber(seed):
    """Acceptance 5: noise sd 0.005 on the paper design, |phi_lsq - phi_huber| <= 0.03."""
    runs = paper_table(noise=0.005, seed=seed)
    lsq, hub = fit(runs, method="lsq", n_starts=200), fit(runs)
    assert abs(lsq.phi - hub.phi) <= 0.03


def test_is_the_least_squares_optimum(paper_noisy, noisy_lsq):
    resid = paper_noisy.log_loss - log_loss(noisy_lsq.theta, paper_noisy.design)
    assert noisy_lsq.objective == pytest.approx(np.sum(resid**2), rel=1e-10)
    huber = fit(paper_noisy)
    resid_h = paper_noisy.log_loss - log_loss(huber.theta, paper_noisy.design)
    assert noisy_lsq.objective <= np.sum(resid_h**2)
    # small moves of any parameter increase the sum of squares
    for i in range(6):
        for step in (-1e-4, 1e-4):
            theta = noisy_lsq.theta.copy()
            theta[i] += step
            r = paper_noisy.log_loss - log_loss(theta, paper_noisy.design)
            assert np.sum(r**2) >= noisy_lsq.objective


def test_standard_errors_and_correlations(noisy_lsq):
    ex = noisy_lsq.extras
    assert set(noisy_lsq.stderr) == set(PARAM_NAMES)
    corr = ex["correlation"]
    names = list(corr)
    assert names == ["a", "alpha", "b", "beta", "e", "phi"]
    mat = np.array([[corr[r][c] for c in names] for r in names])
    np.testing.assert_allclose(mat, mat.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(mat), 1.0, atol=1e-12)
    assert np.all(np.abs(mat) <= 1 + 1e-12)
    # delta method for the log-space parameters
    assert noisy_lsq.stderr["A"] == pytest.approx(noisy_lsq.params["A"] * ex["stderr_internal"]["a"])
    assert noisy_lsq.stderr["E"] == pytest.approx(noisy_lsq.params["E"] * ex["stderr_internal"]["e"])
    assert ex["sigma_log"] == pytest.approx(np.sqrt(noisy_lsq.objective / (116 - 6)))
    assert 0.003 < ex["sigma_log"] < 0.007  # the simulated noise sd is 0.005


def test_profile_interval_of_phi_is_where_the_f_test_reaches_95(paper_noisy, noisy_lsq):
    lo, hi = noisy_lsq.extras["profile_ci"]["phi"]
    phi, se = noisy_lsq.phi, noisy_lsq.stderr["phi"]
    assert lo < phi < hi
    assert (hi - lo) / 2 == pytest.approx(1.96 * se, rel=0.3)
    n, k = 116, 6
    for end in (lo, hi):
        restricted = fit_lsq(paper_noisy, spec=LawSpec(fixed={"phi": end}), n_starts=100, profile=False)
        ratio = restricted.objective / noisy_lsq.objective - 1.0
        assert f_dist.cdf(ratio * (n - k), 1, n - k) == pytest.approx(0.95, abs=2e-3)


def test_fixed_phi(paper_noisy):
    res = fit(paper_noisy, method="lsq", fix={"phi": 0.0}, n_starts=100)
    assert res.params["phi"] == 0.0 and res.fixed == {"phi": 0.0}
    assert "phi" not in res.stderr and "profile_ci" not in res.extras
    assert "(fixed)" in res.summary()


def test_same_result_interface(noisy_lsq, tmp_path):
    path = tmp_path / "lsq.json"
    data = json.loads(noisy_lsq.to_json(path))
    assert data["method"] == "lsq" and data["stderr"]["phi"] > 0
    again = FitResult.from_json(path)
    assert again.params == noisy_lsq.params
    assert again.extras["profile_ci"] == noisy_lsq.extras["profile_ci"]
    assert "stderr" in noisy_lsq.summary()


def test_cli_prints_profile_and_correlations(tmp_path, capsys):
    from phifit.cli import main

    runs, out = tmp_path / "runs.csv", tmp_path / "lsq.json"
    main(["simulate", "--noise", "0.005", "--seed", "2", "--out", str(runs)])
    assert main(["fit", str(runs), "--method", "lsq", "--starts", "100", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "profile-likelihood 95% interval for phi" in text and "(assumes independent runs)" in text
    assert "[[Correlations]]" in text and "C(log A, alpha)" in text
    data = json.loads(out.read_text())
    assert data["method"] == "lsq" and len(data["extras"]["profile_ci"]["phi"]) == 2


def test_non_looped_table_reports_no_phi(paper_clean):
    frame = paper_clean.frame[paper_clean.frame.r == 1]
    res = fit_lsq(table_from_frame(frame), n_starts=100)
    assert res.params["phi"] is None and "phi" not in (res.stderr or {})
    assert any("not identifiable" in w.message for w in res.warnings)


def test_bad_options(paper_clean):
    with pytest.raises(ValueError, match="n_starts must be >= 1"):
        fit_lsq(paper_clean, n_starts=0)
    with pytest.raises(ValueError, match="level must be in"):
        fit_lsq(paper_clean, level=2)


def test_unknown_option_lists_the_valid_ones(paper_clean):
    valid = "valid: level, n_refine, n_starts, profile, seed$"
    with pytest.raises(ValueError, match=r"^unknown option 'n_start' for method 'lsq'; " + valid):
        fit(paper_clean, method="lsq", n_start=5)
    with pytest.raises(ValueError, match=r"^unknown option 'delta' for method 'lsq'; " + valid):
        fit_lsq(paper_clean, delta=1e-3)
