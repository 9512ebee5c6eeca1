"""Ideas for the "next runs" policy, each measured as phifit's policy of the sequential benchmark.

A variant changes how phifit's policy picks its batch; everything else (pools, pilots, targets,
widths, early stop) is ``benchmarks/sequential_design.py``'s, to which every other argument
goes, so a variant and the shipped policy are compared on the same pilots and target:

    python benchmarks/sequential_variants.py --variant current --pools study --policies phifit \
        --pilots 20 --boot-final 1000 --max-share 0.4 --jobs 1 --json current.json
    python benchmarks/sequential_variants.py --variant cell-noise:0.003 ... --json heavier.json

Variants (``--variant``):

- ``current``: :func:`phifit.plan.next_runs.choose_next` as shipped (the pilot's misfit as a
  level per (budget, r) cell: per-run sd within cells, cell sd tau);
- ``spread``: a batch spread over cells: ``choose_next`` ranks 3K picks greedily, the batch takes
  the first pick of each (budget, r) cell in that order, then the others;
- ``cell-noise:SD``: a heavier cell term, ``choose_next(cell_noise=SD)`` (SD added to the
  pilot's tau in quadrature), so that new cells weigh more than more runs in seen ones;
- ``curves``: the within-cell bend as cell noise: the pilot's cell curves in model size
  (:mod:`phifit.plan.cell_shapes`) leave a per-run sd, and the part of the within-cell variance
  they take moves a cell's runs together, so it joins tau in the cell term.

The noise-only planner (``--policies noise-only``) is left as shipped.  Results and how they
read are in docs/planning.md ("Ideas measured against the policy").
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sequential_design as bench  # noqa: E402

SPREAD_RANKED = 3  # the spread variant ranks this many times K picks


def parse_variant(text: str) -> tuple[str, float | None]:
    """``current``, ``spread``, ``curves`` or ``cell-noise:SD``, as (name, SD or None)."""
    if text in ("current", "spread", "curves"):
        return text, None
    name, _, value = text.partition(":")
    if name == "cell-noise":
        try:
            sd = float(value)
        except ValueError:
            sd = math.nan
        if sd > 0:
            return name, sd
    raise ValueError(f"--variant: expected current, spread, curves or cell-noise:SD (SD > 0), got {text!r}")


def spread_over_cells(picks: Sequence[tuple[Any, Any]], k: int) -> list[Any]:
    """The first ``k`` of ``picks`` (pick, its cell) in their order, each cell's first pick before
    any second one."""
    seen: set[Any] = set()
    first, later = [], []
    for pick, cell in picks:
        (later if cell in seen else first).append(pick)
        seen.add(cell)
    return (first + later)[:k]


@contextlib.contextmanager
def bend_as_cell_noise() -> Iterator[None]:
    """Within this block the plan's pilot noise counts the within-cell bend of the pilot's cell
    curves as cell noise (the ``curves`` variant); outside it, as shipped."""
    from phifit.plan import inputs

    shipped = inputs.pilot_noise

    def pilot_noise(
        runs: Any, fit: Any, *, cell_noise: float | None = None, misfit: bool = True, shape: bool = False
    ):
        noise, carried = shipped(runs, fit, cell_noise=cell_noise, misfit=misfit, shape=shape)
        if carried is None:
            return noise, carried
        try:
            curves = inputs.misfit_from_pilot(runs, fit, shape=True)
        except ValueError:
            return noise, carried
        if not curves.shapes or not curves.shape_sd > 0:
            return noise, carried
        bend = math.sqrt(max(curves.within_sd**2 - curves.shape_sd**2, 0.0))
        return dataclasses.replace(noise, per_run=curves.shape_sd, cell=math.hypot(noise.cell, bend)), carried

    inputs.pilot_noise = pilot_noise
    try:
        yield
    finally:
        inputs.pilot_noise = shipped


def variant_picker(name: str, sd: float | None) -> Callable:
    """A ``picker`` for :func:`sequential_design.planner_batch` (same arguments and returns as
    :func:`sequential_design.planner_picks`) that picks as the variant ``name`` (module docstring);
    the noise-only planner (``misfit`` false) picks as shipped."""
    from phifit.plan.next_runs import choose_next

    def picker(
        runs: Any, candidates: pd.DataFrame, k: int, fit: Any, misfit: bool
    ) -> tuple[list[dict], float]:
        if name in ("current", "curves") or not misfit:
            return bench.planner_picks(runs, candidates, k, fit, misfit)
        ranked = SPREAD_RANKED * k if name == "spread" else k
        nxt = choose_next(runs, candidates, ranked, fit=fit, cell_noise=sd)
        picks = nxt.picks
        if name == "spread":
            picks = spread_over_cells([(p, (p["budget"], int(p["r"]))) for p in picks], k)
        return picks, float(nxt.width_after)

    return picker


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    ap.add_argument("--variant", default="current", help="current, spread, curves or cell-noise:SD")
    args, rest = ap.parse_known_args(argv)
    try:
        name, sd = parse_variant(args.variant)
    except ValueError as err:
        ap.error(str(err))
    print(f"phifit's policy as variant {args.variant}", flush=True)
    bench.planner_batch = functools.partial(bench.planner_batch, picker=variant_picker(name, sd))
    with bend_as_cell_noise() if name == "curves" else contextlib.nullcontext():
        bench.main(rest)


if __name__ == "__main__":
    main()
