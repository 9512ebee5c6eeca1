"""``phifit sweep SPEC --out RUNS.csv --adaptive``: the sequential design loop with the trainer in it.

1. The pilot: the runs of ``--pilot-grid NAME`` (the whole grid), or by default the baseline runs of the
   selected grids at their lowest budget (and the next budgets up while it holds fewer than 7 runs, the
   fewest a fit of the law's 6 parameters takes), trained in full (runs already in the table are skipped).
2. Each round: the baseline runs of the spec in the table are fitted (:func:`phifit.fitters.huber.fit_huber`)
   and cell-bootstrapped as the report does (:func:`phifit.bootstrap.block.block_bootstrap`, seed 0): phi's
   95% percentile interval and its width, the *realised* width.  That is recorded as the round's outcome,
   next to the width its decision predicted.  If a stop rule holds (the realised width at or below
   ``--target-width``, ``--max-rounds`` rounds decided and measured, the adaptive rounds' ``--max-flops`` or
   ``--max-hours`` spent, or no candidate left that narrows the predicted interval), the loop records why
   and stops.  Otherwise :func:`phifit.plan.next_runs.choose_next` picks the ``--batch`` untrained runs of
   the spec that most narrow phi's predicted interval per FLOP (within what is left of the caps), the
   *decision* is recorded (picks with run ids and why, the predicted width after them), and only then are
   they trained (:func:`phifit.trainers.sweep.run_sweep` with their run ids).  The picks keep the design
   rules (:mod:`phifit.plan.design_rules`: every r at every budget used, bracketed isoFLOP curves, no r in
   a single cell) unless ``design_rules`` is off; a rule the batch could not meet is in the decision's
   ``rule_notes``.

Every record holds the stop rule in words (``stop_rule``) beside the settings it comes from (``rules``),
so the round-0 outcome, written before the first decision, declares it.

The round log, ``RUNS.csv.d/adaptive.jsonl``, is appended one flushed line per event and never rewritten
(:mod:`phifit.plan.rounds`).  Killed at any point, the same command resumes: a decision without its outcome
has its runs not yet in the table trained (a half-trained run continues from its checkpoint), its outcome
recorded, and the loop goes on.  The stop rules are those of the invocation: rerun with a larger
``--max-rounds`` or a lower ``--target-width``, a stopped loop goes on; rerun as it was, it writes nothing.
The pilot is the first invocation's (its outcome is round 0).  Rows land in the table as the sweep writes
them (atomically, finished runs only); nothing here deletes or rewrites a row or a record.

``--max-hours`` counts the adaptive runs' recorded wall time and admits a pick while the time spent plus its
estimate from the spec's ``[estimate]`` (the speeds ``phifit plan`` uses) fits; the greedy batch is cut
where the estimate no longer fits.  Diverged runs are listed in their round's outcome and never picked
again.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from phifit.spec.sweep_spec import PlannedRun, SweepSpec, estimate_seconds, plan

from .runlog import read_finished

#: Runs per round (``--batch``) and bootstrap replicates per measurement (``--bootstrap``) by default.
DEFAULT_BATCH = 4
DEFAULT_N_BOOT = 200
#: The seed of every measurement's bootstrap (as the report's default).
BOOT_SEED = 0
#: The default pilot takes the lowest budgets until it holds this many runs: the fit needs more runs than
#: the law's 6 free parameters.
PILOT_MIN_RUNS = 7
#: The recipe the law is fitted to and the candidates are drawn from.
BASELINE = "baseline"
#: The settings every record keeps as its ``rules``: the stop rules, the batch size, the bootstrap's
#: replicates and whether the design rules chose the picks.
RULE_KEYS = ("batch", "target_width", "max_flops", "max_hours", "max_rounds", "n_boot", "design_rules")


@dataclass(frozen=True)
class AdaptiveOptions:
    """The loop's settings, named as the ``phifit sweep --adaptive`` options that set them.

    ``pilot_grid``: the grid trained first, whole (None: :func:`pilot_runs`); ``batch``: runs per round;
    ``target_width``: stop once the realised 95% width of phi is at or below it; ``max_flops`` /
    ``max_hours``: caps on the adaptive rounds' training FLOPs / wall hours; ``max_rounds``: rounds to
    decide at most; ``n_boot``: cell-bootstrap replicates per measurement; ``n_jobs``: bootstrap workers
    (None: the cores this process may use); ``parallel_runs``: runs of a round trained at once
    (``--parallel-runs``, as in a plain sweep; the round still ends when all its runs have);
    ``design_rules``: pick each round's runs under the design rules (:mod:`phifit.plan.design_rules`),
    else the greedy batch alone."""

    pilot_grid: str | None = None
    batch: int = DEFAULT_BATCH
    target_width: float | None = None
    max_flops: float | None = None
    max_hours: float | None = None
    max_rounds: int | None = None
    n_boot: int = DEFAULT_N_BOOT
    n_jobs: int | None = None
    parallel_runs: int = 1
    design_rules: bool = True

    def __post_init__(self) -> None:
        if self.parallel_runs < 1:
            raise ValueError(f"--parallel-runs {self.parallel_runs}: expected an integer >= 1")
        if self.batch < 1:
            raise ValueError(f"--batch {self.batch}: expected at least 1 run per round")
        for name, value in (
            ("--target-width", self.target_width),
            ("--max-flops", self.max_flops),
            ("--max-hours", self.max_hours),
        ):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} {value}: expected a positive number")
        if self.max_rounds is not None and self.max_rounds < 0:
            raise ValueError(f"--max-rounds {self.max_rounds}: expected 0 or more")
        if self.n_boot < 2:
            raise ValueError(f"--bootstrap {self.n_boot}: the realised width needs at least 2 replicates")
        if self.n_jobs is not None and self.n_jobs < 1 and self.n_jobs != -1:
            raise ValueError(f"--jobs {self.n_jobs}: expected a positive number of workers or -1")

    def rules(self) -> dict[str, Any]:
        """The stop rules and batch size, as each record keeps them."""
        return {k: v for k, v in asdict(self).items() if k in RULE_KEYS}

    def stop_rule(self) -> str:
        """The stop rule in words, as every record declares it: the rules that are set, checked after each
        outcome in this order, then the ones that always hold (no candidate left that narrows the
        predicted interval, or nothing to plan from)."""
        parts = []
        if self.target_width is not None:
            parts.append(f"phi's realised 95% width is at or below {self.target_width:g} (--target-width)")
        if self.max_rounds is not None:
            parts.append(f"{self.max_rounds} round(s) are decided and measured (--max-rounds)")
        if self.max_flops is not None:
            parts.append(f"the adaptive rounds have spent {self.max_flops:.3g} training FLOPs (--max-flops)")
        if self.max_hours is not None:
            parts.append(f"the adaptive rounds have spent {self.max_hours:g} h of wall time (--max-hours)")
        parts.append("no untrained candidate fits the caps and narrows phi's predicted interval")
        parts.append("the runs cannot be fitted")
        return "stop when " + "; or ".join(parts)


@dataclass
class Measurement:
    """The runs fitted at one point of the loop and what their fit and bootstrap say of phi.

    ``runs``/``fit``: the baseline runs of the spec in the table and their Huber fit (None when there are
    none, or the fit failed); ``n_runs``/``flops``: how many and their training FLOPs; ``phi``, ``phi_ci``,
    ``width``: the estimate, its 95% cell-bootstrap percentile interval and hi - lo (None where missing,
    ``note`` says why); ``n_failed``: failed bootstrap replicates; ``reused``: taken from the log's last
    outcome (the table has not changed since), so no bootstrap ran."""

    runs: Any
    fit: Any
    n_runs: int
    flops: float
    phi: float | None = None
    phi_ci: list[float | None] | None = None
    width: float | None = None
    n_failed: int | None = None
    note: str = ""
    reused: bool = False

    def fields(self) -> dict[str, Any]:
        """What every record says of the measurement."""
        return {
            "n_runs": self.n_runs,
            "flops": self.flops,
            "phi": self.phi,
            "phi_ci": self.phi_ci,
            "width_realised": self.width,
        }

    def text(self) -> str:
        if self.phi is None:
            return f"{self.n_runs} runs: {self.note or 'phi not estimated'}"
        iv = (
            ""
            if self.width is None
            else f" [{self.phi_ci[0]:.3g}, {self.phi_ci[1]:.3g}], width {self.width:.3g}"
        )
        return f"{self.n_runs} runs: phi {self.phi:.3g}{iv}" + (f" ({self.note})" if self.note else "")


# ---- the spec's runs ---------------------------------------------------------------------------------------
def pool_frame(spec: SweepSpec, grids: list[str] | None) -> Any:
    """The candidates: the baseline runs of the selected grids (:func:`phifit.plan.inputs.design_from_spec`:
    budget, r, size, n_once, n_rec, tokens, flops, seed, run_id)."""
    from phifit.plan.inputs import design_from_spec

    frame = design_from_spec(spec.path, grids=grids, variant=BASELINE).frame
    planned = {r.run_id for r in plan(spec, grids)}
    foreign = sorted(set(frame["run_id"]) - planned)
    if foreign:  # the spec file changed under us, or settings that enter the run id were overridden
        raise ValueError(f"{spec.path}: the planned run {foreign[0]} is not a run of this sweep; rerun")
    return frame


def pilot_runs(spec: SweepSpec, grids: list[str] | None, pilot_grid: str | None) -> list[PlannedRun]:
    """The pilot's runs: every run of ``pilot_grid``, or the baseline runs of the selected grids at the
    lowest budget they plan, and at the next budgets up until the pilot holds :data:`PILOT_MIN_RUNS` runs
    (one budget of ``cpu_small``: 12 runs)."""
    if pilot_grid is not None:
        names = [g.name for g in spec.grids]
        if pilot_grid not in names:
            raise ValueError(
                f"--pilot-grid {pilot_grid}: no such grid in {spec.path} (it has {', '.join(names)})"
            )
        return plan(spec, [pilot_grid])
    runs = [r for r in plan(spec, grids) if r.variant == BASELINE]
    if not runs:
        raise ValueError(f"{spec.path}: the selected grids plan no {BASELINE} runs to fit the law to")
    chosen: list[PlannedRun] = []
    for budget in sorted({r.budget for r in runs}):
        if len(chosen) >= PILOT_MIN_RUNS:
            break
        chosen += [r for r in runs if r.budget == budget]
    return chosen


def run_seconds(spec: SweepSpec, grids: list[str] | None) -> dict[str, float]:
    """Estimated seconds per baseline run of the selected grids, from the spec's ``[estimate]`` (its
    recorded per-width speeds, else its constant); ``ValueError`` naming the spec when it has neither."""
    from phifit.plan.inputs import spec_speed

    out = {}
    for run in plan(spec, grids):
        speed = spec_speed(spec, run.width)
        if speed is None:
            raise ValueError(
                f"--max-hours: {spec.path} has no [estimate] (flops_per_second or [estimate.recorded]) to "
                "turn hours into runs; give one, or cap the rounds with --max-flops"
            )
        out[run.run_id] = estimate_seconds(run, speed)
    return out


# ---- measuring ---------------------------------------------------------------------------------------------
def fitted_table(out: str, ids: set[str]) -> Any:
    """The rows of ``out`` whose run_id is in ``ids``, as a run table (None when there are none)."""
    from phifit.runs.table import load_runs, table_from_frame

    if not Path(out).is_file():
        return None
    frame = load_runs(out).frame
    frame = frame[frame["run_id"].astype(str).isin(ids)].reset_index(drop=True)
    if frame.empty:
        return None
    return table_from_frame(frame, source=str(out))


def measure(out: str, ids: set[str], n_boot: int, n_jobs: int | None) -> Measurement:
    """Fit the baseline runs of the spec in ``out`` and bootstrap the fit by (budget, r) cells: phi, its
    95% percentile interval and width (module docstring).  No bootstrap when phi is not estimated or sits
    on its search box (as the report: an estimate on its boundary has no valid bootstrap interval)."""
    from phifit.bootstrap.block import block_bootstrap
    from phifit.fitters.huber import fit_huber
    from phifit.plan.rounds import interval_width

    runs = fitted_table(out, ids)
    if runs is None:
        return Measurement(None, None, 0, 0.0, note="no runs of the spec in the table yet")
    flops = float(runs.frame["flops"].astype(float).sum())
    try:
        fit = fit_huber(runs)
    except ValueError as err:
        return Measurement(runs, None, len(runs), flops, note=f"the fit failed: {err}")
    m = Measurement(runs, fit, len(runs), flops, phi=fit.phi)
    if fit.phi is None:
        m.note = "phi not estimated by these runs"
        return m
    if "phi" in fit.at_bounds:
        m.note = f"phi = {fit.phi:.3g} sits on its search box: not located, no bootstrap"
        return m
    boot = block_bootstrap(
        runs, fit, n_boot=n_boot, seed=BOOT_SEED, n_jobs=n_jobs, progress=False, jackknife=False
    )
    ci = boot.ci.get("phi")
    m.n_failed = int(boot.n_failed)
    m.phi_ci = None if not ci else [None if v is None or not math.isfinite(v) else float(v) for v in ci]
    m.width = interval_width(m.phi_ci)
    if m.width is None:
        m.note = f"interval withheld: {boot.n_failed} of {n_boot} bootstrap replicates failed"
    return m


def _reuse(last: dict[str, Any], out: str, ids: set[str]) -> Measurement | None:
    """The last outcome's numbers with a fresh fit (cheap), when the table still holds exactly its runs;
    None when it has changed."""
    from phifit.fitters.huber import fit_huber

    runs = fitted_table(out, ids)
    if runs is None or len(runs) != last.get("n_runs"):
        return None
    try:
        fit = fit_huber(runs)
    except ValueError:
        return None
    return Measurement(
        runs,
        fit,
        len(runs),
        float(runs.frame["flops"].astype(float).sum()),
        phi=last.get("phi"),
        phi_ci=last.get("phi_ci"),
        width=last.get("width_realised"),
        n_failed=last.get("n_failed"),
        note=str(last.get("note") or ""),
        reused=True,
    )


# ---- the loop ----------------------------------------------------------------------------------------------
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class _Loop:
    """The state of one invocation: the spec, the table, the log and what the log says so far."""

    def __init__(self, spec: SweepSpec, out: str, grids: list[str] | None, options: AdaptiveOptions, file):
        from phifit.plan.rounds import read_records, rounds_path

        self.spec, self.out, self.grids, self.options = spec, str(out), grids, options
        self.say = lambda s: print(s, file=file, flush=True)
        self.file = file
        self.log = rounds_path(out)
        self.records, skipped = read_records(self.log)
        if skipped:
            self.say(f"adaptive: {self.log}: {skipped} torn line(s) skipped")
        named = {r.get("spec") for r in self.records} - {None}
        if named and named != {spec.name}:
            raise ValueError(
                f"{self.log}: the round log of sweep {', '.join(sorted(map(str, named)))}, not of "
                f"{spec.name}; choose another --out"
            )
        self.pool = pool_frame(spec, grids)
        self.pilot = pilot_runs(spec, grids, options.pilot_grid)
        self.ids = set(self.pool["run_id"]) | {r.run_id for r in self.pilot if r.variant == BASELINE}
        self.seconds = run_seconds(spec, grids) if options.max_hours is not None else {}
        self.failed_now = 0

    # -- the log
    def of(self, event: str) -> dict[int, dict[str, Any]]:
        return {r["round"]: r for r in self.records if r["event"] == event}

    def append(self, event: str, k: int, m: Measurement, **extra: Any) -> dict[str, Any]:
        from phifit.plan.rounds import append_record

        flops, hours = self.adaptive_cost()
        record = {
            "event": event,
            "round": k,
            "time": _now(),
            "spec": self.spec.name,
            **m.fields(),
            "adaptive_flops": flops,
            "adaptive_hours": hours,
            **extra,
            "rules": self.options.rules(),
            "target_width": self.options.target_width,
            "stop_rule": self.options.stop_rule(),
        }
        append_record(self.log, record)
        self.records.append(record)
        return record

    def adaptive_cost(self) -> tuple[float, float]:
        """Training FLOPs and recorded wall hours of the adaptive rounds' runs in the table."""
        picked = {p["run_id"] for d in self.of("decision").values() for p in d.get("picks", [])}
        rows = read_finished(self.out) if Path(self.out).is_file() else {}
        flops = sum(float(rows[i].get("flops") or 0) for i in picked if i in rows)
        hours = sum(float(rows[i].get("wall_s") or 0) for i in picked if i in rows) / 3600
        return flops, hours

    # -- training
    def train(self, ids: list[str], grids: list[str] | None) -> list[str]:
        """Train the runs of ``ids`` not yet in the table; return those still missing (diverged)."""
        from .sweep import run_sweep

        done = set(read_finished(self.out)) if Path(self.out).is_file() else set()
        todo = [i for i in ids if i not in done]
        if todo:
            self.failed_now += run_sweep(
                self.spec, self.out, grids, file=self.file, run_ids=todo, jobs=self.options.parallel_runs
            )
        done = set(read_finished(self.out))
        return [i for i in ids if i not in done]

    def measure_outcome(self, k: int, trained: list[str], failed: list[str]) -> Measurement:
        o = self.options
        m = measure(self.out, self.ids, o.n_boot, o.n_jobs)
        decision = self.of("decision").get(k)
        predicted = None if decision is None else decision.get("width_predicted")
        self.append(
            "outcome",
            k,
            m,
            width_predicted=predicted,
            n_boot=o.n_boot,
            n_failed=m.n_failed,
            note=m.note,
            trained=trained,
            failed=failed,
        )
        what = "pilot" if k == 0 else f"round {k}"
        pred = "" if predicted is None else f" (predicted {predicted:.3g})"
        self.say(f"adaptive {what}: {m.text()}{pred}")
        return m

    # -- stop rules and decisions
    def stop_reason(self, k: int, m: Measurement) -> str | None:
        o = self.options
        flops, hours = self.adaptive_cost()
        if o.target_width is not None and m.width is not None and m.width <= o.target_width:
            return f"target reached: phi's realised width {m.width:.3g} <= --target-width {o.target_width:g}"
        if o.max_rounds is not None and k >= o.max_rounds:
            return f"--max-rounds {o.max_rounds} reached"
        if o.max_flops is not None and flops >= o.max_flops:
            return f"the FLOP cap --max-flops {o.max_flops:.3g} is spent ({flops:.3g} in the adaptive rounds)"
        if o.max_hours is not None and hours >= o.max_hours:
            return f"the time cap --max-hours {o.max_hours:g} is spent ({hours:.3g} h of recorded wall time)"
        if m.fit is None:
            return f"nothing to plan from: {m.note}"
        return None

    def decide(self, k: int, m: Measurement) -> tuple[dict[str, Any] | None, str]:
        """Record round ``k``'s decision (None and why when nothing is picked)."""
        from phifit.plan.next_runs import choose_next

        o = self.options
        flops, hours = self.adaptive_cost()
        failed = {i for r in self.of("outcome").values() for i in r.get("failed", [])}
        done = set(read_finished(self.out)) if Path(self.out).is_file() else set()
        cand = self.pool[~self.pool["run_id"].isin(failed | done)].reset_index(drop=True)
        left_s = None
        if o.max_hours is not None:
            left_s = (o.max_hours - hours) * 3600
            cand = cand[cand["run_id"].map(self.seconds) <= left_s].reset_index(drop=True)
            if cand.empty:
                return (
                    None,
                    f"no untrained run's estimated time fits the {left_s / 3600:.3g} h left of --max-hours",
                )
        try:
            nxt = choose_next(
                m.runs,
                cand,
                o.batch,
                fit=m.fit,
                max_flops=None if o.max_flops is None else o.max_flops - flops,
                pool_source=str(self.spec.path),
                rules=o.design_rules,
            )
        except ValueError as err:
            return None, f"cannot plan: {err}"
        picks = list(nxt.picks)
        if left_s is not None:  # the greedy batch's prefix that fits the hours left
            spent, keep = 0.0, []
            for p in picks:
                spent += self.seconds[p["run_id"]]
                if spent > left_s:
                    break
                keep.append(p)
            picks = keep
        if not picks:
            return None, nxt.stopped or "no candidate left"
        notes = list(nxt.rule_notes)
        if any("rule" in p for p in nxt.picks[len(picks) :]):
            notes.append("the batch was cut to fit --max-hours: runs a design rule forced were cut with it")
        decision = self.append(
            "decision",
            k,
            m,
            width_now=nxt.width_now,
            width_predicted=picks[-1]["width_after"],
            picks=picks,
            picks_flops=sum(p["cost"] for p in picks),
            stopped=nxt.stopped if len(picks) == len(nxt.picks) else "cut to fit --max-hours",
            law=nxt.law,
            law_note=nxt.law_note,
            noise=nxt.noise.to_dict(),
            rule_notes=notes,
        )
        self.say(
            f"adaptive round {k}: {len(picks)} run(s), predicted width of phi {nxt.width_now:.3g} -> "
            f"{decision['width_predicted']:.3g} (asymptotic)"
        )
        for p in picks:
            self.say(f"  {p['run_id']}: {p['why']}")
        for note in notes:
            self.say(f"  design rule not met: {note}")
        return decision, ""

    def stop(self, k: int, m: Measurement, reason: str) -> None:
        last = self.records[-1] if self.records else {}
        if last.get("event") == "stop" and last.get("round") == k and last.get("reason") == reason:
            self.say(f"adaptive: stopped after round {k}: {reason} (as recorded)")
            return
        self.append("stop", k, m, reason=reason)
        self.say(f"adaptive: stopped after round {k}: {reason}; the round log is {self.log}")


