"""Predictions that say when they leave the fitted range, and carry the fit's own warnings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from phifit.fitters import fit
from phifit.predict import EXTRAPOLATION_FACTOR, predict
from phifit.runs.table import table_from_frame

DATA = Path(__file__).resolve().parents[1] / "data"


def test_prediction_beyond_fitted_range_is_a_caution_and_keeps_fit_warnings():
    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    keep = frame[
        frame["budget"].isin([4.64e17, 1e18]) & frame["size"].isin([8, 10]) & frame["r"].isin([1, 2, 4])
    ]
    runs = table_from_frame(keep.iloc[:7], source="seven")
    result = fit(runs, n_starts=8, seed=0)
    assert any(c.kind == "few_runs" for c in result.warnings)
    d_max = float(runs.tokens.max())
    points = {
        "r": [2, 128],
        "n_once": [1.2e7, 1.2e7],
        "n_rec": [2.5e7, 2.5e7],
        "tokens": [float(runs.tokens.min()), 4 * d_max],
    }
    pred = predict(result, points=points, runs=runs)
    kinds = [c.kind for c in pred.warnings]
    assert "few_runs" in kinds  # the fit's own warning travels with the prediction
    outside = {c.values["quantity"]: c for c in pred.warnings if c.kind == "outside_fitted_range"}
    assert set(outside) >= {"r", "tokens"}
    assert outside["r"].values["points"] == [1] and outside["tokens"].values["points"] == [1]
    assert f"{EXTRAPOLATION_FACTOR:g}x" in outside["r"].message
    assert "outside_fitted_range" not in [
        c.kind for c in predict(result, points={k: v[:1] for k, v in points.items()}, runs=runs).warnings
    ]
    assert "[[Notes]]" in pred.summary()
