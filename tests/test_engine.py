"""The refit engine's vectorised finish (active-set LM), blocked evaluation and row state.

Problems: the paper design (116 runs) with losses from a law whose E lies below the box
(log E = log 0.01 < -3), so the optimum of every weighting has log E pinned at its lower
bound, plus 0.3% log-noise; bootstrap-like integer weights.  Reference optimum: scipy's
``least_squares`` polish (:func:`phifit.fitters.polish.polish`).
"""

from __future__ import annotations

import numpy as np
import pytest

import phifit.fitters.refit as refit
from phifit.fitters.lm import batched_weighted_lm
from phifit.fitters.objective import DELTA, law_model, loss_terms
from phifit.fitters.polish import polish
from phifit.fitters.refit import RefitProblem, polish_unconverged
from phifit.law import LawSpec, log_loss
from phifit.runs.table import load_runs

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
# a, alpha, b, beta, e, phi: log E = log(0.01) lies below the box's lower bound -3
THETA_TRUE = np.array([6.0, 0.35, 7.0, 0.3, np.log(0.01), 0.5])


@pytest.fixture(scope="module")
def problem() -> RefitProblem:
    design = load_runs(ROOT / "data" / "paper_design_simulated.csv").design
    rng = np.random.default_rng(3)
    y = log_loss(THETA_TRUE, design) + 0.003 * rng.standard_normal(len(design))
    spec = LawSpec()
    return RefitProblem(design=design, y=y, fixed=dict(spec.fixed), bounds=dict(spec.bounds), delta=DELTA)


@pytest.fixture(scope="module")
def weights(problem) -> np.ndarray:
    rng = np.random.default_rng(5)
    return rng.multinomial(len(problem.y), np.full(len(problem.y), 1 / len(problem.y)), size=6).astype(float)


