"""Free multipliers m_r against r^phi: estimates, cell-bootstrap intervals, the lack-of-fit test."""

from __future__ import annotations

import json

import numpy as np
import pytest

from phifit.diagnostics.multiplier_result import MultiplierFit
from phifit.diagnostics.multipliers import fit_multipliers, r_groups
from phifit.runs.table import as_runs
from phifit.simulation import simulate

PHI = 0.5
SMALL = {"n_boot": 60, "n_wild": 59, "n_jobs": 1, "n_starts": 100, "seed": 0}


@pytest.fixture(scope="module")
def law_true():
    frame = simulate("paper", params={"phi": PHI}, noise=0.002, cell_noise=0.001, seed=3)
    return frame, fit_multipliers(as_runs(frame), **SMALL)


@pytest.fixture(scope="module")
def r8_worse():
    """The r = 8 runs' loss multiplied up by 2%: r = 8 is worth less than r^phi says."""
    frame = simulate("paper", params={"phi": PHI}, noise=0.002, cell_noise=0.001, seed=3)
    frame.loc[frame["r"] == 8, "loss"] *= 1.02
    return fit_multipliers(as_runs(frame), **SMALL)


def test_law_true_multipliers_match_r_phi(law_true):
    _, res = law_true
    assert res.testable and res.r == [2.0, 4.0, 8.0]
    truth = np.array(res.r) ** PHI
    # each m_r within 5% of r^phi, and its 95% interval holds r^phi
    np.testing.assert_allclose(res.multiplier, truth, rtol=0.05)
    for (lo, hi), t in zip(res.multiplier_ci, truth):
        assert lo < t < hi
        assert hi / lo < 1.25  # informative, not the whole box
    assert abs(res.phi - PHI) < 0.03
    # m_r = r^phi_r, and the intervals are the same replicates mapped
    np.testing.assert_allclose(res.multiplier, np.array(res.r) ** np.array(res.phi_r))
    for r, m_ci, p_ci in zip(res.r, res.multiplier_ci, res.phi_r_ci):
        np.testing.assert_allclose(m_ci, [r ** p_ci[0], r ** p_ci[1]])
    assert res.n_failed <= 0.1 * res.n_boot
    assert res.p_value > 0.05 and not res.rejected
    assert res.statistic >= 0


def test_offset_at_r8_rejects_r_phi(r8_worse):
    res = r8_worse
    assert res.p_value < 0.05 and res.rejected
    m = dict(zip(res.r, res.multiplier))
    assert m[8.0] < m[4.0]
    assert "does not describe" in res.verdict
    assert res.n_wild == 59 and res.n_wild_failed == 0


def test_json_round_trip(law_true):
    _, res = law_true
    again = MultiplierFit.from_json(res.to_json())
    assert again.to_dict() == res.to_dict()
    assert again.p_value == res.p_value and again.multiplier_ci == res.multiplier_ci
    assert "m_r" in again.summary() and "lack of fit" in again.summary()


def test_two_r_values_cannot_be_tested():
    frame = simulate("paper", params={"phi": PHI}, noise=0.002, seed=1)
    frame = frame[frame["r"].isin([1, 2])]
    res = fit_multipliers(as_runs(frame), **SMALL)
    assert not res.testable and res.p_value is None and res.multiplier == []
    assert "cannot be tested" in res.summary()
    assert MultiplierFit.from_json(res.to_json()).to_dict() == res.to_dict()


def test_groups_put_r1_with_the_first_looped_r():
    frame = simulate("paper", params={"phi": PHI}, seed=1)
    runs = as_runs(frame)
    values, codes, reason = r_groups(runs)
    assert reason == "" and values == [2.0, 4.0, 8.0]
    assert set(codes[runs.r == 1]) == {0} and set(codes[runs.r == 8]) == {2}
    no_base = as_runs(frame[frame["r"] > 1])
    assert "r = 1" in r_groups(no_base)[2]


