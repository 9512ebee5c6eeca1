"""Delta-phi between recipes: paired block bootstrap, borrowed r = 1, same budgets, joint fit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from phifit.cli import main
from phifit.law import REFERENCE_PARAMS
from phifit.recipes.delta import compare_recipes, paired_block_weights
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

NOISE = 0.005
BOOT = 300


def two_recipes(
    phi_base: float,
    phi_var: float,
    *,
    seed: int = 0,
    variant_r1: bool = False,
    variant_budgets: int | None = None,
) -> pd.DataFrame:
    """A baseline on the paper design and a variant that reruns r > 1 (and r = 1 if asked),
    optionally only on its ``variant_budgets`` lowest budgets, as the study's probes do."""
    base = simulate("paper", params={**REFERENCE_PARAMS, "phi": phi_base}, noise=NOISE, seed=seed)
    base["variant"] = "baseline"
    var = simulate("paper", params={**REFERENCE_PARAMS, "phi": phi_var}, noise=NOISE, seed=seed + 1000)
    var["variant"] = "probe"
    var["run_id"] = var["run_id"] + "_probe"
    if not variant_r1:
        var = var[var.r > 1]
    if variant_budgets is not None:
        keep = sorted(var.budget.unique())[:variant_budgets]
        var = var[var.budget.isin(keep)]
    return pd.concat([base, var], ignore_index=True)


@pytest.fixture(scope="module")
def different():
    """Acceptance 4: phi 0.45 vs 0.65 on the same design (variant borrows r = 1)."""
    runs = table_from_frame(two_recipes(0.45, 0.65, seed=1))
    return compare_recipes(runs, n_boot=BOOT, seed=0, n_jobs=1, n_starts=200, n_wild=199)


def test_delta_phi_interval_excludes_0_and_covers_the_truth(different):
    d = different.delta_phi["probe"]
    lo, hi = d["ci"]
    assert lo > 0 and lo <= 0.2 <= hi
    assert d["p_value"] < 0.05 and d["n_failed"] == 0
    assert d["estimate"] == pytest.approx(d["variant_phi"] - d["baseline_phi"])
    assert d["ci_bca"][0] > 0
    assert different.fits["probe"].phi == pytest.approx(0.65, abs=0.06)


def test_equal_phi_interval_covers_0():
    runs = table_from_frame(two_recipes(0.46, 0.46, seed=2))
    rc = compare_recipes(runs, n_boot=BOOT, seed=0, n_jobs=1, n_starts=200, n_wild=199)
    d = rc.delta_phi["probe"]
    assert d["ci"][0] <= 0 <= d["ci"][1] and d["p_value"] > 0.05
    assert rc.joint.lr_p_value > 0.05 and "not rejected" in rc.joint.verdict
    assert rc.joint.wild.p_value > 0.05


def test_the_joint_test_of_a_shared_phi_is_a_wild_cluster_bootstrap(different):
    wild = different.joint.wild
    assert wild is not None and wild.n_boot == 199 and wild.block == "budget,r"
    assert wild.p_value == pytest.approx(1 / 200) and wild.statistic > 0
    # the statistic is the drop of the summed Huber objective from the shared to the joint fit
    assert wild.statistic == pytest.approx(
        different.joint.shared.objective - different.joint.fit.objective, rel=1e-9
    )
    assert (
        "wild cluster bootstrap p" in different.joint.verdict
        and "assumes independent runs" in different.joint.verdict
    )


def test_variant_without_r1_borrows_the_baselines(different):
    d = different.delta_phi["probe"]
    assert d["borrowed_r1"] == 29 and d["n_runs_variant"] == 87 + 29
    assert different.fits["probe"].n_runs == 116
    assert any("borrowed the baseline's 29 r = 1 runs" in n for n in different.notes)


