"""Block bootstrap: blocks, weights = resampled tables, intervals, bookkeeping, coverage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import paper_table
from scipy import stats

from phifit.bootstrap.block import (
    BootstrapResult,
    block_bootstrap,
    block_codes,
    bootstrap_interval,
    draw_weights,
    jackknife_acceleration,
)
from phifit.cautions import Caution
from phifit.fitters.huber import HuberOptions, fit_huber
from phifit.fitters.refit import identifiable_rows, refit_weighted
from phifit.law import PARAM_NAMES, REFERENCE_PARAMS, LawSpec
from phifit.result import FitResult
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

TRUTH = dict(REFERENCE_PARAMS)


@pytest.fixture(scope="module")
def noisy():
    runs = paper_table(noise=0.005, seed=1)
    return runs, fit_huber(runs)


@pytest.fixture(scope="module")
def clean_fit(paper_clean):
    return fit_huber(paper_clean, n_starts=100)


@pytest.fixture(scope="module")
def noisy_boot(noisy):
    runs, point = noisy
    return block_bootstrap(runs, point, n_boot=200, seed=5, n_jobs=1, progress=False)


# -- blocks and weights ---------------------------------------------------------------------


def test_default_blocks_are_budget_r_cells(paper_clean):
    codes, label = block_codes(paper_clean, None)
    assert label == "budget,r" and codes.max() + 1 == 24
    sizes = np.bincount(codes)
    assert sizes.sum() == 116 and sizes.min() == 4 and sizes.max() == 6
    # every cell holds one budget and one r
    frame = paper_clean.frame
    for c in range(24):
        cell = frame[codes == c]
        assert cell["budget"].nunique() == 1 and cell["r"].nunique() == 1


def test_blocks_without_budget_are_single_runs(paper_clean):
    runs = table_from_frame(paper_clean.frame.drop(columns=["budget"]))
    codes, label = block_codes(runs, None)
    assert label == "run" and len(np.unique(codes)) == len(runs)
    codes, label = block_codes(paper_clean, "size, r")
    assert label == "size,r" and codes.max() + 1 == 11 * 4
    codes, label = block_codes(paper_clean, ["r"])
    assert label == "r" and codes.max() + 1 == 4


@pytest.mark.parametrize(
    "block, message",
    [
        ("nope", "no column\\(s\\) 'nope'"),
        ("run,r", "cannot be combined"),
        ("", "at least one column"),
    ],
)
def test_bad_block(paper_clean, block, message):
    with pytest.raises(ValueError, match=message):
        block_codes(paper_clean, block)


def test_weights_are_block_multiplicities(paper_clean):
    codes, _ = block_codes(paper_clean, None)
    w = draw_weights(codes, 50, np.random.default_rng(0))
    assert w.shape == (50, 116)
    for row in w:
        per_block = np.array([row[codes == c] for c in range(24)], dtype=object)
        counts = np.array([blk[0] for blk in per_block])
        assert all(np.all(blk == blk[0]) for blk in per_block)  # whole blocks move
        assert counts.sum() == 24  # 24 draws


def test_weighted_replicates_equal_refits_of_the_resampled_tables(noisy):
    """A replicate is the summed objective on the concatenated resampled table: its phi
    equals a full 500-start fit of that table (the study's protocol)."""
    runs, point = noisy
    boot = block_bootstrap(runs, point, n_boot=6, seed=3, n_jobs=1, progress=False, jackknife=False)
    codes, _ = block_codes(runs, None)
    w = draw_weights(codes, 6, np.random.default_rng(np.random.SeedSequence(3).spawn(3)[0]))
    for i in range(6):
        table = runs.subset(np.repeat(np.arange(len(runs)), w[i].astype(int)))
        full = fit_huber(table, options=HuberOptions(n_starts=500, seed=i))
        assert boot.params["phi"][i] == pytest.approx(full.phi, abs=1e-6)
        assert boot.params["beta"][i] == pytest.approx(full.params["beta"], abs=1e-5)


# -- acceptance 1 ---------------------------------------------------------------------------


def test_noise_free_intervals_contain_the_truth(paper_clean):
    boot = block_bootstrap(paper_clean, fit_huber(paper_clean), n_boot=100, seed=0, n_jobs=1, progress=False)
    assert boot.n_failed == 0
    for name in PARAM_NAMES:
        tol = 1e-6 * abs(TRUTH[name]) + 1e-9
        for ci in (boot.ci[name], boot.ci_bca[name]):
            assert ci[0] - tol <= TRUTH[name] <= ci[1] + tol, (name, ci)


def test_phi_interval_shrinks_with_noise():
    widths = []
    for noise in (0.01, 0.005, 0.0025):
        runs = paper_table(noise=noise, seed=7)  # same draws, scaled
        boot = block_bootstrap(runs, fit_huber(runs, seed=1), n_boot=150, seed=1, n_jobs=1, progress=False)
        lo, hi = boot.ci["phi"]
        assert lo <= TRUTH["phi"] <= hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]
    assert widths[0] / widths[2] == pytest.approx(4.0, rel=0.35)  # width ~ noise sd


