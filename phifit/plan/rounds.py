"""The round log of an adaptive sweep (``phifit sweep SPEC --out RUNS.csv --adaptive``): its file,
its records, and the per-round summary the report shows.

The log is a JSON Lines file beside the run table, ``RUNS.csv.d/adaptive.jsonl`` (:func:`rounds_path`;
the sweep's own sidecar folder).  It is only ever appended to, one record per event, each line flushed and
fsynced before the loop goes on (:func:`append_record`); nothing rewrites it.  Three events:

- ``outcome`` (round k): the runs trained so far have been fitted (Huber) and cell-bootstrapped; it holds
  phi, its percentile interval and the realised width, next to the width the round's decision predicted
  (round 0 is the pilot: no prediction);
- ``decision`` (round k >= 1): the runs :func:`phifit.plan.next_runs.choose_next` picked (run id, budget,
  r, width, FLOPs, why; ``rule`` on a pick a design rule forced) and the width it predicts once they are
  trained, recorded before any of them trains, with ``rule_notes``: the design rules the picks could not
  meet (:mod:`phifit.plan.design_rules`);
- ``stop``: why the loop stopped (a target width reached, a cap, the pool exhausted).

Every record also holds the round, the time (UTC), the runs and training FLOPs fitted so far, those of the
adaptive rounds alone, phi with its interval, and the stop rule in force: its settings (``rules``,
``target_width``) and, in words, ``stop_rule``; the round-0 outcome, written before the first decision,
declares it.  A record whose line is torn (a process killed while writing it) is skipped when read and
counted (:attr:`AdaptiveRounds.skipped_lines`); the next append starts on a fresh line.
:func:`load_rounds` reads a log into an :class:`AdaptiveRounds`, one row per round, which round-trips
through JSON like every result (the report's ``results.json["adaptive"]``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..serialize import JsonIO, to_plain

#: The log's file name inside the table's sidecar folder (``RUNS.csv.d/``).
ROUNDS_FILE = "adaptive.jsonl"
#: The events a record can hold.
EVENTS = ("outcome", "decision", "stop")
#: Keys every record has.
RECORD_KEYS = ("event", "round", "time")
#: Keys of a pick that the summary keeps (a decision's picks hold these and the pool's columns), and
#: ``rule`` where a design rule forced the pick.
PICK_KEYS = ("run_id", "budget", "r", "size", "flops", "width_after", "why")


def rounds_path(table: str | os.PathLike) -> Path:
    """The round log of a run table: ``runs.csv`` -> ``runs.csv.d/adaptive.jsonl``."""
    return Path(f"{os.fspath(table)}.d") / ROUNDS_FILE


def append_record(path: str | os.PathLike, record: Mapping[str, Any]) -> None:
    """Append one record as a JSON line (NaN and inf as null), then flush and fsync it.

    A file whose last line is torn (no final newline) gets a newline first, so the torn line stays a
    line of its own (skipped when read) and the new record is whole."""
    missing = [k for k in RECORD_KEYS if k not in record]
    if missing or record["event"] not in EVENTS:
        raise ValueError(f"a round record needs {', '.join(RECORD_KEYS)} and an event in {EVENTS}")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(to_plain(dict(record)), allow_nan=False, separators=(",", ":")) + "\n"
    prefix = ""
    if p.exists() and p.stat().st_size:
        with p.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            prefix = "" if f.read(1) == b"\n" else "\n"
    with p.open("a", encoding="utf-8") as f:
        f.write(prefix + line)
        f.flush()
        os.fsync(f.fileno())


def read_records(path: str | os.PathLike) -> tuple[list[dict[str, Any]], int]:
    """The records of a log, in order, and the number of torn lines skipped; an empty list when the file
    does not exist.  A line that parses but is not a round record raises ``ValueError`` naming the file
    and the line (the file is not a round log)."""
    p = Path(path)
    if not p.exists():
        return [], 0
    if p.is_dir():
        raise ValueError(f"{p}: is a directory; expected a round log ({ROUNDS_FILE})")
    records: list[dict[str, Any]] = []
    skipped = 0
    with p.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                skipped += 1  # a torn line: the process was killed while writing it
                continue
            if (
                not isinstance(record, dict)
                or record.get("event") not in EVENTS
                or not isinstance(record.get("round"), int)
            ):
                raise ValueError(
                    f"{p}: line {number}: not a round record (expected a JSON object with 'event' in "
                    f"{', '.join(EVENTS)} and an integer 'round')"
                )
            records.append(record)
    return records, skipped


def interval_width(ci: Sequence[Any] | None) -> float | None:
    """hi - lo of an interval, None when it has no finite ends."""
    if not ci or len(ci) != 2 or any(v is None or not math.isfinite(float(v)) for v in ci):
        return None
    return float(ci[1]) - float(ci[0])


@dataclass(frozen=True)
class RoundRow(JsonIO):
    """One round of an adaptive sweep: what its decision picked and predicted, and what its outcome
    measured (round 0 is the pilot: no picks, no prediction).

    ``n_runs`` and ``flops``: the fitted runs and their training FLOPs after the round (before it when its
    outcome is not recorded yet); ``adaptive_flops``: those of the adaptive rounds alone;
    ``width_predicted``: the asymptotic 95% width of phi the decision predicted with its picks
    (``width_before`` without them); ``width_realised``, ``phi``, ``phi_ci``: the cell bootstrap's after the
    round; ``picks``: run_id, budget, r, size, flops, width_after and why of each pick; ``finished``:
    whether the outcome is recorded; ``note``: why a number is missing; ``failed``: picks that did not
    train (diverged)."""

    round: int
    n_runs: int
    flops: float
    adaptive_flops: float
    width_before: float | None
    width_predicted: float | None
    width_realised: float | None
    phi: float | None
    phi_ci: list[float | None] | None
    picks: list[dict[str, Any]]
    finished: bool
    note: str = ""
    failed: list[str] = field(default_factory=list)
    time: str = ""

    def to_dict(self) -> dict[str, Any]:
        return to_plain(dict(self.__dict__))


@dataclass(frozen=True)
class AdaptiveRounds(JsonIO):
    """An adaptive sweep's round log, summarised: one :class:`RoundRow` per round, in order.

    ``source``: the log file; ``spec``: the sweep spec it ran; ``stop``: the last stop record (reason,
    round, time), None while the loop has not stopped; ``target_width``: the stop rule's target in force
    at the last record, when there was one; ``skipped_lines``: torn lines skipped."""

    source: str
    spec: str
    rounds: list[RoundRow]
    stop: dict[str, Any] | None = None
    target_width: float | None = None
    skipped_lines: int = 0

    def to_frame(self):
        """One row per round: ``round``, ``n_runs``, ``flops``, ``adaptive_flops``,
        ``width_before``, ``width_predicted``, ``width_realised``, ``phi``, ``phi_lo``, ``phi_hi``,
        ``n_picks``, ``finished`` and ``note``."""
        import pandas as pd

        rows = []
        for row in self.rounds:
            ci = row.phi_ci or [None, None]
            rows.append(
                {
                    "round": row.round,
                    "n_runs": row.n_runs,
                    "flops": row.flops,
                    "adaptive_flops": row.adaptive_flops,
                    "width_before": row.width_before,
                    "width_predicted": row.width_predicted,
                    "width_realised": row.width_realised,
                    "phi": row.phi,
                    "phi_lo": ci[0],
                    "phi_hi": ci[1],
                    "n_picks": len(row.picks),
                    "finished": row.finished,
                    "note": row.note,
                }
            )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(dict(self.__dict__))

    @classmethod
    def from_records(
        cls, records: Sequence[Mapping[str, Any]], source: str, skipped_lines: int = 0
    ) -> AdaptiveRounds:
        """Summarise a log's records: each round's decision (its latest, should one have been recorded
        twice) joined with its outcome; the last stop record; the target width of the last record."""
        outcomes: dict[int, Mapping[str, Any]] = {}
        decisions: dict[int, Mapping[str, Any]] = {}
        stop = None
        target = None
        spec = ""
        for rec in records:
            spec = str(rec.get("spec") or spec)
            target = _number(rec.get("target_width"))  # the rules in force at the last record
            if rec["event"] == "outcome":
                outcomes[rec["round"]] = rec
            elif rec["event"] == "decision":
                decisions[rec["round"]] = rec
            else:
                stop = {k: rec.get(k) for k in ("round", "time", "reason")}
        rows = []
        for k in sorted(set(outcomes) | set(decisions)):
            out, dec = outcomes.get(k), decisions.get(k)
            now = out or dec or {}
            picks = [_summary_pick(p) for p in (dec or {}).get("picks", [])]
            rows.append(
                RoundRow(
                    round=k,
                    n_runs=int(now.get("n_runs") or 0),
                    flops=float(now.get("flops") or 0.0),
                    adaptive_flops=float(now.get("adaptive_flops") or 0.0),
                    width_before=None if dec is None else _number(dec.get("width_now")),
                    width_predicted=None if dec is None else _number(dec.get("width_predicted")),
                    width_realised=None if out is None else _number(out.get("width_realised")),
                    phi=None if out is None else _number(out.get("phi")),
                    phi_ci=None if out is None or not out.get("phi_ci") else list(out["phi_ci"]),
                    picks=picks,
                    finished=out is not None,
                    note=str((out or {}).get("note") or ("" if out else "outcome not recorded yet")),
                    failed=[str(x) for x in (out or {}).get("failed", [])],
                    time=str(now.get("time") or ""),
                )
            )
        return cls(str(source), spec, rows, stop, target, skipped_lines)


def _summary_pick(pick: Mapping[str, Any]) -> dict[str, Any]:
    """What the summary keeps of a pick: :data:`PICK_KEYS`, and ``rule`` when a design rule forced it."""
    kept = {key: pick.get(key) for key in PICK_KEYS}
    if pick.get("rule"):
        kept["rule"] = pick["rule"]
    return kept


def _number(value: Any) -> float | None:
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def load_rounds(path: str | os.PathLike) -> AdaptiveRounds:
    """Read a round log (:func:`read_records`) and summarise it; ``ValueError`` naming the file when it is
    missing, holds no record, or is not a round log."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such round log")
    records, skipped = read_records(p)
    if not records:
        raise ValueError(f"{p}: holds no round record")
    return AdaptiveRounds.from_records(records, str(p), skipped)
