"""The bundled real run tables and their committed reports: they match the code and the README.

``data/cpu_small_runs.csv`` holds real runs of the bundled trainer (the ``cpu_small`` sweep) and
``data/looped_study_runs_digitized.csv`` the reference study's runs read off its figure;
``reports/cpu_small/`` and ``reports/looped_study/`` are ``phifit report`` on them.  The slow test
refits the CPU table with the options saved in ``results.json`` and checks the shipped numbers to
1e-6, so they cannot drift from the code; the fast tests check that the tables are what they claim
to be and that the README quotes the shipped numbers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from phifit.bootstrap.block import block_bootstrap
from phifit.fitters.huber import HuberOptions, fit_huber
from phifit.intervals import interval_text
from phifit.recipes.delta import select_recipe
from phifit.runs.table import load_runs

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "data" / "cpu_small_runs.csv"
RESULTS = ROOT / "reports" / "cpu_small" / "results.json"
STUDY_TABLE = ROOT / "data" / "looped_study_runs_digitized.csv"
STUDY_RESULTS = ROOT / "reports" / "looped_study" / "results.json"


def quoted_fit(results: dict) -> str:
    """How the READMEs quote a shipped fit: phi, its interval (an end on the search box marked),
    R^2."""
    fit = results["fit"]
    (lo, hi), box = fit["ci"]["phi"], fit["bounds"]["phi"]
    interval = interval_text(lo, hi, box, fmt=lambda v: f"{v:.3f}")
    return f"phi = {fit['params']['phi']:.3f} (95% block-bootstrap interval {interval}, R² {fit['r2']:.4f})"


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


def test_readme_quotes_the_shipped_numbers(shipped):
    """The fitted phi, its interval and R^2 in both READMEs are those of results.json."""
    quoted = quoted_fit(shipped)
    for readme in (ROOT / "README.md", ROOT / "data" / "README.md"):
        text = " ".join(readme.read_text(encoding="utf-8").split())
        assert quoted in text, f"{readme.name} does not quote {quoted!r}"
    assert shipped["fit"]["n_runs"] == shipped["data"]["n_runs"] == 44
    assert shipped["n_table_runs"] == len(load_runs(TABLE))


def test_the_study_table_and_its_report_match_the_readme():
    """The digitized study table is the study's 116-run grid; the README's quick start reports on
    it (into an untracked folder) and quotes the committed report's phi, interval, R^2 and verdicts."""
    from phifit.study import paper_design

    runs = load_runs(STUDY_TABLE)
    design = paper_design()
    for col in ("budget", "r", "size"):
        np.testing.assert_allclose(runs.frame[col].astype(float), design[col], rtol=1e-12)
    # the parameter split is the study's architecture (phifit.study), the tokens its batches
    np.testing.assert_allclose(runs.n_once, design["n_once"], rtol=1e-12)
    np.testing.assert_allclose(runs.n_rec, design["n_rec"], rtol=1e-12)
    np.testing.assert_allclose(runs.tokens, design["tokens"], rtol=1e-12)
    results = json.loads(STUDY_RESULTS.read_text(encoding="utf-8"))
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert quoted_fit(results) in readme
    assert "phifit report data/looped_study_runs_digitized.csv --out reports/quickstart" in readme
    assert "reports/quickstart/" in (ROOT / ".gitignore").read_text()
    fits = results["comparison"]["fits"]
    for label in ("phi=0", "phi=1"):
        assert fits[label]["rejected"] and fits[label]["wild_p_value"] < 0.05
    assert f"R² free / phi = 0 / phi = 1 | {fits['free']['r2']:.4f} / {fits['phi=0']['r2']:.4f} / " in readme
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


def test_the_planned_sweeps_predictions_are_those_quoted():
    """The cpu_planned sweep's predictions (committed before its outcome) are quoted as computed."""
    import json

    def text(path):
        return " ".join(path.read_text(encoding="utf-8").split())

    data_readme, readme = text(ROOT / "data" / "README.md"), text(ROOT / "README.md")
    first = json.loads((ROOT / "data" / "cpu_planned_prediction.json").read_text())
    s, a = first["simulation"], first["asymptotic"]
    assert (
        f"| {a['width']:.3g} | median {s['width_median']:.3g} (10-90%: {s['width_q10']:.3g}-{s['width_q90']:.3g}) |"
        in data_readme
    )
    assert f"| {s['power']['phi=0']:.2f} ± {s['power_mc_se']['phi=0']:.2f} |" in data_readme
    assert f"| {s['power']['phi=1']:.2f} ± {s['power_mc_se']['phi=1']:.2f} |" in data_readme
    assert first["design"]["n_runs"] == 88 and s["n_tables"] == 200 and s["p_box"] == 0.0
    assert (
        f"median width {s['width_median']:.2f} (10-90% {s['width_q10']:.2f}-{s['width_q90']:.2f})" in readme
    )
    second = json.loads((ROOT / "data" / "cpu_planned_prediction_misfit.json").read_text())
    m = second["simulation"]
    assert m["misfit"] is not None and m["n_tables"] == 100
    assert (
        f"median width {m['width_median']:.3g} (10-90%: {m['width_q10']:.2g}-{m['width_q90']:.3g})"
        in data_readme
    )
    assert f"P(box) {m['p_box']:.2f}, power {m['power']['phi=0']:.2f} against phi = 0" in data_readme
    assert f"expects far wider, {m['width_median']:.2g}" in readme


