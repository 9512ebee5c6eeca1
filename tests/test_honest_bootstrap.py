"""Intervals from bootstraps that failed: withheld beyond a failure share, marked below it,
and a prediction that says why it has no interval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from phifit.bootstrap.block import _cautions, block_bootstrap
from phifit.bootstrap.result import MAX_FAILED_SHARE
from phifit.fitters import fit
from phifit.predict import predict
from phifit.runs.table import table_from_frame

DATA = Path(__file__).resolve().parents[1] / "data"


def study_rows(
    budgets: list[float], sizes: list[int], r_values: list[int], n: int | None = None
) -> pd.DataFrame:
    """Rows of the study's digitised table: the given budgets, sizes and r (the first ``n``)."""
    frame = pd.read_csv(DATA / "looped_study_runs_digitized.csv")
    keep = frame[frame["budget"].isin(budgets) & frame["size"].isin(sizes) & frame["r"].isin(r_values)]
    return keep.iloc[:n] if n is not None else keep


@pytest.fixture(scope="module")
def seven_runs():
    """7 runs over two budgets and r = 1, 2, 4: 4 (budget, r) cells for 6 free parameters."""
    return table_from_frame(study_rows([4.64e17, 1e18], [8, 10], [1, 2, 4], n=7), source="seven")


@pytest.fixture(scope="module")
def seven_fit_and_boot(seven_runs):
    point = fit(seven_runs, n_starts=8, seed=0)
    boot = block_bootstrap(
        seven_runs, point, n_boot=40, seed=0, n_jobs=1, progress=False, jackknife=False, n_spread=0
    )
    return point, boot


def test_intervals_withheld_when_most_replicates_fail(seven_fit_and_boot):
    point, boot = seven_fit_and_boot
    assert boot.n_failed / boot.n_boot > MAX_FAILED_SHARE
    assert all(v == [None, None] for v in boot.ci.values())
    assert all(v == [None, None] for v in boot.ci_bca.values())
    kinds = {c.kind: c for c in boot.warnings}
    assert "intervals_withheld" in kinds
    assert f"{boot.n_failed} of {boot.n_boot}" in kinds["intervals_withheld"].message
    assert "no interval" in kinds["intervals_withheld"].message
    attached = boot.attach(point)
    text = attached.summary()
    assert "withheld" in text and "no interval" in text
    assert "withheld" in boot.summary()
    assert not np.isfinite(boot.interval(lambda p: p["phi"]).lo)


def test_intervals_marked_between_small_share_and_limit():
    mid = _cautions(
        n_boot=100,
        n_failed=5,
        reasons={"did not converge": 5},
        n_jack_failed=0,
        n_blocks=20,
        bca_undefined=[],
        switched=0,
        at_bounds={},
    )
    assert [c.kind for c in mid] == ["failed_replicates"]
    assert "5 of 100" in mid[0].message and "approximate" in mid[0].message
    assert mid[0].values["approximate"] is True
    few = _cautions(
        n_boot=1000,
        n_failed=3,
        reasons={"did not converge": 3},
        n_jack_failed=0,
        n_blocks=20,
        bca_undefined=[],
        switched=0,
        at_bounds={},
    )
    assert [c.kind for c in few] == ["failed_replicates"]
    assert "approximate" not in few[0].message


def test_predict_says_why_no_interval(seven_fit_and_boot):
    point, boot = seven_fit_and_boot
    pred = predict(
        point, points={"r": [2], "n_once": [1.2e7], "n_rec": [2.5e7], "tokens": [8e8]}, bootstrap=boot
    )
    assert pred.n_draws == 0 and pred.points[0]["interval"] is None
    text = pred.summary()
    assert f"{boot.n_failed} of {boot.n_boot} bootstrap replicates failed" in text
    assert "pass --runs RUNS.csv --bootstrap N" not in text
    assert any(c.kind == "intervals_withheld" for c in pred.warnings)


def _analysis(fit_result):
    """The parts of a report's Analysis the headline reads."""
    from types import SimpleNamespace

    return SimpleNamespace(
        fit=fit_result,
        comparison=None,
        allocation=None,
        recipes=None,
        multipliers=None,
        phi_inverted=None,
        parts=None,
        cautions_from=lambda level=None: [c for c in fit_result.warnings if level in (None, c.level)],
    )


def test_report_headline_withholds_and_marks(seven_fit_and_boot):
    from phifit.report.sections_fit import phi_interval_kind, section_headline

    point, boot = seven_fit_and_boot
    attached = boot.attach(point)
    assert phi_interval_kind(_analysis(attached)) == ""
    head = section_headline(_analysis(attached))
    assert "no interval" in head and f"{boot.n_failed} of {boot.n_boot}" in head
    # 3% failed: the interval is shown, and marked approximate
    marked = attached.with_updates(
        ci={k: [0.0, 1.0] for k in attached.ci},
        bootstrap={**attached.bootstrap, "n": 100, "n_failed": 3},
    )
    head = section_headline(_analysis(marked))
    assert "approximate" in head and "3 of 100" in head
