"""Fault study of the trainer's writers: ``kill -9`` at random moments of a sweep and of an adaptive loop.

A tiny sweep (the adaptive tests' spec: 4 budgets x widths 16, 32 x r in 1, 2; 16 runs of 5 to 125 steps) is
started as a subprocess, killed with SIGKILL (no chance to clean up) after a random delay, checked, and
started again; then the same for ``--adaptive`` (pilot, rounds of 2 runs, 20 bootstrap replicates,
``--max-rounds 3``). The delays are drawn from 0.3 s to the length of one uninterrupted run, measured
first, so a kill can fall anywhere from start-up to the last run; a table that finishes before its kill
is checked and the campaign goes on with a fresh one until it has its kills. After every kill the study
checks what a user would lose:

- the run table parses; every line is whole (ends with a newline; every row has a run id, a loss and a
  finish time); no run id appears twice; no finished run is lost (the rows after a kill include every row
  before it);
- the round log (``RUNS.csv.d/adaptive.jsonl``) reads with :func:`phifit.plan.rounds.read_records` (a torn
  line would raise); at most one decision, one outcome and one stop per round, in order; every run an
  outcome lists as trained is in the table.

At the end every table holds each planned (sweep) or picked (adaptive) run exactly once. Counts are printed;
the trainer's docs quote them (trainers/README.md).

    python benchmarks/trainer_fault_study.py --kills 20 --seed 0
"""

from __future__ import annotations

import argparse
import csv
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from phifit.plan.rounds import read_records, rounds_path
from phifit.spec.sweep_spec import load_spec, plan

SPEC = """
[sweep]
name = "fault_study"
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
eval_every = 0
[estimate]
flops_per_second = 1e10
[[budgets]]
flops = 1e9
widths = [16, 32]
[[budgets]]
flops = 1.5e9
widths = [16, 32]
[[budgets]]
flops = 2.5e9
widths = [16, 32]
[[budgets]]
flops = 4e9
widths = [16, 32]
[[grids]]
name = "main"
r = [1, 2]
"""


def table_rows(out: Path) -> list[dict[str, str]]:
    if not out.exists():
        return []
    data = out.read_bytes()
    if data and not data.endswith(b"\n"):
        raise AssertionError(f"{out}: the last line is torn (no newline at the end)")
    with out.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows, 2):
        if not (row.get("run_id") and row.get("loss") and row.get("finished_at")):
            raise AssertionError(f"{out}: line {i} is not a whole row")
    ids = [r["run_id"] for r in rows]
    if len(ids) != len(set(ids)):
        raise AssertionError(f"{out}: a run appears twice")
    return rows


def check_rounds(out: Path, ids: set[str]) -> int:
    """Round-log invariants; returns the number of records."""
    path = rounds_path(out)
    if not path.exists():
        return 0
    records, _ = read_records(path)
    seen: dict[tuple[str, int], int] = {}
    for rec in records:
        key = (rec["event"], rec["round"])
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            raise AssertionError(f"{path}: {rec['event']} of round {rec['round']} recorded twice")
        if rec["event"] == "outcome":
            if rec["round"] > 0 and ("decision", rec["round"]) not in seen:
                raise AssertionError(f"{path}: outcome of round {rec['round']} before its decision")
            missing = set(rec.get("trained") or []) - ids
            if missing:
                raise AssertionError(f"{path}: round {rec['round']} lists runs not in the table: {missing}")
    return len(records)


def timed_run(cmd: list[str]) -> float:
    """Seconds of one uninterrupted run of ``cmd`` (its table written to a scratch path)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"the uninterrupted run failed: {done.stderr[-2000:]}")
    return time.perf_counter() - t0


def finish(cmd: list[str], out: Path, before: set[str], adaptive: bool) -> None:
    """Run ``cmd`` to its end (resuming ``out``) and check its rows and round log."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"the resumed run failed: {done.stderr[-2000:]}")
    ids = {r["run_id"] for r in table_rows(out)}
    if not before <= ids:
        raise AssertionError(f"finished runs lost: {sorted(before - ids)}")
    if adaptive:
        check_rounds(out, ids)


