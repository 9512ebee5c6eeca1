"""The report folder: files, content, folder safety, the CLIs, and a real browser rendering."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import paper_table

from phifit.cli import main
from phifit.report import figures as plots
from phifit.report.analysis import AnalysisOptions, analyse
from phifit.report.write import build_report, check_report_dir, write_report
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

SECTIONS = (
    "data",
    "law",
    "isoflop",
    "frontier",
    "bootstrap",
    "comparison",
    "residuals",
    "influence",
    "equivalence",
    "files",
)


@pytest.fixture(scope="module")
def analysis():
    return analyse(paper_table(noise=0.004, seed=1), AnalysisOptions(n_boot=100, n_starts=200, n_wild=49))


@pytest.fixture(scope="module")
def report(tmp_path_factory, analysis):
    out = tmp_path_factory.mktemp("rep") / "paper"
    files = write_report(analysis, out)
    return out, files


def test_every_file_is_written(report):
    out, files = report
    assert (out / "index.html").is_file() and (out / "results.json").is_file()
    names = set(files.figures)
    # comparison needs phifit.compare.restricted; all the others come from this package's own modules
    assert {"isoflop", "frontier", "bootstrap_phi", "residuals", "influence", "phi_profile"} <= names
    for name in names:  # PNG only by default (the page embeds them); SVG with svg=True / --svg
        path = out / "figures" / f"{name}.png"
        assert path.is_file() and path.stat().st_size > 5000, path
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert not (out / "figures" / f"{name}.svg").exists()
        assert files.figures[name] == {"png": f"figures/{name}.png"}
    listed = json.loads((out / "results.json").read_text())["files"]
    assert sorted(listed) == sorted(files.files)
    assert all((out / f).is_file() for f in listed)


def test_results_json_holds_the_numbers(report, analysis):
    out, _ = report
    data = json.loads((out / "results.json").read_text())
    assert data["warnings"] == json.loads(json.dumps([c.to_dict() for c in analysis.cautions]))
    assert data["generator"] == "phifit" and data["kind"] == "report"
    fit = data["fit"]
    assert fit["n_runs"] == 116 and 0.40 < fit["params"]["phi"] < 0.52
    lo, hi = fit["ci"]["phi"]
    assert lo < fit["params"]["phi"] < hi
    assert data["bootstrap"]["n_boot"] == 100 and len(data["bootstrap"]["phi_draws"]) == 100
    d = data["diagnostics"]
    assert [g["group"] for g in d["residuals"]["by_r"]] == [1, 2, 4, 8]
    assert len(d["influence"]["runs"]) == 116
    fr = data["derived"]["frontier"]
    assert set(fr["gap"]) == {"2", "4", "8"} and len(fr["gap_interval"]["8"]) == 6
    assert data["derived"]["parabola_minima"]["cells"]
    assert len(data["derived"]["equivalence"]["rows"]) == 33
    ex = data["derived"]["paper_example"]["with_injection"]
    assert ex["n_unique"] == pytest.approx(1e9 * 98 / 240)


def test_html_is_self_contained(report):
    out, files = report
    html = (out / "index.html").read_text()
    for section in SECTIONS:
        assert f'<section id="{section}">' in html, section
    imgs = re.findall(r'<img src="([^"]+)"', html)
    assert len(imgs) == len(files.figures)
    assert all(src.startswith("data:image/png;base64,") for src in imgs)
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert "Table 7" in html and "parabola minima" in html and "Equivalent sizes" in html


def test_folder_safety(tmp_path, report):
    stranger = tmp_path / "notes"
    stranger.mkdir()
    (stranger / "todo.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds no phifit report"):
        check_report_dir(stranger)
    check_report_dir(stranger, force=True)
    check_report_dir(tmp_path / "new")
    check_report_dir(tmp_path / "no" / "such" / "dir")  # new folders, parents included, are fine
    out, _ = report
    check_report_dir(out)  # a previous phifit report may be replaced
    (stranger / "results.json").write_text(json.dumps({"generator": "someone else"}))
    with pytest.raises(FileExistsError):
        check_report_dir(stranger)


def test_cli_report_rewrites_a_previous_report_and_refuses_strangers(tmp_path, capsys, report):
    csv = tmp_path / "runs.csv"
    frame = simulate("paper", noise=0.004, seed=7)
    frame[frame["budget"] <= 1e18].to_csv(csv, index=False)  # 36 runs: a quick report
    out = tmp_path / "rep"
    shutil.copytree(report[0], out)  # a previous phifit report, with a stale figure listed
    stale = out / "figures" / "posterior.png"
    data = json.loads((out / "results.json").read_text())
    data["files"].append("figures/posterior.png")
    (out / "results.json").write_text(json.dumps(data))
    stale.write_bytes(b"old")
    (out / "figures" / "mine.png").write_bytes(b"not listed: kept")
    args = [
        "report",
        str(csv),
        "--out",
        str(out),
        "--bootstrap",
        "20",
        "--starts",
        "50",
        "--level",
        "0.9",
        "--wild",
        "49",
    ]
    assert main(args + ["--svg"]) == 0
    printed = capsys.readouterr()
    assert "phi = " in printed.out and "phi = 0: " in printed.out and "phi = 1: " in printed.out
    assert "fitting the law to 36 runs" in printed.err and "block bootstrap (20 replicates" in printed.err
    assert "drawing the figures (PNG and SVG)" in printed.err
    svgs = sorted((out / "figures").glob("*.svg"))
    assert svgs and all(b"<svg" in p.read_bytes()[:2000] for p in svgs)
    assert not stale.exists() and (out / "figures" / "mine.png").exists()
    data = json.loads((out / "results.json").read_text())
    assert data["fit"]["n_runs"] == 36 and data["fit"]["ci_level"] == 0.9 and data["options"]["level"] == 0.9
    assert data["derived"]["frontier"]["level"] == 0.9 and data["derived"]["equivalence"]["level"] == 0.9
    html = (out / "index.html").read_text()
    for label in ("percentile", "BCa", "interval"):  # table headers name the level used
        assert f">90% {label}</th>" in html and f">95% {label}</th>" not in html, label
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("x")
    assert main(["report", str(csv), "--out", str(tmp_path / "other")]) == 2
    assert "holds no phifit report" in capsys.readouterr().err
    assert main(["report", str(csv), "--out", str(out), "--bootstrap", "1"]) == 2
    assert "bootstrap replicates must be 0" in capsys.readouterr().err


def test_cli_equiv_reproduces_the_study_example(tmp_path, capsys):
    assert main(["equiv", "--reference", "--r", "4", "--n-once", "200M", "--n-rec", "200M"]) == 0
    text = capsys.readouterr().out
    assert "578M" in text and "400M" in text and "1B" in text
    out = tmp_path / "eq.json"
    assert (
        main(
            [
                "equiv",
                "--reference",
                "--r",
                "4",
                "--n-once",
                "200e6",
                "--n-rec",
                "208.333M",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert data["generator"] == "phifit"
    assert float(f"{data['n_unique']:.2g}") == 4.1e8
    assert float(f"{data['paper_example']['blocks_only']['n_eff']:.2g}") == 5.8e8
    lo, hi = data["n_eff_interval"]
    assert 2e8 + 4**0.41 * 208.333e6 == pytest.approx(lo, rel=1e-6)
    assert 2e8 + 4**0.53 * 208.333e6 == pytest.approx(hi, rel=1e-6)
    with pytest.raises(SystemExit) as exit_info:  # argparse rejects it: usage error, code 2
        main(["equiv", "--phi", "0.5", "--r", "4", "--n-once", "lots", "--n-rec", "1"])
    assert exit_info.value.code == 2
    assert "expected a count such as" in capsys.readouterr().err
    assert main(["equiv", "--phi", "0.5", "--r", "0", "--n-once", "1", "--n-rec", "1"]) == 2
    assert "--r must be" in capsys.readouterr().err


def test_cli_equiv_from_a_fit_json_and_from_runs(tmp_path, capsys):
    csv = tmp_path / "runs.csv"
    simulate("paper", noise=0.004, seed=7).to_csv(csv, index=False)
    fit_json = tmp_path / "fit.json"
    assert main(["fit", str(csv), "--json", str(fit_json)]) == 0
    capsys.readouterr()
    assert main(["equiv", "--fit", str(fit_json), "--r", "8", "--n-once", "50M", "--n-rec", "20M"]) == 0
    assert "no bootstrap interval saved" in capsys.readouterr().out
    out = tmp_path / "eq.json"
    assert (
        main(
            [
                "equiv",
                "--runs",
                str(csv),
                "--bootstrap",
                "40",
                "--r",
                "8",
                "--n-once",
                "50M",
                "--n-rec",
                "20M",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert data["n_draws"] == 40 and data["n_eff_interval"][0] < data["n_eff"]


def test_variant_table_gets_the_recipes_section_or_says_why(tmp_path):
    base = simulate("paper", noise=0.003, seed=2)
    base = base[base["budget"] <= 2.15e18].copy()
    base["variant"] = "baseline"
    other = simulate("paper", params={"phi": 0.6}, noise=0.003, seed=3)
    other = other[(other["r"] > 1) & (other["budget"] <= 2.15e18)].copy()
    other["variant"] = "hc"
    other["run_id"] = other["run_id"] + "_hc"
    import pandas as pd

    runs = table_from_frame(pd.concat([base, other], ignore_index=True))
    files = build_report(runs, tmp_path / "rep", options=AnalysisOptions(n_boot=20, n_starts=50, n_wild=49))
    data = json.loads((tmp_path / "rep" / "results.json").read_text())
    html = (tmp_path / "rep" / "index.html").read_text()
    assert '<section id="recipes">' in html and "recipes" in files.figures
    assert data["recipes"] is not None
    assert data["fit"]["n_runs"] == 56  # the main sections analyse the baseline
    assert data["n_table_runs"] == len(runs) and data["source"] == runs.source
    assert data["runs_per_recipe"] == {"baseline": 56, "hc": len(runs) - 56}
    assert f"{len(runs)} runs in 2 recipes (baseline: 56, hc: {len(runs) - 56})" in html
    assert f"{len(runs)} runs (56 analysed)" in html
    d = data["recipes"]["delta_phi"]["hc"]
    assert d["estimate"] == pytest.approx(0.6 - 0.459, abs=0.05)
    assert "Δφ between recipes" in html


# -- a real browser --------------------------------------------------------------------------
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None


_CHECK = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  var pre = document.createElement('pre');
  pre.id = 'phifit-imgcheck';
  pre.textContent = JSON.stringify({total: imgs.length, broken: broken.length,
    widths: imgs.map(function (i) { return i.naturalWidth; })});
  document.body.appendChild(pre);
});
</script>"""


