"""Parameter split (n_once, n_rec) and training FLOPs per token of a looped GPT, from its configuration alone.

Both follow the study exactly (Schwethelm et al. 2026, arXiv 2604.21106, §3.2, Eq. 1 and Eq. 6; the released
``GPT.num_scaling_params`` / ``GPT.estimate_flops``); ``tests/test_trainer_model.py`` checks them against the
paper's per-width table (paper-notes §5.3) and against the parameters of a built model. No torch here.

Parameters (d = d_model, V = padded vocabulary):

    block    n_b = 12 d^2 + 2 d          (attention 4 d^2, MLP 8 d^2, two RMSNorm gains)
    inject   n_i = 2 d^2                 (linear injection W in R^{d x 2d});  0 for additive / none
             n_i = r (K^2 + 2K)          (hyperconnections: per iteration alpha_i in R^K, M_i in R^{KxK},
                                          beta_i in R^K)
    norms    3 d                         (model-level RMSNorms: after the embedding, after every iteration,
                                          final)
    n_once = (n_prelude + n_coda) n_b + 3 d        # the study counts the three model-level norms as "once"
    n_rec  = n_recur n_b + n_i                     # the injection / lane parameters belong to the loop
    N = n_once + n_rec  (non-embedding);  total = N + 2 V d  (untied embedding and head)

Training FLOPs per token (forward + backward; PaLM App. B accounting, as the study's ``estimate_flops``):

    F = 6 (P_prelude + P_coda + P_head)
      + (2 (r - k) + 6 k) (P_recur + P_inject)
      + 12 d T (l_prelude + l_coda) + (4 (r - k) + 12 k) l_recur d T

with k = bptt_k (= r under full BPTT), T = seq_len, P_head = V d. Forward-only (truncated) iterations cost 2
per parameter and 4 d T of attention per layer; iterations with gradients 6 and 12 d T. The embedding lookup
is not counted, the unembedding is; attention is charged in full (no causal halving), softmax not at all. For
hyperconnections P_inject is the "equivalent" (K^2 + 2K) d (study's code, paper App. G.1).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import LoopedGPTConfig


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts by part. ``n_once + n_rec + wte + lm_head == total`` by construction."""

    prelude: int
    recur: int
    coda: int
    inject: int
    norms: int  # the three model-level RMSNorm gains
    wte: int
    lm_head: int

    @property
    def n_once(self) -> int:
        """Parameters applied once per token: prelude + coda + model-level norms."""
        return self.prelude + self.coda + self.norms

    @property
    def n_rec(self) -> int:
        """Parameters of the loop, applied r times: shared stack + injection (or lane) parameters."""
        return self.recur + self.inject

    @property
    def non_embedding(self) -> int:
        """N = n_once + n_rec (embedding and head excluded, as in the study)."""
        return self.n_once + self.n_rec

    @property
    def total(self) -> int:
        return self.n_once + self.n_rec + self.wte + self.lm_head


def block_params(d: int) -> int:
    """One pre-norm block: q, k, v, o (4 d^2) + MLP d -> 4d -> d (8 d^2) + two RMSNorm gains (2 d)."""
    return 12 * d * d + 2 * d


def inject_params(cfg: LoopedGPTConfig) -> int:
    """Real injection parameters: 2 d^2 (linear), r (K^2 + 2K) (hyperconnections), 0 otherwise."""
    d = cfg.d_model
    if cfg.injection == "linear":
        return 2 * d * d
    if cfg.injection == "hc":
        return cfg.r * (cfg.lanes**2 + 2 * cfg.lanes)
    return 0


def param_counts(cfg: LoopedGPTConfig) -> ParamCounts:
    """Closed-form parameter counts of ``LoopedGPT(cfg)`` (the model asserts that its tensors agree)."""
    d, nb, v = cfg.d_model, block_params(cfg.d_model), cfg.padded_vocab
    return ParamCounts(
        prelude=cfg.n_prelude * nb,
        recur=cfg.n_recur * nb,
        coda=cfg.n_coda * nb,
        inject=inject_params(cfg),
        norms=3 * d,
        wte=v * d,
        lm_head=v * d,
    )


def flops_per_token(cfg: LoopedGPTConfig) -> float:
    """Training FLOPs per token F (module docstring; the study's ``estimate_flops``, paper Eq. 1 and 6)."""
    d, t, r, k = cfg.d_model, cfg.seq_len, cfg.r, cfg.k
    nb = block_params(d)
    p_prelude, p_coda, p_recur = cfg.n_prelude * nb, cfg.n_coda * nb, cfg.n_recur * nb
    p_head = cfg.padded_vocab * d
    if cfg.injection == "hc":
        p_inject = (cfg.lanes**2 + 2 * cfg.lanes) * d  # "equivalent" parameters (App. G.1)
    else:
        p_inject = inject_params(cfg)
    matmul = 6 * (p_prelude + p_coda + p_head) + (2 * (r - k) + 6 * k) * (p_recur + p_inject)
    attention = 12 * d * t * (cfg.n_prelude + cfg.n_coda) + (4 * (r - k) + 12 * k) * cfg.n_recur * d * t
    return float(matmul + attention)


def tokens_for_budget(cfg: LoopedGPTConfig, budget: float, tokens_per_step: int) -> tuple[int, int]:
    """Steps and tokens of a FLOP budget C.

    steps = max(1, round(C / (F * tokens_per_step))), D = steps * tokens_per_step.

    As the study's ``base_train.py`` (``num_iterations = round(C / (F * batch))``): D is what the run actually
    trains on.
    """
    if not budget > 0:
        raise ValueError(f"budget={budget!r}: expected a positive number of FLOPs")
    steps = max(1, round(budget / (flops_per_token(cfg) * tokens_per_step)))
    return steps, steps * tokens_per_step
