"""Every result type saves to JSON and reloads field by field (phifit.serialize.JsonIO).

Each result comes from a real, small computation on the study's digitized runs (or, for the
recipes, a small simulated two-recipe table), is written with ``to_json(path)``, reloaded
with ``from_json(path)`` and compared field by field (:func:`assert_same`): numbers exactly,
NaN and +-inf as the serializer writes them (null, back as NaN where the field is a float and
as None where it holds anything), nested results as their own types, arrays as arrays.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from phifit.bootstrap.block import block_bootstrap
from phifit.bootstrap.result import BootstrapResult
from phifit.bootstrap.wild import WildTest, wild_cluster_test
from phifit.cautions import Caution
from phifit.compare.restricted import Comparison, FitStats, compare_fits
from phifit.diagnostics.suite import (
    Consistency,
    Diagnostics,
    GroupRow,
    Identifiability,
    Influence,
    ResidualDiagnostics,
    ResidualTest,
    consistency,
    diagnose,
    identifiability,
    influence,
    residual_diagnostics,
)
from phifit.equivalence import Equivalence, EquivalenceTable, equivalence_table, paper_example
from phifit.fitters.huber import fit_huber
from phifit.fitters.likelihood import GaussianScore, LRTest
from phifit.fitters.lsq import fit_lsq
from phifit.frontier import Frontier, IsoflopCurves, TableFamily, frontier, isoflop_curves
from phifit.intervals import Interval
from phifit.isoflop import ParabolaMinima, parabola_minima, table_budgets
from phifit.law import REFERENCE_PARAMS, LawSpec
from phifit.plan.design import PlanResult, phi_on_box, plan_design
from phifit.plan.inputs import Misfit, NoiseModel, design_from_table, misfit_from_pilot, noise_from_pilot
from phifit.plan.modes import AsymptoticPlan, SimulatedPlan
from phifit.plan.rounds import AdaptiveRounds, RoundRow, append_record, load_rounds
from phifit.predict import Prediction, predict
from phifit.recipes.delta import RecipeComparison, compare_recipes
from phifit.recipes.shared_phi import JointFit
from phifit.report.analysis import Analysis, AnalysisOptions
from phifit.result import FitResult
from phifit.runs.table import load_runs, table_from_frame
from phifit.serialize import JsonIO
from phifit.simulation import simulate

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "data" / "looped_study_runs_digitized.csv"
REPORTS = sorted(p.parent for p in (ROOT / "reports").glob("*/results.json"))
#: What ``phifit report`` adds to ``Analysis.to_dict()`` in results.json (the files it wrote).
WRITER_KEYS = ("figures", "files")


# -- the comparison ----------------------------------------------------------------------------
def assert_same(a, b, path: str = "result") -> None:
    """``b`` (reloaded) equals ``a`` field by field; NaN/inf as the JSON serializer writes them."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(b) is type(a), f"{path}: {type(b).__name__} is not {type(a).__name__}"
        for f in dataclasses.fields(a):
            if f.compare:  # a field outside the value (a fit's InferenceData) is not in the JSON
                assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{path}: {type(b).__name__} is not an array"
        assert a.shape == b.shape, f"{path}: shape {b.shape} is not {a.shape}"
        if a.dtype.kind == "f":
            same = np.isnan(b) if b.dtype.kind == "f" else np.zeros(b.shape, bool)
            bad = ~((a == b) | (~np.isfinite(a) & same))
            assert not bad.any(), f"{path}: differs at {np.argwhere(bad)[:3].tolist()}"
        else:
            assert a.dtype == b.dtype and np.array_equal(a, b), f"{path}: {b} is not {a}"
    elif isinstance(a, Mapping):
        assert isinstance(b, Mapping), f"{path}: {type(b).__name__} is not a mapping"
        assert list(a) == list(b), f"{path}: keys {list(b)} are not {list(a)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{path}: {b!r} is not {a!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, (bool, np.bool_)):
        assert isinstance(b, (bool, np.bool_)) and bool(a) == bool(b), f"{path}: {b!r} is not {a!r}"
    elif isinstance(a, (float, np.floating)) and not math.isfinite(a):
        # JSON has no NaN or inf: the serializer writes null, read back as NaN or None
        assert b is None or (isinstance(b, float) and math.isnan(b)), f"{path}: {b!r} is not {a!r}"
    elif isinstance(a, (int, float, np.integer, np.floating)):
        assert isinstance(b, (int, float, np.integer, np.floating)) and not isinstance(b, bool), (
            f"{path}: {b!r} is not {a!r}"
        )
        assert a == b, f"{path}: {b!r} is not {a!r} (difference {float(b) - float(a):.3g})"
    else:
        assert a == b, f"{path}: {b!r} is not {a!r}"


