"""Restricted fits, likelihood-ratio tests, information criteria, out-of-sample error."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import paper_table
from scipy import stats

from phifit.cautions import Caution
from phifit.cli import main
from phifit.compare.restricted import Comparison, compare_fits, gaussian_log_lik
from phifit.fitters import fit
from phifit.law import log_loss
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

STARTS = 100  # enough for this well-posed problem; keeps the suite fast
WILD = 199  # wild cluster bootstrap replicates: p-values to 0.005, enough for 5% verdicts


def free_fit(runs, method: str = "huber"):
    """The free fit every comparison starts from."""
    return fit(runs, method=method, n_starts=STARTS)


@pytest.fixture(scope="module")
def study_like():
    """phi = 0.46 with the study's noise level (R^2 ~ 0.997)."""
    runs = paper_table(noise=0.004, seed=21, phi=0.46)
    return runs, compare_fits(runs, free_fit(runs), n_starts=STARTS, n_wild=WILD)


def test_gaussian_log_likelihood_with_sigma_profiled_out():
    e = np.random.default_rng(0).normal(0, 0.01, 50)
    ll, rss = gaussian_log_lik(e)
    sigma = math.sqrt(np.sum(e**2) / 50)
    assert rss == pytest.approx(np.sum(e**2))
    assert ll == pytest.approx(np.sum(stats.norm.logpdf(e, scale=sigma)), rel=1e-12)
    assert gaussian_log_lik(np.zeros(5))[0] == math.inf


def test_rejects_phi_0_and_1_when_phi_is_046(study_like):
    """Acceptance 3, first half."""
    _, cmp = study_like
    assert set(cmp.fits) == {"free", "phi=0", "phi=1"}
    assert cmp.stats["phi=0"].rejected and cmp.stats["phi=1"].rejected
    assert cmp.verdict.startswith("phi = 0 and phi = 1 are both rejected:")
    assert cmp.fits["free"].phi == pytest.approx(0.46, abs=0.06)
    for label in ("phi=0", "phi=1"):
        st = cmp.stats[label]
        assert st.lr_p_value < 1e-6 and st.lr_df == 1 and st.lr_reference == "chi2(1)"
        assert st.cv_rmse > cmp.stats["free"].cv_rmse
        assert st.aic > cmp.stats["free"].aic and st.bic > cmp.stats["free"].bic
    assert cmp.stats["free"].r2 > cmp.stats["phi=0"].r2 > cmp.stats["phi=1"].r2


def test_does_not_reject_phi_0_when_phi_is_0():
    """Acceptance 3, second half.  The test has 5% size, so any one table is rejected with
    probability ~0.05 (e.g. seed 22 of paper_table: phi_hat = -0.15, p = 7e-6); over five
    tables (seeds 0-4) at least four must keep phi = 0 (a 2% chance to fail by luck)."""
    kept = 0
    for seed in range(5):
        runs = paper_table(noise=0.004, seed=seed, phi=0.0)
        cmp = compare_fits(runs, free_fit(runs), n_starts=STARTS, n_wild=WILD)
        assert cmp.stats["phi=1"].rejected
        if not cmp.stats["phi=0"].rejected:
            kept += 1
            assert cmp.verdict.startswith("phi = 1 is rejected")
            assert "phi = 0 is not rejected" in cmp.verdict
    assert kept >= 4


def test_statistics_follow_their_definitions(study_like):
    runs, cmp = study_like
    n = len(runs)
    free, r0 = cmp.stats["free"], cmp.stats["phi=0"]
    for label, st in cmp.stats.items():
        e = runs.log_loss - log_loss(cmp.fits[label].theta, runs.design)
        assert st.rss_log == pytest.approx(np.sum(e**2))
        k = 7 if label == "free" else 6
        assert st.n_params == k
        assert st.aic == pytest.approx(-2 * st.log_lik + 2 * k)
        assert st.bic == pytest.approx(-2 * st.log_lik + k * math.log(n))
    assert r0.lr_stat == pytest.approx(n * math.log(r0.rss_log / free.rss_log))
    assert r0.lr_p_value == pytest.approx(stats.chi2.sf(r0.lr_stat, 1))
    # leave-one-budget-out RMSE pools the held-out budgets run by run
    counts = runs.frame.groupby("budget").size()
    pooled = sum(counts[float(b)] * v**2 for b, v in free.cv_rmse_by_budget.items()) / n
    assert free.cv_rmse == pytest.approx(math.sqrt(pooled))
    assert free.extrap_budget == str(max(runs.frame["budget"]))


