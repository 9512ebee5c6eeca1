"""The retrospective benchmark of the next-runs policy (benchmarks/sequential_design.py) on a tiny
configuration: the study pool, 2 pilots, 50 bootstrap replicates, 2 rounds of 4 runs."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
try:
    import sequential_design as sd
finally:
    sys.path.remove(str(BENCHMARKS))

K = 4
ROUNDS = 2


@pytest.fixture(scope="module")
def pool():
    return sd.load_pool("study")


@pytest.fixture(scope="module")
def pilots(pool):
    return sd.draw_pilots(pool, sd.PILOT_BUDGETS["study"], 2, seed=0)


@pytest.fixture(scope="module")
def runs(pool, pilots):
    """Every policy's trajectory from each of the two pilots."""
    return [
        sd.run_pilot(pool, p, i, policies=sd.POLICIES, k=K, n_boot=50, target=0.1, seed=0, max_rounds=ROUNDS)
        for i, p in enumerate(pilots)
    ]


def test_pilots_are_half_of_each_low_cell_and_distinct(pool, pilots):
    low = sorted(pool["budget"].unique())[:2]
    for rows in pilots:
        chosen = pool.loc[rows]
        assert set(chosen["budget"]) == set(low)
        cells = pool[pool["budget"].isin(low)].groupby(["budget", "r"]).size()
        got = chosen.groupby(["budget", "r"]).size()
        assert got.to_dict() == {c: math.ceil(n / 2) for c, n in cells.items()}
        assert (chosen.groupby("r").size() >= 2).all()
    assert len(pilots[0]) == 20
    assert tuple(pilots[0]) != tuple(pilots[1])
    # fixed seeds: the same pilots again
    again = sd.draw_pilots(pool, 2, 2, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(pilots, again))


def test_cpu_pool_keeps_runs_trained_in_both_tables():
    cpu = sd.load_pool("cpu")
    assert len(cpu) == 44 + 88
    assert cpu["run_id"].is_unique
    base = cpu["run_id"].str.split(":", n=1).str[1]
    assert base.duplicated().sum() == 20


def test_trajectories_are_monotone_in_flops(runs, pool):
    total = pool["flops"].sum()
    for by_policy in runs:
        for policy, states in by_policy.items():
            assert len(states) == ROUNDS + 1, policy
            flops = [s["flops"] for s in states]
            assert all(b > a for a, b in zip(flops, flops[1:])), policy
            assert [s["n_runs"] for s in states] == [20 + K * i for i in range(ROUNDS + 1)]
            for s in states:
                assert s["share"] == pytest.approx(s["flops"] / total)
                assert s["width"] > 0


def test_picks_are_distinct_new_pool_rows(runs, pilots, pool):
    for pilot, by_policy in zip(pilots, runs):
        for policy, states in by_policy.items():
            added = [i for s in states for i in s["added"]]
            assert len(added) == K * ROUNDS, policy
            assert len(set(added)) == len(added), policy
            assert not set(added) & set(pilot.tolist()), policy
            assert all(0 <= i < len(pool) for i in added)
            # the state's flops are the pilot's plus the picks'
            assert states[-1]["flops"] == pytest.approx(pool.loc[list(pilot) + added, "flops"].sum())


def test_static_orders(runs, pilots, pool):
    for pilot, by_policy in zip(pilots, runs):
        left = [i for i in range(len(pool)) if i not in set(pilot.tolist())]
        study = sd.static_order("study-order", pool, left, np.random.default_rng(0))
        keys = [(pool.loc[i, "budget"], i) for i in study]
        assert keys == sorted(keys)  # budget ascending, file order within a budget
        added = [i for s in by_policy["study-order"] for i in s["added"]]
        assert added == study[: len(added)]
        # the pilot takes half of the lowest budget: the study order finishes that budget first
        assert set(pool.loc[added, "budget"]) == {pool["budget"].min()}
        cheap = [i for s in by_policy["cheapest"] for i in s["added"]]
        flops = pool.loc[cheap, "flops"].to_numpy()
        assert np.all(np.diff(flops) >= 0)
        assert flops[-1] <= pool.loc[left, "flops"].drop(cheap).min()
        rand = [i for s in by_policy["random"] for i in s["added"]]
        assert rand != study[: len(rand)]


