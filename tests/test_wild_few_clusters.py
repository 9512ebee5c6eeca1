"""The wild test on few clusters: residuals rescaled for what the null fit absorbed, Webb
weights below 12 cells, its smallest attainable p stated, and no verdict read where the test
cannot resolve one (the free fit's phi on its bound, too few cells for the free law)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from phifit.bootstrap.wild import (
    Refit,
    WildTest,
    adjusted_residuals,
    choose_weights,
    draw_weights,
    min_attainable_p,
    n_patterns,
    too_few_clusters,
    wild_cluster_test,
)
from phifit.compare import compare_fits
from phifit.fitters.huber import fit_huber
from phifit.fitters.objective import law_model
from phifit.law import LawSpec
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"


def test_webb_weights_have_mean_0_variance_1_and_six_values():
    v = draw_weights(np.random.default_rng(0), 20_000, 7, "webb")
    assert set(np.round(np.unique(v) ** 2, 12)) == {0.5, 1.0, 1.5}
    assert abs(v.mean()) < 0.01 and v.var() == pytest.approx(1.0, abs=0.02)
    assert choose_weights(7) == "webb" and choose_weights(12) == "rademacher"
    assert n_patterns(7, "webb") == 6.0**7 and n_patterns(7, "rademacher") == 128.0
    # with 5 cells of Rademacher signs the test cannot go below 1/32, whatever B is
    assert min_attainable_p(999, 5, "rademacher") == pytest.approx(1 / 32)
    assert min_attainable_p(99, 12, "rademacher") == pytest.approx(1 / 100)
    assert too_few_clusters(7, 6) and not too_few_clusters(12, 6)


def _cpu_like_table(seed: int) -> tuple:
    """The 12-cell CPU design with cell-shared noise and phi = 0 true."""
    from phifit.recipes.pairing import select_recipe
    from phifit.runs.table import load_runs

    runs = select_recipe(load_runs(DATA / "cpu_small_runs.csv")).runs
    design = runs.frame[["run_id", "budget", "r", "n_once", "n_rec", "tokens"]].copy()
    params = dict(fit_huber(runs, n_starts=50, seed=0).params)
    frame = simulate(design, params={**params, "phi": 0.0}, noise=0.013, cell_noise=0.010, seed=seed)
    table = table_from_frame(frame, source="cpu-like")
    free = fit_huber(table, n_starts=50, seed=0)
    null = fit_huber(table, n_starts=50, seed=0, spec=LawSpec(fixed={"phi": 0.0}))
    return table, free, null


def test_rescaled_residuals_carry_the_factor_sqrt_g_over_g_minus_k0():
    table, _, null = _cpu_like_table(11)
    spec = null.spec
    model = law_model(spec, table.design)
    refit = Refit(model, spec.lower, spec.upper, (null.theta[spec.free_mask],))
    codes, _ = table.cells(None)
    resid = table.log_loss - model(null.theta[spec.free_mask][None, :])[0][0]
    k0 = int(spec.free_mask.sum())
    assert k0 == 5 and codes.max() + 1 == 12
    scaled = adjusted_residuals(resid, codes, refit, 1e-3, "rescale")
    np.testing.assert_allclose(scaled, resid * math.sqrt(12 / 7), rtol=1e-12)
    # only the cell means: their means scale by the factor, deviations within a cell stay
    means = adjusted_residuals(resid, codes, refit, 1e-3, "rescale-means")
    cell_mean = lambda e: np.bincount(codes, weights=e) / np.bincount(codes)  # noqa: E731
    np.testing.assert_allclose(cell_mean(means), cell_mean(resid) * math.sqrt(12 / 7), rtol=1e-10)
    np.testing.assert_allclose(
        means - cell_mean(means)[codes], resid - cell_mean(resid)[codes], rtol=1e-10, atol=1e-15
    )
    assert adjusted_residuals(resid, codes, refit, 1e-3, "none") is resid
    # cell leverage: h_c = 1_c' H 1_c / n_c in [0, 1], summing to at most k0; means scale by 1/sqrt(1 - h_c)
    lev = adjusted_residuals(resid, codes, refit, 1e-3, "cell-leverage")
    _, jac_t = model(null.theta[spec.free_mask][None, :])
    jac = jac_t[0].T
    hat = jac @ np.linalg.pinv(jac.T @ jac) @ jac.T
    h = np.array([hat[np.ix_(codes == g, codes == g)].mean() * (codes == g).sum() for g in range(12)])
    assert np.all((h > 0) & (h < 1)) and h.sum() < k0
    np.testing.assert_allclose(cell_mean(lev), cell_mean(resid) / np.sqrt(1 - h), rtol=1e-9)
    np.testing.assert_allclose(lev - cell_mean(lev)[codes], resid - cell_mean(resid)[codes], atol=1e-15)
    # CR2: each cell's residuals change, their leverage-adjusted scale is at least the raw one
    cr2 = adjusted_residuals(resid, codes, refit, 1e-3, "cr2")
    assert np.linalg.norm(cr2) >= np.linalg.norm(resid) * (1 - 1e-9)


def test_the_rescaled_test_spreads_its_null_wider_and_says_how_it_was_built():
    table, free, null = _cpu_like_table(12)
    raw = wild_cluster_test(table, free, null, n_boot=99, seed=3, n_jobs=1, adjust="none")
    scaled = wild_cluster_test(table, free, null, n_boot=99, seed=3, n_jobs=1)
    assert scaled.adjust == "cell-leverage" and scaled.weights == "rademacher" and raw.adjust == "none"
    # same signs, cell means scaled up by 1 / sqrt(1 - h_c): the null distribution of T* moves up
    assert scaled.null_quantiles["90%"] > raw.null_quantiles["90%"]
    assert scaled.p_value >= raw.p_value
    assert scaled.min_p == pytest.approx(1 / 100) and scaled.resolves()
    assert "smallest attainable p" in scaled.summary() and "sqrt(1 - h_c)" in scaled.summary()
    back = WildTest.from_dict(scaled.to_dict())
    assert back.to_dict() == scaled.to_dict()
    # a result saved before these fields existed reloads as the raw Rademacher test
    old = {k: v for k, v in scaled.to_dict().items() if k not in ("weights", "adjust", "min_p")}
    assert WildTest.from_dict(old).adjust == "none" and WildTest.from_dict(old).resolves()


def test_few_cells_use_webb_weights_and_state_the_floor():
    frame = simulate("paper", params={"phi": 0.0}, noise=0.004, seed=5)
    frame = frame[frame["budget"] <= 1.0e18].reset_index(drop=True)  # 8 cells
    runs = table_from_frame(frame)
    free = fit_huber(runs, n_starts=60)
    null = fit_huber(runs, n_starts=60, spec=LawSpec(fixed={"phi": 0.0}))
    test = wild_cluster_test(runs, free, null, n_boot=49, seed=0, n_jobs=1)
    assert test.weights == "webb" and test.n_blocks == 8
    assert test.min_p == pytest.approx(1 / 50)
    few = [w for w in test.warnings if w.kind == "few_clusters"]
    assert few and "6^8 webb weight patterns" in few[0].message and "smallest attainable p" in few[0].message


def _one_token_count_table() -> pd.DataFrame:
    """10 runs (r = 1, 2) at one token count, from the study: phi runs to its bound."""
    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    return frame[frame["budget"] == 1e18].iloc[:10].drop(columns=["flops", "budget"]).assign(tokens=1e9)


def test_a_free_fit_with_phi_on_its_bound_leaves_both_restrictions_undecided():
    runs = table_from_frame(_one_token_count_table(), source="one token count")
    fit = fit_huber(runs, n_starts=40, seed=0)
    assert "phi" in fit.at_bounds
    comp = compare_fits(runs, fit, n_wild=99, n_starts=20, n_jobs=1)
    for label in ("phi=0", "phi=1"):
        st = comp.stats[label]
        assert st.undecided and "bound of its search box" in st.undecided
        assert st.wild is None and not st.rejected  # no test run, nothing rejected
    assert "are undecided" in comp.verdict and "is rejected" not in comp.verdict
    back = type(comp).from_dict(comp.to_dict())
    assert back.stats["phi=1"].undecided == comp.stats["phi=1"].undecided


def test_too_few_cells_for_the_free_law_leave_the_test_undecided():
    frame = simulate("paper", params={"phi": 0.459}, noise=0.004, seed=8)
    # 7 (budget, r) cells for the free law's 6 parameters
    frame = frame[frame["budget"] <= 1.0e18]  # 2 budgets x 4 r = 8 cells, less one
    frame = frame[~((frame["budget"] == 1.0e18) & (frame["r"] == 8))].reset_index(drop=True)
    runs = table_from_frame(frame)
    codes, _ = runs.cells(None)
    assert codes.max() + 1 == 7
    fit = fit_huber(runs, n_starts=60, seed=0)
    comp = compare_fits(runs, fit, n_wild=49, n_starts=20, n_jobs=1, cv=False)
    for label in ("phi=0", "phi=1"):
        st = comp.stats[label]
        if "phi" not in fit.at_bounds:
            assert st.undecided and "blocks for the free law's 6 parameters" in st.undecided
        assert not st.rejected


def test_report_on_a_table_whose_phi_sits_on_its_bound_says_so_and_skips_the_bootstrap():
    from phifit.report.analysis import AnalysisOptions, analyse
    from phifit.report.sections_fit import section_headline
    from phifit.report.write import headline

    a = analyse(_one_token_count_table(), AnalysisOptions(n_boot=200, n_starts=40, n_wild=49, n_jobs=1))
    assert a.bootstrap is None and "phi_on_bound" in [c.kind for c in a.cautions]
    text = headline(a)
    assert "on the bound of its search box" in text.splitlines()[1]
    assert "phi = 0: undecided" in text and "phi = 1: undecided" in text and "rejected" not in text
    html = section_headline(a)
    assert "<b>undecided</b>" in html and "not rejected" not in html


def test_a_seven_run_table_gets_undecided_verdicts_and_an_untestable_lack_of_fit(tmp_path):
    """7 runs in 6 (budget, r) cells (the size of the smallest real tables met): the tests of
    phi = 0 / 1 cannot be read, and the free-multiplier law does not fit at all."""
    from phifit.cli.main import main

    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    budgets = sorted(frame["budget"].unique())
    picks = [(budgets[0], 1, 0), (budgets[0], 2, 0), (budgets[0], 4, 0)]
    picks += [(budgets[1], 1, 0), (budgets[1], 1, 2), (budgets[1], 2, 0), (budgets[1], 4, 0)]
    rows = pd.concat([frame[(frame["budget"] == b) & (frame["r"] == r)].iloc[i : i + 1] for b, r, i in picks])
    path = tmp_path / "seven.csv"
    rows.to_csv(path, index=False)
    out = tmp_path / "compare.json"
    assert (
        main(["compare", str(path), "--wild", "49", "--starts", "40", "--parts", "0", "--json", str(out)])
        == 0
    )
    data = json.loads(out.read_text())
    for label in ("phi=0", "phi=1"):
        assert data["fits"][label]["undecided"] and not data["fits"][label]["rejected"]
    assert "(budget, r) blocks for the free law's 6 parameters" in data["fits"]["phi=0"]["undecided"]
    assert data["multipliers"]["testable"] is False and "7 runs" in data["multipliers"]["reason"]