def _browser(exe: str, page: Path, *extra: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--hide-scrollbars",
            *extra,
            page.resolve().as_uri(),
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _image_check(exe: str, html: str, folder: Path) -> dict:
    page = folder / "check.html"
    page.write_text(html.replace("</body>", _CHECK + "</body>"))
    proc = _browser(exe, page, "--dump-dom", "--virtual-time-budget=10000")
    found = re.search(r'<pre id="phifit-imgcheck">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"no image check in the DOM dump; stderr: {proc.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"'))


_BOX = """<script>
window.addEventListener('load', function () {
  var box = document.getElementById('headline').getBoundingClientRect();
  var pre = document.createElement('pre');
  pre.id = 'phifit-box';
  pre.textContent = JSON.stringify({top: box.top, bottom: box.bottom,
    text: document.getElementById('headline').innerText});
  document.body.appendChild(pre);
});
</script>"""


def _headline_box(exe: str, html: str, folder: Path, tmp_path: Path) -> dict:
    page = folder / "box.html"
    page.write_text(html.replace("</body>", _BOX + "</body>"))
    proc = _browser(exe, page, "--dump-dom", "--window-size=1280,800", "--virtual-time-budget=10000")
    page.unlink()
    found = re.search(r'<pre id="phifit-box">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"no headline box in the DOM dump; stderr: {proc.stderr[-2000:]}"
    import html as _html

    return json.loads(_html.unescape(found.group(1)))


def test_report_renders_in_a_real_browser(report, tmp_path):
    exe = _chromium()
    if exe is None:
        pytest.skip(
            "no Chromium on this machine (CI installs Debian's 'chromium'; apt-get install -y chromium)"
        )
    from PIL import Image

    out, files = report
    html = (out / "index.html").read_text()
    # every <img> decodes: the check itself flags a broken image (negative control)
    broken = _image_check(
        exe,
        '<html><body><img src="data:image/png;base64,AAAA"><img src="missing.png"></body></html>',
        tmp_path,
    )
    assert broken == {"total": 2, "broken": 2, "widths": [0, 0]}
    ok = _image_check(exe, html, out)
    assert ok["total"] == len(files.figures) and ok["broken"] == 0
    assert all(w >= 600 for w in ok["widths"])  # 150-dpi figures, natural width in pixels
    (out / "check.html").unlink()

    # the answer is on the first screen: the headline box lies within the first 800 px of a
    # 1280 x 800 window and holds phi, its interval and both verdicts
    box = _headline_box(exe, html, out, tmp_path)
    assert box["top"] >= 0 and box["bottom"] <= 800, box
    text = box["text"]
    fit = json.loads((out / "results.json").read_text())["fit"]
    lo, hi = fit["ci"]["phi"]
    assert f"φ = {fit['params']['phi']:.3f}" in text
    assert f"[{lo:.3f}, {hi:.3f}]" in text and "95% percentile block bootstrap" in text
    assert re.search(r"φ = 0: (not )?rejected \(", text) and re.search(r"φ = 1: (not )?rejected \(", text)
    assert "R² " in text and "RMSE " in text
    top = tmp_path / "top.png"
    _browser(exe, out / "index.html", f"--screenshot={top}", "--window-size=1280,800")
    first = np.asarray(Image.open(top).convert("RGB")).astype(int)
    accent = (np.abs(first - [0x00, 0x72, 0xB2]).sum(axis=2) < 40).any(axis=1)  # the box's border
    assert first.shape[:2] == (800, 1280) and accent.sum() >= 4
    assert np.flatnonzero(accent).max() - np.flatnonzero(accent).min() > 100

    shot = tmp_path / "shot.png"
    proc = _browser(exe, out / "index.html", f"--screenshot={shot}", "--window-size=1280,4000")
    assert shot.is_file(), proc.stderr[-2000:]
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (4000, 1280)
    non_white = (img.min(axis=2) < 235).mean()
    colourful = ((img.max(axis=2) - img.min(axis=2)) > 80).mean()  # Okabe-Ito marks and lines
    assert non_white > 0.05, f"page looks blank ({non_white:.3%} non-white)"
    assert colourful > 0.005, f"no figure colours on the page ({colourful:.3%})"
    # figures are drawn where the page shows them: the isoFLOP panels sit in the first 4000 px
    rows = ((img.max(axis=2) - img.min(axis=2)) > 80).mean(axis=1)
    assert (rows > 0.02).sum() > 300


_WIDTH = """<script>
window.addEventListener('load', function () {
  var pre = document.createElement('pre');
  pre.id = 'phifit-width';
  pre.textContent = JSON.stringify({scroll: document.documentElement.scrollWidth,
    client: document.documentElement.clientWidth});
  document.body.appendChild(pre);
});
</script>"""


def _page_width(exe: str, html: str, folder: Path, width: int) -> dict:
    """The page's scrollWidth and clientWidth in a ``width`` x 800 window."""
    page = folder / "width.html"
    page.write_text(html.replace("</body>", _WIDTH + "</body>"))
    proc = _browser(exe, page, "--dump-dom", f"--window-size={width},800", "--virtual-time-budget=10000")
    page.unlink()
    found = re.search(r'<pre id="phifit-width">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"no width check in the DOM dump; stderr: {proc.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"'))