def test_metrics_on_a_hand_made_trajectory():
    states = [
        {"share": 0.02, "width": math.inf},
        {"share": 0.08, "width": 0.30},
        {"share": 0.12, "width": 0.09},
        {"share": 0.30, "width": 0.12},
        {"share": 0.55, "width": 0.05},
    ]
    assert sd.share_to_target(states, 0.1) == 0.12  # the first state within the target
    assert sd.share_to_target(states, 0.01) is None
    assert sd.width_at(states, 0.10) == 0.30
    assert sd.width_at(states, 0.25) == 0.09
    assert sd.width_at(states, 0.50) == 0.12  # the last state within 50%, though wider
    assert sd.width_at(states, 0.01) is None
    q = sd.quantiles([0.1, 0.2, None, 0.3, 0.4])
    assert q["median"] == 0.3 and q["n_none"] == 1 and math.isinf(q["q90"])
    summary = sd.summarise({"a": [states, states[:2]]}, 0.1)["a"]
    assert summary["not_reached"] == 1
    assert summary["to_target_per_pilot"] == [0.12, None]
    assert summary["width_at_per_pilot"]["0.25"] == [0.09, 0.30]
    wins = sd.paired_wins({"phifit": [states, states], "b": [states[:2], states]}, 0.1)
    assert wins == {"b": {"less": 1, "same": 1, "more": 0}}


def test_simulated_realisations_share_the_design_and_pool_their_pairs():
    """study-sim:SEED is the study's design with another draw of the losses (study-sim is seed 1),
    and the pooled summary counts every (realisation, pilot) pair against its own target."""
    one, again, two = sd.load_pool("study-sim"), sd.load_pool("study-sim:1"), sd.load_pool("study-sim:2")
    assert one.equals(again)
    assert one.drop(columns="loss").equals(two.drop(columns="loss"))
    assert not np.allclose(one["loss"], two["loss"])
    # same noise model: the two draws' log-loss differences are a few thousandths, not zero
    diff = np.log(one["loss"]) - np.log(two["loss"])
    assert 0.002 < float(diff.std()) < 0.01
    with pytest.raises(ValueError, match="unknown pool 'cpu:2'"):
        sd.load_pool("cpu:2")

    fast = [{"share": 0.1, "width": 0.09}]
    slow = [{"share": 0.1, "width": 0.5}, {"share": 0.3, "width": 0.09}]
    results = [
        {"pool": f"study-sim:{i}", **sd_result}
        for i, sd_result in enumerate(
            [
                {"summary": sd.summarise({"phifit": [fast, slow], "b": [slow, slow]}, 0.1)},
                {"summary": sd.summarise({"phifit": [slow, slow], "b": [fast, slow]}, 0.1)},
            ],
            start=1,
        )
    ]
    results[0]["phifit_vs"] = sd.paired_wins({"phifit": [fast, slow], "b": [slow, slow]}, 0.1)
    results[1]["phifit_vs"] = sd.paired_wins({"phifit": [slow, slow], "b": [fast, slow]}, 0.1)
    pooled = sd.over_realisations(results)
    assert pooled["pairs"] == 4
    assert pooled["phifit_vs"] == {"b": {"less": 1, "same": 2, "more": 1}}
    assert pooled["to_target_mean"]["phifit"] == pytest.approx((0.1 + 0.3 * 3) / 4)
    assert pooled["to_target"]["b"]["median"] == 0.3
    assert "4 (realisation, pilot) pairs" in sd.format_realisations(pooled)