def test_baseline_is_refit_on_the_variants_budgets():
    """The study's lesson: Delta-phi uses the baseline refit on the same budgets."""
    runs = table_from_frame(two_recipes(0.45, 0.45, seed=3, variant_budgets=4))
    rc = compare_recipes(runs, baseline="baseline", n_boot=0, n_starts=200, joint=False)
    refit = rc.baseline_refits["probe"]
    assert refit.n_runs == 80 and rc.fits["baseline"].n_runs == 116
    d = rc.delta_phi["probe"]
    assert d["baseline_phi"] == refit.phi != rc.fits["baseline"].phi
    assert d["estimate"] == pytest.approx(rc.fits["probe"].phi - refit.phi)
    assert len(d["budgets"]) == 4 and d["ci"] is None and d["p_value"] is None
    assert "refitted on the same budgets" in rc.summary()


def test_paired_weights_move_shared_cells_together():
    runs = table_from_frame(two_recipes(0.45, 0.65, seed=4))
    frame = runs.frame
    base = table_from_frame(frame[frame.variant == "baseline"])
    probe = table_from_frame(
        pd.concat([frame[frame.variant == "probe"], frame[(frame.variant == "baseline") & (frame.r == 1)]])
    )
    (wv, wb), (jv, jb) = paired_block_weights([probe, base], ["budget", "r"], 200, np.random.default_rng(0))
    assert wv.shape == (200, len(probe)) and wb.shape == (200, len(base))
    # the same cell gets the same count in both recipes (shared r = 1 runs included)
    key_v = list(zip(probe.frame.budget, probe.frame.r))
    key_b = list(zip(base.frame.budget, base.frame.r))
    for i, kv in enumerate(key_v):
        j = key_b.index(kv)
        np.testing.assert_array_equal(wv[:, i], wb[:, j])
    # 24 cells in the union, 24 draws per replicate; the jackknife deletes one cell
    counts = {}
    for k, w in zip(key_b, wb.T):
        counts[k] = w
    assert np.all(np.sum(list(counts.values()), axis=0) == 24)
    assert jv.shape[0] == 24 and np.all(jb.sum(axis=0) == 23)


def test_run_blocks_pair_the_shared_runs():
    # a loop-only recipe borrows the baseline's r = 1 runs: with single-run blocks each shared
    # run must get the same weight in both tables (drawn once), not two independent ones
    runs = table_from_frame(two_recipes(0.45, 0.65, seed=4))
    frame = runs.frame
    base = table_from_frame(frame[frame.variant == "baseline"])
    probe = table_from_frame(
        pd.concat([frame[frame.variant == "probe"], frame[(frame.variant == "baseline") & (frame.r == 1)]])
    )
    (wv, wb), (jv, jb) = paired_block_weights([probe, base], ["run"], 400, np.random.default_rng(0))
    ids_b = list(base.frame.run_id)
    shared = [(i, ids_b.index(rid)) for i, rid in enumerate(probe.frame.run_id) if rid in ids_b]
    assert len(shared) == int((base.frame.r == 1).sum()) > 0
    for i, j in shared:
        np.testing.assert_array_equal(wv[:, i], wb[:, j])
    # unshared runs are drawn independently of one another: weights uncorrelated across runs
    own = [i for i in range(len(probe)) if probe.frame.run_id.iloc[i] not in ids_b]
    assert abs(np.corrcoef(wv[:, own[0]], wb[:, 0])[0, 1]) < 0.2
    # one draw per run of the union; the jackknife deletes one run
    n_union = len(set(probe.frame.run_id) | set(ids_b))
    assert np.all(wv.sum(1) + wb.sum(1) - sum(wv[:, i] for i, _ in shared) == n_union)
    assert jv.shape[0] == n_union and np.all(jb.sum(axis=0) == n_union - 1)


