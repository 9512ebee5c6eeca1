"""What a plan is made of: the planned design (its runs, architectures and cost) and the noise.

- :class:`PlanDesign` from the study's grid (:func:`design_from_paper`), a sweep spec
  (:func:`design_from_spec`, with the sweep's time estimate, :mod:`phifit.spec.sweep_spec`) or a
  table of planned or finished runs (:func:`design_from_table`);
- :class:`NoiseModel` (per-run and per-(budget, r)-cell log-loss noise), from a pilot table's
  Huber fit (:func:`noise_from_pilot`), and the Huber moments of that noise
  (:func:`huber_moments`) that the asymptotic plan needs.

:mod:`phifit.plan.design` puts them together.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from .. import defaults
from ..law import (
    log_loss,
)
from ..serialize import JsonIO
from ..spec.run_config import flops_per_token, make_train_config, param_counts, tokens_for_budget
from ..spec.sweep_spec import Throughput, estimate_seconds, load_spec, plan
from ..study import paper_architecture, paper_design
from .cell_shapes import CellShape, drawn_shape, fit_cell_shapes, log_size

#: z of a two-sided 95% interval and the level of the tests.
Z95 = float(norm.ppf(0.975))
ALPHA_TEST = 0.05
#: Asymptotic and simulated widths further apart than this (relative) draw a warning.
AGREE_WIDTH_RTOL = 0.25
#: ... and powers further apart than this (absolute).
AGREE_POWER_ATOL = 0.15
#: The linearisation is not trusted when 1.96 se(phi) exceeds this.
MAX_LINEAR_HALF_WIDTH = 0.5


# -- architecture families: size -> (N_once, N_rec, FLOPs per token) -------------------------


class _PaperArch:
    """The study's architectures at width s (d = 64 s), any real s > 0."""

    size_name = "width s"

    def arch(self, r: int, sizes: np.ndarray) -> dict[str, np.ndarray]:
        a = paper_architecture(np.asarray(sizes, float), int(r))
        return {k: np.asarray(a[k], float) for k in ("n_once", "n_rec", "flops_per_token")}

    def candidates(self, r: int, lo: float, hi: float) -> np.ndarray:
        return np.unique(np.round(np.geomspace(max(lo, 1.0), hi, 60)).astype(int)).astype(float)


class _SpecArch:
    """The trainer's architectures of a sweep spec at d_model = width (a multiple of head_dim)."""

    size_name = "d_model"

    def __init__(self, settings: Mapping[str, Any]):
        self.settings = dict(settings)
        self.head_dim = int(self.settings.get("head_dim", 16))
        self._cache: dict[tuple[int, int], tuple[float, float, float, int]] = {}

    def one(self, r: int, width: int) -> tuple[float, float, float, int]:
        """(n_once, n_rec, flops per token, tokens per optimiser step) of one width."""
        key = (int(r), int(width))
        if key not in self._cache:
            cfg = make_train_config(**self.settings, budget=1e12, width=int(width), r=int(r), seed=0)
            pc = param_counts(cfg.model)
            per_step = cfg.batch_size * cfg.model.seq_len * cfg.grad_accum
            self._cache[key] = (
                float(pc.n_once),
                float(pc.n_rec),
                float(flops_per_token(cfg.model)),
                per_step,
            )
        return self._cache[key]

    def arch(self, r: int, sizes: np.ndarray) -> dict[str, np.ndarray]:
        rows = np.array([self.one(r, int(round(w)))[:3] for w in np.atleast_1d(sizes)])
        return {"n_once": rows[:, 0], "n_rec": rows[:, 1], "flops_per_token": rows[:, 2]}

    def candidates(self, r: int, lo: float, hi: float) -> np.ndarray:
        h = self.head_dim
        return np.arange(max(h, h * math.floor(lo / h)), h * math.ceil(hi / h) + 1, h, dtype=float)


