"""Statistics the study tables share: mean ± standard deviation over seeds, its text, and the 95 %
confidence interval of a mean paired difference."""
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


# Student's t, two-sided 95 % (the 0.975 quantile), by degrees of freedom 1-30; 1.96 beyond.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def paired_interval(differences: Sequence[float]) -> tuple:
    """Mean of paired differences (one per seed) and its two-sided 95 % t interval: (mean, low,
    high); the interval is (nan, nan) with fewer than two differences."""
    mean, std = mean_std(differences)
    count = len([v for v in differences if v is not None and math.isfinite(v)])
    if count < 2:
        return mean, float("nan"), float("nan")
    half = (T_975[count - 2] if count - 1 <= len(T_975) else 1.96) * std / math.sqrt(count)
    return mean, mean - half, mean + half
