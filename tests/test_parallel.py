"""Where parallel work runs (phifit.fitters.parallel): every backend gives the same numbers.

The bootstrap on the study's digitised table (116 runs, 24 (budget, r) cells) is run with the
default backend (worker processes forked from this one), with joblib's fresh worker processes,
with threads, in this process alone, and on a Dask cluster of two worker processes started
here; its replicates, jackknife and intervals must be bit-identical.  So must the wild cluster
test and the planner's simulated tables.  The fork backend's own promises are checked too: its
workers are forks (they hold a module only this process imported), it runs as loky while
another thread runs, and a ``shared_workers`` block serves every call from one set of workers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from phifit import defaults
from phifit.bootstrap.block import block_bootstrap
from phifit.bootstrap.wild import wild_cluster_test
from phifit.fitters.huber import HuberOptions, fit_huber
from phifit.fitters.parallel import DASK_MISSING, check_backend, parallel_map
from phifit.law import LawSpec
from phifit.runs.table import load_runs

ROOT = Path(__file__).resolve().parents[1]
#: replicates in chunks of 15: four tasks, so two workers share them on every backend
BOOT = {"n_boot": 60, "seed": 3, "n_jobs": 2, "chunk_size": 15, "progress": False}


@pytest.fixture(scope="module")
def study():
    runs = load_runs(ROOT / "data" / "looped_study_runs_digitized.csv")
    return runs, fit_huber(runs, options=HuberOptions(n_starts=60, seed=0))


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as local:
        yield local


@pytest.fixture(scope="module")
def reference(study):
    runs, fit = study
    return block_bootstrap(runs, fit, **BOOT)


def assert_same_bootstrap(a, b) -> None:
    np.testing.assert_array_equal(a.thetas, b.thetas)
    np.testing.assert_array_equal(a.jackknife_thetas, b.jackknife_thetas)
    assert a.ci == b.ci and a.ci_bca == b.ci_bca and a.mc_error == b.mc_error
    assert (a.n_failed, a.n_switched, a.n_polished) == (b.n_failed, b.n_switched, b.n_polished)


def test_the_default_backend_forks_worker_processes(reference, study):
    runs, fit = study
    assert defaults.BACKEND == "fork" and check_backend(None) == "fork"
    explicit = block_bootstrap(runs, fit, backend="fork", **BOOT)
    assert_same_bootstrap(reference, explicit)
    assert np.isfinite(reference.ci["phi"]).all() and reference.n_failed < BOOT["n_boot"]


@pytest.mark.parametrize("backend", ["loky", "sequential", "threading"])
def test_other_local_backends_give_bit_identical_intervals(reference, study, backend):
    runs, fit = study
    assert_same_bootstrap(reference, block_bootstrap(runs, fit, backend=backend, **BOOT))


#: Run in a fresh interpreter (this one may hold a Dask client's or loky's threads, which turn
#: the fork backend into loky): the fork backend's promises, each printed as a check's outcome.
FORK_CHECKS = """
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import only_here  # a module this process alone imports: forks hold it, fresh workers do not
import phifit.fitters.parallel as parallel
from phifit.fitters.parallel import can_fork, parallel_map, shared_workers

def facts(module):
    time.sleep(0.2)  # long enough that every worker of a call takes some of its tasks
    return os.getpid(), module in sys.modules

out = {"can_fork": can_fork()}
tasks = [("only_here",)] * 6
forked = list(parallel_map(facts, tasks, n_jobs=2))
out["default_forks"] = all(pid != os.getpid() and held for pid, held in forked)
out["fork_pids"] = len({pid for pid, _ in forked})
out["can_fork_after_call"] = can_fork()
fresh = list(parallel_map(facts, tasks, n_jobs=2, backend="loky"))
out["loky_fresh"] = all(pid != os.getpid() and not held for pid, held in fresh)
from joblib.externals.loky import get_reusable_executor
get_reusable_executor().shutdown(wait=True)  # loky's threads gone again
release = threading.Event()
other = threading.Thread(target=release.wait)
other.start()
out["can_fork_with_thread"] = can_fork()
beside = list(parallel_map(facts, tasks, n_jobs=2, backend="fork"))
out["thread_runs_as_loky"] = not any(held for _, held in beside)
release.set()
other.join()
get_reusable_executor().shutdown(wait=True)
with shared_workers(n_jobs=2):
    first = list(parallel_map(facts, tasks, n_jobs=2))
    second = list(parallel_map(facts, tasks, n_jobs=2, backend="fork"))
    block = {pid for pid, _ in first + second}
    out["block_pids"] = len(block)
    out["block_forks"] = all(held for _, held in first + second)
    with shared_workers(n_jobs=2):
        out["nested_same"] = {pid for pid, _ in parallel_map(facts, tasks, n_jobs=2)} <= block
    out["other_count_loky"] = not any(held for _, held in parallel_map(facts, tasks, n_jobs=3))
get_reusable_executor().shutdown(wait=True)
out["block_ended"] = parallel._shared is None and can_fork()
out["after_block_new"] = not ({pid for pid, _ in parallel_map(facts, tasks, n_jobs=2)} & block)
try:
    list(parallel_map(divmod, [(1, 1), (1, 0), (2, 1)], n_jobs=2))
    out["error"] = "none"
except ZeroDivisionError:
    out["error"] = "ZeroDivisionError"
