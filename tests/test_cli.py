"""The command line: simulate -> fit -> JSON, and the promises about user files."""

from __future__ import annotations

import json

import pytest

from phifit.cli import main
from phifit.law import REFERENCE_PARAMS
from phifit.result import FitResult


def test_simulate_then_fit_json(tmp_path, capsys):
    runs, out = tmp_path / "runs.csv", tmp_path / "fit.json"
    assert main(["simulate", "--design", "paper", "--phi", "0.6", "--out", str(runs)]) == 0
    assert main(["fit", str(runs), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "[[Parameters]]" in text and "phi" in text
    data = json.loads(out.read_text())
    for key in ("method", "n_runs", "params", "r2", "rmse", "objective", "converged", "warnings"):
        assert key in data
    assert data["n_runs"] == 116 and data["method"] == "huber"
    assert data["params"]["phi"] == pytest.approx(0.6, abs=1e-6)
    assert set(data["params"]) == set(REFERENCE_PARAMS)
    assert FitResult.from_json(out).params["phi"] == data["params"]["phi"]


def test_fit_fix_phi(tmp_path):
    runs, out = tmp_path / "runs.csv", tmp_path / "fit.json"
    main(["simulate", "--out", str(runs)])
    assert main(["fit", str(runs), "--fix", "phi=0", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["params"]["phi"] == 0.0 and data["fixed"] == {"phi": 0.0}


def test_never_overwrites_user_files(tmp_path, capsys):
    runs, precious = tmp_path / "runs.csv", tmp_path / "notes.json"
    main(["simulate", "--out", str(runs)])
    precious.write_text('{"mine": true}')
    assert main(["fit", str(runs), "--json", str(precious)]) == 2
    assert "not written by phifit" in capsys.readouterr().err
    assert precious.read_text() == '{"mine": true}'
    assert main(["simulate", "--out", str(runs)]) == 2  # exists
    assert main(["fit", str(runs), "--json", str(precious), "--force"]) == 0
    out = tmp_path / "fit.json"
    assert main(["fit", str(runs), "--json", str(out)]) == 0
    assert main(["fit", str(runs), "--json", str(out)]) == 0  # phifit's own output: replaced


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "RUNS", "--fix", "phi"], "--fix: expected NAME=VALUE"),
        (["fit", "RUNS", "--fix", "gamma=1"], "unknown parameter 'gamma'"),
        (["fit", "RUNS", "--starts", "0"], "--starts must be >= 1"),
        (["fit", "RUNS", "--columns", "r"], "--columns: expected CANONICAL=COLUMN"),
        (["simulate", "--design", "nope", "--out", "OUT"], "nope: file not found"),
    ],
)
def test_bad_arguments_exit_2(tmp_path, capsys, argv, message):
    runs = tmp_path / "runs.csv"
    main(["simulate", "--out", str(runs)])
    capsys.readouterr()
    argv = [str(runs) if a == "RUNS" else str(tmp_path / "o.csv") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_simulate_user_design(tmp_path):
    design = tmp_path / "design.csv"
    design.write_text("r,n_once,n_rec,tokens\n1,1e6,1e7,1e9\n4,1e6,3e6,1e9\n")
    out = tmp_path / "sim.csv"
    assert main(["simulate", "--design", str(design), "--out", str(out), "--noise", "0.01"]) == 0
    assert out.read_text().count("\n") == 3


def test_fit_and_compare_bayes_from_the_command_line(tmp_path, capsys):
    """--method bayes reaches PyMC through the CLI (small sampler settings)."""
    runs, out, post = tmp_path / "runs.csv", tmp_path / "fit.json", tmp_path / "post.nc"
    main(["simulate", "--noise", "0.005", "--seed", "3", "--out", str(runs)])
    small = ["--draws", "200", "--tune", "200", "--chains", "2", "--quiet"]
    assert (
        main(
            ["fit", str(runs), "--method", "bayes", *small, "--json", str(out), "--save-posterior", str(post)]
        )
        == 0
    )
    assert "95% HDI" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["method"] == "bayes" and data["ci"]["phi"][0] < 0.459 < data["ci"]["phi"][1]
    assert post.exists()
    assert main(["fit", str(runs), "--method", "bayes", *small, "--save-posterior", str(post)]) == 0
    notes = tmp_path / "notes.nc"
    notes.write_text("mine")
    assert main(["fit", str(runs), "--method", "bayes", *small, "--save-posterior", str(notes)]) == 2
    assert notes.read_text() == "mine"
    cmp_out = tmp_path / "cmp.json"
    assert main(["compare", str(runs), "--method", "bayes", *small, "--json", str(cmp_out)]) == 0
    assert json.loads(cmp_out.read_text())["preferred"] == "free"


def test_save_posterior_needs_bayes(tmp_path, capsys):
    runs = tmp_path / "runs.csv"
    main(["simulate", "--out", str(runs)])
    assert main(["fit", str(runs), "--save-posterior", str(tmp_path / "p.nc")]) == 2
    assert "--save-posterior needs --method bayes" in capsys.readouterr().err


def test_fitting_side_never_imports_torch():
    """phifit and its CLI parser import without torch; only train/sweep load it."""
    import subprocess
    import sys

    code = (
        "import sys, phifit, phifit.report, phifit.cli; phifit.cli.build_parser(); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
