"""The exact-Hessian Newton finish of the refits: its second derivatives, its optimum, and the
flat valleys of a 10-run table it finishes where the Levenberg-Marquardt steps creep.

References: central differences of the law's analytic Jacobian (the second derivatives), the
point fit and scipy's ``least_squares`` polish (the optimum)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import phifit.fitters.refit as refit
from phifit.fitters.lm import BatchedLM, batched_weighted_lm
from phifit.fitters.newton import batched_newton, has_curvature
from phifit.fitters.objective import DELTA, law_model, loss_terms
from phifit.fitters.polish import polish
from phifit.fitters.refit import RefitProblem, polish_unconverged
from phifit.law import (
    Design,
    LawSpec,
    jacobian_t_from_parts,
    log_loss,
    log_loss_parts,
    weighted_hessian_from_parts,
)
from phifit.simulation import simulate


def unfinished(model, x0, *args, **kwargs) -> BatchedLM:
    """A stand-in for :func:`batched_newton` that finishes no row (the pipeline without it)."""
    m = len(x0)
    return BatchedLM(
        x=x0.copy(), objective=np.full(m, np.inf), converged=np.zeros(m, bool), n_iter=np.zeros(m, int)
    )


def test_second_derivatives_match_central_differences():
    """sum_i c_i d^2 log L_i against central differences of the Jacobian, on runs with r = 1,
    a non-looped run (N_rec = 0) and a fully looped one (N_once = 0)."""
    rng = np.random.default_rng(0)
    n = 14
    r = rng.choice([1, 2, 4, 8], n)
    n_once = rng.uniform(1e6, 1e7, n)
    n_rec = rng.uniform(1e6, 3e7, n)
    n_rec[0], r[0] = 0.0, 1
    n_once[1] = 0.0
    design = Design.from_arrays(r, n_once, n_rec, rng.uniform(1e8, 1e10, n))
    theta = np.array([[6.0, 0.4, 7.0, 0.35, 0.5, 0.6], [9.0, 0.7, 4.0, 0.2, 0.9, -0.3]])
    coef = rng.normal(size=(2, n))
    _, parts = log_loss_parts(theta, design)
    hess = weighted_hessian_from_parts(parts, design, jacobian_t_from_parts(parts, design), coef)
    h = 1e-5
    numeric = np.zeros_like(hess)
    for k in range(6):
        up, down = theta.copy(), theta.copy()
        up[:, k] += h
        down[:, k] -= h
        j_up = jacobian_t_from_parts(log_loss_parts(up, design)[1], design)
        j_down = jacobian_t_from_parts(log_loss_parts(down, design)[1], design)
        numeric[:, k, :] = ((j_up - j_down) / (2 * h) * coef[:, None, :]).sum(-1)
    assert np.all(np.isfinite(hess))
    np.testing.assert_allclose(hess, numeric, atol=1e-6 * np.abs(hess).max())
    np.testing.assert_allclose(hess, np.swapaxes(hess, 1, 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("delta", [DELTA, np.inf])
def test_newton_reaches_the_point_fits_optimum(delta):
    """From starts 5% off, on a noisy simulated study design: the same objective as scipy's
    polish (rtol 1e-9) for Huber and least squares, every row converged."""
    runs = simulate("paper", noise=0.01, seed=4)
    design = Design.from_arrays(runs.r, runs.n_once, runs.n_rec, runs.tokens)
    y = np.log(runs.loss.to_numpy())
    spec = LawSpec()
    model = law_model(spec, design)
    assert has_curvature(model)
    x_true = np.array([6.0, 0.35, 7.0, 0.3, 0.3, 0.5])
    sol = polish(x_true, spec, design, y, delta)
    rng = np.random.default_rng(1)
    x0 = sol.x * (1 + 0.05 * rng.standard_normal((4, 6)))
    end = batched_newton(model, x0, y, 1.0, spec.lower, spec.upper, delta=delta)
    f_ref = np.sum(loss_terms(log_loss(sol.x, design) - y, delta))
    assert end.converged.all()
    np.testing.assert_allclose(end.objective, f_ref, rtol=1e-9)


@pytest.fixture(scope="module")
def valley():
    """A 10-run table at one token count (B, beta fixed: every run has the same D), residuals
    ten times Huber's delta, and 40 bootstrap weightings; the LM's ends after 300 steps."""
    r = np.array([1, 2, 3, 4, 5, 6, 8, 10, 12, 16])
    frame = pd.DataFrame({"r": r, "n_once": 4e6, "n_rec": 3e7, "tokens": 2e9, "run_id": [f"r{k}" for k in r]})
    runs = simulate(frame, noise=0.012, seed=2)
    design = Design.from_arrays(runs.r, runs.n_once, runs.n_rec, runs.tokens)
    y = np.log(runs.loss.to_numpy())
    spec = LawSpec(fixed={"B": 1e-12, "beta": 0.0})
    model = law_model(spec, design)
    rng = np.random.default_rng(7)
    weights = rng.multinomial(10, np.full(10, 0.1), size=40).astype(float)
    x0 = np.tile([12.0, 0.8, 0.9, 1.5], (40, 1))
    lm = batched_weighted_lm(model, x0, y, weights, spec.lower, spec.upper, max_iter=300)
    return spec, design, y, model, weights, lm


def test_newton_never_ends_higher_and_its_ends_are_minima(valley):
    """Rows the LM leaves unconverged: Newton finishes at least half of them in 200 iterations,
    never ends above where the LM stopped, and each row it finishes is no higher than scipy's
    polish from the same point (rtol 1e-9)."""
    spec, design, y, model, weights, lm = valley
    left = np.flatnonzero(~lm.converged & np.isfinite(lm.objective))
    assert len(left) >= 5
    end = batched_newton(model, lm.x[left], y, weights[left], spec.lower, spec.upper)
    assert np.all(end.objective <= lm.objective[left])
    assert end.converged.mean() >= 0.5
    for j in np.flatnonzero(end.converged)[:8]:
        sol = polish(lm.x[left[j]], spec, design, y, DELTA, weights[left[j]])
        f_ref = np.sum(weights[left[j]] * loss_terms(log_loss(spec.full_theta(sol.x), design) - y))
        assert end.objective[j] <= f_ref * (1 + 1e-9)


def test_the_finish_with_newton_is_no_worse_than_without(valley, monkeypatch):
    """:func:`polish_unconverged` with its Newton stage against the same finish without it
    (Newton returning every row unfinished): every row ends no higher (rtol 1e-9) and at least
    as many rows converge."""
    spec, design, y, model, weights, lm = valley
    problem = RefitProblem(design=design, y=y, fixed=dict(spec.fixed), bounds=dict(spec.bounds), delta=DELTA)

    def finish() -> tuple[np.ndarray, np.ndarray]:
        x, f, c = lm.x.copy(), lm.objective.copy(), lm.converged.copy()
        polish_unconverged(problem, weights, x, f, c)
        return f, c

    f_new, c_new = finish()

    monkeypatch.setattr(refit, "batched_newton", unfinished)
    f_old, c_old = finish()
    assert np.all(f_new <= f_old * (1 + 1e-9))
    assert c_new.sum() >= c_old.sum()


def test_the_point_fit_is_finished_by_newton_and_matches_the_polish(monkeypatch):
    """The Huber fit of a noisy simulated study table: its candidates are finished by Newton
    without scipy's polish, and the result is the polish's (objective rtol 1e-12, parameters
    rtol 1e-6); with Newton made to fail, the polish finishes the same fit."""
    import phifit.fitters.huber as huber_module
    from phifit.fitters.huber import fit_huber

    runs = simulate("paper", noise=0.01, seed=4)

    def no_polish(*args, **kwargs):
        raise AssertionError("the polish ran although Newton finished every candidate")

    with monkeypatch.context() as patch:
        patch.setattr(huber_module, "polish", no_polish)
        by_newton = fit_huber(runs, n_starts=100)

    monkeypatch.setattr(huber_module, "batched_newton", unfinished)
    by_polish = fit_huber(runs, n_starts=100)
    assert by_newton.converged and by_polish.converged
    assert by_newton.extras["solver_message"].startswith("projected Newton")
    assert not by_polish.extras["solver_message"].startswith("projected Newton")
    assert by_newton.objective == pytest.approx(by_polish.objective, rel=1e-12)
    for name, value in by_polish.params.items():
        assert by_newton.params[name] == pytest.approx(value, rel=1e-6), name


def test_newton_refuses_inputs_the_lm_refuses(valley):
    """Both engines check their inputs alike (``checked_rows``): responses with another number
    of rows than the starts, or a box of another width, are refused with what was expected."""
    spec, design, y, model, weights, lm = valley
    x0 = lm.x[:3]
    with pytest.raises(ValueError, match="y has 2 rows for 3 starts"):
        batched_newton(model, x0, np.tile(y, (2, 1)), 1.0, spec.lower, spec.upper)
    with pytest.raises(ValueError, match="bounds for 4 coordinates"):
        batched_newton(model, x0, y, 1.0, spec.lower[:3], spec.upper[:3])
