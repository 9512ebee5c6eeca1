"""Leave one part out (phifit.diagnostics.parts): the part that carries the answer is named.

Tables drawn from the law on the study's design (116 runs: 11 sizes, 6 budgets, r in {1, 2, 4, 8}):
one where only one size's looped runs depend on phi (without it phi is not located), and a clean
one where no part carries phi's reading; and the bundled CPU BPE sweep, whose phi rests on its
width-16 runs.  Few replicates and starts keep each test to seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import paper_table

from phifit.diagnostics import PartsResult, leave_one_part_out
from phifit.diagnostics.parts import far_count, settled, table_parts
from phifit.diagnostics.parts_result import flips, interval_reading
from phifit.fitters.huber import HuberOptions, fit_huber
from phifit.law import REFERENCE_PARAMS
from phifit.report.loader import load
from phifit.result import FitResult
from phifit.runs.table import RunTable, load_runs, table_from_frame
from phifit.simulation import simulate
from phifit.study import paper_design

ROOT = Path(__file__).resolve().parents[1]

#: small settings: replicates per part, starts of every fit
FAST = {"n_boot": 19, "n_starts": 100, "lack_of_fit": "none"}


def one_size_informs(size: str = "12", share: float = 0.01) -> RunTable:
    """The study's design drawn from the law (phi = 0.5, noise 0.3%), where only one size's looped
    runs depend on phi: every other size keeps ``share`` of its shared block in N_rec (the rest
    moved to N_once, so N_once + N_rec is unchanged), and r^phi barely moves their N_eff.  The
    truth: phi rests on that size alone."""
    design = paper_design().astype({"n_once": float, "n_rec": float})
    other = design["size"].astype(str) != size
    moved = design.loc[other, "n_rec"] * (1 - share)
    design.loc[other, "n_once"] += moved
    design.loc[other, "n_rec"] -= moved
    frame = simulate(design, params={**REFERENCE_PARAMS, "phi": 0.5}, noise=0.003, seed=0)
    return table_from_frame(frame, source=f"only size {size} informs phi")


def fit_of(runs):
    return fit_huber(runs, options=HuberOptions(n_starts=FAST["n_starts"], seed=0))


def test_the_part_that_carries_the_answer_is_named():
    """Only size 12 informs phi: without it phi is not located (its fit runs to the box), and the
    headline names size 12 and nothing else."""
    runs = one_size_informs()
    fit = fit_of(runs)
    parts = leave_one_part_out(runs, fit, **FAST)
    assert 0.45 < fit.phi < 0.55 and parts.reference_inside_01
    assert [row.name for row in parts.carrying] == ["size 12"]
    row = parts.carrying[0]
    assert "not located" in row.flips[0] and row.phi == pytest.approx(-3.0)
    assert parts.headline.startswith("The answer rests on size 12: without size 12 (20 of 116 runs)")
    assert all(abs(r.delta_phi) < 0.05 for r in parts.rows if r is not row)
    frame = parts.to_frame()
    assert len(frame) == 21 and set(frame["family"]) == {"size", "budget", "r"}
    assert frame.loc[frame["part"] == "12", "flips"].str.contains("not located").all()


def test_cpu_bpe_rests_on_its_d16_runs():
    """The bundled CPU BPE sweep, read against its report's interval: without its 22 runs at width
    16, phi's interval leaves (0, 1) and holds phi = 0 (phi = 0.308, the 500-start fit ``phifit
    fit`` makes of that table)."""
    runs = load_runs(ROOT / "data" / "cpu_bpe_runs.csv")
    shipped = json.loads((ROOT / "reports" / "cpu_bpe" / "results.json").read_text(encoding="utf-8"))
    fit = FitResult.from_dict(shipped["fit"])  # with its 1000-replicate interval [0.547, 0.866]
    parts = leave_one_part_out(runs, fit, families=("size",), n_boot=19, lack_of_fit="none")
    assert parts.reference_source == "the fit's 1000-replicate cell bootstrap"
    assert [row.name for row in parts.carrying] == ["size 16"]
    row = parts.carrying[0]
    assert row.phi == pytest.approx(0.3078, abs=1e-3) and row.n_left_out == 22
    assert "phi = 0 no longer excluded" in " ".join(row.flips) and row.ci[0] < 0 < row.ci[1] < 1


def test_no_part_carries_a_clean_table():
    runs = paper_table(noise=0.003, seed=5, phi=0.5)
    parts = leave_one_part_out(runs, fit_of(runs), **FAST)
    assert parts.carrying == []
    assert parts.headline.startswith("No single part carries the answer")
    assert "11 sizes, 6 budgets and 4 values of r" in parts.headline
    assert all(row.identified for row in parts.rows)
    assert all(abs(row.delta_phi) < 0.1 for row in parts.rows)


def test_parts_that_leave_phi_unidentified_are_not_left_out():
    """With r in {1, 4} alone, leaving out either r leaves a single r: both rows say so."""
    full = paper_table(noise=0.003, seed=2, phi=0.5)
    runs = full.subset(np.isin(full.r, [1, 4]))
    parts = leave_one_part_out(runs, fit_of(runs), families=("r", "budget"), **FAST)
    by_name = {row.name: row for row in parts.rows}
    for name in ("r = 1", "r = 4"):
        assert not by_name[name].identified and "not identified without it" in by_name[name].reason
        assert by_name[name].phi is None
    assert "not left out (r = 1 and r = 4)" in parts.headline
    assert all(row.identified for row in parts.rows if row.family == "budget")


def test_the_result_round_trips_and_loads_by_kind(tmp_path):
    runs = paper_table(noise=0.003, seed=5, phi=0.5)
    fit = fit_of(runs)
    parts = leave_one_part_out(runs, fit, families=("r",), **FAST)
    path = tmp_path / "parts.json"
    parts.to_json(path)
    back = load(path)
    assert isinstance(back, PartsResult) and back == parts
    data = json.loads(path.read_text())
    assert data["kind"] == "parts" and len(data["rows"]) == 4
    assert "Leave one part out" in parts.summary()


def test_the_full_tables_interval_comes_from_the_fit_when_attached():
    from phifit.bootstrap.block import block_bootstrap

    runs = paper_table(noise=0.003, seed=5, phi=0.5)
    fit = fit_of(runs)
    boot = block_bootstrap(runs, fit, n_boot=20, seed=0, n_jobs=1, progress=False)
    parts = leave_one_part_out(runs, boot.attach(fit), families=("budget",), **FAST)
    assert parts.reference_ci == pytest.approx(boot.ci["phi"])
    assert parts.reference_source == "the fit's 20-replicate cell bootstrap"


def test_part_families_follow_the_columns():
    runs = paper_table()
    parts, notes = table_parts(runs)
    assert [p.name for p in parts][:2] == ["size 6", "size 8"] and not notes
    assert [p.name for p in parts if p.family == "budget"][0] == "budget 4.64e17"
    no_size = table_from_frame(runs.frame.drop(columns=["size"]), source="x")
    parts, notes = table_parts(no_size)
    assert {p.family for p in parts} == {"budget", "r"} and "no 'size' or 'd_model' column" in notes[0]
    with pytest.raises(ValueError, match="unknown part families"):
        table_parts(runs, ("seed",))


def test_a_change_within_monte_carlo_error_is_not_a_flip():
    """39 replicates settle an inclusion from 5 beyond the value on, never an exclusion; 1000 settle
    both (k <= 13 or k >= 38).  A flip counts only where both readings are settled."""
    assert [k for k in range(10) if settled(k, 39, 0.95)] == [5, 6, 7, 8, 9]
    assert settled(0, 182, 0.95) and not settled(0, 181, 0.95)
    assert settled(13, 1000, 0.95) and not settled(14, 1000, 0.95) and settled(38, 1000, 0.95)
    inside = np.r_[np.full(5, -0.1), np.linspace(0.2, 0.8, 34)]
    assert far_count(inside, 0.0) == 5 and far_count(inside, 1.0) == 0
    ref = interval_reading([0.2, 0.8])
    firm, unsure = flips(ref, interval_reading([-0.1, 0.8]), (True, True))
    assert firm == ["interval leaves (0, 1)", "phi = 0 no longer excluded"] and not unsure
    firm, unsure = flips(interval_reading([-0.1, 0.8]), ref, (False, True))
    assert not firm and unsure == ["interval now inside (0, 1)", "phi = 0 now excluded"]


def test_compare_and_diagnose_print_the_table_and_write_it(tmp_path, capsys):
    from phifit.cli import main

    path = tmp_path / "runs.csv"
    one_size_informs().frame.to_csv(path, index=False)
    small = ["--starts", "50", "--wild", "19", "--bootstrap", "20", "--parts", "5"]
    out_json = tmp_path / "compare.json"
    argv = ["compare", str(path), *small, "--no-cv", "--no-multipliers", "--quiet", "--json", str(out_json)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "[[Leave one part out" in text and "The answer rests on size 12" in text
    parts = json.loads(out_json.read_text())["parts"]
    assert parts["kind"] == "parts" and parts["headline"].startswith("The answer rests on size 12")
    out_json = tmp_path / "diagnose.json"
    skip = ["--skip", "influence,consistency,drift,multipliers"]
    assert main(["diagnose", str(path), *small, *skip, "--json", str(out_json)]) == 0
    assert "[[Leave one part out" in capsys.readouterr().out
    assert json.loads(out_json.read_text())["parts"]["rows"][3]["name"] == "size 12"
    assert main(["compare", str(path), "--parts", "1"]) == 2
    assert "--parts must be 0 (skip) or >= 2" in capsys.readouterr().err
    assert (
        main(
            [
                "diagnose",
                str(path),
                "--starts",
                "20",
                "--skip",
                "influence,consistency,drift,multipliers,parts",
            ]
        )
        == 0
    )
    assert "[[Leave one part out" not in capsys.readouterr().out


def test_a_table_with_no_verdict_on_phi_leaves_no_part_out():
    """No size's looped runs depend on phi: the full table's interval holds both phi = 0 and
    phi = 1, so there is no verdict for a part to carry and nothing is refitted."""
    runs = one_size_informs(size="none")
    parts = leave_one_part_out(runs, fit_of(runs), **FAST)
    lo, hi = parts.reference_ci
    assert lo <= 0 and hi >= 1 and parts.reference_source.endswith("drawn here")
    assert parts.rows == [] and parts.carrying == [] and parts.to_frame().empty
    assert parts.headline.startswith("No part is left out: the full table's 95% interval of phi")
    assert "holds both phi = 0 and phi = 1" in parts.headline and parts.headline in parts.summary()