def round_trip(result: JsonIO, tmp_path: Path, name: str = "x.json") -> JsonIO:
    """Write ``result`` to a file, reload it as its own type, check it field by field and that
    it writes the same JSON again."""
    path = tmp_path / name
    text = result.to_json(path)
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(text)
    back = type(result).from_json(path)
    assert_same(result, back)
    assert back.to_dict() == json.loads(text)
    assert_same(result, type(result).from_json(text))  # from the JSON text as from the file
    return back


def test_the_comparison_catches_a_changed_number():
    """assert_same fails on a change in the last digit, a lost array, a wrong nested type."""
    fit = FitResult("huber", {"phi": 0.43}, 3, 1.0, "x", 0.9, 0.1, True)
    with pytest.raises(AssertionError, match="params"):
        assert_same(fit, fit.with_updates(params={"phi": np.nextafter(0.43, 1.0)}))
    with pytest.raises(AssertionError, match="not an array"):
        assert_same(np.array([1.0]), [1.0])
    with pytest.raises(AssertionError, match="is not Caution"):
        assert_same([Caution("a", "b", "c")], [{"source": "a", "kind": "b", "message": "c"}])
    assert_same({"x": float("nan")}, {"x": None})  # NaN is written as null


# -- fixtures: small real computations ------------------------------------------------------------
@pytest.fixture(scope="module")
def runs():
    return load_runs(STUDY)


@pytest.fixture(scope="module")
def huber(runs):
    return fit_huber(runs, n_starts=40, seed=0)


@pytest.fixture(scope="module")
def boot(runs, huber):
    return block_bootstrap(runs, huber, n_boot=12, seed=0, n_jobs=1, progress=False)


# -- fits ----------------------------------------------------------------------------------------
def test_huber_fit(huber, boot, tmp_path):
    back = round_trip(huber, tmp_path)
    assert isinstance(back.warnings, list)
    assert back.log_lik == huber.log_lik and back.aic is not None and back.bic is not None
    # with a bootstrap attached (intervals, bookkeeping)
    attached = round_trip(boot.attach(huber), tmp_path, "attached.json")
    assert attached.ci["phi"] == boot.attach(huber).ci["phi"]


def test_lsq_fit(runs, tmp_path):
    fit = fit_lsq(runs, n_starts=40, seed=0)
    back = round_trip(fit, tmp_path)
    assert back.loss == "squares" and back.delta is None and back.extras["correlation"]


def test_fit_with_phi_fixed(runs, tmp_path):
    fit = fit_huber(runs, spec=LawSpec(fixed={"phi": 0.0}), n_starts=20, seed=0)
    back = round_trip(fit, tmp_path)
    assert back.fixed == {"phi": 0.0} and back.n_free == 5


def test_fit_stores_the_working_likelihood_compare_uses(runs, huber):
    """log_lik, AIC and BIC are the Gaussian score of the log-loss residuals (fitters.likelihood)."""
    log_resid = runs.log_loss - np.log(runs.loss - np.asarray(huber.residuals))
    score = GaussianScore.from_residuals(log_resid, 6)
    assert huber.log_lik == pytest.approx(score.log_lik, rel=1e-9)
    assert huber.aic == pytest.approx(score.aic, rel=1e-9) and huber.bic == pytest.approx(score.bic, rel=1e-9)
    n = len(runs)
    assert huber.aic == pytest.approx(-2 * huber.log_lik + 2 * 7, rel=1e-12)
    assert huber.bic == pytest.approx(-2 * huber.log_lik + 7 * math.log(n), rel=1e-12)
    text = huber.summary()
    assert f"{huber.aic:.2f} / {huber.bic:.2f}" in text and f"{huber.log_lik:.4f}" in text
    assert "--bootstrap" not in text and "phifit " not in text


def test_a_fit_saved_without_the_likelihood_reloads_and_rewrites_the_same(huber):
    data = huber.to_dict()
    for key in ("log_lik", "aic", "bic"):
        del data[key]
    old = FitResult.from_dict(data)
    assert old.log_lik is None and old.to_dict() == data
    assert "AIC" not in old.summary()


