"""Run CSV rows: deterministic run ids, and atomic appends of finished runs only. No torch here.

Columns: the phifit run-table contract first (``run_id, r, n_once, n_rec, tokens, loss, flops, budget, size,
variant, seed``) with ``bits_per_byte`` beside ``loss`` (``loss / (ln 2 * bytes_per_token)``, the validation
loss in bits per byte of held-out text; ``loss / ln 2`` for the byte tokenizer), then the configuration and
measurements of the run (``CONFIG_COLUMNS``), then ``notes``.

Atomicity: ``append_row`` takes an exclusive lock on a sidecar ``<csv>.lock`` file, re-reads the CSV, writes
the old content plus the new line to a temporary file in the same directory, fsyncs it and ``os.replace``s it
over the CSV. A reader, or a sweep killed at any instant, sees either the old file or the new one, never a
half-written line. An existing file is only ever extended: a file whose header is not exactly the phifit
trainer columns is refused with a ``ValueError`` and left untouched. (A table written before the ``notes``
or the ``bits_per_byte`` column existed is still extended, with its own header; so are such row files.)

Many writers, several machines (``finish_run``): a finished run first writes its row to a file of its own,
``<csv>.d/rows/<run_id>.csv`` (temporary file, fsync, ``os.replace``), then merges every row file into the CSV
(``merge_rows``: under the lock, old rows plus the row files not yet in it, written to a temporary file and
renamed over the CSV). This is chosen over appending to one file with ``O_APPEND`` because NFS has no atomic
append (each client computes the end of file itself, so two nodes can write over each other), and because a
lock cannot be relied on alone: ``flock`` on NFS is emulated with POSIX byte-range locks that reach the server
only where the mount has working locking (NLM or NFSv4; a ``nolock`` mount keeps them local to each node).
What it relies on instead works on NFS: a rename within a directory is atomic on the server, and every row
file has one writer (its run). The lock then only saves work; correctness does not depend on it: the merge
is an idempotent union keyed by ``run_id``, so a racing merge that drops a row for a moment (two nodes
without a working lock both rename their union) is repaired by the next merge from the row file, which is
never deleted, and no run is ever listed twice. The row files are the record; the CSV is their merged view.

Task state (``mark_running``, ``mark_failed``, ``clear_state``): while a sweep task trains a run it keeps a
marker ``<csv>.d/state/<run_id>.json`` (``running`` with host, pid and job id; ``failed`` with the error's
tail), removed when the row is in. The in-process sweep writes them and the cluster launcher reads them, so
both import them from here.

Run ids (``make_run_id``, ``format_budget``, ``variant_of``) are defined with the run's configuration in
:mod:`phifit.spec.run_config` and re-exported here.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import socket
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phifit.spec.run_config import format_budget, make_run_id, variant_of  # noqa: F401 (re-exported)

try:  # POSIX advisory locks; elsewhere appends rely on os.replace alone
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

CORE_COLUMNS = (
    "run_id",
    "r",
    "n_once",
    "n_rec",
    "tokens",
    "loss",
    "flops",
    "budget",
    "size",
    "variant",
    "seed",
)
_CONFIG_COLUMNS_V1 = (
    "d_model",
    "head_dim",
    "n_head",
    "n_layers_eff",
    "prelude",
    "n_recur",
    "coda",
    "bptt_k",
    "injection",
    "lanes",
    "seq_len",
    "vocab_size",
    "tokenizer",
    "corpus",
    "data_fingerprint",
    "batch_size",
    "grad_accum",
    "world_size",
    "tokens_per_step",
    "steps",
    "optimizer",
    "lr",
    "embed_lr",
    "head_lr",
    "scalar_lr",
    "weight_decay",
    "final_lr_frac",
    "grad_clip",
    "val_tokens",
    "flops_per_token",
    "n_params",
    "train_loss",
    "wall_s",
    "train_s",
    "tokens_per_s",
    "device",
    "torch_version",
    "finished_at",
)
#: how the base learning rates transfer (phifit.spec.lr_recipe: "mup" or "none"), beside the schedule's
_AFTER_SCHEDULE = _CONFIG_COLUMNS_V1.index("final_lr_frac") + 1
CONFIG_COLUMNS = _CONFIG_COLUMNS_V1[:_AFTER_SCHEDULE] + ("lr_scaling",) + _CONFIG_COLUMNS_V1[_AFTER_SCHEDULE:]
#: the loss in bits per byte of held-out text: loss / (ln 2 * bytes per token); loss / ln 2 for bytes
BITS_COLUMN = "bits_per_byte"
NOTES_COLUMN = "notes"  # warnings about the run (a short run), '; '-separated; empty for most runs
_AFTER_LOSS = CORE_COLUMNS.index("loss") + 1
COLUMNS = (
    CORE_COLUMNS[:_AFTER_LOSS]
    + (BITS_COLUMN,)
    + CORE_COLUMNS[_AFTER_LOSS:]
    + CONFIG_COLUMNS
    + (NOTES_COLUMN,)
)
#: tables written before lr_scaling (their runs trained every group at its base rate); still extended
PRE_SCALING_COLUMNS = tuple(c for c in COLUMNS if c != "lr_scaling")
PRE_BITS_COLUMNS = CORE_COLUMNS + _CONFIG_COLUMNS_V1 + (NOTES_COLUMN,)  # before bits_per_byte; still extended
LEGACY_COLUMNS = CORE_COLUMNS + _CONFIG_COLUMNS_V1  # tables written before the notes column; still extended
#: Headers an existing table or row file may have (any order): the current one, then older ones.
KNOWN_HEADERS = (COLUMNS, PRE_SCALING_COLUMNS, PRE_BITS_COLUMNS, LEGACY_COLUMNS)


def known_header(header: list[str] | tuple[str, ...]) -> bool:
    """Whether ``header`` holds exactly the columns of one of ``KNOWN_HEADERS`` (in any order)."""
    return sorted(header) in [sorted(h) for h in KNOWN_HEADERS]


def sidecar(path: str | os.PathLike) -> Path:
    """The folder that belongs to a run table: ``runs.csv`` -> ``runs.csv.d/`` (logs, checkpoints, row files,
    job folders). Never inside data the user did not give as ``--out``."""
    return Path(f"{os.fspath(path)}.d")


@dataclass(frozen=True)
class RunPaths:
    """Where one run of a table keeps its things (all under ``sidecar(table)``)."""

    log: Path  # logs/<run_id>.csv: the evaluation log, the loss curve (curves.py)
    ckpt: Path  # ckpt/<run_id>.pt: the last checkpoint; deleted once the run's row is in the table
    row: Path  # rows/<run_id>.csv: the finished run's row (header + one line)
    state: Path  # state/<run_id>.json: running / failed marker of a sweep task (launch.py)


def run_paths(path: str | os.PathLike, run_id: str) -> RunPaths:
    d = sidecar(path)
    return RunPaths(
        log=d / "logs" / f"{run_id}.csv",
        ckpt=d / "ckpt" / f"{run_id}.pt",
        row=d / "rows" / f"{run_id}.csv",
        state=d / "state" / f"{run_id}.json",
    )


# ---- task state markers ------------------------------------------------------------------------------------
def _write_json(path: Path, obj: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """A marker's content; None when it is missing or torn."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def job_id_from_env() -> str:
    """The scheduler's id of the job this process runs in ('' outside one)."""
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', '0')}"
    return os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID", "")