def test_pages_do_not_scroll_sideways(report, tmp_path):
    """A looped and a non-looped report fit a 1280 px window without a horizontal scrollbar,
    and still do at 800 px (wide tables scroll inside their own box, long words wrap)."""
    exe = _chromium()
    if exe is None:
        pytest.skip("no Chromium on this machine (apt-get install -y chromium)")
    wide = _page_width(
        exe, '<html><body style="margin:0"><div style="width:2000px">x</div></body></html>', tmp_path, 1280
    )
    assert wide["client"] == 1280 and wide["scroll"] == 2000  # the check sees an overflow
    frame = simulate("paper", noise=0.004, seed=5)
    plain = frame[frame["r"] == 1].drop(columns=["r", "n_rec", "budget"])
    plain["n_once"] = frame.loc[frame["r"] == 1, "n_rec"] + frame.loc[frame["r"] == 1, "n_once"]
    build_report(
        table_from_frame(plain), tmp_path / "plain", options=AnalysisOptions(n_boot=0, n_starts=20, n_wild=0)
    )
    looped, _ = report
    for folder in (looped, tmp_path / "plain"):
        html = (folder / "index.html").read_text()
        for width in (1280, 800):
            seen = _page_width(exe, html, folder, width)
            assert seen["client"] == width and seen["scroll"] <= width, (folder.name, seen)


