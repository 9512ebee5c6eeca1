"""The looped GPT of phifit.trainers: shapes, accounting, FLOPs, truncated BPTT and hyperconnections."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from phifit.trainers.config import VARIANTS, LoopedGPTConfig, make_train_config  # noqa: E402
from phifit.trainers.flops import flops_per_token, param_counts  # noqa: E402
from phifit.trainers.model import LoopedGPT  # noqa: E402
from phifit.trainers.optim import build_optimizers  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

torch.set_num_threads(1)

CASES = [("baseline", 1)] + [(v, r) for v in VARIANTS for r in (2, 4, 8)]


def tiny(r: int, variant: str = "baseline", **kw) -> LoopedGPTConfig:
    """10 effective layers (1 / 8/r x r / 1), width 32, two heads of 16, context 16."""
    return LoopedGPTConfig.from_depth(
        depth=10, r=r, d_model=32, head_dim=16, seq_len=16, variant=variant, **kw
    )


@pytest.mark.parametrize(("variant", "r"), CASES, ids=[f"{v}-r{r}" for v, r in CASES])
def test_shapes_and_finite_loss(variant: str, r: int) -> None:
    cfg = tiny(r, variant)
    assert cfg.depth == 10 and cfg.variant == variant
    torch.manual_seed(0)
    model = LoopedGPT(cfg)
    idx = torch.randint(0, 256, (2, 16))
    logits, loss = model(idx, idx)
    assert logits.shape == (2, 16, 256) and logits.dtype == torch.float32
    assert logits.abs().max() <= cfg.softcap
    assert math.isfinite(loss.item()) and abs(loss.item() - math.log(256)) < 0.1  # near-uniform at init
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    logits_only, none = model(idx[:, :5])
    assert logits_only.shape == (2, 5, 256) and none is None


@pytest.mark.parametrize(("variant", "r"), CASES, ids=[f"{v}-r{r}" for v, r in CASES])
def test_parameter_accounting_exact(variant: str, r: int) -> None:
    cfg = tiny(r, variant)
    model = LoopedGPT(cfg)
    split = model.param_split()  # asserts internally too
    total = sum(p.numel() for p in model.parameters())
    assert split.n_once + split.n_rec + split.wte + split.lm_head == total
    assert split == param_counts(cfg)
    d = cfg.d_model
    assert split.wte == split.lm_head == 256 * d  # untied
    if r == 1:  # plain transformer: only the model-level norms are "once"
        assert split.n_once == 3 * d and split.n_rec == 10 * (12 * d * d + 2 * d)
    else:
        assert split.n_once == 2 * (12 * d * d + 2 * d) + 3 * d
        assert split.n_rec > 0
        inject = {
            "baseline": 2 * d * d,
            "tbptt": 2 * d * d,
            "hc": r * (2 * 2 + 2 * 2),
            "additive": 0,
            "passthrough": 0,
        }[variant]
        assert split.n_rec == (8 // r) * (12 * d * d + 2 * d) + inject


# The study's per-width table (paper-notes §5.3): d = 64 s, head dim 128, T = 2048, vocabulary 32,001 -> 32,064.
PAPER = {  # s: (N r=1,2,4,8 [M], N_once [M], N_rec r=2,4,8 [M], F r=1,2,4,8 [GFLOPs])
    6: ((35.41, 21.54, 14.46, 10.92), 7.08, (14.46, 7.38, 3.84), (0.4750, 0.4786, 0.4821, 0.4892)),
    12: ((141.59, 86.14, 57.82, 43.66), 28.32, (57.82, 29.50, 15.34), (1.3748, 1.3889, 1.4031, 1.4314)),
    34: (
        (1136.49, 691.37, 464.07, 350.42),
        227.30,
        (464.06, 236.77, 123.12),
        (8.3071, 8.4207, 8.5343, 8.7616),
    ),
}


@pytest.mark.parametrize("s", sorted(PAPER))
def test_counts_and_flops_reproduce_the_paper_table(s: int) -> None:
    n, n_once, n_rec, f = PAPER[s]
    for i, r in enumerate((1, 2, 4, 8)):
        cfg = LoopedGPTConfig.from_depth(
            depth=20, prelude=2, coda=2, r=r, d_model=64 * s, head_dim=128, seq_len=2048, vocab_size=32001
        )
        pc = param_counts(cfg)
        assert pc.non_embedding / 1e6 == pytest.approx(n[i], abs=0.006)
        assert flops_per_token(cfg) / 1e9 == pytest.approx(f[i], abs=6e-5)
        if r > 1:
            assert pc.n_once / 1e6 == pytest.approx(n_once, abs=0.006)
            assert pc.n_rec / 1e6 == pytest.approx(n_rec[i - 1], abs=0.006)
    assert (
        flops_per_token(
            LoopedGPTConfig.from_depth(
                depth=20, r=1, d_model=384, head_dim=128, seq_len=2048, vocab_size=32001
            )
        )
        == 475047936
    )  # 4.7505e8, exact


def test_tbptt_flop_saving_matches_the_study() -> None:
    """bptt_k = ceil(r/2) saves 22.6-25.2 % of the training FLOPs per token over the widths of the study's
    truncated-BPTT grid, s = 6..22 (paper-notes §4.4)."""
    for s in (6, 8, 10, 12, 14, 16, 18, 20, 22):
        for r in (2, 4, 8):
            kw = dict(
                depth=20, prelude=2, coda=2, r=r, d_model=64 * s, head_dim=128, seq_len=2048, vocab_size=32001
            )
            full = flops_per_token(LoopedGPTConfig.from_depth(**kw))
            trunc = flops_per_token(LoopedGPTConfig.from_depth(variant="tbptt", **kw))
            assert 0.2255 <= 1 - trunc / full <= 0.2525


def test_hyperconnection_parameters_replace_the_injection() -> None:
    base = param_counts(
        LoopedGPTConfig.from_depth(depth=20, prelude=2, coda=2, r=4, d_model=640, head_dim=128)
    )
    hc = param_counts(
        LoopedGPTConfig.from_depth(depth=20, prelude=2, coda=2, r=4, d_model=640, head_dim=128, variant="hc")
    )
    assert hc.non_embedding == base.non_embedding - 2 * 640**2 + 32  # r (K^2 + 2K) = 4 * 8 (paper-notes §5.3)


@pytest.mark.parametrize(
    ("variant", "r"),
    [
        ("baseline", 1),
        ("baseline", 2),
        ("baseline", 8),
        ("tbptt", 4),
        ("tbptt", 8),
        ("additive", 4),
        ("hc", 4),
    ],
)
def test_flops_per_token_match_torch_flop_counter(variant: str, r: int) -> None:
    """One forward + backward counted by torch (math SDPA, so attention is counted) equals F * tokens exactly,
    once the formula's RMSNorm gains inside blocks (counted as parameters, but no matmul) are taken out."""
    cfg = LoopedGPTConfig.from_depth(depth=10, r=r, d_model=64, seq_len=32, variant=variant)
    model = LoopedGPT(cfg)
    idx = torch.randint(0, 256, (2, 32))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        _, loss = model(idx, idx)
        loss.backward()
    k, d = cfg.k, cfg.d_model
    gain_flops = (6 * (cfg.n_prelude + cfg.n_coda) + (2 * (r - k) + 6 * k) * cfg.n_recur) * 2 * d
    predicted = (flops_per_token(cfg) - gain_flops) * idx.numel()
    if variant == "hc":  # the study charges the lane mixing as (K^2 + 2K) d "equivalent" parameters
        assert counter.get_total_flops() == pytest.approx(predicted, rel=0.005)
    else:
        assert counter.get_total_flops() == predicted


