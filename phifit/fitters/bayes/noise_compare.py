"""Do the runs of a (budget, r) cell share noise?  The cell model against independent runs, by PSIS-LOO.

The same Bayesian joint law is sampled twice (:func:`.sampling.sample_posterior`), with
``noise="cell"`` (an effect u_c ~ Normal(0, tau^2) shared by the runs of each cell) and with
``noise="run"`` (independent runs), and the two are compared by their expected log predictive
density (elpd_loo, :mod:`.loo`).

What the comparison predicts.  The cell model's pointwise log-likelihood is conditional on the
cell effects, so its PSIS-LOO term for run i is the predictive density of a *new run of a cell
whose other runs were seen*; the independent model predicts the same run from the law alone.
A better elpd for the cell model therefore says: a run is better predicted by its cell-mates'
shared departure from the law than by the law, i.e. runs of one cell share noise (or the law
misfits cells), and intervals that treat runs as independent are too narrow.  It does not
compare the two models' predictions for an unseen cell.

Decision rule (:data:`RULE`, as for phi in :mod:`.loo_compare`): with d = elpd_cell - elpd_run
(summed over runs, paired) and se(d) = sqrt(n var_i(d_i)), the cell model is preferred when
d > 4 and d > 2 se(d); otherwise the simpler independent model stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ...cautions import Caution
from ...result import GENERATOR
from ...runs.table import RunTable, as_runs
from ...serialize import JsonIO, to_plain
from .loo import pareto_k_caution, psis_loo
from .loo_compare import MIN_DIFF, SE_MULT, paired_difference
from .model import resolve_noise
from .sampling import sample_posterior

RULE = (
    f"the cell model is preferred when elpd_cell - elpd_run > {MIN_DIFF:g} and > {SE_MULT:g} x SE of "
    f"the paired difference; otherwise the independent-runs model (the simpler one) stands"
)


@dataclass(frozen=True)
class NoiseComparison(JsonIO):
    """PSIS-LOO comparison of the cell model with the independent-runs model.

    Attributes
    ----------
    elpd, se : per model ("cell", "run"), elpd_loo (sum over runs) and its standard error.
    elpd_diff, se_diff : elpd_cell - elpd_run and the standard error of the paired difference.
    preferred : "cell" or "run" under :data:`RULE`.
    phi : per model, the posterior median and HDI of phi ([] when phi is not identified).
    tau : the cell model's tau (median, HDI): the sd of the cell effects.
    warnings : ``pareto_k`` cautions (runs whose leave-one-out terms are unreliable), per model.
    """

    elpd: dict[str, float]
    se: dict[str, float]
    elpd_diff: float
    se_diff: float
    preferred: str
    rule: str
    n_runs: int
    source: str = ""
    phi: dict[str, dict[str, Any]] = field(default_factory=dict)
    tau: dict[str, Any] = field(default_factory=dict)
    warnings: list[Caution] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """One row per noise model (index ``model``: "cell", "run"): ``elpd_loo`` and ``se``."""
        rows = [{"model": m, "elpd_loo": self.elpd[m], "se": self.se.get(m)} for m in self.elpd]
        return pd.DataFrame(rows).set_index("model")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict of plain Python types."""
        return to_plain(
            {
                "generator": GENERATOR,
                "kind": "noise_comparison",
                "elpd": self.elpd,
                "se": self.se,
                "elpd_diff": self.elpd_diff,
                "se_diff": self.se_diff,
                "preferred": self.preferred,
                "rule": self.rule,
                "n_runs": self.n_runs,
                "source": self.source,
                "phi": self.phi,
                "tau": self.tau,
                "warnings": [w.to_dict() for w in self.warnings],
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NoiseComparison:
        """Rebuild from :meth:`to_dict` output."""
        if data.get("kind") != "noise_comparison":
            raise ValueError("not a phifit noise-model comparison (missing kind='noise_comparison')")
        return cls(
            elpd={k: float(v) for k, v in data["elpd"].items()},
            se={k: float(v) for k, v in data["se"].items()},
            elpd_diff=float(data["elpd_diff"]),
            se_diff=float(data["se_diff"]),
            preferred=str(data["preferred"]),
            rule=str(data["rule"]),
            n_runs=int(data["n_runs"]),
            source=str(data.get("source", "")),
            phi=dict(data.get("phi", {})),
            tau=dict(data.get("tau", {})),
            warnings=[Caution.from_dict(w, source="bayes") for w in data.get("warnings", [])],
        )

    def summary(self) -> str:
        """Readable text: elpd per model, the paired difference, the verdict, phi and tau."""
        lines = [
            "[[phifit: do runs of a (budget, r) cell share noise? PSIS-LOO, cell model vs independent]]",
            f"runs: {self.n_runs}" + (f"   source: {self.source}" if self.source else ""),
            "",
            f"    {'model':<6} {'elpd_loo':>10} {'se':>7}  phi (median, HDI)",
        ]
        for label in ("cell", "run"):
            p = self.phi.get(label) or {}
            hdi = p.get("hdi") or []
            phi = (
                f"{p['median']:.3f} [{hdi[0]:.3f}, {hdi[1]:.3f}]"
                if p.get("median") is not None and hdi
                else "n/a"
            )
            lines.append(f"    {label:<6} {self.elpd[label]:>10.2f} {self.se[label]:>7.2f}  {phi}")
        lines += [
            "",
            f"cell - run: {self.elpd_diff:.2f} +- {self.se_diff:.2f}",
            f"preferred: {self.preferred}",
            f"rule: {self.rule}",
        ]
        if self.tau:
            lo, hi = self.tau["hdi"]
            lines.append(f"tau (sd of the cell effects): {self.tau['median']:.4g} [{lo:.4g}, {hi:.4g}]")
        if self.warnings:
            lines += ["", "[[Notes]]"] + [f"    [{i}] {w.message}" for i, w in enumerate(self.warnings, 1)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def compare_noise(runs: RunTable | pd.DataFrame, **fit_kwargs: Any) -> NoiseComparison:
    """Sample the joint law with cell effects and with independent runs; compare by PSIS-LOO.

    ``fit_kwargs`` go to :func:`.sampling.sample_posterior` for both models (draws, tune, chains,
    seed, sampler, target_accept, hdi_prob, progress, spec), not ``noise`` or ``save``.  Raises
    ``ValueError`` when the table has no cell with two or more runs (nothing to compare).
    """
    runs = as_runs(runs)
    for name in ("noise", "save"):
        if fit_kwargs.get(name) is not None:
            raise ValueError(f"compare_noise sets {name!r} itself; leave it out")
        fit_kwargs.pop(name, None)
    resolve_noise(runs, "cell")  # a clear error when there are no cells to share noise
    fits, loos = {}, {}
    for label in ("cell", "run"):
        fits[label] = sample_posterior(runs, noise=label, **fit_kwargs)
        loos[label] = psis_loo(fits[label].idata)
    diff, se, cell_preferred = paired_difference(loos["cell"], loos["run"])
    preferred = "cell" if cell_preferred else "run"
    phi = {}
    for label, bf in fits.items():
        post = bf.result.extras.get("posterior", {}).get("phi")
        phi[label] = {"median": post["median"], "hdi": post["hdi"]} if post else {}
    cautions = [pareto_k_caution(loos[label], runs.run_ids, model=label) for label in fits]
    return NoiseComparison(
        elpd={label: float(loos[label]["elpd_loo"]) for label in fits},
        se={label: float(loos[label]["se"]) for label in fits},
        elpd_diff=diff,
        se_diff=se,
        preferred=preferred,
        rule=RULE,
        n_runs=len(runs),
        source=runs.source,
        phi=phi,
        tau=dict((fits["cell"].result.extras.get("cell_effects") or {}).get("tau", {})),
        warnings=[c for c in cautions if c is not None],
    )
