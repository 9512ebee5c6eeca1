"""Sequential Monte-Carlo p-values (phifit.bootstrap.sequential): the stop rule's interval, its
decisions, its error rate, and wild tests that stop on the same draws as the full test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from phifit.bootstrap.sequential import DEFAULT_RULE, StopRule, p_bounds
from phifit.bootstrap.wild import wild_cluster_test
from phifit.fitters.huber import fit_huber
from phifit.law import LawSpec
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate


@pytest.mark.parametrize(("k", "n"), [(0, 199), (1, 199), (10, 199), (37, 399), (199, 199)])
def test_the_interval_is_clopper_pearsons(k, n):
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - 1e-3, method="exact")
    lo, hi = p_bounds(k, n, 1e-3)
    assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)


def test_the_rule_stops_only_where_the_side_of_the_level_is_settled():
    rule = StopRule(level=0.05)
    assert rule.stages(999) == [199, 399, 799, 999] and rule.stages(199) == [199]
    assert rule.decided(0, 199) and rule.decided(1, 199)  # p ~ 0: reject after 199
    assert not rule.decided(2, 199) and not rule.decided(10, 199)  # p ~ 0.01-0.05: go on
    assert rule.decided(22, 199) and not rule.decided(21, 199)  # p ~ 0.11: keep after 199
    assert not rule.decided(0, 0)


def test_a_stopped_decision_disagrees_with_the_exact_p_no_more_often_than_the_bound():
    """Bernoulli(p) exceedance streams for p across the level: the share of streams whose
    stopped decision is the wrong side of 0.05 stays below the rule's bound, 0.15%, at every
    p (20,000 streams per p: Monte-Carlo se <= 0.03 percentage points at that rate)."""
    rng = np.random.default_rng(0)
    rule, n_streams = DEFAULT_RULE, 20_000
    bound = rule.error_bound(len(rule.looks))
    # per look: the largest exceedance count that rejects, the smallest that keeps
    rejects_upto = {
        n: max((k for k in range(n + 1) if p_bounds(k, n)[1] < rule.level), default=-1) for n in rule.looks
    }
    keeps_from = {n: min(k for k in range(n + 1) if p_bounds(k, n)[0] > rule.level) for n in rule.looks}
    for p in (0.0, 0.01, 0.03, 0.045, 0.055, 0.07, 0.1, 0.3):
        open_ = np.ones(n_streams, dtype=bool)
        wrong, k, seen = 0, np.zeros(n_streams, dtype=int), 0
        for n in rule.looks:  # the exceedances of a stream, look by look
            k, seen = k + rng.binomial(n - seen, p, n_streams), n
            rejected, kept = open_ & (k <= rejects_upto[n]), open_ & (k >= keeps_from[n])
            wrong += int((rejected if p >= rule.level else kept).sum())
            open_ &= ~(rejected | kept)
        assert wrong / n_streams <= bound, (p, wrong)


@pytest.fixture(scope="module")
def false_null():
    runs = table_from_frame(simulate("paper", params={"phi": 0.459}, seed=2, noise=0.004), source="sim")
    free = fit_huber(runs, n_starts=100)
    null = fit_huber(runs, n_starts=100, spec=LawSpec(fixed={"phi": 0.0}))
    return runs, free, null


def test_a_clear_rejection_stops_after_199_on_the_full_tests_first_draws(false_null):
    runs, free, null = false_null
    stopped = wild_cluster_test(runs, free, null, n_boot=399, seed=0, stop=DEFAULT_RULE)
    assert stopped.n_boot == 199 and stopped.stopped_early and stopped.n_max == 399
    assert stopped.p_value == pytest.approx(1 / 200) and stopped.min_p == pytest.approx(1 / 200)
    # the same draws: the first 199 replicates of the full test give the stopped test's p
    first = wild_cluster_test(runs, free, null, n_boot=199, seed=0)
    assert first.p_value == stopped.p_value and first.null_quantiles == stopped.null_quantiles
    assert first.n_max is None and not first.stopped_early
    assert "199 replicates of at most 399, stopped once p's side of 0.05 was settled" in stopped.summary()
    back = type(stopped).from_dict(stopped.to_dict())
    assert back.n_max == 399 and back.stop_level == 0.05 and back.stopped_early


def test_a_test_near_the_level_runs_every_replicate(false_null, monkeypatch):
    """Exceedances near 5% at every look: the rule never settles, and all n_boot are refitted."""
    runs, free, null = false_null
    import phifit.bootstrap.wild as wild

    calls = []

    def near_level(null_fit, alternative, y_star, delta, spreads=(None, None)):  # not tested here
        calls.append(len(y_star))
        zeros, ones = np.zeros(len(y_star)), np.ones(len(y_star), dtype=bool)
        return zeros, ones, zeros, ones

    monkeypatch.setattr(wild, "_refit_both", near_level)
    monkeypatch.setattr(wild, "exceedances", lambda t_star, observed: int(round(0.05 * len(t_star))))
    res = wild.wild_cluster_test(runs, free, null, n_boot=999, seed=0, n_jobs=1, stop=DEFAULT_RULE)
    assert calls == [199, 200, 400, 200] and res.n_boot == 999 and not res.stopped_early
