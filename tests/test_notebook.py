"""docs/notebook.ipynb runs top to bottom in a real Jupyter kernel (nbclient); a failing cell fails
the test.  The notebook is executed in memory: the tracked file is not rewritten."""

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
    assert NOTEBOOK.read_bytes() == before
