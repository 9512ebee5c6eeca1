"""Results in a notebook: short repr, HTML tables, DataFrames, pickle, deepcopy and phifit.load.

One small analysis (the study's design with simulated losses, 20 bootstrap replicates, no wild
tests) supplies a result of every kind the report computes; each must print in under 300
characters, show an HTML ``<table>``, survive pickle and deepcopy, and come back from its JSON
through :func:`phifit.load` as its own type.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import numpy as np
import pandas as pd
import pytest

import phifit
from phifit.cautions import caution
from phifit.law import PARAM_NAMES
from phifit.report.analysis import AnalysisOptions, analyse
from phifit.runs.table import table_from_frame
from phifit.serialize import REPR_LIMIT
from phifit.simulation import simulate


@pytest.fixture(scope="module")
def runs():
    return table_from_frame(simulate("paper", noise=0.003, seed=1), source="simulated paper design")


@pytest.fixture(scope="module")
def analysis(runs):
    return analyse(runs, AnalysisOptions(n_boot=20, n_wild=0, n_starts=10, n_jobs=1, seed=0))


def _saved(result) -> dict:
    """The result's JSON as data, less the time it was written."""
    data = json.loads(result.to_json())
    data.pop("created", None)
    return data


def _results(analysis) -> dict:
    out = {"analysis": analysis}
    for f in dataclasses.fields(analysis):
        value = getattr(analysis, f.name)
        if hasattr(value, "to_json"):
            out[f.name] = value
    # a fit carrying a caution (a read-only mapping of values once failed to pickle)
    out["fit_with_warning"] = analysis.fit.with_updates(
        warnings=[caution("fit", "test", "a caution with values", x=1.0)]
    )
    return out


def test_the_analysis_has_every_result_the_notebook_uses(analysis):
    for name in ("fit", "bootstrap", "comparison", "multipliers", "drift"):
        assert getattr(analysis, name) is not None, name


def test_every_result_is_short_picklable_and_loads_as_its_type(analysis):
    for name, result in _results(analysis).items():
        text = repr(result)
        assert len(text) < REPR_LIMIT, (name, len(text), text)
        assert text.startswith(type(result).__name__ + "("), name
        assert "<table" in result._repr_html_(), name
        for back in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result)):
            assert type(back) is type(result) and _saved(back) == _saved(result), name
        loaded = phifit.load(result.to_json())
        assert type(loaded) is type(result), (name, type(loaded).__name__)
        assert _saved(loaded) == _saved(result), name


def test_load_reads_a_file_and_a_dict_and_rejects_what_is_no_result(analysis, tmp_path):
    path = tmp_path / "boot.json"
    analysis.bootstrap.to_json(path)
    assert type(phifit.load(path)).__name__ == "BootstrapResult"
    # no "kind" marker: the type is read from the keys
    data = json.loads(analysis.fit.to_json())
    assert isinstance(phifit.load(data), phifit.FitResult)
    with pytest.raises(ValueError, match="no phifit result type"):
        phifit.load({"nothing": 1})
    assert "load" in phifit.__all__


def test_str_is_the_summary_and_html_is_escaped(analysis, runs):
    mf = analysis.multipliers
    assert str(mf) == mf.summary()
    assert str(analysis.fit) == analysis.fit.summary()
    html = analysis.fit._repr_html_()
    assert "<pre>" not in html and "<table" in html
    assert "<table" in runs._repr_html_() and len(repr(runs)) < REPR_LIMIT
    flagged = analysis.fit.with_updates(warnings=[caution("fit", "t", "a < b & c")])
    assert "a &lt; b &amp; c" in flagged._repr_html_()


def test_one_parameter_order(analysis):
    fit, boot = analysis.fit, analysis.bootstrap
    assert tuple(fit.params) == PARAM_NAMES
    assert tuple(k for k in PARAM_NAMES if k in fit.ci) == tuple(fit.ci)
    assert tuple(boot.params) == PARAM_NAMES
    assert tuple(k for k in PARAM_NAMES if k in boot.ci) == tuple(boot.ci)


def test_parameter_frame_matches_the_fit(analysis):
    fit = analysis.fit
    frame = fit.to_frame()
    assert list(frame.index) == list(PARAM_NAMES)
    assert {"estimate", "fixed", "ci_lo", "ci_hi", "bca_lo", "bca_hi"} <= set(frame.columns)
    for name in PARAM_NAMES:
        assert frame.loc[name, "estimate"] == pytest.approx(fit.params[name])
        assert [frame.loc[name, "ci_lo"], frame.loc[name, "ci_hi"]] == pytest.approx(fit.ci[name])
        assert [frame.loc[name, "bca_lo"], frame.loc[name, "bca_hi"]] == pytest.approx(fit.ci_bca[name])


def test_residuals_frame_is_joined_to_the_run_table(analysis, runs):
    fit = analysis.fit
    frame = fit.residuals_frame(runs)
    assert list(frame["run_id"]) == list(fit.run_ids)
    np.testing.assert_allclose(frame["residual"], fit.residuals)
    np.testing.assert_allclose(frame["r"], runs.frame["r"])
    np.testing.assert_allclose(
        frame["predicted"], fit.law.loss(r=runs.r, n_once=runs.n_once, n_rec=runs.n_rec, tokens=runs.tokens)
    )
    assert list(fit.residuals_frame().columns) == ["run_id", "residual"]


def test_bootstrap_frame_maps_the_internal_order(analysis):
    boot = analysis.bootstrap
    frame = boot.to_frame()
    assert list(frame.columns) == [*PARAM_NAMES, "failed"]
    # thetas hold (log A, alpha, log B, beta, log E, phi): the trap of labelling them by name
    np.testing.assert_allclose(frame["A"], np.exp(boot.thetas[:, 0]))
    np.testing.assert_allclose(frame["E"], np.exp(boot.thetas[:, 4]))
    np.testing.assert_allclose(frame["phi"], boot.thetas[:, 5])
    np.testing.assert_array_equal(frame["failed"], boot.failed)


def test_a_fit_carries_its_draws_to_disk_and_back(analysis, tmp_path):
    boot = analysis.bootstrap
    assert "draws" not in (boot.attach(analysis.fit).bootstrap or {})
    fit = boot.attach(analysis.fit, draws=True)
    fit.to_json(tmp_path / "fit.json")
    back = phifit.load(tmp_path / "fit.json")
    pd.testing.assert_frame_equal(back.draws_frame(), boot.to_frame().drop(columns="failed"))


def test_comparison_and_multiplier_frames(analysis):
    cmp, mf = analysis.comparison, analysis.multipliers
    table = cmp.to_frame()
    assert list(table.index) == list(cmp.stats)
    for label, st in cmp.stats.items():
        assert table.loc[label, "r2"] == pytest.approx(st.r2)
        assert table.loc[label, "aic"] == pytest.approx(st.aic)
    assert table.loc["phi=0", "phi"] == 0.0 and table.loc["phi=1", "phi"] == 1.0
    frame = mf.to_frame()
    assert list(frame.index) == mf.r
    np.testing.assert_allclose(frame["m"], mf.multiplier)
    np.testing.assert_allclose(frame["phi_r"], mf.phi_r)
    np.testing.assert_allclose(
        frame[["m_lo", "m_hi"]].to_numpy(dtype=float), np.array(mf.multiplier_ci, float)
    )