@pytest.mark.slow
def test_bayes_section_with_posterior_file(tmp_path):
    """--bayes adds the posterior figure, table and the netCDF posterior (compiles PyMC)."""
    pytest.importorskip("phifit.fitters.bayes")
    runs = paper_table(noise=0.004, seed=1)
    files = build_report(
        runs, tmp_path / "rep", options=AnalysisOptions(n_boot=20, n_starts=100, bayes=True, n_wild=49)
    )
    data = json.loads((tmp_path / "rep" / "results.json").read_text())
    assert "posterior" in files.figures and "posterior.nc" in files.files
    assert (tmp_path / "rep" / "posterior.nc").stat().st_size > 10_000
    lo, hi = data["bayes"]["ci"]["phi"]
    assert lo < data["fit"]["params"]["phi"] < hi
    html = (tmp_path / "rep" / "index.html").read_text()
    assert '<section id="bayes">' in html and "95% HDI" in html
    # the default cell model: tau and one row per (budget, r) cell, as the law's cell-level misfit
    cells = data["bayes"]["extras"]["cell_effects"]
    assert data["bayes"]["extras"]["noise"] == "cell" and len(cells["cells"]) == 24
    assert "<h3>Cell effects: the law" in html
    assert html.count("budget=") >= 24


def test_tables_without_phi_or_budgets_get_a_report_that_says_what_is_missing(tmp_path):
    frame = simulate("paper", noise=0.004, seed=5)
    plain = frame[frame["r"] == 1].drop(columns=["r", "n_rec", "budget"])  # non-looped
    plain["n_once"] = frame.loc[frame["r"] == 1, "n_rec"] + frame.loc[frame["r"] == 1, "n_once"]
    files = build_report(
        table_from_frame(plain),
        tmp_path / "plain",
        options=AnalysisOptions(n_boot=0, n_starts=100, n_wild=49),
    )
    data = json.loads((tmp_path / "plain" / "results.json").read_text())
    html = (tmp_path / "plain" / "index.html").read_text()
    assert data["fit"]["params"]["phi"] is None
    assert {"kind": "non_looped", "level": "note"}.items() <= next(
        w for w in data["warnings"] if w.get("kind") == "non_looped"
    ).items()
    assert "influence" not in files.figures and "isoflop" not in files.figures
    assert "No isoFLOP curves" in html and "No equivalent sizes" in html and "no looped runs" in html
    labelled = frame.copy()
    labelled["budget"] = labelled["budget"].map(lambda c: f"C{c:.0e}")  # labels, not FLOPs
    files = build_report(
        table_from_frame(labelled),
        tmp_path / "labels",
        options=AnalysisOptions(n_boot=0, n_starts=100, n_wild=49),
    )
    data = json.loads((tmp_path / "labels" / "results.json").read_text())
    assert len(data["derived"]["frontier"]["budgets"]) == 6  # spread over the runs' compute
    assert data["derived"]["parabola_minima"]["cells"] and "frontier" in files.figures


