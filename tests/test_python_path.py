"""The Python path as honest as the command line: one test per defect a notebook user reported.

1. a table of two recipes is never pooled: every entry point refuses it or selects one recipe,
   as the command line does (``recipe=`` in Python, ``--variant`` there);
2. a Bayesian fit carries its ArviZ ``InferenceData``, also after :func:`phifit.load`;
3. every name the README and the API page give in Python resolves after ``import phifit``
   (``phifit.predict`` included);
4. every result class with a table has ``to_frame()`` (the classes are listed here);
5. a notebook shows a result's summary, not its replicates;
6. the law's functions take the run's numbers by name (their order cannot be confused);
7. ``to_json`` and the Bayesian ``save=`` replace only files phifit wrote;
8. when phi's test-inverted set is the whole search box, the headline says first that phi is not
   determined, not the point estimate.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import phifit
from phifit.report.analysis import AnalysisOptions, analyse
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

ROOT = Path(__file__).resolve().parents[1]


# -- 1. recipes --------------------------------------------------------------------------------


def two_recipes(names: tuple[str, str] = ("short", "long")) -> pd.DataFrame:
    """The study's design twice, one recipe with phi = 0.3 and one with phi = 0.8 (232 runs)."""
    frames = []
    for name, phi in zip(names, (0.3, 0.8)):
        frame = simulate("paper", params={"phi": phi}, noise=0.003, seed=1)
        frame["run_id"] = name + "_" + frame["run_id"].astype(str)
        frame["variant"] = name
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def test_a_table_of_two_recipes_is_never_pooled_on_the_python_path():
    mixed = table_from_frame(two_recipes(), source="two_recipes.csv")
    long_only = mixed.subset((mixed.frame["variant"] == "long").to_numpy())
    # no recipe is named 'baseline': the CLI refuses such a table, and so does every entry point
    with pytest.raises(ValueError, match=r"several recipes.*recipe='NAME'"):
        phifit.fit(mixed, n_starts=5)
    unmarked = phifit.fit(long_only, n_starts=20)  # a fit that names no recipe
    from phifit.diagnostics.drift import fit_drift
    from phifit.diagnostics.multipliers import fit_multipliers
    from phifit.equivalence import equivalence_table
    from phifit.plan import plan_from_fit
    from phifit.plan.next_runs import choose_next

    refusing = {
        "answer": lambda: phifit.answer(mixed, n_boot=0, n_wild=0, n_starts=5, n_jobs=1),
        "block_bootstrap": lambda: phifit.block_bootstrap(mixed, unmarked, n_boot=4, n_jobs=1),
        "compare_fits": lambda: phifit.compare.compare_fits(mixed, unmarked, n_wild=0, cv=False),
        "diagnose": lambda: phifit.diagnostics.diagnose(mixed, unmarked),
        "predict": lambda: phifit.predict.predict(unmarked, budgets=[1e19], runs=mixed),
        "equivalence_table": lambda: equivalence_table(mixed, unmarked),
        "fit_multipliers": lambda: fit_multipliers(mixed, unmarked, n_boot=0, n_wild=0),
        "fit_drift": lambda: fit_drift(mixed, unmarked, n_boot=0, n_wild=0),
        "plan_from_fit": lambda: plan_from_fit(mixed, unmarked),
        "choose_next": lambda: choose_next(mixed, mixed.frame, 2, fit=unmarked),
    }
    for name, call in refusing.items():
        with pytest.raises(ValueError, match="several recipes"):
            call()
            pytest.fail(f"{name} pooled the two recipes")
    # recipe= picks one; the fit remembers it, and the entry points given the fit follow it
    fit = phifit.fit(mixed, recipe="long", n_starts=20)
    assert fit.n_runs == len(long_only) and fit.run_ids == unmarked.run_ids
    assert fit.phi == pytest.approx(unmarked.phi, abs=1e-6)
    boot = phifit.block_bootstrap(mixed, fit, n_boot=4, n_jobs=1, progress=False, jackknife=False)
    assert boot.n_boot == 4
    cmp = phifit.compare_fits(mixed, fit, n_wild=0, cv=False, n_starts=5, n_jobs=1)
    assert cmp.n_runs == len(long_only)
    assert len(equivalence_table(mixed, fit).rows) > 0
    with pytest.raises(ValueError, match="none is 'medium'"):
        phifit.fit(mixed, recipe="medium")
    # a recipe named 'baseline' is analysed by default, and the fit says which it analysed
    with_baseline = two_recipes(("baseline", "long"))
    base = phifit.fit(with_baseline, n_starts=20)
    assert base.n_runs == len(long_only)
    assert [c.values["recipe"] for c in base.warnings if c.kind == "recipe_selected"] == ["baseline"]