# -- reproducibility and bookkeeping --------------------------------------------------------


def test_seeded_and_independent_of_workers(noisy):
    runs, point = noisy
    kw = {"n_boot": 40, "progress": False, "jackknife": False}
    a = block_bootstrap(runs, point, seed=11, n_jobs=1, chunk_size=7, **kw)
    b = block_bootstrap(runs, point, seed=11, n_jobs=2, chunk_size=13, **kw)
    c = block_bootstrap(runs, point, seed=12, n_jobs=1, **kw)
    np.testing.assert_array_equal(a.thetas, b.thetas)
    assert not np.allclose(a.thetas, c.thetas)


def test_default_workers_follow_the_cores_this_process_may_use(noisy, monkeypatch):
    """n_jobs=None: the refits get one worker per core of the process's CPU set (64 here)."""
    import os

    import phifit.bootstrap.block as block_module

    runs, point = noisy
    passed: list[int] = []
    real = block_module.start_refit_weighted

    def recording(*args, n_jobs, **kwargs):
        passed.append(n_jobs)
        return real(*args, n_jobs=1, **kwargs)  # record the count, refit in this process

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(block_module, "start_refit_weighted", recording)
    boot = block_bootstrap(runs, point, n_boot=4, seed=0, progress=False, jackknife=False)
    assert passed == [64] and boot.n_boot == 4
    passed.clear()
    block_bootstrap(runs, point, n_boot=4, seed=0, n_jobs=3, progress=False, jackknife=False)
    assert passed == [3]


def test_failed_replicates_are_counted_not_dropped(paper_clean):
    """With the 4 r-values as blocks, some replicates draw a single r: phi is then not
    identifiable; they must be counted, kept as NaN rows and left out of the intervals."""
    n = 300
    boot = block_bootstrap(
        paper_clean, fit_huber(paper_clean, seed=2), n_boot=n, block="r", seed=2, n_jobs=1, progress=False
    )
    codes, _ = block_codes(paper_clean, "r")
    w = draw_weights(codes, n, np.random.default_rng(np.random.SeedSequence(2).spawn(3)[0]))
    expected = ~identifiable_rows(paper_clean, w)
    assert expected.sum() > 0
    np.testing.assert_array_equal(boot.failed, expected)
    assert (
        boot.n_failed == expected.sum() == boot.failure_reasons["phi not identifiable in the resampled table"]
    )
    assert np.all(np.isnan(boot.thetas[boot.failed]))
    assert np.all(np.isfinite(boot.thetas[~boot.failed]))
    kinds = {w.kind: w for w in boot.warnings}
    assert "failed" in kinds["failed_replicates"].message and kinds["failed_replicates"].source == "bootstrap"
    assert kinds["failed_replicates"].values["n_failed"] == boot.n_failed
    assert "only 4 blocks" in kinds["few_blocks"].message
    assert np.all(np.isfinite(boot.ci["phi"]))


