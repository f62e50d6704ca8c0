"""memlab.metrics.intervals against known values (textbook Wilson / Clopper–Pearson limits, exact sign tests)."""

import pytest

from memlab.comparison import bonferroni_level
from memlab.metrics.intervals import (clopper_pearson, expanded_level, fisher_p, holm,
                                      mover_contrast, n_to_decide, paired_sign, permutation_diff, sign_flip_p, wilson,
                                      wilson_n_to_decide)


def test_wilson_and_exact_never_collapse_on_few_items():
    assert wilson(0, 3) == pytest.approx((0.0, 0.5615), abs=1e-4)
    assert clopper_pearson(0, 3) == pytest.approx((0.0, 0.7076), abs=1e-4)
    assert clopper_pearson(3, 3)[0] == pytest.approx(0.2924, abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    with pytest.raises(ValueError):
        wilson(4, 3)


def test_mover_difference_is_newcombe():
    est, lo, hi = mover_contrast(56, 70, 48, 80)            # Newcombe (1998) example: 0.2000 [0.0524, 0.3339]
    assert (est, lo, hi) == pytest.approx((0.2, 0.0524, 0.3339), abs=1e-3)
    est, lo, hi = mover_contrast(60, 200, 1, 200, c=10)
    assert est == pytest.approx(0.25) and lo < est < hi


def test_paired_sign_is_exact():
    s, lo, hi, p = paired_sign(2, 0)
    assert s == 1.0 and lo == pytest.approx(0.1581, abs=1e-4) and p == pytest.approx(0.5)
    assert paired_sign(0, 0) == (0.5, 0.0, 1.0, 1.0)


def test_permutation_and_sign_flip():
    assert sign_flip_p([1.0, 1.0, 1.0, 1.0], n_resamples=0, seed=0) == pytest.approx(2 / 16)
    assert permutation_diff([0, 0, 0], [1, 1, 1], n_resamples=999, seed=0) < 0.2
    assert permutation_diff([0, 1], [1, 0], n_resamples=99, seed=0) == 1.0


def test_levels_and_corrections():
    assert bonferroni_level(4, 0.05) == pytest.approx(0.9875)
    assert expanded_level(0.95, 2) > expanded_level(0.95, 10) > expanded_level(0.95, 1000) > 0.95
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_n_to_decide():
    assert n_to_decide(0.1, (-0.1, 0.3), 10, 0.0) == 40
    assert n_to_decide(0.0, (-0.1, 0.1), 10, 0.0) is None
    # a lopsided interval (a share near 0): the side facing the threshold decides, not the half-width
    # 0.05 above 0.02, low side 0.04: (0.04 / 0.03)² × 100 → 178 (the half-width 0.145 would say 2 337)
    assert n_to_decide(0.05, (0.01, 0.30), 100, 0.02) == 178
    # 0.05 below 0.10, high side 0.25: (0.25 / 0.05)² × 100 = 2 500 (the half-width would say 841)
    assert n_to_decide(0.05, (0.01, 0.30), 100, 0.10) == 2500
    n = wilson_n_to_decide(0.0, 0.1)
    assert wilson(0, n)[1] < 0.1 <= wilson(0, n - 1)[1]


def test_sign_flip_min_n_is_where_the_exact_test_first_reaches_its_level():
    import numpy as np

    from memlab.metrics.intervals import sign_flip_min_n, sign_flip_p

    for level in (1 - 0.05 / 3, 1 - 0.05 / 2, 0.95):
        n = sign_flip_min_n(level)
        assert sign_flip_p(np.ones(n), n_resamples=10, seed=0) < 1 - level
        assert sign_flip_p(np.ones(n - 1), n_resamples=10, seed=0) >= 1 - level
    assert (sign_flip_min_n(1 - 0.05 / 3), sign_flip_min_n(0.95)) == (7, 6)


def test_permutation_min_n_is_where_the_exact_permutation_test_first_reaches_its_level():
    """Issue 49: the n to decide of a permutation-guarded rule comes from that test run on the most extreme data,
    not from a separate formula; the exact p is what permutation_diff estimates."""
    import numpy as np

    from memlab.metrics.intervals import permutation_diff, permutation_exact_p, permutation_min_n

    assert permutation_exact_p([1, 1, 1], [0, 0, 0]) == pytest.approx(2 / 20)
    a, b = [0.1, 0.4, 0.35, 0.8], [0.3, 0.9, 0.7, 0.65, 1.0]
    assert permutation_diff(a, b, n_resamples=20000, seed=1) == pytest.approx(permutation_exact_p(a, b), abs=0.01)
    for level in (1 - 0.05 / 3, 1 - 0.05 / 2, 0.95):
        n = permutation_min_n(level)
        assert permutation_exact_p(np.ones(n // 2), np.zeros(n - n // 2)) < 1 - level
        assert permutation_exact_p(np.ones((n - 1) // 2), np.zeros(n - 1 - (n - 1) // 2)) >= 1 - level
    assert (permutation_min_n(1 - 0.05 / 2), permutation_min_n(0.95)) == (9, 7)


def test_fisher_p_is_the_exact_two_sided_test():
    # 3 / 3 vs 0 / 3: one table as extreme each way out of C(6, 3) = 20, so p = 2 / 20 (a MOVER interval excludes 0)
    assert fisher_p(3, 3, 0, 3) == pytest.approx(0.1)
    assert mover_contrast(3, 3, 0, 3)[1] > 0
    assert fisher_p(225, 1000, 20, 1000) < 1e-30 and fisher_p(1, 2, 1, 2) == 1.0 and fisher_p(0, 0, 1, 2) == 1.0