PLANNED_TABLE = ROOT / "data" / "cpu_planned_runs.csv"
PLANNED_RESULTS = ROOT / "reports" / "cpu_planned" / "results.json"


def test_the_planned_table_is_the_finished_cpu_planned_sweep():
    """Every run of trainers/sweeps/cpu_planned.toml is in the table, once, and nothing else."""
    pytest.importorskip("torch")
    from phifit.trainers.sweep import load_spec, plan

    ids = list(load_runs(PLANNED_TABLE).frame["run_id"])
    planned = {r.run_id for r in plan(load_spec("cpu_planned"))}
    assert len(planned) == 88 and set(ids) == planned and len(ids) == len(set(ids))


def test_the_planned_sweeps_outcome_is_quoted_against_its_prediction():
    """The README quotes the cpu_planned report's phi, interval, width and wild p-values, next to
    the prediction of record, and where the realised width falls among the predicted tables."""

    def text(path):
        return " ".join(path.read_text(encoding="utf-8").split())

    results = json.loads(PLANNED_RESULTS.read_text(encoding="utf-8"))
    readme, data_readme = text(ROOT / "README.md"), text(ROOT / "data" / "README.md")
    quoted = quoted_fit(results)
    assert quoted in readme and quoted in data_readme
    assert results["fit"]["n_runs"] == 88 and results["n_table_runs"] == 88
    assert re.search(r"cpu_planned_runs\.csv$", results["source"])
    (lo, hi), box = results["fit"]["ci"]["phi"], results["fit"]["bounds"]["phi"]
    width = hi - lo
    fits = results["comparison"]["fits"]
    p0, p1 = fits["phi=0"]["wild_p_value"], fits["phi=1"]["wild_p_value"]
    for readme_text in (readme, data_readme):
        assert f"width {width:.3g}" in readme_text
        assert f"wild p {p0:.3f} against phi = 0, {p1:.3f} against phi = 1" in readme_text
    prediction = json.loads((ROOT / "data" / "cpu_planned_prediction.json").read_text())
    widths = np.array([t["width"] for t in prediction["simulation"]["tables"]])
    share = float((widths < width).mean())
    assert f"wider than {share:.0%} of the prediction's 200 simulated tables" in data_readme
    assert (lo > box[0] and hi < box[1]) == ("does not reach the search box" in readme)


def test_the_planned_sweeps_second_basin_is_as_quoted():
    """The READMEs' account of the wide interval: refitting the report's bootstrap (same options)
    gives its interval, the replicates in the phi < -1 basin and the central 90% as quoted."""
    results = json.loads(PLANNED_RESULTS.read_text(encoding="utf-8"))
    opts = results["options"]
    runs = load_runs(PLANNED_TABLE)
    fit = fit_huber(runs, options=HuberOptions(n_starts=opts["n_starts"], seed=opts["seed"]))
    assert fit.phi == pytest.approx(results["fit"]["params"]["phi"], abs=1e-6)
    boot = block_bootstrap(runs, fit, n_boot=opts["n_boot"], seed=opts["seed"], progress=False)
    np.testing.assert_allclose(boot.ci["phi"], results["fit"]["ci"]["phi"], rtol=0, atol=1e-6)
    phi = np.asarray(boot.params["phi"], dtype=float)
    low = int((phi < 0).sum())
    assert int(((phi >= -1) & (phi < 0)).sum()) <= 1  # a second basin below -1, not a tail towards it
    q05, q95 = np.quantile(phi, [0.05, 0.95])
    text = " ".join(
        " ".join(p.read_text(encoding="utf-8").split())
        for p in (ROOT / "README.md", ROOT / "data" / "README.md")
    )
    assert f"{low} of the 1,000 resampled tables ({low / 10:.1f}%)" in text
    assert f"{low} of the 1,000 cell-resampled tables ({low / 10:.1f}%)" in text
    assert f"central 90% is [{q05:.3f}, {q95:.3f}]" in text
