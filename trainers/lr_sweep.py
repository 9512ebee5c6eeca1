"""``phifit sweep SPEC --lr-sweep``: the study's base-rate sweep (its App. D), and the spec it writes.

The spec's ``[lr_sweep]`` names one width and budget, the r to try (the study: r = 1 and r = 4) and,
per optimiser, the base matrix rates (``[lr_sweep.lr]``). Every (optimiser, rate, r) run trains with the
spec's settings otherwise (:func:`phifit.spec.sweep_spec.plan_lr_sweep`), into its own run table.
:func:`choose_rate` then picks, for each optimiser, the rate with the lowest mean loss over the r (the
study found both r's optima at the same rate, 0.014, and trained every r with it), and the optimiser
whose best mean is lowest; :func:`write_tuned_spec` writes the spec with that optimiser and rate in its
``[settings]``, saying where they came from.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RateChoice:
    """The outcome of a learning-rate sweep.

    ``losses`` {optimizer: {rate: {r: loss}}} (the finished runs), ``mean`` {optimizer: {rate: mean
    loss over the r}} (only rates where every r finished), ``best_per_r`` {optimizer: {r: rate}},
    ``optimizer`` and ``lr`` the choice, ``at_edge`` whether the chosen rate is the smallest or the
    largest tried (the optimum may lie outside the grid), ``margin`` the chosen optimiser's best mean
    loss minus the other optimiser's (negative: it wins; None with one optimiser).
    """

    losses: dict[str, dict[float, dict[int, float]]]
    mean: dict[str, dict[float, float]]
    best_per_r: dict[str, dict[int, float]]
    optimizer: str
    lr: float
    at_edge: bool
    margin: float | None

    def summary(self) -> str:
        rs = sorted({r for by_rate in self.losses.values() for d in by_rate.values() for r in d})
        lines = [
            f"{'optimizer':9} {'base lr':>8} " + " ".join(f"{'r=' + str(r):>8}" for r in rs) + f" {'mean':>8}"
        ]
        for opt, by_rate in self.losses.items():
            for lr in sorted(by_rate):
                cells = " ".join(f"{by_rate[lr][r]:>8.4f}" if r in by_rate[lr] else f"{'-':>8}" for r in rs)
                mean = self.mean[opt].get(lr)
                mark = " <-" if (opt, lr) == (self.optimizer, self.lr) else ""
                lines.append(
                    f"{opt:9} {lr:>8.4g} {cells} {mean:>8.4f}{mark}"
                    if mean is not None
                    else f"{opt:9} {lr:>8.4g} {cells} {'-':>8}"
                )
        for opt, best in self.best_per_r.items():
            lines.append(
                f"{opt}: best rate per r " + ", ".join(f"r={r}: {lr:g}" for r, lr in sorted(best.items()))
            )
        lines.append(
            f"chosen: optimizer = {self.optimizer}, lr = {self.lr:g} (lowest mean loss over r)"
            + (
                f"; {self.margin:+.4f} nats against the other optimiser's best"
                if self.margin is not None
                else ""
            )
        )
        if self.at_edge:
            lines.append(
                "the chosen rate is at the edge of the grid: the optimum may lie beyond it; "
                "extend [lr_sweep.lr]"
            )
        return "\n".join(lines)


def read_losses(out: str, runs: list[Any]) -> dict[str, dict[float, dict[int, float]]]:
    """{optimizer: {base rate: {r: loss}}} of the sweep's ``runs`` found in the table ``out``."""
    path = Path(out)
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        rows = {row["run_id"]: row for row in csv.DictReader(f)}
    losses: dict[str, dict[float, dict[int, float]]] = {}
    for run in runs:
        row = rows.get(run.run_id)
        if row is None:
            continue
        cfg = run.config
        losses.setdefault(cfg.optimizer, {}).setdefault(float(cfg.lr), {})[run.r] = float(row["loss"])
    return losses


def choose_rate(losses: dict[str, dict[float, dict[int, float]]], rs: tuple[int, ...]) -> RateChoice:
    """The rate and optimiser with the lowest mean loss over ``rs`` (module docstring); ``ValueError``
    when no rate has a finished run for every r."""
    mean = {
        opt: {lr: sum(d[r] for r in rs) / len(rs) for lr, d in by_rate.items() if all(r in d for r in rs)}
        for opt, by_rate in losses.items()
    }
    best = {opt: min(m, key=m.get) for opt, m in mean.items() if m}
    if not best:
        raise ValueError("the learning-rate sweep has no rate with a finished run for every r")
    optimizer = min(best, key=lambda o: mean[o][best[o]])
    lr = best[optimizer]
    others = [mean[o][best[o]] for o in best if o != optimizer]
    per_r = {
        opt: {r: min((lr_ for lr_ in by_rate if r in by_rate[lr_]), key=lambda x: by_rate[x][r]) for r in rs}
        for opt, by_rate in losses.items()
        if all(any(r in d for d in by_rate.values()) for r in rs)
    }
    tried = sorted(losses[optimizer])
    return RateChoice(
        losses=losses,
        mean=mean,
        best_per_r=per_r,
        optimizer=optimizer,
        lr=lr,
        at_edge=lr in (tried[0], tried[-1]),
        margin=(mean[optimizer][lr] - min(others)) if others else None,
    )


def write_tuned_spec(spec_path: str, choice: RateChoice, out_spec: str, table: str) -> None:
    """Copy the spec to ``out_spec`` with ``optimizer`` and ``lr`` set in its ``[settings]`` to the
    choice (replacing the lines that set them, or adding them), under a comment naming the table."""
    text = Path(spec_path).read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "[settings]"), None)
    comment = f"# optimizer and lr chosen by phifit sweep --lr-sweep from {table} (lowest mean loss over r)"
    new = [comment, f'optimizer = "{choice.optimizer}"', f"lr = {choice.lr!r}"]
    if start is None:
        lines += ["", "[settings]", *new]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        keep = [
            line
            for line in lines[start + 1 : end]
            if not re.match(r"\s*(optimizer|lr)\s*=", line)
            and "chosen by phifit sweep --lr-sweep" not in line
        ]
        lines = lines[: start + 1] + new + keep + lines[end:]
    Path(out_spec).write_text("\n".join(lines) + "\n", encoding="utf-8")


def default_out_spec(out: str) -> str:
    """Where the tuned spec goes unless told: beside the sweep's table, ``OUT_tuned.toml``."""
    p = Path(out)
    return str(p.with_name(p.stem + "_tuned.toml"))
