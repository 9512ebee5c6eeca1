"""Is one phi enough?  One free multiplier per recurrence count against the law's r^phi.

The law values r passes of the recurrent block by one exponent:

    N_eff = N_once + r^phi N_rec.

The **free-multiplier law** gives every looped r its own effective multiplier,

    N_eff = N_once + m_r N_rec,   m_1 = 1,   m_r = r^phi_r  (r > 1),

with E, A, alpha, B, beta shared.  It is the grouped law of
:mod:`phifit.fitters.per_recipe_phi` with one group per looped r (one phi_r each): r = 1 runs
have log r = 0, so no phi moves them; they join the group of the smallest looped r, and they
are the anchor m_1 = 1 (without them the m_r only trade against A, since N_once << N_rec).
Both laws are fitted by :func:`~phifit.fitters.per_recipe_phi.fit_joint` (same objective, box
and starts): the **one-phi** law (the null, whose phi draws the r^phi curve) and the free one.

- **Intervals of m_r**: the (budget, r) cell bootstrap of the law's phi
  (:mod:`phifit.bootstrap.block`, the same weights for the same seed and replicate count):
  each replicate redraws the cells with replacement, and the free-multiplier law is refitted
  to the weighted table (objective sum_i w_i rho(log L_hat_i - log L_i)) from its estimate and
  from the one-phi solution on the batched LM, rows it leaves unconverged finished by its
  active-set LM and then by the least-squares polish.  A replicate fails when its table lacks
  the r = 1 runs or every looped run of some r (m_r not identified), or when its refit does
  not converge; failures are counted by reason, and no interval is given when more than
  :data:`~phifit.bootstrap.result.MAX_FAILED_SHARE` of them failed.  Percentile intervals
  of phi_r, and of m_r = r^phi_r (the same replicates: the map is monotone).
- **Lack of fit of r^phi**: the restricted wild cluster bootstrap
  (:mod:`phifit.bootstrap.wild`) of T = F_one_phi - F_free, tables rebuilt from the one-phi
  fit with one Rademacher sign per (budget, r) cell, both laws refitted, p = (1 + #{T* >= T}) /
  (1 + B'), as for "one phi for every recipe" (:mod:`phifit.recipes.shared_phi`).  A small p
  says no single exponent describes how the value of a recurrence grows with r: phi is then
  a summary of a law that does not hold for this table.

It needs r = 1 runs and at least two looped r (three distinct r): with r in {1, 2} the free
multiplier *is* the r^phi fit, and the result says it cannot be tested.

- **Held parameters**: a law fitted with parameters held fixed (B and beta on a table at one
  token count, where B D^-beta is one constant and the law is E' + A N_eff^-alpha; or a user's
  fix of E, A or alpha) holds them at the same values in both laws.  The models then have only
  the free coordinates: the fits, the bootstrap refits, the wild test's residual adjustment
  (its leverage of the null fit) and the check that enough runs and cells remain all count the
  free parameters alone (3 + one per looped r with B and beta held, not 5 + one per looped r).
  Without held parameters both laws are fitted by :func:`~phifit.fitters.per_recipe_phi.fit_joint`;
  with them by the same multi-start engine on the reduced coordinates
  (:func:`phifit.diagnostics.drift_law.multistart_fit`: the same starts, iterations and polish).
  phi itself cannot be held: the test is of r^phi against one phi per r.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import defaults
from ..bootstrap.block import draw_weights
from ..bootstrap.result import failed_refit_cautions, intervals_withheld
from ..bootstrap.sequential import StopRule
from ..bootstrap.wild import Refit, WildTest, wild_cluster_statistics, wild_test_result
from ..cautions import Caution, caution
from ..fitters.likelihood import SIGNIFICANCE, p_text
from ..fitters.lm import best_of_starts, finish_lm
from ..fitters.objective import DELTA, loss_terms
from ..fitters.parallel import check_backend, parallel_map
from ..fitters.per_recipe_phi import GroupedLaw, JointOptions, fit_joint
from ..fitters.polish import polish_residuals
from ..intervals import bootstrap_interval
from ..law import THETA_NAMES, THETA_TO_PARAM, Design, to_internal
from ..result import FitResult
from ..runs.table import RunTable, as_runs
from .drift_law import multistart_fit
from .multiplier_result import SOURCE, MultiplierFit

#: Iterations of the active-set finish of bootstrap refits the first LM left unconverged.
FINISH_ITER = 3_000
#: Bootstrap replicates refitted together (one task of a worker).
CHUNK = 250


class GroupedModel:
    """``model(x)`` of a grouped law on one design, as plain data that pickles to workers
    (the grouped law's closure is built lazily in each process).

    ``held``: {coordinate index (0-4: a, alpha, b, beta, e): internal value} held fixed; x then
    holds only the other coordinates (:meth:`full` inserts the held values) and the Jacobian
    only their rows."""

    def __init__(
        self,
        recipes: tuple[str, ...],
        groups: np.ndarray,
        design: Design,
        held: Mapping[int, float] | None = None,
    ) -> None:
        self.recipes, self.groups, self.design = tuple(recipes), np.asarray(groups), design
        self.held = dict(held or {})
        k = 5 + len(self.recipes)
        self.free_rows = np.array([i for i in range(k) if i not in self.held], dtype=int)
        self._fn = None

    def full(self, x: np.ndarray) -> np.ndarray:
        """x with the held coordinates inserted: (..., 5 + G)."""
        x = np.asarray(x, dtype=float)
        out = np.empty(x.shape[:-1] + (5 + len(self.recipes),))
        out[..., self.free_rows] = x
        for i, value in self.held.items():
            out[..., i] = value
        return out

    def _law(self):
        if self._fn is None:
            self._fn = GroupedLaw(recipes=self.recipes, groups=self.groups).model(self.design)
        return self._fn

    def __call__(self, x: np.ndarray):
        pred, parts = self.forward(x)
        return pred, self.jacobian(parts)

    def forward(self, x: np.ndarray):
        """Predictions and the parts of the Jacobian (the grouped law's ``forward``)."""
        return self._law().forward(self.full(x) if self.held else x)

    def jacobian(self, parts, out: np.ndarray | None = None) -> np.ndarray:
        """The transposed Jacobian of the free coordinates from ``parts`` (rows of them)."""
        jac_t = self._law().jacobian(parts)
        return jac_t[:, self.free_rows, :] if self.held else jac_t

    def __getstate__(self) -> dict[str, Any]:
        return {"recipes": self.recipes, "groups": self.groups, "design": self.design, "held": self.held}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["recipes"], state["groups"], state["design"], state.get("held"))


def held_coordinates(law: FitResult | None) -> dict[int, float]:
    """The coordinates ``law`` holds fixed, as {index in (a, alpha, b, beta, e): internal value}
    (B = 1e-12 is b = log B); empty without a law.  Raises ``ValueError`` when phi is held: the
    test is of r^phi against one phi per r, so phi must be free."""
    if law is None or not law.fixed:
        return {}
    if "phi" in law.fixed:
        raise ValueError("free multipliers: phi is held fixed in the law; the test of r^phi needs phi free")
    index = {THETA_TO_PARAM[c]: i for i, c in enumerate(THETA_NAMES[:5])}
    return {index[name]: to_internal(name, value)[1] for name, value in law.fixed.items()}


def r_groups(runs: RunTable) -> tuple[list[float], np.ndarray, str]:
    """The looped r values, each run's group (its r's index; r = 1 runs: the first group's) and
    why the table cannot test r^phi ("" when it can)."""
    r = np.asarray(runs.r, dtype=float)
    looped = (r > 1) & (np.asarray(runs.n_rec) > 0)
    values = sorted(float(v) for v in np.unique(r[looped]))
    base = np.isclose(r, 1.0)
    reason = ""
    if len(values) < 2:
        reason = (
            f"only {len(values)} looped r value(s) ({', '.join(f'{v:g}' for v in values) or 'none'}): with "
            "one looped r the free multiplier is the r^phi fit itself; it needs three distinct r"
        )
    elif not base.any():
        reason = "no r = 1 runs: the anchor m_1 = 1 is missing, so the m_r are not identified"
    elif np.any(~looped & ~base):
        reason = "runs with r > 1 and no recurrent parameters: the free multipliers need N_rec > 0"
    if reason:
        return values, np.zeros(len(r), dtype=int), reason
    codes = np.zeros(len(r), dtype=int)
    for g, v in enumerate(values):
        codes[np.isclose(r, v)] = g
    return values, codes, ""


def fit_multipliers(
    runs: RunTable,
    law: FitResult | None = None,
    *,
    method: str = "huber",
    n_boot: int = defaults.N_BOOT,
    n_wild: int = defaults.N_WILD,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    n_starts: int = defaults.N_STARTS,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
    wild_stop: StopRule | None = None,
    recipe: str | None = None,
) -> MultiplierFit:
    """Fit one multiplier per looped r, bootstrap it by cells, and test r^phi (module docstring).

    ``law``: a fit of the one-phi law to ``runs`` whose parameters warm-start both fits and whose
    held parameters (``law.fixed``, phi excepted) both laws hold (optional); ``n_boot``
    cell-bootstrap replicates of the m_r (0: no intervals); ``n_wild`` wild cluster bootstrap
    replicates of the lack-of-fit test (0: no test; else >= :data:`phifit.defaults.N_WILD_MIN`);
    ``n_jobs``, ``backend``, ``scheduler``: where the refits run (:mod:`phifit.fitters.parallel`).
    ``wild_stop``: a :class:`phifit.bootstrap.sequential.StopRule` that may end the wild test
    before ``n_wild`` replicates once its decision is settled (None: all of them).
    ``recipe``: the recipe of a table whose ``variant`` column holds several (default the one
    ``law`` was fitted to, else "baseline"; :func:`phifit.recipes.pairing.recipe_runs`).
    """
    from ..runs.recipes import recipe_runs

    runs = recipe_runs(runs, recipe, fit=law)  # one recipe of a mixed table, as --variant picks it
    check_backend(backend, scheduler)
    setup = setup_multipliers(
        runs,
        law,
        method=method,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        level=level,
        n_starts=n_starts,
        wild_stop=wild_stop,
    )
    if isinstance(setup, MultiplierFit):
        return setup
    return finish_check(setup, n_jobs=n_jobs, backend=backend, scheduler=scheduler)


@dataclass
class MultiplierSetup:
    """The one-phi and free-multiplier point fits on a table, and what the cell bootstrap of the
    multipliers and the lack-of-fit test refit (:func:`setup_multipliers`).

    ``null``, ``free``: the two laws as the wild test refits them (:func:`_point_fits`);
    ``warnings``: the free fit's cautions; ``weights``: the cell bootstrap's (n_boot, n_runs)
    weights, ``ident``: the replicates whose table identifies every m_r (the others are not
    refitted).  :meth:`boot_tasks` are the bootstrap's refits in chunks (arguments of
    :func:`refit_weighted_rows`), :func:`multiplier_wild_test` the test; :meth:`finish` gathers
    them into the :class:`MultiplierFit`."""

    runs: RunTable
    values: list[float]
    law_fixed: tuple[str, ...] | None
    delta: float
    null: Refit
    free: Refit
    warnings: list[Caution]
    weights: np.ndarray
    ident: np.ndarray
    n_boot: int
    n_wild: int
    seed: int
    level: float
    wild_stop: StopRule | None

    def wild_test(self, parallel: dict[str, Any] | None = None) -> WildTest:
        """The test of this setup (:func:`multiplier_wild_test`)."""
        return multiplier_wild_test(self, parallel)

    def boot_tasks(self, size: int = CHUNK) -> list[tuple]:
        """The cell bootstrap's refits: one argument tuple of :func:`refit_weighted_rows` per
        chunk of ``size`` replicates, each started from the free law's estimate, then from the
        one-phi solution (each replicate's refit is its own: any ``size`` gives the same
        numbers)."""
        free = self.free
        starts = (free.starts[-1], free.starts[0])
        y = self.runs.log_loss
        return [
            (free.model, free.lower, free.upper, starts, y, self.weights[ch], self.delta)
            for ch in replicate_chunks(self.ident, size)
        ]

    def finish(self, chunk_results: list[tuple], wild: WildTest | None, size: int = CHUNK) -> MultiplierFit:
        """The :class:`MultiplierFit` from the results of :meth:`boot_tasks` (in their order, cut
        in chunks of ``size``) and the test (:func:`multiplier_wild_test`; None: not run)."""
        values, n_boot, seed, level = self.values, self.n_boot, self.seed, self.level
        null, free = self.null, self.free
        n_groups = len(values)
        warnings = list(self.warnings)
        phi_draws = np.full((0, n_groups), np.nan)
        reasons: dict[str, int] = {}
        n_failed = 0
        if n_boot:
            k = len(free.lower)
            chunks = replicate_chunks(self.ident, size)
            x, reasons = gather_refits(self.ident, chunks, chunk_results, k, UNIDENTIFIED)
            phi_draws = x[:, k - n_groups :]
            n_failed = int(sum(reasons.values()))
            warnings += failed_refit_cautions(SOURCE, "free multipliers", "m_r", n_failed, n_boot, reasons)
        withheld = not n_boot or intervals_withheld(n_failed, n_boot)
        phi_ci = []
        for g in range(n_groups):
            iv = bootstrap_interval(phi_draws[:, g], level=level, mc_seed=seed) if not withheld else None
            phi_ci.append([None, None] if iv is None else [float(iv.lo), float(iv.hi)])
        m_ci = [[None if e is None else float(v**e) for e in pair] for v, pair in zip(values, phi_ci)]
        x0, x1 = null.starts[0], free.starts[-1]
        statistic = _statistic(self)
        if wild is not None:
            warnings += [
                caution(SOURCE, w.kind, w.message, level=w.level, **dict(w.values)) for w in wild.warnings
            ]
        phis = [float(v) for v in x1[-n_groups:]]
        mult = [float(v**p) for v, p in zip(values, phis)]
        phi = float(x0[-1])
        full = free.model.full(x1)[:5]
        natural = {
            THETA_TO_PARAM[c]: float(np.exp(v) if c in ("a", "b", "e") else v)
            for c, v in zip(THETA_NAMES, full)
        }
        fixed = self.law_fixed
        return MultiplierFit(
            r=list(values),
            phi_r=phis,
            multiplier=mult,
            phi_r_ci=phi_ci,
            multiplier_ci=m_ci,
            phi=phi,
            free_params={k: v for k, v in natural.items() if fixed is None or k not in fixed},
            statistic=statistic,
            wild=wild,
            n_boot=int(n_boot),
            n_failed=n_failed,
            failure_reasons=reasons,
            level=float(level),
            n_runs=len(self.runs),
            testable=True,
            reason="",
            verdict=_verdict(values, mult, phi, wild),
            seed=int(seed),
            warnings=warnings,
        )


def setup_multipliers(
    runs: RunTable,
    law: FitResult | None = None,
    *,
    method: str = "huber",
    n_boot: int = defaults.N_BOOT,
    n_wild: int = defaults.N_WILD,
    seed: int = defaults.SEED,
    level: float = defaults.LEVEL,
    n_starts: int = defaults.N_STARTS,
    wild_stop: StopRule | None = None,
) -> MultiplierSetup | MultiplierFit:
    """The first part of :func:`fit_multipliers` (same keywords): the arguments checked, the two
    point fits and the cell bootstrap's weights, as a :class:`MultiplierSetup`; or the
    untestable :class:`MultiplierFit` when the table cannot test r^phi."""
    runs = as_runs(runs)
    if n_wild and n_wild < defaults.N_WILD_MIN:
        raise ValueError(
            f"n_wild must be 0 (off) or >= {defaults.N_WILD_MIN} for a p-value at the 5% level, got {n_wild}"
        )
    if n_boot < 0 or n_boot == 1:
        raise ValueError(f"n_boot must be 0 (off) or >= 2, got {n_boot}")
    held = held_coordinates(law)
    values, codes, reason = r_groups(runs)
    reason = reason or _too_small(runs, len(values), len(held))
    if reason:
        return _untestable(runs, values, reason, level, seed)
    names = tuple(f"{v:g}" for v in values)
    delta = DELTA if method == "huber" else np.inf
    null, free, warnings = _point_fits(runs, names, codes, law, held, method, delta, n_starts, seed)
    weights, ident = (
        _cell_draws(runs, codes, len(names), n_boot, seed)
        if n_boot
        else (np.zeros((0, len(runs))), np.zeros(0, dtype=bool))
    )
    return MultiplierSetup(
        runs=runs,
        values=list(values),
        law_fixed=None if law is None else tuple(law.fixed),
        delta=delta,
        null=null,
        free=free,
        warnings=warnings,
        weights=weights,
        ident=ident,
        n_boot=n_boot,
        n_wild=n_wild,
        seed=seed,
        level=level,
        wild_stop=wild_stop,
    )


def _statistic(setup: MultiplierSetup) -> float:
    """T = F_one_phi - F_free at the two point fits (0 at least)."""
    y, delta = setup.runs.log_loss, setup.delta
    null, free = setup.null, setup.free
    y0 = null.model(null.starts[0][None, :])[0][0]
    y1 = free.model(free.starts[-1][None, :])[0][0]
    return max(float(loss_terms(y0 - y, delta).sum() - loss_terms(y1 - y, delta).sum()), 0.0)


def multiplier_wild_test(setup: MultiplierSetup, parallel: dict[str, Any] | None = None) -> WildTest:
    """The restricted wild cluster bootstrap of one phi against one phi per r of a
    :class:`MultiplierSetup` (its ``n_wild`` replicates, its stop rule), refits on ``parallel``
    (keywords of :func:`phifit.fitters.parallel.parallel_map`; None: in this process)."""
    y = setup.runs.log_loss
    y0 = setup.null.model(setup.null.starts[0][None, :])[0][0]
    return _wild_test(
        setup.runs,
        y,
        y0,
        setup.null,
        setup.free,
        setup.delta,
        _statistic(setup),
        setup.n_wild,
        setup.seed,
        parallel or {"n_jobs": 1},
        setup.wild_stop,
    )


def _point_fits(
    runs: RunTable,
    names: tuple[str, ...],
    codes: np.ndarray,
    law: FitResult | None,
    held: dict[int, float],
    method: str,
    delta: float,
    n_starts: int,
    seed: int,
) -> tuple[Refit, Refit, list[Caution]]:
    """The one-phi law and the free-multiplier law fitted to ``runs``, as the wild test refits
    them: the one-phi law with its fit as the one start, the free law with the one-phi fit
    (one phi per r) and then its own fit as starts (``starts[-1]`` is its estimate); and the
    free fit's cautions.  Without held coordinates both are :func:`fit_joint` fits; with them
    the multi-start engine on the free coordinates (module docstring)."""
    n_groups = len(names)
    model0 = GroupedModel(("shared",), np.zeros(len(runs), dtype=int), runs.design, held)
    model1 = GroupedModel(names, codes, runs.design, held)
    law0 = GroupedLaw(recipes=("shared",), groups=np.zeros(len(runs), dtype=int))
    law1 = GroupedLaw(recipes=names, groups=codes)
    box0 = law0.lower[model0.free_rows], law0.upper[model0.free_rows]
    box1 = law1.lower[model1.free_rows], law1.upper[model1.free_rows]

    def one_phi_per_r(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x[:-1], np.repeat(x[-1], n_groups)])

    if not held:
        warm = [] if law is None else [law.theta]
        labels = np.array(names)[codes]
        kw: dict[str, Any] = {
            "recipes": names,
            "method": method,
            "options": JointOptions(n_starts=n_starts, seed=seed),
        }
        null = fit_joint(runs, labels, shared_phi=True, starts=warm, **kw)
        free = fit_joint(runs, labels, starts=[*warm, null.theta], **kw)
        x0 = np.asarray(null.extras["x"], dtype=float)
        x1 = np.asarray(free.extras["x"], dtype=float)
        warnings = [
            caution(SOURCE, w.kind, f"free-multiplier fit: {w.message}", level=w.level, **dict(w.values))
            for w in free.warnings
        ]
    else:
        y = runs.log_loss
        kw = {"delta": delta, "n_starts": n_starts, "seed": seed}
        warm = [] if law is None else [np.asarray(law.theta, dtype=float)[model0.free_rows]]
        null_end = multistart_fit(model0, y, *box0, starts=warm, **kw)
        x0 = null_end.x
        starts = [one_phi_per_r(w) for w in warm] + [one_phi_per_r(x0)]
        free_end = multistart_fit(model1, y, *box1, starts=starts, **kw)
        x1 = free_end.x
        coords = [law1.coordinates[i] for i in model1.free_rows]
        warnings = _held_cautions(law, model1, coords, x1, box1, free_end.converged)
    null_refit = Refit(model0, box0[0], box0[1], (x0,))
    return null_refit, Refit(model1, box1[0], box1[1], (one_phi_per_r(x0), x1)), warnings


