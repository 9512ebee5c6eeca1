"""Residual diagnostics: the per-r flag both ways, the tests' maths, influence, identifiability."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import paper_table
from scipy import stats

from phifit.cautions import Caution
from phifit.diagnostics.suite import (
    consistency,
    data_summary,
    design_warnings,
    diagnose,
    identifiability,
    influence,
    residual_diagnostics,
    residual_tests,
)
from phifit.fitters import fit
from phifit.fitters.huber import fit_huber
from phifit.law import REFERENCE_PARAMS, LawSpec
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate


def _shifted(shift: float, r: int = 2, noise: float = 0.0, seed: int = 0):
    frame = simulate("paper", noise=noise, seed=seed)
    frame.loc[frame["r"] == r, "loss"] += shift
    return table_from_frame(frame, source=f"shift {shift:+} on r={r}")


@pytest.fixture(scope="module")
def clean_fit(paper_clean):
    return fit_huber(paper_clean)


@pytest.fixture(scope="module")
def noisy():
    runs = paper_table(noise=0.004, seed=1)
    return runs, fit_huber(runs)


# -- acceptance 1 ------------------------------------------------------------------------------
def test_noise_free_table_passes_and_raises_no_flag(paper_clean, clean_fit):
    res = residual_diagnostics(paper_clean, clean_fit)
    assert res.numerically_exact
    assert res.passed and res.flags == [] and res.flagged_r == []
    assert all(t.passed for t in res.tests) and len(res.tests) == 5
    assert res.pooled.max_abs < 1e-12


@pytest.mark.parametrize("shift", [0.03, -0.03])
def test_offset_on_r2_is_flagged_and_named(shift):
    runs = _shifted(shift)
    res = residual_diagnostics(runs, fit_huber(runs))
    assert res.flagged_r == [2]
    (flag,) = res.flags
    assert flag.kind == "systematic_r_offset" and flag.values["r"] == 2
    assert ("above" if shift > 0 else "below") in flag.message and "r = 2" in flag.message
    row = next(g for g in res.by_r if g.group == 2)
    assert row.mean == pytest.approx(shift, abs=0.003)


def test_cautions_are_the_one_caution_type():
    runs = _shifted(0.03)
    d = diagnose(runs, fit_huber(runs), skip=("influence", "consistency"))
    assert [w.kind for w in d.warnings] == ["systematic_r_offset"]
    (w,) = d.warnings
    assert isinstance(w, Caution) and w.source == "diagnostics" and w.level == "warning"
    assert d.to_dict()["warnings"] == [w.to_dict()] and w.to_dict()["values"]["r"] == 2


def test_offset_flag_survives_training_noise():
    runs = _shifted(0.03, noise=0.003, seed=3)
    assert residual_diagnostics(runs, fit_huber(runs)).flagged_r == [2]


def test_small_offset_below_floor_is_not_flagged():
    """+0.003 nats on r = 2 of a noise-free table: statistically detectable, below the floor."""
    runs = _shifted(0.003)
    res = residual_diagnostics(runs, fit_huber(runs))
    row = next(g for g in res.by_r if g.group == 2)
    assert abs(row.t) > 3 and res.flagged_r == []


# -- the tests' maths -------------------------------------------------------------------------
def test_noisy_correct_law_passes(noisy):
    runs, f = noisy
    res = residual_diagnostics(runs, f)
    assert not res.numerically_exact
    assert res.passed, res.summary()


def test_statistics_match_their_definitions(noisy):
    runs, f = noisy
    res = residual_diagnostics(runs, f)
    e = np.array(res.log_resid)
    by = {(t.name, t.against): t for t in res.tests}
    jb = stats.jarque_bera(e)
    assert by[("jarque_bera", "normal")].statistic == pytest.approx(jb.statistic, rel=1e-10)
    assert by[("jarque_bera", "normal")].pvalue == pytest.approx(jb.pvalue, rel=1e-8)
    # Koenker's Breusch-Pagan: n R^2 of e^2 regressed on (1, x), chi2 with 1 df
    x = np.array(res.log_n_eff)
    fit_sq = stats.linregress(x, e**2)
    lm = len(e) * fit_sq.rvalue**2
    bp = by[("breusch_pagan", "log_n_eff")]
    assert bp.statistic == pytest.approx(lm, rel=1e-8)
    assert bp.pvalue == pytest.approx(stats.chi2.sf(lm, 1), rel=1e-8)
    # trend: OLS slope of e on log D and its two-sided t-test
    lr = stats.linregress(np.array(res.log_tokens), e)
    tr = by[("trend", "log_tokens")]
    assert tr.estimate == pytest.approx(lr.slope, rel=1e-8)
    assert tr.pvalue == pytest.approx(lr.pvalue, rel=1e-6)


def test_tests_reject_what_they_should():
    rng = np.random.default_rng(0)
    n = 116
    x = rng.uniform(15, 22, n)
    fitted = rng.uniform(0.8, 1.1, n)
    iid = 0.01 * rng.standard_normal(n)
    assert all(t.passed for t in residual_tests(iid, fitted, x, x + 3, 0.01, False))
    hetero = 0.01 * np.exp(0.8 * (x - x.mean())) * rng.standard_normal(n)
    got = {(t.name, t.against): t.passed for t in residual_tests(hetero, fitted, x, x, 0.01, False)}
    assert not got[("breusch_pagan", "log_n_eff")]
    trend = iid + 0.01 * (x - x.mean())
    got = {(t.name, t.against): t.passed for t in residual_tests(trend, fitted, x, x, 0.01, False)}
    assert not got[("trend", "log_n_eff")] and not got[("trend", "log_tokens")]
    heavy = 0.01 * rng.standard_t(2, n)
    got = {(t.name, t.against): t.passed for t in residual_tests(heavy, fitted, x, x, 0.01, False)}
    assert not got[("jarque_bera", "normal")]


def test_heteroscedastic_table_is_detected():
    frame = simulate("paper")
    rng = np.random.default_rng(3)
    ln = np.log(frame["n_once"] + frame["r"] ** 0.459 * frame["n_rec"])
    z = (ln - ln.mean()) / ln.std()
    frame["loss"] *= np.exp(0.006 * np.exp(0.8 * z) * rng.standard_normal(len(frame)))
    runs = table_from_frame(frame)
    res = residual_diagnostics(runs, fit_huber(runs))
    bp = next(t for t in res.tests if t.name == "breusch_pagan" and t.against == "log_n_eff")
    assert not bp.passed and not res.passed


def test_group_summaries_match_table7_definitions(noisy):
    runs, f = noisy
    res = residual_diagnostics(runs, f)
    resid = runs.loss - f.law.loss(r=runs.r, n_once=runs.n_once, n_rec=runs.n_rec, tokens=runs.tokens)
    np.testing.assert_allclose(res.resid, f.residuals, atol=1e-12)
    for g in res.by_r:
        x = resid[runs.r == g.group]
        assert g.n == len(x) == 29
        assert g.mean == pytest.approx(x.mean(), abs=1e-14)
        assert g.rmse == pytest.approx(np.sqrt(np.mean(x**2)), rel=1e-12)
        assert g.max_abs == pytest.approx(np.abs(x).max(), rel=1e-12)
        assert g.t == pytest.approx(x.mean() / (x.std(ddof=1) / np.sqrt(len(x))), rel=1e-10)
    assert [g.n for g in res.by_budget] == [16, 20, 20, 24, 20, 16]
    assert res.pooled.rmse == pytest.approx(f.rmse, rel=1e-10)


# -- influence ----------------------------------------------------------------------------------
def test_leave_one_out_equals_a_fresh_fit(noisy):
    runs, f = noisy
    infl = influence(runs, f, n_top=4)
    assert len(infl.runs) == 116 and len(infl.cells) == 24
    deltas = [abs(x["delta_phi"]) for x in infl.top]
    assert deltas == sorted(deltas, reverse=True)
    assert deltas[0] == pytest.approx(infl.max_abs_delta)
    for x in (infl.top[0], infl.runs[50]):
        keep = np.array([rid != x["run_id"] for rid in runs.run_ids])
        assert fit_huber(runs.subset(keep)).phi == pytest.approx(x["phi"], abs=1e-6)
    cell = infl.cells[0]
    keep = ~((runs.frame["budget"] == cell["budget"]) & (runs.frame["r"] == cell["r"])).to_numpy()
    assert keep.sum() == 116 - cell["n"]
    assert fit_huber(runs.subset(keep)).phi == pytest.approx(cell["phi"], abs=1e-6)


def test_influence_needs_free_phi(paper_clean):
    restricted = fit(paper_clean, fix={"phi": 0.0})
    with pytest.raises(ValueError, match="phi is fixed"):
        influence(paper_clean, restricted)


# -- identifiability ------------------------------------------------------------------------------
def test_profile_passes_through_the_restricted_fits(noisy):
    runs, f = noisy
    ident = identifiability(runs, f)
    prof = ident.profile
    phi = np.array(prof["phi"])
    obj = np.array(prof["objective"])
    assert phi[np.argmin(obj)] == pytest.approx(f.phi, abs=1e-12)
    for value in (0.0, 1.0):
        i = int(np.argmin(np.abs(phi - value)))
        assert phi[i] == pytest.approx(value, abs=1e-12)
        assert obj[i] == pytest.approx(fit(runs, fix={"phi": value}).objective, rel=1e-6)
    lo, hi = ident.profile_interval
    assert lo < f.phi < hi and 0.01 < hi - lo < 0.2
    assert lo < REFERENCE_PARAMS["phi"] < hi


def test_correlation_matrix_and_condition_number(noisy):
    runs, f = noisy
    ident = identifiability(runs, f)
    c = np.array(ident.correlation)
    assert ident.names == ["a", "alpha", "b", "beta", "e", "phi"]
    np.testing.assert_allclose(c, c.T, atol=1e-10)
    np.testing.assert_allclose(np.diag(c), 1.0, atol=1e-10)
    assert ident.corr("a", "alpha") > 0.95  # A and alpha trade off (loosely identified)
    assert abs(ident.corr("phi", "alpha")) < 0.9
    assert 1 < ident.condition_number < 1e12
    assert not [w for w in ident.warnings if w.kind.startswith("phi")]
    # the Gauss-Newton SE of phi is of the size of the bootstrap spread (~0.02 here)
    assert 0.005 < ident.stderr["phi"] < 0.06


def test_design_warnings():
    assert design_warnings(paper_table()) == []
    frame = simulate("paper")
    one_r = table_from_frame(frame[frame["r"] == 4])
    assert [w.kind for w in design_warnings(one_r)] == ["phi_unidentifiable"]
    near = frame[frame["r"].isin([4, 8])].copy()
    near["r"] = near["r"].map({4: 4, 8: 5})
    assert "r_barely_varies" in [w.kind for w in design_warnings(table_from_frame(near))]
    tiny = frame.copy()
    tiny.loc[tiny["r"] > 1, "n_once"] += 200 * tiny.loc[tiny["r"] > 1, "n_rec"]
    kinds = [w.kind for w in design_warnings(table_from_frame(tiny))]
    assert kinds == ["n_rec_tiny"]
    few = table_from_frame(frame[(frame["r"] == 1) | (frame.index.isin([30, 31]))])
    assert "few_looped_runs" in [w.kind for w in design_warnings(few)]


def test_tiny_shared_block_makes_the_profile_flat():
    frame = simulate("paper", noise=0.004, seed=2)
    frame.loc[frame["r"] > 1, "n_once"] += 200 * frame.loc[frame["r"] > 1, "n_rec"]
    runs = table_from_frame(frame)
    kinds = {w.kind for w in identifiability(runs, fit_huber(runs)).warnings}
    assert "n_rec_tiny" in kinds and kinds & {"phi_profile_flat", "phi_uncertain"}


# -- consistency ---------------------------------------------------------------------------------
def test_consistency_on_the_paper_design(paper_clean, clean_fit):
    cons = consistency(paper_clean, clean_fit, n_starts=20)
    assert [x["n"] for x in cons.halves] == [56, 60]  # the study's split: 56 / 60 runs
    assert [x["label"] for x in cons.pairs] == ["r in {1, 2}", "r in {1, 4}", "r in {1, 8}"]
    for x in cons.halves + cons.pairs:
        assert x["phi"] == pytest.approx(0.459, abs=1e-6)
    assert cons.spread < 1e-5


def test_consistency_sees_phi_drift_between_budget_halves():
    low = simulate("paper", params={"phi": 0.40})
    high = simulate("paper", params={"phi": 0.50})
    cut = low["budget"] <= 2.15e18
    frame = low.where(cut, high)
    frame["r"] = frame["r"].astype(int)
    runs = table_from_frame(frame)
    cons = consistency(runs, fit_huber(runs), n_starts=50)
    lower, upper = cons.halves
    assert lower["phi"] == pytest.approx(0.40, abs=2e-3)
    assert upper["phi"] == pytest.approx(0.50, abs=2e-3)


# -- bundle, views, errors --------------------------------------------------------------------
def test_diagnose_round_trips_to_json(noisy):
    runs, f = noisy
    d = diagnose(runs, f, consistency_starts=20)
    text = json.dumps(d.to_dict(), allow_nan=False)
    back = json.loads(text)
    assert back["residuals"]["passed"] is True
    assert len(back["influence"]["runs"]) == 116
    assert "[[Residuals" in d.summary() and "[[Identifiability]]" in d.summary()
    assert "profile interval (assumes independent runs)" in d.summary()
    assert back["identifiability"]["profile_interval_label"] == "profile interval (assumes independent runs)"
    assert data_summary(runs)["n_cells"] == 24


def test_bad_inputs(noisy):
    runs, f = noisy
    with pytest.raises(ValueError, match="the fit has 116 runs but the table has 115"):
        residual_diagnostics(runs.subset(np.arange(115)), f)
    with pytest.raises(ValueError, match="significance must be in"):
        residual_diagnostics(runs, f, significance=1.5)
    with pytest.raises(ValueError, match="unknown diagnostics to skip: residuals"):
        diagnose(runs, f, skip=("residuals",))


def test_a_bayesian_fit_is_not_refitted(noisy):
    """A posterior has no objective to refit: refit-based diagnostics refuse or are skipped."""
    runs, f = noisy
    posterior = f.with_updates(method="bayes", loss="student_t", delta=None)
    with pytest.raises(ValueError, match="no optimisation objective"):
        influence(runs, posterior)
    with pytest.raises(ValueError, match="no optimisation objective"):
        consistency(runs, posterior)
    d = diagnose(runs, posterior)
    assert d.influence is None and d.consistency is None and d.identifiability.profile is None
    kinds = {w.kind for w in d.warnings}
    assert {"influence_skipped", "profile_skipped"} <= kinds


# -- refits use the fit's own loss and box (bug 1) -------------------------------------------
@pytest.fixture(scope="module")
def lsq_noisy():
    runs = table_from_frame(simulate("paper", noise=0.01, seed=0))
    return runs, fit(runs, method="lsq")


def test_influence_of_a_least_squares_fit_refits_by_least_squares(lsq_noisy):
    """Refitting an lsq fit with Huber measured the Huber-lsq gap (median LOO delta -0.028 here)."""
    runs, f = lsq_noisy
    infl = influence(runs, f)
    deltas = np.array([x["delta_phi"] for x in infl.runs])
    assert abs(np.median(deltas)) < 0.005
    x = infl.top[0]
    keep = np.array([rid != x["run_id"] for rid in runs.run_ids])
    assert fit(runs.subset(keep), method="lsq").phi == pytest.approx(x["phi"], abs=1e-5)


def test_refits_stay_in_the_fits_box():
    from phifit.law import LawSpec

    runs = paper_table(noise=0.004, seed=1)
    boxed = fit(runs, spec=LawSpec(bounds={"phi": (0.2, 0.4)}))
    assert boxed.phi == pytest.approx(0.4, abs=1e-9)  # the free optimum (~0.46) lies outside
    phis = [x["phi"] for x in influence(runs, boxed).runs]
    assert max(phis) <= 0.4 + 1e-12
    cons = consistency(runs, boxed, n_starts=10)
    assert all(x["phi"] <= 0.4 + 1e-12 for x in cons.halves + cons.pairs)


# -- the phi profile is the fit's own objective (bug 3) ----------------------------------------
@pytest.fixture(scope="module")
def cpu_baseline():
    from pathlib import Path

    from phifit.recipes.delta import select_recipe
    from phifit.runs.table import load_runs

    table = Path(__file__).resolve().parents[1] / "data" / "cpu_small_runs.csv"
    runs = select_recipe(load_runs(table)).runs
    return runs, fit(runs)


def test_phi_profile_is_minimal_at_the_estimate_on_the_cpu_table(cpu_baseline):
    """The profile of SSR at Huber optima had its minimum near 0.45, phi_hat = 0.583 outside its interval."""
    runs, f = cpu_baseline
    ident = identifiability(runs, f)
    prof = ident.profile
    phi, obj, dev = (np.array(prof[k]) for k in ("phi", "objective", "deviance"))
    i = int(np.argmin(dev))
    spacing = max(phi[min(i + 1, len(phi) - 1)] - phi[i], phi[i] - phi[max(i - 1, 0)])
    assert abs(phi[i] - f.phi) <= spacing
    assert obj.min() == pytest.approx(f.objective, rel=1e-9)
    lo, hi = ident.profile_interval
    assert lo < f.phi < hi
    # smooth: the profile falls towards phi_hat from both sides (no local dips from a bad start)
    left, right = obj[: i + 1], obj[i:]
    assert np.all(np.diff(left) <= 1e-12 * obj.min()) and np.all(np.diff(right) >= -1e-12 * obj.min())
    assert ident.profile_interval_label == "profile interval (assumes independent runs)"


def test_profile_figure_names_the_interval_it_draws():
    from phifit.report import figures as plots

    prof = {"phi": [0.3, 0.4, 0.5], "deviance": [5.0, 0.0, 5.0], "deviance_name": "n log(F(φ) / F_min)"}
    fig = plots.profile_figure(prof, 0.4, [0.35, 0.45], interval_label="95% bootstrap interval")
    ax = fig.axes[0]
    labels = [" ".join(label.split()) for label in ax.get_legend_handles_labels()[1]]
    assert "95% bootstrap interval [0.350, 0.450]" in labels
    assert not any(label.startswith("profile interval") for label in labels)
    assert ax.get_ylabel() == "profile deviance n log(F(φ) / F_min)"


def test_fit_command_checks_residuals_only_at_a_posterior_whose_chains_mixed():
    """`phifit fit --method bayes` reads per-r offsets at the posterior medians; where the chains
    sit in separate places (R-hat 1.5) those medians are not one law's fit, so it says it did not
    check rather than flag every r as misfit; slow but mixed chains (R-hat 1.02) are still checked."""
    from phifit.cli.fit import UNMIXED_R_HAT, _offset_flags

    runs = _shifted(0.03)
    fit = fit_huber(runs)
    assert [c.kind for c in _offset_flags(runs, fit)] == ["systematic_r_offset"]

    def as_bayes(r_hat_phi):
        posterior = {name: {"r_hat": 1.001} for name in fit.params}
        posterior["phi"] = {"r_hat": r_hat_phi}
        return fit.with_updates(method="bayes", extras={"posterior": posterior})

    assert [c.kind for c in _offset_flags(runs, as_bayes(1.02))] == ["systematic_r_offset"]
    (note,) = _offset_flags(runs, as_bayes(1.53))
    assert note.kind == "residuals_not_checked" and note.values["r_hat"] == {"phi": 1.53}
    assert "phi 1.53" in note.message and f"> {UNMIXED_R_HAT}" in note.message
    # mixed chains whose medians fit worse than the mean (R^2 < 0: 7 runs at one budget, say)
    (note,) = _offset_flags(runs, as_bayes(1.02).with_updates(r2=-5.9))
    assert note.kind == "residuals_not_checked" and note.values["r_hat"] == {}
    assert "fits worse than the runs' mean loss" in note.message and "R^2 -5.900" in note.message
    assert [c.kind for c in _offset_flags(runs, fit.with_updates(r2=-5.9))] == ["systematic_r_offset"]


def test_the_phi_profile_in_two_sides_is_the_one_piece_profile(noisy):
    """The report runs the profile's two sides as separate tasks (starts drawn up front in the
    one-piece order) and attaches them: the same profile, interval and cautions, bit for bit."""
    from phifit.diagnostics.identifiability import (
        PROFILE_SIDES,
        attach_profile,
        identifiability,
        profile_plan_for,
        profile_side,
    )

    runs, res = noisy
    whole = identifiability(runs, res, seed=3)
    plan = profile_plan_for(runs, res, seed=3)
    sides = [profile_side(plan, side) for side in reversed(PROFILE_SIDES)]  # order does not matter
    parts = attach_profile(identifiability(runs, res, seed=3, profile_points=0), plan, sides)
    assert parts.to_dict() == whole.to_dict()
    assert len(whole.profile["phi"]) == sum(len(index) for index, _, _ in sides) > 50
    fixed = fit_huber(runs, spec=LawSpec(fixed={"phi": 0.5}))
    assert profile_plan_for(runs, fixed) is None  # no profile where phi is held


def test_the_written_out_chi2_quantile_is_scipys():
    """CHI2_95 is written out (importing the diagnostics must not import scipy.stats): it is the
    chi2_1 95% quantile, and importing the report's analysis leaves scipy.stats unimported."""
    import subprocess
    import sys

    from phifit.diagnostics.identifiability import CHI2_95

    assert CHI2_95 == pytest.approx(float(stats.chi2.ppf(0.95, 1)), rel=1e-15)
    code = "import sys, phifit.report.analysis, phifit.report.write; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
