"""Per-run training logs (the loss curve of a run) and their figure. No torch here.

Every run trained with an ``--out`` table keeps a log beside it, ``<out>.d/logs/<run_id>.csv``, one line per
evaluation (nanoGPT's ``eval_interval`` habit)::

    step, tokens, flops, lr, train_loss, val_loss, eval_tokens, elapsed_s, note

- ``step`` optimiser steps done, ``tokens`` = step * tokens_per_step, ``flops`` = F * tokens (training FLOPs
  so far, F of ``flops.py``), ``lr`` the matrix learning rate of the last step.
- ``train_loss`` the running mean (EMA 0.9) of the training loss, ``val_loss`` the mean cross-entropy (nats
  per token) over the first ``eval_tokens`` held-out tokens. The last line (``step == steps``) is the run's
  final evaluation on the whole ``val_tokens`` set, the ``loss`` of its row; step 0 is the initialised model.
- ``note``: events, such as ``resumed from checkpoint at step 180`` (losses empty) or the short-run warning.

A resumed run first cuts the lines after its checkpoint's step, so a log never has a step twice.
Lines are appended and flushed one at a time by rank 0; a run killed mid-line leaves at most one partial line,
which ``read_log`` skips and a resume removes.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

LOG_COLUMNS = ("step", "tokens", "flops", "lr", "train_loss", "val_loss", "eval_tokens", "elapsed_s", "note")


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    return str(v)


class EvalLog:
    """Appends evaluation lines to a run's log; ``None`` path = a no-op log (rank > 0, or no table)."""

    def __init__(self, path: str | os.PathLike | None, resume_step: int | None = None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keep = []
        if resume_step is not None:  # keep what the checkpoint covers, drop what it does not
            keep = [r for r in read_log(self.path) if int(r["step"]) <= resume_step]
        tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}")
        with tmp.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(LOG_COLUMNS)
            for r in keep:
                w.writerow([r.get(c, "") for c in LOG_COLUMNS])
        os.replace(tmp, self.path)

    def write(self, **values: Any) -> None:
        if self.path is None:
            return
        unknown = set(values) - set(LOG_COLUMNS)
        assert not unknown, f"unknown log columns {sorted(unknown)}"
        line = ",".join(_csv_cell(_fmt(values.get(c))) for c in LOG_COLUMNS) + "\n"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()


def _csv_cell(s: str) -> str:
    return '"' + s.replace('"', '""') + '"' if any(ch in s for ch in ',"\n') else s


def read_log(path: str | os.PathLike) -> list[dict[str, str]]:
    """The well-formed lines of a run log (a torn last line, or a foreign header, yields nothing for it)."""
    p = Path(path)
    if not p.exists():
        return []
    with p.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != LOG_COLUMNS:
            raise ValueError(f"{p}: not a phifit run log (expected columns {', '.join(LOG_COLUMNS)})")
        out = []
        for cells in reader:
            if len(cells) != len(LOG_COLUMNS) or not cells[0].isdigit():
                continue
            out.append(dict(zip(LOG_COLUMNS, cells)))
        return out


def plot_curves(logs: dict[str, str | os.PathLike], path: str | os.PathLike, title: str = "") -> Path:
    """Validation (solid, markers) and training (thin) loss against training FLOPs, one colour per run.

    ``logs`` maps a label (the run id) to its log file. Writes ``path`` (the suffix picks the format: .svg,
    .png, .pdf) and returns it. A run whose curve rises well above its start is easy to spot: that is a
    diverged run.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, (label, log) in enumerate(sorted(logs.items())):
        rows = [r for r in read_log(log) if r["val_loss"] or r["train_loss"]]
        if not rows:
            continue
        colour = f"C{i % 10}"
        x = [max(float(r["flops"]), 1.0) for r in rows]
        val = [(xi, float(r["val_loss"])) for xi, r in zip(x, rows) if r["val_loss"]]
        tr = [
            (xi, float(r["train_loss"])) for xi, r in zip(x, rows) if r["train_loss"] and float(r["step"]) > 0
        ]
        if val:
            ax.plot(*zip(*val), "o-", color=colour, ms=3, lw=1.2, label=label)
        if tr:
            ax.plot(*zip(*tr), "-", color=colour, lw=0.6, alpha=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("training FLOPs so far")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title(title or "loss curves (markers: validation, thin: training EMA)", fontsize=10)
    if len(logs) <= 12:
        ax.legend(fontsize=6, loc="upper right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(fig)
    return out
