"""phifit plan: the asymptotic mode's maths, the simulation on a small design, the CLI, --optimize."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from phifit.plan.design import (
    NoiseModel,
    asymptotic_plan,
    bracketing,
    design_from_paper,
    design_from_table,
    noise_from_pilot,
    plan_design,
    simulate_plan,
)
from phifit.plan.inputs import huber_moments
from phifit.study import REFERENCE_PARAMS


def test_huber_moments_match_monte_carlo():
    rng = np.random.default_rng(0)
    sigma, tau, delta = 0.004, 0.003, 1e-3
    u = tau * rng.standard_normal((200_000, 1))
    e = u + sigma * rng.standard_normal((200_000, 2))
    psi = np.clip(e, -delta, delta)
    m, e_psi2, c = huber_moments(sigma, tau, delta)
    assert m == pytest.approx(np.mean(np.abs(e) <= delta), abs=3e-3)
    assert e_psi2 == pytest.approx(np.mean(psi**2), rel=1e-2)
    assert c == pytest.approx(np.mean(psi[:, 0] * psi[:, 1]), rel=3e-2)
    assert huber_moments(0.01, 0.0, math.inf) == (1.0, pytest.approx(1e-4), 0.0)


def test_asymptotic_paper_design_and_seeds():
    design = design_from_paper()
    one = asymptotic_plan(design, REFERENCE_PARAMS, NoiseModel(0.004))
    assert one.trusted and 0.05 < one.width < 0.1
    assert one.power["phi=0"] > 0.99
    four = asymptotic_plan(design.with_seeds(4), REFERENCE_PARAMS, NoiseModel(0.004))
    assert four.width == pytest.approx(one.width / 2, rel=1e-6)  # se falls as 1/sqrt(seeds)
    shared = asymptotic_plan(design, REFERENCE_PARAMS, NoiseModel(0.004, cell=0.004))
    assert shared.width > one.width


def test_bracketing_flags_one_sided_curves(cpu_pilot):
    runs, fit = cpu_pilot
    brackets = bracketing(design_from_table(runs), fit.params)
    assert sum(b["status"] != "bracketed" for b in brackets) >= 10


@pytest.fixture(scope="module")
def cpu_pilot():
    from phifit.fitters.huber import fit_huber
    from phifit.recipes.pairing import select_recipe
    from phifit.runs.table import load_runs

    runs = select_recipe(load_runs("data/cpu_small_runs.csv")).runs
    return runs, fit_huber(runs, n_starts=100)


def test_pilot_plan_names_why(cpu_pilot):
    runs, fit = cpu_pilot
    noise = noise_from_pilot(runs, fit)
    assert 0.01 < noise.per_run < 0.03 and noise.cell == 0 and "one seed" in noise.note
    result = plan_design(design_from_table(runs), params=fit.params, noise=noise)
    assert not result.asymptotic.trusted
    text = " ".join(result.reasons)
    assert "do not bracket" in text and "noise vs the r-effect" in text
    assert "[[Why the interval is wide]]" in result.summary()


def test_simulation_small(tmp_path):
    design = design_from_paper()
    sim = simulate_plan(
        design,
        REFERENCE_PARAMS,
        NoiseModel(0.004),
        n_tables=3,
        n_boot=20,
        n_wild=39,
        n_jobs=1,
        progress=False,
    )
    assert sim.n_failed == 0 and 0.02 < sim.width_median < 0.2
    assert sim.power["phi=0"] == 1.0


def test_simulation_draws_each_table_from_its_law():
    """--law-uncertainty's engine: table j is simulated from laws[j] (recorded as phi_true),
    and the fit recovers each table's own phi, not the common one."""
    design = design_from_paper()
    laws = [{"phi": 0.2}, {"phi": 0.5}, {"phi": 0.8}]
    sim = simulate_plan(
        design,
        REFERENCE_PARAMS,
        NoiseModel(0.004),
        n_tables=3,
        n_boot=20,
        n_wild=39,
        n_jobs=1,
        progress=False,
        laws=laws,
        laws_source="test laws",
    )
    assert sim.law_draws == 3 and sim.law_draws_source == "test laws"
    assert [t["phi_true"] for t in sim.tables] == [0.2, 0.5, 0.8]
    for t in sim.tables:
        assert abs(t["phi_hat"] - t["phi_true"]) < 0.1
    with pytest.raises(ValueError, match="2 law draws for 3 tables"):
        simulate_plan(design, REFERENCE_PARAMS, NoiseModel(0.004), n_tables=3, laws=laws[:2], progress=False)