def _paper_config(s: int, r: int) -> LoopedGPTConfig:
    """The study's model at width s: 20 effective layers, 2 / (16/r) / 2 (0 / 20 / 0 at r = 1)."""
    if r == 1:
        return LoopedGPTConfig.from_depth(
            depth=20, r=1, d_model=64 * s, head_dim=128, seq_len=2048, vocab_size=32001
        )
    return LoopedGPTConfig.from_depth(
        depth=20, prelude=2, coda=2, r=r, d_model=64 * s, head_dim=128, seq_len=2048, vocab_size=32001
    )


@pytest.mark.parametrize("r", (1, 2, 4, 8))
def test_the_study_formula_is_the_built_model_measured(r: int) -> None:
    """phifit.study.paper_architecture (the one formula, as the planner and the simulator use it)
    against the trainer's model of the study's shape, built on the meta device (no memory, no
    arithmetic: T = 2048 and V = 32,064 cost nothing), s = 2 (d = 128, one head of 128).

    Parameters: N_once and N_rec equal the built model's tensors exactly.  FLOPs: one forward +
    backward counted by torch (math SDPA, so both attention matmuls are seen) equals F x T exactly
    once the differences the formula documents are taken out; of those only the blocks' RMSNorm
    gains show here (charged 6 x 2 d per block and token as parameters, but no matmul).  The
    others are conventions shared by the formula and the counter: the embedding lookup (no
    FLOPs), attention charged in full (the counter also counts the masked half), softmax,
    normalisations and the loss (neither counts them).
    """
    from phifit.study import paper_architecture

    s = 2
    cfg = _paper_config(s, r)
    arch = paper_architecture(s, r)
    with torch.device("meta"):
        model = LoopedGPT(cfg)
        idx = torch.zeros((1, cfg.seq_len), dtype=torch.long)
    split = model.param_split()
    assert (split.n_once, split.n_rec) == (arch["n_once"], arch["n_rec"])
    total = sum(p.numel() for p in model.parameters())
    assert total == arch["n_once"] + arch["n_rec"] + 2 * 32064 * arch["d"]  # untied embedding and head
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        _, loss = model(idx, idx)
        loss.backward()
    blocks = cfg.n_prelude + cfg.n_coda + r * cfg.n_recur  # every block has gradients (full BPTT)
    gain_flops = 6 * blocks * 2 * arch["d"]
    assert counter.get_total_flops() == (arch["flops_per_token"] - gain_flops) * cfg.seq_len
    assert arch["flops_per_token"] == flops_per_token(cfg)  # the trainer's F is the same number


