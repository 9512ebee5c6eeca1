"""``phifit report`` stopped by a signal: no process of its tree is left, the target folder holds
the previous report or the new one (never a mix, never a partial folder), and the next report into
it needs no ``--force``.

Each kill runs ``phifit report`` in a subprocess on a 9-run non-looped table (a report of a few
seconds that still forks its two workers) and kills it once its workers exist, or from inside,
right after the first figure file is written.  The processes of its tree are read from ``/proc``
before the kill and must all be gone (or zombies waiting for their reaper) within a few seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from phifit.cli import main
from phifit.simulation import simulate

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")

ROOT = Path(__file__).resolve().parents[1]
#: a previous report of another table, with files phifit did not write (prediction_of_record.*)
PREVIOUS = ROOT / "reports" / "cpu_bpe"
#: a quick report: no bootstrap, chi-square tests, few starts, two forked workers
QUICK = ["--bootstrap", "0", "--wild", "0", "--starts", "20", "--jobs", "2", "--backend", "fork"]
#: ``phifit report`` that SIGKILLs itself right after writing its first figure file
KILLED_WHILE_WRITING = """
import os, signal, sys
import phifit.report.figures as plots

save = plots.save_figure

def save_then_die(*args, **kwargs):
    save(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)

plots.save_figure = save_then_die
from phifit.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """9 non-looped runs (the r = 1 runs of two budgets of the study's design)."""
    frame = simulate("paper", noise=0.004, seed=7)
    frame = frame[(frame["budget"] <= 1e18) & (frame["r"] == 1)].drop(columns=["r", "n_rec"])
    path = tmp_path_factory.mktemp("table") / "runs.csv"
    frame.to_csv(path, index=False)
    return path


def _parents() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process, from /proc/PID/stat."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
        out[int(entry)] = (int(fields[1]), fields[0])
    return out


