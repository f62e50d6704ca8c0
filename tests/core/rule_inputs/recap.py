"""Synthetic study results for the RECAP rules: ``INPUTS[claim_id](case)``, case "for", "against" or "unclear"
(see rule_inputs/pearl.py)."""

import numpy as np
import pandas as pd

from memlab.results import StudyResult

INPUTS = {}
# each claim judges the targets of its scope (method.targets.<t>.group in conf/method/recap.yaml): the claims without a
# suffix the off-the-shelf models, the "_aligned" ones the aligned tiny target
SCOPES = {"": ("SmolLM2-135M-Instruct", "Gemma-3-270M"), "_aligned": ("tiny-neox-kjv-aligned",)}
# Table 3 as the pipeline produces it (issue 49): per book DSP + Jailbreak = DSP + a gain ≥ 0 and RECAP = DSP +
# Jailbreak + a gain ≥ 0 (RECAP ≥ DSP + JB ≥ DSP by construction); echo: DSP's floor, echo_fb: RECAP's (what the
# hints alone score). for: every step large; against: Prefix-Probing above DSP and gains of ~2 % (the sizes that
# can fail); unclear: two books a target
LADDER = {"prefix": 0.10, "dsp": 0.30, "jb_gain": 0.10, "fb_gain": 0.15, "echo": 0.15, "echo_fb": 0.20}
REVERSED = {"prefix": 0.55, "dsp": 0.30, "jb_gain": 0.005, "fb_gain": 0.005, "echo": 0.15, "echo_fb": 0.20}
CLOSE = {"prefix": 0.30, "dsp": 0.31, "jb_gain": 0.03, "fb_gain": 0.03, "echo": 0.30, "echo_fb": 0.32}


def inputs(claim_id):
    """Register ``fn(case, targets)`` for ``claim_id`` in every scope, with that scope's target names."""
    def register(fn):
        for suffix, targets in SCOPES.items():
            INPUTS[claim_id + suffix] = lambda case, fn=fn, targets=targets: fn(case, targets)
        return fn
    return register


def books(scores: dict, targets, *, n_books: int = 8, sd: float = 0.02, seed: int = 0) -> pd.DataFrame:
    """book_scores rows: {category: {method: mean ROUGE-L}} for every target, independent noise per book and
    method; 8 books per target, so a scope of one target gets as many units as each of two."""
    rng = np.random.default_rng(seed)
    rows = [{"target": t, "category": cat, "book": f"{cat}/{b}", "split": None, "method": m,
             "rouge_l": float(np.clip(v + rng.normal(0, sd), 0, 1)), "events": 2, "passages_m5": 0}
            for t in targets for cat, by in scores.items() for b in range(n_books) for m, v in by.items()]
    return pd.DataFrame(rows)


# the settings these inputs are judged under, on top of the experiment's config (tests/core/test_rules_both_ways.py):
# 400 bootstrap resamples (conf: 1000) keep the tests fast and decide these inputs alike; passages_m5 above is the
# conf's passage_tolerance 5, and its max_rounds 2 lets the feedback rule judge
OVERRIDES = ("method.bootstrap.n_resamples=400",)


def result(tables: dict, **metrics) -> StudyResult:
    return StudyResult(tables=tables, metrics=metrics)


