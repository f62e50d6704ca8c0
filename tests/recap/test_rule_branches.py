"""Issue 49: every RECAP rule reaches each of its verdicts on tables the pipeline can produce. The tables are the
ci71 run's own (tests/recap/ci71/: recap_table3 / recap_feedback as a full fresh pipeline run wrote them, columns
the rules read), judged as they are and after perturbations a run could produce: a target that refuses other
events (a blocked output scores 0, ``blocked_score: zero``), a jailbreak that is blocked too (then the feedback loop
skips the event, ``skip_double_blocked``), a feedback loop that accepts re-attempts (each a gain > ``min_gain``) or
none, a weaker target on one category (every method's score of those events scaled alike). Book scores are rebuilt
from the events as the study does (token-weighted ROUGE-L, :func:`memlab.methods.recap.evaluate.book_scores`), so
RECAP ≥ DSP + Jailbreak ≥ DSP holds on every event and book (the sanity checks are asserted on every input).
Judged on the aligned tiny target (the scope with enough member books to decide); the off-the-shelf scope shares
the same rule functions and has two books a target in this run."""

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memlab.comparison import RULES, load_claims, rules_for
from memlab.config import compose
from memlab.results import StudyResult

HERE = Path(__file__).parent / "ci71"
rules_for("recap_table3")
CLAIMS = {c.id: c for c in load_claims()}
ALIGNED = "tiny-neox-kjv-aligned"
SCORES = ("prefix", "dsp", "dsp_jb", "recap", "echo", "echo_fb")
MIN_GAIN = 0.02         # conf/method/recap.yaml recap.min_gain: an accepted re-attempt gains more


@lru_cache(maxsize=None)
def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(HERE / f"{name}.csv")


def real(name: str) -> pd.DataFrame:
    return _csv(name).copy()


@lru_cache(maxsize=None)
def run_config(experiment: str):
    return compose(experiment, ["logger=null", "method.bootstrap.n_resamples=400"])


def events(target: str = ALIGNED) -> pd.DataFrame:
    e = real("events")
    e = e[e.target == target].copy()
    e["category"] = e.group.str.replace(r" \(.*\)$", "", regex=True)
    e["split"] = np.where(e.group.str.endswith("(members)"), "member",
                          np.where(e.group.str.endswith("(non-members)"), "nonmember", None))
    return e


def books_from(ev: pd.DataFrame) -> pd.DataFrame:
    """book_scores of ``ev`` as the study writes them: token-weighted ROUGE-L per (target, category, book, method),
    the ci71 passage counts kept (0 on every copyright-category book of this run)."""
    for hi, lo in (("recap", "dsp_jb"), ("dsp_jb", "dsp")):      # per event, by construction
        assert (ev[hi] >= ev[lo] - 1e-12).all(), f"{hi} < {lo} on an event: not pipeline output"
    long = ev.melt(id_vars=["target", "category", "split", "group", "book", "event", "gold_tokens"],
                   value_vars=list(SCORES), var_name="method", value_name="score")
    long["w"] = long.score * long.gold_tokens
    g = long.groupby(["target", "category", "book", "split", "group", "method"], dropna=False)
    out = (g.w.sum() / g.gold_tokens.sum()).rename("rouge_l").to_frame().join(g.size().rename("events")).reset_index()
    old = real("book_scores").set_index(["target", "book", "method"]).passages_m5
    out["passages_m5"] = old.reindex(pd.MultiIndex.from_frame(out[["target", "book", "method"]])).fillna(0).to_numpy()
    return out


def refusals_from(ev: pd.DataFrame, dsp_blocked, jb_blocked) -> pd.DataFrame:
    """The refusals rows of the copyright-category member events: DSP blocked where ``dsp_blocked``, DSP + JB blocked
    where ``jb_blocked`` (only where DSP was: the jailbreak rewrites blocked prompts only)."""
    assert not (jb_blocked & ~dsp_blocked).any()
    rows = []
    for split, m in (("member", ev.split == "member"), ("nonmember", ev.split == "nonmember")):
        m &= ev.category == "copyrighted"
        for method, b in (("dsp", dsp_blocked), ("dsp_jb", jb_blocked)):
            rows.append({"target": ALIGNED, "category": "copyrighted", "split": split, "method": method,
                         "events": int(m.sum()), "blocked": float(b[m].mean()), "refused_n": int(b[m].sum())})
    return pd.DataFrame(rows)


