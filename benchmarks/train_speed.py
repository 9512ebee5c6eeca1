"""Training throughput of phifit.trainers against a plain PyTorch loop over the same model.

Both sides train the same ``LoopedGPT`` (same configuration, batch and thread count) for the same number of
steps:

- plain loop: ``model(x, y)``, ``loss.backward()``, ``AdamW.step()``, ``zero_grad()`` on one pre-sampled
  batch;
- trainer: ``phifit.trainers.train.train`` with a fixed number of steps (batch sampling, learning-rate
  schedule, gradient clipping, progress bar included); its ``tokens_per_s`` times the training loop only (not
  data loading, model construction or the final evaluation).

The two alternate for ``--rounds`` rounds so that both see the same background load; the report gives the best
and the median round of each, and the ratio trainer / plain (target: >= 0.90). On a GPU it also reports model
FLOPs utilisation, MFU = F * tokens/s / peak bf16 FLOP/s, with F the training FLOPs per token of ``flops.py``.

    python benchmarks/train_speed.py                       # CPU, 2 threads, width 128, r = 4
    python benchmarks/train_speed.py --device cuda --width 768 --seq-len 1024 --batch-size 16 --compile
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
from phifit.trainers.config import make_train_config
from phifit.trainers.data import load_token_data
from phifit.trainers.flops import flops_per_token
from phifit.trainers.model import LoopedGPT
from phifit.trainers.train import train

# Dense bf16 peak FLOP/s of common accelerators (vendor data sheets, SXM parts, no sparsity).
PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10G": 125e12, "4090": 165e12}


def plain_loop(cfg, data, steps: int, device: str) -> float:
    """Tokens/s of the minimal loop: one fixed batch, AdamW, no schedule, no clipping, no logging."""
    torch.manual_seed(cfg.seed)
    model = LoopedGPT(cfg.model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.8, 0.95), eps=1e-10)
    T, B = cfg.model.seq_len, cfg.batch_size
    start = torch.randint(0, len(data.train) - T - 1, (B,), generator=torch.Generator().manual_seed(0))
    rows = data.train[start[:, None] + torch.arange(T + 1)].to(device)
    x, y = rows[:, :-1], rows[:, 1:]
    amp = (
        torch.autocast("cuda", dtype=torch.bfloat16)
        if device == "cuda"
        else torch.autocast("cpu", enabled=False)
    )
    step_model = torch.compile(model) if cfg.compile else model
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        with amp:
            _, loss = step_model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return steps * B * T / (time.perf_counter() - t0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--r", type=int, default=4)
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--variant", default="baseline")
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=20, help="optimiser steps per round and side")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    cfg = make_train_config(
        depth=args.depth,
        r=args.r,
        width=args.width,
        variant=args.variant,
        head_dim=args.head_dim,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        steps=args.steps,
        val_tokens=args.seq_len * args.batch_size,
        threads=args.threads,
        device=args.device,
        compile=args.compile,
        progress=sys.stderr.isatty(),
    )
    data = load_token_data(cfg.corpus)
    fpt = flops_per_token(cfg.model)
    plain, trainer = [], []
    plain_loop(cfg, data, 2, args.device)  # warm-up (allocator, kernels, compilation)
    for i in range(args.rounds):
        plain.append(plain_loop(cfg, data, args.steps, args.device))
        trainer.append(train(cfg, data=data, log=lambda s: None).tokens_per_s)
        print(
            f"round {i + 1}: plain {plain[-1]:,.0f} tok/s, trainer {trainer[-1]:,.0f} tok/s "
            f"(ratio {trainer[-1] / plain[-1]:.3f}; load {os.getloadavg()[0]:.1f})",
            flush=True,
        )

    result = {
        "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(),
        "threads": args.threads,
        "torch": torch.__version__,
        "config": {
            "width": args.width,
            "r": args.r,
            "depth": args.depth,
            "variant": args.variant,
            "seq_len": args.seq_len,
            "batch_size": args.batch_size,
            "steps": args.steps,
            "compile": args.compile,
        },
        "flops_per_token": fpt,
        "plain_tokens_per_s": {"best": max(plain), "median": statistics.median(plain), "rounds": plain},
        "trainer_tokens_per_s": {
            "best": max(trainer),
            "median": statistics.median(trainer),
            "rounds": trainer,
        },
        "ratio_best": max(trainer) / max(plain),
        "ratio_median_of_rounds": statistics.median(t / q for t, q in zip(trainer, plain)),
    }
    print(
        f"\nLoopedGPT d={args.width} r={args.r} depth={args.depth} ({args.variant}), "
        f"batch {args.batch_size} x {args.seq_len}, {args.threads} threads, {result['device']}, "
        f"F = {fpt:.4g} FLOPs/token"
    )
    print(f"plain loop : best {max(plain):>10,.0f} tok/s   median {statistics.median(plain):>10,.0f} tok/s")
    print(
        f"trainer    : best {max(trainer):>10,.0f} tok/s   median {statistics.median(trainer):>10,.0f} tok/s"
    )
    print(
        f"ratio      : best/best {result['ratio_best']:.3f}   median of rounds "
        f"{result['ratio_median_of_rounds']:.3f}   (target >= 0.90)"
    )
    if args.device == "cuda":
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_BF16.items() if k in name), None)
        if peak:
            result["mfu_trainer"] = fpt * max(trainer) / peak
            print(
                f"MFU        : {100 * result['mfu_trainer']:.1f} % of {peak / 1e12:.0f} TFLOP/s bf16 ({name})"
            )
        else:
            print(f"MFU        : unknown peak for {name}")
    else:
        print(f"achieved   : {fpt * max(trainer) / 1e9:.1f} GFLOP/s (trainer, best round)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