def test_report_creates_missing_parent_folders(tmp_path):
    """`phifit report RUNS.csv --out reports/name` works where reports/ does not exist yet."""
    from phifit.cli import main

    runs = tmp_path / "runs.csv"
    main(["simulate", "--noise", "0.005", "--out", str(runs)])
    out = tmp_path / "reports" / "sim"
    assert (
        main(["report", str(runs), "--out", str(out), "--bootstrap", "20", "--starts", "50", "--wild", "49"])
        == 0
    )
    assert (out / "index.html").exists() and (out / "results.json").exists()


def test_cautions_of_the_comparison_and_the_recipes_reach_results_json(tmp_path):
    """Bug 4: every caution of the analysis is in results.json["warnings"] and on the page,
    the comparison's and the recipes' included (they were dropped: called ``notes`` there)."""
    frame = simulate("paper", noise=0.003, seed=2)
    frame = frame[frame["budget"] <= 1e18].drop(columns=["budget"])  # no budgets: the comparison says so
    frame["variant"] = "baseline"
    other = frame[frame["r"] > 1].copy()
    other["variant"], other["run_id"] = "hc", other["run_id"] + "_hc"
    import pandas as pd

    runs = table_from_frame(pd.concat([frame, other], ignore_index=True))
    build_report(runs, tmp_path / "rep", options=AnalysisOptions(n_boot=0, n_starts=30, n_wild=49))
    data = json.loads((tmp_path / "rep" / "results.json").read_text())
    warnings = data["warnings"]
    assert all(set(w) == {"source", "kind", "level", "message", "values"} for w in warnings)
    compare = [w for w in warnings if w["source"] == "compare"]
    assert any("no 'budget' column" in w["message"] for w in compare), warnings
    recipes = [w for w in warnings if w["source"] == "recipes"]
    assert any("baseline not given" in w["message"] for w in recipes), warnings
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "no &#x27;budget&#x27; column: no leave-one-budget-out" in html


