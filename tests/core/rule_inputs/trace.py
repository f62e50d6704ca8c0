"""Synthetic study results for the PROPME rules and tracer checks: ``INPUTS[claim_id](case)``, case "for",
"against" or "unclear" (see rule_inputs/pearl.py)."""

import numpy as np
import pandas as pd

from memlab.results import StudyResult

INPUTS = {}
TINY = "tiny-neox-kjv-m-final"   # params.tiny of trace_capability_propensity: zoo family kjv, size m


def inputs(claim_id):
    def register(fn):
        INPUTS[claim_id] = fn
        return fn
    return register


def _generations(means: dict, n: int, sd: float, seed: int = 0) -> pd.DataFrame:
    """generation_scores of the tiny model: per setting, n generations with nv_recall ≈ mean, full match when
    nv_recall > 0.5, span length 48 × nv_recall."""
    rng = np.random.default_rng(seed)
    rows = []
    for s, mu in means.items():
        nv = np.clip(mu + rng.normal(0, sd, n), 0, 1)
        rows += [{"model": TINY, "corpus": "training set", "setting": s, "i": i, "nv_recall": float(v),
                  "full_match": float(v > 0.5), "longest_span": float(48 * v)} for i, v in enumerate(nv)]
    return pd.DataFrame(rows)


def _capability(case):
    hi_lo = {"for": (0.8, 0.1, 40, 0.05), "against": (0.1, 0.8, 40, 0.05), "unclear": (0.5, 0.45, 3, 0.3)}[case]
    p, o, n, sd = hi_lo
    return StudyResult(tables={"generation_scores": _generations({"prefix": p, "generic": o, "specific": o}, n, sd)})


inputs("propme_t1_als")(_capability)
inputs("propme_capability_gap")(_capability)



@inputs("propme_recall_roughly_twice")
def roughly_twice(case):
    """Prefix NVR twice the ordinary one ("for"), seven times it ("against": far more than roughly twice), or
    three generations per setting ("unclear")."""
    p, o, n, sd = {"for": (0.6, 0.3, 60, 0.05), "against": (0.7, 0.1, 60, 0.05), "unclear": (0.6, 0.3, 3, 0.3)}[case]
    return StudyResult(tables={"generation_scores": _generations({"prefix": p, "generic": o, "specific": o}, n, sd)})

@inputs("propme_prompt_overlap")
def prompt_overlap(case):
    """prompt_scores as the study writes them: per template prompt of the tiny model its nv_recall against the
    training set (written prompts share words, never a verbatim match) and prefix prompts, matched in full."""
    g, sp, n, sd = {"for": (0.05, 0.3, 40, 0.05), "against": (0.3, 0.05, 40, 0.05), "unclear": (0.1, 0.15, 3, 0.1)}[case]
    rng = np.random.default_rng(0)
    rows = [{"model": TINY, "corpus": "training set", "setting": s, "i": i,
             "nv_recall": float(np.clip(mu + rng.normal(0, sd), 0, 1)), "full_match": 0.0}
            for s, mu in (("generic", g), ("specific", sp)) for i in range(n)]
    rows += [{"model": TINY, "corpus": "training set", "setting": "prefix", "i": i, "nv_recall": 1.0,
              "full_match": 1.0} for i in range(n)]
    return StudyResult(tables={"prompt_scores": pd.DataFrame(rows)})


@inputs("propme_prefix_prompts_in_corpus")
def prefix_prompts_in_corpus(case):
    """prompt_overlap rows: prefix prompts all matched verbatim ("for") or one of 20 missed by the tracer
    ("against": what a broken tracer or a lossy decode of the prompt's tokens would give)."""
    miss = {"for": 0, "against": 1}[case]
    rows = [{"model": m, "corpus": c, "setting": s, "prompts": 20, "avg_nv_recall": v,
             "verbatim_matched_fraction": f}
            for m, c in ((TINY, "training set"), ("smollm2-135m-instruct", "kjv"))
            for s, v, f in (("generic", 0.03, 0.0), ("specific", 0.05, 0.0),
                            ("prefix", 0.99, (20 - miss) / 20 if m == TINY else 1.0))]
    return StudyResult(tables={"prompt_overlap": pd.DataFrame(rows)})


def _stages(means: dict, n: int, sd: float, shared: bool) -> pd.DataFrame:
    """generation_scores of prefix prompts: {corpus: [mean per stage]}; ``shared`` noise is the same per prompt at
    every stage (paired differences without noise)."""
    rng = np.random.default_rng(0)
    rows = []
    for corpus, ms in means.items():
        base = rng.normal(0, sd, n)
        for k, mu in enumerate(ms):
            noise = base if shared else rng.normal(0, sd, n)
            rows += [{"corpus": corpus, "stage": f"stage{k}", "setting": "prefix", "i": i,
                      "nv_recall": float(np.clip(mu + e, 0, 1)), "full_match": 0.0, "longest_span": 1.0}
                     for i, e in enumerate(noise)]
    return pd.DataFrame(rows)


@inputs("propme_stages_parent_drop")
def parent_drop(case):
    a, n, sd = {"for": ([0.8, 0.3, 0.3, 0.3], 40, 0.05), "against": ([0.3, 0.8, 0.8, 0.8], 40, 0.05),
                "unclear": ([0.5, 0.45, 0.45, 0.45], 3, 0.3)}[case]
    return StudyResult(tables={"generation_scores": _stages({"A": a, "B": [0.1] * 4}, n, sd, shared=False)})


@inputs("propme_stages_stable")
def stable(case):
    b, n, sd, shared = {"for": ([0.1, 0.5, 0.5, 0.5], 50, 0.1, True), "against": ([0.1, 0.2, 0.45, 0.7], 50, 0.02, True),
                        "unclear": ([0.1, 0.5, 0.5, 0.55], 4, 0.2, False)}[case]
    return StudyResult(tables={"generation_scores": _stages({"A": [0.8, 0.4, 0.4, 0.4], "B": b}, n, sd, shared)})


def _validation(case):
    q = pd.DataFrame([{"corpus": "a", "backend": "sa", "doc_id": f"a/{d}", "query_type": qt, "retrieved": True,
                       "exact_match": True, "passed": True} for d in range(25) for qt in ("full", "partial_start")])
    false = {"for": 0, "against": 5}[case]
    neg = pd.DataFrame([{"corpus": "a", "backend": "sa", "doc_id": f"h/{i}", "query_type": "full",
                         "false_exact_match": i < false} for i in range(100)])
    return StudyResult(tables={"validation_queries": q, "negative_control_queries": neg})


inputs("propme_t5_pass_rate")(_validation)
inputs("propme_t5_retrieval")(_validation)
