"""Each PEARL rule issue 49 mended decides every way on per-document tables shaped like the pipeline's (the
pearl_scores of pearl_epochs: both perturbation kinds, epochs 0/5/10, continuous sensitivities around the run's
α = 0.2, 36 members and 66 non-members unless a case needs another n), not on rows that break the method."""

import numpy as np
import pandas as pd
import pytest

from memlab.comparison import RULES, load_claims, rules_for
from memlab.config import compose
from memlab.methods.pearl.study import completion_vs_summarization
from memlab.results import StudyResult

rules_for("pearl_epochs")
CLAIMS = {c.id: c for c in load_claims()}


def _epochs(flagged: dict, n_mem: int = 36, n_non: int = 66) -> StudyResult:
    """pearl_scores as pearl_epochs writes them: ``flagged[(split, epoch)]`` = how many of that split's documents
    score above α = 0.2 under bit flips (the first k documents; the synonym rows flag none), the rest below it."""
    rng, rows = np.random.default_rng(0), []
    for split, n in (("member", n_mem), ("nonmember", n_non)):
        for epoch in (0, 5, 10):
            for kind in ("bitflip", "synonym"):
                k = flagged.get((split, epoch), 0) if kind == "bitflip" else 0
                sens = np.where(np.arange(n) < k, rng.uniform(0.21, 0.6, n), rng.uniform(0.0, 0.19, n))
                rows += [{"doc_id": f"kjv/chapter/{split}/{i}", "split": split, "source": "kjv",
                          "task": "text_completion", "kind": kind, "sensitivity": s, "gfd": s / 2, "epoch": epoch}
                         for i, s in enumerate(sens)]
    res = StudyResult(tables={"pearl_scores": pd.DataFrame(rows)})
    res.config = compose("pearl_epochs", ["logger=null"])
    return res


def _judge(claim_id: str, res: StudyResult):
    return RULES[claim_id](res, CLAIMS[claim_id])


# -- pearl_epochs_members_vs_nonmembers: the gap against the configured "far more" ------------------------------

def test_far_more_is_judged_against_the_configured_gap():
    assert CLAIMS["pearl_epochs_members_vs_nonmembers"].threshold == pytest.approx(0.10)   # conf/paper, not code


@pytest.mark.parametrize("members, nonmembers, n_mem, n_non, verdict", [
    (25, 0, 36, 66, "reproduced"),          # ours (ci55: 25/36 vs 0/66)
    (225, 20, 1000, 1000, "reproduced"),    # the paper's Fig. 4 (a) at its n
    (30, 25, 1000, 1000, "contradicted"),   # members ≈ non-members on many documents: no "far more" gap
    (3, 2, 36, 66, "inconclusive"),         # members ≈ non-members on our few documents: too few to tell
    (2, 0, 8, 8, "inconclusive"),
])
def test_members_vs_nonmembers_each_way(members, nonmembers, n_mem, n_non, verdict):
    f = _judge("pearl_epochs_members_vs_nonmembers",
               _epochs({("member", 10): members, ("nonmember", 10): nonmembers}, n_mem, n_non))
    assert f.verdict == verdict, f.reason
    assert "pearl_n_docs" in f.reason and "against a gap of 0.1" in f.reason
    if verdict == "inconclusive":
        assert f.n_needed is None or f.n_needed > f.our_n


# -- pearl_epochs_members_grow: both halves, "non-members stay stable" within the configured margin --------------

@pytest.mark.parametrize("non_first, non_last, n_non, verdict, says", [
    (0, 0, 66, "reproduced", "change +0.00 [-0.08, +0.08], stable within ±0.1: reproduced"),   # ours
    (0, 0, 8, "inconclusive", "stable within ±0.1: inconclusive"),     # too few non-members to call them stable
    (30, 0, 66, "contradicted", "stable within ±0.1: contradicted"),   # flagged at first, not at the end: not stable
])
def test_members_grow_needs_the_non_members_stable(non_first, non_last, n_non, verdict, says):
    f = _judge("pearl_epochs_members_grow", _epochs({("member", 10): 25, ("nonmember", 0): non_first,
                                                     ("nonmember", 10): non_last}, 36, n_non))
    assert f.verdict == verdict, f.reason
    assert says in f.reason


