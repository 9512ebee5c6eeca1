"""Run tables drawn from a known law: the reference study's design, or your own.

The paper design (paper-notes section 5.1-5.3) is the study's iso-FLOP grid:
6 budgets x 4-6 widths per budget x r in {1, 2, 4, 8}, 116 runs, 20 effective
layers with prelude/coda 2/2 for looped models.  At width s the model dimension is
d = 64 s, a block has n_b = 12 d^2 + 2 d parameters (with its two RMSNorm gains),
the injection layer 2 d^2, the three model-level norms 3 d.

- r = 1: N_once = 3 d, N_rec = 20 n_b (r = 1, so the split does not matter);
- r > 1: N_once = 4 n_b + 3 d, N_rec = (16 / r) n_b + 2 d^2.

Training FLOPs per token (paper Eq. 6, full BPTT, T = 2048, V_pad = 32,064):

    F = 6 (P_prelude + P_coda + V_pad d) + 6 r (P_recur + P_inject)
        + 12 d T (l_prelude + l_coda) + 12 r l_recur d T

and D = round(C / (F * 262,144)) * 262,144 tokens, as the runs trained.
Noise is multiplicative: log L = log L_true + N(0, noise^2).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .law import REFERENCE_PARAMS, JointLaw

#: FLOP budget -> widths s trained at that budget (the same for every r).
PAPER_GRID: Mapping[float, tuple[int, ...]] = {
    4.64e17: (6, 8, 10, 12),
    1.00e18: (6, 8, 10, 12, 14),
    2.15e18: (8, 10, 12, 14, 16),
    4.64e18: (10, 12, 14, 16, 18, 20),
    1.00e19: (12, 16, 18, 20, 24),
    2.15e19: (18, 24, 28, 34),
}
PAPER_RECURRENCES = (1, 2, 4, 8)
PAPER_BATCH_TOKENS = 262_144
PAPER_SEQ_LEN = 2048
PAPER_VOCAB_PADDED = 32_064
DESIGNS = ("paper",)


def paper_architecture(s: int, r: int) -> dict[str, float]:
    """Parameter split and training FLOPs per token of the study's model at width s and r."""
    d = 64 * s
    n_b = 12 * d * d + 2 * d
    norms = 3 * d
    if r == 1:
        layers = {"prelude": 0, "recur": 20, "coda": 0}
        p_inject = 0
    else:
        if 16 % r:
            raise ValueError(f"r = {r} does not divide the 16 looped layers of the paper design")
        layers = {"prelude": 2, "recur": 16 // r, "coda": 2}
        p_inject = 2 * d * d
    p_once_blocks = (layers["prelude"] + layers["coda"]) * n_b
    p_recur = layers["recur"] * n_b
    t = PAPER_SEQ_LEN
    flops = (
        6 * (p_once_blocks + PAPER_VOCAB_PADDED * d)
        + 6 * r * (p_recur + p_inject)
        + 12 * d * t * (layers["prelude"] + layers["coda"])
        + 12 * r * layers["recur"] * d * t
    )
    return {"d": d, "n_once": p_once_blocks + norms, "n_rec": p_recur + p_inject, "flops_per_token": flops}


def paper_design() -> pd.DataFrame:
    """The study's 116-run grid: run_id, budget, size, r, n_once, n_rec, tokens, flops."""
    rows = []
    for budget, widths in PAPER_GRID.items():
        for r in PAPER_RECURRENCES:
            for s in widths:
                arch = paper_architecture(s, r)
                iters = round(budget / (arch["flops_per_token"] * PAPER_BATCH_TOKENS))
                tokens = iters * PAPER_BATCH_TOKENS
                rows.append(
                    {
                        "run_id": f"C{budget:.2e}_r{r}_s{s}",
                        "budget": budget,
                        "size": s,
                        "r": r,
                        "n_once": arch["n_once"],
                        "n_rec": arch["n_rec"],
                        "tokens": tokens,
                        "flops": arch["flops_per_token"] * tokens,
                    }
                )
    return pd.DataFrame(rows)


def simulate(
    design: pd.DataFrame | str = "paper",
    *,
    params: Mapping[str, float] | None = None,
    noise: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """A run table with losses from a known joint law.

    Parameters
    ----------
    design
        ``"paper"`` or a frame with columns r, n_once, n_rec, tokens (others kept).
    params
        {E, A, alpha, B, beta, phi}; missing entries default to the study's joint fit.
    noise
        Standard deviation of multiplicative log-normal noise on the loss.
    seed
        Seed of the noise.
    """
    if isinstance(design, str):
        if design not in DESIGNS:
            raise ValueError(
                f"unknown design {design!r}; expected one of {', '.join(DESIGNS)} "
                f"or a CSV of r, n_once, n_rec, tokens"
            )
        frame = paper_design()
    else:
        frame = design.copy()
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    law = JointLaw.from_params({**REFERENCE_PARAMS, **(params or {})})
    clean = law.loss(frame["r"], frame["n_once"], frame["n_rec"], frame["tokens"])
    rng = np.random.default_rng(seed)
    frame["loss"] = clean * np.exp(noise * rng.standard_normal(len(frame)))
    return frame