def objective(problem: RefitProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    res = log_loss(problem.spec.full_theta(x), problem.design) - problem.y
    return (w * loss_terms(res, problem.delta)).sum(-1)


def starts(problem: RefitProblem, m: int, seed: int) -> np.ndarray:
    """Starts around the truth with log E inside the box, where the plain LM creeps."""
    rng = np.random.default_rng(seed)
    x = np.tile(THETA_TRUE, (m, 1)) + 0.05 * rng.standard_normal((m, 6))
    x[:, 4] = -1.0
    return x


def test_finish_pins_e_and_matches_scipy_without_fallback(problem, weights, monkeypatch):
    """Optimum with log E at its bound: finished by the vectorised path, no scipy call,
    to scipy's objective (rtol 1e-9), with e exactly at the bound."""
    x0 = starts(problem, len(weights), seed=1)
    reference = [
        polish(x0[i], problem.spec, problem.design, problem.y, problem.delta, weights[i])
        for i in range(len(x0))
    ]
    f_ref = np.array([objective(problem, sol.x, w) for sol, w in zip(reference, weights)])

    def no_scipy(*args, **kwargs):
        raise AssertionError("the vectorised finish fell back to scipy")

    monkeypatch.setattr(refit, "polish", no_scipy)
    x, f = x0.copy(), objective(problem, x0, weights)
    converged = np.zeros(len(x), dtype=bool)
    # far_drop=1: no safety polish for rows that fell far (these starts are ~10% above)
    finished = polish_unconverged(problem, weights, x, f, converged, far_drop=1.0)
    assert finished.all() and converged.all()
    np.testing.assert_allclose(f, f_ref, rtol=1e-9)
    np.testing.assert_allclose(f, objective(problem, x, weights), rtol=1e-12)
    assert np.all(x[:, 4] == problem.spec.lower[4])


def test_plain_lm_creeps_where_active_set_converges(problem, weights):
    """The stopping rule needs the reduced system: the plain projected LM does not converge
    on these rows within 300 steps, the active-set LM does, to a lower objective."""
    model = law_model(problem.spec, problem.design)
    x0 = starts(problem, len(weights), seed=2)
    lo, hi = problem.spec.lower, problem.spec.upper
    plain = batched_weighted_lm(model, x0, problem.y, weights, lo, hi, max_iter=300)
    active = batched_weighted_lm(model, x0, problem.y, weights, lo, hi, max_iter=300, active_set=True)
    assert active.converged.all()
    assert (~plain.converged).sum() >= 1
    assert np.all(active.objective <= plain.objective * (1 + 1e-12))


def test_finish_never_raises_the_objective_and_stays_in_the_box(problem):
    """From random points of the box (some on its faces), with random weights: every row's
    objective goes down or stays, and the end points lie in the box."""
    rng = np.random.default_rng(11)
    spec = problem.spec
    lo, hi = spec.lower, spec.upper
    m = 24
    x0 = lo + (hi - lo) * rng.random((m, 6))
    x0[::3, 4] = lo[4]
    x0[1::4, 5] = hi[5]
    x0[2::5, 1] = lo[1]
    w = rng.integers(0, 3, size=(m, len(problem.y))).astype(float)
    f0 = objective(problem, x0, w)
    x, f = x0.copy(), f0.copy()
    converged = np.zeros(m, dtype=bool)
    polish_unconverged(problem, w, x, f, converged)
    assert np.all(f <= f0 * (1 + 1e-12))
    assert np.all((x >= lo) & (x <= hi))
    np.testing.assert_allclose(f, objective(problem, x, w), rtol=1e-12)


def test_blocked_evaluation_gives_identical_results(problem, weights):
    """Blocks of rows change the memory traffic, not the arithmetic: bit-identical ends."""
    model = law_model(problem.spec, problem.design)
    rng = np.random.default_rng(7)
    lo, hi = problem.spec.lower, problem.spec.upper
    x0 = lo + (hi - lo) * rng.random((40, 6))
    w = weights[rng.integers(0, len(weights), 40)]
    whole = batched_weighted_lm(model, x0, problem.y, w, lo, hi, max_iter=30, block_bytes=2**40)
    rows_of_3 = batched_weighted_lm(model, x0, problem.y, w, lo, hi, max_iter=30, block_bytes=3 * 8 * 6 * 116)
    np.testing.assert_array_equal(whole.x, rows_of_3.x)
    np.testing.assert_array_equal(whole.objective, rows_of_3.objective)
    np.testing.assert_array_equal(whole.n_iter, rows_of_3.n_iter)


def test_pruning_stops_only_rows_far_above_the_best_and_leaves_the_rest_untouched(problem, weights):
    """Rows kept by the pruning end exactly where they end without it; a pruned row stopped at
    iteration p with an objective above ratio x the keep-th best objective at that moment."""
    model = law_model(problem.spec, problem.design)
    rng = np.random.default_rng(11)
    lo, hi = problem.spec.lower, problem.spec.upper
    x0 = lo + (hi - lo) * rng.random((60, 6))
    w = weights[0]
    plain = batched_weighted_lm(model, x0, problem.y, w, lo, hi, max_iter=8)
    at_p = batched_weighted_lm(model, x0, problem.y, w, lo, hi, max_iter=2)
    pruned = batched_weighted_lm(
        model, x0, problem.y, w, lo, hi, max_iter=8, prune_after=2, prune_keep=10, prune_ratio=3.0
    )
    f_p = np.where(np.isfinite(at_p.objective), at_p.objective, np.inf)
    bar = 3.0 * np.sort(f_p)[9]
    gone = f_p > bar
    assert gone.any() and (~gone).sum() >= 10
    np.testing.assert_array_equal(pruned.x[~gone], plain.x[~gone])
    np.testing.assert_array_equal(pruned.objective[~gone], plain.objective[~gone])
    np.testing.assert_array_equal(pruned.x[gone], at_p.x[gone])
    assert np.all(pruned.n_iter[gone] <= 2) and not pruned.converged[gone].any()


def test_pruned_multistart_fit_reaches_the_unpruned_optimum():
    """The point fit with hopeless starts pruned finds the same optimum as without pruning."""
    from phifit.fitters.huber import HuberOptions, fit_huber

    runs = load_runs(ROOT / "data" / "paper_design_simulated.csv")
    pruned = fit_huber(runs, options=HuberOptions())
    full = fit_huber(runs, options=HuberOptions(prune_after=None))
    assert pruned.objective <= full.objective * (1 + 1e-12)
    np.testing.assert_allclose(pruned.theta, full.theta, rtol=0, atol=1e-5)


def test_split_law_evaluation_equals_the_joint_one(problem):
    """log_loss_parts + jacobian_t_from_parts (on all rows or on a subset of rows) give the
    same numbers, bit for bit, as log_loss_and_jacobian_t; law_model's forward/jacobian
    pair equals model(x), with phi fixed as well."""
    from phifit.law import jacobian_t_from_parts, log_loss_and_jacobian_t, log_loss_parts

    rng = np.random.default_rng(11)
    spec = LawSpec()
    lo, hi = spec.lower, spec.upper
    theta = lo + (hi - lo) * rng.random((9, 6))
    out, jac_t = log_loss_and_jacobian_t(theta, problem.design)
    out_p, parts = log_loss_parts(theta, problem.design)
    np.testing.assert_array_equal(out, out_p)
    np.testing.assert_array_equal(jac_t, jacobian_t_from_parts(parts, problem.design))
    rows = np.array([False, True, True, False, True, False, False, True, False])
    np.testing.assert_array_equal(
        jac_t[rows], jacobian_t_from_parts(tuple(p[rows] for p in parts), problem.design)
    )
    for s in (spec, LawSpec(fixed={"phi": 0.0})):
        model = law_model(s, problem.design)
        x = theta[:, s.free_mask]
        pred, jac = model(x)
        pred_f, parts_f = model.forward(x)
        np.testing.assert_array_equal(pred, pred_f)
        np.testing.assert_array_equal(jac, model.jacobian(parts_f))
        ref_pred, ref_jac = log_loss_and_jacobian_t(s.full_theta(x), problem.design)
        np.testing.assert_array_equal(pred, ref_pred)
        np.testing.assert_array_equal(jac, ref_jac[:, s.free_mask, :])


@pytest.mark.parametrize("active_set", [False, True])
def test_skipping_the_jacobian_of_rejected_steps_changes_nothing(problem, weights, active_set):
    """The LM computes the Jacobian only where a trial step is accepted (law_model's split
    evaluation) and keeps the decrement of rows whose state did not change; a model without
    the split (Jacobian at every trial point) gives bit-identical end points."""
    model = law_model(problem.spec, problem.design)

    def plain(x):
        return model(x)

    rng = np.random.default_rng(13)
    lo, hi = problem.spec.lower, problem.spec.upper
    x0 = np.concatenate([starts(problem, 20, 17), lo + (hi - lo) * rng.random((20, 6))])
    w = weights[rng.integers(0, len(weights), 40)]
    kw = {"max_iter": 60, "active_set": active_set}
    split = batched_weighted_lm(model, x0, problem.y, w, lo, hi, **kw)
    whole = batched_weighted_lm(plain, x0, problem.y, w, lo, hi, **kw)
    np.testing.assert_array_equal(split.x, whole.x)
    np.testing.assert_array_equal(split.objective, whole.objective)
    np.testing.assert_array_equal(split.n_iter, whole.n_iter)
    np.testing.assert_array_equal(split.converged, whole.converged)


def test_row_state_take_keeps_the_named_rows_and_shares_a_common_response():
    """LMRows.take selects the same rows of every per-row array; a shared y (n,) stays whole,
    per-row responses (a, n) are taken with the rest."""
    from dataclasses import fields

    from phifit.fitters.lm import LMRows

    a, k, n = 5, 3, 4
    rng = np.random.default_rng(0)

    def state(y: np.ndarray) -> LMRows:
        return LMRows(
            index=np.arange(10, 10 + a),
            x=rng.random((a, k)),
            weights=rng.random((a, n)),
            y=y,
            objective=rng.random(a),
            grad=rng.random((a, k)),
            hess=rng.random((a, k, k)),
            damping=rng.random(a),
            curvature=rng.random(a),
            floor=rng.random(a),
            decrement=rng.random(a),
            singular=rng.random(a) > 0.5,
            stale=rng.random(a) > 0.5,
            pred=rng.random((a, n)),
            jac=rng.random((a, k, n)),
            wo=rng.random((a, n)),
        )

    keep = np.array([True, False, True, True, False])
    shared = state(rng.random(n))
    part = shared.take(keep)
    assert len(part) == 3 and not part.per_row_y
    np.testing.assert_array_equal(part.index, [10, 12, 13])
    for f in fields(LMRows):
        if f.name == "y":
            assert part.y is shared.y
        else:
            np.testing.assert_array_equal(getattr(part, f.name), getattr(shared, f.name)[keep])
    own = state(rng.random((a, n)))
    assert own.per_row_y
    np.testing.assert_array_equal(own.take(np.array([4, 0])).y, own.y[[4, 0]])
    np.testing.assert_array_equal(own.y_of(slice(1, 3)), own.y[1:3])


def test_the_lm_takes_its_coordinate_count_from_the_starts():
    """A two-parameter model (no split evaluation, so no law-sized buffers) and the law with
    phi fixed (five free coordinates) both fit; a box of the wrong size is refused."""
    t = np.linspace(0.0, 2.0, 30)
    y = np.log(2.0) - 0.7 * t  # log of 2 exp(-0.7 t): linear in (log c, rate)

    def line(x):
        pred = x[:, :1] - x[:, 1:2] * t
        jac_t = np.stack([np.ones_like(pred), -np.broadcast_to(t, pred.shape)], axis=1)
        return pred, jac_t

    lo, hi = np.array([-5.0, 0.0]), np.array([5.0, 3.0])
    end = batched_weighted_lm(line, np.array([[0.0, 0.1], [1.0, 2.0]]), y, 1.0, lo, hi, delta=np.inf)
    assert end.converged.all()
    np.testing.assert_allclose(end.x, [[np.log(2.0), 0.7]] * 2, atol=1e-9)
    with pytest.raises(ValueError, match="for 2 coordinates"):
        batched_weighted_lm(line, np.zeros((1, 2)), y, 1.0, lo[:1], hi[:1])

    design = load_runs(ROOT / "data" / "paper_design_simulated.csv").design
    spec = LawSpec(fixed={"phi": 0.5})
    truth = THETA_TRUE.copy()
    truth[4] = -1.0
    x_true = truth[spec.free_mask]
    y_law = log_loss(spec.full_theta(x_true), design)
    x0 = x_true + np.array([[0.3, 0.02, -0.3, 0.02, 0.1]])
    fit = batched_weighted_lm(law_model(spec, design), x0, y_law, 1.0, spec.lower, spec.upper)
    assert fit.x.shape == (1, 5) and fit.converged.all()
    np.testing.assert_allclose(fit.x[0], x_true, atol=1e-5)


@pytest.mark.parametrize("delta", [DELTA, np.inf])
def test_objective_gradient_matches_central_differences(problem, weights, delta):
    """grad F = sum_i w_i psi(r_i) J_i against central differences of F, h = eps^(1/3)."""
    from phifit.fitters.objective import gradient, objective

    spec = problem.spec
    model = law_model(spec, problem.design)
    x = THETA_TRUE.copy()
    x[4] = -1.0
    x += 0.01

    def f(point: np.ndarray) -> float:
        pred, _ = model(point[None, :])
        return float(objective(pred[0] - problem.y, weights[0], delta))

    pred, jac_t = model(x[None, :])
    g = gradient(jac_t, pred - problem.y, weights[:1], delta)[0]
    h = np.finfo(float).eps ** (1 / 3)
    fd = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-9 * np.abs(fd).max())


