"""phifit.plan.conditioning: tokens-per-parameter and r spread, the information matrix's
condition number, runs off their isoFLOP curve, and the checks the planner and optimiser read."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from phifit.plan.conditioning import FLOP_RTOL, TPP_MIN_LOG_RANGE, conditioning
from phifit.plan.design import PlanResult, bracketing, design_from_paper, design_from_table, plan_design
from phifit.plan.inputs import NoiseModel
from phifit.runs.table import load_design, load_runs
from phifit.study import REFERENCE_PARAMS

STUDY = "data/looped_study_runs_digitized.csv"


@pytest.fixture(scope="module")
def study():
    return design_from_table(load_runs(STUDY))


@pytest.fixture(scope="module")
def replanned(tmp_path_factory):
    """The issue's example: the study's runs at tokens = 20 (N_once + N_rec), budget labels kept."""
    frame = pd.read_csv(STUDY)
    frame["tokens"] = (20 * (frame["n_once"] + frame["n_rec"])).round().astype("int64")
    path = tmp_path_factory.mktemp("plan") / "replanned.csv"
    frame.drop(columns=["flops", "iterations", "loss"]).to_csv(path, index=False)
    return design_from_table(load_design(str(path)))


def kinds(c):
    return {w.kind for w in c.warnings}


def test_study_design_passes(study):
    c = conditioning(study)
    assert kinds(c) == set() and not c.off_isoflop
    tpp = study.frame["tokens"] / (study.frame["n_once"] + study.frame["n_rec"])
    assert c.tpp["min"] == pytest.approx(tpp.min()) and c.tpp["max"] == pytest.approx(tpp.max())
    assert c.tpp["log_range"] == pytest.approx(np.log(tpp.max() / tpp.min()))  # 4.41
    assert c.r_values == [1, 2, 4, 8]
    assert 1e5 < c.condition < 1e6  # 3.7e5 at the study's law
    assert kinds(conditioning(design_from_paper())) == set()


def test_replanned_at_20_tokens_per_parameter_is_flagged(study, replanned):
    c = conditioning(replanned)
    assert kinds(c) == {"alpha_beta_not_separated", "off_isoflop"}
    assert c.tpp["log_range"] < 1e-6 < TPP_MIN_LOG_RANGE
    # direct: train_flops_per_token x tokens against the budget label
    f = replanned.frame
    ratio = f["train_flops_per_token"] * f["tokens"] / f["budget"]
    assert len(c.off_isoflop) == int((abs(ratio - 1) > FLOP_RTOL).sum()) == 108
    assert min(o["ratio"] for o in c.off_isoflop) == pytest.approx(ratio.min())
    # worse conditioned than the study's own grid (6.5e6 vs 3.7e5 at the study's law)
    assert c.condition > 10 * conditioning(study).condition
    statuses = {b["status"] for b in bracketing(replanned, REFERENCE_PARAMS)}
    assert "bracketed" not in statuses


def test_information_matches_a_direct_computation(study):
    from phifit.law import log_loss_and_jacobian, params_to_theta
    from phifit.plan.modes import design_of

    _, jac = log_loss_and_jacobian(params_to_theta(REFERENCE_PARAMS), design_of(study.frame))
    info = jac.T @ jac
    unit = info / np.outer(np.sqrt(np.diag(info)), np.sqrt(np.diag(info)))
    eig = np.linalg.eigvalsh(unit)
    assert conditioning(study).condition == pytest.approx(eig.max() / eig.min(), rel=1e-6)
    cov = np.linalg.inv(unit)
    corr = cov[1, 3] / np.sqrt(cov[1, 1] * cov[3, 3])  # (alpha, beta)
    assert conditioning(study).corr_alpha_beta == pytest.approx(corr, rel=1e-6)


def test_one_r_design_cannot_separate_phi_from_a(study):
    one = dataclasses.replace(study, frame=study.frame[study.frame["r"] == 4].reset_index(drop=True))
    c = conditioning(one)
    assert kinds(c) == {"phi_a_not_separated"}
    assert abs(c.corr_phi_a) > 0.99 and c.share["max"] - c.share["min"] < 1e-3


def test_plan_result_shows_and_round_trips_it(replanned):
    result = plan_design(replanned, noise=NoiseModel(0.004))
    text = result.summary()
    assert "[[Design conditioning]]" in text and "108 of 116 runs off" in text
    assert "alpha_beta_not_separated" in text
    back = PlanResult.from_json(result.to_json())
    assert back.conditioning == result.conditioning


def test_optimizer_rejects_flagged_candidates(monkeypatch):
    from phifit.plan import optimize

    design = design_from_paper()
    real = optimize.rejected
    # flag every candidate with r = 8 as if it failed a check: the winner must not have it
    monkeypatch.setattr(optimize, "rejected", lambda c, p: ["x"] if 8 in set(c.frame["r"]) else real(c, p))
    opt = optimize.optimize_design(design, REFERENCE_PARAMS, NoiseModel(0.004))
    assert 8 not in opt.r and opt.n_rejected > 0
    assert optimize.rejected(opt.design, REFERENCE_PARAMS) == []
