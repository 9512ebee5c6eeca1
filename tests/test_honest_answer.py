"""The honest answer on the Python path: ``phifit.answer`` words the report's headline, and
``fit().summary()`` flags an ill-conditioned information matrix and a low R^2 itself.

Three third-party-like tables, each what a user brings from someone else's looped sweep: 10 runs
(two widths x r in {1, 2, 4, 8, 16}), one token count and no budget column, a loss U-shaped in
r, and one outlying run.

- ``third_party_table``: the loss barely depends on the width.  The r^phi fit goes flat
  (alpha on its bound 0, A on its lower bound): E and A then move the loss alike, so the
  information matrix is singular (condition number ~8e15), and R^2 ~ 0.  The free multipliers
  cannot draw a width-free U either: the lack-of-fit test does not reject (p ~ 0.3).
- ``one_token_misfit_table``: the losses follow one free multiplier per r, m_r = (1, 4, 6, 2,
  0.2).  The r^phi fit tilts (phi ~ -0.84, A on its upper bound), R^2 ~ 0.44, and its
  information matrix is well enough conditioned (no caution); the lack-of-fit test rejects
  r^phi, at p = 0.014 with 999 wild replicates (0.025, the smallest p, with 39).
- ``honest_table``: one table that shows all three at once (found by
  ``benchmarks/honest_answer_scan.py``: 10 of 642 random third-party-like tables had an
  ill-conditioned matrix and a low R^2, 2 of those a rejected r^phi).  The loss is U-shaped in r
  at both widths (lowest at r = 4), one run is 0.04 nats off; the r^phi fit puts phi at 0, where
  E, A and alpha meet two width levels (singular information matrix), R^2 = 0.885; the
  lack-of-fit test rejects r^phi (p = 0.03 with 199 wild replicates, 0.025 with 999).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import phifit
from phifit.fitters.common import LOW_R2
from phifit.fitters.standard_errors import MAX_CONDITION
from phifit.report.analysis import AnalysisOptions
from phifit.report.write import build_report
from phifit.runs.table import as_runs
from phifit.simulation import simulate

STUDY_TABLE = Path(__file__).resolve().parents[1] / "data" / "looped_study_runs_digitized.csv"
#: Small settings: every step runs, in seconds.
SMALL = {"n_boot": 40, "n_wild": 19, "n_starts": 50, "seed": 0, "n_jobs": 1}


def third_party_table() -> pd.DataFrame:
    """10 runs, one token count, no budget, loss U-shaped in r (lowest at r = 2-4), one outlier."""
    rows = []
    for d in (384, 512):
        block = 12 * d * d  # one transformer block (attention 4 d^2, MLP 8 d^2)
        for r in (1, 2, 4, 8, 16):
            loss = 3.1 - 0.06 * np.log2(r) + 0.02 * np.log2(r) ** 2
            rows.append(
                {
                    "run_id": f"d{d}_r{r}",
                    "r": r,
                    "n_once": 4 * block,
                    "n_rec": 4 * block,
                    "tokens": 5e9,
                    "loss": round(loss, 4),
                }
            )
    rows[7]["loss"] += 0.05  # d512_r4: the outlier
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def third_party_fit():
    return phifit.fit(third_party_table())


def test_fit_summary_names_the_ill_conditioned_information_matrix(third_party_fit):
    fit = third_party_fit
    ill = [c for c in fit.warnings if c.kind == "ill_conditioned"]
    assert len(ill) == 1 and ill[0].values["condition_number"] > MAX_CONDITION
    text = fit.summary()
    assert "information matrix J^T W J is singular" in text
    assert "the stderr column means nothing" in text
    # next to the stderr line, not only in the notes
    stats = text.split("[[Parameters]]")[0]
    assert "MEANINGLESS: the information matrix is ill-conditioned" in stats


def test_fit_summary_names_the_low_r2(third_party_fit):
    fit = third_party_fit
    assert fit.r2 < LOW_R2 == 0.9
    text = fit.summary()
    assert f"is below {LOW_R2:g}" in text
    assert "(low: see [[Notes]])" in text.split("[[Parameters]]")[0]


def test_a_well_determined_fit_carries_neither_flag():
    fit = phifit.fit(phifit.load_runs(STUDY_TABLE), n_starts=50)
    kinds = {c.kind for c in fit.warnings}
    assert fit.r2 > LOW_R2 and not kinds & {"ill_conditioned", "low_r2"}
    assert "MEANINGLESS" not in fit.summary() and "(low: see" not in fit.summary()


def test_diagnostics_and_the_fit_read_the_same_information_matrix(third_party_fit):
    from phifit.diagnostics.identifiability import identifiability

    runs = as_runs(third_party_table())
    ident = identifiability(runs, third_party_fit, profile_points=0)
    fit_cond = next(c for c in third_party_fit.warnings if c.kind == "ill_conditioned")
    assert ident.condition_number == fit_cond.values["condition_number"]
    assert {"correlations_unreliable", "ill_conditioned"} <= {c.kind for c in ident.warnings}


def test_the_answer_on_the_study_table_is_the_reports_headline(tmp_path):
    """Same table, same settings: phifit.answer leads with the sentence the report's page opens with."""
    runs = phifit.load_runs(STUDY_TABLE)
    answer = phifit.answer(runs, **SMALL)
    files = build_report(runs, tmp_path / "report", options=AnalysisOptions(**SMALL))
    assert answer.headline == files.headline
    assert answer.summary().startswith(files.headline + "\n\n[[phifit: joint law")
    assert answer.fit is answer.analysis.fit and answer.fit.ci is not None  # bootstrap attached
    assert answer.bootstrap is not None and answer.bootstrap.n_boot == SMALL["n_boot"]
    assert set(answer.comparison.stats) >= {"phi=0", "phi=1"}
    assert answer.lack_of_fit is not None and answer.lack_of_fit.testable
    assert len(repr(answer)) < 300 and repr(answer).startswith("Answer(n_runs=116")


