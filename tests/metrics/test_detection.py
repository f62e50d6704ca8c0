"""Detector statistics, cross-checked with scikit-learn where it has the same quantity."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from memlab.metrics.detection import (
    rates_at_threshold,
    roc_auc,
    roc_auc_ci,
    roc_curve,
    threshold_at_fpr,
    tpr_at_fpr,
    youden_j,
)


def _data(seed: int, n_pos: int = 60, n_neg: int = 80, ties: bool = False):
    rng = np.random.default_rng(seed)
    s = np.r_[rng.normal(1.0, 1.0, n_pos), rng.normal(0.0, 1.0, n_neg)]
    if ties:
        s = np.round(s, 1)
    y = np.r_[np.ones(n_pos, int), np.zeros(n_neg, int)]
    return y, s


@pytest.mark.parametrize("ties", [False, True])
def test_auc_and_curve_match_sklearn(ties: bool) -> None:
    for seed in range(10):
        y, s = _data(seed, ties=ties)
        assert roc_auc(y, s) == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)
        c = roc_curve(y, s)
        fpr, tpr, _ = skm.roc_curve(y, s, drop_intermediate=False)
        # same operating points (sklearn's rule is >= t at t = each score; ours is > t at the next lower)
        assert np.allclose(c.fpr, fpr) and np.allclose(c.tpr, tpr)
        assert np.all(np.diff(c.thresholds) < 0)
        assert np.trapezoid(c.tpr, c.fpr) == pytest.approx(roc_auc(y, s), abs=1e-12)


def test_rates_tpr_at_fpr_youden() -> None:
    y, s = _data(3, n_pos=200, n_neg=200)
    c = roc_curve(y, s)
    for t, f, r in zip(c.thresholds, c.fpr, c.tpr):  # the curve's points are the rule "score > t"
        rates = rates_at_threshold(y, s, t)
        assert (rates.fpr, rates.tpr) == pytest.approx((f, r))
    for target in (0.01, 0.05, 0.2):
        got = tpr_at_fpr(y, s, target)
        brute = max(r for f, r in zip(c.fpr, c.tpr) if f <= target)
        assert got == brute
    j, t = youden_j(y, s)
    rates = rates_at_threshold(y, s, t)
    assert j == pytest.approx(rates.tpr - rates.fpr)
    assert j == pytest.approx(max(c.tpr - c.fpr))


def test_threshold_at_fpr_on_nonmembers() -> None:
    rng = np.random.default_rng(0)
    neg = rng.normal(size=1000)
    for alpha in (0.0, 0.01, 0.05, 0.5):
        t = threshold_at_fpr(neg, alpha)
        fpr = np.mean(neg > t)
        assert fpr <= alpha
        assert np.mean(neg >= t) > alpha  # the smallest such threshold: one step lower exceeds alpha
    assert threshold_at_fpr([0.1, 0.2, 0.3], 1.0) == float("-inf")
    assert threshold_at_fpr([0.1, 0.2, 0.3], 0.0) == 0.3
    tied = [1.0, 1.0, 1.0, 0.0]
    t = threshold_at_fpr(tied, 0.5)  # 2 allowed, but 3 tie at 1.0 -> cut above them
    assert t == 1.0 and np.mean(np.array(tied) > t) == 0.0


def test_auc_ci() -> None:
    y, s = _data(4, n_pos=100, n_neg=100)
    r = roc_auc_ci(y, s, n_resamples=500, seed=1)
    assert r.estimate == pytest.approx(roc_auc(y, s))
    assert r.ci_low < r.estimate < r.ci_high
    assert 0.01 < r.sd < 0.1
    assert roc_auc_ci(y, s, n_resamples=500, seed=1) == r
    # the vectorized bootstrap equals a plain loop with the same draws
    pos, neg = s[y == 1], s[y == 0]
    rng = np.random.default_rng(1)
    ip = rng.integers(0, pos.size, size=(500, pos.size))
    ineg = rng.integers(0, neg.size, size=(500, neg.size))
    aucs = [skm.roc_auc_score(np.r_[np.ones(pos.size), np.zeros(neg.size)], np.r_[pos[a], neg[b]])
            for a, b in zip(ip, ineg)]
    assert r.mean == pytest.approx(np.mean(aucs), abs=1e-12)


def test_edge_cases() -> None:
    assert roc_auc([1, 0], [0.9, 0.1]) == 1.0
    assert roc_auc([1, 0], [0.1, 0.9]) == 0.0
    assert roc_auc([1, 0], [0.5, 0.5]) == 0.5  # identical scores: chance
    for bad in (None, "10"):
        with pytest.raises(TypeError):
            roc_auc(bad, [0.1, 0.2])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        roc_auc([1, 1], [0.1, 0.2])  # one class only
    with pytest.raises(ValueError):
        roc_auc([1, 0], [0.1])
    with pytest.raises(ValueError):
        roc_auc([1, 2], [0.1, 0.2])
    with pytest.raises(ValueError):
        roc_auc([1, 0], [np.nan, 0.2])
    with pytest.raises(ValueError):
        roc_auc([], [])
    with pytest.raises(ValueError):
        tpr_at_fpr([1, 0], [1.0, 0.0], fpr=2.0)
    with pytest.raises(ValueError):
        threshold_at_fpr([], 0.05)
    r = rates_at_threshold([1, 1], [0.2, 0.8], 0.5)  # one class allowed here
    assert (r.tp, r.fn, r.fpr, r.precision) == (1, 1, 0.0, 1.0)
    r0 = rates_at_threshold([0, 0], [0.2, 0.3], 0.5)
    assert (r0.tpr, r0.precision) == (0.0, 0.0)  # 0/0 -> documented 0.0
