"""The reference study, in one place: its published numbers, its grid and its architecture.

Schwethelm, Rueckert, Kaissis (2026), "How Much Is One Recurrence Worth? Iso-Depth Scaling
Laws for Looped Language Models", arXiv 2604.21106 (v3).  Every number phifit quotes from
the study, and the arithmetic of its architecture, comes from this module.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: The study's joint fit (Table 2; A and B from the project page).
REFERENCE_PARAMS: Mapping[str, float] = MappingProxyType(
    {"E": 1.56773, "A": 28.027, "alpha": 0.19924, "B": 915.82, "beta": 0.36863, "phi": 0.459}
)
#: phi of the joint fit and its 95% block-bootstrap percentile interval (200 resamples of 24 cells).
STUDY_PHI = 0.459
STUDY_PHI_CI = (0.41, 0.53)
#: R^2 on raw nats of the free fit and of the restricted laws (Table 2).
STUDY_R2: Mapping[str, float] = MappingProxyType({"free": 0.9972, "phi=0": 0.9858, "phi=1": 0.9552})
#: Case studies on the four lower budgets (Table 3): the baseline refit there, and the two recipes.
STUDY_CASE_PHI: Mapping[str, float] = MappingProxyType({"baseline": 0.453, "tbptt": 0.380, "hc": 0.646})
#: Compute-optimal frontier gap to r = 1 in nats, the range over the six budgets (section 4.2).
STUDY_GAP_RANGES: Mapping[int, tuple[float, float]] = MappingProxyType(
    {2: (0.03, 0.06), 4: (0.05, 0.08), 8: (0.09, 0.12)}
)
#: Number of runs of the main grid.
STUDY_N_RUNS = 116
#: Named designs that `phifit simulate --design` knows ("paper": the study's 116-run grid).
DESIGNS = ("paper",)

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
    import pandas as pd

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
