"""Tables whose design cannot identify a parameter: a single token count D.

With one D the data term B D^-beta is one constant, so B, beta and E are not separately
identified; the fit holds B = 0 (beta = 0), reports E as E + B D^-beta at that D, B and beta
as null, and nothing built on B or beta (frontier, allocation, loss at another D) is given.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from phifit.fitters.huber import fit_huber
from phifit.frontier import PaperFamily, frontier
from phifit.law import JointLaw
from phifit.predict import predict
from phifit.runs.table import as_runs

D = 2e9


def one_token_table(n_sizes: int = 4, noise: float = 0.002, seed: int = 0) -> pd.DataFrame:
    """Runs at r = 1, 2, 4 and ``n_sizes`` sizes, all trained on D tokens."""
    law = JointLaw.reference()
    rng = np.random.default_rng(seed)
    rows = []
    for r in (1, 2, 4):
        for n_rec in np.geomspace(3e7, 3e8, n_sizes):
            n_once = 0.1 * n_rec
            loss = float(law.loss(r=r, n_once=n_once, n_rec=n_rec, tokens=D)[0]) * np.exp(
                noise * rng.standard_normal()
            )
            rows.append(
                {
                    "run_id": f"r{r}_{n_rec:.3g}",
                    "r": r,
                    "n_once": n_once,
                    "n_rec": n_rec,
                    "tokens": D,
                    "loss": loss,
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def fit():
    return fit_huber(one_token_table(), n_starts=40, seed=0)


def test_runs_count_token_counts():
    runs = as_runs(one_token_table())
    assert runs.n_token_counts == 1 and not runs.d_term_identifiable
    frame = one_token_table()
    frame.loc[0, "tokens"] = 4e9
    assert as_runs(frame).d_term_identifiable


def test_one_token_count_marks_b_and_beta_unidentified(fit):
    assert fit.params["B"] is None and fit.params["beta"] is None
    assert not fit.d_term_identified
    assert set(fit.unidentified) == {"B", "beta"}
    assert fit.n_free == 4  # E (as E + B D^-beta), A, alpha, phi
    kinds = [c.kind for c in fit.warnings]
    assert "d_term_unidentified" in kinds
    # the fitted E is the identified constant E + B D^-beta of the generating law at D
    ref = JointLaw.reference()
    assert fit.params["E"] == pytest.approx(ref.E + ref.B * D ** (-ref.beta), abs=0.05)


def test_summary_says_first_what_is_not_estimated(fit):
    text = fit.summary()
    head = text.split("[[Fit statistics]]")[0]
    assert "NOT ESTIMATED" in head and "same token count" in head
    assert "not identified" in text


def test_fit_result_round_trips_with_null_b_beta(fit):
    back = type(fit).from_dict(fit.to_dict())
    assert back.params["B"] is None and not back.d_term_identified
    # the law evaluates with the held values (B D^-beta ~ 1e-12)
    assert np.isfinite(back.law.loss(r=2, n_once=1e7, n_rec=1e8, tokens=D)).all()


def test_frontier_and_allocation_are_refused(fit):
    with pytest.raises(ValueError, match="token count"):
        frontier(fit, PaperFamily(), [1e19])
    with pytest.raises(ValueError, match="allocation"):
        predict(fit, budgets=[1e19])


def test_predict_at_the_fitted_d_only(fit):
    at_d = {"r": [2], "n_once": [1e7], "n_rec": [1e8], "tokens": [D]}
    assert np.isfinite(predict(fit, points=at_d).points[0]["loss"])
    with pytest.raises(ValueError, match="another token count"):
        predict(fit, points={**at_d, "tokens": [4 * D]})


def test_two_token_counts_keep_the_full_fit():
    frame = one_token_table()
    frame.loc[frame.index % 2 == 0, "tokens"] = 4 * D
    res = fit_huber(frame, n_starts=40, seed=0)
    assert res.params["B"] is not None and res.d_term_identified
    assert "d_term_unidentified" not in [c.kind for c in res.warnings]


def test_compare_runs_on_one_token_count(fit):
    from phifit.compare.restricted import compare_fits

    comp = compare_fits(one_token_table(), fit, n_wild=0, n_starts=40, cv=False)
    assert set(comp.stats) == {"free", "phi=0", "phi=1"}
    # the held B, beta are not a restriction on the boundary of the box
    assert not any("beta is fixed at a bound" in c.message for c in comp.warnings)


def test_report_headline_says_what_is_not_estimated(tmp_path):
    from phifit.report.analysis import AnalysisOptions
    from phifit.report.write import build_report

    files = build_report(
        one_token_table(),
        tmp_path / "rep",
        options=AnalysisOptions(n_boot=0, n_wild=0, n_starts=40),
    )
    first = files.headline.splitlines()[0]
    assert first.startswith("not estimated:") and "same token count" in first
    html = (tmp_path / "rep" / "index.html").read_text()
    lead = html.split('id="headline"')[1].split("</ul>")[0]
    assert "Not estimated" in lead.split("<li>")[1]
    assert "No frontier: every run has the same token count" in html


def test_design_warns_when_the_size_term_has_too_few_models():
    from phifit.diagnostics.identifiability import design_warnings

    frame = one_token_table(n_sizes=1)
    frame = frame[frame["r"] <= 2]
    frame = pd.concat([frame, frame.assign(run_id=frame["run_id"] + "_seed2", tokens=4 * D)])
    kinds = [c.kind for c in design_warnings(as_runs(frame))]
    assert "few_sizes" in kinds
    assert "few_sizes" not in [c.kind for c in design_warnings(as_runs(one_token_table()))]


def test_bootstrap_gives_no_interval_for_b_or_beta(fit):
    from phifit.bootstrap import block_bootstrap

    boot = block_bootstrap(one_token_table(), fit, n_boot=20, seed=0, n_jobs=1, progress=False)
    with_ci = boot.attach(fit)
    assert "B" not in with_ci.ci and "beta" not in with_ci.ci
    assert "alpha" in with_ci.ci and with_ci.params["B"] is None


def test_prediction_summary_prints_null_b_beta_as_na(fit):
    at_d = {"r": [2], "n_once": [1e7], "n_rec": [1e8], "tokens": [D]}
    text = predict(fit, points=at_d).summary()
    assert "B = n/a, beta = n/a" in text
