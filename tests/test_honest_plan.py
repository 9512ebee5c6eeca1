"""Plans that print only possible numbers: probabilities in [0, 1], failed simulated tables
never counted as width 0 or as rejections, the real seed counts, and a clear --misfit refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from phifit.law import REFERENCE_PARAMS
from phifit.plan.design import agreement
from phifit.plan.inputs import (
    NoiseModel,
    design_from_paper,
    design_from_table,
    misfit_from_pilot,
    misfit_noise,
)
from phifit.plan.modes import AsymptoticPlan, SimulatedPlan, analyse_table, asymptotic_plan
from phifit.runs.table import table_from_frame

DATA = Path(__file__).resolve().parents[1] / "data"


def seven_runs():
    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    keep = frame[
        frame["budget"].isin([4.64e17, 1e18]) & frame["size"].isin([8, 10]) & frame["r"].isin([1, 2, 4])
    ]
    return table_from_frame(keep.iloc[:7], source="seven")


@pytest.mark.parametrize("noise", [0.005, 0.2, 0.4, 0.8])
def test_box_probability_is_a_probability(noise):
    plan = asymptotic_plan(design_from_paper(), dict(REFERENCE_PARAMS), NoiseModel(noise))
    assert 0.0 <= plan.p_box <= 1.0
    if plan.width >= 6.0:  # an interval at least as wide as the box [-3, 3] always reaches it
        assert plan.p_box == 1.0


def test_failed_simulated_table_is_not_width_zero():
    runs = seven_runs()
    design = design_from_table(runs)
    frame = design.frame[["budget", "r", "size", "n_once", "n_rec", "tokens", "flops"]]
    out = analyse_table(frame, dict(REFERENCE_PARAMS), (0.005, 0.0), 0, 20, 20, None, 5)
    assert "error" in out and "width" not in out and "p0" not in out


def test_many_failed_tables_are_a_caution_not_trusted():
    asym = AsymptoticPlan(
        se={"phi": 0.5},
        width=1.96,
        p_box=0.0,
        power={"phi=0": 0.3, "phi=1": 0.2},
        trusted=True,
        reasons=[],
        signal=0.0,
        signal_raw=0.0,
        noise_eff=0.0,
        correlation_phi={},
    )
    sim = SimulatedPlan(
        n_tables=20,
        n_boot=10,
        n_wild=20,
        seed=0,
        tables=[],
        width_median=0.5,
        width_q10=0.4,
        width_q90=0.6,
        p_box=0.0,
        power={"phi=0": 1.0},
        power_mc_se={"phi=0": 0.0},
        n_failed=18,
        seconds=1.0,
    )
    cautions = agreement(asym, sim)
    assert [c.kind for c in cautions] == ["simulation_failed_tables"]
    assert "18 of 20" in cautions[0].message and "trust the simulation" not in cautions[0].message


def test_seed_count_is_a_range():
    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    base = frame[frame["budget"] == 4.64e17].assign(seed=0)
    extra = base[base["r"] == 2].head(1)
    both = pd.concat([base, extra.assign(seed=1), extra.assign(seed=2)], ignore_index=True)
    both["run_id"] = [f"run{i}" for i in range(len(both))]
    design = design_from_table(table_from_frame(both, source="seeds"))
    assert design.seed_range() == (1, 3)
    assert "1-3 seeds per run" in design.summary_line()


def test_misfit_on_one_run_cells_says_why():
    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    one = frame.drop_duplicates(["budget", "r"])  # one run per (budget, r) cell: 24 runs
    pilot = table_from_frame(one, source="one run per cell")
    from phifit.fitters.huber import fit_huber

    fit = fit_huber(pilot, n_starts=3)
    carried = misfit_from_pilot(pilot, fit)
    with pytest.raises(ValueError, match="single run"):
        misfit_noise(carried)
    # the given cell noise joins the offsets' spread in the asymptotic plan's cell term
    assert misfit_noise(carried, 0.01).cell == pytest.approx(np.hypot(carried.tau, 0.01))
    assert np.isfinite(carried.within_sd)
