"""Fault study of ``phifit report``: SIGTERM and SIGKILL at random moments, then a rerun.

``phifit report`` on a bundled table (default ``data/cpu_bpe_runs.csv``, quick settings: no
bootstrap, chi-square tests, 20 starts, two forked workers, PNG and SVG figures) is started as a
subprocess and killed after a delay drawn uniformly from 0.3 s to the length of one uninterrupted
run (measured first), so anywhere from start-up to the last file written.  The kills cycle through
four conditions: SIGTERM or SIGKILL, into a fresh target folder or into one holding the report of
another table (default ``reports/cpu_adaptive``, which holds two files phifit did not write, and a
``notes.txt`` added here).  A run that finishes before its kill is counted and drawn again.  After
each kill the study counts what a user would meet:

- orphaned processes: processes of the report's tree (read from ``/proc`` just before the kill)
  still running 5 s after the kill (zombies, which only wait for their reaper, have ended);
- stale pages: an ``index.html`` or ``results.json`` in the target beside figures of another run
  (a figure that differs from the previous report while the page is the previous one's, a figure
  newer than the page, a listed file missing, or a figure phifit draws that the page does not list);
- partial folders in the target: a target that holds figures but no page, or a partial folder of
  phifit's inside it;
- then the same command is run again, without ``--force``, to its end: a rerun fails if it exits
  with an error, if the target is not then a whole report of the table, if a file phifit did not
  write is lost, or if a partial folder of phifit's is left beside or inside the target.

Each count should be 0.  The counts are printed; docs/benchmarks.md quotes them.

    python benchmarks/report_fault_study.py --kills 20 --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from phifit.report.write import FIGURE_ORDER

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["--bootstrap", "0", "--wild", "0", "--starts", "20", "--jobs", "2", "--backend", "fork", "--svg"]
#: the four conditions, in the order the kills cycle through them
CONDITIONS = [("SIGTERM", False), ("SIGKILL", False), ("SIGTERM", True), ("SIGKILL", True)]
#: a file phifit did not write, put in the previous report's folder
NOTE = "notes.txt"


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process, from /proc/PID/stat."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(entry)] = (int(fields[1]), fields[0])
    return out


def tree(pid: int) -> set[int]:
    """The pids of every process below ``pid``."""
    procs, found, todo = processes(), set(), [pid]
    while todo:
        parent = todo.pop()
        children = {p for p, (ppid, _) in procs.items() if ppid == parent and p not in found}
        found |= children
        todo += children
    return found


def running(pids: set[int]) -> set[int]:
    procs = processes()
    return {p for p in pids if p in procs and procs[p][1] != "Z"}


def files(folder: Path) -> dict[str, bytes]:
    """relative path -> content of every file under ``folder``."""
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def drawn(rel: str) -> bool:
    """Whether ``rel`` is a figure file phifit draws."""
    folder, _, name = rel.partition("/")
    stem, _, ext = name.rpartition(".")
    return folder == "figures" and stem in FIGURE_ORDER and ext in ("png", "svg")


def whole_report(target: Path, table: Path) -> bool:
    """Whether ``target`` holds a whole report of ``table``: its page and data, every file they
    list, no figure they do not list, no figure newer than the page."""
    try:
        data = json.loads((target / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    listed = set(data.get("files", []))
    present = files(target)
    page = (target / "index.html").stat().st_mtime if (target / "index.html").exists() else -1.0
    return (
        data.get("generator") == "phifit"
        and str(data.get("source", "")).endswith(table.name)
        and listed <= set(present)
        and not any(drawn(rel) and rel not in listed for rel in present)
        and all((target / rel).stat().st_mtime <= page for rel in present if drawn(rel))
    )


def leftovers(target: Path) -> list[Path]:
    """phifit's partial or aside folders beside or inside ``target``."""
    beside = [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.phifit-")]
    inside = [p for p in target.iterdir() if p.name.startswith(".phifit-")] if target.is_dir() else []
    return beside + inside


def judge(target: Path, table: Path, before: dict[str, bytes]) -> str:
    """What the target holds after a kill: "previous" (byte for byte), "new" (a whole report of
    ``table``), "absent", "stale page" or "partial"."""
    after = files(target)
    if not target.exists():
        return "absent"
    if before and after == before:
        return "previous"
    if whole_report(target, table) and all(
        after.get(rel) == data
        for rel, data in before.items()
        if not (drawn(rel) or rel in ("index.html", "results.json"))
    ):
        return "new"
    if "index.html" in after or "results.json" in after:
        return "stale page"
    return "partial"


def kill_and_rerun(
    command: list[str], target: Path, name: str, existing: bool, delay: float, counts: Counter[str]
) -> str | None:
    """One draw: start ``command`` into ``target``, send ``name`` after ``delay`` seconds, count
    what is left (module docstring), rerun it to its end and count a failed rerun.  Returns what
    the target held after the kill (:func:`judge`), or None if the run finished first."""
    table = Path(command[command.index("report") + 1])
    if existing:
        (target / NOTE).write_text("a file phifit did not write\n")
    before = files(target)
    log = target.parent / f"{target.name}.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    time.sleep(delay)
    pids = tree(proc.pid)
    if proc.poll() is not None:
        counts["finished before the kill"] += 1
        return None
    proc.send_signal(getattr(signal, name))
    proc.wait()
    counts["kills"] += 1
    counts[f"{name} {'existing' if existing else 'fresh'}"] += 1
    counts["with workers running"] += len(pids) >= 2
    counts["while writing the files"] += "drawing the figures" in log.read_text()
    t_end = time.monotonic() + 5.0
    while running(pids) and time.monotonic() < t_end:
        time.sleep(0.05)
    left = running(pids)
    counts["orphaned processes"] += len(left)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    outcome = judge(target, table, before)
    counts["stale pages"] += outcome == "stale page"
    counts["partial folders in the target"] += outcome == "partial" or any(
        p.parent == target for p in leftovers(target)
    )
    rerun = subprocess.run(command, capture_output=True, text=True)
    theirs = [rel for rel in before if not (drawn(rel) or rel in ("index.html", "results.json"))]
    kept = all((target / rel).is_file() for rel in theirs)
    counts["partial folders left after the rerun"] += len(leftovers(target))
    if rerun.returncode != 0 or not whole_report(target, table) or not kept:
        counts["reruns that fail"] += 1
        print(f"the rerun after kill {counts['kills']} failed: {rerun.stderr[-500:]}", file=sys.stderr)
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="kills in all, cycling through the conditions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--table", default=str(ROOT / "data" / "cpu_bpe_runs.csv"))
    parser.add_argument(
        "--previous",
        default=str(ROOT / "reports" / "cpu_adaptive"),
        help="the report of another table that an existing target holds",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    table = Path(args.table).resolve()
    counts: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        def command(target: Path) -> list[str]:
            return [sys.executable, "-m", "phifit", "report", str(table), "--out", str(target), *QUICK]

        t0 = time.perf_counter()
        done = subprocess.run(command(folder / "uninterrupted"), capture_output=True, text=True)
        full = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"the uninterrupted run failed: {done.stderr[-2000:]}")
        draws = 0
        while counts["kills"] < args.kills:
            name, existing = CONDITIONS[counts["kills"] % len(CONDITIONS)]
            target = folder / f"report{draws}"
            draws += 1
            if existing:
                shutil.copytree(args.previous, target)
            outcome = kill_and_rerun(command(target), target, name, existing, rng.uniform(0.3, full), counts)
            if outcome is not None:
                outcomes[f"{outcome} ({'existing' if existing else 'fresh'} target)"] += 1
    conditions = ", ".join(
        f"{counts[f'{n} {t}']} {n} into {a} {t} target"
        for n in ("SIGTERM", "SIGKILL")
        for a, t in (("a", "fresh"), ("an", "existing"))
    )
    print(f"phifit report {table.name} {' '.join(QUICK)}: {full:.1f} s uninterrupted")
    print(
        f"{counts['kills']} kills ({conditions}); {counts['finished before the kill']} runs finished "
        f"before their kill; {counts['with workers running']} kills with the workers running, "
        f"{counts['while writing the files']} while writing the files"
    )
    print("after the kill the target held: " + ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items())))
    print(
        f"orphaned processes {counts['orphaned processes']}, stale pages {counts['stale pages']}, "
        f"partial folders in the target {counts['partial folders in the target']} (beside or in it "
        f"after the rerun: {counts['partial folders left after the rerun']}), "
        f"reruns that fail {counts['reruns that fail']}"
    )


if __name__ == "__main__":
    main()
