"""The misfit's shape within a (budget, r) cell (phifit.plan.cell_shapes): fitted curves recover
known bends, a plan's simulated tables carry them at the planned sizes, and they survive JSON."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from phifit.plan.cell_shapes import CellShape, drawn_shape, fit_cell_shapes, log_size
from phifit.plan.inputs import Misfit


def bent_table(noise: float = 1e-4, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """4 cells of 5 sizes each; cell k's residuals are a_k + b_k u + c_k u^2 + noise."""
    rng = np.random.default_rng(seed)
    truth = {
        (1e18, 1): (0.01, 0.002, 0.03),
        (1e18, 4): (-0.01, -0.004, 0.02),
        (1e19, 1): (0.0, 0.001, 0.025),
        (1e19, 4): (0.005, 0.0, 0.035),
    }
    rows, res = [], []
    for (budget, r), (a, b, c) in truth.items():
        sizes = np.geomspace(1e7, 1e8, 5)
        x = np.log(sizes)
        u = x - x.mean()
        for size, ui in zip(sizes, u, strict=True):
            rows.append({"budget": budget, "r": r, "n_once": 0.2 * size, "n_rec": 0.8 * size})
            res.append(a + b * ui + c * ui * ui + noise * rng.standard_normal())
    return pd.DataFrame(rows).assign(res=res), truth


def test_cell_curves_recover_known_bends_and_take_the_within_cell_variance():
    frame, truth = bent_table()
    sf = fit_cell_shapes(frame, frame["res"].to_numpy())
    for key, (a, b, c) in truth.items():
        shape = sf.shapes[key]
        assert shape.a == pytest.approx(a, abs=2e-4) and shape.b == pytest.approx(b, abs=3e-4)
        assert shape.c == pytest.approx(c, abs=3e-4)
    assert sf.share > 0.99 and sf.noise_sd == pytest.approx(1e-4, rel=0.6)
    # the curvatures differ across cells by sd ~0.0065, far above their sampling noise
    assert sf.tau_c == pytest.approx(np.std([c for *_, c in truth.values()], ddof=1), rel=0.1)


def test_degree_follows_the_cell_size():
    """2 runs: a level; 3 runs: a line; 4 runs at 2 sizes: a line (no parabola through 2 points)."""
    frame = pd.DataFrame(
        {
            "budget": [1.0] * 2 + [2.0] * 3 + [3.0] * 4,
            "r": 1,
            "n_once": [1, 2, 1, 2, 4, 1, 1, 2, 2],
            "n_rec": [0] * 9,
        }
    )
    res = np.array([0.1, 0.3, 0.0, 0.1, 0.2, 0.0, 0.02, 0.1, 0.12])
    shapes = fit_cell_shapes(frame, res).shapes
    assert shapes[(1.0, 1)].b == 0 and shapes[(1.0, 1)].a == pytest.approx(0.2)
    assert shapes[(2.0, 1)].c == 0 and shapes[(2.0, 1)].b != 0
    assert shapes[(3.0, 1)].c == 0 and shapes[(3.0, 1)].b == pytest.approx(0.1 / np.log(2))


def test_a_seen_cell_carries_its_curve_at_the_planned_sizes_clipped_to_the_pilots_range():
    shape = CellShape(center=np.log(50.0), a=0.01, b=0.002, c=0.03, lo=-1.0, hi=1.0)
    misfit = Misfit(
        offsets={(1e18, 1): 0.02, (1e18, 4): -0.01},
        within_sd=0.005,
        source="test",
        tau=0.004,
        shapes={(1e18, 1): shape},
        shape_sd=0.001,
        tau_b=0.002,
        tau_c=0.01,
    )
    plan = pd.DataFrame(
        {
            "budget": [1e18, 1e18, 1e18, 1e18, 1e19, 1e19, 1e19],
            "r": [1, 1, 1, 4, 1, 1, 1],
            "n_once": [50.0, 50.0 * np.e**0.5, 50.0 * np.e**3, 10.0, 10.0, 20.0, 40.0],
            "n_rec": 0.0,
        }
    )
    out = misfit.table_offsets(plan, np.random.default_rng(0))
    assert out[0] == pytest.approx(0.01)
    assert out[1] == pytest.approx(0.01 + 0.002 * 0.5 + 0.03 * 0.25)
    assert out[2] == pytest.approx(0.01 + 0.002 + 0.03)  # u = 3 clipped to the pilot's 1
    assert out[3] == pytest.approx(-0.01)  # seen, level only (no curve fitted for it)
    # the unseen cell: level + slope + curvature drawn once for the cell, centred on its own runs
    z = np.random.default_rng(0).standard_normal(3)  # the cell's level, slope, curvature, in that order
    u = log_size(plan.iloc[4:]) - log_size(plan.iloc[4:]).mean()
    expected = 0.004 * z[0] + 0.002 * z[1] * u + 0.01 * z[2] * (u * u - np.mean(u * u))
    np.testing.assert_allclose(out[4:], expected, rtol=1e-12)
    assert misfit.per_run_sd == 0.001 and misfit.to_dict()["shapes"][0]["c"] == 0.03


