"""The on-disk cache of nutpie's compiled model (phifit.fitters.bayes.backends).

A fit in a fresh process compiles and saves the model under $PHIFIT_CACHE_DIR/nutpie; a
second fresh process loads it (no Numba compile) and gives the same posterior; a
corrupted entry is refused by its checksum, and an unusable entry is compiled again and
replaced; another structure has another key.  Real sampling with tiny draws; the
processes share one temporary cache folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nutpie")
pytest.importorskip("numba")

from phifit.fitters.bayes import backends  # noqa: E402
from phifit.fitters.bayes.model import model_data  # noqa: E402
from phifit.law import LawSpec  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys
import numpy as np
from phifit.fitters.bayes import backends, fit_bayes
from phifit.law import REFERENCE_PARAMS
from phifit.runs.table import table_from_frame
from phifit.simulation import simulate

frame = simulate("paper", params={**REFERENCE_PARAMS, "phi": 0.46}, noise=0.005, seed=1)
res = fit_bayes(table_from_frame(frame, source="t"), draws=40, tune=40, chains=2, seed=3,
                sampler="nutpie", progress=False)
info = {k: v for k, v in backends.LAST_COMPILE.items()}
print("RESULT" + json.dumps({"info": info, "cached": res.extras["compile_cached"],
                             "params": res.params}))
"""


