"""Cluster sweeps through submitit: a job array of real subprocesses (submitit's LocalExecutor, no SLURM), a
task killed mid-run and requeued by a resubmission, the status table, and the sbatch script a SLURM
submission writes (with a stand-in ``sbatch`` on PATH)."""

from __future__ import annotations

import csv
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest
from conftest import play_text

pytest.importorskip("torch")
submitit = pytest.importorskip("submitit")

from phifit.trainers import curves, launch, runlog  # noqa: E402
from phifit.trainers.cli import main as trainer_main  # noqa: E402
from phifit.trainers.sweep import load_spec, plan  # noqa: E402


def write_spec(tmp_path: Path, budget: float = 1.2e10) -> Path:
    corpus = tmp_path / "play.txt"
    corpus.write_text(play_text(40000))
    spec = tmp_path / "array.toml"
    spec.write_text(
        textwrap.dedent(f"""
        [sweep]
        name = "array"
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
        ckpt_every = 10
        [[budgets]]
        flops = {budget}
        widths = [16, 32]
        [[grids]]
        name = "main"
        r = [1, 2, 4]
        """)
    )
    return spec


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _markers(out: Path) -> dict[str, dict]:
    found = {}
    for f in (runlog.sidecar(out) / "state").glob("*.json"):
        m = runlog.read_json(f)
        if m:
            found[f.stem] = m
    return found


def test_job_array_with_a_killed_task_completes_after_resubmission(tmp_path: Path) -> None:
    """6 runs in 3 concurrent local tasks; one task is SIGKILLed mid-run after its first checkpoint; the status
    says failed; resubmitting the same command re-queues the missing runs only, the killed run resumes from its
    checkpoint, and the table ends with each of the 6 runs once."""
    spec = load_spec(str(write_spec(tmp_path, budget=5e9)))
    out = tmp_path / "runs.csv"
    opts = launch.LaunchOptions(array_parallelism=3, time_min=10)
    devnull = open(os.devnull, "w")
    jobs = launch.submit(spec, str(out), None, launcher="submitit-local", options=opts, file=devnull)
    assert len(jobs) == 3 and len({j.job_id for j in jobs}) == 3
    killed, most_at_once, deadline = None, 0, time.time() + 240
    while time.time() < deadline and any(not j.done() for j in jobs):
        running = {rid: m for rid, m in _markers(out).items() if m["state"] == "running"}
        most_at_once = max(most_at_once, len({m["pid"] for m in running.values()}))
        if killed is None:
            for rid, m in running.items():
                if runlog.run_paths(out, rid).ckpt.exists():  # mid-run, with a checkpoint to resume from
                    os.kill(int(m["pid"]), signal.SIGKILL)
                    killed = rid
                    break
        time.sleep(0.02)
    assert all(j.done() for j in jobs) and killed is not None
    assert most_at_once >= 2  # the tasks ran side by side
    status = {s.run_id: s for s in launch.sweep_status(spec, out)}
    assert status[killed].state == "failed" and "task died during the run" in status[killed].detail
    unfinished = [rid for rid, s in status.items() if s.state != "finished"]
    assert 1 <= len(unfinished) <= 2 and all(status[r].state == "failed" for r in unfinished)
    assert len(rows(out)) == 6 - len(unfinished)

    again = launch.submit(spec, str(out), None, launcher="submitit-local", options=opts, file=devnull)
    assert len(again) == len(unfinished)  # only the failed runs are submitted again
    for job in again:
        job.wait()
    ids = [r["run_id"] for r in rows(out)]
    assert len(ids) == len(set(ids)) == 6 and set(ids) == {r.run_id for r in plan(spec)}
    assert all(s.state == "finished" for s in launch.sweep_status(spec, out))
    notes = [r["note"] for r in curves.read_log(runlog.run_paths(out, killed).log)]
    assert any(n.startswith("resumed from checkpoint at step") for n in notes)
    assert launch.submit(spec, str(out), None, launcher="submitit-local", options=opts, file=devnull) == []


def test_status_reports_failures_with_their_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec_path = write_spec(tmp_path)
    spec = load_spec(str(spec_path))
    out = tmp_path / "runs.csv"
    runs = plan(spec)
    try:
        raise FloatingPointError("loss is nan at step 12")
    except FloatingPointError as err:
        runlog.mark_failed(out, runs[0].run_id, err)
    runlog.mark_running(out, runs[1].run_id)  # this very process: alive
    assert trainer_main(["sweep", str(spec_path), "--out", str(out), "--status"]) == 1
    text = capsys.readouterr().out
    assert "6 runs in" in text and "1 running, 1 failed, 4 not submitted" in text
    assert f"-- failed: {runs[0].run_id}" in text and "FloatingPointError: loss is nan at step 12" in text


def test_slurm_submission_writes_one_job_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in sbatch records the script; a stand-in sacct says PENDING: the runs show as queued and a
    resubmission submits nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\ncp "$1" {tmp_path}/submitted.sh\necho "Submitted batch job 4242"\n'
    )
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")  # submitit looks for srun to detect SLURM
    (bin_dir / "sacct").write_text('#!/bin/sh\nprintf "JobID|State|NodeList\\n4242_[0-5]|PENDING|None\\n"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    spec_path = write_spec(tmp_path)
    out = tmp_path / "runs.csv"
    argv = ["sweep", str(spec_path), "--out", str(out), "--launcher", "slurm", "--partition", "gpu"]
    argv += [
        "--gpus-per-run",
        "1",
        "--time",
        "02:30",
        "--array-parallelism",
        "3",
        "--slurm-arg",
        "exclusive=",
    ]
    assert trainer_main(argv) == 0
    script = (tmp_path / "submitted.sh").read_text()
    for line in ("--array=0-5%3", "--partition=gpu", "--gpus-per-node=1", "--time=150", "--exclusive"):
        assert f"#SBATCH {line}" in script, (line, script)
    subs = launch._submissions(out)
    assert sorted(r["job_id"] for r in subs.values()) == [f"4242_{i}" for i in range(6)]
    status = launch.sweep_status(load_spec(str(spec_path)), out)
    assert [s.state for s in status] == ["queued"] * 6
    jobs = launch.submit(
        load_spec(str(spec_path)),
        str(out),
        None,
        launcher="slurm",
        options=launch.LaunchOptions(gpus_per_run=1),
    )
    assert jobs == []  # queued runs are not submitted twice


def test_launcher_options_are_checked() -> None:
    assert launch.parse_time("90") == 90 and launch.parse_time("01:30") == 90
    assert launch.parse_time("1-00:00") == 1440 and launch.parse_time("00:00:30") == 1
    with pytest.raises(ValueError, match="--time 'soon'"):
        launch.parse_time("soon")
    with pytest.raises(ValueError, match="--array-parallelism 0"):
        launch.LaunchOptions(array_parallelism=0)
    argv = ["sweep", "cpu_small", "--out", "x.csv", "--launcher", "slurm", "--slurm-arg", "exclusive"]
    assert trainer_main(argv) == 2  # "--slurm-arg 'exclusive': expected KEY=VALUE"
    with pytest.raises(ValueError, match="--slurm-arg 'exclusive'"):
        from phifit.trainers.cli import _key_values

        _key_values(["exclusive"])
