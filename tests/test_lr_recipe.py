"""The learning-rate transfer of phifit.spec.lr_recipe (the study's App. D rules) and its run ids."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from phifit.spec.lr_recipe import effective_lrs, lr_factors, reference_tokens
from phifit.spec.run_config import make_run_id, make_train_config, param_counts
from phifit.spec.sweep_spec import load_spec, plan

SMALL = dict(depth=10, prelude=1, coda=1, head_dim=16, seq_len=128, batch_size=16, budget=4e12)


def test_width_batch_and_data_factors():
    ref = make_train_config(**SMALL, r=4, width=64, optimizer="muon", lr=0.01)
    # at the reference width and batch every AdamW group keeps its base rate
    f = lr_factors(ref, tokens=reference_tokens(ref))
    assert f["width"] == 1.0 and f["batch"] == 1.0 and f["data"] == pytest.approx(1.0)
    # muP: x (d / d_ref)^-1/2
    wide = make_train_config(**SMALL, r=4, width=256, optimizer="muon", lr=0.01)
    assert lr_factors(wide, 1e6)["width"] == pytest.approx(0.5)
    # batch: x (B / B_ref)^0.558, on the AdamW groups and on MuonH
    big = make_train_config(**{**SMALL, "batch_size": 64}, r=4, width=64, optimizer="muon", lr=0.01)
    fb = lr_factors(big, 1e6)
    assert fb["batch"] == pytest.approx(4**0.558) and fb["adamw"] == pytest.approx(4**0.558)
    # data: x (D / D_ref)^-0.32 on MuonH only; AdamW matrices take width x batch
    d_ref = reference_tokens(ref)
    assert lr_factors(ref, 8 * d_ref)["matrix"] == pytest.approx(8**-0.32)
    adam = make_train_config(**SMALL, r=4, width=256, optimizer="adamw", lr=0.003)
    assert lr_factors(adam, 8 * d_ref)["matrix"] == pytest.approx(0.5)


def test_reference_tokens_is_ten_per_effective_parameter():
    looped = make_train_config(**SMALL, r=2, width=128, optimizer="muon", lr=0.01)
    ref = make_train_config(**SMALL, r=4, width=64)  # the looped reference: r = 4 at d_ref
    pc = param_counts(ref.model)
    assert reference_tokens(looped) == pytest.approx(10 * (pc.n_once + 4 * pc.n_rec))
    plain = make_train_config(**SMALL, r=1, width=128)
    pc1 = param_counts(make_train_config(**SMALL, r=1, width=64).model)
    assert reference_tokens(plain) == pytest.approx(10 * (pc1.n_once + pc1.n_rec))


def test_none_keeps_base_rates_and_old_run_ids():
    cfg = make_train_config(**SMALL, r=4, width=32, lr_scaling="none", lr=0.003, embed_lr=0.03)
    lrs = effective_lrs(cfg, 1e6)
    assert lrs["matrix"] == 0.003 and lrs["embed"] == 0.03
    assert lrs["lanes"] == pytest.approx(0.01 * (32 / 640) ** -0.5)
    assert "lr_scaling" not in cfg.identity()
    mup = make_train_config(**SMALL, r=4, width=32, lr=0.003, embed_lr=0.03)
    assert mup.identity()["lr_scaling"] == "mup" and make_run_id(mup.identity()) != make_run_id(
        cfg.identity()
    )
    # the shipped CPU tables were trained before the transfer: their specs still plan their run ids
    for name, table in (
        ("cpu_small", "data/cpu_small_runs.csv"),
        ("cpu_planned", "data/cpu_planned_runs.csv"),
    ):
        planned = {r.run_id for r in plan(load_spec(name))}
        shipped = pd.read_csv(table).query("variant == 'baseline'")["run_id"]
        assert len(shipped) >= 44 and set(shipped) <= planned


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="lr_scaling='sqrt'"):
        make_train_config(**SMALL, r=1, width=32, lr_scaling="sqrt")
    with pytest.raises(ValueError, match="lr_ref_width=0"):
        make_train_config(**SMALL, r=1, width=32, lr_ref_width=0)
    assert math.isfinite(reference_tokens(make_train_config(**SMALL, r=8, width=16)))


def test_reference_does_not_need_the_runs_head_dim_to_divide_its_width():
    """A run whose head dim does not divide d_ref (48 against 64) gets the same D_ref as any other head dim:
    parameter counts do not depend on the heads (this once stopped with 'd_model=64, expected a multiple of
    head_dim=48')."""
    for r in (1, 4):
        odd = make_train_config(**{**SMALL, "head_dim": 48}, r=r, width=48, optimizer="muon", lr=0.02)
        usual = make_train_config(**SMALL, r=r, width=48, optimizer="muon", lr=0.02)
        assert reference_tokens(odd) == reference_tokens(usual) > 0
