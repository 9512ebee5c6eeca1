"""Simulated run tables: the noise structures the statistical checks rely on."""

from __future__ import annotations

import numpy as np
import pytest

from phifit.simulation import simulate


def _log_noise(frame):
    clean = simulate("paper")
    return np.log(frame["loss"].to_numpy() / clean["loss"].to_numpy())


def test_cell_noise_is_shared_within_each_budget_r_cell():
    frame = simulate("paper", cell_noise=0.01, seed=3)
    u = _log_noise(frame)
    cells = frame.groupby(["budget", "r"]).indices
    assert len(cells) == 24
    for rows in cells.values():
        np.testing.assert_allclose(u[rows], u[rows][0], rtol=0, atol=1e-15)
    offsets = np.array([u[rows][0] for rows in cells.values()])
    assert 0.005 < offsets.std(ddof=1) < 0.02 and len(np.unique(np.round(offsets, 12))) == 24


def test_per_run_noise_has_the_stated_sd_gaussian_and_student_t():
    big = simulate("paper", noise=0.004, seed=0)
    for df in (None, 3.0):
        draws = np.concatenate(
            [_log_noise(simulate("paper", noise=0.004, noise_df=df, seed=s)) for s in range(60)]
        )
        assert draws.std() == pytest.approx(0.004, rel=0.1 if df else 0.03), df
    # Student-t with 3 df has heavier tails than the Gaussian of the same sd
    t3 = np.concatenate([_log_noise(simulate("paper", noise=0.004, noise_df=3.0, seed=s)) for s in range(60)])
    gauss = np.concatenate([_log_noise(simulate("paper", noise=0.004, seed=s)) for s in range(60)])
    assert np.mean(np.abs(t3) > 3 * 0.004) > 3 * np.mean(np.abs(gauss) > 3 * 0.004)
    assert len(big) == 116


def test_bad_noise_settings_are_refused():
    with pytest.raises(ValueError, match="noise_df must be > 2"):
        simulate("paper", noise=0.01, noise_df=2)
    with pytest.raises(ValueError, match="must be >= 0"):
        simulate("paper", cell_noise=-1)
    frame = simulate("paper").drop(columns="budget")
    with pytest.raises(ValueError, match="cell_noise needs a budget column"):
        simulate(frame, cell_noise=0.01)


def test_fit_takes_what_simulate_returns():
    """phifit.fit(phifit.simulate(...)): the frame is validated into a run table and the law
    that made it comes back (a phi and E far from the study's, so the wrong data would fail)."""
    import phifit

    truth = {"E": 1.9, "A": 25.0, "alpha": 0.22, "B": 700.0, "beta": 0.35, "phi": 0.75}
    res = phifit.fit(phifit.simulate(params=truth), n_starts=100)
    assert res.source == "<DataFrame>" and res.n_runs == 116
    for name, value in truth.items():
        assert res.params[name] == pytest.approx(value, rel=1e-5), name