def test_a_vanished_coordinate_does_not_freeze_the_others():
    """At log A = -5, alpha = 2.5 the law's power term is ~1e-20 of the loss: the Jacobian
    columns of log A and alpha vanish to rounding.  Damped by diag(H) alone their steps stayed
    ~1e16 at every damping, were clipped to the far bound and rejected, and log E never moved
    (a 10-run wild refit stayed 2-15% above its optimum).  From that corner the LM (plain and
    active-set) must now reach at least the best constant model, the Huber location of the
    log-losses in log E (a fine grid)."""
    from phifit.law import Design

    r = np.array([1, 2, 3, 4, 5, 6, 8, 10, 12, 16], dtype=float)
    design = Design.from_arrays(r, np.full(10, 4.0e6), np.full(10, 3.0e7), np.full(10, 2.0e9))
    y = np.log(2.7) + np.array([0.058, -0.022, 0.008, 0.001, -0.004, 0.007, 0.010, 0.007, 0.004, 0.004])
    spec = LawSpec(fixed={"B": 1e-12, "beta": 0.0, "phi": -1.0})
    model = law_model(spec, design)
    corner = np.array([[-5.0, 2.5, np.log(2.7) - 0.01]])  # free coordinates: log A, alpha, log E
    grid = np.linspace(np.log(2.7) - 0.05, np.log(2.7) + 0.05, 20001)
    best_constant = min(float(loss_terms(e - y, DELTA).sum()) for e in grid)
    start = float(loss_terms(model(corner)[0][0] - y, DELTA).sum())
    assert start > 1.02 * best_constant  # the corner's log E is off its optimum
    for active_set in (False, True):
        end = batched_weighted_lm(
            model, corner, y, 1.0, spec.lower, spec.upper, max_iter=300, active_set=active_set
        )
        assert end.converged[0] and end.objective[0] <= best_constant * (1 + 1e-6)


