"""Where parallel work runs: one setting for bootstrap refits, wild cluster tests and planner simulations.

The setting is a worker count and a backend:

- ``n_jobs``: None = :func:`phifit.defaults.workers` (the cores this process may use); a
  positive count; a negative count as joblib reads it (-1 = all cores);
- ``backend``: None = :data:`phifit.defaults.BACKEND`; one of :data:`phifit.defaults.BACKENDS`:

  - ``"fork"`` (the default): worker processes forked from this one.  A forked worker starts
    with this process's modules already imported and its state as it is at the fork, so it
    skips the start-up of a fresh interpreter (NumPy, SciPy, pandas and phifit imported again,
    CPU time that a CPU-bound analysis pays in wall time; docs/benchmarks.md, 'Workers forked,
    not started' and 'Figures once kept in docstrings').  Inside
    :func:`shared_workers` (a whole report's analysis) the workers are forked once, at its first
    parallel call, and serve every call until it ends; outside it each call forks its own and
    ends them once its results are read.  Off Linux (Windows has no fork; on macOS a forked
    child may not call the system's BLAS safely), or while this process runs other Python
    threads (a notebook's kernel, a Dask client: fork copies only the calling thread, and a lock
    another thread holds would stay held in the worker), it runs as ``"loky"``, with the same
    numbers;
  - ``"loky"``: joblib's worker processes (fresh interpreters, kept between calls).  Processes,
    not threads: the LM's many small NumPy calls hold the GIL, so threads barely overlap
    (docs/benchmarks.md, 'Figures once kept in docstrings');
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

Forked workers end with this process, whatever ends it.  Each asks the kernel, as it starts, for
SIGKILL once its parent is gone (Linux's ``prctl(PR_SET_PDEATHSIG)``), and exits at once if the
parent is already gone; without that, a parent killed by SIGTERM or SIGKILL left its workers
blocked on their task pipe for ever (each holds the pipe's write end too, so it never reads an
end of file).  A block or call left by an exception (KeyboardInterrupt, or the SIGTERM that
``phifit report`` turns into one) kills its workers rather than waiting for their tasks.  loky's
workers, which would otherwise outlive a killed parent until their idle timeout, watch it and
leave within a second of it (:func:`_watch_parent`); the processes of a local Dask cluster made
for a call end with it on their own, and a cluster at a scheduler address outlives this process
by design.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
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

    ``fork``, ``loky`` and ``threading`` with one worker, or with a single task, run it in this process
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
    if name == "fork":
        if _shared is not None and _shared[0] == workers:
            return _results(_shared[1], fn, tasks)
        if can_fork():
            return _own_pool_map(fn, tasks, workers)
        name = "loky"
    from joblib import Parallel, delayed, parallel_config

    if name == "loky":  # its workers leave once this process is gone (_watch_parent)
        with parallel_config(backend="loky", initializer=_watch_parent, initargs=(os.getpid(),)):
            parallel = Parallel(n_jobs=workers, return_as="generator")
    else:
        parallel = Parallel(n_jobs=workers, backend=name, return_as="generator")
    return parallel(delayed(fn)(*task) for task in tasks)


def can_fork() -> bool:
    """Whether the ``"fork"`` backend forks here: on Linux (macOS has fork, but its system
    libraries, Accelerate's BLAS among them, are not safe in a forked child, which is why Python
    starts processes there by spawning them) and while this process runs no other Python thread
    (module docstring)."""
    return (
        sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    )


#: The workers of the :func:`shared_workers` block running now: (count, executor), or None.
_shared: tuple[int, ProcessPoolExecutor] | None = None


@contextmanager
def shared_workers(
    n_jobs: int | None = None, backend: str | None = None, scheduler: str | None = None
) -> Iterator[None]:
    """A block whose parallel calls with the ``"fork"`` backend and ``n_jobs`` workers share one
    set of forked workers (forked at the block's first such call, ended when the block ends),
    instead of forking their own: a report's many calls then fork twice, not twice per call, and
    a module a worker imports (statsmodels, for the diagnostics) is imported once.  The tasks
    queue in the order they are submitted, across calls.  It does nothing for other backends,
    one worker, inside another such block, or where the backend would fall back to loky
    (:func:`can_fork`).  The workers hold this process's state at the fork: change no module
    setting inside the block that a task reads."""
    global _shared
    workers = defaults.resolve_workers(n_jobs)
    name = check_backend(backend, scheduler)
    if name != "fork" or workers == 1 or _shared is not None or not can_fork():
        yield
        return
    executor = _forked(workers)
    _shared = (workers, executor)
    try:
        yield
    except BaseException:
        _shared = None
        _kill_workers(executor)
        try:
            executor.shutdown(wait=True, cancel_futures=True)
        except RuntimeError:
            # a signal (SIGINT, or SIGTERM as phifit report raises it) that lands inside the executor's
            # first submit can leave its manager thread created but not started, which shutdown cannot
            # join; the workers are killed already, and the signal's exception must be the one raised
            pass
        raise
    _shared = None
    executor.shutdown(wait=True, cancel_futures=True)


def _forked(workers: int) -> ProcessPoolExecutor:
    """An executor of ``workers`` forked processes (forked at its first task, all at once: before
    its manager thread starts, so no fork happens beside a thread of its own), each ending with
    this process (:func:`_die_with_parent`)."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_die_with_parent,
        initargs=(os.getpid(),),
    )