def test_shapes_survive_json_and_a_level_only_misfit_reads_as_before():
    frame, _ = bent_table()
    sf = fit_cell_shapes(frame, frame["res"].to_numpy())
    misfit = Misfit({k: 0.0 for k in sf.shapes}, 0.01, "t", shapes=sf.shapes, shape_sd=sf.noise_sd)
    again = Misfit.from_dict(misfit.to_dict())
    assert again.shapes == misfit.shapes and again.shape_sd == misfit.shape_sd
    level = Misfit({(1.0, 1): 0.1}, 0.01, "t", tau=0.02)
    assert "shapes" not in level.to_dict() and Misfit.from_dict(level.to_dict()).per_run_sd == 0.01
    plan = pd.DataFrame({"budget": [1.0, 2.0], "r": [1, 1], "n_once": [1.0, 1.0], "n_rec": [0.0, 0.0]})
    out = level.table_offsets(plan, np.random.default_rng(3))
    assert out[0] == 0.1 and out[1] == pytest.approx(0.02 * np.random.default_rng(3).standard_normal())


def test_drawn_shape_keeps_the_level_as_the_cells_mean():
    x = np.log([10.0, 20.0, 40.0, 80.0])
    values = drawn_shape(x, 0.05, 0.01, 0.02, np.random.default_rng(1))
    assert values.mean() == pytest.approx(0.05)


def test_simulated_tables_take_the_noise_the_curves_leave(monkeypatch):
    """With cell curves carried, each simulated table adds the per-run noise left after the curves
    (not the within-cell sd, which holds the curves) and the curves at the planned sizes."""
    import phifit.plan.modes as modes
    from phifit.plan.inputs import NoiseModel, design_from_table
    from phifit.runs.table import table_from_frame

    frame, _ = bent_table()
    sf = fit_cell_shapes(frame, frame["res"].to_numpy())
    misfit = Misfit({k: 0.0 for k in sf.shapes}, 0.02, "t", shapes=sf.shapes, shape_sd=sf.noise_sd)
    runs = table_from_frame(
        frame.assign(tokens=1e9, loss=3.0, run_id=[f"x{i}" for i in range(len(frame))]).drop(columns="res"),
        source="t",
    )
    seen: list[tuple] = []
    monkeypatch.setattr(modes, "parallel_map", lambda func, tasks, **kw: seen.extend(tasks) or [])
    modes.simulate_plan(
        design_from_table(runs), {}, NoiseModel(0.02, 0.0, "t", ""), n_tables=2, misfit=misfit
    )
    assert len(seen) == 2
    for task in seen:
        assert task[2] == (sf.noise_sd, 0.0)  # (per-run, per-cell) noise
        np.testing.assert_allclose(task[8], frame["res"].to_numpy(), atol=5e-4)  # the curves, at the runs


def test_the_plan_command_carries_shapes_only_with_a_pilot_and_the_misfit(capsys):
    from pathlib import Path

    from phifit.cli.main import main

    study = str(Path(__file__).resolve().parents[1] / "data" / "looped_study_runs_digitized.csv")
    assert main(["plan", "--pilot", study, "--no-misfit", "--misfit-shape", "--simulate", "0"]) == 2
    assert "--misfit-model shape needs --pilot and the misfit carried" in capsys.readouterr().err
    assert (
        main(["plan", "--pilot", study, "--misfit-shape", "--simulate", "2", "--boot", "20", "--wild", "20"])
        == 0
    )
    out = capsys.readouterr().out
    assert "misfit carried with its shape" in out and "97% of their within-cell sum of squares" in out


