"""Statistics the study tables share: mean ± standard deviation over seeds, and its text."""
from __future__ import annotations

import math
import statistics
from typing import Sequence


def mean_std(values: Sequence[float]) -> tuple:
    """Mean and sample standard deviation of the finite values (nan, nan when there are none)."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def plus_minus(pair: tuple, scale: float = 1.0, digits: int = 1) -> str:
    """`mean ± std` of a (mean, std) pair, scaled; "-" when the mean is not finite."""
    mean, std = pair
    if not math.isfinite(mean):
        return "-"
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}"