def test_iso_depth_and_bad_input_raise_clear_errors() -> None:
    with pytest.raises(
        ValueError, match=r"depth=11 .* 9 looped layers, which is not a positive multiple of r=4"
    ):
        LoopedGPTConfig.from_depth(depth=11, r=4, d_model=32)
    with pytest.raises(ValueError, match=r"variant='bogus': expected one of baseline, tbptt"):
        LoopedGPTConfig.from_depth(depth=10, r=4, d_model=32, variant="bogus")
    with pytest.raises(ValueError, match="needs r > 1"):
        LoopedGPTConfig.from_depth(depth=10, r=1, d_model=32, variant="hc")
    with pytest.raises(ValueError, match="full BPTT"):
        LoopedGPTConfig(r=4, n_recur=2, injection="hc", bptt_k=2)
    with pytest.raises(ValueError, match="d_model=40, expected a multiple of head_dim=32"):
        LoopedGPTConfig(d_model=40)
    with pytest.raises(ValueError, match="unknown setting"):
        make_train_config(depth=10, r=2, width=32, budget=1e9, bogus=1)


def test_initialisation_follows_the_study() -> None:
    cfg = tiny(4)
    model = LoopedGPT(cfg)
    d = cfg.d_model
    w = model.inject.weight
    assert torch.equal(w[:, :d], torch.eye(d)) and torch.equal(w[:, d:], torch.zeros(d, d))  # [I | 0]
    e, s = torch.randn(2, 16, d), torch.randn(2, 16, d)
    assert torch.allclose(model._inject(e, s), e)  # u = e at init
    assert model.lm_head.weight.std().item() == pytest.approx(1e-3, rel=0.1)
    bound = (3 / d) ** 0.5
    assert model.recur[0].attn.c_q.weight.abs().max() <= bound
    hc = LoopedGPT(tiny(4, "hc"))
    assert torch.equal(hc.hc_alpha, torch.tensor([[1.0, 0], [0, 1], [1, 0], [0, 1]]))  # cyclic
    assert torch.equal(hc.hc_mix, torch.eye(2).expand(4, 2, 2)) and torch.equal(hc.hc_beta, torch.ones(4, 2))


def _first_injection_grad(variant: str, r: int) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Gradient reaching the output of the first iteration's injection W [e; s(0)] (None: not in the graph)."""
    cfg = tiny(r, variant, bptt_k=1) if variant == "tbptt" else tiny(r)
    torch.manual_seed(0)
    model = LoopedGPT(cfg)
    with torch.no_grad():  # a trained-looking injection: the state path W_s is no longer zero
        model.inject.weight[:, cfg.d_model :].normal_(0, 0.1)
    outputs: list[torch.Tensor] = []

    def keep(_module, _inputs, out):
        if out.requires_grad:
            out.retain_grad()
        outputs.append(out)

    model.inject.register_forward_hook(keep)
    idx = torch.randint(0, 256, (2, 16))
    _, loss = model(idx, idx)
    loss.backward()
    assert len(outputs) == r
    return outputs[0].grad, outputs[-1].grad


def test_truncated_bptt_cuts_the_gradient_of_the_first_iteration() -> None:
    first, last = _first_injection_grad("tbptt", 4)  # bptt_k = 1: iterations 0-2 forward only
    assert first is None or torch.count_nonzero(first) == 0
    assert last is not None and last.abs().sum() > 0
    first_full, _ = _first_injection_grad("baseline", 4)
    assert first_full is not None and first_full.abs().sum() > 0


