"""The RECAP paper-vs-ours rules (memlab.methods.recap.claims) beyond the both-ways test
(tests/core/test_rules_both_ways.py): what is left out, when a claim is not testable, and the comparison table."""

from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

from memlab.comparison import COLUMNS, RULES, VERDICTS, comparison_table, load_claims, rules_for
from memlab.config import compose
from memlab.methods.recap.evaluate import group_of
from memlab.results import StudyResult

EXPERIMENTS = ("recap_table3", "recap_feedback")
TARGETS = ("SmolLM2-135M-Instruct", "Gemma-3-270M")     # the claims without a suffix judge these (off_the_shelf)
ALIGNED = "tiny-neox-kjv-aligned"                       # the "_aligned" claims judge this one (ground_truth_aligned)
LADDER = {"prefix": 0.10, "dsp": 0.30, "dsp_jb": 0.40, "recap": 0.55, "echo": 0.15, "echo_fb": 0.20}


def books(scores: dict, *, n_books: int = 8, sd: float = 0.02, targets=TARGETS, seed: int = 0) -> pd.DataFrame:
    """book_scores rows {category: {method: mean ROUGE-L}} with independent noise per book and method, then made what
    the pipeline can produce (issue 49): per book DSP + Jailbreak = max(itself, DSP), RECAP = max(itself, DSP + JB)
    (the jailbreak replaces only blocked outputs, the loop keeps its best attempt)."""
    rng = np.random.default_rng(seed)
    out = pd.DataFrame([{"target": t, "category": cat, "book": f"{cat}/{b}", "split": None, "method": m,
                         "rouge_l": float(np.clip(v + rng.normal(0, sd), 0, 1)), "events": 2, "passages_m5": 0}
                        for t in targets for cat, by in scores.items() for b in range(n_books) for m, v in by.items()])
    key = ["target", "category", "book"]
    for hi, lo in LADDER_STEPS[::-1]:          # DSP + JB from DSP first, then RECAP from DSP + JB
        below = out[out.method == lo].set_index(key).rouge_l
        rows = out.method == hi
        floor = below.reindex(pd.MultiIndex.from_frame(out.loc[rows, key])).to_numpy()
        out.loc[rows, "rouge_l"] = np.fmax(out.loc[rows, "rouge_l"].to_numpy(), floor)
    return out


LADDER_STEPS = (("recap", "dsp_jb"), ("dsp_jb", "dsp"))   # ≥ per book by construction (the sanity checks)


def producible(res: StudyResult) -> StudyResult:
    """Issue 49: the book_scores a RECAP rule is tested on are ones the pipeline can produce: RECAP ≥ DSP + JB ≥ DSP
    on every book (recap/pipeline.py takes the max over stages), so no test shows a rule contradicted by a reversed
    ladder step."""
    b = res.tables.get("book_scores")
    if b is not None and not b.empty:
        w = b.pivot_table(index=["target", "category", "book"], columns="method", values="rouge_l", aggfunc="mean")
        for hi, lo in LADDER_STEPS:
            if {hi, lo} <= set(w.columns):
                pair = w[[hi, lo]].dropna()
                assert (pair[hi] >= pair[lo] - 1e-9).all(), f"{hi} < {lo} on a book: not pipeline output"
    return res


@lru_cache(maxsize=None)
def run_config(*overrides: str):
    """The recap_feedback config the rules judge under (StudyResult.method): seed 0, deterministic agents,
    passage_tolerance 5, max_rounds 2; 400 bootstrap resamples (conf: 1000) keep the tests fast."""
    return compose("recap_feedback", ["logger=null", "method.bootstrap.n_resamples=400", *overrides])


def result(tables: dict, *overrides: str) -> StudyResult:
    return StudyResult(tables=tables, config=run_config(*overrides))


def judge(claim_id: str, res: StudyResult):
    rules_for("recap_table3")
    return RULES[claim_id](producible(res), next(c for c in load_claims() if c.id == claim_id))


def refusals(blocked: float) -> pd.DataFrame:
    return pd.DataFrame([{"target": t, "category": "copyrighted", "method": m, "events": 6, "blocked": blocked}
                         for t in TARGETS for m in ("dsp", "dsp_jb")])


