"""Non-looped tables (no run with r > 1 and n_rec > 0) are first-class: Chinchilla's law
L = E + A N^-alpha + B D^-beta, its exponents and its compute-optimal allocation lead the
report and the fit summary; ``compare`` tests fixed exponents, not phi; the looped study's
constants are not shown as the table's reference."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from phifit.cli import main
from phifit.frontier import allocation, allocation_exponents, non_looped
from phifit.report.analysis import AnalysisOptions
from phifit.report.write import build_report
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate


def chinchilla_frame(seed: int = 5, noise: float = 0.004):
    """The paper design's r = 1 runs as a plain table (no r, n_rec or budget column)."""
    frame = simulate("paper", noise=noise, seed=seed)
    plain = frame[frame["r"] == 1].copy()
    plain["n_once"] = plain["n_once"] + plain["n_rec"]
    return plain.drop(columns=["r", "n_rec", "budget"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def chinchilla_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("nonlooped") / "rep"
    files = build_report(
        table_from_frame(chinchilla_frame()), out, options=AnalysisOptions(n_boot=30, n_starts=30, n_wild=0)
    )
    return out, files


def test_allocation_exponents_follow_from_alpha_and_beta():
    # a = beta / (alpha + beta), b = alpha / (alpha + beta); Hoffmann's 0.34, 0.28 -> a = 0.4516
    a, b = allocation_exponents(0.34, 0.28)
    assert a == pytest.approx(0.28 / 0.62) and b == pytest.approx(0.34 / 0.62)
    a, b = allocation_exponents(np.array([0.3, 0.5]), np.array([0.3, 0.1]))
    np.testing.assert_allclose(a, [0.5, 1 / 6])
    np.testing.assert_allclose(a + b, 1.0)


def test_allocation_intervals_come_from_the_bootstrap_draws():
    from phifit.bootstrap.block import block_bootstrap
    from phifit.fitters.huber import HuberOptions, fit_huber

    runs = table_from_frame(chinchilla_frame())
    assert non_looped(runs)
    fit = fit_huber(runs, options=HuberOptions(n_starts=30, seed=0))
    boot = block_bootstrap(runs, fit, n_boot=30, seed=0, progress=False, n_jobs=1)
    alloc = allocation(fit, boot)
    assert alloc.a == pytest.approx(fit.params["beta"] / (fit.params["alpha"] + fit.params["beta"]))
    lo, hi = alloc.ci["a"]
    assert lo < alloc.a < hi
    # a + b = 1 on every replicate, so b's interval is a's reflected about 1/2
    np.testing.assert_allclose(alloc.ci["b"], [1 - hi, 1 - lo], atol=1e-12)
    draws = boot.params["beta"] / (boot.params["alpha"] + boot.params["beta"])
    assert lo >= np.nanmin(draws) and hi <= np.nanmax(draws)


def test_report_leads_with_exponents_and_allocation(chinchilla_report):
    out, files = chinchilla_report
    data = json.loads((out / "results.json").read_text())
    alloc = data["derived"]["allocation"]
    fit = data["fit"]
    assert alloc["a"] == pytest.approx(
        fit["params"]["beta"] / (fit["params"]["alpha"] + fit["params"]["beta"])
    )
    lines = files.headline.splitlines()
    assert lines[0].startswith("Non-looped table")
    assert re.match(
        r"Exponents: alpha = [\d.]+ \[[\d.]+, [\d.]+\], beta = [\d.]+ \[[\d.]+, [\d.]+\], E = ", lines[1]
    )
    lo, hi = alloc["ci"]["a"]
    assert (
        lines[2].startswith("Compute-optimal allocation")
        and f"a = {alloc['a']:.3f} [{lo:.3f}, {hi:.3f}]" in lines[2]
    )
    assert "phi cannot be estimated" not in files.headline and "phi not identified" not in files.headline
    html = (out / "index.html").read_text()
    headline = html.split('id="headline"')[1].split("</div>")[0]
    assert "Exponents" in headline and "Compute-optimal allocation" in headline and "φ = " not in headline
    # the design note on phi is a note, not a warning
    kinds = {w["kind"]: w["level"] for w in data["warnings"]}
    assert kinds.get("non_looped") == "note" and "phi_unidentifiable" not in kinds


def test_report_shows_no_study_constants_as_reference(chinchilla_report):
    out, _ = chinchilla_report
    law = (out / "index.html").read_text().split('<section id="law">')[1].split("</section>")[0]
    assert "reference study" not in law and "0.459" not in law and "φ" not in law.split("<table>")[1]
    assert "N<sup>−α</sup>" in law and "Compute-optimal allocation" in law
    comparison = (out / "index.html").read_text().split('<section id="comparison">')[1].split("</section>")[0]
    assert "--fix alpha=" in comparison


def test_fit_summary_prints_the_allocation(tmp_path, capsys):
    path = tmp_path / "chinchilla.csv"
    chinchilla_frame().to_csv(path, index=False)
    assert main(["fit", str(path), "--starts", "30", "--bootstrap", "20", "--quiet"]) == 0
    text = capsys.readouterr().out
    found = re.search(
        r"compute-optimal allocation N\* ~ C\^([\d.]+) \(95% bootstrap \[([\d.]+), ([\d.]+)\]\)", text
    )
    assert found and float(found[2]) < float(found[1]) < float(found[3])


def test_compare_on_a_non_looped_table(tmp_path, capsys):
    path = tmp_path / "chinchilla.csv"
    chinchilla_frame().to_csv(path, index=False)
    # nothing to compare about phi: exit 2 with a line saying what can be compared
    assert main(["compare", str(path), "--starts", "20", "--wild", "0", "--no-cv"]) == 2
    err = capsys.readouterr().err
    assert "non-looped table" in err and "--fix alpha=" in err
    assert main(["compare", str(path), "--fix", "phi=0.5", "--wild", "0", "--no-cv"]) == 2
    capsys.readouterr()
    # fixed exponents are compared: the true alpha is not rejected, a far one is
    from phifit.study import REFERENCE_PARAMS  # the simulated law's true values

    out = tmp_path / "cmp.json"
    args = [
        "compare",
        str(path),
        "--starts",
        "30",
        "--wild",
        "0",
        "--no-cv",
        "--parts",
        "0",
        "--json",
        str(out),
    ]
    assert main(args + ["--fix", f"alpha={REFERENCE_PARAMS['alpha']}", "--fix", "alpha=0.6"]) == 0
    data = json.loads(out.read_text())
    labels = list(data["fits"])
    assert "phi=0" not in labels and "phi=1" not in labels
    assert data["fits"]["alpha=0.6"]["rejected"] is True
    assert data["fits"][f"alpha={REFERENCE_PARAMS['alpha']:g}"]["rejected"] is False


def _section(html: str, name: str) -> str:
    """The body of one section of the report page."""
    return html.split(f'<section id="{name}">')[1].split("</section>")[0]


@pytest.fixture(scope="module")
def digitized_r1_report(tmp_path_factory):
    """The r = 1 runs of the digitized study table (with budgets: isoFLOP and frontier too)."""
    from pathlib import Path

    from phifit.runs import load_runs

    frame = load_runs(Path(__file__).parents[1] / "data" / "looped_study_runs_digitized.csv").frame
    out = tmp_path_factory.mktemp("nonlooped_r1") / "rep"
    options = AnalysisOptions(n_boot=30, n_starts=30, n_wild=0)
    build_report(table_from_frame(frame[frame["r"] == 1].reset_index(drop=True)), out, options=options)
    return (out / "index.html").read_text()


@pytest.fixture(scope="module")
def looped_report_html(tmp_path_factory):
    """A small looped table's page, to check its wording is kept."""
    out = tmp_path_factory.mktemp("looped") / "rep"
    frame = simulate("paper", noise=0.004, seed=5)
    build_report(table_from_frame(frame), out, options=AnalysisOptions(n_boot=20, n_starts=20, n_wild=0))
    return (out / "index.html").read_text()


def test_non_looped_bootstrap_section_shows_the_exponents(chinchilla_report):
    out, files = chinchilla_report
    html = (out / "index.html").read_text()
    assert "Bootstrap distribution of φ" not in html and "Bootstrap distribution of the exponents" in html
    boot = _section(html, "bootstrap")
    assert "φ" not in boot and "bootstrap_exponents" in files.figures
    for label in ("α (parameter exponent)", "β (data exponent)", "a = β/(α+β)"):
        assert label in boot
    data = json.loads((out / "results.json").read_text())
    lo, hi = data["derived"]["allocation"]["ci"]["a"]
    assert f"[{lo:.3f}, {hi:.3f}]" in boot


def test_non_looped_page_shows_nothing_per_r(digitized_r1_report):
    html = digitized_r1_report
    data = _section(html, "data")
    assert "runs per r" not in data and "(budget, r) cells" not in data and "runs per budget" in data
    assert "'budget,r' blocks" not in html and "'budget' blocks" in _section(html, "law")
    frontier = _section(html, "frontier")
    assert "L*(r=" not in frontier and "r = 1" not in frontier and "Gap ranges" not in frontier
    assert "one panel per r" not in _section(html, "isoflop")
    residuals = _section(html, "residuals")
    assert "Per r" not in residuals and "by r" not in residuals and "log_n_eff" not in residuals
    assert "Influence, identifiability and consistency" not in html
    assert "φ is not identified" not in html and "no looped runs" in _section(html, "equivalence")
    # the checks of the value of a recurrence have nothing to say of a non-looped table
    assert "Free multipliers per r" not in html and "drift with scale" not in html


def test_looped_page_keeps_its_phi_wording(looped_report_html):
    html = looped_report_html
    assert "Bootstrap distribution of φ" in html and "share of replicates with φ ≤ 0" in html
    data = _section(html, "data")
    assert "runs per r" in data and "(budget, r) cells" in data
    assert "Per r (the study's Table 7)" in _section(html, "residuals")
    assert "Influence, identifiability and consistency" in html and "Gap ranges" in html
    assert "Free multipliers per r" in html and "drift with scale" in html
