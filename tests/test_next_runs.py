"""The next runs to train (phifit.plan.next_runs) and the misfit a pilot's plan carries by default."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from phifit.fitters.huber import fit_huber
from phifit.plan.inputs import Misfit, design_from_table, pilot_noise
from phifit.plan.modes import asymptotic_plan
from phifit.plan.next_runs import _cells, _jacobian, _Sandwich, check_pool, choose_next
from phifit.runs.table import load_runs, table_from_frame
from phifit.simulation import simulate
from phifit.study import REFERENCE_PARAMS

STUDY = "data/looped_study_runs_digitized.csv"


@pytest.fixture(scope="module")
def study():
    return load_runs(STUDY)


def lowest_budgets(runs, n: int):
    frame = runs.frame
    keep = frame["budget"].isin(sorted(frame["budget"].unique())[:n])
    return table_from_frame(frame[keep].reset_index(drop=True), source=f"lowest {n}")


def test_rank_one_updates_match_a_fresh_sandwich(study):
    """se_with (rank-one updates of M, the cell sums and their outer products) equals the
    sandwich rebuilt from scratch with the candidate added, for new and seen cells."""
    pilot = lowest_budgets(study, 2)
    fit = fit_huber(pilot)
    noise, _ = pilot_noise(pilot, fit)
    theta = fit.theta
    now = design_from_table(pilot).frame
    pool = design_from_table(study).frame
    sand = _Sandwich(noise, 0.001)
    for j, c in zip(_jacobian(now, theta), _cells(now)):
        sand.add(j, c)
    J, cells = _jacobian(pool, theta), _cells(pool)
    fast = sand.se_with(J, cells)
    for i in (0, 5, 40, 90, 115):  # seen cells (budgets 1-2) and new ones
        fresh = _Sandwich(noise, 0.001)
        for j, c in zip(_jacobian(now, theta), _cells(now)):
            fresh.add(j, c)
        fresh.add(J[i], cells[i])
        assert fast[i] == pytest.approx(fresh.se(), rel=1e-9)


def test_width_now_is_the_asymptotic_plan(study):
    """With runs that identify the law, the box's weak prior is negligible: the width of the runs
    so far is the asymptotic plan's (cluster sandwich with the misfit's cell term) to 1%."""
    pilot = lowest_budgets(study, 3)
    fit = fit_huber(pilot)
    noise, _ = pilot_noise(pilot, fit)
    plan = asymptotic_plan(design_from_table(pilot), fit.params, noise)
    nxt = choose_next(pilot, study.frame, 4, fit=fit)
    assert nxt.width_now == pytest.approx(plan.width, rel=0.01)
    assert nxt.noise.cell == pytest.approx(noise.cell) and noise.cell > 0
    # the greedy path is monotone and its last step is the final width
    widths = [p["width_before"] for p in nxt.picks] + [nxt.width_after]
    assert all(a > b for a, b in zip(widths, widths[1:]))
    assert nxt.picks[-1]["width_after"] == nxt.width_after
    # ... and the final width is the asymptotic plan of the runs plus the picks
    both = pd.concat([pilot.frame, nxt.frame[list(pilot.frame.columns)]], ignore_index=True)
    plan2 = asymptotic_plan(design_from_table(table_from_frame(both, source="b")), fit.params, noise)
    assert nxt.width_after == pytest.approx(plan2.width, rel=0.01)


def test_cap_exclusion_and_reasons(study):
    pilot = lowest_budgets(study, 2)
    cap = 1.2e19
    nxt = choose_next(pilot, study.frame, 50, max_flops=cap)
    assert nxt.flops_added <= cap * (1 + 1e-12)
    assert len(nxt.picks) < 50 and "cap" in nxt.stopped
    assert nxt.n_candidates == len(study.frame) - len(pilot.frame)  # the pilot's runs are not candidates
    ids = {p["run_id"] for p in nxt.picks}
    assert not ids & set(pilot.frame["run_id"])
    for p in nxt.picks:
        assert p["cell"] in ("new", "seen") and "optimum" in p["side"] and p["why"]
    text = nxt.summary()
    assert "[[Next runs]]" in text and "stopped after" in text
    again = type(nxt).from_dict(nxt.to_dict())
    assert again.picks == nxt.picks and again.noise == nxt.noise


def test_unidentified_pilot_asks_for_other_r():
    """A pilot of r = 1 runs only does not identify phi: its predicted width is the box's
    (the weak prior), and the first pick is a looped run."""
    table = simulate("paper", params=REFERENCE_PARAMS, noise=0.003, seed=4)
    pilot = table_from_frame(table[table["r"] == 1].reset_index(drop=True), source="r1")
    nxt = choose_next(pilot, table, 3, misfit=False)
    assert nxt.width_now > 2.0  # the box's prior: not a measurement
    assert nxt.picks[0]["r"] != 1
    assert nxt.width_after < 0.5 * nxt.width_now


def test_pool_errors_name_row_and_column():
    pool = pd.DataFrame(
        {
            "budget": [1e18, 1e18],
            "r": [1, 2],
            "n_once": [1.0, 1.0],
            "n_rec": [1e7, 1e7],
            "tokens": [1e9, "lots"],
            "flops": [1e18, 1e18],
        }
    )
    with pytest.raises(ValueError, match=r"pool.csv: row 3, column 'tokens'"):
        check_pool(pool, "pool.csv")
    with pytest.raises(ValueError, match="missing flops"):
        check_pool(pool.drop(columns="flops"), "pool.csv")


def test_misfit_is_carried_by_default(study):
    """pilot_noise carries the misfit unless told not to: per-run sd is the within-cell sd,
    the cell sd the offsets' random-effects sd; unseen cells draw from N(0, tau^2)."""
    fit = fit_huber(study)
    noise, misfit = pilot_noise(study, fit)
    assert misfit is not None and noise.cell == pytest.approx(misfit.tau) and 0.001 < misfit.tau < 0.004
    plain, none = pilot_noise(study, fit, misfit=False)
    assert none is None and plain.cell == 0 and plain.per_run > noise.per_run
    frame = pd.DataFrame({"budget": [4.64e17, 4.64e17, 9e99, 9e99, 8e99], "r": [1, 1, 1, 1, 2]})
    draws = np.array([misfit.table_offsets(frame, np.random.default_rng(s)) for s in range(4000)])
    assert np.all(draws[:, 0] == misfit.offset_for(4.64e17, 1))  # seen: copied
    assert np.all(draws[:, 2] == draws[:, 3])  # one draw per unseen cell, shared by its runs
    assert np.std(draws[:, 2]) == pytest.approx(misfit.tau, rel=0.05)
    assert abs(np.corrcoef(draws[:, 2], draws[:, 4])[0, 1]) < 0.06
    assert Misfit.from_dict(misfit.to_dict()) == misfit