def mark_running(out: str | os.PathLike, run_id: str) -> None:
    """Marker ``running`` (host, pid, job id, since) of a run a task is training now."""
    _write_json(
        run_paths(out, run_id).state,
        {
            "state": "running",
            "run_id": run_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "job_id": job_id_from_env(),
            "since": time.time(),
        },
    )


def mark_failed(out: str | os.PathLike, run_id: str, err: BaseException) -> None:
    """Marker ``failed`` with the last 12 lines of the error's traceback."""
    tail = "".join(traceback.format_exception(type(err), err, err.__traceback__)).strip().splitlines()[-12:]
    _write_json(
        run_paths(out, run_id).state,
        {
            "state": "failed",
            "run_id": run_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "job_id": job_id_from_env(),
            "since": time.time(),
            "error": "\n".join(tail),
        },
    )


def clear_state(out: str | os.PathLike, run_id: str) -> None:
    """Remove a run's marker (its row is in the table)."""
    run_paths(out, run_id).state.unlink(missing_ok=True)


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def _header(path: Path) -> list[str] | None:
    """The header of an existing, non-empty CSV (None when the file is absent or empty)."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    with path.open(newline="", encoding="utf-8") as f:
        try:
            return next(csv.reader(f))
        except (StopIteration, csv.Error, UnicodeDecodeError):
            return []


def check_compatible(path: str | os.PathLike) -> list[str] | None:
    """Raise ``ValueError`` unless ``path`` is absent, empty, or a phifit trainer CSV; return its header."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{p}: is a directory; expected a run CSV file")
    header = _header(p)
    if header is None:
        return None
    if not known_header(header):
        missing = [c for c in COLUMNS if c not in header]
        extra = [c for c in header if c not in COLUMNS]
        raise ValueError(
            f"{p}: exists but is not a phifit trainer run CSV "
            f"(missing columns: {', '.join(missing[:6]) or '-'}"
            f"{' ...' if len(missing) > 6 else ''}; unexpected: {', '.join(extra[:6]) or '-'}"
            f"{' ...' if len(extra) > 6 else ''}); refusing to modify it, choose another --out"
        )
    return header


