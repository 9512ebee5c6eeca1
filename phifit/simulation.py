"""Run tables drawn from a known law: the reference study's design, or your own.

The paper design is the study's grid (:func:`phifit.reference.paper_design`: 116 runs,
its parameter split and FLOP accounting).
Noise is multiplicative: log L = log L_true + N(0, noise^2).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .law import JointLaw
from .reference import DESIGNS, REFERENCE_PARAMS, paper_design


def simulate(
    design: pd.DataFrame | str = "paper",
    *,
    params: Mapping[str, float] | None = None,
    noise: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """A run table with losses from a known joint law.

    Parameters
    ----------
    design
        ``"paper"`` or a frame with columns r, n_once, n_rec, tokens (others kept).
    params
        {E, A, alpha, B, beta, phi}; missing entries default to the study's joint fit.
    noise
        Standard deviation of multiplicative log-normal noise on the loss.
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
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    law = JointLaw.from_params({**REFERENCE_PARAMS, **(params or {})})
    clean = law.loss(frame["r"], frame["n_once"], frame["n_rec"], frame["tokens"])
    rng = np.random.default_rng(seed)
    frame["loss"] = clean * np.exp(noise * rng.standard_normal(len(frame)))
    return frame