def test_the_answer_leads_with_the_lack_of_fit_when_r_phi_is_rejected():
    """The r = 8 runs 2% worse than r^phi says: the first sentence is the lack-of-fit one."""
    frame = simulate("paper", params={"phi": 0.5}, noise=0.002, cell_noise=0.001, seed=3)
    frame.loc[frame["r"] == 8, "loss"] *= 1.02
    answer = phifit.answer(frame, n_boot=40, n_starts=50, n_wild=59, n_jobs=1)
    assert answer.lack_of_fit.rejected
    first = answer.summary().splitlines()[0]
    assert first.startswith("r^phi does not describe this table's recurrences") and "m_8 = " in first
    assert "summarises a law that does not hold here" in first


def test_the_answer_on_the_third_party_table_says_what_the_report_says():
    """One token count: the report's headline leads with what cannot be estimated (B, beta and E
    apart), and no lack-of-fit test runs (B and beta are held); the warnings name the low R^2.
    (That the answer's headline is the report's, by construction, is checked on the study table.)"""
    answer = phifit.answer(third_party_table(), **{**SMALL, "n_boot": 20, "n_wild": 0, "n_starts": 20})
    first = answer.summary().splitlines()[0]
    assert first.startswith("not estimated: B and beta, hence E on its own")
    # the free multipliers run with B and beta held (no wild replicates here: not tested)
    assert answer.lack_of_fit is not None and answer.lack_of_fit.testable and answer.lack_of_fit.wild is None
    assert "below 0.9: the law leaves more than 10% of the spread" in answer.headline


def one_token_misfit_table() -> pd.DataFrame:
    """10 runs (two widths x r in {1, 2, 4, 8, 16}), one token count, no budget column, a loss
    U-shaped in r (lowest at r = 4, r = 16 worse than r = 1), one outlying run: the losses follow
    one free multiplier per r, m_r = (1, 4, 6, 2, 0.2), which no r^phi can draw."""
    rng = np.random.default_rng(2)
    multiplier = {1: 1.0, 2: 4.0, 4: 6.0, 8: 2.0, 16: 0.2}
    rows = []
    for d in (384, 512):
        block = 12 * d * d
        for r, m in multiplier.items():
            loss = 1.8 + 300.0 * (block + 8 * m * block) ** -0.34 + rng.normal(0, 0.002)
            rows.append(
                {
                    "run_id": f"d{d}_r{r}",
                    "r": r,
                    "n_once": block,
                    "n_rec": 8 * block,
                    "tokens": 5e9,
                    "loss": loss,
                }
            )
    rows[7]["loss"] += 0.04  # d512_r4: the outlier
    return pd.DataFrame(rows).round({"loss": 4})