def test_true_widths_walk_each_trajectory_until_the_target():
    """On a simulated pool the truth reads each state's width as the sd of phi over fresh
    realisations (the same for every state) and walks a trajectory only until the target."""
    sim = sd.load_pool("study-sim")
    pilot = sd.draw_pilots(sim, 2, 1, seed=0)[0]
    left = [i for i in range(len(sim)) if i not in set(pilot.tolist())]
    order = sd.static_order("study-order", sim, left, None)
    total = sim["flops"].sum()
    states, rows = [{"share": sim.loc[pilot, "flops"].sum() / total, "added": []}], list(pilot)
    for batch in (order[:30], order[30:60], order[60:]):
        rows += batch
        states.append({"share": sim.loc[rows, "flops"].sum() / total, "added": batch})
    losses = sd.truth_losses(4)
    assert losses.shape == (4, len(sim)) and not np.allclose(losses[0], losses[1])
    full = sd.true_width(sim, range(len(sim)), losses)
    assert 0.02 < full < 0.3
    assert sd.true_width(sim, list(reversed(range(len(sim)))), losses) == full  # rows in any order
    true = sd.truth(sim, [pilot], {"study-order": [states]}, realisations=4)
    assert true["full_width"] == full and true["target"] == pytest.approx(1.1 * full)
    walk = true["walks"]["study-order"][0]
    reached = [w["width"] <= true["target"] for w in walk]
    assert reached[-1] or len(walk) == len(states)  # walked until within the target, or to the end
    assert not any(reached[:-1])
    assert true["to_target_per_pilot"]["study-order"] == [sd.share_to_target(walk, true["target"])]


def test_remeasure_reads_the_metrics_off_precise_widths(runs, pilots, pool):
    """The second stage: every state within 50% gets a fresh width (rows in pool order, seed 0),
    the quick one is kept, and the metrics then read the fresh one."""
    trajectories = {p: [by_policy[p] for by_policy in runs] for p in ("phifit", "cheapest")}
    quick = {p: [[s["width"] for s in t] for t in ts] for p, ts in trajectories.items()}
    n = sd.remeasure(pool, pilots, trajectories, n_boot=60, target=0.0)
    states = [s for ts in trajectories.values() for t in ts for s in t]
    assert n == len(
        {
            frozenset(r)
            for ts in trajectories.values()
            for p, t in zip(pilots, ts)
            for r in sd.state_rows(p, t)
        }
    )
    for p, ts in trajectories.items():
        for t, widths in zip(ts, quick[p]):
            assert [s["width_quick"] for s in t] == widths
    # a state's fresh width is the measurement of its rows, in any order
    s0, rows0 = trajectories["phifit"][0][-1], sd.state_rows(pilots[0], trajectories["phifit"][0])[-1]
    assert s0["width"] == pytest.approx(sd.measure(pool, sorted(rows0), 60)["width"])
    assert all(s["width"] is not None and s["width"] > 0 for s in states)  # all within 50%
    # a target nobody reaches: nothing is reached, the widths at each share still are read
    summary = sd.summarise(trajectories, 0.0)
    assert summary["phifit"]["not_reached"] == len(pilots)
    assert summary["phifit"]["width_at_per_pilot"]["0.1"] == [
        sd.width_at(t, 0.1) for t in trajectories["phifit"]
    ]


