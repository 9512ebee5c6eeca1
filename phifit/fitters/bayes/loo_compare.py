"""Bayesian model comparison of phi by PSIS-LOO: phi free vs phi = 0 vs phi = 1.

Each model is the Bayesian joint law (:mod:`.model`) with phi free or held fixed; all
other settings are shared.  Predictive accuracy is elpd_loo (:mod:`.loo`); the table is
ArviZ's ``az.compare`` with stacking weights.  Runs with Pareto k above ArviZ's threshold
are reported as ``pareto_k`` cautions, one per model.

Decision rule (:data:`RULE`).  For the free model F and a restricted model R, with the
paired difference d = elpd_F - elpd_R = sum_i (loo_i,F - loo_i,R) and its standard error
se(d) = sqrt(n var_i(d_i)), F is *preferred* over R when d > 4 **and** d > 2 se(d).  A
difference below 4 is small whatever its standard error, and se(d) itself is only
trustworthy for larger differences (Sivula, Magnusson, Matamoros & Vehtari 2022; the LOO
FAQ).  When F is not preferred over some restricted model, the simpler model stands:
``preferred`` is the restricted model with the highest elpd among those F does not beat.
Otherwise ``preferred`` is ``"free"``.
"""

from __future__ import annotations

import math
import warnings as _warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...cautions import Caution
from ...extras import import_optional
from ...law import LawSpec
from ...result import GENERATOR, FitResult
from ...runs.table import RunTable, as_runs
from ...serialize import JsonIO, to_plain
from .loo import pareto_k_caution, psis_loo
from .sampling import sample_posterior

#: Minimum elpd difference for a preference (elpd units, i.e. nats of predictive density).
MIN_DIFF = 4.0
#: Required multiple of the standard error of the paired difference.
SE_MULT = 2.0
RULE = (
    f"free is preferred over a restricted model when elpd_free - elpd_restricted > "
    f"{MIN_DIFF:g} and > {SE_MULT:g} x SE of the paired difference; otherwise the "
    f"restricted (simpler) model with the highest elpd stands"
)