def test_every_recap_claim_has_a_rule():
    rules_for("recap_table3")
    claims = [c for c in load_claims() if c.experiment in EXPERIMENTS]
    assert {c.experiment for c in claims} == set(EXPERIMENTS)
    assert [c.id for c in claims if c.id not in RULES] == []


def test_jailbreak_without_refusals_is_not_testable():
    f = judge("recap_t3_jailbreak_gain", result({"book_scores": books({"copyrighted": LADDER}),
                                                 "refusals": refusals(0.0)}))
    assert f.verdict == "not testable here" and "no DSP output" in f.reason and "memlab.run" in f.reason


def no_gain(b: pd.DataFrame, method: str = "recap") -> pd.DataFrame:
    """``b`` with ``method`` set to DSP's score on every book: no gain at all, which the pipeline can produce (its
    loop accepts no re-attempt), unlike a method below DSP."""
    dsp = b[b.method == "dsp"].set_index(["target", "book"]).rouge_l
    rows = b.method == method
    b = b.copy()
    b.loc[rows, "rouge_l"] = dsp.loc[list(zip(b[rows].target, b[rows].book))].to_numpy()
    return b


def test_each_scope_judges_its_own_targets():
    """The off-the-shelf models gain, the aligned target gains nothing: each claim sees only its scope's targets,
    and the base tiny model (ground_truth_base) is judged by neither."""
    off = books({"copyrighted": LADDER})
    aligned = no_gain(books({"copyrighted": {**LADDER, "dsp_jb": 0.30}}, targets=(ALIGNED,), seed=1), "dsp_jb")
    aligned = no_gain(aligned)
    base = books({"copyrighted": {**LADDER, "recap": 0.99}}, targets=("tiny-neox-kjv",), seed=2)
    res = result({"book_scores": pd.concat([off, aligned, base])})
    f = judge("recap_gain_over_dsp", res)
    assert f.verdict == "reproduced" and "Gemma-3-270M" in f.setting and ALIGNED not in f.setting
    f = judge("recap_gain_over_dsp_aligned", res)
    assert f.verdict == "contradicted" and f.setting.startswith(f"targets: {ALIGNED};")
    assert judge("recap_gain_over_dsp_aligned", result({"book_scores": off})).verdict == "not testable here"


def test_a_gain_that_does_not_clear_its_floor_is_not_reproduced():
    # RECAP beats DSP clearly, but its hints alone (metadata + feedback echo) score more than RECAP does
    f = judge("recap_gain_over_dsp", result({"book_scores": books({"copyrighted": {**LADDER, "echo_fb": 0.7}})}))
    assert f.verdict == "inconclusive" and "does not clear" in f.reason
    # the same gain with a floor beneath it is a gain
    assert judge("recap_gain_over_dsp", result({"book_scores": books({"copyrighted": LADDER})})).verdict == "reproduced"
    # no gain at all (RECAP = DSP + JB = DSP on every book, as when nothing was blocked and the loop accepts
    # nothing; RECAP = DSP alone above DSP + JB is no pipeline output): below the least gain tested, so contradicted
    # whatever the floor (issue 49: a gain ≥ 0 by construction is judged on its size)
    flat = no_gain(no_gain(books({"copyrighted": {**LADDER, "echo_fb": 0.7}}), "dsp_jb"))
    f = judge("recap_gain_over_dsp", result({"book_scores": flat}))
    assert f.verdict == "contradicted" and f.our_value == 0 and f.n_needed is None
    # no floor measured: the gain cannot be judged above it
    no_floor = books({"copyrighted": {k: v for k, v in LADDER.items() if not k.startswith("echo")}})
    assert judge("recap_gain_over_dsp", result({"book_scores": no_floor})).verdict == "not testable here"