def test_one_run_per_cell_falls_back_to_noise():
    """A pilot with one run per (budget, r) cell cannot tell misfit from noise: no misfit, said."""
    table = simulate("paper", params=REFERENCE_PARAMS, noise=0.003, seed=2)
    one = table.groupby(["budget", "r"]).head(1).reset_index(drop=True)
    runs = table_from_frame(one, source="one.csv")
    noise, misfit = pilot_noise(runs, fit_huber(runs))
    assert misfit is None and "misfit not carried" in noise.note and noise.cell == 0
    assert math.isfinite(noise.per_run)


def test_cli_next_writes_picks_that_sweep_reads(tmp_path, capsys):
    from phifit.trainers.cli import read_pick_ids

    from phifit.cli.main import main

    out = tmp_path / "picks.csv"
    code = main(
        [
            "plan",
            "--next",
            "3",
            "--pilot",
            "data/cpu_small_runs.csv",
            "--pool",
            "cpu_planned",
            "--out-spec",
            str(out),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "[[Next runs]]" in text and "--runs-from" in text
    ids = read_pick_ids(str(out))
    assert len(ids) == 3 and all(i.startswith("baseline-r") for i in ids)
    # the picks file exists: refused unless --force, and left as it was
    before = out.read_text()
    assert (
        main(
            [
                "plan",
                "--next",
                "2",
                "--pilot",
                "data/cpu_small_runs.csv",
                "--pool",
                "cpu_planned",
                "--out-spec",
                str(out),
            ]
        )
        == 2
    )
    assert "exists" in capsys.readouterr().err and out.read_text() == before
    bad = tmp_path / "bad.csv"
    bad.write_text("id\nx\n")
    with pytest.raises(ValueError, match="expected a 'run_id' column"):
        read_pick_ids(str(bad))


def test_a_tiny_pilot_is_flagged(study):
    """7 runs for 6 parameters leave the noise unmeasured: the widths are flagged, first."""
    pilot = table_from_frame(study.frame.sample(7, random_state=1).reset_index(drop=True), source="seven")
    nxt = choose_next(pilot, study.frame, 2)
    assert nxt.warnings and "1 residual degree" in nxt.warnings[0]
    assert nxt.summary().startswith("WARNING: the runs so far leave 1 residual")
    assert not choose_next(lowest_budgets(study, 3), study.frame, 1).warnings
