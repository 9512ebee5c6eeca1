"""What a long run keeps: the evaluation log, checkpoints and a bit-for-bit resume, the short-run warning, and
rows that land once when many processes finish runs into one table."""

from __future__ import annotations

import csv
import math
import multiprocessing as mp
from pathlib import Path

import pytest
from conftest import play_text

torch = pytest.importorskip("torch")

from phifit.trainers import curves, runlog  # noqa: E402
from phifit.trainers import data as tdata  # noqa: E402
from phifit.trainers.cli import main as trainer_main  # noqa: E402
from phifit.trainers.config import make_train_config  # noqa: E402
from phifit.trainers.train import TrainingStopped, load_checkpoint, train  # noqa: E402

torch.set_num_threads(1)

TINY = dict(depth=4, prelude=1, coda=1, head_dim=16, seq_len=32, batch_size=8, val_tokens=2048, threads=1)
TINY_ARGS = (
    "--depth 4 --head-dim 16 --seq-len 32 --batch-size 8 --val-tokens 2048 --threads 1 --no-progress".split()
)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("corpus") / "play.txt"
    path.write_text(play_text(40000))
    return str(path)


@pytest.fixture(scope="module")
def corpus(corpus_file: str) -> tdata.TokenData:
    return tdata.load_token_data(corpus_file)


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# ---- resume ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant,optimizer", [("baseline", "adamw"), ("tbptt", "muon")])
def test_a_run_killed_at_92_percent_resumes_bit_for_bit(
    corpus: tdata.TokenData, tmp_path: Path, variant: str, optimizer: str
) -> None:
    """40 steps, a checkpoint every 5, stopped after step 37 (the last checkpoint is step 35), resumed:
    the final validation and training losses equal the uninterrupted run's exactly (CPU, same threads)."""
    cfg = make_train_config(
        **TINY, r=2, width=32, steps=40, variant=variant, optimizer=optimizer, ckpt_every=5, eval_every=5
    )
    whole = train(cfg, data=corpus, log=lambda s: None, log_path=tmp_path / "whole.csv")
    log, ckpt = tmp_path / "cut.csv", tmp_path / "cut.pt"
    with pytest.raises(TrainingStopped, match="after step 37 of 40"):
        train(cfg, data=corpus, log=lambda s: None, log_path=log, ckpt_path=ckpt, stop_after=37)
    assert load_checkpoint(ckpt, cfg.identity())["step"] == 35
    resumed = train(cfg, data=corpus, log=lambda s: None, log_path=log, ckpt_path=ckpt, resume=True)
    assert resumed.resumed_from == 35
    assert resumed.loss == whole.loss and resumed.train_loss == whole.train_loss  # bitwise
    a, b = curves.read_log(tmp_path / "whole.csv"), curves.read_log(log)
    assert [r["step"] for r in a] == ["0", "5", "10", "15", "20", "25", "30", "35", "40"]
    assert [r["step"] for r in b] == ["0", "5", "10", "15", "20", "25", "30", "35", "35", "40"]
    assert b[8]["note"] == "resumed from checkpoint at step 35" and not b[8]["val_loss"]
    assert [r["val_loss"] for r in a] == [r["val_loss"] for r in b if r["val_loss"]]  # same curve


def test_a_checkpoint_of_another_configuration_is_refused(corpus: tdata.TokenData, tmp_path: Path) -> None:
    cfg = make_train_config(**TINY, r=2, width=32, steps=10, ckpt_every=5)
    ckpt = tmp_path / "c.pt"
    with pytest.raises(TrainingStopped):
        train(cfg, data=corpus, log=lambda s: None, ckpt_path=ckpt, stop_after=6)
    other = make_train_config(**TINY, r=2, width=32, steps=10, ckpt_every=5, seed=1)
    with pytest.raises(ValueError, match=r"c\.pt: a checkpoint of another configuration"):
        train(other, data=corpus, log=lambda s: None, ckpt_path=ckpt, resume=True)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"junk\.pt: not a readable phifit checkpoint"):
        train(cfg, data=corpus, log=lambda s: None, ckpt_path=tmp_path / "junk.pt", resume=True)


def _leave_marker(path: str) -> str:
    """What a hostile checkpoint would run on load: here it only leaves a file behind."""
    Path(path).write_text("ran")
    return "ran"