# -- bootstrap, tests, intervals ------------------------------------------------------------------
def test_bootstrap_result(boot, tmp_path):
    back = round_trip(boot, tmp_path)
    assert isinstance(back.thetas, np.ndarray) and back.thetas.shape == (12, 6)
    assert back.failed.dtype == bool


def test_interval(boot, tmp_path):
    iv = boot.interval(boot.thetas[:, 5], kind="percentile")
    assert isinstance(iv, Interval)
    back = round_trip(iv, tmp_path)
    assert isinstance(back.mc_error, tuple)


def test_wild_test(runs, huber, tmp_path):
    null = fit_huber(runs, spec=LawSpec(fixed={"phi": 1.0}), n_starts=20, seed=0)
    test = wild_cluster_test(runs, huber, null, n_boot=19, seed=0)
    assert isinstance(test, WildTest)
    round_trip(test, tmp_path)


@pytest.fixture(scope="module")
def comparison(runs, huber):
    return compare_fits(runs, huber, n_starts=20, n_wild=19)


def test_comparison(comparison, tmp_path):
    back = round_trip(comparison, tmp_path)
    assert all(isinstance(f, FitResult) for f in back.fits.values())
    assert all(isinstance(s, FitStats) for s in back.stats.values())
    assert any(isinstance(s.wild, WildTest) for s in back.stats.values())


def test_fit_aic_is_the_comparisons(comparison, huber):
    """The AIC a fit stores is the one compare reports for the same (free) fit."""
    for label, fit in comparison.fits.items():
        stats = comparison.stats[label]
        assert (fit.log_lik, fit.aic, fit.bic) == pytest.approx(
            (stats.log_lik, stats.aic, stats.bic), rel=1e-12
        )


@pytest.fixture(scope="module")
def recipes():
    base = simulate("paper", params={**REFERENCE_PARAMS, "phi": 0.45}, noise=0.005, seed=1)
    base["variant"] = "baseline"
    probe = simulate("paper", params={**REFERENCE_PARAMS, "phi": 0.65}, noise=0.005, seed=2)
    probe["variant"] = "probe"
    probe["run_id"] = probe["run_id"] + "_probe"
    table = table_from_frame(pd.concat([base, probe[probe.r > 1]], ignore_index=True))
    return compare_recipes(table, n_boot=8, seed=0, n_jobs=1, n_starts=20, n_wild=19)


def test_recipe_comparison_and_joint_fit(recipes, tmp_path):
    back = round_trip(recipes, tmp_path)
    assert isinstance(back.joint, JointFit) and isinstance(back.joint.lr, LRTest)
    joint = round_trip(recipes.joint, tmp_path, "joint.json")
    # the joint fits store the same working likelihood as their scores
    for fit, score in ((joint.fit, joint.score), (joint.shared, joint.shared_score)):
        assert (fit.log_lik, fit.aic, fit.bic) == pytest.approx(
            (score.log_lik, score.aic, score.bic), rel=1e-9
        )


# -- diagnostics ---------------------------------------------------------------------------------
def test_residual_diagnostics_and_parts(runs, huber, tmp_path):
    res = residual_diagnostics(runs, huber)
    back = round_trip(res, tmp_path)
    assert isinstance(back.pooled, GroupRow) and all(isinstance(t, ResidualTest) for t in back.tests)
    round_trip(res.pooled, tmp_path, "row.json")
    round_trip(res.tests[0], tmp_path, "test.json")


def test_identifiability(runs, huber, tmp_path):
    ident = identifiability(runs, huber, profile_points=7, profile_starts=2)
    assert isinstance(round_trip(ident, tmp_path), Identifiability)


def test_influence_and_consistency(runs, huber, tmp_path):
    infl = influence(runs, huber, n_spread=1)
    assert isinstance(round_trip(infl, tmp_path), Influence)
    cons = consistency(runs, huber, n_starts=4)
    assert isinstance(round_trip(cons, tmp_path, "cons.json"), Consistency)


def test_diagnostics_keep_their_own_cautions(runs, tmp_path):
    """With phi fixed, influence is skipped with a caution of the orchestrator's own: it is
    rebuilt as such (not folded into the residual or identifiability cautions)."""
    fixed = fit_huber(runs, spec=LawSpec(fixed={"phi": 0.5}), n_starts=20, seed=0)
    diag = diagnose(runs, fixed)
    assert diag.cautions and diag.influence is None
    back = round_trip(diag, tmp_path)
    assert isinstance(back, Diagnostics) and isinstance(back.residuals, ResidualDiagnostics)
    assert back.notes == diag.notes and back.warnings == diag.warnings