@dataclass(frozen=True)
class LooComparison(JsonIO):
    """PSIS-LOO comparison of the Bayesian joint law with phi free and phi fixed.

    Attributes
    ----------
    table : ArviZ ``compare`` frame as plain rows, best first: model, rank, elpd_loo,
        p_loo, elpd_diff (to the best), weight (stacking), se, dse (SE of the difference
        to the best), warning (ArviZ's Pareto-k flag), scale.
    pairwise : free vs each restricted model: elpd_diff (free - restricted), se_diff,
        z (= elpd_diff / se_diff) and ``free_preferred`` under :data:`RULE`.
    preferred : label of the preferred model ("free", "phi=0", "phi=1", ...).
    rule : the decision rule in words.
    fits : label -> FitResult of each model (posterior medians, HDIs, diagnostics).
    warnings : Cautions: ``pareto_k`` per model with unreliable LOO terms, then each fit's
        own cautions with the model label in the message and in ``values["model"]``.
    """

    table: list[dict[str, Any]]
    pairwise: list[dict[str, Any]]
    preferred: str
    rule: str
    n_runs: int
    source: str = ""
    fits: dict[str, FitResult] = field(default_factory=dict)
    warnings: list[Caution] = field(default_factory=list)

    @property
    def pareto_k_warnings(self) -> list[Caution]:
        """The ``pareto_k`` cautions (runs whose leave-one-out terms are unreliable)."""
        return [w for w in self.warnings if w.kind == "pareto_k"]

    def to_frame(self) -> pd.DataFrame:
        """ArviZ's comparison table, one row per model (index ``model``), best first."""
        return pd.DataFrame(self.table).set_index("model")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict of plain Python types."""
        return to_plain(
            {
                "generator": GENERATOR,
                "kind": "loo_comparison",
                "table": self.table,
                "pairwise": self.pairwise,
                "preferred": self.preferred,
                "rule": self.rule,
                "n_runs": self.n_runs,
                "source": self.source,
                "warnings": [w.to_dict() for w in self.warnings],
                "fits": {k: v.to_dict() for k, v in self.fits.items()},
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LooComparison:
        """Rebuild from :meth:`to_dict` output (older files' string warnings become Cautions)."""
        if data.get("kind") != "loo_comparison":
            raise ValueError("not a phifit LOO comparison (missing kind='loo_comparison')")
        old_k = [Caution("bayes", "pareto_k", str(m)) for m in data.get("pareto_k_warnings", [])]
        return cls(
            table=list(data["table"]),
            pairwise=list(data["pairwise"]),
            preferred=str(data["preferred"]),
            rule=str(data["rule"]),
            n_runs=int(data["n_runs"]),
            source=str(data.get("source", "")),
            fits={k: FitResult.from_dict(v) for k, v in data.get("fits", {}).items()},
            warnings=old_k + [Caution.from_dict(w, source="bayes") for w in data.get("warnings", [])],
        )

    def summary(self) -> str:
        """Readable text: the LOO table, the pairwise tests, the verdict and the notes."""
        lines = [
            "[[phifit: PSIS-LOO comparison of phi (Bayesian joint law)]]",
            f"runs: {self.n_runs}" + (f"   source: {self.source}" if self.source else ""),
            "",
            "[[ELPD-LOO]] (higher is better)",
            f"    {'model':<10} {'elpd_loo':>10} {'se':>7} {'p_loo':>7} {'elpd_diff':>10} "
            f"{'dse':>7} {'weight':>7}  {'phi (median, HDI)':<28}",
        ]
        for row in self.table:
            fit = self.fits.get(row["model"])
            phi = ""
            if fit is not None and fit.params.get("phi") is not None:
                if "phi" in fit.fixed:
                    phi = f"{fit.params['phi']:g} (fixed)"
                elif fit.ci and "phi" in fit.ci:
                    lo, hi = fit.ci["phi"]
                    phi = f"{fit.params['phi']:.3f} [{lo:.3f}, {hi:.3f}] ({100 * fit.ci_level:g}%)"
            lines.append(
                f"    {row['model']:<10} {row['elpd_loo']:>10.2f} {row['se']:>7.2f} "
                f"{row['p_loo']:>7.2f} {row['elpd_diff']:>10.2f} {row['dse']:>7.2f} "
                f"{row['weight']:>7.3f}  {phi:<28}"
            )
        lines += ["", "[[free vs restricted]] (paired ELPD difference)"]
        for p in self.pairwise:
            verdict = "free preferred" if p["free_preferred"] else "free NOT preferred"
            lines.append(
                f"    free - {p['restricted']:<8} {p['elpd_diff']:>9.2f} +- "
                f"{p['se_diff']:.2f}  (z = {p['z']:.1f})  {verdict}"
            )
        lines += ["", f"preferred: {self.preferred}", f"rule: {self.rule}"]
        if self.warnings:
            lines += ["", "[[Notes]]"] + [f"    [{i}] {w.message}" for i, w in enumerate(self.warnings, 1)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def paired_difference(
    loo_better: Mapping[str, Any], loo_simpler: Mapping[str, Any]
) -> tuple[float, float, bool]:
    """(d, se(d), preferred) for d = elpd_better - elpd_simpler summed over paired runs,
    se(d) = sqrt(n var_i(d_i)), preferred = d > :data:`MIN_DIFF` and d > :data:`SE_MULT` se(d)."""
    d_i = np.asarray(loo_better["loo_i"], float) - np.asarray(loo_simpler["loo_i"], float)
    diff = float(d_i.sum())
    se = float(math.sqrt(len(d_i) * np.var(d_i, ddof=1))) if len(d_i) > 1 else 0.0
    return diff, se, bool(diff > MIN_DIFF and diff > SE_MULT * se)


def _labels(fixes: Iterable[Mapping[str, float]], base: LawSpec) -> list[tuple[str, LawSpec]]:
    out: list[tuple[str, LawSpec]] = []
    for fix in fixes:
        if not isinstance(fix, Mapping) or not fix:
            raise ValueError(
                f"each entry of fixes must be a non-empty mapping such as {{'phi': 0.0}}, got {fix!r}"
            )
        spec = LawSpec(fixed={**base.fixed, **fix}, bounds=base.bounds)
        label = LawSpec(fixed=dict(fix)).label()
        if label in [lab for lab, _ in out]:
            raise ValueError(f"fixes lists {label} twice")
        out.append((label, spec))
    if not out:
        raise ValueError("fixes is empty; give at least one restricted model such as {'phi': 0.0}")
    return out


def _labelled(label: str, w: Caution) -> Caution:
    return Caution(w.source, w.kind, f"{label}: {w.message}", {**w.values, "model": label}, w.level)


def compare_loo(
    runs: RunTable | pd.DataFrame,
    *,
    fixes: Iterable[Mapping[str, float]] = ({"phi": 0.0}, {"phi": 1.0}),
    **fit_kwargs: Any,
) -> LooComparison:
    """Fit the Bayesian joint law with phi free and with each of ``fixes``; compare by PSIS-LOO.

    ``fit_kwargs`` go to :func:`.sampling.sample_posterior` (draws, tune, chains, seed,
    sampler, target_accept, hdi_prob, progress, spec); every model uses the same
    settings.  ``spec`` may set bounds or fix parameters other than the ones compared,
    not phi.  The decision rule is :data:`RULE` (module docstring).
    """
    runs = as_runs(runs)
    az = import_optional("arviz", "bayes", "comparing fits by PSIS-LOO (method 'bayes')")

    if fit_kwargs.get("save") is not None:
        raise ValueError(
            "compare_loo does not save posteriors; fit each model with fit_bayes(..., save=PATH) to keep one"
        )
    fit_kwargs.pop("save", None)
    base = fit_kwargs.pop("spec", None) or LawSpec()
    if "phi" in base.fixed:
        raise ValueError("compare_loo compares phi free against fixed values; spec must not fix phi")
    if not runs.phi_identifiable:
        raise ValueError(
            "phi is not identifiable from these runs (need looped runs, r > 1, "
            "and at least two values of r); a LOO comparison of phi is meaningless"
        )
    models = [("free", base)] + _labels(fixes, base)

    fits, idatas, loos = {}, {}, {}
    for label, spec in models:
        bf = sample_posterior(runs, spec=spec, **fit_kwargs)
        fits[label], idatas[label] = bf.result, bf.idata
        loos[label] = psis_loo(bf.idata)
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        frame = az.compare(idatas, ic="loo", method="stacking")
    table = []
    for model, row in frame.iterrows():
        entry = {"model": str(model)}
        entry.update({k: to_plain(v.item() if hasattr(v, "item") else v) for k, v in row.items()})
        table.append(entry)

    pairwise = []
    for label, _ in models[1:]:
        diff, se, preferred_free = paired_difference(loos["free"], loos[label])
        pairwise.append(
            {
                "restricted": label,
                "elpd_diff": diff,
                "se_diff": se,
                "z": diff / se if se > 0 else float("nan"),
                "free_preferred": preferred_free,
            }
        )
    elpd = {label: loos[label]["elpd_loo"] for label, _ in models}
    standing = [p["restricted"] for p in pairwise if not p["free_preferred"]]
    preferred = "free" if not standing else max(standing, key=lambda lab: elpd[lab])

    k_cautions = [pareto_k_caution(loos[label], runs.run_ids, model=label) for label, _ in models]
    notes = [_labelled(label, w) for label, _ in models for w in fits[label].warnings if w.kind != "pareto_k"]
    return LooComparison(
        table=table,
        pairwise=pairwise,
        preferred=preferred,
        rule=RULE,
        n_runs=len(runs),
        source=runs.source,
        fits=fits,
        warnings=[c for c in k_cautions if c is not None] + notes,
    )