class _Hostile:
    """Unpickling this calls ``_leave_marker``: proof that code from the file ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (_leave_marker, (self.marker,))


class _ShellHostile(_Hostile):
    """Unpickling this calls ``os.system`` (a harmless ``touch``)."""

    def __reduce__(self):
        import os

        return (os.system, (f"touch '{self.marker}'",))


class _Foreign:
    """A plain class of this test module: no ``__reduce__`` of its own, still not a checkpoint type."""


@pytest.mark.parametrize("payload", ["function", "os.system", "class"])
def test_a_checkpoint_with_a_foreign_pickled_object_is_refused_unrun(
    corpus: tdata.TokenData, tmp_path: Path, payload: str
) -> None:
    """A real checkpoint with one foreign object slipped in (same version, same identity) is refused with an
    error naming the file, and the object's ``__reduce__`` never runs (no marker file appears)."""
    cfg = make_train_config(**TINY, r=2, width=32, steps=10, ckpt_every=5)
    ckpt = tmp_path / "hostile.pt"
    with pytest.raises(TrainingStopped):
        train(cfg, data=corpus, log=lambda s: None, ckpt_path=ckpt, stop_after=6)
    state = load_checkpoint(ckpt, cfg.identity())  # the honest file loads
    marker = tmp_path / "marker"
    foreign = {"function": _Hostile, "os.system": _ShellHostile}.get(payload)
    state["extra"] = foreign(marker) if foreign else _Foreign()
    torch.save(state, ckpt)
    with pytest.raises(ValueError, match=r"hostile\.pt: refused: the file pickles a type") as err:
        load_checkpoint(ckpt, cfg.identity())
    assert "nothing from it was run" in str(err.value)
    assert not marker.exists()
    with pytest.raises(ValueError, match=r"hostile\.pt: refused"):  # and so does a resume
        train(cfg, data=corpus, log=lambda s: None, ckpt_path=ckpt, resume=True)
    assert not marker.exists()