def _held_cautions(
    law: FitResult,
    model: GroupedModel,
    coords: list[str],
    x: np.ndarray,
    box: tuple[np.ndarray, np.ndarray],
    converged: bool,
) -> list[Caution]:
    """Cautions of a free-multiplier fit with held coordinates: what is held and how many
    parameters are left, coordinates on the box (as :func:`fit_joint` words them), an
    unconverged polish."""
    fixed = ", ".join(f"{k} = {v:g}" for k, v in law.fixed.items())
    out = [
        caution(
            SOURCE,
            "held",
            f"free-multiplier fit: {fixed} held in both laws, as the law holds them; the free-multiplier "
            f"law has {len(coords)} free parameters, the r^phi law {5 - len(model.held) + 1}",
            level="note",
            held=dict(law.fixed),
        )
    ]
    for name, v, lo, hi in zip(coords, x, *box):
        tol = 1e-6 * (hi - lo)
        if lo + tol < v < hi - tol:
            continue
        side, bound = ("lower", lo) if abs(v - lo) <= abs(v - hi) else ("upper", hi)
        out.append(
            caution(
                SOURCE,
                "at_bound",
                f"free-multiplier fit: {name} = {v:.6g} at {side} bound {bound:g}; the optimum may lie "
                "outside the box",
                parameter=THETA_TO_PARAM.get(name, name),
                value=float(v),
                bound=float(bound),
            )
        )
    if not converged:
        message = "free-multiplier fit: the polish did not report convergence"
        out.append(caution(SOURCE, "unconverged", message))
    return out