def test_replicates_failed_by_their_draw_are_not_refitted(paper_clean, monkeypatch):
    """A replicate whose draw alone fails it (phi not identifiable, too few distinct runs) is
    not refitted: the bootstrap refits only the others, and its result is the one refitting every
    replicate gives (each replicate's refit depends on its own weights and starts only)."""
    import phifit.fitters.refit as refit_module

    n = 120
    point = fit_huber(paper_clean, seed=2)
    run = lambda: block_bootstrap(  # noqa: E731
        paper_clean, point, n_boot=n, block="r", seed=2, n_jobs=1, progress=False
    )
    real_chunk = refit_module.refit_chunk
    refitted: list[int] = []

    def counting_chunk(problem, weights, x_hat, spread):
        refitted.append(len(weights))
        return real_chunk(problem, weights, x_hat, spread)

    monkeypatch.setattr(refit_module, "refit_chunk", counting_chunk)
    boot = run()
    assert 0 < boot.n_failed < n and sum(refitted) == n - boot.n_failed + 4  # + the 4 delete-one-r refits
    monkeypatch.setattr(refit_module, "refit_chunk", real_chunk)
    codes, _ = block_codes(paper_clean, "r")
    w = draw_weights(codes, n, np.random.default_rng(np.random.SeedSequence(2).spawn(3)[0]))
    everything = refit_module.refit_weighted(
        paper_clean, point.spec, w, point.theta[point.spec.free_mask], seed=np.random.default_rng(
            np.random.SeedSequence(2).spawn(3)[1]), n_jobs=1
    )  # fmt: skip
    ok = ~boot.failed
    np.testing.assert_array_equal(boot.thetas[ok], point.spec.full_theta(everything["x"][ok]))


def test_refit_weighted_skips_rows_and_keeps_the_others_starts(noisy):
    runs, point = noisy
    w = np.random.default_rng(3).poisson(1.0, size=(6, len(runs))).astype(float)
    x_hat = point.theta[point.spec.free_mask]
    skip = np.array([True, False, True, False, False, True])
    full = refit_weighted(runs, point.spec, w, x_hat, seed=4, n_jobs=1, n_spread=2)
    part = refit_weighted(runs, point.spec, w, x_hat, seed=4, n_jobs=1, n_spread=2, skip=skip)
    for key in full:
        np.testing.assert_array_equal(part[key][~skip], full[key][~skip])
    assert np.all(np.isnan(part["objective"][skip])) and not part["converged"][skip].any()
    np.testing.assert_array_equal(part["x"][skip], np.tile(x_hat, (3, 1)))


def test_fixed_parameter_has_no_interval(noisy):
    runs, _ = noisy
    spec = LawSpec(fixed={"phi": 0.0})
    point = fit_huber(runs, spec=spec)
    boot = block_bootstrap(runs, point, n_boot=30, seed=0, n_jobs=1, progress=False)
    assert "phi" not in boot.ci and set(boot.ci) == {"E", "A", "alpha", "B", "beta"}
    assert np.all(boot.params["phi"][~boot.failed] == 0.0)
    assert boot.attach(point).fixed == {"phi": 0.0}


def test_an_unknown_interval_kind_lists_the_valid_ones(noisy_boot):
    with pytest.raises(ValueError, match="unknown interval kind 'bac'; expected one of percentile, bca"):
        noisy_boot.censored("phi", "bac")


