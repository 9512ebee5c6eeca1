"""Sweep specs: a TOML file -> the planned runs of a grid (budgets x widths x r x variant x seed), and
their run-time estimate. No torch: ``phifit plan`` reads specs with it, the trainer runs them.

Spec layout (see the bundled ``cpu_small`` spec, ``trainers/sweeps/cpu_small.toml``, for a documented
example)::

    [sweep]      name, seeds = [0]
    [settings]   any ``make_train_config`` key shared by every run (depth, prelude, coda, head_dim, seq_len,
                 batch_size, lr, corpus, tokenizer, val_tokens, threads, device, ...)
    [estimate]   flops_per_second = ...   # calibrated constant for ``--estimate constant``
    [estimate.recorded]  source, device, widths, flops_per_second, overhead_s   # per-width speeds of
                 recorded runs (see ``recorded_throughput``), used by the dry run for widths not in --out
    [[budgets]]  flops = 1e13, widths = [64, 96, 128]          # one isoFLOP curve and its widths
    [[grids]]    name, r = [1, 2, 4, 8], variants = ["baseline"], budgets = [...] (default: all),
                 optional = false

Every planned run has a deterministic ``run_id`` (:func:`phifit.spec.run_config.make_run_id`), which is what
makes a sweep resumable. Run time (``estimate_seconds``): training FLOPs F x D over a throughput
(``Throughput``: recorded runs of the same shape, a probe timed by the trainer, or the spec's constant), plus
evaluations and overhead.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .run_config import (
    TrainConfig,
    flops_per_token,
    format_budget,
    make_run_id,
    make_train_config,
    tokens_for_budget,
)

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

FIXED_PER_GRID = ("r", "variant", "width", "budget", "seed")  # set by the grid, not by [settings]


@dataclass(frozen=True)
class Grid:
    name: str
    r: tuple[int, ...]
    variants: tuple[str, ...]
    budgets: tuple[float, ...] | None  # None = every budget of the spec
    optional: bool = False


@dataclass(frozen=True)
class LrSweep:
    """A spec's ``[lr_sweep]``: base rates to try at one width and budget for a few r (the study's App. D
    procedure: r = 1 and r = 4 at one size), per optimiser."""

    width: int
    budget: float
    r: tuple[int, ...]
    rates: tuple[tuple[str, tuple[float, ...]], ...]  # (optimizer, base matrix rates)


@dataclass(frozen=True)
class SweepSpec:
    path: str
    name: str
    seeds: tuple[int, ...]
    settings: dict[str, Any]
    budgets: tuple[tuple[float, tuple[int, ...]], ...]  # (flops, widths)
    grids: tuple[Grid, ...]
    flops_per_second: float | None = None
    recorded: tuple[tuple[int, float, float], ...] = ()  # (width, FLOP/s, overhead s) of recorded runs
    recorded_source: str = ""
    recorded_device: str = "cpu"
    lr_sweep: LrSweep | None = None


@dataclass
class PlannedRun:
    grid: str
    budget: float
    width: int
    r: int
    variant: str
    seed: int
    config: TrainConfig
    run_id: str
    extra: dict[str, Any] = field(default_factory=dict)


# ---- the spec ----------------------------------------------------------------------------------------------
def bundled_specs_dir() -> Path | None:
    """The folder of the bundled specs: ``sweeps/`` of the installed trainer sources (package data of
    ``phifit.trainers``). Located through the import system's spec, so the trainer package is never
    imported; None when the trainer sources are not installed."""
    found = importlib.util.find_spec("phifit.trainers")
    locations = list(found.submodule_search_locations or []) if found else []
    return Path(locations[0]) / "sweeps" if locations else None


def resolve_spec_path(spec: str) -> Path:
    """A spec path, or a bundled spec's name (``cpu_small``: ``bundled_specs_dir() / "cpu_small.toml"``)."""
    p = Path(spec).expanduser()
    if p.exists():
        return p
    folder = bundled_specs_dir()
    bundled = folder / f"{Path(spec).stem}.toml" if folder else None
    if bundled is not None and bundled.is_file():
        return bundled
    raise ValueError(f"{spec}: no such sweep spec (a TOML file, or a bundled spec name such as 'cpu_small')")