def test_joint_fit_with_a_phi_per_recipe(different):
    j = different.joint
    assert set(j.phi) == {"baseline", "probe"}
    assert j.phi["probe"] - j.phi["baseline"] == pytest.approx(0.2, abs=0.07)
    assert j.delta_phi["probe"] == pytest.approx(j.phi["probe"] - j.phi["baseline"])
    assert j.lr_df == 1 and j.lr_p_value < 1e-6 and j.aic < j.shared_aic
    assert j.n_runs == 116 + 87  # borrowed r = 1 runs enter once
    assert j.r2 > j.shared.r2 and "rejected" in j.verdict


def test_result_round_trips_through_json(different, tmp_path):
    from phifit.recipes.delta import RecipeComparison

    different.to_json(tmp_path / "recipes.json")
    again = RecipeComparison.from_json(tmp_path / "recipes.json")
    assert again.to_dict() == different.to_dict()
    assert again.warnings == different.warnings
    assert again.joint.phi == different.joint.phi and again.joint.lr == different.joint.lr
    assert again.fits["probe"].params == different.fits["probe"].params
    assert again.summary() == different.summary()


def test_cautions_are_data(different):
    """Every note of the recipes is a Caution (source "recipes", or "joint" from the joint
    fitter), reachable as data for results.json["warnings"]."""
    from phifit.cautions import Caution

    assert all(isinstance(w, Caution) for w in different.warnings)
    borrowed = [w for w in different.warnings if w.kind == "borrowed_r1"]
    assert len(borrowed) == 1 and borrowed[0].source == "recipes" and borrowed[0].values["n_runs"] == 29
    assert any(w.kind == "approximate_lr" for w in different.warnings)
    assert different.notes == [w.message for w in different.warnings]


# -- the joint fit runs through the refit engine ----------------------------------------------

#: The joint fit of the code before issue #11 (recipes._joint_fit: its own box, LM call and
#: polish), Huber objective on two_recipes(0.45, 0.65, seed=1), seed 0, 100 starts.
OLD_JOINT_OBJECTIVE = 0.0005528146274186778


def test_joint_fit_through_the_engine_is_no_worse_than_the_old_one():
    from phifit.fitters.objective import huber
    from phifit.fitters.per_recipe_phi import JointOptions, fit_joint, joint_log_loss

    runs = table_from_frame(two_recipes(0.45, 0.65, seed=1))
    fit = fit_joint(runs, "variant", reference="baseline", options=JointOptions(n_starts=100, seed=0))
    assert fit.objective <= OLD_JOINT_OBJECTIVE * (1 + 1e-12)
    assert fit.objective == pytest.approx(OLD_JOINT_OBJECTIVE, rel=1e-9)
    # the objective is the engine's summed Huber at the reported parameters
    res = joint_log_loss(fit, runs, "variant") - runs.log_loss
    assert fit.objective == pytest.approx(huber(res, 1e-3).sum(), rel=1e-12)
    # a FitResult that says how to refit it: box, loss, delta; per-recipe phi in extras
    assert fit.method == "joint" and fit.loss == "huber" and fit.delta == 1e-3 and fit.loss_delta == 1e-3
    assert fit.bounds["phi"] == [-3.0, 3.0] and fit.spec.bounds["a"] == (-5.0, 35.0)
    assert set(fit.extras["phi"]) == {"baseline", "probe"} and fit.phi == fit.extras["phi"]["baseline"]
    assert fit.n_runs == len(runs) and fit.converged
    # the shared-phi null goes through the same path, and a phi per recipe can only fit better
    shared = fit_joint(runs, "variant", shared_phi=True, options=JointOptions(n_starts=100, seed=0))
    assert shared.objective > fit.objective and len(set(shared.extras["phi"].values())) == 1
    again = type(fit).from_json(fit.to_json())
    assert again.extras["phi"] == fit.extras["phi"] and again.bounds == fit.bounds


def test_joint_fit_least_squares_carries_its_loss():
    from phifit.fitters.per_recipe_phi import JointOptions, fit_joint

    runs = table_from_frame(two_recipes(0.45, 0.65, seed=1))
    fit = fit_joint(runs, "variant", method="lsq", options=JointOptions(n_starts=50))
    assert fit.loss == "squares" and fit.delta is None and fit.extras["fit_method"] == "lsq"
    assert fit.extras["phi"]["probe"] - fit.extras["phi"]["baseline"] == pytest.approx(0.2, abs=0.07)


