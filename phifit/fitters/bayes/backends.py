"""The two NUTS implementations behind the Bayesian fit: nutpie and PyMC's own.

``sampler="auto"`` uses nutpie when importable, else PyMC's NUTS, which always works.

- nutpie compiles the model with Numba once per spec *structure*
  (:func:`~.model.model_structure`: which parameters are free, the box, the number of
  cell effects); the run
  table, the whitening and the fixed values are data, so a new table, or phi = 1 after
  phi = 0, only swaps data (nutpie's ``with_data``).  The compiled logp/gradient and
  expand functions are also kept on disk (:func:`save_compiled`, :func:`load_compiled`),
  so a later *process* skips Numba's compilation too (its cost: docs/benchmarks.md, 'Figures
  once kept in docstrings'): the machine code of the two C callbacks (Numba's object code),
  the layout nutpie needs, and a self-check, in
  ``<cache root>/nutpie/<key>.pkl`` (:func:`phifit.cache.cache_dir`).  The key hashes
  the structure, the data's names/dtypes/ranks, the variables kept, the versions of
  Python, phifit, nutpie, numba, llvmlite, PyMC, PyTensor, NumPy and SciPy, the CPU
  (Numba's ``magic_tuple``) and the source of the model's modules; an entry that is
  unreadable, stale or fails its self-check is compiled again and replaced.
  ``PHIFIT_BAYES_CACHE=0`` turns the disk cache off.
- PyMC's sampler compiles C code, cached on disk in PyTensor's compile directory
  (phifit's cache, :func:`phifit.cache.use_pytensor_cache`), so later processes compile
  faster.

Each backend returns :class:`SamplerOutput`: posterior arrays of
:func:`~.model.stored_vars`, (chain, draw) each (cell_effect: (chain, draw, cell)), and the
sampler statistics phifit reports.

One module on purpose: the two samplers and the cross-process cache of nutpie's compiled
model are the one step "run NUTS on this model", and the cache is only valid for what this
module compiles.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import json
import os
import pickle
import sys
import time
import warnings as _warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...cache import cache_dir, use_pytensor_cache, write_atomic
from ...extras import import_optional
from ...law import LawSpec
from .model import build_model, model_structure, n_cells, stored_vars

SAMPLERS = ("auto", "nutpie", "pymc")
_NUTPIE_CACHE: dict[tuple, Any] = {}
#: Environment variable: "0", "off", "no" or "false" turns the on-disk compiled-model cache off.
DISK_CACHE_ENV = "PHIFIT_BAYES_CACHE"
#: Sub-folder of phifit's cache root that holds the compiled nutpie models.
DISK_CACHE_SUB = "nutpie"
#: Layout of a cache entry; bump it when the entry's content changes.
DISK_FORMAT = 1
#: The packages whose versions key the disk cache.
_KEY_PACKAGES = ("nutpie", "numba", "llvmlite", "pymc", "pytensor", "numpy", "scipy")
#: Modules whose source shapes the compiled graph (a change there invalidates the cache).
_KEY_SOURCES = ("model.py", "coords.py", "../../law.py")
#: How the last nutpie compile went in this process (see :func:`sample_nutpie`).
LAST_COMPILE: dict[str, Any] = {}


@dataclass(frozen=True)
class SamplerOutput:
    """Draws and statistics of one sampler run.

    ``posterior``: {a, alpha, b, beta, e, phi, sigma, nu} -> (chain, draw) arrays;
    ``stats``: {diverging, lp, tree_depth, energy, step_size, n_steps} -> (chain, draw);
    ``compile_s`` / ``sampling_s``: seconds; ``compile_cached``: the compiled model was
    reused (from earlier in this process, or from phifit's disk cache);
    ``compile_info``: {"cache": "memory" | "hit" | "miss" | "off", "seconds", "key",
    "path", "reason" (why an entry was not used or not saved, if so)}; empty for PyMC.
    """

    posterior: dict[str, np.ndarray]
    stats: dict[str, np.ndarray]
    compile_s: float
    sampling_s: float
    compile_cached: bool
    compile_info: dict[str, Any] = field(default_factory=dict)


def nutpie_available() -> bool:
    """True when nutpie (and numba) can be imported."""
    try:
        import numba  # noqa: F401
        import nutpie  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_sampler(sampler: str) -> str:
    """The backend ``sampler`` names: "nutpie" or "pymc" (``"auto"``: nutpie when installed)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; expected one of {', '.join(SAMPLERS)}")
    if sampler == "auto":
        return "nutpie" if nutpie_available() else "pymc"
    if sampler == "nutpie" and not nutpie_available():
        import_optional("nutpie", "bayes", "sampler 'nutpie'")  # MissingExtraError when nutpie is absent
        raise ImportError("sampler='nutpie' needs numba: pip install numba (or use sampler='pymc')")
    return sampler


def require_backends(feature: str = "method 'bayes' (the Bayesian fit)") -> None:
    """PyMC and ArviZ import (after PyTensor's cache is set, as :func:`.model.build_model` does), or
    :class:`phifit.extras.MissingExtraError` naming ``feature`` and ``pip install 'phifit[bayes]'``."""
    use_pytensor_cache()
    import_optional("pymc", "bayes", feature)
    import_optional("arviz", "bayes", feature)


def sample_nutpie(
    data: Mapping[str, np.ndarray], spec: LawSpec, *, draws, tune, chains, seed, target_accept, progressbar
) -> SamplerOutput:
    """nutpie's NUTS; the compiled model is kept per spec structure in this process and on disk."""
    nutpie = import_optional("nutpie", "bayes", "sampler 'nutpie'")

    t0 = time.perf_counter()
    compiled, info = compiled_model(data, spec)
    compile_s = time.perf_counter() - t0
    info["seconds"] = compile_s
    LAST_COMPILE.clear()
    LAST_COMPILE.update(info)
    t0 = time.perf_counter()
    trace = nutpie.sample(
        compiled,
        draws=draws,
        tune=tune,
        chains=chains,
        seed=seed,
        target_accept=target_accept,
        progress_bar=progressbar,
        save_warmup=False,
        cores=min(chains, os.cpu_count() or 1),
    )
    sampling_s = time.perf_counter() - t0
    post, stats = draws_and_stats(
        trace, stored_vars(data), lp="logp", tree_depth="depth", cells=n_cells(data)
    )
    cached = info["cache"] in ("memory", "hit")
    return SamplerOutput(post, stats, compile_s, sampling_s, cached, dict(info))


def disk_cache_enabled() -> bool:
    """False when ``$PHIFIT_BAYES_CACHE`` is "0", "off", "no" or "false"."""
    return os.environ.get(DISK_CACHE_ENV, "").strip().lower() not in ("0", "off", "no", "false")


def compiled_model(data: Mapping[str, np.ndarray], spec: LawSpec) -> tuple[Any, dict[str, Any]]:
    """nutpie's compiled model of ``spec`` with ``data``, and how it was obtained.

    In order: this process's cache (``"memory"``), the disk cache (``"hit"``), else
    nutpie compiles it (``"miss"``, then saved to disk; ``"off"`` when the disk cache is
    off).  A disk entry that cannot be used is recompiled and replaced (``reason`` says why).
    """
    nutpie = import_optional("nutpie", "bayes", "sampler 'nutpie'")

    key = model_structure(spec, data)
    if key in _NUTPIE_CACHE:
        return _with_data(_NUTPIE_CACHE[key], data), {"cache": "memory"}
    use_disk = disk_cache_enabled()
    info: dict[str, Any] = {"cache": "miss" if use_disk else "off"}
    model = build_model(data, spec)
    path = None
    if use_disk:
        try:
            digest, parts = disk_key(data, spec)
            path = cache_dir(DISK_CACHE_SUB) / f"{digest}.pkl"
            info.update(key=digest, path=str(path))
            if path.is_file():
                compiled = load_compiled(path, model, data, parts)
                _NUTPIE_CACHE[key] = compiled
                info["cache"] = "hit"
                return compiled, info
        except Exception as err:  # noqa: BLE001 - a bad entry must never stop a fit
            info["reason"] = f"cache entry not used: {type(err).__name__}: {err}"
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        compiled = nutpie.compile_pymc_model(model, var_names=list(stored_vars(data)))
    _NUTPIE_CACHE[key] = compiled
    if path is not None:
        try:
            save_compiled(path, compiled, parts)
        except Exception as err:  # noqa: BLE001 - the fit goes on without the disk cache
            info["reason"] = f"not saved: {type(err).__name__}: {err}"
    return _with_data(compiled, data), info


def _with_data(compiled: Any, data: Mapping[str, np.ndarray]) -> Any:
    """``compiled`` with ``data`` swapped in, for the inputs its graph uses: a datum the spec leaves
    out of the graph (``c_d`` when the D-term is fixed, e.g. on a table with one token count) is no
    shared variable of the compiled model, and nutpie refuses unknown names."""
    return compiled.with_data(**{k: v for k, v in data.items() if k in compiled.shared_data})


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


def disk_key(data: Mapping[str, np.ndarray], spec: LawSpec) -> tuple[str, dict[str, Any]]:
    """The disk-cache key of ``spec``'s compiled model (a hex digest) and what it hashes.

    Structure, data names/dtypes/ranks (the run count is not baked into the code: shapes
    are read at run time, as with ``with_data`` in one process), the variables kept,
    versions, the CPU and the model's source (see the module docstring).
    """
    from numba.core.registry import cpu_target

    from ... import __version__

    here = Path(__file__).resolve().parent
    sources = {name: hashlib.sha256((here / name).read_bytes()).hexdigest() for name in _KEY_SOURCES}
    parts = {
        "format": DISK_FORMAT,
        "structure": repr(model_structure(spec, data)),
        "data": sorted([k, str(np.asarray(v).dtype), int(np.ndim(v))] for k, v in data.items()),
        "var_names": list(stored_vars(data)),
        "python": sys.version,
        "phifit": __version__,
        "versions": {p: _version(p) for p in _KEY_PACKAGES},
        "cpu": [str(x) for x in cpu_target.target_context.codegen().magic_tuple()],
        "sources": sources,
    }
    blob = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:40], parts