def _need(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise ValueError(f"{where}: expected {what}")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _read_toml(path: Path) -> dict[str, Any]:
    """The spec file parsed as TOML; ``ValueError`` naming the file when it is not valid TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid TOML ({err})") from None


def _check_tables(raw: dict[str, Any], where: str) -> None:
    """Refuse any top-level table but [sweep], [settings], [estimate], [[budgets]], [[grids]], [lr_sweep]."""
    unknown = set(raw) - {"sweep", "settings", "estimate", "budgets", "grids", "lr_sweep"}
    _need(
        not unknown,
        f"{where}: [{', '.join(sorted(unknown))}]",
        "only the tables [sweep], [settings], [estimate], [[budgets]], [[grids]], [lr_sweep]",
    )


def _sweep_seeds(sweep: dict[str, Any], where: str) -> list[int]:
    """``[sweep]``'s seeds (default ``[0]``), after checking its keys and that the seeds are integers."""
    _need(
        set(sweep) <= {"name", "seeds", "description"}, f"{where}: [sweep]", "keys name, seeds, description"
    )
    seeds = sweep.get("seeds", [0])
    _need(
        isinstance(seeds, list) and seeds and all(isinstance(s, int) for s in seeds),
        f"{where}: sweep.seeds",
        "a non-empty list of integers",
    )
    return seeds


def _shared_settings(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """``[settings]`` as a dict, checked to hold no per-run key (:data:`FIXED_PER_GRID`) and no steps."""
    settings = dict(raw.get("settings", {}))
    fixed = set(settings) & set(FIXED_PER_GRID)
    _need(
        not fixed,
        f"{where}: settings.{', '.join(sorted(fixed))}",
        "no per-run keys in [settings] (r, variant, width, budget and seed come from [[budgets]] "
        "and [[grids]])",
    )
    _need(
        "steps" not in settings, f"{where}: settings.steps", "no steps: sweep runs are sized by their budget"
    )
    return settings


def _recorded_speeds(rec: Any, where: str) -> tuple[tuple[int, float, float], ...]:
    """``[estimate.recorded]`` as (width, FLOP/s, overhead s) triples, checked for equal-length lists of
    positive widths and FLOP/s and overheads >= 0."""
    _need(
        isinstance(rec, dict)
        and set(rec) <= {"source", "device", "widths", "flops_per_second", "overhead_s"}
        and all(isinstance(rec.get(k), list) for k in ("widths", "flops_per_second", "overhead_s"))
        and len({len(rec[k]) for k in ("widths", "flops_per_second", "overhead_s")}) == 1
        if rec
        else True,
        f"{where}: [estimate.recorded]",
        "keys source, device and three lists of equal length: widths, flops_per_second, overhead_s",
    )
    recorded = tuple(
        (int(w), float(f), float(o))
        for w, f, o in zip(rec.get("widths", []), rec.get("flops_per_second", []), rec.get("overhead_s", []))
    )
    _need(
        all(w > 0 and f > 0 and o >= 0 for w, f, o in recorded),
        f"{where}: [estimate.recorded]",
        "positive widths and FLOP/s, overheads >= 0",
    )
    return recorded


def _budgets(raw_budgets: list[Any], where: str) -> list[tuple[float, tuple[int, ...]]]:
    """``[[budgets]]`` as (FLOPs, widths) pairs: positive FLOPs, non-empty lists of positive widths, at
    least one budget."""
    budgets = []
    for i, b in enumerate(raw_budgets):
        w = f"{where}: budgets[{i}]"
        _need(set(b) <= {"flops", "widths"}, w, "keys flops, widths")
        _need(_number(b.get("flops")) and b["flops"] > 0, f"{w}.flops", "a positive number of FLOPs")
        widths = b.get("widths")
        _need(
            isinstance(widths, list) and widths and all(isinstance(x, int) and x > 0 for x in widths),
            f"{w}.widths",
            "a non-empty list of positive integers (d_model)",
        )
        budgets.append((float(b["flops"]), tuple(widths)))
    _need(bool(budgets), f"{where}: [[budgets]]", "at least one budget")
    return budgets


def _grid(g: dict[str, Any], w: str, known: set[float]) -> Grid:
    """One ``[[grids]]`` entry (``w`` names it in errors) as a :class:`Grid`; its budgets must be among
    ``known``, the spec's budgets."""
    _need(
        set(g) <= {"name", "r", "variants", "budgets", "optional"},
        w,
        "keys name, r, variants, budgets, optional",
    )
    _need(isinstance(g.get("name"), str) and g["name"], f"{w}.name", "a name")
    _need(
        isinstance(g.get("r"), list) and g["r"] and all(isinstance(x, int) and x >= 1 for x in g["r"]),
        f"{w}.r",
        "a non-empty list of integers >= 1",
    )
    variants = g.get("variants", ["baseline"])
    _need(
        isinstance(variants, list) and variants and all(isinstance(v, str) for v in variants),
        f"{w}.variants",
        "a non-empty list of variant names",
    )
    gb = g.get("budgets")
    if gb is not None:
        _need(
            isinstance(gb, list) and all(_number(x) and float(x) in known for x in gb),
            f"{w}.budgets",
            f"a list of budgets from [[budgets]] ({', '.join(format_budget(f) for f in sorted(known))})",
        )
    return Grid(
        name=g["name"],
        r=tuple(g["r"]),
        variants=tuple(variants),
        budgets=None if gb is None else tuple(float(x) for x in gb),
        optional=bool(g.get("optional", False)),
    )


def _grids(raw_grids: list[Any], known: set[float], where: str) -> list[Grid]:
    """``[[grids]]`` as :class:`Grid` objects with distinct names; without any, one grid "main" with
    r in (1, 2, 4, 8), the baseline variant and every budget."""
    grids = [_grid(g, f"{where}: grids[{i}]", known) for i, g in enumerate(raw_grids)]
    if not grids:
        grids = [Grid(name="main", r=(1, 2, 4, 8), variants=("baseline",), budgets=None)]
    names = [g.name for g in grids]
    _need(len(set(names)) == len(names), f"{where}: grids", "distinct grid names")
    return grids


def _check_plannable(spec: SweepSpec, where: str) -> None:
    """Build every run's configuration (every grid's, and the lr sweep's) so that a bad setting fails at
    load time, its ``ValueError`` prefixed with the file."""
    try:
        plan(spec, [g.name for g in spec.grids])  # builds every configuration: fails early on a bad setting
        if spec.lr_sweep is not None:
            plan_lr_sweep(spec)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def load_spec(spec: str) -> SweepSpec:
    """Parse and validate a sweep spec; ``ValueError`` names the file and the offending field."""
    path = resolve_spec_path(spec)
    raw = _read_toml(path)
    where = str(path)
    _check_tables(raw, where)
    sweep = raw.get("sweep", {})
    seeds = _sweep_seeds(sweep, where)
    settings = _shared_settings(raw, where)
    estimate = raw.get("estimate", {})
    _need(
        set(estimate) <= {"flops_per_second", "note", "recorded"},
        f"{where}: [estimate]",
        "keys flops_per_second, note, recorded",
    )
    rec = estimate.get("recorded", {})
    recorded = _recorded_speeds(rec, where)
    fps = estimate.get("flops_per_second")
    _need(
        fps is None or (_number(fps) and fps > 0), f"{where}: estimate.flops_per_second", "a positive number"
    )
    budgets = _budgets(raw.get("budgets", []), where)
    grids = _grids(raw.get("grids", []), {f for f, _ in budgets}, where)
    lr_sweep = _lr_sweep(raw.get("lr_sweep"), where)
    result = SweepSpec(
        path=where,
        name=str(sweep.get("name", path.stem)),
        seeds=tuple(seeds),
        settings=settings,
        budgets=tuple(budgets),
        grids=tuple(grids),
        flops_per_second=fps,
        recorded=recorded,
        recorded_source=str(rec.get("source", "")),
        recorded_device=str(rec.get("device", "cpu")),
        lr_sweep=lr_sweep,
    )
    _check_plannable(result, where)
    return result


def _lr_sweep(raw: Any, where: str) -> LrSweep | None:
    """Parse ``[lr_sweep]``: width, budget, r (a list) and ``[lr_sweep.lr]`` {optimizer: [base rates]}."""
    if raw is None:
        return None
    w = f"{where}: [lr_sweep]"
    _need(
        isinstance(raw, dict) and set(raw) <= {"width", "budget", "r", "lr"}, w, "keys width, budget, r, lr"
    )
    _need(
        isinstance(raw.get("width"), int) and raw["width"] > 0, f"{w}.width", "a positive integer (d_model)"
    )
    _need(_number(raw.get("budget")) and raw["budget"] > 0, f"{w}.budget", "a positive number of FLOPs")
    rs = raw.get("r", [1, 4])
    _need(
        isinstance(rs, list) and rs and all(isinstance(x, int) and x >= 1 for x in rs),
        f"{w}.r",
        "a non-empty list of integers >= 1",
    )
    rates = raw.get("lr")
    _need(
        isinstance(rates, dict)
        and rates
        and set(rates) <= {"adamw", "muon"}
        and all(
            isinstance(v, list) and len(v) >= 2 and all(_number(x) and x > 0 for x in v)
            for v in rates.values()
        ),
        f"{w}.lr",
        "a table {adamw = [...], muon = [...]} of at least two positive base rates per optimiser",
    )
    return LrSweep(
        width=raw["width"],
        budget=float(raw["budget"]),
        r=tuple(rs),
        rates=tuple((opt, tuple(float(x) for x in v)) for opt, v in rates.items()),
    )


def plan_lr_sweep(spec: SweepSpec, world_size: int = 1) -> list[PlannedRun]:
    """The runs of the spec's ``[lr_sweep]``: for each optimiser and base rate, each r at the sweep's width
    and budget, with the spec's settings otherwise (variant baseline, the spec's first seed)."""
    sw = spec.lr_sweep
    if sw is None:
        raise ValueError(f"{spec.path}: no [lr_sweep] table; add one (width, budget, r, [lr_sweep.lr])")
    runs = []
    for optimizer, rates in sw.rates:
        for lr in rates:
            for r in sw.r:
                settings = {**spec.settings, "optimizer": optimizer, "lr": lr}
                cfg = make_train_config(
                    **settings, budget=sw.budget, width=sw.width, r=r, variant="baseline", seed=spec.seeds[0]
                )
                run_id = make_run_id(cfg.identity(world_size))
                runs.append(
                    PlannedRun("lr-sweep", sw.budget, sw.width, r, "baseline", spec.seeds[0], cfg, run_id)
                )
    return runs


def plan(spec: SweepSpec, grids: list[str] | None = None, world_size: int = 1) -> list[PlannedRun]:
    """Expand the selected grids (default: every non-optional grid) into runs; duplicates appear once."""
    names = [g.name for g in spec.grids]
    if grids:
        bad = [g for g in grids if g not in names]
        if bad:
            raise ValueError(f"unknown grid(s) {', '.join(bad)}; the spec has {', '.join(names)}")
    chosen = [g for g in spec.grids if (g.name in grids if grids else not g.optional)]
    runs: list[PlannedRun] = []
    seen: set[str] = set()
    for g in chosen:
        for flops, widths in spec.budgets:
            if g.budgets is not None and flops not in g.budgets:
                continue
            for width in widths:
                for r in g.r:
                    for variant in g.variants:
                        for seed in spec.seeds:
                            cfg = make_train_config(
                                **spec.settings, budget=flops, width=width, r=r, variant=variant, seed=seed
                            )
                            run_id = make_run_id(cfg.identity(world_size))
                            if run_id not in seen:
                                seen.add(run_id)
                                runs.append(PlannedRun(g.name, flops, width, r, variant, seed, cfg, run_id))
    return runs


# ---- estimates ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Throughput:
    """Training FLOP/s of one width (and variant) and the per-run overhead, with where they came from."""

    flops_per_second: float
    overhead_s: float  # wall time outside the training loop: data, model, evaluations
    source: str  # "table" (recorded runs), "probe" (timed now) or "constant" (the spec's [estimate])
    n: int = 0  # recorded runs, or timed steps, behind the numbers


def recorded_throughput(
    rows: list[dict[str, str]], runs: list[PlannedRun]
) -> dict[tuple[int, str], Throughput]:
    """Throughput per (width, variant) from finished runs of the same shape (their ``wall_s``, ``train_s``).

    A recorded run counts for a planned width when it has the same width, context, batch, gradient
    accumulation and device. Training FLOP/s = the median over those runs of F * tokens / train_s, overhead =
    the median of wall_s - train_s. Medians, because a shared machine slows some runs a lot and most not at
    all (the bundled table has runs at a quarter of their width's usual speed). A variant with no recorded run
    of its own uses its width's runs of every variant (the key ``(width, "")``).
    """
    import statistics

    shapes = {
        (r.width, r.config.model.seq_len, r.config.batch_size, r.config.grad_accum, r.config.device)
        for r in runs
    }
    samples: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for row in rows:
        try:
            shape = (
                int(row["d_model"]),
                int(row["seq_len"]),
                int(row["batch_size"]),
                int(row["grad_accum"]),
                row["device"],
            )
            rate = float(row["flops_per_token"]) * float(row["tokens"]) / float(row["train_s"])
            overhead = max(0.0, float(row["wall_s"]) - float(row["train_s"]))
        except (KeyError, ValueError, ZeroDivisionError):
            continue  # a row without timings says nothing about speed
        if shape not in shapes or not rate > 0:
            continue
        for key in ((shape[0], row.get("variant", "")), (shape[0], "")):
            samples.setdefault(key, []).append((rate, overhead))
    return {
        key: Throughput(
            statistics.median(r for r, _ in v), statistics.median(o for _, o in v), "table", len(v)
        )
        for key, v in samples.items()
    }


def estimate_seconds(run: PlannedRun, speed: Throughput | float) -> float:
    """Seconds for a run: training FLOPs / FLOP/s, plus its evaluations (forward only, F/3 per token: the
    final one on val_tokens, ~10 intermediate ones on eval_tokens) when probed, plus the overhead.

    Speeds from a table carry their own overhead (set-up and evaluations as recorded); a probe or a constant
    adds the evaluations and a fixed set-up overhead (``overhead_s = 2.0``).
    """
    if not isinstance(speed, Throughput):
        speed = Throughput(float(speed), 2.0, "constant")
    cfg = run.config
    f = flops_per_token(cfg.model)
    steps, tokens = tokens_for_budget(
        cfg.model, run.budget, cfg.batch_size * cfg.model.seq_len * cfg.grad_accum
    )
    seconds = f * tokens / speed.flops_per_second + speed.overhead_s
    if speed.source != "table":
        eval_every, _ = cfg.intervals(steps)
        n_evals = steps // eval_every if eval_every else 0
        seconds += (
            f / 3 * (cfg.val_tokens + n_evals * min(cfg.eval_tokens, cfg.val_tokens)) / speed.flops_per_second
        )
    return seconds