def test_auto_carries_the_curves_only_where_they_cover_every_planned_run():
    """--misfit-model auto: the pilot's own design takes its cell curves; a design with one run below
    its cell's sizes, or in a cell the pilot never ran, takes a level per cell, and says why."""
    from pathlib import Path

    from phifit.fitters.huber import fit_huber
    from phifit.plan.inputs import design_from_table, design_misfit, uncovered_runs
    from phifit.runs.table import load_runs

    study = load_runs(str(Path(__file__).resolve().parents[1] / "data" / "looped_study_runs_digitized.csv"))
    fit = fit_huber(study)
    own = design_from_table(study).frame
    noise, curves = design_misfit(study, fit, own)
    assert curves is not None and curves.shapes and "cover every planned run" in curves.choice
    assert uncovered_runs(curves, own) == 0

    smallest = own.loc[[own["n_rec"].idxmin()]]
    below = pd.concat([own, smallest.assign(n_once=smallest["n_once"] / 2, n_rec=smallest["n_rec"] / 2)])
    unseen = pd.concat([own, own.iloc[[0]].assign(budget=1e22)])
    for design in (below, unseen):
        assert uncovered_runs(curves, design) == 1
        noise_level, level = design_misfit(study, fit, design)
        assert level is not None and not level.shapes
        assert f"1 of {len(design)} planned runs lie outside" in level.choice
        assert noise_level == noise  # the plan's noise does not depend on the model
    asked = design_misfit(study, fit, own, model="level")[1]
    assert asked is not None and not asked.shapes and asked.choice == ""
    assert Misfit.from_dict(curves.to_dict()).choice == curves.choice
    with pytest.raises(ValueError, match="misfit model must be one of auto, level, shape"):
        design_misfit(study, fit, own, model="curves")


def test_a_plan_whose_law_sits_on_the_box_says_its_width_is_not_a_precision():
    from phifit.plan.design import plan_design
    from phifit.plan.inputs import NoiseModel, design_from_paper
    from phifit.study import REFERENCE_PARAMS

    noise = NoiseModel(0.005, 0.0, "t")
    on_box = plan_design(design_from_paper(), params={**REFERENCE_PARAMS, "phi": -3.0}, noise=noise)
    kinds = [c.kind for c in on_box.warnings]
    assert kinds.count("law_at_box") == 1
    assert "phi = -3 lies on the end of its box [-3, 3]" in on_box.summary()
    inside = plan_design(design_from_paper(), params=dict(REFERENCE_PARAMS), noise=noise)
    assert "law_at_box" not in [c.kind for c in inside.warnings]
    # the plan declines the width, in the summary and in the JSON, and only on the box
    assert not on_box.width_is_precision and inside.width_is_precision
    assert "(box) no width predicted" in on_box.summary()
    assert "no width predicted" not in inside.summary()
    assert type(on_box).from_json(on_box.to_json()).to_dict()["width_is_precision"] is False
    assert inside.to_dict()["width_is_precision"] is True
    moved = {"line": "x", "width_before": 1.0, "width_after": 0.5, "flops_before": 2.0, "flops_after": 1.0}
    assert "compared truncated widths" in dataclasses.replace(on_box, optimized=moved).summary()
    assert "compared truncated widths" not in dataclasses.replace(inside, optimized=moved).summary()


def test_on_the_box_the_two_modes_widths_are_not_compared():
    from types import SimpleNamespace

    from phifit.plan.design import agreement

    asym = SimpleNamespace(width=2.0, power={"phi=0": 1.0}, trusted=False)
    sim = SimpleNamespace(width_median=1.0, n_tables=40, n_failed=0, power={"phi=0": 0.5})
    both = [c.message for c in agreement(asym, sim)]
    assert any("width" in m for m in both) and any("power" in m for m in both)
    powers_only = [c.message for c in agreement(asym, sim, widths=False)]
    assert powers_only and not any("width" in m for m in powers_only)


def test_a_pilots_plan_at_an_assumed_phi_refits_the_other_parameters(tmp_path):
    """--phi with a pilot plans under the pilot's fit with phi held there (its profile point), not the
    free fit with phi swapped: the other five parameters then still fit the pilot."""
    import json

    from phifit.cli import main
    from phifit.fitters.huber import fit_huber
    from phifit.fitters.objective import loss_terms
    from phifit.law import DEFAULT_BOUNDS, LawSpec, log_loss, params_to_theta
    from phifit.runs.table import load_runs

    path = "data/cpu_recipe_runs.csv"  # its free fit has phi on the box's end (-3)
    out = tmp_path / "plan.json"
    assert main(["plan", "--pilot", path, "--phi", "-1.5", "--simulate", "0", "--json", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["law_source"].endswith("with phi held at -1.5") and plan["width_is_precision"] is True
    pilot = load_runs(path)
    free = fit_huber(pilot)
    held = fit_huber(pilot, spec=LawSpec(fixed={"phi": -1.5}, bounds=DEFAULT_BOUNDS))
    assert plan["law"] == pytest.approx({k: float(v) for k, v in held.params.items()}, rel=1e-9)
    swapped = {**{k: float(v) for k, v in free.params.items()}, "phi": -1.5}

    def misfit(law):  # the Huber objective of a law on the pilot's log-losses
        return loss_terms(log_loss(params_to_theta(law), pilot.design) - pilot.log_loss).sum()

    assert misfit(plan["law"]) < misfit(swapped)
    assert "law_at_box" not in [w["kind"] for w in plan["warnings"]]