def _valley(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rosenbrock's function as two residuals, 10 (x2 - x1^2) and 1 - x1: its minimum (1, 1)
    lies at the end of the curved valley x2 = x1^2."""
    x1, x2 = x[:, 0], x[:, 1]
    pred = np.stack([10.0 * (x2 - x1**2), 1.0 - x1], axis=1)
    jac_t = np.zeros((len(x), 2, 2))
    jac_t[:, 0, 0], jac_t[:, 1, 0], jac_t[:, 0, 1] = -20.0 * x1, 10.0, -1.0
    return pred, jac_t


def test_the_geodesic_correction_is_the_second_order_term_of_the_path():
    """The valley's residuals are quadratic in x, so the finite difference of the correction is
    exact: r''_1 = -20 v_1^2 along v, r''_2 = 0, and the correction is half of
    a = -(H + lam D)^-1 sum_i w_i omega_i r''_i J_i (least squares: omega = 1); given the step's
    own damped system, it is the same to the bit."""
    from phifit.fitters.lm import LMRows, _Evaluation, damped_step, damped_system, geodesic_correction

    x = np.array([[-1.0, 1.0], [0.2, 0.5]])
    y = np.zeros(2)
    ev = _Evaluation(_valley, np.inf, 2, 2, 2**20)
    obj, grad, hess = ev.evaluate(x, np.ones((2, 2)), y, np.ones(2))
    pred, jac_t, wo = ev.local(x, np.ones((2, 2)), y, np.ones(2))
    damping = np.array([1e-3, 0.5])
    rows = LMRows(
        index=np.arange(2), x=x, weights=np.ones((2, 2)), y=y, objective=obj, grad=grad, hess=hess,
        damping=damping, curvature=np.ones(2), floor=np.zeros(2), decrement=np.zeros(2),
        singular=np.zeros(2, dtype=bool), stale=np.ones(2, dtype=bool), pred=pred, jac=jac_t, wo=wo,
    )  # fmt: skip
    step = np.array([[0.05, -0.02], [0.01, 0.03]])
    second = np.stack([-20.0 * step[:, 0] ** 2, np.zeros(2)], axis=1)
    pull = np.matmul(jac_t, second[..., None])[..., 0]
    expected = 0.5 * damped_step(pull, hess, damping)
    lo, hi = np.full(2, -5.0), np.full(2, 5.0)
    got = geodesic_correction(ev, rows, step, hess, lo, hi, None)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-12)
    shared = geodesic_correction(ev, rows, step, hess, lo, hi, None, damped_system(hess, damping))
    assert np.array_equal(shared, got)
    # a step whose correction is larger than its alpha bound takes none
    assert np.all(geodesic_correction(ev, rows, 1e3 * step, hess, lo, hi, None)[0] == 0.0)


def test_geodesic_steps_follow_a_curved_valley_in_fewer_iterations():
    """From points on the floor of the curved valley, with Huber's small delta (the second
    residual, 1 - x1, stays in the linear zone: the objective is nearly linear along the floor),
    the geodesic acceleration reaches (1, 1) in at most 70% of the plain LM's iterations."""
    x1 = np.array([-2.0, -1.5, -1.0, -0.5, 0.0, 0.3])
    x0 = np.column_stack([x1, x1**2])
    lo, hi = np.full(2, -5.0), np.full(2, 5.0)
    ends = [
        batched_weighted_lm(_valley, x0, np.zeros(2), 1.0, lo, hi, max_iter=5000, active_set=True, geodesic=g)
        for g in (False, True)
    ]
    for end in ends:
        assert end.converged.all()
        np.testing.assert_allclose(end.x, 1.0, atol=1e-8)
    assert ends[1].n_iter.sum() <= 0.7 * ends[0].n_iter.sum()