def test_misfit_from_pilot_and_its_offsets_in_simulated_tables():
    """--misfit: the pilot's (budget, r) cell-mean residuals ride on every simulated table.

    A pilot whose r = 8 cells all sit 0.03 above the law: the offsets recover that pattern
    (r = 8 above the rest), the within-cell sd lies between the per-run noise and the whole
    residual sd, tables carrying the offsets have the wider intervals the misfit makes, and
    the offsets land on their cells with their sign."""
    from phifit.fitters.huber import fit_huber
    from phifit.plan.inputs import misfit_from_pilot
    from phifit.runs.table import table_from_frame
    from phifit.simulation import simulate

    frame = simulate("paper", noise=0.004, seed=11)
    frame.loc[frame["r"] == 8, "loss"] *= np.exp(0.03)
    pilot = table_from_frame(frame, source="pilot.csv")
    fit = fit_huber(pilot, n_starts=100)
    misfit = misfit_from_pilot(pilot, fit)
    by_r = {r: np.mean([v for (b, rr), v in misfit.offsets.items() if rr == r]) for r in (1, 2, 4, 8)}
    assert by_r[8] > max(by_r[1], by_r[2], by_r[4]) + 0.01
    # the per-run noise (0.004) plus what the law misses along size within a cell, and less
    # than the whole residual sd, which also holds the cell means
    assert 0.0036 < misfit.within_sd < noise_from_pilot(pilot, fit).per_run
    design = design_from_paper()
    assert misfit.missing(design.frame) == 0
    common = dict(n_tables=2, n_boot=30, n_wild=39, n_jobs=1, progress=False, seed=4)
    law = dict(fit.params)
    plain = simulate_plan(design, law, NoiseModel(0.002), **common)
    carried = simulate_plan(design, law, NoiseModel(0.002), misfit=misfit, **common)
    assert carried.misfit["cells_without_offset"] == 0 and len(carried.misfit["offsets"]) == 24
    for a, b in zip(plain.tables, carried.tables):
        assert b["width"] > 2 * a["width"]  # the misfit, not the 0.002 noise, sets the width
    from phifit.plan.design import wide_reasons

    asym = asymptotic_plan(design, law, NoiseModel(0.002))
    brackets = bracketing(design, law)
    assert not any("misfit" in r for r in wide_reasons(design, NoiseModel(0.002), asym, brackets, plain))
    assert any("misfit" in r for r in wide_reasons(design, NoiseModel(0.002), asym, brackets, carried))
    # the sign and place of the offsets: a noise-free table of law + offsets, refitted, shows
    # the pilot's cell pattern again in its residuals
    table = simulate(design.frame, params=law, noise=0.0)
    offsets = np.array([misfit.offset_for(b, r) for b, r in zip(table["budget"], table["r"])])
    table["loss"] *= np.exp(offsets)
    again = table_from_frame(table, source="law + offsets")
    refit = fit_huber(again, n_starts=100)
    means = misfit_from_pilot(again, refit).offsets
    keys = sorted(misfit.offsets)
    assert np.corrcoef([misfit.offsets[k] for k in keys], [means[k] for k in keys])[0, 1] > 0.9


def test_spec_speed_below_recorded_widths_scales_with_width():
    from phifit.plan.inputs import spec_speed
    from phifit.spec.sweep_spec import load_spec

    spec = load_spec("cpu_small")
    at32, at16, at256 = (spec_speed(spec, w) for w in (32, 16, 256))
    assert at16.flops_per_second == pytest.approx(at32.flops_per_second / 2)
    assert at256.flops_per_second == pytest.approx(spec_speed(spec, 128).flops_per_second)


def test_report_plan_section(tmp_path):
    """phifit report --plan: the plan of the table's own design in results.json and on the page,
    next to the realised interval."""
    import json

    from phifit.report.analysis import AnalysisOptions, analyse
    from phifit.report.write import write_report
    from phifit.runs.table import table_from_frame
    from phifit.simulation import simulate

    runs = table_from_frame(simulate("paper", noise=0.004, seed=3), source="sim.csv")
    options = AnalysisOptions(n_boot=30, n_starts=100, n_wild=0, plan="self")
    analysis = analyse(runs, options)
    write_report(analysis, tmp_path / "rep")
    results = json.loads((tmp_path / "rep" / "results.json").read_text())
    plan = results["plan"]
    assert plan["design"]["n_runs"] == len(runs) and plan["simulation"] is None
    assert plan["asymptotic"]["width"] == pytest.approx(analysis.plan.asymptotic.width)
    assert 0.02 < plan["asymptotic"]["width"] < 0.2  # the paper design at 0.004 (cf. the asymptotic test)
    html = (tmp_path / "rep" / "index.html").read_text()
    assert 'id="plan"' in html and "Realised on these runs" in html
    with pytest.raises(ValueError, match="plan tables"):
        AnalysisOptions(plan="self", plan_tables=1)
    # --plan-misfit: the simulated tables carry the table's cell means, and the noise is the
    # within-cell part
    from phifit.plan.design import plan_from_fit

    carried = plan_from_fit(runs, analysis.fit, n_tables=2, misfit=True, n_jobs=1)
    assert carried.simulation.misfit is not None and len(carried.simulation.misfit["offsets"]) == 24
    assert carried.noise.source == "pilot, misfit carried"
    assert carried.noise.per_run < noise_from_pilot(runs, analysis.fit).per_run