def test_a_checkpoint_holds_plain_types_only(corpus: tdata.TokenData, tmp_path: Path) -> None:
    """Every leaf of a checkpoint (both optimisers) is a tensor, number, string, bool or None: it loads with
    ``weights_only=True`` and no allow-list."""
    cfg = make_train_config(**TINY, r=2, width=32, steps=10, ckpt_every=5, optimizer="muon")
    ckpt = tmp_path / "plain.pt"
    with pytest.raises(TrainingStopped):
        train(cfg, data=corpus, log=lambda s: None, ckpt_path=ckpt, stop_after=6)
    state = torch.load(ckpt, weights_only=True)

    def leaves(x):
        if isinstance(x, dict):
            for k, v in x.items():
                yield k
                yield from leaves(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                yield from leaves(v)
        else:
            yield x

    kinds = {type(v) for v in leaves(state)}
    assert kinds <= {torch.Tensor, int, float, str, bool, type(None)}, kinds
    assert sorted(state) == sorted(
        [
            "version",
            "identity",
            "step",
            "model",
            "optimizers",
            "sampler",
            "torch_rng",
            "ema",
            "train_s",
            "wall_s",
        ]
    )


# ---- the log -----------------------------------------------------------------------------------------------
def test_the_eval_log_is_a_loss_curve(corpus_file: str, tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    argv = ["train", "--r", "2", "--width", "32", *TINY_ARGS, "--steps", "30", "--corpus", corpus_file]
    assert trainer_main([*argv, "--out", str(out), "--plot"]) == 0
    (row,) = rows(out)
    paths = runlog.run_paths(out, row["run_id"])
    log = curves.read_log(paths.log)
    assert [int(r["step"]) for r in log] == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30]  # auto: steps // 10
    assert float(log[0]["val_loss"]) == pytest.approx(math.log(256), abs=0.05) and not log[0]["train_loss"]
    assert float(log[-1]["val_loss"]) == float(row["loss"]) and log[-1]["eval_tokens"] == "2048"
    assert float(log[-1]["train_loss"]) == float(row["train_loss"])
    for r in log:
        assert int(r["tokens"]) == int(r["step"]) * 256
        assert float(r["flops"]) == pytest.approx(float(row["flops_per_token"]) * int(r["tokens"]))
    assert float(log[-1]["val_loss"]) < float(log[1]["val_loss"]) < float(log[0]["val_loss"])
    assert paths.log.with_suffix(".svg").read_text().startswith("<?xml")
    assert not paths.ckpt.exists()  # the checkpoint goes once the row is in
    assert paths.row.exists() and rows(paths.row)[0]["run_id"] == row["run_id"]


def test_train_refuses_to_overwrite_a_checkpoint_unless_told(corpus_file: str, tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    argv = ["train", "--r", "2", "--width", "32", *TINY_ARGS, "--steps", "20", "--corpus", corpus_file]
    cfg = make_train_config(**TINY, r=2, width=32, steps=20, corpus=corpus_file, ckpt_every=4)
    run_id = runlog.make_run_id(cfg.identity())
    paths = runlog.run_paths(out, run_id)
    with pytest.raises(TrainingStopped):
        train(cfg, log=lambda s: None, log_path=paths.log, ckpt_path=paths.ckpt, stop_after=13)
    assert trainer_main([*argv, "--out", str(out)]) == 2  # "holds a checkpoint ... --resume or --restart"
    assert paths.ckpt.exists() and not out.exists()
    assert trainer_main([*argv, "--out", str(out), "--resume"]) == 0
    whole = train(cfg, log=lambda s: None)
    (row,) = rows(out)
    assert float(row["loss"]) == whole.loss  # resumed from step 12, bitwise


# ---- short runs --------------------------------------------------------------------------------------------
def test_a_short_run_is_warned_about_and_noted(
    corpus_file: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "runs.csv"
    argv = ["train", "--r", "2", "--width", "32", *TINY_ARGS, "--budget", "1e9", "--corpus", corpus_file]
    assert trainer_main([*argv, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning: short run: only 9 optimiser steps (< 20)" in err
    (row,) = rows(out)
    assert row["steps"] == "9" and row["notes"].startswith("short run: only 9 optimiser steps")
    log = curves.read_log(runlog.run_paths(out, row["run_id"]).log)
    assert log[-1]["note"].startswith("short run") and log[0]["note"].startswith("short run")
    long = make_train_config(**TINY, r=2, width=32, steps=20, corpus=corpus_file)
    assert train(long, log=lambda s: None).notes == ()


# ---- rows from many processes ------------------------------------------------------------------------------
def _finish_many(args: tuple[str, int]) -> None:
    out, worker = args
    for i in range(6):
        row = {c: 1 for c in runlog.COLUMNS} | {"run_id": f"w{worker}-{i}", "loss": 2.5, "notes": ""}
        runlog.finish_run(out, row)


def test_concurrent_finishers_write_every_row_once(tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    with mp.get_context("spawn").Pool(4) as pool:
        pool.map(_finish_many, [(str(out), w) for w in range(8)])
    ids = [r["run_id"] for r in rows(out)]
    assert len(ids) == len(set(ids)) == 48
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_a_lost_merge_is_repaired_from_the_row_files(tmp_path: Path) -> None:
    """Two nodes without a working lock can rename over each other's merge; the next merge restores the row."""
    out = tmp_path / "runs.csv"
    row = {c: 1 for c in runlog.COLUMNS} | {"run_id": "a", "loss": 2.5}
    assert runlog.finish_run(out, row) is True
    runlog.write_row_file(out, row | {"run_id": "b"})  # b finished, but its merge was lost
    assert [r["run_id"] for r in rows(out)] == ["a"]
    assert runlog.merge_rows(out) == ["b"] and runlog.merge_rows(out) == []
    assert [r["run_id"] for r in rows(out)] == ["a", "b"]
    assert runlog.finish_run(out, row) is False  # already in: nothing duplicated
    bad = runlog.sidecar(out) / "rows" / "c.csv"
    bad.write_text("name,score\nx,1\n")
    with pytest.raises(ValueError, match=r"rows/c\.csv: not a phifit row file"):
        runlog.merge_rows(out)


def test_a_table_from_before_the_notes_column_is_still_extended(tmp_path: Path) -> None:
    out = tmp_path / "old.csv"
    with out.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(runlog.LEGACY_COLUMNS)
        w.writerow(["x" if c == "run_id" else "1" for c in runlog.LEGACY_COLUMNS])
    row = {c: 1 for c in runlog.COLUMNS} | {"run_id": "y", "notes": "short run"}
    assert runlog.append_row(out, row) is True
    got = rows(out)
    assert [r["run_id"] for r in got] == ["x", "y"] and "notes" not in got[0]


def test_a_table_and_row_files_from_before_bits_per_byte_are_still_read_and_extended(tmp_path: Path) -> None:
    """A table (and a sidecar row file) written before the ``bits_per_byte`` column keeps its header when
    new runs join it; a new table merges the old row file with an empty cell; phifit reads both tables."""
    old_header = runlog.PRE_BITS_COLUMNS
    old_row = {c: "1" for c in old_header} | {"run_id": "x", "loss": "2.5", "notes": ""}
    out = tmp_path / "old.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=old_header, lineterminator="\n")
        w.writeheader()
        w.writerow(old_row)
    new_row = {c: 1 for c in runlog.COLUMNS} | {
        "run_id": "y",
        "loss": 2.0,
        "bits_per_byte": 2.0 / math.log(2),
    }
    assert runlog.append_row(out, new_row) is True
    got = rows(out)
    assert [r["run_id"] for r in got] == ["x", "y"] and "bits_per_byte" not in got[0]

    fresh = tmp_path / "fresh.csv"
    old_file = runlog.run_paths(fresh, "x").row
    old_file.parent.mkdir(parents=True)
    with old_file.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=old_header, lineterminator="\n")
        w.writeheader()
        w.writerow(old_row)
    assert runlog.finish_run(fresh, new_row) is True
    merged = {r["run_id"]: r for r in rows(fresh)}
    assert list(merged["y"]) == list(runlog.COLUMNS) and merged["x"]["bits_per_byte"] == ""
    assert float(merged["y"]["bits_per_byte"]) == 2.0 / math.log(2)

    table = pytest.importorskip("phifit.runs.table")
    for path in (out, fresh):
        frame = table.load_runs(path).frame
        assert sorted(frame["loss"]) == [2.0, 2.5]
