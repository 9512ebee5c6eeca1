"""The README and the documentation: generated tables current, quick start and CI in step.

The README and docs/ quote the shipped reports only through the tables that
``docs/results_table.py`` writes from ``reports/*/results.json``; these tests check that those
tables are what the reports say now, and the few structural promises the README makes (its
length, its quick-start commands, the command CI runs).  No test reads the prose.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def results_table():
    spec = importlib.util.spec_from_file_location("results_table", ROOT / "docs" / "results_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)


def quick_start() -> list[str]:
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    return fenced_blocks(section)[0][1].splitlines()


def test_the_generated_tables_are_current():
    """Every table block in README.md and docs/ is what the committed reports give."""
    module = results_table()
    stale = module.stale(ROOT)
    assert not stale, f"out of date: {sorted(stale)}; run python docs/results_table.py"


def test_the_results_table_has_one_row_per_shipped_report():
    module = results_table()
    reports = sorted(p.parent.name for p in (ROOT / "reports").glob("*/results.json"))
    rows = [line for line in module.table(ROOT).splitlines()[2:] if line.startswith("|")]
    assert len(rows) == len(reports) and all(any(f"`{r}`" in row for row in rows) for r in reports)


def test_a_missing_marker_is_refused():
    module = results_table()
    with pytest.raises(ValueError, match="no block between"):
        module.rewrite("no markers here", "| table |")


def test_the_readme_is_a_manual():
    assert len(README.read_text(encoding="utf-8").splitlines()) < 180


def test_the_quick_start_is_two_commands_and_ci_runs_the_second():
    """The first sets up and reports into a git-ignored folder; CI runs the second verbatim."""
    first, second = quick_start()
    assert first.endswith("phifit report data/looped_study_runs_digitized.csv --out reports/quickstart")
    assert "torch" not in first  # the base install fits and reports without torch
    assert second.endswith('python -m pytest -m "not slow" -q')
    assert "reports/quickstart/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert second in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_ci_builds_the_documentation():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "mkdocs build --strict" in ci
    assert (ROOT / "mkdocs.yml").exists() and "site/" in (ROOT / ".gitignore").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_readme_python_example_runs(tmp_path):
    """The README's Python example, as written, in a folder with the bundled data."""
    code = next(body for lang, body in fenced_blocks(README.read_text(encoding="utf-8")) if lang == "python")
    shutil.copytree(ROOT / "data", tmp_path / "data")
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "phi" in done.stdout and (tmp_path / "fit.json").exists()
