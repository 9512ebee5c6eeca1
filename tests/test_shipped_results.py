"""The bundled run tables and their committed reports: they match the code and each other.

``data/cpu_small_runs.csv`` and ``data/cpu_planned_runs.csv`` hold real runs of the bundled trainer,
``data/looped_study_runs_digitized.csv`` the reference study's runs read off its figure and
``data/paper_design_simulated.csv`` its design with simulated losses; ``reports/*/`` are
``phifit report`` on them.  These tests check numbers only: that the tables are what they claim to
be, that fresh fits give the shipped estimates (the slow test: the whole bootstrap, to 1e-6), and
that the shipped numbers say what the documentation's prose says of them.  The README and the docs
quote the reports only through the tables ``docs/results_table.py`` generates
(``tests/test_docs.py`` checks that they are current); no test here reads prose.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from phifit.bootstrap.block import block_bootstrap
from phifit.fitters.huber import HuberOptions, fit_huber
from phifit.recipes.delta import select_recipe
from phifit.runs.table import load_runs

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "data" / "cpu_small_runs.csv"
RESULTS = ROOT / "reports" / "cpu_small" / "results.json"
STUDY_TABLE = ROOT / "data" / "looped_study_runs_digitized.csv"
STUDY_RESULTS = ROOT / "reports" / "looped_study" / "results.json"
SIMULATED_TABLE = ROOT / "data" / "paper_design_simulated.csv"
SIMULATED_RESULTS = ROOT / "reports" / "paper_design_simulated" / "results.json"
#: the study's published phi and its 95% interval (arXiv 2604.21106, Table 2)
PUBLISHED_PHI, PUBLISHED_CI = 0.459, (0.41, 0.53)


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def by_r(results: dict) -> dict[int, dict]:
    """The report's mean residual per r (nats, t, flagged)."""
    return {int(g["group"]): g for g in results["diagnostics"]["residuals"]["by_r"]}


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def test_the_table_is_the_finished_cpu_small_sweep():
    """Every run of the main grid of trainers/sweeps/cpu_small.toml is in the table, once."""
    pytest.importorskip("torch")
    from phifit.trainers.sweep import load_spec, plan

    runs = load_runs(TABLE)
    ids = list(runs.frame["run_id"])
    main = {r.run_id for r in plan(load_spec("cpu_small"), ["main"])}
    assert len(main) == 44 and main <= set(ids) and len(ids) == len(set(ids))
    everything = {r.run_id for r in plan(load_spec("cpu_small"), ["main", "variants"])}
    assert set(ids) <= everything  # no run from elsewhere
    assert len(runs) >= 36 and set(runs.frame["r"]) == {1, 2, 4, 8}


def test_the_cpu_small_report_is_of_its_baseline_runs(shipped):
    """The report fits the 44 baseline runs of the 86-run table; what docs/cpu-runs.md reads from
    it holds: phi = 1 rejected, phi = 0 not, the interval's lower end on the search box, replicates
    on that bound and more with phi <= 0, and the r = 2 runs flagged above the law."""
    assert shipped["fit"]["n_runs"] == shipped["data"]["n_runs"] == 44
    assert shipped["n_table_runs"] == len(load_runs(TABLE)) == 86
    fits = shipped["comparison"]["fits"]
    assert fits["phi=1"]["rejected"] and not fits["phi=0"]["rejected"]
    (lo, hi), box = shipped["fit"]["ci"]["phi"], shipped["fit"]["bounds"]["phi"]
    assert lo == pytest.approx(box[0]) and hi < 1
    regions = shipped["bootstrap"]["phi_regions"]
    assert 0 < regions["at lower bound"] < regions["phi <= 0"]
    assert by_r(shipped)[2]["flagged"] and by_r(shipped)[2]["mean"] > 0
    delta = shipped["recipes"]["delta_phi"]
    assert delta["hc"]["estimate"] > 0 and delta["hc"]["p_value"] > 0.05  # up, not established
    assert delta["tbptt"]["p_value"] > 0.05
    assert shipped["recipes"]["joint"]["wild_p_value"] < 0.05


