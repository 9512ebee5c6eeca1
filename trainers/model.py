"""Full definition of the looped (depth-recurrent) GPT, all of it in this single file.

    x = RMSNorm(wte(idx))                        # untied embedding
    x = prelude(x); e = x                        # unshared blocks; e is constant across iterations
    s = e  (additive: s = 0)                     # state initialised to the prelude output
    for i in range(r):                           # the same stack of n_recur blocks, r times
        u = inject(e, s)                         # linear W [e; s] (init [I | 0]) | s + e | s
        s = RMSNorm_recur(recur(u))              # RMSNorm after every iteration (shared gain; recur_norm)
        (the first r - k iterations run forward only and are detached: truncated BPTT)
    x = coda(s)                                  # unshared blocks
    logits = 15 tanh(lm_head(RMSNorm(x)) / 15)   # untied head, logit softcap, fp32

Follows the study it reproduces (Schwethelm, Rueckert, Kaissis 2026, "How Much Is One Recurrence Worth?",
arXiv 2604.21106, §3.1, §5, App. C.1, and its released nanochat-based ``gpt.py``), whose blocks come from
nanochat / nanoGPT: pre-norm, causal self-attention through PyTorch SDPA with RoPE then QK-norm, squared-ReLU
MLP, no biases, no dropout. Hyperconnections (paper §5.2, Eq. 7; Zhu et al. 2025) replace the injection by K
lanes.

The configuration lives in :mod:`phifit.spec.run_config` (torch-free, so that parameter counts, FLOPs per
token and sweep plans need no torch; ``config.py`` re-imports it). ``LoopedGPT.param_split`` counts the actual
tensors and asserts that they equal the closed forms of ``flops.param_counts`` (the study's formula,
:func:`phifit.study.looped_param_counts`).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import LoopedGPTConfig
from .flops import ParamCounts, param_counts

__all__ = ["LoopedGPT", "LoopedGPTConfig"]


class RMSNorm(nn.Module):
    """RMSNorm with a learnable gain (initialised to 1), eps 1e-6, computed in fp32.

    Under CUDA's bf16 autocast the loop's state arrives in bf16 while the gain is fp32, and ``rms_norm`` of
    mixed dtypes falls back to an unfused kernel (with a warning on every run); the input is upcast instead.
    On the CPU (fp32 throughout) ``x.float()`` is ``x`` itself, so CPU runs are unchanged bit for bit.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x.float(), (x.size(-1),), self.weight, self.eps)


