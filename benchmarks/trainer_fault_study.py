"""Fault study of the trainer's writers: ``kill -9`` at random moments of a sweep and of an adaptive loop.

A tiny sweep (the adaptive tests' spec: 4 budgets x widths 16, 32 x r in 1, 2; 16 runs of 5 to 125 steps) is
started as a subprocess, killed with SIGKILL (no chance to clean up) after a random delay, checked, and
started again, until it finishes; then the same for ``--adaptive`` (pilot, rounds of 2 runs, 20 bootstrap
replicates, ``--max-rounds 3``). After every kill the study checks what a user would lose:

- the run table parses; every line is whole (ends with a newline; every row has a run id, a loss and a
  finish time); no run id appears twice; no finished run is lost (the rows after a kill include every row
  before it);
- the round log (``RUNS.csv.d/adaptive.jsonl``) reads with :func:`phifit.plan.rounds.read_records` (a torn
  line would raise); at most one decision, one outcome and one stop per round, in order; every run an
  outcome lists as trained is in the table.

At the end both tables hold each planned (sweep) or picked (adaptive) run exactly once. Counts are printed;
the docs quote them (docs/run-tables.md).

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


def campaign(cmd: list[str], out: Path, kills: int, rng: random.Random, adaptive: bool) -> dict[str, int]:
    """Kill ``cmd`` ``kills`` times at random moments, checking after each; then let it finish."""
    stats = {"kills": 0, "killed_mid_run": 0, "rows_before_last": 0, "checks": 0, "records": 0}
    before: set[str] = set()
    while stats["kills"] < kills:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.0, 15.0))  # from start-up (imports, ~3 s) to several runs in
        if proc.poll() is not None:  # finished before the kill: start again from scratch is not needed
            break
        proc.kill()
        proc.wait()
        stats["kills"] += 1
        rows = table_rows(out)
        ids = {r["run_id"] for r in rows}
        if not before <= ids:
            raise AssertionError(f"finished runs lost: {sorted(before - ids)}")
        stats["killed_mid_run"] += any(out.parent.glob(f"{out.name}.d/**/*.pt")) or 0
        stats["records"] = check_rounds(out, ids) if adaptive else 0
        stats["checks"] += 1
        before = ids
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"the resumed run failed: {done.stderr[-2000:]}")
    rows = table_rows(out)
    ids = {r["run_id"] for r in rows}
    if not before <= ids:
        raise AssertionError(f"finished runs lost: {sorted(before - ids)}")
    stats["records"] = check_rounds(out, ids) if adaptive else 0
    stats["rows"] = len(rows)
    return stats


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

        out = folder / "sweep.csv"
        s = campaign([*base, "--out", str(out)], out, args.kills, rng, adaptive=False)
        ids = [r["run_id"] for r in table_rows(out)]
        ok = sorted(ids) == sorted(planned)
        print(
            f"sweep: {s['kills']} kills, {s['checks']} checks, {s['killed_mid_run']} with a run in progress; "
            f"final table {s['rows']} rows for {len(planned)} planned, each once: {ok}; torn or duplicated "
            "rows 0, finished runs lost 0"
        )

        out = folder / "adaptive.csv"
        cmd = [*base, "--out", str(out), "--adaptive", "--batch", "2", "--bootstrap", "20", "--jobs", "1",
               "--max-rounds", "3"]  # fmt: skip
        a = campaign(cmd, out, args.kills, rng, adaptive=True)
        records, _ = read_records(rounds_path(out))
        stops = [r for r in records if r["event"] == "stop"]
        picked = {p["run_id"] for r in records if r["event"] == "decision" for p in r.get("picks", [])}
        ids = {r["run_id"] for r in table_rows(out)}
        print(
            f"adaptive: {a['kills']} kills, {a['checks']} checks; final table {a['rows']} rows, round log "
            f"{len(records)} records, {len(stops)} stop ({stops[-1]['reason'] if stops else 'none'}); every "
            f"picked run in the table: {picked <= ids}; torn lines 0, duplicated records 0, "
            "finished runs lost 0"
        )


if __name__ == "__main__":
    main()
