"""The reference Huber fit: a published optimum, exact recovery, noisy recovery."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import paper_table
from scipy.optimize import minimize

from phifit import fit
from phifit.fitters.huber import fit_huber, huber_objective
from phifit.fitters.objective import huber
from phifit.fitters.options import HuberOptions, LsqOptions
from phifit.law import PARAM_NAMES, REFERENCE_PARAMS, LawSpec, params_to_theta
from phifit.result import FitResult
from phifit.runs.table import table_from_frame


def test_huber_function_definition():
    d = 1e-3
    x = np.array([0.0, 5e-4, -1e-3, 2e-3, -0.01])
    want = [0.0, 0.5 * 25e-8, 0.5e-6, d * (2e-3 - d / 2), d * (0.01 - d / 2)]
    np.testing.assert_allclose(huber(x, d), want, rtol=1e-15)


@pytest.fixture(scope="module")
def chinchilla(shared_dir):
    df = pd.read_csv(shared_dir / "reference" / "epoch_chinchilla_svg_extracted_data.csv")
    df = df[df["loss"] < sorted(df["loss"])[-5]]
    frame = pd.DataFrame(
        {
            "n_once": df["Model Size"],
            "tokens": df["Training FLOP"] / (6 * df["Model Size"]),
            "loss": df["loss"],
        }
    )
    return table_from_frame(frame, source="epoch_chinchilla")


def test_chinchilla_objective_at_published_optimum(chinchilla):
    """The objective evaluated at Epoch's reported optimum is ~1.01827e-3 (a sum, not a mean)."""
    assert len(chinchilla) == 240
    theta = params_to_theta(
        {"E": 1.817218, "A": 477.83, "alpha": 0.347311, "B": 2143.4, "beta": 0.367172, "phi": 0.0}
    )
    assert huber_objective(theta, chinchilla) == pytest.approx(1.01827e-3, rel=1e-5)


def test_chinchilla_reaches_reference_optimum(chinchilla):
    res = fit(chinchilla)
    assert res.objective <= 1.01827402e-3
    for name, ref in (("alpha", 0.347311), ("beta", 0.367172), ("E", 1.817218)):
        assert abs(res.params[name] - ref) < 1e-4, name
    assert res.phi is None and any("not identifiable" in w.message for w in res.warnings)
    assert res.converged


def test_noise_free_paper_design_recovers_truth(paper_clean):
    res = fit(paper_clean)
    for name in PARAM_NAMES:
        assert res.params[name] == pytest.approx(REFERENCE_PARAMS[name], rel=1e-6), name
    assert res.r2 == pytest.approx(1.0, abs=1e-12)
    assert res.extras["n_starts_at_best"] > 10


@pytest.mark.parametrize("phi", [0.0, 1.0, -0.5])
def test_noise_free_recovery_other_phi(phi):
    res = fit(paper_table(phi=phi))
    assert res.params["phi"] == pytest.approx(phi, abs=1e-6)


def test_default_fit_beats_or_matches_lbfgsb_multistart(paper_noisy):
    """Our optimum is no worse than the best of 20 L-BFGS-B starts at tight tolerances."""
    res = fit(paper_noisy)
    spec = LawSpec()
    rng = np.random.default_rng(1)
    best = np.inf
    for _ in range(20):
        x0 = spec.lower + (spec.upper - spec.lower) * rng.random(6)
        sol = minimize(
            lambda x: huber_objective(x, paper_noisy),
            x0,
            method="L-BFGS-B",
            bounds=list(zip(spec.lower, spec.upper)),
            options={"ftol": 1e-15, "gtol": 1e-12, "maxfun": 100000},
        )
        best = min(best, sol.fun)
    assert res.objective <= best * (1 + 1e-9)


def test_restricted_fit_holds_phi_fixed(paper_noisy):
    res = fit(paper_noisy, fix={"phi": 1.0})
    assert res.params["phi"] == 1.0 and res.fixed == {"phi": 1.0}
    free = fit(paper_noisy)
    assert res.objective > free.objective
    assert "(fixed)" in res.summary()


def test_same_r_everywhere_reports_phi_null(paper_clean):
    only_r4 = paper_clean.subset(paper_clean.r == 4)
    res = fit(only_r4)
    assert res.phi is None
    assert any("same r" in w.message for w in res.warnings)


