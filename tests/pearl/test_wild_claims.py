"""The wild study's 'likely-seen over unseen' rule (memlab.methods.pearl.claims) corrects its smallest p for the
number of tests it took the minimum over (Bonferroni), on hand-made Mann–Whitney tables with known verdicts."""

import pandas as pd
import pytest

from memlab.comparison import RULES, load_claims, rules_for
from memlab.results import StudyResult

CLAIM = "pearl_wild_code_over_unseen"


def judge(p_values: dict[tuple[str, str], float], n: int = 10):
    rules_for("pearl_")
    rows = [{"model": m, "task_kind": "completion", "source": s, "n_seen": n, "n_unseen": n, "p_one_sided": p}
            for (m, s), p in p_values.items()]
    # summarization rows and other sources are not among the tests the claim is about
    rows.append({"model": "a", "task_kind": "summarization", "source": "kjv", "n_seen": n, "n_unseen": n,
                 "p_one_sided": 0.0001})
    rows.append({"model": "a", "task_kind": "completion", "source": "fortunes", "n_seen": n, "n_unseen": n,
                 "p_one_sided": 0.0001})
    res = StudyResult(tables={"seen_vs_unseen_mann_whitney": pd.DataFrame(rows)}, metrics={"seed": 0})
    claim = next(c for c in load_claims() if c.id == CLAIM)
    return RULES[CLAIM](res, claim)


FOUR = [("a", "humaneval"), ("a", "kjv"), ("b", "humaneval"), ("b", "kjv")]


@pytest.mark.parametrize("smallest, verdict", [(0.0484, "not reproduced"), (0.012, "reproduced"),
                                               (0.2, "not reproduced")])
def test_smallest_p_is_multiplied_by_the_number_of_tests(smallest, verdict):
    f = judge(dict(zip(FOUR, [smallest, 0.5, 0.7, 0.9])))
    assert f.verdict == verdict
    assert f.our_value == pytest.approx(min(1.0, smallest * 4))
    assert "× 4 tests" in f.reason


def test_one_test_is_not_adjusted():
    f = judge({("a", "kjv"): 0.03})
    assert (f.verdict, f.our_value) == ("reproduced", pytest.approx(0.03))


def test_too_few_documents_is_not_comparable():
    assert judge(dict(zip(FOUR, [0.001] * 4)), n=5).verdict == "not comparable"