def read_finished(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """The finished runs already in the CSV, as run_id -> row (empty when the file does not exist yet)."""
    p = Path(path)
    if check_compatible(p) is None:
        return {}
    with p.open(newline="", encoding="utf-8") as f:
        return {row["run_id"]: row for row in csv.DictReader(f) if row.get("run_id")}


def read_run_ids(path: str | os.PathLike) -> set[str]:
    """The run ids already in the CSV (an empty set when the file does not exist yet)."""
    return set(read_finished(path))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    if fcntl is None:  # pragma: no cover
        yield
        return
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _fsync_dir(d: Path) -> None:
    try:  # make a rename durable
        dir_fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass


def _replace_atomically(p: Path, content: bytes, mode: int = 0o644) -> None:
    """Write ``content`` to a temporary file beside ``p``, fsync, rename over ``p`` (module docstring)."""
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, p.stat().st_mode & 0o777 if p.exists() else mode)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(p.parent)


def _check_row(row: Mapping[str, Any]) -> None:
    unknown = set(row) - set(COLUMNS)
    if unknown or not row.get("run_id"):
        raise ValueError(f"row has unknown columns {sorted(unknown)} or no run_id")


def append_rows(path: str | os.PathLike, rows: list[Mapping[str, Any]]) -> list[bool]:
    """Append finished runs atomically (module docstring); False for a run_id already present."""
    p = Path(path)
    for row in rows:
        _check_row(row)
    p.parent.mkdir(parents=True, exist_ok=True)
    with _locked(p):
        header = check_compatible(p)
        present = read_run_ids(p) if header is not None else set()
        added = []
        for row in rows:
            added.append(row["run_id"] not in present)
            present.add(row["run_id"])
        new = [row for row, a in zip(rows, added) if a]
        if not new:
            return added
        old = p.read_bytes() if header is not None else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if header is None:
            header = list(COLUMNS)
            writer.writerow(header)
        for row in new:
            writer.writerow([_format(row.get(c)) for c in header])
        _replace_atomically(p, old + buf.getvalue().encode("utf-8"))
    return added


def append_row(path: str | os.PathLike, row: Mapping[str, Any]) -> bool:
    """Append one finished run atomically (module docstring); False if its run_id is already present."""
    return append_rows(path, [row])[0]


def write_row_file(path: str | os.PathLike, row: Mapping[str, Any]) -> Path:
    """The run's own row file, ``<csv>.d/rows/<run_id>.csv``, written atomically; returns its path."""
    _check_row(row)
    target = run_paths(path, row["run_id"]).row
    target.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerow([_format(row.get(c)) for c in COLUMNS])
    _replace_atomically(target, buf.getvalue().encode("utf-8"))
    return target


