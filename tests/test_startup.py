"""``phifit fit`` imports what a point fit uses, when it uses it (issue: point fits at the import floor).

A point fit needs numpy, pandas and scipy.optimize; the residual tests (statsmodels, scipy.stats),
the other diagnostics, plotting and the trainer's commands are imported only by the commands
that run them.  These tests run a point fit in a fresh interpreter and list what it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "data" / "looped_study_runs_digitized.csv"

#: modules a point fit must not import (each costs from tens of milliseconds to half a second)
NOT_FOR_A_POINT_FIT = (
    "statsmodels",
    "scipy.stats",
    "matplotlib",
    "lmfit",
    "phifit.diagnostics.suite",
    "phifit.diagnostics.identifiability",
    "phifit.trainers",
    "phifit.spec.sweep_spec",
    "phifit.recipes.delta",
    "phifit.bootstrap.wild",
    "phifit.report",
)

CHECK = """
import json, sys
from phifit.cli.main import main
code = main(["fit", {table!r}, "--quiet"])
print(json.dumps({{"code": code, "loaded": [m for m in {names!r} if m in sys.modules]}}))
"""


def loaded_by_a_point_fit() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(table=str(TABLE), names=NOT_FOR_A_POINT_FIT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_point_fit_imports_only_what_it_uses():
    out = loaded_by_a_point_fit()
    assert out["code"] == 0
    assert out["loaded"] == [], f"a point fit imported {out['loaded']}: import them where they are used"


def test_the_check_sees_an_eager_import():
    """The check above is real: reaching the diagnostics loads modules it keeps out of a point fit
    (the suite and the identifiability checks), so an eager ``from .suite import diagnose`` back in
    ``phifit/diagnostics/__init__.py`` fails it."""
    names = ("phifit.diagnostics.suite", "phifit.diagnostics.identifiability")
    code = (
        "import sys, phifit.diagnostics; phifit.diagnostics.diagnose; "
        f"print([m for m in {names!r} if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == repr(list(names))
    assert set(names) <= set(NOT_FOR_A_POINT_FIT)


def test_the_point_fits_offset_flags_are_the_diagnostics():
    """``phifit fit``'s cheap per-r flags are exactly residual_diagnostics' systematic_r_offset."""
    import phifit
    from phifit.diagnostics.residuals import r_offset_flags, residual_diagnostics

    runs = phifit.load_runs(TABLE)
    result = phifit.fit(runs, n_starts=50, seed=0)
    full = [c for c in residual_diagnostics(runs, result).flags if c.kind == "systematic_r_offset"]
    cheap = r_offset_flags(runs, result)
    assert cheap == full and [c.values["r"] for c in cheap] == [4]  # the study's r = 4 offset
