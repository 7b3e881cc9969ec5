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


def paired_interval(differences: Sequence[float]) -> tuple:
    """Mean of paired differences (one per seed) and its two-sided 95 % t interval: (mean, low,
    high); the interval is (nan, nan) with fewer than two differences."""
    mean, std = mean_std(differences)
    count = len([v for v in differences if v is not None and math.isfinite(v)])
    if count < 2:
        return mean, float("nan"), float("nan")
    from scipy import stats  # imported here: a second of start-up that only intervals need

    half = float(stats.t.ppf(0.975, count - 1)) * std / math.sqrt(count)
    return mean, mean - half, mean + half