def blocked_now(ev):
    """DSP blocked (scores 0; ci71: the events DSP scored 0 where the jailbreak or the loop found more, plus the ones
    the loop skipped as blocked twice) and DSP + JB blocked (skipped as blocked twice)."""
    twice = ev.feedback_skipped.eq("dsp_and_jailbreak_blocked").to_numpy()
    return ((ev.dsp == 0) & (ev.dsp_jb > 0)).to_numpy() | twice, twice


def result(experiment: str, **tables) -> StudyResult:
    res = StudyResult(tables=tables)
    res.config = run_config(experiment)
    for check in ("recap_t3_feedback_keeps_best", "recap_t3_jailbreak_keeps_dsp"):
        if "book_scores" in tables:
            k = RULES[check](res, CLAIMS[check])
            assert k.passed, k.reason
    return res


def judge(claim_id: str, res: StudyResult):
    return RULES[claim_id](res, CLAIMS[claim_id])


def table3(ev: pd.DataFrame, dsp_blocked=None, jb_blocked=None) -> StudyResult:
    b0, j0 = blocked_now(ev)
    d = b0 if dsp_blocked is None else dsp_blocked
    j = j0 if jb_blocked is None else jb_blocked
    return result("recap_table3", book_scores=books_from(ev), refusals=refusals_from(ev, d, j))


# -- perturbations a run can produce (events of the aligned target's copyright-category members unless said) ------
def members(ev, category: str = "copyrighted"):
    return ((ev.category == category) & (ev.split == "member")).to_numpy()


def loop_accepts(ev, gain: float = 0.1):
    """The feedback loop accepts a re-attempt on every member event it refines (not skipped): RECAP = DSP + JB +
    ``gain`` (> min_gain), capped at 1."""
    ev = ev.copy()
    m = members(ev) & ev.feedback_skipped.isna().to_numpy()
    ev.loc[m, "recap"] = np.minimum(1.0, np.maximum(ev.recap[m], ev.dsp_jb[m] + gain))
    return ev


def loop_accepts_nothing(ev):
    ev = ev.copy()
    ev["recap"] = ev.dsp_jb
    return ev


def prefix_probe_fails(ev):
    """Prefix-Probing reproduces a tenth of what it did (a target that does not continue raw prefixes)."""
    ev = ev.copy()
    ev.loc[members(ev), "prefix"] *= 0.1
    return ev


def jailbreak_blocked(ev):
    """Every jailbreak of a blocked DSP request is blocked too: DSP + JB scores 0 there, and the loop skips the event
    (skip_double_blocked), so RECAP scores 0; returns the events and the blocked masks."""
    dsp_b, _ = blocked_now(ev)
    ev = ev.copy()
    ev.loc[dsp_b, ["dsp_jb", "recap"]] = 0.0
    ev.loc[dsp_b, "feedback_skipped"] = "dsp_and_jailbreak_blocked"
    return ev, dsp_b, dsp_b.copy()


def refuses_more(ev):
    """The target refuses DSP on every other member event it answered and the jailbreak gets each through: DSP
    scores 0 there (blocked), DSP + JB and RECAP keep what the run's outputs scored."""
    dsp_b, jb_b = blocked_now(ev)
    more = members(ev) & (ev.dsp > 0).to_numpy()
    more &= np.cumsum(more) % 2 == 1
    ev = ev.copy()
    ev.loc[more, "dsp"] = 0.0
    return ev, dsp_b | more, jb_b


def weaker_on(ev, category: str, factor: float = 0.3):
    """A target that reproduces ``category``'s member books less well: every method's score there scaled alike."""
    ev = ev.copy()
    m = members(ev, category)
    ev.loc[m, list(SCORES)] *= factor
    return ev