def test_the_study_table_and_its_report():
    """The digitized study table is the study's 116-run grid; its report rejects phi = 0 and
    phi = 1, its interval holds the published phi, and a fresh fit gives the shipped phi."""
    from phifit.study import paper_design

    runs = load_runs(STUDY_TABLE)
    design = paper_design()
    for col in ("budget", "r", "size"):
        np.testing.assert_allclose(runs.frame[col].astype(float), design[col], rtol=1e-12)
    # the parameter split is the study's architecture (phifit.study), the tokens its batches
    np.testing.assert_allclose(runs.n_once, design["n_once"], rtol=1e-12)
    np.testing.assert_allclose(runs.n_rec, design["n_rec"], rtol=1e-12)
    np.testing.assert_allclose(runs.tokens, design["tokens"], rtol=1e-12)
    results = read(STUDY_RESULTS)
    assert results["fit"]["n_runs"] == results["n_table_runs"] == 116
    assert results["bootstrap"]["n_blocks"] == 24
    fits = results["comparison"]["fits"]
    for label in ("phi=0", "phi=1"):
        assert fits[label]["rejected"] and fits[label]["wild_p_value"] < 0.05
    lo, hi = results["fit"]["ci"]["phi"]
    assert lo < PUBLISHED_PHI < hi  # docs/study.md: the published value lies inside the interval
    assert results["fit"]["params"]["phi"] < PUBLISHED_PHI  # ... and the estimate sits below it
    assert by_r(results)[4]["flagged"] and by_r(results)[4]["mean"] < 0  # r = 4 below the law
    # the fit is the code's: a fresh fit of the table gives the shipped phi
    opts = results["options"]
    fit = fit_huber(runs, options=HuberOptions(n_starts=opts["n_starts"], seed=opts["seed"]))
    assert fit.phi == pytest.approx(results["fit"]["params"]["phi"], abs=1e-6)


def test_the_shipped_point_estimates_are_what_the_code_computes(shipped):
    """Fast guard: the Huber fit of the baseline and the Delta-phi point estimates (1e-6)."""
    from phifit.recipes.delta import compare_recipes

    opts = shipped["options"]
    table = load_runs(TABLE)
    runs = select_recipe(table, opts["baseline"]).runs
    fit = fit_huber(runs, options=HuberOptions(n_starts=opts["n_starts"], seed=opts["seed"]))
    assert fit.phi == pytest.approx(shipped["fit"]["params"]["phi"], abs=1e-6)
    if shipped.get("recipes"):
        rc = compare_recipes(
            table,
            baseline=opts["baseline"],
            n_boot=0,
            seed=opts["seed"],
            n_starts=opts["n_starts"],
            n_jobs=1,
            progress=False,
            joint=False,
        )
        for variant, saved in shipped["recipes"]["delta_phi"].items():
            assert rc.delta_phi[variant]["estimate"] == pytest.approx(saved["estimate"], abs=1e-6)


@pytest.mark.slow
def test_a_refit_reproduces_the_shipped_report(shipped):
    """Huber fit and block bootstrap with the saved options give the committed numbers (1e-6)."""
    opts = shipped["options"]
    runs = select_recipe(load_runs(TABLE), opts["baseline"]).runs
    fit = fit_huber(runs, options=HuberOptions(n_starts=opts["n_starts"], seed=opts["seed"]))
    saved = shipped["fit"]
    assert fit.n_runs == saved["n_runs"] and fit.run_ids == saved["run_ids"]
    assert fit.phi == pytest.approx(saved["params"]["phi"], abs=1e-6)
    for name, value in saved["params"].items():
        assert fit.params[name] == pytest.approx(value, rel=1e-6), name
    assert fit.r2 == pytest.approx(saved["r2"], abs=1e-6)
    boot = block_bootstrap(
        runs, fit, n_boot=opts["n_boot"], seed=opts["seed"], n_jobs=opts["n_jobs"], progress=False
    )
    refit = boot.attach(fit)
    np.testing.assert_allclose(refit.ci["phi"], saved["ci"]["phi"], rtol=0, atol=1e-6)
    assert boot.n_failed == shipped["bootstrap"]["n_failed"]
    from phifit.recipes.delta import compare_recipes

    rc = compare_recipes(
        load_runs(TABLE),
        baseline=opts["baseline"],
        n_boot=opts["n_boot"],
        seed=opts["seed"],
        n_starts=opts["n_starts"],
        n_jobs=opts["n_jobs"],
        progress=False,
    )
    for variant, saved in shipped["recipes"]["delta_phi"].items():
        np.testing.assert_allclose(rc.delta_phi[variant]["ci"], saved["ci"], rtol=0, atol=1e-6)
        assert rc.delta_phi[variant]["p_value"] == pytest.approx(saved["p_value"], abs=1e-12)


