"""Synthetic study results for the RECAP rules: ``INPUTS[claim_id](case)``, case "for", "against" or "unclear"
(see rule_inputs/pearl.py)."""

import numpy as np
import pandas as pd

from memlab.results import StudyResult

INPUTS = {}
# each claim judges the targets of its scope (method.targets.<t>.group in conf/method/recap.yaml): the claims without a
# suffix the off-the-shelf models, the "_aligned" ones the aligned tiny target
SCOPES = {"": ("SmolLM2-135M-Instruct", "Gemma-3-270M"), "_aligned": ("tiny-neox-kjv-aligned",)}
# echo: DSP's floor, echo_fb: RECAP's (what the hints alone score), below the methods when the claim holds
LADDER = {"prefix": 0.10, "dsp": 0.30, "dsp_jb": 0.40, "recap": 0.55, "echo": 0.15, "echo_fb": 0.20}
REVERSED = {"prefix": 0.55, "dsp": 0.40, "dsp_jb": 0.30, "recap": 0.10, "echo": 0.15, "echo_fb": 0.20}
CLOSE = {"prefix": 0.30, "dsp": 0.31, "dsp_jb": 0.32, "recap": 0.33, "echo": 0.30, "echo_fb": 0.32}


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


def _table3(case, targets, scores=None):
    s = scores or {"for": LADDER, "against": REVERSED, "unclear": CLOSE}[case]
    n, sd = (2, 0.15) if case == "unclear" else (8, 0.02)
    refusals = pd.DataFrame([{"target": t, "category": "copyrighted", "method": m, "events": 6, "blocked": 0.5}
                             for t in targets for m in ("dsp", "dsp_jb")])
    return result({"book_scores": books({"copyrighted": s}, targets, n_books=n, sd=sd), "refusals": refusals})


inputs("recap_t3_order")(_table3)
inputs("recap_t3_jailbreak_gain")(_table3)
inputs("recap_gain_over_dsp")(_table3)


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


@inputs("recap_feedback_no_contamination")
def no_contamination(case, targets):
    # the loop gains 0.2 on training books; on non-training books it gains ``nt``, against RECAP's floor 0.3
    nt, n, sd = {"for": (0.0, 8, 0.02), "against": (0.5, 8, 0.02), "unclear": (0.15, 2, 0.15)}[case]
    scores = {"public_domain": {"dsp_jb": 0.3, "recap": 0.5},
              "non_training": {"dsp_jb": 0.1, "recap": 0.1 + nt, "echo_fb": 0.3}}
    return result({"book_scores": books(scores, targets, n_books=n, sd=sd)})


@inputs("recap_filter_hybrid")
def filter_hybrid(case, targets):
    n = 4 if case == "unclear" else 200
    rng = np.random.default_rng(0)
    gain = rng.uniform(0, 0.4, n)                       # what RECAP's feedback adds over DSP + JB per event
    informative = gain + rng.normal(0, 0.02, n)
    noise = rng.uniform(0, 0.4, n)
    hybrid, other = {"for": (informative, noise), "against": (noise, informative),
                     "unclear": (informative, informative + rng.normal(0, 0.05, n))}[case]
    ev = pd.DataFrame({"target": [targets[i % len(targets)] for i in range(n)], "feedback_calls": 2, "dsp_jb": 0.3, "recap": 0.3 + gain, "hybrid": hybrid, "rouge_l": other,
                       "cosine": noise if case != "unclear" else other})
    thresholds = [0.1, 0.2, 0.3]
    tr = pd.DataFrame([{"signal": s, "threshold": t, "queries_saved": float((ev[s] < t).mean()),
                        "rouge_l_filtered": float(np.where(ev[s] >= t, ev.recap, ev.dsp_jb).mean()),
                        "rouge_l_unfiltered": float(ev.recap.mean())}
                       for s in ("hybrid", "rouge_l", "cosine") for t in thresholds])
    return result({"filter_tradeoff": tr, "filter_events": ev})
