"""The reference study, in one place: its published numbers, its grid and its architecture.

Schwethelm, Rueckert, Kaissis (2026), "How Much Is One Recurrence Worth? Iso-Depth Scaling
Laws for Looped Language Models", arXiv 2604.21106 (v3).  Every number phifit quotes from
the study, and the arithmetic of its architecture, comes from this module: the parameter
split and the training FLOPs per token of a looped GPT (prelude -> shared stack x r -> coda)
are defined here once, for the study's grid (:func:`paper_architecture`) and for the
trainer's configurations alike (:func:`phifit.spec.run_config.param_counts` and
:func:`~phifit.spec.run_config.flops_per_token` only read a configuration's fields into
:func:`looped_param_counts` and :func:`looped_flops_per_token`).

Parameters (d = d_model, V = padded vocabulary; paper section 3.2, the released
``GPT.num_scaling_params``):

    block    n_b = 12 d^2 + 2 d          (attention 4 d^2, MLP 8 d^2, two RMSNorm gains)
    inject   n_i = 2 d^2                 (linear injection W in R^{d x 2d});  0 for additive / none
             n_i = r (K^2 + 2K)          (hyperconnections: per iteration alpha_i in R^K,
                                          M_i in R^{KxK}, beta_i in R^K)
    norms    3 d                         (model-level RMSNorms: after the embedding, after
                                          every iteration, final)
    n_once = (n_prelude + n_coda) n_b + 3 d        # the three model-level norms count as "once"
    n_rec  = n_recur n_b + n_i                     # injection / lane parameters belong to the loop
    N = n_once + n_rec  (non-embedding);  total = N + 2 V d  (untied embedding and head)

Training FLOPs per token (forward + backward; PaLM App. B accounting, as the study's
``estimate_flops``, paper Eq. 1 and Eq. 6):

    F = 6 (P_prelude + P_coda + P_head) + (2 (r - k) + 6 k) (P_recur + P_inject)
      + 12 d T (l_prelude + l_coda) + (4 (r - k) + 12 k) l_recur d T

with k = bptt_k (= r under full BPTT), T = seq_len, P_head = V d.  Forward-only (truncated)
iterations cost 2 per parameter and 4 d T of attention per layer; iterations with gradients
6 and 12 d T.  The embedding lookup is not counted, the unembedding is; attention is charged
in full (no causal halving), softmax and normalisations not at all, while the blocks' RMSNorm
gains are charged as parameters (6 x 2 d per block and token) though they do no matmul.  For
hyperconnections P_inject is the "equivalent" (K^2 + 2K) d (study's code, paper App. G.1).

The paper design (paper-notes section 5.1-5.3) is the study's iso-FLOP grid:
6 budgets x 4-6 widths per budget x r in {1, 2, 4, 8}, 116 runs, 20 effective
layers with prelude/coda 2/2 for looped models, width s -> d = 64 s, full BPTT,
linear injection, T = 2048, V_pad = 32,064:

- r = 1: N_once = 3 d, N_rec = 20 n_b (r = 1, so the split does not matter);
- r > 1: N_once = 4 n_b + 3 d, N_rec = (16 / r) n_b + 2 d^2;

and D = round(C / (F * 262,144)) * 262,144 tokens, as the runs trained.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

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


# -- the architecture's arithmetic: one definition for the study's grid and the trainer ---------
#: Counts below are Python ints for integer shapes (exact) and NumPy arrays when ``d`` is one
#: (the planner evaluates the study's family at real widths); no NumPy import is needed here.
Count = Any


def block_params(d: Count) -> Count:
    """One pre-norm block: q, k, v, o (4 d^2) + MLP d -> 4d -> d (8 d^2) + two RMSNorm gains (2 d)."""
    return 12 * d * d + 2 * d


def inject_params(d: Count, injection: str, *, r: int = 1, lanes: int = 2) -> Count:
    """Real injection parameters n_i: 2 d^2 (``linear``), r (K^2 + 2K) (``hc``), 0 otherwise."""
    if injection == "linear":
        return 2 * d * d
    if injection == "hc":
        return r * (lanes**2 + 2 * lanes)
    return 0


def inject_flop_params(d: Count, injection: str, *, lanes: int = 2) -> Count:
    """Parameters P_inject that the FLOP count charges per iteration: the real 2 d^2 of a linear
    injection, the "equivalent" (K^2 + 2K) d of hyperconnections (paper App. G.1), else 0."""
    if injection == "hc":
        return (lanes**2 + 2 * lanes) * d
    return inject_params(d, injection)


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts by part. ``n_once + n_rec + wte + lm_head == total`` by construction."""

    prelude: Count
    recur: Count
    coda: Count
    inject: Count
    norms: Count  # the three model-level RMSNorm gains
    wte: Count
    lm_head: Count

    @property
    def n_once(self) -> Count:
        """Parameters applied once per token: prelude + coda + model-level norms."""
        return self.prelude + self.coda + self.norms

    @property
    def n_rec(self) -> Count:
        """Parameters of the loop, applied r times: shared stack + injection (or lane) parameters."""
        return self.recur + self.inject

    @property
    def non_embedding(self) -> Count:
        """N = n_once + n_rec (embedding and head excluded, as in the study)."""
        return self.n_once + self.n_rec

    @property
    def total(self) -> Count:
        return self.n_once + self.n_rec + self.wte + self.lm_head


