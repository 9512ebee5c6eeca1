"""What a training run and a sweep are: the room the planner (:mod:`phifit.plan`) and the trainer
(``phifit.trainers``) both read, so that they count parameters, FLOPs and tokens with one code.

- :mod:`~phifit.spec.run_config`: a training run's configuration (the looped GPT, its training, its
  run id, its parameter split and FLOPs per token);
- :mod:`~phifit.spec.sweep_spec`: sweep specs (TOML) -> planned runs, and their run-time estimate;
- :mod:`~phifit.spec.lr_recipe`: the learning rates a run trains with (the study's transfer rules
  applied to a spec's base rates).

No torch, no NumPy: the trainer imports these modules before it loads torch, and ``phifit plan``
reads specs without the trainer.  The names below are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .. import _submodule

#: exported name -> module that defines it (imported on first access)
_EXPORTS = {
    "LoopedGPTConfig": "run_config",
    "TrainConfig": "run_config",
    "make_train_config": "run_config",
    "make_run_id": "run_config",
    "param_counts": "run_config",
    "flops_per_token": "run_config",
    "tokens_for_budget": "run_config",
    "SweepSpec": "sweep_spec",
    "PlannedRun": "sweep_spec",
    "load_spec": "sweep_spec",
    "plan": "sweep_spec",
    "plan_lr_sweep": "sweep_spec",
    "estimate_seconds": "sweep_spec",
    "effective_lrs": "lr_recipe",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    value = (
        getattr(importlib.import_module(f"{__name__}.{module}"), name)
        if module
        else _submodule(__name__, name)
    )
    if value is None:
        raise AttributeError(f"module 'phifit.spec' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names and the submodules imported so far (not this file's helpers)."""
    loaded = {k for k, v in globals().items() if getattr(v, "__name__", "").startswith(f"{__name__}.")}
    return sorted(set(__all__) | loaded)