def _too_small(runs: RunTable, n_looped: int, n_held: int = 0) -> str:
    """Why the table is too small for the free-multiplier law ("" when it is not): it has
    5 - n_held + n_looped free parameters, and needs more runs than that and, for the wild test,
    at least 2 (budget, r) cells beyond them (:func:`phifit.bootstrap.wild.too_few_clusters`)."""
    from ..bootstrap.wild import too_few_clusters

    n_free = 5 - n_held + n_looped
    if len(runs) <= n_free:
        return f"{len(runs)} runs for the free-multiplier law's {n_free} parameters: it needs more runs"
    codes, label = runs.cells(None)
    n_cells = int(codes.max()) + 1
    if too_few_clusters(n_cells, n_free):
        return (
            f"{n_cells} ({label.replace(',', ', ')}) blocks for the free-multiplier law's {n_free} "
            "parameters: it all but interpolates the block means, so no test of r^phi against it can be read"
        )
    return ""


def _untestable(runs: RunTable, values: list[float], reason: str, level: float, seed: int) -> MultiplierFit:
    return MultiplierFit(
        r=list(values),
        phi_r=[],
        multiplier=[],
        phi_r_ci=[],
        multiplier_ci=[],
        phi=None,
        free_params={},
        statistic=None,
        wild=None,
        n_boot=0,
        n_failed=0,
        failure_reasons={},
        level=float(level),
        n_runs=len(runs),
        testable=False,
        reason=reason,
        verdict=f"r^phi cannot be tested against free multipliers: {reason}",
        seed=int(seed),
        warnings=[
            caution(
                SOURCE, "untestable", f"r^phi not tested against free multipliers: {reason}", level="note"
            )
        ],
    )