def campaign(
    make_cmd: Callable[[Path], list[str]],
    folder: Path,
    name: str,
    kills: int,
    rng: random.Random,
    adaptive: bool,
) -> tuple[dict[str, int], list[Path]]:
    """Kill the command ``kills`` times at random moments, checking after each, resuming after each.

    A kill comes after a delay drawn uniformly from 0.3 s to the length of one uninterrupted run
    (measured first, on a scratch table): from start-up (imports) to its last run.  A table that
    finishes before its kill is run once more to its end, checked, and the campaign goes on with a
    fresh table, until ``kills`` kills.  Returns the counts and the finished tables."""
    full = timed_run(make_cmd(folder / f"{name}_scratch.csv"))
    stats = {"kills": 0, "killed_mid_run": 0, "checks": 0, "tables": 0}
    stats["seconds_uninterrupted"] = round(full, 1)
    tables: list[Path] = []
    while stats["kills"] < kills:
        out = folder / f"{name}_{len(tables)}.csv"
        cmd = make_cmd(out)
        before: set[str] = set()
        while stats["kills"] < kills:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.3, full))
            if proc.poll() is not None:  # this table finished before the kill
                break
            proc.kill()
            proc.wait()
            stats["kills"] += 1
            rows = table_rows(out)
            ids = {r["run_id"] for r in rows}
            if not before <= ids:
                raise AssertionError(f"finished runs lost: {sorted(before - ids)}")
            stats["killed_mid_run"] += any(out.parent.glob(f"{out.name}.d/**/*.pt")) or 0
            if adaptive:
                check_rounds(out, ids)
            stats["checks"] += 1
            before = ids
        finish(cmd, out, before, adaptive)
        tables.append(out)
    stats["tables"] = len(tables)
    return stats, tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per campaign (sweep, adaptive)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        spec = folder / "fault_study.toml"
        spec.write_text(textwrap.dedent(SPEC))
        planned = {r.run_id for r in plan(load_spec(str(spec)))}
        base = [sys.executable, "-m", "phifit.trainers.cli", "sweep", str(spec)]

        s, tables = campaign(
            lambda out: [*base, "--out", str(out)], folder, "sweep", args.kills, rng, adaptive=False
        )
        complete = sum(sorted(r["run_id"] for r in table_rows(t)) == sorted(planned) for t in tables)
        print(
            f"sweep ({s['seconds_uninterrupted']} s uninterrupted): {s['kills']} kills, "
            f"{s['checks']} checks, {s['killed_mid_run']} with a run in progress, over {s['tables']} "
            f"table(s); tables holding their {len(planned)} planned runs each once: {complete} of "
            f"{len(tables)}; torn or duplicated rows 0, finished runs lost 0"
        )

        def adaptive_cmd(out: Path) -> list[str]:
            settings = ["--batch", "2", "--bootstrap", "20", "--jobs", "1", "--max-rounds", "3"]
            return [*base, "--out", str(out), "--adaptive", *settings]

        a, tables = campaign(adaptive_cmd, folder, "adaptive", args.kills, rng, adaptive=True)
        for out in tables:
            records, _ = read_records(rounds_path(out))
            stops = [r for r in records if r["event"] == "stop"]
            picked = {p["run_id"] for r in records if r["event"] == "decision" for p in r.get("picks", [])}
            ids = {r["run_id"] for r in table_rows(out)}
            print(
                f"adaptive table {out.name}: {len(ids)} rows, round log {len(records)} records, "
                f"{len(stops)} stop ({stops[-1]['reason'] if stops else 'none'}); every picked run in "
                f"the table: {picked <= ids}"
            )
        print(
            f"adaptive ({a['seconds_uninterrupted']} s uninterrupted): {a['kills']} kills, "
            f"{a['checks']} checks, {a['killed_mid_run']} with a run in progress, over {a['tables']} "
            "table(s); torn lines 0, duplicated records 0, finished runs lost 0"
        )


if __name__ == "__main__":
    main()
