"""The design rules of a reproduction (phifit.plan.reproduction_rules), on the shipped designs.

The fifth reproduction's planned design meets every rule under its prediction of record's law; the
fourth (`cpu_bpe`) fails three of them under its own fit, naming the facts its audit found (r = 2
missing at 1.6e13, curves not bracketed, d = 16 runs where the law's N is a sixth of the compute); and
the fifth's shipped runs, however many are trained so far, are runs of its design that meet the compute
share, and all of them together meet every rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from phifit.law import params_to_theta
from phifit.plan.inputs import design_from_spec
from phifit.plan.reproduction_rules import REPRODUCTION_RULES, check_reproduction

ROOT = Path(__file__).resolve().parents[1]
PREDICTION = ROOT / "data" / "cpu_bpe2k_prediction.json"
FIFTH = ROOT / "data" / "cpu_bpe2k_runs.csv"


def _prediction_law() -> np.ndarray:
    return params_to_theta(json.loads(PREDICTION.read_text(encoding="utf-8"))["law"])


def test_the_fifth_reproductions_planned_design_meets_every_rule():
    design = design_from_spec("cpu_bpe2k").frame
    check = check_reproduction(design, _prediction_law())
    assert check.holds, check.summary()
    assert [r.rule for r in check.readings] == list(REPRODUCTION_RULES)
    assert check.n_runs == 64 and "16 of 16" in check.reading("bracketed").measured
    # the prediction of record plans the same 64 runs
    planned = json.loads(PREDICTION.read_text(encoding="utf-8"))["design"]
    assert planned["n_runs"] == 64


def test_the_fourth_reproduction_fails_the_rules_its_audit_named():
    runs = pd.read_csv(ROOT / "data" / "cpu_bpe_runs.csv")
    fit = json.loads((ROOT / "reports" / "cpu_bpe" / "results.json").read_text(encoding="utf-8"))["fit"]
    check = check_reproduction(runs, params_to_theta(fit["params"]))
    assert check.failed == ["every_r", "bracketed", "compute_share"], check.summary()
    assert "r 2 has no run at budget 1.6e+13" in check.reading("every_r").failures
    share = check.reading("compute_share")
    assert any(f.startswith("baseline-r1-d16-") and f.endswith("17%") for f in share.failures)
    assert check.reading("budgets").holds  # 2e12 to 1.6e13: four budgets, 8x
    frame = check.to_frame()
    assert list(frame["holds"]) == [False, False, True, False]


def test_a_design_with_one_budget_and_two_sizes_fails_with_reasons():
    design = design_from_spec("cpu_bpe2k").frame
    one = design[(design["budget"] == 8e12) & (design["size"] != 64)]
    check = check_reproduction(one, _prediction_law())
    assert check.failed == ["bracketed", "budgets"]
    assert "1 budget(s), fewer than 4" in check.reading("budgets").failures
    assert all("fewer than 3" in f for f in check.reading("bracketed").failures)
    with pytest.raises(ValueError, match="n_rec"):
        check_reproduction(one.drop(columns="n_rec"), _prediction_law())


def test_the_fifth_reproductions_shipped_runs_are_its_design():
    """Every trained run is one of the design's (same run id: same settings) and meets the compute share;
    once all 64 are trained, the table meets every rule under its own Huber fit."""
    design = design_from_spec("cpu_bpe2k").frame
    runs = pd.read_csv(FIFTH) if FIFTH.exists() else design.iloc[:0]
    assert set(runs["run_id"]) <= set(design["run_id"])
    share = check_reproduction(runs, _prediction_law()).reading("compute_share") if len(runs) else None
    assert share is None or share.holds, share
    if len(runs) == len(design):
        import phifit

        fit = phifit.fit(phifit.load_runs(FIFTH), seed=0)
        check = check_reproduction(runs, fit.theta)
        assert check.holds, check.summary()