def descendants(pid: int) -> set[int]:
    """The pids of every process below ``pid``."""
    procs, found, todo = _parents(), set(), [pid]
    while todo:
        parent = todo.pop()
        children = {p for p, (ppid, _) in procs.items() if ppid == parent and p not in found}
        found |= children
        todo += children
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` that still run (a zombie has ended; it only waits for its reaper)."""
    procs = _parents()
    return {p for p in pids if p in procs and procs[p][1] != "Z"}


def snapshot(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under ``folder``."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def leftovers(target: Path) -> list[str]:
    """phifit's partial or aside folders beside ``target``."""
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.phifit-"))


@dataclass
class Run:
    """``phifit report`` in a subprocess (:func:`start`) and the file its output goes to."""

    proc: subprocess.Popen
    log: Path

    def finish(self, timeout: float = 120.0) -> str:
        """Wait for it to end; its output (stdout and stderr)."""
        self.proc.wait(timeout=timeout)
        return self.log.read_text()


def start(table: Path, out: Path, *extra: str, code: str | None = None) -> Run:
    """``phifit report TABLE --out OUT`` (or ``code`` run with those arguments) in a subprocess,
    its output in a file beside OUT (not a pipe: a worker left running would hold it open)."""
    command = ["-c", code] if code else ["-m", "phifit"]
    log = out.parent / f"{out.name}.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, *command, "report", str(table), "--out", str(out), *QUICK, *extra],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=out.parent,
        )
    return Run(proc, log)


def kill_once_workers_run(run: Run, sig: int, timeout: float = 60.0) -> set[int]:
    """Send ``sig`` to the report as soon as it has two child processes (its forked workers);
    returns the pids of its tree just before."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end and run.proc.poll() is None:
        tree = descendants(run.proc.pid)
        if len(tree) >= 2:
            run.proc.send_signal(sig)
            return tree
        time.sleep(0.02)
    run.proc.kill()
    raise AssertionError(f"no workers seen; output: {run.finish()[-2000:]}")


def assert_tree_ends(tree: set[int], within: float = 10.0) -> None:
    """Every process of ``tree`` ends within ``within`` seconds."""
    t_end = time.monotonic() + within
    while alive(tree) and time.monotonic() < t_end:
        time.sleep(0.05)
    assert not alive(tree), f"processes left running after their report was killed: {sorted(alive(tree))}"


@pytest.fixture
def trees() -> list[set[int]]:
    """The process trees a test killed; whatever of them still runs at its end is killed."""
    killed: list[set[int]] = []
    yield killed
    for pid in alive(set().union(*killed)):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def previous(tmp_path) -> tuple[Path, dict[str, str]]:
    """A target holding a previous report of another table, and its files' hashes."""
    target = tmp_path / "report"
    shutil.copytree(PREVIOUS, target)
    return target, snapshot(target)


def test_sigterm_ends_the_workers_and_keeps_the_previous_report(table, previous, trees):
    target, before = previous
    run = start(table, target)
    trees.append(kill_once_workers_run(run, signal.SIGTERM))
    err = run.finish()
    assert_tree_ends(trees[-1])
    assert run.proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "phifit report: terminated" in err
    assert snapshot(target) == before and leftovers(target) == []


def test_sigkill_ends_the_workers(table, tmp_path, trees):
    target = tmp_path / "report"
    run = start(table, target)
    trees.append(kill_once_workers_run(run, signal.SIGKILL))
    run.finish()
    assert_tree_ends(trees[-1])
    assert run.proc.returncode == -signal.SIGKILL and not target.exists()


def test_killed_while_writing_a_fresh_report_leaves_nothing_and_the_rerun_needs_no_force(
    table, tmp_path, capsys
):
    target = tmp_path / "report"
    run = start(table, target, code=KILLED_WHILE_WRITING)
    err = run.finish()
    assert run.proc.returncode == -signal.SIGKILL and "drawing the figures" in err, err[-2000:]
    assert not target.exists()  # no figures/isoflop.png alone in the target
    assert leftovers(target)  # the partial folder, beside it, for the next report to delete
    assert main(["report", str(table), "--out", str(target), *QUICK]) == 0
    assert "wrote " in capsys.readouterr().out
    data = json.loads((target / "results.json").read_text())
    assert data["fit"]["n_runs"] == 9 and sorted(data["files"]) == sorted(snapshot(target))
    assert leftovers(target) == []


def test_killed_while_rewriting_a_report_keeps_the_previous_one_whole(table, previous):
    target, before = previous
    run = start(table, target, "--svg", code=KILLED_WHILE_WRITING)
    err = run.finish()
    assert run.proc.returncode == -signal.SIGKILL and "drawing the figures" in err, err[-2000:]
    assert snapshot(target) == before  # no page of the old table beside figures of the new


def test_the_partial_output_of_an_older_phifit_needs_no_force(table, tmp_path, capsys):
    """What phifit before whole-folder writes left when killed while drawing (a figure, an empty
    SVG) is taken as its own; a stranger's file beside it is not."""
    from phifit.report.write import check_report_dir

    target = tmp_path / "report"
    (target / "figures").mkdir(parents=True)
    (target / "figures" / "isoflop.png").write_bytes(b"\x89PNG")
    (target / "figures" / "frontier.svg").write_bytes(b"")
    check_report_dir(target)
    (target / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds no phifit report"):
        check_report_dir(target)


def test_a_folder_left_aside_is_put_back_and_stale_partials_removed(tmp_path):
    """A writer killed between moving the previous folder aside and moving the new one in: the
    next check judges the folder aside, and the next write puts it back before replacing it."""
    from phifit.report import folder
    from phifit.report.write import FIGURE_ORDER, check_report_dir

    target = tmp_path / "report"
    dead = _dead_pid()
    aside = tmp_path / f".report.phifit-old-{dead}-00aa11bb"
    shutil.copytree(PREVIOUS, aside)
    (aside / "mine.txt").write_text("kept")
    stale = tmp_path / f".report.phifit-partial-{dead}-00cc22dd"
    (stale / "figures").mkdir(parents=True)
    running = tmp_path / f".report.phifit-partial-{os.getppid()}-00ee33ff"  # a live writer's
    running.mkdir()
    check_report_dir(target)  # the aside folder is a phifit report
    with folder.staged(target, FIGURE_ORDER) as stage:
        assert target.is_dir() and not aside.exists() and not stale.exists() and running.exists()
        (stage / "results.json").write_text(json.dumps({"generator": "phifit", "files": ["results.json"]}))
    carried = ["mine.txt", "prediction_of_record.json", "prediction_of_record.txt"]  # not phifit's
    assert sorted(p.name for p in target.iterdir()) == [*carried, "results.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name, "report"]


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_report_into_the_working_folder_is_replaced_in_place(tmp_path, monkeypatch):
    """A target that is the working folder is not renamed (the shell in it would be left in a
    deleted folder): the report is written in a partial folder inside it and moved in file by
    file, the files phifit did not write left where they are."""
    from phifit.report import folder
    from phifit.report.write import FIGURE_ORDER

    target = tmp_path / "report"
    shutil.copytree(PREVIOUS, target)
    inode = target.stat().st_ino
    monkeypatch.chdir(target)
    with folder.staged(".", FIGURE_ORDER) as stage:
        assert stage.parent == target
        (stage / "figures").mkdir()
        (stage / "figures" / "isoflop.png").write_bytes(b"new")
        listed = ["index.html", "results.json", "figures/isoflop.png"]
        (stage / "results.json").write_text(json.dumps({"generator": "phifit", "files": listed}))
        (stage / "index.html").write_text("new")
    assert target.stat().st_ino == inode
    kept = ["prediction_of_record.json", "prediction_of_record.txt"]
    assert sorted(snapshot(target)) == sorted([*kept, *listed])
    assert (target / "figures" / "isoflop.png").read_bytes() == b"new"


@pytest.mark.skipif(sys.platform == "win32", reason="forked workers")
def test_a_signal_while_the_workers_start_raises_the_signals_exception(monkeypatch):
    """Found by the suite on a busy machine: SIGTERM landed inside the executor's first submit, whose
    manager thread was then created but not started; ending the workers' block tried to join it and
    raised RuntimeError, so ``phifit report`` exited 1 with a traceback instead of 143.  The block
    now ends the workers and re-raises the signal's own exception."""
    import threading

    from phifit.fitters import parallel

    # the block makes its executor only where forking is safe (no other thread running, which a test
    # worker may not be); nothing is submitted here, so nothing forks
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    with pytest.raises(KeyboardInterrupt):
        with parallel.shared_workers(n_jobs=2, backend="fork"):
            executor = parallel._shared[1]
            executor._executor_manager_thread = threading.Thread(target=lambda: None)  # created, not started
            raise KeyboardInterrupt
    assert parallel._shared is None