def test_attach_fills_the_fit_json(noisy, noisy_boot, tmp_path):
    runs, point = noisy
    fitted = noisy_boot.attach(point)
    data = json.loads(fitted.to_json(tmp_path / "fit.json"))
    assert set(data["ci"]) == set(PARAM_NAMES) and set(data["ci_bca"]) == set(PARAM_NAMES)
    assert data["ci"]["phi"] == pytest.approx(noisy_boot.ci["phi"])
    for key in ("n", "n_failed", "block", "n_blocks", "seed", "mc_error"):
        assert key in data["bootstrap"]
    assert data["bootstrap"]["n"] == 200 and data["bootstrap"]["block"] == "budget,r"
    again = FitResult.from_json(tmp_path / "fit.json")
    assert again.ci["phi"] == pytest.approx(noisy_boot.ci["phi"])
    assert "bootstrap" in again.summary() and "95% CI (percentile)" in again.summary()
    other = fit_huber(paper_table(noise=0.005, seed=2))
    with pytest.raises(ValueError, match="differs from the bootstrap's point estimate"):
        noisy_boot.attach(other)


def test_result_round_trips_through_json(noisy_boot, tmp_path):
    """Saved and reloaded, the result is the same result: same JSON, same summary, same
    cautions (as Caution records), same derived intervals."""
    path = tmp_path / "boot.json"
    noisy_boot.to_json(path)
    again = BootstrapResult.from_json(path)
    assert again.to_dict() == noisy_boot.to_dict()
    np.testing.assert_array_equal(again.thetas, noisy_boot.thetas)
    np.testing.assert_array_equal(again.failed, noisy_boot.failed)
    assert again.warnings == noisy_boot.warnings and all(isinstance(w, Caution) for w in again.warnings)
    assert again.summary() == noisy_boot.summary() and "percentile 95%" in again.summary()
    assert again.interval(lambda p: p["phi"], kind="bca").to_list() == noisy_boot.ci_bca["phi"]
    assert again.n_boot == again.n == 200


def test_cautions_are_data(noisy, noisy_boot):
    """Every note of the bootstrap is a Caution of source "bootstrap" with a kind, and
    attach() hands them to the fit; no coverage claim is attached to an interval."""
    assert {w.source for w in noisy_boot.warnings} <= {"bootstrap"}
    assert "cell_coverage" not in [w.kind for w in noisy_boot.warnings]
    fitted = noisy_boot.attach(noisy[1])
    assert all(w in fitted.warnings for w in noisy_boot.warnings)


def test_an_interval_end_on_the_box_is_censored():
    # the bundled CPU table's baseline: part of the replicates run phi into its lower bound
    from phifit.recipes.pairing import select_recipe
    from phifit.runs.table import load_runs

    runs = select_recipe(load_runs(Path(__file__).parents[1] / "data" / "cpu_small_runs.csv")).runs
    boot = block_bootstrap(
        runs, fit_huber(runs), n_boot=200, seed=0, n_jobs=1, progress=False, jackknife=False
    )
    assert boot.ci["phi"][0] == pytest.approx(-3.0) and boot.censored("phi") == (True, False)
    assert "[\u2264 \u22123 (search bound: not determined)," in boot.summary()
    fitted = boot.attach(fit_huber(runs))  # the fit's own summary marks the end too
    assert "[\u2264 \u22123 (search bound: not determined)," in fitted.summary()
    regions = boot.phi_regions
    assert 0 < regions["at lower bound"] <= regions["phi <= 0"] < 0.5 < regions["0 < phi < 1"]
    assert regions["phi <= 0"] + regions["0 < phi < 1"] + regions["phi >= 1"] == pytest.approx(1.0)
    info = boot.bootstrap_info()
    assert info["censored"]["phi"]["percentile"] == [True, False] and info["phi_regions"] == regions
    again = BootstrapResult.from_dict(json.loads(json.dumps(boot.to_dict())))
    assert again.censored("phi") == (True, False) and again.phi_regions == regions


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_boot": 1}, "must be an integer >= 2"),
        ({"n_jobs": 0}, "n_jobs must be"),
        ({"block": "size,nope"}, "no column\\(s\\) 'nope'"),
        ({"level": 1.5}, "level must be in"),
    ],
)
def test_bad_arguments(paper_clean, clean_fit, kwargs, message):
    with pytest.raises(ValueError, match=message):
        block_bootstrap(paper_clean, clean_fit, progress=False, **kwargs)