# -- the compiled C callbacks on disk ---------------------------------------------------------------


def _capsule_pointer(capsule) -> int:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, (ctypes.py_object,)
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)
    return int(get_pointer(capsule, get_name(capsule)) or 0)


def _capsule_table() -> dict[int, tuple[str, str]]:
    """Address -> (module, name) of every C function a loaded Cython module exports."""
    table = {}
    for mod_name, mod in list(sys.modules.items()):
        capi = getattr(mod, "__pyx_capi__", None)
        if not isinstance(capi, dict):
            continue
        for name, capsule in capi.items():
            try:
                table.setdefault(_capsule_pointer(capsule), (mod_name, name))
            except (TypeError, ValueError):
                continue
    return table


def _relocations(library) -> list[tuple[str, str, str, str]]:
    """How to rebuild each process-specific address ("dynamic global") the code embeds.

    PyTensor calls SciPy's Cython special functions (e.g. ``psi``) through their C
    pointers, which move between processes: ``("c", global, module, name)`` re-reads the
    pointer from ``module.__pyx_capi__[name]``; ``("py", ...)`` is the Python wrapper
    object of such a function (used by Numba only when the C pointer is null).  Any other
    dynamic address makes the library uncachable (ValueError).
    """
    names = list(library._dynamic_globals)
    if not names:
        return []
    table = _capsule_table()
    wanted = {int(n.rsplit(".", 1)[1], 16): n for n in names}
    found: dict[str, tuple[str, str, str, str]] = {}
    for addr, name in wanted.items():
        if addr in table:
            found[name] = ("c", name, *table[addr])
    missing = {a: n for a, n in wanted.items() if n not in found}
    if missing:
        for obj in gc.get_objects():
            name = missing.get(id(obj))
            if name is None or not hasattr(obj, "__wrapper_address__"):
                continue
            target = table.get(int(obj.__wrapper_address__()))
            if target is not None:
                found[name] = ("py", name, *target)
    unknown = [n for n in names if n not in found]
    if unknown:
        raise ValueError(f"the compiled code embeds process-specific addresses: {unknown}")
    return [found[n] for n in names]