def test_the_answer_on_one_token_count_leads_with_the_lack_of_fit():
    """One token count holds B and beta; the lack-of-fit test of r^phi holds them too (3 + 4 free
    parameters against 3 + 1, 10 single-run blocks), rejects r^phi, and its sentence comes first,
    before what one token count cannot estimate.  (With 10 single-run blocks the wild test does
    not go far below p = 0.01: this table sits at p = 0.014 with 999 replicates; 39 replicates,
    whose smallest p is 0.025, reach it.  No bootstrap: it would add the test-inverted set of
    phi, 8 wild tests more, which the headline's first two lines do not read.)"""
    runs = as_runs(one_token_misfit_table())
    fit = phifit.fit(runs)
    assert set(fit.fixed) == {"B", "beta"} and fit.r2 < LOW_R2
    assert "(low: see [[Notes]])" in fit.summary()
    answer = phifit.answer(runs, **{**SMALL, "n_boot": 0, "n_wild": 39})
    mult = answer.lack_of_fit
    assert mult.testable and mult.rejected and set(mult.free_params) == {"E", "A", "alpha"}
    held = next(c for c in mult.warnings if c.kind == "held")
    assert "the free-multiplier law has 7 free parameters, the r^phi law 4" in held.message
    lines = answer.summary().splitlines()
    assert lines[0].startswith("r^phi does not describe this table's recurrences (lack-of-fit wild cluster")
    assert "summarises a law that does not hold here" in lines[0]
    assert lines[1].startswith("not estimated: B and beta, hence E on its own")
    assert answer.headline.splitlines()[0] == lines[0]


def test_answer_refuses_an_unknown_option():
    with pytest.raises(ValueError, match="unknown option.*n_bootstrap.*expected one of"):
        phifit.answer(third_party_table(), n_bootstrap=10)


def test_answer_is_exported():
    assert "answer" in phifit.__all__ and "Answer" in phifit.__all__
    assert phifit.answer.__module__ == "phifit.report.honest"


def test_python_side_messages_name_the_python_argument():
    """Messages raised or noted by library code name the argument a Python caller passes, with
    the command-line flag beside it."""
    from phifit.runs.table import RunTableError

    frame = third_party_table()
    runs = phifit.load_runs(frame, where="r<=8")
    note = next(c for c in runs.warnings if c.kind == "rows_selected")
    assert "where=" in note.message and "--where" in note.message
    with pytest.raises(RunTableError, match=r"where= / --where: no column 'lr'"):
        phifit.load_runs(frame, where="lr>1")
    no_budget = next(c for c in phifit.load_runs(frame).warnings if c.kind == "no_budget")
    assert "block='COL' (--block COL)" in no_budget.message


def honest_table() -> pd.DataFrame:
    """10 runs (widths 512 and 1024 x r in {1, 2, 4, 8, 16}), one token count, no budget column,
    the loss U-shaped in r at both widths (lowest at r = 4) and d1024_r8 0.04 nats above its
    neighbours' trend: a table drawn by ``benchmarks/honest_answer_scan.py`` (family "random",
    table 102), its losses written out."""
    losses = {512: (2.8563, 2.8758, 2.7456, 2.7865, 2.9038), 1024: (2.549, 2.5589, 2.4708, 2.5364, 2.587)}
    rows = []
    for d, row_losses in losses.items():
        block = 12 * d * d
        for r, loss in zip((1, 2, 4, 8, 16), row_losses, strict=True):
            rows.append(
                {
                    "run_id": f"d{d}_r{r}",
                    "r": r,
                    "n_once": 4 * block,
                    "n_rec": block,
                    "tokens": 5e9,
                    "loss": loss,
                }
            )
    return pd.DataFrame(rows)


def test_one_table_shows_the_singular_matrix_the_low_r2_and_the_rejected_r_phi():
    """The issue's table in one: ``fit().summary()`` names the singular information matrix and the
    low R^2, and ``phifit.answer`` leads with the lack-of-fit sentence (then what one token count
    cannot estimate)."""
    runs = as_runs(honest_table())
    fit = phifit.fit(runs)
    kinds = {c.kind for c in fit.warnings}
    assert {"ill_conditioned", "low_r2"} <= kinds and fit.r2 < LOW_R2
    assert abs(fit.params["phi"]) < 1e-6  # phi = 0: E, A and alpha against two width levels
    text = fit.summary()
    assert "the information matrix J^T W J is singular" in text and "the stderr column means nothing" in text
    assert "(low: see [[Notes]])" in text.split("[[Parameters]]")[0]
    answer = phifit.answer(runs, n_boot=0, n_wild=199, seed=0, n_jobs=1)
    assert answer.lack_of_fit.rejected and answer.lack_of_fit.wild.p_value < 0.05
    lines = answer.summary().splitlines()
    assert lines[0].startswith("r^phi does not describe this table's recurrences (lack-of-fit wild cluster")
    assert "summarises a law that does not hold here" in lines[0]
    assert lines[1].startswith("not estimated: B and beta, hence E on its own")