@pytest.mark.parametrize("claim_id", ["recap_gain_over_dsp", "recap_t3_jailbreak_gain"])
def test_a_gain_that_holds_by_construction_is_judged_on_its_size(claim_id):
    """Issue 49: the gainer ≥ DSP on every book, so its direction cannot fail; a gain of ~3 % (RECAP and DSP + JB
    0.01 above DSP 0.30 on every book) is below the least gain tested (10 %): contradicted, though positive on every
    book; a gain of 33 % or more is reproduced."""
    small = books({"copyrighted": {**LADDER, "dsp_jb": 0.31, "recap": 0.31}}, sd=0.0)
    f = judge(claim_id, result({"book_scores": small, "refusals": refusals(0.5)}))
    assert f.verdict == "contradicted" and 0 < f.our_value < 0.10, f.reason
    assert "above 0 iff the gain exceeds 10%" in f.reason
    big = judge(claim_id, result({"book_scores": books({"copyrighted": LADDER}), "refusals": refusals(0.5)}))
    assert big.verdict == "reproduced" and big.our_value > 0.10, big.reason


def test_order_is_contradicted_only_by_dsp_below_prefix_probing():
    """The two ladder steps can only hold or stay open (≥ by construction); Prefix-Probing above DSP contradicts."""
    tie = no_gain(no_gain(books({"copyrighted": LADDER}), "dsp_jb"))      # RECAP = DSP + JB = DSP, all above prefix
    f = judge("recap_t3_order", result({"book_scores": tie}))
    assert f.verdict == "inconclusive" and "; ≥ 0 by construction)" in f.reason, f.reason
    f = judge("recap_t3_order", result({"book_scores": books({"copyrighted": {**LADDER, "prefix": 0.5}})}))
    assert f.verdict == "contradicted", f.reason


def test_two_books_a_target_cannot_decide_even_when_every_book_agrees():
    b = books({"copyrighted": LADDER}, n_books=2)
    f = judge("recap_gain_over_dsp", result({"book_scores": b}))
    assert f.verdict == "inconclusive" and f.p_value >= 0.05 and f.n_needed > f.our_n


def test_an_undecided_aligned_claim_names_training_on_more_books_not_profile_full():
    """The aligned target's member books are fixed by its zoo family: profile=full cannot add one, so its row names
    the step that would; an off-the-shelf row keeps profile=full (which adds books)."""
    from memlab.comparison import _with_next_step

    f = judge("recap_gain_over_dsp_aligned", result({"book_scores": books({"copyrighted": LADDER}, n_books=2,
                                                                          targets=(ALIGNED,))}))
    assert f.verdict == "inconclusive"
    step = _with_next_step("recap_table3", f)
    assert "(conf/zoo/kjv_aligned.yaml)" in step and "profile=full adds none" in step
    off = judge("recap_gain_over_dsp", result({"book_scores": books({"copyrighted": LADDER}, n_books=2)}))
    assert _with_next_step("recap_table3", off).endswith("experiment=recap_table3 profile=full")


def tiny_books(members: float, nonmembers: float, copyrighted: float, n_books: int = 6, target: str = ALIGNED,
               copyright_split: str | None = None, held_licences: float | None = None) -> pd.DataFrame:
    """book_scores of one target with exact membership, labelled as the study labels them (split and group)."""
    rows, cells = [], [("public_domain", "member", members), ("public_domain", "nonmember", nonmembers),
                       ("copyrighted", copyright_split, copyrighted)]
    if held_licences is not None:
        cells.append(("copyrighted", "nonmember", held_licences))
    for cat, split, v in cells:
        for b in range(n_books):
            rows.append({"target": target, "category": cat, "book": f"{cat}/{split}/{b}", "split": split,
                         "group": group_of(cat, split), "method": "recap", "rouge_l": v + 0.01 * (b % 3),
                         "events": 2, "passages_m5": 0})
    return pd.DataFrame(rows)


def test_public_vs_copyrighted_leaves_out_a_target_trained_on_one_category():
    # public-domain members vs licence texts it never saw (no member licence): true by construction, left out
    tiny = tiny_books(members=0.9, nonmembers=0.0, copyrighted=0.1)
    f = judge("recap_t3_public_vs_copyrighted_aligned", result({"book_scores": tiny}))
    assert f.verdict == "not testable here"
    # trained on both categories: judged on its members of each; held-out licences it reads well are left out
    both = tiny_books(members=0.9, nonmembers=0.0, copyrighted=0.1, copyright_split="member", held_licences=0.95)
    f = judge("recap_t3_public_vs_copyrighted_aligned", result({"book_scores": both}))
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(0.8, abs=0.03)
    reverse = tiny_books(members=0.1, nonmembers=0.0, copyrighted=0.9, copyright_split="member")
    assert judge("recap_t3_public_vs_copyrighted_aligned", result({"book_scores": reverse})).verdict == "contradicted"
    # an off-the-shelf target that reads copyrighted text better: contradicted
    other = books({"public_domain": {"recap": 0.1}, "copyrighted": {"recap": 0.5}}, targets=TARGETS[:1])
    f = judge("recap_t3_public_vs_copyrighted", result({"book_scores": pd.concat([tiny, other])}))
    assert f.verdict == "contradicted" and ALIGNED not in f.setting
    assert f.our_value == pytest.approx(-0.4, abs=0.03)


