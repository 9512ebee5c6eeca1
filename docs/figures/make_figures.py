"""Render the pictures of docs/figures.md from the bundled study table (python docs/figures/make_figures.py).

Small on purpose (100 dpi, few bootstrap replicates); each block below is the call shown on the page.
"""

from __future__ import annotations

import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import phifit  # noqa: E402
import phifit.plot  # noqa: E402
from phifit.diagnostics.drift import fit_drift  # noqa: E402
from phifit.diagnostics.multipliers import fit_multipliers  # noqa: E402
from phifit.frontier import TableFamily, frontier  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def save(ax, name: str) -> None:
    fig = ax.flat[0].figure if hasattr(ax, "flat") else ax.figure
    fig.savefig(HERE / f"{name}.png", dpi=100, facecolor="white", metadata={"Software": None})
    plt.close(fig)


def main() -> None:
    t0 = time.perf_counter()
    runs = phifit.load_runs(ROOT / "data" / "looped_study_runs_digitized.csv")
    fit = phifit.fit(runs)
    boot = phifit.block_bootstrap(runs, fit, n_boot=200, seed=0, progress=False)
    mult = fit_multipliers(runs, fit, n_boot=50, n_wild=49, seed=0)
    drift = fit_drift(runs, fit, n_boot=50, n_wild=49, seed=0)
    front = frontier(fit, TableFamily.from_runs(runs), sorted(set(runs.budget.tolist())), thetas=boot.thetas)
    print(f"fitted and resampled in {time.perf_counter() - t0:.1f} s")

    axes = phifit.plot.plot_isoflop(fit, runs, by="r")
    save(axes, "isoflop")
    axes = phifit.plot.plot_isoflop(fit, runs, by="budget")
    save(axes, "isoflop_by_budget")
    save(phifit.plot.plot_bootstrap(boot, "phi"), "bootstrap")
    save(phifit.plot.plot_multipliers(mult, bootstrap=boot), "multipliers")
    fig, axs = plt.subplots(1, 3, figsize=(11, 3.4), layout="constrained")
    for a, against in zip(axs, ("r", "budget", "size")):
        phifit.plot.plot_residuals(fit, runs, against=against, ax=a)
    save(axs, "residuals")
    fig, axs = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    phifit.plot.plot_frontier(front, runs, kind="loss", ax=axs[0])
    phifit.plot.plot_frontier(front, kind="gap", ax=axs[1])
    save(axs, "frontier")
    save(phifit.plot.plot_drift(drift), "drift")
    print(f"done in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