def rotary_tables(seq_len: int, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of RoPE (Su et al. 2021) with the half-split convention, each (T, head_dim / 2)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)  # (T, hd/2)
    return freqs.cos(), freqs.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs (i, i + hd/2) of x (B, H, T, hd) by position-dependent angles."""
    h = x.size(-1) // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1)


class CausalSelfAttention(nn.Module):
    """Full causal multi-head attention (no GQA): RoPE on q and k, then QK-norm (gainless RMSNorm), SDPA."""

    def __init__(self, cfg: LoopedGPTConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.n_head, self.head_dim, self.eps = cfg.n_head, cfg.head_dim, cfg.norm_eps
        self.c_q = nn.Linear(d, d, bias=False)
        self.c_k = nn.Linear(d, d, bias=False)
        self.c_v = nn.Linear(d, d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q = self.c_q(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = self.c_k(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        v = self.c_v(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        q = F.rms_norm(q, (self.head_dim,), eps=self.eps)  # QK-norm, after RoPE as in the study
        k = F.rms_norm(k, (self.head_dim,), eps=self.eps)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hd)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, d)
        return self.c_proj(y)


class MLP(nn.Module):
    """d -> 4d -> d with squared ReLU (So et al. 2021, "Primer")."""

    def __init__(self, cfg: LoopedGPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False)
        self.c_proj = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x)). 12 d^2 + 2 d parameters."""

    def __init__(self, cfg: LoopedGPTConfig) -> None:
        super().__init__()
        self.norm1 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = CausalSelfAttention(cfg)
        self.norm2 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class LoopedGPT(nn.Module):
    """Prelude -> shared stack x r -> coda (injection or hyperconnections); forward -> (logits, loss)."""

    def __init__(self, cfg: LoopedGPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d, v = cfg.d_model, cfg.padded_vocab
        self.wte = nn.Embedding(v, d)
        self.norm_emb = RMSNorm(d, cfg.norm_eps)
        self.prelude = nn.ModuleList([Block(cfg) for _ in range(cfg.n_prelude)])
        self.recur = nn.ModuleList([Block(cfg) for _ in range(cfg.n_recur)])
        self.coda = nn.ModuleList([Block(cfg) for _ in range(cfg.n_coda)])
        self.norm_recur = RMSNorm(d, cfg.norm_eps) if cfg.recur_norm else None
        self.norm_final = RMSNorm(d, cfg.norm_eps)
        self.lm_head = nn.Linear(d, v, bias=False)
        self.inject = nn.Linear(2 * d, d, bias=False) if cfg.injection == "linear" else None
        if cfg.injection == "hc":  # per-iteration lane parameters, r (K^2 + 2K) scalars
            K = cfg.lanes
            self.hc_alpha = nn.Parameter(torch.zeros(cfg.r, K))  # lanes -> block input
            self.hc_mix = nn.Parameter(torch.zeros(cfg.r, K, K))  # lane mixing M_i
            self.hc_beta = nn.Parameter(torch.zeros(cfg.r, K))  # block output -> lanes
        cos, sin = rotary_tables(cfg.seq_len, cfg.head_dim, cfg.rope_base)
        self.register_buffer("cos", cos, persistent=False)  # (T, hd/2)
        self.register_buffer("sin", sin, persistent=False)
        self.init_weights()
        self.param_split()  # asserts the accounting once at construction

    @torch.no_grad()
    def init_weights(self) -> None:
        """The study's initialisation (paper App. C.1, Table 4).

        wte ~ N(0, 1); lm_head ~ N(0, 1e-3); c_q, c_k, c_v, attention c_proj, c_fc ~ U(+-sqrt(3/d));
        MLP c_proj ~ U(+-sqrt(3/(4d))); RMSNorm gains 1; injection W = [I | 0] (so u = e at init);
        hyperconnections cyclic: alpha_i = e_{i mod K}, M_i = I, beta_i = 1.
        """
        d = self.cfg.d_model
        nn.init.normal_(self.wte.weight, std=1.0)
        nn.init.normal_(self.lm_head.weight, std=1e-3)
        a, a_proj = (3 / d) ** 0.5, (3 / (4 * d)) ** 0.5
        for blk in [*self.prelude, *self.recur, *self.coda]:
            for lin in (blk.attn.c_q, blk.attn.c_k, blk.attn.c_v, blk.attn.c_proj, blk.mlp.c_fc):
                nn.init.uniform_(lin.weight, -a, a)
            nn.init.uniform_(blk.mlp.c_proj.weight, -a_proj, a_proj)
        for m in self.modules():
            if isinstance(m, RMSNorm):
                nn.init.ones_(m.weight)
        if self.inject is not None:
            self.inject.weight.zero_()
            self.inject.weight[:, :d].copy_(torch.eye(d))
        if self.cfg.injection == "hc":
            K = self.cfg.lanes
            self.hc_alpha.zero_()
            self.hc_alpha[torch.arange(self.cfg.r), torch.arange(self.cfg.r) % K] = 1.0
            self.hc_mix.copy_(torch.eye(K).expand(self.cfg.r, K, K))
            self.hc_beta.fill_(1.0)

    # ---- accounting ----------------------------------------------------------------------------------------
    def param_split(self) -> ParamCounts:
        """Count tensors by part; assert they equal ``flops.param_counts`` and add up to all parameters."""

        def count(*mods: nn.Module | None) -> int:
            return sum(p.numel() for m in mods if m is not None for p in m.parameters())

        inject = count(self.inject)
        if self.cfg.injection == "hc":
            inject += self.hc_alpha.numel() + self.hc_mix.numel() + self.hc_beta.numel()
        counted = ParamCounts(
            prelude=count(self.prelude),
            recur=count(self.recur),
            coda=count(self.coda),
            inject=inject,
            norms=count(self.norm_emb, self.norm_recur, self.norm_final),
            wte=count(self.wte),
            lm_head=count(self.lm_head),
        )
        total = sum(p.numel() for p in self.parameters())
        assert counted.n_once + counted.n_rec + counted.wte + counted.lm_head == total, (counted, total)
        assert counted == param_counts(self.cfg), (counted, param_counts(self.cfg))
        return counted

    # ---- the loop ------------------------------------------------------------------------------------------
    def _inject(self, e: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Block input u of one iteration from the prelude output e and the state s, both (B, T, d)."""
        if self.inject is not None:
            return self.inject(torch.cat([e, s], dim=-1))  # W [e; s], (B, T, 2d) -> (B, T, d)
        if self.cfg.injection == "additive":
            return s + e
        return s  # "none" (passthrough)

    def _iterate(self, u: torch.Tensor) -> torch.Tensor:
        """One recurrence: the shared stack on u, then the shared RMSNorm (left out by ``recur_norm=False``,
        a control). (B, T, d) -> (B, T, d)."""
        for blk in self.recur:
            u = blk(u, self.cos[: u.size(1)], self.sin[: u.size(1)])
        return u if self.norm_recur is None else self.norm_recur(u)

    def hc_read(self, lanes: torch.Tensor, i: int) -> torch.Tensor:
        """Hyperconnection input of iteration i: u_i = sum_k alpha_i[k] lane_k. (K, B, T, d) -> (B, T, d)."""
        return torch.einsum("k,kbtd->btd", self.hc_alpha[i], lanes)

    def hc_write(self, lanes: torch.Tensor, s: torch.Tensor, i: int) -> torch.Tensor:
        """Lane update of iteration i: lane_j <- sum_k M_i[j, k] lane_k + beta_i[j] s_i; (K, B, T, d)."""
        return torch.einsum("jk,kbtd->jbtd", self.hc_mix[i], lanes) + self.hc_beta[i].view(-1, 1, 1, 1) * s

    def loop(self, e: torch.Tensor) -> torch.Tensor:
        """The r iterations of the shared stack on the prelude output e (B, T, d); returns the coda input."""
        cfg = self.cfg
        if cfg.injection == "hc":  # full BPTT only (checked by the config)
            lanes = e.unsqueeze(0).expand(cfg.lanes, *e.shape)  # (K, B, T, d), every lane starts at e
            for i in range(cfg.r):
                s = self._iterate(self.hc_read(lanes, i))
                lanes = self.hc_write(lanes, s, i)
            return lanes.sum(dim=0)  # the coda reads the sum of the lanes
        s = torch.zeros_like(e) if cfg.injection == "additive" else e
        n_forward_only = cfg.r - cfg.k
        if n_forward_only > 0:  # truncated BPTT: early iterations run forward only, their output is detached
            with torch.no_grad():
                for _ in range(n_forward_only):
                    s = self._iterate(self._inject(e, s))
        for _ in range(cfg.k):
            s = self._iterate(self._inject(e, s))
        return s

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """idx, targets: (B, T) token ids. Returns logits (B, T, vocab_size) in fp32 and the mean loss in
        nats.
        """
        B, T = idx.size()
        assert T <= self.cfg.seq_len, f"sequence length {T} > seq_len {self.cfg.seq_len}"
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.norm_emb(self.wte(idx))  # (B, T, d)
        for blk in self.prelude:
            x = blk(x, cos, sin)
        x = self.loop(x)  # (B, T, d)
        for blk in self.coda:
            x = blk(x, cos, sin)
        logits = self.lm_head(self.norm_final(x))[
            ..., : self.cfg.vocab_size
        ].float()  # (B, T, V), padding cropped
        logits = self.cfg.softcap * torch.tanh(logits / self.cfg.softcap)  # logit softcap, in fp32
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss
