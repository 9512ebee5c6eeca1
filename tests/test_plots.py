"""phifit.plot: every plotting function takes a typed result, draws into a given Axes (no new
figure), returns Axes, and follows rcParams["font.size"]."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

import phifit  # noqa: E402
from phifit import plot  # noqa: E402
from phifit.diagnostics.drift import fit_drift  # noqa: E402
from phifit.diagnostics.multipliers import fit_multipliers  # noqa: E402
from phifit.frontier import TableFamily, frontier  # noqa: E402

STUDY = Path(__file__).resolve().parents[1] / "data" / "looped_study_runs_digitized.csv"


@pytest.fixture(scope="module")
def study():
    runs = phifit.load_runs(STUDY)
    fit = phifit.fit(runs)
    boot = phifit.block_bootstrap(runs, fit, n_boot=40, seed=0, progress=False)
    mult = fit_multipliers(runs, fit, n_boot=20, n_wild=19, seed=0)
    drift = fit_drift(runs, fit, n_boot=20, n_wild=19, seed=0)
    front = frontier(fit, TableFamily.from_runs(runs), sorted(set(runs.budget.tolist())), thetas=boot.thetas)
    return {"runs": runs, "fit": fit, "boot": boot, "mult": mult, "drift": drift, "front": front}


#: name -> a call drawing into ``ax`` (one per public function, and each of its choices)
CALLS = {
    "isoflop_one_r": lambda s, ax: plot.plot_isoflop(s["fit"], s["runs"], only=4, ax=ax),
    "isoflop_one_budget": lambda s, ax: plot.plot_isoflop(s["fit"], s["runs"], by="budget", only=1e18, ax=ax),
    "isoflop_all_in_one": lambda s, ax: plot.plot_isoflop(s["fit"], s["runs"], ax=ax),
    "bootstrap_phi": lambda s, ax: plot.plot_bootstrap(s["boot"], "phi", ax=ax),
    "bootstrap_alpha": lambda s, ax: plot.plot_bootstrap(s["boot"], "alpha", ax=ax),
    "multipliers": lambda s, ax: plot.plot_multipliers(s["mult"], bootstrap=s["boot"], ax=ax),
    "residuals_r": lambda s, ax: plot.plot_residuals(s["fit"], s["runs"], against="r", ax=ax),
    "residuals_budget": lambda s, ax: plot.plot_residuals(s["fit"], s["runs"], against="budget", ax=ax),
    "residuals_size": lambda s, ax: plot.plot_residuals(s["fit"], s["runs"], against="size", ax=ax),
    "frontier_loss": lambda s, ax: plot.plot_frontier(s["front"], s["runs"], ax=ax),
    "frontier_gap": lambda s, ax: plot.plot_frontier(s["front"], kind="gap", ax=ax),
    "drift": lambda s, ax: plot.plot_drift(s["drift"], ax=ax),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_draws_into_the_given_axes(study, name):
    fig, ax = plt.subplots()
    figures_before = plt.get_fignums()
    out = CALLS[name](study, ax)
    assert out is ax
    assert isinstance(out, Axes)
    assert ax.lines or ax.collections or ax.patches
    assert plt.get_fignums() == figures_before, "passing ax must not open a new figure"
    plt.close(fig)


@pytest.mark.parametrize("name", ["bootstrap_phi", "multipliers", "residuals_size", "frontier_loss", "drift"])
def test_font_size_follows_rcparams(study, name):
    for size in (6.0, 15.0):
        with matplotlib.rc_context({"font.size": size}):
            fig, ax = plt.subplots()
            CALLS[name](study, ax)
            fig.canvas.draw()
            ticks = [t for t in ax.get_yticklabels() if t.get_text()]
            assert ticks and ticks[0].get_fontsize() == pytest.approx(size)
            assert ax.xaxis.label.get_fontsize() == pytest.approx(size)
            assert ax.get_legend().get_texts()[0].get_fontsize() < size + 1e-9
            plt.close(fig)


def test_without_ax_draws_into_a_pyplot_figure(study):
    plt.close("all")
    ax = plot.plot_bootstrap(study["boot"])
    assert isinstance(ax, Axes) and plt.get_fignums() == [ax.figure.number]
    plt.close("all")


def test_isoflop_panels(study):
    plt.close("all")
    axes = plot.plot_isoflop(study["fit"], study["runs"])
    assert isinstance(axes, np.ndarray) and axes.shape == (4,)
    assert [a.get_title() for a in axes] == ["r = 1", "r = 2", "r = 4", "r = 8"]
    assert all(a.lines and a.collections for a in axes)
    fig, grid = plt.subplots(2, 3)
    out = plot.plot_isoflop(study["fit"], study["runs"], by="budget", axes=grid)
    assert len(out) == 6 and all(a.figure is fig for a in out)
    with pytest.raises(ValueError, match="6 panels need 6 axes"):
        plot.plot_isoflop(study["fit"], study["runs"], by="budget", axes=grid.ravel()[:2])
    with pytest.raises(ValueError, match="expected 'r' or 'budget'"):
        plot.plot_isoflop(study["fit"], study["runs"], by="size")
    plt.close("all")


def test_bad_choices_name_the_valid_ones(study):
    with pytest.raises(ValueError, match="expected one of"):
        plot.plot_bootstrap(study["boot"], "gamma")
    with pytest.raises(ValueError, match="expected one of"):
        plot.plot_residuals(study["fit"], study["runs"], against="width")
    with pytest.raises(ValueError, match="needs the runs"):
        plot.plot_residuals(study["fit"])


def test_bootstrap_plot_draws_the_bootstraps_numbers(study):
    boot = study["boot"]
    fig, ax = plt.subplots()
    plot.plot_bootstrap(boot, "phi", ax=ax)
    xs = {round(float(line.get_xdata()[0]), 12) for line in ax.lines if len(line.get_xdata())}
    assert round(float(boot.estimate["phi"]), 12) in xs
    assert {round(float(v), 12) for v in boot.ci["phi"]} <= xs
    assert sum(p.get_height() for p in ax.patches) == int((~boot.failed).sum())
    plt.close(fig)