# -- 2. the posterior as ArviZ InferenceData -----------------------------------------------------


def test_a_bayesian_fit_carries_its_inference_data(tmp_path):
    az = pytest.importorskip("arviz")
    pytest.importorskip("pymc")
    # the study's design: the compiled model's structure (24 cells) is the one the Bayesian tests use
    frame = simulate("paper", noise=0.005, seed=1)
    fit = phifit.fit(
        frame, method="bayes", draws=100, tune=100, chains=2, progress=False, save=tmp_path / "post.nc"
    )
    assert isinstance(fit.idata, az.InferenceData) and fit.to_inference_data() is fit.idata
    table = az.summary(fit.to_inference_data(), var_names=["phi"])
    assert table.loc["phi", "mean"] == pytest.approx(fit.extras["posterior"]["phi"]["mean"], abs=1e-3)
    draws = fit.draws_frame()
    assert len(draws) == 2 * 100 and list(draws.columns[:6]) == list(phifit.law.PARAM_NAMES)
    assert "idata" not in json.loads(fit.to_json())  # the JSON holds plain data only
    fit.to_json(tmp_path / "fit.json")
    back = phifit.load(tmp_path / "fit.json")  # the posterior is read back from its netCDF file
    assert isinstance(back.idata, az.InferenceData)
    np.testing.assert_allclose(back.draws_frame()["phi"], draws["phi"])


# -- 3. the documented names -------------------------------------------------------------------