def gains(per_event: list[tuple[float, float]], rounds: int = 2, split: str = "member") -> pd.DataFrame:
    """feedback_gains_events rows from (gain after round 1, gain after the last round) per event."""
    return pd.DataFrame([{"target": TARGETS[0], "category": "public_domain", "event": f"{split}-e{e}", "round": k,
                          "gain": 0.0 if k == 0 else (g1 if k == 1 else gl), "split": split}
                         for e, (g1, gl) in enumerate(per_event) for k in range(rounds + 1)])


def test_feedback_one_round_members_only_and_not_testable_cases():
    members = gains([(0.3, 0.3)] * 40)
    held = gains([(0.02, 0.3)] * 40, split="nonmember")
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": pd.concat([members, held])}))
    assert f.verdict == "reproduced" and f.our_value == 0.0 and f.our_n == 40  # pooled, half would improve later
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": gains([(0.3, 0.3)] * 40, rounds=1)},
                                                 "method.recap.max_rounds=1"))
    assert f.verdict == "not testable here" and "allowed one feedback round" in f.reason
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": gains([(0.0, 0.0)] * 40)}))
    assert f.verdict == "not testable here" and "improved no event" in f.reason
    # one event of 27 gained in round 1 (the real embedded run): 0 of 27 improving later is true by construction
    f = judge("recap_feedback_one_round", result({"feedback_gains_events": gains([(0.1, 0.1)] + [(0.0, 0.0)] * 26)}))
    assert f.verdict == "not testable here" and "only 1 of 27 events" in f.reason


def passages(by_cat: dict, *, targets=TARGETS, n_books: int = 8, split=None, suffix: str = "") -> pd.DataFrame:
    """book_scores with RECAP's passages per book ({category: passages on each book}); DSP + JB finds none. As the
    pipeline can: at most one passage per event (a book has as many events as passages, at least 2), and a book with
    passages scores the ROUGE-L a 40-token passage of a short gold implies (0.6)."""
    return pd.DataFrame([{"target": t, "category": cat, "book": f"{cat}/{b}{suffix}", "split": split, "method": m,
                          "rouge_l": 0.6 if k and m == "recap" else 0.2, "events": max(2, k),
                          "passages_m5": k if m == "recap" else 0}
                         for t in targets for cat, k in by_cat.items() for b in range(n_books)
                         for m in ("dsp_jb", "recap")])


def test_no_contamination_needs_a_positive_control():
    """A run in which RECAP finds no passage on any training book would pass "none on non-training books" trivially."""
    f = judge("recap_feedback_no_contamination", result({"book_scores": passages({"public_domain": 0,
                                                                                   "non_training": 0})}))
    assert f.verdict == "not testable here" and "no positive control" in f.reason


def test_no_contamination_decides_on_passages_not_rouge():
    """The paper's quantity is passages per book: RECAP far above DSP + JB in ROUGE-L on non-training books without a
    single passage is not contamination; one passage per book is at the margin (not below it); 3 are above it."""
    def run(nt):
        b = passages({"public_domain": 20, "non_training": nt})
        b.loc[(b.category == "non_training") & (b.method == "recap"), "rouge_l"] = 0.9
        return judge("recap_feedback_no_contamination", result({"book_scores": b}))
    assert run(0).verdict == "reproduced"
    at_margin = run(1)
    assert at_margin.verdict == "inconclusive" and at_margin.our_value == 1.0
    assert run(3).verdict == "contradicted"


