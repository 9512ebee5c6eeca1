"""Run tables drawn from a known law: the reference study's design, or your own.

The paper design is the study's grid (:func:`phifit.study.paper_design`: 116 runs,
its parameter split and FLOP accounting).
Noise is multiplicative: log L = log L_true + N(0, noise^2).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from . import defaults
from .law import JointLaw
from .study import DESIGNS, REFERENCE_PARAMS, paper_design


def simulate(
    design: pd.DataFrame | str = "paper",
    *,
    params: Mapping[str, float] | None = None,
    noise: float = 0.0,
    cell_noise: float = 0.0,
    noise_df: float | None = None,
    seed: int = defaults.SEED,
) -> pd.DataFrame:
    """A run table with losses from a known joint law.

    The loss of run i in cell c (its ``budget`` and ``r``) is

        log L_i = log L_true,i + u_c + e_i,
        u_c ~ N(0, cell_noise^2)  (shared by every run of the cell),
        e_i ~ N(0, noise^2), or noise * t_df / sqrt(df / (df - 2)) with ``noise_df``

    so ``noise`` is always the standard deviation of the per-run part.  Real sweeps
    share noise within a (budget, r) cell (one data order, one seed, one learning-rate
    choice per cell): ``cell_noise > 0`` reproduces that.

    Parameters
    ----------
    design
        ``"paper"`` or a frame with columns r, n_once, n_rec, tokens (others kept;
        ``budget`` is needed for ``cell_noise``).
    params
        {E, A, alpha, B, beta, phi}; missing entries default to the study's joint fit.
    noise
        Standard deviation of the per-run multiplicative noise (on log-loss).
    cell_noise
        Standard deviation of the noise shared within a (budget, r) cell (on log-loss).
    noise_df
        Degrees of freedom (> 2) of Student-t per-run noise; None: Gaussian.
    seed
        Seed of the noise.
    """
    if isinstance(design, str):
        if design not in DESIGNS:
            raise ValueError(
                f"unknown design {design!r}; expected one of {', '.join(DESIGNS)} "
                f"or a CSV of r, n_once, n_rec, tokens"
            )
        frame = paper_design()
    else:
        frame = design.copy()
    if noise < 0 or cell_noise < 0:
        raise ValueError(f"noise and cell_noise must be >= 0, got {noise} and {cell_noise}")
    if noise_df is not None and not noise_df > 2:
        raise ValueError(f"noise_df must be > 2 (a finite variance), got {noise_df}")
    if cell_noise > 0 and "budget" not in frame:
        raise ValueError("cell_noise needs a budget column: cells are (budget, r)")
    law = JointLaw.from_params({**REFERENCE_PARAMS, **(params or {})})
    clean = law.loss(r=frame["r"], n_once=frame["n_once"], n_rec=frame["n_rec"], tokens=frame["tokens"])
    rng = np.random.default_rng(seed)
    n = len(frame)
    if noise_df is None:
        per_run = rng.standard_normal(n)
    else:
        per_run = rng.standard_t(noise_df, n) / np.sqrt(noise_df / (noise_df - 2))
    log_noise = noise * per_run
    if cell_noise > 0:
        keys = frame["budget"].astype(str) + "\x1f" + frame["r"].astype(str)
        _, cell = np.unique(keys.to_numpy(), return_inverse=True)
        log_noise = log_noise + cell_noise * rng.standard_normal(cell.max() + 1)[cell]
    frame["loss"] = clean * np.exp(log_noise)
    return frame