class _TableArch:
    """Architectures interpolated from a table (:class:`phifit.frontier.TableFamily`); size = N_unique."""

    size_name = "N_unique"

    def __init__(self, family: Any):
        self.family = family

    def arch(self, r: int, sizes: np.ndarray) -> dict[str, np.ndarray]:
        a = self.family.at(int(r), np.log(np.asarray(sizes, float)))
        return {k: a[k] for k in ("n_once", "n_rec", "flops_per_token")}

    def candidates(self, r: int, lo: float, hi: float) -> np.ndarray:
        return np.geomspace(lo, hi, 60)


# -- designs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanDesign:
    """A planned design: one row per planned run (``budget``, ``r``, ``size``, ``n_once``,
    ``n_rec``, ``tokens``, ``flops``, ``seed``), where it came from, how sizes map to
    architectures (``arch``), and the trainer's time estimate when known (``seconds``)."""

    frame: pd.DataFrame
    source: str
    kind: str  # "paper", "spec", "table"
    arch: Any = field(repr=False)
    seconds: float | None = None
    seconds_note: str = ""
    spec: Any = field(default=None, repr=False)

    @property
    def n_runs(self) -> int:
        return len(self.frame)

    @property
    def flops(self) -> float:
        """Training FLOPs of the whole design (sum over runs of F per token x D)."""
        return float(self.frame["flops"].sum())

    @property
    def n_cells(self) -> int:
        return int(self.frame.groupby(["budget", "r"]).ngroups)

    @property
    def seeds(self) -> int:
        return int(self.frame["seed"].nunique()) if "seed" in self.frame else 1

    def seed_range(self) -> tuple[int, int]:
        """(fewest, most) seeds of one planned configuration (budget, r, size): a design where
        only some configurations are repeated has a range, not one count."""
        if "seed" not in self.frame:
            return (1, 1)
        keys = [k for k in ("budget", "r", "size") if k in self.frame]
        counts = self.frame.groupby(keys)["seed"].nunique()
        return (int(counts.min()), int(counts.max())) if len(counts) else (1, 1)

    def seeds_text(self) -> str:
        """'1 seed', '3 seeds' or '1-3 seeds' (:meth:`seed_range`)."""
        lo, hi = self.seed_range()
        return f"{lo} seed{'s' * (lo != 1)}" if lo == hi else f"{lo}-{hi} seeds"

    def with_seeds(self, seeds: int) -> PlanDesign:
        """The same runs, each repeated with ``seeds`` seeds (0 .. seeds - 1)."""
        if seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {seeds}")
        base = self.frame.drop_duplicates(["budget", "r", "size"]).drop(columns="seed", errors="ignore")
        frame = pd.concat([base.assign(seed=s) for s in range(seeds)], ignore_index=True)
        scale = len(frame) / max(len(self.frame), 1)
        seconds = None if self.seconds is None else self.seconds * scale
        return PlanDesign(frame, self.source, self.kind, self.arch, seconds, self.seconds_note, self.spec)

    def summary_line(self) -> str:
        budgets = sorted(self.frame["budget"].unique())
        rs = sorted(int(r) for r in self.frame["r"].unique())
        cost = f"{self.flops:.3g} training FLOPs"
        if self.seconds is not None:
            cost += f", ~{self.seconds / 3600:.2f} h ({self.seconds_note})"
        return (
            f"{self.source}: {self.n_runs} runs, {len(budgets)} budgets "
            f"({', '.join(f'{b:.3g}' for b in budgets)}), r in {{{', '.join(map(str, rs))}}}, "
            f"{self.n_cells} (budget, r) cells, {self.seeds_text()} per run; {cost}"
        )


def design_from_paper() -> PlanDesign:
    """The study's 116-run grid (:func:`phifit.study.paper_design`)."""
    frame = paper_design()[["budget", "r", "size", "n_once", "n_rec", "tokens", "flops"]].assign(seed=0)
    return PlanDesign(frame, "paper design", "paper", _PaperArch())