def test_no_contamination_is_guarded_by_the_exact_sign_flip_test():
    """Two non-training books with no passage give a bootstrap interval [0, 0] below 1, but no sign pattern of two
    differences reaches p < 0.025: inconclusive, and the n it needs is at least what the test needs."""
    f = judge("recap_feedback_no_contamination", result({"book_scores": passages(
        {"public_domain": 20, "non_training": 0}, targets=TARGETS[:1], n_books=2)}))
    assert f.verdict == "inconclusive" and "cannot reach the sign-flip level" in f.reason
    assert f.n_needed is None or f.n_needed >= 7


def test_no_contamination_counts_held_out_books_as_non_training():
    """On the aligned target, books known to be outside its training set join the release notes: passages found on
    them are contamination, even where the release notes stay clean."""
    def rows(held_passages):
        member = passages({"public_domain": 20}, targets=(ALIGNED,), split="member")
        held = passages({"public_domain": held_passages}, targets=(ALIGNED,), split="nonmember", suffix="-held")
        notes = passages({"non_training": 0}, targets=(ALIGNED,), n_books=2)
        return pd.concat([member, held, notes])
    assert judge("recap_feedback_no_contamination_aligned", result({"book_scores": rows(0)})).verdict == "reproduced"
    f = judge("recap_feedback_no_contamination_aligned", result({"book_scores": rows(4)}))
    assert f.verdict == "contradicted" and f.our_value == 4.0 and "on 10 books" in f.reason


def test_filter_hybrid_without_memorization_scores_is_not_testable():
    assert judge("recap_filter_hybrid", result({"filter_tradeoff": pd.DataFrame()})).verdict == "not testable here"


def _filter_inputs(hybrid_noise: float, rouge_noise: float, n_books: int = 40, per_book: int = 5):
    """filter_events (as the study writes them) where the hybrid score and ROUGE-L each track the loop's gain but
    replace a share (``*_noise``) of the events' scores with noise; cosine is noise."""
    rng = np.random.default_rng(0)
    n = n_books * per_book
    gain = rng.uniform(0, 0.4, n)

    def signal(share):
        x = gain.copy()
        swap = rng.random(n) < share
        x[swap] = rng.uniform(0, 0.4, swap.sum())
        return x
    ev = pd.DataFrame({"target": TARGETS[0], "book": [f"b{i // per_book}" for i in range(n)], "split": None,
                       "feedback_calls": 2, "recap": 0.3 + gain, "dsp_jb": 0.3, "hybrid": signal(hybrid_noise),
                       "rouge_l": signal(rouge_noise), "cosine": rng.uniform(0, 0.4, n)})
    tr = pd.DataFrame([{"signal": "hybrid", "threshold": t, "queries_saved": 0.5, "rouge_l_filtered": 0.4,
                        "rouge_l_unfiltered": 0.5} for t in (0.1, 0.2, 0.3)])
    return {"filter_tradeoff": tr, "filter_events": ev}


def test_filter_hybrid_needs_to_beat_the_others_by_the_margin():
    """A hybrid that ranks events as well as ROUGE-L does is a tie, and a tie is no "best": contradicted, as is a
    hybrid worse than ROUGE-L; one that ranks them much better than both others clears δ = 0.02: reproduced."""
    tie = judge("recap_filter_hybrid", result(_filter_inputs(0.0, 0.0)))
    assert tie.verdict == "contradicted" and "hybrid − rouge_l +0.000" in tie.reason and "margin +0.02" in tie.reason
    assert judge("recap_filter_hybrid", result(_filter_inputs(0.8, 0.0))).verdict == "contradicted"
    assert judge("recap_filter_hybrid", result(_filter_inputs(0.0, 0.8))).verdict == "reproduced"


def test_filter_hybrid_resamples_books_not_events():
    """Events of one book are one unit: 40 events in 2 books decide nothing that 40 books would, and a table without
    the book column (a run before issue 49) cannot be judged."""
    few = judge("recap_filter_hybrid", result(_filter_inputs(0.0, 0.8, n_books=2, per_book=20)))
    assert few.verdict == "inconclusive" and few.our_n == 2 and "of 2 (target, book) pairs" in few.setting
    assert "cannot decide (needs ≥ 7)" in few.reason
    old = _filter_inputs(0.0, 0.8)
    old["filter_events"] = old["filter_events"].drop(columns="book")
    f = judge("recap_filter_hybrid", result(old))
    assert f.verdict == "not testable here" and "no book column" in f.reason