out["can_fork_after_error"] = can_fork()
print(json.dumps(out))
"""


def test_the_fork_backend_keeps_its_promises(tmp_path):
    """Forked workers hold this process's modules (loky's fresh ones do not); while another
    thread runs, fork runs as loky; a shared_workers block serves its calls from one pair of
    workers (a nested block adds nothing, another worker count is not served), which end with
    it; a task's error reaches the caller; after each call no worker thread is left behind."""
    import json
    import subprocess

    if not sys.platform.startswith("linux"):
        pytest.skip("the fork backend forks on Linux only")
    (tmp_path / "only_here.py").write_text("VALUE = 1\n")
    done = subprocess.run(
        [sys.executable, "-c", FORK_CHECKS, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {
        "can_fork": True,
        "default_forks": True,
        "fork_pids": 2,
        "can_fork_after_call": True,
        "loky_fresh": True,
        "can_fork_with_thread": False,
        "thread_runs_as_loky": True,
        "block_pids": 2,
        "block_forks": True,
        "nested_same": True,
        "other_count_loky": True,
        "block_ended": True,
        "after_block_new": True,
        "error": "ZeroDivisionError",
        "can_fork_after_error": True,
    }


def test_dask_cluster_gives_bit_identical_bootstrap_intervals(reference, study, cluster):
    """Two Dask worker processes, reached by the scheduler's address: the same replicates,
    jackknife, percentile and BCa intervals, bit for bit."""
    runs, fit = study
    on_dask = block_bootstrap(runs, fit, backend="dask", scheduler=cluster.scheduler_address, **BOOT)
    assert_same_bootstrap(reference, on_dask)


def test_dask_uses_the_client_running_in_this_process(cluster):
    from distributed import Client

    tasks = [(i, i + 1) for i in range(6)]
    with Client(cluster) as client:
        got = list(parallel_map(pow, tasks, backend="dask"))
        assert client.status == "running"  # the running client is used, not closed
    assert got == [pow(*t) for t in tasks]


def test_wild_test_is_the_same_on_dask_and_in_this_process(study, cluster, monkeypatch):
    """The wild tables split over two tasks (n_jobs=2) on the cluster, or refitted in this process."""
    import phifit.bootstrap.wild as wild

    monkeypatch.setattr(wild, "MIN_ROWS_PER_JOB", 10)  # split 40 tables, not only 200 or more
    runs, fit = study
    phi0 = fit_huber(runs, spec=LawSpec(fixed={"phi": 0.0}), options=HuberOptions(n_starts=60, seed=0))
    kw = {"n_boot": 40, "seed": 5, "n_jobs": 2}
    here = wild_cluster_test(runs, fit, phi0, backend="sequential", **kw)
    there = wild_cluster_test(runs, fit, phi0, backend="dask", scheduler=cluster.scheduler_address, **kw)
    assert here.to_dict() == there.to_dict() and here.n_ok > 0


def test_planner_simulations_are_the_same_on_dask(cluster):
    from phifit.plan.design import NoiseModel, resolve_design, simulate_plan
    from phifit.study import REFERENCE_PARAMS

    design = resolve_design("paper", None)
    kw = {"n_tables": 2, "n_boot": 10, "n_wild": 20, "n_starts": 30, "seed": 4, "progress": False}
    noise = NoiseModel(0.005, 0.0, "given")
    here = simulate_plan(design, REFERENCE_PARAMS, noise, backend="sequential", **kw)
    there = simulate_plan(
        design, REFERENCE_PARAMS, noise, backend="dask", scheduler=cluster.scheduler_address, **kw
    )
    assert here.tables == there.tables


@pytest.mark.parametrize("entry", ["check_backend", "parallel_map", "block_bootstrap", "wild_cluster_test"])
def test_an_unknown_backend_is_refused_listing_the_valid_ones(study, entry):
    runs, fit = study
    calls = {
        "check_backend": lambda: check_backend("spark"),
        "parallel_map": lambda: parallel_map(pow, [(2, 3)], backend="spark"),
        "block_bootstrap": lambda: block_bootstrap(runs, fit, n_boot=5, backend="spark"),
        "wild_cluster_test": lambda: wild_cluster_test(runs, fit, fit, backend="spark"),
    }
    with pytest.raises(
        ValueError, match="unknown backend 'spark'; expected one of fork, loky, threading, sequential, dask"
    ):
        calls[entry]()


def test_a_scheduler_needs_the_dask_backend():
    with pytest.raises(ValueError, match="scheduler address needs backend 'dask', not 'fork'"):
        check_backend(None, "tcp://127.0.0.1:8786")


def test_a_missing_dask_distributed_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'dask\[distributed\]'") as err:
        check_backend("dask")
    assert str(err.value) == DASK_MISSING


def test_the_cli_takes_backend_and_scheduler_and_refuses_bad_ones(capsys):
    from phifit.cli.main import build_parser, main

    table = str(ROOT / "data" / "cpu_small_runs.csv")
    parser = build_parser()
    for command in ("fit", "compare", "report", "plan"):
        first = (
            [table] if command in ("fit", "compare") else [table, "--out", "x"] if command == "report" else []
        )
        args = parser.parse_args(
            [command, *first, "--backend", "dask", "--scheduler", "tcp://127.0.0.1:8786"]
        )
        assert (args.backend, args.scheduler) == ("dask", "tcp://127.0.0.1:8786")
        assert parser.parse_args([command, *first]).backend is None
    assert main(["fit", table, "--bootstrap", "20", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.strip() == "phifit fit: error: --scheduler needs --backend dask"
    with pytest.raises(SystemExit) as exit_code:
        parser.parse_args(["compare", table, "--backend", "spark"])
    assert exit_code.value.code == 2 and "invalid choice: 'spark'" in capsys.readouterr().err
    assert (
        main(["fit", table, "--starts", "40", "--bootstrap", "10", "--backend", "sequential", "--quiet"]) == 0
    )
