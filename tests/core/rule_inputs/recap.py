"""Synthetic study results for the RECAP rules: ``INPUTS[claim_id](case)``, case "for", "against" or "unclear"
(see rule_inputs/pearl.py)."""

import numpy as np
import pandas as pd

from memlab.results import StudyResult

INPUTS = {}
TARGETS = ("t-small", "t-large")
LADDER = {"prefix": 0.10, "dsp": 0.30, "dsp_jb": 0.40, "recap": 0.55}
REVERSED = {"prefix": 0.55, "dsp": 0.40, "dsp_jb": 0.30, "recap": 0.10}
CLOSE = {"prefix": 0.30, "dsp": 0.31, "dsp_jb": 0.32, "recap": 0.33}


def inputs(claim_id):
    def register(fn):
        INPUTS[claim_id] = fn
        return fn
    return register


def books(scores: dict, *, n_books: int = 8, sd: float = 0.02, seed: int = 0) -> pd.DataFrame:
    """book_scores rows: {category: {method: mean ROUGE-L}} for every target, independent noise per book and
    method."""
    rng = np.random.default_rng(seed)
    rows = [{"target": t, "category": cat, "book": f"{cat}/{b}", "split": None, "method": m,
             "rouge_l": float(np.clip(v + rng.normal(0, sd), 0, 1)), "events": 2, "passages_m5": 0}
            for t in TARGETS for cat, by in scores.items() for b in range(n_books) for m, v in by.items()]
    return pd.DataFrame(rows)


# the settings these inputs are judged under, on top of the experiment's config (tests/core/test_rules_both_ways.py):
# 400 bootstrap resamples (conf: 1000) keep the tests fast and decide these inputs alike; passages_m5 above is the
# conf's passage_tolerance 5, and its max_rounds 2 lets the feedback rule judge
OVERRIDES = ("method.bootstrap.n_resamples=400",)


def result(tables: dict, **metrics) -> StudyResult:
    return StudyResult(tables=tables, metrics=metrics)


def _table3(case, scores=None):
    s = scores or {"for": LADDER, "against": REVERSED, "unclear": CLOSE}[case]
    n, sd = (2, 0.15) if case == "unclear" else (8, 0.02)
    refusals = pd.DataFrame([{"target": t, "category": "copyrighted", "method": m, "events": 6, "blocked": 0.5}
                             for t in TARGETS for m in ("dsp", "dsp_jb")])
    return result({"book_scores": books({"copyrighted": s}, n_books=n, sd=sd), "refusals": refusals})


inputs("recap_t3_order")(_table3)
inputs("recap_t3_jailbreak_gain")(_table3)
inputs("recap_gain_over_dsp")(_table3)


@inputs("recap_t3_public_vs_copyrighted")
def public_vs_copyrighted(case):
    pub, cop, n, sd = {"for": (0.6, 0.3, 8, 0.02), "against": (0.3, 0.6, 8, 0.02), "unclear": (0.32, 0.3, 2, 0.15)}[case]
    return result({"book_scores": books({"public_domain": {"recap": pub}, "copyrighted": {"recap": cop}},
                                        n_books=n, sd=sd)})


@inputs("recap_feedback_one_round")
def one_round(case):
    later, n = {"for": (5, 100), "against": (60, 100), "unclear": (2, 10)}[case]
    rows = []
    for e in range(n):
        rows.append({"target": "t", "event": e, "round": 1, "gain": 0.1, "split": "member"})
        if e < later:
            rows.append({"target": "t", "event": e, "round": 2, "gain": 0.2, "split": "member"})
    return result({"feedback_gains_events": pd.DataFrame(rows)})


@inputs("recap_feedback_no_contamination")
def no_contamination(case):
    nt, n, sd = {"for": (0.0, 8, 0.02), "against": (0.5, 8, 0.02), "unclear": (0.15, 2, 0.15)}[case]
    scores = {"public_domain": {"dsp_jb": 0.3, "recap": 0.5}, "non_training": {"dsp_jb": 0.1, "recap": 0.1 + nt}}
    return result({"book_scores": books(scores, n_books=n, sd=sd)})


@inputs("recap_filter_hybrid")
def filter_hybrid(case):
    n = 4 if case == "unclear" else 200
    rng = np.random.default_rng(0)
    gain = rng.uniform(0, 0.4, n)                       # what RECAP's feedback adds over DSP + JB per event
    informative = gain + rng.normal(0, 0.02, n)
    noise = rng.uniform(0, 0.4, n)
    hybrid, other = {"for": (informative, noise), "against": (noise, informative),
                     "unclear": (informative, informative + rng.normal(0, 0.05, n))}[case]
    ev = pd.DataFrame({"feedback_calls": 2, "dsp_jb": 0.3, "recap": 0.3 + gain, "hybrid": hybrid, "rouge_l": other,
                       "cosine": noise if case != "unclear" else other})
    thresholds = [0.1, 0.2, 0.3]
    tr = pd.DataFrame([{"signal": s, "threshold": t, "queries_saved": float((ev[s] < t).mean()),
                        "rouge_l_filtered": float(np.where(ev[s] >= t, ev.recap, ev.dsp_jb).mean()),
                        "rouge_l_unfiltered": float(ev.recap.mean())}
                       for s in ("hybrid", "rouge_l", "cosine") for t in thresholds])
    return result({"filter_tradeoff": tr, "filter_events": ev})
