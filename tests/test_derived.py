"""Derived quantities: the 410M/580M/1B example (phifit.equivalence), the compute-optimal
frontier (phifit.frontier), parabola minima (phifit.isoflop), intervals over draws (phifit.bootstrap.draws)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar

from phifit.bootstrap.draws import percentile_interval
from phifit.cautions import Caution
from phifit.equivalence import equivalence, equivalence_table, paper_example
from phifit.fitters.huber import fit_huber
from phifit.frontier import PaperFamily, TableFamily, frontier, isoflop_curves, paper_budgets
from phifit.isoflop import parabola_minima, table_budgets
from phifit.law import JointLaw, params_to_theta
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate
from phifit.study import paper_architecture


def sig2(x: float) -> float:
    """Round to two significant figures."""
    return float(f"{x:.2g}")


# -- acceptance 2a: the study's example ------------------------------------------------------------
def test_paper_example_410m_580m_1b():
    ex = paper_example(0.459)
    blocks, inj = ex["blocks_only"], ex["with_injection"]
    assert sig2(inj.n_unique) == 4.1e8  # "410M": 98/240 of 1B, injection counted
    assert sig2(blocks.n_eff) == 5.8e8  # "580M": (4 + 4^phi 4)/20 of 1B
    assert sig2(blocks.n_unrolled) == 1.0e9  # "the training cost of a 1B one"
    assert sig2(inj.n_unrolled) == 1.0e9  # ... up to the ~3% injection overhead
    assert blocks.n_eff == pytest.approx(1e9 * (4 + 4**0.459 * 4) / 20, rel=1e-12)
    assert inj.n_unique == pytest.approx(1e9 * 98 / 240, rel=1e-12)
    # counting the injection layer in N_rec (the study's convention) gives 0.594, not 0.578
    assert inj.n_eff / 1e9 == pytest.approx((48 + 4**0.459 * 50) / 240, rel=1e-12)
    assert 4**0.459 == pytest.approx(1.889, abs=5e-4)


def law_with(phi: float) -> JointLaw:
    """The reference law with another phi (equivalence reads only phi)."""
    return dataclasses.replace(JointLaw.reference(), phi=phi)


def test_equivalence_formulae_and_intervals():
    e = equivalence(law_with(0.5), n_once=3e8, n_rec=1e8, r=8)
    assert e.n_eff == pytest.approx(3e8 + math.sqrt(8) * 1e8)
    assert e.n_unique == 4e8 and e.n_unrolled == 11e8
    assert e.eff_over_unrolled == pytest.approx(e.n_eff / 11e8)
    assert equivalence(law_with(0.7), n_once=3e8, n_rec=1e8, r=1).n_eff == pytest.approx(4e8)
    rng = np.random.default_rng(0)
    thetas = np.tile(params_to_theta(JointLaw.reference().params), (2000, 1))
    thetas[:, 5] = rng.normal(0.46, 0.03, 2000)
    thetas[:7] = np.nan  # failed replicates are dropped
    d = equivalence(law_with(0.46), n_once=2e8, n_rec=2e8, r=4, thetas=thetas)
    assert d.n_draws == 1993
    lo, hi = np.percentile(thetas[7:, 5], [2.5, 97.5])
    assert d.phi_interval == pytest.approx([lo, hi])
    # N_eff is monotone in phi: its percentile interval is the image of phi's
    assert d.n_eff_interval == pytest.approx([2e8 + 4**lo * 2e8, 2e8 + 4**hi * 2e8], rel=1e-4)
    m = equivalence(law_with(0.46), n_once=2e8, n_rec=2e8, r=4, phi_interval=(lo, hi))
    assert m.n_eff_interval == pytest.approx(d.n_eff_interval, rel=1e-4)


def test_equivalence_from_a_fit_uses_the_level_of_its_interval():
    runs = table_from_frame(simulate("paper", noise=0.003, seed=4))
    fit = fit_huber(runs).with_updates(ci={"phi": [0.40, 0.50]}, ci_level=0.8)
    e = equivalence(fit, n_once=1e8, n_rec=1e8, r=4)
    assert e.level == 0.8 and e.phi_interval == [0.40, 0.50] and "(80%," in e.summary()
    assert e.n_eff_interval == pytest.approx([1e8 + 4**0.40 * 1e8, 1e8 + 4**0.50 * 1e8])
    with pytest.raises(ValueError, match="the fit's interval of phi is at 0.8"):
        equivalence(fit, n_once=1e8, n_rec=1e8, r=4, level=0.95)
    table = equivalence_table(runs, fit)
    assert table.level == 0.8 and "80% interval" in table.summary()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_once": -1, "n_rec": 1, "r": 2}, "n_once must be"),
        ({"n_once": 0, "n_rec": 0, "r": 2}, "n_once \\+ n_rec must be > 0"),
        ({"n_once": 1, "n_rec": 1, "r": 2.5}, "r must be an integer"),
    ],
)
def test_equivalence_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        equivalence(law_with(0.5), **kwargs)


def test_equivalence_takes_the_law_as_one_argument():
    runs = table_from_frame(simulate("paper", noise=0.003, seed=4))
    fit = fit_huber(runs, n_starts=100)
    assert equivalence(fit, n_once=1e8, n_rec=1e8, r=4).phi == fit.phi
    with pytest.raises(ValueError, match="did not identify phi"):
        equivalence(fit.with_updates(params={**fit.params, "phi": None}), n_once=1e8, n_rec=1e8, r=4)
    with pytest.raises(TypeError, match="expected a FitResult or a JointLaw, got float"):
        equivalence(0.5, n_once=1e8, n_rec=1e8, r=4)


def test_equivalence_table_lists_looped_architectures():
    runs = table_from_frame(simulate("paper", noise=0.003, seed=4))
    res = fit_huber(runs)
    table = equivalence_table(runs, res)
    assert len(table.rows) == 3 * 11 and all(e.r > 1 for e in table.rows)
    assert all(e.n_unique < e.n_eff < e.n_unrolled for e in table.rows)
    json.dumps(table.to_dict(), allow_nan=False)


# -- acceptance 2b: the frontier ------------------------------------------------------------------
def _brute_lstar(law: JointLaw, budget: float, r: int) -> float:
    def loss(log_s):
        a = paper_architecture(math.exp(log_s), r)
        return float(
            law.loss(r=[r], n_once=[a["n_once"]], n_rec=[a["n_rec"]], tokens=[budget / a["flops_per_token"]])[
                0
            ]
        )

    return minimize_scalar(
        loss, bounds=(math.log(2), math.log(128)), method="bounded", options={"xatol": 1e-10}
    ).fun


def test_joint_law_frontier_reproduces_paper_notes_ranges():
    """paper-notes §4.2: from the joint law, 0.027-0.044, 0.053-0.086, 0.077-0.125 nats."""
    law = JointLaw.reference()
    fr = frontier(law, PaperFamily(), paper_budgets())
    want = {2: (0.027, 0.044), 4: (0.053, 0.086), 8: (0.077, 0.125)}
    for r, (lo, hi) in want.items():
        got_lo, got_hi = fr.gap_range[r]
        assert got_lo == pytest.approx(lo, abs=0.005) and got_hi == pytest.approx(hi, abs=0.005)
        assert (round(got_lo, 3), round(got_hi, 3)) == (lo, hi)  # in fact to the last digit
        assert fr.gap[r][0] == max(fr.gap[r])  # the gap narrows as compute grows
    assert not any(any(e) for e in fr.at_edge.values())
    # the grid-and-parabola minimum equals a scalar optimiser's to 1e-8 nats
    for r in (1, 8):
        for i, c in enumerate(paper_budgets()):
            assert fr.l_star[r][i] == pytest.approx(_brute_lstar(law, c, r), abs=1e-8)


def test_frontier_optimum_satisfies_the_budget():
    law = JointLaw.reference()
    fr = frontier(law, PaperFamily(), [1e19])
    s = fr.size_star[4][0]
    arch = paper_architecture(s, 4)
    assert fr.tokens_star[4][0] * arch["flops_per_token"] == pytest.approx(1e19, rel=1e-6)
    assert fr.n_unique_star[4][0] == pytest.approx(arch["n_once"] + arch["n_rec"], rel=1e-6)
    assert fr.n_eff_star[4][0] == pytest.approx(arch["n_once"] + 4**0.459 * arch["n_rec"], rel=1e-6)
    assert 20 < s < 30  # the study's r = 4 optimum at 1e19 is near s = 24


def test_table_family_matches_the_paper_family():
    """The frontier from a table's own architectures (smooth fits of F and the split)
    agrees with the exact paper architectures."""
    runs = table_from_frame(simulate("paper"))
    law = JointLaw.reference()
    exact = frontier(law, PaperFamily(), paper_budgets())
    table = frontier(law, TableFamily.from_runs(runs), table_budgets(runs))
    assert table.budgets == exact.budgets
    for r in (2, 4, 8):
        np.testing.assert_allclose(table.gap[r], exact.gap[r], atol=5e-4)
    for r in (1, 2, 4, 8):
        np.testing.assert_allclose(table.n_unique_star[r], exact.n_unique_star[r], rtol=0.03)


def test_table_family_without_flops_uses_6n():
    frame = simulate("paper").drop(columns=["flops"])
    runs = table_from_frame(frame)
    fam = TableFamily.from_runs(runs)
    g = fam.grid(4, 7)
    np.testing.assert_allclose(g["flops_per_token"], 6 * (g["n_once"] + 4 * g["n_rec"]), rtol=2e-3)
    assert "6 (n_once + r n_rec)" in fam.description
    np.testing.assert_allclose(runs.compute, 6 * (runs.n_once + runs.r * runs.n_rec) * runs.tokens)


def test_frontier_intervals_from_draws():
    law = JointLaw.reference()
    theta = law.theta
    same = np.tile(theta, (5, 1))
    fr = frontier(law, PaperFamily(), [1e18, 1e19], thetas=same)
    for r in (2, 4, 8):
        for (lo, hi), g in zip(fr.gap_interval[r], fr.gap[r]):
            assert lo == pytest.approx(g, abs=1e-12) and hi == pytest.approx(g, abs=1e-12)
    draws = np.tile(theta, (3, 1))
    draws[:, 5] = [0.3, 0.459, 0.6]  # larger phi: each recurrence worth more, smaller gap
    fr = frontier(law, PaperFamily(), [1e19], thetas=draws, level=0.5)
    lo, hi = fr.gap_interval[8][0]
    assert lo < fr.gap[8][0] < hi
    assert fr.n_draws == 3


def test_frontier_flags_an_optimum_on_the_edge():
    runs = table_from_frame(simulate("paper"))
    fr = frontier(JointLaw.reference(), TableFamily.from_runs(runs), [1e21])
    assert all(fr.at_edge[r][0] for r in (1, 2, 4, 8))
    assert len(fr.warnings) == 4 and all(isinstance(w, Caution) for w in fr.warnings)
    assert {(w.source, w.kind, w.level) for w in fr.warnings} == {("frontier", "optimum_at_edge", "warning")}
    assert all("largest size searched; train larger models" in w.message for w in fr.warnings)
    assert [w.values["r"] for w in fr.warnings] == [1, 2, 4, 8]
    small = frontier(JointLaw.reference(), TableFamily.from_runs(runs), [1e15, 1e21])
    assert all(small.at_edge[r] == [True, True] for r in (1, 2, 4, 8))
    texts = [w.message for w in small.warnings]
    assert any("C = 1e+15 the fitted optimum lies at the smallest size searched" in t for t in texts)
    assert any("C = 1e+21 the fitted optimum lies at the largest size searched" in t for t in texts)
    assert {w.values["edge"] for w in small.warnings} == {"smallest", "largest"}
    saved = json.loads(json.dumps(small.to_dict(), allow_nan=False))["warnings"]
    assert [Caution.from_dict(w) for w in saved] == small.warnings


# -- parabola minima (approach 2) --------------------------------------------------------------
def test_parabola_minima_are_exact_on_quadratic_curves():
    rows = []
    for budget, x0, l0 in ((1e18, math.log(1e8), 2.9), (1e19, math.log(4e8), 2.5)):
        for r, shift in ((1, 0.0), (2, 0.04)):
            for dx in (-0.8, -0.3, 0.2, 0.6, 0.9):
                n = math.exp(x0 + dx)
                rows.append(
                    {
                        "r": r,
                        "n_once": 0.2 * n,
                        "n_rec": 0.8 * n,
                        "tokens": 1e9,
                        "budget": budget,
                        "loss": l0 + shift + 0.05 * dx**2,
                    }
                )
    pm = parabola_minima(table_from_frame(pd.DataFrame(rows)))
    assert len(pm.cells) == 4 and all(c["ok"] for c in pm.cells)
    for c in pm.cells:
        want = 1e8 if c["budget"] == 1e18 else 4e8
        assert c["n_star"] == pytest.approx(want, rel=1e-9)
        assert c["curvature"] == pytest.approx(0.05, rel=1e-9)
    assert [g["gap"] for g in pm.gap[2]] == pytest.approx([0.04, 0.04], abs=1e-12)


def test_parabola_minima_on_the_noise_free_paper_design_agree_with_the_law():
    runs = table_from_frame(simulate("paper"))
    pm = parabola_minima(runs)
    fr = frontier(JointLaw.reference(), TableFamily.from_runs(runs), table_budgets(runs))
    for r in (2, 4, 8):
        for g in pm.gap[r]:
            i = fr.budgets.index(g["budget"])
            assert g["gap"] == pytest.approx(fr.gap[r][i], abs=2e-3)
        assert len(pm.gap[r]) == 6


def test_parabola_minima_refuse_concave_cells_and_need_budgets():
    rows = [
        {"r": 1, "n_once": n, "n_rec": 0, "tokens": 1e9, "budget": 1, "loss": 3 - 0.01 * i**2}
        for i, n in enumerate((1e7, 2e7, 4e7, 8e7))
    ]
    pm = parabola_minima(table_from_frame(pd.DataFrame(rows)))
    assert not pm.cells[0]["ok"] and "not convex" in pm.warnings[0].message
    assert (pm.warnings[0].source, pm.warnings[0].kind, pm.warnings[0].level) == (
        "isoflop",
        "not_convex",
        "note",
    )
    two = parabola_minima(table_from_frame(pd.DataFrame(rows[:2])))
    assert (
        not two.cells and two.warnings[0].kind == "too_few_sizes" and two.warnings[0].values["n_sizes"] == 2
    )
    with pytest.raises(ValueError, match="need a 'budget' column"):
        parabola_minima(table_from_frame(pd.DataFrame(rows).drop(columns=["budget"])))


# -- isoFLOP curves, helpers ----------------------------------------------------------------------
def test_isoflop_curves_pass_through_noise_free_runs():
    runs = table_from_frame(simulate("paper"))
    curves = isoflop_curves(JointLaw.reference(), runs)
    assert len(curves.cells) == 24
    for cell in curves.cells[::5]:
        m = (runs.frame["budget"] == cell["budget"]).to_numpy() & (runs.r == cell["r"])
        n = runs.n_once[m] + runs.n_rec[m]
        got = np.interp(np.log(n), np.log(cell["n_unique"]), cell["loss"])
        np.testing.assert_allclose(got, runs.loss[m], atol=2e-3)


def test_percentile_interval_and_budgets():
    assert percentile_interval(np.arange(101.0), 0.9) == pytest.approx([5.0, 95.0])
    with pytest.raises(ValueError, match="level must be in"):
        percentile_interval(np.arange(3.0), 1.0)
    assert table_budgets(table_from_frame(simulate("paper"))) == paper_budgets()
    # without numeric budget labels: six budgets spread over the runs' compute (RunTable.compute)
    runs = table_from_frame(simulate("paper").drop(columns=["budget"]))
    spread = table_budgets(runs)
    assert len(spread) == 6 and spread[0] == float(f"{runs.compute.min():.3g}")
    assert spread[-1] == float(f"{runs.compute.max():.3g}")


def test_parabola_minima_with_a_nearly_flat_curve_put_the_minimum_at_infinity():
    """A convex but almost straight isoFLOP curve puts the vertex at log N ~ 1e6: N* is inf
    (None in JSON), noted as outside the sizes trained, not an overflow."""
    rows = [
        {"r": 1, "n_once": n, "n_rec": 0, "tokens": 1e9, "budget": 1, "loss": 3 - 0.01 * i + 1e-9 * i**2}
        for i, n in enumerate((1e7, 2e7, 4e7, 8e7))
    ]
    pm = parabola_minima(table_from_frame(pd.DataFrame(rows)))
    assert pm.cells[0]["n_star"] == math.inf and not pm.cells[0]["ok"]
    assert pm.warnings[0].kind == "minimum_outside" and "N* = inf" in pm.warnings[0].message
    assert pm.to_dict()["cells"][0]["n_star"] is None
