"""The planner's own inputs, as ``phifit plan`` takes them: the law and noise a plan simulates
(:mod:`phifit.plan.pilot_law`), the optimised design set beside the given one
(:mod:`phifit.plan.optimized_plan`) and the candidate pool (:mod:`phifit.plan.candidate_pool`)."""

from __future__ import annotations

import dataclasses

import pytest

from phifit import defaults
from phifit.plan import (
    load_pool,
    optimize_plan,
    plan_design,
    plan_law,
    simulation_settings,
    tables_to_simulate,
    write_optimized,
)
from phifit.plan.design import design_from_paper
from phifit.plan.pilot_law import DEFAULT_NOISE, check_identified
from phifit.runs import load_runs
from phifit.study import REFERENCE_PARAMS

PILOT = "data/cpu_small_runs.csv"


def test_without_a_pilot_the_study_law_and_the_default_noise():
    law = plan_law("paper")
    assert law.params == dict(REFERENCE_PARAMS) and law.source == "the study's joint fit"
    assert law.noise.per_run == DEFAULT_NOISE and law.noise.source.startswith("default 0.005")
    assert law.misfit is None and law.laws is None
    held = plan_law("paper", phi=0.5, noise=0.004, cell_noise=0.001)
    assert held.params["phi"] == 0.5 and held.source == "the study's joint fit, phi set to 0.5"
    assert (held.noise.per_run, held.noise.cell, held.noise.source) == (0.004, 0.001, "given")


def test_tables_to_simulate():
    assert tables_to_simulate(3, pilot=True) == 3 and tables_to_simulate(0, pilot=True) == 0
    assert tables_to_simulate(None, pilot=False) == 0
    assert tables_to_simulate(None, pilot=True) == defaults.PLAN_TABLES


def test_a_pilot_gives_its_fit_noise_and_phi_held():
    pilot = load_runs(PILOT, where="variant==baseline")
    law = plan_law("cpu_small", pilot=pilot)
    assert law.source == f"Huber fit of the pilot {pilot.source}"
    assert law.noise.source == "pilot, misfit carried" and law.misfit is not None
    held = plan_law("cpu_small", pilot=pilot, phi=0.5, misfit=False)
    assert held.params["phi"] == pytest.approx(0.5)
    assert held.source.endswith("with phi held at 0.5") and held.misfit is None
    assert held.params["alpha"] != law.params["alpha"]  # the other five refitted with phi held


def test_an_unidentified_fit_is_refused_naming_the_pilot():
    class Pilot:
        source = "pilot.csv"

    params = {"E": 1.0, "A": 1.0, "alpha": 0.3, "B": None, "beta": None, "phi": None}
    with pytest.raises(ValueError, match="pilot.csv: the pilot's fit does not identify B, beta, phi"):
        check_identified(Pilot(), params)
    with pytest.raises(ValueError, match="identify B, beta, and a plan") as err:
        check_identified(Pilot(), params, phi_given=True)
    assert "two or more token counts" in str(err.value) and "--phi" not in str(err.value)


def test_settings_carry_the_law_draws_and_misfit():
    law = plan_law("paper", phi=0.4)
    settings = simulation_settings(law, n_boot=10, n_wild=20, seed=3, tests=False)
    assert settings["laws"] is None and settings["misfit"] is None and settings["tests"] is False
    assert (settings["n_boot"], settings["n_wild"], settings["seed"]) == (10, 20, 3)


def test_optimize_plan_records_before_and_after(tmp_path):
    paper = design_from_paper()  # its three lowest budgets: the optimiser's work a third of the whole grid's
    low = paper.frame["budget"] <= sorted(paper.frame["budget"].unique())[2]
    design = dataclasses.replace(paper, frame=paper.frame[low].reset_index(drop=True))
    law = plan_law("paper")
    result = plan_design(design, params=law.params, noise=law.noise, law_source=law.source)
    optimized, opt = optimize_plan(result, design, law.params, law.noise, max_flops=design.flops)
    info = optimized.optimized
    assert info["width_before"] == result.asymptotic.width and info["width_after"] == opt.asymptotic.width
    assert info["flops_after"] <= design.flops * (1 + 1e-9) and "written" not in info
    path = tmp_path / "optimised.csv"
    written = write_optimized(optimized, opt, design, str(path), source="paper")
    assert written.optimized["written"] == str(path) and path.exists()
    assert list(written.optimized)[:-1] == list(info)


def test_load_pool(tmp_path):
    frame, source = load_pool("cpu_planned")
    assert source == "cpu_planned" and "run_id" in frame and len(frame)
    with pytest.raises(FileNotFoundError, match="no such file \\(--pool\\)"):
        load_pool(str(tmp_path / "none.csv"))