def _verdict(values: Sequence[float], mult: Sequence[float], phi: float, wild: WildTest | None) -> str:
    shown = ", ".join(f"m_{v:g} = {m:.3g} (r^phi {v**phi:.3g})" for v, m in zip(values, mult))
    if wild is None:
        return f"not tested (no wild bootstrap): {shown}"
    p = wild.p_value
    if p == p and p < SIGNIFICANCE:
        return (
            f"r^phi does not describe these recurrences: one multiplier per r fits better "
            f"(wild cluster bootstrap p = {p_text(p)}); {shown}; phi = {phi:.3f} summarises a law "
            f"that does not hold here"
        )
    return (
        f"r^phi is not rejected against one multiplier per r "
        f"(wild cluster bootstrap p = {p_text(p)}); {shown}"
    )


# -- the cell bootstrap ------------------------------------------------------------------------
#: The failure of a multipliers' bootstrap replicate whose table does not identify every m_r.
UNIDENTIFIED = "m_r not identifiable in the resampled table (no r = 1 runs, or no runs of some r)"


def _cell_draws(
    runs: RunTable, codes: np.ndarray, n_groups: int, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The cell bootstrap's (n_boot, n_runs) weights and which replicates identify every m_r
    (runs at r = 1, and runs of every looped r)."""
    cells, _ = runs.cells(None)
    # the block bootstrap's first stream: the same resampled tables as the law's bootstrap
    stream = np.random.SeedSequence(seed).spawn(3)[0]
    weights = draw_weights(cells, n_boot, np.random.default_rng(stream))
    present = weights > 0
    base = np.isclose(np.asarray(runs.r, dtype=float), 1.0)
    looped = ~base
    ident = present[:, base].any(axis=1)
    for g in range(n_groups):
        ident &= present[:, looped & (codes == g)].any(axis=1)
    return weights, ident


def finish_check(
    setup: Any,
    *,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
) -> Any:
    """The rest of a check after its setup (a :class:`~phifit.diagnostics.phi_checks.CheckSetup`:
    :class:`MultiplierSetup` or :class:`~phifit.diagnostics.drift.DriftSetup`), in one call: the
    cell bootstrap's chunks (:func:`refit_weighted_rows`) and the wild test on ``n_jobs`` workers
    of ``backend`` (:mod:`phifit.fitters.parallel`), gathered by ``setup.finish``."""
    check_backend(backend, scheduler)
    parallel = {"n_jobs": n_jobs, "backend": backend, "scheduler": scheduler}
    tasks = setup.boot_tasks()
    chunks = list(parallel_map(refit_weighted_rows, tasks, **parallel)) if tasks else []
    wild = setup.wild_test(parallel) if setup.n_wild else None
    return setup.finish(chunks, wild)


def replicate_chunks(ident: np.ndarray, size: int = CHUNK) -> list[np.ndarray]:
    """The replicates a check's cell bootstrap refits (those ``ident`` marks), in chunks of
    ``size``: the tasks of :func:`refit_weighted_rows` (each replicate's refit is its own, so any
    ``size`` gives the same numbers)."""
    rows = np.flatnonzero(ident)
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def gather_refits(
    ident: np.ndarray, chunks: list[np.ndarray], done: list[tuple], k: int, unidentified: str
) -> tuple[np.ndarray, dict[str, int]]:
    """The cell bootstrap's estimates from its chunks' refits ``done`` (x, objective, converged
    of each chunk of :func:`replicate_chunks`): x (n_boot, k), NaN in every failed replicate,
    and the failures counted by reason: ``unidentified`` (the replicate's table does not
    identify what the check estimates: not refitted), an objective not finite, no convergence."""
    n_boot = len(ident)
    x = np.full((n_boot, k), np.nan)
    obj = np.full(n_boot, np.nan)
    conv = np.zeros(n_boot, dtype=bool)
    for ch, (xc, oc, cc) in zip(chunks, done):
        x[ch], obj[ch], conv[ch] = xc, oc, cc
    finite = np.isfinite(obj)
    failure = {
        unidentified: ~ident,
        "objective not finite": ident & ~finite,
        "did not converge": ident & finite & ~conv,
    }
    failed = np.zeros(n_boot, dtype=bool)
    for mask in failure.values():
        failed |= mask
    x[failed] = np.nan
    return x, {key: int(v.sum()) for key, v in failure.items() if v.any()}


def refit_weighted_rows(
    model: GroupedModel,
    lower: np.ndarray,
    upper: np.ndarray,
    starts: tuple[np.ndarray, ...],
    y: np.ndarray,
    weights: np.ndarray,
    delta: float,
    max_iter: int = 300,
    finish_iter: int = FINISH_ITER,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Refit a grouped law to weighted tables ``weights`` (m, n): best of ``starts`` on the batched
    LM, unconverged rows finished by the active-set LM, then by the least-squares polish (run i
    entering w_i times).  Returns x (m, k), objective (m,), converged (m,)."""
    best_x, best_obj, best_conv = best_of_starts(
        model, starts, y, weights, lower, upper, delta=delta, max_iter=max_iter
    )
    rows = np.flatnonzero(~best_conv & np.isfinite(best_obj))
    if len(rows):
        lm = finish_lm(
            model,
            best_x[rows],
            y,
            weights[rows],
            lower,
            upper,
            delta=delta,
            max_iter=finish_iter,
        )
        lower_obj = np.isfinite(lm.objective) & (lm.objective <= best_obj[rows])
        best_x[rows[lower_obj]], best_obj[rows[lower_obj]] = lm.x[lower_obj], lm.objective[lower_obj]
        best_conv[rows[lm.converged & lower_obj]] = True
    for i in np.flatnonzero(~best_conv & np.isfinite(best_obj)):

        def fun(x):
            return model(x[None, :])[0][0] - y

        def jac(x):
            return model(x[None, :])[1][0].T

        sol = polish_residuals(fun, jac, best_x[i], lower, upper, delta, weights=weights[i])
        if sol is None or sol.status <= 0:
            continue
        obj = float(np.sum(weights[i] * loss_terms(fun(sol.x), delta)))
        if obj <= best_obj[i] * (1 + 1e-9):
            best_x[i], best_obj[i], best_conv[i] = sol.x, obj, True
    return best_x, best_obj, best_conv


# -- the lack-of-fit test ----------------------------------------------------------------------
def _wild_test(
    runs: RunTable,
    y: np.ndarray,
    y0: np.ndarray,
    null: Refit,
    alternative: Refit,
    delta: float,
    observed: float,
    n_wild: int,
    seed: int,
    parallel: dict[str, Any],
    stop: StopRule | None = None,
) -> WildTest:
    """The restricted wild cluster bootstrap of one phi against one phi per r, signs per
    (budget, r) cell of ``runs``."""
    codes, label = runs.cells(None)
    stats, ok = wild_cluster_statistics(
        y=y,
        null_pred=y0,
        codes=codes,
        null=null,
        alternative=alternative,
        delta=delta,
        n_boot=n_wild,
        rng=np.random.default_rng(seed),
        observed=observed,
        stop=stop,
        **parallel,
    )
    return wild_test_result(
        "one phi for every r",
        observed,
        stats,
        ok,
        block=label,
        n_blocks=int(codes.max()) + 1,
        seed=seed,
        source=SOURCE,
        n_max=n_wild,
        stop=stop,
    )


__all__ = [
    "GroupedModel",
    "MultiplierFit",
    "MultiplierSetup",
    "finish_check",
    "fit_multipliers",
    "gather_refits",
    "multiplier_wild_test",
    "replicate_chunks",
    "setup_multipliers",
    "held_coordinates",
    "r_groups",
    "refit_weighted_rows",
]