def test_members_grow_fails_on_its_first_half_alone():
    """Non-members stable (0/66 throughout) but the members do not rise: contradicted when they fall, inconclusive
    when both epochs flag the same members."""
    fall = _judge("pearl_epochs_members_grow", _epochs({("member", 0): 25, ("member", 10): 2}))
    same = _judge("pearl_epochs_members_grow", _epochs({("member", 0): 10, ("member", 10): 10}))
    assert (fall.verdict, same.verdict) == ("contradicted", "inconclusive"), (fall.reason, same.reason)


# -- pearl_mia_nonmember_rate_falls: what the FPR calibration does to the start ----------------------------------

def _mia(first: int, last: int, n: int) -> StudyResult:
    rows = [{"doc_id": f"kjv/chapter/n{i}", "split": "nonmember", "half": half, "epoch": e,
             "neg_perplexity": -60.0 if i < k else -95.0}
            for half, m in (("evaluation", n), ("calibration", n)) for e, k in ((0, first), (5, last), (10, last))
            for i in range(m)]
    mvm = pd.DataFrame([{"epoch": e, "member_mia_pct": 97.2, "member_n": 36, "member_memo_pct": 0.0,
                         "member_both_pct": 0.0, "nonmember_mia_pct": 100 * k / n, "nonmember_n": n}
                        for e, k in ((0, first), (5, last), (10, last))])
    fixed = pd.DataFrame([{"score": "neg_perplexity", "threshold": -79.7, "fitted_on": "calibration half, epoch 0"}])
    res = StudyResult(tables={"scores_by_epoch": pd.DataFrame(rows), "mia_vs_memorization": mvm,
                              "fixed_thresholds": fixed})
    res.config = compose("pearl_mia", ["logger=null"])
    return res


def test_the_calibration_cap_on_the_start_is_said_when_the_data_show_it():
    ours = _judge("pearl_mia_nonmember_rate_falls", _mia(4, 0, 33))   # ci55: 4/33 → 0/33
    assert ours.verdict == "inconclusive" and ours.n_needed > ours.our_n
    assert "the held-out start is 4/33, as that calibration sets it: it caps the start near 10 %" in ours.reason
    high = _judge("pearl_mia_nonmember_rate_falls", _mia(70, 5, 100))
    assert high.verdict == "reproduced" and "caps" not in high.reason, high.reason
    rise = _judge("pearl_mia_nonmember_rate_falls", _mia(10, 60, 100))
    assert rise.verdict == "contradicted", rise.reason


# -- pearl_wild_task_dependence: the page's table and the rule count the same flags ------------------------------

def test_the_completion_vs_summarization_table_counts_each_task_at_its_own_alpha():
    """Summarization on a 10× scale: at one α for both tasks (the old table) every summarization is flagged; at each
    task's calibrated α the table counts what the rule judges, calibration documents left out."""
    rows, cal = [], []
    for task, scale in (("completion", 1.0), ("summarization", 10.0)):
        cal.append({"model": "a", "task_kind": task, "domain": "text", "score": "sensitivity", "target_fpr": 0.1,
                    "alpha": 0.1 * scale})
        rows += [{"model": "a", "task_kind": task, "domain": "text", "source": "kjv", "doc_id": f"kjv/{i}",
                  "half": "member", "sensitivity": (0.2 if i < (30 if task == "completion" else 5) else 0.05) * scale}
                 for i in range(40)]
        rows += [{"model": "a", "task_kind": task, "domain": "text", "source": "notes", "doc_id": f"notes/{i}",
                  "half": "calibration", "sensitivity": 0.9 * scale} for i in range(10)]
    df, cal = pd.DataFrame(rows), pd.DataFrame(cal)
    one = completion_vs_summarization(df, 0.14, "sensitivity").set_index("source").loc["kjv"]
    assert (one.completion, one.summarization) == (30, 40)
    alpha = cal.set_index(["model", "task_kind", "domain"]).alpha
    own = completion_vs_summarization(df, alpha, "sensitivity")
    assert own.source.tolist() == ["kjv"]                    # the calibration half is not counted
    row = own.iloc[0]
    assert (row.completion, row.summarization, row.both, row.n) == (30, 5, 5, 40)
    assert (row.alpha_completion, row.alpha_summarization) == (0.1, 1.0)
    res = StudyResult(tables={"pearl_scores": df, "alpha_calibrated_per_domain": cal,
                              "completion_vs_summarization": own})
    res.config = compose("pearl_wild", ["logger=null"])
    f = _judge("pearl_wild_task_dependence", res)
    assert f.verdict == "reproduced" and "completion only 25, summarization only 0" in f.reason, f.reason