def test_truncated_bptt_gradients_equal_a_detached_unroll() -> None:
    """bptt_k = 2 of r = 4 is exactly: two iterations, detach, two iterations with gradients."""
    cfg = tiny(4, "tbptt")
    assert cfg.k == 2
    torch.manual_seed(0)
    model = LoopedGPT(cfg)
    with torch.no_grad():
        model.inject.weight[:, cfg.d_model :].normal_(0, 0.1)
    idx = torch.randint(0, 256, (2, 16))
    _, loss = model(idx, idx)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    x = model.norm_emb(model.wte(idx))
    for blk in model.prelude:
        x = blk(x, model.cos, model.sin)
    e, s = x, x
    for i in range(4):
        s = model._iterate(model._inject(e, s))
        if i < 2:
            s = s.detach()
    for blk in model.coda:
        s = blk(s, model.cos, model.sin)
    logits = model.cfg.softcap * torch.tanh(model.lm_head(model.norm_final(s)).float() / model.cfg.softcap)
    torch.nn.functional.cross_entropy(logits.view(-1, 256), idx.view(-1)).backward()
    for n, p in model.named_parameters():
        assert torch.allclose(grads[n], p.grad, atol=1e-6), n


def test_hyperconnection_lanes_match_a_hand_computation() -> None:
    """K = 2, r = 2: u_i = sum_k alpha_i[k] l_k, s_i = norm(recur(u_i)), l_j <- sum_k M_i[j,k] l_k + beta_i[j] s_i,
    coda input = l_0 + l_1 -- written out with scalars, one lane at a time."""
    cfg = LoopedGPTConfig.from_depth(
        depth=4, prelude=1, coda=1, r=2, d_model=32, head_dim=16, seq_len=8, variant="hc", lanes=2
    )
    torch.manual_seed(0)
    model = LoopedGPT(cfg)
    with torch.no_grad():  # move away from the cyclic init so that every coefficient matters
        model.hc_alpha.copy_(torch.tensor([[0.7, -0.4], [0.2, 1.3]]))
        model.hc_mix.copy_(torch.tensor([[[0.9, 0.3], [-0.5, 1.1]], [[1.2, -0.2], [0.4, 0.6]]]))
        model.hc_beta.copy_(torch.tensor([[1.5, -0.7], [0.3, 0.8]]))
    idx = torch.randint(0, 256, (3, 8))
    with torch.no_grad():
        e = model.norm_emb(model.wte(idx))
        for blk in model.prelude:
            e = blk(e, model.cos, model.sin)
        a, M, b = model.hc_alpha.tolist(), model.hc_mix.tolist(), model.hc_beta.tolist()
        lanes = [e, e]
        stacked = torch.stack(lanes)  # the model's (K, B, T, d) layout of the same lanes
        for i in range(2):
            u = a[i][0] * lanes[0] + a[i][1] * lanes[1]
            s = model.norm_recur(model.recur[0](u, model.cos, model.sin))
            lanes = [
                M[i][0][0] * lanes[0] + M[i][0][1] * lanes[1] + b[i][0] * s,
                M[i][1][0] * lanes[0] + M[i][1][1] * lanes[1] + b[i][1] * s,
            ]
            # the model's single-step functions agree with the hand update
            assert torch.allclose(model.hc_read(stacked, i), u, atol=1e-6)
            stacked = model.hc_write(stacked, s, i)
            assert torch.allclose(stacked, torch.stack(lanes), atol=1e-6)
        by_hand = lanes[0] + lanes[1]
        assert torch.allclose(model.loop(e), by_hand, atol=1e-5)
        x = by_hand
        for blk in model.coda:
            x = blk(x, model.cos, model.sin)
        logits = 15 * torch.tanh(model.lm_head(model.norm_final(x)) / 15)
        assert torch.allclose(model(idx)[0], logits, atol=1e-5)


def test_hyperconnection_init_is_the_plain_loop_at_step_zero() -> None:
    """Cyclic init: with K = 2 the first iteration reads lane 0 = e, as the plain looped forward does."""
    model = LoopedGPT(tiny(2, "hc"))
    e = torch.randn(2, 16, 32)
    with torch.no_grad():
        s0 = model._iterate(e)
        lanes = model.hc_write(torch.stack([e, e]), s0, 0)
    assert torch.allclose(lanes, torch.stack([e + s0, e + s0]))


