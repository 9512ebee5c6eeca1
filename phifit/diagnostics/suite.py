"""Diagnostics of a joint-law fit: one call, :func:`diagnose`, runs every check that applies.

Each question has its own module, whose docstring defines its statistics:

- :mod:`phifit.diagnostics.residuals`: do the residuals show a pattern (per-r offsets, normality,
  heteroscedasticity, trends)?
- :mod:`phifit.diagnostics.identifiability`: can the design and the fit pin phi down (design
  checks, conditioning, correlations, the profile of the fit's own objective along phi)?
- :mod:`phifit.diagnostics.influence`: does phi rest on a few runs or one part of the data
  (leave-one-run/cell-out, budget halves, pairs of r)?

Everything suspect is a :class:`~phifit.cautions.Caution` of source "diagnostics";
:attr:`Diagnostics.warnings` gathers them.  The public names of those modules stay
importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .. import defaults
from ..cautions import Caution, caution, collect
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from ..serialize import JsonIO, to_plain
from .identifiability import (
    CHI2_95,
    PROFILE_INTERVAL_LABEL,
    Identifiability,
    design_warnings,
    identifiability,
    phi_profile,
)
from .influence import Consistency, Influence, consistency, influence
from .residuals import (
    NUMERICAL_PRECISION,
    GroupRow,
    ResidualDiagnostics,
    ResidualTest,
    residual_diagnostics,
    residual_tests,
    sorted_unique,
)

__all__ = [
    "CHI2_95",
    "NUMERICAL_PRECISION",
    "PROFILE_INTERVAL_LABEL",
    "Consistency",
    "Diagnostics",
    "GroupRow",
    "Identifiability",
    "Influence",
    "ResidualDiagnostics",
    "ResidualTest",
    "consistency",
    "data_summary",
    "design_warnings",
    "diagnose",
    "identifiability",
    "influence",
    "phi_profile",
    "residual_diagnostics",
    "residual_tests",
]


def data_summary(runs: RunTable) -> dict[str, Any]:
    """Counts and ranges of the table: runs per r, per budget, per variant; ranges of N, D, L."""
    frame = runs.frame
    n_unique = runs.n_once + runs.n_rec
    out: dict[str, Any] = {
        "source": runs.source,
        "n_runs": len(runs),
        "runs_per_r": {int(k): int(v) for k, v in frame["r"].value_counts().sort_index().items()},
        "n_unique_range": [float(n_unique.min()), float(n_unique.max())],
        "tokens_range": [float(runs.tokens.min()), float(runs.tokens.max())],
        "loss_range": [float(runs.loss.min()), float(runs.loss.max())],
        "columns": [str(c) for c in frame.columns],
    }
    if "budget" in frame:
        levels = sorted_unique(frame["budget"].to_numpy())
        out["runs_per_budget"] = {str(b): int((frame["budget"] == b).sum()) for b in levels}
        out["n_cells"] = int(frame.groupby(["budget", "r"]).ngroups)
    if "variant" in frame:
        out["runs_per_variant"] = {
            str(k): int(v) for k, v in frame["variant"].value_counts().sort_index().items()
        }
    return to_plain(out)


@dataclass(frozen=True)
class Diagnostics(JsonIO):
    """All diagnostics of one fit (influence and consistency are None where they do not apply).

    ``cautions`` are the orchestrator's own (what was skipped and why);
    :attr:`warnings` gathers every caution of the pieces.
    """

    residuals: ResidualDiagnostics
    identifiability: Identifiability
    influence: Influence | None
    consistency: Consistency | None
    data: dict[str, Any]
    cautions: list[Caution] = field(default_factory=list)

    @property
    def warnings(self) -> list[Caution]:
        """Every caution: residual flags, identifiability, then what was skipped."""
        return collect(self.residuals.flags, self.identifiability.warnings, self.cautions)

    @property
    def notes(self) -> list[str]:
        """Messages of the orchestrator's cautions (what was skipped and why)."""
        return [c.message for c in self.cautions]

    def to_dict(self) -> dict[str, Any]:
        return to_plain(
            {
                "data": self.data,
                "residuals": self.residuals.to_dict(),
                "identifiability": self.identifiability.to_dict(),
                "influence": None if self.influence is None else self.influence.to_dict(),
                "consistency": None if self.consistency is None else self.consistency.to_dict(),
                "warnings": [w.to_dict() for w in self.warnings],
                "notes": self.notes,
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnostics:
        """Rebuild from :meth:`to_dict` output.  The orchestrator's own ``cautions`` are the
        saved ``warnings`` that the residual flags and the identifiability cautions do not
        account for (``warnings`` gathers all three without repeats)."""
        residuals = ResidualDiagnostics.from_dict(data["residuals"])
        ident = Identifiability.from_dict(data["identifiability"])
        parts = {(c.source, c.kind, c.message) for c in collect(residuals.flags, ident.warnings)}
        saved = [Caution.from_dict(w, source="diagnostics") for w in data.get("warnings") or []]
        return cls(
            residuals=residuals,
            identifiability=ident,
            influence=None if data.get("influence") is None else Influence.from_dict(data["influence"]),
            consistency=None
            if data.get("consistency") is None
            else Consistency.from_dict(data["consistency"]),
            data=dict(data.get("data") or {}),
            cautions=[c for c in saved if (c.source, c.kind, c.message) not in parts],
        )

    def summary(self) -> str:
        parts = [self.residuals.summary(), self.identifiability.summary()]
        if self.influence is not None:
            parts.append(self.influence.summary())
        if self.consistency is not None:
            parts.append(self.consistency.summary())
        parts += [f"note: {n}" for n in self.notes]
        return "\n\n".join(parts)


def refits_apply(fit: FitResult) -> bool:
    """Whether the refit diagnostics (influence, consistency) apply to ``fit``: phi free and
    identified, and a fit with an optimisation objective to refit (Huber or least squares)."""
    return fit.phi is not None and "phi" not in fit.fixed and fit.loss in ("huber", "squares")


def influence_if_applies(
    runs: RunTable | pd.DataFrame, fit: FitResult, *, influence_top: int = 5, seed: int = defaults.SEED
) -> Influence | None:
    """The influence diagnostic :func:`diagnose` computes (same arguments, same numbers), or None
    where it does not apply (:func:`refits_apply`): the piece ``diagnose(skip=["influence"])``
    leaves out, for a caller that runs the two side by side."""
    return influence(as_runs(runs), fit, n_top=influence_top, seed=seed) if refits_apply(fit) else None


def diagnose(
    runs: RunTable | pd.DataFrame,
    fit: FitResult,
    *,
    significance: float = 0.01,
    influence_top: int = 5,
    consistency_starts: int = defaults.CONSISTENCY_STARTS,
    seed: int = defaults.SEED,
    skip: Sequence[str] = (),
    recipe: str | None = None,
) -> Diagnostics:
    """Run every diagnostic that applies to this fit (``skip`` may name 'influence',
    'consistency', 'profile': the phi profile, which
    :func:`~phifit.diagnostics.identifiability.attach_profile` may add afterwards).  Influence
    and consistency need phi free and identified, and a fit with an optimisation objective (Huber
    or least squares): for a Bayesian fit they are skipped with a caution saying so.
    ``recipe``: the recipe of a table whose
    ``variant`` column holds several (default the one ``fit`` was fitted to, else "baseline";
    :func:`phifit.recipes.pairing.recipe_runs`)."""
    from ..runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=fit)  # one recipe of a mixed table, as --variant picks it
    unknown = set(skip) - {"influence", "consistency", "profile"}
    if unknown:
        raise ValueError(
            f"unknown diagnostics to skip: {', '.join(sorted(unknown))}; "
            "expected influence, consistency, profile"
        )
    cautions: list[Caution] = []
    res = residual_diagnostics(runs, fit, significance=significance)
    ident = identifiability(runs, fit, seed=seed, **({"profile_points": 0} if "profile" in skip else {}))
    infl = cons = None
    if fit.phi is None or "phi" in fit.fixed:
        cautions.append(
            caution(
                "diagnostics",
                "influence_skipped",
                "phi is fixed or not identified: influence and consistency of phi skipped",
                level="note",
            )
        )
    elif fit.loss not in ("huber", "squares"):
        cautions.append(
            caution(
                "diagnostics",
                "influence_skipped",
                f"a {fit.method} fit ({fit.loss} likelihood) has no optimisation objective to refit: "
                "influence, consistency and the phi profile skipped; run them on a Huber or "
                "least-squares fit",
                level="note",
                loss=fit.loss,
            )
        )
    else:  # refits_apply(fit)
        if "influence" not in skip:
            infl = influence_if_applies(runs, fit, influence_top=influence_top, seed=seed)
        if "consistency" not in skip:
            cons = consistency(runs, fit, n_starts=consistency_starts, seed=seed)
    return Diagnostics(
        residuals=res,
        identifiability=ident,
        influence=infl,
        consistency=cons,
        data=data_summary(runs),
        cautions=cautions,
    )