def test_results_json_names_its_table(shipped):
    """The report says which file it was made from, which recipe it analysed, and its options."""
    assert re.search(r"cpu_small_runs\.csv$", shipped["source"])
    assert shipped["fit"]["source"].endswith("cpu_small_runs.csv[variant=baseline]")
    assert set(shipped["options"]) >= {"n_boot", "n_starts", "seed", "n_jobs", "baseline"}
    assert shipped["options"]["n_boot"] >= 1000


def test_the_simulated_study_design_and_its_report():
    """The simulated table is the study's design (116 runs, 24 cells); its interval covers the
    true phi = 0.459 it was drawn with (docs/study.md)."""
    from phifit.study import paper_design

    runs = load_runs(SIMULATED_TABLE)
    np.testing.assert_allclose(runs.tokens, paper_design()["tokens"], rtol=1e-12)
    results = read(SIMULATED_RESULTS)
    assert results["fit"]["n_runs"] == 116 and results["bootstrap"]["n_blocks"] == 24
    assert re.search(r"paper_design_simulated\.csv$", results["source"])
    lo, hi = results["fit"]["ci"]["phi"]
    assert lo < PUBLISHED_PHI < hi


def test_the_planned_sweeps_predictions_are_of_its_design():
    """The cpu_planned sweep's two predictions are of its 88-run design: the prediction of record
    (200 tables, no misfit) and the misfit-aware one (100 tables)."""
    first = read(ROOT / "data" / "cpu_planned_prediction.json")
    s = first["simulation"]
    assert first["design"]["n_runs"] == 88 and s["n_tables"] == 200 and s["p_box"] == 0.0
    assert not s.get("misfit")
    assert len([t for t in s["tables"] if t.get("width") is not None]) == 200
    second = read(ROOT / "data" / "cpu_planned_prediction_misfit.json")
    m = second["simulation"]
    assert second["design"]["n_runs"] == 88
    assert m["misfit"] is not None and m["n_tables"] == 100
    assert m["width_median"] > s["width_q90"]  # the misfit-aware prediction: far wider


PLANNED_TABLE = ROOT / "data" / "cpu_planned_runs.csv"
PLANNED_RESULTS = ROOT / "reports" / "cpu_planned" / "results.json"


def test_the_planned_table_is_the_finished_cpu_planned_sweep():
    """Every run of trainers/sweeps/cpu_planned.toml is in the table, once, and nothing else."""
    pytest.importorskip("torch")
    from phifit.trainers.sweep import load_spec, plan

    ids = list(load_runs(PLANNED_TABLE).frame["run_id"])
    planned = {r.run_id for r in plan(load_spec("cpu_planned"))}
    assert len(planned) == 88 and set(ids) == planned and len(ids) == len(set(ids))


def test_the_planned_sweeps_outcome_against_its_prediction():
    """What docs/cpu-runs.md reads from the cpu_planned report: both restrictions rejected, as
    predicted; an interval inside the box but wider than almost all of the prediction of record's
    tables, near the misfit-aware prediction's median; r = 1 below and r = 2 above the law."""
    results = read(PLANNED_RESULTS)
    assert results["fit"]["n_runs"] == 88 and results["n_table_runs"] == 88
    assert re.search(r"cpu_planned_runs\.csv$", results["source"])
    (lo, hi), box = results["fit"]["ci"]["phi"], results["fit"]["bounds"]["phi"]
    assert box[0] < lo < 0 < hi < box[1]
    fits = results["comparison"]["fits"]
    assert fits["phi=0"]["rejected"] and fits["phi=1"]["rejected"]
    width = hi - lo
    record = read(ROOT / "data" / "cpu_planned_prediction.json")["simulation"]
    misfit = read(ROOT / "data" / "cpu_planned_prediction_misfit.json")["simulation"]
    assert width > record["width_q90"]
    assert misfit["width_q10"] < width < misfit["width_q90"]
    assert by_r(results)[1]["flagged"] and by_r(results)[1]["mean"] < 0
    assert by_r(results)[2]["flagged"] and by_r(results)[2]["mean"] > 0


