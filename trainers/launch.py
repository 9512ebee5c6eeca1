"""Sweeps beyond one machine: the runs of a spec as one job array through ``submitit``, and their status.

    phifit sweep SPEC --out runs.csv --launcher slurm --partition P --gpus-per-run 1 --time 04:00 \\
        --array-parallelism 16                  # submit the runs not yet in runs.csv as one SLURM job array
    phifit sweep SPEC --out runs.csv --status   # finished / queued / running / failed per run, error tails

The launcher is submitit (``pip install 'phifit[cluster]'``), not a home-made one. Every array task trains one
run with the in-process sweep code (``sweep.run_sweep`` restricted to that run id), or, when it asks for more
than one GPU, under ``torchrun --standalone --nproc_per_node=N`` (DDP inside the task). ``submitit-local``
runs the same tasks as local subprocesses through submitit's ``LocalExecutor`` (no SLURM needed; the tests
use it). The local executor has no array throttle, so there ``--array-parallelism K`` starts K tasks that
each train their share of the runs in turn.

Everything a task writes lives in the table's sidecar folder ``<out>.d/`` (``runlog.RunPaths``):

- ``rows/<run_id>.csv``: the finished run's row, merged into ``<out>`` at once (``runlog.finish_run``; why a
  file per run is safe on NFS is explained in ``runlog``'s docstring);
- ``logs/<run_id>.csv``, ``ckpt/<run_id>.pt``: the loss curve and the last checkpoint; a task always resumes
  from a checkpoint of its run, so a killed, timed-out or preempted run loses at most ``ckpt_every`` steps;
- ``state/<run_id>.json``: ``running`` (host, pid, job id) while a task trains the run, ``failed`` with the
  error's tail when it raised; removed when the row is in;
- ``jobs/``: submitit's job folder (pickles, stdout/stderr of every task) and ``jobs/submissions.jsonl``,
  one line per submitted run (run id, job id, launcher, time).

Resubmitting the same command merges any row files, skips finished runs and runs whose job is still queued or
running, and submits the failed and missing ones again; a run is never written twice (rows are keyed by run
id). On SLURM a task that reaches its time limit or is preempted is requeued by submitit (``checkpoint``) and
resumes from its checkpoint.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from phifit.extras import import_optional

from .runlog import merge_rows, read_finished, read_json, run_paths, sidecar
from .sweep import plan, run_sweep

LAUNCHERS = ("local", "slurm", "submitit-local")
STATES = ("finished", "running", "queued", "failed", "not submitted")


def _pid_alive(pid: int) -> bool:
    """True for a live process on this host (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


# ---- options -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchOptions:
    """Scheduler settings of a cluster sweep (``phifit sweep --launcher slurm ...``)."""

    partition: str | None = None
    gpus_per_run: int = 0  # 0: a CPU job; > 1: torchrun with that many processes inside the task
    cpus_per_run: int | None = None
    mem_gb: float | None = None
    time_min: int = 60  # the job's time limit; a run that needs longer resumes from its checkpoint
    array_parallelism: int = 16
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    slurm_args: dict[str, str] = field(default_factory=dict)  # more sbatch options, e.g. {"exclusive": ""}
    job_name: str = "phifit"

    def __post_init__(self) -> None:
        if not (isinstance(self.gpus_per_run, int) and self.gpus_per_run >= 0):
            raise ValueError(f"--gpus-per-run {self.gpus_per_run!r}: expected an integer >= 0")
        if not (isinstance(self.array_parallelism, int) and self.array_parallelism >= 1):
            raise ValueError(f"--array-parallelism {self.array_parallelism!r}: expected an integer >= 1")
        if not self.time_min >= 1:
            raise ValueError(f"--time: {self.time_min} minutes, expected at least 1")

    @property
    def world_size(self) -> int:
        """Processes per run: the run ids depend on it (the global batch is per process)."""
        return max(1, self.gpus_per_run)


def parse_time(text: str) -> int:
    """SLURM-style time limit -> minutes: 'MM', 'HH:MM', 'HH:MM:SS' or 'D-HH:MM'."""
    try:
        days, _, rest = text.rpartition("-") if "-" in text else ("0", "", text)
        parts = [int(p) for p in rest.split(":")]
        if len(parts) == 1:
            minutes = parts[0]
        elif len(parts) == 2:
            minutes = 60 * parts[0] + parts[1]
        elif len(parts) == 3:
            minutes = 60 * parts[0] + parts[1] + (parts[2] > 0)
        else:
            raise ValueError
        minutes += 24 * 60 * int(days or 0)
    except ValueError:
        raise ValueError(f"--time {text!r}: expected MM, HH:MM, HH:MM:SS or D-HH:MM") from None
    if minutes < 1:
        raise ValueError(f"--time {text!r}: expected at least one minute")
    return minutes


def _submitit() -> Any:
    return import_optional("submitit", "cluster", "phifit sweep --launcher slurm|submitit-local")


# ---- the task ----------------------------------------------------------------------------------------------
class SweepTask:
    """What one array task runs: the given runs of the spec, in turn, resuming from their checkpoints.

    A plain class with a ``checkpoint`` method, so that submitit requeues a task that reaches its time limit
    or is preempted with the same arguments (the runs then resume from their own checkpoints).
    """

    def __call__(
        self,
        spec: Any,
        out: str,
        grids: list[str] | None,
        run_ids: list[str],
        gpus_per_run: int = 0,
        overrides: dict[str, Any] | None = None,
    ) -> int:
        if gpus_per_run > 1:  # DDP inside the task
            failed = 0
            for run_id in run_ids:
                cmd = [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    f"--nproc_per_node={gpus_per_run}",
                    "-m",
                    "phifit.trainers.cli",
                    "sweep",
                    spec.path,
                    "--out",
                    out,
                    "--run-id",
                    run_id,
                    *[a for g in grids or [] for a in ("--grid", g)],
                    *_override_args(overrides or {}),
                ]
                failed += subprocess.run(cmd, check=False).returncode != 0
        else:
            if overrides:
                spec = type(spec)(**{**spec.__dict__, "settings": {**spec.settings, **overrides}})
            failed = run_sweep(spec, out, grids, run_ids=run_ids, file=sys.stderr)
        if failed:
            raise RuntimeError(f"{failed} of {len(run_ids)} run(s) failed; see {sidecar(out)}/state/")
        return len(run_ids)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        return _submitit().helpers.DelayedSubmission(self, *args, **kwargs)


def _override_args(overrides: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in overrides.items():
        if key == "compile":
            args += ["--compile"] if value else []
        elif key == "progress":
            args += [] if value else ["--no-progress"]
        else:
            args += [f"--{key}", str(value)]
    return args


# ---- submission --------------------------------------------------------------------------------------------
def _executor(launcher: str, folder: Path, opts: LaunchOptions) -> Any:
    submitit = _submitit()
    if launcher == "submitit-local":
        ex = submitit.LocalExecutor(folder=folder)
        ex.update_parameters(timeout_min=opts.time_min, gpus_per_node=opts.gpus_per_run)
        return ex
    if launcher != "slurm":
        raise ValueError(f"--launcher {launcher!r}: expected one of {', '.join(LAUNCHERS)}")
    try:
        ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=10)
    except RuntimeError as err:  # no srun on PATH
        raise ValueError(f"--launcher slurm: {err} (submit from a SLURM login node)") from None
    params: dict[str, Any] = dict(
        time=opts.time_min,
        array_parallelism=opts.array_parallelism,
        job_name=opts.job_name,
        nodes=1,
        ntasks_per_node=1,  # one process per task: torchrun starts the GPU processes itself
    )
    if opts.gpus_per_run:
        params["gpus_per_node"] = opts.gpus_per_run
    for key, value in (
        ("partition", opts.partition),
        ("cpus_per_task", opts.cpus_per_run),
        ("mem", f"{int(opts.mem_gb * 1024)}MB" if opts.mem_gb else None),
        ("account", opts.account),
        ("qos", opts.qos),
        ("constraint", opts.constraint),
    ):
        if value is not None:
            params[key] = value
    if opts.slurm_args:
        params["additional_parameters"] = dict(opts.slurm_args)
    ex.update_parameters(**params)
    return ex


def submit(
    spec: Any,
    out: str,
    grids: list[str] | None,
    *,
    launcher: str,
    options: LaunchOptions,
    overrides: dict[str, Any] | None = None,
    file: Any = None,
) -> list[Any]:
    """Submit every run that is not finished, queued or running as one job array; returns submitit's jobs."""
    file = file or sys.stdout
    status = sweep_status(spec, out, grids, world_size=options.world_size)
    todo = [s for s in status if s.state in ("failed", "not submitted")]
    counts = {state: sum(s.state == state for s in status) for state in STATES}
    print(
        f"sweep {spec.name}: {len(status)} runs: "
        + ", ".join(f"{n} {state}" for state, n in counts.items() if n)
        + f"; submitting {len(todo)}",
        file=file,
        flush=True,
    )
    if not todo:
        return []
    folder = sidecar(out) / "jobs"
    folder.mkdir(parents=True, exist_ok=True)
    ex = _executor(launcher, folder, options)
    ids = [s.run_id for s in todo]
    if launcher == "submitit-local":  # no array throttle: K tasks, each training its share in turn
        k = min(options.array_parallelism, len(ids))
        groups = [ids[i::k] for i in range(k)]
    else:  # one run per array task; SLURM runs at most array_parallelism at a time
        groups = [[i] for i in ids]
    task = SweepTask()
    n = len(groups)
    try:
        jobs = ex.map_array(
            task,
            [spec] * n,
            [str(out)] * n,
            [grids] * n,
            groups,
            [options.gpus_per_run] * n,
            [overrides or {}] * n,
        )
    except FileNotFoundError as err:  # no sbatch on this machine
        raise ValueError(
            f"--launcher {launcher}: {err.filename or err}: not found (run on a login node)"
        ) from None
    now = time.time()
    with (folder / "submissions.jsonl").open("a", encoding="utf-8") as f:
        for job, group in zip(jobs, groups):
            for task_index, run_id in enumerate(group):
                rec = dict(
                    run_id=run_id, job_id=str(job.job_id), launcher=launcher, submitted=now, order=task_index
                )
                f.write(json.dumps(rec) + "\n")
    print(
        f"submitted {len(ids)} run(s) as {n} task(s) of {launcher} job {jobs[0].job_id.split('_')[0]}"
        f"{'' if n == 1 else ' ...'}; job folder {folder}",
        file=file,
    )
    return jobs


# ---- status ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunStatus:
    run_id: str
    state: str  # one of STATES
    job_id: str = ""
    detail: str = ""  # host, scheduler state, or the error's tail for a failed run


def _submissions(out: str | os.PathLike) -> dict[str, dict[str, Any]]:
    path = sidecar(out) / "jobs" / "submissions.jsonl"
    last: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a line torn by a kill
                continue
            last[rec["run_id"]] = rec
    return last


def _scheduler_state(out: str | os.PathLike, rec: dict[str, Any]) -> str:
    """RUNNING / PENDING / FINISHED / a SLURM end state / UNKNOWN for a submitted job."""
    if rec.get("launcher") == "submitit-local":
        pid = int(rec["job_id"]) if str(rec["job_id"]).isdigit() else -1
        return "RUNNING" if pid > 0 and _pid_alive(pid) else "FINISHED"
    try:
        submitit = _submitit()
        state = str(submitit.SlurmJob(folder=sidecar(out) / "jobs", job_id=rec["job_id"]).state)
        return (state.split() or ["UNKNOWN"])[0]  # "CANCELLED by 123" -> CANCELLED
    except Exception:  # no sacct here, or submitit missing: say so rather than guess
        return "UNKNOWN"


def _log_tail(out: str | os.PathLike, job_id: str, lines: int = 8) -> str:
    try:
        from submitit.core.utils import JobPaths
    except ImportError:
        return ""
    err = JobPaths(sidecar(out) / "jobs", job_id=job_id, task_id=0).stderr
    if not err.exists():
        return ""
    text = err.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return "\n".join(text[-lines:])


def sweep_status(
    spec: Any, out: str | os.PathLike, grids: list[str] | None = None, world_size: int = 1
) -> list[RunStatus]:
    """The state of every planned run: from the table and its row files (finished), the task markers
    (running, failed) and the launcher's job records (queued, or gone without finishing = failed)."""
    merge_rows(out)
    done = read_finished(out)
    subs = _submissions(out)
    result = []
    for run in plan(spec, grids, world_size=world_size):
        rid = run.run_id
        if rid in done:
            result.append(RunStatus(rid, "finished"))
            continue
        marker = read_json(run_paths(out, rid).state)
        rec = subs.get(rid)
        if marker and (rec is None or marker.get("since", 0) >= rec.get("submitted", 0)):
            job = str(marker.get("job_id", ""))
            if marker["state"] == "failed":
                result.append(RunStatus(rid, "failed", job, marker.get("error", "")))
                continue
            here = marker.get("host") == socket.gethostname()
            alive = _pid_alive(int(marker["pid"])) if here else None
            if alive is None and rec is not None:
                alive = _scheduler_state(out, rec) in ("RUNNING", "COMPLETING")
            if alive or alive is None:
                result.append(
                    RunStatus(rid, "running", job, f"on {marker.get('host')} pid {marker.get('pid')}")
                )
            else:
                tail = _log_tail(out, rec["job_id"]) if rec else ""
                why = "the task died during the run (killed, out of memory, time limit or node failure)"
                result.append(
                    RunStatus(rid, "failed", job, why + (f"; its stderr ends:\n{tail}" if tail else ""))
                )
            continue
        if rec is None:
            result.append(RunStatus(rid, "not submitted"))
            continue
        state = _scheduler_state(out, rec)
        if state in ("PENDING", "REQUEUED", "CONFIGURING", "RESIZING", "SUSPENDED") or (
            state == "RUNNING" and rec.get("launcher") == "submitit-local"
        ):
            result.append(RunStatus(rid, "queued", rec["job_id"], state.lower()))
        elif state in ("RUNNING", "COMPLETING"):
            result.append(RunStatus(rid, "running", rec["job_id"], "starting"))
        elif state == "UNKNOWN":
            result.append(RunStatus(rid, "queued", rec["job_id"], "scheduler state unknown (no sacct here?)"))
        else:
            tail = _log_tail(out, rec["job_id"])
            why = f"job {rec['job_id']} ended ({state}) without finishing this run"
            result.append(
                RunStatus(rid, "failed", rec["job_id"], why + (f"; its stderr ends:\n{tail}" if tail else ""))
            )
    return result


def print_status(statuses: Sequence[RunStatus], out: str | os.PathLike, file: Any = None) -> None:
    """One line per run, a count per state, then the failed runs' error tails."""
    file = file or sys.stdout
    for s in statuses:
        first = s.detail.splitlines()[0] if s.detail and s.state != "failed" else ""
        print(f"{s.state:<13} {s.job_id:<14} {s.run_id}  {first}".rstrip(), file=file)
    counts = {state: sum(s.state == state for s in statuses) for state in STATES}
    print(
        f"{len(statuses)} runs in {out}: " + ", ".join(f"{n} {state}" for state, n in counts.items() if n),
        file=file,
    )
    for s in statuses:
        if s.state == "failed":
            print(f"\n-- failed: {s.run_id} (job {s.job_id or '-'})", file=file)
            print("   " + (s.detail or "no error recorded").replace("\n", "\n   "), file=file)
