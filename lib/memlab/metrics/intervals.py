"""Confidence intervals and tests the paper-vs-ours rules decide on, each defined once (issue 27).

* :func:`wilson`             Wilson score interval of a proportion k / n (never collapses to [0, 0] on few items)
* :func:`clopper_pearson`    exact (Clopper–Pearson) interval of a proportion
* :func:`mover_contrast`     interval of p1 − c·p2 for two independent proportions (Newcombe's MOVER from Wilson
                             limits; c = 1 is Newcombe's hybrid score interval of a difference, method 10)
* :func:`paired_sign`        exact interval for paired binary outcomes: the share b / (b + c) of discordant pairs
                             that moved in the claim's direction (McNemar's exact test), and its two-sided p
* :func:`fisher_p`           two-sided Fisher exact p of two independent proportions k1 / n1 = k2 / n2 (guards a
                             MOVER interval on few documents, where its Wilson limits exclude 0 too readily)
* :func:`permutation_diff`   two-sided permutation p of mean(a) − mean(b) (independent groups, seeded)
* :func:`sign_flip_p`        two-sided sign-flip permutation p of mean(d) = 0 for paired differences (exact for
                             n <= 16, seeded Monte Carlo above): with few units no bootstrap can claim more
* :func:`least_n`            the fewest units at which a test can reach its level at all, by running the test on
                             the most extreme data (:func:`sign_flip_min_n`, :func:`permutation_min_n`)
* :func:`quantile_ci`        percentile interval of bootstrap draws at a given level
* :func:`expanded_level`     the level at which a percentile bootstrap over n units covers like a t interval
                             (the expanded percentile interval: plain percentiles undercover on few units)
* :func:`holm`               adjusts p-values (the claims' per-test level: memlab.comparison.bonferroni_level)
* :func:`n_to_decide`        the n at which an interval of the observed half-width would exclude a threshold
* :func:`wilson_n_to_decide` the same for a proportion, by search on the Wilson interval

Levels are two-sided confidence levels (0.95 = a 95 % interval).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["wilson", "clopper_pearson", "mover_contrast", "fisher_p", "paired_sign", "permutation_diff", "sign_flip_p",
           "sign_flip_min_n", "permutation_min_n", "permutation_exact_p", "least_n", "quantile_ci", "expanded_level",
           "holm", "n_to_decide", "wilson_n_to_decide", "z_of"]


def z_of(level: float) -> float:
    """Two-sided normal quantile of ``level`` (1.96 for 0.95)."""
    from scipy.stats import norm

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return float(norm.ppf(1 - (1 - level) / 2))


def _check(k: int, n: int) -> None:
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"a proportion needs 0 <= k <= n, got k = {k}, n = {n}")


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of k successes in n trials; (0, 1) when n = 0 (nothing observed)."""
    _check(k, n)
    if n == 0:
        return 0.0, 1.0
    z = z_of(level)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (0.0 if k == 0 else max(0.0, mid - half)), (1.0 if k == n else min(1.0, mid + half))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval of k successes in n trials; (0, 1) when n = 0."""
    from scipy.stats import beta

    _check(k, n)
    if n == 0:
        return 0.0, 1.0
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def mover_contrast(k1: int, n1: int, k2: int, n2: int, c: float = 1.0,
                   level: float = 0.95) -> tuple[float, float, float]:
    """Estimate and interval of p1 − c·p2 (independent groups), combining each proportion's Wilson limits
    (method of variance estimates recovery). Returns (estimate, low, high)."""
    p1, p2 = (k1 / n1 if n1 else 0.0), (k2 / n2 if n2 else 0.0)
    l1, u1 = wilson(k1, n1, level)
    l2, u2 = wilson(k2, n2, level)
    est = p1 - c * p2
    lo = est - math.sqrt((p1 - l1) ** 2 + (c * (u2 - p2)) ** 2)
    hi = est + math.sqrt((u1 - p1) ** 2 + (c * (p2 - l2)) ** 2)
    return est, lo, hi


def fisher_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact p of no difference between k1 / n1 and k2 / n2 (independent groups); 1 when a group
    is empty."""
    from scipy.stats import fisher_exact

    _check(k1, n1)
    _check(k2, n2)
    if n1 == 0 or n2 == 0:
        return 1.0
    return float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)


