"""Plain data: convert results to JSON-safe Python types (every result's ``to_dict`` uses this)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def to_plain(value: Any) -> Any:
    """Convert NumPy scalars/arrays and tuples to JSON-safe Python types (NaN -> None)."""
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return to_plain(value.to_dict())
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_plain(value.tolist())
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        x = float(value)
        return x if math.isfinite(x) else None
    return value