def test_remeasure_goes_past_the_largest_share_only_until_the_target():
    """Beyond 50% of the FLOPs, states are measured one by one until one is within the target."""
    pool = sd.load_pool("study")
    pilot = sd.draw_pilots(pool, 2, 1, seed=0)[0]
    order = sd.static_order(
        "study-order", pool, [i for i in range(len(pool)) if i not in set(pilot.tolist())], None
    )
    total = pool["flops"].sum()
    states, rows = [], list(pilot)
    for batch in (order[:40], order[40:60], order[60:80], order[80:]):
        rows += batch
        states.append({"share": pool.loc[rows, "flops"].sum() / total, "width": 1.0, "added": batch})
    assert states[1]["share"] < 0.5 < states[2]["share"]
    sd.remeasure(pool, [pilot], {"study-order": [states]}, n_boot=60, target=10.0)
    # the target is reached within 50%: nothing beyond is measured
    assert [s["width"] is None for s in states] == [False, False, True, True]
    sd.remeasure(pool, [pilot], {"study-order": [states]}, n_boot=60, target=0.0)
    assert all(s["width"] is not None for s in states)  # never reached: measured to the end
    assert [s["width_quick"] for s in states] == [1.0] * 4


# -- ideas for the policy (benchmarks/sequential_variants.py) -------------------------------------
def _variants():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import sequential_variants
    finally:
        sys.path.remove(str(BENCHMARKS))
    return sequential_variants


def test_variant_names_and_the_spread_order():
    sv = _variants()
    assert sv.parse_variant("current") == ("current", None)
    assert sv.parse_variant("cell-noise:0.003") == ("cell-noise", 0.003)
    for bad in ("cell-noise:0", "cell-noise:x", "noise", "cell-noise"):
        with pytest.raises(ValueError, match="expected current, spread, curves or cell-noise:SD"):
            sv.parse_variant(bad)
    picks = [("a", 1), ("b", 1), ("c", 2), ("d", 1), ("e", 3)]
    assert sv.spread_over_cells(picks, 3) == ["a", "c", "e"]
    assert sv.spread_over_cells(picks, 5) == ["a", "c", "e", "b", "d"]


def test_a_picker_that_fails_or_picks_nothing_is_topped_up_cheapest_first(pool, pilots):
    from phifit.fitters.huber import fit_huber

    rows = list(pilots[0])
    fit = fit_huber(sd.table(pool, rows))
    left = [i for i in range(len(pool)) if i not in set(rows)]
    cheapest = sd.static_order("cheapest", pool, left, np.random.default_rng(0))[:K]

    def nothing(*args):
        return [], math.nan

    def fails(*args):
        raise RuntimeError("no plan")

    for picker in (nothing, fails):
        batch, filled, _ = sd.planner_batch(pool, rows, K, fit, True, picker=picker)
        assert batch == cheapest and filled == K
    shipped = sd.planner_batch(pool, rows, K, fit, True)
    spread = sd.planner_batch(pool, rows, K, fit, True, picker=_variants().variant_picker("spread", None))
    assert shipped[1] == spread[1] == 0 and len(set(spread[0])) == K
    cells = {(pool.loc[i, "budget"], pool.loc[i, "r"]) for i in spread[0]}
    assert len(cells) == K  # four picks, four cells
    shipped_cells = {(pool.loc[i, "budget"], pool.loc[i, "r"]) for i in shipped[0]}
    assert len(shipped_cells) < K  # where the shipped batch doubles up


def test_the_curves_variant_moves_the_bend_into_the_cell_term_only_inside_its_block(pool, pilots):
    from phifit.fitters.huber import fit_huber
    from phifit.plan import inputs

    runs = sd.table(pool, list(pilots[0]))
    fit = fit_huber(runs)
    shipped = inputs.pilot_noise
    before, _ = inputs.pilot_noise(runs, fit)
    with _variants().bend_as_cell_noise():
        inside, carried = inputs.pilot_noise(runs, fit)
        curves = inputs.misfit_from_pilot(runs, fit, shape=True)
    assert inputs.pilot_noise is shipped
    assert inside.per_run == pytest.approx(curves.shape_sd) and inside.per_run < before.per_run
    # the total variance a run sees is kept: the bend moves from the per-run part to the cell part
    assert inside.per_run**2 + inside.cell**2 == pytest.approx(before.per_run**2 + before.cell**2, rel=1e-9)
    assert carried is not None