def spec_speed(spec: Any, width: int) -> Any:
    """The trainer's throughput for a width: the spec's recorded speeds (interpolated in log
    width between recorded widths), else its calibrated constant; None when it has neither.

    Below the smallest recorded width the FLOP/s is scaled in proportion to the width (small
    models do not fill the cores: measured with the bundled spec, d = 16 runs at 23 GFLOP/s
    against 38 at d = 32, so this is on the slow, safe side); above the largest it is held.
    """
    if spec.recorded:
        w = np.log([x[0] for x in spec.recorded])
        f = np.log([x[1] for x in spec.recorded])
        o = np.array([x[2] for x in spec.recorded])
        lw = math.log(width)
        log_speed = float(np.interp(lw, w, f)) + min(0.0, lw - float(w[0]))
        return Throughput(float(np.exp(log_speed)), float(np.interp(lw, w, o)), "table")
    if spec.flops_per_second:
        return Throughput(float(spec.flops_per_second), 2.0, "constant")
    return None


def spec_seconds(spec: Any, runs: Sequence[Any]) -> tuple[float | None, str]:
    """Sum of :func:`phifit.spec.sweep_spec.estimate_seconds` over planned runs, with the
    spec's recorded per-width speeds (or its constant): no probing."""
    total = 0.0
    for run in runs:
        speed = spec_speed(spec, run.width)
        if speed is None:
            return None, "no [estimate] in the spec"
        total += estimate_seconds(run, speed)
    note = "the spec's recorded speeds" if spec.recorded else "the spec's calibrated constant"
    return total, f"trainer's estimate from {note}"


def design_from_spec(path: str, *, grids: list[str] | None = None, variant: str = "baseline") -> PlanDesign:
    """The runs a sweep spec plans (:func:`phifit.spec.sweep_spec.plan`), one recipe (``variant``)."""
    spec = load_spec(path)
    planned = [p for p in plan(spec, grids) if p.variant == variant]
    if not planned:
        raise ValueError(f"{path}: the spec plans no runs of variant {variant!r}")
    rows = []
    for p in planned:
        cfg = p.config
        pc = param_counts(cfg.model)
        f = flops_per_token(cfg.model)
        _, tokens = tokens_for_budget(
            cfg.model, p.budget, cfg.batch_size * cfg.model.seq_len * cfg.grad_accum
        )
        rows.append(
            {
                "budget": p.budget,
                "r": p.r,
                "size": p.width,
                "n_once": pc.n_once,
                "n_rec": pc.n_rec,
                "tokens": tokens,
                "flops": f * tokens,
                "seed": p.seed,
                "run_id": p.run_id,
            }
        )
    seconds, note = spec_seconds(spec, planned)
    # the spec as the user named it (a bundled name or their path), not where it was resolved to
    return PlanDesign(pd.DataFrame(rows), str(path), "spec", _SpecArch(spec.settings), seconds, note, spec)


def resolve_design(design: str | None, pilot: Any = None) -> PlanDesign:
    """The planned design named as ``phifit plan --design`` takes it: None (the pilot's own
    runs, else the study's), "paper", a sweep spec (a .toml path or a bundled name such as
    cpu_small) or a CSV of planned runs."""
    if design is None:
        return design_from_table(pilot) if pilot is not None else design_from_paper()
    if design == "paper":
        return design_from_paper()
    if design.endswith(".toml") or not design.endswith(".csv"):
        return design_from_spec(design)
    from ..runs.table import load_design

    return design_from_table(load_design(design))


def design_from_table(runs: Any, source: str | None = None) -> PlanDesign:
    """The design of a run table or a CSV of planned runs (its ``loss`` is ignored).

    Needs a numeric ``budget`` column (the isoFLOP curves); FLOPs are the table's ``flops``
    or 6 (N_once + r N_rec) D, and a ``train_flops_per_token`` column is carried for the
    isoFLOP check (:mod:`phifit.plan.conditioning`); size is N_unique = N_once + N_rec (or the ``size`` column
    when present, for display only)."""
    from ..frontier import TableFamily

    frame = runs.frame
    if "budget" not in frame or not pd.api.types.is_numeric_dtype(frame["budget"]):
        raise ValueError(f"{runs.source}: planning needs a numeric 'budget' column (the FLOP budget C)")
    out = pd.DataFrame(
        {
            "budget": frame["budget"].to_numpy(float),
            "r": runs.r.astype(int),
            "size": runs.n_once + runs.n_rec,
            "n_once": runs.n_once,
            "n_rec": runs.n_rec,
            "tokens": runs.tokens,
            "flops": runs.compute,
            "seed": frame["seed"].to_numpy() if "seed" in frame else 0,
        }
    )
    if "run_id" in frame:
        out["run_id"] = frame["run_id"].astype(str).to_numpy()
    if "train_flops_per_token" in frame:  # read by the isoFLOP check (phifit.plan.conditioning)
        fpt = pd.to_numeric(frame["train_flops_per_token"], errors="coerce").to_numpy(float)
        if np.all(np.isfinite(fpt) & (fpt > 0)):
            out["train_flops_per_token"] = fpt
    return PlanDesign(out, source or runs.source, "table", _TableArch(TableFamily.from_runs(runs)))