def test_the_finish_runs_the_rows_the_near_curvature_leaves_again_from_the_irls_phase():
    """Far from the minimum, the near curvature creeps where the IRLS phase does not: on the
    valley's floor with 200 iterations it leaves four of six rows unconverged; the finish runs
    those again from their starts in the IRLS phase, and every row reaches (1, 1)."""
    from phifit.fitters.lm import finish_lm

    x1 = np.array([-2.0, -1.5, -1.0, -0.5, 0.0, 0.3])
    x0 = np.column_stack([x1, x1**2])
    lo, hi = np.full(2, -5.0), np.full(2, 5.0)
    near = batched_weighted_lm(
        _valley, x0, np.zeros(2), 1.0, lo, hi, max_iter=200, active_set=True, geodesic=True, start_near=True
    )
    assert (~near.converged).sum() >= 3
    end = finish_lm(_valley, x0, np.zeros(2), 1.0, lo, hi, max_iter=200)
    assert end.converged.all()
    np.testing.assert_allclose(end.x, 1.0, atol=1e-8)
    assert np.all(end.objective <= near.objective * (1 + 1e-9))


def test_the_finish_carries_a_small_tables_crawling_refits_to_their_minimum_sooner():
    """Wild-style refits of a 12-run table (the study's r = 1 and r = 4 runs at its smallest
    size per budget, one loss raised 5%) with phi fixed at 1: most rows leave the first
    300-step LM unconverged and crawl along a curved valley (few residuals inside Huber's
    delta).  The finish (:func:`~phifit.fitters.lm.finish_lm`: geodesic acceleration, near
    curvature) converges every row, at an objective no higher than the plain active-set LM's,
    in at most half its iterations (measured: 20,389 against 72,916)."""
    import pandas as pd

    from phifit.fitters.huber import HuberOptions, fit_huber
    from phifit.fitters.lm import finish_lm
    from phifit.runs.table import as_runs

    study = pd.read_csv(ROOT / "data" / "looped_study_runs_digitized.csv")
    cells = [
        study[(study["budget"] == b) & (study["r"] == r)].iloc[0]
        for b in sorted(study["budget"].unique())
        for r in (1, 4)
    ]
    frame = pd.DataFrame(cells).reset_index(drop=True)
    frame.loc[5, "loss"] *= 1.05
    runs = as_runs(frame)
    spec = LawSpec(fixed={"phi": 1.0})
    fit = fit_huber(runs, spec=spec, options=HuberOptions(n_starts=100, seed=0))
    model = law_model(spec, runs.design)
    x0 = fit.theta[spec.free_mask]
    pred = model(x0[None])[0][0]
    signs = np.random.default_rng(0).choice([-1.0, 1.0], size=(60, len(pred)))
    y_star = pred + signs * (runs.log_loss - pred)
    lo, hi = spec.lower, spec.upper
    first = batched_weighted_lm(model, np.tile(x0, (60, 1)), y_star, 1.0, lo, hi, max_iter=300)
    left = np.flatnonzero(~first.converged)
    assert len(left) >= 40
    plain = batched_weighted_lm(
        model, first.x[left], y_star[left], 1.0, lo, hi, max_iter=10_000, active_set=True
    )
    finish = finish_lm(model, first.x[left], y_star[left], 1.0, lo, hi, max_iter=10_000)
    assert finish.converged.all()
    assert np.all(finish.objective <= plain.objective * (1 + 1e-9))
    assert finish.n_iter.sum() <= 0.5 * plain.n_iter.sum()
