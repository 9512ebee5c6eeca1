"""Parameter split (n_once, n_rec) and training FLOPs per token, as the trainer imports them.

One definition, in :mod:`phifit.study` (``looped_param_counts``, ``looped_flops_per_token``: the formulas,
their sources and what they do not count), read from a configuration by :mod:`phifit.spec.run_config`
(``param_counts``, ``flops_per_token``, ``tokens_for_budget``). ``tests/test_trainer_model.py`` checks them
against the paper's per-width table and against the parameters and the counted FLOPs of a built model. No
torch here.
"""

from __future__ import annotations

from phifit.spec.run_config import flops_per_token, param_counts, tokens_for_budget
from phifit.study import ParamCounts, block_params

__all__ = ["ParamCounts", "block_params", "flops_per_token", "param_counts", "tokens_for_budget"]