def test_a_bayesian_fit_or_another_tables_fit_is_refused(paper_clean, clean_fit):
    with pytest.raises(ValueError, match="not a bayes fit; expected one of huber, lsq"):
        block_bootstrap(paper_clean, clean_fit.with_updates(method="bayes"), progress=False)
    with pytest.raises(ValueError, match="not fitted to these runs"):
        block_bootstrap(paper_clean.subset(np.arange(100)), clean_fit, progress=False)


def test_single_block_is_refused(paper_clean, clean_fit):
    runs = table_from_frame(paper_clean.frame.assign(lab="x"))
    with pytest.raises(ValueError, match="single block"):
        block_bootstrap(runs, clean_fit, block="lab", progress=False)


# -- intervals ------------------------------------------------------------------------------


def test_bca_matches_scipy():
    """The BCa core reproduces scipy.stats.bootstrap given the same replicates and jackknife."""
    rng = np.random.default_rng(0)
    x = rng.gamma(2.0, size=40)
    res = stats.bootstrap((x,), np.mean, n_resamples=2000, method="BCa", confidence_level=0.9, random_state=1)
    jack = np.array([np.delete(x, i).mean() for i in range(len(x))])
    ours = bootstrap_interval(
        res.bootstrap_distribution, level=0.9, kind="bca", estimate=x.mean(), jackknife=jack
    )
    assert ours.lo == pytest.approx(res.confidence_interval.low, rel=1e-10)
    assert ours.hi == pytest.approx(res.confidence_interval.high, rel=1e-10)
    pct = bootstrap_interval(res.bootstrap_distribution, level=0.9)
    assert pct.to_list() == pytest.approx(np.percentile(res.bootstrap_distribution, [5, 95]))


def test_acceleration_formula():
    jack = np.array([1.0, 2.0, 4.0, 8.0])
    d = jack.mean() - jack
    assert jackknife_acceleration(jack) == pytest.approx(np.sum(d**3) / (6 * np.sum(d**2) ** 1.5))
    assert jackknife_acceleration(np.ones(5)) == 0.0


def test_mc_error_of_a_percentile_end():
    """For B normal draws the sd of the 2.5% and 97.5% quantiles is sqrt(p(1-p)/B) / pdf(z).
    One estimate scatters by ~25% (any estimator does), so average 20 of them."""
    rng = np.random.default_rng(3)
    errors = np.array([bootstrap_interval(rng.standard_normal(1000), mc_seed=i).mc_error for i in range(20)])
    expected = np.sqrt(0.025 * 0.975 / 1000) / stats.norm.pdf(stats.norm.ppf(0.975))
    assert errors.mean(axis=0) == pytest.approx([expected, expected], rel=0.15)


def test_interval_of_a_derived_quantity(noisy_boot):
    # percentile intervals carry over monotone maps: 4^phi (a shared block's worth at r = 4)
    iv = noisy_boot.interval(lambda p: 4.0 ** p["phi"])
    lo, hi = noisy_boot.ci["phi"]
    assert iv.lo == pytest.approx(4.0**lo, rel=2e-3) and iv.hi == pytest.approx(4.0**hi, rel=2e-3)
    assert iv.n_used == noisy_boot.n_boot - noisy_boot.n_failed
    # BCa from a function equals BCa from arrays with the estimate and jackknife given
    bca = noisy_boot.interval(lambda p: 4.0 ** p["phi"], kind="bca")
    manual = noisy_boot.interval(
        4.0 ** noisy_boot.params["phi"],
        kind="bca",
        estimate=4.0 ** noisy_boot.estimate["phi"],
        jackknife=4.0 ** noisy_boot.jackknife_params["phi"],
    )
    assert bca.to_list() == manual.to_list()
    assert noisy_boot.interval(
        noisy_boot.params["phi"],
        kind="bca",
        estimate=noisy_boot.estimate["phi"],
        jackknife=noisy_boot.jackknife_params["phi"],
    ).to_list() == pytest.approx(noisy_boot.ci_bca["phi"])
    with pytest.raises(ValueError, match="BCa interval needs the point estimate"):
        noisy_boot.interval(noisy_boot.params["phi"], kind="bca")
    with pytest.raises(ValueError, match="one value per replicate"):
        noisy_boot.interval(np.ones(3))


