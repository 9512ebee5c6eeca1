"""The test-inverted confidence set of phi (phifit.bootstrap.inverted) on a law-true table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from phifit.bootstrap.block import block_bootstrap
from phifit.bootstrap.inverted import InvertedSet, outside_share, phi_confidence_set
from phifit.bootstrap.wild import wild_cluster_test
from phifit.cli import main
from phifit.fitters.huber import fit_huber
from phifit.law import LawSpec
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

TRUE_PHI = 0.459
N_WILD = 99


@pytest.fixture(scope="module")
def law_true():
    runs = table_from_frame(simulate("paper", params={"phi": TRUE_PHI}, noise=0.004, seed=3), source="sim")
    free = fit_huber(runs, n_starts=100)
    inverted = phi_confidence_set(runs, free, n_boot=N_WILD, seed=5, n_jobs=1)
    return runs, free, inverted


def test_one_piece_containing_the_truth_close_to_the_percentile_interval(law_true):
    runs, free, inverted = law_true
    assert len(inverted.pieces) == 1 and inverted.is_interval
    lo, hi = inverted.pieces[0]
    assert lo < TRUE_PHI < hi
    assert inverted.contains(free.phi)
    boot = block_bootstrap(runs, free, n_boot=200, seed=5, n_jobs=1, progress=False, jackknife=False)
    plo, phi_ = boot.ci["phi"]
    # measured on this table: set [0.382, 0.511] beside the percentile interval [0.417, 0.505]
    assert abs(lo - plo) < 0.05 and abs(hi - phi_) < 0.05
    share = outside_share(boot.params["phi"][~boot.failed], inverted)
    assert 0.0 <= share <= 0.1


def test_membership_agrees_with_each_tested_p_value(law_true):
    _, _, inverted = law_true
    assert len(inverted.grid) == len(inverted.p_values) >= 5
    for phi0, p in zip(inverted.grid, inverted.p_values, strict=True):
        assert inverted.contains(phi0) == (p >= 0.05), (phi0, p)
    assert inverted.p_value(inverted.estimate) == 1.0
    assert inverted.min_p == pytest.approx(1 / (1 + N_WILD))


def test_p_at_zero_is_the_wild_test_of_phi_zero_with_the_same_draws(law_true):
    runs, free, inverted = law_true
    assert 0.0 in inverted.grid
    null = fit_huber(runs, n_starts=100, spec=LawSpec(fixed={"phi": 0.0}))
    test = wild_cluster_test(runs, free, null, n_boot=N_WILD, seed=5, n_jobs=1)
    assert inverted.p_value(0.0) == pytest.approx(test.p_value, abs=1.5 / (1 + N_WILD))
    i = inverted.grid.index(0.0)
    assert inverted.statistics[i] == pytest.approx(test.statistic, rel=1e-4)


def test_json_round_trip(law_true):
    _, _, inverted = law_true
    back = InvertedSet.from_json(inverted.to_json())
    assert back == inverted
    assert back.summary() == inverted.summary()
    assert "test-inverted set" in inverted.summary()


def test_union_and_censored_ends_are_said():
    base = dict(estimate=0.4, level=0.95, n_boot=199, seed=0, box=(-3.0, 3.0), grid=[-3.0, -2.0, 0.4, 1.0])
    kw = dict(p_values=[0.1, 0.01, 1.0, 0.01], statistics=[1.0, 2.0, 0.0, 2.0], critical=[1.5, 1.0, 1.0, 1.0])
    s = InvertedSet(
        **base,
        **kw,
        n_failed=[0] * 4,
        pieces=[(-3.0, -2.5), (0.2, 0.6)],
        censored=[(True, False), (False, False)],
    )
    assert not s.is_interval
    assert s.interval_text() == "(-3.000, -2.500] ∪ [0.200, 0.600]"
    assert "union of 2 pieces" in s.summary() and "unbounded within the box" in s.summary()
    assert InvertedSet.from_dict(json.loads(s.to_json())) == s


def test_cli_prints_the_set_beside_the_percentile_interval(tmp_path, capsys):
    runs = tmp_path / "runs.csv"
    out = tmp_path / "fit.json"
    simulate("paper", params={"phi": TRUE_PHI}, noise=0.004, seed=3).to_csv(runs, index=False)
    args = [
        "fit",
        str(runs),
        "--starts",
        "50",
        "--bootstrap",
        "20",
        "--quiet",
        "--wild-ci",
        "--wild-ci-boot",
        "39",
    ]
    assert main([*args, "--n-jobs", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "percentile interval [" in text and "test-inverted set [" in text
    data = json.loads(out.read_text())
    assert data["phi_inverted"]["pieces"] and data["phi_inverted"]["n_boot"] == 39
    assert main(["fit", str(runs), "--wild-ci"]) != 0
    assert "--wild-ci needs --bootstrap" in capsys.readouterr().err


def test_outside_share_counts_draws_outside_every_piece():
    s = InvertedSet(
        estimate=0.4,
        level=0.95,
        n_boot=199,
        seed=0,
        box=(-3.0, 3.0),
        grid=[0.4],
        p_values=[1.0],
        statistics=[0.0],
        critical=[1.0],
        n_failed=[0],
        pieces=[(0.2, 0.6)],
        censored=[(False, False)],
    )
    assert outside_share([0.3, 0.5, -2.0, 1.0, np.nan], s) == pytest.approx(0.5)
