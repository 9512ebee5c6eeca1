"""Run CSV rows: deterministic run ids, and atomic appends of finished runs only. No torch here.

Columns: the phifit run-table contract first (``run_id, r, n_once, n_rec, tokens, loss, flops, budget, size,
variant, seed``), then the configuration and measurements of the run (``CONFIG_COLUMNS``).

Atomicity: ``append_row`` takes an exclusive lock on a sidecar ``<csv>.lock`` file, re-reads the CSV, writes
the old content plus the new line to a temporary file in the same directory, fsyncs it and ``os.replace``s it
over the CSV. A reader, or a sweep killed at any instant, sees either the old file or the new one, never a
half-written line. An existing file is only ever extended: a file whose header is not exactly the phifit
trainer columns is refused with a ``ValueError`` and left untouched.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
CONFIG_COLUMNS = (
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
COLUMNS = CORE_COLUMNS + CONFIG_COLUMNS


def format_budget(budget: float) -> str:
    """A short, float-parseable budget label: 1e13 -> '1e13', 4.64e12 -> '4.64e12'."""
    return f"{budget:.6g}".replace("e+0", "e").replace("e+", "e")


def make_run_id(identity: Mapping[str, Any]) -> str:
    """Deterministic id: a readable prefix plus 10 hex digits of sha256 over the sorted identity JSON.

    ``identity`` holds every setting that determines the result (model, budget or steps, recipe, data, seed),
    so the same configuration always gets the same id and a re-run is recognised and skipped.
    """
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
    m = identity["model"]
    horizon = f"C{format_budget(identity['budget'])}" if identity.get("budget") else f"S{identity['steps']}"
    return f"{variant_of(m)}-r{m['r']}-d{m['d_model']}-{horizon}-s{identity['seed']}-{digest}"


def variant_of(model: Mapping[str, Any]) -> str:
    """The variant label of a model configuration dict (mirrors ``LoopedGPTConfig.variant``)."""
    from .config import LoopedGPTConfig

    return LoopedGPTConfig(**model).variant


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
    if sorted(header) != sorted(COLUMNS):
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


def append_row(path: str | os.PathLike, row: Mapping[str, Any]) -> bool:
    """Append one finished run atomically (module docstring); False if its run_id is already present."""
    p = Path(path)
    unknown = set(row) - set(COLUMNS)
    if unknown or not row.get("run_id"):
        raise ValueError(f"row has unknown columns {sorted(unknown)} or no run_id")
    p.parent.mkdir(parents=True, exist_ok=True)
    with _locked(p):
        header = check_compatible(p)
        if header is not None and row["run_id"] in read_run_ids(p):
            return False
        old = p.read_bytes() if header is not None else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if header is None:
            header = list(COLUMNS)
            writer.writerow(header)
        writer.writerow([_format(row.get(c)) for c in header])
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(old + buf.getvalue().encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            if p.exists():
                os.chmod(tmp, p.stat().st_mode & 0o777)
            else:
                os.chmod(tmp, 0o644)
            os.replace(tmp, p)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        try:  # make the rename durable
            dir_fd = os.open(p.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:  # pragma: no cover - some file systems refuse fsync on directories
            pass
    return True


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
    }