def test_lsq_bootstrap(noisy):
    from phifit.fitters.lsq import fit_lsq

    runs, _ = noisy
    point = fit_lsq(runs, n_starts=100)
    boot = block_bootstrap(runs, point, n_boot=60, seed=0, n_jobs=1, progress=False)
    assert boot.method == "lsq" and boot.n_failed == 0
    assert boot.ci["phi"][0] < point.phi < boot.ci["phi"][1]


# -- acceptance 2: coverage (slow) ----------------------------------------------------------


def _coverage_table(index: int, replicates: int) -> tuple[float, list[float]]:
    frame = simulate("paper", noise=0.004, seed=10_000 + index)
    runs = table_from_frame(frame)
    point = fit_huber(runs, options=HuberOptions(seed=index))
    boot = block_bootstrap(
        runs, point, n_boot=replicates, seed=index, n_jobs=1, progress=False, jackknife=False
    )
    return point.phi, boot.ci["phi"]


@pytest.mark.slow
def test_percentile_interval_coverage():
    """>= 200 study-like tables (noise sd 0.004, R^2 ~ 0.997): the 95% percentile
    interval of phi covers the truth in 90-98% of them.  Same tables, seeds and replicates
    as ``benchmarks/bootstrap_coverage.py`` (which prints BCa, widths and more): measured 0.910."""
    from joblib import Parallel, delayed

    rows = Parallel(n_jobs=2)(delayed(_coverage_table)(i, 300) for i in range(200))
    truth = TRUTH["phi"]
    covered = np.mean([lo <= truth <= hi for _, (lo, hi) in rows])
    bias = np.mean([phi for phi, _ in rows]) - truth
    assert 0.90 <= covered <= 0.98, covered
    assert abs(bias) < 0.01


# -- command line ---------------------------------------------------------------------------