# -- derived quantities --------------------------------------------------------------------------
def test_equivalence(runs, huber, boot, tmp_path):
    table = equivalence_table(runs, huber, thetas=boot.thetas)
    back = round_trip(table, tmp_path)
    assert all(isinstance(e, Equivalence) for e in back.rows) and isinstance(back, EquivalenceTable)
    round_trip(paper_example(0.459)["with_injection"], tmp_path, "one.json")


def test_frontier_family_and_isoflop_curves(runs, huber, boot, tmp_path):
    family = TableFamily.from_runs(runs)
    back = round_trip(family, tmp_path, "family.json")
    assert set(back.coef) == set(family.coef) and all(isinstance(r, int) for r in back.coef)
    front = frontier(huber, family, table_budgets(runs), thetas=boot.thetas, points=101)
    back = round_trip(front, tmp_path)
    assert isinstance(back, Frontier) and all(isinstance(r, int) for r in back.l_star)
    curves = isoflop_curves(huber, runs, points=8)
    assert isinstance(round_trip(curves, tmp_path, "curves.json"), IsoflopCurves)


def test_parabola_minima(runs, tmp_path):
    minima = parabola_minima(runs)
    back = round_trip(minima, tmp_path)
    assert isinstance(back, ParabolaMinima) and back.gap_range == minima.gap_range


def test_prediction(huber, boot, tmp_path):
    pred = predict(
        huber,
        points={"r": [1, 4], "n_once": [3e8, 2e8], "n_rec": [0.0, 2e8], "tokens": [2e10, 2e10]},
        budgets=[1e20],
        thetas=boot.thetas,
        source="fit",
    )
    assert isinstance(round_trip(pred, tmp_path), Prediction)


# -- planning ------------------------------------------------------------------------------------
def test_plan_result_with_simulation_and_misfit(runs, huber, tmp_path):
    noise = noise_from_pilot(runs, huber)
    assert isinstance(round_trip(noise, tmp_path, "noise.json"), NoiseModel)
    misfit = misfit_from_pilot(runs, huber)
    back = round_trip(misfit, tmp_path, "misfit.json")
    assert isinstance(back, Misfit) and all(isinstance(k, tuple) for k in back.offsets)
    plan = plan_design(
        design_from_table(runs),
        params=huber.params,
        noise=noise,
        n_tables=2,
        n_boot=8,
        n_wild=39,
        n_jobs=1,
        progress=False,
    )
    back = round_trip(plan, tmp_path)
    assert isinstance(back.asymptotic, AsymptoticPlan) and isinstance(back.simulation, SimulatedPlan)
    assert isinstance(back.noise, NoiseModel)
    round_trip(plan.asymptotic, tmp_path, "asym.json")
    round_trip(plan.simulation, tmp_path, "sim.json")


# -- the report's results.json -------------------------------------------------------------------
def test_analysis_options(tmp_path):
    round_trip(AnalysisOptions(n_boot=10, n_starts=3, plan="self"), tmp_path)


@pytest.mark.parametrize("folder", REPORTS, ids=[p.name for p in REPORTS])
def test_shipped_results_reload_as_an_analysis(folder, tmp_path):
    """Every shipped report's results.json reloads, every result as its type, and writes the
    same content again (what the report adds, its file list, is not the Analysis'; options
    and keys newer than the file come back as their defaults)."""
    raw = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    analysis = Analysis.from_json(folder / "results.json")
    assert isinstance(analysis.fit, FitResult) and isinstance(analysis.diagnostics, Diagnostics)
    assert analysis.bootstrap is None or isinstance(analysis.bootstrap, BootstrapResult)
    assert analysis.comparison is None or isinstance(analysis.comparison, Comparison)
    assert analysis.recipes is None or isinstance(analysis.recipes, RecipeComparison)
    assert analysis.plan is None or isinstance(analysis.plan, PlanResult)
    assert all(isinstance(c, Caution) for c in analysis.cautions)
    again = json.loads(json.dumps(analysis.to_dict(), allow_nan=False))
    expected = {k: v for k, v in raw.items() if k not in WRITER_KEYS}
    defaults = dataclasses.asdict(AnalysisOptions())
    for key in set(again["options"]) - set(expected["options"]):
        expected["options"][key] = defaults[key]  # an option newer than the file
    if "plan" not in expected:
        expected["plan"] = None  # a file written before the report planned
    if expected["plan"] is not None:
        expected["plan"].setdefault("conditioning", None)  # written before plans checked the design
        # written before plans declined a width on the box: derived from the law planned under
        expected["plan"].setdefault("width_is_precision", not phi_on_box(expected["plan"]["law"]))
    sim = (expected["plan"] or {}).get("simulation")
    if sim is not None:
        sim.setdefault("tests", True)  # written before simulations could skip the wild tests
        if sim.get("misfit"):
            sim["misfit"].setdefault("tau", 0.0)
            sim["misfit"].setdefault("cell_noise", 0.0)
    assert again == expected
    # and the reloaded Analysis itself survives a second trip through a file
    path = tmp_path / "results.json"
    analysis.to_json(path)
    assert_same(analysis, Analysis.from_json(path))


