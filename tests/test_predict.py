"""phifit.predict: the loss at points is the law's, the allocation is the frontier's minimum."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import paper_table

from phifit.fitters.huber import fit_huber
from phifit.frontier import PaperFamily, frontier
from phifit.law import REFERENCE_PARAMS, JointLaw, params_to_theta
from phifit.predict import Prediction, predict, predict_loss, table_family
from phifit.runs.table import table_from_frame
from phifit.study import paper_architecture

LAW = JointLaw.from_params(REFERENCE_PARAMS)


def test_point_loss_is_the_law_and_draws_give_an_interval():
    r, n_once, n_rec, tokens = [1, 4, 8], [1e8, 2e8, 3e8], [3e8, 2e8, 1e8], [2e10, 2e10, 5e10]
    loss, iv = predict_loss(LAW, r=r, n_once=n_once, n_rec=n_rec, tokens=tokens)
    np.testing.assert_allclose(
        loss, LAW.loss(r=np.array(r), n_once=np.array(n_once), n_rec=np.array(n_rec), tokens=np.array(tokens))
    )
    assert iv is None
    # by hand, paper Eq. 3
    p = REFERENCE_PARAMS
    by_hand = p["E"] + p["A"] * (2e8 + 4 ** p["phi"] * 2e8) ** -p["alpha"] + p["B"] * 2e10 ** -p["beta"]
    assert loss[1] == pytest.approx(by_hand, rel=1e-12)
    rng = np.random.default_rng(0)
    thetas = params_to_theta(REFERENCE_PARAMS) + rng.normal(0, 0.01, size=(200, 6))
    thetas[0] = np.nan  # a failed replicate is dropped, not propagated
    _, iv = predict_loss(LAW, r=r, n_once=n_once, n_rec=n_rec, tokens=tokens, thetas=thetas, level=0.9)
    assert iv.shape == (3, 2) and np.all(iv[:, 0] < loss) and np.all(loss < iv[:, 1])


def test_compute_optimal_matches_the_frontier_and_is_a_minimum():
    budgets = [1e19, 1e21]
    pred = predict(LAW, budgets=budgets, source="reference")
    front = frontier(LAW, PaperFamily(), budgets)
    assert [row["r"] for row in pred.optimal] == [1, 2, 4, 8] * 2
    for row in pred.optimal:
        i = budgets.index(row["compute"])
        assert row["loss"] == pytest.approx(front.l_star[row["r"]][i], rel=1e-12)
        assert row["n_once"] + row["n_rec"] == pytest.approx(row["n_unique"], rel=1e-6)
        # brute force over the family: no width does better at this budget
        r, tokens, n_unique = row["r"], row["tokens"], row["n_unique"]
        arch = paper_architecture(np.geomspace(2, 128, 20001), r)
        f = np.asarray(arch["flops_per_token"], float)
        brute = LAW.loss(
            r=np.full(len(f), r), n_once=arch["n_once"], n_rec=arch["n_rec"], tokens=row["compute"] / f
        )
        assert row["loss"] <= brute.min() + 1e-9 and row["loss"] == pytest.approx(brute.min(), abs=1e-6)
        assert row["tokens_per_param"] == pytest.approx(tokens / n_unique)
    assert pred.n_draws == 0 and "no interval" in pred.summary()


def test_table_family_search_is_widened_and_extrapolation_is_flagged(paper_clean):
    fit = fit_huber(paper_clean, n_starts=50)
    narrow = table_family(paper_clean, widen=0, r_values=[1, 4])
    wide = table_family(paper_clean, widen=1)
    assert narrow.r_values == (1, 4) and wide.r_values == (1, 2, 4, 8)
    lo, hi = narrow.coef[4]["x_range"]
    assert wide.coef[4]["x_range"] == pytest.approx([lo - math.log(10), hi + math.log(10)])
    inside = predict(fit, budgets=[1e18], family=wide)
    assert not [w for w in inside.warnings if w.kind == "extrapolated"]
    beyond = predict(fit, budgets=[1e22], family=wide)
    assert {w.kind for w in beyond.warnings} & {"extrapolated", "optimum_at_edge"}
    with pytest.raises(ValueError, match="no runs with r = 3"):
        table_family(paper_clean, r_values=[1, 3])


def test_non_looped_fit_says_phi_was_not_identified():
    frame = paper_table().frame
    flat = frame[frame["r"] == 1].drop(columns=["r", "n_rec"])
    runs = table_from_frame(flat, source="flat")
    fit = fit_huber(runs, n_starts=20)
    pred = predict(fit, points={"r": [1], "n_once": [1e8], "n_rec": [0], "tokens": [1e10]})
    assert [w.kind for w in pred.warnings] == ["phi_not_identified"]


def test_prediction_round_trips_to_json():
    pred = predict(
        LAW,
        points={"r": [4], "n_once": [2e8], "n_rec": [2e8], "tokens": [2e10]},
        budgets=[1e20],
        source="reference",
    )
    data = json.loads(json.dumps(pred.to_dict(), allow_nan=False))
    assert data["kind"] == "prediction" and data["points"][0]["r"] == 4
    assert isinstance(pred, Prediction) and "[[Loss at given points]]" in pred.summary()
    with pytest.raises(ValueError, match="give points"):
        predict(LAW)
