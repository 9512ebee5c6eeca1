"""Configuration of a run, as the trainer imports it: the classes live in :mod:`phifit.spec.run_config`.

``LoopedGPTConfig`` (the network: prelude -> shared stack x r -> coda, with the iso-depth rule),
``TrainConfig`` (budget, batch, optimiser, data, execution) and ``make_train_config`` (flat settings -> a
configuration) are defined once, on phifit's side, because sweep specs are planned from them without the
trainer. No torch here.
"""

from __future__ import annotations

from phifit.spec.run_config import (
    EXECUTION_KEYS,
    INJECTIONS,
    MIN_STEPS,
    MODEL_KEYS,
    TRAIN_KEYS,
    VARIANTS,
    LoopedGPTConfig,
    TrainConfig,
    make_train_config,
    pad_vocab,
)

__all__ = [
    "EXECUTION_KEYS",
    "INJECTIONS",
    "MIN_STEPS",
    "MODEL_KEYS",
    "TRAIN_KEYS",
    "VARIANTS",
    "LoopedGPTConfig",
    "TrainConfig",
    "make_train_config",
    "pad_vocab",
]