def test_cli_fit_bootstrap_json_contract(tmp_path, capsys):
    from phifit.cli import main

    runs, out = tmp_path / "runs.csv", tmp_path / "fit.json"
    assert main(["simulate", "--noise", "0.004", "--seed", "4", "--out", str(runs)]) == 0
    assert main(["fit", str(runs), "--bootstrap", "60", "--seed", "3", "--quiet", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "95% CI (percentile)" in text and "block bootstrap, 60 replicates" in text
    data = json.loads(out.read_text())
    assert set(data["ci"]) == set(PARAM_NAMES) and set(data["ci_bca"]) == set(PARAM_NAMES)
    assert data["bootstrap"]["n"] == 60 and data["bootstrap"]["block"] == "budget,r"
    assert data["bootstrap"]["n_failed"] == 0
    lo, hi = data["ci"]["phi"]
    assert lo < data["params"]["phi"] < hi
    # same seed, same intervals
    assert main(["fit", str(runs), "--bootstrap", "60", "--seed", "3", "--quiet", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["ci"] == data["ci"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bootstrap", "1"], "--bootstrap must be >= 2"),
        (["--bootstrap", "10", "--block", "nope"], "no column(s) 'nope'"),
        (["--block", "r"], "--block only applies with --bootstrap"),
        (["--baseline", "x"], "--baseline needs --by"),
        (["--bootstrap", "10", "--method", "bayes"], "work with --method huber or lsq"),
    ],
)
def test_cli_fit_bad_bootstrap_arguments(tmp_path, capsys, argv, message):
    from phifit.cli import main

    runs = tmp_path / "runs.csv"
    main(["simulate", "--out", str(runs)])
    capsys.readouterr()
    assert main(["fit", str(runs), *argv]) == 2
    assert message in capsys.readouterr().err


def test_non_looped_table_has_no_phi_interval(paper_noisy):
    runs = table_from_frame(paper_noisy.frame[paper_noisy.frame.r == 1].drop(columns=["budget"]))
    point = fit_huber(runs)
    boot = block_bootstrap(runs, point, n_boot=40, seed=0, n_jobs=1, progress=False)
    assert boot.block == "run" and boot.n_blocks == 29 and not boot.phi_identified
    assert "phi" not in boot.ci and boot.estimate["phi"] is None
    fitted = boot.attach(point)
    assert fitted.params["phi"] is None and set(fitted.ci) == {"E", "A", "alpha", "B", "beta"}


def test_iid_bootstrap_reproduces_epochs_chinchilla_errors(shared_dir):
    """Epoch AI's replication (reference-results.md): 4,000 iid resamples of the 240
    Chinchilla points give standard errors A 124.52, B 1293.28, E 0.02566, alpha 0.01540,
    beta 0.02060 and 95% percentile CIs E (1.769, 1.871), alpha (0.317, 0.373),
    beta (0.331, 0.415).  With as many replicates, single runs as blocks, agree within 6% on
    the errors and 1% on the interval ends (their objective is a Huber likelihood with one
    BFGS start, ours the summed Huber with warm + spread starts; Monte-Carlo error ~1%)."""
    import pandas as pd

    df = pd.read_csv(shared_dir / "reference" / "epoch_chinchilla_svg_extracted_data.csv")
    df = df[df["loss"] < sorted(df["loss"])[-5]]
    runs = table_from_frame(
        pd.DataFrame(
            {
                "n_once": df["Model Size"],
                "tokens": df["Training FLOP"] / (6 * df["Model Size"]),
                "loss": df["loss"],
            }
        )
    )
    boot = block_bootstrap(
        runs, fit_huber(runs), n_boot=4000, seed=0, n_jobs=2, progress=False, jackknife=False
    )
    assert boot.block == "run" and boot.n_failed == 0
    epoch_se = {"A": 124.52, "B": 1293.28, "E": 0.02566, "alpha": 0.01540, "beta": 0.02060}
    for name, se in epoch_se.items():
        assert np.std(boot.params[name], ddof=1) == pytest.approx(se, rel=0.06), name
    epoch_ci = {"E": (1.769, 1.871), "alpha": (0.317, 0.373), "beta": (0.331, 0.415)}
    for name, ci in epoch_ci.items():
        assert boot.ci[name] == pytest.approx(ci, rel=0.01), name


# -- replicates the vectorised LM leaves unconverged ----------------------------------------


def _duplicated(runs, counts):
    """The resampled table written out: run i repeated counts[i] times."""
    frame = runs.frame.loc[np.repeat(np.arange(len(runs)), counts.astype(int))].copy()
    frame["run_id"] = [f"{rid}#{k}" for k, rid in enumerate(frame["run_id"])]
    return table_from_frame(frame.reset_index(drop=True))


@pytest.mark.parametrize("method", ["huber", "lsq"])
def test_polish_finishes_unconverged_replicates_at_the_weighted_optimum(noisy, method):
    """A replicate stopped after 3 LM steps is finished by the polish, at the optimum of the
    resampled table written out run by run (same objective to 1e-9)."""
    from phifit.fitters import refit as B
    from phifit.fitters.lsq import fit_lsq
    from phifit.fitters.objective import huber
    from phifit.law import log_loss

    runs, point = noisy
    spec = LawSpec()
    codes, _ = block_codes(runs, None)
    weights = draw_weights(codes, 3, np.random.default_rng(11))
    delta = 1e-3 if method == "huber" else np.inf
    problem = B.RefitProblem(
        design=runs.design, y=runs.log_loss, fixed={}, bounds=dict(spec.bounds), delta=delta, max_iter=3
    )
    x_hat = point.theta[spec.free_mask] + 0.05
    out = B.refit_chunk(problem, weights, x_hat, np.empty((3, 0, 6)))
    assert out["polished"].all() and out["converged"].all()
    for w, x, obj in zip(weights, out["x"], out["objective"]):
        table = _duplicated(runs, w)
        ref = fit_huber(table) if method == "huber" else fit_lsq(table, n_starts=100, profile=False)
        theta = spec.full_theta(x)
        assert theta[-1] == pytest.approx(ref.phi, abs=1e-5)
        res = log_loss(theta, table.design) - table.log_loss
        mine = huber(res, delta).sum() if method == "huber" else 0.5 * np.sum(res**2)
        assert obj == pytest.approx(mine, rel=1e-9)
        ref_res = log_loss(ref.theta, table.design) - table.log_loss
        ref_obj = huber(ref_res, delta).sum() if method == "huber" else 0.5 * np.sum(ref_res**2)
        assert obj <= ref_obj * (1 + 1e-9)


def test_polish_refuses_fractional_huber_weights(noisy):
    from phifit.fitters.polish import polish

    runs, point = noisy
    spec = LawSpec()
    w = np.full(len(runs), 0.5)
    assert polish(point.theta, spec, runs.design, runs.log_loss, 1e-3, w) is None
    assert polish(point.theta, spec, runs.design, runs.log_loss, np.inf, w).status > 0


def test_bootstrap_on_a_table_with_a_loose_e_polishes_instead_of_failing():
    """On the bundled real runs, E slides to its bound in many resamples: those replicates are
    polished, none fails, the count is reported and survives the JSON round trip."""
    from pathlib import Path

    from phifit.recipes.delta import select_recipe
    from phifit.runs.table import load_runs

    table = Path(__file__).resolve().parents[1] / "data" / "cpu_small_runs.csv"
    runs = select_recipe(load_runs(table)).runs
    boot = block_bootstrap(runs, fit_huber(runs), n_boot=40, seed=0, n_jobs=1, progress=False)
    assert boot.n_failed == 0 and boot.n_polished >= 3
    assert f"finished by the least-squares polish: {boot.n_polished}" in boot.summary()
    assert any("E in" in w.message and "box bound" in w.message for w in boot.warnings)
    again = BootstrapResult.from_dict(json.loads(json.dumps(boot.to_dict())))
    assert again.n_polished == boot.n_polished == boot.bootstrap_info()["n_polished"]


def test_a_bootstrap_started_beside_other_work_is_the_bootstrap():
    """start_block_bootstrap returns at once with its refits running on the workers; other
    parallel work (a comparison, as the report runs one beside it) may run meanwhile, and
    ``result()`` is block_bootstrap's result, replicate for replicate."""
    from phifit.bootstrap.block import start_block_bootstrap
    from phifit.compare.restricted import compare_fits

    runs = paper_table(noise=0.004, seed=8)
    fit = fit_huber(runs, n_starts=60)
    pending = start_block_bootstrap(runs, fit, n_boot=300, seed=4, n_jobs=2, progress=False, chunk_size=100)
    compare_fits(runs, fit, n_starts=40, n_wild=0, n_jobs=2)
    beside = pending.result()
    alone = block_bootstrap(runs, fit, n_boot=300, seed=4, n_jobs=1, progress=False)
    np.testing.assert_array_equal(beside.thetas, alone.thetas)
    assert beside.to_dict() == alone.to_dict()
