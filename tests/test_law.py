"""The joint law: values against the closed form, the analytic Jacobian against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from phifit.law import (
    REFERENCE_PARAMS,
    Design,
    JointLaw,
    LawSpec,
    log_loss,
    log_loss_and_jacobian,
    log_loss_and_jacobian_t,
    params_to_theta,
    theta_to_params,
)
from phifit.study import paper_design

DESIGN = paper_design()


def test_log_loss_equals_closed_form():
    law = JointLaw.reference()
    r, n_once, n_rec, tokens = (DESIGN[c].to_numpy(float) for c in ("r", "n_once", "n_rec", "tokens"))
    n_eff = n_once + r**law.phi * n_rec
    direct = law.E + law.A * n_eff**-law.alpha + law.B * tokens**-law.beta
    np.testing.assert_allclose(law.loss(r=r, n_once=n_once, n_rec=n_rec, tokens=tokens), direct, rtol=1e-13)


def test_r1_ignores_split_and_phi():
    theta = params_to_theta(REFERENCE_PARAMS)
    a = Design.from_arrays([1], [1e6], [9e6], [1e9])
    b = Design.from_arrays([1], [1e7], [0.0], [1e9])
    theta2 = theta.copy()
    theta2[5] = 2.5
    assert log_loss(theta, a)[0] == pytest.approx(log_loss(theta, b)[0], rel=1e-14)
    assert log_loss(theta2, a)[0] == pytest.approx(log_loss(theta, a)[0], rel=1e-14)


def test_fully_looped_model_has_no_once_params():
    law = JointLaw.reference()
    got = law.loss(r=[4], n_once=[0.0], n_rec=[1e7], tokens=[1e9])[0]
    want = law.E + law.A * (4**law.phi * 1e7) ** -law.alpha + law.B * 1e9**-law.beta
    assert got == pytest.approx(want, rel=1e-13)


@pytest.mark.parametrize("phi", [-1.0, 0.0, 0.459, 1.0, 2.5])
def test_jacobian_matches_central_differences(phi):
    rng = np.random.default_rng(3)
    design = Design.from_arrays(DESIGN["r"], DESIGN["n_once"], DESIGN["n_rec"], DESIGN["tokens"])
    theta = params_to_theta({**REFERENCE_PARAMS, "phi": phi}) + 0.05 * rng.standard_normal(6)
    _, jac = log_loss_and_jacobian(theta, design)
    h = np.finfo(float).eps ** (1 / 3)
    for i in range(6):
        step = np.zeros(6)
        step[i] = h * max(1.0, abs(theta[i]))
        fd = (log_loss(theta + step, design) - log_loss(theta - step, design)) / (2 * step[i])
        np.testing.assert_allclose(jac[:, i], fd, rtol=1e-6, atol=1e-9)


def test_batched_theta_matches_loop():
    design = Design.from_arrays(DESIGN["r"], DESIGN["n_once"], DESIGN["n_rec"], DESIGN["tokens"])
    thetas = params_to_theta(REFERENCE_PARAMS) + np.random.default_rng(0).normal(0, 0.1, (5, 6))
    batched, jac = log_loss_and_jacobian(thetas, design)
    for k in range(5):
        one, jac1 = log_loss_and_jacobian(thetas[k], design)
        np.testing.assert_allclose(batched[k], one, rtol=1e-14)
        np.testing.assert_allclose(jac[k], jac1, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("phi", [-0.7, 0.0, 0.459, 1.3])
def test_transposed_jacobian_equals_the_first_implementation(phi):
    # the vectorised fitters use the transposed layout; it must be the same numbers
    design = Design.from_arrays(DESIGN["r"], DESIGN["n_once"], DESIGN["n_rec"], DESIGN["tokens"])
    theta = params_to_theta({**REFERENCE_PARAMS, "phi": phi})
    thetas = theta + np.random.default_rng(1).normal(0, 0.2, (4, 6))
    for t in (theta, thetas):
        value, jac = log_loss_and_jacobian(t, design)
        value_t, jac_t = log_loss_and_jacobian_t(t, design)
        np.testing.assert_allclose(value_t, value, rtol=1e-14, atol=0)
        np.testing.assert_allclose(np.swapaxes(jac_t, -1, -2), jac, rtol=1e-12, atol=1e-300)


def test_param_round_trip():
    theta = params_to_theta(REFERENCE_PARAMS)
    back = theta_to_params(theta)
    for k, v in REFERENCE_PARAMS.items():
        assert back[k] == pytest.approx(v, rel=1e-14)


def test_spec_fixed_values_and_labels():
    spec = LawSpec(fixed={"phi": 1.0, "E": 1.7})
    assert spec.free_names == ("A", "alpha", "B", "beta")
    theta = spec.full_theta(np.array([3.0, 0.2, 6.0, 0.3]))
    assert theta[4] == pytest.approx(np.log(1.7)) and theta[5] == 1.0
    assert spec.label() == "phi=1,E=1.7"
    assert LawSpec().label() == "free"


@pytest.mark.parametrize(
    "fixed, match", [({"gamma": 1.0}, "unknown parameter 'gamma'"), ({"E": -1.0}, "E must be > 0")]
)
def test_spec_rejects_bad_fixed(fixed, match):
    with pytest.raises(ValueError, match=match):
        LawSpec(fixed=fixed)


def test_spec_rejects_inverted_bounds():
    with pytest.raises(ValueError, match="lower < upper"):
        LawSpec(bounds={"phi": (1.0, 0.0)})


def test_spec_pickles():
    import pickle

    spec = LawSpec(fixed={"phi": 0.0}, bounds={"alpha": (0.0, 1.0)})
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec and back.bounds["alpha"] == (0.0, 1.0) and back.label() == "phi=0"
