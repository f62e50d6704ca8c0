"""Low-FPR evaluation (issue 51): TPR at a fixed FPR with its resolution limit, held-out calibration, the exact ROC
and the AUC interval, cross-checked with scikit-learn and a brute-force reading of the definitions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from memlab.metrics import detection
from memlab.metrics.intervals import clopper_pearson
from memlab.metrics.low_fpr import auc_with_interval, roc_curve, tpr_at_fpr, tpr_at_fpr_held_out


def _scores(seed: int, n_m: int, n_n: int, ties: bool):
    rng = np.random.default_rng(seed)
    m, n = rng.normal(1.0, 1.0, n_m), rng.normal(0.0, 1.0, n_n)
    return (np.round(m, 1), np.round(n, 1)) if ties else (m, n)


def brute_threshold(nonmembers, fpr):
    """Smallest t over every real number, searched over the scores themselves, just below and above them, and ±inf:
    the count of non-members strictly above t only changes at their scores."""
    cands = sorted({-np.inf, np.inf} | {c for s in nonmembers for c in (s, np.nextafter(s, -np.inf))})
    return min(t for t in cands if np.mean(np.asarray(nonmembers) > t) <= fpr)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("fpr", [0.0, 0.01, 0.05, 0.1, 0.5, 1.0])
def test_tpr_at_fpr_reads_the_definition(ties, fpr):
    for seed in range(5):
        m, n = _scores(seed, 70, 200, ties)
        pt = tpr_at_fpr(m, n, fpr, level=0.95)
        t = brute_threshold(n, fpr)
        assert pt.threshold == t
        assert pt.tpr == np.mean(m > t) and pt.fpr == np.mean(n > t) <= fpr
        assert pt.tpr_ci == clopper_pearson(int(np.sum(m > t)), m.size, 0.95)
        assert pt.tpr == detection.tpr_at_fpr(np.r_[np.ones(70), np.zeros(200)], np.r_[m, n], fpr)
        # sklearn's curve: the highest TPR among its points with FPR <= target
        f, tp, _ = skm.roc_curve(np.r_[np.ones(70), np.zeros(200)], np.r_[m, n], drop_intermediate=False)
        assert pt.tpr == pytest.approx(tp[f <= fpr + 1e-12].max(), abs=1e-12)


def test_ties_at_the_threshold_are_non_member_calls():
    m, n = [1.0, 1.0, 2.0, 0.0], [1.0, 1.0, 1.0, 0.0]
    pt = tpr_at_fpr(m, n, 0.5, level=0.95)
    # t = 1 leaves 0 non-members above it (<= 0.5); t = 0 would leave 3/4 above: the cut is at 1, ties fall below
    assert pt.threshold == 1.0 and pt.fpr == 0.0 and pt.tpr == 0.25 and pt.tp == 1


def test_all_ties_give_no_member_above_and_fpr_zero():
    pt = tpr_at_fpr([0.5] * 10, [0.5] * 10, 0.1, level=0.95)
    assert pt.threshold == 0.5 and pt.tpr == 0.0 and pt.fpr == 0.0 and pt.tpr_ci[0] == 0.0
    assert roc_curve([0.5] * 3, [0.5] * 4).fpr.tolist() == [0.0, 1.0]
    assert auc_with_interval([0.5] * 3, [0.5] * 4, n_resamples=50, seed=0, level=0.95).estimate == 0.5


def test_fpr_zero_cuts_at_the_top_non_member():
    m, n = [5.0, 4.0, 3.0, 0.5], [3.0, 1.0, 0.0]
    pt = tpr_at_fpr(m, n, 0.0, level=0.95)
    assert pt.threshold == 3.0 and pt.tpr == 0.5 and pt.fpr == 0.0
    # every non-member above every member: nothing above the top non-member's score
    pt = tpr_at_fpr([0.0, 0.1], [1.0, 2.0], 0.0, level=0.95)
    assert pt.tpr == 0.0 and pt.tp == 0 and pt.tpr_ci == clopper_pearson(0, 2, 0.95)
    # fpr = 1 lets every non-member through: t = -inf, TPR = FPR = 1
    pt = tpr_at_fpr(m, n, 1.0, level=0.95)
    assert pt.threshold == -np.inf and pt.tpr == 1.0 and pt.fpr == 1.0


def test_fifty_non_members_cannot_resolve_one_percent_fpr():
    """With 50 non-members the smallest FPR above 0 is 2 %: at a 1 % target the only readable point is FPR 0, and
    the point says so; 1000 non-members resolve 1 % (and 0.1 %)."""
    m, n = _scores(3, 50, 50, False)
    pt = tpr_at_fpr(m, n, 0.01, level=0.95)
    assert not pt.resolvable and pt.min_fpr == 0.02 and pt.fpr == 0.0 and pt.threshold == n.max()
    assert pt.tpr == tpr_at_fpr(m, n, 0.0, level=0.95).tpr
    assert tpr_at_fpr(m, n, 0.02, level=0.95).resolvable
    m, n = _scores(3, 50, 1000, False)
    assert tpr_at_fpr(m, n, 0.01, level=0.95).resolvable and tpr_at_fpr(m, n, 0.001, level=0.95).resolvable
    assert not tpr_at_fpr(m, n, 0.0009, level=0.95).resolvable


def test_held_out_calibration_fits_on_one_part_and_reads_fpr_on_the_other():
    m, n = _scores(1, 100, 400, False)
    cal = np.arange(0, 400, 2)
    pt = tpr_at_fpr_held_out(m, n, 0.05, calibration=cal, seed=None, level=0.95)
    t = detection.threshold_at_fpr(n[cal], 0.05)
    rest = np.setdiff1d(np.arange(400), cal)
    assert pt.threshold == t and pt.tpr == np.mean(m > t) and pt.fpr == np.mean(n[rest] > t)
    assert pt.n_calibration == 200 and pt.n_nonmembers == 200 and pt.resolvable
    assert pt.fpr_ci == clopper_pearson(int(np.sum(n[rest] > t)), 200, 0.95)
    by_seed = tpr_at_fpr_held_out(m, n, 0.05, calibration=None, seed=4, level=0.95)
    half = np.random.default_rng(4).permutation(400)[:200]
    assert by_seed == tpr_at_fpr_held_out(m, n, 0.05, calibration=half, seed=None, level=0.95)
    assert by_seed == tpr_at_fpr_held_out(m, n, 0.05, calibration=None, seed=4, level=0.95)
    assert tpr_at_fpr_held_out(m, n[:150], 0.01, calibration=None, seed=0, level=0.95).resolvable is False
    for kw in (dict(calibration=None, seed=None), dict(calibration=[0], seed=1), dict(calibration=[0, 0], seed=None),
               dict(calibration=list(range(400)), seed=None), dict(calibration=[400], seed=None)):
        with pytest.raises(ValueError):
            tpr_at_fpr_held_out(m, n, 0.05, level=0.95, **kw)


@pytest.mark.parametrize("ties", [False, True])
def test_roc_and_auc_match_sklearn(ties):
    for seed in range(5):
        m, n = _scores(seed, 40, 60, ties)
        y, s = np.r_[np.ones(40), np.zeros(60)], np.r_[m, n]
        c = roc_curve(m, n)
        f, t, _ = skm.roc_curve(y, s, drop_intermediate=False)
        assert np.allclose(c.fpr, f) and np.allclose(c.tpr, t)
        assert np.array_equal(c.fpr, [np.mean(n > x) for x in c.thresholds])
        assert np.array_equal(c.tpr, [np.mean(m > x) for x in c.thresholds])
        r = auc_with_interval(m, n, n_resamples=200, seed=seed, level=0.95)
        assert r.estimate == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)
        assert r.ci_low <= r.estimate <= r.ci_high and r.n_resamples == 200 and r.ci == 0.95


def test_auc_interval_resamples_each_group_independently_and_is_seeded():
    m, n = _scores(9, 12, 15, True)
    r = auc_with_interval(m, n, n_resamples=300, seed=5, level=0.9)
    # brute force: the same draws (members, then non-members, from one generator), AUC by counting pairs
    rng = np.random.default_rng(5)
    bm, bn = m[rng.integers(0, 12, (300, 12))], n[rng.integers(0, 15, (300, 15))]
    aucs = [np.mean((a[:, None] > b[None, :]) + 0.5 * (a[:, None] == b[None, :])) for a, b in zip(bm, bn)]
    lo, hi = np.quantile(aucs, [0.05, 0.95])
    assert (r.ci_low, r.ci_high) == pytest.approx((lo, hi), abs=1e-12)
    assert r == auc_with_interval(m, n, n_resamples=300, seed=5, level=0.9)
    assert r != auc_with_interval(m, n, n_resamples=300, seed=6, level=0.9)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        tpr_at_fpr([], [1.0], 0.1, level=0.95)
    with pytest.raises(ValueError):
        tpr_at_fpr([1.0], [np.nan], 0.1, level=0.95)
    with pytest.raises(ValueError):
        tpr_at_fpr([1.0], [0.0], 1.5, level=0.95)
