"""Does phi drift with scale?  phi(C) = phi_0 + phi_1 log(C / C_ref): estimates, intervals, the test."""

from __future__ import annotations

import json

import numpy as np
import pytest

from phifit import fit
from phifit.diagnostics.drift import fit_drift
from phifit.diagnostics.drift_law import DriftModel, budget_offsets, budget_values
from phifit.diagnostics.drift_result import DriftFit
from phifit.law import REFERENCE_PARAMS, log_loss, params_to_theta
from phifit.runs.table import as_runs
from phifit.simulation import simulate

PHI = 0.5
DRIFT = 0.1  # per e-fold of compute
SMALL = {"n_boot": 60, "n_wild": 59, "n_jobs": 1, "n_starts": 100, "seed": 0}
NOISE = {"noise": 0.002, "cell_noise": 0.001, "seed": 3}


def _law_true():
    return simulate("paper", params={"phi": PHI}, **NOISE)


def _drifting(phi_1: float = DRIFT):
    """The law-true table's noise on losses whose phi moves with the budget:
    phi_i = PHI + phi_1 log(C_i / C_ref)."""
    frame = _law_true()
    runs = as_runs(frame)
    theta = params_to_theta({**REFERENCE_PARAMS, "phi": PHI})
    offset, _ = budget_offsets(budget_values(runs.frame))
    noise = runs.log_loss - log_loss(theta, runs.design)
    drift = DriftModel(runs.design, offset)(np.append(theta, phi_1)[None, :])[0][0]
    frame = frame.copy()
    frame["loss"] = np.exp(drift + noise)
    return frame


@pytest.fixture(scope="module")
def law_true():
    frame = _law_true()
    return frame, fit_drift(as_runs(frame), **SMALL)


@pytest.fixture(scope="module")
def drifting():
    return fit_drift(as_runs(_drifting()), **SMALL)