class _CFunction:
    """A C function exported by a Cython module, standing in for PyTensor's wrapper object."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __wrapper_address__(self) -> int:
        return _capsule_pointer(self.capsule)


@dataclass
class LoadedCallback:
    """A compiled C callback loaded from the disk cache (nutpie only reads ``.address``)."""

    address: int
    library: Any
    keep_alive: list


def _load_callback(serialized, wrapper_name: str, relocations) -> LoadedCallback:
    """Numba's object code back into this process's JIT, its dynamic globals re-pointed."""
    import importlib

    from numba.core.registry import cpu_target

    codegen = cpu_target.target_context.codegen()
    library = codegen.unserialize_library(serialized)
    address = int(library.get_pointer_to_function(wrapper_name))
    keep = []
    for kind, gname, mod_name, name in relocations:
        capsule = importlib.import_module(mod_name).__pyx_capi__[name]
        if kind == "c":
            value = _capsule_pointer(capsule)
        else:
            keep.append(_CFunction(capsule))
            value = id(keep[-1])
        slot = codegen._engine.get_global_value_address(gname)
        if not slot or not value:
            raise ValueError(f"cannot re-point {gname}")
        ctypes.c_void_p.from_address(slot).value = value
    return LoadedCallback(address, library, keep)


def _call_logp(
    address: int, n_dim: int, user_data: np.ndarray, x: np.ndarray
) -> tuple[int, float, np.ndarray]:
    """Call nutpie's logp callback at ``x``: (return code, logp, gradient)."""
    fn = ctypes.CFUNCTYPE(
        ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
    )(address)
    x = np.ascontiguousarray(x, float)
    grad, logp = np.zeros(n_dim), np.zeros(())
    rc = fn(n_dim, x.ctypes.data, grad.ctypes.data, logp.ctypes.data, user_data.ctypes.data)
    return int(rc), float(logp), grad