def paired_sign(up: int, down: int, level: float = 0.95) -> tuple[float, float, float, float]:
    """Paired binary outcomes (the same items under two conditions): ``up`` items went 0 → 1, ``down`` went 1 → 0.
    Returns (share up among discordant, its Clopper–Pearson low, high, two-sided exact p of share = 0.5). With no
    discordant pair the share is 0.5 and the interval (0, 1): nothing to decide on."""
    from scipy.stats import binomtest

    m = up + down
    if m == 0:
        return 0.5, 0.0, 1.0, 1.0
    lo, hi = clopper_pearson(up, m, level)
    return up / m, lo, hi, float(binomtest(up, m, 0.5).pvalue)


def permutation_diff(a: Sequence[float], b: Sequence[float], *, n_resamples: int, seed: int) -> float:
    """Two-sided permutation p-value of |mean(a) − mean(b)| (labels shuffled ``n_resamples`` times, seeded);
    the observed split counts as one permutation, so p > 0."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    if x.size == 0 or y.size == 0:
        raise ValueError("a permutation test needs both groups non-empty")
    pooled = np.concatenate([x, y])
    obs = abs(x.mean() - y.mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(int(n_resamples)):
        p = rng.permutation(pooled)
        hits += abs(p[:x.size].mean() - p[x.size:].mean()) >= obs - 1e-12
    return float((hits + 1) / (int(n_resamples) + 1))


def least_n(p_at, level: float, n_max: int) -> int:
    """The fewest units at which a test can reach p < 1 − ``level`` at all: ``p_at(n)`` is the test's own p on the
    most extreme data n units can give (every unit on one side). Raises when ``n_max`` units do not suffice."""
    for n in range(1, n_max + 1):
        if p_at(n) < 1 - level:
            return n
    raise ValueError(f"no n ≤ {n_max} reaches p < {1 - level:g}")


def sign_flip_min_n(level: float) -> int:
    """The fewest paired differences at which the exact two-sided sign-flip test (:func:`sign_flip_p`) can reach
    p < 1 − ``level``, found by running it on n differences of one sign (its smallest p, 2 / 2^n: 0.05 / 3 and
    0.05 / 2 need 7, 0.05 needs 6)."""
    return least_n(lambda n: sign_flip_p(np.ones(n), n_resamples=1, seed=0), level, 16)


def permutation_exact_p(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p :func:`permutation_diff` estimates, exactly: over every split of the pooled values into groups
    of the sizes of ``a`` and ``b`` (for small groups: C(n, len(a)) splits)."""
    from itertools import combinations

    x, y = np.asarray(a, float), np.asarray(b, float)
    pooled, k = np.concatenate([x, y]), x.size
    obs, total = abs(x.mean() - y.mean()), pooled.sum()
    sums = np.array([pooled[list(c)].sum() for c in combinations(range(pooled.size), k)])
    diffs = np.abs(sums / k - (total - sums) / y.size)
    return float(np.mean(diffs >= obs - 1e-12))


