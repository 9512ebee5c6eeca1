"""Sweeps on this machine: train a spec's runs resumably, time them, and print the dry run.

The spec format, its planned runs (``load_spec``, ``plan``) and the run-time estimate from a throughput
(``Throughput``, ``recorded_throughput``, ``estimate_seconds``) are torch-free and live in
:mod:`phifit.spec.sweep_spec`, where ``phifit plan`` reads them too; they are re-exported here for the
trainer's code. This module adds what needs the trainer: a probe of the training FLOP/s
(``measure_flops_per_second``, torch), the dry run that uses it, and ``run_sweep``.

Resumable: every run has a deterministic ``run_id`` (``phifit.spec.run_config.make_run_id``); the grid is
compared with the CSV once at the start and runs already present are skipped. Rows are appended atomically
when, and only when, a run finishes, so killing a sweep loses at most the run in progress and never leaves a
partial line; running it again resumes.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from phifit.extras import import_optional
from phifit.spec.sweep_spec import (
    FIXED_PER_GRID,
    Grid,
    PlannedRun,
    SweepSpec,
    Throughput,
    estimate_seconds,
    load_spec,
    plan,
    recorded_throughput,
    resolve_spec_path,
)

from .config import MIN_STEPS, TrainConfig
from .flops import flops_per_token, param_counts, tokens_for_budget
from .runlog import (
    clear_state,
    finish_run,
    format_budget,
    make_row,
    mark_failed,
    mark_running,
    merge_rows,
    read_finished,
    read_row_files,
    read_run_ids,
    run_paths,
)

__all__ = [
    "FIXED_PER_GRID",
    "Grid",
    "PlannedRun",
    "SweepSpec",
    "Throughput",
    "dry_run",
    "estimate_seconds",
    "load_spec",
    "measure_flops_per_second",
    "plan",
    "recorded_throughput",
    "resolve_spec_path",
    "run_sweep",
]

# ---- estimates ---------------------------------------------------------------------------------------------
PROBE_MIN_STEPS = 10  # timed steps per width at least
PROBE_MAX_STEPS = 40  # and at most
PROBE_SECONDS = 4.0  # keep timing rounds until this much time is spent (or PROBE_MAX_STEPS)


def measure_flops_per_second(
    runs: list[PlannedRun],
    min_steps: int = PROBE_MIN_STEPS,
    max_steps: int = PROBE_MAX_STEPS,
    seconds: float = PROBE_SECONDS,
) -> dict[int, tuple[float, float, int]]:
    """Training FLOP/s per width, measured now: width -> (FLOP/s with the cores to itself, FLOP/s by the wall
    clock now, timed steps).

    The r = 1 baseline model of each width (FLOPs per token are iso across r) with the sweep's batch, threads
    and device; after two warm-up steps, one timed optimiser step per width per round, round after round,
    until every width has ``min_steps`` and ``seconds`` have passed (at most ``max_steps``). Each width's
    FLOP/s come from the median step time: the rounds interleave the widths, so a burst of load on a shared
    machine hits all of them alike, and the median ignores the steps it slowed.

    A load that lasts the whole probe slows every step by the wall clock (on a 2-core machine shared with a
    test suite, 30 times was seen), but hardly changes the CPU time the step's threads use. On CPU the first
    number therefore comes from the median CPU time per step divided by the threads (what the step takes when
    no other process competes for the cores; it equals the wall time on an idle machine), the second from the
    wall clock; the dry run estimates with the first and reports the second.
    """
    import statistics

    torch = import_optional("torch", "train", "timing a sweep's runs (the dry run's probe)")

    from .model import LoopedGPT
    from .optim import optimizers_for

    probes: dict[int, Any] = {}
    for run in runs:
        if run.width in probes:
            continue
        cfg = run.config
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        m = cfg.model.with_(
            r=1, n_prelude=0, n_coda=0, n_recur=cfg.model.depth, injection="none", bptt_k=None
        )
        device = (
            "cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()) else "cpu"
        )
        torch.manual_seed(0)
        model = LoopedGPT(m).to(device)
        opts = optimizers_for(model, cfg, tokens=1e9)  # the rates do not matter to a timing probe
        x = torch.randint(0, m.vocab_size, (cfg.batch_size, m.seq_len), device=device)
        probes[run.width] = (cfg, m, device, model, opts, x, [])

    def step(cfg: TrainConfig, device: str, model: Any, opts: list, x: Any) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(cfg.grad_accum):
            _, loss = model(x, x)
            (loss / cfg.grad_accum).backward()
        for o in opts:
            o.step()
            o.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, time.process_time() - c0

    for cfg, _, device, model, opts, x, _ in probes.values():  # warm-up: allocator, kernels
        step(cfg, device, model, opts, x)
        step(cfg, device, model, opts, x)
    t_start = time.perf_counter()
    n = 0
    while n < max_steps and (n < min_steps or time.perf_counter() - t_start < seconds):
        for cfg, _, device, model, opts, x, times in probes.values():
            times.append(step(cfg, device, model, opts, x))
        n += 1
    rates = {}
    threads = torch.get_num_threads()
    for width, (cfg, m, device, _, _, _, times) in probes.items():
        flops = flops_per_token(m) * cfg.batch_size * cfg.grad_accum * m.seq_len
        wall = statistics.median(t for t, _ in times)
        # CPU seconds of all threads / threads = the wall time of a step with the cores to itself (on CPU)
        own = wall if device == "cuda" else min(wall, statistics.median(c for _, c in times) / threads)
        rates[width] = (flops / own, flops / wall, len(times))
    return rates


def _recorded_seconds(row: dict[str, str]) -> float:
    """The ``wall_s`` a finished run recorded (0 when the row has none)."""
    try:
        return float(row.get("wall_s") or 0.0)
    except ValueError:
        return 0.0


def _duration(s: float) -> str:
    s = round(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _timing_rows(paths: list[str]) -> list[dict[str, str]]:
    import csv

    rows: list[dict[str, str]] = []
    for path in paths:
        if not Path(path).is_file():
            raise ValueError(f"--timings {path}: no such file")
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = {"d_model", "seq_len", "batch_size", "flops_per_token", "tokens", "train_s", "wall_s"}
            missing -= set(reader.fieldnames or [])
            if missing:
                raise ValueError(
                    f"--timings {path}: no column(s) {', '.join(sorted(missing))} to time runs by"
                )
            rows.extend(reader)
    return rows


def dry_run(
    spec: SweepSpec,
    grids: list[str] | None,
    out: str | None,
    estimate: str = "auto",
    file: Any = None,
    timings: list[str] | None = None,
) -> float:
    """Print the grid (counts, tokens, FLOPs/token, estimated time); return the estimated seconds left.

    ``estimate``: ``auto`` (default) times each width from the finished runs of the same shape in ``out`` and
    the ``timings`` tables (``recorded_throughput``) and probes only the widths that have none
    (``measure_flops_per_second``); ``measure`` probes every width; ``table`` uses recorded runs only;
    ``constant`` the spec's ``[estimate] flops_per_second``. The last line says which it used, and how.
    """
    file = file or sys.stdout
    if estimate not in ("auto", "measure", "table", "constant"):
        raise ValueError(f"--estimate {estimate!r}: expected 'auto', 'measure', 'table' or 'constant'")
    runs = plan(spec, grids)
    done = {**read_row_files(out), **read_finished(out)} if out else {}  # read only: a dry run writes nothing
    todo = [r for r in runs if r.run_id not in done] or runs
    speeds, how = _estimated_speeds(spec, runs, todo, done, estimate, out, timings)
    left = _print_grid(runs, done, speeds, out, file)
    print(f"estimate: {'; '.join(how)}.", file=file)
    return left


def _estimated_speeds(
    spec: SweepSpec,
    runs: list[PlannedRun],
    todo: list[PlannedRun],
    done: dict[str, dict],
    estimate: str,
    out: str | None,
    timings: list[str] | None,
) -> tuple[dict[tuple[int, str], Throughput], list[str]]:
    """The throughput per (width, variant) the dry run estimates with, and how each was obtained: the
    spec's constant, recorded runs, the spec's ``[estimate.recorded]``, then a probe for what is left."""
    speeds: dict[tuple[int, str], Throughput] = {}
    how: list[str] = []
    if estimate == "constant":
        if spec.flops_per_second is None:
            raise ValueError(f"{spec.path}: --estimate constant needs estimate.flops_per_second in the spec")
        speeds = {(r.width, ""): Throughput(spec.flops_per_second, 2.0, "constant") for r in runs}
        how.append(
            f"calibrated constant {spec.flops_per_second / 1e9:.1f} GFLOP/s from the spec's [estimate]"
        )
    if estimate in ("auto", "table"):
        rows = list(done.values()) + _timing_rows(list(timings or []))
        speeds = recorded_throughput(rows, runs)
        widths = sorted({w for (w, v) in speeds if v == ""})
        if widths:
            rates = ", ".join(f"d{w} {speeds[(w, '')].flops_per_second / 1e9:.1f}" for w in widths)
            overheads = ", ".join(f"{speeds[(w, '')].overhead_s:.1f}" for w in widths)
            n_used = sum(speeds[(w, "")].n for w in widths)
            how.append(
                f"median training FLOP/s of {n_used} recorded runs of the same shape ({rates} GFLOP/s) and "
                f"their median overhead ({overheads} s)"
            )
    missing = sorted({r.width for r in todo if (r.width, "") not in speeds})
    from_spec = [
        (w, f, o)
        for w, f, o in spec.recorded
        if w in missing and all(r.config.device == spec.recorded_device for r in todo if r.width == w)
    ]
    if from_spec and estimate in ("auto", "table"):
        for w, f, o in from_spec:
            speeds[(w, "")] = Throughput(f, o, "table")
        how.append(
            "the spec's [estimate.recorded] speeds ("
            + ", ".join(f"d{w} {f / 1e9:.1f}" for w, f, _ in from_spec)
            + f" GFLOP/s, overheads {', '.join(f'{o:.1f}' for _, _, o in from_spec)} s): "
            + spec.recorded_source
        )
        missing = [w for w in missing if w not in {w for w, _, _ in from_spec}]
    if missing and estimate == "table":
        raise ValueError(
            f"--estimate table: no recorded run of width(s) {', '.join(map(str, missing))} with this shape "
            "in "
            f"{out or '-'} or --timings; use --estimate auto to time them now"
        )
    if missing:
        how.append(_probe(todo, missing, speeds))
    return speeds, how


def _probe(todo: list[PlannedRun], missing: list[int], speeds: dict[tuple[int, str], Throughput]) -> str:
    """Probe the training FLOP/s of the ``missing`` widths now (into ``speeds``); the line saying how."""
    import os as _os

    probed = measure_flops_per_second([r for r in todo if r.width in missing])
    for w, (rate, _, n) in probed.items():
        speeds[(w, "")] = Throughput(rate, 2.0, "probe", n)
    load = _os.getloadavg()[0] if hasattr(_os, "getloadavg") else float("nan")
    steps = sorted({n for _, _, n in probed.values()})
    return (
        f"probed now, median of {steps[0]}{'' if len(steps) == 1 else f'-{steps[-1]}'} timed steps per "
        "width (r = 1 model, sweep batch and threads, widths interleaved), from the CPU time of the "
        "step's threads: "
        + ", ".join(f"d{w} {v[0] / 1e9:.1f}" for w, v in sorted(probed.items()))
        + " GFLOP/s; by the wall clock now "
        + ", ".join(f"d{w} {v[1] / 1e9:.1f}" for w, v in sorted(probed.items()))
        + f" GFLOP/s (load average {load:.1f} on {_os.cpu_count()} CPUs; a sweep started on a machine "
        "this busy takes longer by that ratio)"
    )


def _print_grid(
    runs: list[PlannedRun],
    done: dict[str, dict],
    speeds: dict[tuple[int, str], Throughput],
    out: str | None,
    file: Any,
) -> float:
    """Print one line per planned run and the totals; return the estimated seconds of the runs left."""

    def speed_of(run: PlannedRun) -> Throughput:
        return speeds.get((run.width, run.variant)) or speeds[(run.width, "")]

    head = (
        f"{'grid':<8} {'budget':>7} {'width':>5} {'r':>2} {'variant':<9} {'n_once':>9} {'n_rec':>9} "
        f"{'tokens':>10} {'F/token':>9} {'steps':>6} {'est.':>7}  run_id"
    )
    print(head, file=file)
    total = left = 0.0
    flops_left = 0.0
    short = 0
    for run in runs:
        cfg = run.config
        pc = param_counts(cfg.model)
        steps, tokens = tokens_for_budget(
            cfg.model, run.budget, cfg.batch_size * cfg.model.seq_len * cfg.grad_accum
        )
        if run.run_id in done:  # a finished run shows the wall time it took (its width may not be measured)
            sec = _recorded_seconds(done[run.run_id])
            status = " (done)"
        else:
            sec = estimate_seconds(run, speed_of(run))
            left += sec
            flops_left += flops_per_token(cfg.model) * tokens
            status = ""
        if steps < MIN_STEPS:
            status += f" (short: < {MIN_STEPS} steps)"
            short += 1
        total += sec
        print(
            f"{run.grid:<8} {format_budget(run.budget):>7} {run.width:>5} {run.r:>2} {run.variant:<9} "
            f"{pc.n_once:>9,} {pc.n_rec:>9,} {tokens:>10,} {flops_per_token(cfg.model):>9.3g} {steps:>6} "
            f"{_duration(sec):>7}  {run.run_id}{status}",
            file=file,
        )
    n_done = sum(r.run_id in done for r in runs)
    where = f"{n_done} already in {out}" if out else "no --out given"
    print(
        f"{len(runs)} runs ({where}), {len(runs) - n_done} to train: {flops_left:.3g} training FLOPs, "
        f"estimated {_duration(left)} (all {len(runs)}, finished ones as recorded: {_duration(total)}).",
        file=file,
    )
    if short:
        print(
            f"warning: {short} run(s) have fewer than {MIN_STEPS} optimiser steps; their losses say little "
            "(raise the budget or lower batch_size)",
            file=file,
        )
    return left


# ---- running -----------------------------------------------------------------------------------------------
def run_sweep(
    spec: SweepSpec,
    out: str,
    grids: list[str] | None = None,
    file: Any = None,
    run_ids: list[str] | None = None,
    runs: list[PlannedRun] | None = None,
    jobs: int = 1,
) -> int:
    """Train every run of the selected grids that is not yet in ``out``; returns the number of failed runs.
    ``runs``: these planned runs instead of the grids' (the learning-rate sweep's).

    Each run keeps its log and checkpoints beside the table (``runlog.RunPaths``) and resumes from its
    checkpoint when one exists (a sweep killed mid-run loses at most ``ckpt_every`` steps); its row lands
    through ``runlog.finish_run``. ``run_ids`` restricts the sweep to those runs (one task of a job array).

    ``jobs`` > 1 (``--parallel-runs``) trains that many runs at once in separate processes, each with
    ``cores // jobs`` torch threads (at least 1; the spec's ``threads`` is replaced, as an execution setting
    it is not part of a run's id). On CPU, small models use a second thread poorly: two one-thread runs side
    by side train about 1.7x the tokens per second of one two-thread run
    (``benchmarks/train_cpu_settings.py``). Rows still land one at a time, atomically, so a killed parallel
    sweep also loses only the runs in progress.
    """
    torch = import_optional("torch", "train", "phifit sweep (training)")

    file = file or sys.stderr
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if jobs < 1:
        raise ValueError(f"sweep: --parallel-runs {jobs}, expected an integer >= 1")
    if jobs > 1 and world > 1:
        raise ValueError(
            "sweep: --parallel-runs > 1 trains runs side by side on one machine; "
            "it does not combine with torchrun"
        )
    runs = plan(spec, grids, world_size=world) if runs is None else runs
    if run_ids is not None:
        unknown = sorted(set(run_ids) - {r.run_id for r in runs})
        if unknown:
            raise ValueError(
                f"--run-id {', '.join(unknown)}: not a run of {spec.path} (grids {grids or 'default'}, "
                f"world size {world})"
            )
        runs = [r for r in runs if r.run_id in set(run_ids)]
    if rank == 0:
        merge_rows(out)  # row files of runs finished elsewhere (cluster tasks) join the table first
    done = read_run_ids(out)  # read once, before anything runs, so that every rank agrees on the to-do list
    todo = [r for r in runs if r.run_id not in done]
    say = (lambda s: print(s, file=file, flush=True)) if rank == 0 else (lambda s: None)
    say(
        f"sweep {spec.name}: {len(runs)} runs, {len(runs) - len(todo)} already in {out}, {len(todo)} to train"
        + (f", {jobs} at a time" if jobs > 1 and todo else "")
    )
    if jobs > 1 and len(todo) > 1:
        failed = _train_side_by_side(todo, out, jobs, say)
    else:
        data_cache: dict[tuple[str, str, int], Any] = {}
        failed = 0
        for i, run in enumerate(todo, 1):
            failed += _train_planned(run, out, data_cache, say, f"[{i}/{len(todo)}]", rank, torch.__version__)
    say(f"sweep {spec.name}: finished; {len(todo) - failed} trained, {failed} failed")
    return failed


def _train_planned(
    run: PlannedRun, out: str, data_cache: dict, say: Any, label: str, rank: int, torch_version: str
) -> int:
    """Train one planned run and append its row (rank 0); 1 when it diverged (recorded, no row), else 0.
    Any other error is recorded in the run's state and raised."""
    from .data import load_token_data
    from .train import DivergedError, train

    cfg = run.config
    paths = run_paths(out, run.run_id)
    if rank == 0:
        mark_running(out, run.run_id)
    try:
        key = (cfg.corpus, cfg.tokenizer, cfg.bpe_vocab)
        if key not in data_cache:
            data_cache[key] = load_token_data(*key)
        say(f"{label} {run.run_id}")
        result = train(
            cfg, data=data_cache[key], log=say, log_path=paths.log, ckpt_path=paths.ckpt, resume=True
        )
    except DivergedError as err:  # a diverged run: report it, keep going, no row
        say(f"{label} {run.run_id} FAILED: {err}")
        if rank == 0:
            mark_failed(out, run.run_id, err)
        return 1
    except BaseException as err:  # a bug, a bad corpus, Ctrl-C: recorded, then raised as before
        if rank == 0:
            mark_failed(out, run.run_id, err)
        raise
    if rank == 0:
        row = make_row(cfg, result, run.run_id, time.strftime("%Y-%m-%dT%H:%M:%S%z"), torch_version)
        finish_run(out, row)
        paths.ckpt.unlink(missing_ok=True)
        clear_state(out, run.run_id)
        resumed = f" (resumed from step {result.resumed_from})" if result.resumed_from else ""
        say(f"{label} {run.run_id} loss {result.loss:.4f}{resumed} -> {out}")
    return 0


_WORKER_DATA: dict[tuple[str, str, int], Any] = {}  # token data of one worker process, reused across its runs


def _worker_run(run: PlannedRun, out: str, label: str) -> int:
    """One run in a worker process of ``_train_side_by_side`` (module level, so that it pickles)."""
    import torch

    def say(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    return _train_planned(run, out, _WORKER_DATA, say, label, 0, torch.__version__)


def _train_side_by_side(todo: list[PlannedRun], out: str, jobs: int, say: Any) -> int:
    """Train ``todo`` with ``jobs`` worker processes (spawned: torch state is not forked), each run with
    ``cores // jobs`` threads and no progress bar; returns the number of diverged runs."""
    import dataclasses
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    threads = max(1, (os.cpu_count() or 1) // jobs)
    say(f"sweep: {jobs} runs at a time, {threads} torch thread(s) each")
    failed = 0
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {}
        for i, run in enumerate(todo, 1):
            cfg = dataclasses.replace(run.config, threads=threads, progress=False)
            job = dataclasses.replace(run, config=cfg)
            futures[pool.submit(_worker_run, job, out, f"[{i}/{len(todo)}]")] = run
        try:
            for fut in as_completed(futures):
                failed += fut.result()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
    return failed
