"""Optimiser setup: AdamW param groups (default) or Muon for the hidden matrices (optional).

Param groups follow the study's ``GPT.setup_optimizer`` in spirit: hidden matrices (blocks and the injection
layer), the embedding, the head, and the small scalars (RMSNorm gains; hyperconnection lane parameters get
their own group, the study's 0.01 (d/640)^(-1/2), betas (0.8, 0.95), no weight decay). The study trains the
matrices with MuonH (``Muon`` below, ``optimizer = "muon"``); AdamW is the other choice. The rates each
group starts from are the base rates transferred by :mod:`phifit.spec.lr_recipe` (muP width scaling, and
the study's batch and data scaling of MuonH's rate).
"""

from __future__ import annotations

import torch
from torch import nn

from .model import LoopedGPT


@torch.no_grad()
def newton_schulz(g: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """Approximate orthogonalisation U V^T of g = U S V^T with the quintic Newton-Schulz iteration of Muon.

    Coefficients (a, b, c) = (3.4445, -4.7750, 2.0315) from K. Jordan et al., "Muon" (2024):
    X <- a X + (b A + c A^2) X with A = X X^T, after scaling X to unit Frobenius norm.
    """
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.to(torch.bfloat16 if g.is_cuda else torch.float32)
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        A = x @ x.T
        x = a * x + (b * A + c * A @ A) @ x
    return (x.T if tall else x).to(g.dtype)


class Muon(torch.optim.Optimizer):
    """Muon for 2-D weights: Nesterov momentum, orthogonalised update scaled by sqrt(max(1, rows / cols)).

    With ``sphere=True`` every matrix is projected back onto the Frobenius sphere of its initial norm after
    each step (the "hyperball" constraint of the study's MuonH; weight decay is then meaningless and not
    offered).
    """

    def __init__(
        self, params, lr: float = 0.02, momentum: float = 0.95, ns_steps: int = 5, sphere: bool = True
    ):
        super().__init__(params, dict(lr=lr, momentum=momentum, ns_steps=ns_steps, sphere=sphere))

    @torch.no_grad()
    def step(self) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["momentum"] = torch.zeros_like(p)
                    state["radius"] = p.norm()
                buf = state["momentum"]
                buf.lerp_(p.grad, 1 - group["momentum"])
                update = p.grad.lerp(buf, group["momentum"])  # Nesterov
                update = newton_schulz(update, group["ns_steps"]) * max(1.0, p.size(0) / p.size(1)) ** 0.5
                p.add_(update, alpha=-group["lr"])
                if group["sphere"]:
                    p.mul_(state["radius"] / (p.norm() + 1e-12))


def build_optimizers(
    model: LoopedGPT,
    *,
    kind: str,
    lr: float,
    embed_lr: float,
    head_lr: float,
    scalar_lr: float,
    weight_decay: float,
    betas: tuple[float, float] = (0.8, 0.95),
    lanes_lr: float | None = None,
) -> list[torch.optim.Optimizer]:
    """AdamW over all groups, or Muon (matrices) + AdamW (the rest). Each group records its ``base_lr``
    (the peak of the schedule). ``lanes_lr``: the hyperconnection lanes' rate (default the study's
    0.01 (d / 640)^(-1/2))."""
    matrices = [
        p for blk in [*model.prelude, *model.recur, *model.coda] for p in blk.parameters() if p.ndim == 2
    ]
    if model.inject is not None:
        matrices.append(model.inject.weight)
    d = model.cfg.d_model
    hc = [model.hc_alpha, model.hc_mix, model.hc_beta] if model.cfg.injection == "hc" else []
    seen = {id(p) for p in [*matrices, *hc, model.wte.weight, model.lm_head.weight]}
    scalars = [p for p in model.parameters() if id(p) not in seen]  # RMSNorm gains
    adam_groups: list[dict] = [
        dict(params=[model.wte.weight], lr=embed_lr, weight_decay=0.0),
        dict(params=[model.lm_head.weight], lr=head_lr, weight_decay=0.0),
        dict(params=scalars, lr=scalar_lr, weight_decay=0.0),
    ]
    if hc:
        lanes = 0.01 * (d / 640) ** -0.5 if lanes_lr is None else lanes_lr
        adam_groups.append(dict(params=hc, lr=lanes, weight_decay=0.0))
    n_all = sum(len(g["params"]) for g in adam_groups) + len(matrices)
    assert n_all == len(list(model.parameters())), "every parameter in exactly one group"
    if kind == "adamw":
        adam_groups.append(dict(params=matrices, lr=lr, weight_decay=weight_decay))
        opts: list[torch.optim.Optimizer] = [torch.optim.AdamW(adam_groups, betas=betas, eps=1e-10)]
    elif kind == "muon":
        opts = [torch.optim.AdamW(adam_groups, betas=betas, eps=1e-10), Muon(matrices, lr=lr)]
    else:
        raise ValueError(f"optimizer={kind!r}: expected 'adamw' or 'muon'")
    for opt in opts:
        for g in opt.param_groups:
            g["base_lr"] = g["lr"]
    return opts


def zero_grad(model: nn.Module) -> None:
    for p in model.parameters():
        p.grad = None


def optimizers_for(
    model: LoopedGPT, cfg, tokens: float, batch_tokens: float | None = None
) -> list[torch.optim.Optimizer]:
    """:func:`build_optimizers` with the optimiser settings of a ``TrainConfig``, every base rate
    transferred to this run's width, batch (``batch_tokens`` per optimiser step, all processes) and
    training ``tokens`` by the config's ``lr_scaling`` (:func:`phifit.spec.lr_recipe.effective_lrs`)."""
    from phifit.spec.lr_recipe import effective_lrs

    lrs = effective_lrs(cfg, tokens, batch_tokens)
    return build_optimizers(
        model,
        kind=cfg.optimizer,
        lr=lrs["matrix"],
        embed_lr=lrs["embed"],
        head_lr=lrs["head"],
        scalar_lr=lrs["scalar"],
        weight_decay=cfg.weight_decay,
        lanes_lr=lrs["lanes"],
    )