def permutation_min_n(level: float) -> int:
    """The fewest units (split as evenly as they go) at which the two-group permutation test
    (:func:`permutation_diff`) can reach p < 1 − ``level``, found by running it exactly (:func:`permutation_exact_p`)
    on groups that differ completely (9 units, 4 + 5, at 0.05 / 2 or 0.05 / 3; 7 at 0.05)."""
    return least_n(lambda n: permutation_exact_p(np.ones(n // 2), np.zeros(n - n // 2)) if n >= 2 else 1.0,
                   level, 20)


def sign_flip_p(d: Sequence[float], *, n_resamples: int, seed: int) -> float:
    """Two-sided p of mean(d) = 0 under random signs of the paired differences ``d`` (all 2^n sign patterns when
    n <= 16, else ``n_resamples`` seeded draws; the observed pattern counts)."""
    x = np.asarray(d, float)
    if x.size == 0:
        raise ValueError("a sign-flip test needs at least one difference")
    obs = abs(x.mean())
    if x.size <= 16:
        signs = 1 - 2 * ((np.arange(2 ** x.size)[:, None] >> np.arange(x.size)) & 1)
        return float(np.mean(np.abs((signs * x).mean(axis=1)) >= obs - 1e-12))
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(int(n_resamples), x.size))
    return float((np.sum(np.abs((signs * x).mean(axis=1)) >= obs - 1e-12) + 1) / (int(n_resamples) + 1))


def quantile_ci(draws: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap draws (non-finite draws dropped)."""
    d = np.asarray(draws, float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        raise ValueError("no finite bootstrap draws")
    lo, hi = np.quantile(d, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def expanded_level(level: float, n: int) -> float:
    """Percentile level giving a bootstrap over ``n`` units the width of a Student-t interval: the normal
    quantile z' = √(n / (n − 1)) · t_{n−1} replaces z (Hesterberg's expanded percentile interval). n = 2 gives
    (nearly) the whole range of the draws. Raises for n < 2: one unit has no spread to resample."""
    from scipy.stats import norm, t

    if n < 2:
        raise ValueError(f"an interval needs at least 2 units, got {n}")
    z = math.sqrt(n / (n - 1)) * float(t.ppf(1 - (1 - level) / 2, n - 1))
    return min(float(1 - 2 * norm.sf(z)), 1 - 1e-9)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone, capped at 1), in the input order."""
    p = np.asarray(p_values, float)
    order = np.argsort(p)
    m = p.size
    adj = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adj[i] = running
    return adj.tolist()


def n_to_decide(estimate: float, ci: tuple[float, float], n: int, threshold: float) -> int | None:
    """The n at which an interval around ``estimate`` would exclude ``threshold``, if the interval's side toward the
    threshold (estimate − low when the estimate is above it, high − estimate when below) shrinks as 1/√n from its
    length at ``n`` (the observed effect assumed true). The side, not the half-width: near 0 or 1 a share's interval
    is lopsided, and its long side may face away from the threshold. None when the estimate sits on the threshold
    (no n decides) or that side has no length."""
    side = estimate - ci[0] if estimate > threshold else ci[1] - estimate
    gap = abs(estimate - threshold)
    if n < 1 or gap == 0 or side <= 0:
        return None
    return max(n + 1, math.ceil(n * (side / gap) ** 2))


def wilson_n_to_decide(p: float, threshold: float, level: float = 0.95, n_max: int = 10**7,
                       exact: bool = False) -> int | None:
    """Smallest n at which the Wilson (``exact``: Clopper–Pearson) interval of an observed share ``p`` excludes
    ``threshold`` (search by doubling, then bisection); None when p equals the threshold or n_max does not
    suffice."""
    if p == threshold:
        return None
    interval = clopper_pearson if exact else wilson

    def excludes(n: int) -> bool:
        lo, hi = interval(round(p * n), n, level)
        return hi < threshold if p < threshold else lo > threshold

    hi = 1
    while not excludes(hi):
        hi *= 2
        if hi > n_max:
            return None
    lo = hi // 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if excludes(mid) else (mid, hi)
    return hi


def rank_sum_n_to_decide(auc: float, level: float) -> int | None:
    """Documents per group at which a Mann–Whitney U test (two equal groups, no ties, its normal approximation:
    U/(n·n) − ½ has standard deviation √((2n + 1)/(12 n²)) under the null) would reject at two-sided ``level`` if the
    observed common-language effect ``auc`` = P(X > Y) + ½ P(X = Y) were the truth: the smallest n with
    |auc − ½| ≥ z·√((2n + 1)/(12 n²)). None when auc is ½ (no n decides)."""
    from statistics import NormalDist

    d = abs(auc - 0.5)
    if d == 0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    # 12 d² n² − 2 z² n − z² ≥ 0: the positive root
    n = (2 * z * z + math.sqrt(4 * z ** 4 + 48 * d * d * z * z)) / (24 * d * d)
    return max(2, math.ceil(n - 1e-9))
