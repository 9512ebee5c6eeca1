"""What a pilot cannot see: the plan cautions, and declines a width, where the pilot lacks the bend of r^phi
or the budget direction of the design it plans (phifit.plan.support)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import phifit
from phifit.plan.design import PlanResult, plan_from_fit
from phifit.plan.support import pilot_support
from phifit.runs.table import table_from_frame

STUDY = "data/looped_study_runs_digitized.csv"


def _kinds(plan: PlanResult) -> list[str]:
    return [w.kind for w in plan.warnings]


@pytest.fixture(scope="module")
def study() -> pd.DataFrame:
    return pd.read_csv(STUDY)


def _pilot(study: pd.DataFrame, rs: set[int], n_budgets: int):
    budgets = sorted(study["budget"].unique())[:n_budgets]
    rows = study[study["r"].isin(rs) & study["budget"].isin(budgets)].reset_index(drop=True)
    return table_from_frame(rows, source=f"pilot r {sorted(rs)}")


def test_one_looped_r_pilot_declines_the_width_with_the_reason():
    """The regime study's BPE pilot (r in {1, 4}, two budgets, four cells) planning cpu_bpe's design (r in
    {1, 2, 4, 8}, four budgets): the prediction of record that missed 3x. The plan now says before its
    numbers that the pilot cannot see the bend, declines the width, and the JSON keeps both."""
    pilot = phifit.load_runs("data/regime/bpe_runs.csv")
    fit = phifit.fit(pilot)
    plan = plan_from_fit(pilot, fit, "trainers/sweeps/cpu_bpe.toml", n_tables=0)
    assert "pilot_bend_unseen" in _kinds(plan) and "pilot_few_cells" in _kinds(plan)
    assert not plan.width_is_precision
    assert any("r = 2, 8" in reason for reason in plan.width_declined_because)
    text = plan.summary()
    head, numbers = text.split("[[Predicted for phi]]", 1)
    assert "(!) " in head and "cannot show how r^phi bends" in head  # said before the numbers
    assert "95% interval width (no pred.)" in numbers
    back = PlanResult.from_json(plan.to_json())
    assert back.width_is_precision is False and "pilot_bend_unseen" in _kinds(back)
    assert json.loads(plan.to_json())["width_is_precision"] is False


def test_pilot_with_three_r_plans_without_the_caution(study):
    """A pilot with r in {1, 2, 4} at the study's two lowest budgets sees the bend: no caution, a width."""
    pilot = _pilot(study, {1, 2, 4}, 2)
    fit = phifit.fit(pilot)
    plan = plan_from_fit(pilot, fit, STUDY, n_tables=0)
    assert "pilot_bend_unseen" not in _kinds(plan) and "pilot_one_budget" not in _kinds(plan)
    assert plan.width_is_precision and plan.width_declined_because == []
    assert "(!) " not in plan.summary().split("[[Predicted for phi]]", 1)[0]


def test_support_gaps_on_the_study_design(study):
    """The rules on their own: one looped r (either one) and one budget decline; a pilot that is the
    design itself has no gap; a design with only the pilot's looped r needs no bend."""
    design = study[["r", "budget", "n_once", "n_rec"]]
    for rs in ({1, 4}, {1, 2}):
        kinds = [c.kind for c in pilot_support(_pilot(study, rs, 3), design)]
        assert "pilot_bend_unseen" in kinds and "pilot_one_budget" not in kinds
    one_budget = [c.kind for c in pilot_support(_pilot(study, {1, 2, 4, 8}, 1), design)]
    assert "pilot_one_budget" in one_budget and "pilot_bend_unseen" not in one_budget
    assert pilot_support(table_from_frame(study, source="study"), design) == []
    same_r = design[design["r"].isin([1, 4])]
    assert "pilot_bend_unseen" not in [c.kind for c in pilot_support(_pilot(study, {1, 4}, 3), same_r)]
