"""The command line: simulate -> fit -> JSON, and the promises about user files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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
        (["fit", "RUNS", "--bootstrap", "10", "--n-jobs", "0"], "--n-jobs must be >= 1 or -1"),
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
    printed = capsys.readouterr().out
    assert "95% HDI" in printed and "[[Cell effects]]" in printed  # default: an effect per (budget, r) cell
    data = json.loads(out.read_text())
    assert data["method"] == "bayes" and data["ci"]["phi"][0] < 0.459 < data["ci"]["phi"][1]
    assert post.exists()
    assert data["extras"]["noise"] == "cell"
    # the second fit also rewrites the posterior the first one saved (a file phifit wrote)
    written = post.stat().st_mtime_ns
    run_noise = ["--noise", "run", "--json", str(out), "--save-posterior", str(post)]
    assert main(["fit", str(runs), "--method", "bayes", *small, *run_noise]) == 0
    assert json.loads(out.read_text())["extras"]["noise"] == "run"
    assert post.stat().st_mtime_ns != written
    notes = tmp_path / "notes.nc"
    notes.write_text("mine")
    assert main(["fit", str(runs), "--method", "bayes", *small, "--save-posterior", str(notes)]) == 2
    assert notes.read_text() == "mine"
    cmp_out = tmp_path / "cmp.json"
    assert main(["compare", str(runs), "--method", "bayes", *small, "--json", str(cmp_out)]) == 0
    cmp = json.loads(cmp_out.read_text())
    # the CLI's comparison ranks the three laws by PSIS-LOO; on this phi = 0.459 table the free law has
    # the highest elpd (whether it also clears the 2-SE rule is LOO's call at these tiny settings, and
    # tests/test_bayes.py checks that rule at proper ones)
    assert {row["model"] for row in cmp["table"]} == {"free", "phi=0", "phi=1"}
    assert cmp["table"][0]["model"] == "free" and cmp["preferred"] in ("free", "phi=0", "phi=1")


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
        "import sys, phifit, phifit.report.write, phifit.cli; phifit.cli.build_parser(); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- missing optional backends (phifit.extras) ------------------------------------------------
def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err  # one line, no traceback
    return lines[0]


@pytest.mark.parametrize("missing", ["pymc", "arviz"])
def test_bayes_without_its_extra_exits_2_naming_the_install(tmp_path, capsys, monkeypatch, missing):
    runs = tmp_path / "runs.csv"
    main(["simulate", "--out", str(runs)])
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, missing, None)  # "import pymc" now fails as if not installed
    assert main(["fit", str(runs), "--method", "bayes", "--draws", "20", "--tune", "20"]) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    name = {"pymc": "PyMC", "arviz": "ArviZ"}[missing]
    assert (
        line
        == f"phifit fit: error: method 'bayes' (the Bayesian fit) needs {name}: pip install 'phifit[bayes]'"
    )
    assert captured.out == ""


def test_train_and_sweep_without_torch_exit_2_naming_the_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    out = str(tmp_path / "runs.csv")
    assert (
        main(["train", "--r", "2", "--width", "32", "--head-dim", "16", "--budget", "1e9", "--out", out]) == 2
    )
    assert _one_line(capsys.readouterr().err) == (
        "phifit train: error: phifit train needs PyTorch: pip install 'phifit[train]'"
    )
    assert main(["sweep", "cpu_small", "--out", out]) == 2
    assert "pip install 'phifit[train]'" in _one_line(capsys.readouterr().err)
    # a bad setting is still reported as such first: it needs no torch
    assert main(["train", "--r", "3", "--width", "32", "--budget", "1e9", "--out", out]) == 2
    assert "not a positive multiple of r=3" in _one_line(capsys.readouterr().err)


def test_missing_extra_error_names_feature_package_and_install(monkeypatch):
    from phifit.extras import MissingExtraError, import_optional

    monkeypatch.setitem(sys.modules, "submitit", None)
    with pytest.raises(MissingExtraError) as info:
        import_optional("submitit", "cluster", "phifit sweep --launcher slurm")
    assert str(info.value) == "phifit sweep --launcher slurm needs submitit: pip install 'phifit[cluster]'"
    assert isinstance(info.value, ImportError) and info.value.extra == "cluster"
    with pytest.raises(ValueError, match="not a package of extra 'bayes'"):
        import_optional("torch", "bayes", "x")


def test_a_broken_backend_says_why(monkeypatch):
    """An installed package whose import fails for another reason (here: a dependency outside
    the extra) is reported with that reason, still in one line with the install; a missing
    package of the same extra is named itself."""
    import importlib

    from phifit.extras import MissingExtraError, import_optional

    def broken(name, package=None):
        raise ModuleNotFoundError("No module named 'xarray'", name="xarray")

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(MissingExtraError) as info:
        import_optional("pymc", "bayes", "method 'bayes' (the Bayesian fit)")
    assert str(info.value) == (
        "method 'bayes' (the Bayesian fit) needs PyMC (No module named 'xarray'): pip install 'phifit[bayes]'"
    )

    def pytensor_missing(name, package=None):
        raise ModuleNotFoundError("No module named 'pytensor'", name="pytensor")

    monkeypatch.setattr(importlib, "import_module", pytensor_missing)
    with pytest.raises(MissingExtraError, match=r"needs PyTensor: pip install 'phifit\[bayes\]'$"):
        import_optional("pymc", "bayes", "method 'bayes' (the Bayesian fit)")


# -- text summaries ---------------------------------------------------------------------------
DATA = Path(__file__).resolve().parents[1] / "data"
PAPER = str(DATA / "paper_design_simulated.csv")


def test_fit_summary_like_fit_report(capsys):
    assert main(["fit", PAPER]) == 0
    out = capsys.readouterr().out
    for text in (
        "runs                116",
        "free parameters     6",
        "degrees of freedom  110",
        "AIC / BIC",
        "assumes independent runs",
        "add --bootstrap 1000 for percentile and BCa intervals",
    ):
        assert text in out, text
    assert out.rstrip().splitlines()[-1] == "done: no warnings"


def test_fit_fixed_and_lsq_correlations_named_like_the_parameters(capsys):
    assert main(["fit", PAPER, "--fix", "phi=0", "--starts", "50"]) == 0
    out = capsys.readouterr().out
    assert "free parameters     5 (phi fixed)" in out and "degrees of freedom  111" in out
    assert main(["fit", PAPER, "--method", "lsq", "--starts", "50"]) == 0
    out = capsys.readouterr().out
    assert "[[Correlations]]" in out and "C(log A, alpha) = +0.99" in out
    assert "C(a," not in out and "profile-likelihood 95% interval for phi" in out


def test_fit_bootstrap_summary_counts(tmp_path, capsys):
    out_json = tmp_path / "fit.json"
    assert main(["fit", PAPER, "--bootstrap", "8", "--quiet", "--starts", "50", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "8 replicates resampling 24 blocks 'budget,r'; 0 of 8 failed" in out
    assert "add --bootstrap" not in out
    assert json.loads(out_json.read_text())["bootstrap"]["n"] == 8


# -- diagnose ---------------------------------------------------------------------------------
def test_diagnose_prints_every_check_and_writes_json(tmp_path, capsys):
    out_json = tmp_path / "diag.json"
    assert (
        main(
            [
                "diagnose",
                PAPER,
                "--starts",
                "50",
                "--parts",
                "0",
                "--skip",
                "consistency",
                "--json",
                str(out_json),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    for section in (
        "[[Residuals (actual - predicted, nats)]]",
        "r=8",
        "C=4.64e+17",
        "[[Residual tests (log residuals)]]",
        "jarque_bera",
        "[[Identifiability]]",
        "[[Influence on phi",
    ):
        assert section in out, section
    assert "[[Consistency" not in out
    data = json.loads(out_json.read_text())
    assert data["kind"] == "diagnostics" and data["fit"]["n_runs"] == 116
    assert len(data["diagnostics"]["residuals"]["by_r"]) == 4
    assert main(["diagnose", PAPER, "--skip", "nothing"]) == 2


# -- predict ----------------------------------------------------------------------------------
def test_predict_from_fit_json_matches_the_law(tmp_path, capsys):
    fit_json = tmp_path / "fit.json"
    assert main(["fit", PAPER, "--starts", "50", "--json", str(fit_json)]) == 0
    capsys.readouterr()
    out_json = tmp_path / "pred.json"
    argv = ["predict", "--fit", str(fit_json), "--r", "4", "--n-once", "200M", "--n-rec", "200M"]
    assert main([*argv, "--tokens", "20B", "--compute", "1e20", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "no interval" in out and "Compute-optimal allocation" in out
    data = json.loads(out_json.read_text())
    fit = FitResult.from_json(fit_json)
    expected = float(fit.law.loss(r=[4], n_once=[2e8], n_rec=[2e8], tokens=[2e10])[0])
    assert data["points"][0]["loss"] == pytest.approx(expected, rel=1e-12)
    assert {row["r"] for row in data["optimal"]} == {1, 2, 4, 8}  # the study's architectures


def test_predict_with_bootstrap_interval_points_file_and_table_family(tmp_path, capsys):
    points = tmp_path / "points.tsv"
    points.write_text("r\tn_once\tn_rec\ttokens\n1\t0\t400M\t20B\n4\t200M\t200M\t20B\n")
    out_json = tmp_path / "pred.json"
    argv = ["predict", "--runs", PAPER, "--bootstrap", "8", "--points", str(points)]
    assert main([*argv, "--compute", "1e19", "--r-values", "1,4", "--json", str(out_json)]) == 0
    data = json.loads(out_json.read_text())
    assert data["n_draws"] == 8 and len(data["points"]) == 2
    for row in data["points"] + data["optimal"]:
        lo, hi = row["interval"]
        assert lo <= row["loss"] <= hi
    assert [row["r"] for row in data["optimal"]] == [1, 4]
    assert "table's architectures" in data["family"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["predict", "--compute", "1e20"], "give the law"),
        (["predict", "--reference"], "nothing to predict"),
        (["predict", "--reference", "--n-once", "1M"], "needs at least --n-once and --tokens"),
        (["predict", "--reference", "--bootstrap", "5", "--compute", "1e20"], "add --runs"),
        (["predict", "--fit", "nope.json", "--compute", "1e20"], "nope.json: file not found"),
    ],
)
def test_predict_bad_arguments_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# -- input conveniences and guards ------------------------------------------------------------
def _paper_text(sep: str) -> str:
    import pandas as pd

    return pd.read_csv(PAPER).to_csv(sep=sep, index=False)


@pytest.mark.parametrize("sep, name", [("\t", "runs.tsv"), (";", "excel.csv")])
def test_fit_detects_tab_and_semicolon_separators(tmp_path, capsys, sep, name):
    text = _paper_text(sep)
    if sep == ";":  # Excel in a decimal-comma locale
        text = text.replace(".", ",")
    path = tmp_path / name
    path.write_text(text)
    out_json = tmp_path / "fit.json"
    assert main(["fit", str(path), "--starts", "50", "--json", str(out_json)]) == 0
    assert json.loads(out_json.read_text())["n_runs"] == 116
    assert main(["fit", str(path), "--sep", ",", "--starts", "5"]) == 2  # wrong separator named
    assert "missing required column" in capsys.readouterr().err


def test_unmapped_looped_columns_exit_2_with_hint(tmp_path, capsys):
    import pandas as pd

    frame = pd.read_csv(PAPER).rename(columns={"r": "num_loops", "n_rec": "p_shared"})
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    assert main(["fit", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err
    assert "--columns r=num_loops,n_rec=p_shared" in err
    assert main(["fit", str(path), "--columns", "r=num_loops,n_rec=p_shared", "--starts", "50"]) == 0
    assert "phi " in capsys.readouterr().out
    assert main(["fit", str(path), "--non-looped", "--starts", "20"]) == 0


def test_duplicate_rows_and_missing_budget_named_in_notes_and_closing_line(tmp_path, capsys):
    import pandas as pd

    frame = pd.read_csv(PAPER).drop(columns=["budget"])
    copy = frame.iloc[[3]].assign(run_id="copy-of-3")
    path = tmp_path / "runs.csv"
    pd.concat([frame, copy]).to_csv(path, index=False)
    out_json = tmp_path / "fit.json"
    assert main(["fit", str(path), "--starts", "50", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "1 duplicate run" in out and "copy-of-3" in out
    assert (
        out.rstrip().splitlines()[-1].startswith("done: 1 warning: duplicate_rows (runs); 1 note: no_budget")
    )
    kinds = {w["kind"] for w in json.loads(out_json.read_text())["warnings"]}
    assert {"duplicate_rows", "no_budget"} <= kinds
    # other commands show the table's cautions on stderr
    assert main(["predict", "--runs", str(path), "--n-once", "1M", "--tokens", "1B"]) == 0
    assert "warning [duplicate_rows]" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["fit", "report", "plan", "predict"])
def test_worker_flags_default_to_the_cores_this_process_may_use(command):
    """Every --jobs/--n-jobs flag defaults to None (phifit.defaults.workers) and says so."""
    import argparse

    from phifit.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flag = next(a for a in sub._actions if "--jobs" in a.option_strings)
    assert flag.default is None and flag.dest == "n_jobs" and "--n-jobs" in flag.option_strings
    assert "default: the cores this process may use" in flag.help


def test_fit_on_a_table_u_shaped_in_r_does_not_end_without_warnings(tmp_path, capsys):
    # r = 8 runs made 0.06 nats worse than the law allows: loss rises again past r = 4, which
    # no single phi expresses; `phifit fit` must say so, not print "no warnings" beside phi
    import pandas as pd

    table = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    table.loc[table.r == 8, "loss"] += 0.06
    path = tmp_path / "u_shaped.csv"
    table.to_csv(path, index=False)
    assert main(["fit", str(path), "--starts", "40"]) == 0
    out = capsys.readouterr().out
    assert "no warnings" not in out
    assert "r = 8: runs lie systematically above the law" in out


def test_closing_line_counts_a_kind_met_more_than_once():
    from phifit.cautions import Caution
    from phifit.cli.fit import closing_line

    cautions = [Caution("bayes", "r_hat", "m")] * 7 + [Caution("bayes", "low_ess", "m")] * 13
    cautions += [
        Caution("diagnostics", "residuals_not_checked", "m"),
        Caution("runs", "no_budget", "m", level="note"),
    ]
    assert closing_line(cautions) == (
        "done: 21 warnings: 7 r_hat (bayes), 13 low_ess (bayes), residuals_not_checked (diagnostics); "
        "1 note: no_budget (runs) (see [[Notes]])"
    )


def test_every_subcommands_help_prints(capsys):
    """``phifit CMD --help`` exits 0 with its usage for every subcommand (argparse formats each
    help string with %: a bare percent sign in one breaks the whole page)."""
    import argparse

    from phifit.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"fit", "compare", "diagnose", "report", "plan"} <= set(commands)
    for command in commands:
        with pytest.raises(SystemExit) as stop:
            main([command, "--help"])
        assert stop.value.code == 0, command
        assert f"usage: phifit {command}" in capsys.readouterr().out