def full_result() -> StudyResult:
    b = books({"public_domain": LADDER, "copyrighted": LADDER,
               "non_training": {"dsp_jb": 0.1, "recap": 0.1, "echo_fb": 0.3}})
    return result({"book_scores": b, "refusals": refusals(0.3), "feedback_gains_events": gains([(0.3, 0.3)] * 5)})


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_comparison_table_is_deterministic(experiment):
    a = comparison_table(experiment, full_result(), profile="embedded")
    b = comparison_table(experiment, full_result(), profile="embedded")
    assert list(a.columns) == COLUMNS and len(a) == len(load_claims(experiment, kind="claim"))
    assert set(a.verdict) <= set(VERDICTS) and set(a.profile) == {"embedded"} and a.rule.str.len().min() > 40
    pd.testing.assert_frame_equal(a, b)


def test_alpha_is_set_once_per_paper_and_decides():
    """Issue 49: multiplicity is handled once: each RECAP claim's family-wise α comes from conf/paper/000_recap.yaml
    (no default in code) and comparison.claim_level splits it over the claim's tests. Four aligned member licences with
    DSP below Prefix-Probing on every one: at α 0.05 the exact sign-flip p of 4 books (0.125) cannot reach 0.05/3,
    so inconclusive with 7 books to decide (its own test's least n); at α 0.5 (0.167 per step) contradicted."""
    import dataclasses

    from memlab.errors import ConfigError
    from memlab.comparison import claim_level as level

    rules_for("recap_table3")
    claims = [c for c in load_claims() if c.experiment in EXPERIMENTS]
    assert {c.alpha for c in claims} == {0.05}
    claim = next(c for c in claims if c.id == "recap_t3_order_aligned")
    assert level(claim, 3) == pytest.approx(1 - 0.05 / 3)
    with pytest.raises(ConfigError, match="no alpha"):
        level(dataclasses.replace(claim, alpha=None))
    b = books({"copyrighted": {**LADDER, "prefix": 0.7}}, n_books=4, targets=(ALIGNED,))
    f = RULES[claim.id](result({"book_scores": b}), claim)
    assert f.verdict == "inconclusive" and f.n_needed == 7, f.reason
    f = RULES[claim.id](result({"book_scores": b}), dataclasses.replace(claim, alpha=0.5))
    assert f.verdict == "contradicted", f.reason


def test_paired_p_reads_the_books_its_interval_resamples():
    """The p guarding a Table 3 interval is the sign-flip p of the same (target, book) units the interval resamples:
    member books scored by every method. A held-out licence and a book some method did not score change neither."""
    from memlab.methods.recap.claim_panels import copyright_panel, paired_p

    b = books({"copyrighted": LADDER}, n_books=6, targets=(ALIGNED,))
    base = result({"book_scores": b})
    extra = books({"copyrighted": {**LADDER, "prefix": 0.9}}, n_books=2, targets=(ALIGNED,), seed=3)
    held = extra[extra.book == "copyrighted/0"].assign(split="nonmember", book="held/0")
    partial = extra[(extra.book == "copyrighted/1") & (extra.method != "recap")].assign(book="partial/1")
    more = result({"book_scores": pd.concat([b, held, partial])})
    assert copyright_panel(more)[3] == copyright_panel(base)[3] == 6
    for a, c in (("dsp", "prefix"), ("recap", "dsp")):
        assert paired_p(more, a, c) == paired_p(base, a, c) == pytest.approx(2 / 2 ** 6)


def test_a_permutation_guarded_rule_needs_what_its_own_test_needs():
    """Public vs copyright category is guarded by a permutation test: 2 + 2 member books that all agree cannot reach
    p < 0.05, so the n to decide is at least the fewest books at which that test can (9: 4 + 5)."""
    from memlab.metrics.intervals import permutation_min_n

    b = tiny_books(members=0.9, nonmembers=0.0, copyrighted=0.1, copyright_split="member", n_books=2)
    f = judge("recap_t3_public_vs_copyrighted_aligned", result({"book_scores": b}))
    assert f.verdict == "inconclusive" and f.our_n == 4 and f.n_needed >= permutation_min_n(0.95) == 7, f.reason