@pytest.mark.parametrize("kind", ["adamw", "muon"])
def test_optimisers_reduce_the_loss_on_a_fixed_batch(kind: str) -> None:
    torch.manual_seed(0)
    model = LoopedGPT(tiny(2))
    opts = build_optimizers(
        model,
        kind=kind,
        lr=0.02 if kind == "muon" else 3e-3,
        embed_lr=0.03,
        head_lr=3e-3,
        scalar_lr=3e-3,
        weight_decay=0.0,
    )
    idx = torch.randint(0, 256, (4, 16))
    norm0 = model.recur[0].mlp.c_fc.weight.norm().item()
    losses = []
    for _ in range(15):
        _, loss = model(idx, idx)
        loss.backward()
        for o in opts:
            o.step()
            o.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.5
    if kind == "muon":  # the hyperball projection keeps each matrix on its initial Frobenius sphere
        assert model.recur[0].mlp.c_fc.weight.norm().item() == pytest.approx(norm0, rel=1e-4)


def test_loop_r1_control_is_the_looped_machinery_iterated_once():
    """loop_r1 builds r = 1 as prelude / shared stack / coda with the injection and norm_recur (a control that
    prices the machinery), not the plain stack; it has its own run id and the model's tensors match the
    accounting."""
    plain = make_train_config(depth=10, r=1, width=32, head_dim=16, seq_len=16, budget=1e10)
    ctl = make_train_config(depth=10, r=1, width=32, head_dim=16, seq_len=16, budget=1e10, loop_r1=True)
    m = ctl.model
    assert (m.n_prelude, m.n_recur, m.n_coda, m.r, m.injection) == (1, 8, 1, 1, "linear")
    assert (plain.model.n_prelude, plain.model.injection) == (0, "none")
    from phifit.spec.run_config import make_run_id

    assert make_run_id(ctl.identity()) != make_run_id(plain.identity())
    model = LoopedGPT(m)
    pc = param_counts(m)
    assert model.param_split() == pc and pc.inject == 2 * 32 * 32
    assert flops_per_token(m) > flops_per_token(plain.model)  # the injection's matmul is counted
    x = torch.randint(0, 256, (2, 16))
    _, loss = model(x, x)
    assert torch.isfinite(loss)
    # without W: u = s + e from s = 0 (the additive injection), the same blocks and norm_recur
    add = make_train_config(
        depth=10, r=1, width=32, head_dim=16, seq_len=16, budget=1e10, loop_r1=True, variant="additive"
    ).model
    assert (add.n_prelude, add.n_recur, add.injection) == (1, 8, "additive") and param_counts(add).inject == 0
    assert LoopedGPT(add).param_split() == param_counts(add)


def test_control_without_recur_norm_is_the_plain_stack_less_one_norm():
    """recur_norm=False leaves out the shared RMSNorm after each iteration: the additive control then computes
    the plain stack's function (u = e, the same blocks in the same order) with one gain vector fewer; the
    default keeps the run ids of every shipped table."""
    from phifit.spec.run_config import make_run_id

    kw = dict(depth=10, r=1, width=32, head_dim=16, seq_len=16, budget=1e10, loop_r1=True, variant="additive")
    with_norm = make_train_config(**kw)
    without = make_train_config(**kw, recur_norm=False)
    assert make_run_id(make_train_config(**kw, recur_norm=True).identity()) == make_run_id(
        with_norm.identity()
    )
    assert make_run_id(without.identity()) != make_run_id(with_norm.identity())
    assert "recur_norm" not in with_norm.identity()["model"]  # ids from before the option are unchanged
    pc, pc_norm = param_counts(without.model), param_counts(with_norm.model)
    assert pc.norms == pc_norm.norms - 32 and pc.n_rec == pc_norm.n_rec
    torch.manual_seed(0)
    model = LoopedGPT(without.model)
    assert model.norm_recur is None and model.param_split() == pc
    # with the stack's blocks copied into a plain 10-layer model, both give the same logits up to the plain
    # model's own norm_recur before norm_final (a gain of 1 at init, and RMSNorm(RMSNorm(x)) = RMSNorm(x))
    plain = LoopedGPT(make_train_config(depth=10, r=1, width=32, head_dim=16, seq_len=16, budget=1e10).model)
    blocks = list(model.prelude) + list(model.recur) + list(model.coda)
    for dst, src in zip(plain.recur, blocks, strict=True):
        dst.load_state_dict(src.state_dict())
    for name in ("wte", "norm_emb", "norm_final", "lm_head"):
        getattr(plain, name).load_state_dict(getattr(model, name).state_dict())
    x = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        assert torch.allclose(model(x)[0], plain(x)[0], atol=1e-4)
