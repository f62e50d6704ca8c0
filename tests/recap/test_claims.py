"""The RECAP paper-vs-ours rules (memlab.methods.recap.claims) on hand-made study results with known verdicts."""

import numpy as np
import pandas as pd
import pytest

from memlab.comparison import RULES, VERDICTS, comparison_table, load_claims, rules_for
from memlab.methods.recap.evaluate import group_of
from memlab.results import StudyResult

EXPERIMENTS = ("recap_table3", "recap_feedback")
TARGETS = ("t-small", "t-large")


def books(scores: dict[str, dict[str, float]], *, n_books: int = 6, passages: dict | None = None,
          seed: int = 0) -> pd.DataFrame:
    """book_scores rows: {category: {method: mean ROUGE-L}} with small per-book noise, for every target."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in TARGETS:
        for cat, by_method in scores.items():
            for b in range(n_books):
                noise = rng.normal(0, 0.02)
                for m, v in by_method.items():
                    p = (passages or {}).get((cat, m), 0)
                    rows.append({"target": t, "category": cat, "book": f"{cat}/{b}", "split": None, "method": m,
                                 "rouge_l": float(np.clip(v + noise, 0, 1)), "events": 2, "passages_m5": p})
    return pd.DataFrame(rows)


def result(tables: dict, **metrics) -> StudyResult:
    return StudyResult(tables=tables, metrics={"bootstrap_seed": 0, "bootstrap_resamples": 500,
                                               "agents": "deterministic", "passage_tolerance": 5, **metrics})


def judge(claim_id: str, res: StudyResult):
    rules_for("recap_")
    claim = next(c for c in load_claims() if c.id == claim_id)
    return RULES[claim_id](res, claim)


LADDER = {"prefix": 0.10, "dsp": 0.30, "dsp_jb": 0.40, "recap": 0.55}
FLAT = {"prefix": 0.20, "dsp": 0.20, "dsp_jb": 0.20, "recap": 0.20}


def refusals(blocked: float) -> pd.DataFrame:
    return pd.DataFrame([{"target": t, "category": "copyrighted", "method": m, "events": 6, "blocked": blocked}
                         for t in TARGETS for m in ("dsp", "dsp_jb")])


def test_every_recap_claim_has_a_rule():
    rules_for("recap_")
    claims = [c for c in load_claims() if c.experiment in EXPERIMENTS]
    assert {c.experiment for c in claims} == set(EXPERIMENTS)
    assert [c.id for c in claims if c.id not in RULES] == []


@pytest.mark.parametrize("scores, verdict", [(LADDER, "reproduced"), (FLAT, "not reproduced"),
                                             ({**LADDER, "recap": 0.40}, "not reproduced")])
def test_t3_order(scores, verdict):
    f = judge("recap_t3_order", result({"book_scores": books({"copyrighted": scores})}))
    assert f.verdict == verdict
    assert f.ci[0] <= f.our_value <= f.ci[1]


def test_t3_jailbreak_gain():
    assert judge("recap_t3_jailbreak_gain", result({"book_scores": books({"copyrighted": LADDER}),
                                                    "refusals": refusals(0.5)})).verdict == "reproduced"
    f = judge("recap_t3_jailbreak_gain", result({"book_scores": books({"copyrighted": FLAT}),
                                                 "refusals": refusals(0.5)}))
    assert f.verdict == "not reproduced" and f.our_value == pytest.approx(0.0)
    f = judge("recap_t3_jailbreak_gain", result({"book_scores": books({"copyrighted": FLAT}),
                                                 "refusals": refusals(0.0)}))
    assert f.verdict == "not comparable" and "refused none" in f.reason


def test_t3_public_vs_copyrighted():
    res = result({"book_scores": books({"public_domain": {"recap": 0.6}, "copyrighted": {"recap": 0.3}})})
    assert judge("recap_t3_public_vs_copyrighted", res).verdict == "reproduced"
    res = result({"book_scores": books({"public_domain": {"recap": 0.3}, "copyrighted": {"recap": 0.3}})})
    assert judge("recap_t3_public_vs_copyrighted", res).verdict == "not reproduced"
    res = result({"book_scores": books({"copyrighted": {"recap": 0.3}})})
    assert judge("recap_t3_public_vs_copyrighted", res).verdict == "not comparable"
    # books held out of a target's training set (split = nonmember) are not "public domain in training"
    b = books({"public_domain": {"recap": 0.6}, "copyrighted": {"recap": 0.3}})
    held = b[b.category == "public_domain"].assign(split="nonmember", rouge_l=0.0, book=lambda d: d.book + "-held")
    f = judge("recap_t3_public_vs_copyrighted", result({"book_scores": pd.concat([b, held])}))
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(0.6, abs=0.03)


def tiny_books(members: float, nonmembers: float, copyrighted: float, n_books: int = 6) -> pd.DataFrame:
    """book_scores of one target with exact membership, labelled as the study labels them (split and group)."""
    rows = []
    for cat, split, v in (("public_domain", "member", members), ("public_domain", "nonmember", nonmembers),
                          ("copyrighted", None, copyrighted)):
        for b in range(n_books):
            rows.append({"target": "tiny", "category": cat, "book": f"{cat}/{split}/{b}", "split": split,
                         "group": group_of(cat, split), "method": "recap", "rouge_l": v + 0.01 * (b % 3),
                         "events": 2, "passages_m5": 0})
    return pd.DataFrame(rows)


def test_public_domain_never_pools_members_and_nonmembers():
    # pooled, the tiny model's public domain would be ~0.31 < 0.41 (not reproduced); its members alone are 0.61
    b = tiny_books(members=0.6, nonmembers=0.0, copyrighted=0.4)
    f = judge("recap_t3_public_vs_copyrighted", result({"book_scores": b}))
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(0.61, abs=0.01)
    assert "tiny: member books only, non-members left out" in f.setting and "n = 6 (" in f.setting
    assert "non-members 0.010" in f.reason and "not judged" in f.reason
    # either label suffices (the group column alone, as in Table 3's rows) ...
    g = judge("recap_t3_public_vs_copyrighted", result({"book_scores": b.drop(columns="split")}))
    assert g.our_value == pytest.approx(f.our_value)
    # ... but a table that cannot tell members from non-members is refused rather than pooled
    with pytest.raises(ValueError, match="cannot be told apart"):
        judge("recap_t3_public_vs_copyrighted", result({"book_scores": b.drop(columns=["split", "group"])}))


def test_feedback_one_round_leaves_nonmember_events_out():
    members = gains([(0.3, 0.3)] * 10 + [(0.0, 0.0)] * 9 + [(0.3, 0.32)]).assign(split="member")
    held = gains([(0.02, 0.3)] * 10).assign(split="nonmember", event=lambda d: "held-" + d.event)
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": pd.concat([members, held])}))
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(0.05)  # pooled: 11/30 improve later
    assert "10 non-member events of t-small left out: members only" in f.setting


def test_gain_over_dsp():
    assert judge("recap_gain_over_dsp", result({"book_scores": books({"copyrighted": LADDER})})).verdict == "reproduced"
    f = judge("recap_gain_over_dsp", result({"book_scores": books({"copyrighted": FLAT})}))
    assert f.verdict == "not reproduced" and "not GPT-4.1" in f.reason


def gains(per_event: list[tuple[float, float]], rounds: int = 2) -> pd.DataFrame:
    """feedback_gains_events rows from (gain after round 1, gain after the last round) per event."""
    rows = []
    for e, (g1, gl) in enumerate(per_event):
        for k in range(rounds + 1):
            g = 0.0 if k == 0 else (g1 if k == 1 else gl)
            rows.append({"target": "t-small", "category": "public_domain", "event": f"e{e}", "round": k,
                         "best": 0.2 + g, "gain": g})
    return pd.DataFrame(rows)


def test_feedback_one_round():
    one = [(0.3, 0.3)] * 10 + [(0.0, 0.0)] * 9 + [(0.3, 0.32)]
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": gains(one)}))
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(0.05)
    late = [(0.05, 0.3)] * 10 + [(0.0, 0.0)] * 10
    assert judge("recap_feedback_one_round", result({"feedback_gains_events": gains(late)})).verdict == "not reproduced"
    none = [(0.0, 0.0)] * 10
    assert judge("recap_feedback_one_round", result({"feedback_gains_events": gains(none)})).verdict == "not reproduced"
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": gains(one, rounds=1)}, max_rounds=1))
    assert f.verdict == "not comparable" and "allowed one feedback round" in f.reason
    # two rounds allowed, but round 1 gained nothing, so no event went on to round 2 (the loop goes on after a gain)
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": gains(none, rounds=1)}, max_rounds=2))
    assert f.verdict == "not reproduced" and "improved no event" in f.reason
    # ... and when every event that gained in round 1 reached the stop score there: all progress is in round 1
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": gains(one, rounds=1)}, max_rounds=2))
    assert f.verdict == "reproduced" and f.our_value == 0.0
    few = [(0.3, 0.3)] * 2 + [(0.0, 0.0)] * 10
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": gains(few)}))
    assert f.verdict == "not comparable" and "only 2 of 12" in f.reason


def test_feedback_no_contamination():
    clean = books({"non_training": {"dsp_jb": 0.05, "recap": 0.05}}, passages={("non_training", "recap"): 1})
    f = judge("recap_feedback_no_contamination", result({"book_scores": clean}))
    assert f.verdict == "reproduced" and f.our_value == 1
    leaky = books({"non_training": {"dsp_jb": 0.05, "recap": 0.05}}, passages={("non_training", "recap"): 4})
    assert judge("recap_feedback_no_contamination", result({"book_scores": leaky})).verdict == "not reproduced"
    lifted = books({"non_training": {"dsp_jb": 0.05, "recap": 0.40}})
    assert judge("recap_feedback_no_contamination", result({"book_scores": lifted})).verdict == "not reproduced"


def tradeoff(best: str) -> pd.DataFrame:
    rows = []
    for sig in ("hybrid", "rouge_l", "cosine"):
        for thr, saved in ((0.0, 0.0), (0.2, 0.5), (0.5, 0.9), (0.7, 1.0)):
            keep = 0.50 if sig == best else 0.40
            filt = 0.53 if saved == 0 else (0.30 if saved == 1 else keep)
            rows.append({"signal": sig, "threshold": thr, "queries_saved": saved, "rouge_l_filtered": filt,
                         "rouge_l_unfiltered": 0.53, "rouge_l_lost": 0.53 - filt})
    return pd.DataFrame(rows)


def test_filter_hybrid():
    assert judge("recap_filter_hybrid", result({"filter_tradeoff": tradeoff("hybrid")})).verdict == "reproduced"
    assert judge("recap_filter_hybrid", result({"filter_tradeoff": tradeoff("cosine")})).verdict == "not reproduced"
    assert judge("recap_filter_hybrid", result({"filter_tradeoff": pd.DataFrame()})).verdict == "not comparable"


def full_result() -> StudyResult:
    b = books({"public_domain": LADDER, "copyrighted": LADDER, "non_training": FLAT})
    return result({"book_scores": b, "refusals": refusals(0.3), "feedback_gains_events": gains([(0.3, 0.3)] * 5),
                   "filter_tradeoff": tradeoff("hybrid")})


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_comparison_table_is_deterministic(experiment):
    a, b = comparison_table(experiment, full_result()), comparison_table(experiment, full_result())
    assert len(a) == len(load_claims(experiment)) and set(a.verdict) <= set(VERDICTS)
    pd.testing.assert_frame_equal(a, b)
