"""The candidate runs :func:`phifit.plan.next_runs.choose_next` picks from (``phifit plan --pool``)."""

from __future__ import annotations

import os

import pandas as pd


def load_pool(pool: str) -> tuple[pd.DataFrame, str]:
    """The candidate runs named by ``pool`` and their source: a CSV of runs (with budget, r, n_once,
    n_rec, tokens, flops; other columns kept), or a sweep spec (a .toml path or a bundled name),
    whose planned runs carry their run ids (:func:`phifit.plan.inputs.design_from_spec`).  A missing
    CSV raises ``FileNotFoundError``."""
    from .inputs import design_from_spec

    if pool.endswith(".csv"):
        if not os.path.isfile(pool):
            raise FileNotFoundError(f"{pool}: no such file (--pool)")
        return pd.read_csv(pool), pool
    return design_from_spec(pool).frame, pool
