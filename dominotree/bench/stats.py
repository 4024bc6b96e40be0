"""Statistics the paper reports, numpy only.

Conventions (reference/algorithms.md 7.10):
- tau = mean over prompts of the per-prompt mean accept length (accepted drafts + bonus per round);
- speedup = mean per-prompt tokens/s of a method / mean per-prompt tokens/s of ``ar`` in the same run;
- throughput ratio between two methods with a paired bootstrap over prompts: resample prompt
  indices with replacement, recompute mean(a) / mean(b) on each resample, take percentiles.
  Reported as a percent change with its 95 % interval, e.g. "+9.21 % [7.95, 10.57]";
- the acceptance yardstick's A/B: the difference of two pooled ratios (accepted / rounds) with the
  same paired bootstrap over prompts, e.g. "+0.019 [-0.003, +0.045]".
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


def mean(xs) -> float:
    xs = [float(x) for x in xs]
    return sum(xs) / len(xs) if xs else float("nan")


def first_difference(a: list[list[int]], b: list[list[int]]) -> tuple[int, int | None] | None:
    """Where two multi-turn token lists first differ: ``(turn, token)``; ``token`` is the shorter
    turn's length when one turn is a prefix of the other, and None when one list has fewer turns.
    None when they are equal."""
    for ti, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return ti, next((k for k, (u, w) in enumerate(zip(x, y)) if u != w), min(len(x), len(y)))
    return (min(len(a), len(b)), None) if len(a) != len(b) else None


def median(xs) -> float:
    xs = sorted(float(x) for x in xs)
    if not xs:
        return float("nan")
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m])


def tau(accept_lengths_per_prompt) -> float:
    """Mean over prompts of each prompt's mean accept length (prompts with no rounds are skipped)."""
    per = [mean(a) for a in accept_lengths_per_prompt if len(a)]
    return mean(per)


def speedup(tps, ar_tps) -> float:
    """Mean tokens/s of a method over mean tokens/s of ``ar`` on the same prompts."""
    b = mean(ar_tps)
    return mean(tps) / b if b and b == b else float("nan")


def accept_histogram(accept_lengths, max_len: int | None = None) -> list[float]:
    """Fraction of rounds with accept length 0..max_len (index 0 is always 0: tau >= 1)."""
    a = [int(x) for x in accept_lengths]
    top = max(a + [1]) if max_len is None else max_len
    counts = [0] * (top + 1)
    for x in a:
        counts[min(x, top)] += 1
    n = max(len(a), 1)
    return [c / n for c in counts]


@dataclass
class RatioCI:
    """mean(a)/mean(b) over paired prompts, as a ratio and as a percent change with its interval."""
    ratio: float
    pct: float           # (ratio - 1) * 100
    lo: float            # percent, lower bound of the interval
    hi: float            # percent, upper bound
    n: int               # paired prompts
    level: float = 0.95

    @property
    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0

    def fmt(self) -> str:
        if self.n == 0 or self.ratio != self.ratio:
            return "n/a"
        return f"{self.pct:+.2f} % [{self.lo:.2f}, {self.hi:.2f}]"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["excludes_zero"] = self.excludes_zero
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def paired_bootstrap_ratio(a, b, n_boot: int = 10000, seed: int = 0, level: float = 0.95) -> RatioCI:
    """Percentile bootstrap CI of mean(a)/mean(b), resampling the pairs ``(a[i], b[i])`` together."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired samples need equal 1-D shapes, got {a.shape} and {b.shape}")
    n = a.shape[0]
    nan = float("nan")
    if n == 0 or b.mean() <= 0:
        return RatioCI(nan, nan, nan, nan, n, level)
    ratio = float(a.mean() / b.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    num, den = a[idx].mean(axis=1), b[idx].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    boot = boot[np.isfinite(boot)]
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(boot, [alpha, 1.0 - alpha]) if boot.size else (nan, nan)
    return RatioCI(ratio, (ratio - 1) * 100, float((lo - 1) * 100), float((hi - 1) * 100), n, level)


@dataclass
class DeltaCI:
    """b's pooled ratio minus a's over paired prompts, with its percentile-bootstrap interval."""
    delta: float
    lo: float
    hi: float
    n: int
    level: float = 0.95

    @property
    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0

    def fmt(self, digits: int = 3) -> str:
        return f"{self.delta:+.{digits}f} [{self.lo:+.{digits}f}, {self.hi:+.{digits}f}]"

    def to_dict(self) -> dict:
        return {**asdict(self), "excludes_zero": self.excludes_zero}


def paired_bootstrap_pooled_delta(num_a, den_a, num_b, den_b, n_boot: int = 10000, seed: int = 0,
                                  level: float = 0.95) -> DeltaCI:
    """sum(num_b)/sum(den_b) - sum(num_a)/sum(den_a), pooled over prompts (so each prompt weighs
    by its ``den``), with a percentile bootstrap that resamples the prompts, each prompt's counts
    together: how far two runs on the same prompts differ beyond which prompts were drawn. Given
    2-D counts (columns x prompts), the statistic is the mean of the columns' differences, every
    column on the same resampled prompts."""
    arr = [np.atleast_2d(np.asarray(x, dtype=np.float64)) for x in (num_a, den_a, num_b, den_b)]
    shape = arr[0].shape
    if any(x.shape != shape or x.ndim != 2 for x in arr) or shape[1] == 0:
        raise ValueError(f"paired counts need four equal non-empty shapes, got {[x.shape for x in arr]}")
    if (arr[1].sum(axis=1) <= 0).any() or (arr[3].sum(axis=1) <= 0).any():
        raise ValueError("each run needs a positive total denominator in every column")
    n = shape[1]

    def stat(idx):    # idx: (..., n) prompt indices -> (...) mean over columns of the pooled difference
        na, da, nb, db = (x[:, idx].sum(axis=-1) for x in arr)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (nb / db - na / da).mean(axis=0)

    delta = float(stat(np.arange(n)))
    boot = stat(np.random.default_rng(seed).integers(0, n, size=(n_boot, n)))
    boot = boot[np.isfinite(boot)]
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(boot, [alpha, 1.0 - alpha]) if boot.size else (float("nan"), float("nan"))
    return DeltaCI(delta, float(lo), float(hi), n, level)


def paired(values_a: dict, values_b: dict) -> tuple[list[str], list[float], list[float]]:
    """Align two ``{prompt_id: value}`` maps on their common prompts (sorted ids)."""
    keys = sorted(set(values_a) & set(values_b))
    return keys, [values_a[k] for k in keys], [values_b[k] for k in keys]