def _check_point(n_dim: int) -> np.ndarray:
    return np.linspace(-0.3, 0.3, n_dim)


def save_compiled(path: Path, compiled, parts: Mapping[str, Any]) -> None:
    """Write nutpie's compiled model (its two C callbacks and layout) to ``path``, atomically.

    With it, a self-check: the logp and gradient at a fixed point for the data it was
    compiled with, which :func:`load_compiled` must reproduce exactly.
    """
    callbacks = {}
    for name in ("compiled_logp_func", "compiled_expand_func"):
        cfunc = getattr(compiled, name)
        library = cfunc._library
        callbacks[name] = (library.serialize_using_object_code(), cfunc.native_name, _relocations(library))
    n_dim = int(compiled.n_dim)
    x = _check_point(n_dim)
    rc, logp, grad = _call_logp(compiled.compiled_logp_func.address, n_dim, compiled.user_data, x)
    names, slices, shapes = compiled.shape_info
    payload = {
        "callbacks": callbacks,
        "n_dim": n_dim,
        "n_expanded": int(compiled.n_expanded),
        "shape_info": (list(names), list(slices), list(shapes)),
        "record_dtype": compiled.user_data.dtype,
        "shared": [(k, v.dtype.str, v.ndim) for k, v in compiled.shared_data.items()],
        "check": {"data": dict(compiled.shared_data), "x": x, "rc": rc, "logp": logp, "grad": grad},
    }
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    head = {"format": DISK_FORMAT, "parts": dict(parts), "sha256": hashlib.sha256(body).hexdigest()}
    write_atomic(path, pickle.dumps((head, body), protocol=pickle.HIGHEST_PROTOCOL))


def _user_data(dtype, shared: Mapping[str, np.ndarray]) -> np.ndarray:
    from nutpie.compile_pymc import update_user_data

    return update_user_data(np.zeros((), dtype=dtype), shared)