# -- pearl_epochs_tau04_false_positives: the level at τ_b = 0.4, not "fewer than at 0.2" (true by construction) ---

def test_the_higher_threshold_is_the_papers_and_the_bound_is_configured():
    c = CLAIMS["pearl_epochs_tau04_false_positives"]
    assert (c.stated_at, c.threshold) == (pytest.approx(0.4), pytest.approx(0.02))   # conf/paper, not code


@pytest.mark.parametrize("non_flagged, n_non, verdict", [
    (0, 66, "inconclusive"),      # ours (ci71: 0/66 at 0.2, so none at 0.4): too few to show below 2 %
    (0, 1000, "reproduced"),      # none of the paper's 1000 above 0.4
    (200, 1000, "contradicted"),  # many non-members flagged even at the higher threshold
])
def test_false_positives_at_the_higher_threshold_each_way(non_flagged, n_non, verdict):
    """Flagged non-members score uniformly in (0.21, 0.6): about half of them lie above 0.4, the rest between."""
    res = _epochs({("member", 10): 25, ("nonmember", 10): non_flagged}, 36, n_non)
    f = _judge("pearl_epochs_tau04_false_positives", res)
    assert f.verdict == verdict, f.reason
    scores = res.tables["pearl_scores"]
    last = scores[(scores.kind == "bitflip") & (scores.epoch == 10) & (scores.split == "nonmember")]
    assert f.our_value == pytest.approx((last.sensitivity > 0.4).mean())   # flagged at 0.4, not at the run's 0.2
    assert (f.n_needed is not None) == (verdict == "inconclusive")


# -- pearl_mia_not_all_members_memorized: membership is not memorization --------------------------------------

def _table4(mia: int, both: int, n: int) -> StudyResult:
    """mia_vs_memorization as pearl_mia writes it (percentages rounded to 0.1) at epochs 0 and 10."""
    mvm = pd.DataFrame([{"epoch": e, "member_mia_pct": round(100 * m / n, 1), "member_memo_pct": round(100 * b / n, 1),
                         "member_both_pct": round(100 * b / n, 1), "member_n": n, "nonmember_mia_pct": 0.0,
                         "nonmember_memo_pct": 0.0, "nonmember_both_pct": 0.0, "nonmember_n": 33}
                        for e, m, b in ((0, 35, 0), (10, mia, both))])
    res = StudyResult(tables={"mia_vs_memorization": mvm})
    res.config = compose("pearl_mia", ["logger=null"])
    return res


@pytest.mark.parametrize("mia, both, n, verdict", [
    (36, 25, 36, "reproduced"),       # ours (ci71): 11 of 36 MIA-flagged members not flagged by PEARL
    (838, 189, 1000, "reproduced"),   # the paper's Table 4 at epoch 10
    (36, 36, 36, "contradicted"),     # PEARL flags every member the MIA flags: memorization ≈ membership
    (36, 35, 36, "inconclusive"),     # 1 of 36: too few to say "not all" or "nearly all"
])
def test_not_all_members_memorized_each_way(mia, both, n, verdict):
    f = _judge("pearl_mia_not_all_members_memorized", _table4(mia, both, n))
    assert f.verdict == verdict, f.reason
    assert f.our_n == mia and f.our_value == pytest.approx((mia - both) / mia)


def test_not_all_members_memorized_is_not_judged_when_the_mia_flags_no_member():
    assert _judge("pearl_mia_not_all_members_memorized", _table4(0, 0, 36)).verdict == "not testable here"
