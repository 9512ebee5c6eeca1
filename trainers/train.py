"""Train one looped GPT on a FLOP budget and measure its validation loss. One readable loop.

    F      = training FLOPs per token (flops.py, the study's estimate_flops)
    steps  = round(budget / (F * tokens_per_step)),  tokens D = steps * tokens_per_step
    lr(t)  = lr * (1 - (1 - final_lr_frac) * t / steps)      # linear decay, no warmup (the study: 1.0 -> 0.1)
    loss   = mean cross-entropy in nats per token on the fixed held-out set (data.py), measured at the end
    bits_per_byte = loss / (ln 2 * bytes_per_token)   # bytes_per_token of the held-out targets; 1 for bytes

What a long run keeps (nanoGPT's train.py habits): an evaluation every ``eval_every`` steps written to the
run's log (``curves.py``: train and validation loss, tokens and FLOPs so far), a checkpoint every
``ckpt_every`` steps (model, optimiser states, batch-sampler RNG state, step, running loss), from which
``resume=True`` continues bit for bit on the same machine, and a warning when the run has fewer than
``MIN_STEPS`` optimiser steps.

CPU by default. On CUDA: bf16 autocast (logits and loss in fp32), optional ``torch.compile``. Under
``torchrun`` (the environment sets WORLD_SIZE) the same script runs data parallel with PyTorch DDP: NCCL on
CUDA, gloo on CPU; each rank takes its slice of every global batch, gradients are averaged by DDP, rank 0
reports.
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .config import MIN_STEPS, TrainConfig
from .curves import EvalLog
from .data import BatchSampler, TokenData, bits_per_byte, load_token_data
from .flops import flops_per_token, tokens_for_budget
from .model import LoopedGPT
from .optim import optimizers_for


class DivergedError(RuntimeError):
    """The run ended with a non-finite loss: a result, not a bug; sweeps report it and go on."""


@dataclass
class RunResult:
    """What a finished run measured. ``loss`` is the validation loss in nats per token; ``bits_per_byte`` the
    same loss as bits per byte of the held-out text, ``loss / (ln 2 * bytes_per_token)`` with
    ``bytes_per_token`` the mean UTF-8 bytes of the scored validation tokens (1 for the byte tokenizer, so
    ``loss / ln 2``)."""

    loss: float
    bits_per_byte: float
    train_loss: float  # running mean (EMA 0.9) of the training loss at the end, rank 0's batches
    tokens: int
    steps: int
    tokens_per_step: int
    flops_per_token: float
    flops: float
    n_once: int
    n_rec: int
    n_params: int
    vocab_size: int
    data_fingerprint: str
    world_size: int
    device: str
    train_s: float  # wall time of the training loop only
    wall_s: float  # wall time of the whole run (data, model, training, evaluation)
    tokens_per_s: float  # tokens / train_s
    notes: tuple[str, ...] = ()  # warnings about the run (a short run), also in its row and log
    resumed_from: int = 0  # the checkpoint step it resumed from (0: trained in one go)


# ---- helpers -----------------------------------------------------------------------------------------------
def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but torch.cuda.is_available() is False")
    return device


def setup_distributed(device: str) -> tuple[int, int, torch.device, bool]:
    """(rank, world_size, device, created_group); data parallel iff torchrun set WORLD_SIZE."""
    if "WORLD_SIZE" not in os.environ:
        return 0, 1, torch.device(device), False
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("nccl" if device == "cuda" else "gloo")
    return rank, world, dev, created


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    autocast: Any = None,
    rank: int = 0,
    world_size: int = 1,
) -> float:
    """Mean cross-entropy (nats per token) over the fixed held-out batches (split over ranks, all-reduced)."""
    was_training = model.training
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)  # (sum of losses, number of tokens)
    for x, y in batches[rank::world_size]:
        x, y = x.to(device), y.to(device)
        with autocast or nullcontext():
            logits, _ = model(x)
        total[0] += F.cross_entropy(
            logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum"
        ).double()
        total[1] += y.numel()
    if world_size > 1:
        dist.all_reduce(total)
    model.train(was_training)
    return (total[0] / total[1]).item()


class Progress:
    """A one-line progress bar on stderr: step, percent, loss, tokens/s, ETA. Throttled; rank 0 only."""

    def __init__(self, steps: int, tokens_per_step: int, enabled: bool, label: str = "") -> None:
        self.steps, self.tokens_per_step, self.enabled, self.label = steps, tokens_per_step, enabled, label
        self.tty = sys.stderr.isatty()
        self.t0 = self.last = time.perf_counter()
        self.next_pct = 10

    def update(self, step: int, loss: Callable[[], float]) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        pct = 100 * step // self.steps
        if (
            step < self.steps
            and not (self.tty and now - self.last > 0.5)
            and not (not self.tty and pct >= self.next_pct)
        ):
            return
        self.last, self.next_pct = now, pct // 10 * 10 + 10
        rate = step * self.tokens_per_step / max(now - self.t0, 1e-9)
        eta = (self.steps - step) * self.tokens_per_step / max(rate, 1e-9)
        bar = "#" * (pct // 5) + "." * (20 - pct // 5)
        line = (
            f"{self.label}[{bar}] {step}/{self.steps} loss {loss():.4f} | {rate:,.0f} tok/s | "
            f"eta {eta // 60:.0f}m{eta % 60:02.0f}s"
        )
        print(
            ("\r" + line) if self.tty else line,
            end="\n" if not self.tty or step == self.steps else "",
            file=sys.stderr,
            flush=True,
        )


# ---- checkpoints -------------------------------------------------------------------------------------------
CHECKPOINT_VERSION = 1


def checkpoint_state(
    identity: dict[str, Any],
    step: int,
    model: torch.nn.Module,
    optimizers: list[torch.optim.Optimizer],
    sampler: BatchSampler,
    ema: torch.Tensor,
    *,
    train_s: float,
    wall_s: float,
) -> dict[str, Any]:
    """What a checkpoint holds, in plain types only (all ``torch.load(..., weights_only=True)`` reads):

    ``version`` and ``step`` (int), ``identity`` (the run's configuration through JSON: str, int, float,
    bool, None, lists, dicts), ``model`` (state dict of tensors), ``optimizers`` (their state dicts: tensors,
    numbers, bools, None, tuples such as AdamW's betas), ``sampler`` and ``torch_rng`` (the batch sampler's
    and torch's CPU generator states, uint8 tensors), ``ema`` (a 0-d tensor), ``train_s`` and ``wall_s``
    (float). The data order depends on these two generators only (no numpy or ``random`` state is used).
    """
    return {
        "version": CHECKPOINT_VERSION,
        "identity": json_safe(identity),
        "step": step,
        "model": model.state_dict(),
        "optimizers": [opt.state_dict() for opt in optimizers],
        "sampler": sampler.gen.get_state(),
        "torch_rng": torch.get_rng_state(),
        "ema": ema.detach().cpu(),
        "train_s": train_s,
        "wall_s": wall_s,
    }


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """``torch.save`` to a temporary file beside ``path``, fsync, ``os.replace``: a kill never leaves half a
    checkpoint, only the previous one."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load_error_detail(err: BaseException) -> str:
    """The informative line of a ``torch.load`` error: torch's weights-only boilerplate (the advice to load
    with ``weights_only=False``, the pointer to its documentation) left out."""
    boilerplate = ("weights only load failed", "please file an issue", "check the documentation")
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    kept = [ln for ln in lines if not ln.lower().startswith(boilerplate)]
    return kept[0] if kept else (lines[0] if lines else type(err).__name__)


def _refused_global(err: BaseException) -> str | None:
    """The line of a ``torch.load(..., weights_only=True)`` error that names the pickled global (class or
    function) it refused, or None when the load failed otherwise (a truncated or non-torch file)."""
    if not (isinstance(err, pickle.UnpicklingError) and "weights only load failed" in str(err).lower()):
        return None
    return next((ln.strip() for ln in str(err).splitlines() if "GLOBAL" in ln), None)


def read_checkpoint_file(path: str | os.PathLike) -> Any:
    """The object a checkpoint file holds, read with ``torch.load(..., weights_only=True)``.

    A phifit checkpoint holds only tensors, numbers, strings, None and dicts / lists / tuples of them (see
    ``checkpoint_state``), so nothing is allow-listed. Any other pickled global (a class, a function such as
    ``os.system``) is refused by torch's restricted unpickler as soon as the file names it, before anything
    from the file is constructed or called: ``ValueError`` naming the file and the global.
    """
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        refused = _refused_global(err)
        if refused is not None:
            raise ValueError(
                f"{path}: refused: the file pickles a type a phifit checkpoint never holds ({refused}); "
                "nothing from it was run. Delete it (phifit train: or pass --restart)"
            ) from None
        raise ValueError(
            f"{path}: not a readable phifit checkpoint ({type(err).__name__}: {_load_error_detail(err)})"
        ) from None


def load_checkpoint(path: str | os.PathLike, identity: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint of the run with this ``identity``; ``ValueError`` naming the file for anything else
    (a foreign pickled object is refused unread: ``read_checkpoint_file``)."""
    state = read_checkpoint_file(path)
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: not a phifit checkpoint (version {CHECKPOINT_VERSION})")
    if state.get("identity") != json_safe(identity):
        raise ValueError(
            f"{path}: a checkpoint of another configuration; delete it or train with its settings"
        )
    return state


def json_safe(d: Any) -> Any:
    """Identity dicts compared through JSON types (tuples -> lists), as they are stored."""
    import json

    return json.loads(json.dumps(d, sort_keys=True, default=str))


class TrainingStopped(RuntimeError):
    """Raised by ``train(..., stop_after=n)`` after step n: a stand-in for a kill (tests, time slots)."""


# ---- the run -----------------------------------------------------------------------------------------------
def train(
    cfg: TrainConfig,
    data: TokenData | None = None,
    log: Callable[[str], None] | None = None,
    *,
    log_path: str | os.PathLike | None = None,
    ckpt_path: str | os.PathLike | None = None,
    resume: bool = False,
    stop_after: int | None = None,
) -> RunResult:
    """Train ``cfg`` and return its ``RunResult`` (on every rank; only rank 0 prints and writes files).

    ``log_path``: the run's evaluation log (``curves.py``), one line every ``cfg.eval_every`` steps.
    ``ckpt_path``: a checkpoint every ``cfg.ckpt_every`` steps (model, optimiser states, batch-sampler RNG,
    step, running loss, elapsed times). With ``resume=True`` and an existing checkpoint the run continues from
    it and ends bit for bit where an uninterrupted run ends (same machine, same threads). ``stop_after=n``
    raises ``TrainingStopped`` after step n, as if the run were killed there (checkpoints due by then are
    written first).

    One function, read top to bottom in the order a run happens (set-up, resume, the step loop with its
    evaluations and checkpoints, the final evaluation and the row), as nanoGPT's training loop is; what it
    delegates (model, optimisers, batches, checkpoint files, the row) lives in its own module.
    """
    t_start = time.perf_counter()
    device_type = resolve_device(cfg.device)
    rank, world, device, created_group = setup_distributed(device_type)
    say = (log or (lambda s: print(s, file=sys.stderr, flush=True))) if rank == 0 else (lambda s: None)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        # 1) data and model ----------------------------------------------------------------------------------
        if data is None:
            data = load_token_data(cfg.corpus, cfg.tokenizer, cfg.bpe_vocab)
        mcfg = (
            cfg.model
            if cfg.model.vocab_size == data.vocab_size
            else cfg.model.with_(vocab_size=data.vocab_size)
        )
        torch.manual_seed(cfg.seed)
        raw = LoopedGPT(mcfg).to(device)
        counts = raw.param_split()
        fpt = flops_per_token(mcfg)
        tokens_per_step = cfg.batch_size * mcfg.seq_len * cfg.grad_accum * world
        if cfg.budget is not None:
            steps, tokens = tokens_for_budget(mcfg, cfg.budget, tokens_per_step)
        else:
            steps, tokens = cfg.steps, cfg.steps * tokens_per_step
        eval_every, ckpt_every = cfg.intervals(steps)
        optimizers = optimizers_for(raw, cfg, tokens, tokens_per_step)
        sampler = BatchSampler(data.train, mcfg.seq_len, cfg.batch_size, cfg.seed, rank, world, device)
        ema = torch.zeros((), device=device)
        start, train_s0, wall_s0 = 0, 0.0, 0.0
        identity = cfg.identity(world)
        if resume and ckpt_path is not None and os.path.exists(ckpt_path):
            state = load_checkpoint(ckpt_path, identity)
            raw.load_state_dict(state["model"])
            for opt, sd in zip(optimizers, state["optimizers"], strict=True):
                opt.load_state_dict(sd)
            sampler.gen.set_state(state["sampler"])
            torch.set_rng_state(state["torch_rng"])
            ema = state["ema"].to(device)
            start, train_s0, wall_s0 = state["step"], state["train_s"], state["wall_s"]
        model: torch.nn.Module = torch.compile(raw) if cfg.compile else raw
        eval_model = model  # evaluation runs outside DDP (no gradients to synchronise)
        if world > 1 or created_group or dist.is_initialized():
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None
            )
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
        val_batches = data.val_batches(mcfg.seq_len, cfg.val_tokens, cfg.batch_size)
        eval_batches = data.val_batches(mcfg.seq_len, min(cfg.eval_tokens, cfg.val_tokens), cfg.batch_size)
        evlog = EvalLog(log_path if rank == 0 else None, resume_step=start if start else None)
        say(
            f"run: r={mcfg.r} d={mcfg.d_model} depth={mcfg.depth} ({mcfg.n_prelude}/{mcfg.n_recur}x{mcfg.r}/"
            f"{mcfg.n_coda}) variant={mcfg.variant} k={mcfg.k} | n_once={counts.n_once:,} "
            f"n_rec={counts.n_rec:,} total={counts.total:,} | F={fpt:.4g} FLOPs/token | "
            f"{steps} steps x {tokens_per_step:,} tokens = "
            f"{tokens:,} tokens ({fpt * tokens:.3g} FLOPs) | {device} x{world}"
        )
        notes: list[str] = []
        if steps < MIN_STEPS:
            notes.append(
                f"short run: only {steps} optimiser step{'s' * (steps != 1)} (< {MIN_STEPS}); its loss says "
                "little about the configuration (raise the budget or lower batch_size)"
            )
            if rank == 0:
                print(f"warning: {notes[-1]}", file=sys.stderr, flush=True)
        if start:
            say(f"resumed from {ckpt_path} at step {start}/{steps}")
            evlog.write(
                step=start, tokens=start * tokens_per_step, note=f"resumed from checkpoint at step {start}"
            )

        def log_eval(step: int, final_loss: float | None = None) -> None:
            val = (
                final_loss
                if final_loss is not None
                else evaluate(eval_model, eval_batches, device, autocast, rank, world)
            )
            evlog.write(
                step=step,
                tokens=step * tokens_per_step,
                flops=fpt * step * tokens_per_step,
                lr=optimizers[-1].param_groups[-1]["lr"] if step else None,
                train_loss=ema.item() if step else None,
                val_loss=val,
                eval_tokens=(
                    cfg.val_tokens if final_loss is not None else min(cfg.eval_tokens, cfg.val_tokens)
                ),
                elapsed_s=round(wall_s0 + time.perf_counter() - t_start, 3),
                note="; ".join(notes) if step == 0 or final_loss is not None else None,
            )

        # 2) the loop ----------------------------------------------------------------------------------------
        progress = Progress(steps, tokens_per_step, cfg.progress and rank == 0)
        model.train()
        if start == 0 and eval_every:
            log_eval(0)
        t0 = time.perf_counter()
        eval_s = 0.0  # time spent in intermediate evaluations and checkpoints, not counted as training
        for step in range(start, steps):
            lr_mult = 1.0 - (1.0 - cfg.final_lr_frac) * step / steps  # linear decay, no warmup
            for opt in optimizers:
                for group in opt.param_groups:
                    group["lr"] = group["base_lr"] * lr_mult
            for micro in range(cfg.grad_accum):
                x, y = sampler.next()
                last = micro == cfg.grad_accum - 1
                sync = (
                    model.no_sync()
                    if (isinstance(model, torch.nn.parallel.DistributedDataParallel) and not last)
                    else nullcontext()
                )
                with sync:
                    with autocast:
                        _, loss = model(x, y)
                    (loss / cfg.grad_accum).backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(raw.parameters(), cfg.grad_clip)
            for opt in optimizers:
                opt.step()
            for opt in optimizers:
                opt.zero_grad(set_to_none=True)
            ema = loss.detach() if step == 0 else 0.9 * ema + 0.1 * loss.detach()  # no host sync here
            progress.update(step + 1, ema.item)
            done = step + 1
            if done < steps and (
                (eval_every and done % eval_every == 0) or (ckpt_every and done % ckpt_every == 0)
            ):
                t_aside = time.perf_counter()
                if eval_every and done % eval_every == 0:
                    log_eval(done)
                if ckpt_path is not None and ckpt_every and done % ckpt_every == 0 and rank == 0:
                    save_checkpoint(
                        ckpt_path,
                        checkpoint_state(
                            identity,
                            done,
                            raw,
                            optimizers,
                            sampler,
                            ema,
                            train_s=train_s0 + time.perf_counter() - t0 - eval_s,
                            wall_s=wall_s0 + time.perf_counter() - t_start,
                        ),
                    )
                eval_s += time.perf_counter() - t_aside
            if stop_after is not None and done >= stop_after and done < steps:
                raise TrainingStopped(f"stopped after step {done} of {steps} (stop_after={stop_after})")
        if device.type == "cuda":
            torch.cuda.synchronize()
        train_s = train_s0 + time.perf_counter() - t0 - eval_s

        # 3) evaluation --------------------------------------------------------------------------------------
        val_loss = evaluate(eval_model, val_batches, device, autocast, rank, world)
        train_loss = ema.item()
        log_eval(steps, final_loss=val_loss)
        if not (math.isfinite(val_loss) and math.isfinite(train_loss)):
            raise DivergedError(
                f"training diverged: validation loss {val_loss}, train loss {train_loss} "
                "(lower the learning rate)"
            )
        wall_s = wall_s0 + time.perf_counter() - t_start
        bpb = bits_per_byte(val_loss, data.bytes_per_token(val_batches))
        say(
            f"done: val loss {val_loss:.4f} nats/token ({bpb:.4f} bits/byte) | train loss {train_loss:.4f} | "
            f"{tokens / train_s:,.0f} tok/s | {wall_s:.1f} s"
        )
        return RunResult(
            loss=val_loss,
            bits_per_byte=bpb,
            train_loss=train_loss,
            tokens=tokens,
            steps=steps,
            tokens_per_step=tokens_per_step,
            flops_per_token=fpt,
            flops=fpt * tokens,
            n_once=counts.n_once,
            n_rec=counts.n_rec,
            n_params=counts.total,
            vocab_size=mcfg.vocab_size,
            data_fingerprint=data.fingerprint,
            world_size=world,
            device=str(device.type),
            train_s=train_s,
            wall_s=wall_s,
            tokens_per_s=tokens / train_s,
            notes=tuple(notes),
            resumed_from=start,
        )
    finally:
        if created_group and dist.is_initialized():
            # Gloo aborts the process ("terminate called without an active exception") when a rank tears
            # its group down while DDP's reducer still holds work on it or a peer is mid-collective: drop
            # the wrapped model first, and on a clean finish wait for every rank before destroying the group.
            model = eval_model = None  # noqa: F841
            gc.collect()
            if sys.exc_info()[0] is None:
                dist.barrier()
            dist.destroy_process_group()