def documented_names() -> list[str]:
    """The dotted ``phifit.`` names of the README's Python column and Python example, and of the
    API page's code."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## What phifit answers", 1)[1].split("\n## ", 1)[0]
    column = [row.split("|")[3] for row in table.splitlines() if row.startswith("| ") and row.count("|") >= 4]
    example = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    api = re.findall(
        r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), flags=re.S
    )
    text = "\n".join(column + example + api)
    return sorted(set(re.findall(r"\bphifit(?:\.[A-Za-z_][A-Za-z0-9_]*)+", text)))


def test_every_documented_python_name_resolves_after_import_phifit():
    names = documented_names()
    assert {"phifit.predict", "phifit.compare.compare_fits", "phifit.recipes.compare_recipes"} <= set(names)
    code = (
        "import functools, json, phifit\n"
        f"names = {names!r}\n"
        "out = {}\n"
        "for name in names:\n"
        "    try:\n"
        "        obj = functools.reduce(getattr, name.split('.')[1:], phifit)\n"
        "        out[name] = 'ok'\n"
        "    except AttributeError as err:\n"
        "        out[name] = str(err)\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert {k: v for k, v in found.items() if v != "ok"} == {}
    # the README's call, in a fresh interpreter: phifit.predict is the function's module and callable
    code = (
        "import phifit\n"
        "law = phifit.JointLaw.reference()\n"
        "p = phifit.predict(law, points={'r': [4], 'n_once': [2e8], 'n_rec': [2e8], 'tokens': [2e10]})\n"
        "print(type(p).__name__, round(p.points[0]['loss'], 6))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[0] == "Prediction"


# -- 4 and 5. tables and notebook displays -------------------------------------------------------

#: every result class that holds a table, and the rest (records of scalars, or results made of
#: other results); a new result class must be put in one of the two, or have ``to_frame``
TABLE_RESULTS = {
    "AdaptiveRounds",
    "BootstrapResult",
    "Comparison",
    "DriftFit",
    "EquivalenceTable",
    "FitResult",
    "Frontier",
    "Influence",
    "InvertedSet",
    "IsoflopCurves",
    "LooComparison",
    "MultiplierFit",
    "NextRuns",
    "NoiseComparison",
    "ParabolaMinima",
    "Prediction",
    "RecipeComparison",
    "ResidualDiagnostics",
    "SimulatedPlan",
}
NO_TABLE = {
    "Allocation",
    "Analysis",
    "AnalysisOptions",
    "AsymptoticPlan",
    "Caution",
    "Conditioning",
    "Consistency",
    "Diagnostics",
    "Equivalence",
    "FitStats",
    "GaussianScore",
    "GroupRow",
    "Identifiability",
    "Interval",
    "JointFit",
    "LRTest",
    "Misfit",
    "NoiseModel",
    "PartRow",
    "PlanResult",
    "ResidualTest",
    "RoundRow",
    "TableFamily",
    "WildTest",
}


@pytest.fixture(scope="module")
def analysis():
    runs = table_from_frame(simulate("paper", noise=0.003, seed=1), source="simulated paper design")
    return analyse(runs, AnalysisOptions(n_boot=20, n_wild=0, n_starts=10, n_jobs=1, seed=0))


def _results(analysis) -> dict[str, object]:
    """Every result of the analysis, the results inside its diagnostics, a prediction and a recipe
    comparison."""
    out = {f.name: getattr(analysis, f.name) for f in dataclasses.fields(analysis)}
    out = {k: v for k, v in out.items() if hasattr(v, "to_json")}
    d = analysis.diagnostics
    out.update(residuals=d.residuals, influence=d.influence, identifiability=d.identifiability)
    out["prediction"] = phifit.predict(
        analysis.fit,
        points={"r": [1, 4], "n_once": [2e8, 2e8], "n_rec": [2e8, 2e8], "tokens": [2e10, 2e10]},
        budgets=[1e20],
        bootstrap=analysis.bootstrap,
    )
    fit = analysis.fit
    delta = {"estimate": 0.1, "ci": [0.0, 0.2], "p_value": 0.04, "n_failed": 0}
    out["recipes"] = phifit.recipes.RecipeComparison(
        by="variant",
        baseline="baseline",
        fits={"baseline": fit, "hc": fit},
        baseline_refits={"hc": fit},
        delta_phi={"hc": {**delta, "variant_phi": 0.5, "baseline_phi": 0.4, "budgets": None}},
        joint=None,
        block="budget,r",
        n_boot=20,
        seed=0,
        level=0.95,
        method="huber",
    )
    return out


def test_every_result_class_with_a_table_has_to_frame(analysis):
    from phifit.report.loader import result_types

    types = result_types()
    has_frame = {name for name, cls in types.items() if callable(getattr(cls, "to_frame", None))}
    assert sorted(TABLE_RESULTS - has_frame) == []
    assert sorted(set(types) - TABLE_RESULTS - NO_TABLE - has_frame) == []  # every class is listed
    for name, result in _results(analysis).items():
        if type(result).__name__ in TABLE_RESULTS:
            frame = result.to_frame()
            assert isinstance(frame, pd.DataFrame) and len(frame) > 0, name
    pred = _results(analysis)["prediction"].to_frame()
    assert list(pred["kind"]) == ["point", "point"] + ["optimal"] * (len(pred) - 2)
    assert {"r", "n_once", "n_rec", "tokens", "loss", "lo", "hi"} <= set(pred.columns)
    rec = _results(analysis)["recipes"].to_frame()
    assert list(rec.index) == ["hc"] and rec.loc["hc", "delta_phi"] == 0.1 and rec.loc["hc", "ci_hi"] == 0.2


def test_a_notebook_shows_the_summary_not_the_replicates(analysis):
    boot = analysis.bootstrap
    many = dataclasses.replace(
        boot,
        thetas=np.tile(boot.thetas, (50, 1)),
        params={k: np.tile(v, 50) for k, v in boot.params.items()},
        failed=np.tile(boot.failed, 50),
        n_boot=50 * boot.n_boot,
    )
    html = many._repr_html_()
    assert len(html) < 5_000, len(html)
    lo, hi = boot.ci["phi"]
    assert f"{lo:.6g}" in html and f"{hi:.6g}" in html  # the interval, not the draws
    sizes = {name: len(result._repr_html_()) for name, result in _results(analysis).items()}
    assert {k: v for k, v in sizes.items() if v > 20_000} == {}


# -- 6. arguments by name ----------------------------------------------------------------------


def test_the_laws_functions_take_the_runs_numbers_by_name():
    from phifit.equivalence import equivalence
    from phifit.predict import predict_loss

    law = phifit.JointLaw.reference()
    with pytest.raises(TypeError):
        law.loss(4, 2e8, 2e8, 2e10)  # in the formula's order this was the loss of r = 2e10
    with pytest.raises(TypeError):
        law.n_eff(4, 2e8, 2e8)
    with pytest.raises(TypeError):
        predict_loss(law, [4], [2e8], [2e8], [2e10])
    with pytest.raises(TypeError):
        equivalence(law, 2e8, 2e8, 4)
    by_name = law.loss(r=4, n_once=2e8, n_rec=2e8, tokens=2e10)
    n_eff = 2e8 + 4**law.phi * 2e8
    assert float(by_name[0]) == pytest.approx(law.E + law.A * n_eff**-law.alpha + law.B * 2e10**-law.beta)
    assert float(law.n_eff(r=4, n_once=2e8, n_rec=2e8)) == pytest.approx(n_eff)
    assert equivalence(law, n_once=2e8, n_rec=2e8, r=4).n_eff == pytest.approx(n_eff)


# -- 7. files phifit did not write -------------------------------------------------------------


def test_no_file_phifit_did_not_write_is_replaced_without_overwrite(tmp_path):
    fit = phifit.fit(simulate("paper", noise=0.003, seed=1), n_starts=5)
    notes = tmp_path / "notes.json"
    notes.write_text('{"my": "notes"}\n', encoding="utf-8")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        fit.to_json(notes)
    assert notes.read_text(encoding="utf-8") == '{"my": "notes"}\n'
    fit.to_json(notes, overwrite=True)
    assert phifit.load(notes).phi == fit.phi
    fit.to_json(notes)  # now phifit's own file: replaced without asking
    own = tmp_path / "equivalence.json"  # a result whose JSON has no generator key
    eq = phifit.equivalence.equivalence(phifit.JointLaw.reference(), n_once=1e8, n_rec=1e8, r=4)
    eq.to_json(own)
    eq.to_json(own)  # the same kind of result's file: replaced
    other = tmp_path / "other.txt"
    other.write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError):
        eq.to_json(other)
    pytest.importorskip("pymc")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        phifit.fit(simulate("paper", seed=1), method="bayes", save=notes, progress=False)
    assert phifit.load(notes).phi == fit.phi


# -- 8. the headline when nothing about phi is determined -----------------------------------------


def undetermined_table() -> pd.DataFrame:
    """10 runs at one token count, one width, one run each at r = 1 ... 64, no budget column: the
    loss rises a little with r under noise of the same size.  The fit puts phi at -1.887, its
    percentile interval reaches the box and the test-inverted set is the whole box (-3, 3)."""
    rng = np.random.default_rng(0)
    block = 12 * 256 * 256
    rows = [
        {
            "run_id": f"r{r}",
            "r": r,
            "n_once": 4 * block,
            "n_rec": 4 * block,
            "tokens": 2e9,
            "loss": round(3.0 + 0.05 * (1 - 1 / r) + rng.normal(0, 0.02), 4),
        }
        for r in (1, 2, 3, 4, 6, 8, 16, 32, 48, 64)
    ]
    return pd.DataFrame(rows)


def test_the_headline_says_first_that_phi_is_not_determined():
    from phifit.report import sections_fit

    answer = phifit.answer(undetermined_table(), n_boot=20, n_wild=19, n_starts=20, seed=0, n_jobs=1)
    inv = answer.analysis.phi_inverted
    assert inv is not None and inv.pieces == [(-3.0, 3.0)] and answer.fit.phi < -1
    first = answer.summary().splitlines()[0]
    assert first.startswith("phi is not determined"), first
    assert f"{answer.fit.phi:.3f}" not in first  # the point estimate follows, named as the best fit
    assert any(
        line.startswith(f"best-fitting phi = {answer.fit.phi:.4f}") for line in answer.headline.splitlines()
    )
    html = sections_fit.section_headline(answer.analysis)
    items = re.findall(r"<li>(.*?)</li>", html, flags=re.S)
    assert "<b>φ is not determined</b>" in items[0], items[0]
    assert '<span class="phi">' not in html  # the point estimate is no longer set as the answer
