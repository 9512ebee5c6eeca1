"""Where parallel work runs (phifit.fitters.parallel): every backend gives the same numbers.

The bootstrap on the study's digitised table (116 runs, 24 (budget, r) cells) is run with the
default backend (joblib's worker processes), with threads, in this process alone, and on a
Dask cluster of two worker processes started here; its replicates, jackknife and intervals must
be bit-identical.  So must the wild cluster test and the planner's simulated tables.
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


def test_the_default_backend_is_loky_in_worker_processes(reference, study):
    runs, fit = study
    assert defaults.BACKEND == "loky" and check_backend(None) == "loky"
    explicit = block_bootstrap(runs, fit, backend="loky", **BOOT)
    assert_same_bootstrap(reference, explicit)
    assert np.isfinite(reference.ci["phi"]).all() and reference.n_failed < BOOT["n_boot"]


@pytest.mark.parametrize("backend", ["sequential", "threading"])
def test_local_backends_give_bit_identical_intervals(reference, study, backend):
    runs, fit = study
    assert_same_bootstrap(reference, block_bootstrap(runs, fit, backend=backend, **BOOT))


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
        ValueError, match="unknown backend 'spark'; expected one of loky, threading, sequential, dask"
    ):
        calls[entry]()


def test_a_scheduler_needs_the_dask_backend():
    with pytest.raises(ValueError, match="scheduler address needs backend 'dask', not 'loky'"):
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