def adaptive_rounds(folder: Path) -> AdaptiveRounds:
    """A round log of a pilot, a finished round, a round still training, and no stop yet."""
    log = folder / "runs.csv.d" / "adaptive.jsonl"
    base = {"time": "2026-01-01T00:00:00+00:00", "spec": "cpu_small"}
    pick = {"run_id": "baseline-r4-d32-C4e12-s0-x", "budget": 4e12, "r": 4, "size": 32, "flops": 4e12}
    append_record(
        log,
        {
            **base,
            "event": "outcome",
            "round": 0,
            "n_runs": 12,
            "flops": 2.4e13,
            "phi": 0.6,
            "phi_ci": [None, None],
            "width_realised": None,
            "note": "interval withheld",
        },
    )
    append_record(
        log,
        {
            **base,
            "event": "decision",
            "round": 1,
            "n_runs": 12,
            "flops": 2.4e13,
            "width_now": 4.37,
            "width_predicted": 3.39,
            "picks": [{**pick, "width_after": 3.39, "why": "a new (budget, r) cell"}],
        },
    )
    append_record(
        log,
        {
            **base,
            "event": "outcome",
            "round": 1,
            "n_runs": 13,
            "flops": 2.8e13,
            "adaptive_flops": 4e12,
            "phi": 0.61,
            "phi_ci": [-2.9, 0.84],
            "width_realised": 3.74,
        },
    )
    append_record(
        log,
        {
            **base,
            "event": "decision",
            "round": 2,
            "n_runs": 13,
            "flops": 2.8e13,
            "width_now": 1.04,
            "width_predicted": 0.77,
            "picks": [],
            "target_width": 0.5,
        },
    )
    return load_rounds(log)


def test_adaptive_rounds(tmp_path):
    rounds = adaptive_rounds(tmp_path)
    assert [r.finished for r in rounds.rounds] == [True, True, False] and rounds.target_width == 0.5
    back = round_trip(rounds, tmp_path)
    assert all(isinstance(r, RoundRow) for r in back.rounds)


def test_results_with_adaptive_rounds_reload_as_an_analysis(tmp_path):
    """A report's results.json with the 'adaptive' section reloads it as AdaptiveRounds and
    writes the same content again."""
    raw = json.loads((REPORTS[0] / "results.json").read_text(encoding="utf-8"))
    raw = {k: v for k, v in raw.items() if k not in WRITER_KEYS}
    raw["adaptive"] = adaptive_rounds(tmp_path).to_dict()
    analysis = Analysis.from_dict(raw)
    assert isinstance(analysis.adaptive, AdaptiveRounds)
    again = json.loads(json.dumps(analysis.to_dict(), allow_nan=False))
    assert again["adaptive"] == raw["adaptive"]
    path = tmp_path / "results.json"
    analysis.to_json(path)
    assert_same(analysis, Analysis.from_json(path))


# -- a Bayesian fit ------------------------------------------------------------------------------
@pytest.mark.slow
def test_bayes_fit(tmp_path):
    """A small posterior (2 chains x 300 draws, as tests/test_bayes.py's SMALL) round-trips."""
    pytest.importorskip("pymc")
    from phifit.fitters.bayes import fit_bayes

    table = table_from_frame(simulate("paper", params=REFERENCE_PARAMS, noise=0.005, seed=3))
    fit = fit_bayes(table, draws=300, tune=300, chains=2, progress=False)
    back = round_trip(fit, tmp_path)
    assert back.extras["posterior"] and back.log_lik is not None