# -- noise --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseModel(JsonIO):
    """Log-loss noise: ``per_run`` sd of the part independent per run, ``cell`` sd of the part
    shared by the runs of a (budget, r) cell; ``source`` and ``note`` say where they came from."""

    per_run: float
    cell: float = 0.0
    source: str = "given"
    note: str = ""

    def __post_init__(self) -> None:
        if not (self.per_run >= 0 and self.cell >= 0) or self.per_run + self.cell == 0:
            raise ValueError(f"noise sds must be >= 0 and not both 0, got {self.per_run} and {self.cell}")

    def to_dict(self) -> dict[str, Any]:
        return {"per_run": self.per_run, "cell": self.cell, "source": self.source, "note": self.note}


def noise_from_pilot(runs: Any, fit: Any, *, cell_noise: float | None = None) -> NoiseModel:
    """Noise of a pilot's own fit.

    The residual sd s = sqrt(SSR / (n - k)) of log-loss around the Huber fit.  When some
    configuration (budget, r, size) was trained with several seeds, the pooled variance
    between its seeds estimates the per-run part sigma^2 and the rest, tau^2 = max(0, s^2 -
    sigma^2), is taken as shared within (budget, r) cells (it also holds any misfit of the
    law).  With one seed per run the two cannot be separated: all of s is per-run noise,
    unless ``cell_noise`` is given (then sigma^2 = max(0, s^2 - cell_noise^2)).
    """
    res = np.log(runs.loss) - log_loss(fit.theta, runs.design)
    k = int(np.sum(fit.spec.free_mask)) if hasattr(fit, "spec") else 6
    s2 = float(np.sum(res**2) / max(len(res) - k, 1))
    frame = runs.frame
    keys = [c for c in ("budget", "r", "size") if c in frame]
    if len(keys) == 3 and "seed" in frame and frame["seed"].nunique() > 1:
        logl = pd.Series(np.log(runs.loss), index=frame.index)
        groups = logl.groupby([frame[c] for c in keys])
        dev = logl - groups.transform("mean")
        dof = int((groups.size() - 1).sum())
        if dof > 0:
            sigma2 = float(np.sum(dev.to_numpy() ** 2) / dof)
            tau2 = max(0.0, s2 - sigma2)
            return NoiseModel(
                math.sqrt(sigma2),
                math.sqrt(tau2),
                "pilot",
                f"residual sd {math.sqrt(s2):.4g} of the pilot's fit, split by its repeated seeds "
                f"({dof} degrees of freedom) into per-run {math.sqrt(sigma2):.4g} "
                f"and cell {math.sqrt(tau2):.4g}",
            )
    if cell_noise:
        sigma2 = max(0.0, s2 - cell_noise**2)
        note = (
            f"residual sd {math.sqrt(s2):.4g} of the pilot's fit; one seed per run, so the cell-shared part "
            f"is the given {cell_noise:.4g} and the per-run part the rest"
        )
        return NoiseModel(math.sqrt(sigma2), float(cell_noise), "pilot + --cell-noise", note)
    note = (
        f"residual sd {math.sqrt(s2):.4g} of log-loss around the pilot's Huber fit; the pilot has one seed "
        "per run, so a part shared within (budget, r) cells cannot be separated: planned as per-run "
        "noise (--cell-noise adds one)"
    )
    hint = cell_share_hint(res, frame)
    if hint is not None:
        note += (
            f"; the residuals' cell means suggest a shared part of ~{hint:.2g} (random-effects ANOVA over "
            f"the cells: imprecise, and it includes misfit of the law; try --cell-noise {hint:.2g})"
        )
    return NoiseModel(math.sqrt(s2), 0.0, "pilot", note)