# -- the command line ---------------------------------------------------------------------------
def test_cli_compare_json_has_the_lack_of_fit_test(tmp_path, capsys):
    from phifit.cli.main import main

    runs, out = tmp_path / "runs.csv", tmp_path / "cmp.json"
    simulate("paper", params={"phi": PHI}, noise=0.002, cell_noise=0.001, seed=3).to_csv(runs, index=False)
    argv = [
        "compare",
        str(runs),
        "--starts",
        "50",
        "--no-cv",
        "--wild",
        "39",
        "--bootstrap",
        "40",
        "--parts",
        "0",
    ]
    assert main([*argv, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Free multipliers" in text and "lack of fit of r^phi" in text and "m_r" in text
    data = json.loads(out.read_text())
    mult = data["multipliers"]
    assert mult["r"] == [2.0, 4.0, 8.0] and len(mult["multiplier"]) == 3 and len(mult["multiplier_ci"]) == 3
    assert 0 < mult["p_value"] <= 1 and mult["n_wild"] == 39 and mult["n_boot"] == 40
    assert MultiplierFit.from_dict(mult).to_dict() == mult


def test_cli_diagnose_prints_the_multiplier_table(tmp_path, capsys):
    from phifit.cli.main import main

    runs, out = tmp_path / "runs.csv", tmp_path / "diag.json"
    simulate("paper", params={"phi": PHI}, noise=0.002, seed=3).to_csv(runs, index=False)
    argv = ["diagnose", str(runs), "--starts", "50", "--parts", "0"]
    assert (
        main(
            [
                *argv,
                "--skip",
                "influence,consistency",
                "--bootstrap",
                "30",
                "--wild",
                "19",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "Free multipliers" in text and "r^phi" in text
    assert json.loads(out.read_text())["multipliers"]["n_boot"] == 30
    from phifit.cli.diagnose import SKIPPABLE

    assert "multipliers" in SKIPPABLE


# -- the report ---------------------------------------------------------------------------------
def test_report_shows_the_multipliers_and_leads_with_the_misfit(tmp_path):
    from phifit.report.analysis import Analysis, AnalysisOptions
    from phifit.report.write import build_report

    frame = simulate("paper", params={"phi": PHI}, noise=0.002, cell_noise=0.001, seed=3)
    frame.loc[frame["r"] == 8, "loss"] *= 1.02
    options = AnalysisOptions(n_boot=40, n_starts=50, n_wild=59, n_jobs=1)
    files = build_report(as_runs(frame), tmp_path / "rep", options=options)
    page = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert 'id="multipliers"' in page and "multipliers" in files.figures
    assert (tmp_path / "rep" / "figures" / "multipliers.png").stat().st_size > 5_000
    assert "r^φ does not hold" in page
    # the headline says first that r^phi does not describe the recurrences, with the m_r
    first = files.headline.splitlines()[0]
    assert first.startswith("r^phi does not describe this table's recurrences") and "m_8 = " in first
    results = json.loads((tmp_path / "rep" / "results.json").read_text(encoding="utf-8"))
    mult = results["multipliers"]
    assert mult["rejected"] is True and mult["n_boot"] == 40 and mult["n_wild"] == 59
    again = Analysis.from_dict(results)
    assert again.multipliers.to_dict() == MultiplierFit.from_dict(mult).to_dict()


def test_held_coordinates_are_the_laws_held_parameters():
    """B and beta held at one token count become coordinates b = log B and beta of both laws;
    a held phi is refused (the test is of r^phi)."""
    from types import SimpleNamespace

    from phifit.diagnostics.multipliers import held_coordinates

    held = held_coordinates(SimpleNamespace(fixed={"B": 1e-12, "beta": 0.0}))
    assert held == {2: pytest.approx(np.log(1e-12)), 3: 0.0}
    assert held_coordinates(None) == {}
    with pytest.raises(ValueError, match="phi is held fixed"):
        held_coordinates(SimpleNamespace(fixed={"phi": 0.5}))


def test_the_phi_checks_guard_on_phi_identifiable_and_free():
    """The report, phifit compare and phifit diagnose share the guards: no check where phi is not
    identifiable (a single r), no check of r^phi with phi held, no drift with anything held."""
    from types import SimpleNamespace

    from phifit.diagnostics.phi_checks import drift_check, multiplier_check

    frame = simulate("paper", params={"phi": PHI}, noise=0.002, seed=3)
    single_r = as_runs(frame[frame["r"] == 4])
    free = SimpleNamespace(fixed={})
    assert multiplier_check(single_r, free) is None and drift_check(single_r, free) is None
    runs = as_runs(frame)
    assert multiplier_check(runs, SimpleNamespace(fixed={"phi": 0.5})) is None
    assert drift_check(runs, SimpleNamespace(fixed={"B": 1e-12, "beta": 0.0})) is None


def test_the_reports_split_multipliers_are_the_one_piece_check():
    """The report runs the multipliers' bootstrap chunks and their test as tasks of their own
    (:func:`phifit.report.stages.continue_phi_checks`): the same MultiplierFit as
    ``fit_multipliers`` in one piece, to the last bit, with any chunk size; with a held
    parameter too (a law at one token count holds B and beta)."""
    from phifit import fit
    from phifit.diagnostics.multipliers import refit_weighted_rows, setup_multipliers

    frame = simulate("paper", params={"phi": PHI}, noise=0.002, cell_noise=0.001, seed=3)
    frame.loc[frame["r"] == 8, "loss"] *= 1.02
    runs = as_runs(frame)
    kw = {k: v for k, v in SMALL.items() if k != "n_jobs"}
    for law in (fit(runs, n_starts=100), fit(runs, n_starts=100, fix={"beta": 0.3})):
        whole = fit_multipliers(runs, law, **SMALL).to_dict()
        setup = setup_multipliers(runs, law, **kw)
        for size in (7, 250):
            chunks = [refit_weighted_rows(*args) for args in setup.boot_tasks(size)]
            assert len(chunks) == -(-int(setup.ident.sum()) // size)
            assert setup.finish(chunks, setup.wild_test(), size).to_dict() == whole