def run_adaptive(
    spec: SweepSpec,
    out: str,
    grids: list[str] | None = None,
    options: AdaptiveOptions | None = None,
    file: Any = None,
) -> int:
    """Run (or resume) the adaptive loop of the module docstring; returns the number of runs that failed
    (diverged) in this invocation."""
    options = options or AdaptiveOptions()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("sweep: --adaptive runs in one process, one run after another; not under torchrun")
    loop = _Loop(spec, out, grids, options, file or sys.stderr)
    say = loop.say
    outcomes = loop.of("outcome")
    m: Measurement | None = None
    if 0 not in outcomes:
        ids = [r.run_id for r in loop.pilot]
        grid = [options.pilot_grid] if options.pilot_grid else grids
        say(
            f"adaptive: the pilot, {len(ids)} runs"
            + (f" of grid {options.pilot_grid}" if options.pilot_grid else "")
        )
        failed = loop.train(ids, grid)
        m = loop.measure_outcome(0, [i for i in ids if i not in failed], failed)
    decisions = loop.of("decision")
    last = max(decisions, default=0)
    if last and last not in loop.of("outcome"):  # a decision whose batch was cut short: finish it
        ids = [p["run_id"] for p in decisions[last]["picks"]]
        say(f"adaptive round {last}: resuming its batch of {len(ids)} run(s)")
        failed = loop.train(ids, grids)
        m = loop.measure_outcome(last, [i for i in ids if i not in failed], failed)
    k = max(loop.of("outcome"))
    if m is None:
        m = _reuse(loop.of("outcome")[k], loop.out, loop.ids) or measure(
            loop.out, loop.ids, options.n_boot, options.n_jobs
        )
    while True:
        reason = loop.stop_reason(k, m)
        if reason is None:
            decision, reason = loop.decide(k + 1, m)
        if reason:
            loop.stop(k, m, reason)
            return loop.failed_now
        k += 1
        ids = [p["run_id"] for p in decision["picks"]]
        failed = loop.train(ids, grids)
        m = loop.measure_outcome(k, [i for i in ids if i not in failed], failed)