# -- Table 3 -------------------------------------------------------------------------------------------------------
def test_the_real_run_is_judged_as_ci71_judged_it():
    res = table3(events())
    got = {c: judge(c, res) for c in ("recap_t3_order_aligned", "recap_t3_jailbreak_gain_aligned",
                                      "recap_gain_over_dsp_aligned", "recap_t3_public_vs_copyrighted_aligned",
                                      "recap_jailbreak_bypass_aligned")}
    assert {c: f.verdict for c, f in got.items()} == {
        "recap_t3_order_aligned": "contradicted", "recap_t3_jailbreak_gain_aligned": "inconclusive",
        "recap_gain_over_dsp_aligned": "inconclusive", "recap_t3_public_vs_copyrighted_aligned": "inconclusive",
        "recap_jailbreak_bypass_aligned": "inconclusive"}
    assert got["recap_jailbreak_bypass_aligned"].our_value == pytest.approx(9 / 26)
    assert "Prefix-Probing 0.784" in got["recap_t3_order_aligned"].reason     # above DSP 0.267: the failing step


def test_order_each_way_on_pipeline_rows():
    """Contradicted by Prefix-Probing above DSP (the run); reproduced once prefix-probing fails and the loop accepts
    re-attempts; inconclusive when the loop accepts nothing (RECAP − DSP + JB ≈ 0 can only stay open)."""
    ev = events()
    f = judge("recap_t3_order_aligned", table3(loop_accepts(prefix_probe_fails(ev))))
    assert f.verdict == "reproduced", f.reason
    assert f.our_value > 0.4
    f = judge("recap_t3_order_aligned", table3(loop_accepts_nothing(prefix_probe_fails(ev))))
    assert f.verdict == "inconclusive" and "RECAP − DSP + Jailbreak +0.000" in f.reason, f.reason


def test_jailbreak_gain_each_way_on_pipeline_rows():
    ev = events()
    more, d, j = refuses_more(ev)
    f = judge("recap_t3_jailbreak_gain_aligned", table3(more, d, j))
    assert f.verdict == "reproduced" and f.our_value > 0.10, f.reason
    none, d, j = jailbreak_blocked(ev)
    f = judge("recap_t3_jailbreak_gain_aligned", table3(none, d, j))
    assert f.verdict == "contradicted" and f.our_value == pytest.approx(0.0), f.reason
    f = judge("recap_t3_jailbreak_gain_aligned", table3(ev))
    assert f.verdict == "inconclusive" and f.our_value == pytest.approx(0.235, abs=0.01) and f.n_needed > f.our_n
    # a target that refuses nothing: DSP answers every event (scores what the jailbreak's outputs scored)
    calm = ev.assign(dsp=ev.dsp_jb, feedback_skipped=ev.feedback_skipped.where(ev.feedback_skipped.ne(
        "dsp_and_jailbreak_blocked")))
    no = np.zeros(len(ev), bool)
    assert judge("recap_t3_jailbreak_gain_aligned", table3(calm, no, no)).verdict == "not testable here"


def test_gain_over_dsp_each_way_on_pipeline_rows():
    ev = events()
    f = judge("recap_gain_over_dsp_aligned", table3(loop_accepts(ev)))
    assert f.verdict == "reproduced" and f.our_value > 0.10, f.reason
    flat, d, j = jailbreak_blocked(loop_accepts_nothing(ev))
    f = judge("recap_gain_over_dsp_aligned", table3(flat, d, j))
    assert f.verdict == "contradicted" and f.our_value == pytest.approx(0.0), f.reason
    f = judge("recap_gain_over_dsp_aligned", table3(ev))
    assert f.verdict == "inconclusive" and f.our_value == pytest.approx(0.237, abs=0.01)