def looped_param_counts(
    *,
    d: Count,
    vocab_padded: int,
    n_prelude: int,
    n_recur: int,
    n_coda: int,
    injection: str,
    r: int,
    lanes: int = 2,
    recur_norm: bool = True,
) -> ParamCounts:
    """Parameter split of a looped GPT (module docstring): blocks by part, n_i, 3 d norms (2 d without the
    shared ``norm_recur``), V d twice."""
    nb = block_params(d)
    return ParamCounts(
        prelude=n_prelude * nb,
        recur=n_recur * nb,
        coda=n_coda * nb,
        inject=inject_params(d, injection, r=r, lanes=lanes),
        norms=(3 if recur_norm else 2) * d,
        wte=vocab_padded * d,
        lm_head=vocab_padded * d,
    )


def looped_flops_per_token(
    *,
    d: Count,
    seq_len: int,
    vocab_padded: int,
    n_prelude: int,
    n_recur: int,
    n_coda: int,
    r: int,
    k: int,
    injection: str,
    lanes: int = 2,
) -> Count:
    """Training FLOPs per token F of a looped GPT (module docstring; the study's ``estimate_flops``).

    F = 6 (P_prelude + P_coda + V d) + (2 (r - k) + 6 k) (P_recur + P_inject)
      + 12 d T (l_prelude + l_coda) + (4 (r - k) + 12 k) l_recur d T.
    """
    nb = block_params(d)
    p_inject = inject_flop_params(d, injection, lanes=lanes)
    return (
        6 * (n_prelude * nb + n_coda * nb + vocab_padded * d)
        + (2 * (r - k) + 6 * k) * (n_recur * nb + p_inject)
        + 12 * d * seq_len * (n_prelude + n_coda)
        + (4 * (r - k) + 12 * k) * n_recur * d * seq_len
    )


def paper_layers(r: int) -> dict[str, int]:
    """The study's iso-depth split of its 20 layers: 0 / 20 / 0 for r = 1, 2 / (16 / r) / 2 otherwise."""
    if r == 1:
        return {"prelude": 0, "recur": 20, "coda": 0}
    if 16 % r:
        raise ValueError(f"r = {r} does not divide the 16 looped layers of the paper design")
    return {"prelude": 2, "recur": 16 // r, "coda": 2}


def paper_architecture(s: Count, r: int) -> dict[str, Count]:
    """Parameter split and training FLOPs per token of the study's model at width s and r.

    d = 64 s, :func:`paper_layers`, linear injection for r > 1 (none for r = 1), full BPTT,
    T = 2048, V_pad = 32,064; ``s`` may be an array of (real) widths.
    """
    d = 64 * s
    layers = paper_layers(int(r))
    shape = dict(
        d=d,
        vocab_padded=PAPER_VOCAB_PADDED,
        n_prelude=layers["prelude"],
        n_recur=layers["recur"],
        n_coda=layers["coda"],
        injection="none" if r == 1 else "linear",
        r=r,
    )
    counts = looped_param_counts(**shape)
    flops = looped_flops_per_token(**shape, seq_len=PAPER_SEQ_LEN, k=r)
    return {"d": d, "n_once": counts.n_once, "n_rec": counts.n_rec, "flops_per_token": flops}


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