def read_row_files(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """run_id -> row of every row file of the table (``ValueError`` naming a file that is not one)."""
    rows: dict[str, dict[str, str]] = {}
    folder = sidecar(path) / "rows"
    if not folder.is_dir():
        return rows
    for f in sorted(folder.glob("*.csv")):
        with f.open(newline="", encoding="utf-8") as fh:
            got = list(csv.DictReader(fh))
        if len(got) != 1 or not known_header(list(got[0])) or got[0]["run_id"] != f.stem:
            raise ValueError(
                f"{f}: not a phifit row file (expected the header {COLUMNS[0]}, ... and one row whose run_id "
                "is the file name); move it away and run again"
            )
        rows[f.stem] = got[0]
    return rows


def merge_rows(path: str | os.PathLike) -> list[str]:
    """Append every row file not yet in the CSV (module docstring); returns the run ids added."""
    files = read_row_files(path)
    if not files:
        return []
    present = read_run_ids(path)
    todo = [row for rid, row in files.items() if rid not in present]
    if not todo:
        return []
    added = append_rows(path, todo)
    return [row["run_id"] for row, a in zip(todo, added) if a]


def finish_run(path: str | os.PathLike, row: Mapping[str, Any]) -> bool:
    """Record a finished run: its row file, then a merge into the CSV. True if the CSV gained its row."""
    check_compatible(path)  # refuse a foreign --out before writing anything beside it
    write_row_file(path, row)
    return row["run_id"] in merge_rows(path)


def make_row(cfg: Any, result: Any, run_id: str, finished_at: str, torch_version: str) -> dict[str, Any]:
    """One CSV row from a ``TrainConfig`` and its ``RunResult`` (duck-typed: this module needs no torch)."""
    m = cfg.model
    return {
        "run_id": run_id,
        "r": m.r,
        "n_once": result.n_once,
        "n_rec": result.n_rec,
        "tokens": result.tokens,
        "loss": result.loss,
        "bits_per_byte": result.bits_per_byte,
        "flops": result.flops,
        "budget": format_budget(cfg.budget) if cfg.budget is not None else "",
        "size": m.d_model,
        "variant": m.variant,
        "seed": cfg.seed,
        "d_model": m.d_model,
        "head_dim": m.head_dim,
        "n_head": m.n_head,
        "n_layers_eff": m.depth,
        "prelude": m.n_prelude,
        "n_recur": m.n_recur,
        "coda": m.n_coda,
        "bptt_k": m.k,
        "injection": m.injection,
        "lanes": m.lanes if m.injection == "hc" else "",
        "seq_len": m.seq_len,
        "vocab_size": result.vocab_size,
        "tokenizer": cfg.tokenizer if cfg.tokenizer == "bytes" else f"bpe{cfg.bpe_vocab}",
        "corpus": cfg.corpus,
        "data_fingerprint": result.data_fingerprint,
        "batch_size": cfg.batch_size,
        "grad_accum": cfg.grad_accum,
        "world_size": result.world_size,
        "tokens_per_step": result.tokens_per_step,
        "steps": result.steps,
        "optimizer": cfg.optimizer,
        "lr": cfg.lr,
        "embed_lr": cfg.embed_lr,
        "head_lr": cfg.head_lr,
        "scalar_lr": cfg.scalar_lr,
        "weight_decay": cfg.weight_decay,
        "final_lr_frac": cfg.final_lr_frac,
        "lr_scaling": cfg.lr_scaling,
        "grad_clip": cfg.grad_clip,
        "val_tokens": cfg.val_tokens,
        "flops_per_token": result.flops_per_token,
        "n_params": result.n_params,
        "train_loss": result.train_loss,
        "wall_s": round(result.wall_s, 3),
        "train_s": round(result.train_s, 3),
        "tokens_per_s": round(result.tokens_per_s, 1),
        "device": result.device,
        "torch_version": torch_version,
        "finished_at": finished_at,
        "notes": "; ".join(getattr(result, "notes", ())),
    }