def test_json_contract_round_trips(study_like, tmp_path):
    _, cmp = study_like
    data = json.loads(json.dumps(cmp.to_dict(), allow_nan=False))
    assert set(data["fits"]) == {"free", "phi=0", "phi=1"} and data["verdict"] == cmp.verdict
    for entry in data["fits"].values():
        for key in ("params", "r2", "rmse", "objective", "aic", "bic", "lr_stat", "lr_p_value", "cv_rmse"):
            assert key in entry
    assert data["fits"]["free"]["lr_stat"] is None
    cmp.to_json(tmp_path / "cmp.json")
    again = Comparison.from_json(tmp_path / "cmp.json")
    assert again.to_dict() == cmp.to_dict()
    assert again.stats == cmp.stats and again.warnings == cmp.warnings
    assert again.summary() == cmp.summary()
    assert "Verdict:" in cmp.summary() and "sigma profiled out" in cmp.summary()


def test_cautions_are_data(study_like):
    """Every note of the comparison is a Caution of source "compare" (the report puts them in
    results.json["warnings"]); the approximate LR of Huber fits is said once."""
    _, cmp = study_like
    assert all(isinstance(w, Caution) and w.source == "compare" for w in cmp.warnings)
    assert [w.kind for w in cmp.warnings].count("approximate_lr") == 1
    assert cmp.notes == [w.message for w in cmp.warnings]


def test_restriction_at_a_bound_uses_the_mixture():
    runs = paper_table(noise=0.004, seed=23)
    cmp = compare_fits(runs, free_fit(runs), fixes=({"phi": 3.0},), cv=False, n_starts=STARTS, n_wild=0)
    st = cmp.stats["phi=3"]
    assert st.lr_reference == "0.5 chi2(0) + 0.5 chi2(1)"
    assert st.lr_p_value == pytest.approx(0.5 * stats.chi2.sf(st.lr_stat, 1))
    bound = [w for w in st.warnings if w.kind == "boundary_null"]
    assert len(bound) == 1 and "bound of its box" in bound[0].message and bound[0] in cmp.warnings


def test_without_budgets_the_test_alone_decides():
    frame = simulate("paper", noise=0.004, seed=24).drop(columns=["budget"])
    runs = table_from_frame(frame)
    cmp = compare_fits(runs, free_fit(runs), n_starts=STARTS, n_wild=WILD)
    assert cmp.stats["free"].cv_rmse is None and cmp.stats["phi=0"].rejected
    assert "decided by the test alone" in cmp.verdict and "wild cluster bootstrap p" in cmp.verdict
    assert any(w.kind == "no_budget" and "no 'budget' column" in w.message for w in cmp.warnings)


def test_lsq_method_and_extra_restrictions():
    runs = paper_table(noise=0.004, seed=25)
    cmp = compare_fits(
        runs,
        free_fit(runs, "lsq"),
        fixes=({"phi": 0.0}, {"phi": 0.5, "E": 1.6}),
        cv=False,
        n_starts=STARTS,
        n_wild=0,
    )
    assert set(cmp.fits) == {"free", "phi=0", "phi=0.5,E=1.6"}
    assert cmp.stats["phi=0.5,E=1.6"].lr_df == 2
    assert all(f.method == "lsq" for f in cmp.fits.values())
    # least squares is the Gaussian ML fit: restricted log-RSS can never beat the free one
    assert all(st.rss_log >= cmp.stats["free"].rss_log * (1 - 1e-9) for st in cmp.stats.values())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"fixes": ({"gamma": 1.0},)}, "unknown parameter 'gamma'"),
        ({"fixes": ({},)}, "non-empty mapping"),
        ({"fixes": ()}, "at least one restriction"),
    ],
)
def test_bad_arguments(paper_clean, kwargs, message):
    with pytest.raises(ValueError, match=message):
        compare_fits(paper_clean, free_fit(paper_clean), **kwargs)


def test_the_fit_decides_the_method_and_must_be_of_these_runs(paper_clean):
    free = free_fit(paper_clean)
    with pytest.raises(
        ValueError, match="method 'bayes' has no refit comparison; expected one of huber, lsq"
    ):
        compare_fits(paper_clean, free.with_updates(method="bayes"))
    with pytest.raises(ValueError, match="not fitted to these runs"):
        compare_fits(paper_clean.subset(np.arange(100)), free)
    restricted = fit(paper_clean, fix={"phi": 0.5}, n_starts=STARTS)
    with pytest.raises(ValueError, match="holds phi fixed already"):
        compare_fits(paper_clean, restricted)


def test_phi_restrictions_need_identifiable_phi(paper_clean):
    r1 = table_from_frame(paper_clean.frame[paper_clean.frame.r == 1])
    with pytest.raises(ValueError, match="phi is not identifiable"):
        compare_fits(r1, free_fit(r1))