def load_compiled(path: Path, model, data: Mapping[str, np.ndarray], parts: Mapping[str, Any]):
    """nutpie's compiled model from a :func:`save_compiled` entry, with ``data``; raises if unusable.

    The PyMC ``model`` (built for ``data``) supplies what is cheap to rebuild: the
    initial-point function (nutpie's own construction, so the same seed gives the same
    draws) and the coords.  The entry must match ``parts`` and pass its self-check.
    """
    from nutpie import compile_pymc as ncp
    from pymc.initial_point import make_initial_point_fn

    head, body = pickle.loads(path.read_bytes())
    if head.get("format") != DISK_FORMAT or head.get("parts") != dict(parts):
        raise ValueError("entry made for another model or versions")
    if hashlib.sha256(body).hexdigest() != head.get("sha256"):
        raise ValueError("entry corrupt (checksum)")
    entry = pickle.loads(body)
    callbacks = {
        name: _load_callback(serialized, wrapper, relocs)
        for name, (serialized, wrapper, relocs) in entry["callbacks"].items()
    }
    n_dim, shape_info = entry["n_dim"], entry["shape_info"]
    check = entry["check"]
    rc, logp, grad = _call_logp(
        callbacks["compiled_logp_func"].address,
        n_dim,
        _user_data(entry["record_dtype"], check["data"]),
        check["x"],
    )
    same = rc == check["rc"] and np.array_equal(
        [logp, *grad], [check["logp"], *check["grad"]], equal_nan=True
    )
    if not same:
        raise ValueError("self-check failed: the loaded code computes another logp")
    shared = {}
    for name, dtype, ndim in entry["shared"]:
        value = np.array(data[name], dtype=dtype, order="C", copy=True)
        if value.ndim != ndim:
            raise ValueError(f"data {name!r} has rank {value.ndim}, the entry {ndim}")
        value.flags.writeable = False
        shared[name] = value
    n_free = len(model.free_RVs)
    names, _, shapes = shape_info
    if [model.rvs_to_values[v].name for v in model.free_RVs] != names[:n_free]:
        raise ValueError("free variables differ from the entry's")
    # nutpie's compile_pymc_model(model) with its defaults, as in compile_pymc_model
    point_fn = make_initial_point_fn(
        model=model,
        overrides=None,
        default_strategy="support_point",
        jitter_rvs=set(model.free_RVs),
        return_transformed=True,
    )
    point_fn = ncp._rv_dict_to_flat_array_wrapper(
        ncp._wrap_with_lock(point_fn), names=names[:n_free], shapes=shapes[:n_free]
    )
    dims, coords = ncp._prepare_dims_and_coords(model, shape_info)
    return ncp.CompiledPyMCModel(
        _n_dim=n_dim,
        dims=dims,
        _coords=coords,
        _shapes={name: tuple(shape) for name, shape in zip(names, shapes)},
        compiled_logp_func=callbacks["compiled_logp_func"],
        compiled_expand_func=callbacks["compiled_expand_func"],
        initial_point_func=point_fn,
        shared_data=shared,
        user_data=_user_data(entry["record_dtype"], shared),
        n_expanded=entry["n_expanded"],
        shape_info=shape_info,
        logp_func=None,
        expand_func=None,
    )


def sample_pymc(
    data: Mapping[str, np.ndarray], spec: LawSpec, *, draws, tune, chains, seed, target_accept, progressbar
) -> SamplerOutput:
    """PyMC's own NUTS; compile time is the total minus PyMC's reported sampling time."""
    pm = import_optional("pymc", "bayes", "method 'bayes' (the Bayesian fit)")

    t0 = time.perf_counter()
    model = build_model(data, spec)
    with model, _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        trace = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            random_seed=seed,
            target_accept=target_accept,
            progressbar=progressbar,
            cores=min(chains, os.cpu_count() or 1),
            var_names=list(stored_vars(data)),
            compute_convergence_checks=False,
            return_inferencedata=True,
        )
    total = time.perf_counter() - t0
    sampling_s = float(trace.posterior.attrs.get("sampling_time", total))
    post, stats = draws_and_stats(
        trace, stored_vars(data), lp="lp", tree_depth="tree_depth", cells=n_cells(data)
    )
    return SamplerOutput(post, stats, max(total - sampling_s, 0.0), sampling_s, False)


def draws_and_stats(
    trace, names: tuple[str, ...], *, lp: str, tree_depth: str, cells: int = 0
) -> tuple[dict, dict]:
    """Posterior arrays of the stored variables ``names`` and the sampler statistics phifit reports.

    ``cell_effect`` keeps its first ``cells`` entries, the table's cells (the model's further slots
    are no run's: :func:`.model.cell_slots`).  The two backends name two statistics differently
    (nutpie: ``logp``, ``depth``)."""
    post = {k: np.asarray(trace.posterior[k].values, float) for k in names}
    if "cell_effect" in post:
        post["cell_effect"] = post["cell_effect"][..., :cells]
    st = trace.sample_stats
    names = {
        "diverging": ("diverging", bool),
        "lp": (lp, float),
        "tree_depth": (tree_depth, int),
        "energy": ("energy", float),
        "step_size": ("step_size", float),
        "n_steps": ("n_steps", int),
    }
    stats = {key: np.asarray(st[name].values, kind) for key, (name, kind) in names.items()}
    return post, stats


def run_sampler(name: str, data: Mapping[str, np.ndarray], spec: LawSpec, **settings: Any) -> SamplerOutput:
    """Dispatch to :func:`sample_nutpie` or :func:`sample_pymc` by resolved ``name``.

    First points PyTensor at phifit's compile cache (importing PyMC imports PyTensor).
    """
    use_pytensor_cache()
    if name == "nutpie":
        return sample_nutpie(data, spec, **settings)
    if name == "pymc":
        return sample_pymc(data, spec, **settings)
    raise ValueError(f"unknown sampler backend {name!r}; expected 'nutpie' or 'pymc'")