@dataclass(frozen=True)
class Misfit(JsonIO):
    """The pilot's misfit of the law, carried into the plan.

    ``offsets`` {(budget, r): mean residual of log-loss in that cell of the pilot}: added to
    every simulated run of the cell as a fixed offset, so each table is the law plus the
    systematic departures the pilot showed (e.g. r = 2 runs above the law), not the law
    alone.  ``within_sd``: the pooled within-cell residual sd sqrt(sum (e - mean_cell)^2 /
    (n - cells)), the per-run noise that remains once the cell means are fixed.

    ``tau``: the sd of the cell offsets as random effects, by one-way random-effects ANOVA
    (method of moments): tau^2 = max(0, var(cell means) - within_sd^2 mean(1 / n_c)).  A cell
    of a planned design that the pilot did not see gets no copied offset: each simulated table
    draws its offset from N(0, tau^2) (the pilot's cell-offset distribution), and the
    asymptotic plan treats every cell's departure as such a random effect (a cluster term of
    variance tau^2).  ``cell_noise``: a further random part per cell asked for by the user
    (``--cell-noise``), drawn afresh in every table, on top of the offsets.
    """

    offsets: dict[tuple[float, int], float]
    within_sd: float
    source: str
    tau: float = 0.0
    cell_noise: float = 0.0
    #: with ``shape``: each pilot cell's curve in model size (:mod:`phifit.plan.cell_shapes`), the
    #: noise the curves leave, their slopes' and curvatures' random-effects sds, and the share of
    #: the within-cell sum of squares they take; empty: a level per cell (the offsets)
    shapes: dict[tuple[float, int], CellShape] = field(default_factory=dict)
    shape_sd: float = 0.0
    tau_b: float = 0.0
    tau_c: float = 0.0
    shape_share: float = 0.0
    mean_b: float = 0.0
    mean_c: float = 0.0
    #: why this model (curves or levels) was carried, when it was chosen for the design
    #: (:func:`design_misfit`); "" when it was asked for
    choice: str = ""

    @property
    def per_run_sd(self) -> float:
        """The per-run noise a simulated table adds on top of these offsets: what the cell curves
        leave when they are carried, else the within-cell sd."""
        return self.shape_sd if self.shapes else self.within_sd

    def offset_for(self, budget: float, r: int) -> float:
        return self.offsets.get((float(budget), int(r)), 0.0)

    def seen(self, budget: float, r: int) -> bool:
        return (float(budget), int(r)) in self.offsets

    def missing(self, frame: pd.DataFrame) -> int:
        cells = {(float(b), int(r)) for b, r in zip(frame["budget"], frame["r"])}
        return len(cells - set(self.offsets))

    def table_offsets(self, frame: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
        """One simulated table's offsets, one per row of ``frame``: the pilot's cell mean where
        the pilot saw the (budget, r) cell, else a draw from N(0, tau^2) shared by the cell's rows."""
        keys = list(zip(frame["budget"].astype(float), frame["r"].astype(int)))
        unseen = sorted({k for k in keys if k not in self.offsets})
        drawn = dict(zip(unseen, self.tau * rng.standard_normal(len(unseen))))
        if not self.shapes:
            return np.array([self.offsets[k] if k in self.offsets else drawn[k] for k in keys])
        # with shapes: a seen cell's curve at each planned run's size; an unseen cell's drawn level,
        # slope and curvature (phifit.plan.cell_shapes), both per row
        x, out = log_size(frame), np.empty(len(keys))
        rows: dict[tuple[float, int], list[int]] = {}
        for i, k in enumerate(keys):
            rows.setdefault(k, []).append(i)
        for k in sorted(rows):
            idx = np.array(rows[k])
            if k in self.shapes:
                out[idx] = self.shapes[k].at(x[idx])
            elif k in self.offsets:
                out[idx] = self.offsets[k]
            else:
                out[idx] = drawn_shape(
                    x[idx], drawn[k], self.tau_b, self.tau_c, rng, mean_b=self.mean_b, mean_c=self.mean_c
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "offsets": [{"budget": b, "r": r, "offset": v} for (b, r), v in sorted(self.offsets.items())],
            "within_sd": self.within_sd,
            "source": self.source,
            "tau": self.tau,
            "cell_noise": self.cell_noise,
        }
        if self.shapes:  # a level-only misfit's file is unchanged
            out["shapes"] = [
                {"budget": b, "r": r, **shape.to_dict()} for (b, r), shape in sorted(self.shapes.items())
            ]
            out.update(
                shape_sd=self.shape_sd,
                tau_b=self.tau_b,
                tau_c=self.tau_c,
                shape_share=self.shape_share,
                mean_b=self.mean_b,
                mean_c=self.mean_c,
            )
        if self.choice:
            out["choice"] = self.choice
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Misfit:
        """Rebuild from :meth:`to_dict` output (its offsets are a list of {budget, r, offset})."""
        return cls(
            offsets={(float(o["budget"]), int(o["r"])): float(o["offset"]) for o in data["offsets"]},
            within_sd=float(data["within_sd"]),
            source=str(data["source"]),
            tau=float(data.get("tau", 0.0)),
            cell_noise=float(data.get("cell_noise", 0.0)),
            shapes={
                (float(o["budget"]), int(o["r"])): CellShape.from_dict(o) for o in data.get("shapes") or []
            },
            shape_sd=float(data.get("shape_sd", 0.0)),
            tau_b=float(data.get("tau_b", 0.0)),
            tau_c=float(data.get("tau_c", 0.0)),
            shape_share=float(data.get("shape_share", 0.0)),
            mean_b=float(data.get("mean_b", 0.0)),
            mean_c=float(data.get("mean_c", 0.0)),
            choice=str(data.get("choice", "")),
        )


def misfit_from_pilot(runs: Any, fit: Any, shape: bool = False) -> Misfit:
    """The pilot's (budget, r) cell-mean residuals of log-loss around its fit, their
    within-cell sd and their random-effects sd tau (:class:`Misfit`); with ``shape``, also each
    cell's curve in model size (:func:`phifit.plan.cell_shapes.fit_cell_shapes`)."""
    frame = runs.frame
    if "budget" not in frame or "r" not in frame:
        raise ValueError(
            f"{runs.source}: the misfit is read per (budget, r) cell; the pilot has no 'budget' column"
        )
    res = np.log(runs.loss) - log_loss(fit.theta, runs.design)
    df = pd.DataFrame(
        {"res": res, "budget": frame["budget"].astype(float).to_numpy(), "r": frame["r"].to_numpy()}
    )
    groups = df.groupby(["budget", "r"])["res"]
    means = groups.mean()
    n, n_cells = len(df), len(means)
    dof = max(n - n_cells, 1)
    within2 = float(((df["res"] - groups.transform("mean")) ** 2).sum()) / dof
    tau2 = float(means.var()) - within2 * float(np.mean(1.0 / groups.size())) if n_cells > 1 else 0.0
    offsets = {(float(b), int(r)): float(v) for (b, r), v in means.items()}
    carried = Misfit(
        offsets,
        math.sqrt(within2),
        f"the cell-mean residuals of {runs.source} (sd {float(means.std()):.3g})",
        tau=math.sqrt(max(tau2, 0.0)),
    )
    if not shape:
        return carried
    sf = fit_cell_shapes(frame, res)
    return dataclasses.replace(
        carried,
        source=f"the cell curves of {runs.source}'s residuals in model size ({100 * sf.share:.0f}% of "
        f"their within-cell sum of squares)",
        shapes=sf.shapes,
        shape_sd=sf.noise_sd,
        tau_b=sf.tau_b,
        tau_c=sf.tau_c,
        shape_share=sf.share,
        mean_b=sf.mean_b,
        mean_c=sf.mean_c,
    )


def misfit_noise(misfit: Misfit, cell_noise: float | None = None) -> NoiseModel:
    """The noise of a plan that carries the pilot's misfit: per run, the pilot's within-cell
    residual sd; per (budget, r) cell, the offsets' random-effects sd tau (with ``cell_noise``
    added in quadrature when given), which is what the asymptotic plan's cluster term sees.
    The simulation copies the pilot's offsets where it has them instead (:class:`Misfit`).

    A pilot whose (budget, r) cells each hold one run has no within-cell residual (each cell
    mean is its run): its misfit cannot be told from its noise.  That is a ``ValueError``
    saying so, unless ``cell_noise`` supplies the noise."""
    if not misfit.within_sd > 0 and not cell_noise:
        raise ValueError(
            "the pilot leaves no within-cell noise: every (budget, r) cell "
            "has a single run (or its runs agree exactly), so its misfit cannot be told from its "
            "noise; plan with --no-misfit (the noise of the pilot's residuals), or give --cell-noise SD"
        )
    cell = math.hypot(misfit.tau, cell_noise or 0.0)
    return NoiseModel(
        misfit.within_sd,
        cell,
        "pilot, misfit carried",
        f"the pilot's residual sd within its (budget, r) cells, {misfit.within_sd:.4g}, per run; "
        f"its cell means (sd {np.std(list(misfit.offsets.values())):.3g}) are the law's misfit: "
        f"copied as fixed offsets into every simulated table where the pilot saw the cell, drawn "
        f"from N(0, {misfit.tau:.3g}^2) (their random-effects sd) where it did not, and a cluster "
        f"term of sd {misfit.tau:.3g} in the asymptotic plan"
        + (f"; plus {cell_noise:g} random per cell (--cell-noise)" if cell_noise else "")
        + "; --no-misfit plans the noise alone",
    )


def pilot_noise(
    runs: Any, fit: Any, *, cell_noise: float | None = None, misfit: bool = True, shape: bool = False
) -> tuple[NoiseModel, Misfit | None]:
    """The noise a pilot implies, and its misfit: by default the misfit is carried
    (:func:`misfit_from_pilot`, :func:`misfit_noise`); a pilot without a 'budget' column, or
    one with a single run per (budget, r) cell, cannot separate misfit from noise and falls back
    to the noise of its residuals (:func:`noise_from_pilot`), which says why in its note.
    ``misfit=False`` (``--no-misfit``): the noise of the residuals, no misfit."""
    if not misfit:
        return noise_from_pilot(runs, fit, cell_noise=cell_noise), None
    try:
        carried = misfit_from_pilot(runs, fit, shape=shape)
        noise = misfit_noise(carried, cell_noise)
    except ValueError as err:
        noise = noise_from_pilot(runs, fit, cell_noise=cell_noise)
        return dataclasses.replace(noise, note=f"{noise.note}; misfit not carried: {err}"), None
    return noise, dataclasses.replace(carried, cell_noise=float(cell_noise or 0.0))


#: How a pilot's misfit is carried into a plan (``phifit plan --misfit-model``): ``level`` a level per
#: (budget, r) cell, ``shape`` each cell's curve in model size, ``auto`` (the default) the curves
#: where they cover every planned run (:func:`uncovered_runs`), else the level.
MISFIT_MODELS = defaults.PLAN_MISFIT_MODELS


def uncovered_runs(misfit: Misfit, frame: pd.DataFrame) -> int:
    """How many planned runs of ``frame`` the pilot's cell curves do not cover: a run is covered when
    the pilot fitted a curve in its (budget, r) cell and its size ln(N_once + N_rec) lies within the
    sizes that cell's runs spanned (1e-6 of slack), so that its offset is read off the curve rather
    than extrapolated (a clipped parabola) or drawn (an unseen cell)."""
    x = log_size(frame)
    keys = zip(frame["budget"].astype(float), frame["r"].astype(int))
    out = 0
    for xi, key in zip(x, keys):
        shape = misfit.shapes.get(key)
        if shape is None or not (shape.lo - 1e-6 <= xi - shape.center <= shape.hi + 1e-6):
            out += 1
    return out


def design_misfit(
    runs: Any,
    fit: Any,
    frame: pd.DataFrame,
    *,
    model: str = defaults.PLAN_MISFIT_MODEL,
    cell_noise: float | None = None,
) -> tuple[NoiseModel, Misfit | None]:
    """The noise and misfit a pilot carries into the plan of the design ``frame``
    (:data:`MISFIT_MODELS`): ``level`` and ``shape`` as :func:`pilot_noise` gives them; ``auto``
    the cell curves when they cover every planned run (:func:`uncovered_runs`) and leave a per-run
    noise, else a level per cell.  On the study's real sub-designs (benchmarks/plan_real_calibration.py)
    the curves remove the narrow misses of designs the pilot has run (ratios 0.95-1.14 against
    0.71-1.19), while a planned run off the pilot's curves gets a clipped or drawn curve, where the
    level, which holds the bends as per-run noise, read the realised width as well or better.  The
    misfit's ``choice`` says which was carried and why."""
    if model not in MISFIT_MODELS:
        raise ValueError(f"misfit model must be one of {', '.join(MISFIT_MODELS)}, got {model!r}")
    if model != "auto":
        return pilot_noise(runs, fit, cell_noise=cell_noise, shape=model == "shape")
    noise, shaped = pilot_noise(runs, fit, cell_noise=cell_noise, shape=True)
    if shaped is None:  # no misfit can be carried; the noise says why
        return noise, None
    left = uncovered_runs(shaped, frame)
    if left == 0 and shaped.shape_sd > 0:
        why = "curves, because the pilot's cell curves cover every planned run (--misfit-model auto)"
        return noise, dataclasses.replace(shaped, choice=why)
    noise, level = pilot_noise(runs, fit, cell_noise=cell_noise)
    assert level is not None
    why = (
        f"a level per cell, because {left} of {len(frame)} planned runs lie outside the pilot's cells or "
        "the sizes their curves span (--misfit-model auto)"
        if left
        else "a level per cell, because the pilot's curves leave no per-run noise (--misfit-model auto)"
    )
    return noise, dataclasses.replace(level, choice=why)


def cell_share_hint(res: np.ndarray, frame: pd.DataFrame) -> float | None:
    """Method-of-moments (one-way random effects ANOVA) sd of a cell-shared part of residuals:
    tau^2 = var(cell means) - sigma_w^2 / n_bar, sigma_w^2 the pooled within-cell variance;
    None without budget or when the estimate is not positive."""
    if "budget" not in frame or "r" not in frame:
        return None
    df = pd.DataFrame({"res": res, "budget": frame["budget"].to_numpy(), "r": frame["r"].to_numpy()})
    g = df.groupby(["budget", "r"])["res"]
    n, n_cells = len(df), g.ngroups
    if n_cells < 3 or n <= n_cells:
        return None
    within = float(((df["res"] - g.transform("mean")) ** 2).sum() / (n - n_cells))
    tau2 = float(g.mean().var()) - within / (n / n_cells)
    return math.sqrt(tau2) if tau2 > 0 else None


def huber_moments(sigma: float, tau: float, delta: float) -> tuple[float, float, float]:
    """(m, E psi(e)^2, c) for e = u + eps, u ~ N(0, tau^2), eps ~ N(0, sigma^2) (module docstring)."""
    s = math.hypot(sigma, tau)
    if not math.isfinite(delta):
        return 1.0, s * s, tau * tau
    a = delta / s
    m = 2 * norm.cdf(a) - 1
    e_psi2 = s * s * (m - 2 * a * norm.pdf(a)) + 2 * delta * delta * norm.sf(a)
    if tau == 0:
        return m, e_psi2, 0.0
    if sigma == 0:
        return m, e_psi2, e_psi2
    nodes, weights = np.polynomial.hermite_e.hermegauss(201)
    u = tau * nodes
    lo, hi = (-delta - u) / sigma, (delta - u) / sigma
    # E clip(X, -delta, delta) for X ~ N(u, sigma^2)
    g = (
        -delta * norm.cdf(lo)
        + delta * norm.sf(hi)
        + u * (norm.cdf(hi) - norm.cdf(lo))
        - sigma * (norm.pdf(hi) - norm.pdf(lo))
    )
    c = float(np.sum(weights * g * g) / np.sum(weights))
    return m, e_psi2, c