def test_the_profile_figure_names_the_interval_it_draws(analysis, tmp_path, monkeypatch):
    """Bug 3: the bootstrap interval was drawn on the phi profile labelled "profile interval"."""
    seen = []
    original = plots.profile_figure

    def spy(profile, phi_hat, interval, consistency=None, **kwargs):
        seen.append((interval, kwargs.get("interval_label")))
        return original(profile, phi_hat, interval, consistency, **kwargs)

    monkeypatch.setattr(plots, "profile_figure", spy)
    write_report(analysis, tmp_path / "boot")
    assert seen == [(analysis.fit.ci["phi"], "95% percentile bootstrap interval")]
    html = (tmp_path / "boot" / "index.html").read_text()
    assert "band: 95% percentile bootstrap interval" in html
    # without a bootstrap the profile's own interval is drawn, saying what it assumes
    no_boot = dataclasses.replace(analysis, fit=analysis.fit.with_updates(ci=None, ci_bca=None))
    write_report(no_boot, tmp_path / "profile")
    ident = analysis.diagnostics.identifiability
    assert seen[1] == (ident.profile_interval, "profile interval (assumes independent runs)")


def test_interval_labels_follow_the_fit_level(analysis, tmp_path):
    """Headers, captions and the headline name the level the intervals were computed at."""
    fit = analysis.fit.with_updates(ci_level=0.8)
    files = write_report(dataclasses.replace(analysis, fit=fit), tmp_path / "rep")
    html = (tmp_path / "rep" / "index.html").read_text()
    for label in (
        "80% percentile</th>",
        "80% BCa</th>",
        "80% percentile interval</td>",
        "dashed: 80% percentile",
    ):
        assert label in html, label
    assert ">95% percentile" not in html and ">95% BCa" not in html
    assert "(80% percentile [" in files.headline
    assert json.loads((tmp_path / "rep" / "results.json").read_text())["fit"]["ci_level"] == 0.8


