"""The learning rates a run trains with: the study's transfer rules applied to a spec's base rates.

The study (paper-notes §6.4, its App. D) sets every rate from a base rate found at one reference size:

- **width (muP)**: every AdamW group (embedding, head, RMSNorm gains, hyperconnection lanes; the
  matrices too when AdamW trains them) is multiplied by (d / d_ref)^(-1/2);
- **MuonH's matrix rate** is multiplied instead by batch_scale x data_scale,
  batch_scale = (B / B_ref)^0.558 (B the tokens per optimiser step) and
  data_scale = (D / D_ref)^(-0.32) (D the run's training tokens), with D_ref = 10 x the effective
  parameters N_once + r_ref N_rec of the reference model (width d_ref at the run's depth; r_ref = 4 for
  looped runs, as the study's single looped reference, and 1 for the plain transformer) -- the
  reference trains at 10 tokens per effective parameter;
- the AdamW groups also take batch_scale (the study: "AdamW groups get only batch scaling" beside muP).

The schedule on top is the study's: no warm-up, linear decay to ``final_lr_frac`` (0.1) of the peak.
``lr_scaling = "none"`` trains every group at its base rate unchanged (the recipe of the first CPU sweeps).
"""

from __future__ import annotations

from typing import Any

#: The study's exponents (paper-notes §6.4).
WIDTH_EXPONENT = -0.5
BATCH_EXPONENT = 0.558
DATA_EXPONENT = -0.32
#: Tokens per effective parameter of the reference run that D_ref stands for.
REF_TOKENS_PER_PARAM = 10.0
#: The looped reference's recurrence count (the study used its r = 4 reference for every r > 1).
REF_R_LOOPED = 4
LR_SCALINGS = ("mup", "none")


def reference_tokens(cfg: Any) -> float:
    """D_ref = 10 (N_once + r_ref N_rec) of the reference model: width ``cfg.lr_ref_width`` at the run's
    depth, prelude and coda, r_ref = 4 when the run loops and 1 when it does not."""
    from ..study import looped_param_counts

    m = cfg.model
    depth = m.n_prelude + m.n_recur * m.r + m.n_coda
    # Counted by the study's formula, not built: parameter counts do not depend on the heads, and the run's
    # head_dim need not divide d_ref.
    if m.r == 1:
        r_ref, shape = 1, {"n_prelude": 0, "n_recur": depth, "n_coda": 0, "injection": "none"}
    else:
        looped = depth - m.n_prelude - m.n_coda
        r_ref = REF_R_LOOPED if looped % REF_R_LOOPED == 0 else m.r
        shape = {"n_prelude": m.n_prelude, "n_recur": looped // r_ref, "n_coda": m.n_coda}
        shape["injection"] = "linear"
    pc = looped_param_counts(d=cfg.lr_ref_width, vocab_padded=64, r=r_ref, lanes=m.lanes, **shape)
    return REF_TOKENS_PER_PARAM * (pc.n_once + r_ref * pc.n_rec)


def lr_factors(cfg: Any, tokens: float, batch_tokens: float | None = None) -> dict[str, float]:
    """Multipliers of the base rates for a run of ``tokens`` training tokens and ``batch_tokens`` tokens
    per optimiser step (default: one process's, batch_size x seq_len x grad_accum): ``width`` (muP),
    ``batch``, ``data``, and what each optimiser group takes: ``adamw`` = width x batch, ``matrix`` =
    batch x data for MuonH, width x batch when AdamW trains the matrices. All 1 for ``lr_scaling="none"``."""
    if cfg.lr_scaling == "none":
        return {"width": 1.0, "batch": 1.0, "data": 1.0, "adamw": 1.0, "matrix": 1.0}
    width = (cfg.model.d_model / cfg.lr_ref_width) ** WIDTH_EXPONENT
    if batch_tokens is None:
        batch_tokens = cfg.batch_size * cfg.model.seq_len * cfg.grad_accum
    batch = (batch_tokens / cfg.lr_ref_batch) ** BATCH_EXPONENT
    data = (tokens / reference_tokens(cfg)) ** DATA_EXPONENT
    matrix = batch * data if cfg.optimizer == "muon" else width * batch
    return {"width": width, "batch": batch, "data": data, "adamw": width * batch, "matrix": matrix}


def effective_lrs(cfg: Any, tokens: float, batch_tokens: float | None = None) -> dict[str, float]:
    """Peak learning rate of each group: base rate x its factor (:func:`lr_factors`); the
    hyperconnection lanes' base is the study's 0.01 (d / 640)^(-1/2), batch-scaled under muP."""
    f = lr_factors(cfg, tokens, batch_tokens)
    return {
        "matrix": cfg.lr * f["matrix"],
        "embed": cfg.embed_lr * f["adamw"],
        "head": cfg.head_lr * f["adamw"],
        "scalar": cfg.scalar_lr * f["adamw"],
        "lanes": 0.01 * (cfg.model.d_model / 640) ** -0.5 * (f["batch"] if cfg.lr_scaling != "none" else 1.0),
    }