def test_model_is_the_law_at_no_drift_and_its_jacobian_is_exact():
    runs = as_runs(_law_true())
    offset, c_ref = budget_offsets(budget_values(runs.frame))
    # C_ref is the geometric mean of the distinct budgets: the offsets of the levels sum to 0
    assert abs(np.sum(np.unique(offset))) < 1e-9
    assert np.isclose(np.log(c_ref), np.mean(np.log(np.unique(runs.frame["budget"]))))
    model = DriftModel(runs.design, offset)
    theta = params_to_theta({**REFERENCE_PARAMS, "phi": PHI})
    pred, _ = model(np.append(theta, 0.0)[None, :])
    np.testing.assert_allclose(pred[0], log_loss(theta, runs.design), atol=1e-14)
    x = np.append(theta, 0.07)
    pred, jac = model(x[None, :])
    # phi_1 moves each run as phi does, times its offset
    np.testing.assert_allclose(jac[0, 6], jac[0, 5] * offset, atol=1e-15)
    for k in (5, 6):
        step = np.zeros(7)
        step[k] = 1e-6
        numeric = (model((x + step)[None, :])[0][0] - model((x - step)[None, :])[0][0]) / 2e-6
        np.testing.assert_allclose(jac[0, k], numeric, atol=1e-8)
    # and it is phi_i = phi_0 + phi_1 c_i run by run
    for i in (0, len(runs) // 2, len(runs) - 1):
        theta_i = theta.copy()
        theta_i[5] = theta[5] + 0.07 * offset[i]
        assert np.isclose(pred[0, i], log_loss(theta_i, runs.design.subset([i]))[0], atol=1e-14)


def test_null_reproduces_the_huber_fit(law_true):
    frame, res = law_true
    huber = fit(frame, n_starts=100, seed=0)
    assert abs(res.phi - huber.phi) < 1e-4


def test_law_true_table_shows_no_drift(law_true):
    _, res = law_true
    assert res.testable and len(res.budgets) >= 3
    lo, hi = res.phi_1_ci
    assert abs(res.phi_1) < 0.03
    assert lo < 0 < hi and hi - lo < 0.2
    lo0, hi0 = res.phi_0_ci
    assert lo0 < PHI < hi0 and abs(res.phi_0 - PHI) < 0.03
    assert res.p_value > 0.05 and res.rejected is False and not res.on_bound
    assert res.n_failed <= 0.1 * res.n_boot and res.statistic >= 0
    assert res.verdict.startswith("no evidence that phi changes with compute")


def test_true_drift_is_found(drifting):
    res = drifting
    assert abs(res.phi_1 - DRIFT) < 0.03
    lo, hi = res.phi_1_ci
    assert lo < DRIFT < hi and lo > 0
    assert abs(res.phi_0 - PHI) < 0.03
    assert res.p_value < 0.05 and res.rejected
    assert "phi grows with compute" in res.verdict
    assert res.n_wild == 59 and res.wild.n_failed == 0
    # phi at the lowest and highest budget follow the line
    first, last = res.phi_by_budget[0], res.phi_by_budget[-1]
    assert last["phi"] - first["phi"] == pytest.approx(
        DRIFT * np.log(last["budget"] / first["budget"]), rel=0.2
    )
    # each budget's interval of phi(C) holds the true phi(C), and the intervals rise with C
    truth = [PHI + DRIFT * np.log(row["budget"] / res.c_ref) for row in res.phi_by_budget]
    assert len(res.phi_budget_ci) == len(res.budgets)
    for row, true in zip(res.phi_by_budget, truth, strict=True):
        assert row["ci"][0] < row["phi"] < row["ci"][1] and row["ci"][0] < true < row["ci"][1]
    assert res.phi_by_budget[-1]["ci"][0] > res.phi_by_budget[0]["ci"][1]
    assert "phi(C) by budget, 95% intervals:" in res.summary()


def test_json_round_trip(drifting):
    text = drifting.to_json()
    back = DriftFit.from_json(text)
    assert back.to_dict() == drifting.to_dict() and back.phi_budget_ci == drifting.phi_budget_ci
    data = json.loads(text)
    assert data["kind"] == "drift" and data["p_value"] == drifting.p_value
    assert data["phi_1_ci"] == drifting.phi_1_ci and data["c_ref"] == drifting.c_ref
    assert "phi_1 =" in back.summary() and "test of phi_1 = 0" in back.summary()


def test_not_testable_with_two_budgets_or_no_looped_runs():
    frame = _law_true()
    two = frame[frame["budget"].isin(sorted(frame["budget"].unique())[:2])]
    res = fit_drift(as_runs(two), **SMALL)
    assert not res.testable and "2 budget(s)" in res.reason and res.phi_1 is None
    assert res.warnings[0].kind == "untestable"
    back = DriftFit.from_json(res.to_json())
    assert back.to_dict() == res.to_dict() and "not testable" in back.summary()
    flat = frame[frame["r"] == 1]
    res = fit_drift(as_runs(flat), **SMALL)
    assert not res.testable and "no looped runs" in res.reason


def test_drift_on_the_bound_is_undecided():
    # a drift of 2 per e-fold pushes phi far outside anything the table can locate
    res = fit_drift(as_runs(_drifting(5.0)), n_boot=0, n_wild=0, n_starts=50, seed=0)
    assert res.on_bound and res.rejected is None
    assert res.verdict.startswith("undecided")
    assert any(w.kind == "at_bound" for w in res.warnings)


# -- phifit diagnose ----------------------------------------------------------------------------
def test_cli_diagnose_prints_the_drift_and_writes_it_to_json(tmp_path, capsys):
    from phifit.cli.diagnose import SKIPPABLE
    from phifit.cli.main import main

    runs, out = tmp_path / "runs.csv", tmp_path / "diag.json"
    _drifting().to_csv(runs, index=False)
    argv = [
        "diagnose",
        str(runs),
        "--starts",
        "50",
        "--parts",
        "0",
        "--skip",
        "influence,consistency,multipliers",
    ]
    assert main([*argv, "--bootstrap", "30", "--wild", "19", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Drift of phi with compute" in text and "test of phi_1 = 0" in text
    assert "Free multipliers" not in text
    drift = json.loads(out.read_text())["drift"]
    assert drift["n_boot"] == 30 and drift["n_wild"] == 19 and drift["phi_1"] > 0.05
    assert DriftFit.from_dict(drift).to_dict() == drift
    assert "drift" in SKIPPABLE
    assert (
        main(["diagnose", str(runs), "--starts", "50", "--skip", "influence,consistency,multipliers,drift"])
        == 0
    )
    assert "Drift of phi" not in capsys.readouterr().out


# -- the report ---------------------------------------------------------------------------------
def test_report_section_reads_the_drift(tmp_path):
    from phifit.report.analysis import Analysis, AnalysisOptions
    from phifit.report.sections_diagnostics import drift_reading
    from phifit.report.write import build_report

    options = AnalysisOptions(n_boot=40, n_starts=50, n_wild=39, n_jobs=1)
    build_report(as_runs(_drifting()), tmp_path / "rep", options=options)
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert 'id="drift"' in page and "Does φ drift with scale?" in page
    assert "φ grows with compute (p = 0.025)" in page and "φ_1 (per e-fold of C)" in page
    assert "Separate refits of the budget halves" in page
    results = json.loads((tmp_path / "rep" / "results.json").read_text(encoding="utf-8"))
    drift = results["drift"]
    assert drift["rejected"] is True and drift["n_boot"] == 40 and drift["n_wild"] == 39
    assert Analysis.from_dict(results).drift.to_dict() == DriftFit.from_dict(drift).to_dict()
    # the sentence of a table without a drift
    calm = DriftFit.from_dict({**drift, "phi_1": 0.01, "wild": {**drift["wild"], "p_value": 0.4}})
    assert drift_reading(calm) == "No evidence that φ changes with compute (p = 0.4)."


def test_interval_on_the_box_and_a_borderline_rejection_are_said(drifting):
    data = drifting.to_dict()
    boxed = DriftFit.from_dict({**data, "phi_1": 0.3, "phi_1_ci": [-1.0, 2.0]})
    assert "not determined" in boxed.summary() and boxed.interval_holds_zero
    from phifit.report.sections_diagnostics import drift_reading

    assert "Borderline" in drift_reading(boxed) and "φ grows with compute" in drift_reading(boxed)
    assert "Borderline" not in drift_reading(drifting) and drifting.interval_holds_zero is False


def test_the_reports_split_drift_is_the_one_piece_check():
    """The report runs the drift's bootstrap chunks and its test as tasks of their own
    (:func:`phifit.report.stages.start_phi_checks`): the same DriftFit as ``fit_drift`` in one
    piece, to the last bit, with any chunk size."""
    from phifit.diagnostics.drift import drift_wild_test, setup_drift
    from phifit.diagnostics.multipliers import refit_weighted_rows

    runs = as_runs(_drifting())
    law = fit(runs, n_starts=100)
    whole = fit_drift(runs, law, **SMALL).to_dict()
    kw = {k: v for k, v in SMALL.items() if k != "n_jobs"}
    setup = setup_drift(runs, law, **kw)
    for size in (7, 250):
        chunks = [refit_weighted_rows(*args) for args in setup.boot_tasks(size)]
        assert len(chunks) == -(-int(setup.ident.sum()) // size)
        assert setup.finish(chunks, drift_wild_test(setup), size).to_dict() == whole