def _fit(cache: Path) -> dict:
    """One fit in a fresh process whose nutpie entries live in ``cache``.  PyTensor's own Numba
    cache of the graph's operations (``<base_compiledir>/numba``) stays the suite's: what is
    tested is nutpie's compiled model, which phifit saves and loads, and a fresh operation cache
    would only add half a minute of compiling that every other Bayesian test shares."""
    from phifit.cache import cache_dir

    env = {**os.environ, "PHIFIT_CACHE_DIR": str(cache)}
    env.pop(backends.DISK_CACHE_ENV, None)
    if "base_compiledir" not in env.get("PYTENSOR_FLAGS", ""):
        flags = env.get("PYTENSOR_FLAGS", "").strip()
        entry = f"base_compiledir={cache_dir('pytensor')}"
        env["PYTENSOR_FLAGS"] = f"{flags},{entry}" if flags else entry
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = [s for s in out.stdout.splitlines() if s.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT") :])


def _close(a: dict, b: dict) -> bool:
    return all(np.isclose(a[k], b[k], rtol=1e-6, atol=1e-12) for k in a if np.isfinite(a[k]))


def test_compiled_model_is_reused_across_processes(tmp_path):
    first = _fit(tmp_path)
    assert first["info"]["cache"] == "miss" and not first["cached"]
    assert "reason" not in first["info"], first["info"]
    entry = Path(first["info"]["path"])
    assert entry.is_file() and entry.parent == tmp_path / backends.DISK_CACHE_SUB

    second = _fit(tmp_path)
    assert second["info"]["cache"] == "hit" and second["cached"]
    assert second["info"]["key"] == first["info"]["key"]
    assert second["info"]["seconds"] < first["info"]["seconds"]
    # same seed, same code: the same posterior (the loaded code may differ from the
    # freshly linked one in the last bits, so not bit-for-bit)
    assert _close(second["params"], first["params"])

    # a corrupted entry is refused by its checksum: the bytes on disk never reach Numba
    raw = bytearray(entry.read_bytes())
    raw[len(raw) // 2 : len(raw) // 2 + 64] = b"\0" * 64
    entry.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="corrupt"):
        backends.load_compiled(entry, None, {}, _entry_parts(entry))


def _entry_parts(entry: Path) -> dict:
    """The key parts an entry records (what :func:`backends.load_compiled` compares first)."""
    import pickle

    head, _ = pickle.loads(entry.read_bytes())
    return head["parts"]


def test_an_unusable_entry_is_compiled_again_and_replaced(tmp_path, paper_noisy, monkeypatch):
    """``compiled_model`` never fails on a bad entry: it says why the entry was not used, compiles
    and saves the new model over it.  Building, compiling and saving are stood in for (the real
    ones run in the cross-process test above, whose second process loads what the first saved);
    what is checked is the path a bad entry takes."""
    import nutpie

    monkeypatch.setenv("PHIFIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(backends.DISK_CACHE_ENV, raising=False)
    monkeypatch.setattr(backends, "_NUTPIE_CACHE", {})
    spec = LawSpec()
    data = model_data(paper_noisy, spec)
    digest, _ = backends.disk_key(data, spec)
    entry = tmp_path / backends.DISK_CACHE_SUB / f"{digest}.pkl"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"not a pickle")

    class Compiled:
        shared_data = dict.fromkeys(data)

        def with_data(self, **kw):
            return self

    compiled, saved = Compiled(), []
    monkeypatch.setattr(backends, "build_model", lambda data, spec: None)  # PyTensor's own cache untouched
    monkeypatch.setattr(nutpie, "compile_pymc_model", lambda model, **kw: compiled)
    monkeypatch.setattr(backends, "save_compiled", lambda path, c, parts: saved.append((Path(path), c)))
    got, info = backends.compiled_model(data, spec)
    assert got is compiled and info["cache"] == "miss"
    assert info["reason"].startswith("cache entry not used: UnpicklingError")
    assert saved == [(entry, compiled)]  # the new model replaces the bad entry
    # the next call in this process takes the model from memory
    assert backends.compiled_model(data, spec)[1] == {"cache": "memory"}


def test_disk_key_depends_on_structure_and_versions(paper_noisy, monkeypatch):
    free = LawSpec()
    fixed = LawSpec(fixed={"phi": 0.0})
    key_free, parts = backends.disk_key(model_data(paper_noisy, free), free)
    key_fixed, _ = backends.disk_key(model_data(paper_noisy, fixed), fixed)
    assert key_free != key_fixed
    # the run count is not part of the key (shapes are read at run time)
    fewer = paper_noisy.subset(np.arange(len(paper_noisy)) < 80)
    assert backends.disk_key(model_data(fewer, free), free)[0] == key_free
    # another nutpie / numba version: another key
    monkeypatch.setattr(backends, "_version", lambda p: "0.0-other")
    assert backends.disk_key(model_data(paper_noisy, free), free)[0] != key_free
    assert set(parts["versions"]) == set(backends._KEY_PACKAGES)


def test_tables_of_up_to_32_cells_share_one_compiled_cell_model(paper_noisy):
    """The cell model's z_cell is padded to 32 slots (then 64, ...), so a table of 6 cells and one of
    24 share a key (one compile), and a table of 40 cells has another."""
    spec = LawSpec()
    codes = {n: np.arange(len(paper_noisy)) % n for n in (6, 24, 32, 40)}
    keys = {n: backends.disk_key(model_data(paper_noisy, spec, cell=c), spec)[0] for n, c in codes.items()}
    assert keys[6] == keys[24] == keys[32] != keys[40]
    assert keys[6] != backends.disk_key(model_data(paper_noisy, spec), spec)[0]  # the independent-runs model


def test_a_stale_entry_is_refused(tmp_path, paper_noisy):
    """An entry whose recorded key parts differ (e.g. written by other versions) raises."""
    import pickle

    head = {"format": backends.DISK_FORMAT, "parts": {"other": 1}, "sha256": ""}
    path = tmp_path / "x.pkl"
    path.write_bytes(pickle.dumps((head, b"")))
    with pytest.raises(ValueError, match="another model"):
        backends.load_compiled(path, None, {}, {"mine": 1})


def test_disk_cache_switch(monkeypatch):
    monkeypatch.setenv(backends.DISK_CACHE_ENV, "0")
    assert not backends.disk_cache_enabled()
    monkeypatch.setenv(backends.DISK_CACHE_ENV, "1")
    assert backends.disk_cache_enabled()