def test_public_vs_copyrighted_each_way_on_pipeline_rows():
    ev = events()
    f = judge("recap_t3_public_vs_copyrighted_aligned", table3(weaker_on(ev, "copyrighted")))
    assert f.verdict == "reproduced" and f.our_value > 0.1, f.reason
    f = judge("recap_t3_public_vs_copyrighted_aligned", table3(weaker_on(ev, "public_domain")))
    assert f.verdict == "contradicted" and f.our_value < -0.1, f.reason
    f = judge("recap_t3_public_vs_copyrighted_aligned", table3(ev))
    assert f.verdict == "inconclusive" and f.our_value == pytest.approx(0.033, abs=0.01)


def test_jailbreak_bypass_each_way_on_pipeline_rows():
    ev = events()
    more, d, j = refuses_more(ev)
    f = judge("recap_jailbreak_bypass_aligned", table3(more, d, j))
    k = int((d & ~j & members(ev)).sum())
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(k / int((d & members(ev)).sum())), f.reason
    blocked, d, j = jailbreak_blocked(ev)
    f = judge("recap_jailbreak_bypass_aligned", table3(blocked, d, j))
    assert f.verdict == "contradicted" and f.our_value == 0.0 and f.our_n == 26, f.reason
    no = np.zeros(len(ev), bool)
    assert judge("recap_jailbreak_bypass_aligned", table3(ev, no, no)).verdict == "not testable here"


# -- the feedback loop (recap_feedback) ----------------------------------------------------------------------------
def gains_with(round1: int, round2: int) -> pd.DataFrame:
    """feedback_gains_events of the aligned target's member events, the loop accepting a re-attempt (gain 0.05 >
    min_gain) in round 1 on the first ``round1`` events it could refine and again (0.10 in all) in round 2 on the
    first ``round2`` of those (round 2 runs only after a round-1 gain: stop_on_no_gain); the others gain nothing.
    Each row's best = its round-0 best + gain, below the stop score."""
    g = real("feedback_gains_events")
    g = g[g.target == ALIGNED].copy()
    start = g[g["round"] == 0].set_index("event").best
    room = [e for e in start.index if start[e] < 0.8 and (g.split[g.event == e] == "member").all()]
    assert round2 <= round1 <= len(room)
    gain = {e: (0.05 if k < round1 else 0.0, 0.10 if k < round2 else 0.05 if k < round1 else 0.0)
            for k, e in enumerate(room)}
    for r in (1, 2):
        rows = (g["round"] == r) & g.event.isin(gain)
        g.loc[rows, "gain"] = [gain[e][r - 1] for e in g.event[rows]]
    g["best"] = g.event.map(start) + g.gain
    return g


def feedback(**tables) -> StudyResult:
    return result("recap_feedback", **tables)


def test_feedback_rules_on_the_real_run():
    g = real("feedback_gains_events")
    f = judge("recap_feedback_one_round_aligned", feedback(feedback_gains_events=g))
    assert f.verdict == "not testable here" and "only 7 of 112 events" in f.reason      # ci71
    f = judge("recap_feedback_half_unimproved_aligned", feedback(feedback_gains_events=g))
    assert f.verdict == "contradicted" and f.our_value == pytest.approx(105 / 112)


def test_one_round_each_way_on_pipeline_rows():
    """Of the 112 member events below the stop score (the 5 of release notes, never seen, left out), 40 or 60 gain in round 1 and
    so go on: 2 gaining again in round 2 is fewer than 20 %, 40 more, 20 too close to tell."""
    f = judge("recap_feedback_one_round_aligned", feedback(feedback_gains_events=gains_with(40, 2)))
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(2 / 112), f.reason
    f = judge("recap_feedback_one_round_aligned", feedback(feedback_gains_events=gains_with(60, 40)))
    assert f.verdict == "contradicted" and f.our_value == pytest.approx(40 / 112), f.reason
    f = judge("recap_feedback_one_round_aligned", feedback(feedback_gains_events=gains_with(60, 20)))
    assert f.verdict == "inconclusive" and f.our_value == pytest.approx(20 / 112), f.reason