def test_result_json_round_trip(paper_noisy, tmp_path):
    res = fit(paper_noisy)
    path = tmp_path / "fit.json"
    res.to_json(path)
    back = FitResult.from_json(path)
    assert back == res
    assert back.to_dict()["params"]["phi"] == pytest.approx(res.phi, rel=0, abs=0)


def test_bound_warning_when_optimum_outside_box(paper_clean):
    res = fit(paper_clean, spec=LawSpec(bounds={"phi": (0.0, 0.3)}))
    assert res.params["phi"] == pytest.approx(0.3)
    assert res.at_bounds == ["phi"]
    assert any("phi = 0.3 at upper bound 0.3" in w.message for w in res.warnings)


@pytest.mark.slow
def test_phi_within_005_for_45_of_50_noisy_seeds():
    hits = 0
    for seed in range(50):
        res = fit(paper_table(noise=0.005, seed=100 + seed))
        hits += abs(res.phi - REFERENCE_PARAMS["phi"]) <= 0.05
    assert hits >= 45, f"phi within 0.05 of truth in only {hits}/50 seeds"


# -- too few runs, interval levels ----------------------------------------------------------
def test_no_more_runs_than_free_parameters_is_refused(paper_clean, tmp_path, capsys):
    from phifit.cli import main

    two = paper_clean.subset([0, 4])  # r = 1 and r = 2: phi is free, 6 parameters
    for method in ("huber", "lsq"):
        with pytest.raises(ValueError, match=r"2 run\(s\) for 6 free parameter\(s\): a fit needs at least 7"):
            fit(two, method=method)
    six = paper_clean.subset(np.arange(0, 116, 20))  # 6 runs, 5 free parameters with phi fixed
    assert len(fit(six, fix={"phi": 0.5}).run_ids) == 6
    path = tmp_path / "two.csv"
    two.frame.to_csv(path, index=False)
    assert main(["fit", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 run(s) for 6 free parameter(s)" in err[0]
    assert main(["compare", str(path)]) == 2


def test_few_runs_per_parameter_are_flagged(paper_noisy):
    small = fit(paper_noisy.subset(np.arange(0, 116, 8)), n_starts=100)  # 15 runs < 3 x 6
    assert [w.kind for w in small.warnings if w.kind == "few_runs"] == ["few_runs"]
    assert "15 runs for 6 free parameters" in small.summary()
    assert not [w for w in fit(paper_noisy, n_starts=100).warnings if w.kind == "few_runs"]


def test_summary_states_the_interval_level(paper_noisy):
    res = fit(paper_noisy, n_starts=50)
    ci = {name: [0.9 * v, 1.1 * v] for name, v in res.params.items()}
    assert "95% CI (percentile)" in res.with_updates(ci=ci).summary()
    text = res.with_updates(ci=ci, ci_bca=ci, ci_level=0.9).summary()
    assert "90% CI (percentile)" in text and "90% CI (BCa)" in text and "95%" not in text


def test_unknown_option_lists_the_valid_ones(paper_clean):
    valid = (
        "valid: basin_rtol, delta, explore_iter, n_polish, n_refine, n_starts, prune_after, "
        "prune_ratio, refine_iter, seed$"
    )
    with pytest.raises(ValueError, match=r"^unknown option 'n_start' for method 'huber'; " + valid):
        fit(paper_clean, n_start=5)
    with pytest.raises(ValueError, match=r"^unknown option 'n_start' for method 'huber'; " + valid):
        fit_huber(paper_clean, n_start=5)


def test_options_as_a_dataclass_or_as_keywords_not_both(paper_clean):
    by_keyword = fit(paper_clean, n_starts=50, seed=3)
    by_object = fit(paper_clean, options=HuberOptions(n_starts=50, seed=3))
    assert by_object.params == by_keyword.params and by_object.extras["n_starts"] == 50
    with pytest.raises(ValueError, match="either options=HuberOptions"):
        fit_huber(paper_clean, options=HuberOptions(), seed=1)
    with pytest.raises(ValueError, match="must be a HuberOptions, got LsqOptions"):
        fit(paper_clean, options=LsqOptions())
    with pytest.raises(ValueError, match="unknown method 'hubr'; expected one of huber, lsq, bayes"):
        fit(paper_clean, method="hubr")


def test_the_default_threshold_is_the_engines():
    from phifit import defaults
    from phifit.fitters.objective import DELTA

    assert HuberOptions().delta == defaults.HUBER_DELTA == DELTA == 1e-3
