"""The tokens-per-parameter threshold of phifit.plan.conditioning, from the information matrix.

Shrinks every run's ln(D / (N_once + N_rec)) of the study's grid towards the grid's mean by a
factor lam (sizes kept; lam = 0 is one ratio of 20) and prints the log-range, the condition
number of the unit-diagonal information matrix at the study's law and, with all r, phi's
variance inflation.  The table in docs/planning.md ("Design conditioning").  Seconds.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from phifit.plan.conditioning import _information
from phifit.plan.design import design_from_paper
from phifit.study import REFERENCE_PARAMS


def main() -> None:
    grid = design_from_paper()
    for rs in ((1,), (1, 2, 4, 8)):
        base = grid.frame[grid.frame["r"].isin(rs)].reset_index(drop=True)
        n = base["n_once"] + base["n_rec"]
        centred = np.log(base["tokens"] / n) - np.log(base["tokens"] / n).mean()
        for lam in (1.0, 0.7, 0.5, 0.3, 0.2, 0.1, 0.03, 0.0):
            frame = base.assign(tokens=20 * n * np.exp(lam * centred))
            info, known, _ = _information(dataclasses.replace(grid, frame=frame).frame, REFERENCE_PARAMS)
            t = frame["tokens"] / n
            vif = np.linalg.pinv(info.unit)[-1, -1] if "phi" in info.names else float("nan")
            print(
                f"r {rs}  lam {lam:<4}  ln range {np.log(t.max() / t.min()):.2f}  "
                f"condition {info.condition:.3g} (phi known {known.condition:.3g})  VIF(phi) {vif:.3g}"
            )


if __name__ == "__main__":
    main()