def test_half_unimproved_each_way_on_pipeline_rows():
    f = judge("recap_feedback_half_unimproved_aligned", feedback(feedback_gains_events=gains_with(56, 0)))
    assert f.verdict == "reproduced" and f.our_value == pytest.approx(56 / 112), f.reason
    f = judge("recap_feedback_half_unimproved_aligned", feedback(feedback_gains_events=gains_with(40, 0)))
    assert f.verdict == "inconclusive" and f.our_value == pytest.approx(72 / 112), f.reason


def passages_on_unseen(per_event: float) -> StudyResult:
    """The run's book_scores with RECAP finding ``per_event`` passages per event (rounded down per book) on every
    book the aligned target never saw (held-out KJV books and licences, release notes); a 40-token passage of a
    ~50–70-token gold lifts that book's RECAP ROUGE-L to at least 0.6 (DSP + JB, DSP below it unchanged)."""
    b = real("book_scores")
    unseen = (b.target == ALIGNED) & ((b.split == "nonmember") | (b.category == "non_training")) & (b.method == "recap")
    k = np.floor(b.events[unseen] * per_event)
    b.loc[unseen, "passages_m5"] = k.astype(int)
    b.loc[unseen & (b.passages_m5 > 0), "rouge_l"] = np.maximum(b.rouge_l, 0.6)
    return feedback(book_scores=b)


def test_no_contamination_each_way_on_pipeline_rows():
    f = judge("recap_feedback_no_contamination_aligned", feedback(book_scores=real("book_scores")))
    assert f.verdict == "reproduced" and f.our_value == 0 and f.our_n == 67, f.reason   # ci71
    f = judge("recap_feedback_no_contamination_aligned", passages_on_unseen(1.0))   # one passage per event
    assert f.verdict == "contradicted" and f.our_value >= 4, f.reason
    few = real("book_scores")   # a run of 3 books per category and split (fewer than the exact tests need)
    few = few[few.groupby(["target", "category", "split", "method"], dropna=False).cumcount() < 3]
    f = judge("recap_feedback_no_contamination_aligned", feedback(book_scores=few))
    assert f.verdict == "inconclusive" and f.our_value == 0 and f.n_needed > f.our_n, f.reason
    b = real("book_scores").assign(passages_m5=0)   # no passage anywhere: no positive control
    assert judge("recap_feedback_no_contamination_aligned", feedback(book_scores=b)).verdict == "not testable here"


def filter_run(books=None, predictive: str | None = None) -> StudyResult:
    """filter_events of the run; with ``predictive`` the loop accepts a re-attempt (+0.15) on a third of the aligned
    target's events (every third event of each book) and that signal scores them high (0.9, the others 0.05), the
    other signals keep the run's values. ``books`` keeps only that many of its (target, book) pairs."""
    ev = real("filter_events")
    ev = ev[ev.target == ALIGNED].reset_index(drop=True)
    if books is not None:
        ev = ev[ev.book.isin(list(dict.fromkeys(ev.book))[:books])].reset_index(drop=True)
    if predictive:
        hit = (ev.groupby("book").cumcount() % 3 == 0).to_numpy() & (ev.dsp_jb < 0.8).to_numpy()
        ev["recap"] = np.where(hit, ev.dsp_jb + 0.15, ev.recap)
        ev[predictive] = np.where(hit, 0.9, 0.05)
    assert (ev.recap >= ev.dsp_jb - 1e-12).all()
    return feedback(filter_events=ev, filter_tradeoff=real("filter_tradeoff"))


def test_filter_hybrid_each_way_on_pipeline_rows():
    f = judge("recap_filter_hybrid_aligned", filter_run())
    assert f.verdict == "contradicted" and f.our_n == 67, f.reason        # ci71: three filters tie
    f = judge("recap_filter_hybrid_aligned", filter_run(predictive="hybrid"))
    assert f.verdict == "reproduced", f.reason
    f = judge("recap_filter_hybrid_aligned", filter_run(predictive="cosine"))
    assert f.verdict == "contradicted" and "hybrid − cosine -" in f.reason, f.reason
    f = judge("recap_filter_hybrid_aligned", filter_run(books=4, predictive="hybrid"))
    assert f.verdict == "inconclusive" and f.our_n == 4, f.reason
