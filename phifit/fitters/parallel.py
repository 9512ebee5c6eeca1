"""Where parallel work runs: one setting for bootstrap refits, wild cluster tests and planner simulations.

The setting is a worker count and a backend:

- ``n_jobs``: None = :func:`phifit.defaults.workers` (the cores this process may use); a
  positive count; a negative count as joblib reads it (-1 = all cores);
- ``backend``: None = :data:`phifit.defaults.BACKEND`; one of :data:`phifit.defaults.BACKENDS`:

  - ``"loky"``: joblib's worker processes (kept between calls).  Processes, not threads: the
    LM's many small NumPy calls hold the GIL, so threads barely overlap (CPU baseline, 1,000
    replicates, 2 idle cores: threads 5.0 s, worker processes 3.6 s with their start-up,
    2.0 s once started);
  - ``"threading"``: joblib's threads in this process;
  - ``"sequential"``: every task in this process, one after the other;
  - ``"dask"``: the workers of a ``dask.distributed`` cluster; ``scheduler`` is its address
    (``"tcp://host:8786"``).  Without one, the client already running in this process, else a
    new ``dask.distributed.Client()`` (dask's default: its configured scheduler address, or a
    local cluster), closed again after the call.  ``n_jobs`` still decides how the callers cut
    the work into tasks; the cluster's workers decide how many run at once.

Callers cut their work into tasks from ``n_jobs`` and their own chunk sizes only, never from
the backend, and every task is a pure function of its arguments (its random numbers are drawn
up front), so the numbers do not depend on the backend: :func:`parallel_map` returns the
results in task order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .. import defaults

T = TypeVar("T")

#: The message of a missing ``dask.distributed``.
DASK_MISSING = "backend 'dask' needs dask.distributed: pip install 'dask[distributed]'"


def check_backend(backend: str | None, scheduler: str | None = None) -> str:
    """The backend to use: ``backend``, or :data:`phifit.defaults.BACKEND` for None.

    ``ValueError`` for an unknown name (listing :data:`phifit.defaults.BACKENDS`) or a
    ``scheduler`` given with a backend other than "dask"; ``ImportError`` naming the install
    when "dask" is asked for without ``dask.distributed``.
    """
    name = defaults.BACKEND if backend is None else backend
    if name not in defaults.BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(defaults.BACKENDS)}")
    if scheduler is not None and name != "dask":
        raise ValueError(f"a scheduler address needs backend 'dask', not {name!r}")
    if name == "dask":
        try:
            import dask.distributed  # noqa: F401
        except ImportError as err:
            raise ImportError(DASK_MISSING) from err
    return name


@contextmanager
def dask_client(scheduler: str | None) -> Iterator[Any]:
    """A ``dask.distributed.Client``: connected to ``scheduler``; for None the client running in
    this process, else ``Client()`` (dask's default).  A client made here is closed on exit."""
    try:
        from dask.distributed import Client, default_client
    except ImportError as err:
        raise ImportError(DASK_MISSING) from err
    running = None
    if scheduler is None:
        try:
            running = default_client()
        except ValueError:  # no client in this process
            running = None
    if running is not None:
        yield running
        return
    with Client(scheduler) as client:
        yield client


def parallel_map(
    fn: Callable[..., T],
    tasks: Iterable[tuple],
    *,
    n_jobs: int | None = None,
    backend: str | None = None,
    scheduler: str | None = None,
) -> Iterator[T]:
    """``fn(*task)`` for every task, yielded in task order (module docstring for the setting).

    ``loky`` and ``threading`` with one worker, or with a single task, run it in this process
    (the same numbers, without a worker's start-up); ``dask`` always sends the tasks to the
    cluster.  ``fn`` and the tasks' arguments must pickle (cloudpickle) for processes.  The
    setting is checked here (:func:`check_backend`), before any task runs.
    """
    name = check_backend(backend, scheduler)
    tasks = list(tasks)
    workers = defaults.resolve_workers(n_jobs)
    if name == "dask":
        return _dask_map(fn, tasks, scheduler)
    if name == "sequential" or workers == 1 or len(tasks) <= 1:
        return (fn(*task) for task in tasks)
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=workers, backend=name, return_as="generator")
    return parallel(delayed(fn)(*task) for task in tasks)


def _dask_map(fn: Callable[..., T], tasks: list[tuple], scheduler: str | None) -> Iterator[T]:
    with dask_client(scheduler) as client:
        # pure=False: no hashing of the arguments (the tasks are distinct by construction)
        futures = [client.submit(fn, *task, pure=False) for task in tasks]
        for future in futures:
            yield future.result()


__all__ = ["DASK_MISSING", "check_backend", "dask_client", "parallel_map"]