def test_json_contract_via_cli(tmp_path, capsys):
    csv, out = tmp_path / "runs.csv", tmp_path / "recipes.json"
    two_recipes(0.45, 0.65, seed=5).to_csv(csv, index=False)
    assert (
        main(
            [
                "fit",
                str(csv),
                "--by",
                "variant",
                "--baseline",
                "baseline",
                "--bootstrap",
                "40",
                "--starts",
                "100",
                "--quiet",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert "Delta-phi" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert set(data["fits"]) == {"baseline", "probe"}
    assert data["fits"]["probe"]["method"] == "huber"
    d = data["delta_phi"]["probe"]
    assert set(d) >= {"estimate", "ci", "p_value"} and len(d["ci"]) == 2
    assert data["generator"] == "phifit"
    assert main(["fit", str(csv), "--by", "variant", "--baseline", "nope"]) == 2
    assert "baseline 'nope' is not a value of 'variant'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"by": "nope"}, "no column 'nope'"),
        ({"baseline": "x"}, "baseline 'x' is not a value"),
        ({"n_boot": 1}, "n_boot must be 0"),
        ({"method": "bayes"}, "unknown method 'bayes'"),
    ],
)
def test_bad_arguments(kwargs, message):
    runs = table_from_frame(two_recipes(0.45, 0.65, seed=6))
    with pytest.raises(ValueError, match=message):
        compare_recipes(runs, **kwargs)


def test_single_recipe_is_refused():
    frame = simulate("paper")
    frame["variant"] = "only"
    with pytest.raises(ValueError, match="single value"):
        compare_recipes(table_from_frame(frame))


# -- one recipe out of a mixed table (fit, compare and equiv on a table with a variant column) ----


def test_select_recipe_defaults_to_the_baseline_and_says_so():
    from phifit.recipes.delta import select_recipe

    frame = two_recipes(0.45, 0.65, seed=3)
    runs = table_from_frame(frame, source="mixed.csv")
    n_base = int((frame.variant == "baseline").sum())
    sel = select_recipe(runs)
    assert sel.recipe == "baseline" and len(sel.runs) == n_base < len(runs)
    assert set(sel.runs.frame["variant"]) == {"baseline"}
    assert sel.runs.source == "mixed.csv[variant=baseline]"
    assert f"baseline {n_base}, probe {len(frame) - n_base} runs" in sel.note and "--by variant" in sel.note


def test_select_recipe_borrows_r1_for_a_loop_only_variant():
    from phifit.recipes.delta import select_recipe

    frame = two_recipes(0.45, 0.65, seed=3)
    runs = table_from_frame(frame)
    sel = select_recipe(runs, "probe")
    probe = frame[frame.variant == "probe"]
    r1 = frame[(frame.variant == "baseline") & (frame.r == 1)]
    assert not (probe.r == 1).any()
    assert len(sel.runs) == len(probe) + len(r1)
    assert f"{len(r1)} of them the baseline's r = 1 runs" in sel.note
    # the selected runs recover the probe's phi, the pooled table does not
    from phifit.fitters.huber import HuberOptions, fit_huber

    opts = HuberOptions(n_starts=100)
    assert fit_huber(sel.runs, options=opts).phi == pytest.approx(0.65, abs=0.06)
    assert abs(fit_huber(runs, options=opts).phi - 0.65) > 0.06


def test_select_recipe_errors_and_single_recipe_tables():
    from phifit.recipes.delta import select_recipe

    frame = two_recipes(0.45, 0.65, seed=3)
    renamed = table_from_frame(frame.replace({"variant": {"baseline": "full"}}), source="m.csv")
    with pytest.raises(
        ValueError,
        match=r"m.csv: column 'variant' holds several recipes \(full \d+, probe "
        r"\d+ runs\) and none is named 'baseline'; pick one with --variant",
    ):
        select_recipe(renamed)
    with pytest.raises(ValueError, match="none is 'nope'"):
        select_recipe(renamed, "nope")
    single = table_from_frame(frame[frame.variant == "baseline"], source="one.csv")
    sel = select_recipe(single)
    assert sel.runs is single and sel.note is None and sel.recipe is None
    assert select_recipe(single, "baseline").runs is single
    with pytest.raises(
        ValueError, match="one.csv: recipe 'probe' asked for, but column 'variant' holds only"
    ):
        select_recipe(single, "probe")


def test_cli_fit_and_compare_analyse_one_recipe(tmp_path, capsys):
    frame = two_recipes(0.45, 0.65, seed=4)
    csv = tmp_path / "mixed.csv"
    frame.to_csv(csv, index=False)
    out = tmp_path / "fit.json"
    assert main(["fit", str(csv), "--starts", "100", "--quiet", "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note:" in err and "uses 'baseline'" in err
    data = json.loads(out.read_text())
    assert data["n_runs"] == int((frame.variant == "baseline").sum())
    assert data["source"].endswith("[variant=baseline]")
    assert data["params"]["phi"] == pytest.approx(0.45, abs=0.06)
    assert (
        main(
            [
                "fit",
                str(csv),
                "--variant",
                "probe",
                "--starts",
                "100",
                "--quiet",
                "--json",
                str(out),
                "--force",
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["params"]["phi"] == pytest.approx(0.65, abs=0.06)
    assert main(["fit", str(csv), "--by", "variant", "--variant", "probe"]) == 2
    assert "--variant picks one recipe" in capsys.readouterr().err
    cmp_out = tmp_path / "cmp.json"
    assert (
        main(
            [
                "compare",
                str(csv),
                "--parts",
                "0",
                "--variant",
                "probe",
                "--starts",
                "100",
                "--no-cv",
                "--quiet",
                "--json",
                str(cmp_out),
            ]
        )
        == 0
    )
    fits = json.loads(cmp_out.read_text())["fits"]
    assert fits["free"]["n_runs"] == len(frame[frame.variant == "probe"]) + int(
        ((frame.variant == "baseline") & (frame.r == 1)).sum()
    )


def test_few_blocks_make_the_delta_phi_interval_rough():
    """Two budgets give 8 (budget, r) cells: the comparison says its interval is rough."""
    runs = table_from_frame(two_recipes(0.45, 0.65, seed=6, variant_budgets=2))
    rc = compare_recipes(runs, n_boot=20, seed=0, n_jobs=1, n_starts=100, joint=False)
    assert rc.delta_phi["probe"]["n_blocks"] == 8
    assert any("resamples only 8 blocks 'budget,r'" in n for n in rc.notes)
    full = compare_recipes(
        table_from_frame(two_recipes(0.45, 0.65, seed=6)),
        n_boot=20,
        seed=0,
        n_jobs=1,
        n_starts=100,
        joint=False,
    )
    assert full.delta_phi["probe"]["n_blocks"] == 24 and not any("only" in n for n in full.notes)


def three_recipes(seed: int = 7, variant_budgets: int = 2) -> pd.DataFrame:
    """The baseline and two loop-only variants probed on the same lower budgets."""
    frame = two_recipes(0.45, 0.65, seed=seed, variant_budgets=variant_budgets)
    other = two_recipes(0.45, 0.40, seed=seed + 1, variant_budgets=variant_budgets)
    other = other[other.variant == "probe"].assign(variant="probe2")
    other["run_id"] = other["run_id"] + "2"
    return pd.concat([frame, other], ignore_index=True)


def test_variants_on_the_same_cells_share_the_baselines_draws(monkeypatch):
    """Issue #13: the cells are drawn once, the baseline (on the variants' budgets) is fitted
    once and refitted once per replicate; the first variant's bootstrap is exactly its
    one-variant bootstrap, the second is refitted on the same draws."""
    import phifit.recipes.delta as recipes
    import phifit.recipes.pairing as pairing

    refits, fits = [], []
    real_refit, real_fit = pairing.refit_phi, recipes.fit_law
    monkeypatch.setattr(
        pairing, "refit_phi", lambda table, *a, **k: refits.append(table.source) or real_refit(table, *a, **k)
    )
    monkeypatch.setattr(
        recipes, "fit_law", lambda table, *a, **k: fits.append(table.source) or real_fit(table, *a, **k)
    )
    frame = three_recipes()
    opts = {"n_boot": 30, "seed": 0, "n_jobs": 1, "n_starts": 100, "joint": False}
    both = compare_recipes(table_from_frame(frame, source="t"), **opts)
    base = "t[variant=baseline]"
    assert fits.count(base) == 1  # on the variants' two budgets (its full fit is source "t")
    assert refits.count(base) == 2  # the bootstrap and the jackknife, shared by both variants
    assert both.baseline_refits["probe"] is both.baseline_refits["probe2"]
    assert both.delta_phi["probe"]["shared_draws"] == ["probe2"]
    assert both.delta_phi["probe2"]["shared_draws"] == ["probe"]
    alone = compare_recipes(table_from_frame(frame[frame.variant != "probe2"], source="t"), **opts)
    for key in ("estimate", "ci", "ci_bca", "p_value", "n_failed", "bootstrap_sd", "n_blocks"):
        assert both.delta_phi["probe"][key] == alone.delta_phi["probe"][key]
    assert "shared_draws" not in alone.delta_phi["probe"]
    assert both.delta_phi["probe2"]["n_blocks"] == 8


def test_the_grouped_models_two_step_evaluation_is_the_one_step_one():
    """GroupedLaw.model and the free multipliers' model split an evaluation into predictions and
    Jacobian (the LM skips the Jacobian of rejected steps): the same numbers as the one-step call,
    on every row and on a subset of rows, and the Jacobian matches central differences."""
    from phifit.diagnostics.multipliers import GroupedModel
    from phifit.fitters.per_recipe_phi import GroupedLaw
    from phifit.law import params_to_theta

    runs = table_from_frame(simulate("paper", noise=0.004, seed=2))
    groups = np.searchsorted(np.unique(runs.r), runs.r)
    recipes = tuple(f"r{int(v)}" for v in np.unique(runs.r))
    rng = np.random.default_rng(0)
    base = params_to_theta(REFERENCE_PARAMS)[:5]  # a, alpha, b, beta, e
    x = base[None, :] + 0.01 * rng.standard_normal((6, 5))
    x = np.concatenate([x, 0.3 + 0.2 * rng.random((6, len(recipes)))], axis=1)
    model = GroupedLaw(recipes=recipes, groups=groups).model(runs.design)
    pred, jac = model(x)
    pred2, parts = model.forward(x)
    assert np.array_equal(pred, pred2) and np.array_equal(jac, model.jacobian(parts))
    some = np.array([True, False, True, False, False, True])
    assert np.array_equal(model.jacobian(tuple(p[some] for p in parts)), jac[some])
    step = 1e-6
    for k in range(x.shape[1]):
        up, down = x.copy(), x.copy()
        up[:, k] += step
        down[:, k] -= step
        numeric = (model(up)[0] - model(down)[0]) / (2 * step)
        assert np.allclose(jac[:, k, :], numeric, rtol=1e-5, atol=1e-8), k
    held = GroupedModel(recipes, groups, runs.design, held={1: float(x[0, 1])})
    free = [i for i in range(x.shape[1]) if i != 1]
    pred_h, jac_h = held(x[:, free])
    full = x.copy()
    full[:, 1] = x[0, 1]
    pred_f, jac_f = model(full)
    assert np.array_equal(pred_h, pred_f) and np.array_equal(jac_h, jac_f[:, free, :])