def test_the_planned_sweeps_second_basin():
    """docs/cpu-runs.md's account of the wide interval: refitting the report's bootstrap (same
    options) gives its interval and its share of phi <= 0, and those replicates form a second
    basin below -1 (not a tail towards it) in which the 2.5% quantile falls."""
    results = read(PLANNED_RESULTS)
    opts = results["options"]
    runs = load_runs(PLANNED_TABLE)
    fit = fit_huber(runs, options=HuberOptions(n_starts=opts["n_starts"], seed=opts["seed"]))
    assert fit.phi == pytest.approx(results["fit"]["params"]["phi"], abs=1e-6)
    boot = block_bootstrap(runs, fit, n_boot=opts["n_boot"], seed=opts["seed"], progress=False)
    np.testing.assert_allclose(boot.ci["phi"], results["fit"]["ci"]["phi"], rtol=0, atol=1e-6)
    phi = np.asarray(boot.params["phi"], dtype=float)
    assert float((phi <= 0).mean()) == pytest.approx(results["bootstrap"]["phi_regions"]["phi <= 0"])
    assert int(((phi >= -1) & (phi < 0)).sum()) <= 1  # a second basin below -1, not a tail towards it
    assert 0.025 < float((phi < -1).mean()) < 0.1  # ... holding the 2.5% quantile
    assert results["fit"]["ci"]["phi"][0] < -1


ADAPTIVE_TABLE = ROOT / "data" / "cpu_adaptive_runs.csv"
ADAPTIVE_ROUNDS = ROOT / "data" / "cpu_adaptive_rounds.jsonl"
ADAPTIVE_RESULTS = ROOT / "reports" / "cpu_adaptive" / "results.json"
ADAPTIVE_PREDICTION = ROOT / "reports" / "cpu_adaptive" / "prediction_of_record.json"


def _rounds() -> list[dict]:
    from phifit.plan.rounds import read_records

    records, torn = read_records(ADAPTIVE_ROUNDS)
    assert torn == 0
    return records


def test_the_adaptive_table_is_its_pilot_and_round_log():
    """data/cpu_adaptive_runs.csv holds runs of trainers/sweeps/cpu_adaptive.toml only, once each:
    the new-recipe pilot's 44 runs (data/cpu_recipe_runs.csv, copied in) and exactly the runs the
    round log says the loop trained; each round's outcome fitted the runs in the table by then and
    every pick of a decision was trained in that round, and none diverged."""
    pytest.importorskip("torch")
    from phifit.trainers.sweep import load_spec, plan

    ids = list(load_runs(ADAPTIVE_TABLE).frame["run_id"])
    assert len(ids) == len(set(ids)) >= 60
    assert set(ids) <= {r.run_id for r in plan(load_spec("cpu_adaptive"))}
    pilot = set(load_runs(ROOT / "data" / "cpu_recipe_runs.csv").frame["run_id"])
    rounds = _rounds()
    outcomes = {r["round"]: r for r in rounds if r["event"] == "outcome"}
    decisions = {r["round"]: r for r in rounds if r["event"] == "decision"}
    trained = [set(outcomes[k]["trained"]) for k in sorted(outcomes)]
    assert set(ids) == pilot.union(*trained)
    assert all(not o["failed"] for o in outcomes.values())
    seen = set(pilot)
    for k in sorted(outcomes):
        seen |= set(outcomes[k]["trained"])
        assert outcomes[k]["n_runs"] == len(seen)
        if k:
            assert {p["run_id"] for p in decisions[k]["picks"]} == set(outcomes[k]["trained"])
    assert max(outcomes) == max(decisions)  # no decision left untrained in the shipped log


def test_the_adaptive_report_is_of_the_whole_table_and_its_prediction_of_the_design():
    """The report fits every run of the table; the prediction of record is of the spec's 92-run
    design (misfit carried, 100 simulated tables), made from the new-recipe pilot."""
    results = read(ADAPTIVE_RESULTS)
    n = len(load_runs(ADAPTIVE_TABLE).frame)
    assert results["fit"]["n_runs"] == results["n_table_runs"] == n
    assert re.search(r"cpu_adaptive_runs\.csv$", results["source"])
    pred = read(ADAPTIVE_PREDICTION)
    assert pred["design"]["n_runs"] == 92 and pred["simulation"]["n_tables"] == 100
    assert pred["simulation"]["misfit"] is not None
    assert "cpu_recipe_runs.csv" in pred["law_source"]