def ladder_books(ladder: dict, targets, *, n_books: int, sd: float, seed: int = 0) -> pd.DataFrame:
    """Copyright-category book_scores the pipeline can produce: per book DSP = dsp + noise, DSP + Jailbreak = DSP +
    max(0, jb_gain + noise), RECAP = DSP + Jailbreak + max(0, fb_gain + noise) (capped at 1); Prefix-Probing and the
    echo floors independent."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in targets:
        for b in range(n_books):
            e = rng.normal(0, sd, 6)
            dsp = float(np.clip(ladder["dsp"] + e[0], 0, 1))
            jb = min(1.0, dsp + max(0.0, ladder["jb_gain"] + e[1] / 2))
            got = {"prefix": ladder["prefix"] + e[2], "dsp": dsp, "dsp_jb": jb,
                   "recap": min(1.0, jb + max(0.0, ladder["fb_gain"] + e[3] / 2)), "echo": ladder["echo"] + e[4],
                   "echo_fb": ladder["echo_fb"] + e[5]}
            rows += [{"target": t, "category": "copyrighted", "book": f"copyrighted/{b}", "split": None, "method": m,
                      "rouge_l": float(np.clip(v, 0, 1)), "events": 2, "passages_m5": 0} for m, v in got.items()]
    return pd.DataFrame(rows)


def _table3(case, targets):
    ladder = {"for": LADDER, "against": REVERSED, "unclear": CLOSE}[case]
    n, sd = (2, 0.15) if case == "unclear" else (8, 0.02)
    refusals = pd.DataFrame([{"target": t, "category": "copyrighted", "method": m, "events": 6, "blocked": 0.5}
                             for t in targets for m in ("dsp", "dsp_jb")])
    return result({"book_scores": ladder_books(ladder, targets, n_books=n, sd=sd), "refusals": refusals})


inputs("recap_t3_order")(_table3)
inputs("recap_t3_jailbreak_gain")(_table3)
inputs("recap_gain_over_dsp")(_table3)


def _broken(lower: str):
    """Sanity inputs: "for" the pipeline's own rows (every ladder case), "against" the same rows with ``lower``
    pushed below the method beneath it on one book, which the pipeline cannot produce."""
    def make(case):
        b = ladder_books(LADDER, SCOPES[""], n_books=8, sd=0.02)
        if case == "against":
            beneath = {"recap": "dsp_jb", "dsp_jb": "dsp"}[lower]
            one = (b.target == b.target.iloc[0]) & (b.book == b.book.iloc[0])
            under = float(b.loc[one & (b.method == beneath), "rouge_l"].iloc[0])
            b.loc[one & (b.method == lower), "rouge_l"] = under - 0.05
        return result({"book_scores": b})
    return make


INPUTS["recap_t3_feedback_keeps_best"] = _broken("recap")
INPUTS["recap_t3_jailbreak_keeps_dsp"] = _broken("dsp_jb")


@inputs("recap_t3_public_vs_copyrighted")
def public_vs_copyrighted(case, targets):
    pub, cop, n, sd = {"for": (0.6, 0.3, 8, 0.02), "against": (0.3, 0.6, 8, 0.02), "unclear": (0.32, 0.3, 2, 0.15)}[case]
    return result({"book_scores": books({"public_domain": {"recap": pub}, "copyrighted": {"recap": cop}}, targets,
                                        n_books=n, sd=sd)})


@inputs("recap_feedback_one_round")
def one_round(case, targets):
    later, n = {"for": (5, 100), "against": (60, 100), "unclear": (2, 10)}[case]
    rows = []
    for e in range(n):
        rows.append({"target": targets[0], "event": e, "round": 1, "gain": 0.1, "split": "member"})
        if e < later:
            rows.append({"target": targets[0], "event": e, "round": 2, "gain": 0.2, "split": "member"})
    return result({"feedback_gains_events": pd.DataFrame(rows)})


def passage_books(passages: dict, targets, *, n_books: int, seed: int = 0) -> pd.DataFrame:
    """book_scores rows with passage counts the pipeline can produce: {category: mean RECAP passages per book}, drawn
    Poisson per (target, book); DSP + Jailbreak finds at most RECAP's (the loop keeps its best attempt); at most one
    passage per event (a 40-token passage of a 50–80-token gold), so a book has as many events as passages, and a
    book with passages scores the ROUGE-L such a passage implies (≥ 0.6)."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in targets:
        for cat, mu in passages.items():
            for b in range(n_books):
                k = int(rng.poisson(mu))
                events = max(2, k)
                rows += [{"target": t, "category": cat, "book": f"{cat}/{b}", "split": None, "method": m,
                          "rouge_l": 0.6 + 0.3 * n / events if n else 0.1, "events": events, "passages_m5": n}
                         for m, n in (("dsp_jb", k // 2), ("recap", k))]
    return pd.DataFrame(rows)


@inputs("recap_feedback_no_contamination")
def no_contamination(case, targets):
    # RECAP passages per book: training books many; non-training books none (for) or ~6 each (against: more than the
    # paper's "at most one"); unclear: two books a target, too few for the exact sign-flip test to decide
    nt, n = {"for": (0.0, 8), "against": (6.0, 8), "unclear": (0.0, 2)}[case]
    return result({"book_scores": passage_books({"public_domain": 20.0, "non_training": nt}, targets, n_books=n)})


@inputs("recap_filter_hybrid")
def filter_hybrid(case, targets):
    """filter_events as the study writes them: events of (target, book) pairs, 5 per book (4 books in "unclear");
    for: the hybrid score tracks what the loop gains, the others are noise; against: the reverse."""
    n_books = 2 if case == "unclear" else 40
    n = 5 * n_books
    rng = np.random.default_rng(0)
    gain = rng.uniform(0, 0.4, n)                       # what RECAP's feedback adds over DSP + JB per event
    informative = gain + rng.normal(0, 0.02, n)
    noise = rng.uniform(0, 0.4, n)
    hybrid, other = {"for": (informative, noise), "against": (noise, informative),
                     "unclear": (informative, informative + rng.normal(0, 0.05, n))}[case]
    ev = pd.DataFrame({"target": [targets[(i // 5) % len(targets)] for i in range(n)],
                       "book": [f"public_domain/{i // 5}" for i in range(n)], "split": None, "feedback_calls": 2,
                       "recap": 0.3 + gain, "dsp_jb": 0.3, "hybrid": hybrid, "rouge_l": other,
                       "cosine": noise if case != "unclear" else other})
    thresholds = [0.1, 0.2, 0.3]
    tr = pd.DataFrame([{"signal": s, "threshold": t, "queries_saved": float((ev[s] < t).mean()),
                        "rouge_l_filtered": float(np.where(ev[s] >= t, ev.recap, ev.dsp_jb).mean()),
                        "rouge_l_unfiltered": float(ev.recap.mean())}
                       for s in ("hybrid", "rouge_l", "cosine") for t in thresholds])
    return result({"filter_tradeoff": tr, "filter_events": ev})


@inputs("recap_jailbreak_bypass")
def jailbreak_bypass(case, targets):
    """The refusals table as the pipeline writes it: DSP + Jailbreak is blocked only where DSP was (the jailbreaker
    rewrites blocked prompts only), so its blocked count never exceeds DSP's."""
    blocked, still, n = {"for": (40, 5, 50), "against": (40, 35, 50), "unclear": (4, 2, 10)}[case]
    split = "member" if "aligned" in targets[0] else "unknown"
    rows = [{"target": targets[0], "category": "copyrighted", "split": split, "method": m, "events": n,
             "blocked": k / n, "refused_n": k, "refused": k / n} for m, k in (("dsp", blocked), ("dsp_jb", still))]
    return result({"refusals": pd.DataFrame(rows)})


@inputs("recap_feedback_half_unimproved")
def half_unimproved(case, targets):
    flat, n = {"for": (50, 100), "against": (90, 100), "unclear": (5, 10)}[case]
    split = "member" if "aligned" in targets[0] else None
    return result({"feedback_gains_events": pd.DataFrame(
        [{"target": targets[0], "event": e, "round": 1, "gain": 0.0 if e < flat else 0.1, "split": split}
         for e in range(n)])})