#: ``prctl``'s option that names the signal a process gets when its parent ends (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """First thing in a forked worker: SIGKILL from the kernel once ``parent`` (the pid of the
    process that forked it, read before the fork) is gone, and an exit now if it is gone already
    (it died between the fork and the ``prctl`` call, so the kernel will not signal).

    The kernel sends the signal when the *thread* that forked the worker ends; the executor forks
    its workers from the thread that submits the first task, here always the main thread
    (:func:`can_fork` forks only while no other thread runs)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl (fork is used on Linux only)
        pass
    if os.getppid() != parent:
        os._exit(1)
    # a worker ends on SIGTERM, whatever handler the parent had when it forked (phifit report's
    # raises KeyboardInterrupt there, to clean up)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _watch_parent(parent: int, every: float = 1.0) -> None:
    """First thing in a loky worker: a daemon thread that ends the worker once ``parent`` (the
    process whose tasks it runs) is gone, checking every ``every`` seconds.  Left alone, a loky
    worker outlives a killed parent until its idle timeout (300 s by default) after the task it
    runs.  A thread, not ``prctl``: loky may start a worker from a thread of its own, and the
    kernel's signal follows the forking thread, not the process."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, name="phifit-watch-parent", daemon=True).start()


def _kill_workers(executor: ProcessPoolExecutor) -> None:
    """SIGKILL the executor's worker processes now, rather than waiting for the tasks they run
    (a block or call left by an exception: nobody reads those results)."""
    # the executor keeps its processes in ``_processes`` ({pid: Process}); Python 3.14's
    # ``kill_workers()`` is the public form of this
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        try:
            process.kill()
        except (OSError, ValueError):  # already reaped
            pass


def _call_pickled(blob: bytes) -> bytes:
    """Run ``fn(*task)`` from a cloudpickled (fn, task) in a worker; its result cloudpickled (a
    result may hold a closure, such as a law's model, that pickle cannot carry)."""
    import cloudpickle

    fn, task = cloudpickle.loads(blob)
    return cloudpickle.dumps(fn(*task))


def _results(executor: ProcessPoolExecutor, fn: Callable[..., T], tasks: list[tuple]) -> Iterator[T]:
    """Submit every task now (cloudpickled, as :func:`_call_pickled` reads them), then yield
    their results in task order."""
    import cloudpickle

    futures = [executor.submit(_call_pickled, cloudpickle.dumps((fn, task))) for task in tasks]
    return (cloudpickle.loads(future.result()) for future in futures)


def _own_pool_map(fn: Callable[..., T], tasks: list[tuple], workers: int) -> Iterator[T]:
    """The tasks on ``workers`` processes forked for this call, ended once the results are read
    (or the generator is closed)."""
    executor = _forked(min(workers, len(tasks)))
    try:
        results = _results(executor, fn, tasks)
    except BaseException:
        _kill_workers(executor)
        executor.shutdown(wait=True, cancel_futures=True)
        raise

    def read() -> Iterator[T]:
        try:
            yield from results
        except GeneratorExit:  # closed early by its reader: the running tasks end as usual
            raise
        except BaseException:
            _kill_workers(executor)
            raise
        finally:
            executor.shutdown(wait=True, cancel_futures=True)

    return read()


def _dask_map(fn: Callable[..., T], tasks: list[tuple], scheduler: str | None) -> Iterator[T]:
    with dask_client(scheduler) as client:
        # pure=False: no hashing of the arguments (the tasks are distinct by construction)
        futures = [client.submit(fn, *task, pure=False) for task in tasks]
        for future in futures:
            yield future.result()


__all__ = ["DASK_MISSING", "can_fork", "check_backend", "dask_client", "parallel_map", "shared_workers"]
