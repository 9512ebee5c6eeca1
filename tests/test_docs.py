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


def tracked_reports() -> list[str]:
    """The report folders git tracks (those with a committed ``results.json``)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: which reports are shipped is what git tracks")
    out = subprocess.run(
        ["git", "ls-files", "--", "reports/*/results.json"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return sorted(Path(line).parent.name for line in out.stdout.splitlines())


def test_the_shipped_list_is_the_tracked_reports():
    """A new committed report cannot be left out of the tables (nor a removed one left in)."""
    assert sorted(results_table().SHIPPED) == tracked_reports()


def test_the_results_table_has_one_row_per_shipped_report():
    module = results_table()
    reports = tracked_reports()
    rows = [line for line in module.table(ROOT).splitlines()[2:] if line.startswith("|")]
    assert len(rows) == len(reports) and all(any(f"`{r}`" in row for row in rows) for r in reports)


def test_a_users_report_does_not_enter_the_tables(tmp_path):
    """The quick start writes ``reports/quickstart/``; the tables read only the shipped reports."""
    module = results_table()
    for name in module.SHIPPED:
        (tmp_path / "reports" / name).mkdir(parents=True)
        shutil.copy(ROOT / "reports" / name / "results.json", tmp_path / "reports" / name)
    before = module.table(tmp_path)
    (tmp_path / "reports" / "quickstart").mkdir()
    shutil.copy(ROOT / "reports" / "looped_study" / "results.json", tmp_path / "reports" / "quickstart")
    assert module.table(tmp_path) == before and "quickstart" not in before


def test_a_missing_marker_is_refused():
    module = results_table()
    with pytest.raises(ValueError, match="no block between"):
        module.rewrite("no markers here", "| table |")


def test_the_readme_is_a_manual():
    assert len(README.read_text(encoding="utf-8").splitlines()) < 180


def test_the_quick_start_is_two_commands_and_ci_runs_both():
    """The first sets up and reports into a git-ignored folder; CI runs both verbatim, in order, then
    checks that they left the working tree clean."""
    first, second = quick_start()
    assert first.endswith("phifit report data/looped_study_runs_digitized.csv --out reports/quickstart")
    assert "torch" not in first  # the base install fits and reports without torch
    assert second.endswith('python -m pytest -m "not slow" -n auto -q')
    assert "reports/quickstart/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert first in ci and second in ci and ci.index(first) < ci.index(second)
    assert any("git status --porcelain" in line for line in ci[ci.index(second) :])


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
