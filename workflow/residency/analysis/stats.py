"""Statistics for matched pairs: the paired-log t interval of a ratio.

For pairs (d_i, f_i) the quantity of interest is the ratio F/D. Its log is averaged over
pairs; the 95% interval is mean(log(f/d)) +- t(0.975, n-1) * s / sqrt(n), exponentiated.
The interval measures repeatability across the pairs at one fixed identity, not
generalisation across prompts, models or machines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class PairedRatio:
    n: int
    ratio: float            # geometric mean of f/d
    low: float              # interval bounds on the ratio
    high: float
    reciprocal: float       # d/f, i.e. 1 / ratio
    confidence: float
    ratios: tuple[float, ...]

    def as_dict(self) -> dict:
        return {"n": self.n, "ratio": self.ratio, "low": self.low, "high": self.high,
                "reciprocal": self.reciprocal, "confidence": self.confidence,
                "ratios": list(self.ratios), "min": min(self.ratios), "max": max(self.ratios)}


def paired_log_ratio(d: Sequence[float], f: Sequence[float], confidence: float = 0.95) -> PairedRatio:
    d = np.asarray(d, dtype=float)
    f = np.asarray(f, dtype=float)
    if d.shape != f.shape or d.ndim != 1:
        raise ValueError("d and f must be equal-length sequences of pairs")
    if len(d) < 2:
        raise ValueError("a paired interval needs at least 2 pairs")
    if (d <= 0).any() or (f <= 0).any():
        raise ValueError("ratios need positive values")
    logs = np.log(f / d)
    n = len(logs)
    mean = float(logs.mean())
    from scipy import stats  # here, not at import: the Snakefile imports the claims, and every
    # SLURM job step parses the Snakefile (scipy.stats is about a second of that parse)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * float(logs.std(ddof=1)) / math.sqrt(n)
    return PairedRatio(n=n, ratio=math.exp(mean), low=math.exp(mean - half), high=math.exp(mean + half),
                       reciprocal=math.exp(-mean), confidence=confidence, ratios=tuple(float(x) for x in f / d))