def test_cli_compare(tmp_path, capsys):
    runs, out = tmp_path / "runs.csv", tmp_path / "cmp.json"
    assert main(["simulate", "--noise", "0.004", "--seed", "3", "--out", str(runs)]) == 0
    assert (
        main(
            [
                "compare",
                str(runs),
                "--parts",
                "0",
                "--fix",
                "phi=0.5",
                "--starts",
                "50",
                "--no-cv",
                "--wild",
                "199",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    # this table (seed 3, phi = 0.459): the chi-square LR gives p = 0.011 for phi = 0.5, the wild
    # cluster bootstrap p = 0.065 (199 replicates), so the verdict keeps phi = 0.5
    assert "Verdict: phi = 0 and phi = 1 are both rejected: wild cluster bootstrap p = 0.005" in text
    assert "phi = 0.5 is not rejected" in text and "chi2 p" in text
    data = json.loads(out.read_text())
    assert data["generator"] == "phifit" and set(data["fits"]) == {"free", "phi=0", "phi=1", "phi=0.5"}
    assert main(["compare", str(runs), "--fix", "gamma=1"]) == 2
    assert "unknown parameter 'gamma'" in capsys.readouterr().err


def test_likelihood_ratio_test_defined_once():
    """lr_test: LR = 2 (ll_alt - ll_null) against chi2(df); negative LR clipped to 0 with a
    caution; a null on a bound halves p (df = 1); scores and tests round-trip through JSON."""
    from phifit.fitters.likelihood import GaussianScore, LRTest, lr_test

    rng = np.random.default_rng(1)
    e = rng.normal(0, 0.01, 40)
    alt = GaussianScore.from_residuals(e, 6)
    null = GaussianScore.from_residuals(1.2 * e, 5)
    assert alt.n_params == 7 and alt.aic == pytest.approx(-2 * alt.log_lik + 14)
    assert alt.bic == pytest.approx(-2 * alt.log_lik + 7 * math.log(40))
    t = lr_test(alt, null, 1)
    assert t.statistic == pytest.approx(40 * math.log(1.44)) and t.p_value == pytest.approx(
        stats.chi2.sf(t.statistic, 1)
    )
    assert t.warnings == ()
    half = lr_test(alt, null, 1, on_boundary=["phi"])
    assert half.p_value == pytest.approx(0.5 * t.p_value) and half.warnings[0].kind == "boundary_null"
    neg = lr_test(null, alt, 1, label="phi=0")
    assert neg.statistic == 0.0 and neg.raw < 0 and neg.p_value == 1.0
    assert neg.warnings[0].kind == "negative_lr" and neg.warnings[0].message.startswith("phi=0: LR")
    assert GaussianScore.from_json(alt.to_json()) == alt
    assert LRTest.from_json(half.to_json()) == half


def test_held_out_folds_on_worker_processes_give_the_same_errors():
    """Every (spec, budget) fold is one task: on two worker processes the leave-one-budget-out
    and extrapolation errors are bit for bit those of one process."""
    from phifit.compare.holdout import budget_order, out_of_sample_many
    from phifit.law import LawSpec

    runs = paper_table(noise=0.004, seed=5, phi=0.46)
    specs = {"free": LawSpec(), "phi=0": LawSpec(fixed={"phi": 0.0})}
    order = budget_order(runs)
    one = out_of_sample_many(runs, specs, "huber", 0, 40, order, n_jobs=1)
    two = out_of_sample_many(runs, specs, "huber", 0, 40, order, n_jobs=2)
    assert one == two and set(one) == set(specs)
    cv_free, per_free, extrap_free, _ = one["free"]
    assert len(per_free) == len(order) and extrap_free == per_free[str(order[-1])]
    assert cv_free < one["phi=0"][0]  # the true law predicts held-out budgets better than phi = 0


def test_a_comparison_on_two_workers_is_the_one_process_comparison():
    """compare_fits starts the held-out folds first and runs the restricted wild tests side by
    side while they run: on two worker processes every number is the one-process number."""
    from phifit.bootstrap.sequential import StopRule
    from phifit.fitters.huber import fit_huber

    runs = paper_table(noise=0.004, seed=6, phi=0.46)
    free = fit_huber(runs, n_starts=60)
    kw = {"n_starts": 60, "n_wild": 249, "wild_stop": StopRule(looks=(99,)), "seed": 1}
    one = compare_fits(runs, free, n_jobs=1, **kw).to_dict()
    two = compare_fits(runs, free, n_jobs=2, **kw).to_dict()
    assert one == two
    assert one["fits"]["phi=0"]["cv_rmse"] is not None and one["fits"]["phi=1"]["wild"]["n_boot"] >= 99