def test_cli_plan_and_optimize(tmp_path, capsys, monkeypatch):
    from phifit import defaults
    from phifit.cli.main import main

    out = tmp_path / "plan.json"
    assert main(["plan", "--design", "paper", "--noise", "0.004", "--json", str(out)]) == 0
    assert "95% interval width" in capsys.readouterr().out
    spec = tmp_path / "planned.toml"
    # without --simulate a pilot's plan simulates defaults.PLAN_TABLES tables for the widths alone
    # (100; 4 here, the path is the same)
    monkeypatch.setattr(defaults, "PLAN_TABLES", 4)
    args = ["plan", "--pilot", "data/cpu_small_runs.csv", "--design", "cpu_small", "--optimize"]
    assert main(args + ["--out-spec", str(spec)]) == 0
    text = capsys.readouterr().out
    assert "[[Optimised design]]" in text
    assert "simulation: 4 tables x 100 bootstrap replicates (widths only;" in text
    assert "predicted width (simulation)" in text
    from phifit.spec.sweep_spec import load_spec

    assert load_spec(str(spec)).name == "cpu_small_planned"
    assert main(["plan", "--design", "paper", "--noise", "-1"]) == 2
    assert main(["plan", "--design", "paper", "--law-uncertainty"]) == 2  # needs --pilot and --simulate
    assert "--law-uncertainty needs --pilot" in capsys.readouterr().err
    assert main(["plan", "--design", "paper", "--misfit"]) == 2
    assert "--misfit needs --pilot" in capsys.readouterr().err


def test_optimize_simulates_the_new_design_with_the_same_inputs(tmp_path, capsys):
    # --misfit: the optimised design's simulated width carries the pilot's misfit too, as the
    # given design's does, so that "before -> after" compares like with like
    from phifit.cli.main import main

    out = tmp_path / "plan.json"
    args = ["plan", "--pilot", "data/cpu_small_runs.csv", "--design", "cpu_small", "--optimize"]
    args += ["--misfit", "--simulate", "2", "--boot", "20", "--wild", "39", "--jobs", "1", "--json", str(out)]
    assert main(args) == 0
    assert "(both carrying the pilot's misfit)" in capsys.readouterr().out
    saved = json.loads(out.read_text())
    assert saved["simulation"]["misfit"] is not None
    after = saved["optimized"]["sim_misfit_after"]
    assert after["offsets"] == saved["simulation"]["misfit"]["offsets"]
    assert after["within_sd"] == saved["simulation"]["misfit"]["within_sd"]


@pytest.mark.slow
def test_calibration_paper():
    """Simulation mode vs independently simulated tables (benchmarks/plan_calibration.py, smaller)."""
    from phifit.plan.modes import analyse_table

    design = design_from_paper()
    sim = simulate_plan(design, REFERENCE_PARAMS, NoiseModel(0.004), n_tables=40, seed=1, progress=False)
    frame = design.frame[["budget", "r", "size", "n_once", "n_rec", "tokens", "flops"]]
    widths = [
        analyse_table(frame, dict(REFERENCE_PARAMS), (0.004, 0.0), s, 200, 39, None, 500)["width"]
        for s in range(100, 140)
    ]
    assert sim.width_median == pytest.approx(float(np.median(widths)), rel=0.15)


def test_a_simulated_tables_few_replicates_predict_the_reports_width_without_the_small_sample_narrowing():
    """100 normal draws per table: the linear-interpolation 95% width is ~4% narrow of the
    distribution's (the report's 1,000 replicates: ~0.5%); the planner's type-8 quantiles are not."""
    from phifit.plan.modes import simulated_interval

    rng = np.random.default_rng(0)
    true = 2 * 1.959964
    draws = rng.standard_normal((4000, 100))
    planner = np.median([np.diff(simulated_interval(d))[0] for d in draws]) / true
    linear = np.median(np.diff(np.quantile(draws, [0.025, 0.975], axis=1), axis=0)) / true
    report = np.median(
        np.diff(np.quantile(rng.standard_normal((1000, 1000)), [0.025, 0.975], axis=1), axis=0)
    )
    assert 0.95 < linear < 0.965 and abs(report / true - 1) < 0.01
    assert abs(planner - report / true) < 0.015
    assert np.isnan(simulated_interval([np.nan, 1.0])).all()  # one finite draw: no interval
