"""``phifit sweep SPEC --lr-sweep``: the spec's [lr_sweep] runs, the rate it picks, the spec it writes."""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path

import pytest
from conftest import play_text
from phifit.trainers.lr_sweep import choose_rate, write_tuned_spec

from phifit.spec.sweep_spec import load_spec, plan_lr_sweep


def write_spec(tmp_path: Path, lr_table: str = "adamw = [0.001, 0.01]\nmuon = [0.005, 0.02]") -> Path:
    corpus = tmp_path / "play.txt"
    corpus.write_text(play_text(40000))
    spec = tmp_path / "tune.toml"
    spec.write_text(
        textwrap.dedent(f"""
        [sweep]
        name = "tune"
        [settings]
        depth = 6
        prelude = 1
        coda = 1
        head_dim = 16
        seq_len = 32
        batch_size = 8
        val_tokens = 1024
        eval_tokens = 256
        corpus = "{corpus}"
        threads = 1
        progress = false
        lr = 0.003  # replaced by the sweep's choice
        [lr_sweep]
        width = 16
        budget = 6e9
        r = [1, 4]
        [lr_sweep.lr]
        """)
        + lr_table
        + textwrap.dedent("""
        [[budgets]]
        flops = 6e9
        widths = [16, 32]
        [[grids]]
        name = "main"
        r = [1, 2, 4]
        """)
    )
    return spec


def test_plan_and_spec_errors(tmp_path):
    spec = load_spec(str(write_spec(tmp_path)))
    runs = plan_lr_sweep(spec)
    assert len(runs) == 8 and len({r.run_id for r in runs}) == 8
    assert {(r.config.optimizer, r.config.lr, r.r) for r in runs} >= {("muon", 0.02, 4), ("adamw", 0.001, 1)}
    assert all(r.width == 16 and r.budget == 6e9 and r.config.lr_scaling == "mup" for r in runs)
    with pytest.raises(ValueError, match=r"lr_sweep\]\.lr"):
        load_spec(str(write_spec(tmp_path, "sgd = [0.1, 0.2]")))
    with pytest.raises(ValueError, match=r"lr_sweep\]\.lr"):
        load_spec(str(write_spec(tmp_path, "adamw = [0.1]")))
    with pytest.raises(ValueError, match="no \\[lr_sweep\\]"):
        plan_lr_sweep(load_spec("cpu_small"))


def test_choose_rate_and_the_tuned_spec(tmp_path):
    losses = {
        "adamw": {0.001: {1: 2.0, 4: 2.1}, 0.01: {1: 1.9, 4: 2.0}, 0.1: {1: 2.5}},  # 0.1: r = 4 missing
        "muon": {0.005: {1: 1.95, 4: 1.96}, 0.02: {1: 1.97, 4: 1.90}},
    }
    choice = choose_rate(losses, (1, 4))
    assert (choice.optimizer, choice.lr) == ("muon", 0.02)  # mean 1.935 < muon 0.005's 1.955 < adamw's 1.95
    assert choice.margin == pytest.approx(1.935 - 1.95)
    assert choice.best_per_r["muon"] == {1: 0.005, 4: 0.02}
    assert choice.mean["adamw"] == {0.001: pytest.approx(2.05), 0.01: pytest.approx(1.95)}  # 0.1 incomplete
    assert choice.at_edge  # 0.02 is muon's largest rate tried
    assert "<-" in choice.summary() and "edge of the grid" in choice.summary()
    spec_path = write_spec(tmp_path)
    out = tmp_path / "tuned.toml"
    write_tuned_spec(str(spec_path), choice, str(out), "lr.csv")
    tuned = load_spec(str(out))
    assert tuned.settings["optimizer"] == "muon" and tuned.settings["lr"] == 0.02
    assert "chosen by phifit sweep --lr-sweep from lr.csv" in out.read_text()
    assert out.read_text().count("lr = ") == 1  # the old rate line replaced, not duplicated
    with pytest.raises(ValueError, match="no rate"):
        choose_rate({"adamw": {0.1: {1: 2.0}}}, (1, 4))


def test_cli_trains_the_sweep_and_writes_the_spec(tmp_path, capsys):
    pytest.importorskip("torch")
    from phifit.trainers.cli import main

    spec = write_spec(tmp_path, "adamw = [0.001, 0.01]")
    out, tuned = tmp_path / "lr.csv", tmp_path / "tuned.toml"
    assert main(["sweep", str(spec), "--lr-sweep", "--out", str(out), "--out-spec", str(tuned)]) == 0
    with out.open(newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 4 and {row["lr_scaling"] for row in table} == {"mup"}
    text = capsys.readouterr().out
    assert "chosen: optimizer = adamw" in text and tuned.exists()
    best = min((0.001, 0.01), key=lambda lr: sum(float(r["loss"]) for r in table if float(r["lr"]) == lr))
    assert load_spec(str(tuned)).settings["lr"] == best
    # the spec exists: refused unless --force; the runs are not retrained
    assert main(["sweep", str(spec), "--lr-sweep", "--out", str(out), "--out-spec", str(tuned)]) == 2
    assert "exists" in capsys.readouterr().err
    assert (
        main(["sweep", str(spec), "--lr-sweep", "--out", str(out), "--out-spec", str(tuned), "--force"]) == 0
    )
    assert "0 to train" in capsys.readouterr().err