def test_interval_ends_on_the_search_box_say_so():
    from phifit.report.html import interval_text, param_bounds

    assert interval_text(0.07, 0.844, (-3, 3)) == "[0.070, 0.844]"
    assert interval_text(-3.0, 0.793, (-3, 3)) == "[≤ −3 (search bound: not determined), 0.793]"
    assert interval_text(0.1, 3 - 1e-7, (-3, 3)) == "[0.100, ≥ 3 (search bound: not determined)]"
    assert interval_text(-2.99, 0.5, (-3, 3)) == "[-2.990, 0.500]"  # near, not on, the bound
    assert interval_text(-3.0, 0.5) == "[-3.000, 0.500]"  # no box known

    class Fit:
        bounds = {"phi": [-3.0, 3.0], "e": [-3.0, 2.0]}

    assert param_bounds(Fit, "phi") == (-3.0, 3.0)
    assert param_bounds(Fit, "E") == pytest.approx((np.exp(-3.0), np.exp(2.0)))
    assert param_bounds(Fit, "alpha") is None


def test_headline_marks_a_censored_interval_and_names_the_verdicts(analysis, tmp_path):
    from phifit.report.write import headline

    fit = analysis.fit.with_updates(ci={**analysis.fit.ci, "phi": [-3.0, 0.79]})
    censored = dataclasses.replace(analysis, fit=fit)
    text = headline(censored)
    assert "[≤ −3 (search bound: not determined), 0.790]" in text
    assert "phi = 0: " in text and "phi = 1: " in text
    write_report(censored, tmp_path / "rep")
    html = (tmp_path / "rep" / "index.html").read_text()
    box = html[html.index('<div class="headline"') : html.index("<nav>")]
    assert "≤ −3 (search bound: not determined)" in box and "φ = 0</b>" in box and "φ = 1</b>" in box
    # the bootstrap table prints it the same way
    assert html.count("≤ −3 (search bound: not determined)") >= 3


def test_runs_without_flops_are_plotted_at_their_budget():
    from phifit.report.analysis import plotted_compute

    frame = simulate("paper", noise=0.004, seed=5)
    with_flops = table_from_frame(frame)
    compute, source = plotted_compute(with_flops)
    assert source == "the flops column" and np.allclose(compute, frame["flops"].astype(float))
    compute, source = plotted_compute(table_from_frame(frame.drop(columns=["flops"])))
    assert source.startswith("the budget column") and np.allclose(compute, frame["budget"].astype(float))
    compute, source = plotted_compute(table_from_frame(frame.drop(columns=["flops", "budget"])))
    assert "6 (N_once + r N_rec) D" in source


