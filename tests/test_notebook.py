"""docs/notebook.ipynb runs top to bottom in a real Jupyter kernel (nbclient); a failing cell fails
the test.  The notebook is executed in memory: the tracked file is not rewritten.  Its last
section fits a table of two recipes by recipe (the table whole is refused), takes a small
Bayesian fit's InferenceData into ``arviz.summary`` and predicts through ``phifit.predict``."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


def test_notebook_runs_in_a_kernel():
    before = NOTEBOOK.read_bytes()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), "store it without outputs"
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()  # raises CellExecutionError naming the cell that failed
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the six-panel figure was not drawn"
    assert any("\\begin{tabular}" in o.get("text", "") for o in outputs), "no LaTeX table printed"
    texts = [o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs]
    assert any("several recipes" in t and "recipe='NAME'" in t for t in texts), "two recipes were pooled"
    assert any("r_hat" in t and "phi" in t for t in texts), "no ArviZ summary of the posterior"
    assert any("optimal" in t and "point" in t for t in texts), "no prediction table"
    assert NOTEBOOK.read_bytes() == before
