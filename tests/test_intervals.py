"""Bootstrap interval ends and their Monte-Carlo errors (phifit.intervals)."""

from __future__ import annotations

import numpy as np
import pytest

from phifit.intervals import MC_RESAMPLES, bootstrap_interval, mc_resamples


def test_shared_resamples_give_the_same_intervals():
    """The bootstrap computes a parameter's percentile and BCa interval over one set of sorted
    Monte-Carlo resamples: the same numbers, bit for bit, as drawing them per interval."""
    rng = np.random.default_rng(0)
    values = np.round(rng.standard_normal(500), 1)  # ties
    values[:15] = -3.0  # a pile on a bound, as censored replicates make
    values[20] = np.nan  # a failed replicate
    jack = rng.standard_normal(12)
    shared = mc_resamples(values, 7)
    assert shared.shape == (MC_RESAMPLES, 499) and np.all(np.diff(shared, axis=1) >= 0)
    for kind, extra in (("percentile", {}), ("bca", {"estimate": 0.05, "jackknife": jack})):
        alone = bootstrap_interval(values, kind=kind, mc_seed=7, **extra)
        with_shared = bootstrap_interval(values, kind=kind, mc_seed=7, resampled=shared, **extra)
        assert alone.to_list() == with_shared.to_list()
        assert np.array_equal(alone.mc_error, with_shared.mc_error)
    with pytest.raises(ValueError, match="resampled has shape"):
        bootstrap_interval(values, resampled=shared[:, :10])


def test_percentile_mc_error_matches_the_binomial_approximation():
    """sd of the 2.5% end over resamples ~ sqrt(p (1 - p) / B) / density at the end."""
    from scipy.stats import norm

    values = np.random.default_rng(5).standard_normal(4000)
    iv = bootstrap_interval(values, level=0.95)
    want = np.sqrt(0.025 * 0.975 / 4000) / norm.pdf(norm.ppf(0.025))
    assert iv.mc_error[0] == pytest.approx(want, rel=0.25)
    assert iv.lo == pytest.approx(np.quantile(values, 0.025), abs=1e-12)
