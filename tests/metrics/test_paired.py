"""The change in a share on the same items (memlab.metrics.paired, issue 49): an interval that does not collapse
when no item changes, and the equivalence verdict a "stays stable" claim decides on."""

import pytest

from memlab.metrics.intervals import clopper_pearson
from memlab.metrics.paired import equivalence, paired_change, paired_n_for_margin


def test_no_item_changing_still_leaves_an_interval_of_the_exact_upper_limit():
    est, lo, hi = paired_change(0, 0, 66, 0.95)
    bound = clopper_pearson(0, 66, 0.975)[1]
    assert est == 0 and (lo, hi) == pytest.approx((-bound, bound)) and 0.05 < bound < 0.07


def test_the_interval_covers_the_change_and_narrows_with_more_items():
    for up, down, n in ((40, 0, 100), (5, 3, 66), (0, 12, 33)):
        est, lo, hi = paired_change(up, down, n)
        assert lo <= est <= hi and -1 <= lo and hi <= 1
    assert paired_change(4, 0, 1000)[2] - paired_change(4, 0, 1000)[1] < paired_change(4, 0, 100)[2] - paired_change(4, 0, 100)[1]


def test_equivalence_decides_each_way():
    assert equivalence((-0.08, 0.08), 0.1) == "reproduced"
    assert equivalence((0.2, 0.5), 0.1) == "contradicted" and equivalence((-0.5, -0.2), 0.1) == "contradicted"
    assert equivalence((-0.05, 0.3), 0.1) == "inconclusive"
    with pytest.raises(ValueError):
        equivalence((0, 0), 0)


def test_the_n_that_would_bound_the_change_within_the_margin():
    need = paired_n_for_margin(0, 0, 8, 0.1)
    assert need > 8 and paired_change(0, 0, need)[2] < 0.1 <= paired_change(0, 0, need - 1)[2]
    assert paired_n_for_margin(10, 0, 20, 0.1) is None   # half the items changed: no n bounds it within 0.10


def test_impossible_counts_are_refused():
    with pytest.raises(ValueError):
        paired_change(5, 6, 10)
