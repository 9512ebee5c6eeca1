"""The restricted wild cluster bootstrap test (phifit.bootstrap.wild) and the engine's per-row responses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from phifit.bootstrap.wild import WildTest, wild_cluster_test
from phifit.fitters.huber import fit_huber
from phifit.fitters.lm import batched_weighted_lm
from phifit.fitters.objective import law_model
from phifit.law import LawSpec
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate


def _fits(phi: float, seed: int, **noise):
    runs = table_from_frame(simulate("paper", params={"phi": phi}, seed=seed, **noise), source="sim")
    free = fit_huber(runs, n_starts=100)
    null = fit_huber(runs, n_starts=100, spec=LawSpec(fixed={"phi": 0.0}))
    return runs, free, null


def test_batched_lm_with_one_response_per_row_equals_separate_fits():
    runs, free, _ = _fits(0.459, 1, noise=0.004)
    spec = free.spec
    model = law_model(spec, runs.design)
    rng = np.random.default_rng(0)
    ys = runs.log_loss + rng.normal(0, 0.004, (3, len(runs)))
    x0 = np.tile(free.theta[spec.free_mask], (3, 1))
    together = batched_weighted_lm(model, x0, ys, 1.0, spec.lower, spec.upper)
    for i in range(3):
        alone = batched_weighted_lm(model, x0[i : i + 1], ys[i], 1.0, spec.lower, spec.upper)
        np.testing.assert_allclose(together.x[i], alone.x[0], rtol=1e-10, atol=1e-12)
        assert together.objective[i] == pytest.approx(alone.objective[0], rel=1e-12)
    with pytest.raises(ValueError, match="y has 2 rows for 3 starts"):
        batched_weighted_lm(model, x0, ys[:2], 1.0, spec.lower, spec.upper)


def test_a_false_restriction_gets_the_smallest_p_and_a_true_one_does_not():
    runs, free, null = _fits(0.459, 2, noise=0.004)
    false = wild_cluster_test(runs, free, null, n_boot=99, seed=0)
    assert false.p_value == pytest.approx(1 / 100) and false.n_failed == 0
    assert false.statistic == pytest.approx(null.objective - free.objective, rel=1e-9)
    assert false.block == "budget,r" and false.n_blocks == 24
    runs0, free0, null0 = _fits(0.0, 3, noise=0.003, cell_noise=0.003)
    true = wild_cluster_test(runs0, free0, null0, n_boot=99, seed=0)
    assert true.p_value > 0.1
    # the bootstrap statistics are drops of the objective: never negative
    assert all(v >= 0 for v in true.null_quantiles.values())


def test_signs_are_drawn_per_cell_and_the_result_reloads(tmp_path):
    runs, free, null = _fits(0.0, 4, noise=0.004)
    by_run = wild_cluster_test(runs, free, null, n_boot=49, block="run", seed=1)
    assert by_run.block == "run" and by_run.n_blocks == 116
    data = json.loads(json.dumps(by_run.to_dict()))
    back = WildTest.from_dict(data)
    assert back.to_dict() == by_run.to_dict() and "wild cluster bootstrap p" in back.summary()


def test_few_cells_are_flagged():
    frame = simulate("paper", params={"phi": 0.0}, noise=0.004, seed=5)
    frame = frame[frame["budget"] <= 1.0e18]  # 2 budgets x 4 r = 8 cells
    runs = table_from_frame(frame.reset_index(drop=True))
    free = fit_huber(runs, n_starts=100)
    null = fit_huber(runs, n_starts=100, spec=LawSpec(fixed={"phi": 0.0}))
    test = wild_cluster_test(runs, free, null, n_boot=49, seed=0)
    assert test.n_blocks == 8 and [w.kind for w in test.warnings] == ["few_clusters"]


def test_bad_arguments():
    runs, free, null = _fits(0.459, 6, noise=0.004)
    with pytest.raises(ValueError, match="n_boot must be >= 19"):
        wild_cluster_test(runs, free, null, n_boot=10)
    with pytest.raises(ValueError, match="must hold fixed every parameter"):
        wild_cluster_test(runs, null, free, n_boot=49)


def test_rows_the_lm_leaves_unconverged_are_finished_together(monkeypatch):
    """Issue #13: the rows the first LM leaves unconverged are finished by the batched
    active-set LM, not one scipy polish each, and reach the same objectives."""
    import phifit.bootstrap.wild as wild
    from phifit.fitters.objective import DELTA
    from phifit.law import log_loss

    runs, free, null = _fits(0.0, 4, noise=0.004)
    spec = free.spec
    y0 = log_loss(null.theta, runs.design)
    ys = y0 + np.random.default_rng(0).normal(0, 0.004, (40, len(runs)))
    law = wild.Refit(law_model(spec, runs.design), spec.lower, spec.upper, (free.theta[spec.free_mask],))
    polishes = []
    real = wild.polish_residuals
    monkeypatch.setattr(wild, "polish_residuals", lambda *a, **k: polishes.append(1) or real(*a, **k))
    full, ok_full = wild._refit(law, ys, DELTA)
    short, ok_short = wild._refit(law, ys, DELTA, max_iter=3)  # most rows stop unconverged
    assert ok_full.all() and ok_short.all()
    np.testing.assert_allclose(short, full, rtol=1e-8)
    assert len(polishes) < 5


def test_worker_processes_give_the_same_statistics():
    """n_jobs = 2 splits the wild tables over worker processes: the same T*, bit for bit."""
    runs0, free0, null0 = _fits(0.0, 3, noise=0.003, cell_noise=0.003)
    one = wild_cluster_test(runs0, free0, null0, n_boot=219, seed=1, n_jobs=1)
    two = wild_cluster_test(runs0, free0, null0, n_boot=219, seed=1, n_jobs=2)
    assert one.to_dict() == two.to_dict()


def test_tests_run_side_by_side_are_each_the_test_alone():
    """wild_cluster_tests runs several restrictions' refits in shared rounds (and on the workers
    once a round holds 200 tables): each test, with its stop rule, is the one it gives alone in
    this process (every table's refits and every stop decision are its own)."""
    from phifit.bootstrap.sequential import StopRule
    from phifit.bootstrap.wild import wild_cluster_tests

    runs, free, _ = _fits(0.2, 6, noise=0.003, cell_noise=0.003)
    true = fit_huber(runs, n_starts=100, spec=LawSpec(fixed={"phi": round(free.phi, 2)}))
    false = fit_huber(runs, n_starts=100, spec=LawSpec(fixed={"phi": 1.0}))
    rule = StopRule(risk=0.1, looks=(49, 99))
    together = wild_cluster_tests(runs, free, [true, false], n_boot=249, seed=2, n_jobs=2, stop=rule)
    for res, test in zip((true, false), together, strict=True):
        alone = wild_cluster_test(runs, free, res, n_boot=249, seed=2, n_jobs=1, stop=rule)
        assert test.to_dict() == alone.to_dict()
    # the true restriction is settled at the first look, the false one runs on to the second
    assert [t.n_boot for t in together] == [49, 99]
    # without a stop rule both run all 249 in one round, on the two workers: the same again
    together = wild_cluster_tests(runs, free, [true, false], n_boot=249, seed=3, n_jobs=2)
    for res, test in zip((true, false), together, strict=True):
        assert test.to_dict() == wild_cluster_test(runs, free, res, n_boot=249, seed=3, n_jobs=1).to_dict()


def test_a_dead_null_fit_also_starts_from_the_free_fit_with_its_fixed_values():
    """null_starts: the null's own fit; where its power term has vanished (log A = -5 with
    alpha = 2.5: the constant model), also the free fit's coordinates under the null's spec."""
    from phifit.bootstrap.wild import null_starts
    from phifit.law import Design

    r = np.array([1, 2, 4, 8, 16], dtype=float)
    design = Design.from_arrays(r, np.full(5, 4.0e6), np.full(5, 3.0e7), np.array([1e9, 2e9, 4e9, 1e9, 2e9]))
    spec0 = LawSpec(fixed={"phi": 0.0})
    theta1 = np.array([4.0, 0.4, 6.0, 0.35, 0.1, 0.7])
    live = np.array([3.0, 0.3, 5.0, 0.3, 0.2, 0.0])
    (own,) = null_starts(spec0, live, theta1, design)
    np.testing.assert_array_equal(own, live[:5])
    dead = np.array([-5.0, 2.5, 5.0, 0.3, 0.2, 0.0])
    own, free = null_starts(spec0, dead, theta1, design)
    np.testing.assert_array_equal(own, dead[:5])
    np.testing.assert_array_equal(free, theta1[:5])


def test_spread_starts_leave_a_dead_start_for_the_laws_optimum(monkeypatch):
    """A refit whose only start is the constant model (log A = -5, alpha = 2.5: the power term
    ~1e-20 of the loss, no gradient towards anything else) ends there.  The wild refit's spread
    search (as :func:`phifit.bootstrap.wild._refit` runs it, on the rows its first LM leaves
    unconverged) carries those rows to the optimum the law has from a live start."""
    import phifit.bootstrap.wild as wild
    from phifit.fitters.lm import best_of_starts
    from phifit.fitters.objective import DELTA
    from phifit.fitters.refit import search_spread, spread_in_box
    from phifit.law import Design, log_loss

    r = np.array([1, 2, 3, 4, 5, 6, 8, 10, 12, 16], dtype=float)
    design = Design.from_arrays(r, np.full(10, 4.0e6), np.full(10, 3.0e7), np.full(10, 2.0e9))
    spec = LawSpec(fixed={"B": 1e-12, "beta": 0.0, "phi": 0.5})
    truth = spec.full_theta(np.array([6.0, 0.35, 0.8]))  # free coordinates: log A, alpha, log E
    ys = log_loss(truth, design) + np.random.default_rng(0).normal(0, 0.002, (20, 10))
    model, lo, hi = law_model(spec, design), spec.lower, spec.upper
    corner = np.array([-5.0, 2.5, 0.9])
    _, live_obj, _ = best_of_starts(model, (truth[spec.free_mask],), ys, 1.0, lo, hi)
    best = best_of_starts(model, (corner,), ys, 1.0, lo, hi)
    assert np.all(best[1] > 1.5 * live_obj) and best[2].all()  # converged, on the constant model
    spread = spread_in_box(corner, lo, hi, len(ys), wild.N_SPREAD, np.random.default_rng(1))
    switched = search_spread(
        model, ys, 1.0, lo, hi, spread, (*best, None), delta=DELTA, prune_ratio=wild.SPREAD_PRUNE
    )
    assert switched.mean() >= 0.9 and np.mean(best[1] <= live_obj * (1 + 1e-6)) >= 0.9
    # _refit tries them on the rows its first LM leaves unconverged, and only there
    seen = []
    real = wild.search_spread
    monkeypatch.setattr(
        wild, "search_spread", lambda m, y, *a, **k: seen.append(len(y)) or real(m, y, *a, **k)
    )
    dead = wild.Refit(model, lo, hi, (corner,))
    wild._refit(dead, ys, DELTA, spread)  # every row converges: no spread search
    unconverged = int((~best_of_starts(model, (corner,), ys, 1.0, lo, hi, max_iter=3)[2]).sum())
    wild._refit(dead, ys, DELTA, spread, max_iter=3)
    assert unconverged > 0 and seen == [unconverged]
