"""Pearson's χ² tests the pages run, on scipy: one place for the tests and their pooling rules.

- ``chi_square_gof``: do counts look like draws from probabilities? (the Sampling page's thousand draws, the class's
  pooled draws, the engine's sampler tests). Categories expected fewer than ``min_expected`` times are pooled into one
  bin, which joins the smallest kept bin when it too is expected less often: the χ² approximation needs it.
- ``homogeneity``: do two samples come from one distribution? (Speculative decoding's seed test, against plain
  decoding). Cells seen fewer than ``pool_below`` times in both together are pooled into one.

The statistic and its tail probability are scipy's (``scipy.stats.chisquare``, ``scipy.stats.chi2_contingency``
without Yates' correction); the bins are ours, so a sentence, a chart and a test read the same ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class GoodnessOfFit:
    """Pearson's chi-square test of observed counts against expected probabilities."""

    statistic: float
    dof: int
    p_value: float
    n_bins: int  # categories after pooling the rare ones into one "other" bin


def pooled_bins(counts: np.ndarray, expected: np.ndarray, min_expected: float) -> tuple[np.ndarray, np.ndarray]:
    """(observed, expected) per bin after pooling the categories expected fewer than ``min_expected`` times."""
    big = expected >= min_expected
    obs_bins, exp_bins = list(counts[big]), list(expected[big])
    if (~big).any():
        pooled_obs, pooled_exp = counts[~big].sum(), expected[~big].sum()
        if pooled_exp >= min_expected or not exp_bins:
            obs_bins.append(pooled_obs)
            exp_bins.append(pooled_exp)
        else:  # too small to stand alone: fold into the smallest kept bin
            smallest = int(np.argmin(exp_bins))
            obs_bins[smallest] += pooled_obs
            exp_bins[smallest] += pooled_exp
    return np.array(obs_bins, dtype=np.float64), np.array(exp_bins, dtype=np.float64)


def chi_square_gof(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> GoodnessOfFit:
    """Test whether ``counts`` (K,) look like draws from ``probs`` (K,).

    A draw of a zero-probability category makes the statistic infinite (p = 0): such a draw is impossible under
    ``probs``. One bin left after pooling: nothing to test (statistic 0, p = 1, 0 degrees of freedom).
    """
    counts, probs = np.asarray(counts, dtype=np.float64), np.asarray(probs, dtype=np.float64)
    if np.any(counts[probs <= 0] > 0):
        return GoodnessOfFit(float("inf"), max(int((probs > 0).sum()) - 1, 1), 0.0, int((probs > 0).sum()) + 1)
    obs, exp = pooled_bins(counts, counts.sum() * probs / probs.sum(), min_expected)
    if len(obs) < 2:
        return GoodnessOfFit(0.0, 0, 1.0, len(obs))
    result = stats.chisquare(obs, exp)
    return GoodnessOfFit(float(result.statistic), len(obs) - 1, float(result.pvalue), len(obs))


@dataclass(frozen=True)
class Homogeneity:
    statistic: float
    dof: int
    p_value: float


def homogeneity(a: Counter[Hashable], b: Counter[Hashable], pool_below: int = 10) -> Homogeneity:
    """Test whether samples ``a`` and ``b`` (counts per cell) come from one distribution."""
    cells = [c for c in set(a) | set(b) if a[c] + b[c] >= pool_below]
    rows = np.array([[a[c] for c in cells], [b[c] for c in cells]], dtype=np.float64).reshape(2, len(cells))  # (2, C)
    rest = [sum(a.values()) - rows[0].sum(), sum(b.values()) - rows[1].sum()]
    table = np.concatenate([rows, np.array(rest, dtype=np.float64)[:, None]], axis=1)  # (2, C + 1)
    table = table[:, table.sum(axis=0) > 0]  # a cell neither sample saw carries no information
    if table.shape[1] < 2 or (table.sum(axis=1) == 0).any():
        return Homogeneity(0.0, 0, 1.0)
    result = stats.chi2_contingency(table, correction=False)
    return Homogeneity(float(result.statistic), int(result.dof), float(result.pvalue))