def test_log_axis_tick_labels_never_overlap(analysis):
    """Minor tick labels of log axes are labelled only where they fit (the r = 8 isoFLOP panel
    printed 3×10⁴4×10⁴6×10⁴), at the width the page shows the figures."""
    from phifit.report import write as report

    checked = 0
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for name, fig in report._figures(analysis, plots):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in fig.axes:
            if not ax.get_visible() or ax.get_xscale() != "log":
                continue
            labels = [
                t
                for t in ax.xaxis.get_majorticklabels() + ax.xaxis.get_minorticklabels()
                if t.get_visible()
                and t.get_text()
                and ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]
            ]
            boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
            assert len(boxes) >= 2, f"{name}: fewer than two x labels on a log axis"
            for b1, b2 in zip(boxes, boxes[1:]):
                assert b1.x1 <= b2.x0, f"{name}: x tick labels overlap"
            checked += 1
    assert checked >= 5


def test_a_restriction_kept_by_the_held_out_budgets_says_so_beside_its_small_p():
    """The verdict rule keeps phi = 0 when its test rejects (p < 0.05) but it predicts held-out
    budgets better than the free fit; the headline must then say "in-sample evidence only" first,
    not print "not rejected" next to p = 0.049 unexplained. A plain rejection and a plain
    non-rejection read as before."""
    from types import SimpleNamespace as NS

    from phifit.report.sections_fit import restriction_verdicts

    def stats(p, rejected, cv):
        return NS(wild=NS(p_value=p), lr_p_value=None, cv_rmse=cv, undecided=None, rejected=rejected)

    comparison = NS(
        stats={
            "free": NS(cv_rmse=0.0355),
            "phi=0": stats(0.049, False, 0.0336),
            "phi=1": stats(0.015, True, 0.0575),
        }
    )
    (l0, v0, e0), (l1, v1, e1) = restriction_verdicts(comparison)
    assert (l0, v0) == ("φ = 0", "not rejected")
    assert e0.startswith("in-sample evidence only") and "p = 0.049" in e0 and "0.0336 vs 0.0355" in e0
    assert v1 == "rejected" and not e1.startswith("in-sample") and "p = 0.015" in e1
    comparison.stats["phi=0"] = stats(0.3, False, 0.0336)
    assert not restriction_verdicts(comparison)[0][2].startswith("in-sample")


def test_figures_drawn_while_the_checks_run_are_those_drawn_after(tmp_path):
    """build_report draws the early and the diagnostics' figures while the checks run on the
    workers: each is called with what it needs, in that order, and every figure's PNG is the
    one write_report draws from the finished analysis."""
    from phifit.report import write as report
    from phifit.report.figures import figure_bytes

    runs = paper_table(noise=0.004, seed=3)
    options = AnalysisOptions(n_boot=50, n_starts=100, n_wild=19, n_jobs=2)
    seen = []
    drawn = report.DrawnFigures()

    def hook(so_far):
        seen.append((so_far.diagnostics is not None, so_far.multipliers is None, so_far.isoflop is not None))
        drawn.draw_ready(so_far)

    finished = analyse(runs, options, while_checks=hook)
    assert seen == [(False, True, True), (True, True, True)]
    assert drawn.groups == {"early", "diagnostics"}
    names = [name for name, _, _ in drawn.figures]
    assert {"isoflop", "frontier", "bootstrap_phi", "residuals", "influence", "phi_profile"} <= set(names)
    after = dict(report._figures(finished, plots))
    assert "multipliers" in after  # the final group is drawn from the finished analysis
    for name, _, png in drawn.figures:
        assert png == figure_bytes(after[name]), name
    files = report.write_report(finished, tmp_path / "rep", drawn=drawn)
    assert list(files.figures) == [n for n in report.FIGURE_ORDER if n in after]
    for name, _, png in drawn.figures:
        assert (tmp_path / "rep" / "figures" / f"{name}.png").read_bytes() == png
